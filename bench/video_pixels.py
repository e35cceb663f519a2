#!/usr/bin/python3
"""Pixel agreement on a real set (issue 38): stoker's clips (stk_video_decode,
centre crop, crop_frac 1) against PyAV's decode of the same pts, on the
videos of DIR (bench/video_data.sh's set): at full size (out_size = the
short side: the centre square, no resize) and resized to 224 against PIL's
Resize(224) + CenterCrop(224) of PyAV's frame (torchvision's rounding), the
mean |difference| a frame in grey levels; the worst and the mean printed,
and beside them libswscale's own bilinear resize of PyAV's frames (PyAV's
reformat) against the same PIL reference: the filters' own distance.
tests/python/test_video_pixels.py asserts the same on made videos.

    STOKER_LIB=build/libstoker.so.0 PYTHONPATH=python \\
      /usr/bin/python3 bench/video_pixels.py DIR [--videos 20] [--frames 16 --stride 2]

Debian's python3-av decodes with the same libavcodec (FFmpeg 5.1) as stoker.
"""
import argparse
import ctypes
import os
import sys

import av
import numpy as np
from PIL import Image

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "python"))
from stoker import _lib  # noqa: E402

lib = ctypes.CDLL(_lib.lib_path)
lib.stk_video_clip_bytes.argtypes = [ctypes.POINTER(_lib.VideoOpts)]
lib.stk_video_clip_bytes.restype = ctypes.c_size_t
lib.stk_video_decode.argtypes = [ctypes.POINTER(_lib.VideoOpts), ctypes.c_char_p, ctypes.c_size_t,
                                 ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint32,
                                 ctypes.c_void_p, ctypes.POINTER(_lib.ClipInfo), ctypes.c_char_p,
                                 ctypes.c_size_t]


def stoker_clip(data, side, frames, stride, clips, k):
    o = _lib.VideoOpts(size=ctypes.sizeof(_lib.VideoOpts), flags=1, frames=frames, stride=stride,
                       out_size=side, crop=1, crop_frac=1.0, clips_per_video=clips)
    n = lib.stk_video_clip_bytes(ctypes.byref(o))
    # room past the clip: unscaled conversions at sides that are no multiple of
    # 16 write 24 bytes past it (test_video_pixels' xfail, reported)
    out = np.zeros(n + 4096, dtype=np.uint8)
    info = _lib.ClipInfo(size=ctypes.sizeof(_lib.ClipInfo))
    err = ctypes.create_string_buffer(512)
    if lib.stk_video_decode(ctypes.byref(o), data, len(data), 0, 0, k, k, out.ctypes.data,
                            ctypes.byref(info), err, len(err)):
        raise RuntimeError(err.value.decode())
    return out[:n].reshape(frames, side, side, 3), info


def pyav_clip(path, start_pts, frames, stride, resize=None):
    """PyAV's frames of the clip as RGB arrays; with resize=(w, h), each
    also through libswscale's own bilinear resize (PyAV's reformat)."""
    with av.open(path) as c:
        got = sorted(((f.pts, f) for f in c.decode(video=0)), key=lambda x: x[0])
        pts = [p for p, _ in got]
        i = pts.index(start_pts)
        fs = [got[min(len(got) - 1, i + j * stride)][1] for j in range(frames)]
        rgb = [f.to_ndarray(format="rgb24") for f in fs]
        if resize is None:
            return rgb
        return rgb, [f.reformat(width=resize[0], height=resize[1], format="rgb24",
                                interpolation="BILINEAR").to_ndarray() for f in fs]


def mad(a, b):
    return float(np.abs(a.astype(np.int16) - b.astype(np.int16)).mean())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--videos", type=int, default=20)
    ap.add_argument("--frames", type=int, default=16)
    ap.add_argument("--stride", type=int, default=2)
    a = ap.parse_args()
    paths = sorted(os.path.join(d, f) for d, _, fs in os.walk(a.dir) for f in fs
                   if f.endswith((".mp4", ".mkv", ".webm", ".mov")))
    paths = paths[::max(1, len(paths) // a.videos)][:a.videos]
    full, small, swsd = [], [], []
    for n, p in enumerate(paths):
        data = open(p, "rb").read()
        k = n % 3  # centre clips 0, 1, 2 of 3: spread over the video, between keyframes
        with av.open(p) as c:
            s = c.streams.video[0]
            w, h = s.codec_context.width, s.codec_context.height
        side = min(w, h)
        clip, info = stoker_clip(data, side, a.frames, a.stride, 3, k)
        rw, rh = (int(224 * w / h), 224) if w >= h else (224, int(224 * h / w))
        ref, sws = pyav_clip(p, info.start_pts, a.frames, a.stride, (rw, rh))
        x0, y0 = int(round((w - side) / 2.0)), int(round((h - side) / 2.0))
        full += [mad(clip[j], ref[j][y0:y0 + side, x0:x0 + side]) for j in range(a.frames)]
        clip, _ = stoker_clip(data, 224, a.frames, a.stride, 3, k)
        l, t = int(round((rw - 224) / 2.0)), int(round((rh - 224) / 2.0))
        for j in range(a.frames):
            im = Image.fromarray(ref[j]).resize((rw, rh), Image.BILINEAR)
            pil = np.asarray(im.crop((l, t, l + 224, t + 224)))
            small.append(mad(clip[j], pil))
            swsd.append(mad(sws[j][t:t + 224, l:l + 224], pil))
        print("%s %dx%d clip %d at pts %d: full %.3f, 224 %.3f" % (
            os.path.relpath(p, a.dir), w, h, k, info.start_pts,
            max(full[-a.frames:]), max(small[-a.frames:])))
    print("%d clips, %d frames: full size mean |diff| worst %.3f mean %.3f (limit 1); "
          "224 vs PIL worst %.3f mean %.3f (limit 2); libswscale's own bilinear resize of "
          "PyAV's frames vs PIL worst %.3f mean %.3f" % (
              len(paths), len(full), max(full), sum(full) / len(full), max(small),
              sum(small) / len(small), max(swsd), sum(swsd) / len(swsd)))
    return 0 if max(full) <= 1 and max(small) <= 2 else 1


if __name__ == "__main__":
    sys.exit(main())
