"""Video clips read as byte ranges from every source (issue 38): a folder,
tar shards (`stoker pack`), O_DIRECT reads, and remote shards in an
S3-compatible store (SeaweedFS's gateway) and behind plain HTTP (nginx),
real servers on loopback.  Every source gives the folder's clip pixels; the
loader's counters say the clips were read as ranges (total_video_ranged),
not whole files; remote data reads each video whole once (its byte index is
made from those bytes), then ranges, and a second run reads ranges from its
first clip (two ranks' records kept together; an object served without an
ETag learnt again each run, never kept); a shard cut short or an object
changed under a loader is refused, naming the shard or the URL."""

import os
import shutil
import subprocess

import pytest
import torch

import stoker
from conftest import stoker_cli
from remote_servers import ACCESS_KEY, SECRET_KEY, FaultProxy, Nginx, SeaweedS3
from test_video import _RC, _WHY, make_video

pytestmark = pytest.mark.skipif(_RC < 0, reason="no video decoding here: %s" % _WHY)

CLASSES = ("walk", "run")
PER_CLASS = 3
NVID = len(CLASSES) * PER_CLASS
CPV = 3
VIDEO = dict(frames=6, stride=3, size=24, clips_per_video=CPV)


@pytest.fixture(scope="module")
def sets(tmp_path_factory):
    """Long videos (keyframes 25 frames apart) in a folder, and the same
    packed into tar shards."""
    cli = stoker_cli()
    if not cli:
        pytest.skip("the stoker CLI (stoker pack) is not built")
    root = tmp_path_factory.mktemp("vsrc")
    folder = root / "folder"
    for c, name in enumerate(CLASSES):
        os.makedirs(folder / name)
        for i in range(PER_CLASS):
            m = _mk(folder / name / ("v%d.mp4" % i), 150 + 50 * i, 700 + 10 * c + i)
            assert m
    shards = root / "shards"
    subprocess.run([cli, "pack", str(folder), str(shards), "--extensions", ".mp4",
                    "--shard-size", "160k"], check=True, stdout=subprocess.DEVNULL)
    names = sorted(n for n in os.listdir(shards) if n.endswith(".tar"))
    assert len(names) >= 2, names
    sizes = [os.path.getsize(os.path.join(dp, f)) for dp, _, fs in os.walk(folder) for f in fs]
    return str(folder), str(shards), names, sum(sizes) / len(sizes)


def _mk(path, frames, seed):
    import ctypes
    from stoker import _lib
    m = _lib.VideoMakeOpts(size=ctypes.sizeof(_lib.VideoMakeOpts), width=192, height=128,
                           frames=frames, fps=25, gop=25, seed=seed)
    err = ctypes.create_string_buffer(512)
    rc = _lib.stk_video_make(os.fsencode(str(path)), ctypes.byref(m), err, len(err))
    assert rc == 0, err.value.decode()
    return True


def clips_of(path, cache, epochs=1, **kw):
    """[{(video, clip): (label, pixels)} an epoch], and the stats and remote
    stats after each epoch."""
    kw.setdefault("quiet", True)
    out = []
    with stoker.Loader(path, 4, seed=11, cache_dir=str(cache), video=stoker.Video(**VIDEO),
                       **kw) as l:
        for e in range(epochs):
            l.set_epoch(e)
            got = {}
            for b in l:
                clips, labels = b
                for i in range(b.count):
                    got[(int(b.indices[i]), int(b.clip_ids[i]))] = (int(labels[i]),
                                                                   clips[i].clone())
            out.append((got, l.stats(), l.remote_stats()))
    return out


def same(a, b):
    assert a.keys() == b.keys()
    for k in a:
        assert a[k][0] == b[k][0], k
        assert torch.equal(a[k][1], b[k][1]), k


@pytest.fixture(scope="module")
def reference(sets, tmp_path_factory):
    """The folder's clips, epochs 0 and 1, read as ranges."""
    folder = sets[0]
    out = clips_of(folder, tmp_path_factory.mktemp("refcache"), epochs=2)
    for got, st, _ in out:
        assert len(got) == NVID * CPV
    assert out[-1][1]["total_video_ranged"] == 2 * NVID * CPV
    assert out[-1][1]["total_video_whole"] == 0
    return [g for g, _, _ in out]


@pytest.mark.parametrize("source", ["shards", "shards_direct", "folder_direct",
                                    "shards_shard_shuffle"])
