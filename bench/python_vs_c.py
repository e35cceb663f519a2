#!/usr/bin/python3
"""stoker through Python against stoker in C, measured in one run (issue 5).

  throughput: samples/s of stoker.Loader (raw mode, warm page cache) against
              `stoker bench --json --no-baseline` on the same folder, same
              batch size, prefetch and queue depth; target >= 90 %;
  image mode: images/s of stoker.Loader(image=stoker.Image(224)) against
              `stoker bench --image --json --no-baseline`, over the first
              --image-samples samples of epoch 0 (the same files, warmed
              first), same decode threads; target >= 90 %;
  overhead:   Python's cost per batch, on the null engine (no I/O, so the
              loader's machinery is all that is measured):
                (a) seconds per batch through Python minus through C;
                (b) the consumer thread's own time per batch outside
                    stk_loader_next (wrapping the batch in tensors, releasing
                    it), measured in the Python process itself, as wall time
                    and as CPU time (thread_time: what other processes' load
                    inflates least); target <= 50 us.

Rounds alternate C and Python; each figure printed is the median of the
rounds with their min-max spread, and each ratio the median of the rounds'
paired ratios (C and Python of the same round), so a burst of load from
other processes hurts both sides of a pair alike.

usage: python_vs_c.py [--data DIR] [--stoker BIN] [--epochs N] [--rounds N]
                      [--batch-size N] [--parts raw,image,null,diagnose] [--image-samples N]
                      [--json OUT]
Run from the source tree:  make && PYTHONPATH=python /usr/bin/python3 bench/python_vs_c.py
"""

import argparse
import json
import logging
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "python"))

import stoker  # noqa: E402
from stoker import _lib  # noqa: E402
from stoker import loader as _loader  # noqa: E402


def c_bench(args, engine, epochs, cache="as-is"):
    # one run of exactly these epochs (the rounds here are the repeats)
    cmd = [args.stoker, "bench", args.data, "--json", "--no-baseline", "--cache", cache,
           "--runtime", "0", "--ramp", "0", "--repeat", "1", "--engine", engine, "--epochs", str(epochs), "-b", str(args.batch_size),
           "-p", str(args.prefetch), "-q", str(args.queue_depth), "--seed", "0"]
    env = dict(os.environ, STOKER_NO_PROGRESS="1")
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
    s = json.loads(out)["stoker"]
    return {"samples_per_s": s["samples_per_s"], "s_per_batch": s["seconds"] / max(1, s["batches"]),
            "batches": s["batches"], "samples": s["samples"]}


def c_bench_image(args):
    cmd = [args.stoker, "bench", args.data, "--image", "--json", "--no-baseline", "--cache",
           "as-is", "--runtime", "0", "--ramp", "0", "--repeat", "1", "--size", str(args.image_size), "--max-samples", str(args.image_samples),
           "--decode-threads", str(args.decode_threads), "-b", str(args.batch_size),
           "-p", str(args.prefetch), "-q", str(args.queue_depth), "--seed", "0"]
    env = dict(os.environ, STOKER_NO_PROGRESS="1")
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
    s = json.loads(out)["stoker"]
    return {"samples_per_s": s["samples_per_s"], "samples": s["samples"],
            "decode_images_per_s_per_core": s.get("decode_images_per_s_per_core", 0.0)}


def py_run_image(args):
    """stoker.Loader(image=...) until --image-samples images, timed from after
    create (as stoker bench times it)."""
    clock = time.perf_counter
    image = stoker.Image(args.image_size, decode_threads=args.decode_threads)
    loader = stoker.Loader(args.data, args.batch_size, seed=0, prefetch=args.prefetch,
                           queue_depth=args.queue_depth, image=image)
    try:
        samples = 0
        t0 = clock()
        for images, labels in loader:
            samples += labels.shape[0]
            if samples >= args.image_samples:
                break
        wall = clock() - t0
        del images, labels
        st = loader.stats()
    finally:
        loader.close()
    return {"samples_per_s": samples / wall, "samples": samples,
            "decode_images_per_s_per_core": st["decode_images_per_s_per_core"]}


