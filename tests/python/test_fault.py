"""The fault suite's Python half (tests/test_fault.c is the library's): bad
options are ValueErrors naming the argument, errors are counted exactly and
named, and the index cache is never trusted blindly."""

import errno
import os
import subprocess

import pytest
import torch

import stoker
from conftest import stoker_cli


@pytest.mark.parametrize("kwargs, name", [
    (dict(queue_depth=10**9), "queue_depth"),
    (dict(queue_depth=2**40), "queue_depth"),
    (dict(prefetch=5000), "prefetch"),
    (dict(threads=1000), "threads"),
    (dict(batch_size=2**21), "batch_size"),
])
def test_out_of_range_option_is_a_value_error_naming_it(folder, kwargs, name):
    with pytest.raises(ValueError, match=name) as ei:
        stoker.Loader(folder, **dict(dict(batch_size=4), **kwargs))
    if isinstance(ei.value, stoker.Error):  # refused by the library, not the binding
        assert ei.value.errno == errno.ERANGE


def test_slot_smaller_than_the_largest_sample_is_refused(folder):
    with pytest.raises(ValueError, match="slot_bytes") as ei:
        stoker.Loader(folder, 4, slot_bytes=1000)
    assert "largest sample" in str(ei.value) and folder in str(ei.value)
    # a slot that holds the largest sample is fine (some batches may not fit)
    with stoker.Loader(folder, 4, slot_bytes=20000, quiet=True) as l:
        assert sum(b.count for b in l) + l.stats()["errors"] == l.num_samples


def test_sample_extent_points_at_the_member(folder, tmp_path):
    cli = stoker_cli()
    if cli is None:
        pytest.skip("needs the stoker CLI (stoker pack): set STOKER or run `make`")
    out = str(tmp_path / "shards")
    subprocess.run([cli, "pack", folder, out], check=True, stdout=subprocess.DEVNULL)
    with stoker.Loader(folder, 4, shuffle=False) as f, stoker.Loader(out, 4, shuffle=False) as l:
        assert l.num_samples == f.num_samples
        for i in range(l.num_samples):
            path, off, size = l.sample_extent(i)
            assert off > 0 and path.endswith(".tar")
            with open(path, "rb") as t:
                t.seek(off)
                member = t.read(size)
            fpath, foff, fsize = f.sample_extent(i)
            assert foff == 0 and fsize == size
            with open(fpath, "rb") as src:
                assert member == src.read()
        with pytest.raises(IndexError):
            l.sample_extent(l.num_samples)


def test_replace_keeps_every_batch_full_in_image_mode(jpeg_folder, tmp_path):
    import shutil
    d = str(tmp_path / "ds")
    shutil.copytree(jpeg_folder, d)
    img = stoker.Image(32)
    classes = sorted(c for c in os.listdir(d) if os.path.isdir(os.path.join(d, c)))
    victims = sorted(os.path.join(d, c, f) for c in classes
                     for f in sorted(os.listdir(os.path.join(d, c))))[4::29]
    for v in victims:  # same size, not a JPEG any more: a decode error
        with open(v, "r+b") as f:
            f.write(b"\0\0\0\0")
    with stoker.Loader(d, 8, seed=3, image=img, on_error="replace", index_cache=False,
                       quiet=True) as l:
        for epoch in (0, 1):
            l.set_epoch(epoch)
            n = 0
            for k, b in enumerate(l):
                assert b.count == (8 if k + 1 < len(l) else l.num_samples - 8 * (len(l) - 1))
                for i, idx in enumerate(b.indices.tolist()):
                    path, size, label = l.sample(idx)
                    assert path not in victims and label == int(b.labels[i])
                    with open(path, "rb") as f:
                        want = img.decode(f.read(), seed=3, epoch=epoch, index=idx)
                    assert torch.equal(b.images[i], want)
                n += b.count
            st = l.stats()
            assert n == l.num_samples
            assert st["replaced"] == len(victims) * (epoch + 1)
            assert st["errors"] >= st["replaced"]
            assert "stand-in" in l.last_error and any(v in l.last_error for v in victims)
