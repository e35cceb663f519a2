#!/usr/bin/python3
"""Tar shards against the folder they were packed from, cold page cache, one
run (issue 7): the folder, the shards in global shuffle, the shards in shard
shuffle, and fio's sequential read of the same shard files (O_DIRECT, 1 MiB,
io_uring, queue depth 16) as the disk's sequential bandwidth.

usage: shards_bench.py [--data DIR] [--shards DIR] [--stoker BIN]   (root: drops the cache)
"""
import argparse
import glob
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def drop():
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def bench(stoker, path, *extra):
    out = subprocess.run([stoker, "bench", path, "--cold", "--no-baseline", "--json"] + list(extra),
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)["stoker"]


def fio_seq(files):
    drop()
    args = ["fio", "--output-format=json", "--name=seq", "--rw=read", "--bs=1M", "--direct=1",
            "--ioengine=io_uring", "--iodepth=16", "--readonly",
            "--filename=" + ":".join(f.replace(":", "\\:") for f in files)]
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    return json.loads(out[out.index("{"):])["jobs"][0]["read"]["bw_bytes"] / 1e6


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default="/tmp/stoker-data20k")
    ap.add_argument("--shards", default="/tmp/stoker-shards20k")
    ap.add_argument("--stoker", default=os.path.join(ROOT, os.environ.get("BUILD", "build"),
                                                     "stoker"))
    ap.add_argument("--window", type=int, default=1000)
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("skipped: cold-cache runs need root (drop_caches)")
        return 0
    if not glob.glob(os.path.join(a.shards, "*.tar")):
        subprocess.run([a.stoker, "pack", a.data, a.shards, "--shard-size", "256MiB",
                        "--seed", "0"], check=True)
    files = sorted(glob.glob(os.path.join(a.shards, "*.tar")))
    folder = bench(a.stoker, a.data)
    glob_ = bench(a.stoker, a.shards)
    shard = bench(a.stoker, a.shards, "--shuffle-mode", "shard", "--shuffle-window", str(a.window))
    seq = fio_seq(files)
    print("cold page cache; %s (folder) and %s (%d shards)" % (a.data, a.shards, len(files)))
    print("%-44s %10s %10s" % ("", "samples/s", "MB/s"))
    for name, r in (("folder", folder), ("shards, global shuffle", glob_),
                    ("shards, shard shuffle (window %d)" % a.window, shard)):
        print("%-44s %10.0f %10.1f" % (name, r["samples_per_s"], r["mb_per_s"]))
    print("%-44s %10s %10.1f" % ("fio sequential read of the shards", "", seq))
    print("\nshards global / folder samples/s:           %.2f  (target >= 1.5)"
          % (glob_["samples_per_s"] / folder["samples_per_s"]))
    print("shard shuffle MB/s / fio sequential MB/s:   %.2f  (target >= 0.80)"
          % (shard["mb_per_s"] / seq))
    return 0


if __name__ == "__main__":
    sys.exit(main())
