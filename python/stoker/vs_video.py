"""Video clips beside the peers (issue 38): stoker's video mode against
PyAV, torchcodec and decord (each in a torch DataLoader), DALI's CPU video
reader, and the decode ceiling (FFmpeg alone), on one folder of videos: what
`stoker bench DIR --video --vs pyav,torchcodec,decord,dali|all` runs, and
bench/video_bench.py.

    python3 -m stoker.vs_video DIR [--peers all|pyav,torchcodec,...] [--rounds 5]
        [--seconds 20] [--ramp 4] [--batch-size 8] [--decode-threads 2]
        [--frames 16] [--stride 2] [--size 224] [--seed 0] [--json] [--out FILE]

Run in the peers' venv (bench/peers/setup.sh av torchcodec decord dali).
DIR: a folder of videos with ImageFolder labels (bench/video_data.sh makes
the issue's set).  all = every peer and both ceilings; stoker always runs
(--no-stoker leaves it out).  --json: the result as JSON on stdout (its
"table": the lines the text report prints).

Workload (every side): random clips of --frames 16 frames at --stride 2, one
RandomResizedCrop(224) box (scale 0.08-1, the image mode's) + horizontal
flip for all frames of a clip, uint8, batch 8, 2 decode threads (stoker,
DALI) or 2 DataLoader workers (each peer: a Dataset whose __getitem__ opens
the file, seeks to the keyframe before the clip, decodes forward and takes
16 frames at stride 2, then torchvision.transforms.v2 crops and resizes the
T x 3 x H x W clip).  The peers read one clip list: epoch e's order is a
permutation of the videos by random.Random(seed * 1000 + e), each clip's
start frame uniform over the frames where a whole clip fits, drawn from the
same generator: the same (video, start) pairs for every peer.  stoker draws
its starts with its own per-sample generator (same distribution, other
pairs); DALI's reader picks its own clips (random_shuffle, step = its
sequence span) — it cannot take a list.

Ceiling: FFmpeg alone (PyAV's libavcodec, no colour conversion, no resize)
decoding the peers' clips (seek + decode forward to the clip's last frame,
every frame from the keyframe on) in 2 DataLoader workers, one decoder
thread each: 2 cores.  ceiling-sws adds libswscale's conversion of the 16
kept frames to 224x224 RGB.  It is the ceiling of a loader that decodes
every frame; stoker leaves the non-reference frames no clip takes
undecoded (src/video/skip.c), so its share of it can pass 100 %.

Timing: stoker._timing.timed (start-up, --ramp s not measured, the window of
--seconds) in a process of its own per run; its tree is sampled every 50 ms
(stoker._peers.PeakPss, as stoker.vs_peers: PSS read when it may have
risen): memory = the
peak anonymous + shared-memory PSS of the run's process tree above the
run's own after its imports.  --rounds alternating rounds (the order
rotated each round), medians; ratios to the best peer and to the ceiling.
"""

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile

from ._peers import pss_kb, run_sampled, sampler_summary, tree_cpu_s, window_clock
from ._timing import timed

SIDES = ("stoker", "pyav", "torchcodec", "decord", "dali", "ceiling", "ceiling-sws")
PEERS = ("pyav", "torchcodec", "decord", "dali")
EXTS = (".mp4", ".m4v", ".mov", ".mkv", ".webm")
IMPORTS = {"stoker": ["stoker", "torch"], "pyav": ["av", "torchvision.transforms.v2"],
           "torchcodec": ["torchcodec.decoders", "torchvision.transforms.v2"],
           "decord": ["decord", "torchvision.transforms.v2"],
           "dali": ["nvidia.dali", "nvidia.dali.fn"], "ceiling": ["av", "torch"],
           "ceiling-sws": ["av", "torch"]}


def videos(root):
    """[(path, label)] in ImageFolder order (sorted classes, sorted files)."""
    out = []
    classes = sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))
    for k, c in enumerate(classes):
        for f in sorted(os.listdir(os.path.join(root, c))):
            if f.lower().endswith(EXTS):
                out.append((os.path.join(root, c, f), k))
    return out


