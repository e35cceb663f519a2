"""PyTorch's DataLoader over the same data as a stoker run, at the worker
counts a user tries, and stoker's Python binding beside it, both timed by one
rule (stoker._timing): what `stoker bench --vs torch` runs, so the ratio is
against what users run, measured the same way.

    python3 -m stoker.vs_torch PATH [--batch-size N] [--image --size N ...] [--json]

The samples are the ones stoker's index holds (folders, file lists and tar
shards alike: each item is read at its offset, as the loader reads it), in a
seeded shuffle, through torch.utils.data.DataLoader with num_workers 0, 2 and
the CPUs this process may run on (persistent workers, prefetch_factor 4).
Raw mode: a Dataset that reads each sample's bytes into a tensor (what a
raw-bytes pipeline does).  Image mode (--image): PIL decodes, then
torchvision's transforms give what stoker's image options ask for:
RandomResizedCrop(size, scale, ratio) and RandomHorizontalFlip, or
Resize(size / crop_frac) + CenterCrop(size); PILToTensor; for a float dtype
ConvertImageDtype and, with --normalize, Normalize(mean, std).  stoker runs
as stoker.Loader with the same batch, seed and image options (and the loader
options --option passes), copy_free.  Every side alike: start-up (create
until the first batch), a --ramp not measured, then a window of --seconds (or
--samples), from the same page-cache state (--cache cold drops it before
each, as root, and ends the window with the first epoch); --rounds of every
side, the order rotated each round, and each side's medians.  The ratio is
stoker's median steady rate over the best DataLoader's.  Exit 3 when torch
(or torchvision, in image mode) cannot be imported, saying why.
"""

import argparse
import json
import os
import sys

from . import _lib

_D = {n: r.python_default() for n, r in _lib.OPTIONS.items()}  # the library's defaults


def _cpus():
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


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


def dataloader(ds, workers, a, collate):
    """make() for timed(): the DataLoader as a user tuning it builds it
    (workers kept across epochs), epoch after epoch."""
    def make():
        import torch
        from torch.utils.data import DataLoader
        g = torch.Generator()
        g.manual_seed(a.seed)
        extra = {"prefetch_factor": 4, "persistent_workers": True} if workers else {}
        dl = DataLoader(ds, batch_size=a.batch_size, shuffle=True, generator=g,
                        num_workers=workers, collate_fn=collate, drop_last=False, **extra)
        while True:
            for data, labels in dl:
                yield len(labels), sum(len(t) for t in data) if collate is _collate_raw else 0, None
    return make


def option_value(row, text):
    """A loader option's text (as the CLI parsed it) as stoker.Loader's keyword takes it."""
    t = row.type
    if t in (_lib.OPT_U32, _lib.OPT_U64):
        return text if row.choices and text == row.choices[0] else int(text)
    if t == _lib.OPT_FLOAT:
        return float(text)
    if t == _lib.OPT_FLOAT3:
        return tuple(float(x) for x in text.split(","))
    if t in (_lib.OPT_FLAG, _lib.OPT_NOFLAG):
        return text == "true"
    return text


_IMAGE_KW = ("decode_threads", "layout", "max_pixels", "max_scans", "max_decode_time")


def stoker_loader(a):
    """make() for timed(): stoker.Loader with the run's options, epoch after epoch."""
    kw, img_kw = {"shuffle": True, "seed": a.seed, "quiet": True}, {}
    for o in a.option:
        name, _, text = o.partition("=")
        row = _lib.OPTIONS[name]
        if row.group == _lib.OPT_LOADER:
            kw[name] = option_value(row, text)
        elif name in _IMAGE_KW:
            img_kw[name] = option_value(row, text)

    def make():
        import stoker
        img = None
        if a.image:
            img = stoker.Image(size=a.size, crop=a.crop, flip=a.flip, dtype=a.dtype,
                               normalize=(a.mean, a.std) if a.normalize else None,
                               scale=tuple(a.scale), ratio=tuple(a.ratio), crop_frac=a.crop_frac,
                               **img_kw)
        with stoker.Loader(a.path, a.batch_size, image=img, copy_free=True, **kw) as ld:
            while True:
                for b in ld:
                    yield b.count, int(b.sizes.sum()) if img is None else 0, None
    return make


def _side(make, a, cold_window):
    """One side timed: timed()'s figures, the first batch's item left out."""
    from ._timing import timed
    why = _drop_caches() if a.cache == "cold" else None
    r = timed(make, a.ramp, a.seconds, a.samples or cold_window)
    del r["first"]
    r["mb_per_s"] = r["bytes"] / r["seconds"] / 1e6 if r["seconds"] > 0 else 0.0
    r["cache"] = "as found (%s)" % why if why else a.cache
    return r


