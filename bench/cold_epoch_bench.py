#!/usr/bin/python3
"""Whole cold epochs against fio's random read at the mean file size (issue 26, 39).

For each PATH (a folder or a folder of tar shards), ROUNDS rounds; a round
is four runs, each after the page cache is dropped and GAP s of idle:
  stoker   `stoker bench PATH --cache cold --runtime 0 --ramp 0 -E 1
           --no-baseline -r 1`: exactly one whole cold epoch, start-up and
           the queue-depth probe included (OPTS adds options);
  fio      random reads of PATH's mean sample size on one laid-out file on
           the same filesystem (O_DIRECT, io_uring) at QD 16, 32 and 64, each
           reading as many bytes as the epoch (`--io_size`): a run is the
           same work as the epoch, start included, and takes as much of the
           disk's burst allowance;
  files    (--fio-files N) fio the same way over PATH's own files
           (`--opendir`, a file at random each read; over N of them, hard
           links in a temporary folder beside PATH, when PATH has more: fio
           opens every file at its start, and its file table stops near
           20,000): the same blocks on the disk, their metadata warm;
in an order rotated by one each round, so no run keeps a place (this
shared virtio disk comes high and low by turns, ±25 %, and slows after
many GB read).  fio's reference depth is the one with the best median over
the rounds; each round's ratio is its stoker epoch over that depth's run
in the same round (a pair: one draw against one draw), and the row's
ratio is the median of those.  The ratio against the best of the round's
three fio runs (the luckiest of three draws: the measure used before) is
printed beside it, and with --fio-files the epoch against fio over the
files (the same pairing).  Per round: the 1-minute load, stoker's depth and the
device's bytes against the samples' (what the opens read beside the data:
folders, inode tables).

usage: cold_epoch_bench.py [--rounds N] [--gap S] [--opts "..."] PATH...   (root)
"""
import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def drop():
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def mean_size(stoker, path):
    """Mean sample size and the epoch's bytes: a walk of a plain folder, else
    the bench's bytes over its samples (one warm epoch)."""
    n = total = 0
    for dp, _, fs in os.walk(path):
        for f in fs:
            if f.endswith(".tar"):
                n = -1
                break
            if not f.startswith("."):
                n += 1
                total += os.lstat(os.path.join(dp, f)).st_size
        if n < 0:
            break
    if n > 0:
        return total / n, total
    out = subprocess.run([stoker, "bench", path, "--runtime", "0", "--ramp", "0", "-E", "1",
                          "--no-baseline", "--json", "--cache", "as-is"],
                         check=True, capture_output=True, text=True).stdout
    s = json.loads(out)["stoker"]
    return s["bytes"] / s["samples"], s["bytes"]


