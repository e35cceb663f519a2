"""A per-sample Python transform: stoker.Loader(sample_transform=fn) on the
loader's own threads against torch's DataLoader with worker processes (0, 1,
2, ... up to the CPUs), the same fn on the same files, in one run.

fn decodes a JPEG with torchvision.io.decode_jpeg and resizes it to 64x64
with torch (both release the GIL), as a raw-mode pipeline of one's own would.
Prints images/s and the peak memory (the RSS of the process and its
children, summed, sampled every 50 ms) for each, and stoker's ratio to the
best DataLoader; --json for machines.

    PYTHONPATH=python python3 bench/sample_transform.py DATA [--images N] [--epochs E]
"""

import argparse
import json
import os
import threading
import time

import torch
import torch.nn.functional as F
import torchvision.io as tio

import stoker


def fn(data):
    img = tio.decode_jpeg(data)
    return F.interpolate(img.unsqueeze(0).float(), size=(64, 64), mode="bilinear",
                         antialias=True, align_corners=False)[0].to(torch.uint8)


class Files(torch.utils.data.Dataset):
    def __init__(self, paths):
        self.paths = paths

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        with open(self.paths[i], "rb") as f:
            data = torch.frombuffer(bytearray(f.read()), dtype=torch.uint8)
        return fn(data), 0


def rss_kb(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def children(pid):
    out = []
    try:
        for t in os.listdir("/proc/%d/task" % pid):
            with open("/proc/%d/task/%s/children" % (pid, t)) as f:
                out += [int(c) for c in f.read().split()]
    except OSError:
        pass
    return out


class Peak:
    """The peak of (this process + its children)'s RSS while running."""

    def __enter__(self):
        self.peak, self.stop = 0, threading.Event()
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()
        return self

    def run(self):
        me = os.getpid()
        while not self.stop.wait(0.05):
            self.peak = max(self.peak, rss_kb(me) + sum(rss_kb(c) for c in children(me)))

    def __exit__(self, *exc):
        self.stop.set()
        self.t.join()


def timed(make, epochs):
    with Peak() as p:
        loader = make()
        n, t0 = 0, time.perf_counter()
        for _ in range(epochs):
            for batch in loader:
                n += batch[0].shape[0]
        dt = time.perf_counter() - t0
        del loader
    return n / dt, p.peak / 1024


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("data")
    ap.add_argument("--images", type=int, default=1000)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    torch.set_num_threads(1)  # the transform's own ops: one thread each, as in workers
    cpus = len(os.sched_getaffinity(0))
    probe = stoker.Loader(a.data, 1, quiet=True, shuffle=False)
    paths = [probe.sample(i)[0] for i in range(min(a.images, probe.num_samples))]
    probe.close()
    listfile = "/tmp/stoker-sample-transform-%d.txt" % os.getpid()
    with open(listfile, "w") as f:
        f.write("".join(p + "\n" for p in paths))
    runs = {}
    for r in range(a.rounds):  # alternate rounds on a noisy machine; medians
        for w in range(0, cpus + 1):
            name = "DataLoader workers=%d" % w
            runs.setdefault(name, []).append(timed(lambda: torch.utils.data.DataLoader(
                Files(paths), a.batch_size, shuffle=True, num_workers=w,
                persistent_workers=w > 0), a.epochs))
        for t in sorted({1, cpus}):
            name = "stoker sample_transform threads=%d" % t
            runs.setdefault(name, []).append(timed(lambda: stoker.Loader(
                listfile, a.batch_size, sample_transform=fn, transform_threads=t, quiet=True,
                index_cache=False), a.epochs))
    os.unlink(listfile)
    med = {k: (sorted(x[0] for x in v)[len(v) // 2], max(x[1] for x in v))
           for k, v in runs.items()}
    best_dl = max((v[0], k) for k, v in med.items() if k.startswith("DataLoader"))
    if a.json:
        print(json.dumps({"cpus": cpus, "images": len(paths), "results": med,
                          "best_dataloader": best_dl[1]}))
        return
    print("%d images x %d epochs, batch %d, %d CPUs, torch %s, median of %d rounds"
          % (len(paths), a.epochs, a.batch_size, cpus, torch.__version__, a.rounds))
    print("%-38s %10s %10s %9s" % ("", "images/s", "peak MB", "vs best"))
    for k, (ips, mb) in med.items():
        print("%-38s %10.0f %10.0f %8.2fx" % (k, ips, mb, ips / best_dl[0]))


if __name__ == "__main__":
    main()
