"""Restart-indexed JPEGs from Python: stoker.transcode_jpeg rewrites a file to
the same pixels (PIL), the loader decodes a rewritten folder to exactly the
batches of the original one while reading only the crops' intervals, and
stats() says so; bad input raises stoker.Error with the reason."""

import io
import os
import shutil

import numpy as np
import pytest
import torch

import stoker
from stoker import _lib

from conftest import gen_folder

pytestmark = pytest.mark.skipif(_lib.stk_jpeg_transcode is None,
                                reason="this libstoker has no stk_jpeg_transcode")


@pytest.fixture(scope="module")
def originals(tmp_path_factory):
    """40 JPEGs in 2 classes, this module's own (other modules add files to theirs)."""
    return gen_folder(str(tmp_path_factory.mktemp("orig") / "ds"), 40, 2)


@pytest.fixture(scope="module")
def rewritten(originals, tmp_path_factory):
    """A copy of originals with every JPEG rewritten by transcode_jpeg."""
    out = str(tmp_path_factory.mktemp("rst") / "ds")
    for d, _, files in os.walk(originals):
        rel = os.path.relpath(d, originals)
        os.makedirs(os.path.join(out, rel), exist_ok=True)
        for f in files:
            with open(os.path.join(d, f), "rb") as src:
                data = src.read()
            with open(os.path.join(out, rel, f), "wb") as dst:
                dst.write(stoker.transcode_jpeg(data))
    return out


def test_same_pixels_in_pil(originals, rewritten):
    from PIL import Image
    n = 0
    for d, _, files in os.walk(originals):
        for f in files:
            a = os.path.join(d, f)
            b = os.path.join(rewritten, os.path.relpath(a, originals))
            assert stoker.restart_info(open(a, "rb").read()) is None
            interval, count = stoker.restart_info(open(b, "rb").read())
            assert interval >= 1 and count >= 1
            assert np.array_equal(np.asarray(Image.open(a)), np.asarray(Image.open(b))), f
            n += 1
    assert n == 40


def test_loader_batches_equal_and_fast(originals, rewritten):
    img = stoker.Image(64)
    shares = {}
    with stoker.Loader(originals, 8, seed=2, image=img) as a, \
            stoker.Loader(rewritten, 8, seed=2, image=img) as b:
        for (x, ya), (y, yb) in zip(a, b):
            assert torch.equal(x, y), "the interval path gives the ordinary path's pixels"
            assert torch.equal(ya, yb)
        for name, l in (("plain", a), ("rst", b)):
            st = l.stats()
            shares[name] = (st["decode_fast_share"], st["decode_entropy_share"])
    assert shares["plain"][0] == 0.0 and shares["rst"][0] == 1.0
    assert 0 < shares["rst"][1] < shares["plain"][1] <= 1


def test_bad_input_raises():
    with pytest.raises(stoker.Error) as e:
        stoker.transcode_jpeg(b"\x89PNG\r\n\x1a\n....")
    assert e.value.name == "STK_EFORMAT" and "not a JPEG" in str(e.value)
    with pytest.raises(stoker.Error) as e:
        stoker.transcode_jpeg(b"\xff\xd8\xff\xe0" + b"\x00" * 40)
    assert e.value.name == "STK_ECORRUPT"