def test_local_sources_read_ranges_with_the_folders_pixels(sets, reference, tmp_path, source):
    folder, shards, _, mean_size = sets
    kw = {}
    if source.endswith("direct"):
        kw["direct"] = True
    if source.endswith("shard_shuffle"):
        kw["shuffle_mode"] = "shard"
    path = folder if source.startswith("folder") else shards
    for run in range(2):  # the second from the video index's cache file
        out = clips_of(path, tmp_path, epochs=2, **kw)
        for e in range(2):
            same(reference[e], out[e][0])
        st = out[-1][1]
        assert st["total_errors"] == 0
        assert st["total_video_ranged"] == 2 * NVID * CPV, (run, st["total_video_whole"])
        assert st["total_video_whole"] == 0
        # a clip's ranges: far below its file (whole files read mean_size a clip)
        assert st["total_bytes"] / st["total_samples"] < 0.6 * mean_size
    assert [f for f in os.listdir(tmp_path) if f.endswith(".video")]


def test_a_shard_cut_short_under_a_loader_is_named(sets, tmp_path):
    _, shards, names, _ = sets
    copy = tmp_path / "shards"
    shutil.copytree(shards, copy)
    clips_of(str(copy), tmp_path / "c")  # the video index made and cached
    with stoker.Loader(str(copy), 4, seed=11, cache_dir=str(tmp_path / "c"), quiet=True,
                       on_error="fail", video=stoker.Video(**VIDEO)) as l:
        # every clip of its last members runs past the shard's end now
        last = str(copy / names[0])
        os.truncate(last, os.path.getsize(last) // 2)
        with pytest.raises(stoker.Error) as e:
            for _ in l:
                pass
        assert l.stats()["total_video_whole"] == 0
    msg = str(e.value)
    assert names[0] in msg and ("short read" in msg or "changed since it was indexed" in msg), msg


# --- remote shards ----------------------------------------------------------

@pytest.fixture(scope="module")
def s3(sets, tmp_path_factory):
    try:
        srv = SeaweedS3(str(tmp_path_factory.mktemp("vs3")))
    except FileNotFoundError as e:
        pytest.skip("no S3 server to test against: %s" % e)
    srv.upload_dir("vbk", "v/", sets[1])
    yield srv
    srv.close()


@pytest.fixture
def aws(monkeypatch, tmp_path, s3):
    for k in list(os.environ):
        if k.startswith("AWS_") or k.startswith("STOKER_REMOTE"):
            monkeypatch.delenv(k)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3.endpoint)
    return monkeypatch


@pytest.fixture
def web(sets, tmp_path):
    """nginx over a copy of the shards the test may change."""
    root = tmp_path / "www"
    shutil.copytree(sets[1], root)
    try:
        srv = Nginx(str(root), str(tmp_path / "srv"))
    except FileNotFoundError as e:
        pytest.skip("no HTTP server to test against: %s" % e)
    yield srv, root
    srv.close()


def http_url(srv, names):
    return "%s/train-{000000..%06d}.tar" % (srv.url, len(names) - 1)


def check_remote_runs(url, reference, cache, **kw):
    """Run 1: each video read whole once, its index made, then ranges; run 2
    (the index from the cache file): ranges from the first clip.  The
    folder's pixels throughout; run 2 fetches fewer bytes."""
    fetched = []
    for run in range(2):
        out = clips_of(url, cache, epochs=2, **kw)
        for e in range(2):
            same(reference[e], out[e][0])
        st0, st1 = out[0][1], out[1][1]
        assert st1["total_errors"] == 0
        if run == 0:
            # every video's first clip whole (two clips of one video in
            # flight at once may both be), every clip of epoch 1 ranged
            assert NVID <= st0["total_video_whole"] < NVID * CPV, st0["total_video_whole"]
            assert st1["total_video_whole"] == st0["total_video_whole"]
            assert st1["total_video_ranged"] - st0["total_video_ranged"] == NVID * CPV
        else:
            assert st1["total_video_whole"] == 0
            assert st1["total_video_ranged"] == 2 * NVID * CPV
        fetched.append(out[0][2]["bytes"])
    assert fetched[1] < 0.7 * fetched[0], fetched


def test_s3_clips_read_whole_once_then_as_ranged_gets(aws, sets, reference, tmp_path):
    check_remote_runs("s3://vbk/v/", reference, tmp_path, remote_cache=False)


def test_http_clips_read_whole_once_then_as_ranged_gets(web, sets, reference, tmp_path):
    srv, _ = web
    check_remote_runs(http_url(srv, sets[2]), reference, tmp_path, remote_cache=False)


def test_s3_with_the_local_cache(aws, sets, reference, tmp_path):
    """The remote cache on: the ranges are served from it, same pixels."""
    out = clips_of("s3://vbk/v/", tmp_path, epochs=2)
    for e in range(2):
        same(reference[e], out[e][0])
    assert out[1][1]["total_video_ranged"] >= NVID * CPV


