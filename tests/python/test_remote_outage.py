"""Remote data through passing failures.  An outage (a server failing for
seconds, then back): a request is tried again for a time
(remote_retry_time), not a count of tries, honouring the server's
Retry-After; the reads waiting meanwhile are counted (remote stats, the
verdict); no sample is lost.  An answer garbled on a reused connection
(bytes where the status line should be: the tail of an earlier, over-long
body) is tried again on a new connection, in the reads and in create."""

import threading
import time

import pytest

import stoker
from remote_servers import FaultProxy
from test_remote import aws, data, read_all, reference, s3, web  # noqa: F401 (fixtures)


def outage(seconds, fate="500"):
    """A plan: data GETs fail for `seconds` from the first one, then pass."""
    start = []

    def plan(n, method, path):
        if method != "GET" or "list-type" in path:
            return "ok"
        if not start:
            start.append(time.monotonic())
        return fate if time.monotonic() - start[0] < seconds else "ok"
    return plan


def test_an_outage_within_the_retry_time_loses_no_sample(aws, s3, tmp_path, reference):
    read_all("s3://bkt/ds/", cache_dir=str(tmp_path), remote_cache=False)  # indexed
    # 3.5 s down: longer than six tries' backoff (at most 3.1 s) took
    proxy = FaultProxy(s3.port, outage(3.5))
    aws.setenv("AWS_ENDPOINT_URL", proxy.url)
    out, waiting, verdict_waiting = {}, [0], [0]
    try:
        with stoker.Loader("s3://bkt/ds/", batch_size=8, cache_dir=str(tmp_path),
                           remote_cache=False, quiet=True, on_error="fail",
                           remote_retry_time="10s") as l:
            stop = threading.Event()

            def watch():  # what a monitoring thread sees during the outage
                while not stop.is_set():
                    waiting[0] = max(waiting[0], l.remote_stats()["retrying"])
                    verdict_waiting[0] = max(verdict_waiting[0],
                                             l.diagnose(1.0)["remote_retrying"])
                    time.sleep(0.05)
            t = threading.Thread(target=watch)
            t.start()
            try:
                for data, offsets, sizes, labels, indices in l:
                    for k in range(len(indices)):
                        o, n = int(offsets[k]), int(sizes[k])
                        out[int(indices[k])] = (bytes(data[o:o + n].numpy()), int(labels[k]))
            finally:
                stop.set()
                t.join()
            rs = l.remote_stats()
    finally:
        proxy.close()
    assert proxy.faults.get("500", 0) > 0
    assert out == reference
    assert rs["failed"] == 0 and rs["retries"] >= proxy.faults["500"] and rs["retrying"] == 0
    assert waiting[0] > 0 and verdict_waiting[0] > 0


def test_an_outage_past_the_retry_time_fails_by_the_policy(aws, s3, tmp_path):
    read_all("s3://bkt/ds/", cache_dir=str(tmp_path), remote_cache=False)
    proxy = FaultProxy(s3.port, outage(3600))
    aws.setenv("AWS_ENDPOINT_URL", proxy.url)
    try:
        with pytest.raises(stoker.Error) as e:
            read_all("s3://bkt/ds/", cache_dir=str(tmp_path), remote_cache=False,
                     on_error="fail", remote_retry_time="500ms")
    finally:
        proxy.close()
    assert "s3://bkt/ds/train-" in str(e.value) and "HTTP 500" in str(e.value), str(e.value)


def test_retry_after_is_honoured(aws, s3, tmp_path, reference):
    read_all("s3://bkt/ds/", cache_dir=str(tmp_path), remote_cache=False)
    proxy = FaultProxy(s3.port, outage(0.2, "slowdown"), retry_after=2)
    aws.setenv("AWS_ENDPOINT_URL", proxy.url)
    try:
        got, rs, _ = read_all("s3://bkt/ds/", cache_dir=str(tmp_path), remote_cache=False,
                              on_error="fail", remote_retry_time="10s")
    finally:
        proxy.close()
    assert got == reference and proxy.faults.get("slowdown", 0) > 0
    # each request refused was asked again no sooner than the 2 s it was told
    fates = [f for _, _, f in proxy.log]
    for i, f in enumerate(fates):
        if f != "slowdown":
            continue
        again = [j for j in range(i + 1, len(fates)) if proxy.ranges[j] == proxy.ranges[i]]
        assert again, proxy.ranges[i]
        assert proxy.when[again[0]] - proxy.when[i] >= 1.9, (proxy.ranges[i], fates)


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