def warm_image_samples(args):
    """Reads the files the image runs will read (epoch 0, seed 0), untimed."""
    n = 0
    with stoker.Loader(args.data, args.batch_size, seed=0) as loader:
        for b in loader:
            n += b.count
            if n >= args.image_samples:
                break
    return n


def py_run(args, engine, epochs, copy_free=False, split=False):
    """One run through stoker.Loader; with split, also the time spent outside
    the wait for a batch (stk_loader_next_timeout, or stk_loader_next)."""
    name = ("stk_loader_next_timeout" if _lib.stk_loader_next_timeout is not None
            else "stk_loader_next")
    real_next = getattr(_lib, name)
    inside = [0.0, 0.0]
    clock = time.perf_counter
    cpu = time.thread_time

    def timed_next(*a):
        t, c = clock(), cpu()
        rc = real_next(*a)
        inside[1] += cpu() - c
        inside[0] += clock() - t
        return rc

    loader = stoker.Loader(args.data, args.batch_size, seed=0, prefetch=args.prefetch,
                           queue_depth=args.queue_depth, engine=engine, copy_free=copy_free)
    if split:
        setattr(_loader._lib, name, timed_next)
    try:
        samples = batches = 0
        t0, c0 = clock(), cpu()
        for epoch in range(epochs):
            loader.set_epoch(epoch)
            for b in loader:
                samples += b.count
                batches += 1
        wall, used = clock() - t0, cpu() - c0
    finally:
        setattr(_loader._lib, name, real_next)
        loader.close()
    r = {"samples_per_s": samples / wall, "s_per_batch": wall / batches, "batches": batches,
         "samples": samples}
    if split:
        r["outside_next_s_per_batch"] = (wall - inside[0]) / batches
        r["outside_next_cpu_s_per_batch"] = (used - inside[1]) / batches
    return r


def diag_run(args, report_every, seconds=4.0):
    """A training loop's shape: null-engine batches taken every 2 ms (the
    step's time, asleep) for `seconds` of wall time; the process's CPU seconds
    per wall second, which report_every adds to (its lines go to a logger that
    drops them)."""
    logging.getLogger("stoker").setLevel(logging.INFO)
    logging.getLogger("stoker").propagate = False
    loader = stoker.Loader(args.data, args.batch_size, seed=0, engine="null", quiet=True,
                           report_every=report_every)
    try:
        t0, c0 = time.perf_counter(), time.process_time()
        epoch = 0
        while time.perf_counter() - t0 < seconds:
            loader.set_epoch(epoch)
            for _ in loader:
                time.sleep(0.002)
                if time.perf_counter() - t0 >= seconds:
                    break
            epoch += 1
        wall, used = time.perf_counter() - t0, time.process_time() - c0
    finally:
        loader.close()
    return {"wall_s": wall, "cpu_s": used, "cpu_per_s": used / wall, "epochs": epoch}


def warm(data):
    """Reads every file once so that both sides start from a warm page cache."""
    n = 0
    for d, _, files in os.walk(data):
        for f in files:
            with open(os.path.join(d, f), "rb") as fh:
                while fh.read(1 << 20):
                    pass
            n += 1
    return n


def med(runs, key):
    return statistics.median(r[key] for r in runs)


def spread(runs, key, scale=1.0, fmt="%.0f"):
    """"median (min-max)" of the rounds' figure."""
    v = [r[key] * scale for r in runs]
    return ("%s (%s-%s)" % (fmt, fmt, fmt)) % (statistics.median(v), min(v), max(v))


