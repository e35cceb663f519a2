#!/usr/bin/python3
"""The storage path against fio, cold page cache, fio side by side (issue 13).

Each round runs, in an order that alternates from round to round, with the
page cache dropped before every run:
  fio      random reads of the folder's mean file size and of the shards' mean
           member size (O_DIRECT, io_uring, QD 16/32/64/128: the best is the
           reference), on one laid-out file on the same filesystem; and a
           sequential read of the shard files (O_DIRECT, 1 MiB, QD 16);
  stoker   `stoker bench --cold` with default options on the folder, on the
           shards (global shuffle) and on the shards with --shuffle-mode
           shard; extra variants with --variant;
  torch    PyTorch's DataLoader over the folder (whole-file reads; best of
           num_workers 0, 2, 4), cold, and warm with stoker warm beside it.
The figures are medians over the rounds, and each ratio is the median of
the rounds' ratios (each round's runs are minutes apart at most).

usage: storage_bench.py --data DIR --shards DIR [--rounds N] [--lock FILE]
       [--variant NAME=ARGS ...] [--json OUT]      (root: drops the cache)
"""
import argparse
import fcntl
import glob
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import loader_bench  # noqa: E402  (the DataLoader side, shared)

LOCK = None


def locked(fn, *a, **k):
    """Runs one timed measurement holding the measure lock (when given), the
    page cache dropped inside it."""
    fd = None
    if LOCK:
        fd = os.open(LOCK, os.O_RDWR | os.O_CREAT, 0o666)
        fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        return fn(*a, **k)
    finally:
        if fd is not None:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)


def drop():
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def load():
    return open("/proc/loadavg").read().split()[0]


def stoker(binary, path, extra):
    drop()
    # --ramp 0: the auto probe's first levels count, as fio's start does
    out = subprocess.run([binary, "bench", path, "--cold", "--no-baseline", "--json", "--ramp", "0"]
                         + extra,
                         check=True, capture_output=True, text=True).stdout
    j = json.loads(out)
    return {"mb_s": j["stoker"]["mb_per_s"], "sps": j["stoker"]["samples_per_s"],
            "tuning": j.get("tuning", []), "load": load()}


def stoker_warm(binary, path):
    out = subprocess.run([binary, "bench", path, "--no-baseline", "--json", "--epochs", "3"],
                         check=True, capture_output=True, text=True).stdout
    j = json.loads(out)
    return {"mb_s": j["stoker"]["mb_per_s"], "sps": j["stoker"]["samples_per_s"]}


def fio(args):
    drop()
    out = subprocess.run(["fio", "--output-format=json", "--name=x", "--ioengine=io_uring",
                          "--direct=1", "--readonly"] + args,
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out[out.index("{"):])["jobs"][0]["read"]["bw_bytes"] / 1e6


def fio_rand(f, bs, qd, secs):
    return fio(["--filename=" + f, "--rw=randread", "--bs=%d" % bs, "--iodepth=%d" % qd,
                "--time_based", "--runtime=%d" % secs, "--randrepeat=0"])


def fio_seq(files):
    return fio(["--rw=read", "--bs=1M", "--iodepth=16",
                "--filename=" + ":".join(f.replace(":", "\\:") for f in files)])


def mean_size(paths):
    return sum(os.path.getsize(p) for p in paths) / len(paths)


def member_mean(binary, shards):
    out = subprocess.run([binary, "bench", shards, "--no-baseline", "--json", "--cache", "as-is",
                          "--engine", "null", "--epochs", "1"],
                         check=True, capture_output=True, text=True).stdout
    j = json.loads(out)
    return j["stoker"]["bytes"] / j["stoker"]["samples"]


