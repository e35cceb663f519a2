#!/usr/bin/python3
"""stoker through Python against stoker in C, measured in one run (issue 5).

  throughput: samples/s of stoker.Loader (raw mode, warm page cache) against
              `stoker bench --json --no-baseline` on the same folder, same
              batch size, prefetch and queue depth; target >= 90 %;
  overhead:   Python's cost per batch, on the null engine (no I/O, so the
              loader's machinery is all that is measured):
                (a) seconds per batch through Python minus through C;
                (b) the consumer thread's own time per batch outside
                    stk_loader_next (wrapping the batch in tensors, releasing
                    it), measured in the Python process itself, as wall time
                    and as CPU time (thread_time: what other processes' load
                    inflates least); target <= 50 us.

Rounds alternate C and Python and the best of each is kept, so a burst of
load from other processes hurts both alike.  Keep it short on shared machines.

usage: python_vs_c.py [--data DIR] [--stoker BIN] [--epochs N] [--rounds N]
                      [--batch-size N] [--json OUT]
Run from the source tree:  make && PYTHONPATH=python /usr/bin/python3 bench/python_vs_c.py
"""

import argparse
import json
import os
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
    cmd = [args.stoker, "bench", args.data, "--json", "--no-baseline", "--cache", cache,
           "--engine", engine, "--epochs", str(epochs), "-b", str(args.batch_size),
           "-p", str(args.prefetch), "-q", str(args.queue_depth), "--seed", "0"]
    env = dict(os.environ, STOKER_NO_PROGRESS="1")
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
    s = json.loads(out)["stoker"]
    return {"samples_per_s": s["samples_per_s"], "s_per_batch": s["seconds"] / max(1, s["batches"]),
            "batches": s["batches"], "samples": s["samples"]}


def py_run(args, engine, epochs, copy_free=False, split=False):
    """One run through stoker.Loader; with split, also the time spent outside
    stk_loader_next."""
    real_next = _lib.stk_loader_next
    inside = [0.0, 0.0]
    clock = time.perf_counter
    cpu = time.thread_time

    def timed_next(h, out):
        t, c = clock(), cpu()
        rc = real_next(h, out)
        inside[1] += cpu() - c
        inside[0] += clock() - t
        return rc

    loader = stoker.Loader(args.data, args.batch_size, seed=0, prefetch=args.prefetch,
                           queue_depth=args.queue_depth, engine=engine, copy_free=copy_free)
    if split:
        _loader._lib.stk_loader_next = timed_next
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
        _loader._lib.stk_loader_next = real_next
        loader.close()
    r = {"samples_per_s": samples / wall, "s_per_batch": wall / batches, "batches": batches,
         "samples": samples}
    if split:
        r["outside_next_s_per_batch"] = (wall - inside[0]) / batches
        r["outside_next_cpu_s_per_batch"] = (used - inside[1]) / batches
    return r


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


def best(runs, key, lowest=False):
    vals = [r[key] for r in runs]
    return min(vals) if lowest else max(vals)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default="/tmp/stoker-data20k",
                    help="ImageFolder-layout folder (e.g. from `stoker gen`)")
    ap.add_argument("--stoker", default=os.environ.get("STOKER") or
                    os.path.join(ROOT, "build", "stoker"))
    ap.add_argument("--epochs", type=int, default=2, help="epochs per throughput run")
    ap.add_argument("--null-epochs", type=int, default=50, help="epochs per null-engine run")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--prefetch", type=int, default=4)
    ap.add_argument("--queue-depth", type=int, default=128)
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args(argv)
    if not os.path.isdir(args.data):
        ap.error("%s is not a folder; make one with: %s gen %s --images 20000 --classes 100"
                 % (args.data, args.stoker, args.data))

    print("stoker %s (%s), torch %s, python %s" % (
        stoker.lib_version(), stoker.lib_path, stoker.loader.torch.__version__,
        sys.version.split()[0]))
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
    cn, pyn = [], []
    for _ in range(args.rounds):
        cn.append(c_bench(args, "null", args.null_epochs))
        pyn.append(py_run(args, "null", args.null_epochs, split=True))

    c_sps = best(c, "samples_per_s")
    py_sps = best(py, "samples_per_s")
    pycf_sps = best(pycf, "samples_per_s")
    c_bat = best(cn, "s_per_batch", lowest=True)
    py_bat = best(pyn, "s_per_batch", lowest=True)
    outside = best(pyn, "outside_next_s_per_batch", lowest=True)
    outside_cpu = best(pyn, "outside_next_cpu_s_per_batch", lowest=True)
    res = {
        "data": args.data, "batch_size": args.batch_size, "prefetch": args.prefetch,
        "queue_depth": args.queue_depth, "epochs": args.epochs, "rounds": args.rounds,
        "c_samples_per_s": c_sps, "python_samples_per_s": py_sps,
        "python_copy_free_samples_per_s": pycf_sps,
        "ratio": py_sps / c_sps, "ratio_copy_free": pycf_sps / c_sps,
        "null_c_us_per_batch": c_bat * 1e6, "null_python_us_per_batch": py_bat * 1e6,
        "overhead_us_per_batch": (py_bat - c_bat) * 1e6,
        "outside_next_us_per_batch": outside * 1e6,
        "outside_next_cpu_us_per_batch": outside_cpu * 1e6,
        "runs": {"c": c, "python": py, "python_copy_free": pycf, "null_c": cn, "null_python": pyn},
    }

    def ok(v, target, more=True):
        return "ok" if (v >= target if more else v <= target) else "MISSED"

    print()
    print("warm cache, raw mode (best of %d rounds)       samples/s   vs C" % args.rounds)
    print("  C        stoker bench                      %10.0f" % c_sps)
    print("  Python   stoker.Loader                     %10.0f   %5.1f %%  (target >= 90 %%: %s)"
          % (py_sps, 100 * res["ratio"], ok(res["ratio"], 0.9)))
    print("  Python   stoker.Loader(copy_free=True)     %10.0f   %5.1f %%"
          % (pycf_sps, 100 * res["ratio_copy_free"]))
    print()
    print("null engine, per batch of %d (best of %d)    microseconds"
          % (args.batch_size, args.rounds))
    print("  C        stoker bench                      %10.1f" % (c_bat * 1e6))
    print("  Python   stoker.Loader                     %10.1f" % (py_bat * 1e6))
    print("  overhead Python - C                        %10.1f   (target <= 50: %s)"
          % (res["overhead_us_per_batch"], ok(res["overhead_us_per_batch"], 50, more=False)))
    print("  Python's own time outside stk_loader_next  %10.1f   (target <= 50: %s)"
          % (res["outside_next_us_per_batch"],
             ok(res["outside_next_us_per_batch"], 50, more=False)))
    print("    the same, CPU time of the thread         %10.1f   (target <= 50: %s)"
          % (res["outside_next_cpu_us_per_batch"],
             ok(res["outside_next_cpu_us_per_batch"], 50, more=False)))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
