#!/usr/bin/env python3
"""bench/gpu_check.py — the GPU path proven on a GPU (issue 16).  Run it
through bench/gpu_check.sh, which finds the build (carried or the tree's),
and says so and stops on a machine without a GPU.

  tests  the CUDA tests that skip elsewhere: pytest -k cuda, tests/test_pin
  h2d    host->GPU bandwidth of one batch in stoker's pinned slots, in a tensor
         of PyTorch's pinned memory and in a pageable one (same size,
         non_blocking copies on a side stream, alone and beside compute);
         target: stoker >= 90 % of PyTorch's pinned figure
  feed   ResNet-50 (random weights, bf16 autocast, channels_last, batch 256)
         trained a fixed number of steps from stoker.Loader(image=...) and
         from DataLoader + torchvision transforms at its best worker count (a
         sweep), alternating: images/s, GPU busy % (NVML, sampled), the data
         stall, stoker's verdict (loader.diagnose())
  nvml   stoker's NVML figures (stk_sys_gpus: utilization, memory, PCIe link)
         against nvidia-smi --query-gpu read at the same moments, idle and busy

--mode cpu runs `feed` on the CPU with a tiny model and dataset (what
tests/cli_gpu.sh runs on a machine without a GPU).  Writes OUT/gpu_check.json
and OUT/gpu_check.txt (a short table) even when a part fails (that part says
why); exit 1 when a part failed or missed its target.
"""

import argparse
import ctypes
import json
import os
import re
import statistics
import subprocess
import sys
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
now = time.monotonic


def log(msg):
    print("gpu_check: " + msg, flush=True)


# --- stoker's NVML figures (the exporter's and the doctor's) ------------------

class Gpu(ctypes.Structure):
    """struct stk_gpu of include/stoker/sys.h (the library writes no more than
    .size, so an older or newer layout stays safe)."""
    _fields_ = [("size", ctypes.c_uint32), ("index", ctypes.c_uint32),
                ("name", ctypes.c_char * 96), ("bus_id", ctypes.c_char * 32),
                ("mem_total", ctypes.c_uint64), ("mem_used", ctypes.c_uint64),
                ("pcie_gen", ctypes.c_int32), ("pcie_width", ctypes.c_int32),
                ("pcie_gen_max", ctypes.c_int32), ("pcie_width_max", ctypes.c_int32),
                ("h2d_gbps", ctypes.c_double), ("util_gpu", ctypes.c_int32)]


def stoker_gpus(lib):
    arr = (Gpu * 16)()
    arr[0].size = ctypes.sizeof(Gpu)
    why = ctypes.create_string_buffer(256)
    lib.stk_sys_gpus.restype = ctypes.c_int
    lib.stk_sys_gpus.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t]
    n = lib.stk_sys_gpus(ctypes.cast(arr, ctypes.c_void_p), 16, why, len(why))
    if n < 0:
        raise RuntimeError("stk_sys_gpus: %d: %s" % (n, why.value.decode()))
    return [{"index": g.index, "name": g.name.decode(), "mem_total": g.mem_total,
             "mem_used": g.mem_used, "pcie_gen": g.pcie_gen, "pcie_width": g.pcie_width,
             "pcie_gen_max": g.pcie_gen_max, "pcie_width_max": g.pcie_width_max,
             "h2d_gbps": g.h2d_gbps, "util": g.util_gpu} for g in arr[:min(n, 16)]]


SMI_FIELDS = ["index", "name", "utilization.gpu", "memory.used", "memory.total",
              "pcie.link.gen.current", "pcie.link.width.current", "pcie.link.gen.max",
              "pcie.link.width.max"]


def smi_gpus():
    out = subprocess.run(["nvidia-smi", "--query-gpu=" + ",".join(SMI_FIELDS),
                          "--format=csv,noheader,nounits"], capture_output=True, text=True,
                         timeout=20, check=True).stdout
    rows = []
    for line in out.strip().splitlines():
        v = [x.strip() for x in line.split(",")]
        num = lambda s: int(s) if re.fullmatch(r"\d+", s) else None
        rows.append({"index": num(v[0]), "name": v[1], "util": num(v[2]),
                     "mem_used": None if num(v[3]) is None else num(v[3]) << 20,
                     "mem_total": None if num(v[4]) is None else num(v[4]) << 20,
                     "pcie_gen": num(v[5]), "pcie_width": num(v[6]),
                     "pcie_gen_max": num(v[7]), "pcie_width_max": num(v[8])})
    return rows


