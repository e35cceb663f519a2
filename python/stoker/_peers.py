"""The peers stoker is measured against, one run each in a process of its own
(python3 -m stoker._peers SPEC_JSON): what `stoker bench --vs dali,spdl,...`
(stoker.vs_peers) starts, times and samples.

A run builds one loader the way its documentation says is fastest and is
timed by the rule every side of --vs follows (stoker._timing: start-up =
creating the loader until its first batch, then the ramp, not measured,
then the window of --seconds or --samples); it prints one JSON line: the
start-up, the window's samples, bytes and seconds and the CPU seconds every
process of the run spent in it (this process and its workers: /proc utime +
stime, reaped children's included), and what the first batch held (shape,
dtype), so a peer that resized to another size or decoded to another dtype
is flagged, not ranked.

Workloads: raw (each sample's bytes), train (decode + RandomResizedCrop 224 +
horizontal flip, uint8), val (Resize 256 + CenterCrop 224, uint8).  Every
peer shuffles with the run's seed.  The converters write each peer's own
format (Mosaic MDS, LitData chunks) from stoker's index of the folder.
"""

import json
import os
import sys
import time

PEERS = ("stoker", "torch", "torch-pil", "dali", "dali-wds", "spdl", "streaming", "litdata", "wds",
         "ffcv")
DATALOADER = ("torch", "torch-pil", "streaming", "litdata", "wds", "ffcv")  # worker processes


def proc_tree(root):
    """root and every live descendant: {pid: (ppid, ticks)} with ticks =
    utime + stime + cutime + cstime (children already reaped included)."""
    info = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                s = f.read()
        except OSError:
            continue
        f = s.rsplit(")", 1)[1].split()
        info[int(d)] = (int(f[1]), sum(int(x) for x in f[11:15]))
    kids = {}
    for pid, (ppid, _) in info.items():
        kids.setdefault(ppid, []).append(pid)
    out, todo = {}, [root]
    while todo:
        p = todo.pop()
        if p in info:
            out[p] = info[p]
            todo += kids.get(p, [])
    return out


def tree_cpu_s(root=None):
    """CPU seconds spent so far by root (this process) and its descendants."""
    t = proc_tree(root or os.getpid())
    return sum(v[1] for v in t.values()) / os.sysconf("SC_CLK_TCK")


def pss_kb(pid):
    """(PSS, anonymous + shared-memory PSS) of pid in KiB.  The second leaves
    out file pages (the libraries' code, shared with every process that maps
    them, so a process's share of them moves with what else runs); anonymous
    pages a forked worker shares with its parent are split between the two,
    so summed over a process tree it counts each page of the tree once."""
    tot = anon = 0
    try:
        with open("/proc/%d/smaps_rollup" % pid) as f:
            for line in f:
                if line.startswith("Pss:"):
                    tot = int(line.split()[1])
                elif line.startswith(("Pss_Anon:", "Pss_Shmem:")):
                    anon += int(line.split()[1])
    except OSError:
        pass
    return tot, anon


def _children(pid):
    """pid's child processes, from /proc/PID/task/*/children (every thread's:
    a worker may be forked from any thread)."""
    kids = []
    try:
        tasks = os.listdir("/proc/%d/task" % pid)
    except OSError:
        return kids
    for t in tasks:
        try:
            with open("/proc/%d/task/%s/children" % (pid, t)) as f:
                kids += [int(x) for x in f.read().split()]
        except OSError:
            pass
    return kids


def tree_pids(root):
    """root and its live descendants.  Walks the tree down from root
    (/proc/PID/task/*/children: ~0.1 ms for a loader and its workers) where
    the kernel has those files, else lists every process (proc_tree: 1.6-2.3
    ms here, 20 times a second)."""
    if not os.path.exists("/proc/self/task/%d/children" % os.getpid()):
        return list(proc_tree(root))
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += _children(p)
    return out


