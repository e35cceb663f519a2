"""stoker.vs_video, the harness of `stoker bench --video --vs PEER,...` and
bench/video_bench.py: the peers' clip list is the seed's alone (each epoch
every video once, every clip inside its video), the folder is read in
ImageFolder order, a run is a process of its own whose clips, CPU and memory
come back (stoker's side and the FFmpeg-alone ceiling, which need no peer
venv), and the table ranks stoker against the best peer."""

import ctypes
import os

import pytest

from stoker import _lib, vs_video


def test_clip_list_is_the_seeds():
    info = [(100, 25.0), (40, 30.0), (31, 25.0), (500, 25.0)]
    a = vs_video.clip_list(info, 16, 2, seed=3, want=40)
    assert a == vs_video.clip_list(info, 16, 2, seed=3, want=40)
    assert a != vs_video.clip_list(info, 16, 2, seed=4, want=40)
    span = 15 * 2 + 1
    for e in range(10):  # each epoch: every video once
        assert sorted(v for v, _ in a[4 * e:4 * e + 4]) == [0, 1, 2, 3]
    for v, start in a:
        assert 0 <= start <= max(0, info[v][0] - span)
    assert {start for v, start in a if v == 3} != {0}  # starts vary


def test_videos_in_imagefolder_order(tmp_path):
    for c in ("b", "a"):
        (tmp_path / c).mkdir()
        for f in ("z.mp4", "y.MKV", "notes.txt"):
            (tmp_path / c / f).write_bytes(b"x")
    got = [(os.path.relpath(p, tmp_path), y) for p, y in vs_video.videos(str(tmp_path))]
    assert got == [("a/y.MKV", 0), ("a/z.mp4", 0), ("b/y.MKV", 1), ("b/z.mp4", 1)]


@pytest.fixture(scope="module")
def video_folder(tmp_path_factory):
    # the harness probes the videos (frame counts, rates) with PyAV
    pytest.importorskip("av", reason="PyAV is not installed (apt-get install python3-av)")
    b = ctypes.create_string_buffer(256)
    if _lib.stk_video_codecs(b, len(b)) <= 0:
        pytest.skip("no FFmpeg here: %s" % b.value.decode())
    root = tmp_path_factory.mktemp("videos")
    for c in range(2):
        os.makedirs(root / ("c%d" % c))
        for i in range(2):
            m = _lib.VideoMakeOpts(size=ctypes.sizeof(_lib.VideoMakeOpts), width=96, height=64,
                                   frames=60, fps=25, gop=20, seed=c * 2 + i)
            err = ctypes.create_string_buffer(512)
            p = str(root / ("c%d" % c) / ("v%d.mp4" % i))
            assert _lib.stk_video_make(p.encode(), ctypes.byref(m), err, len(err)) == 0, \
                err.value.decode()
    return str(root)


def spec(folder, side, frames=4, stride=2):
    vids = vs_video.videos(folder)
    info, _ = vs_video.probe(vids)
    return {"side": side, "source": folder, "videos": vids, "info": info, "batch": 2,
            "workers": 1, "frames": frames, "stride": stride, "size": 32, "seed": 0,
            "ramp": 0.0, "seconds": 0.5,
            "clips": vs_video.clip_list(info, frames, stride, 0, 40)}


@pytest.mark.parametrize("side", ["stoker", "ceiling"])
def test_run_measured(video_folder, side):
    res, why, pss, anon = vs_video.spawn(spec(video_folder, side), timeout=300)
    assert why is None and res is not None, why
    assert res["samples"] > 0 and res["seconds"] > 0 and res["startup_s"] > 0
    assert res["cpu_s"] > 0
    # a clip decodes its frames at least: 4 at stride 2 span 7 frames
    assert res["decoded_per_clip"] >= 7
    if side == "stoker":
        assert res["first"][0] == [2, 4, 32, 32, 3]  # batch, T, H, W, RGB
    assert pss > 1 and anon * 1024 >= 0.9 * res["base_kb"]


def test_failed_run_says_why(video_folder):
    s = spec(video_folder, "stoker")
    s["source"] = os.path.join(video_folder, "missing")
    res, why, _, _ = vs_video.spawn(s, timeout=300)
    assert res is None and "exited" in why and "missing" in why


def test_table_ranks_stoker_against_the_best_peer():
    e = {"clips_per_s": 10.0, "frames_per_s": 160.0, "mem_mb": 50.0, "pss_peak_mb": 300.0,
         "startup_s": 1.0, "cpu_s_per_clip": 0.1, "spread": [9.0, 11.0]}
    out = {"videos": 3, "path": "/v", "codecs": ["h264"], "workload": {"batch": 8},
           "load_before": ["1", "1", "1"], "load_after": ["1", "1", "1"],
           "sides": {"stoker": e, "pyav": dict(e, clips_per_s=4.0, mem_mb=200.0),
                     "decord": dict(e, clips_per_s=5.0, mem_mb=400.0, cpu_s_per_clip=0.2),
                     "ceiling": dict(e, clips_per_s=20.0)},
           "skipped": {"dali": "no H.264 on its CPU"}}
    lines = vs_video.table(out)
    st = [ln for ln in lines if ln.startswith("stoker")][0]
    assert "2.00x decord's clips/s, 0.12x its memory, 0.50x its CPU a clip" in st
    assert "50% of the ceiling" in st
    assert any(ln.startswith("dali") and "no H.264" in ln for ln in lines)