def probe(vids):
    """[(frames, fps)] per video (PyAV: the stream's frame count and rate),
    and the set of codecs."""
    import av
    out, codecs = [], set()
    for p, _ in vids:
        with av.open(p) as c:
            s = c.streams.video[0]
            fps = float(s.average_rate)
            n = s.frames or int(float(s.duration * s.time_base) * fps)
            out.append((n, fps))
            codecs.add(s.codec_context.name)
    return out, codecs


# DALI 2.4's docs: its CPU video decoder (readers.video, decoders.video with
# device="cpu") has VP8, VP9 and MJPEG; H.264, HEVC, AV1 and MPEG-4 need its
# GPU ("mixed", NVDEC) backend
DALI_CPU_CODECS = {"vp8", "vp9", "mjpeg"}


def clip_list(info, frames, stride, seed, want):
    """The peers' clips: [(video, start frame)], epoch after epoch."""
    span = (frames - 1) * stride + 1
    out, e = [], 0
    while len(out) < want:
        rng = random.Random(seed * 1000 + e)
        order = list(range(len(info)))
        rng.shuffle(order)
        for v in order:
            out.append((v, rng.randrange(max(1, info[v][0] - span + 1))))
        e += 1
    return out[:want]


# ---- one run (the child process) ----

def _clip_pyav(path, start, s, fps, rgb):
    """The clip's frames by PyAV: seek to the keyframe at or before the
    start, decode forward: ([T, H, W, 3] arrays (rgb=True), nothing
    (rgb=False: decode only) or 224x224 RGB (rgb='sws'), frames decoded)."""
    import av
    with av.open(path) as c:
        st = c.streams.video[0]
        st.thread_count = 1
        tb = float(st.time_base)
        t0 = st.start_time or 0
        c.seek(t0 + int(start / fps / tb), stream=st, backward=True)
        want = set(range(start, start + s["frames"] * s["stride"], s["stride"]))
        last = start + (s["frames"] - 1) * s["stride"]
        got, n = [], 0
        for f in c.decode(st):
            n += 1
            i = round((f.pts - t0) * tb * fps)
            if i in want:
                if rgb is True:
                    got.append(f.to_ndarray(format="rgb24"))
                elif rgb == "sws":
                    got.append(f.reformat(width=s["size"], height=s["size"], format="rgb24",
                                          interpolation="BILINEAR").to_ndarray())
                else:
                    got.append(None)
            if i >= last:
                break
        while got and len(got) < s["frames"]:  # short video: repeat the last frame
            got.append(got[-1])
        return got, n


class Clips:
    """Map-style Dataset over the peers' clip list: one clip an item."""

    def __init__(self, s, kind):
        self.s, self.kind = s, kind
        self.vids = s["videos"]
        self.info = s["info"]
        self.clips = s["clips"]
        self.tf = None

    def __len__(self):
        return len(self.clips)

    def _transform(self, x):  # x: uint8 [T, 3, H, W]; one box and flip for the clip
        if self.tf is None:
            from torchvision.transforms import v2
            self.tf = v2.Compose([v2.RandomResizedCrop(self.s["size"], antialias=True),
                                  v2.RandomHorizontalFlip()])
        return self.tf(x)

    def __getitem__(self, i):
        import torch
        v, start = self.clips[i]
        path, label = self.vids[v]
        n, fps = self.info[v]
        s, k = self.s, self.kind
        idx = [min(n - 1, start + j * s["stride"]) for j in range(s["frames"])]
        if k == "pyav":
            import numpy as np
            x = torch.from_numpy(np.stack(_clip_pyav(path, start, s, fps, True)[0])).permute(0, 3, 1, 2)
        elif k == "torchcodec":
            from torchcodec.decoders import VideoDecoder
            d = VideoDecoder(path, seek_mode="approximate", num_ffmpeg_threads=1,
                             dimension_order="NCHW")
            x = d.get_frames_at(indices=idx).data
        elif k == "decord":
            import decord
            vr = decord.VideoReader(path, ctx=decord.cpu(0), num_threads=1)
            x = torch.from_numpy(vr.get_batch(idx).asnumpy()).permute(0, 3, 1, 2)
        elif k == "ceiling":
            return torch.tensor(_clip_pyav(path, start, s, fps, False)[1]), label
        elif k == "ceiling-sws":
            import numpy as np
            return torch.from_numpy(np.stack(_clip_pyav(path, start, s, fps, "sws")[0])), label
        return self._transform(x).contiguous(), label


