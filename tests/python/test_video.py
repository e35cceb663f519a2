"""Video mode in Python: stoker.Loader(path, video=stoker.Video(...)) yields
(clips, labels) of the asked shape and layout, every clip of an epoch once with
its video's ImageFolder label and its facts (clip_ids, starts), the same clips
for the same (seed, epoch), state_dict resume mid-epoch, ranks through
rank/world_size, a corrupt video named (fail) or counted (skip), the memory
accounted, pinned as raw mode is.  The videos are made by libstoker's own
stk_video_make (through ctypes)."""

import ctypes
import os

import pytest
import torch

import stoker
from stoker import _lib

CLASSES = ("b_walk", "a_run")  # created unsorted: labels follow the sorted names
PER_CLASS = 3
NVID = len(CLASSES) * PER_CLASS
SMALL = dict(frames=4, stride=2, size=32)


def _codecs():
    buf = ctypes.create_string_buffer(256)
    rc = _lib.stk_video_codecs(buf, len(buf))
    return rc, buf.value.decode()


_RC, _WHY = _codecs()
pytestmark = pytest.mark.skipif(_RC < 0, reason="no video decoding here: %s" % _WHY)


def make_video(path, frames=30, seed=0, width=64, height=48):
    m = _lib.VideoMakeOpts(size=ctypes.sizeof(_lib.VideoMakeOpts), width=width, height=height,
                           frames=frames, fps=25, gop=8, seed=seed)
    err = ctypes.create_string_buffer(512)
    rc = _lib.stk_video_make(os.fsencode(path), ctypes.byref(m), err, len(err))
    assert rc == 0, "stk_video_make %s: %s" % (path, err.value.decode())


@pytest.fixture(scope="module")
def video_folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("videos")
    for c, name in enumerate(CLASSES):
        os.makedirs(root / name)
        for i in range(PER_CLASS):
            make_video(root / name / ("v%d.%s" % (i, "mkv" if i == 2 else "mp4")),
                       frames=30 + 10 * i, seed=10 * c + i)
        (root / name / "still.jpg").write_bytes(b"not a video")
    return str(root)


@pytest.fixture(scope="module")
def bad_folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("badvideos")
    os.makedirs(root / "x")
    for i in range(4):
        make_video(root / "x" / ("good%d.mp4" % i), seed=100 + i)
    # larger than the good ones: replace finds a stand-in that fits its room
    (root / "x" / "broken.mp4").write_bytes(b"no ftyp, no moov: not an mp4" * 3000)
    return str(root)


def _epoch(loader):
    """[(video, clip, label, start_s, clip pixels)] of one epoch."""
    out = []
    for b in loader:
        clips, labels = b
        for i in range(b.count):
            out.append((int(b.indices[i]), int(b.clip_ids[i]), int(labels[i]),
                        float(b.starts[i]), clips[i].clone()))
    return out


def test_shapes_and_layouts(video_folder):
    with stoker.Loader(video_folder, 4, seed=0, video=stoker.Video(**SMALL)) as l:
        clips, labels = next(iter(l))
        assert clips.shape == (4, 4, 32, 32, 3) and clips.dtype == torch.uint8
        assert labels.shape == (4,) and labels.dtype == torch.int64
        assert l.video == stoker.Video(**SMALL)
    with stoker.Loader(video_folder, 3, seed=0,
                       video=dict(SMALL, layout="TCHW", crop="center")) as l, \
            stoker.Loader(video_folder, 3, seed=0,
                          video=dict(SMALL, layout="THWC", crop="center")) as ref:
        for b, r in zip(l, ref):
            assert b.clips.shape == (b.count, 4, 3, 32, 32)
            assert torch.equal(b.clips, r.clips.permute(0, 1, 4, 2, 3))
    assert stoker.Video(**SMALL).shape == (4, 32, 32, 3)
    assert stoker.Video(**SMALL).nbytes == 4 * 32 * 32 * 3


def test_every_clip_once_with_labels(video_folder):
    with stoker.Loader(video_folder, 5, seed=1, video=stoker.Video(clips_per_video=2,
                                                                   **SMALL)) as l:
        assert len(l.dataset) == NVID            # the dataset: videos
        assert len(l) == (2 * NVID + 4) // 5     # an epoch: clips
        got = _epoch(l)
        assert sorted((v, k) for v, k, *_ in got) == [(v, k) for v in range(NVID)
                                                      for k in range(2)]
        for v, k, label, start, _ in got:
            path = l.sample(v)[0]
            assert path.endswith((".mp4", ".mkv"))
            assert label == (0 if "/a_run/" in path else 1)
            assert 0 <= start < 3.0


