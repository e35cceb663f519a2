#!/usr/bin/python3
"""stoker's video loader alone, builds side by side (issue 38): the stoker
side of bench/video_bench.py (clips of 16 frames at stride 2,
RandomResizedCrop 224, batch 8, 2 decode threads, copy_free), each library
in a process of its own, rounds alternating; per run the clips/s over a
window after a 2 s ramp (epochs restarted as a training loop does), the
process's CPU ms a clip (os.times: every thread of it) and the cores that
makes (CPU s / wall s: 2.0 is both cores busy).  No memory sampling beside
it (bench/video_bench.py's 50 ms PSS sampler takes ~10 ms of CPU a sample
in its own process: about 0.17 of a core, off the loader's two).

    PYTHONPATH=python python3 bench/video_ab.py DIR LIB... [--rounds 3] [--seconds 12]
"""
import argparse
import os
import subprocess
import sys
import time


def child(path, seconds):
    import stoker
    v = stoker.Video(frames=16, stride=2, size=224, crop="random", codec_threads=1,
                     decode_threads=2)

    def cpu():
        t = os.times()
        return t.user + t.system

    with stoker.Loader(path, 8, video=v, shuffle=True, seed=0, copy_free=True) as ld:
        t0 = time.monotonic()
        while time.monotonic() - t0 < 2:  # the ramp: whole epochs
            for _ in ld:
                pass
        t0, c0, n, done = time.monotonic(), cpu(), 0, False
        while not done:
            for b in ld:
                n += b.count
                if time.monotonic() - t0 > seconds:
                    done = True
                    break
        dt, c = time.monotonic() - t0, cpu() - c0
    print("clips/s %.2f  CPU ms a clip %.1f  cores %.2f" % (n / dt, 1000 * c / n, c / dt))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("path")
    ap.add_argument("libs", nargs="*")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=12.0)
    ap.add_argument("--child", action="store_true")
    a = ap.parse_args()
    if a.child:
        return child(a.path, a.seconds)
    for r in range(a.rounds):
        for lib in a.libs:
            env = dict(os.environ, STOKER_LIB=lib)
            out = subprocess.run([sys.executable, __file__, a.path, "--child", "--seconds",
                                  str(a.seconds)], env=env, capture_output=True, text=True)
            print("round %d %-40s %s" % (r + 1, lib, (out.stdout or out.stderr).strip()[-200:]),
                  flush=True)


if __name__ == "__main__":
    main()