def paired(a, b, key):
    """The median of the rounds' ratios a[i] / b[i] (the same round's pair)."""
    return statistics.median(x[key] / y[key] for x, y in zip(a, b))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default="/tmp/stoker-data20k",
                    help="ImageFolder-layout folder (e.g. from `stoker gen`)")
    ap.add_argument("--stoker", default=os.environ.get("STOKER") or
                    os.path.join(ROOT, "build", "stoker"))
    ap.add_argument("--epochs", type=int, default=2, help="epochs per throughput run")
    ap.add_argument("--null-epochs", type=int, default=50, help="epochs per null-engine run")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--prefetch", type=int, default=4)
    ap.add_argument("--queue-depth", type=int, default=128)
    ap.add_argument("--parts", default="raw,image,null,diagnose",
                    help="comparisons to run, of raw (warm cache), image, null")
    ap.add_argument("--image-samples", type=int, default=2048,
                    help="images per image-mode run (the first of epoch 0)")
    ap.add_argument("--image-size", type=int, default=224)
    ap.add_argument("--decode-threads", type=int, default=0,
                    help="image mode, both sides (0: online CPUs - 1)")
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args(argv)
    parts = set(args.parts.split(","))
    if not parts <= {"raw", "image", "null", "diagnose"}:
        ap.error("--parts takes raw, image, null and diagnose")
    if not os.path.isdir(args.data):
        ap.error("%s is not a folder; make one with: %s gen %s --images 20000 --classes 100"
                 % (args.data, args.stoker, args.data))

    print("stoker %s (%s), torch %s, python %s" % (
        stoker.lib_version(), stoker.lib_path, stoker.loader.torch.__version__,
        sys.version.split()[0]))
    res = {"data": args.data, "batch_size": args.batch_size, "prefetch": args.prefetch,
           "queue_depth": args.queue_depth, "epochs": args.epochs, "rounds": args.rounds,
           "runs": {}}

    def ok(v, target, more=True):
        return "ok" if (v >= target if more else v <= target) else "MISSED"

    if "raw" in parts:
        t = time.perf_counter()
        nfiles = warm(args.data)
        print("%s: %d files, page cache warmed in %.1f s; batch %d, prefetch %d, queue depth %d"
              % (args.data, nfiles, time.perf_counter() - t, args.batch_size, args.prefetch,
                 args.queue_depth))
        c, py, pycf = [], [], []
        for _ in range(args.rounds):
            c.append(c_bench(args, "auto", args.epochs))
            py.append(py_run(args, "auto", args.epochs))
            pycf.append(py_run(args, "auto", args.epochs, copy_free=True))
        res.update({"c_samples_per_s": med(c, "samples_per_s"),
                    "python_samples_per_s": med(py, "samples_per_s"),
                    "python_copy_free_samples_per_s": med(pycf, "samples_per_s"),
                    "ratio": paired(py, c, "samples_per_s"),
                    "ratio_copy_free": paired(pycf, c, "samples_per_s")})
        res["runs"].update({"c": c, "python": py, "python_copy_free": pycf})
        print()
        print("warm cache, raw mode (%d rounds: median (min-max))   samples/s   vs C (median "
              "of pairs)" % args.rounds)
        print("  C        stoker bench                   %26s" % spread(c, "samples_per_s"))
        print("  Python   stoker.Loader                  %26s   %5.1f %%  (target >= 90 %%: %s)"
              % (spread(py, "samples_per_s"), 100 * res["ratio"], ok(res["ratio"], 0.9)))
        print("  Python   stoker.Loader(copy_free=True)  %26s   %5.1f %%"
              % (spread(pycf, "samples_per_s"), 100 * res["ratio_copy_free"]))

    if "image" in parts:
        t = time.perf_counter()
        n = warm_image_samples(args)
        print("%s: the first %d samples of epoch 0 warmed in %.1f s" % (
            args.data, n, time.perf_counter() - t))
        ci, pyi = [], []
        for _ in range(args.rounds):
            ci.append(c_bench_image(args))
            pyi.append(py_run_image(args))
        res.update({"image_size": args.image_size, "image_samples": args.image_samples,
                    "decode_threads": args.decode_threads,
                    "c_images_per_s": med(ci, "samples_per_s"),
                    "python_images_per_s": med(pyi, "samples_per_s"),
                    "image_ratio": paired(pyi, ci, "samples_per_s"),
                    "c_decode_images_per_s_per_core": med(ci, "decode_images_per_s_per_core"),
                    "python_decode_images_per_s_per_core":
                        med(pyi, "decode_images_per_s_per_core")})
        res["runs"].update({"image_c": ci, "image_python": pyi})
        print()
        print("image mode, %d px, %d images (%d rounds: median (min-max))   images/s   vs C   "
              "per core" % (args.image_size, args.image_samples, args.rounds))
        print("  C        stoker bench --image           %26s            %8.0f"
              % (spread(ci, "samples_per_s"), res["c_decode_images_per_s_per_core"]))
        print("  Python   stoker.Loader(image=Image(%d)) %26s   %5.1f %%  %8.0f  "
              "(target >= 90 %%: %s)" % (args.image_size, spread(pyi, "samples_per_s"),
                                         100 * res["image_ratio"],
                                         res["python_decode_images_per_s_per_core"],
                                         ok(res["image_ratio"], 0.9)))

    if "null" in parts:
        cn, pyn = [], []
        for _ in range(args.rounds):
            cn.append(c_bench(args, "null", args.null_epochs))
            pyn.append(py_run(args, "null", args.null_epochs, split=True))
        c_bat = med(cn, "s_per_batch")
        py_bat = med(pyn, "s_per_batch")
        # the overhead of each round's pair, then their median
        over = statistics.median(p["s_per_batch"] - q["s_per_batch"] for p, q in zip(pyn, cn))
        outside = med(pyn, "outside_next_s_per_batch")
        outside_cpu = med(pyn, "outside_next_cpu_s_per_batch")
        res.update({"null_c_us_per_batch": c_bat * 1e6, "null_python_us_per_batch": py_bat * 1e6,
                    "overhead_us_per_batch": over * 1e6,
                    "outside_next_us_per_batch": outside * 1e6,
                    "outside_next_cpu_us_per_batch": outside_cpu * 1e6})
        res["runs"].update({"null_c": cn, "null_python": pyn})
        print()
        print("null engine, per batch of %d (%d rounds: median (min-max))    microseconds"
              % (args.batch_size, args.rounds))
        print("  C        stoker bench                   %26s"
              % spread(cn, "s_per_batch", 1e6, "%.1f"))
        print("  Python   stoker.Loader                  %26s"
              % spread(pyn, "s_per_batch", 1e6, "%.1f"))
        print("  overhead Python - C (median of pairs)      %10.1f   (target <= 50: %s)"
              % (res["overhead_us_per_batch"], ok(res["overhead_us_per_batch"], 50, more=False)))
        print("  Python's own time outside the C wait       %10.1f   (target <= 50: %s)"
              % (res["outside_next_us_per_batch"],
                 ok(res["outside_next_us_per_batch"], 50, more=False)))
        print("    the same, CPU time of the thread         %10.1f   (target <= 50: %s)"
              % (res["outside_next_cpu_us_per_batch"],
                 ok(res["outside_next_cpu_us_per_batch"], 50, more=False)))
    if "diagnose" in parts:
        # what report_every costs: one diagnose() call a period, and the
        # process's CPU in a loop that takes a batch every 2 ms with
        # report_every=1 and without, alternating (the library's own snapshot a
        # second runs in both)
        calls = []
        with stoker.Loader(args.data, args.batch_size, seed=0, engine="null", quiet=True) as l:
            for _ in l:
                pass
            for _ in range(args.rounds):
                t = time.thread_time()
                for _ in range(2000):
                    l.diagnose(10)
                calls.append((time.thread_time() - t) / 2000)
        on, off = [], []
        for _ in range(args.rounds):
            for every, runs in ((1.0, on), (None, off)):
                runs.append(diag_run(args, every))
        call = statistics.median(calls)
        cost = statistics.median(a["cpu_per_s"] - b["cpu_per_s"] for a, b in zip(on, off))
        res.update({"diagnose_call_us": call * 1e6, "report_every_1_cpu_share": cost,
                    "report_every_1_cpu_share_by_call": call / 1.0})
        res["runs"].update({"report_on": on, "report_off": off})
        print()
        print("diagnosis (%d rounds)" % args.rounds)
        print("  one diagnose() call, CPU                 %10.1f us   (median of %s)"
              % (call * 1e6, ", ".join("%.1f" % (c * 1e6) for c in calls)))
        print("  report_every=1: a call a second          %10.4f %% of a core   (target <= 1 %%: %s)"
              % (100 * call, ok(call, 0.01, more=False)))
        print("  process CPU, a batch every 2 ms: without %s, with %s %% of a core"
              % (spread(off, "cpu_per_s", 100, "%.2f"), spread(on, "cpu_per_s", 100, "%.2f")))
        print("  with - without (median of pairs)         %10.2f %% of a core" % (100 * cost))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
