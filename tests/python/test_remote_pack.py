"""`stoker pack DIR s3://bucket/prefix/`: shards uploaded to a real S3 server
(SeaweedFS on loopback) with the index beside each one, and loaders that
take that index instead of reading the shards' tar headers, once it names
the shard's current size and ETag (a stale or damaged one is said and not
used).  Errors of the upload name the URL and the store's reason, never the
secret; a failed PUT is retried, then named."""

import json
import os
import subprocess

import pytest

import stoker
from remote_servers import SECRET_KEY, FaultProxy
from test_remote import aws, data, read_all, reference, s3  # noqa: F401 (fixtures)


def pack(data, url, tmp_path, *extra, env=None):
    d, _ = data
    from conftest import stoker_cli
    stage = tmp_path / "stage"
    stage.mkdir(exist_ok=True)
    r = subprocess.run([stoker_cli(), "pack", str(d / "img"), url, "--shard-size", "1MiB",
                        "--stage", str(stage), "--json"] + list(extra),
                       capture_output=True, text=True, env=env)
    # nothing stays staged, whatever happened
    assert os.listdir(stage) == [], os.listdir(stage)
    return r


def listing(s3, bucket, prefix):
    q = "list-type=2&prefix=" + prefix.replace("/", "%2F")
    xml = s3.request("GET", "/" + bucket, query=q).decode()
    return sorted(k.split("</Key>")[0][len(prefix):] for k in xml.split("<Key>")[1:])


@pytest.fixture(scope="module")
def packed(data, s3, tmp_path_factory):
    """The dataset packed straight into s3://bkt/packed/."""
    env = dict(os.environ, AWS_ACCESS_KEY_ID="AKIDSTOKERTEST", AWS_SECRET_ACCESS_KEY=SECRET_KEY,
               AWS_ENDPOINT_URL=s3.endpoint,
               AWS_SHARED_CREDENTIALS_FILE="/nonexistent", AWS_CONFIG_FILE="/nonexistent")
    r = pack(data, "s3://bkt/packed/", tmp_path_factory.mktemp("pk"), env=env)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_pack_uploads_the_shards_and_an_index_beside_each(data, s3, packed):
    d, names = data
    assert packed["out"] == "s3://bkt/packed" and packed["index_beside"] is True
    assert packed["shards"] == len(names)
    keys = listing(s3, "bkt", "packed/")
    assert keys == sorted(["classes.txt"] + names + [n + ".stoker-index" for n in names])
    # the same bytes as the same folder packed to local disk
    for n in names:
        with open(d / "shards" / n, "rb") as f:
            assert s3.request("GET", "/bkt/packed/" + n) == f.read(), n
    with open(d / "shards" / "classes.txt", "rb") as f:
        assert s3.request("GET", "/bkt/packed/classes.txt") == f.read()


def tar_reads(proxy, data):
    """GETs of a shard's tar headers: the index build reads 1 MiB windows
    from the first byte (the whole shard when it is smaller), and no sample
    of these spans that (the loader's first batches may be in flight)."""
    d, _ = data
    with proxy.lock:
        ranges = list(proxy.ranges)
    out = []
    for m, p, r in ranges:
        if m != "GET" or ".tar?" in p or not p.endswith(".tar"):
            continue
        first = min(1 << 20, os.path.getsize(d / "shards" / os.path.basename(p)))
        if r is None or r == "bytes=0-%d" % (first - 1):
            out.append(p)
    return out


def test_a_loader_takes_the_index_beside_the_shards(aws, tmp_path, s3, data, packed, reference):
    proxy = FaultProxy(s3.port)
    try:
        aws.setenv("AWS_ENDPOINT_URL", proxy.url)
        with stoker.Loader("s3://bkt/packed/", batch_size=8, cache_dir=str(tmp_path / "a"),
                           remote_cache=False, quiet=True) as l:
            # indexed without reading a byte of any shard: the listing, then the indexes
            assert tar_reads(proxy, data) == []
            assert sum(1 for m, p, _ in proxy.log if p.endswith(".stoker-index")) == \
                packed["shards"]
        # the same shards without indexes beside them: their headers are read
        with proxy.lock:
            del proxy.log[:], proxy.ranges[:]
        with stoker.Loader("s3://bkt/ds/", batch_size=8, cache_dir=str(tmp_path / "b"),
                           remote_cache=False, quiet=True):
            assert len(tar_reads(proxy, data)) >= packed["shards"]
    finally:
        proxy.close()
    aws.setenv("AWS_ENDPOINT_URL", s3.endpoint)
    got, _, seen = read_all("s3://bkt/packed/", cache_dir=str(tmp_path / "c"),
                            remote_cache=False, seed=5)
    assert got == reference and set(seen.values()) == {1}


