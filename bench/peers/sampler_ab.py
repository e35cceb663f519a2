#!/usr/bin/env python3
"""bench/peers/sampler_ab.py DIR [VARIANTS] [ROUNDS] [SECONDS] [PEER] — what the
harness's memory sampler (stoker._peers.run_sampled) costs the run it
measures: one val run of PEER (stoker, torch, ffcv: python -m stoker._peers,
2 workers or decode threads, batch 256, prefetch 2, ramp 0.25 s, as
bench/peers/run.sh's val) under each sampler variant, alternating:

  alone   no sampler (the run's session, stdout pipe and reader thread only)
  none    a nice-19 thread that wakes every 50 ms and does nothing
  walk    ... and lists every process (stoker._peers.proc_tree)
  old     ... and reads every process's smaps_rollup: the sampler before PeakPss
  new     stoker._peers.PeakPss (what run_sampled uses)
  both    old and new on the same run: their peaks compared

Prints the run's images/s, the CPUs it used in its window (its tree's CPU
seconds / the window), the parent's CPU seconds over the run, and each
sampler's peak PSS, peak anonymous + shared-memory PSS, ticks and PSS reads.

  STOKER_LIB=$PWD/build/libstoker.so.0 PYTHONPATH=$PWD/python flock -x /work/.measure.lock \\
    ~/.cache/stoker/peers/bin/python bench/peers/sampler_ab.py /work/data/val/base alone,old,new 3 3 stoker
"""
import glob
import json
import os
import resource
import subprocess
import sys
import threading
import time

from stoker._peers import PeakPss, pss_kb, proc_tree


class Old:
    """The sampler before PeakPss: every process's PSS on every tick."""

    def __init__(self, root):
        self.root, self.peak, self.peak_anon, self.ticks, self.reads = root, 0, 0, 0, 0

    def tick(self):
        m = [pss_kb(q) for q in proc_tree(self.root)]
        self.peak = max(self.peak, sum(t for t, _ in m))
        self.peak_anon = max(self.peak_anon, sum(a for _, a in m))
        self.ticks += 1
        self.reads += 1


class Walk:
    def __init__(self, root, walk):
        self.root, self.walk, self.ticks, self.reads, self.peak, self.peak_anon = root, walk, 0, 0, 0, 0

    def tick(self):
        if self.walk:
            proc_tree(self.root)
        self.ticks += 1


def source(src, peer):
    if peer != "ffcv":
        return src
    # the .beton bench/peers made from src (stoker.vs_peers' peers-data folder)
    top = os.path.join(os.path.expanduser("~/.cache"), "stoker", "peers-data")
    found = glob.glob(os.path.join(top, os.path.basename(src.rstrip("/")) + "-*", "beton"))
    if not found:
        sys.exit("no .beton for %s under %s: run bench/peers/run.sh with PEERS=ffcv first" % (src, top))
    return found[0]


def run(src, peer, var, secs):
    spec = {"mode": "val", "batch": 256, "seed": 0, "size": 224, "scale": [0.08, 1.0],
            "ratio": [0.75, 4 / 3], "crop_frac": 0.875, "samples": 1 << 62, "seconds": secs,
            "ramp": 0.25, "prefetch": 2, "read_areas": 0, "peer": peer, "source": src, "workers": 2}
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    p = subprocess.Popen([sys.executable, "-m", "stoker._peers", json.dumps(spec)],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True,
                         env=dict(os.environ, PYTHONUNBUFFERED="1"))
    lines = []
    rd = threading.Thread(target=lambda: lines.extend(p.stdout), daemon=True)
    rd.start()
    ss = {"alone": [], "none": [Walk(p.pid, False)], "walk": [Walk(p.pid, True)], "old": [Old(p.pid)],
          "new": [PeakPss(p.pid)], "both": [Old(p.pid), PeakPss(p.pid)]}[var]

    def sample():
        os.setpriority(os.PRIO_PROCESS, 0, 19)
        while p.poll() is None:
            for x in ss:
                x.tick()
            time.sleep(0.05)

    if ss:
        th = threading.Thread(target=sample, daemon=True)
        th.start()
        th.join()
    p.wait()
    rd.join(2)
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    res = json.loads([ln for ln in lines if ln.strip()][-1])
    pc = r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime
    pk = "  ".join("%s peak %.1f anon %.1f MB, %d ticks, %d PSS reads" % (
        type(x).__name__, x.peak / 1024, x.peak_anon / 1024, x.ticks, x.reads) for x in ss
        if not isinstance(x, Walk))
    return res["samples_per_s"], res["cpu_s"] / res["seconds"], pc, pk


def main():
    src = os.path.abspath(sys.argv[1])
    variants = (sys.argv[2] if len(sys.argv) > 2 else "alone,old,new").split(",")
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    secs = float(sys.argv[4]) if len(sys.argv) > 4 else 3.0
    peer = sys.argv[5] if len(sys.argv) > 5 else "stoker"
    src = source(src, peer)
    for r in range(rounds):
        for v in (variants if r % 2 == 0 else variants[::-1]):
            sps, cpus, pc, pk = run(src, peer, v, secs)
            print("%-6s %-5s %6.0f img/s  %.2f CPUs in its window  parent %.2f CPU s  %s  load %s" % (
                peer, v, sps, cpus, pc, pk, open("/proc/loadavg").read().split()[0]), flush=True)


if __name__ == "__main__":
    main()
