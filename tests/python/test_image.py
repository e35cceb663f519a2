"""Image mode's promises to a PyTorch user: `for images, labels in loader`
gives (N, 3, H, W) tensors of the asked size and dtype over the batch memory,
with ImageFolder's labels; each image is what stk_image_decode gives for its
file (and close to torchvision's transforms on PIL); batches do not depend on
the decode thread count; referenced images stay valid; corrupt JPEGs are
skipped and counted or named; close() joins the threads at once."""

import ctypes
import gc
import os
import shutil

import numpy as np
import pytest
import torch

import stoker
from stoker import _lib

from conftest import assert_labels_equal_imagefolder, thread_count, threads_after_join

N = 40  # the image_folder fixture: `stoker gen DIR --images 40 --classes 2`

pytestmark = pytest.mark.skipif(_lib.stk_image_decode is None,
                                reason="this libstoker has no image mode")


def read(path):
    with open(path, "rb") as f:
        return f.read()


def c_decode(opts, data, seed, epoch, index):
    """stk_image_decode through ctypes: the reference for one sample."""
    o = opts._opts()
    out = np.zeros(_lib.stk_image_bytes(ctypes.byref(o)), dtype=np.uint8)
    err = ctypes.create_string_buffer(256)
    rc = _lib.stk_image_decode(ctypes.byref(o), data, len(data), seed, epoch, index,
                               out.ctypes.data, err, len(err))
    assert rc == 0, err.value
    return out


# --- what a batch is ------------------------------------------------------------

def test_batches_are_images_of_the_asked_size(image_folder):
    with stoker.Loader(image_folder, 8, seed=1, image=stoker.Image(64)) as l:
        seen = []
        for b in l:
            images, labels = b        # unpacks like a DataLoader over an ImageFolder
            assert isinstance(b, stoker.ImageBatch)
            assert images.shape == (8, 3, 64, 64) and images.dtype == torch.uint8
            assert labels.dtype == b.indices.dtype == torch.int64
            assert b.count == 8 == labels.shape[0] == b.indices.shape[0]
            assert int(images.max()) > int(images.min()), "real pixels"
            seen += b.indices.tolist()
        assert sorted(seen) == list(range(N)), "each sample once per epoch"
        assert "shape=(8, 3, 64, 64)" in repr(b)


def test_images_are_the_slot_memory(image_folder):
    with stoker.Loader(image_folder, 8, image=stoker.Image(32), prefetch=2) as l:
        b = next(iter(l))
        (addr,) = l._core.owned
        v = _lib.BatchStruct.from_address(addr)
        assert b.images.data_ptr() == v.images, "zero copy"
        assert (v.channels, v.height, v.width, v.nhwc) == (3, 32, 32, 0)
        assert v.image_bytes == 3 * 32 * 32 == stoker.Image(32).nbytes


def test_labels_equal_imagefolder(image_folder):
    assert_labels_equal_imagefolder(image_folder, 16, image=stoker.Image(32, crop="center"))


def test_raw_bytes_ride_along(image_folder):
    with stoker.Loader(image_folder, 8, image=stoker.Image(32, keep_raw=True)) as l:
        b = next(iter(l))
        raw = b.raw
        assert raw is b.raw and isinstance(raw, stoker.Batch)
        for i in range(b.count):
            path = l.sample(int(b.indices[i]))[0]
            assert raw.sample(i).numpy().tobytes() == read(path)


