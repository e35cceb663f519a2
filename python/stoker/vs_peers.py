"""stoker beside the real peers (PyTorch 2.x's DataLoader, DALI, SPDL, Mosaic
Streaming, LitData, WebDataset, FFCV) on the same samples: what `stoker bench
--vs NAME,...` runs, in the peers' virtual environment (bench/peers/setup.sh).

    python3 -m stoker.vs_peers PATH [--peers all|NAME,...] [--mode raw|train|val]
                               [--cache warm|cold] [--rounds 5] [--seconds 4] [--json]

Each run is a process of its own (python3 -m stoker._peers), sampled here
every 50 ms (stoker._peers.PeakPss: RSS and faults each tick, PSS read only
when it may have risen): peak PSS summed over the run's process tree (its
workers and their shared memory included).  Every run, stoker's and each peer's, is timed
by one rule (stoker._timing): its start-up (creating the loader until its
first batch), then --ramp seconds not measured, then the window of --seconds,
whose samples/s (the steady rate) and CPU seconds are its figures; ratios
are of steady rates.  Worker/thread counts are searched first (0, 1, 2, ...
up to the CPUs for DataLoader-based peers; 1 ... CPUs threads for DALI, SPDL,
FFCV and stoker's decode threads), then
--rounds alternating rounds (stoker, peer, peer, ..., the order rotated each
round) at each peer's best count; medians and the spread are reported, and
stoker's ratio to each.  Peers that read their own format get it converted
once from PATH (cached beside the peers' venv, with the conversion's time and
size); stoker also reads its own `pack` shards and `pack --transcode` shards.
A peer that cannot be imported is skipped with the command that installs it;
one that crashes, hangs (--timeout) or returns the wrong thing (other size,
dtype, fewer bytes) is reported as such and not ranked.
"""

import argparse
import hashlib
import importlib.util
import json
import os
import signal
import statistics
import subprocess
import sys
import time

from ._peers import PEERS, DATALOADER, run_sampled, sampler_summary
from ._timing import worker_counts

# peer -> (module to find, pip package, format it reads)
INFO = {"stoker": (None, None, "folder"), "torch": ("torchvision", "torch==2.14.1 torchvision==0.29.1", "folder"),
        "torch-pil": ("torchvision", "torch==2.14.1 torchvision==0.29.1", "folder"),
        "dali": ("nvidia.dali", "nvidia-dali-cuda120", "folder"),
        "dali-wds": ("nvidia.dali", "nvidia-dali-cuda120", "dali-idx"), "spdl": ("spdl", "spdl", "folder"),
        "streaming": ("streaming", "mosaicml-streaming", "mds"), "litdata": ("litdata", "litdata", "litdata"),
        "wds": ("webdataset", "webdataset", "shards"), "ffcv": ("ffcv", "ffcv", "beton")}
ALIASES = {"all": [p for p in PEERS if p != "stoker"], "torch": ["torch", "torch-pil"]}


def _cpus():
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def peers_dir():
    return os.environ.get("STOKER_PEERS") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "stoker", "peers")


def _setup_status():
    """{peer: error} from bench/peers/setup.sh's record."""
    out = {}
    try:
        with open(os.path.join(peers_dir(), "peers.status")) as f:
            for line in f:
                name, state, why = (line.rstrip("\n").split("\t") + ["", ""])[:3]
                if state != "ok":
                    out[name] = why
    except OSError:
        pass
    return out


def resolve(names, mode):
    """[(peer, None)] to run and [(peer, why)] skipped."""
    want = []
    for n in names.split(","):
        for p in ALIASES.get(n, [n]):
            if p not in want and p != "stoker":
                want.append(p)
    run, skipped, failed = [], [], _setup_status()
    for p in want:
        if mode == "raw" and p == "torch-pil":
            continue  # no decoding: the same as torch
        if mode == "raw" and p == "ffcv":
            skipped.append((p, "no raw-bytes pipeline (a .beton holds images FFCV re-encoded)"))
            continue
        if p not in INFO:
            skipped.append((p, "unknown peer (known: %s, all)" % ", ".join(PEERS[1:])))
            continue
        mod, pkg, _ = INFO[p]
        try:
            found = importlib.util.find_spec(mod) is not None
        except (ImportError, ValueError):
            found = False
        if found:
            run.append(p)
        else:
            why = failed.get(p.replace("torch-pil", "torch"))
            skipped.append((p, "%s is not installed%s; install: %s -m pip install %s (or make peers)"
                            % (mod, " (setup failed: %s)" % why[:300] if why else "",
                               sys.executable, pkg)))
    return run, skipped


