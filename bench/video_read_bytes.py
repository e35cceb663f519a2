#!/usr/bin/env python3
"""Bytes read a clip and the loader's memory (issue 38): a video loader over
DIR (its index cache in CACHE), N clips, then stats() and memory().
    STOKER_LIB=build/libstoker.so.0 PYTHONPATH=python python3 bench/video_read_bytes.py DIR CACHE N
"""
import sys, time, os, tempfile
import stoker
d = sys.argv[1]
cache = sys.argv[2]
t = time.monotonic()
l = stoker.Loader(d, 8, seed=0, cache_dir=cache, video=stoker.Video(frames=16, stride=2, size=224, decode_threads=2, codec_threads=1))
t1 = time.monotonic()
n = 0
for b in l:
    n += len(b.labels)
    if n >= int(sys.argv[3]): break
st = l.stats(); m = l.memory()
print("create %.3fs, %d clips in %.1fs; ranged %d whole %d; bytes/clip %.0f; errors %d" % (t1 - t, n, time.monotonic() - t1, st["total_video_ranged"], st["total_video_whole"], st["total_bytes"] / max(1, st["total_samples"]), st["total_errors"]))
print({k: m[k] for k in ("nslots", "slot_bytes", "read_areas", "read_area_bytes", "pool_bytes", "read_pool_bytes", "meta_bytes", "decode_bytes", "total")})