def run_dataloader(s):
    from torch.utils.data import DataLoader
    w = s["workers"]
    extra = {"prefetch_factor": 2, "persistent_workers": False} if w else {}
    dl = DataLoader(Clips(s, s["side"]), batch_size=s["batch"], num_workers=w, shuffle=False,
                    **extra)
    while True:
        for x, y in dl:
            n = int(x.sum()) if s["side"] == "ceiling" else len(y)
            yield len(y), n if s["side"] == "ceiling" else 0, (x if x.dim() > 1 else None)


def run_stoker(s):
    import stoker
    v = stoker.Video(frames=s["frames"], stride=s["stride"], size=s["size"], crop="random",
                     codec_threads=1, decode_threads=s["workers"])
    with stoker.Loader(s["source"], s["batch"], video=v, shuffle=True, seed=s["seed"],
                       copy_free=True) as ld:
        while True:
            for b in ld:
                fd = getattr(b, "frames_decoded", None)
                yield b.count, 0 if fd is None else int(fd.sum()), b.clips


def run_dali(s):
    """DALI's video reader on the CPU (experimental.readers.video,
    device='cpu': no GPU), sequences of --frames at --stride, one random
    crop box per sequence via fn.random_resized_crop, flip."""
    from nvidia.dali import pipeline_def, fn
    files = [p for p, _ in s["videos"]]
    labels = [y for _, y in s["videos"]]

    @pipeline_def(batch_size=s["batch"], num_threads=s["workers"], device_id=None, seed=s["seed"],
                  prefetch_queue_depth=2)
    def pipe():
        seq, lab = fn.experimental.readers.video(device="cpu", filenames=files, labels=labels,
                                                 sequence_length=s["frames"], stride=s["stride"],
                                                 step=(s["frames"] - 1) * s["stride"] + 1,
                                                 random_shuffle=True, name="reader")
        seq = fn.random_resized_crop(seq, size=(s["size"], s["size"]), random_area=(0.08, 1.0))
        seq = fn.flip(seq, horizontal=fn.random.coin_flip())
        return seq, lab

    p = pipe()
    p.build()
    while True:
        seq, lab = p.run()
        yield len(lab), 0, None


def child(s):
    import gc
    import importlib
    for m in IMPORTS[s["side"]]:
        importlib.import_module(m)
    gc.collect()
    base = pss_kb(os.getpid())[1]
    import torch
    torch.set_num_threads(1)
    run = {"stoker": run_stoker, "dali": run_dali}.get(s["side"], run_dataloader)
    marks = []
    r = timed(lambda: run(s), s["ramp"], s["seconds"], cpu=window_clock(tree_cpu_s, marks))
    r["window_at"] = marks[:2]
    x = r.pop("first")[2]
    r["first"] = None if x is None else [list(x.shape), str(x.dtype)]
    r["base_kb"] = base
    if s["side"] in ("ceiling", "stoker"):  # frames decoded a clip (those before its start too)
        r["decoded_per_clip"] = r["bytes"] / max(1, r["samples"])
    print(json.dumps(r), flush=True)
    os._exit(0)


# ---- the parent: rounds, sampling, table ----