def _du(path):
    total = 0
    for dp, _, fs in os.walk(path):
        for f in fs:
            try:
                total += os.path.getsize(os.path.join(dp, f))
            except OSError:
                pass
    return total


def _warm(path):
    """Reads every file under path once (the page cache warmed)."""
    buf = bytearray(1 << 20)
    for dp, _, fs in os.walk(path):
        for f in fs:
            try:
                with open(os.path.join(dp, f), "rb", buffering=0) as fh:
                    while fh.readinto(buf):
                        pass
            except OSError:
                pass


_running = []  # the run's process group, killed with us (SIGTERM, SIGINT)


def _on_signal(sig, frame):
    for pid in _running:
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass
    sys.exit(128 + sig)


def child(spec, timeout):
    """Runs python3 -m stoker._peers SPEC in its own session; (result or None,
    error, (peak PSS MB, peak anonymous + shared-memory PSS MB), wall s)."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    smp = {}
    lines, hung, rc, tail, peak, peak_anon, wall = run_sampled(
        [sys.executable, "-m", "stoker._peers", json.dumps(spec)], timeout, env=env,
        started=lambda pid: _running.__setitem__(slice(None), [pid]), stats=smp)
    res = None
    for line in lines:
        try:
            res = json.loads(line)
        except ValueError:
            pass
    if isinstance(res, dict):
        res["sampler"] = sampler_summary(smp, res)  # its ticks and PSS reads
    why = None
    if res is None:
        tail = " | ".join(tail)[-600:]
        why = ("hung: no result after %.0f s%s" % (timeout, "; it said: " + tail if tail else "")
               if hung else "exited %d: %s" % (rc, tail or "no output"))
    return res, why, (peak, peak_anon), wall


def convert(peer, path, fmt, data_dir, stoker_bin, timeout):
    """The peer's format from path, made once: (dir, {seconds, bytes, cached})
    or (None, {error})."""
    out = os.path.join(data_dir, fmt)
    meta = out + ".json"
    if os.path.exists(meta):
        with open(meta) as f:
            m = json.load(f)
        m["cached"] = True
        return out, m
    t0 = time.monotonic()
    if fmt in ("shards", "transcoded"):
        cmd = [stoker_bin, "pack", path, out, "--shard-size", "64MiB"]
        cmd += ["--transcode"] if fmt == "transcoded" else []
        r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           env=dict(os.environ, STOKER_NO_PROGRESS="1"))
        if r.returncode:
            return None, {"error": "%s: %s" % (" ".join(cmd), r.stderr.decode()[-300:])}
        secs = time.monotonic() - t0
    elif fmt == "dali-idx":  # wds2idx's index files of stoker's pack shards (made first)
        shards, m0 = convert("stoker", path, "shards", data_dir, stoker_bin, timeout)
        if shards is None:
            return None, m0
        res, why, _, _ = child({"convert": 1, "peer": peer, "source": path, "out": out,
                                "shards": shards}, timeout)
        if res is None:
            return None, {"error": "conversion failed: %s" % why}
        secs = res["seconds"] + m0["seconds"]
    else:
        res, why, _, _ = child({"convert": 1, "peer": peer, "source": path, "out": out}, timeout)
        if res is None:
            return None, {"error": "conversion failed: %s" % why}
        secs = res["seconds"]
    m = {"seconds": secs, "bytes": _du(out), "tool": "stoker pack" if peer == "stoker" else peer}
    with open(meta, "w") as f:
        json.dump(m, f)
    m["cached"] = False
    return out, m


def _jcache_pass(path, a):
    """One epoch over path with Image(jpeg_cache=True), in a process of its
    own: the copies made (or found).  {seconds, samples_per_s}."""
    code = ("import sys, time, stoker\n"
            "img = stoker.Image(size=%d, crop='center', crop_frac=%r, jpeg_cache=True)\n"
            "t = time.monotonic(); n = 0\n"
            "with stoker.Loader(sys.argv[1], %d, image=img, shuffle=True, seed=%d) as ld:\n"
            "    for b in ld:\n"
            "        n += len(b[1])\n"
            "print(time.monotonic() - t, n)\n" % (a.size, a.crop_frac, a.batch_size, a.seed))
    r = subprocess.run([sys.executable, "-c", code, path], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE)
    if r.returncode:
        return {"error": r.stderr.decode()[-300:]}
    secs, n = r.stdout.split()
    jdir = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"),
                        "stoker", "jpeg")
    return {"seconds": float(secs), "samples_per_s": int(n) / float(secs), "bytes": _du(jdir),
            "tool": "stoker Image(jpeg_cache=True), one epoch"}


def _spread(xs):
    xs = sorted(xs)
    return {"median": statistics.median(xs), "min": xs[0], "max": xs[-1], "n": len(xs)} if xs else None


def check(a, res, mean_bytes):
    """Why a run's output is not what was asked, or None."""
    if res.get("ended"):
        return "stopped after %d samples, %.1f s (asked for %.0f s)" % (
            res["samples"], res["seconds"], a.seconds)
    if res["samples"] <= 0:
        return "no samples in %.1f s" % res["seconds"]
    if a.mode == "raw":
        got = res["bytes"] / res["samples"]
        if abs(got - mean_bytes) > 0.03 * mean_bytes:
            return "read %.0f bytes a sample, the dataset's mean is %.0f" % (got, mean_bytes)
        return None
    sh, dt = res["first"].get("shape"), res["first"].get("dtype")
    if dt != "uint8":
        return "decoded to %s, not uint8" % dt
    if not sh or sorted(sh[-3:]) != sorted([3, a.size, a.size]):
        return "images of shape %s, not %d x %d x 3" % (sh, a.size, a.size)
    return None


