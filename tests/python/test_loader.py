"""stoker.Loader's promises to a PyTorch user: every sample once per epoch with
the file's bytes and ImageFolder's labels, deterministic order, ranks, resume,
zero-copy tensors that keep their slot while referenced, errors named,
Ctrl-C leaving no threads, and the example training script running."""

import ctypes
import errno
import gc
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import pytest
import torch

import stoker
from stoker import _lib

from conftest import (CLASSES, PER_CLASS, ROOT, assert_labels_equal_imagefolder, sample_bytes,
                      thread_count, threads_after_join)

N = len(CLASSES) * PER_CLASS


def epoch_indices(loader):
    return [int(i) for b in loader for i in b.indices]


def check_bytes(loader, batch):
    """Each sample's bytes and label equal its file's and the index's."""
    for i in range(batch.count):
        path, size, label = loader.sample(int(batch.indices[i]))
        with open(path, "rb") as f:
            want = f.read()
        assert int(batch.sizes[i]) == size == len(want)
        assert int(batch.labels[i]) == label
        assert batch.sample(i).numpy().tobytes() == want, path


# --- the C ABI ------------------------------------------------------------------

PROBE = r"""
#include <stddef.h>
#include <stdio.h>
#include <stoker/stoker.h>
#define F(s, f) printf("%s.%s %zu %zu\n", #s, #f, offsetof(struct s, f), \
			sizeof(((struct s *)0)->f));
#define S(s) printf("%s %zu\n", #s, sizeof(struct s));
int main(void) {
%s
	return 0;
}
"""


