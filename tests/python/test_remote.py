"""Remote data: tar shards in an S3-compatible store (SeaweedFS's gateway, a
real server on loopback) and behind plain HTTP (nginx), read by stoker's
libcurl transport.  Every sample of an epoch exactly once with the bytes and
labels of the same shards read from local disk; credentials the AWS way and
errors that name the URL and the credential source (never the secret);
faults from a proxy (SlowDown, 500, resets, truncated bodies, a dead
server) retried, counted and never delivered; the local cache serving a
second run, bounded, and never serving what no complete record covers."""

import os
import struct
import subprocess

import pytest

import stoker
from conftest import stoker_cli
from remote_servers import ACCESS_KEY, SECRET_KEY, FaultProxy, Nginx, SeaweedS3

NSHARDS_MIN = 4


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """A JPEG dataset packed into shards on local disk."""
    cli = stoker_cli()
    if not cli:
        pytest.skip("the stoker CLI (stoker gen, stoker pack) is not built")
    d = tmp_path_factory.mktemp("remote")
    subprocess.run([cli, "gen", "-n", "96", "-c", "3", "-T", "2", str(d / "img")], check=True,
                   stdout=subprocess.DEVNULL)
    subprocess.run([cli, "pack", str(d / "img"), str(d / "shards"), "--shard-size", "1MiB"],
                   check=True, stdout=subprocess.DEVNULL)
    names = sorted(n for n in os.listdir(d / "shards") if n.endswith(".tar"))
    assert len(names) >= NSHARDS_MIN, names
    return d, names


@pytest.fixture(scope="module")
def s3(data, tmp_path_factory):
    d, _ = data
    try:
        srv = SeaweedS3(str(tmp_path_factory.mktemp("s3srv")))
    except FileNotFoundError as e:
        pytest.skip("no S3 server to test against: %s" % e)
    srv.upload_dir("bkt", "ds/", str(d / "shards"))
    srv.upload_dir("pub", "ds/", str(d / "shards"))
    yield srv
    srv.close()


@pytest.fixture(scope="module")
def web(data, tmp_path_factory):
    d, _ = data
    try:
        srv = Nginx(str(d / "shards"), str(tmp_path_factory.mktemp("web")))
    except FileNotFoundError as e:
        pytest.skip("no HTTP server to test against: %s" % e)
    yield srv
    srv.close()


@pytest.fixture
def aws(monkeypatch, tmp_path, s3):
    """The environment of a user with keys in AWS_* and a custom endpoint;
    no credentials files of the machine's."""
    for k in list(os.environ):
        if k.startswith("AWS_") or k.startswith("STOKER_REMOTE"):
            monkeypatch.delenv(k)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3.endpoint)
    return monkeypatch


def read_all(path, **kw):
    """{dataset index: (bytes, label)} of one epoch, the loader's remote
    stats, and how many times each index came."""
    kw.setdefault("quiet", True)
    out, seen = {}, {}
    with stoker.Loader(path, batch_size=8, **kw) as l:
        for data, offsets, sizes, labels, indices in l:
            for k in range(len(indices)):
                i = int(indices[k])
                o, n = int(offsets[k]), int(sizes[k])
                out[i] = (bytes(data[o:o + n].numpy()), int(labels[k]))
                seen[i] = seen.get(i, 0) + 1
        rs = l.remote_stats()
    return out, rs, seen


@pytest.fixture(scope="module")
def reference(data):
    d, _ = data
    out, rs, _ = read_all(str(d / "shards"), shuffle=False)
    assert rs is None  # local data: no remote counters
    return out


def no_secret(*texts):
    for t in texts:
        assert SECRET_KEY not in str(t)


@pytest.mark.parametrize("form", ["s3://bkt/ds/", "s3://bkt/ds", "s3://bkt/ds/*.tar",
                                  "s3://bkt/ds/train-{000000..%06d}.tar"])
def test_s3_every_sample_once_with_local_bytes(aws, tmp_path, data, reference, form):
    _, names = data
    url = form % (len(names) - 1) if "%" in form else form
    got, rs, seen = read_all(url, cache_dir=str(tmp_path), remote_cache=False, seed=3)
    assert got == reference
    assert set(seen.values()) == {1}
    assert rs["root"] == "s3://bkt/ds"
    assert rs["requests"] > 0 and rs["bytes"] > 0 and rs["failed"] == 0
    assert rs["credentials"].startswith("environment (AWS_ACCESS_KEY_ID ****")
    assert ACCESS_KEY not in rs["credentials"]
    no_secret(rs)