def spawn(spec, timeout):
    """(result or None, why, peak PSS MB, peak anon+shmem PSS MB)."""
    f = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
    json.dump(spec, f)
    f.close()
    smp = {}
    lines, hung, rc, tail, peak, peak_a, _ = run_sampled(
        [sys.executable, "-m", "stoker.vs_video", "--child", f.name], timeout, stats=smp)
    os.unlink(f.name)
    res = None
    for ln in lines:
        try:
            res = json.loads(ln)
        except ValueError:
            pass
    if isinstance(res, dict):
        res["sampler"] = sampler_summary(smp, res)  # its ticks and PSS reads
    why = None
    if res is None:
        why = ("hung after %.0f s" % timeout if hung else "exited %d" % rc) + \
            (": " + " | ".join(tail)[-500:] if tail else "")
    return res, why, peak, peak_a


def importable(side):
    mods = {"stoker": "stoker", "pyav": "av", "torchcodec": "torchcodec.decoders",
            "decord": "decord", "dali": "nvidia.dali", "ceiling": "av", "ceiling-sws": "av"}
    r = subprocess.run([sys.executable, "-c", "import %s" % mods[side]], capture_output=True,
                       text=True, env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    if r.returncode:
        last = [ln for ln in r.stderr.splitlines() if ln.strip()][-1:] or ["?"]
        return "cannot import %s: %s" % (mods[side], last[0][:300])
    return None


def versions():
    import importlib.metadata as m
    out = {}
    for d in ("torch", "torchvision", "av", "torchcodec", "decord", "nvidia-dali-cuda120"):
        try:
            out[d] = m.version(d)
        except m.PackageNotFoundError:
            pass
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("path", nargs="?")
    ap.add_argument("--child")
    ap.add_argument("--peers", default="all")
    ap.add_argument("--no-stoker", action="store_true")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--ramp", type=float, default=4.0)
    ap.add_argument("--batch-size", dest="batch", type=int, default=8)
    ap.add_argument("--decode-threads", dest="workers", type=int, default=2,
                    help="stoker's decode threads, DALI's threads, the DataLoader's workers")
    ap.add_argument("--frames", type=int, default=16)
    ap.add_argument("--stride", type=int, default=2)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=180.0)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--out", help="also write the JSON result to this file")
    a = ap.parse_args(argv)
    if a.child:
        with open(a.child) as f:
            child(json.load(f))
    if not a.path:
        ap.error("a folder of videos is needed")
    names = [x for x in SIDES if x != "stoker"] if a.peers == "all" else a.peers.split(",")
    for s in names:
        if s not in SIDES or s == "stoker":
            ap.error("--peers: '%s' is not a video peer (%s, all)"
                     % (s, ", ".join(x for x in SIDES if x != "stoker")))
    sides = ([] if a.no_stoker else ["stoker"]) + [x for x in names if x != "stoker"]
    vids = videos(a.path)
    if not vids:
        sys.exit("vs_video: no videos (%s) under %s" % (" ".join(EXTS), a.path))
    info, codecs = probe(vids)
    for p, _ in vids:  # warm page cache: every side reads from memory
        with open(p, "rb") as f:
            while f.read(1 << 20):
                pass
    base = {"source": os.path.abspath(a.path), "videos": vids, "info": info, "batch": a.batch,
            "workers": a.workers, "frames": a.frames, "stride": a.stride, "size": a.size,
            "seed": a.seed, "ramp": a.ramp, "seconds": a.seconds,
            "clips": clip_list(info, a.frames, a.stride, a.seed, 20 * len(vids))}
    skipped = {}
    for s in list(sides):
        why = importable(s)
        if s == "dali" and not why and codecs - DALI_CPU_CODECS:
            why = ("DALI's CPU video decoder has only %s; this set is %s, which DALI decodes "
                   "on a GPU only (NVDEC)" % ("/".join(sorted(DALI_CPU_CODECS)), "/".join(sorted(codecs))))
        if why:
            skipped[s] = why
            sides.remove(s)
    load0 = open("/proc/loadavg").read().split()[:3]
    runs = {s: [] for s in sides}
    for r in range(a.rounds):
        order = sides[r % len(sides):] + sides[:r % len(sides)]
        for s in order:
            if s in skipped:
                continue
            res, why, pss, anon = spawn(dict(base, side=s), a.timeout)
            if res is None:
                skipped[s] = why
                print("round %d %-12s FAILED: %s" % (r + 1, s, why), file=sys.stderr)
                continue
            res.update(pss_mb=pss, mem_mb=max(0.0, anon - res["base_kb"] / 1024.0))
            runs[s].append(res)
            print("round %d %-12s %7.2f clips/s  mem %6.1f MB  (load %s)" % (
                r + 1, s, res["samples_per_s"], res["mem_mb"],
                open("/proc/loadavg").read().split()[0]), file=sys.stderr, flush=True)
    load1 = open("/proc/loadavg").read().split()[:3]
    out = {"path": a.path, "videos": len(vids), "codecs": sorted(codecs),
           "versions": versions(), "load_before": load0, "load_after": load1,
           "workload": {k: base[k] for k in ("batch", "workers", "frames", "stride", "size", "seed")},
           "sides": {}, "skipped": skipped}
    for s, rs in runs.items():
        if not rs:
            continue
        cps = statistics.median(x["samples_per_s"] for x in rs)
        out["sides"][s] = {"clips_per_s": cps, "frames_per_s": cps * a.frames,
                           "mem_mb": statistics.median(x["mem_mb"] for x in rs),
                           "pss_peak_mb": statistics.median(x["pss_mb"] for x in rs),
                           "startup_s": statistics.median(x["startup_s"] for x in rs),
                           "cpu_s_per_clip": statistics.median(
                               x["cpu_s"] / max(1, x["samples"]) for x in rs),
                           "spread": [min(x["samples_per_s"] for x in rs),
                                      max(x["samples_per_s"] for x in rs)],
                           "first": rs[0]["first"], "rounds": len(rs)}
        if "decoded_per_clip" in rs[0]:
            out["sides"][s]["decoded_per_clip"] = statistics.median(
                x["decoded_per_clip"] for x in rs)
    out["table"] = table(out)
    if a.out:
        with open(a.out, "w") as f:
            json.dump(out, f, indent=1)
    print(json.dumps(out) if a.json else "\n".join(out["table"]), flush=True)
    return 0


