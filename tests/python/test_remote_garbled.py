"""Remote data: an answer garbled on a reused connection (bytes where the
status line should be: the tail of an earlier, over-long body) is tried
again on a new connection, in the reads and in create alike."""

import pytest

from remote_servers import FaultProxy
from test_remote import aws, data, read_all, reference, s3, web  # noqa: F401 (fixtures)


def garble_every(k, only_get=True):
    def plan(n, method, path):
        if only_get and (method != "GET" or "list-type" in path):
            return "ok"
        return "garble" if n % k == 0 else "ok"
    return plan


def test_a_garbled_answer_is_tried_again_on_a_new_connection(aws, s3, tmp_path, reference):
    read_all("s3://bkt/ds/", cache_dir=str(tmp_path), remote_cache=False)  # indexed
    proxy = FaultProxy(s3.port, garble_every(4))
    aws.setenv("AWS_ENDPOINT_URL", proxy.url)
    try:
        got, rs, _ = read_all("s3://bkt/ds/", cache_dir=str(tmp_path), remote_cache=False,
                              on_error="fail")
    finally:
        proxy.close()
    assert proxy.faults.get("garble", 0) > 0
    assert got == reference
    assert rs["failed"] == 0 and rs["retries"] >= proxy.faults["garble"], rs


@pytest.mark.parametrize("cache", [False, True])
def test_garbled_answers_during_create_are_tried_again(web, data, tmp_path, reference, cache):
    _, names = data
    proxy = FaultProxy(web.port, garble_every(3, only_get=False))
    try:
        url = "%s/train-{000000..%06d}.tar" % (proxy.url, len(names) - 1)
        got, rs, _ = read_all(url, cache_dir=str(tmp_path), remote_cache=cache,
                              index_cache=False, on_error="skip")
    finally:
        proxy.close()
    assert proxy.faults.get("garble", 0) > 0
    assert got == reference and rs["failed"] == 0, rs