def test_http_brace_pattern_from_nginx(web, data, reference, tmp_path):
    _, names = data
    url = "%s/train-{000000..%06d}.tar" % (web.url, len(names) - 1)
    got, rs, seen = read_all(url, cache_dir=str(tmp_path), remote_cache=False)
    assert got == reference
    assert set(seen.values()) == {1}
    assert rs["credentials"].startswith("none")


def test_http_missing_shard_is_named(web, data, tmp_path):
    _, names = data
    url = "%s/train-{000000..%06d}.tar" % (web.url, len(names))  # one past the last
    with pytest.raises(stoker.Error) as e:
        read_all(url, cache_dir=str(tmp_path), on_error="fail")
    assert "train-%06d.tar" % len(names) in str(e.value) and "404" in str(e.value)


def order_of(path, **kw):
    """The (index, label, bytes) sequence of one epoch, in delivery order."""
    out = []
    with stoker.Loader(path, batch_size=8, quiet=True, **kw) as l:
        for data, offsets, sizes, labels, indices in l:
            for k in range(len(indices)):
                o, n = int(offsets[k]), int(sizes[k])
                out.append((int(indices[k]), int(labels[k]), bytes(data[o:o + n].numpy())))
    return out


def test_shard_shuffle_and_ranks_match_local_disk(aws, tmp_path, data):
    d, _ = data
    seen = set()
    for rank in range(2):
        kw = dict(shuffle_mode="shard", rank=rank, world_size=2, seed=5)
        remote = order_of("s3://bkt/ds/", cache_dir=str(tmp_path), remote_cache=False, **kw)
        assert remote == order_of(str(d / "shards"), **kw)  # same samples, same order
        seen |= {i for i, _, _ in remote}
    assert seen == set(range(len(seen))) and len(seen) > 0


def test_image_mode_decodes_remote_jpegs(aws, tmp_path, reference):
    n = 0
    with stoker.Loader("s3://bkt/ds/", batch_size=16, image=stoker.Image(size=32),
                       cache_dir=str(tmp_path), quiet=True) as l:
        for images, labels in l:
            assert tuple(images.shape[1:]) == (3, 32, 32)
            n += len(labels)
        assert l.stats()["errors"] == 0
    assert n == len(reference)


def test_profile_credentials_and_config(aws, tmp_path, s3, reference):
    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL"):
        aws.delenv(k)
    (tmp_path / "credentials").write_text(
        "[default]\naws_access_key_id = wrong\naws_secret_access_key = wrong\n"
        "[tst]\naws_access_key_id = %s\naws_secret_access_key = %s\n" % (ACCESS_KEY, SECRET_KEY))
    (tmp_path / "config").write_text("[profile tst]\nregion = us-east-1\nendpoint_url = %s\n"
                                     % s3.endpoint)
    aws.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    aws.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    aws.setenv("AWS_PROFILE", "tst")
    got, rs, _ = read_all("s3://bkt/ds/", cache_dir=str(tmp_path), remote_cache=False)
    assert got == reference
    assert "profile 'tst'" in rs["credentials"]
    no_secret(rs)


def test_keys_in_the_config_file_when_the_credentials_file_has_none(aws, tmp_path, s3,
                                                                      reference):
    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL"):
        aws.delenv(k)
    # the credentials file has the profile's key id only: not a pair, not used
    (tmp_path / "credentials").write_text("[tst]\naws_access_key_id = wrong\n")
    (tmp_path / "config").write_text(
        "[profile tst]\nendpoint_url = %s\naws_access_key_id = %s\naws_secret_access_key = %s\n"
        % (s3.endpoint, ACCESS_KEY, SECRET_KEY))
    aws.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    aws.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    aws.setenv("AWS_PROFILE", "tst")
    got, rs, _ = read_all("s3://bkt/ds/", cache_dir=str(tmp_path), remote_cache=False)
    assert got == reference
    assert rs["credentials"] == "profile 'tst' of %s (key ****TEST)" % (tmp_path / "config")
    no_secret(rs)


def test_wrong_secret_fails_before_the_first_batch_naming_url_and_source(aws, tmp_path,
                                                                         capfd):
    aws.setenv("AWS_SECRET_ACCESS_KEY", "not-" + SECRET_KEY)
    with pytest.raises(stoker.Error) as e:
        stoker.Loader("s3://bkt/ds/", batch_size=8, cache_dir=str(tmp_path))
    msg = str(e.value)
    assert "s3://bkt/ds/" in msg and "403" in msg
    assert "environment (AWS_ACCESS_KEY_ID ****" in msg
    assert "SignatureDoesNotMatch" in msg
    out, err = capfd.readouterr()
    assert SECRET_KEY not in msg + out + err


def test_missing_bucket_is_named(aws, tmp_path):
    with pytest.raises(stoker.Error) as e:
        stoker.Loader("s3://no-such-bucket/ds/", batch_size=8, cache_dir=str(tmp_path))
    assert "s3://no-such-bucket/ds/" in str(e.value) and "NoSuchBucket" in str(e.value)