def test_structs_match_header(tmp_path):
    """The ctypes structs have the header's field offsets and sizes, field for
    field and in all (the package and the library are one version)."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to compile the layout probe")
    structs = {"stk_loader_opts": _lib.LoaderOpts, "stk_batch": _lib.BatchStruct,
               "stk_stats": _lib.Stats, "stk_loader_state": _lib.LoaderState,
               "stk_image_opts": _lib.ImageOpts, "stk_resume": _lib.Resume,
               "stk_resume_segment": _lib.ResumeSegment, "stk_verdict": _lib.Verdict,
               "stk_option": _lib.Option}
    lines = []
    for cname, cls in structs.items():
        lines.append("\tS(%s)" % cname)
        lines += ["\tF(%s, %s)" % (cname, f) for f, _ in cls._fields_]
    src = tmp_path / "probe.c"
    src.write_text(PROBE.replace("%s\n\treturn", "\n".join(lines) + "\n\treturn"))
    exe = tmp_path / "probe"
    subprocess.run([cc, "-I", os.path.join(ROOT, "include"), "-o", str(exe), str(src)],
                   check=True)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2:
            cls = structs[parts[0]]
            csize, pysize = int(parts[1]), ctypes.sizeof(cls)
            assert pysize == csize, "struct %s: %d bytes in C, %d in the binding" % (
                parts[0], csize, pysize)
        else:
            sname, field = parts[0].split(".")
            desc = getattr(structs[sname], field)
            assert (desc.offset, desc.size) == (int(parts[1]), int(parts[2])), parts[0]


def test_version():
    assert stoker.lib_version().count(".") == 2
    assert os.path.exists(stoker.lib_path) or "/" not in stoker.lib_path


# --- order --------------------------------------------------------------------

def test_permutation_per_epoch(folder):
    with stoker.Loader(folder, 7, seed=3, prefetch=3) as l:
        assert l.num_samples == N
        assert len(l) == (N + 6) // 7
        assert l.classes == sorted(CLASSES)
        e0 = epoch_indices(l)          # epoch 0
        e1 = epoch_indices(l)          # the next iteration runs epoch 1
        l.set_epoch(0)
        again0 = epoch_indices(l)
        l.set_epoch(5)
        e5 = epoch_indices(l)
    for e in (e0, e1, e5):
        assert sorted(e) == list(range(N)), "each sample exactly once"
    assert e0 != e1 and e0 != e5 and e1 != e5, "the order changes with the epoch"
    assert again0 == e0
    with stoker.Loader(folder, 7, seed=3) as l:
        l.set_epoch(1)
        assert epoch_indices(l) == e1, "same seed and epoch: same order"
    with stoker.Loader(folder, 7, seed=4) as l:
        assert epoch_indices(l) != e0, "another seed: another order"
    with stoker.Loader(folder, 7, shuffle=False) as l:
        assert epoch_indices(l) == list(range(N))


def test_drop_last_and_short_batch(folder):
    with stoker.Loader(folder, 10, drop_last=True) as l:
        counts = [b.count for b in l]
        assert counts == [10] * (N // 10) == [10] * len(l)
    with stoker.Loader(folder, 10) as l:
        counts = [b.count for b in l]
        assert counts == [10] * (N // 10) + [N % 10]


def test_two_ranks_disjoint_and_covering(jpeg_folder):
    n = 60
    with stoker.Loader(jpeg_folder, 8, seed=1, rank=0, world_size=2) as a, \
            stoker.Loader(jpeg_folder, 8, seed=1, rank=1, world_size=2) as b:
        assert a.samples_per_epoch == b.samples_per_epoch == n // 2
        for epoch in (0, 1):
            a.set_epoch(epoch)
            b.set_epoch(epoch)
            ia, ib = epoch_indices(a), epoch_indices(b)
            assert len(ia) == len(ib) == n // 2
            assert not set(ia) & set(ib), "ranks are disjoint"
            assert sorted(ia + ib) == list(range(n)), "ranks cover the dataset"


def test_rank_from_torchrun_environment(jpeg_folder, monkeypatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "3")
    with stoker.Loader(jpeg_folder, 8, seed=1) as l:
        assert (l.rank, l.world_size) == (1, 3)
        got = epoch_indices(l)
    with stoker.Loader(jpeg_folder, 8, seed=1, rank=1, world_size=3) as l:
        assert epoch_indices(l) == got
    monkeypatch.setenv("RANK", "3")
    with pytest.raises(ValueError, match="environment RANK=3 is not below WORLD_SIZE=3"):
        stoker.Loader(jpeg_folder, 8)


# --- bytes and labels ---------------------------------------------------------

@pytest.mark.parametrize("engine", ["auto", "pread"])
def test_bytes_equal_files(folder, engine):
    with stoker.Loader(folder, 5, seed=2, engine=engine, prefetch=3, queue_depth=4) as l:
        seen = 0
        for b in l:
            assert b.data.dtype == torch.uint8 and b.data.dim() == 1
            assert b.offsets.dtype == b.sizes.dtype == b.labels.dtype == torch.int64
            assert b.indices.dtype == torch.int64
            assert b.offsets.shape[0] == b.count + 1 and int(b.offsets[-1]) == b.data.shape[0]
            check_bytes(l, b)
            seen += b.count
        assert seen == N
        st = l.stats()
    assert st["samples"] == N and st["errors"] == 0
    assert st["bytes"] == sum(len(sample_bytes(c, i)) for c in range(3) for i in range(PER_CLASS))
    assert st["samples_per_s"] > 0 and st["pool_bytes"] > 0
    assert set(st) >= {"batches", "wait_p50_ns", "wait_p99_ns", "read_p99_ns", "stall_ratio",
                       "wall_s", "wait_s", "inflight_max", "inflight_mean", "pinned"}


def test_direct_reads_are_padded(folder):
    with stoker.Loader(folder, 6, direct=True, quiet=True) as l:
        seen = 0
        for b in l:
            check_bytes(l, b)
            seen += b.count
            gaps = (b.offsets[1:] - b.offsets[:-1]) - b.sizes
            assert bool((gaps >= 0).all())
        assert seen == N


def test_unpacks_and_raw_view(jpeg_folder):
    with stoker.Loader(jpeg_folder, 16) as l:
        data, offsets, sizes, labels, indices = next(iter(l))
        assert data.data_ptr() % 4096 == 0, "slot memory is page-aligned"
        # zero copy: the tensor is the slot memory the C batch points at
        v = _lib.BatchStruct.from_address(next(iter(l._core.owned)))
        assert data.data_ptr() == v.data


def test_labels_equal_imagefolder(jpeg_folder):
    assert_labels_equal_imagefolder(jpeg_folder, 16)


# --- resume -------------------------------------------------------------------

def test_resume_equals_uninterrupted(jpeg_folder):
    def run(l):
        return [(b.number, b.indices.tolist(), b.data.numpy().tobytes()) for b in l]

    with stoker.Loader(jpeg_folder, 7, seed=9) as l:
        l.set_epoch(2)
        full = run(l)
    with stoker.Loader(jpeg_folder, 7, seed=9) as l:
        l.set_epoch(2)
        it = iter(l)
        head = [next(it) for _ in range(3)]
        state = l.state_dict()
        del head, it
    assert {k: state[k] for k in ("seed", "epoch", "batches", "segments", "world_size")} == \
        {"seed": 9, "epoch": 2, "batches": 3, "segments": [[1, 3]], "world_size": 1}
    with stoker.Loader(jpeg_folder, 7, seed=9) as l:
        l.load_state_dict(state)
        assert l.state_dict() == state
        l.set_epoch(2)  # a training loop's set_epoch keeps the resume point
        rest = run(l)
        assert l.state_dict() == dict(state, batches=len(l), segments=[[1, len(l)]])
        nxt = epoch_indices(l)
    assert rest == full[3:]
    with stoker.Loader(jpeg_folder, 7, seed=9) as l:
        l.set_epoch(3)
        assert epoch_indices(l) == nxt, "after the resumed epoch comes the next one"
    with stoker.Loader(jpeg_folder, 7, seed=8) as l, pytest.raises(ValueError, match="seed"):
        l.load_state_dict(state)



def test_state_dict_fields_checked(jpeg_folder):
    """state_dict() carries its version; load_state_dict() reads the previous
    release's (no version: the same keys) and refuses a newer version, keys it
    does not know, fields of the wrong type (TypeError) and fields that
    contradict each other (ValueError), each naming the field, before the
    loader moves."""
    with stoker.Loader(jpeg_folder, 7, seed=9, quiet=True) as l:
        it = iter(l)
        next(it)
        next(it)
        state = l.state_dict()
        del it
    assert state["version"] == 1
    old = {k: v for k, v in state.items() if k != "version"}
    type_errors = [("shuffle", "False"), ("drop_last", 0), ("seed", "9"), ("epoch", 1.0),
                   ("batches", True), ("segments", "1,2"), ("segments", [[1, "2"]]),
                   ("segments", [[1, 2, 3]]), ("fingerprint", 5), ("shuffle_mode", 0),
                   ("world_size", None), ("version", "1")]
    value_errors = [("batches", 3, "segments .* add up to 2"),
                    ("segments", [[1, 1]], "'batches'.* add up to 1"),
                    ("world_size", 2, "last segment was run on 1"),
                    ("shuffle_window", 5, "shard mode"), ("version", 2, "newer"),
                    ("fingerprint", "xyz", "hex"), ("segments", [[0, 2]], "1..")]
    with stoker.Loader(jpeg_folder, 7, seed=9, quiet=True) as l:
        for key, bad in type_errors:
            with pytest.raises(TypeError, match=r"state_dict\['%s'\]" % key):
                l.load_state_dict(dict(state, **{key: bad}))
        for key, bad, words in value_errors:
            with pytest.raises(ValueError, match=words) as ei:
                l.load_state_dict(dict(state, **{key: bad}))
            assert key in str(ei.value) or "batches" in str(ei.value)
        with pytest.raises(ValueError, match="'resume_at'"):
            l.load_state_dict(dict(state, resume_at=3))
        with pytest.raises(TypeError, match="dict"):
            l.load_state_dict([("seed", 9)])
        assert l.state_dict()["batches"] == 0, "a refused state leaves the loader as it was"
        l.load_state_dict(old)  # the previous release's state, without a version
        assert l.state_dict() == state



def test_batches_move_with_their_attributes(jpeg_folder):
    """batch.to() moves its tensors and keeps indices, epoch, number: trainers
    call the .to() of an object that has one (Lightning's move_data_to_device,
    accelerate's send_to_device) instead of rebuilding a namedtuple from its
    fields, which dropped them; `images, labels = batch` still unpacks."""
    with stoker.Loader(jpeg_folder, 4, seed=1, quiet=True, image=stoker.Image(size=16)) as l:
        it = iter(l)
        next(it)
        b = next(it)
        assert b.to("cpu") is b, "nothing to move: the batch itself"
        m = b.to(torch.float32, non_blocking=True)
        assert m.images.dtype == torch.float32 and isinstance(m, stoker.ImageBatch)
        assert (m.epoch, m.number, m.slot) == (b.epoch, b.number, b.slot) == (0, 1, b.slot)
        assert torch.equal(m.indices, b.indices.float()) and m.raw is None
        images, labels = m
        assert images is m.images and labels.dtype == torch.float32
    with stoker.Loader(jpeg_folder, 4, seed=1, quiet=True) as l:
        b = next(iter(l))
        m = b.to(torch.int32)
        assert isinstance(m, stoker.Batch) and m.number == 0 and m.data.dtype == torch.int32
        data, offsets, sizes, labels, indices = m
        assert indices.tolist() == b.indices.tolist()
    with stoker.Loader(jpeg_folder, 4, seed=1, quiet=True, sample_transform=len) as l:
        b = next(iter(l))
        m = b.to(torch.float32)
        assert m.samples == b.samples and m.labels.dtype == torch.float32
        assert (m.number, m.indices.tolist()) == (0, b.indices.tolist())


def test_dataloader_over_batch_sampler(jpeg_folder):
    """A torch DataLoader built from the loader's DataLoader attributes over
    loader.dataset and loader.batch_sampler, as accelerate's
    skip_first_batches builds one (its SkipBatchSampler drops the first n
    lists), yields the loader's own batches from the n-th of the epoch the
    loader runs next; the loader goes on from there."""
    class Skip:  # accelerate's SkipBatchSampler
        def __init__(self, batch_sampler, n):
            self.batch_sampler, self.n = batch_sampler, n

        def __iter__(self):
            for i, names in enumerate(self.batch_sampler):
                if i >= self.n:
                    yield names

        def __len__(self):
            return len(self.batch_sampler) - self.n

    with stoker.Loader(jpeg_folder, 7, seed=9, quiet=True) as l:
        l.set_epoch(1)
        want = [(b.number, b.indices.tolist()) for b in l]
    with stoker.Loader(jpeg_folder, 7, seed=9, quiet=True) as l:
        assert l.prefetch_factor is None  # what accelerate passes on: no worker processes
        l.set_epoch(1)
        dl = torch.utils.data.DataLoader(l.dataset, batch_sampler=Skip(l.batch_sampler, 3),
                                         collate_fn=l.collate_fn)
        assert len(dl) == len(want) - 3
        got = []
        for b in dl:
            assert isinstance(b, stoker.Batch)
            got.append((b.number, b.indices.tolist()))
            if len(got) == 2:
                assert l.state_dict()["batches"] == 5
        assert got == want[3:]
        assert l.state_dict()["epoch"] == 1
        with pytest.raises(TypeError, match="samples"):
            l.dataset[0]


# --- slot lifetime ------------------------------------------------------------

def test_tensors_stay_valid_while_referenced(jpeg_folder):
    with stoker.Loader(jpeg_folder, 4, seed=1, prefetch=3) as l:
        it = iter(l)
        first = next(it)
        kept_slot = first.slot
        kept = first.sample(0)           # a view keeps the slot, not just the batch
        want = kept.numpy().tobytes()
        path = l.sample(int(first.indices[0]))[0]
        del first
        later_slots = []
        for _ in range(6):               # the loader moves on, through the other slots
            b = next(it)
            later_slots.append(b.slot)
            check_bytes(l, b)
            del b
        assert kept_slot not in later_slots, "a referenced slot is not reused"
        assert kept.numpy().tobytes() == want == open(path, "rb").read()
        del kept                         # the last reference: the slot goes back
        gc.collect()
        slots = [next(it).slot for _ in range(3)]
        assert kept_slot in slots, "the slot is reused once unreferenced"


def test_all_slots_held_raises_then_recovers(jpeg_folder):
    with stoker.Loader(jpeg_folder, 4, prefetch=2) as l:
        it = iter(l)
        held = [next(it), next(it)]
        with pytest.raises(stoker.NoSlotError, match="prefetch") as ei:
            next(it)
        assert ei.value.code == _lib.ENOSLOT and isinstance(ei.value, stoker.Error)
        numbers = [b.number for b in held]
        del held
        b = next(it)
        assert b.number == numbers[-1] + 1, "iteration continues in order"


def test_copy_free_reuses_slots(jpeg_folder):
    with stoker.Loader(jpeg_folder, 4, prefetch=1, copy_free=True) as l:
        batches = 0
        for b in l:  # prefetch=1 works: the previous batch is released on next()
            assert b.slot == 0
            check_bytes(l, b)
            batches += 1
        assert batches == len(l)


def test_release_from_another_thread(jpeg_folder):
    import queue
    import threading
    with stoker.Loader(jpeg_folder, 4, prefetch=2) as l:
        it = iter(l)
        q = queue.Queue()
        t = threading.Thread(target=lambda: q.get().data.sum())
        t.start()
        q.put(next(it))   # the only reference goes to the other thread
        t.join()          # ... which drops it there: the slot is released
        b1 = next(it)
        b2 = next(it)     # needs b0's slot back (b1 holds the other)
        assert (b1.number, b2.number) == (1, 2)


def test_interrupted_wrap_gives_the_slot_back(jpeg_folder):
    """Ctrl-C can land after stk_loader_next returned and before the batch is
    wrapped in tensors; the next call releases that batch."""
    with stoker.Loader(jpeg_folder, 4, prefetch=2) as l:
        it = iter(l)
        b0 = next(it)
        assert _lib.stk_loader_next(l._core.h, l._out_ref) == 1  # batch 1, never wrapped
        b2 = next(it)     # both slots would be held without the release
        assert (b0.number, b2.number) == (0, 2)


def test_exit_without_close(jpeg_folder, tmp_path):
    """Leaving a loader open, or a batch alive, at exit ends cleanly."""
    for tail in ("", "b = next(iter(l))", "b = next(iter(l)); l.close()",
                 "b = next(iter(l)); import sys; sys.exit(3)"):
        code = "import stoker\nl = stoker.Loader(%r, 8)\n%s\n" % (jpeg_folder, tail)
        env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           env=env, timeout=60)
        assert p.returncode == (3 if "exit(3)" in tail else 0), p.stderr
        assert p.stderr == "", p.stderr


FORK = textwrap.dedent(r"""
    import os, sys
    import stoker
    l = stoker.Loader(sys.argv[1], 8, quiet=True)
    b = next(iter(l))
    pid = os.fork()
    if pid == 0:
        try:
            next(iter(l))
            os._exit(1)
        except ValueError as e:
            ok = "fork" in str(e)
        del b, l        # finalizers must not touch the parent's loader
        sys.exit(0 if ok else 2)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, status
    assert len(b.samples()) == 8 and next(iter(l)).count == 8   # the parent's is intact
    print("ok")
""")


def test_fork_child_does_not_touch_the_loader(jpeg_folder, tmp_path):
    script = tmp_path / "fork.py"
    script.write_text(FORK)
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    p = subprocess.run([sys.executable, str(script), jpeg_folder], capture_output=True,
                       text=True, env=env, timeout=60)
    assert p.returncode == 0 and p.stdout.strip() == "ok", p.stderr


def test_reset_stats(jpeg_folder):
    with stoker.Loader(jpeg_folder, 8) as l:
        if _lib.stk_loader_stats_reset is None:
            with pytest.raises(NotImplementedError):
                l.reset_stats()
            return
        epoch_indices(l)
        assert l.stats()["samples"] == 60
        l.reset_stats()
        assert l.stats()["samples"] == 0
        epoch_indices(l)
        st = l.stats()
        assert st["samples"] == 60 and st["samples_per_s"] > 0


def test_wait_percentiles_count_the_whole_wait(jpeg_folder):
    """The wait for a batch is polled in 100 ms steps (for Ctrl-C); the
    percentiles still count each batch's whole wait."""
    # 200 ms reads, and each batch's reads start only when it is asked for
    with stoker.Loader(jpeg_folder, 2, engine="null", null_latency_ns=200_000_000,
                       prefetch=1, copy_free=True) as l:
        it = iter(l)
        for _ in range(3):
            next(it)
        st = l.stats()
    assert st["wait_p50_ns"] >= 190_000_000 and st["wait_max_ns"] >= 190_000_000, st


def test_batch_repr_is_short(jpeg_folder):
    with stoker.Loader(jpeg_folder, 8) as l:
        b = next(iter(l))
        r = repr(b)
        assert len(r) < 200 and "count=8" in r and "number=0" in r


def test_close_waits_for_live_tensors(jpeg_folder):
    gc.collect()  # loaders of earlier tests kept by reference cycles
    base = thread_count()
    l = stoker.Loader(jpeg_folder, 4, engine="pread", threads=3)
    assert thread_count() > base
    b = next(iter(l))
    want = b.data.numpy().tobytes()
    core = l._core
    l.close()
    assert l.closed
    if _lib.stk_loader_stop is not None:
        assert threads_after_join(base) == base, "close() joins the I/O threads at once"
    with pytest.raises(ValueError, match="closed"):
        iter(l)
    # the batch is still readable: the C loader is destroyed with the last tensor
    assert core.h is not None
    assert b.data.numpy().tobytes() == want
    del b
    gc.collect()
    assert core.h is None, "destroyed (the pool unmapped) with the last tensor"
    assert threads_after_join(base) == base, "the I/O threads are joined"


# --- errors -------------------------------------------------------------------

def damage(folder):
    """Removes one sample and truncates another (which is then read at its
    size now, 10 bytes: not an error); returns their paths."""
    gone = os.path.join(folder, "a_cls", "005.jpg")
    short = os.path.join(folder, "b_cls", "007.jpg")
    os.unlink(gone)
    with open(short, "r+b") as f:
        f.truncate(10)
    return gone, short


def test_skip_policy_counts_and_continues(folder):
    with stoker.Loader(folder, 8, seed=1, on_error="skip", quiet=True) as l:
        gone, short = damage(folder)   # after indexing: the loader expects them
        l.set_epoch(1)                 # re-read from the start
        got = []
        for b in l:
            for i in range(b.count):  # each file's bytes now (the short one: not its indexed size)
                path, size, label = l.sample(int(b.indices[i]))
                with open(path, "rb") as f:
                    want = f.read()
                assert b.sample(i).numpy().tobytes() == want, path
                assert len(want) == (10 if path == short else size)
                assert int(b.labels[i]) == label
            got += b.indices.tolist()
        paths = {l.sample(i)[0] for i in got}
        st = l.stats()
    assert len(got) == N - 1 and gone not in paths and short in paths
    assert st["errors"] == 1


def test_fail_policy_raises_with_path(folder):
    with stoker.Loader(folder, 8, seed=1, on_error="fail", quiet=True) as l:
        gone, short = damage(folder)
        l.set_epoch(1)
        with pytest.raises(stoker.Error) as ei:
            for _ in l:
                pass
    e = ei.value
    assert e.path == gone, str(e)  # the short file is read at its size now
    assert e.path in str(e)
    assert e.errno == errno.ENOENT and e.name == "ENOENT"


def test_create_errors_name_the_path(tmp_path):
    missing = str(tmp_path / "nope")
    with pytest.raises(stoker.Error) as ei:
        stoker.Loader(missing, 4)
    assert ei.value.errno == errno.ENOENT and ei.value.path == missing
    assert isinstance(ei.value, OSError)
    os.makedirs(tmp_path / "empty")
    with pytest.raises(stoker.Error, match="no samples"):
        stoker.Loader(str(tmp_path / "empty"), 4)


def test_bad_arguments(folder):
    with pytest.raises(TypeError, match="image"):
        stoker.Loader(folder, 4, image=224)
    with pytest.raises(ValueError, match="size"):
        stoker.Loader(folder, 4, image={"size": 0})
    with pytest.raises(ValueError, match="engine"):
        stoker.Loader(folder, 4, engine="aio")
    with pytest.raises(ValueError, match="on_error"):
        stoker.Loader(folder, 4, on_error="ignore")
    with pytest.raises(ValueError):
        stoker.Loader(folder, 0)
    with pytest.raises(ValueError):
        stoker.Loader(folder, -1)
    with pytest.raises(TypeError):
        stoker.Loader(folder, 4.5)
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="cuda"):
            stoker.Loader(folder, 4, device="cuda")


