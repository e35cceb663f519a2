"""Writes the seed corpora of tests/fuzz (image_corpus, index_corpus), once:
small JPEGs of every kind the decoder meets (baseline, progressive, grey,
CMYK, subsamplings, odd sizes, restart markers via `stoker transcode`,
truncated, corrupt), each behind a 16-byte head of fuzzing parameters, and
cache files of every index kind (folder, flat, list, shards, with records of
what was left out), behind the harness's fix-up byte.
    STOKER=build/stoker /usr/bin/python3 tests/fuzz/make_corpus.py"""

import io
import os
import random
import shutil
import subprocess
import sys
import tempfile

from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))
STOKER = os.environ.get("STOKER", os.path.join(HERE, "..", "..", "build", "stoker"))


def jpegs():
    rnd = random.Random(1)
    out = {}
    def img(mode, w, h):
        im = Image.new(mode, (w, h))
        px = [tuple(rnd.randrange(256) for _ in mode) if len(mode) > 1 else rnd.randrange(256)
              for _ in range(w * h)]
        im.putdata(px)
        return im
    def save(name, im, **kw):
        b = io.BytesIO()
        im.save(b, "JPEG", **kw)
        out[name] = b.getvalue()
    save("base-420", img("RGB", 40, 30), quality=80, subsampling=2)
    save("base-444", img("RGB", 17, 9), quality=95, subsampling=0)
    save("base-422", img("RGB", 33, 64), quality=60, subsampling=1)
    save("progressive", img("RGB", 48, 40), quality=75, progressive=True)
    save("grey", img("L", 31, 23), quality=70)
    save("cmyk", img("CMYK", 20, 20), quality=80)
    save("one-pixel", img("RGB", 1, 1), quality=90)
    save("tall", img("RGB", 3, 200), quality=50)
    save("wide", img("RGB", 250, 2), quality=50)
    save("big-flat", Image.new("RGB", (400, 300), (200, 30, 90)), quality=85)
    # restart markers, as stoker pack --transcode writes them
    src, dst = tempfile.mkdtemp(), tempfile.mkdtemp()
    shutil.rmtree(dst)
    os.makedirs(os.path.join(src, "a"))
    for k in ("base-420", "big-flat", "progressive"):
        with open(os.path.join(src, "a", k + ".jpg"), "wb") as f:
            f.write(out[k])
    subprocess.run([STOKER, "transcode", src, dst], check=True, stdout=subprocess.DEVNULL)
    for k in ("base-420", "big-flat", "progressive"):
        with open(os.path.join(dst, "a", k + ".jpg"), "rb") as f:
            out["rst-" + k] = f.read()
    shutil.rmtree(src)
    shutil.rmtree(dst)
    out["truncated"] = out["base-420"][: len(out["base-420"]) // 2]
    bad = bytearray(out["base-444"])
    for i in range(40, len(bad), 37):
        bad[i] ^= 0x5A
    out["corrupt"] = bytes(bad)
    out["png-header"] = b"\x89PNG\r\n\x1a\n" + b"\0" * 32
    out["empty"] = b""
    return out


def heads(k):
    rnd = random.Random(k)
    return bytes(rnd.randrange(256) for _ in range(16))


def write_images():
    d = os.path.join(HERE, "image_corpus")
    os.makedirs(d, exist_ok=True)
    for i, (name, data) in enumerate(sorted(jpegs().items())):
        for j in range(2):
            with open(os.path.join(d, "%s-%d" % (name, j)), "wb") as f:
                f.write(heads(i * 2 + j) + data)


def write_indexes():
    import stoker  # PYTHONPATH=python, STOKER_LIB=build/libstoker.so.0
    d = os.path.join(HERE, "index_corpus")
    os.makedirs(d, exist_ok=True)
    t = tempfile.mkdtemp()
    def cache_of(path, name, **kw):
        with stoker.Loader(path, 2, quiet=True, **kw):
            pass
        beside = os.path.join(path, ".stoker-index") if os.path.isdir(path) else \
            path + ".stoker-index"
        with open(beside, "rb") as f:
            data = f.read()
        for flag in (0, 3):
            with open(os.path.join(d, "%s-%d" % (name, flag)), "wb") as f:
                f.write(bytes([flag]) + data)
    folder = os.path.join(t, "folder")
    for c in ("a", "b"):
        os.makedirs(os.path.join(folder, c))
        for i in range(3):
            with open(os.path.join(folder, c, "%d.jpg" % i), "wb") as f:
                f.write(b"x" * (i + 1))
    os.symlink("/nonexistent/stoker", os.path.join(folder, "b", "dangling.jpg"))
    cache_of(folder, "folder-with-bad")
    flat = os.path.join(t, "flat")
    os.makedirs(flat)
    for i in range(4):
        with open(os.path.join(flat, "%d.png" % i), "wb") as f:
            f.write(b"y" * 10 * (i + 1))
    cache_of(flat, "flat")
    lst = os.path.join(t, "list.txt")
    with open(lst, "w") as f:
        f.write("flat/0.png\t3\nflat/1.png\nmissing.png\t1\n")
    cache_of(lst, "list-with-bad")
    shards = os.path.join(t, "shards")
    subprocess.run([STOKER, "pack", folder, shards, "--shard-size", "4KiB"], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    cache_of(shards, "shards")
    shutil.rmtree(t)


if __name__ == "__main__":
    write_images()
    write_indexes()
    print("corpora written under", HERE, file=sys.stderr)