def test_no_shard_under_the_prefix_is_named(aws, tmp_path):
    with pytest.raises(stoker.Error) as e:
        stoker.Loader("s3://bkt/nothing-here/", batch_size=8, cache_dir=str(tmp_path))
    assert "s3://bkt/nothing-here" in str(e.value) and "no shard" in str(e.value)


def test_anonymous_reads_a_public_bucket_and_is_refused_a_private_one(aws, tmp_path,
                                                                      reference):
    aws.delenv("AWS_ACCESS_KEY_ID")
    aws.delenv("AWS_SECRET_ACCESS_KEY")
    got, rs, _ = read_all("s3://pub/ds/", cache_dir=str(tmp_path), remote_cache=False)
    assert got == reference
    assert rs["credentials"].startswith("anonymous")
    with pytest.raises(stoker.Error) as e:
        stoker.Loader("s3://bkt/ds/", batch_size=8, cache_dir=str(tmp_path))
    assert "s3://bkt/ds/" in str(e.value) and "anonymous" in str(e.value)
    assert "AccessDenied" in str(e.value)


def fault_plan(n, method, path):
    """Every kind of fault, often, on data requests (GETs with a range)."""
    if method != "GET":
        return "ok"
    k = n % 9
    return {1: "slowdown", 3: "500", 5: "reset", 7: "truncate"}.get(k, "ok")


def test_faults_are_retried_counted_and_never_delivered(aws, tmp_path, s3, reference):
    proxy = FaultProxy(s3.port, fault_plan)
    try:
        aws.setenv("AWS_ENDPOINT_URL", proxy.url)
        got, rs, seen = read_all("s3://bkt/ds/", cache_dir=str(tmp_path), remote_cache=False,
                                 on_error="fail", seed=11)
    finally:
        proxy.close()
    assert got == reference
    assert set(seen.values()) == {1}
    for fate in ("slowdown", "500", "reset", "truncate"):
        assert proxy.faults.get(fate, 0) > 0, proxy.faults
    # a reset before any answer on a reused connection is retried by libcurl
    # itself; the others are stoker's retries
    assert rs["retries"] >= sum(proxy.faults.get(f, 0) for f in ("slowdown", "500", "truncate"))
    assert rs["short_bodies"] >= 1 and rs["failed"] == 0


def test_http_faults_through_the_proxy(web, data, tmp_path, reference):
    _, names = data
    proxy = FaultProxy(web.port, fault_plan)
    try:
        url = "%s/train-{000000..%06d}.tar" % (proxy.url, len(names) - 1)
        got, rs, _ = read_all(url, cache_dir=str(tmp_path), remote_cache=False,
                              on_error="fail")
    finally:
        proxy.close()
    assert got == reference
    assert rs["retries"] > 0 and rs["short_bodies"] > 0


def index_then(aws, tmp_path, s3, plan, **kw):
    """Indexes through the real server (cached), then reads through a proxy
    whose plan fails data requests: (the error or None, samples got)."""
    read_all("s3://bkt/ds/", cache_dir=str(tmp_path), remote_cache=False)
    proxy = FaultProxy(s3.port, plan)
    aws.setenv("AWS_ENDPOINT_URL", proxy.url)
    aws.setenv("STOKER_REMOTE_TRIES", "3")
    aws.setenv("STOKER_REMOTE_TIMEOUT_MS", "1500")
    try:
        got, rs, _ = read_all("s3://bkt/ds/", cache_dir=str(tmp_path), remote_cache=False,
                              **kw)
        return None, got, rs
    except stoker.Error as e:
        return e, None, None
    finally:
        proxy.close()


def test_server_gone_for_good_fails_by_the_policy_naming_the_shard(aws, tmp_path, s3):
    dead = lambda n, method, path: "reset" if method == "GET" and "list-type" not in path \
        else "ok"
    err, _, _ = index_then(aws, tmp_path, s3, dead, on_error="fail")
    assert err is not None
    assert "s3://bkt/ds/train-" in str(err)
    # the transport's reason and the tries made, not only an errno
    assert ", 3 tries" in str(err), str(err)
    busy = lambda n, method, path: "slowdown" if method == "GET" and "list-type" not in path \
        else "ok"
    err, _, _ = index_then(aws, tmp_path, s3, busy, on_error="fail")
    assert err is not None and "HTTP 503 (SlowDown), 3 tries" in str(err), str(err)
    err, got, rs = index_then(aws, tmp_path, s3, dead, on_error="skip")
    assert err is None and got == {}  # every sample skipped, none made up
    assert rs["failed"] > 0 and rs["retries"] >= 2 * rs["failed"]


