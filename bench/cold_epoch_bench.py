#!/usr/bin/python3
"""Whole cold epochs against fio's best random read (issue 26).

For each PATH (a folder or a folder of tar shards) and each round, in an
order that alternates from round to round, with the page cache dropped
before every run:
  fio      random reads of PATH's mean sample size on one laid-out file on
           the same filesystem (O_DIRECT, io_uring, QD 16, 32 and 64; the
           best of the three is the reference for that round);
  stoker   `stoker bench PATH --cache cold --runtime 0 --ramp 0 -E 1
           --no-baseline`: exactly one whole cold epoch, start-up and the
           queue-depth probe included (OPTS adds options).
Each row gives the medians over the rounds of stoker's MB/s, fio's best,
their ratio (the median of the rounds' ratios), and stoker's MB/s against
the bytes the device's counters (/proc/diskstats) saw per second while the
epoch was measured, less what other processes read from it (sampled for
1 s just before: on a shared disk the counters count everyone's reads).
A second line per path gives fio at each depth (the median over the rounds)
and stoker's median against the best of those: on a disk whose rate swings
from one second to the next, the best of three fio runs in a round is also
the luckiest of three draws, which one stoker epoch a round does not get.

usage: cold_epoch_bench.py [--rounds N] [--opts "..."] PATH...   (root)
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def drop():
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def mean_size(stoker, path):
    """Mean sample size: the bench's bytes over its samples (one warm epoch)."""
    out = subprocess.run([stoker, "bench", path, "--runtime", "0", "--ramp", "0", "-E", "1",
                          "--no-baseline", "--json", "--cache", "as-is"],
                         check=True, capture_output=True, text=True).stdout
    s = json.loads(out)["stoker"]
    return s["bytes"] / s["samples"]


def fio_best(ffile, bs, secs, qds, per_qd=None):
    """fio's best MB/s over qds; each depth's figure appended to per_qd[qd]."""
    best = 0
    for qd in qds:
        drop()
        out = subprocess.run(["fio", "--output-format=json", "--name=x", "--ioengine=io_uring",
                              "--direct=1", "--filename=" + ffile, "--rw=randread",
                              "--bs=%d" % bs, "--iodepth=%d" % qd, "--time_based",
                              "--runtime=%d" % secs, "--randrepeat=0"],
                             check=True, capture_output=True, text=True).stdout
        mb = json.loads(out)["jobs"][0]["read"]["bw_bytes"] / 1e6
        if per_qd is not None:
            per_qd.setdefault(qd, []).append(mb)
        best = max(best, mb)
    return best


def disk_read(name):
    for line in open("/proc/diskstats"):
        f = line.split()
        if f[2] == name:
            return int(f[5]) * 512
    return 0


