"""Image(jpeg_cache=True) from Python: the loader's own lossless rewrite of
each JPEG (cache_dir/jpeg/) gives the batches the files give, epoch after
epoch, shuffled and resumed; a damaged copy is refused with a notice naming
it and its file, and the file is read."""

import glob
import os
import time

import numpy as np
import pytest
import torch
from PIL import Image as PILImage

import stoker


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """24 JPEGs in 2 classes, every third progressive, older than a second
    (a file changed within the second before its read is not copied)."""
    root = tmp_path_factory.mktemp("jc") / "ds"
    rng = np.random.default_rng(5)
    for i in range(24):
        d = root / ("c%d" % (i % 2))
        d.mkdir(parents=True, exist_ok=True)
        w, h = 60 + 13 * (i % 5), 50 + 11 * (i % 3)
        im = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        im = (im // 4 + np.arange(w, dtype=np.uint8)[None, :, None]).astype(np.uint8)
        PILImage.fromarray(im).save(str(d / ("%03d.jpg" % i)), quality=88,
                                    progressive=i % 3 == 0)
    time.sleep(1.1)
    return str(root)


def batches(path, cache, jc, epoch, seed=4):
    img = stoker.Image(32, crop="center", jpeg_cache=jc)
    with stoker.Loader(path, 5, seed=seed, image=img, cache_dir=cache) as l:
        l.set_epoch(epoch)
        out = [(x.clone(), y.clone()) for x, y in l]
        return out, l.stats()["decode_fast_share"]


def test_same_batches_and_read_from_copies(folder, tmp_path):
    cache = str(tmp_path / "cache")
    for epoch in (0, 1):
        want, fast = batches(folder, cache, False, epoch)
        assert fast == 0.0
        got, fast = batches(folder, cache, True, epoch)
        assert len(got) == len(want)
        for (x, ya), (y, yb) in zip(want, got):
            assert torch.equal(x, y) and torch.equal(ya, yb)
        # epoch 0's loader decoded each file's rewrite and kept it; the next
        # create reads them (that it does: the damaged copy's notice below)
        assert fast == 1.0
    assert len(glob.glob(os.path.join(cache, "jpeg", "*", "*.jpg"))) == 24
    assert stoker.Image(32, jpeg_cache=True).jpeg_cache is True
    assert stoker.Image(32).jpeg_cache is False  # off unless asked: it takes disk


def test_resume_with_copies(folder, tmp_path):
    cache = str(tmp_path / "cache")
    batches(folder, cache, True, 0)  # the copies made
    img = stoker.Image(32, crop="center", jpeg_cache=True)
    with stoker.Loader(folder, 5, seed=4, image=img, cache_dir=cache) as l:
        l.set_epoch(2)
        full = [x.clone() for x, _ in l]
    with stoker.Loader(folder, 5, seed=4, image=img, cache_dir=cache) as l:
        l.set_epoch(2)
        it = iter(l)
        next(it)
        next(it)
        state = l.state_dict()
        del it
    with stoker.Loader(folder, 5, seed=4, image=img, cache_dir=cache) as l:
        l.load_state_dict(state)
        l.set_epoch(2)
        rest = [x.clone() for x, _ in l]
    assert len(rest) == len(full) - 2
    assert all(torch.equal(a, b) for a, b in zip(rest, full[2:]))


def test_damaged_copy_refused_and_named(folder, tmp_path, capfd):
    cache = str(tmp_path / "cache")
    want, _ = batches(folder, cache, False, 0)
    batches(folder, cache, True, 0)
    copies = sorted(glob.glob(os.path.join(cache, "jpeg", "*", "*.jpg")))
    bad = copies[3]
    with open(bad, "r+b") as f:  # a byte of its JPEG data flipped
        f.seek(200)
        b = f.read(1)
        f.seek(200)
        f.write(bytes([b[0] ^ 0x20]))
    capfd.readouterr()
    got, fast = batches(folder, cache, True, 0)
    err = capfd.readouterr().err
    assert "JPEG copy %s of %s/" % (bad, folder) in err and "checksum" in err, err
    assert err.count("stoker: JPEG copy") == 1, err
    for (x, ya), (y, yb) in zip(want, got):
        assert torch.equal(x, y) and torch.equal(ya, yb)
    assert fast == 1.0  # the file read again, rewritten again
    capfd.readouterr()
    batches(folder, cache, True, 0)
    assert "JPEG copy" not in capfd.readouterr().err  # the new copy taken


def test_memory_counts_the_table(folder, tmp_path):
    """memory() counts what jpeg_cache holds beside the slots: a state a
    sample and a copy's path a place in the slots (fails where it is left out)."""
    got = {}
    for jc in (False, True):
        img = stoker.Image(32, crop="center", jpeg_cache=jc)
        with stoker.Loader(folder, 5, image=img, cache_dir=str(tmp_path / "c")) as l:
            got[jc] = l.memory()["meta_bytes"]
            places = l.memory()["nslots"] * 5
    assert got[True] - got[False] >= 24 * 4 + places * len(str(tmp_path / "c"))