def main(argv=None):
    from .vs_torch import _extents, _drop_caches
    ap = argparse.ArgumentParser(prog="python3 -m stoker.vs_peers", description=__doc__.split("\n\n")[0])
    ap.add_argument("path")
    ap.add_argument("--peers", default="all")
    ap.add_argument("--mode", choices=("raw", "train", "val"), default="raw")
    ap.add_argument("--cache", choices=("warm", "cold"), default="warm")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=4.0, help="steady window of each run")
    ap.add_argument("--ramp", type=float, default=0.25,
                    help="seconds of batches after the first, not measured (cold: none)")
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--scale", type=float, nargs=2, default=(0.08, 1.0))
    ap.add_argument("--ratio", type=float, nargs=2, default=(3 / 4, 4 / 3))
    ap.add_argument("--crop-frac", type=float, default=0.875)
    ap.add_argument("--prefetch", type=int, default=2,
                    help="batches each side keeps ahead: stoker's slots, DataLoader's prefetch_factor, "
                         "DALI's prefetch_queue_depth, SPDL's sink, FFCV's batches_ahead; 0: each "
                         "loader's own default")
    ap.add_argument("--stoker-read-areas", type=int, default=0,
                    help="stoker's Image(read_areas=) (0: its default)")
    ap.add_argument("--no-search", action="store_true", help="workers = CPUs, no search")
    ap.add_argument("--stoker-sources", default="folder,shards,transcoded")
    ap.add_argument("--timeout", type=float, default=300.0)
    ap.add_argument("--stoker", default=os.environ.get("STOKER", "stoker"), help="the stoker CLI (pack)")
    ap.add_argument("--convert-only", action="store_true", help="make the formats, measure nothing")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    log = (lambda *m: print("vs_peers:", *m, file=sys.stderr, flush=True))
    path = os.path.abspath(a.path)
    ext = _extents(path)
    mean_bytes = sum(e[2] for e in ext) / max(1, len(ext))
    run, skipped = resolve(a.peers, a.mode)
    cpus = _cpus()
    key = hashlib.sha1(("%s:%d" % (path, len(ext))).encode()).hexdigest()[:10]
    data_dir = os.path.join(os.path.dirname(peers_dir()), "peers-data",
                            "%s-%s" % (os.path.basename(path.rstrip("/")), key))
    os.makedirs(data_dir, exist_ok=True)
    # cold: the window ends with the first epoch (after that the data is in
    # the page cache, and a loader fast enough to reach it would be timed warm)
    cold_epoch = max(a.batch_size, len(ext) - a.batch_size)
    base = {"mode": a.mode, "batch": a.batch_size, "seed": a.seed, "size": a.size,
            "scale": list(a.scale), "ratio": list(a.ratio), "crop_frac": a.crop_frac,
            "samples": cold_epoch if a.cache == "cold" else 1 << 62, "seconds": a.seconds,
            "ramp": 0.0 if a.cache == "cold" else a.ramp, "prefetch": a.prefetch,
            "read_areas": a.stoker_read_areas}
    # the rows: (label, peer, source dir); conversions first.  stoker's
    # sources: folder, shards (global shuffle: any sample after any other),
    # shards-window (shuffle_mode shard: shards in random order, samples
    # shuffled in a window of 1,000, as WebDataset's shuffle(1000) and DALI's
    # readers.webdataset (initial_fill 1024) do), transcoded
    rows, conversions, failed, extra = [], {}, {}, {}
    for src in a.stoker_sources.split(","):
        d, fmt = path, "shards" if src == "shards-window" else src
        if src == "folder-jcache":
            # the plain folder with Image(jpeg_cache=True): stoker reads its own
            # rewrite of each JPEG (cache_dir/jpeg/) once made, as FFCV reads its
            # .beton; one epoch first makes it (timed: epoch 1's cost)
            conversions["stoker jpeg_cache"] = _jcache_pass(path, a)
            extra["stoker (%s)" % src] = {"jpeg_cache": True}
        elif src != "folder":
            d, m = convert("stoker", path, fmt, data_dir, a.stoker, a.timeout * 10)
            conversions["stoker " + fmt] = m
            if d is None:
                failed["stoker (%s)" % src] = m["error"]
                continue
        if src == "shards-window":
            extra["stoker (%s)" % src] = {"shuffle_mode": "shard", "shuffle_window": 1000}
        rows.append(("stoker (%s)" % src, "stoker", d))
    for p in run:
        fmt = INFO[p][2]
        d = path
        if fmt != "folder":
            log("converting %s for %s (once)" % (path, p))
            d, m = convert(p, path, fmt, data_dir, a.stoker, a.timeout * 10)
            conversions[p] = m
            if d is None:
                failed[p] = m["error"]
                continue
        rows.append((p, p, d))
    if a.convert_only:
        rows = []
    if a.cache == "warm":
        for d in {r[2] for r in rows}:
            _warm(d)

    def one(label, peer, src, workers, seconds):
        why = _drop_caches() if a.cache == "cold" else None
        spec = dict(base, peer=peer, source=src, workers=workers, seconds=seconds,
                    **extra.get(label, {}))
        res, err, pss, wall = child(spec, a.timeout)
        if res is None:
            return {"error": err, "workers": workers}
        # the loader's own memory: the peak of the tree's anonymous and shared
        # memory above what the process held after its imports (torch's ~280 MB)
        res.update(workers=workers, pss_mb=pss[0], wall_s=wall,
                   loader_mb=max(0.0, pss[1] - res.get("base_kb", 0) / 1024.0),
                   samples_per_s=res["samples"] / res["seconds"] if res["seconds"] > 0 else 0,
                   cpu_s_per_1000=1000 * res["cpu_s"] / res["samples"] if res["samples"] else None)
        if why:
            res["cache"] = "as found (%s)" % why
        flag = check(a, res, mean_bytes)
        if flag:
            res["flag"] = flag
        return res

    best_w, search = {}, {}
    for label, peer, src in rows:
        if peer == "stoker" and a.mode == "raw":
            best_w[label] = 0  # its own I/O threads
            continue
        # stoker: decode threads (its default leaves a core to the trainer: 1 of 2);
        # a DataLoader: what a user tries (0: the main process, 2, the CPUs) and 1 ...
        cands = list(range(1, cpus + 1))
        if peer in DATALOADER and peer != "ffcv":
            cands = sorted(set(cands) | set(worker_counts(cpus)))
        if a.no_search:
            cands = [cpus]
        if len(cands) == 1:
            best_w[label] = cands[0]
            continue
        search[label] = []
        for w in cands:
            log("search %s workers=%d" % (label, w))
            r = one(label, peer, src, w, max(2.0, a.seconds / 2))
            search[label].append(r)
        ok = [r for r in search[label] if "error" not in r and "flag" not in r]
        best_w[label] = max(ok, key=lambda r: r["samples_per_s"])["workers"] if ok else cands[-1]
    runs = {label: [] for label, _, _ in rows}
    for rnd in range(a.rounds if rows else 0):
        order = rows[rnd % len(rows):] + rows[:rnd % len(rows)]
        for label, peer, src in order:
            log("round %d/%d %s (workers %d)" % (rnd + 1, a.rounds, label, best_w[label]))
            runs[label].append(one(label, peer, src, best_w[label], a.seconds))
    result = {}
    for label, peer, src in rows:
        rs = runs[label]
        good = [r for r in rs if "error" not in r and "flag" not in r]
        e = {"peer": peer, "source": src, "workers": best_w[label], "runs": rs,
             "search": search.get(label, [])}
        errs = [r["error"] for r in rs if "error" in r]
        flags = [r["flag"] for r in rs if "flag" in r]
        if errs:
            e["error"] = errs[0]
        if flags:
            e["flag"] = flags[0]
        if good and not errs and not flags:
            e["samples_per_s"] = _spread([r["samples_per_s"] for r in good])
            e["cpu_s_per_1000"] = statistics.median(r["cpu_s_per_1000"] for r in good)
            e["pss_peak_mb"] = statistics.median(r["pss_mb"] for r in good)
            e["loader_mb"] = statistics.median(r["loader_mb"] for r in good)
            e["startup_s"] = statistics.median(r["startup_s"] for r in good)
        result[label] = e
    ref = {}
    for label, e in result.items():
        if e["peer"] == "stoker" and "samples_per_s" in e:
            ref[label] = e["samples_per_s"]["median"]
    best_stoker = max(ref.values()) if ref else 0
    mem = [e["loader_mb"] for e in result.values() if e["peer"] == "stoker" and "loader_mb" in e]
    stoker_mem = min(mem) if mem else None
    for label, e in result.items():
        if e["peer"] != "stoker" and "samples_per_s" in e and e["samples_per_s"]["median"] > 0:
            m = e["samples_per_s"]["median"]
            e["ratio"] = {k: v / m for k, v in ref.items()}
            e["ratio_best_stoker"] = best_stoker / m
            if stoker_mem is not None and e.get("loader_mb"):
                e["memory_ratio"] = stoker_mem / e["loader_mb"]
    versions = {}
    try:
        import importlib.metadata as md
        for d in ("torch", "torchvision", "nvidia-dali-cuda120", "spdl", "mosaicml-streaming",
                  "litdata", "webdataset", "ffcv", "pillow", "pillow-simd"):
            try:
                versions[d] = md.version(d)
            except md.PackageNotFoundError:
                pass
    except ImportError:
        pass
    out = {"path": path, "mode": a.mode, "cache": a.cache, "cpus": cpus, "batch_size": a.batch_size,
           "prefetch": a.prefetch,
           "rounds": a.rounds, "seconds": a.seconds, "ramp": base["ramp"], "mean_bytes": mean_bytes, "versions": versions,
           "conversions": conversions, "results": result,
           "skipped": [{"peer": p, "why": w} for p, w in skipped],
           "failed": [{"peer": p, "why": w} for p, w in failed.items()],
           "load": open("/proc/loadavg").read().split()[:3]}
    out["table"] = table(out)
    if a.json:
        json.dump(out, sys.stdout, indent=1)
        print()
    else:
        print("\n".join(out["table"]))
    return 0


