#!/usr/bin/python3
"""Restart-indexed JPEGs (issue 15): stoker image mode on transcoded shards
against torchvision's DataLoader on the original folder and against stoker
on untranscoded shards, warm page cache, RandomResizedCrop(224) + flip,
uint8, the same images on every side, whole passes.

Prepares (once, under --work): the folder packed into shards as it is
(`stoker pack`) and transcoded (`stoker pack --transcode`), and the folder
transcoded (`stoker transcode --threads 1`, for the images/s per core and the
size).  With --check, PIL decodes every original and transcoded file and the
pixels must be equal.  Then --rounds rounds, each running torchvision
(DataLoader, --workers workers), stoker on the plain shards and stoker on the
transcoded shards (--decode-threads, default the CPU count: equal cores) in
an order that rotates from round to round; each round's ratios are printed,
and the medians are the result.  Beside the images/s ratios: the ratio of
CPU seconds per image (torchvision's main process and workers, stoker's
process), which a machine shared with other work shifts less.

usage: restart_bench.py [--data DIR] [--work DIR] [--images N] [--rounds R]
                        [--check] [--stoker BIN]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import image_bench  # noqa: E402  (its torchvision side and warm())

# torchvision's side, as image_bench.py's, also timing the CPU the pass
# took: the main process and its workers (joined when the pass ends), so that
# a loaded machine's scheduling shares can be told apart from work done.
TV = r"""
import resource, sys, time, torch
from torchvision import datasets, transforms
from torch.utils.data import DataLoader
root, workers, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
tf = transforms.Compose([transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip(),
                         transforms.PILToTensor()])
dl = DataLoader(datasets.ImageFolder(root, transform=tf), batch_size=batch, num_workers=workers)
def cpu():
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime
c0, t0, k = cpu(), time.monotonic(), 0
for x, y in dl:
    k += len(x)
t = time.monotonic() - t0
print(k / t, (cpu() - c0) / k * 1000)
"""

CHECK = r"""
import os, sys
import numpy as np
from PIL import Image
a, b = sys.argv[1], sys.argv[2]
n = same = 0
for d, _, files in os.walk(a):
    for f in sorted(files):
        if not f.lower().endswith((".jpg", ".jpeg")):
            continue
        p = os.path.join(d, f)
        q = os.path.join(b, os.path.relpath(p, a))
        n += 1
        same += np.array_equal(np.asarray(Image.open(p)), np.asarray(Image.open(q)))