def test_superseded_iterator(folder):
    with stoker.Loader(folder, 4) as l:
        a = iter(l)
        next(a)
        b = iter(l)
        with pytest.raises(RuntimeError, match="superseded"):
            next(a)
        assert sorted(int(i) for x in b for i in x.indices) == list(range(N))


# --- Ctrl-C -------------------------------------------------------------------

CTRL_C = textwrap.dedent(r"""
    import json, os, sys, threading, time, torch
    import stoker
    torch.zeros(4).add_(1)          # let torch start whatever threads it starts
    def tasks():
        return len(os.listdir("/proc/self/task"))
    base = tasks()
    # argv[2] ns per read; 50 ms: 4 reads per batch in flight at queue depth 2,
    # a slow loader; 600 s: a read that hangs (a dead network filesystem)
    l = stoker.Loader(sys.argv[1], 4, engine="null", null_latency_ns=int(sys.argv[2]),
                      queue_depth=2, prefetch=3)
    during = tasks()
    got, interrupted, batch = 0, False, None
    hung = int(sys.argv[2]) > 10**9
    try:
        print("iterating", flush=True)
        for batch in l:
            got += 1
    except KeyboardInterrupt:
        interrupted = True
    t_int = time.monotonic()
    if hung:
        # close() would wait for the hung reads (the pool may not be unmapped
        # under them): report and leave
        print(json.dumps({"interrupted": interrupted, "got": got, "t_interrupted": t_int}),
              flush=True)
        os._exit(0)
    l.close()
    closed_with_live_batch = tasks()
    del batch
    import gc; gc.collect()
    print(json.dumps({"base": base, "during": during, "interrupted": interrupted, "got": got,
                      "len": len(l), "closed_with_live_batch": closed_with_live_batch,
                      "after": tasks(), "py_threads": threading.active_count(),
                      "t_interrupted": t_int}), flush=True)
""")


