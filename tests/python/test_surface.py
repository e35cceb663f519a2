"""What scripts read of a DataLoader (loader.dataset, .sampler, .batch_sampler,
.drop_last), the epoch a new iter() runs, the default seed (torch's), where
the index cache goes, and the user's own transforms (batch_transform;
sample_transform on the loader's threads, its errors and its resume)."""

import os
import signal
import subprocess
import sys
import threading

import numpy as np
import pytest
import torch

import stoker
from conftest import ROOT

N = 40


@pytest.fixture
def folder(tmp_path):
    for c in ("dog", "cat"):
        os.mkdir(tmp_path / c)
        for i in range(N // 2):
            (tmp_path / c / ("%02d.jpg" % i)).write_bytes(bytes([i]) * (10 + i))
    return str(tmp_path)


def epoch_indices(loader):
    return [i for b in loader for i in b.indices.tolist()]


def test_dataloader_surface(folder):
    with stoker.Loader(folder, 8, seed=1, drop_last=True) as l:
        ds = l.dataset
        assert len(ds) == N and ds.classes == ["cat", "dog"]
        assert ds.class_to_idx == {"cat": 0, "dog": 1} and ds.root == folder
        path, label = ds.samples[5]
        assert (path, label) == l.sample(5)[::2] and ds.imgs[5] == (path, label)
        assert ds.targets[-1] == ds.samples[N - 1][1] == 1
        assert len(ds.samples[3:6]) == 3
        with pytest.raises(IndexError):
            ds.samples[N]
        assert len(l.sampler) == N and l.sampler.num_replicas == 1 and l.sampler.rank == 0
        assert l.sampler.seed == 1 and l.sampler.shuffle
        bs = l.batch_sampler
        assert bs.sampler is l.sampler and bs.batch_size == 8 and bs.drop_last
        assert len(bs) == len(l) == N // 8 and l.drop_last and l.batch_size == 8
        l.sampler.set_epoch(3)
        assert l.state_dict()["epoch"] == 3


def test_new_iter_runs_next_epoch_unless_no_batch_was_taken(folder):
    with stoker.Loader(folder, 8, seed=2) as l, stoker.Loader(folder, 8, seed=2) as ref:
        ref.set_epoch(0)
        e0 = epoch_indices(ref)
        ref.set_epoch(1)
        e1 = epoch_indices(ref)
        iter(l)              # no batch taken: epoch 0 is not used up
        iter(l)
        l.sampler.set_epoch(0)
        assert epoch_indices(l) == e0
        assert epoch_indices(l) == e1, "a new iter() runs the next epoch"
        assert e0 != e1


def test_default_seed_follows_torch(folder):
    torch.manual_seed(1234)
    with stoker.Loader(folder, 8) as a:
        assert a.seed == 1234 == torch.initial_seed()
        order = epoch_indices(a)
    r = torch.rand(1)
    torch.manual_seed(1234)
    assert torch.equal(torch.rand(1), r), "the user's random stream is not drawn from"
    with stoker.Loader(folder, 8) as b:
        assert epoch_indices(b) == order
    # unseeded processes: each its own order, as DataLoader's RandomSampler
    code = ("import stoker; l = stoker.Loader(%r, 8, quiet=True); print(l.seed); "
            "print([i for b in l for i in b.indices.tolist()])" % folder)
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    outs = [subprocess.run([sys.executable, "-c", code], env=env, check=True,
                           stdout=subprocess.PIPE, text=True).stdout for _ in range(2)]
    assert outs[0] != outs[1]


def test_default_seed_taken_from_the_checkpoint(folder):
    torch.manual_seed(5)
    with stoker.Loader(folder, 4) as a:
        it = iter(a)
        for _ in range(3):
            next(it)
        state = a.state_dict()
        rest = [b.indices.tolist() for b in it]
    assert state["seed"] == 5
    torch.manual_seed(6)  # a new process: another default seed
    with stoker.Loader(folder, 4) as b:
        b.load_state_dict(state)
        assert b.seed == 5
        b.set_epoch(state["epoch"])
        assert [x.indices.tolist() for x in b] == rest
    with stoker.Loader(folder, 4, seed=6) as c:  # a seed given must match
        with pytest.raises(ValueError, match="seed"):
            c.load_state_dict(state)


def test_index_cache_not_in_the_data_folder(folder, tmp_path_factory):
    cache = str(tmp_path_factory.mktemp("cache"))
    stoker.Loader(folder, 4, cache_dir=cache).close()
    assert not any(n.startswith(".stoker") for n in os.listdir(folder))
    assert [n for n in os.listdir(cache) if n.startswith("index-")]
    stoker.Loader(folder, 4, cache_dir=cache, index_beside=True).close()
    assert ".stoker-index" in os.listdir(folder)


def test_batch_transform(folder):
    calls = []

    def mix(batch):
        calls.append(batch.count)
        return batch.labels * 10

    with stoker.Loader(folder, 8, seed=0, batch_transform=mix) as l:
        out = list(l)
    assert calls == [8] * (N // 8) and all(isinstance(t, torch.Tensor) for t in out)
    with pytest.raises(TypeError):
        stoker.Loader(folder, 8, batch_transform=3)


def test_batch_transform_image_mode(image_folder):
    def mix(images, labels):
        return images.float() / 255, labels + 100

    with stoker.Loader(image_folder, 4, seed=0, image=stoker.Image(16),
                       batch_transform=mix) as l:
        for images, labels in l:
            assert images.dtype == torch.float32 and images.shape[1:] == (3, 16, 16)
            assert (labels >= 100).all()


def first_byte(data):
    return data[:1].clone() if len(data) else torch.zeros(1, dtype=torch.uint8)


def test_sample_transform_on_threads(folder):
    names = []

    def fn(data):
        import threading
        names.append(threading.current_thread().name)
        return first_byte(data)

    with stoker.Loader(folder, 8, seed=3, sample_transform=fn, transform_threads=3) as l, \
            stoker.Loader(folder, 8, seed=3) as raw:
        for sb, b in zip(l, raw):
            assert isinstance(sb, stoker.SampleBatch) and sb.count == b.count
            assert torch.equal(sb.indices, b.indices) and torch.equal(sb.labels, b.labels)
            want = torch.stack([first_byte(s) for s in b.samples()])
            assert torch.equal(sb.samples, want)
    assert names and all(n.startswith("stk-py") for n in names)
    with pytest.raises(ValueError, match="raw mode"):
        stoker.Loader(folder, 8, sample_transform=fn, image=stoker.Image(16))


def test_sample_transform_error_names_the_sample(folder):
    bad = {}

    def fn(data):
        if len(data) == 10 + 7:      # the two files "07.jpg"
            raise KeyError("boom")
        return first_byte(data)

    with stoker.Loader(folder, 4, seed=0, sample_transform=fn, shuffle=False) as l:
        it = iter(l)
        got, errors = [], []
        while True:
            try:
                got.append(next(it).indices.tolist())
            except StopIteration:
                break
            except stoker.TransformError as e:
                errors.append(e)
                bad[e.index] = e.path
        assert len(errors) == 2 and all(isinstance(e.__cause__, KeyError) for e in errors)
        assert all(p.endswith("07.jpg") and str(i) in str(e)
                   for e, (i, p) in zip(errors, bad.items()))
        assert len(got) == N // 4 - 2, "the loader went on after each error"


def test_sample_transform_state_counts_only_yielded(folder):
    with stoker.Loader(folder, 4, seed=9, sample_transform=first_byte, prefetch=4) as l:
        it = iter(l)
        seen = [next(it).indices.tolist() for _ in range(3)]
        state = l.state_dict()
        rest = [b.indices.tolist() for b in it]
    assert state["batches"] == 3
    with stoker.Loader(folder, 4, seed=9, sample_transform=first_byte) as m:
        m.load_state_dict(state)
        assert [b.indices.tolist() for b in m] == rest
    assert len(seen) + len(rest) == N // 4


def test_keyboard_interrupt_in_sample_transform_stays_one(folder):
    """KeyboardInterrupt and SystemExit raised by a sample_transform reach the
    loop as they are, not as a TransformError blaming the sample; the loader
    goes on with the next batch."""
    def fn(data):
        if len(data) == 10 + 7:      # the two files "07.jpg"
            raise KeyboardInterrupt
        if len(data) == 10 + 3:
            sys.exit(3)
        return first_byte(data)

    with stoker.Loader(folder, 4, seed=0, sample_transform=fn, shuffle=False) as l:
        it = iter(l)
        got, raised = 0, []
        while True:
            try:
                next(it)
                got += 1
            except StopIteration:
                break
            except (KeyboardInterrupt, SystemExit) as e:
                raised.append(type(e).__name__)
    assert sorted(raised) == ["KeyboardInterrupt"] * 2 + ["SystemExit"] * 2
    assert got == N // 4 - 4


def test_ctrl_c_while_waiting_for_sample_transform(folder):
    """Ctrl-C while the loop waits for a batch's transforms is a
    KeyboardInterrupt; the batch is not lost: state_dict() does not count it,
    and the next next() gives it."""
    go = threading.Event()

    def fn(data):
        go.wait(30)
        return first_byte(data)

    with stoker.Loader(folder, 4, seed=5, sample_transform=fn, transform_threads=2) as l:
        want = [b.indices.tolist() for b in stoker.Loader(folder, 4, seed=5)]
        it = iter(l)
        main = threading.get_ident()
        threading.Timer(0.3, signal.pthread_kill, (main, signal.SIGINT)).start()
        with pytest.raises(KeyboardInterrupt):
            next(it)
        assert l.state_dict()["batches"] == 0
        go.set()
        got = [b.indices.tolist() for b in it]
    assert got == want


REENTRANT = """
import sys, stoker
folder, call = sys.argv[1], sys.argv[2]
l = stoker.Loader(folder, 4, seed=0, sample_transform=lambda d: act(), transform_threads=2)
it = iter(l)
state = l.state_dict()
calls = {"next": lambda: next(it), "iter": lambda: iter(l), "close": l.close,
         "load_state_dict": lambda: l.load_state_dict(state)}
def act():
    calls[call]()
    return 0
try:
    next(it)
except stoker.TransformError as e:
    print(type(e.__cause__).__name__, e.__cause__)
"""


@pytest.mark.parametrize("call", ["next", "iter", "close", "load_state_dict"])
def test_sample_transform_calling_its_loader_is_refused(folder, call):
    """A sample_transform that calls its own loader (the loader waits for its
    transforms) gets a RuntimeError saying why, where it deadlocked, in the
    loop and at exit; run in a process of its own, so that a deadlock is a
    timeout, not a hung test run."""
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    p = subprocess.run([sys.executable, "-c", REENTRANT, folder, call], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
    assert p.returncode == 0, p.stdout
    assert "RuntimeError" in p.stdout and "inside its own sample_transform" in p.stdout, p.stdout
    assert call in p.stdout.splitlines()[0]


@pytest.fixture
def image_folder(tmp_path):
    pil = pytest.importorskip("PIL.Image", reason="PIL is not installed (python3-pil)")
    rng = np.random.default_rng(0)
    for c in ("a", "b"):
        os.mkdir(tmp_path / c)
        for i in range(4):
            pil.fromarray(rng.integers(0, 256, (24, 32, 3), dtype=np.uint8)).save(
                str(tmp_path / c / ("%d.jpg" % i)))
    return str(tmp_path)


@pytest.mark.parametrize("when", ["before", "after", "world"])
def test_default_seed_agreed_by_the_ranks(folder, when, tmp_path):
    """Unseeded ranks each have their own torch seed: made after
    init_process_group, the loaders take rank 0's (disjoint shares covering
    the epoch); made before it, the first iter() refuses, naming the fix.
    A loader whose default rank and world size disagree with the process
    group (made before the processes were set up) is refused the same way."""
    import json
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    worker = os.path.join(os.path.dirname(os.path.abspath(__file__)), "seed_worker.py")
    procs = []
    for r in range(2):
        env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), RANK=str(r),
                   WORLD_SIZE="2", LOCAL_RANK=str(r), LOCAL_WORLD_SIZE="2",
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), OMP_NUM_THREADS="1",
                   PYTHONFAULTHANDLER="1", STOKER_TEST_DONE=str(tmp_path / "done"))
        procs.append(subprocess.Popen([sys.executable, worker, when, folder], env=env,
                                      stdout=subprocess.PIPE, text=True))
    res = [json.loads(p.communicate(timeout=120)[0].strip().splitlines()[-1]) for p in procs]
    assert all(p.returncode == 0 for p in procs)
    if when == "world":  # a loader made before the processes were set up: refused
        assert all(r["error"] and "process group says rank %d of 2" % r["rank"] in r["error"]
                   for r in res)
        return
    assert all(r["world_size"] == 2 for r in res)
    if when == "before":
        assert all(r["error"] and "default seeds differ" in r["error"]
                   and "torch.manual_seed" in r["error"] for r in res)
    else:
        assert res[0]["seed"] == res[1]["seed"] == res[0]["initial_seed"]
        assert res[1]["initial_seed"] != res[0]["initial_seed"]
        assert sorted(res[0]["indices"] + res[1]["indices"]) == list(range(N))
