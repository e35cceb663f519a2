"""stoker.vs_peers, the harness of `stoker bench --vs PEER,...`: a run is a
process of its own whose figures and failures come back (its samples, bytes,
CPU and peak PSS; a crash with its error; a hang after the time limit), and
output that is not what was asked is flagged, never ranked."""

import argparse
import os
import sys

import pytest

from stoker import _peers, vs_peers


def spec(source, mode="raw", seconds=0.3, **kw):
    s = {"peer": "stoker", "mode": mode, "source": source, "workers": 0, "batch": 8, "seed": 0,
         "size": 32, "scale": [0.08, 1.0], "ratio": [0.75, 4 / 3], "crop_frac": 0.875,
         "samples": 1 << 40, "seconds": seconds, "prefetch": 2}
    s.update(kw)
    return s


def test_stoker_run_measured(jpeg_folder):
    res, why, pss_mb, wall = vs_peers.child(spec(jpeg_folder), timeout=300)
    assert why is None and res is not None
    assert res["samples"] > 0 and res["seconds"] > 0 and res["startup_s"] > 0
    assert res["cpu_s"] >= 0
    sizes = [os.path.getsize(os.path.join(dp, f)) for dp, _, fs in os.walk(jpeg_folder) for f in fs]
    mean = sum(sizes) / len(sizes)
    # whole epochs and the batches of the next: the bytes a sample are the files' mean
    assert abs(res["bytes"] / res["samples"] - mean) < 0.5 * mean
    assert pss_mb[0] > 1  # the interpreter at least, sampled from /proc
    # the baseline (the run's own anonymous memory after its imports, torch's
    # included) is below the tree's peak the harness sampled while it ran
    assert res["base_kb"] > 10 * 1024
    assert pss_mb[1] * 1024 >= 0.9 * res["base_kb"]


@pytest.mark.skipif("asan" in os.environ.get("LD_PRELOAD", ""),
                    reason="under ASan a process's PSS is the sanitizer's too (its allocator "
                           "keeps freed memory in quarantine, shadow pages): the slots' 18 MiB "
                           "are lost in it; checked in the plain build")
def test_loader_memory_follows_its_prefetch(image_folder):
    # the loader's memory above its imports grows with the batches it keeps
    # ahead: 8 slots of 4 images of 512 x 512 x 3 (3 MiB a slot) against 2
    # (40 images: 10 batches an epoch; 40 batches run, however long that takes
    # (a sanitizer's build is slow), so every slot has been filled)
    got = {}
    for pf in (2, 8):
        s = spec(image_folder, mode="train", workers=1, batch=4, size=512, prefetch=pf,
                 samples=160, seconds=240.0)
        res, why, pss_mb, _ = vs_peers.child(s, timeout=300)
        assert why is None, why
        got[pf] = pss_mb[1] - res["base_kb"] / 1024.0
    assert got[8] - got[2] > 6 * 3 * 0.8, got


def test_prefetch_0_leaves_each_loader_its_default(image_folder):
    # --prefetch 0: no prefetch keyword at all (each loader's own default),
    # else the same keyword for every loader
    assert _peers._pf({"prefetch": 0}, "prefetch_factor") == {}
    assert _peers._pf({"prefetch": 3}, "batches_ahead") == {"batches_ahead": 3}
    res, why, _, _ = vs_peers.child(spec(image_folder, mode="train", workers=1, prefetch=0),
                                    timeout=300)
    assert why is None, why
    assert res["first"] == {"shape": [8, 3, 32, 32], "dtype": "uint8"}


def test_run_timed_by_the_rule(jpeg_folder):
    # start-up, then the ramp (batches taken, not measured), then the window
    res, why, _, _ = vs_peers.child(spec(jpeg_folder, ramp=0.2, seconds=0.5), timeout=300)
    assert why is None, why
    assert res["startup_s"] > 0 and res["ramp_s"] >= 0.2 and res["ramp_samples"] > 0
    assert res["seconds"] >= 0.5
    assert abs(res["samples_per_s"] - res["samples"] / res["seconds"]) < 1e-6 * res["samples_per_s"]


def test_stoker_image_run_gives_the_size_asked(image_folder):
    res, why, _, _ = vs_peers.child(spec(image_folder, mode="train", workers=1), timeout=300)
    assert why is None, why
    assert res["first"] == {"shape": [8, 3, 32, 32], "dtype": "uint8"}


def test_crash_reported_with_its_error(tmp_path):
    missing = str(tmp_path / "no-such-folder")
    res, why, _, _ = vs_peers.child(spec(missing), timeout=300)
    assert res is None
    assert why.startswith("exited 1") and "no-such-folder" in why


def test_hang_reported(jpeg_folder):
    # asked for 60 s of batches, given 1 s: no result, the process group killed
    res, why, _, wall = vs_peers.child(spec(jpeg_folder, seconds=60), timeout=1)
    assert res is None and why.startswith("hung: no result after 1 s")
    assert wall < 30


def a(mode="train", size=224, seconds=3.0):
    return argparse.Namespace(mode=mode, size=size, seconds=seconds)


def test_check_flags_other_output():
    ok = {"samples": 512, "bytes": 0, "seconds": 3.0, "first": {"shape": [256, 3, 224, 224],
                                                                 "dtype": "uint8"}}
    assert vs_peers.check(a(), ok, 1e5) is None
    nhwc = dict(ok, first={"shape": [256, 224, 224, 3], "dtype": "uint8"})
    assert vs_peers.check(a(), nhwc, 1e5) is None  # the layout is a view, not other pixels
    small = dict(ok, first={"shape": [256, 3, 160, 160], "dtype": "uint8"})
    assert "not 224 x 224" in vs_peers.check(a(), small, 1e5)
    flt = dict(ok, first={"shape": [256, 3, 224, 224], "dtype": "float32"})
    assert "float32" in vs_peers.check(a(), flt, 1e5)
    short = dict(ok, ended=True, samples=300)
    assert "stopped after 300 samples" in vs_peers.check(a(), short, 1e5)
    raw = {"samples": 1000, "bytes": 1000 * 60000, "seconds": 3.0, "first": {}}
    assert "60000 bytes a sample" in vs_peers.check(a("raw"), raw, 1e5)
    assert vs_peers.check(a("raw"), dict(raw, bytes=1000 * 100000), 1e5) is None


def test_unknown_peer_and_raw_skips():
    run, skipped = vs_peers.resolve("wds,nosuch,ffcv,torch", "raw")
    names = dict(skipped)
    assert "unknown peer" in names["nosuch"]
    assert "no raw-bytes pipeline" in names["ffcv"]
    assert "torch-pil" not in names and "torch-pil" not in run
    for p, why in skipped:  # a peer not installed: the command that installs it
        if "not installed" in why:
            assert "pip install" in why and sys.executable in why


def test_proc_tree_counts_children():
    import subprocess
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        tree = _peers.proc_tree(os.getpid())
        assert os.getpid() in tree and p.pid in tree
        assert _peers.pss_kb(p.pid)[0] > 0
    finally:
        p.kill()
        p.wait()
