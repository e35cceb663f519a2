"""PyTorch's DataLoader over the same data as a stoker run, at its best worker
count: what `stoker bench --vs torch` runs beside the loader, so the main
job's ratio is against what users run.

    python3 -m stoker.vs_torch PATH [--batch-size N] [--image --size N ...] [--json]

The samples are the ones stoker's index holds (folders, file lists and tar
shards alike: each item is read at its offset, as the loader reads it), in a
seeded shuffle, through torch.utils.data.DataLoader with num_workers 0, 1, 2,
4, ... up to the CPUs this process may run on.  Raw mode: a Dataset that
reads each sample's bytes into a tensor (what a raw-bytes pipeline does).
Image mode (--image): PIL decodes, then torchvision's transforms give what
stoker's image options ask for: RandomResizedCrop(size, scale, ratio) and
RandomHorizontalFlip, or Resize(size / crop_frac) + CenterCrop(size);
PILToTensor; for a float dtype ConvertImageDtype and, with --normalize,
Normalize(mean, std).  Each worker count reads --samples samples or runs
--seconds, whichever ends first, from the same page-cache state (--cache
cold drops it before each, as root).  Exit 3 when torch (or torchvision, in
image mode) cannot be imported, saying why.
"""

import argparse
import json
import os
import sys
import time

from . import _lib

_D = {n: r.python_default() for n, r in _lib.OPTIONS.items()}  # the library's defaults


def _cpus():
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def worker_counts(cpus):
    """0, 1, 2, 4, ... up to the CPUs (DataLoader's usual search)."""
    out, w = [0, 1], 2
    while w <= cpus:
        out.append(w)
        w *= 2
    if cpus > 1 and out[-1] != cpus:
        out.append(cpus)
    return out


def _drop_caches():
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return None
    except OSError as e:
        return str(e)


def _extents(path, quiet=True):
    """(path, offset, size, label) of every sample in stoker's index of path."""
    import stoker
    with stoker.Loader(path, 1, engine="null", prefetch=1, queue_depth=1, shuffle=False,
                       quiet=quiet) as l:
        out = []
        for i in range(l.num_samples):
            p, off, size = l.sample_extent(i)
            out.append((p, off, size, l.sample(i)[2]))
    return out


class _Samples:
    """The torch Dataset: sample i's bytes at its offset (raw), or its image
    through the transform (image mode)."""

    def __init__(self, extents, transform):
        self.extents = extents
        self.transform = transform

    def __len__(self):
        return len(self.extents)

    def __getitem__(self, i):
        import torch
        path, off, size, label = self.extents[i]
        with open(path, "rb") as f:
            if off:
                f.seek(off)
            data = f.read(size)
        if self.transform is None:
            return torch.frombuffer(bytearray(data), dtype=torch.uint8), label
        import io
        from PIL import Image
        with Image.open(io.BytesIO(data)) as im:
            return self.transform(im.convert("RGB")), label


def _collate_raw(items):
    import torch
    return [t for t, _ in items], torch.tensor([y for _, y in items])


def _transform(a):
    """torchvision's transforms for stoker's image options."""
    from torchvision import transforms as T
    import torch
    tf = []
    if a.crop == "center":
        tf += [T.Resize(round(a.size / a.crop_frac)), T.CenterCrop(a.size)]
    else:
        tf.append(T.RandomResizedCrop(a.size, scale=tuple(a.scale), ratio=tuple(a.ratio)))
        if a.flip:
            tf.append(T.RandomHorizontalFlip())
    tf.append(T.PILToTensor())
    if a.dtype != "uint8":
        tf.append(T.ConvertImageDtype(getattr(torch, a.dtype)))
        if a.normalize:
            tf.append(T.Normalize(a.mean, a.std))
    return T.Compose(tf)


