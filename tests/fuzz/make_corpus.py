"""Writes the seed corpora of tests/fuzz (image_corpus, index_corpus,
tar_types_corpus, png_corpus, webp_corpus), once: small JPEGs of every
kind the decoder meets
(baseline, progressive, grey, CMYK, subsamplings, odd sizes, restart markers
via `stoker transcode`, truncated, corrupt), each behind a 16-byte head of
fuzzing parameters; PNGs of every colour type and bit depth (interlaced, an
APNG, truncated, a chunk that lies) without their signature, and WebPs
(lossy, lossless, alpha, animated, truncated) without "RIFF" and "WEBP",
which fuzz_png.c and fuzz_webp.c put back; and
cache files of every index kind (folder, flat, list, shards, with records of
what was left out), behind the harness's fix-up byte.
    STOKER=build/stoker /usr/bin/python3 tests/fuzz/make_corpus.py [formats]"""

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


def chunk(t, data):
    import struct
    import zlib
    return struct.pack(">I", len(data)) + t + data + struct.pack(">I", zlib.crc32(t + data))


def png_of(w, h, color, bits, rnd, interlace=False):
    """A PNG of random samples written here (what PIL cannot write)."""
    import struct
    import zlib
    ch = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}[color]
    rowb = (w * ch * bits + 7) // 8
    passes = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2),
              (0, 1, 1, 2)] if interlace else [(0, 0, 1, 1)]
    raw = b""
    for x0, y0, dx, dy in passes:
        pw, ph = (w - x0 + dx - 1) // dx, (h - y0 + dy - 1) // dy
        if pw <= 0 or ph <= 0:
            continue
        pb = (pw * ch * bits + 7) // 8
        for _ in range(ph):
            raw += bytes([rnd.randrange(5)]) + bytes(rnd.randrange(256) for _ in range(pb))
    del rowb
    ihdr = struct.pack(">IIBBBBB", w, h, bits, color, 0, 0, 1 if interlace else 0)
    plte = chunk(b"PLTE", bytes(rnd.randrange(256) for _ in range(3 * 16))) if color == 3 else b""
    trns = chunk(b"tRNS", bytes(range(10))) if color == 3 else b""
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + plte + trns +
            chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def pngs():
    rnd = random.Random(2)
    out = {}
    for color, depths in ((0, (1, 2, 4, 8, 16)), (2, (8, 16)), (3, (1, 2, 4, 8)), (4, (8, 16)),
                          (6, (8, 16))):
        for bits in depths:
            out["c%d-b%d" % (color, bits)] = png_of(13, 9, color, bits, rnd)
    out["interlaced-rgb"] = png_of(21, 17, 2, 8, rnd, interlace=True)
    out["interlaced-grey2"] = png_of(11, 10, 0, 2, rnd, interlace=True)
    out["big"] = png_of(100, 60, 2, 8, rnd)
    b = io.BytesIO()
    a, c = Image.new("RGB", (20, 10), (9, 99, 199)), Image.new("RGB", (20, 10), (200, 1, 2))
    a.save(b, "PNG", save_all=True, append_images=[c])
    out["apng"] = b.getvalue()
    out["truncated"] = out["big"][: len(out["big"]) // 2]
    lie = bytearray(out["c2-b8"])
    lie[33:37] = (1 << 20).to_bytes(4, "big")  # the IDAT's length
    out["lying-chunk"] = bytes(lie)
    return {k: v[8:] for k, v in out.items()}


def webps():
    out = {}
    rnd = random.Random(3)
    noise = Image.frombytes("RGB", (64, 48), bytes(rnd.randrange(256) for _ in range(64 * 48 * 3)))
    alpha = noise.convert("RGBA")
    alpha.putalpha(noise.convert("L"))
    def save(name, im, **kw):
        b = io.BytesIO()
        im.save(b, "WEBP", **kw)
        out[name] = b.getvalue()
    save("lossy", noise, quality=70)
    save("lossless", noise, lossless=True)
    save("lossy-alpha", alpha, quality=70)
    save("lossless-alpha", alpha, lossless=True)
    save("tiny", noise.resize((3, 2)), quality=50)
    save("animated", noise, save_all=True, duration=40,
         append_images=[noise.transpose(Image.FLIP_LEFT_RIGHT)], quality=60)
    out["truncated"] = out["lossy"][: len(out["lossy"]) // 2]
    bad = bytearray(out["lossless"])
    for i in range(30, len(bad), 41):
        bad[i] ^= 0x33
    out["corrupt"] = bytes(bad)
    return {k: v[4:8] + v[12:] for k, v in out.items()}


def write_formats():
    for name, files in (("png_corpus", pngs()), ("webp_corpus", webps())):
        d = os.path.join(HERE, name)
        os.makedirs(d, exist_ok=True)
        for i, (k, data) in enumerate(sorted(files.items())):
            for j in range(2):
                head = bytearray(heads(100 + i * 2 + j))
                head[2] &= 0x7f  # CRCs checked, the RIFF size the harness's
                with open(os.path.join(d, "%s-%d" % (k, j)), "wb") as f:
                    f.write(bytes(head) + data)


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
        with stoker.Loader(path, 2, quiet=True, index_beside=True, **kw):
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


def write_tar_types():
    """Shards holding every member type, by GNU tar and Python's tarfile:
    links (hard, symbolic, long targets), sparse files (GNU, PAX 0.0, 0.1,
    1.0; enough holes for GNU's extension blocks), devices, fifos."""
    import tarfile
    d = os.path.join(HERE, "tar_types_corpus")
    os.makedirs(d, exist_ok=True)
    t = tempfile.mkdtemp()
    src = os.path.join(t, "src")
    os.makedirs(src)
    def put(name, data):
        with open(os.path.join(src, name), "wb") as f:
            f.write(data)
    put("0001.bin", bytes(range(256)) * 3)
    put("0001.cls", b"1")
    os.link(os.path.join(src, "0001.bin"), os.path.join(src, "0002.bin"))
    put("0002.cls", b"2")
    os.symlink("0001.bin", os.path.join(src, "0003.bin"))
    os.symlink("../out.bin", os.path.join(src, "0004.bin"))
    long = "l" * 120 + ".bin"
    put(long, b"long")
    os.symlink(long, os.path.join(src, "0005.bin"))
    with open(os.path.join(src, "0006.bin"), "wb") as f:  # 6 chunks: an extension block
        for i in range(6):
            f.seek(i * 16384)
            f.write(b"chunk%d" % i)
        f.truncate(6 * 16384)
    put("0006.cls", b"6")
    names = sorted(os.listdir(src))
    for fmt, extra, name in (("gnu", [], "gnu-links"), ("v7", [], "v7-links"),
                             ("gnu", ["-S"], "gnu-sparse"),
                             ("posix", ["-S"], "pax-sparse-1.0"),
                             ("posix", ["-S", "--sparse-version=0.1"], "pax-sparse-0.1"),
                             ("posix", ["-S", "--sparse-version=0.0"], "pax-sparse-0.0")):
        out = os.path.join(d, name)
        files = [n for n in names if (fmt != "v7" or (len(n) < 100 and n != "0005.bin")) and
                 ("-S" in extra or not n.startswith("0006"))]
        subprocess.run(["tar", "--format=" + fmt] + extra + ["-cf", out] + files, cwd=src,
                       check=True, stderr=subprocess.DEVNULL)
    out = os.path.join(d, "tarfile-types")
    with tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as tf:
        def add(name, typ=tarfile.REGTYPE, data=b"", link=""):
            ti = tarfile.TarInfo(name)
            ti.type, ti.linkname, ti.size = typ, link, len(data)
            tf.addfile(ti, io.BytesIO(data) if data else None)
        add("d", tarfile.DIRTYPE)
        add("d/0001.bin", data=b"x" * 700)
        add("d/0001.cls", data=b"1")
        add("d/0002.bin", tarfile.LNKTYPE, link="d/0001.bin")
        add("d/0003.bin", tarfile.SYMTYPE, link="../d/./0001.bin")
        add("d/0004.bin", tarfile.FIFOTYPE)
        add("d/0005.bin", tarfile.CHRTYPE)
        add("d/0006.bin", tarfile.BLKTYPE)
        add("d/0007.bin", tarfile.LNKTYPE, link="d/0008.bin")
        add("d/0008.bin", data=b"y" * 10)
        add("d/0009.bin", b"Z", data=b"unknown type")
        add("d/0010.bin", tarfile.LNKTYPE, link="d/" + "q" * 200)
    for name, at in (("gnu-sparse", 1000), ("tarfile-types", 5000)):  # cut mid-way
        with open(os.path.join(d, name), "rb") as f, open(os.path.join(d, name + "-cut"), "wb") as g:
            g.write(f.read()[:at])
    shutil.rmtree(t)


if __name__ == "__main__":
    if sys.argv[1:] == ["formats"]:  # the PNG and WebP corpora only
        write_formats()
        sys.exit(0)
    write_images()
    write_indexes()
    write_tar_types()
    write_formats()
    print("corpora written under", HERE, file=sys.stderr)