def table(out):
    """The report's lines: a side a line, then the skipped sides and why."""
    sd = out["sides"]
    best = max((p for p in PEERS if p in sd), key=lambda p: sd[p]["clips_per_s"], default=None)
    lines = ["video clips: %d videos in %s (%s), %s; load %s -> %s" % (
        out["videos"], out["path"], "/".join(out["codecs"]), json.dumps(out["workload"]),
        " ".join(out["load_before"]), " ".join(out["load_after"])),
        "%-12s %8s %13s %8s %7s %7s %7s %6s %s" % (
            "side", "clips/s", "[min-max]", "frames/s", "mem MB", "PSS MB", "start s",
            "CPU ms", "vs")]
    for s, e in sd.items():
        vs = []
        if best and s == "stoker":
            b = sd[best]
            vs.append("%.2fx %s's clips/s, %.2fx its memory, %.2fx its CPU a clip" % (
                e["clips_per_s"] / b["clips_per_s"], best, e["mem_mb"] / max(0.1, b["mem_mb"]),
                e["cpu_s_per_clip"] / max(1e-9, b["cpu_s_per_clip"])))
        if "ceiling" in sd and s != "ceiling":
            vs.append("%.0f%% of the ceiling" % (100 * e["clips_per_s"] /
                                                 sd["ceiling"]["clips_per_s"]))
        if s == "ceiling":  # stoker leaves frames undecoded: it can pass it
            vs.append("FFmpeg alone, decoding every frame from the keyframe")
        lines.append("%-12s %8.2f %13s %8.1f %7.1f %7.1f %7.2f %6.0f %s" % (
            s, e["clips_per_s"], "[%.2f-%.2f]" % tuple(e["spread"]), e["frames_per_s"],
            e["mem_mb"], e["pss_peak_mb"], e["startup_s"], 1000 * e["cpu_s_per_clip"],
            "; ".join(vs)))
    for s, why in out["skipped"].items():
        lines.append("%-12s skipped: %s" % (s, why))
    return lines


if __name__ == "__main__":
    sys.exit(main())