def rss_faults(pid):
    """(anonymous + shared-memory resident KiB, page faults so far) of pid
    from /proc/PID/status and /proc/PID/stat: mm counters, no page-table walk
    (~50 us); (0, 0) once it is gone.  File pages are left out as in the
    loader's memory figure: a mapped file (FFCV's .beton) grows them all run
    long."""
    rss = 0
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith(("RssAnon:", "RssShmem:")):
                    rss += int(line.split()[1])
        with open("/proc/%d/stat" % pid) as f:
            f = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError, ValueError):
        return 0, 0
    return rss, int(f[7]) + int(f[9])


class PeakPss:
    """The peak PSS of a process tree, read only when it may have risen.

    A PSS read (smaps_rollup: the kernel walks the page tables) costs ~10 ms
    of CPU a torch process; at 20 reads a second it took 0.2-0.25 of the 2
    CPUs from the loader measured, even from a nice-19 thread (docs/
    BENCHMARKS.md, "The harness's own share of the CPUs, found and given
    back").  tick() reads each process's resident pages and fault count
    (/proc/PID/status and stat, ~50 us), and the PSS of the whole tree only
    when
      - a process joined the tree since the last read (start, workers),
      - the tree's anonymous + shared-memory RSS passed, by more than 0.5 %,
        the highest it had at a read (PSS <= RSS; what a loader allocates,
        its workers' batches in shared memory too, shows in it first),
      - or its processes faulted pages in since the last read (new pages or
        copy-on-write copies: how PSS rises under a flat RSS) and 1 s, or 100
        times the last read's cost, has passed: at most ~1 % of a CPU.
    Every side of a comparison is sampled by this one rule."""

    def __init__(self, root):
        self.root = root
        self.peak = self.peak_anon = 0       # KiB
        self.reads = self.ticks = 0
        self.pids = frozenset()
        self.rss_hi = 0                      # tree anon + shmem RSS (KiB), highest read
        self.faults = 0                      # tree's faults at the last read
        self.next_t = 0.0                    # earliest fault-triggered read
        self.read_at = []                    # time.monotonic() of each PSS read

    def tick(self):
        now = time.monotonic()
        pids = tree_pids(self.root)
        rf = [rss_faults(p) for p in pids]
        rss, faults = sum(r for r, _ in rf), sum(f for _, f in rf)
        self.ticks += 1
        new = not self.pids.issuperset(pids)
        if not (new or rss > self.rss_hi * 1.005 or (faults != self.faults and now >= self.next_t)):
            return
        t0 = time.thread_time()
        m = [pss_kb(p) for p in pids]
        cost = time.thread_time() - t0
        self.reads += 1
        self.read_at.append(now)
        self.peak = max(self.peak, sum(t for t, _ in m))
        self.peak_anon = max(self.peak_anon, sum(a for _, a in m))
        self.pids = frozenset(pids)
        self.rss_hi = max(self.rss_hi, rss)
        self.faults = faults
        self.next_t = time.monotonic() + max(1.0, 100 * cost)


def sampler_summary(stats, res):
    """What the sampler did in a run (stats from run_sampled, res the run's
    result with its window_at): ticks, PSS reads, those inside the window."""
    w = res.get("window_at") or [0, 0]
    return {"ticks": stats.get("ticks", 0), "pss_reads": stats.get("pss_reads", 0),
            "pss_reads_in_window": sum(w[0] <= t <= w[1] for t in stats.get("read_at", []))}


def window_clock(cpu, marks):
    """cpu (a CPU-seconds callable for timed()) that also notes when it was
    called: timed() calls it at the window's start and end, and
    time.monotonic() is the machine's, so the harness can place its samples."""
    def f():
        marks.append(time.monotonic())
        return cpu()
    return f


