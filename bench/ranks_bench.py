"""Ranks sharing a host, torchrun-style: N ranks (RANK, WORLD_SIZE,
LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR/PORT; gloo barrier before timing)
each read their share of the same samples in image mode with
decode_threads=1, against one rank reading them all with decode_threads=1.
Prints each round and the median of aggregate samples/s (N ranks) / one
rank's samples/s; rounds alternate.  The target (issue 14): >= 1.8 for 2 ranks
on 2 cores, which each rank's CPU share (one CPU each, its decode thread
pinned there) should give.

    PYTHONPATH=python python3 bench/ranks_bench.py [PATH] [--ranks 2] [--samples 2000]
        [--rounds 3] [--size 224]

PATH: the default dataset (~/.cache/stoker/default-10000) if not given; the
page cache is warmed first (decode is what is measured, not the disk).
"""

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time

RANK_MAIN = r"""
import json, os, sys, time
import torch.distributed as dist
import stoker
path, samples, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
dist.init_process_group("gloo")
world = dist.get_world_size()
l = stoker.Loader(path, 64, seed=1, image=stoker.Image(size=size, decode_threads=1),
                  quiet=True)
want = samples // world
it = iter(l)
first = next(it)            # threads up, first batch decoded: not timed
got = 0
dist.barrier()
t0, c0 = time.monotonic(), time.process_time()
for b in it:
    got += len(b.labels)
    if got >= want:
        break
dt, cpu = time.monotonic() - t0, time.process_time() - c0
share = l.cpu_share
l.close()
res = [None] * world
dist.all_gather_object(res, {"samples": got, "seconds": dt, "cpu_s": cpu,
                             "cpulist": share["cpulist"],
                             "decode_threads": share["decode_threads"]})
if dist.get_rank() == 0:
    print(json.dumps(res))
dist.destroy_process_group()
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(path, n, samples, size):
    port = free_port()
    procs = []
    for r in range(n):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(n), LOCAL_RANK=str(r),
                   LOCAL_WORLD_SIZE=str(n), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                   OMP_NUM_THREADS="1")
        procs.append(subprocess.Popen([sys.executable, "-c", RANK_MAIN, path, str(samples),
                                       str(size)], env=env, stdout=subprocess.PIPE, text=True))
    outs = [p.communicate(timeout=900)[0] for p in procs]
    if any(p.returncode for p in procs):
        raise SystemExit("a rank failed: %s" % [p.returncode for p in procs])
    res = json.loads(outs[0].strip().splitlines()[-1])
    total = sum(r["samples"] for r in res)
    wall = max(r["seconds"] for r in res)   # the job ends with its slowest rank
    cpu_ms = 1000 * sum(r["cpu_s"] for r in res) / total
    return total / wall, res, cpu_ms


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("path", nargs="?",
                    default=os.path.expanduser("~/.cache/stoker/default-10000"))
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--samples", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--size", type=int, default=224)
    a = ap.parse_args()
    # warm the page cache: decode is what is measured
    subprocess.run(["cat"] + [os.path.join(d, f) for d, _, fs in os.walk(a.path) for f in fs],
                   stdout=subprocess.DEVNULL, check=False)
    ratios, cpus = [], []
    for i in range(a.rounds):
        one, r1, c1 = run(a.path, 1, a.samples, a.size)
        many, rn, cn = run(a.path, a.ranks, a.samples, a.size)
        ratios.append(many / one)
        cpus.append(cn / c1)
        print("round %d: 1 rank %.0f samples/s (CPUs %s, %.2f CPU ms/sample), %d ranks %.0f "
              "samples/s (CPUs %s, %.2f CPU ms/sample): %.2fx; load %s" % (
                  i + 1, one, r1[0]["cpulist"] or "all", c1, a.ranks, many,
                  " | ".join(r["cpulist"] or "all" for r in rn), cn, many / one,
                  open("/proc/loadavg").read().split()[0]), flush=True)
    print("median %d ranks / 1 rank: %.2fx (target >= %.1fx); CPU per sample, %d ranks / 1: "
          "%.2f" % (a.ranks, statistics.median(ratios), 0.9 * a.ranks, a.ranks,
                    statistics.median(cpus)))


if __name__ == "__main__":
    main()
