"""PNG and WebP in image mode beside JPEG: told apart by content, every
colour mode turned into RGB as PIL's convert("RGB") does it, so a folder
gives torchvision ImageFolder's pixels (equal at full size, within the
resize tolerance after a crop); bad files named, counted, or replaced."""

import io
import os
import struct
import zlib

import numpy as np
import pytest
import torch

import stoker
from stoker import _lib

PIL = pytest.importorskip("PIL", reason="PIL is not installed (apt-get install python3-pil)")
from PIL import Image as PILImage  # noqa: E402
from PIL import features  # noqa: E402

pytestmark = pytest.mark.skipif(_lib.stk_image_decode is None,
                                reason="this libstoker has no image mode")
needs_webp = pytest.mark.skipif(not features.check("webp"), reason="this PIL has no WebP")


def picture(w, h, seed):
    """Smooth gradients plus noise: lossy codecs and resizing both have work."""
    r = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    base = np.stack([x * 255 // max(w - 1, 1), y * 255 // max(h - 1, 1),
                     (x + y) * 255 // max(w + h - 2, 1)], -1)
    return np.clip(base + r.integers(-40, 40, (h, w, 3)), 0, 255).astype(np.uint8)


def save(im, fmt, **kw):
    b = io.BytesIO()
    im.save(b, fmt, **kw)
    return b.getvalue()


def variants(w=67, h=45):
    """(name, bytes) of a PNG in each colour type and bit depth, WebP lossy and
    lossless with and without alpha, and JPEG."""
    rgb = picture(w, h, 1)
    a = picture(w, h, 2)[..., 0]
    g = rgb[..., 1]
    g16 = (picture(w, h, 3)[..., 0].astype(np.uint16) * 3)  # some above 255: PIL saturates
    out = []
    im = PILImage.fromarray(rgb)
    out.append(("png-rgb8", save(im, "PNG")))
    out.append(("png-rgba8", save(PILImage.fromarray(np.dstack([rgb, a])), "PNG")))
    out.append(("png-l8", save(PILImage.fromarray(g), "PNG")))
    out.append(("png-la8", save(PILImage.fromarray(np.dstack([g, a]), "LA"), "PNG")))
    out.append(("png-1bit", save(PILImage.fromarray(g > 128), "PNG")))
    for bits in (2, 4):
        out.append(("png-p%d" % bits, save(im.quantize(1 << bits), "PNG", bits=bits)))
        out.append(("png-l%d" % bits, png_raw(w, h, 0, bits, g >> (8 - bits))))
    out.append(("png-p8", save(im.quantize(200), "PNG")))
    pt = im.quantize(64)
    pt.info["transparency"] = bytes(range(64))
    out.append(("png-p8-trns", save(pt, "PNG")))
    out.append(("png-l16", save(PILImage.fromarray(g16), "PNG")))
    out.append(("png-rgb16", png_raw(w, h, 2, 16, rgb.astype(np.uint16) * 257 + 3)))
    out.append(("png-rgba16", png_raw(w, h, 6, 16, np.dstack([rgb, a]).astype(np.uint16) * 250)))
    out.append(("png-la16", png_raw(w, h, 4, 16, np.dstack([g, a]).astype(np.uint16) * 251)))
    out.append(("png-interlaced", png_raw(w, h, 2, 8, rgb, interlace=True)))
    out.append(("png-interlaced-l2", png_raw(w, h, 0, 2, g >> 6, interlace=True)))
    out.append(("jpeg", save(im, "JPEG", quality=90)))
    if features.check("webp"):
        out.append(("webp-lossy", save(im, "WEBP", quality=80)))
        out.append(("webp-lossless", save(im, "WEBP", lossless=True)))
        rgba = PILImage.fromarray(np.dstack([rgb, a]))
        out.append(("webp-lossy-alpha", save(rgba, "WEBP", quality=80)))
        out.append(("webp-lossless-alpha", save(rgba, "WEBP", lossless=True)))
    return out


def chunk(t, data):
    return struct.pack(">I", len(data)) + t + data + struct.pack(">I", zlib.crc32(t + data))


def png_raw(w, h, color, bits, samples, interlace=False):
    """A PNG written here, for what PIL cannot write (16-bit RGB, 2/4-bit grey,
    Adam7 of any type): samples (h, w[, c]) of `bits` bits."""
    s = np.asarray(samples).reshape(h, w, -1)

    def rows(sub):
        raw = b""
        for row in sub:
            if bits == 16:
                line = row.astype(">u2").tobytes()
            elif bits == 8:
                line = row.astype(np.uint8).tobytes()
            else:
                v = row.reshape(-1).astype(np.uint8)
                per = 8 // bits
                v = np.concatenate([v, np.zeros((-len(v)) % per, np.uint8)]).reshape(-1, per)
                line = bytes(int(sum(int(p) << (8 - bits * (k + 1)) for k, p in enumerate(g)))
                             for g in v)
            raw += b"\0" + line
        return raw

    if interlace:
        data = b""
        for x0, y0, dx, dy in ((0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4),
                               (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)):
            sub = s[y0::dy, x0::dx]
            if sub.shape[0] and sub.shape[1]:
                data += rows(sub)
    else:
        data = rows(s)
    ihdr = struct.pack(">IIBBBBB", w, h, bits, color, 0, 0, 1 if interlace else 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(data))
            + chunk(b"IEND", b""))


def full_size(data):
    """stoker's decode at the file's own size: the decoded pixels themselves."""
    w, h = PILImage.open(io.BytesIO(data)).size
    opts = stoker.Image((h, w), crop="center", crop_frac=1.0)
    return opts.decode(data).permute(1, 2, 0).numpy()


def pil_rgb(data):
    return np.asarray(PILImage.open(io.BytesIO(data)).convert("RGB"))


@pytest.mark.parametrize("name,data", variants(), ids=[n for n, _ in variants()])
def test_full_size_equals_pil(name, data):
    got, want = full_size(data), pil_rgb(data)
    assert got.shape == want.shape
    if name == "jpeg":  # libjpeg-turbo's and PIL's: the same library, same settings
        assert np.abs(got.astype(int) - want).max() <= 1
    else:
        assert np.array_equal(got, want), "%s: %d pixels differ" % (
            name, int((got != want).any(-1).sum()))


@pytest.mark.parametrize("name,data", variants(640, 480), ids=[n for n, _ in variants()])
def test_crops_within_torchvision_tolerance(name, data):
    transforms = pytest.importorskip(
        "torchvision.transforms",
        reason="torchvision is not installed (Debian: apt-get install python3-torchvision)")
    ref = transforms.Compose([transforms.Resize(256), transforms.CenterCrop(224),
                              transforms.PILToTensor()])
    got = stoker.Image(224, crop="center").decode(data).numpy().astype(np.int16)
    want = ref(PILImage.open(io.BytesIO(data)).convert("RGB")).numpy().astype(np.int16)
    mad = np.abs(got - want).mean()
    assert mad <= 2.0, "%s: mean absolute difference %.3f" % (name, mad)


def test_random_crops_follow_the_format_regions():
    """A random crop of a PNG decoded only down to the crop equals the crop
    of the whole decode (what the resampler sees is the same)."""
    rgb = picture(300, 200, 5)
    data = save(PILImage.fromarray(rgb), "PNG")
    inter = png_raw(300, 200, 2, 8, rgb, interlace=True)
    o = stoker.Image(32, crop="random_resized", flip=True)
    for i in range(20):  # an interlaced file is decoded whole: the same pixels
        assert torch.equal(o.decode(data, seed=3, index=i), o.decode(inter, seed=3, index=i))


def test_format_by_content_not_name(tmp_path):
    """A PNG named .JPEG (ImageNet holds one) and a WebP named .jpg load."""
    d = tmp_path / "d" / "c"
    d.mkdir(parents=True)
    im = PILImage.fromarray(picture(64, 48, 7))
    (d / "a.JPEG").write_bytes(save(im, "PNG"))
    (d / "b.jpg").write_bytes(save(im, "JPEG"))
    if features.check("webp"):
        (d / "c.jpg").write_bytes(save(im, "WEBP"))
    with stoker.Loader(str(tmp_path / "d"), 8, image=stoker.Image(32)) as l:
        n = sum(b.count for b in l)
        st = l.stats()
    assert n == len(os.listdir(d))
    assert st["errors"] == 0


def bad_files():
    im = PILImage.fromarray(picture(64, 48, 9))
    png = save(im, "PNG")
    out = [("zero width", png[:16] + b"\0\0\0\0" + png[20:], "zero dimension")]
    # an IDAT that claims more bytes than the file holds
    i = png.index(b"IDAT") - 4
    out.append(("lying chunk", png[:i] + struct.pack(">I", 1 << 20) + png[i + 4:],
                "claims 1048576 bytes"))
    out.append(("truncated png", png[:len(png) * 2 // 3], "corrupt PNG"))
    bad_crc = bytearray(png)
    bad_crc[29] ^= 0xff  # IHDR's CRC
    out.append(("bad crc", bytes(bad_crc), "corrupt PNG"))
    if features.check("webp"):
        w = save(im, "WEBP", quality=80)
        out.append(("truncated webp", w[:len(w) // 2], "truncated"))
        out.append(("garbage webp", w[:20] + bytes(len(w) - 20), "corrupt WebP"))
    return out


@pytest.mark.parametrize("name,data,why", bad_files(), ids=[n for n, _, _ in bad_files()])
def test_bad_files_are_named(name, data, why):
    with pytest.raises(stoker.Error) as e:
        stoker.Image(32).decode(data)
    assert why in str(e.value), str(e.value)


def test_bad_files_fail_skip_replace(tmp_path):
    d = tmp_path / "d" / "c"
    d.mkdir(parents=True)
    # smaller than every bad file (the smallest, a truncated WebP, is 676
    # bytes), so a stand-in always fits the place it fills: with a larger one
    # (1,135 bytes), a seed whose batch left no room after its reads gave up
    # on that place (1.3 % of seeds; the loader's seed is torch's, drawn anew
    # each process)
    im = PILImage.fromarray(picture(12, 8, 7))
    good = save(im, "PNG")
    bad = bad_files()
    assert len(good) < min(len(data) for _, data, _ in bad)
    for i in range(6):
        (d / ("ok%d.png" % i)).write_bytes(good)
    for k, (name, data, _) in enumerate(bad):
        (d / ("bad%d.png" % k)).write_bytes(data)
    root = str(tmp_path / "d")
    with stoker.Loader(root, 4, image=stoker.Image(32), on_error="skip") as l:
        n = sum(b.count for b in l)
        assert n == 6 and l.stats()["errors"] == len(bad)
    with stoker.Loader(root, 4, image=stoker.Image(32), on_error="replace") as l:
        n = sum(b.count for b in l)
        st = l.stats()  # (a stand-in that is bad too counts as an error of its own)
        assert n == 6 + len(bad) and st["replaced"] == len(bad) and st["errors"] >= len(bad)
    with pytest.raises(stoker.Error) as e:
        with stoker.Loader(root, 4, image=stoker.Image(32), on_error="fail") as l:
            for b in l:
                pass
    assert "bad" in str(e.value) and ".png" in str(e.value), str(e.value)


def test_max_pixels_before_decoding():
    im = PILImage.fromarray(picture(200, 100, 1))
    for fmt in ("PNG", "WEBP") if features.check("webp") else ("PNG",):
        with pytest.raises(stoker.Error) as e:
            stoker.Image(32, max_pixels=19999).decode(save(im, fmt))
        assert "200x100 pixels is above the limit of 19999" in str(e.value)
        stoker.Image(32, max_pixels=20000).decode(save(im, fmt))


def apng(frames, w, h):
    """An APNG whose default image is the first frame (PIL's frame 0)."""
    b = io.BytesIO()
    frames[0].save(b, "PNG", save_all=True, append_images=frames[1:], duration=50)
    return b.getvalue()


def test_animations_give_the_first_frame():
    a = PILImage.fromarray(picture(60, 40, 1))
    b = PILImage.fromarray(picture(60, 40, 2))
    data = apng([a, b], 60, 40)
    assert b"acTL" in data
    assert np.array_equal(full_size(data), pil_rgb(data))
    assert np.array_equal(full_size(data), np.asarray(a))
    if features.check("webp"):
        w = save(a, "WEBP", save_all=True, append_images=[b], duration=50, lossless=True)
        assert b"ANIM" in w
        assert np.array_equal(full_size(w), pil_rgb(w))


def test_decode_stats_per_format(tmp_path):
    d = tmp_path / "d" / "c"
    d.mkdir(parents=True)
    im = PILImage.fromarray(picture(400, 300, 7))
    for i in range(4):
        (d / ("%d.png" % i)).write_bytes(save(im, "PNG"))
        (d / ("%d.jpg" % i)).write_bytes(save(im, "JPEG"))
        if features.check("webp"):
            (d / ("%d.webp" % i)).write_bytes(save(im, "WEBP"))
    with stoker.Loader(str(tmp_path / "d"), 4, image=stoker.Image(64)) as l:
        for b in l:
            pass
        st = l.stats()
    assert st["format_decoded"] == {"jpeg": 4, "png": 4,
                                    "webp": 4 if features.check("webp") else 0}
    for f, n in st["format_decoded"].items():
        assert (st["format_decode_busy_s"][f] > 0) == (n > 0), f
        assert 0 <= st["format_fast_share"][f] <= 1
    # a PNG is decoded down to its zlib stream's end whatever the crop
    # (its Adler-32 checked): no crop-only path
    assert st["format_fast_share"]["png"] == 0


def test_png_without_iend_is_read_to_its_end():
    """A PNG cut after its image data (no IEND) loads in PIL; with no end to
    check, every row is decoded (no fast path), and random crops of it equal
    those of the whole file."""
    rgb = picture(200, 150, 4)
    data = save(PILImage.fromarray(rgb), "PNG")
    cut = data[:data.index(b"IEND") - 4]
    assert np.array_equal(full_size(cut), pil_rgb(cut))
    o = stoker.Image(32, crop="random_resized")
    for i in range(20):
        assert torch.equal(o.decode(cut, seed=1, index=i), o.decode(data, seed=1, index=i))