def test_a_request_that_never_answers_times_out(aws, tmp_path, s3):
    hang = lambda n, method, path: "drop" if method == "GET" and "list-type" not in path \
        else "ok"
    err, _, _ = index_then(aws, tmp_path, s3, hang, on_error="fail")
    assert err is not None and "s3://bkt/ds/train-" in str(err)
    # the endpoint that did not answer, named
    assert "Timeout was reached (to http://127.0.0.1:" in str(err), str(err)
    assert "), 3 tries" in str(err), str(err)


def test_an_object_changed_since_indexing_is_named(aws, tmp_path, s3, data, capfd):
    d, names = data
    bucket = "chg"
    s3.upload_dir(bucket, "ds/", str(d / "shards"))
    url = "s3://%s/ds/" % bucket
    read_all(url, cache_dir=str(tmp_path), remote_cache=False)
    with open(d / "shards" / names[0], "rb") as f:
        other = f.read()
    # between create (index) and the reads: If-Match refuses the new bytes
    with stoker.Loader(url, batch_size=8, cache_dir=str(tmp_path), remote_cache=False,
                       on_error="fail", shuffle=False, quiet=True) as l:
        s3.put(bucket, "ds/" + names[-1], other)  # read last: after the put
        with pytest.raises(stoker.Error) as e:
            for _ in l:
                pass
    assert names[-1] in str(e.value) and "changed since it was indexed" in str(e.value)
    # the next create sees the new ETag in the listing: named, indexed again
    capfd.readouterr()
    with stoker.Loader(url, batch_size=8, cache_dir=str(tmp_path), remote_cache=False) as l:
        n = sum(len(b[4]) for b in l)
    err = capfd.readouterr().err
    assert names[-1] in err and "changed since it was indexed" in err
    assert n > 0


def cache_files(root):
    c = os.path.join(root, "remote")
    return sorted(os.path.join(c, f) for f in os.listdir(c) if not f.startswith("."))


def test_second_run_reads_from_the_cache(aws, tmp_path, reference):
    got, rs1, _ = read_all("s3://bkt/ds/", cache_dir=str(tmp_path), seed=1)
    assert got == reference and rs1["cache_on"]
    # epoch 1: these shards have no index beside them, and the index build's
    # ranged reads of their headers (1 MiB, gaps filled) held every small
    # member's bytes too: kept in the cache, every read of the epoch a hit,
    # nothing fetched twice (dataset/remote.c)
    assert rs1["cache_misses"] == 0 and rs1["cache_bytes_written"] > 0
    assert rs1["cache_hits"] == len(reference)
    assert rs1["requests"] < len(reference) / 4
    got, rs2, _ = read_all("s3://bkt/ds/", cache_dir=str(tmp_path), seed=2)
    assert got == reference
    # another seed merges other neighbours into one read: a run whose bytes
    # were not all kept (the gap between two members read apart) is a miss
    assert rs2["cache_hits"] >= 0.85 * (rs2["cache_hits"] + rs2["cache_misses"])
    assert rs2["requests"] == 1 + rs2["cache_misses"]  # the listing, and the misses
    got, rs3, _ = read_all("s3://bkt/ds/", cache_dir=str(tmp_path), seed=2)
    assert got == reference  # the same seed again: every read is kept now
    assert rs3["cache_misses"] == 0 and rs3["requests"] == 1


def test_cache_stays_within_its_limit(aws, tmp_path, reference):
    limit = 3 << 20
    got, rs, _ = read_all("s3://bkt/ds/", cache_dir=str(tmp_path), cache_limit=limit)
    assert got == reference
    assert rs["cache_evictions"] > 0
    used = sum(os.stat(p).st_blocks * 512 for p in cache_files(str(tmp_path)))
    assert used <= limit, used


def test_a_cached_range_without_a_complete_record_is_never_served(aws, tmp_path, reference):
    read_all("s3://bkt/ds/", cache_dir=str(tmp_path))
    broken = 0
    for p in cache_files(str(tmp_path)):
        if not p.endswith(".log"):
            continue
        recs = open(p, "rb").read()
        if len(recs) < 32:
            continue
        # the last record torn (as by a crash mid-append), its bytes garbage
        _, off, length, _ = struct.unpack("<4Q", recs[-32:])
        with open(p, "r+b") as f:
            f.truncate(len(recs) - 16)
        with open(p[:-4] + ".data", "r+b") as f:
            f.seek(off)
            f.write(b"\xa5" * length)
        broken += 1
    assert broken > 0
    got, rs, _ = read_all("s3://bkt/ds/", cache_dir=str(tmp_path))
    assert got == reference
    assert rs["cache_misses"] > 0 and rs["cache_hits"] > 0
