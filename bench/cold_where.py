#!/usr/bin/python3
"""Where a cold run's time goes, seen from the disk: /proc/diskstats sampled
every 5 ms beside one command (page cache dropped first; root).

Prints, for the command's life: reads completed and merged, bytes, mean
request size, the mean depth at the device (weighted time over wall time),
the share of 10 ms buckets by reads in flight (0, 1-7, 8-15, 16-31, 32-63,
64+), MB/s and reads in flight in 0.5 s steps (--step), and the process tree's CPU (user+sys).  With
--files DIR the data bytes and count of DIR's regular files (O_DIRECT reads
round to 4 KiB) are taken off, leaving what the opens and everything else
read: the metadata (folder blocks, inode tables).

usage: cold_where.py [--files DIR] [--no-drop] -- COMMAND...   (root)
"""
import argparse
import os
import resource
import subprocess
import sys
import threading
import time


def drop():
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def disk_of(path):
    out = subprocess.run(["df", "--output=source", path], capture_output=True, text=True)
    return out.stdout.split()[-1].split("/")[-1]


def stats(name):
    for line in open("/proc/diskstats"):
        f = line.split()
        if f[2] == name:
            # reads, merged, sectors, ms reading, in flight, io ticks, weighted ms
            return (int(f[3]), int(f[4]), int(f[5]), int(f[6]), int(f[11]), int(f[12]),
                    int(f[13]))
    raise SystemExit("no device %s in /proc/diskstats" % name)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", help="folder whose files are the data read (taken off)")
    ap.add_argument("--disk", help="device name [the one under --files or /]")
    ap.add_argument("--no-drop", action="store_true")
    ap.add_argument("--step", type=float, default=0.5, help="seconds a MB/s figure")
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.cmd[1:] if a.cmd and a.cmd[0] == "--" else a.cmd
    disk = a.disk or disk_of(a.files or "/")
    nfiles = dbytes = 0
    if a.files:
        for dp, _, fs in os.walk(a.files):
            for f in fs:
                st = os.lstat(os.path.join(dp, f))
                if not f.startswith(".") and os.path.isfile(os.path.join(dp, f)):
                    nfiles += 1
                    dbytes += (st.st_size + 4095) // 4096 * 4096
    if not a.no_drop:
        drop()
        time.sleep(0.5)
    samples = []
    done = threading.Event()

    def sampler():
        while not done.is_set():
            samples.append((time.monotonic(), stats(disk)))
            time.sleep(0.005)

    t = threading.Thread(target=sampler)
    t.start()
    t0 = time.monotonic()
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run(cmd, capture_output=True, text=True)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = time.monotonic() - t0
    done.set()
    t.join()
    sys.stdout.write(p.stdout)
    s0, s1 = samples[0][1], samples[-1][1]
    reads, merged, sect = s1[0] - s0[0], s1[1] - s0[1], s1[2] - s0[2]
    span = samples[-1][0] - samples[0][0]
    depth = (s1[6] - s0[6]) / 1000 / span
    print("# disk %s, %.2f s, %d reads (+%d merged), %.1f MB, %.1f KiB a read, mean depth "
          "%.1f, busy %.0f %%, CPU %.2f s (user %.2f, sys %.2f), load %s" % (
              disk, span, reads, merged, sect * 512 / 1e6, sect * 512 / 1024 / max(reads, 1),
              depth, 100 * (s1[5] - s0[5]) / 1000 / span,
              (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime),
              r1.ru_utime - r0.ru_utime, r1.ru_stime - r0.ru_stime,
              open("/proc/loadavg").read().split()[0]))
    if a.files:
        print("# beside %d files' %.1f MB (4 KiB rounded): %d more reads, %.1f MB more "
              "(metadata and splits)" % (nfiles, dbytes / 1e6, reads + merged - nfiles,
                                         (sect * 512 - dbytes) / 1e6))
    # reads in flight: the share of 10 ms buckets at each level
    edges = [(0, 0), (1, 7), (8, 15), (16, 31), (32, 63), (64, 1 << 30)]
    hist = [0] * len(edges)
    for _, s in samples:
        for i, (lo, hi) in enumerate(edges):
            if lo <= s[4] <= hi:
                hist[i] += 1
    print("# in flight (share of samples): " + ", ".join(
        "%s %.0f %%" % ("%d-%d" % e if e[1] < 1 << 30 else "%d+" % e[0], 100 * h / len(samples))
        for e, h in zip(edges, hist)))
    steps, j = [], 0
    step = a.step
    while j < len(samples):
        k = j
        while k < len(samples) and samples[k][0] - samples[j][0] < step:
            k += 1
        if k >= len(samples):
            k = len(samples) - 1
        if k > j:
            dt = samples[k][0] - samples[j][0]
            steps.append("%.0f/%d" % ((samples[k][1][2] - samples[j][1][2]) * 512 / 1e6 / dt,
                                      samples[k][1][4]))
        j = k + 1 if k > j else len(samples)
    print("# MB/s/in flight by %.2f s: %s" % (step, " ".join(steps)))
    if p.returncode:
        sys.stderr.write(p.stderr)
    return p.returncode


if __name__ == "__main__":
    sys.exit(main())
