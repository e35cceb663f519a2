#!/usr/bin/env python3
"""Video clips from every source (issue 38): bytes read a clip and clips/s
from a folder, tar shards, S3 (SeaweedFS's gateway on loopback, no local
cache: every byte a ranged GET) and HTTP (nginx), this build (ranged reads)
beside another build (BASE: a libstoker.so that reads each clip's whole
file from shards and remote data), alternating, in separate processes.

    python3 bench/video_sources.py FOLDER SHARDS BASE_LIB [--rounds 3] [--clips 96]

FOLDER: videos in class folders (~/.cache/stoker/video-gen200); SHARDS: the
same packed (`stoker pack FOLDER SHARDS --extensions .mp4`).  The workload
is the video benchmark's (16 frames at stride 2, 224, batch 8, 2 decode
threads).  Each run: a loader over the source, its first batch, then the
clips/s of the next CLIPS; bytes a clip = stats()["total_bytes"] /
["total_samples"] (the video's bytes the reads brought); remote: the
transport's bytes a clip too (remote_stats, after create).  Remote sources,
ranged side: a first run (`learn`: each video read whole once, its index
made) and steady runs with the index from the cache file.  Medians printed
with the load beside each run."""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CHILD = r'''
import json, sys, time, os
import stoker
path, cache, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
kw = json.loads(sys.argv[4])
t0 = time.monotonic()
l = stoker.Loader(path, 8, seed=int(kw.pop("seed")), cache_dir=cache, quiet=True,
                  video=stoker.Video(frames=16, stride=2, size=224, decode_threads=2,
                                     codec_threads=1), **kw)
rs0 = l.remote_stats()
t1 = time.monotonic()
it = iter(l)
next(it)
t2 = time.monotonic()
got = 0
for b in it:
    got += b.count
    if got >= n:
        break
t3 = time.monotonic()
st = l.stats(); rs = l.remote_stats()
out = dict(direct=st["direct"], create_s=t1 - t0, clips_s=got / (t3 - t2), bytes_clip=st["total_bytes"] / st["total_samples"],
           ranged=st["total_video_ranged"], whole=st["total_video_whole"], errors=st["total_errors"],
           net_clip=(rs["bytes"] - rs0["bytes"]) / st["total_samples"] if rs else None,
           load=os.getloadavg()[0])
l.close()
print(json.dumps(out))
'''


def run(lib, path, cache, n, env_extra=None, **kw):
    env = dict(os.environ, STOKER_LIB=lib, PYTHONPATH=os.path.join(HERE, "python"))
    env.update(env_extra or {})
    p = subprocess.run([sys.executable, "-c", CHILD, path, cache, str(n), json.dumps(kw)],
                       env=env, capture_output=True, text=True)
    if p.returncode:
        raise SystemExit("%s: %s" % (path, p.stderr[-2000:]))
    return json.loads(p.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("folder")
    ap.add_argument("shards")
    ap.add_argument("base_lib")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--clips", type=int, default=96)
    ap.add_argument("--json")
    ap.add_argument("--only", help="sources, comma-separated (folder, shards, s3, http, "
                    "folder_direct, shards_direct: O_DIRECT reads)")
    a = ap.parse_args()
    sys.path.insert(0, os.path.join(HERE, "tests", "python"))
    # (servers started whatever --only says: a few seconds)
    from remote_servers import ACCESS_KEY, SECRET_KEY, Nginx, SeaweedS3
    this = os.path.join(HERE, "build", "libstoker.so.0")
    work = tempfile.mkdtemp(prefix="vsrc-bench-")
    os.environ.update(AWS_ACCESS_KEY_ID=ACCESS_KEY, AWS_SECRET_ACCESS_KEY=SECRET_KEY,
                      AWS_SHARED_CREDENTIALS_FILE=work + "/none", AWS_CONFIG_FILE=work + "/none")
    s3 = SeaweedS3(os.path.join(work, "s3"))
    os.environ["AWS_ENDPOINT_URL"] = s3.endpoint
    s3.upload_dir("vbench", "v/", a.shards)
    web = Nginx(a.shards, os.path.join(work, "web"))
    ntar = len([f for f in os.listdir(a.shards) if f.endswith(".tar")])
    sources = [("folder", a.folder, {}), ("shards", a.shards, {}),
               ("s3", "s3://vbench/v/", dict(remote_cache=False)),
               ("http", "%s/train-{000000..%06d}.tar" % (web.url, ntar - 1),
                dict(remote_cache=False)),
               ("folder_direct", a.folder, dict(direct=True)),
               ("shards_direct", a.shards, dict(direct=True))]
    only = a.only.split(",") if a.only else ["folder", "shards", "s3", "http"]
    sources = [x for x in sources if x[0] in only]
    res = {}
    try:
        caches = {}
        for name, path, kw in sources:  # the ranged side's index made (remote: learnt)
            for side in ("this", "base"):
                caches[name, side] = tempfile.mkdtemp(dir=work)
            if name in ("s3", "http"):
                r = run(this, path, caches[name, "this"], 10**9, seed=0, **kw)
                res.setdefault((name, "learn"), []).append(r)
                print(name, "learn", r, flush=True)
        for rnd in range(a.rounds):
            order = ("this", "base") if rnd % 2 == 0 else ("base", "this")
            for name, path, kw in sources:
                for side in order:
                    lib = this if side == "this" else a.base_lib
                    r = run(lib, path, caches[name, side], a.clips, seed=rnd + 1, **kw)
                    res.setdefault((name, side), []).append(r)
                    print(rnd, name, side, r, flush=True)
    finally:
        s3.close()
        web.close()
    print("\n| source | side | clips/s median (min-max) | bytes a clip | fetched a clip | ranged / whole clips | load |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for (name, side), rs in res.items():
        c = [r["clips_s"] for r in rs]
        b = statistics.median(r["bytes_clip"] for r in rs)
        net = [r["net_clip"] for r in rs if r["net_clip"] is not None]
        print("| %s | %s | %.2f (%.2f-%.2f) | %.0f | %s | %d / %d | %.1f-%.1f |" % (
            name, side, statistics.median(c), min(c), max(c), b,
            "%.0f" % statistics.median(net) if net else "", sum(r["ranged"] for r in rs),
            sum(r["whole"] for r in rs), min(r["load"] for r in rs), max(r["load"] for r in rs)))
    for name, _, _ in sources:
        if (name, "this") in res and (name, "base") in res:
            cr = statistics.median(r["clips_s"] for r in res[name, "this"])
            cw = statistics.median(r["clips_s"] for r in res[name, "base"])
            br = statistics.median(r["bytes_clip"] for r in res[name, "this"])
            bw = statistics.median(r["bytes_clip"] for r in res[name, "base"])
            if cw and bw:
                print("%s: this / base: clips/s %.2fx, bytes a clip %.2fx" % (name, cr / cw,
                                                                            br / bw))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"%s/%s" % k: v for k, v in res.items()}, f, indent=1)


if __name__ == "__main__":
    main()