class BusySampler:
    """NVML utilization of one GPU, sampled every 100 ms through libstoker."""

    def __init__(self, lib, index):
        self.lib, self.index, self.samples = lib, index, []
        self._stop = threading.Event()
        self._t = None

    def __enter__(self):
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()
        return self

    def _run(self):
        while not self._stop.is_set():
            try:
                g = stoker_gpus(self.lib)
                if self.index < len(g) and g[self.index]["util"] >= 0:
                    self.samples.append(g[self.index]["util"])
            except Exception:
                pass
            self._stop.wait(0.1)

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join()

    def mean(self):
        return statistics.mean(self.samples) if self.samples else None


# --- the parts ------------------------------------------------------------------

class Ctx:
    def __init__(self, a):
        self.a = a
        self.t0 = now()
        self.deadline = self.t0 + a.budget
        self.results = {"schema_version": 1, "mode": a.mode, "parts": {}}

    def left(self):
        return self.deadline - now()


def run_part(ctx, name, fn, need_s):
    """Runs one part; its dict (with "status") goes into the results."""
    r = ctx.results["parts"].setdefault(name, {})
    if ctx.left() < need_s:
        r.update(status="skipped", why="%.0f s of the budget left, the part needs ~%.0f"
                 % (ctx.left(), need_s))
        log("%s: skipped (%s)" % (name, r["why"]))
        return r
    t = now()
    log("%s ..." % name)
    try:
        fn(ctx, r)
        r.setdefault("status", "ok")
    except Exception as e:  # a part that breaks says why; the others still run
        r.update(status="error", why="%s: %s" % (type(e).__name__, e),
                 trace=traceback.format_exc().splitlines()[-6:])
    r["seconds"] = round(now() - t, 1)
    log("%s: %s (%.0f s)%s" % (name, r["status"], r["seconds"],
                               ": " + r["why"] if r.get("why") else ""))
    return r


def part_tests(ctx, r):
    """pytest -k cuda over tests/python, and tests/test_pin, on the real GPU."""
    env = dict(os.environ)
    py = [sys.executable, "-m", "pytest", "-q", "-rs", "-k", "cuda",
          os.path.join(ROOT, "tests", "python")]
    import importlib.util
    if importlib.util.find_spec("pytest") is None:
        carried = os.path.join(os.environ.get("STOKER_CARRY", ""), "pylib")
        if os.path.isdir(carried):  # Debian's pytest, carried by gpu_prepare.sh
            env["PYTHONPATH"] = env.get("PYTHONPATH", "") + os.pathsep + carried
    p = subprocess.run(py, env=env, capture_output=True, text=True, timeout=max(30, ctx.left() - 60))
    tail = (p.stdout + p.stderr).strip().splitlines()
    summary = next((l for l in reversed(tail) if re.search(r"\d+ (passed|failed|error)", l)), "")
    passed = int((re.search(r"(\d+) passed", summary) or [0, 0])[1])
    # the real CUDA tests must have run, not skipped for want of a GPU
    unrun = [l for l in tail if l.startswith("SKIPPED") and "no CUDA device" in l]
    r["pytest"] = {"rc": p.returncode, "summary": summary, "tail": tail[-15:], "unrun": unrun}
    # test_pin: the real runtime, the one PyTorch loaded (its folder on the path)
    import torch
    torch.cuda.init()
    dirs = sorted({os.path.dirname(l.split()[-1]) for l in open("/proc/self/maps")
                   if "libcudart" in l and l.split()[-1].startswith("/")})
    binary = os.path.join(os.environ.get("STOKER_CARRY") or os.path.join(ROOT, "build"),
                          "tests", "test_pin")
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = os.pathsep.join(dirs + [env.get("LD_LIBRARY_PATH", "")])
    c = subprocess.run([binary], env=env, capture_output=True, text=True, timeout=120)
    out = (c.stdout + c.stderr).strip().splitlines()
    real = [l for l in out if l.startswith("skipped")]
    r["test_pin"] = {"rc": c.returncode, "cudart_dirs": dirs, "tail": out[-12:],
                     "real_gpu": "ok" if any("[       OK ] real_gpu" in l for l in out)
                     else "; ".join(real) or "not run"}
    bad = []
    if p.returncode or passed == 0 or unrun:
        bad.append("pytest -k cuda: %s%s" % (summary or "rc %d" % p.returncode,
                                             "; skipped: %s" % unrun if unrun else ""))
    if c.returncode or r["test_pin"]["real_gpu"] != "ok":
        bad.append("test_pin: %s" % r["test_pin"]["real_gpu"])
    if bad:
        r.update(status="failed", why="; ".join(bad))


