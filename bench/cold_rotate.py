#!/usr/bin/python3
"""Whole cold epochs of several variants, their order rotated round by round.

On this project's shared virtio disk back-to-back cold epochs come high and
low by turns (±25 %), whatever the build: variants run in a fixed order land
on the same turn every round, so an odd number of variants, or the rotation
over several rounds, is what lets their medians be compared.  Each run drops
the page cache (root), waits 0.5 s and runs one whole cold epoch:
`stoker bench PATH --cache cold --runtime 0 --ramp 0 -E 1 --no-baseline
--json -r 1`.  A variant is a stoker binary, then its options; NAME=VALUE
words go to its environment (e.g. STOKER_NO_META_AHEAD=1).  Prints each
run (stderr), then each variant's median MB/s, its ratio to the last
variant's, and its median CPU (cpu_s_per_1000 of the bench's JSON).

usage: cold_rotate.py PATH ROUNDS "STOKER [OPTS] [NAME=VALUE]..." ...   (root)
"""
import json
import os
import statistics
import subprocess
import sys
import time


def drop():
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def main():
    if len(sys.argv) < 4:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    if os.geteuid() != 0:
        print("skipped: cold runs need root (drop_caches)")
        return 0
    path, rounds, variants = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    res = {v: [] for v in variants}
    cpu = {v: [] for v in variants}
    for r in range(rounds):
        order = variants[r % len(variants):] + variants[:r % len(variants)]
        for v in order:
            env = dict(os.environ)
            binp, *extra = v.split()
            args = []
            for e in extra:
                if "=" in e and not e.startswith("-"):
                    k, val = e.split("=", 1)
                    env[k] = val
                else:
                    args.append(e)
            drop()
            time.sleep(0.5)
            out = subprocess.run([binp, "bench", path, "--cache", "cold", "--runtime", "0",
                                  "--ramp", "0", "-E", "1", "--no-baseline", "--json", "-r", "1"]
                                 + args, env=env, check=True, capture_output=True,
                                 text=True).stdout
            j = json.loads(out)
            s = j["stoker"]
            mb = s["bytes"] / s["seconds"] / 1e6
            res[v].append((mb, j.get("queue_depth")))
            cpu[v].append(s.get("cpu_s_per_1000", 0))
            print("round %d %-50s %6.0f MB/s qd %s" % (r + 1, v[-50:], mb, j.get("queue_depth")),
                  file=sys.stderr)
    print("# %s %s, %d rounds, load %s" % (time.strftime("%H:%M UTC", time.gmtime()), path,
                                           rounds, open("/proc/loadavg").read().split()[0]))
    last = statistics.median([x[0] for x in res[variants[-1]]])
    for v in variants:
        m = statistics.median([x[0] for x in res[v]])
        print("%-60s median %6.0f MB/s (%.2f x the last), cpu s/1000 samples %.4f  %s" % (
            v[-60:], m, m / last, statistics.median(cpu[v]),
            " ".join("%.0f/%s" % x for x in res[v])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