def run_sampled(argv, timeout, env=None, started=None, stats=None):
    """Runs argv in a session of its own, sampling its process tree's memory
    every 50 ms (PeakPss: PSS read only when it may have risen; at nice 19)
    until it exits or timeout s pass, then kills the session (its workers
    too).  started(pid) is called once it runs; stats, a dict, gets the
    sampler's ticks and PSS reads.  Returns (stdout lines, hung, returncode,
    stderr's last 3 non-blank lines, peak PSS MB, peak anonymous +
    shared-memory PSS MB, wall s)."""
    import signal
    import subprocess
    import tempfile
    import threading
    err = tempfile.TemporaryFile()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err, start_new_session=True,
                         env=env)
    if started:
        started(p.pid)
    lines = []
    reader = threading.Thread(target=lambda: lines.extend(p.stdout), daemon=True)
    reader.start()
    t0 = time.monotonic()
    pk = PeakPss(p.pid)

    def sample():
        # nice 19 (Linux: this thread only): the reads take CPU the run
        # leaves where the scheduler lets them
        try:
            os.setpriority(os.PRIO_PROCESS, 0, 19)
        except (AttributeError, OSError):
            pass
        while p.poll() is None and time.monotonic() - t0 < timeout:
            pk.tick()
            time.sleep(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    sampler.join()
    hung = p.poll() is None
    try:
        os.killpg(p.pid, signal.SIGKILL)  # its workers too
    except ProcessLookupError:
        pass
    p.wait()
    reader.join(2)
    wall = time.monotonic() - t0
    if stats is not None:
        stats.update(ticks=pk.ticks, pss_reads=pk.reads, read_at=pk.read_at)
    err.seek(0)
    tail = [ln for ln in err.read().decode(errors="replace").splitlines() if ln.strip()][-3:]
    return lines, hung, p.returncode, tail, pk.peak / 1024.0, pk.peak_anon / 1024.0, wall


# what each run imports before it builds its loader: measured after these
# and before the loader, the process's own memory is the baseline its
# loader's memory is counted above
IMPORTS = {
    "stoker": ["stoker"],
    "torch": ["torchvision", "torchvision.transforms.v2", "torchvision.io"],
    "torch-pil": ["torchvision", "torchvision.transforms", "PIL.Image"],
    "dali": ["nvidia.dali", "nvidia.dali.fn", "nvidia.dali.types", "nvidia.dali.plugin.pytorch"],
    "dali-wds": ["nvidia.dali", "nvidia.dali.fn", "nvidia.dali.types", "nvidia.dali.plugin.pytorch"],
    "spdl": ["numpy", "spdl.io", "spdl.pipeline"],
    "streaming": ["streaming", "streaming.base.util", "torchvision", "torchvision.transforms.v2",
                  "torchvision.io"],
    "litdata": ["litdata", "torchvision", "torchvision.transforms.v2", "torchvision.io"],
    "wds": ["webdataset", "torchvision", "torchvision.transforms.v2", "torchvision.io"],
    "ffcv": ["numpy", "ffcv.loader", "ffcv.fields.decoders", "ffcv.transforms"],
}


def baseline_kb(peer, mode):
    """This process's anonymous + shared-memory PSS after the peer's imports
    (torchvision only where the run decodes with it)."""
    import gc
    import importlib
    for m in IMPORTS.get(peer, []):
        if mode == "raw" and m.startswith("torchvision") and peer != "torch-pil":
            continue
        importlib.import_module(m)
    gc.collect()
    return pss_kb(os.getpid())[1]


# ---- the pipelines: each yields (count, bytes, images or None) per batch ----

def _read(ext):
    path, off, size, _ = ext
    with open(path, "rb") as f:
        if off:
            f.seek(off)
        return f.read(size)


class _TvDecode:
    """torchvision's tensor path (decode_jpeg + transforms.v2 on uint8
    tensors), the one its documentation recommends for speed."""

    def __init__(self, s):
        import torch
        from torchvision.transforms import v2
        self.torch = torch
        from torchvision.io import decode_jpeg, ImageReadMode
        self.decode, self.rgb = decode_jpeg, ImageReadMode.RGB
        if s["mode"] == "train":
            self.tf = v2.Compose([v2.RandomResizedCrop(s["size"], scale=s["scale"], ratio=s["ratio"],
                                                       antialias=True), v2.RandomHorizontalFlip()])
        else:
            self.tf = v2.Compose([v2.Resize(round(s["size"] / s["crop_frac"]), antialias=True),
                                  v2.CenterCrop(s["size"])])

    def __call__(self, data):
        t = self.torch.frombuffer(bytearray(data), dtype=self.torch.uint8)
        return self.tf(self.decode(t, mode=self.rgb))


class _PilDecode:
    """PIL (Pillow-SIMD where installed) + torchvision's classic transforms."""

    def __init__(self, s):
        from torchvision import transforms as T
        if s["mode"] == "train":
            tf = [T.RandomResizedCrop(s["size"], scale=s["scale"], ratio=s["ratio"]),
                  T.RandomHorizontalFlip()]
        else:
            tf = [T.Resize(round(s["size"] / s["crop_frac"])), T.CenterCrop(s["size"])]
        self.tf = T.Compose(tf + [T.PILToTensor()])

    def __call__(self, data):
        import io
        from PIL import Image
        with Image.open(io.BytesIO(data)) as im:
            return self.tf(im.convert("RGB"))


def _same(data):
    return data


def _sample_fn(s, pil=False):
    """bytes -> what one sample becomes: the bytes (raw) or the decoded,
    cropped image (a uint8 tensor)."""
    if s["mode"] == "raw":  # bytes: pickled through the workers' pipe, cheaper than a
        return _same        # shared-memory tensor per sample
    return _PilDecode(s) if pil else _TvDecode(s)


def _collate(s):
    import torch
    if s["mode"] == "raw":
        return lambda items: ([t for t, _ in items], torch.tensor([int(y) for _, y in items]))
    return lambda items: (torch.stack([t for t, _ in items]),
                          torch.tensor([int(y) for _, y in items]))


def _batches_dl(s, ds, **kw):
    """torch.utils.data.DataLoader over ds (map-style or iterable)."""
    import torch
    from torch.utils.data import DataLoader
    w = s["workers"]
    extra = dict(_pf(s, "prefetch_factor"), persistent_workers=False) if w else {}
    if "generator" not in kw and not isinstance(ds, torch.utils.data.IterableDataset):
        g = torch.Generator()
        g.manual_seed(s["seed"])
        kw.update(shuffle=True, generator=g)
    dl = DataLoader(ds, batch_size=s["batch"], num_workers=w, collate_fn=_collate(s), **extra, **kw)
    while True:  # epoch after epoch, as training does
        for data, labels in dl:
            yield _counted(s, data, labels)


def _counted(s, data, labels):
    if s["mode"] == "raw":
        return len(labels), sum(len(t) for t in data), None
    return len(labels), 0, data


class _Folder:
    def __init__(self, extents, fn):
        self.extents, self.fn = extents, fn

    def __len__(self):
        return len(self.extents)

    def __getitem__(self, i):
        return self.fn(_read(self.extents[i])), self.extents[i][3]


def _pf(s, name):
    """The run's prefetch as the loader's keyword `name`; none (the loader's
    own default) when --prefetch 0 asked for each loader's defaults."""
    return {name: s["prefetch"]} if s["prefetch"] else {}


def _extents(path):
    from .vs_torch import _extents as ex
    return ex(path)


def run_stoker(s):
    import stoker
    img = None
    if s["mode"] != "raw":
        kw = {"decode_threads": s["workers"]} if s["workers"] else {}
        if s.get("read_areas"):
            kw["read_areas"] = s["read_areas"]
        if s.get("jpeg_cache"):
            kw["jpeg_cache"] = True
        img = stoker.Image(size=s["size"], crop="random_resized" if s["mode"] == "train" else "center",
                           scale=tuple(s["scale"]), ratio=tuple(s["ratio"]), crop_frac=s["crop_frac"],
                           **kw)
    with stoker.Loader(s["source"], s["batch"], image=img, shuffle=True, seed=s["seed"],
                       copy_free=True, **_pf(s, "prefetch"),
                       shuffle_mode=s.get("shuffle_mode", "global"),
                       shuffle_window=s.get("shuffle_window", 1000)) as ld:
        while True:
            for b in ld:
                if img is None:
                    yield b.count, int(b.sizes.sum()), None
                else:
                    yield b.count, 0, b.images


def run_torch(s, pil=False):
    yield from _batches_dl(s, _Folder(_extents(s["source"]), _sample_fn(s, pil)))


def _dali_wds_paths(s):
    """The tar shards and their wds2idx index files (the dali-wds format: the
    index files in source, the shards beside it)."""
    import glob
    tars = sorted(glob.glob(os.path.join(os.path.dirname(s["source"]), "shards", "*.tar")))
    return tars, [os.path.join(s["source"], os.path.basename(t) + ".idx") for t in tars]


def run_dali(s, wds=False):
    """DALI's CPU pipeline over the folder (readers.file) or, wds, over the
    tar shards (readers.webdataset with wds2idx's index files)."""
    from nvidia.dali import pipeline_def, fn, types
    mode = s["mode"]

    @pipeline_def(batch_size=s["batch"], num_threads=s["workers"], device_id=None, seed=s["seed"],
                  **_pf(s, "prefetch_queue_depth"))
    def pipe():
        if wds:
            tars, idx = _dali_wds_paths(s)
            jpegs, labels = fn.readers.webdataset(paths=tars, index_paths=idx, ext=["jpg", "cls"],
                                                  missing_component_behavior="error",
                                                  random_shuffle=True, name="reader")
            if mode != "raw":  # the label's text, padded to the batch's longest: one tensor
                labels = fn.pad(labels, fill_value=0)
        else:
            jpegs, labels = fn.readers.file(file_root=s["source"], random_shuffle=True, name="reader")
        if mode == "raw":
            return jpegs, labels
        if mode == "train":
            im = fn.decoders.image_random_crop(jpegs, device="cpu", output_type=types.RGB,
                                               random_area=s["scale"], random_aspect_ratio=s["ratio"])
            im = fn.resize(im, resize_x=s["size"], resize_y=s["size"])
            im = fn.crop_mirror_normalize(im, dtype=types.UINT8, output_layout="CHW",
                                          mirror=fn.random.coin_flip())
        else:
            im = fn.decoders.image(jpegs, device="cpu", output_type=types.RGB)
            im = fn.resize(im, resize_shorter=round(s["size"] / s["crop_frac"]))
            im = fn.crop_mirror_normalize(im, crop=(s["size"], s["size"]), dtype=types.UINT8,
                                          output_layout="CHW")
        return im, labels

    p = pipe()
    p.build()
    if mode == "raw":
        while True:
            data, labels = p.run()
            yield len(labels), sum(int(t.shape()[0]) for t in data), None
    from nvidia.dali.plugin.pytorch import DALIGenericIterator
    it = DALIGenericIterator(p, ["images", "labels"], reader_name="reader", auto_reset=True)
    while True:
        for out in it:
            yield out[0]["labels"].shape[0], 0, out[0]["images"]


def run_spdl(s):
    """SPDL's pipeline (a thread pool; FFmpeg decodes and crops in its filter
    graph, as spdl's ImageNet example does), batched with load_image_batch's
    converter."""
    import random
    import numpy as np
    import torch
    import spdl.io
    from spdl.pipeline import PipelineBuilder
    ext = _extents(s["source"])
    order = list(range(len(ext)))
    random.Random(s["seed"]).shuffle(order)
    rng = random.Random(s["seed"] + 1)
    size, mode = s["size"], s["mode"]

    def src():
        while True:
            yield from order

    def load(i):
        data = _read(ext[i])
        if mode == "raw":
            return np.frombuffer(data, np.uint8), ext[i][3]
        pk = spdl.io.demux_image(data)
        w, h = pk.width, pk.height
        if mode == "train":
            x, y, cw, ch = _rrc_box(rng, w, h, s["scale"], s["ratio"])
            fd = "crop=%d:%d:%d:%d,scale=%d:%d:flags=bilinear%s,format=rgb24" % (
                cw, ch, x, y, size, size, ",hflip" if rng.random() < 0.5 else "")
        else:
            short = round(size / s["crop_frac"])
            sw, sh = (short, -2) if w <= h else (-2, short)
            fd = "scale=%d:%d:flags=bilinear,crop=%d:%d,format=rgb24" % (sw, sh, size, size)
        return spdl.io.decode_packets(pk, filter_desc=fd), ext[i][3]

    def batch(idx):  # a batch a task, as spdl's ImageNet example: less per-item overhead
        items = [load(i) for i in idx]
        if mode == "raw":
            return len(items), sum(len(a) for a, _ in items), None
        buf = spdl.io.convert_frames([f for f, _ in items])
        return len(items), 0, spdl.io.to_torch(buf)

    p = (PipelineBuilder().add_source(src()).aggregate(s["batch"])
         .pipe(batch, concurrency=s["workers"]).add_sink(**_pf(s, "buffer_size")).build(num_threads=s["workers"]))
    with p.auto_stop():
        for b in p:
            yield b
    del torch


def _rrc_box(rng, w, h, scale, ratio):
    """torchvision's RandomResizedCrop.get_params."""
    import math
    area = w * h
    lr = (math.log(ratio[0]), math.log(ratio[1]))
    for _ in range(10):
        ta = area * rng.uniform(scale[0], scale[1])
        ar = math.exp(rng.uniform(*lr))
        cw, ch = int(round(math.sqrt(ta * ar))), int(round(math.sqrt(ta / ar)))
        if 0 < cw <= w and 0 < ch <= h:
            return rng.randint(0, w - cw), rng.randint(0, h - ch), cw, ch
    r = w / h
    if r < ratio[0]:
        cw, ch = w, int(round(w / ratio[0]))
    elif r > ratio[1]:
        ch, cw = h, int(round(h * ratio[1]))
    else:
        cw, ch = w, h
    return (w - cw) // 2, (h - ch) // 2, cw, ch


def run_streaming(s):
    from streaming import StreamingDataset
    from streaming.base.util import clean_stale_shared_memory
    clean_stale_shared_memory()
    fn = _sample_fn(s)

    class DS(StreamingDataset):
        def __getitem__(self, i):
            x = super().__getitem__(i)
            return fn(x["jpg"]), x["cls"]

    ds = DS(local=s["source"], shuffle=True, shuffle_seed=s["seed"], batch_size=s["batch"])
    yield from _batches_dl(s, ds, generator=None)


def run_litdata(s):
    import litdata
    fn = _sample_fn(s)
    ds = litdata.StreamingDataset(s["source"], shuffle=True, seed=s["seed"])
    def collate(items):  # bytes(): LitData gives a memoryview, which its workers cannot pickle
        return _collate(s)([(fn(bytes(x["jpg"])), x["cls"]) for x in items])

    dl = litdata.StreamingDataLoader(ds, batch_size=s["batch"], num_workers=s["workers"],
                                     collate_fn=collate,
                                     **(_pf(s, "prefetch_factor") if s["workers"] else {}))
    while True:
        for data, labels in dl:
            yield _counted(s, data, labels)


def run_wds(s):
    import glob
    import webdataset as wds
    urls = sorted(glob.glob(os.path.join(s["source"], "*.tar")))
    fn = _sample_fn(s)
    ds = (wds.WebDataset(urls, shardshuffle=len(urls), seed=s["seed"], empty_check=False,
                         nodesplitter=wds.split_by_node, workersplitter=wds.split_by_worker)
          .shuffle(1000, rng=None).to_tuple("jpg", "cls")
          .map_tuple(fn, lambda b: int(b)).batched(s["batch"], collation_fn=_collate(s)))
    loader = wds.WebLoader(ds, batch_size=None, num_workers=s["workers"],
                           **(_pf(s, "prefetch_factor") if s["workers"] else {}))
    while True:
        for data, labels in loader:
            yield _counted(s, data, labels)


def run_ffcv(s):
    import numpy as np
    from ffcv.loader import Loader, OrderOption
    from ffcv.fields.decoders import (IntDecoder, RandomResizedCropRGBImageDecoder,
                                      CenterCropRGBImageDecoder, SimpleRGBImageDecoder)
    from ffcv.transforms import RandomHorizontalFlip, ToTensor, ToTorchImage
    size = s["size"]
    if s["mode"] == "train":
        ip = [RandomResizedCropRGBImageDecoder((size, size), scale=tuple(s["scale"]),
                                               ratio=tuple(s["ratio"])),
              RandomHorizontalFlip(), ToTensor(), ToTorchImage()]
    elif s["mode"] == "val":
        ip = [CenterCropRGBImageDecoder((size, size), ratio=s["crop_frac"]), ToTensor(), ToTorchImage()]
    else:
        ip = [SimpleRGBImageDecoder()]
    ld = Loader(os.path.join(s["source"], "data.beton"), batch_size=s["batch"], num_workers=s["workers"],
                order=OrderOption.RANDOM, seed=s["seed"], os_cache=True, **_pf(s, "batches_ahead"),
                pipelines={"image": ip, "label": [IntDecoder(), ToTensor()]})
    del np
    while True:
        for im, lab in ld:
            yield len(lab), 0, im


RUN = {"stoker": run_stoker, "torch": run_torch, "torch-pil": lambda s: run_torch(s, pil=True),
       "dali": run_dali, "dali-wds": lambda s: run_dali(s, wds=True), "spdl": run_spdl, "streaming": run_streaming, "litdata": run_litdata,
       "wds": run_wds, "ffcv": run_ffcv}


def measure(s):
    """One run as the spec says, timed by the rule every side follows
    (stoker._timing: start-up, the ramp, the window); the result dict."""
    import torch
    from ._timing import timed
    torch.set_num_threads(1)  # intra-op threads in this process: the peers' own threads count
    base = baseline_kb(s["peer"], s["mode"])
    marks = []
    r = timed(lambda: RUN[s["peer"]](s), s.get("ramp", 0.0), s["seconds"], s["samples"],
              cpu=window_clock(tree_cpu_s, marks))
    r["window_at"] = marks[:2]
    img = r.pop("first")[2]
    r["first"] = {} if img is None else {"shape": list(img.shape),
                                         "dtype": str(img.dtype).replace("torch.", "")}
    r["base_kb"] = base
    return r


# ---- conversions to each peer's own format ----

def _mds(extents, out):
    from streaming import MDSWriter
    with MDSWriter(out=out, columns={"jpg": "bytes", "cls": "int"}, size_limit="64mb") as w:
        for e in extents:
            w.write({"jpg": _read(e), "cls": int(e[3])})


def _lit_item(e):
    return {"jpg": _read(e), "cls": int(e[3])}


def _litdata(extents, out):
    import litdata
    litdata.optimize(fn=_lit_item, inputs=list(extents), output_dir=out, chunk_bytes="64MB",
                     num_workers=1, mode="overwrite")


def _beton(extents, out):
    from ffcv.writer import DatasetWriter
    from ffcv.fields import RGBImageField, IntField
    import numpy as np
    from PIL import Image
    import io

    class DS:
        def __len__(self):
            return len(extents)

        def __getitem__(self, i):
            with Image.open(io.BytesIO(_read(extents[i]))) as im:
                return im.convert("RGB"), int(extents[i][3])

    os.makedirs(out, exist_ok=True)
    w = DatasetWriter(os.path.join(out, "data.beton"),
                      {"image": RGBImageField(write_mode="jpg", max_resolution=512, jpeg_quality=90),
                       "label": IntField()}, num_workers=1)
    w.from_indexed_dataset(DS())
    del np


def _dali_idx(extents, out, shards):
    """wds2idx (DALI's) on each of stoker's pack shards."""
    import glob
    import subprocess
    tool = os.path.join(os.path.dirname(sys.executable), "wds2idx")
    os.makedirs(out, exist_ok=True)
    for t in sorted(glob.glob(os.path.join(shards, "*.tar"))):
        subprocess.run([tool, t, os.path.join(out, os.path.basename(t) + ".idx")], check=True,
                       stdout=subprocess.DEVNULL)
    del extents


CONVERT = {"streaming": _mds, "litdata": _litdata, "ffcv": _beton}


def main(argv):
    s = json.loads(argv[0])
    if s.get("convert"):
        t0 = time.monotonic()
        if s["peer"] == "dali-wds":
            _dali_idx(None, s["out"], s["shards"])
        else:
            CONVERT[s["peer"]](_extents(s["source"]), s["out"])
        print(json.dumps({"seconds": time.monotonic() - t0}), flush=True)
    else:
        print(json.dumps(measure(s)), flush=True)
    sys.stdout.flush()
    os._exit(0)  # workers and pipelines torn down by the caller (process group)


if __name__ == "__main__":
    main(sys.argv[1:])
