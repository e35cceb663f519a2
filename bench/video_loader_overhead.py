"""What the loader's video mode adds to decoding: stoker.Loader(video=...)
against a plain loop over the same clips (read the file, stk_video_decode),
one decode thread each, the same (seed, epoch 0, sample) so the same frames.

    python3 bench/video_loader_overhead.py DIR [--frames 16 --stride 2 --size 224
                                               --batch 8 --rounds 5]

Alternating rounds, one epoch each; prints each side's clips/s (median,
min-max), the ratio loader / plain loop, and the load average.  The plain
loop is the decoder alone: a ratio near 1.0 says the loader's reads, slots
and hand-off cost nothing beside the decode (reads overlap it), below 1.0
what they cost.  JSON with --json.
"""

import argparse
import ctypes
import json
import os
import statistics
import sys
import time

import numpy as np

import stoker
from stoker import _lib


def loader_epoch(path, args):
    v = stoker.Video(frames=args.frames, stride=args.stride, size=args.size, decode_threads=1)
    t0 = time.perf_counter()  # create counts: its first reads and decodes start there
    with stoker.Loader(path, args.batch, seed=0, shuffle=False, video=v) as l:
        n = 0
        for b in l:
            n += b.count
        return n, time.perf_counter() - t0


def plain_epoch(paths, args):
    v = stoker.Video(frames=args.frames, stride=args.stride, size=args.size)
    o = v._opts()
    out = np.empty(v.nbytes, dtype=np.uint8)
    info = _lib.ClipInfo(size=ctypes.sizeof(_lib.ClipInfo))
    err = ctypes.create_string_buffer(512)
    dec = _lib.lib.stk_video_decode
    dec.restype = ctypes.c_int
    dec.argtypes = [ctypes.POINTER(_lib.VideoOpts), ctypes.c_char_p, ctypes.c_size_t,
                    ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint32,
                    ctypes.c_void_p, ctypes.POINTER(_lib.ClipInfo), ctypes.c_char_p,
                    ctypes.c_size_t]
    t0 = time.perf_counter()
    for i, p in enumerate(paths):
        with open(p, "rb") as f:
            data = f.read()
        rc = dec(ctypes.byref(o), data, len(data), 0, 0, i, 0, out.ctypes.data,
                 ctypes.byref(info), err, len(err))
        if rc < 0:
            sys.exit("%s: %s" % (p, err.value.decode()))
    return len(paths), time.perf_counter() - t0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("path")
    ap.add_argument("--frames", type=int, default=16)
    ap.add_argument("--stride", type=int, default=2)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    with stoker.Loader(a.path, 1, shuffle=False, video=stoker.Video(frames=a.frames)) as l:
        paths = [l.sample(i)[0] for i in range(len(l.dataset))]  # index order, as the loader's
    sides = {"loader": [], "plain": []}
    for r in range(a.rounds):
        for name in (("loader", "plain") if r % 2 == 0 else ("plain", "loader")):
            fn = loader_epoch if name == "loader" else plain_epoch
            n, s = fn(a.path if name == "loader" else paths, a)
            sides[name].append(n / s)
    load = os.getloadavg()
    res = {k: {"median": statistics.median(v), "min": min(v), "max": max(v)}
           for k, v in sides.items()}
    res["ratio"] = statistics.median(x / y for x, y in zip(sides["loader"], sides["plain"]))
    res.update(videos=len(paths), frames=a.frames, stride=a.stride, size=a.size,
               rounds=a.rounds, loadavg=load)
    if a.json:
        print(json.dumps(res, indent=2))
    else:
        for k in ("loader", "plain"):
            print("%-7s %7.1f clips/s (%.1f-%.1f)" % (k, res[k]["median"], res[k]["min"],
                                                      res[k]["max"]))
        print("loader / plain loop: %.3fx (median of the rounds' ratios); load %.2f %.2f %.2f"
              % ((res["ratio"],) + load))
    return 0


if __name__ == "__main__":
    sys.exit(main())
