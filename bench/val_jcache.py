"""Val (resize 256 + centre crop 224) epoch by epoch with and without
Image(jpeg_cache=True), each round from an empty cache folder: what epoch 1
pays for writing the copies, and what epochs 2 and 3 gain from reading them.

  python3 bench/val_jcache.py DIR [--rounds 3] [--epochs 3] [--threads 2]

Rounds alternate off / on; per epoch the median images/s and CPU s per
1,000 images (the process's), and on / off.  Needs the library built
(STOKER_LIB, PYTHONPATH=python)."""

import argparse
import os
import shutil
import statistics
import tempfile
import time

import stoker


def run(path, jc, epochs, threads, batch):
    cache = tempfile.mkdtemp(prefix="stoker-jc-")
    img = stoker.Image(224, crop="center", jpeg_cache=jc, decode_threads=threads)
    out = []
    try:
        with stoker.Loader(path, batch, seed=0, image=img, cache_dir=cache, prefetch=2) as l:
            for e in range(epochs):
                l.set_epoch(e)
                t, c, n = time.monotonic(), time.process_time(), 0
                for x, _ in l:
                    n += x.shape[0]
                dt, dc = time.monotonic() - t, time.process_time() - c
                out.append((n / dt, 1000 * dc / n))
        du = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(cache) for f in fs)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    return out, du


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("path")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=256)
    a = ap.parse_args()
    res = {False: [], True: []}
    du = 0
    for r in range(a.rounds):
        for jc in ((False, True) if r % 2 == 0 else (True, False)):
            ep, d = run(a.path, jc, a.epochs, a.threads, a.batch)
            du = max(du, d)
            res[jc].append(ep)
            print("round %d jpeg_cache=%s: %s" % (r, jc, " ".join("%.0f/s" % x[0] for x in ep)),
                  flush=True)
    size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(a.path) for f in fs)
    print("\n| epoch | off: images/s | on: images/s | on / off | CPU s/1k off | on |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for e in range(a.epochs):
        off = statistics.median(x[e][0] for x in res[False])
        on = statistics.median(x[e][0] for x in res[True])
        coff = statistics.median(x[e][1] for x in res[False])
        con = statistics.median(x[e][1] for x in res[True])
        print("| %d | %.0f | %.0f | %.2f | %.2f | %.2f |" % (e + 1, off, on, on / off, coff, con))
    print("\ncopies: %.1f MB for the folder's %.1f MB (%.2fx)" % (du / 1e6, size / 1e6, du / size))


if __name__ == "__main__":
    main()