def test_same_clips_for_same_seed_and_epoch(video_folder):
    opts = stoker.Video(clips_per_video=2, **SMALL)
    with stoker.Loader(video_folder, 4, seed=3, video=opts) as a, \
            stoker.Loader(video_folder, 3, seed=3, video=dict(SMALL, clips_per_video=2,
                                                              decode_threads=1)) as b:
        ea = {(v, k): (s, px) for v, k, _, s, px in _epoch(a)}
        eb = {(v, k): (s, px) for v, k, _, s, px in _epoch(b)}
        assert ea.keys() == eb.keys()
        for key in ea:
            assert ea[key][0] == eb[key][0] and torch.equal(ea[key][1], eb[key][1])
        a.set_epoch(1)
        e1 = {(v, k): (s, px) for v, k, _, s, px in _epoch(a)}
        assert any(e1[k][0] != ea[k][0] or not torch.equal(e1[k][1], ea[k][1]) for k in ea)


def test_state_dict_resume_mid_epoch(video_folder):
    opts = stoker.Video(clips_per_video=2, **SMALL)
    with stoker.Loader(video_folder, 3, seed=5, video=opts) as l:
        l.set_epoch(2)
        full = [(v, k, px) for v, k, _, _, px in _epoch(l)]
        l.set_epoch(2)
        it = iter(l)
        next(it)
        next(it)
        state = l.state_dict()
    with stoker.Loader(video_folder, 3, video=opts) as l:  # seed: the state's
        l.load_state_dict(state)
        rest = [(v, k, px) for v, k, _, _, px in _epoch(l)]
    assert len(rest) == len(full) - 6
    for (v, k, px), (w, j, qx) in zip(rest, full[6:]):
        assert (v, k) == (w, j) and torch.equal(px, qx)


def test_ranks_split_the_clips(video_folder):
    seen = []
    for r in range(3):
        with stoker.Loader(video_folder, 2, seed=9, rank=r, world_size=3,
                           video=stoker.Video(clips_per_video=2, **SMALL)) as l:
            assert (l.rank, l.world_size) == (r, 3)
            seen += [(v, k) for v, k, *_ in _epoch(l)]
    assert sorted(seen) == [(v, k) for v in range(NVID) for k in range(2)]


def test_batch_transform_and_diagnose(video_folder):
    fn = lambda clips, labels: (clips.float().mean(), labels)  # noqa: E731
    with stoker.Loader(video_folder, 4, seed=0, video=stoker.Video(**SMALL),
                       batch_transform=fn) as l:
        mean, labels = next(iter(l))
        assert mean.dtype == torch.float32 and labels.shape == (4,)
        for _ in l:
            pass
        v = l.diagnose(0)
        assert v["kind"] and "evidence" in v


def test_corrupt_video_named_or_counted(bad_folder):
    with stoker.Loader(bad_folder, 5, on_error="fail", video=stoker.Video(**SMALL)) as l:
        with pytest.raises(stoker.Error, match="broken.mp4"):
            for _ in l:
                pass
    with stoker.Loader(bad_folder, 5, on_error="skip", video=stoker.Video(**SMALL)) as l:
        got = _epoch(l)
        assert len(got) == 4
        assert l.stats()["errors"] == 1
    with stoker.Loader(bad_folder, 5, on_error="replace", video=stoker.Video(**SMALL)) as l:
        b = next(iter(l))
        assert b.count == 5 and b.clips.shape[0] == 5
        assert all("broken" not in l.sample(int(v))[0] for v in b.indices)


def test_memory_and_pinned(video_folder):
    with stoker.Loader(video_folder, 4, prefetch=2, video=stoker.Video(**SMALL)) as l, \
            stoker.Loader(video_folder, 4, prefetch=2) as raw:
        m = l.memory()
        largest = max(l.sample(i)[1] for i in range(NVID))
        # the slots hold the clips; the reads (a clip's byte ranges, at most
        # its file) go to two read areas, reused once their batch is decoded
        assert 4 * 4 * 32 * 32 * 3 <= m["slot_bytes"] < 4 * 4 * 32 * 32 * 3 + 4096
        assert m["read_areas"] == 2 and 0 < m["read_area_bytes"] <= 4 * largest + 8192
        assert m["total"] == (m["pool_bytes"] + m["read_pool_bytes"] + m["index_bytes"]
                              + m["meta_bytes"] + m["decode_bytes"])
        assert m["decode_bytes"] > 0 and m["decode_threads"] >= 1
        # pinned as raw mode's slots are (both pinned where CUDA can register them)
        assert l.stats()["pinned"] == raw.stats()["pinned"]
        clips, _ = next(iter(l))
        if l.stats()["pinned"]:
            assert clips.is_pinned()