def make_data(ctx):
    """The generated dataset, once (stoker gen: ~300 images a second a core)."""
    a = ctx.a
    # not under OUT: a device run brings OUT back, and the dataset is ~1 GB
    d = a.data or os.path.join(ROOT, "build", "gpu-check-data-%d" % a.images)
    if os.path.isdir(d) and os.listdir(d):
        return d
    j = subprocess.run([os.environ.get("STOKER", "stoker"), "gen", d + ".partial", "--images",
                        str(a.images), "--classes", str(a.classes), "--replace", "--json"],
                       capture_output=True, text=True, timeout=300, check=True).stdout
    os.rename(d + ".partial", d)
    ctx.results["dataset"] = dict(json.loads(j), dir=d)
    return d


def part_h2d(ctx, r):
    import torch
    import stoker
    dev = torch.device("cuda", torch.cuda.current_device())
    data = make_data(ctx)
    with stoker.Loader(data, 256, image=stoker.Image(size=224), shuffle=False) as l:
        b = next(iter(l))
        src_s = b.images
        st = l.stats()
        r["stoker_pinned"] = bool(st["pinned"])
        r["torch_sees_pinned"] = bool(src_s.is_pinned())
        nbytes = src_s.numel() * src_s.element_size()
        src_t = torch.empty(src_s.shape, dtype=src_s.dtype, pin_memory=True)
        src_t.copy_(src_s)
        src_p = src_s.clone()  # pageable
        dst = torch.empty(src_s.shape, dtype=src_s.dtype, device=dev)
        side = torch.cuda.Stream(dev)
        mat = torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16)
        reps = 16

        def gbps(src, compute):
            torch.cuda.synchronize(dev)
            if compute:  # enough matmuls on the default stream to outlast the copies
                for _ in range(60):
                    mat @ mat
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            with torch.cuda.stream(side):
                e0.record(side)
                for _ in range(reps):
                    dst.copy_(src, non_blocking=True)
                e1.record(side)
            torch.cuda.synchronize(dev)
            return reps * nbytes / (e0.elapsed_time(e1) / 1e3) / 1e9

        for src in (src_s, src_t, src_p):  # warm-up
            gbps(src, False)
        runs = {k: [] for k in ("stoker", "torch_pinned", "pageable")}
        runs_c = {k: [] for k in runs}
        for _ in range(7):  # alternating rounds
            for k, src in (("stoker", src_s), ("torch_pinned", src_t), ("pageable", src_p)):
                runs[k].append(gbps(src, False))
                runs_c[k].append(gbps(src, True))
        assert torch.equal(dst.cpu(), src_s), "the copied batch differs from the slot's"
        del src_s, b
    r["batch_bytes"] = nbytes
    r["gb_s"] = {k: round(statistics.median(v), 2) for k, v in runs.items()}
    r["gb_s_beside_compute"] = {k: round(statistics.median(v), 2) for k, v in runs_c.items()}
    ratio = r["gb_s_beside_compute"]["stoker"] / r["gb_s_beside_compute"]["torch_pinned"]
    r["ratio_to_torch_pinned"] = round(ratio, 3)
    r["ratio_alone"] = round(r["gb_s"]["stoker"] / r["gb_s"]["torch_pinned"], 3)
    r["target"] = ">= 0.90 of PyTorch's pinned, beside compute"
    if not r["stoker_pinned"] or ratio < 0.9:
        r.update(status="failed", why="stoker's slots %s; %.2f of PyTorch's pinned figure"
                 % ("pinned" if r["stoker_pinned"] else "NOT pinned", ratio))


def _tiny_model(torch):
    nn = torch.nn
    return nn.Sequential(nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                         nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10))


