#!/usr/bin/python3
"""One core, one process: stoker's decode + RandomResizedCrop(224) + flip of
a file (stoker.Image.decode: the C path the loader's decode threads run)
against PIL's open + convert("RGB") + torchvision's RandomResizedCrop(224)
+ RandomHorizontalFlip + PILToTensor (what each DataLoader worker runs), on
the same files from memory, in short alternating slices so that both see
the same moments of a shared machine; the median of the slices' ratios is
the result.  Complements bench/formats_bench.py (whole pipelines at equal
cores), whose rounds swing with the machine's load.

usage: formats_percore.py DIR [--files N] [--slices K]
"""
import argparse
import io
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
import stoker  # noqa: E402
from PIL import Image  # noqa: E402
from torchvision import transforms  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--files", type=int, default=40)
    ap.add_argument("--slices", type=int, default=15)
    a = ap.parse_args()
    paths = sorted(os.path.join(d, f) for d, _, fs in os.walk(a.dir) for f in fs)[:a.files]
    blobs = [open(p, "rb").read() for p in paths]
    opts = stoker.Image(224, crop="random_resized", flip=True)
    tf = transforms.Compose([transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip(),
                             transforms.PILToTensor()])

    def st():
        t0 = time.process_time()
        for i, b in enumerate(blobs):
            opts.decode(b, index=i)
        return len(blobs) / (time.process_time() - t0)

    def tv():
        t0 = time.process_time()
        for b in blobs:
            tf(Image.open(io.BytesIO(b)).convert("RGB"))
        return len(blobs) / (time.process_time() - t0)

    st(), tv()  # warm-up
    rs, ss, ts = [], [], []
    for k in range(a.slices):
        s, t = (st(), tv()) if k % 2 == 0 else tuple(reversed((tv(), st())))
        ss.append(s)
        ts.append(t)
        rs.append(s / t)
    print("%s: %d files, %d slices (CPU time of this process)" % (a.dir, len(blobs), a.slices))
    print("stoker %.0f images/s per core, torchvision+PIL %.0f; median ratio %.2f (%.2f-%.2f)" % (
        statistics.median(ss), statistics.median(ts), statistics.median(rs), min(rs), max(rs)))


if __name__ == "__main__":
    main()
