"""Many shards over HTTP: HTTP has no listing, so a loader asks each shard's
size and ETag with a HEAD at create, every create (the index cache is keyed
by them).  They go many at once on one multi handle (the 16 index threads'
blocking HEADs took 10^5 shards about 2 minutes at 20 ms a request); one that
fails is tried again by the index threads, with the usual retries and
messages."""

import io
import os
import tarfile

import pytest

import stoker
from remote_servers import FaultProxy, Nginx
from test_remote import read_all

NSHARDS = 40  # more than the 16 index threads could ask at once


@pytest.fixture(scope="module")
def many(tmp_path_factory):
    """NSHARDS small shards of two samples each, served by nginx."""
    d = tmp_path_factory.mktemp("many")
    root = d / "shards"
    root.mkdir()
    for i in range(NSHARDS):
        with tarfile.open(root / ("s-%06d.tar" % i), "w") as t:
            for k in range(2):
                for ext, body in (("bin", os.urandom(700 + 13 * i + k)), ("cls", b"%d" % k)):
                    ti = tarfile.TarInfo("%06d_%d.%s" % (i, k, ext))
                    ti.size = len(body)
                    t.addfile(ti, io.BytesIO(body))
    try:
        srv = Nginx(str(root), str(d / "web"))
    except FileNotFoundError as e:
        pytest.skip("no HTTP server to test against: %s" % e)
    want, _, _ = read_all(str(root), shuffle=False)
    assert len(want) == 2 * NSHARDS
    yield srv, want
    srv.close()


def url(port):
    return "http://127.0.0.1:%d/s-{000000..%06d}.tar" % (port, NSHARDS - 1)


def heads(proxy):
    with proxy.lock:
        return sorted(p for m, p, _ in proxy.log if m == "HEAD")


def test_heads_go_many_at_once_one_per_shard(many, tmp_path):
    srv, want = many
    proxy = FaultProxy(srv.port)
    try:
        # the index cached (for this URL: the proxy's port is in it)
        read_all(url(proxy.port), cache_dir=str(tmp_path), remote_cache=False)
        with proxy.lock:
            del proxy.log[:]
        proxy.latency_s = 0.3
        with stoker.Loader(url(proxy.port), batch_size=8, cache_dir=str(tmp_path),
                           remote_cache=False, quiet=True):
            # a HEAD per shard and no other request of the index's
            assert heads(proxy) == ["/s-%06d.tar" % i for i in range(NSHARDS)]
            assert all(m == "HEAD" or ".tar" in p for m, p, _ in proxy.log)
        # more in flight than the index threads: the multi handle's
        assert proxy.waiting_max > 16, proxy.waiting_max
        got, rs, seen = read_all(url(proxy.port), cache_dir=str(tmp_path),
                                 remote_cache=False)
    finally:
        proxy.close()
    assert got == want and set(seen.values()) == {1}
    assert rs["failed"] == 0 and rs["retries"] == 0


def head_faults(n, method, path):
    """The first HEAD of every third shard fails (SlowDown, 500, a reset in
    turn); the second passes."""
    if method != "HEAD" or not path.endswith(".tar"):
        return "ok"
    i = int(path[-10:-4])
    if i % 3 or head_faults.seen.get(path):
        return "ok"
    head_faults.seen[path] = True
    return ("slowdown", "500", "reset")[(i // 3) % 3]


def test_a_head_that_fails_is_tried_again(many, tmp_path):
    srv, want = many
    head_faults.seen = {}
    proxy = FaultProxy(srv.port, head_faults)
    try:
        got, rs, seen = read_all(url(proxy.port), cache_dir=str(tmp_path),
                                 remote_cache=False, on_error="fail")
    finally:
        proxy.close()
    assert got == want and set(seen.values()) == {1}
    faulted = ["/s-%06d.tar" % i for i in range(0, NSHARDS, 3)]
    # every faulted shard asked twice, the others once
    hs = heads(proxy)
    assert all(hs.count(p) == (2 if p in faulted else 1) for p in set(hs)), hs
    assert sum(proxy.faults.get(f, 0) for f in ("slowdown", "500", "reset")) == len(faulted)
    # (libcurl may try a reset again itself, uncounted, on a reused connection)
    assert rs["retries"] >= proxy.faults["slowdown"] + proxy.faults["500"] > 0
    assert rs["failed"] == 0
