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


def _copies(cache):
    return sorted(glob.glob(os.path.join(cache, "jpeg", "*", "*.jpg")))


def _fresh(folder, tmp_path):
    """A copy of the folder whose files may be changed, older than a second."""
    import shutil
    root = str(tmp_path / "ds")
    shutil.copytree(folder, root)
    time.sleep(1.1)
    return root


def test_copies_of_removed_files_go_and_a_changed_file_is_copied_over(folder, tmp_path, capfd):
    """A file removed or renamed leaves no copy behind (the next Loader
    removes it, saying so); a changed file's copy is refused once and
    written over, not kept beside the new one."""
    root = _fresh(folder, tmp_path)
    cache = str(tmp_path / "cache")
    batches(root, cache, True, 0)
    assert len(_copies(cache)) == 24
    os.remove(os.path.join(root, "c0", "000.jpg"))
    os.remove(os.path.join(root, "c1", "003.jpg"))
    os.rename(os.path.join(root, "c0", "002.jpg"), os.path.join(root, "c0", "902.jpg"))
    changed = os.path.join(root, "c1", "005.jpg")
    PILImage.fromarray(np.full((40, 70, 3), 77, np.uint8)).save(changed, quality=90)
    time.sleep(1.1)
    capfd.readouterr()
    want, _ = batches(root, str(tmp_path / "plain"), False, 0)
    got, _ = batches(root, cache, True, 0)
    err = capfd.readouterr().err
    assert "jpeg_cache: 3 copies of files no longer in the dataset removed from %s" % (
        os.path.join(cache, "jpeg")) in err, err
    for (x, ya), (y, yb) in zip(want, got):
        assert torch.equal(x, y) and torch.equal(ya, yb)
    assert len(_copies(cache)) == 22  # 21 kept (the changed one written over), 902 new
    capfd.readouterr()
    _, fast = batches(root, cache, True, 0)
    assert fast == 1.0 and "jpeg_cache" not in capfd.readouterr().err