def test_a_stale_index_beside_a_shard_is_not_trusted(aws, tmp_path, s3, data, capfd):
    d, names = data
    env = dict(os.environ)
    r = pack(data, "s3://bkt/stale/", tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    # the first shard replaced by another's bytes (as a copy tool would): its index is stale
    with open(d / "shards" / names[1], "rb") as f:
        s3.put("bkt", "stale/" + names[0], f.read())
    local = tmp_path / "local"
    local.mkdir()
    for i, n in enumerate(names):
        os.link(d / "shards" / names[1 if i == 0 else i], local / n)
    want, _, _ = read_all(str(local), shuffle=False)
    capfd.readouterr()
    got, _, _ = read_all("s3://bkt/stale/", cache_dir=str(tmp_path / "c"), remote_cache=False,
                         shuffle=False, quiet=False)
    assert got == want
    err = capfd.readouterr().err
    assert names[0] + ".stoker-index: not used" in err and "ETag" in err


def test_a_damaged_index_beside_a_shard_is_not_used(aws, tmp_path, s3, data, reference, capfd):
    _, names = data
    r = pack(data, "s3://bkt/dmg/", tmp_path, env=dict(os.environ))
    assert r.returncode == 0, r.stderr
    good = s3.request("GET", "/bkt/dmg/%s.stoker-index" % names[2])
    s3.put("bkt", "dmg/%s.stoker-index" % names[2], good[:-8] + b"\xff" * 8)
    capfd.readouterr()
    got, _, _ = read_all("s3://bkt/dmg/", cache_dir=str(tmp_path / "c"), remote_cache=False,
                         quiet=False)
    assert got == reference
    err = capfd.readouterr().err
    assert names[2] + ".stoker-index: not used (damaged" in err


def test_pack_errors_name_the_url_and_reason_never_the_secret(aws, tmp_path, data):
    env = dict(os.environ, AWS_SECRET_ACCESS_KEY="not-" + SECRET_KEY)
    r = pack(data, "s3://bkt/wrong/", tmp_path, env=env)
    assert r.returncode == 1
    assert "s3://bkt/wrong/" in r.stderr and "SignatureDoesNotMatch" in r.stderr
    assert "environment (AWS_ACCESS_KEY_ID ****" in r.stderr
    assert SECRET_KEY not in r.stdout + r.stderr
    r = pack(data, "s3://no-such-bucket/x/", tmp_path, env=dict(os.environ))
    assert r.returncode == 1 and "s3://no-such-bucket/x/" in r.stderr
    assert "NoSuchBucket" in r.stderr
    # anonymous: the public bucket may be listed, not written: the PUT's refusal, named
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_ACCESS") and
           not k.startswith("AWS_SECRET")}
    r = pack(data, "s3://pub/anon/", tmp_path, env=env)
    assert r.returncode == 1
    assert "s3://pub/anon/train-000000.tar" in r.stderr and "403" in r.stderr
    assert "anonymous" in r.stderr
    for bad in ("http://127.0.0.1:1/x/", "s3://bkt/x/one.tar"):
        r = pack(data, bad, tmp_path, env=dict(os.environ))
        assert r.returncode == 1 and bad in r.stderr


def test_a_failed_put_is_retried_then_named(aws, tmp_path, s3, data):
    _, names = data
    fails = {"n": 0}

    def plan(n, method, path):
        if method == "PUT" and path.endswith(names[1]) and fails["n"] < 2:
            fails["n"] += 1
            return "500"
        return "ok"

    proxy = FaultProxy(s3.port, plan)
    try:
        aws.setenv("AWS_ENDPOINT_URL", proxy.url)
        r = pack(data, "s3://bkt/retried/", tmp_path, env=dict(os.environ))
        assert r.returncode == 0, r.stderr
        assert proxy.faults.get("500") == 2
        with open(data[0] / "shards" / names[1], "rb") as f:
            assert s3.request("GET", "/bkt/retried/" + names[1]) == f.read()
        # failing for good: after the tries, the shard's URL and the reason
        proxy.plan = lambda n, method, path: "500" if method == "PUT" else "ok"
        aws.setenv("STOKER_REMOTE_TRIES", "2")
        r = pack(data, "s3://bkt/failed/", tmp_path, env=dict(os.environ))
        assert r.returncode == 1
        assert "s3://bkt/failed/%s: HTTP 500, after 2 tries" % names[0] in r.stderr
    finally:
        proxy.close()
