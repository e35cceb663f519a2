"""Remote errors that say what a user needs to act: the endpoint that
refused the connection, the host that did not resolve, where a redirect
pointed (followed, over HTTP), the region S3's PermanentRedirect names, a
--cache-dir that cannot be made, and a list of URLs whose first line is a
local path.  And s3:// keys with a space, a '+', non-ASCII and every
reserved character of RFC 3986, in the prefix and in the shards' names:
read and packed, each key encoded the way SigV4 signs it (a '+' sent as is
was a SignatureDoesNotMatch that looked like bad credentials)."""

import os

import pytest

import stoker
from remote_servers import FaultProxy, free_port
from test_remote import aws, data, read_all, reference, s3, web  # noqa: F401 (fixtures)
from test_remote_pack import pack


def test_a_cache_dir_that_cannot_be_made_is_said(web, data, tmp_path, capfd):
    _, names = data
    (tmp_path / "file").write_text("not a folder")
    bad = tmp_path / "file" / "cache"
    url = "%s/%s" % (web.url, names[0])
    with stoker.Loader(url, batch_size=8, cache_dir=str(bad)) as l:
        assert not l.remote_stats()["cache_on"]
    err = capfd.readouterr().err
    assert str(bad) in err and "Not a directory" in err, err
    # a folder that can be made is made and used
    ok = tmp_path / "new" / "cache"
    with stoker.Loader(url, batch_size=8, cache_dir=str(ok), quiet=True) as l:
        assert l.remote_stats()["cache_on"]


def expect_error(path, *want, **kw):
    kw.setdefault("remote_retry_time", "300ms")
    with pytest.raises(stoker.Error) as e:
        read_all(path, remote_cache=False, **kw)
    for w in want:
        assert w in str(e.value), str(e.value)
    return str(e.value)


def test_a_refused_connection_names_the_endpoint(aws, tmp_path):
    port = free_port()
    aws.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:%d" % port)
    expect_error("s3://bkt/ds/", "s3://bkt/ds", "Couldn't connect",
                 "http://127.0.0.1:%d" % port, cache_dir=str(tmp_path))


def test_a_server_that_never_answered_is_said_at_once(aws, tmp_path):
    """A wrong endpoint (nothing listens, or no such host) fails create at
    once under the default retry time (60 s): riding out an outage is for a
    server that answered before, not for a typo."""
    import time
    port = free_port()
    aws.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:%d" % port)
    t0 = time.monotonic()
    with pytest.raises(stoker.Error) as e:
        read_all("s3://bkt/ds/", remote_cache=False, cache_dir=str(tmp_path))
    assert time.monotonic() - t0 < 15, "a refused endpoint took the whole retry time"
    assert "never answered" in str(e.value) and "127.0.0.1:%d" % port in str(e.value), \
        str(e.value)


def test_a_host_that_does_not_resolve_is_named(aws, tmp_path):
    aws.setenv("AWS_ENDPOINT_URL", "http://no-such-host.invalid:9000")
    expect_error("s3://bkt/ds/", "resolve", "no-such-host.invalid", cache_dir=str(tmp_path),
                 remote_connect_timeout="2s")


def test_an_http_redirect_is_followed(web, data, tmp_path, reference):
    _, names = data
    proxy = FaultProxy(web.port, lambda n, method, path: "redirect")
    try:
        url = "%s/train-{000000..%06d}.tar" % (proxy.url, len(names) - 1)
        got, rs, _ = read_all(url, cache_dir=str(tmp_path), remote_cache=False,
                              on_error="fail")
    finally:
        proxy.close()
    assert proxy.faults.get("redirect", 0) > 0
    assert got == reference and rs["failed"] == 0


def test_an_s3_redirect_names_where_it_points(aws, s3, tmp_path):
    read_all("s3://bkt/ds/", cache_dir=str(tmp_path), remote_cache=False)  # indexed
    data_gets = lambda n, method, path: "redirect" if method == "GET" and "list-type" not in \
        path else "ok"
    proxy = FaultProxy(s3.port, data_gets)
    aws.setenv("AWS_ENDPOINT_URL", proxy.url)
    try:
        expect_error("s3://bkt/ds/", "HTTP 307 to http://127.0.0.1:%d/bkt/ds/train-" % s3.port,
                     cache_dir=str(tmp_path), on_error="fail")
    finally:
        proxy.close()


def test_s3_permanent_redirect_names_the_region(aws, s3, tmp_path):
    proxy = FaultProxy(s3.port, lambda n, method, path: "moved")
    aws.setenv("AWS_ENDPOINT_URL", proxy.url)
    try:
        expect_error("s3://bkt/ds/", "s3://bkt/ds", "PermanentRedirect",
                     "the bucket is in region eu-west-1", "AWS_REGION=eu-west-1",
                     cache_dir=str(tmp_path))
    finally:
        proxy.close()


def test_a_list_whose_first_line_is_a_local_path_names_it(web, data, tmp_path):
    _, names = data
    lst = tmp_path / "mixed.list"
    lst.write_text("shards/%s\n%s/%s\n" % (names[0], web.url, names[1]))
    expect_error(str(lst), "mixed.list:1:", "shards/%s" % names[0], "is not a shard URL",
                 cache_dir=str(tmp_path))


# every reserved character (RFC 3986: gen-delims and sub-delims), '%', a
# space, '+' and non-ASCII; '?', '*' and '[' stay out of the last element,
# where they would make a pattern
PREFIX = "we ird+:@!$&'()*,;=[]?#%\u00e9/sub dir/"


def test_a_prefix_and_names_with_reserved_characters_are_read(aws, s3, data, tmp_path,
                                                             reference):
    d, names = data
    s3.make_bucket("keys")
    for n in names:
        with open(d / "shards" / n, "rb") as f:
            s3.put("keys", PREFIX + "a+b c=" + n, f.read())
    got, rs, seen = read_all("s3://keys/" + PREFIX, cache_dir=str(tmp_path), seed=2)
    assert got == reference and set(seen.values()) == {1}
    assert rs["failed"] == 0


def test_pack_to_a_prefix_with_reserved_characters(aws, s3, data, tmp_path, reference):
    url = "s3://keys/packed " + PREFIX
    r = pack(data, url, tmp_path, env=dict(os.environ))
    assert r.returncode == 0, r.stderr
    got, rs, _ = read_all(url, cache_dir=str(tmp_path), remote_cache=False)
    assert sorted(got.values()) == sorted(reference.values())