print(n, same)
"""


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw).stdout


def subset(a, src):
    """The folder of --images N files (the same random subset torchvision
    reads), hard-linked; or the whole folder."""
    listfile = os.path.join(a.work, "subset.txt")
    total = int(image_bench.torchvision(a, 0, listfile))
    if a.images <= 0 or a.images >= total:
        a.images = total
        return src
    out = os.path.join(a.work, "subset-%d" % a.images)
    if not os.path.isdir(out):
        tmp = out + ".tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        for line in open(listfile):
            p = line.split("\t")[0]
            q = os.path.join(tmp, os.path.relpath(p, src))
            os.makedirs(os.path.dirname(q), exist_ok=True)
            try:
                os.link(p, q)
            except OSError:
                shutil.copyfile(p, q)
        os.rename(tmp, out)
    return out


def prepare(a, folder):
    """Shards as they are, shards transcoded, the folder transcoded on one
    thread; the figures of each step (cached in prep.json)."""
    tag = os.path.basename(folder.rstrip("/"))
    meta = os.path.join(a.work, "prep-%s.json" % tag)
    if os.path.exists(meta):
        return json.load(open(meta))
    info = {}
    for name, extra in (("plain", []), ("rst", ["--transcode"])):
        out = os.path.join(a.work, "%s-%s" % (tag, name))
        shutil.rmtree(out, ignore_errors=True)
        t0 = time.monotonic()
        j = json.loads(run([a.stoker, "pack", "--json"] + extra + [folder, out]))
        j["wall_s"] = time.monotonic() - t0
        info[name] = j
    out = os.path.join(a.work, "%s-folder-rst" % tag)
    shutil.rmtree(out, ignore_errors=True)
    info["transcode"] = json.loads(run([a.stoker, "transcode", "--json", "--threads", "1",
                                        folder, out]))
    json.dump(info, open(meta, "w"), indent=1)
    return info


def stoker(a, shards):
    out = run([a.stoker, "bench", shards, "--image", "--json", "--cache", "as-is", "--epochs",
               "1", "--no-baseline", "--batch-size", str(a.batch), "--decode-threads",
               str(a.decode_threads)])
    return json.loads(out)["stoker"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=os.path.expanduser("~/.cache/stoker/default-10000"))
    ap.add_argument("--work", default=os.environ.get("WORK", "/tmp/stoker-restart-bench"))
    ap.add_argument("--images", type=int, default=0, help="a random subset of N (0: all)")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--workers", type=int, default=2, help="DataLoader workers")
    ap.add_argument("--decode-threads", type=int, default=os.cpu_count())
    ap.add_argument("--check", action="store_true",
                    help="PIL decodes every file before and after: the same pixels")
    ap.add_argument("--stoker", default=os.path.join(ROOT, os.environ.get("BUILD", "build"),
                                                     "stoker"))
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    folder = subset(a, a.data)
    a.data = folder  # torchvision reads the same images stoker does
    info = prepare(a, folder)
    tag = os.path.basename(folder.rstrip("/"))
    plain, rst = (os.path.join(a.work, "%s-%s" % (tag, n)) for n in ("plain", "rst"))
    tc = info["transcode"]
    print("images: %d of %s; %d CPUs; DataLoader %d workers, stoker %d decode threads; batch %d"
          % (a.images, folder, os.cpu_count(), a.workers, a.decode_threads, a.batch))
    print("transcode (1 thread): %d of %d files, %.1f files/s, %.1f files per CPU second, "
          "rewritten JPEGs at %.2f %% of their size; shards %d -> %d bytes (%.2f %%)" % (
              tc["transcoded"], tc["files"], tc["files_per_s_per_thread"],
              tc.get("files_per_cpu_s", 0),
              100 * tc["transcoded_size_ratio"], info["plain"]["bytes"], info["rst"]["bytes"],
              100.0 * info["rst"]["bytes"] / info["plain"]["bytes"]))
    if tc["kept_count"]:
        print("  kept as they were: %s" % tc["kept"])
    if a.check:
        n, same = map(int, run([sys.executable, "-c", CHECK, folder,
                                os.path.join(a.work, "%s-folder-rst" % tag)]).split())
        print("PIL: %d of %d transcoded files decode to the original's pixels" % (same, n))
    for d in (folder, plain, rst):
        image_bench.warm(d)
    print("load average at the start: %.2f" % os.getloadavg()[0])
    print("%-6s %12s %12s %12s %9s %9s  %11s  %s" % (
        "round", "torchvision", "stoker", "stoker rst", "rst/tv", "rst/plain", "CPU: tv plain",
        "rst: fast share, entropy"))
    sides = ("tv", "plain", "rst")
    res = {s: [] for s in sides}
    r_tv, r_plain, c_tv, c_plain, last = [], [], [], [], None
    for r in range(a.rounds):
        order = sides[r % 3:] + sides[:r % 3]  # rotate: no side always first
        got, cpu = {}, {}
        for s in order:
            if s == "tv":
                got[s], cpu[s] = map(float, run([sys.executable, "-c", TV, folder,
                                                 str(a.workers), str(a.batch)]).split())
            else:
                st = stoker(a, plain if s == "plain" else rst)
                got[s], cpu[s] = st["samples_per_s"], st["cpu_s_per_1000"]
                if s == "rst":
                    last = st
        for s in sides:
            res[s].append(got[s])
        r_tv.append(got["rst"] / got["tv"])
        r_plain.append(got["rst"] / got["plain"])
        c_tv.append(cpu["tv"] / cpu["rst"])
        c_plain.append(cpu["plain"] / cpu["rst"])
        print("%-6d %12.0f %12.0f %12.0f %9.2f %9.2f  %5.2f %5.2f  %.3f, %.3f" % (
            r + 1, got["tv"], got["plain"], got["rst"], r_tv[-1], r_plain[-1], c_tv[-1],
            c_plain[-1], last.get("decode_fast_share", 0), last.get("decode_entropy_share", 0)),
            flush=True)
    if not a.rounds:
        return
    med = {s: statistics.median(v) for s, v in res.items()}
    print("medians (images/s): torchvision %.0f, stoker %.0f, stoker on transcoded shards %.0f"
          % (med["tv"], med["plain"], med["rst"]))
    print("median ratio, stoker transcoded / torchvision: %.2f   (target >= 3.5)"
          % statistics.median(r_tv))
    print("median ratio, stoker transcoded / stoker plain: %.2f   (target >= 1.3)"
          % statistics.median(r_plain))
    print("per CPU second (CPU time per image, the other side's over ours): %.2f x torchvision, "
          "%.2f x stoker plain" % (statistics.median(c_tv), statistics.median(c_plain)))
    print("load average at the end: %.2f" % os.getloadavg()[0])


if __name__ == "__main__":
    main()