def table(out):
    """The human lines (the CLI prints these too)."""
    pf = out.get("prefetch", 0)
    L = ["vs the peers: %s, %s cache, batch %d, %s, %d CPUs, %d rounds of %.0f s (load %s)" % (
        out["mode"], out["cache"], out["batch_size"],
        "prefetch %d" % pf if pf else "each loader's default prefetch", out["cpus"], out["rounds"],
        out["seconds"],
        " ".join(out["load"])),
         "  every side timed alike: start-up = create until the first batch, then a %.2f s ramp, "
         "then the %.0f s window (samples/s: its steady rate)" % (out.get("ramp", 0), out["seconds"])]
    L.append("  %-20s %7s %10s %15s %10s %9s %9s %7s %9s %9s" % (
        "", "workers", "samples/s", "(min-max)", "CPU s/1k", "PSS MB", "loader MB", "start s",
        "stoker/x", "mem s/x"))
    for label, e in out["results"].items():
        if "samples_per_s" not in e:
            L.append("  %-20s %s" % (label, "FAILED: %s" % e["error"] if "error" in e
                                     else "FLAGGED (not ranked): %s" % e.get("flag")))
            continue
        s = e["samples_per_s"]
        r = "%.2fx" % e["ratio_best_stoker"] if "ratio_best_stoker" in e else ""
        mr = "%.2fx" % e["memory_ratio"] if "memory_ratio" in e else ""
        L.append("  %-20s %7d %10.0f %15s %10.2f %9.0f %9.0f %7.2f %9s %9s" % (
            label, e["workers"], s["median"], "(%.0f-%.0f)" % (s["min"], s["max"]),
            e["cpu_s_per_1000"], e["pss_peak_mb"], e.get("loader_mb", 0), e["startup_s"], r, mr))
    for name, m in out["conversions"].items():
        L.append("  format for %-12s %s" % (name, m["error"] if "error" in m else
                 "%.1f s, %.0f MB%s" % (m["seconds"], m["bytes"] / 1e6,
                                        " (made earlier)" if m.get("cached") else "")))
    for s in out["skipped"]:
        L.append("  skipped %s: %s" % (s["peer"], s["why"]))
    for s in out["failed"]:
        L.append("  failed %s: %s" % (s["peer"], s["why"]))
    if out["versions"]:
        L.append("  versions: " + ", ".join("%s %s" % kv for kv in out["versions"].items()))
    return L


if __name__ == "__main__":
    sys.exit(main())