def test_read_areas_leave_slots_to_images(image_folder):
    """By default the reads go to read areas, not the slots: a batch holds
    only its images (raw is None), the same images keep_raw gives, and
    memory() counts the areas apart from the slots."""
    page = lambda n: -(-n // 4096) * 4096  # noqa: E731
    with stoker.Loader(image_folder, 8, seed=5, prefetch=3, image=stoker.Image(32)) as a, \
            stoker.Loader(image_folder, 8, seed=5, prefetch=3,
                          image=stoker.Image(32, keep_raw=True)) as k:
        assert not a.image.keep_raw and k.image.keep_raw
        for (x, y), (xk, yk) in zip(a, k):
            assert torch.equal(x, xk) and torch.equal(y, yk)
        b = next(iter(a))
        assert b.raw is None and b.images.shape == (8, 3, 32, 32)
        m, mk = a.memory(), k.memory()
        assert m["slot_bytes"] == page(8 * 3 * 32 * 32)
        assert m["read_areas"] == 3 and m["read_area_bytes"] > 0  # batch 8: up to prefetch
        assert m["read_pool_bytes"] == m["read_areas"] * m["read_area_bytes"]
        assert mk["read_areas"] == 0 and mk["read_pool_bytes"] == 0
        assert mk["slot_bytes"] == m["read_area_bytes"] + m["slot_bytes"]
        for d in (m, mk):
            assert d["total"] == (d["pool_bytes"] + d["read_pool_bytes"] + d["index_bytes"]
                                  + d["meta_bytes"] + d["decode_bytes"])
    # enough read areas for 256 reads, whatever prefetch is: two at batch 128,
    # one at 256; read_areas sets them (and the images stay the same)
    with stoker.Loader(image_folder, 128, prefetch=4, image=stoker.Image(32)) as l:
        assert l.memory()["read_areas"] == 2
    with stoker.Loader(image_folder, 256, prefetch=4, image=stoker.Image(32)) as l, \
            stoker.Loader(image_folder, 256, prefetch=4,
                          image=stoker.Image(32, read_areas=3)) as l3:
        assert l.memory()["read_areas"] == 1 and l3.memory()["read_areas"] == 3
        assert l3.image.read_areas == 3
        for (x, _), (x3, _) in zip(l, l3):
            assert torch.equal(x, x3)


@pytest.mark.parametrize("dtype", ["float16", torch.float32])
def test_layout_and_dtype(image_folder, dtype):
    def loader(**kw):
        return stoker.Loader(image_folder, 8, seed=3,
                             image=stoker.Image(size=(40, 56), crop="random_resized", **kw))
    with loader() as a, loader(layout="nhwc") as b, loader(dtype=dtype) as c:
        for (x, _), (y, _), (z, _) in zip(a, b, c):
            assert x.shape == (8, 3, 40, 56) and y.shape == (8, 40, 56, 3)
            assert torch.equal(x.permute(0, 2, 3, 1), y), "nhwc is nchw transposed"
            want = torch.float16 if dtype == "float16" else torch.float32
            assert z.dtype == want and z.shape == x.shape
            # float without normalize is x / 255 before rounding to uint8
            tol = 0.5 / 255 + (1e-3 if want == torch.float16 else 1e-6)
            assert torch.allclose(z.float(), x.float() / 255, atol=tol, rtol=0)


def test_float32_normalize(image_folder):
    mean, std = stoker.IMAGENET_MEAN, stoker.IMAGENET_STD
    im8 = stoker.Image(48)
    imf = stoker.Image(48, dtype="float32", normalize=(mean, std))
    assert stoker.Image(48, dtype="float32", normalize="imagenet") == imf
    m = torch.tensor(mean).view(1, 3, 1, 1)
    s = torch.tensor(std).view(1, 3, 1, 1)
    with stoker.Loader(image_folder, 8, seed=2, image=im8) as a, \
            stoker.Loader(image_folder, 8, seed=2, image=imf) as b:
        for (x, lx), (y, ly) in zip(a, b):
            assert y.dtype == torch.float32 and torch.equal(lx, ly)
            want = (x.float() / 255 - m) / s
            # uint8 is the same value rounded: at most half a grey level apart
            assert torch.allclose(y, want, atol=0.5 / 255 / min(std) + 1e-5, rtol=0)


# --- the same pixels as stk_image_decode and as torchvision ---------------------

def test_center_crop_equals_c_decode_and_torchvision(image_folder):
    pytest.importorskip("PIL", reason="PIL is not installed (apt-get install python3-pil)")
    transforms = pytest.importorskip(
        "torchvision.transforms",
        reason="torchvision is not installed (Debian: apt-get install python3-torchvision)")
    from PIL import Image as PILImage
    ref = transforms.Compose([transforms.Resize(256), transforms.CenterCrop(224),
                              transforms.PILToTensor()])
    opts = stoker.Image(224, crop="center")
    worst = 0.0
    with stoker.Loader(image_folder, 8, seed=7, image=opts) as l:
        l.set_epoch(2)
        for b in l:
            for k in range(b.count):
                i = int(b.indices[k])
                path = l.sample(i)[0]
                data = read(path)
                got = b.images[k].numpy()
                want = c_decode(opts, data, 7, 2, i).reshape(3, 224, 224)
                assert np.array_equal(got, want), path
                pil = ref(PILImage.open(path).convert("RGB")).numpy()
                mad = np.abs(got.astype(np.int16) - pil.astype(np.int16)).mean()
                worst = max(worst, mad)
                assert mad <= 2.0, "%s: mean absolute difference %.3f" % (path, mad)
    print("worst mean absolute difference against torchvision: %.3f" % worst)


def test_center_crop_within_documented_tolerance_of_torchvision(tmp_path):
    """docs/python.md: the centre crop is within 0.2 grey levels (mean
    absolute difference) of torchvision's Resize(256) + CenterCrop(224) on
    PIL, also for textured photos large enough that a DCT-domain 1/2 decode
    would fit the box (800x600, 1024x768: 3 grey levels apart that way), and
    for progressive files (their scans decoded only down to the crop's rows)."""
    pytest.importorskip("PIL", reason="PIL is not installed (apt-get install python3-pil)")
    transforms = pytest.importorskip(
        "torchvision.transforms",
        reason="torchvision is not installed (Debian: apt-get install python3-torchvision)")
    from PIL import Image as PILImage
    ref = transforms.Compose([transforms.Resize(256), transforms.CenterCrop(224),
                              transforms.PILToTensor()])
    opts = stoker.Image(224, crop="center")
    rng = np.random.default_rng(0)
    for w, h in ((500, 375), (375, 500), (333, 500), (800, 600), (1024, 768), (600, 1000)):
        base = rng.integers(0, 256, (h // 8 + 1, w // 8 + 1, 3)).astype(np.uint8)
        im = np.asarray(PILImage.fromarray(base).resize((w, h), PILImage.BICUBIC), np.int16)
        im = np.clip(im + rng.integers(-40, 40, (h, w, 3)), 0, 255).astype(np.uint8)
        for progressive in (False, True):
            path = str(tmp_path / ("%dx%d-%d.jpg" % (w, h, progressive)))
            PILImage.fromarray(im).save(path, quality=90, progressive=progressive)
            got = opts.decode(read(path)).numpy().astype(np.int16)
            with PILImage.open(path) as pim:
                assert bool(pim.info.get("progressive")) == progressive
                want = ref(pim.convert("RGB")).numpy().astype(np.int16)
            mad = np.abs(got - want).mean()
            assert mad <= 0.2, "%dx%d progressive %s: mean absolute difference %.3f" % (
                w, h, progressive, mad)
            assert np.abs(got - want).max() <= 2


def test_random_crop_equals_c_decode(image_folder):
    """The training crop and flip come from (seed, epoch, index): the loader
    and stk_image_decode (and Image.decode) agree bit for bit."""
    opts = stoker.Image(64, crop="random_resized", flip=True)
    with stoker.Loader(image_folder, 8, seed=11, image=opts) as l:
        l.set_epoch(3)
        for b in l:
            for k in range(b.count):
                i = int(b.indices[k])
                data = read(l.sample(i)[0])
                want = c_decode(opts, data, 11, 3, i).reshape(3, 64, 64)
                assert np.array_equal(b.images[k].numpy(), want)
                assert torch.equal(opts.decode(data, seed=11, epoch=3, index=i), b.images[k])


def test_decode_threads_do_not_change_batches(image_folder):
    def run(threads):
        im = stoker.Image(56, decode_threads=threads)
        with stoker.Loader(image_folder, 8, seed=5, image=im) as l:
            out = []
            for epoch in (0, 1):
                l.set_epoch(epoch)
                out += [(b.indices.tolist(), b.images.numpy().tobytes()) for b in l]
            assert l.stats()["decode_threads"] == threads
            return out
    one, two = run(1), run(2)
    assert one == two
    assert one[0][1] != one[len(one) // 2][1]


# --- slot lifetime ----------------------------------------------------------------

def test_images_stay_valid_while_referenced(image_folder):
    with stoker.Loader(image_folder, 4, seed=1, prefetch=3, image=stoker.Image(32)) as l:
        it = iter(l)
        first = next(it)
        kept_slot = first.slot
        kept = first.images[1]         # a view keeps the slot, not just the batch
        want = kept.numpy().copy()
        del first
        later = []
        for _ in range(6):             # the loader moves on, through the other slots
            images, labels = b = next(it)
            later.append(b.slot)
            del images, labels, b
        assert kept_slot not in later, "a referenced slot is not reused"
        assert np.array_equal(kept.numpy(), want)
        del kept
        gc.collect()
        assert kept_slot in [next(it).slot for _ in range(3)], "reused once unreferenced"


def test_copy_free_image_mode(image_folder):
    opts = stoker.Image(32)
    with stoker.Loader(image_folder, 8, seed=4, prefetch=1, copy_free=True, image=opts) as l:
        n = 0
        for images, labels in l:
            n += labels.shape[0]
        assert n == N


def test_close_with_live_images_joins_threads_at_once(image_folder):
    gc.collect()  # loaders of earlier tests kept by reference cycles
    base = thread_count()
    l = stoker.Loader(image_folder, 4, engine="pread", threads=3,
                      image=stoker.Image(32, decode_threads=2))
    assert thread_count() >= base + 2
    images, labels = next(iter(l))
    want = images.numpy().copy()
    core = l._core
    l.close()
    if _lib.stk_loader_stop is not None:
        assert threads_after_join(base) == base, "close() joins the I/O and decode threads"
    assert core.h is not None, "the pool stays mapped while a tensor is alive"
    assert np.array_equal(images.numpy(), want)
    del images, labels
    gc.collect()
    assert core.h is None, "destroyed with the last tensor"
    assert threads_after_join(base) == base


# --- errors -------------------------------------------------------------------------

def damaged_copy(src, dst):
    """A copy of the dataset with one file of garbage and one truncated JPEG."""
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns(".stoker-index*"))
    files = sorted(os.path.join(d, f) for d, _, fs in os.walk(dst) for f in fs)
    garbage, truncated = files[3], files[17]
    size = os.path.getsize(garbage)
    with open(garbage, "wb") as f:
        f.write(np.random.default_rng(0).integers(0, 256, size, dtype=np.uint8).tobytes())
    with open(truncated, "r+b") as f:
        f.truncate(os.path.getsize(truncated) // 2)
    return garbage, truncated


def test_corrupt_jpeg_is_skipped_and_counted(image_folder, tmp_path):
    bad = damaged_copy(image_folder, str(tmp_path / "ds"))
    with stoker.Loader(str(tmp_path / "ds"), 8, seed=1, image=stoker.Image(32),
                       index_cache=False, quiet=True) as l:
        got = []
        for b in l:
            assert b.images.shape[0] == b.count
            got += b.indices.tolist()
        st = l.stats()
        paths = {l.sample(i)[0] for i in got}
    assert len(got) == N - 2 and not set(bad) & paths
    assert st["errors"] >= 2


def test_corrupt_jpeg_fails_naming_the_file(image_folder, tmp_path):
    bad = damaged_copy(image_folder, str(tmp_path / "ds"))
    with stoker.Loader(str(tmp_path / "ds"), 8, seed=1, image=stoker.Image(32),
                       on_error="fail", index_cache=False, quiet=True) as l:
        with pytest.raises(stoker.Error) as ei:
            for _ in l:
                pass
    e = ei.value
    assert e.path in bad and e.path in str(e), str(e)
    assert e.code == _lib.ECORRUPT and e.name == "STK_ECORRUPT"
    assert "JPEG" in e.reason or "SOI" in e.reason, e.reason


def test_decode_error_from_image_decode():
    with pytest.raises(stoker.Error) as ei:
        stoker.Image(32).decode(b"not a jpeg at all")
    assert ei.value.code == _lib.ECORRUPT
    with pytest.raises(stoker.Error) as ei:
        stoker.Image(32).decode(b"GIF89a" + bytes(64))
    assert ei.value.code == _lib.EFORMAT and "GIF" in str(ei.value)
    with pytest.raises(stoker.Error) as ei:
        stoker.Image(32).decode(b"\x89PNG\r\n\x1a\n" + bytes(64))
    assert ei.value.code == _lib.ECORRUPT and "corrupt PNG" in str(ei.value)


# --- stats and options -------------------------------------------------------------

def test_decode_stats(image_folder):
    with stoker.Loader(image_folder, 8, image=stoker.Image(32, decode_threads=1)) as l:
        for _ in l:
            pass
        st = l.stats()
    assert st["decode_threads"] == 1 and st["samples"] == N
    assert st["decode_busy_s"] > 0 and st["decode_p50_ns"] > 0
    assert st["decode_p99_ns"] >= st["decode_p50_ns"]
    assert st["decode_images_per_s_per_core"] == pytest.approx(N / st["decode_busy_s"])
    with stoker.Loader(image_folder, 8) as l:
        assert l.stats()["decode_images_per_s_per_core"] == 0.0  # raw mode


def test_image_options_are_checked(image_folder):
    im = stoker.Image()
    assert (im.size, im.shape, im.torch_dtype, im.crop) == (224, (3, 224, 224), torch.uint8,
                                                            "random_resized")
    assert stoker.Image((32, 48), layout="nhwc").shape == (32, 48, 3)
    assert "size=(32, 48)" in repr(stoker.Image((32, 48)))
    bad = [dict(size=0), dict(size=9000), dict(size=(1, 2, 3)), dict(crop="rand0m"),
           dict(layout="chw"), dict(dtype="int8"), dict(normalize="imagenet"),
           dict(dtype="float32", normalize=((0.5,) * 3, (0.2, 0.0, 0.2))),
           dict(dtype="float32", normalize=((0.5, 0.5), (0.2, 0.2))),
           dict(dtype="float32", normalize="cifar"), dict(scale=(0.5, 0.2)),
           dict(scale=(0.0, 1.0)), dict(scale=(0.5, 1.5)), dict(ratio=(0, 1)),
           dict(ratio=(2, 1)), dict(crop_frac=0), dict(crop_frac=1.5),
           dict(decode_threads=-1), dict(max_pixels=-1)]
    for kw in bad:
        with pytest.raises(ValueError, match="Image"):
            stoker.Image(**kw)
    for kw in (dict(size=2.5), dict(size="224"), dict(decode_threads=1.0), dict(scale=0.5)):
        with pytest.raises(TypeError):
            stoker.Image(**kw)
    with pytest.raises(TypeError, match="stoker.Image"):
        stoker.Loader(image_folder, 4, image="jpeg")
    with stoker.Loader(image_folder, 4, image={"size": 16, "crop": "center"}) as l:
        assert l.image == stoker.Image(16, crop="center")
        images, _ = next(iter(l))
        assert images.shape == (4, 3, 16, 16)


# --- CUDA -------------------------------------------------------------------------

@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device (torch.cuda)")
def test_cuda_image_batches(image_folder):
    opts = stoker.Image(48)
    with stoker.Loader(image_folder, 8, seed=1, device="cuda", image=opts) as l, \
            stoker.Loader(image_folder, 8, seed=1, image=opts) as ref:
        for b, r in zip(l, ref):
            images, labels = b
            assert images.is_cuda and labels.is_cuda and not b.indices.is_cuda
            assert b.raw is None
            assert torch.equal(images.cpu(), r.images)
            assert torch.equal(labels.cpu(), r.labels)