def test_a_changed_object_under_a_loader_is_named(web, sets, tmp_path):
    srv, root = web
    names = sets[2]
    url = http_url(srv, names)
    clips_of(url, tmp_path, epochs=2, remote_cache=False)  # the index learnt, cached
    with stoker.Loader(url, 4, seed=11, cache_dir=str(tmp_path), quiet=True, on_error="fail",
                       remote_cache=False, video=stoker.Video(**VIDEO)) as l:
        p = str(root / names[0])  # rewritten in place: another ETag
        with open(p, "r+b") as f:
            f.seek(os.path.getsize(p) // 2)
            b = f.read(1)
            f.seek(-1, 1)
            f.write(bytes([b[0] ^ 0xFF]))
        st = os.stat(p)
        os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns + 5 * 10**9))
        with pytest.raises(stoker.Error) as e:
            for _ in l:
                pass
        assert l.stats()["total_video_whole"] == 0  # ranged GETs, refused
    msg = str(e.value)
    assert names[0] in msg and "changed since it was indexed" in msg, msg
    # the next loader indexes the shard again; its old records are another
    # version's (the ETag is in their key): its videos are read whole again
    out = clips_of(url, tmp_path, remote_cache=False, on_error="skip")
    assert out[0][1]["total_video_whole"] > 0


def test_ranks_learn_their_videos_and_the_cache_keeps_them_all(aws, sets, tmp_path):
    """Two ranks each read their half of the videos (one clip a video): each
    learns its half and writes the cache file keeping the other's records,
    so a run on one rank afterwards reads every clip as ranges."""
    one = dict(VIDEO, clips_per_video=1)
    for rank in range(2):
        with stoker.Loader("s3://vbk/v/", 2, seed=11, cache_dir=str(tmp_path), quiet=True,
                           remote_cache=False, rank=rank, world_size=2,
                           video=stoker.Video(**one)) as l:
            n = sum(b.count for b in l)
            st = l.stats()
        assert n == NVID // 2 and st["total_video_whole"] == n
    with stoker.Loader("s3://vbk/v/", 2, seed=12, cache_dir=str(tmp_path), quiet=True,
                       remote_cache=False, video=stoker.Video(**one)) as l:
        assert sum(b.count for b in l) == NVID
        st = l.stats()
    assert st["total_video_ranged"] == NVID and st["total_video_whole"] == 0, st


def test_an_object_without_an_etag_is_learnt_each_run(web, sets, reference, tmp_path):
    """A server that sends no ETag: a record made from its bytes could be
    another version's of the same size, so it is never kept: each run reads
    each video whole once again (and ranges after), the pixels the folder's."""
    srv, _ = web
    proxy = FaultProxy(srv.port, strip_answer=(b"etag",))
    try:
        url = "%s/train-{000000..%06d}.tar" % (proxy.url, len(sets[2]) - 1)
        for run in range(2):
            out = clips_of(url, tmp_path, epochs=2, remote_cache=False)
            for e in range(2):
                same(reference[e], out[e][0])
            st0, st1 = out[0][1], out[1][1]
            assert st0["total_video_whole"] >= NVID, (run, st0["total_video_whole"])
            assert st1["total_video_ranged"] - st0["total_video_ranged"] == NVID * CPV
    finally:
        proxy.close()


def test_a_rank_killed_after_an_epoch_leaves_its_index(web, sets, tmp_path):
    """A rank's index of what it learnt is written at each epoch's end, not
    only when its loader is destroyed: a run killed (SIGKILL) after its first
    epoch leaves it, and the next run on that rank reads every clip as
    ranges from its first epoch."""
    import signal
    import sys
    srv, _ = web
    url = http_url(srv, sets[2])
    one = dict(VIDEO, clips_per_video=1)
    code = ("import os, signal, stoker\n"
            "l = stoker.Loader(%r, 2, seed=11, cache_dir=%r, quiet=True, remote_cache=False,"
            " rank=0, world_size=2, video=stoker.Video(**%r))\n"
            "n = sum(b.count for b in l)\n"
            "assert n == %d and l.stats()['total_video_whole'] == n, l.stats()\n"
            "os.kill(os.getpid(), signal.SIGKILL)\n" % (url, str(tmp_path), one, NVID // 2))
    r = subprocess.run([sys.executable, "-c", code], stderr=subprocess.PIPE)
    assert r.returncode == -signal.SIGKILL, r.stderr.decode()
    idx = [f for f in os.listdir(tmp_path / "remote-index") if f.startswith("video-")]
    assert len(idx) == 1, idx
    assert os.stat(tmp_path / "remote-index" / idx[0]).st_mode & 0o777 == 0o600
    with stoker.Loader(url, 2, seed=11, cache_dir=str(tmp_path), quiet=True,
                       remote_cache=False, rank=0, world_size=2,
                       video=stoker.Video(**one)) as l:
        assert sum(b.count for b in l) == NVID // 2
        st = l.stats()
    assert st["total_video_ranged"] == NVID // 2 and st["total_video_whole"] == 0, st