def fio_run(ffile, bs, qd, nbytes, gap, folder=None):
    """fio's MB/s reading nbytes at random, bs a read, at depth qd: in ffile,
    or over the files under folder."""
    drop()
    time.sleep(gap)
    nbytes = max(nbytes // bs, 1) * bs
    where = (["--opendir=" + folder, "--file_service_type=random"] if folder else
             ["--filename=" + ffile])
    out = subprocess.run(["fio", "--output-format=json", "--name=x", "--ioengine=io_uring",
                          "--direct=1", "--rw=randread", "--bs=%d" % bs, "--iodepth=%d" % qd,
                          "--io_size=%d" % nbytes, "--randrepeat=0"] + where,
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out[out.index("{"):])["jobs"][0]["read"]["bw_bytes"] / 1e6


def files_for_fio(path, n):
    """PATH itself when it holds at most n files, else a temporary folder of
    hard links to n of them (chosen with a fixed seed; removed by the caller)."""
    files = sorted(os.path.join(dp, f) for dp, _, fs in os.walk(path) for f in fs
                   if not f.startswith("."))
    if len(files) <= n:
        return path, None
    tmp = tempfile.mkdtemp(prefix=".fio-files-", dir=os.path.dirname(os.path.abspath(path)))
    for i, f in enumerate(random.Random(0).sample(files, n)):
        os.link(f, os.path.join(tmp, "%06d" % i))
    return tmp, tmp


def disk_read(name):
    for line in open("/proc/diskstats"):
        f = line.split()
        if f[2] == name:
            return int(f[5]) * 512
    return 0


def stoker_epoch(stoker, path, opts, disk, gap):
    drop()
    time.sleep(gap)
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
    devb = s.get("device", {}).get("read_bytes", 0) / s["bytes"]
    return mb, dev, s["seconds"], j.get("queue_depth"), j.get("invalid"), bg, devb


def load():
    return open("/proc/loadavg").read().split()[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("paths", nargs="+")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--gap", type=float, default=1.0, help="idle seconds before each run")
    ap.add_argument("--opts", default="", help="more `stoker bench` options")
    ap.add_argument("--fio-qd", default="16,32,64", help="fio's queue depths")
    ap.add_argument("--fio-file", help="laid-out file for fio [beside the first PATH]")
    ap.add_argument("--fio-size", default="4G")
    ap.add_argument("--stoker", default=os.path.join(ROOT, "build", "stoker"))
    ap.add_argument("--fio-files", type=int, default=0, metavar="N",
                    help="fio also over the path's own files (N of them at most)")
    ap.add_argument("--compare", help="another stoker binary, a fifth run each round (before/after)")
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
    qds = [int(q) for q in a.fio_qd.split(",")]
    print("# %s, %s, %s, fio QD %s, %d rounds rotated, gap %.1f s, load average %s" % (
        time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), os.uname().release,
        subprocess.run(["fio", "--version"], capture_output=True, text=True).stdout.strip(),
        a.fio_qd, a.rounds, a.gap, load()))
    print("%-28s %6s %7s %7s %8s %6s %7s %6s %6s %s" % (
        "path", "size", "stoker", "fio", "(QD)", "ratio", "of best", "dev/B", "others",
        "load, stoker's depth by round"))
    med = statistics.median
    for p in a.paths:
        msize, nbytes = mean_size(a.stoker, p)
        bs = max(int(round(msize / 512)) * 512, 512)
        runs = ["stoker"] + qds + (["compare"] if a.compare else [])
        folder = tmp = None
        if a.fio_files:
            folder, tmp = files_for_fio(p, a.fio_files)
            runs += [-q for q in qds]  # negative: fio over the files
        rounds = []
        try:
            for r in range(a.rounds):
                order = runs[r % len(runs):] + runs[:r % len(runs)]
                got = {"load": load()}
                for v in order:
                    if v == "stoker":
                        got[v] = stoker_epoch(a.stoker, p, opts, disk, a.gap)
                    elif v == "compare":
                        got[v] = stoker_epoch(a.compare, p, opts, disk, a.gap)
                    elif v < 0:
                        got[v] = fio_run(ffile, bs, -v, nbytes, a.gap, folder)
                    else:
                        got[v] = fio_run(ffile, bs, v, nbytes, a.gap)
                rounds.append(got)
                st = got["stoker"]
                print("  round %d (load %s): stoker %.0f MB/s (%.3f s, qd %s, device bytes %.3f x "
                      "the samples', others %.0f MB/s%s)%s, fio %s" % (
                          r + 1, got["load"], st[0], st[2], st[3], st[6], st[5],
                          ", INVALID: " + st[4] if st[4] else "",
                          ", compare %.0f MB/s" % got["compare"][0] if a.compare else "",
                          ", ".join("QD %d %.0f" % (q, got[q]) for q in qds)) +
                      ("; fio over the files " + ", ".join("QD %d %.0f" % (q, got[-q]) for q in qds)
                       if a.fio_files else ""), file=sys.stderr)
        finally:
            if tmp:
                shutil.rmtree(tmp)
        fio_med = {q: med([g[q] for g in rounds]) for q in qds}
        bq = max(fio_med, key=fio_med.get)
        ratio = med([g["stoker"][0] / g[bq] for g in rounds])
        of_best = med([g["stoker"][0] / max(g[q] for q in qds) for g in rounds])
        print("%-28s %5.0fK %7.0f %7.0f %8s %6.2f %7.2f %6.3f %6.0f %s" % (
            p[-28:], bs / 1024, med([g["stoker"][0] for g in rounds]), fio_med[bq],
            "(QD %d)" % bq, ratio, of_best, med([g["stoker"][6] for g in rounds]),
            med([g["stoker"][5] for g in rounds]),
            ", ".join("%s %s" % (g["load"], g["stoker"][3]) for g in rounds)))
        print("%-28s %6s   fio by depth, medians: %s" % (
            "", "", ", ".join("QD %d %.0f" % (q, fio_med[q]) for q in qds)))
        if a.fio_files:
            ff = {q: med([g[-q] for g in rounds]) for q in qds}
            fq = max(ff, key=ff.get)
            print("%-28s %6s %7s %7.0f %8s %6.2f   (fio over the files%s; by depth: %s)" % (
                "", "", "", ff[fq], "(QD %d)" % fq, med([g["stoker"][0] / g[-fq] for g in rounds]),
                ", %d of them" % a.fio_files if tmp else "",
                ", ".join("QD %d %.0f" % (q, ff[q]) for q in qds)))
        if a.compare:
            print("%-28s %6s %7.0f %7s %8s %6.2f   (--compare %s)" % (
                "", "", med([g["compare"][0] for g in rounds]), "", "",
                med([g["compare"][0] / g[bq] for g in rounds]), a.compare))
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