def test_memory_estimate_before_the_first_batch(video_folder):
    """The decoders' memory is sized from the largest video's frame size,
    recorded in the video index at create: the same before the first batch as
    after an epoch has decoded every video, and far below the 720p assumed
    where no index says the size."""
    with stoker.Loader(video_folder, 4, prefetch=2, video=stoker.Video(**SMALL)) as l:
        before = l.memory()
        for _ in l:
            pass
        after = l.memory()
        assert before["decode_bytes"] == after["decode_bytes"] > 0
        assert before["total"] == after["total"]
        assert before["decode_bytes"] < before["decode_threads"] * 1280 * 720


def test_video_options_checked(video_folder):
    with pytest.raises(stoker.OptionError, match="frames"):
        stoker.Video(frames=5000)
    with pytest.raises(ValueError, match="fps"):
        stoker.Video(fps=-1)
    with pytest.raises(TypeError, match="stoker.Video"):
        stoker.Loader(video_folder, 4, video="mp4")
    with pytest.raises(ValueError, match="image and video"):
        stoker.Loader(video_folder, 4, video=stoker.Video(), image=stoker.Image(16))
    v = stoker.Video(fps=10, layout="tchw", crop="center", flip=False)
    assert (v.fps, v.layout, v.crop, v.flip) == (10.0, "TCHW", "center", False)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device (torch.cuda)")
def test_cuda_video_batches(video_folder):
    opts = stoker.Video(**SMALL)
    with stoker.Loader(video_folder, 4, seed=1, device="cuda", video=opts) as l, \
            stoker.Loader(video_folder, 4, seed=1, video=opts) as ref:
        for b, r in zip(l, ref):
            clips, labels = b
            assert clips.is_cuda and labels.is_cuda and not b.starts.is_cuda
            assert torch.equal(clips.cpu(), r.clips)
            assert torch.equal(b.clip_ids, r.clip_ids)


def test_tar_shards_of_videos(video_folder, tmp_path):
    """`stoker pack --extensions` packs the videos; video mode reads them from
    the shards, every clip once, in global or shard shuffle."""
    import subprocess
    from conftest import stoker_cli
    cli = stoker_cli()
    if cli is None:
        pytest.skip("no stoker CLI ($STOKER, build/stoker)")
    out = str(tmp_path / "shards")
    subprocess.run([cli, "pack", video_folder, out, "--extensions", ".mp4,.mkv",
                    "--shard-size", "16k"], check=True, stdout=subprocess.DEVNULL)
    assert len([f for f in os.listdir(out) if f.endswith(".tar")]) > 1
    for mode in ("global", "shard"):
        with stoker.Loader(out, 4, seed=2, shuffle_mode=mode,
                           video=stoker.Video(clips_per_video=2, **SMALL)) as l:
            assert len(l.dataset) == NVID
            got = _epoch(l)
            assert sorted((v, k) for v, k, *_ in got) == [(v, k) for v in range(NVID)
                                                          for k in range(2)]
            assert sorted(set(lab for _, _, lab, *_ in got)) == [0, 1]


def _void_matroska_duration(path):
    """The Segment's Duration element (ID 0x4489) overwritten by an EBML Void
    of the same length: a Matroska whose header gives no length, as one
    written to a pipe."""
    b = bytearray(open(path, "rb").read())
    i = b.find(b"\x44\x89\x88")  # a float of 8 bytes (FFmpeg's), else of 4
    i = i if i > 0 else b.find(b"\x44\x89\x84")
    assert i > 0, "no Duration element in %s" % path
    n = 3 + (b[i + 2] & 0x7f)
    b[i:i + n] = bytes([0xEC, 0x80 | (n - 2)]) + bytes(n - 2)
    open(path, "wb").write(b)


def test_matroska_without_a_length(tmp_path):
    """A Matroska whose header says neither its frame count nor its duration:
    its frames are counted, so clips start across the video as for the same
    video with its Duration, with the same pixels (before, every clip of it
    started at 0 whatever the draw)."""
    import shutil
    for name in ("with", "without"):
        os.makedirs(tmp_path / name / "c")
    make_video(tmp_path / "with" / "c" / "v.mkv", frames=80, seed=7)
    shutil.copy(tmp_path / "with" / "c" / "v.mkv", tmp_path / "without" / "c" / "v.mkv")
    _void_matroska_duration(tmp_path / "without" / "c" / "v.mkv")
    starts = []
    for epoch in range(4):
        got = {}
        for name in ("with", "without"):
            with stoker.Loader(str(tmp_path / name), 1, seed=3,
                               video=stoker.Video(**SMALL)) as l:
                l.set_epoch(epoch)
                got[name] = _epoch(l)
        (_, _, _, s_with, c_with), = got["with"]
        (_, _, _, s_without, c_without), = got["without"]
        assert s_without == pytest.approx(s_with)
        assert torch.equal(c_without, c_with)
        starts.append(s_without)
    assert max(starts) > 0
