#!/usr/bin/python3
"""Image pipeline against torchvision, warm page cache (issue 4):
stoker bench --image (224×224 uint8, RandomResizedCrop + flip, decode threads
= CPU count) vs torchvision ImageFolder + RandomResizedCrop(224) +
RandomHorizontalFlip + PILToTensor through DataLoader (2 workers and 0).

Both sides read the same images, one whole pass each: all of the folder by
default, or the same random subset of N (--images; stoker reads it as a file
list), so neither side is timed with work in flight past its last sample.
Rounds alternate torchvision (2 workers) and stoker, each round's ratio is
printed, and the median ratio is the result: the machine is shared and one
pair can land on a slow spell.

usage: image_bench.py [--data DIR] [--images N] [--rounds R] [--stoker BIN]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# argv: root n workers batch [list]: with a list path, writes the subset as
# `path<TAB>label` lines and times nothing
TV = r"""
import sys, time, torch
from torchvision import datasets, transforms
from torch.utils.data import DataLoader, Subset
root, n, workers, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
tf = transforms.Compose([transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip(),
                         transforms.PILToTensor()])
ds = datasets.ImageFolder(root, transform=tf)
g = torch.Generator(); g.manual_seed(0)
idx = torch.randperm(len(ds), generator=g)[:n].tolist()
if len(sys.argv) > 5:
    with open(sys.argv[5], "w") as f:
        for i in idx:
            f.write("%s\t%d\n" % ds.samples[i])
    print(len(ds))
    sys.exit(0)
dl = DataLoader(Subset(ds, idx), batch_size=batch, num_workers=workers)
t0 = time.monotonic(); k = 0
for x, y in dl:
    k += len(x)
print(k / (time.monotonic() - t0))
"""


def warm(root):
    for d, _, files in os.walk(root):
        for f in files:
            with open(os.path.join(d, f), "rb") as fh:
                fh.read()


def torchvision(a, workers, listfile=None):
    args = [sys.executable, "-c", TV, a.data, str(a.images), str(workers), str(a.batch)]
    out = subprocess.run(args + ([listfile] if listfile else []), check=True,
                         capture_output=True, text=True)
    return float(out.stdout.split()[0])


def stoker(a, source, ncpu):
    out = subprocess.run([a.stoker, "bench", source, "--image", "--json", "--cache", "as-is",
                          "--epochs", "1", "--no-baseline", "--batch-size", str(a.batch),
                          "--decode-threads", str(ncpu)],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)["stoker"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=os.environ.get("DATA", "/tmp/stoker-data20k"))
    ap.add_argument("--images", type=int, default=0,
                    help="a random subset of N images (0: the whole folder)")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3,
                    help="alternating rounds of torchvision (2 workers) and stoker; "
                         "the ratio reported is the median of the rounds'")
    ap.add_argument("--stoker", default=os.path.join(ROOT, os.environ.get("BUILD", "build"),
                                                     "stoker"))
    a = ap.parse_args()
    ncpu = os.cpu_count()
    warm(a.data)
    with tempfile.TemporaryDirectory() as tmp:
        source = a.data
        listfile = os.path.join(tmp, "subset.txt")
        total = int(torchvision(a, 0, listfile))
        if a.images <= 0 or a.images >= total:
            a.images = total
        else:
            source = listfile
        print("images: %d of %s (%s), batch %d, %d CPUs, warm page cache" % (
            a.images, a.data, "all" if source == a.data else "the same random subset",
            a.batch, ncpu))
        print("%-6s %16s %16s %8s" % ("round", "torchvision (2w)", "stoker", "ratio"))
        ratios, tvs, sts, last = [], [], [], None
        for r in range(a.rounds):
            # alternate which goes first, so a slow spell of the shared
            # machine does not always land on the same side
            if r % 2 == 0:
                tv = torchvision(a, 2)
                last = stoker(a, source, ncpu)
            else:
                last = stoker(a, source, ncpu)
                tv = torchvision(a, 2)
            st = last["samples_per_s"]
            tvs.append(tv)
            sts.append(st)
            ratios.append(st / tv)
            print("%-6d %16.0f %16.0f %8.2f" % (r + 1, tv, st, st / tv), flush=True)
        tv0 = torchvision(a, 0)
    print("%-52s %10.0f images/s" % ("stoker (%d decode threads), median" % ncpu,
                                     statistics.median(sts)))
    print("%-52s %10.0f images/s" % ("  stoker decode per core (last round)",
                                     last["decode_images_per_s_per_core"]))
    print("%-52s %10.0f images/s   median ratio %.2f" % (
        "torchvision DataLoader, 2 workers, median", statistics.median(tvs),
        statistics.median(ratios)))
    print("%-52s %10.0f images/s   ratio %.2f" % ("torchvision DataLoader, 0 workers", tv0,
                                                  statistics.median(sts) / tv0))
    print("target: stoker >= 2.5 x torchvision with 2 workers (median of the rounds' ratios)")


if __name__ == "__main__":
    main()
