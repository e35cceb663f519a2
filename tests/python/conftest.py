"""Fixtures for the Python binding's tests (run by `make test-py`).

`make test-py` sets PYTHONPATH=python, STOKER_LIB (the built libstoker.so.0)
and STOKER (the CLI).  Run by hand from the source tree:
    STOKER=build/stoker PYTHONPATH=python /usr/bin/python3 -m pytest -q tests/python
"""

import os
import subprocess
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))

CLASSES = ("b_cls", "a_cls", "c_cls")  # created unsorted: labels follow the sorted names
PER_CLASS = 17


def stoker_cli():
    cli = os.environ.get("STOKER") or os.path.join(ROOT, "build", "stoker")
    return cli if os.access(cli, os.X_OK) else None


def thread_count():
    """The process's threads, as /proc/self/task lists them."""
    return len(os.listdir("/proc/self/task"))


def threads_after_join(want, timeout=1.0):
    """The thread count once it is `want`, or after `timeout` s: a thread that
    pthread_join has returned for leaves /proc/self/task a moment later (the
    kernel wakes the joiner as the thread exits, then reaps it; ~4 ms here).
    A thread that was not joined stays, and the count with it."""
    end = time.monotonic() + timeout
    n = thread_count()
    while n != want and time.monotonic() < end:
        time.sleep(0.001)
        n = thread_count()
    return n


def sample_bytes(c, i):
    """Deterministic content of file i of class c; file 3 of each class is empty."""
    n = 0 if i == 3 else (c * 7919 + i * 104729) % 20000
    return bytes((k * 31 + c * 7 + i) & 0xFF for k in range(n))


def assert_labels_equal_imagefolder(folder, *args, **kwargs):
    """stoker.Loader(folder, *args, **kwargs) gives every file of the folder
    the label (and the class list) torchvision's ImageFolder gives it."""
    import stoker
    datasets = pytest.importorskip(
        "torchvision.datasets",
        reason="torchvision is not installed (Debian: apt-get install python3-torchvision)")
    ref = datasets.ImageFolder(folder)
    want = {os.path.realpath(p): lab for p, lab in ref.samples}
    with stoker.Loader(folder, *args, **kwargs) as l:
        assert l.classes == ref.classes
        got = {}
        for b in l:
            for i, lab in zip(b.indices.tolist(), b.labels.tolist()):
                got[os.path.realpath(l.sample(i)[0])] = lab
    assert got == want


def write_folder(root):
    """An ImageFolder-layout folder of 51 small files of known content, plus
    files that are not samples (another extension; a file beside the classes)."""
    for c, name in enumerate(CLASSES):
        os.makedirs(os.path.join(root, name))
        for i in range(PER_CLASS):
            with open(os.path.join(root, name, "%03d.jpg" % i), "wb") as f:
                f.write(sample_bytes(c, i))
        with open(os.path.join(root, name, "notes.txt"), "w") as f:
            f.write("not an image")
    with open(os.path.join(root, "top.jpg"), "wb") as f:
        f.write(b"x")
    return root


@pytest.fixture
def folder(tmp_path):
    """A fresh small folder (tests may damage it)."""
    return write_folder(str(tmp_path / "data"))


def write_jpegs(root, images, classes):
    """`stoker gen`'s layout written with PIL, for when the CLI is not built."""
    try:
        import numpy as np
        from PIL import Image
    except ImportError:
        pytest.skip("neither the stoker CLI (set STOKER or run `make`) nor PIL to make JPEGs")
    rng = np.random.default_rng(0)
    for i in range(images):
        d = os.path.join(root, "c%04d" % (i % classes))
        os.makedirs(d, exist_ok=True)
        h, w = rng.integers(48, 160, size=2)
        px = rng.integers(0, 256, size=(h, w, 3), dtype=np.uint8)
        Image.fromarray(px).save(os.path.join(d, "%08d.jpg" % i), quality=90)


def gen_folder(d, images, classes):
    """`$STOKER gen d --images N --classes K`, or PIL when the CLI is not built."""
    cli = stoker_cli()
    if cli is None:
        write_jpegs(d, images, classes)
    else:
        subprocess.run([cli, "gen", d, "--images", str(images), "--classes", str(classes)],
                       check=True, stdout=subprocess.DEVNULL)
    return d


@pytest.fixture(scope="session")
def jpeg_folder(tmp_path_factory):
    """A dataset of real JPEGs in ImageFolder layout: 60 images, 3 classes
    (`$STOKER gen`, or PIL when the CLI is not built)."""
    return gen_folder(str(tmp_path_factory.mktemp("gen") / "ds"), 60, 3)


@pytest.fixture(scope="session")
def image_folder(tmp_path_factory):
    """Image mode's dataset: 40 JPEGs in 2 classes (`$STOKER gen`)."""
    return gen_folder(str(tmp_path_factory.mktemp("img") / "ds"), 40, 2)