def main():
    global LOCK
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", required=True, help="a folder dataset (ImageFolder layout)")
    ap.add_argument("--shards", required=True, help="the same samples packed (stoker pack)")
    ap.add_argument("--stoker", default=os.path.join(ROOT, os.environ.get("BUILD", "build"),
                                                     "stoker"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--fio-seconds", type=int, default=4)
    ap.add_argument("--fio-file", help="laid-out file for fio's random reads [DATA/../.fio-rand]")
    ap.add_argument("--fio-size", default="4G")
    ap.add_argument("--lock", help="flock this file around each timed run (e.g. /work/.measure.lock)")
    ap.add_argument("--variant", action="append", default=[],
                    help="NAME=WHERE:ARGS, WHERE folder|shards: an extra stoker run, e.g. "
                         "'direct=folder:--direct'")
    ap.add_argument("--no-torch", action="store_true", help="skip the DataLoader runs")
    ap.add_argument("--json")
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("skipped: cold-cache runs need root (drop_caches)")
        return 0
    LOCK = a.lock
    paths = loader_bench.files_of(a.data)
    shard_files = sorted(glob.glob(os.path.join(a.shards, "*.tar")))
    fmean = mean_size(paths)
    mmean = member_mean(a.stoker, a.shards)
    ffile = a.fio_file or os.path.join(os.path.dirname(os.path.abspath(a.data)), ".fio-rand")
    if not os.path.exists(ffile):
        subprocess.run(["fio", "--name=layout", "--filename=" + ffile, "--size=" + a.fio_size,
                        "--rw=write", "--bs=1M", "--iodepth=8", "--ioengine=io_uring",
                        "--direct=1", "--output-format=terse"], check=True,
                       capture_output=True)
    bs_f = max(4096, int(fmean) // 4096 * 4096)
    bs_m = max(4096, int(mmean) // 4096 * 4096)
    variants = []
    for v in a.variant:
        name, rest = v.split("=", 1)
        where, args = rest.split(":", 1)
        variants.append((name, a.data if where == "folder" else a.shards, shlex.split(args)))
    runs = [("folder", lambda: stoker(a.stoker, a.data, [])),
            ("shards_global", lambda: stoker(a.stoker, a.shards, [])),
            ("shards_shard", lambda: stoker(a.stoker, a.shards, ["--shuffle-mode", "shard"])),
            ("fio_seq", lambda: fio_seq(shard_files))]
    for qd in (16, 32, 64, 128):
        runs.append(("fio_rand_file_qd%d" % qd,
                     lambda qd=qd: fio_rand(ffile, bs_f, qd, a.fio_seconds)))
        if bs_m != bs_f:
            runs.append(("fio_rand_member_qd%d" % qd,
                         lambda qd=qd: fio_rand(ffile, bs_m, qd, a.fio_seconds)))
    for name, path, args in variants:
        runs.append((name, lambda p=path, x=args: stoker(a.stoker, p, x)))
    if not a.no_torch:
        runs.append(("stoker_warm", lambda: stoker_warm(a.stoker, a.data)))
        for w in (0, 2, 4):
            runs.append(("torch_cold_w%d" % w,
                         lambda w=w: loader_bench.dataloader_rate(paths, w, 256, True)[1] / 1e6))
            runs.append(("torch_warm_w%d" % w,
                         lambda w=w: loader_bench.dataloader_rate(paths, w, 256, False)[1] / 1e6))

    print("# %s, load %s; folder %s (%d files, mean %.0f B), shards %s (%d files, member mean "
          "%.0f B); fio block %d / %d B on %s" % (time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                                                 load(), a.data, len(paths), fmean, a.shards,
                                                 len(shard_files), mmean, bs_f, bs_m, ffile),
          flush=True)
    rows = []
    for rnd in range(a.rounds):
        order = runs if rnd % 2 == 0 else list(reversed(runs))
        res = {}
        for name, fn in order:
            r = locked(fn)
            res[name] = r
            v = r["mb_s"] if isinstance(r, dict) else r
            print("  round %d %-24s %8.1f MB/s%s" % (rnd + 1, name, v,
                  ("  load %s  %s" % (r.get("load", "-"), " | ".join(r.get("tuning", [])[1:2]))
                   if isinstance(r, dict) else "")), flush=True)
        rows.append(res)

    def mb(r, k):
        v = r[k]
        return v["mb_s"] if isinstance(v, dict) else v

    def best_fio(r, kind):
        ks = [k for k in r if k.startswith("fio_rand_%s_" % kind)] or \
             [k for k in r if k.startswith("fio_rand_file_")]
        return max(mb(r, k) for k in ks)

    def med(f):
        return statistics.median(f(r) for r in rows)

    out = {"rounds": rows, "file_mean": fmean, "member_mean": mmean}
    table = [
        ("folder cold, defaults / fio best random read at the mean file size",
         lambda r: mb(r, "folder"), lambda r: best_fio(r, "file"), 0.90),
        ("shards cold, global shuffle / fio best random read at the mean member size",
         lambda r: mb(r, "shards_global"), lambda r: best_fio(r, "member"), 0.95),
        ("shards cold, shard shuffle / fio sequential read of the shards",
         lambda r: mb(r, "shards_shard"), lambda r: mb(r, "fio_seq"), 0.95),
    ]
    if not a.no_torch:
        table.append(("folder cold, defaults / DataLoader best of 0, 2, 4 workers",
                      lambda r: mb(r, "folder"),
                      lambda r: max(mb(r, "torch_cold_w%d" % w) for w in (0, 2, 4)), 2.0))
        table.append(("folder warm, defaults / DataLoader best of 0, 2, 4 workers",
                      lambda r: mb(r, "stoker_warm"),
                      lambda r: max(mb(r, "torch_warm_w%d" % w) for w in (0, 2, 4)), 4.0))
    for name, path, _ in variants:
        base = "folder" if path == a.data else "shards_global"
        table.append(("variant %s / defaults (%s)" % (name, base), lambda r, n=name: mb(r, n),
                      lambda r, b=base: mb(r, b), None))
    print("\n| comparison | stoker MB/s | reference MB/s | ratio (median of rounds) | target |")
    print("| --- | ---: | ---: | ---: | --- |")
    out["ratios"] = {}
    for name, s, ref, target in table:
        ratio = med(lambda r: s(r) / ref(r))
        out["ratios"][name] = ratio
        print("| %s | %.0f | %.0f | **%.2f** | %s |" % (
            name, med(s), med(ref), ratio,
            "" if target is None else ("≥ %.2f %s" % (target, "met" if ratio >= target
                                                        else "NOT met"))))
    print("\nfio by queue depth (MB/s, medians): " + ", ".join(
        "%s %.0f" % (k[len("fio_rand_"):], med(lambda r, k=k: mb(r, k)))
        for k in sorted(rows[0]) if k.startswith("fio_rand_")))
    print("stoker's choices (last round): " + " / ".join(rows[-1]["folder"]["tuning"]))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