def test_limit_bounds_the_copies(folder, tmp_path, capfd):
    """jpeg_cache_limit: the copies stay under it (the files past it are
    read, the batches the same), said once; a lower limit at the next
    Loader removes copies down to it."""
    cache = str(tmp_path / "cache")
    batches(folder, str(tmp_path / "all"), True, 0)
    sizes = [os.path.getsize(p) for p in _copies(str(tmp_path / "all"))]
    limit = sum(sizes) // 3
    want, _ = batches(folder, str(tmp_path / "plain"), False, 0)
    capfd.readouterr()
    img = stoker.Image(32, crop="center", jpeg_cache=True, jpeg_cache_limit=limit)
    assert img.jpeg_cache_limit == limit
    for run in range(2):
        with stoker.Loader(folder, 5, seed=4, image=img, cache_dir=cache) as l:
            got = [(x.clone(), y.clone()) for x, y in l]
        for (x, ya), (y, yb) in zip(want, got):
            assert torch.equal(x, y) and torch.equal(ya, yb)
        used = sum(os.path.getsize(p) for p in _copies(cache))
        assert 0 < used <= limit, (used, limit)
        err = capfd.readouterr().err
        assert err.count("reached jpeg_cache_limit (%d bytes)" % limit) == 1, err
    low = stoker.Image(32, crop="center", jpeg_cache=True, jpeg_cache_limit=limit // 2)
    with stoker.Loader(folder, 5, seed=4, image=low, cache_dir=cache):
        pass
    assert 0 < sum(os.path.getsize(p) for p in _copies(cache)) <= limit // 2
    assert "to keep them under jpeg_cache_limit (%d bytes)" % (limit // 2) in \
        capfd.readouterr().err
    assert stoker.Image(32, jpeg_cache_limit="2MiB").jpeg_cache_limit == 2 << 20
    with pytest.raises(ValueError):
        stoker.Image(32, jpeg_cache_limit=-1)


FULL = """
import os, sys, torch, stoker
folder, cache = sys.argv[1], sys.argv[2]
def run(jc, c):  # a limit above the file system's size: the disk fills first
    img = stoker.Image(32, crop="center", jpeg_cache=jc, jpeg_cache_limit="1GiB")
    with stoker.Loader(folder, 5, seed=4, image=img, cache_dir=c) as l:
        return [(x.clone(), y.clone()) for x, y in l], l.stats()
want, _ = run(False, sys.argv[3])
got, st = run(True, cache)
assert len(got) == len(want) and st["errors"] == 0, st
for (x, ya), (y, yb) in zip(want, got):
    assert torch.equal(x, y) and torch.equal(ya, yb)
left = [f for _, _, fs in os.walk(cache) for f in fs if f.endswith(".tmp")]
assert not left, left
print("copies", sum(f.endswith(".jpg") for _, _, fs in os.walk(cache) for f in fs))
"""


def test_a_full_disk_loses_no_sample(folder, tmp_path):
    """The cache folder on a file system that fills (a 48 KiB tmpfs, in a
    user and mount namespace of its own): the epoch reads every sample
    (the same batches), the notice names the folder and says it is full,
    once, and no temporary file is left."""
    import shutil
    import subprocess
    import sys
    mnt = tmp_path / "small"
    mnt.mkdir()
    if not shutil.which("unshare") or subprocess.run(
            ["unshare", "-rm", "mount", "-t", "tmpfs", "-o", "size=48k,mode=0700", "tmpfs",
             str(mnt)], capture_output=True).returncode:
        pytest.skip("no user and mount namespace here to make a small file system in")
    script = tmp_path / "full.py"
    script.write_text(FULL)
    r = subprocess.run(["unshare", "-rm", "sh", "-c",
                        'mount -t tmpfs -o size=48k,mode=0700 tmpfs "$1" && exec "$2" "$3" '
                        '"$4" "$1" "$5"', "sh", str(mnt), sys.executable, str(script), folder,
                        str(tmp_path / "plain")], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    copies = int(r.stdout.split()[-1])
    assert 0 < copies < 24, r.stdout  # some made before the disk filled
    note = "jpeg_cache: the cache folder %s/jpeg/" % mnt
    assert r.stderr.count(note) == 1 and "is full (No space left on device)" in r.stderr, \
        r.stderr


def test_two_lists_in_one_folder_keep_their_copies(folder, tmp_path, capfd):
    """Two file lists beside each other (train.txt, val.txt) each keep their
    own copies: one Loader's sweep never removes the other's."""
    root = _fresh(folder, tmp_path)
    names = sorted(os.path.relpath(os.path.join(d, f), root)
                   for d, _, fs in os.walk(root) for f in fs if f.endswith(".jpg"))
    for part, sub in (("train", names[:16]), ("val", names[16:])):
        with open(os.path.join(root, part + ".txt"), "w") as f:
            f.writelines("%s\t%d\n" % (n, int(n[1])) for n in sub)
    cache = str(tmp_path / "cache")
    for part in ("train", "val"):
        batches(os.path.join(root, part + ".txt"), cache, True, 0)
    assert len(_copies(cache)) == 24
    capfd.readouterr()
    for part in ("train", "val"):
        _, fast = batches(os.path.join(root, part + ".txt"), cache, True, 1)
        assert fast == 1.0, part
    assert "removed" not in capfd.readouterr().err
    assert len(_copies(cache)) == 24


def _folder_bytes(d):
    return sum(os.path.getsize(p) for p in glob.glob(os.path.join(d, "*.jpg")))


def test_the_limit_counts_every_dataset_and_gone_datasets_go(folder, tmp_path, capfd):
    """jpeg_cache_limit bounds every dataset's copies in one cache folder
    together (counted from each folder's record, or by walking a folder
    with none); the copies folder of a dataset that is gone is removed at
    the next Loader's create, said once; the batches stay the files'."""
    import shutil
    a, b = _fresh(folder, tmp_path / "a"), _fresh(folder, tmp_path / "b")
    cache = str(tmp_path / "cache")
    batches(a, cache, True, 0)
    [fa] = glob.glob(os.path.join(cache, "jpeg", "*"))
    a_bytes = _folder_bytes(fa)
    assert a_bytes > 0 and os.path.isfile(os.path.join(fa, "dataset"))
    # b may take only what a leaves under the limit: about half its copies
    limit = a_bytes + a_bytes // 2
    want, _ = batches(b, str(tmp_path / "plain"), False, 0)
    capfd.readouterr()
    img = stoker.Image(32, crop="center", jpeg_cache=True, jpeg_cache_limit=limit)
    with stoker.Loader(b, 5, seed=4, image=img, cache_dir=cache) as l:
        got = [(x.clone(), y.clone()) for x, y in l]
    for (x, ya), (y, yb) in zip(want, got):
        assert torch.equal(x, y) and torch.equal(ya, yb)
    [fb] = [d for d in glob.glob(os.path.join(cache, "jpeg", "*")) if d != fa]
    assert 0 < _folder_bytes(fb) <= limit - a_bytes, (_folder_bytes(fb), limit, a_bytes)
    assert _folder_bytes(fa) == a_bytes
    assert capfd.readouterr().err.count("reached jpeg_cache_limit (%d bytes)" % limit) == 1
    # a folder with no record (an older stoker's) is counted by walking it:
    # with it filling the limit, a makes no copy and keeps what it has
    old = os.path.join(cache, "jpeg", "0123456789abcdef")
    os.mkdir(old, 0o700)
    with open(os.path.join(old, "fedcba9876543210.jpg"), "wb") as f:
        f.write(b"\0" * limit)
    shutil.rmtree(fb)
    with stoker.Loader(a, 5, seed=4, image=img, cache_dir=cache) as l:
        for _ in l:
            pass
    err = capfd.readouterr().err
    assert "to keep them under jpeg_cache_limit" in err and not glob.glob(fa + "/*.jpg"), err
    assert os.path.getsize(os.path.join(old, "fedcba9876543210.jpg")) == limit
    # a gone: its folder is removed by b's create, the others stay
    batches(a, cache, True, 0)
    shutil.rmtree(a)
    os.unlink(os.path.join(old, "fedcba9876543210.jpg"))
    batches(b, cache, True, 0)
    err = capfd.readouterr().err
    assert err.count("jpeg_cache: the copies of 1 datasets that are gone removed from %s" %
                     os.path.join(cache, "jpeg")) == 1, err
    assert not os.path.exists(fa) and os.path.isdir(old)
    got, fast = batches(b, cache, True, 1)
    assert fast == 1.0


OTHER = """
import sys, stoker
img = stoker.Image(32, crop="center", jpeg_cache=True)
with stoker.Loader(sys.argv[1], 5, seed=4, image=img, cache_dir=sys.argv[2]) as l:
    for _ in l:
        pass
"""


def test_a_dataset_gone_on_another_machine_is_kept(folder, tmp_path, capfd):
    """A cache folder shared between machines (a home folder on NFS) holds
    datasets at paths only their own machine has: a copies folder whose
    record another machine wrote is counted, never removed for its path;
    the machine that wrote it removes it once its dataset is gone."""
    import shutil
    import subprocess
    import sys
    a, b = _fresh(folder, tmp_path / "a"), _fresh(folder, tmp_path / "b")
    cache = str(tmp_path / "cache")
    batches(a, cache, True, 0)
    [fa] = glob.glob(os.path.join(cache, "jpeg", "*"))
    shutil.rmtree(a)
    ident = tmp_path / "machine-id"
    ident.write_text("0123456789abcdef0123456789abcdef\n")
    script = tmp_path / "other.py"
    script.write_text(OTHER)
    if not shutil.which("unshare") or subprocess.run(
            ["unshare", "-rm", "mount", "--bind", str(ident), "/etc/machine-id"],
            capture_output=True).returncode:
        pytest.skip("no user and mount namespace here to give the loader another machine-id")
    r = subprocess.run(["unshare", "-rm", "sh", "-c", 'mount --bind "$1" /etc/machine-id && '
                        'exec "$2" "$3" "$4" "$5"', "sh", str(ident), sys.executable,
                        str(script), b, cache], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "datasets that are gone" not in r.stderr and glob.glob(fa + "/*.jpg"), r.stderr
    capfd.readouterr()
    batches(b, cache, True, 0)
    assert "the copies of 1 datasets that are gone" in capfd.readouterr().err
    assert not os.path.exists(fa)