def _medians(rounds):
    """A side's figures: the medians of its rounds (start-up, steady rate,
    ...), the spread of its steady rate, and the rounds themselves."""
    import statistics
    ok = [r for r in rounds if "error" not in r]
    if not ok:
        return {"error": rounds[0]["error"], "rounds": rounds}
    out = {k: statistics.median(r[k] for r in ok)
           for k in ("startup_s", "ramp_s", "ramp_samples", "samples", "seconds", "samples_per_s",
                     "mb_per_s")}
    sps = [r["samples_per_s"] for r in ok]
    out.update(samples_per_s_min=min(sps), samples_per_s_max=max(sps), cache=ok[0]["cache"],
               rounds=rounds)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m stoker.vs_torch",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("path")
    ap.add_argument("--batch-size", type=int, default=_D["batch_size"])
    ap.add_argument("--samples", type=int, default=0,
                    help="at most this many samples in each side's window (0: no cap; "
                         "--cache cold: the rest of the first epoch)")
    ap.add_argument("--seconds", type=float, default=2.0, help="each side's measured window")
    ap.add_argument("--ramp", type=float, default=0.25,
                    help="seconds of batches after the first, not measured (--cache cold: none, "
                         "the epoch is read once)")
    ap.add_argument("--rounds", type=int, default=1,
                    help="rounds of every side, the order rotated each round; medians reported")
    ap.add_argument("--workers", default="",
                    help="worker counts to try, e.g. 0,2,4 (default: 0, 2 and the CPUs)")
    ap.add_argument("--option", action="append", default=[], metavar="NAME=TEXT",
                    help="a loader option for stoker's side, as the option table's text")
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
    from ._timing import worker_counts
    extents = _extents(a.path)
    cold_window = 1 << 62
    if a.cache == "cold":  # after its first epoch the data is in the page cache
        a.ramp = 0.0
        cold_window = max(a.batch_size, len(extents) - a.batch_size)
    ds = _Samples(extents, _transform(a) if a.image else None)
    collate = None if a.image else _collate_raw
    counts = ([int(w) for w in a.workers.split(",")] if a.workers
              else worker_counts(_cpus()))
    # the sides in rounds, the order rotated each round (a machine's load
    # then falls on every side alike); each side's medians over its rounds
    sides = [("stoker", stoker_loader(a))] + [(w, dataloader(ds, w, a, collate)) for w in counts]
    got = {name: [] for name, _ in sides}
    for rnd in range(max(1, a.rounds)):
        k = rnd % len(sides)
        for name, make in sides[k:] + sides[:k]:
            if name == "stoker" and got[name] and "error" in got[name][-1]:
                continue
            try:
                got[name].append(_side(make, a, cold_window))
            except Exception as e:  # stoker's side only: the DataLoader's figures stand
                if name != "stoker":
                    raise
                got[name].append({"error": "%s: %s" % (type(e).__name__, e)})
    mine = _medians(got["stoker"])
    runs = [dict(_medians(got[w]), workers=w) for w in counts]
    best = max(runs, key=lambda r: r["samples_per_s"])
    out = {"torch": torch.__version__, "cpus": _cpus(), "mode": "image" if a.image else "raw",
           "timing": {"ramp_s": a.ramp, "window_s": a.seconds, "rounds": max(1, a.rounds),
                      "window_samples": a.samples or (cold_window if a.cache == "cold" else None)},
           "stoker": mine, "stoker_options": a.option, "runs": runs, "best": best}
    if mine.get("samples_per_s") and best["samples_per_s"] > 0:
        out["ratio"] = mine["samples_per_s"] / best["samples_per_s"]
    if a.json:
        json.dump(out, sys.stdout, indent=2)
        print()
    else:
        for name, r in [("stoker", mine)] + [("DataLoader num_workers=%d" % r["workers"], r)
                                             for r in runs]:
            print("%-26s %s" % (name, r["error"] if "error" in r else
                                "start-up %.2f s, steady %.0f samples/s (%.0f-%.0f)" % (
                                    r["startup_s"], r["samples_per_s"], r["samples_per_s_min"],
                                    r["samples_per_s_max"])))
        print("best DataLoader: num_workers=%d; stoker / it %s" % (
            best["workers"], "%.2fx" % out["ratio"] if "ratio" in out else "-"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
