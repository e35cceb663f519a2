#!/usr/bin/python3
"""PNG and WebP in image mode against torchvision and DALI at equal cores,
warm page cache (issue 29): decode + RandomResizedCrop(224) + flip, uint8
224×224, one whole pass over the same N images of each format.

  stoker:      stoker bench --image, decode threads = CPU count
  torchvision: ImageFolder (PIL) + RandomResizedCrop(224) +
               RandomHorizontalFlip + PILToTensor, DataLoader with 2 workers
               (bench/image_bench.py's script)
  DALI:        CPU pipeline, num_threads = CPU count: readers.file +
               decoders.image_random_crop + resize(224) +
               crop_mirror_normalize(uint8, CHW, random mirror), when the
               peers' venv (~/.cache/stoker/peers, mk/peers.sh) has it

Rounds rotate which side goes first (the machine is shared); each round's
ratios are printed and the medians are the result.  The folders are made
by `stoker gen --format png|webp` when missing.

usage: formats_bench.py [--images N] [--rounds R] [--formats png,webp] [--data DIR]
"""
import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import image_bench  # noqa: E402  (torchvision's side, the page-cache warm-up)

PEERS = os.path.expanduser(os.environ.get("STOKER_PEERS", "~/.cache/stoker/peers"))

DALI = r"""
import sys, time
from nvidia.dali import pipeline_def, fn, types
root, lst, n, threads, batch = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
@pipeline_def(batch_size=batch, num_threads=threads, device_id=None, seed=0)
def pipe():
    data, labels = fn.readers.file(file_root=root, file_list=lst, random_shuffle=False)
    im = fn.decoders.image_random_crop(data, device="cpu", output_type=types.RGB)
    im = fn.resize(im, resize_x=224, resize_y=224)
    im = fn.crop_mirror_normalize(im, dtype=types.UINT8, output_layout="CHW",
                                  mirror=fn.random.coin_flip())
    return im, labels
p = pipe()
p.build()
t0 = time.monotonic(); k = 0
while k < n:
    out = p.run()
    k += len(out[0])
print(n / (time.monotonic() - t0))
"""


def dali_python():
    py = os.path.join(PEERS, "bin", "python")
    if not os.access(py, os.X_OK):
        return None, "no peers venv at %s (mk/peers.sh makes it)" % PEERS
    r = subprocess.run([py, "-c", "import nvidia.dali"], capture_output=True, text=True)
    if r.returncode:
        return None, "DALI does not import in %s: %s" % (PEERS, r.stderr.strip()[-200:])
    return py, None


def dali(py, a, listfile, ncpu):
    out = subprocess.run([py, "-c", DALI, "/", listfile, str(a.images), str(ncpu), str(a.batch)],
                         check=True, capture_output=True, text=True)
    return float(out.stdout.split()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--images", type=int, default=1000, help="the same random N of each folder")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--formats", default="png,webp")
    ap.add_argument("--data", default="/tmp/stoker-formats",
                    help="folder of DATA/png, DATA/webp (made by stoker gen when missing)")
    ap.add_argument("--gen-images", type=int, default=2000)
    ap.add_argument("--stoker", default=os.path.join(ROOT, os.environ.get("BUILD", "build"),
                                                     "stoker"))
    a = ap.parse_args()
    ncpu = os.cpu_count()
    py, why = dali_python()
    print("DALI: %s" % ("%s (num_threads %d)" % (py, ncpu) if py else "not run: " + why))
    for fmt in a.formats.split(","):
        data = os.path.join(a.data, fmt)
        if not os.path.isdir(data):
            subprocess.run([a.stoker, "gen", data, "--images", str(a.gen_images), "--classes",
                            "10", "--format", fmt, "--seed", "5"], check=True)
        image_bench.warm(data)
        with tempfile.TemporaryDirectory() as tmp:
            listfile = os.path.join(tmp, "subset.txt")
            b = argparse.Namespace(data=data, images=a.images, batch=a.batch, stoker=a.stoker)
            image_bench.torchvision(b, 0, listfile)  # writes the subset: path<TAB>label
            lines = [l.split("\t") for l in open(listfile).read().splitlines()]
            b.images = len(lines)
            dlist = os.path.join(tmp, "dali.txt")
            with open(dlist, "w") as f:  # DALI's: "path label", relative to file_root "/"
                for p, lab in lines:
                    f.write("%s %s\n" % (p.lstrip("/"), lab))
            sizes = [os.path.getsize(p) for p, _ in lines]
            print("\n%s: %d images of %s (mean %.0f kB), batch %d, %d CPUs, warm page cache" % (
                fmt.upper(), b.images, data, statistics.mean(sizes) / 1e3, a.batch, ncpu))
            print("%-6s %12s %12s %12s %10s %10s" % ("round", "torchvision", "DALI", "stoker",
                                                    "st/tv", "st/DALI"))
            rows, fast = [], []
            sides = ["tv", "st", "dali"] if py else ["tv", "st"]
            for r in range(a.rounds):
                got = {}
                order = sides[r % len(sides):] + sides[:r % len(sides)]
                for s in order:
                    if s == "tv":
                        got[s] = image_bench.torchvision(b, 2)
                    elif s == "dali":
                        got[s] = dali(py, b, dlist, ncpu)
                    else:
                        st = image_bench.stoker(b, listfile, ncpu)
                        got[s] = st["samples_per_s"]
                        fast.append(st.get("formats", {}).get(fmt, {}).get("fast_share", 0))
                rows.append(got)
                print("%-6d %12.0f %12s %12.0f %10.2f %10s" % (
                    r + 1, got["tv"], "%.0f" % got["dali"] if py else "-", got["st"],
                    got["st"] / got["tv"], "%.2f" % (got["st"] / got["dali"]) if py else "-"),
                    flush=True)
            med = lambda k: statistics.median(x[k] for x in rows)
            print("median images/s: stoker %.0f, torchvision (2 workers) %.0f%s" % (
                med("st"), med("tv"), ", DALI %.0f" % med("dali") if py else ""))
            print("median ratio stoker / torchvision %.2f%s; fast path %.0f %% of %s decodes" % (
                statistics.median(x["st"] / x["tv"] for x in rows),
                ", stoker / DALI %.2f" % statistics.median(x["st"] / x["dali"] for x in rows)
                if py else "", 100 * statistics.median(fast), fmt.upper()))
    print("\ntargets: stoker >= 2 x torchvision, >= DALI's CPU pipeline (medians of the rounds)")


if __name__ == "__main__":
    main()
