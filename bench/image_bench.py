#!/usr/bin/python3
"""Image pipeline against torchvision, warm page cache, one run (issue 4):
stoker bench --image (224×224 uint8, RandomResizedCrop + flip, decode threads
= CPU count) vs torchvision ImageFolder + RandomResizedCrop(224) +
RandomHorizontalFlip + PILToTensor through DataLoader (2 workers and 0).

usage: image_bench.py [--data DIR] [--images N] [--stoker BIN]
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

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


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=os.environ.get("DATA", "/tmp/stoker-data20k"))
    ap.add_argument("--images", type=int, default=5000)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--stoker", default=os.path.join(ROOT, os.environ.get("BUILD", "build"),
                                                     "stoker"))
    a = ap.parse_args()
    ncpu = os.cpu_count()
    warm(a.data)
    res = {}
    for w in (2, 0):
        out = subprocess.run([sys.executable, "-c", TV, a.data, str(a.images), str(w),
                              str(a.batch)], check=True, capture_output=True, text=True)
        res["torchvision_%d_workers" % w] = float(out.stdout.split()[0])
    out = subprocess.run([a.stoker, "bench", a.data, "--image", "--json", "--cache", "warm",
                          "--batch-size", str(a.batch), "--max-samples", str(a.images),
                          "--decode-threads", str(ncpu)],
                         check=True, capture_output=True, text=True).stdout
    j = json.loads(out)
    s = j["stoker"]
    res.update(stoker=s["samples_per_s"], stoker_decode_per_core=s["decode_images_per_s_per_core"],
               baseline_one_thread=j["baseline"]["samples_per_s"])
    print("images: %d of %s, batch %d, %d CPUs, warm page cache" % (a.images, a.data, a.batch, ncpu))
    print("%-52s %10.0f images/s" % ("stoker (%d decode threads)" % ncpu, res["stoker"]))
    print("%-52s %10.0f images/s" % ("  stoker decode per core", res["stoker_decode_per_core"]))
    print("%-52s %10.0f images/s" % ("  stoker's synchronous baseline (1 thread, C decode)",
                                     res["baseline_one_thread"]))
    for w in (2, 0):
        k = "torchvision_%d_workers" % w
        print("%-52s %10.0f images/s   stoker ratio %.2f" % (
            "torchvision DataLoader, %d workers" % w, res[k], res["stoker"] / res[k]))
    print("target: stoker >= 2.5 x torchvision with 2 workers")


if __name__ == "__main__":
    main()