@pytest.mark.parametrize("latency_ns", [50_000_000, 600_000_000_000], ids=["slow", "hung"])
def test_ctrl_c_leaves_no_threads(jpeg_folder, tmp_path, latency_ns):
    """Ctrl-C interrupts the wait for a batch, even one whose read does not
    complete for 10 minutes, and close() joins the threads although a batch
    is still referenced."""
    script = tmp_path / "ctrlc.py"
    script.write_text(CTRL_C)
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    p = subprocess.Popen([sys.executable, str(script), jpeg_folder, str(latency_ns)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = p.stdout.readline()
        assert line.strip() == "iterating", p.stderr.read()
        time.sleep(0.5)
        t_sig = time.monotonic()
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=60)   # the hung read would take 600 s
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, err
    r = json.loads(out.strip().splitlines()[-1])
    print("SIGINT to KeyboardInterrupt: %.0f ms" % ((r["t_interrupted"] - t_sig) * 1e3))
    if latency_ns > 1e9:
        assert r["interrupted"] and r["got"] == 0, r
        return
    assert r["interrupted"] and r["got"] < r["len"], r
    assert r["during"] > r["base"], r
    if _lib.stk_loader_stop is not None:
        assert r["closed_with_live_batch"] == r["base"], "close() joins the threads: %r" % r
    assert r["after"] == r["base"], "threads left behind: %r" % r
    assert r["py_threads"] == 1


# --- CUDA ---------------------------------------------------------------------

@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device (torch.cuda)")
def test_cuda_batches(jpeg_folder):
    with stoker.Loader(jpeg_folder, 8, seed=1, device="cuda") as l:
        if not l.stats()["pinned"]:
            # correct either way; only the copies are synchronous then
            import warnings
            warnings.warn("the pool is not pinned: libstoker found no libcudart.so to dlopen")
        with stoker.Loader(jpeg_folder, 8, seed=1) as ref:
            for b, r in zip(l, ref):
                assert b.data.is_cuda and b.labels.is_cuda
                assert not b.offsets.is_cuda
                torch.cuda.current_stream().synchronize()
                assert torch.equal(b.data.cpu(), r.data)
                assert torch.equal(b.labels.cpu(), r.labels)
                assert torch.equal(b.indices, r.indices)
        # the stream order holds without an explicit synchronize: sum on the
        # consumer's stream after the side-stream copy
        l.set_epoch(1)
        total = sum(int(b.data.to(torch.int64).sum()) for b in l)
        with stoker.Loader(jpeg_folder, 8, seed=1) as ref:
            ref.set_epoch(1)
            assert total == sum(int(b.data.to(torch.int64).sum()) for b in ref)


# --- the example --------------------------------------------------------------

@pytest.mark.parametrize("which", ["stoker", "torch"])
def test_example_trains_a_few_steps(jpeg_folder, which):
    import importlib.util
    if which == "torch" and not importlib.util.find_spec("torchvision"):
        pytest.skip("--loader torch uses torchvision's ImageFolder and transforms, which are "
                    "not installed (Debian: apt-get install python3-torchvision)")
    ex = os.path.join(ROOT, "examples", "train_classifier.py")
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    p = subprocess.run([sys.executable, ex, jpeg_folder, "--loader", which, "--steps", "5",
                        "--batch-size", "8", "--size", "32"],
                       capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "images/s" in p.stdout and "waiting for data" in p.stdout, p.stdout


def test_serve_metrics(tmp_path):
    """loader.serve_metrics(port): Prometheus text over HTTP on loopback."""
    import urllib.request
    d = tmp_path / "d"
    d.mkdir()
    for i in range(10):
        (d / ("%02d.jpg" % i)).write_bytes(b"x" * (100 + i))
    with stoker.Loader(str(d), batch_size=4, quiet=True) as loader:
        for _ in loader:
            pass
        port = loader.serve_metrics(0)
        assert port > 0
        text = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10).read()
        text = text.decode()
        assert 'stoker_loader_samples_total{loader="loader"' in text
        assert "stoker_loader_batch_wait_seconds_bucket" in text
        with pytest.raises(RuntimeError):
            loader.serve_metrics(0)


def test_loader_publishes_for_the_exporter(tmp_path, monkeypatch):
    """A Loader is seen by `stoker exporter` while it lives (loader="python",
    "python-2", ...: its <pid>-<name>.prom in the metrics folder), its file
    gone at close(); publish_metrics=False publishes nothing."""
    d = tmp_path / "d"
    d.mkdir()
    for i in range(10):
        (d / ("%02d.jpg" % i)).write_bytes(b"x" * (100 + i))
    pub = tmp_path / "pub"
    pub.mkdir()
    monkeypatch.setenv("STOKER_METRICS_DIR", str(pub))
    with stoker.Loader(str(d), batch_size=4, quiet=True) as a, \
            stoker.Loader(str(d), batch_size=4, quiet=True) as b:
        for _ in a:
            pass
        names = sorted(os.listdir(pub))
        assert len(names) == 2, names
        # "python" for the process's first loader, then "python-2", ...: the
        # tests before this one in the process counted theirs already.
        own = [re.fullmatch(r"%d-(python(?:-[0-9]+)?)\.prom" % os.getpid(), n) for n in names]
        assert all(own), names
        loaders = [m.group(1) for m in own]
        p = subprocess.run([os.environ.get("STOKER", os.path.join(ROOT, "build", "stoker")),
                            "exporter", "--once", "--dir", str(pub)],
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, p.stderr
        assert "stoker_exporter_loaders 2" in p.stdout.splitlines()
        for n in loaders:  # written at create, then every 5 s
            assert 'stoker_loader_samples_total{loader="%s",pid="%d"} ' % (n, os.getpid()) \
                in p.stdout, p.stdout
    assert os.listdir(pub) == []
    with stoker.Loader(str(d), batch_size=4, quiet=True, publish_metrics=False):
        assert os.listdir(pub) == []
    with pytest.raises(TypeError, match="publish_metrics"):
        stoker.Loader(str(d), batch_size=4, publish_metrics="no")


def test_memory_is_the_librarys(folder):
    """Loader.memory() is stk_loader_memory: the pool is what stats() maps,
    and the parts add up to the total."""
    with stoker.Loader(folder, 5, prefetch=3) as l:
        m = l.memory()
        assert m["nslots"] == 3 and m["pool_bytes"] == l.stats()["pool_bytes"]
        assert m["total"] == (m["pool_bytes"] + m["read_pool_bytes"] + m["index_bytes"]
                              + m["meta_bytes"] + m["decode_bytes"])
        assert m["read_areas"] == 0  # raw mode: the slots are the reads