def part_feed(ctx, r):
    import torch
    import torch.nn.functional as F
    import stoker
    a = ctx.a
    gpu = a.mode == "gpu"
    dev = torch.device("cuda", torch.cuda.current_device()) if gpu else torch.device("cpu")
    data = make_data(ctx)
    size, batch = (224, 256) if gpu else (64, 8)
    try:
        import torchvision
        import torchvision.transforms as T
    except ImportError:
        r.update(status="skipped", why="no torchvision here (ResNet-50 and the DataLoader "
                 "side need it)")
        return
    if gpu:
        try:
            model = torchvision.models.resnet50(weights=None)
        except TypeError:  # torchvision before 0.13
            model = torchvision.models.resnet50(pretrained=False)
        r["model"] = "resnet50, random weights, bf16 autocast, channels_last, batch %d" % batch
    else:
        model = _tiny_model(torch)
        r["model"] = "tiny CNN (2 conv), bf16 autocast on the CPU, batch %d" % batch
    model = model.to(dev, memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    mean = torch.tensor(stoker.IMAGENET_MEAN, device=dev).view(1, 3, 1, 1) * 255
    std = torch.tensor(stoker.IMAGENET_STD, device=dev).view(1, 3, 1, 1) * 255
    ncls = 1000 if gpu else 10

    def step(x, y):
        x = ((x.float() - mean) / std).contiguous(memory_format=torch.channels_last)
        with torch.autocast(device_type=dev.type, dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), y % ncls)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    def sync():
        if gpu:
            torch.cuda.synchronize(dev)

    lib = ctypes.CDLL(stoker.lib_path) if gpu else None

    def train(batches, warmup, steps, to_dev):
        """images/s over `steps` after `warmup`, the share of that time spent
        waiting for batches, GPU busy % (NVML), the last loss."""
        it = iter(batches)
        wait = 0.0
        for i in range(warmup):
            x, y = next(it)
            step(x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)) if to_dev else step(x, y)
        sync()
        sampler = BusySampler(lib, dev.index or 0) if gpu else None
        if sampler:
            sampler.__enter__()
        t = now()
        loss = None
        for i in range(steps):
            w = now()
            x, y = next(it)
            wait += now() - w
            if to_dev:
                x, y = x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)
            loss = step(x, y)
        sync()
        dt = now() - t
        if sampler:
            sampler.__exit__()
        return {"images_per_s": round(steps * batch / dt, 1), "seconds": round(dt, 2),
                "stall": round(wait / dt, 3), "gpu_busy_pct": sampler and sampler.mean(),
                "loss": float(loss)}

    warm, steps, dl_steps = (5, 30, 12) if gpu else (1, 4, 3)
    img = stoker.Image(size=size, crop="random_resized", flip=True)

    def run_stoker():
        with stoker.Loader(data, batch, image=img, device=dev if gpu else None, drop_last=True,
                           seed=len(r.get("stoker", []))) as l:
            l.set_epoch(0)
            res = train(l, warm, steps, to_dev=False)
            res["pinned"] = l.stats()["pinned"]
            try:
                v = l.diagnose(0.0)  # the loader's whole life: warm-up and timed steps
                res["verdict"] = {"kind": v["kind"], "evidence": v["evidence"], "try": v["try"]}
            except Exception as e:
                res["verdict"] = {"kind": "unknown", "evidence": "diagnose(): %s" % e, "try": ""}
        return res

    tf = T.Compose([T.RandomResizedCrop(size), T.RandomHorizontalFlip(), T.PILToTensor()])
    ds = torchvision.datasets.ImageFolder(data, transform=tf)

    def run_dl(workers, n):
        kw = dict(batch_size=batch, shuffle=True, num_workers=workers, pin_memory=gpu,
                  drop_last=True)
        if workers:
            kw.update(prefetch_factor=4, persistent_workers=False)
        dl = torch.utils.data.DataLoader(ds, **kw)
        res = train(dl, 3 if gpu else 1, n, to_dev=True)
        res["workers"] = workers
        res["verdict"] = {"kind": "input-bound" if res["stall"] > 0.1 else "compute-bound",
                          "evidence": "the trainer waited %.0f %% of the time on the DataLoader"
                          % (100 * res["stall"]), "try": ""}
        del dl
        return res

    cpus = len(os.sched_getaffinity(0))
    sweep = sorted({max(1, cpus // 2), max(1, cpus * 3 // 4), cpus}) if gpu else [0, 2]
    r["stoker"], r["dataloader_sweep"], r["dataloader"] = [], [], []
    r["stoker"].append(run_stoker())
    for w in sweep:
        if gpu and ctx.left() < 60:
            break
        r["dataloader_sweep"].append(run_dl(w, dl_steps))
    best = max(r["dataloader_sweep"], key=lambda x: x["images_per_s"])
    r["dataloader_best_workers"] = best["workers"]
    r["dataloader"].append(best)
    if not gpu or ctx.left() > 60:  # a second alternating round where time allows
        r["stoker"].append(run_stoker())
        r["dataloader"].append(run_dl(best["workers"], steps))
    med = lambda runs, k: statistics.median([x[k] for x in runs])
    r["images_per_s"] = {"stoker": med(r["stoker"], "images_per_s"),
                         "dataloader": med(r["dataloader"], "images_per_s")}
    r["ratio"] = round(r["images_per_s"]["stoker"] / r["images_per_s"]["dataloader"], 3)
    if gpu:
        r["gpu_busy_pct"] = {k: med([x for x in v if x["gpu_busy_pct"] is not None],
                                    "gpu_busy_pct") if any(x["gpu_busy_pct"] is not None for x in v)
                             else None for k, v in (("stoker", r["stoker"]),
                                                    ("dataloader", r["dataloader"]))}
    bad = [x for x in r["stoker"] + r["dataloader"] if not x["loss"] == x["loss"]]
    if bad:
        r.update(status="failed", why="a loss is NaN")


def part_nvml(ctx, r):
    import torch
    import stoker
    lib = ctypes.CDLL(stoker.lib_path)
    dev = torch.device("cuda", torch.cuda.current_device())
    stop = threading.Event()

    def busy():
        m = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
        while not stop.is_set():
            for _ in range(20):
                m @ m
            torch.cuda.synchronize(dev)

    samples = []

    def sample(state):
        for k in range(4):
            t0 = now()
            if k % 2:  # alternate which reads first, so neither is always later
                smi, mine = smi_gpus(), stoker_gpus(lib)
            else:
                mine, smi = stoker_gpus(lib), smi_gpus()
            samples.append({"state": state, "ms_apart": round((now() - t0) * 1e3),
                            "stoker": mine, "nvidia_smi": smi})
            time.sleep(0.25)

    sample("idle")
    t = threading.Thread(target=busy, daemon=True)
    t.start()
    time.sleep(1.0)
    sample("busy")
    stop.set()
    t.join()
    r["samples"] = samples
    r["diffs"], bad = compare(samples)
    r["tolerance"] = "utilization 20 points (different sampling windows), memory used 1 % of total"
    if bad:
        r.update(status="failed", why="; ".join(bad))


def compare(samples):
    """(per-sample differences, the ones out of tolerance) between stoker's
    NVML figures and nvidia-smi's, GPU by GPU."""
    diffs, bad = [], []
    for s in samples:
        for g, h in zip(s["stoker"], s["nvidia_smi"]):
            d = {"state": s["state"], "gpu": g["index"],
                 "util_pp": None if h["util"] is None else g["util"] - h["util"],
                 "mem_used_mib": None if h["mem_used"] is None else (g["mem_used"] - h["mem_used"]) / 2**20,
                 "mem_total_mib": None if h["mem_total"] is None else (g["mem_total"] - h["mem_total"]) / 2**20,
                 "pcie_now": "%s x%s / %s x%s" % (g["pcie_gen"], g["pcie_width"], h["pcie_gen"], h["pcie_width"]),
                 "pcie_max": "%s x%s / %s x%s" % (g["pcie_gen_max"], g["pcie_width_max"],
                                                 h["pcie_gen_max"], h["pcie_width_max"]),
                 "name": g["name"] == h["name"]}
            diffs.append(d)
            if d["util_pp"] is not None and abs(d["util_pp"]) > 20:
                bad.append("utilization %+d points (%s)" % (d["util_pp"], s["state"]))
            if d["mem_used_mib"] is not None and abs(d["mem_used_mib"]) > max(64, 0.01 * g["mem_total"] / 2**20):
                bad.append("memory used %+.0f MiB (%s)" % (d["mem_used_mib"], s["state"]))
            if d["mem_total_mib"] is not None and abs(d["mem_total_mib"]) > 1:
                bad.append("memory total %+.0f MiB" % d["mem_total_mib"])
            if (g["pcie_gen_max"], g["pcie_width_max"]) != (h["pcie_gen_max"], h["pcie_width_max"]):
                bad.append("PCIe max link %s" % d["pcie_max"])
            if not d["name"]:
                bad.append("name %r vs %r" % (g["name"], h["name"]))
    return diffs, sorted(set(bad))


# --- the table --------------------------------------------------------------------

def table(res):
    L = ["stoker gpu_check (%s), %s" % (res["mode"], res.get("machine", {}).get("gpu", "no GPU"))]
    for name, p in res["parts"].items():
        L.append("%-6s %-8s %s" % (name, p.get("status"), p.get("why", "")))
        if name == "h2d" and "gb_s" in p:
            for k in ("stoker", "torch_pinned", "pageable"):
                L.append("         %-13s %7.2f GB/s alone  %7.2f GB/s beside compute"
                         % (k, p["gb_s"][k], p["gb_s_beside_compute"][k]))
            L.append("         stoker / torch pinned: %.2f (target >= 0.90)%s"
                     % (p["ratio_to_torch_pinned"], "" if p["stoker_pinned"] else "; NOT pinned"))
        if name == "feed" and "images_per_s" in p:
            for k in ("stoker", "dataloader"):
                runs = p[k]
                busy = p.get("gpu_busy_pct", {}) or {}
                extra = " (%d workers)" % p["dataloader_best_workers"] if k == "dataloader" else ""
                L.append("         %-11s %8.1f images/s, GPU busy %s, stall %.0f %%, %s%s"
                         % (k, p["images_per_s"][k],
                            "%.0f %%" % busy[k] if busy.get(k) is not None else "n/a",
                            100 * statistics.median([x["stall"] for x in runs]),
                            runs[-1]["verdict"]["kind"], extra))
            L.append("         stoker / DataLoader: %.2f" % p["ratio"])
            for x in p.get("dataloader_sweep", []):
                L.append("         DataLoader %2d workers: %8.1f images/s"
                         % (x["workers"], x["images_per_s"]))
        if name == "nvml" and p.get("diffs"):
            d = p["diffs"]
            util = [x["util_pp"] for x in d if x["util_pp"] is not None]
            mem = [x["mem_used_mib"] for x in d if x["mem_used_mib"] is not None]
            L.append("         stoker - nvidia-smi: utilization %s points, memory used %s MiB, "
                     "PCIe %s" % ("%+d..%+d" % (min(util), max(util)) if util else "n/a",
                                  "%+.0f..%+.0f" % (min(mem), max(mem)) if mem else "n/a",
                                  d[-1]["pcie_now"]))
    L.append("total %.0f s" % res.get("seconds", 0))
    return "\n".join(L) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mode", choices=("gpu", "cpu"), default="gpu")
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "gpu-check"))
    ap.add_argument("--data", help="the ImageFolder to use, generated there when missing "
                    "(default: build/gpu-check-data-IMAGES)")
    ap.add_argument("--images", type=int, default=None)
    ap.add_argument("--classes", type=int, default=None)
    ap.add_argument("--budget", type=float, default=None, help="seconds for the lot")
    ap.add_argument("--parts", default=None, help="comma-separated subset of tests,h2d,feed,nvml")
    a = ap.parse_args()
    gpu = a.mode == "gpu"
    a.images = a.images or (10240 if gpu else 96)
    a.classes = a.classes or (100 if gpu else 4)
    a.budget = a.budget or (320 if gpu else 120)
    os.makedirs(a.out, exist_ok=True)
    ctx = Ctx(a)
    res = ctx.results
    import torch
    res["machine"] = {"python": sys.version.split()[0], "torch": torch.__version__,
                      "cuda": torch.version.cuda, "cpus": len(os.sched_getaffinity(0)),
                      "stoker_lib": os.environ.get("STOKER_LIB"), "carry": os.environ.get("STOKER_CARRY")}
    if gpu:
        if not torch.cuda.is_available():
            res["parts"]["setup"] = {"status": "error", "why": "a GPU is here but this PyTorch "
                                     "cannot use it (torch.version.cuda %s)" % torch.version.cuda}
        else:
            res["machine"]["gpu"] = torch.cuda.get_device_name()
    wanted = (a.parts or ("tests,h2d,feed,nvml" if gpu else "feed")).split(",")
    if "setup" not in res["parts"]:
        plan = [("tests", part_tests, 30), ("h2d", part_h2d, 25), ("feed", part_feed, 60),
                ("nvml", part_nvml, 10)]
        for name, fn, need in plan:
            if name in wanted:
                run_part(ctx, name, fn, need)
    res["seconds"] = round(now() - ctx.t0, 1)
    with open(os.path.join(a.out, "gpu_check.json"), "w") as f:
        json.dump(res, f, indent=2, default=str)
    text = table(res)
    with open(os.path.join(a.out, "gpu_check.txt"), "w") as f:
        f.write(text)
    sys.stdout.write(text)
    ok = all(p.get("status") in ("ok",) for p in res["parts"].values())
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