def run(ds, workers, a, collate):
    """One DataLoader pass: (samples, bytes or 0, seconds)."""
    import torch
    from torch.utils.data import DataLoader
    g = torch.Generator()
    g.manual_seed(a.seed)
    extra = {"prefetch_factor": 4} if workers else {}
    dl = DataLoader(ds, batch_size=a.batch_size, shuffle=True, generator=g, num_workers=workers,
                    collate_fn=collate, drop_last=False, **extra)
    n = nbytes = 0
    t0 = time.monotonic()
    it = iter(dl)
    for data, labels in it:
        n += len(labels)
        if collate is _collate_raw:
            nbytes += sum(len(t) for t in data)
        if n >= a.samples or time.monotonic() - t0 >= a.seconds:
            break
    dt = time.monotonic() - t0
    del it  # stops the workers
    return n, nbytes, dt


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m stoker.vs_torch",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("path")
    ap.add_argument("--batch-size", type=int, default=_D["batch_size"])
    ap.add_argument("--samples", type=int, default=0,
                    help="samples per worker count (0: one epoch)")
    ap.add_argument("--seconds", type=float, default=5.0,
                    help="at most this long per worker count")
    ap.add_argument("--workers", default="",
                    help="worker counts to try, e.g. 0,2,4 (default: 0, 1, 2, 4, ... CPUs)")
    ap.add_argument("--cache", choices=("warm", "cold", "as-is"), default="as-is")
    ap.add_argument("--seed", type=int, default=_D["seed"])
    ap.add_argument("--image", action="store_true")
    ap.add_argument("--size", type=int, default=_D["width"])
    ap.add_argument("--crop", choices=_lib.OPTIONS["crop"].choices, default=_D["crop"])
    ap.add_argument("--no-flip", dest="flip", action="store_false")
    ap.add_argument("--dtype", choices=_lib.OPTIONS["dtype"].choices, default=_D["dtype"])
    ap.add_argument("--normalize", action="store_true")
    ap.add_argument("--mean", type=float, nargs=3, default=_D["mean"])
    ap.add_argument("--std", type=float, nargs=3, default=_D["std"])
    ap.add_argument("--scale", type=float, nargs=2, default=(_D["scale_min"], _D["scale_max"]))
    ap.add_argument("--ratio", type=float, nargs=2, default=(_D["ratio_min"], _D["ratio_max"]))
    ap.add_argument("--crop-frac", type=float, default=_D["crop_frac"])
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    try:
        import torch
        if a.image:
            import torchvision  # noqa: F401
            import PIL  # noqa: F401
    except ImportError as e:
        print("%s: %s" % (type(e).__name__, e))  # stoker bench's one line says what to install
        return 3
    extents = _extents(a.path)
    if not a.samples:
        a.samples = len(extents)
    ds = _Samples(extents, _transform(a) if a.image else None)
    collate = None if a.image else _collate_raw
    counts = ([int(w) for w in a.workers.split(",")] if a.workers
              else worker_counts(_cpus()))
    runs = []
    for w in counts:
        why = _drop_caches() if a.cache == "cold" else None
        n, nbytes, dt = run(ds, w, a, collate)
        runs.append({"workers": w, "samples": n, "seconds": dt,
                     "samples_per_s": n / dt if dt > 0 else 0.0,
                     "mb_per_s": nbytes / dt / 1e6 if dt > 0 else 0.0,
                     "cache": "as found (%s)" % why if why else a.cache})
    best = max(runs, key=lambda r: r["samples_per_s"])
    out = {"torch": torch.__version__, "cpus": _cpus(), "mode": "image" if a.image else "raw",
           "runs": runs, "best": best}
    if a.json:
        json.dump(out, sys.stdout, indent=2)
        print()
    else:
        for r in runs:
            print("DataLoader num_workers=%d: %.0f samples/s (%d samples, %.2f s)" % (
                r["workers"], r["samples_per_s"], r["samples"], r["seconds"]))
        print("best: num_workers=%d" % best["workers"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