def stoker_epoch(stoker, path, opts, disk):
    drop()
    # what other processes read from the device meanwhile (a shared disk)
    a = disk_read(disk)
    time.sleep(1)
    bg = (disk_read(disk) - a) / 1e6
    out = subprocess.run([stoker, "bench", path, "--cache", "cold", "--runtime", "0", "--ramp",
                          "0", "-E", "1", "--no-baseline", "--json", "-r", "1"] + opts,
                         check=True, capture_output=True, text=True).stdout
    j = json.loads(out)
    s = j["stoker"]
    mb = s["bytes"] / s["seconds"] / 1e6
    dev = s.get("device", {}).get("read_mb_per_s", 0)
    return mb, dev, s["seconds"], j.get("queue_depth"), j.get("invalid"), bg


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("paths", nargs="+")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--opts", default="", help="more `stoker bench` options")
    ap.add_argument("--fio-seconds", type=int, default=3)
    ap.add_argument("--fio-qd", default="16,32,64", help="fio's queue depths (the best is the reference)")
    ap.add_argument("--fio-file", help="laid-out file for fio [beside the first PATH]")
    ap.add_argument("--fio-size", default="4G")
    ap.add_argument("--stoker", default=os.path.join(ROOT, "build", "stoker"))
    ap.add_argument("--compare", help="another stoker binary, run in the same rounds (before/after)")
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("skipped: cold runs need root (drop_caches)")
        return 0
    ffile = a.fio_file or os.path.join(os.path.dirname(os.path.abspath(a.paths[0])), ".fio-rand")
    if not os.path.exists(ffile):
        subprocess.run(["fio", "--name=layout", "--filename=" + ffile, "--size=" + a.fio_size,
                        "--rw=write", "--bs=1M", "--iodepth=8", "--ioengine=io_uring",
                        "--direct=1", "--output-format=terse"], check=True,
                       capture_output=True)
    opts = a.opts.split()
    disk = subprocess.run(["df", "--output=source", a.paths[0]], capture_output=True,
                          text=True).stdout.split()[-1].split("/")[-1]
    print("# %s, %s, %s, fio QD %s, %d rounds alternating, load average %s" % (
        time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), os.uname().release,
        subprocess.run(["fio", "--version"], capture_output=True, text=True).stdout.strip(),
        a.fio_qd, a.rounds, open("/proc/loadavg").read().split()[0]))
    print("%-36s %8s %10s %10s %7s %10s %8s %8s %s" % (
        "path", "size", "stoker", "fio best", "ratio", "device", "others", "st/(dev-others)",
        "seconds, qd"))
    for p in a.paths:
        bs = int(round(mean_size(a.stoker, p) / 512)) * 512
        rows, other, per_qd = [], [], {}
        qds = [int(q) for q in a.fio_qd.split(",")]
        for r in range(a.rounds):
            if r % 2 == 0:
                f = fio_best(ffile, bs, a.fio_seconds, qds, per_qd)
                st = stoker_epoch(a.stoker, p, opts, disk)
                if a.compare:
                    other.append((stoker_epoch(a.compare, p, opts, disk), f))
            else:
                if a.compare:
                    other.append((stoker_epoch(a.compare, p, opts, disk), 0))
                st = stoker_epoch(a.stoker, p, opts, disk)
                f = fio_best(ffile, bs, a.fio_seconds, qds, per_qd)
                if a.compare:
                    other[-1] = (other[-1][0], f)
            rows.append((st, f))
            print("  round %d: stoker %.0f MB/s (device %.0f, others %.0f, %.3f s, qd %s%s), "
                  "fio best %.0f MB/s" % (r + 1, st[0], st[1], st[5], st[2], st[3],
                                          ", INVALID: " + st[4] if st[4] else "", f),
                  file=sys.stderr)
        med = statistics.median
        print("%-36s %7.0fK %10.0f %10.0f %7.2f %10.0f %8.0f %8.2f %s" % (
            p[-36:], bs / 1024, med([x[0][0] for x in rows]), med([x[1] for x in rows]),
            med([x[0][0] / x[1] for x in rows]), med([x[0][1] for x in rows]),
            med([x[0][5] for x in rows]),
            med([x[0][0] / (x[0][1] - x[0][5]) if x[0][1] > x[0][5] else 0 for x in rows]),
            ", ".join("%.2f s qd %s" % (x[0][2], x[0][3]) for x in rows)))
        fio_med = {q: med(v) for q, v in per_qd.items()}
        best_qd = max(fio_med, key=fio_med.get)
        print("%-36s %8s %10s %10.0f %7.2f   (fio by depth, medians: %s; the best, QD %d)" % (
            "", "", "", fio_med[best_qd], med([x[0][0] for x in rows]) / fio_med[best_qd],
            ", ".join("QD %d %.0f" % (q, fio_med[q]) for q in sorted(fio_med)), best_qd))
        if a.compare:
            print("%-36s %8s %10.0f %10s %7.2f   (--compare %s)" % (
                "", "", med([x[0][0] for x in other]), "", med([x[0][0] / x[1] for x in other]),
                a.compare))
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
