"""Scale-out: ranks started as torchrun starts them, over a small DDP training
loop (gloo, CPU); each rank's share is disjoint from the others', the shares
cover the epoch, and each equals what one process computes for that rank.

Debian 12's torchrun (torch 1.13 on Python 3.11) dies in `to_map` unless
given `--redirects 1 --tee 1` (docs/python.md); the tests start the ranks
with torchrun's environment themselves, and once through torchrun with that
workaround.
"""

import collections
import json
import os
import shutil
import socket
import subprocess
import sys

import pytest

import stoker
from conftest import ROOT, stoker_cli

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "dist_worker.py")
N_IMAGES = 60
TIMEOUT = 300


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def worker_env(**extra):
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), OMP_NUM_THREADS="1",
               PYTHONFAULTHANDLER="1")  # a rank that dies prints where
    env.update({k: str(v) for k, v in extra.items()})
    return env


def launch(tmp_path, n, runs, name="job"):
    """Starts n ranks the way torchrun does (its environment contract: RANK,
    WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT, ...)
    and returns rank 0's gathered results: {run name: [per-rank result]}."""
    cfg = tmp_path / (name + ".json")
    out = tmp_path / (name + ".out.json")
    cfg.write_text(json.dumps({"runs": runs}))
    port = free_port()
    procs = []
    for r in range(n):
        env = worker_env(RANK=r, WORLD_SIZE=n, LOCAL_RANK=r, LOCAL_WORLD_SIZE=n, GROUP_RANK=0,
                         ROLE_RANK=r, ROLE_WORLD_SIZE=n, MASTER_ADDR="127.0.0.1",
                         MASTER_PORT=port, TORCHELASTIC_RUN_ID="stoker-test")
        procs.append(subprocess.Popen([sys.executable, WORKER, str(cfg), str(out)], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      text=True))
    logs = []
    try:
        for p in procs:
            logs.append(p.communicate(timeout=TIMEOUT)[0])
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    for r, p in enumerate(procs):
        assert p.returncode == 0, "rank %d exited %s:\n%s" % (r, p.returncode, logs[r][-3000:])
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def shards(jpeg_folder, tmp_path_factory):
    """jpeg_folder packed into tar shards of uneven sample counts."""
    cli = stoker_cli()
    if cli is None:
        pytest.skip("the stoker CLI (stoker pack) is not built")
    out = str(tmp_path_factory.mktemp("shards") / "s")
    subprocess.run([cli, "pack", jpeg_folder, out, "--shard-size", "500KiB", "--seed", "1"],
                   check=True, stdout=subprocess.DEVNULL)
    return out


def by_epoch(record):
    """{epoch: [indices in order]} of one rank's record."""
    d = collections.defaultdict(list)
    for b in record:
        d[b["epoch"]] += b["indices"]
    return d


def single_process(run, rank, world):
    """What one process computes for `rank` of `world`: the same loop, no
    launcher, rank and world_size given explicitly."""
    image = stoker.Image(size=16) if run["image"] else None
    got = []
    with stoker.Loader(run["path"], run["batch_size"], seed=run["seed"], rank=rank,
                       world_size=world, image=image, shuffle_mode=run["shuffle_mode"],
                       quiet=True) as l:
        for epoch in range(run["epochs"]):
            l.set_epoch(epoch)
            for b in l:
                got.append((epoch, b.number, b.indices.tolist()))
    return got


def check_epochs(results, n, world):
    """Per epoch: each rank has the same number of samples (DDP steps in
    lockstep), every sample is read, and the only repeats are the padding
    that equal shares need (none when n divides evenly)."""
    ranks = [by_epoch(r["record"]) for r in results]
    assert len(ranks) == world
    for epoch in ranks[0]:
        shares = [r[epoch] for r in ranks]
        per_rank = len(shares[0])
        assert all(len(s) == per_rank for s in shares), "equal shares"
        allidx = [i for s in shares for i in s]
        assert set(allidx) == set(range(n)), "the ranks cover the epoch"
        assert len(allidx) - n == world * per_rank - n, "repeats are padding only"
        if world * per_rank == n:
            for a in range(world):
                for b in range(a + 1, world):
                    assert not set(shares[a]) & set(shares[b]), "ranks are disjoint"


def test_torchrun_contract(tmp_path, jpeg_folder, shards):
    """3 ranks with torchrun's environment, a DDP loop over image mode (folder,
    two epochs) and raw mode (tar shards, shard shuffle, three epochs)."""
    world = 3
    runs = [dict(name="folder", path=jpeg_folder, batch_size=8, seed=5, epochs=2, image=True,
                 shuffle_mode="global"),
            dict(name="shards", path=shards, batch_size=4, seed=7, epochs=3, image=False,
                 shuffle_mode="shard")]
    got = launch(tmp_path, world, runs)
    for run in runs:
        results = got[run["name"]]
        for r, res in enumerate(results):
            assert res["facts"]["rank"] == r and res["facts"]["world_size"] == world
            share = res["facts"]["cpu_share"]  # the host's CPUs split by LOCAL_RANK
            assert (share["source"], share["local_rank"], share["local_world_size"]) == \
                ("LOCAL_WORLD_SIZE", r, world)
        check_epochs(results, N_IMAGES, world)
        for r, res in enumerate(results):
            mine = [(b["epoch"], b["number"], b["indices"]) for b in res["record"]]
            assert mine == single_process(run, r, world), \
                "rank %d under the launcher equals one process computing rank %d" % (r, r)
    check_whole_shards(got["shards"], shards, 3)
    # the folder run: 60 samples over 3 ranks split evenly, disjoint
    folder = [by_epoch(r["record"]) for r in got["folder"]]
    for epoch in (0, 1):
        sets = [set(f[epoch]) for f in folder]
        assert sum(map(len, sets)) == N_IMAGES and len(set.union(*sets)) == N_IMAGES


def test_real_torchrun_with_the_workaround(tmp_path, jpeg_folder):
    """Debian's torchrun, given --redirects 1 --tee 1 (docs/python.md), starts
    the same loop; the ranks agree with one process computing each rank."""
    pytest.importorskip("torch.distributed.run")
    run = dict(name="folder", path=jpeg_folder, batch_size=8, seed=5, epochs=1, image=False,
               shuffle_mode="global")
    cfg, out = tmp_path / "cfg.json", tmp_path / "out.json"
    cfg.write_text(json.dumps({"runs": [run]}))
    # --standalone would rendezvous on port 29400 whatever runs beside it: a free
    # port instead (what --standalone does otherwise: c10d, one node)
    p = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--rdzv_backend", "c10d",
                        "--rdzv_endpoint", "localhost:%d" % free_port(), "--rdzv_id", "stoker-test",
                        "--nnodes", "1", "--nproc_per_node", "2", "--redirects", "1", "--tee", "1",
                        "--log_dir", str(tmp_path / "logs"), WORKER, str(cfg), str(out)],
                       env=worker_env(), capture_output=True, text=True, timeout=TIMEOUT)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    results = json.loads(out.read_text())["folder"]
    check_epochs(results, N_IMAGES, 2)
    for r, res in enumerate(results):
        mine = [(b["epoch"], b["number"], b["indices"]) for b in res["record"]]
        assert mine == single_process(run, r, 2)


def shards_of(results, epoch, path_of):
    return [{path_of(i) for b in r["record"] if b["epoch"] == epoch for i in b["indices"]}
            for r in results]


def check_whole_shards(results, path, epochs):
    """Shard shuffle deals whole shards: no shard is read by two ranks in an
    epoch, every shard is read, and the deal changes with the epoch."""
    path_of = path_lookup(path)
    world, deals = len(results), []
    for epoch in range(epochs):
        sets = [{path_of[i] for b in r["record"] if b["epoch"] == epoch for i in b["indices"]}
                for r in results]
        for a in range(world):
            for b in range(a + 1, world):
                assert not sets[a] & sets[b], "epoch %d: ranks %d and %d share a shard" % (
                    epoch, a, b)
        assert len(set.union(*sets)) == len(set(path_of))
        deals.append(sets)
    assert any(d != deals[0] for d in deals[1:]), "the deal changes with the epoch"


# --- elastic resume -------------------------------------------------------------

def run_ranks(path, world, batch_size, shuffle_mode, state=None, stop=None, epoch=1):
    """Every rank of `world` in lockstep (as DDP runs them), in this process:
    each reads `stop` batches (None: to the end) from `state` (None: the start
    of `epoch`).  Returns each rank's indices and state_dict()."""
    got, states = [], []
    loaders = [stoker.Loader(path, batch_size, seed=3, rank=r, world_size=world, quiet=True,
                             shuffle_mode=shuffle_mode) for r in range(world)]
    try:
        for l in loaders:
            if state is not None:
                l.load_state_dict(state)
            l.set_epoch(state["epoch"] if state else epoch)
            mine, k = [], 0
            for b in l:
                mine += b.indices.tolist()
                k += 1
                if k == stop:
                    break
            got.append(mine)
            states.append(l.state_dict())
    finally:
        for l in loaders:
            l.close()
    assert all(s == states[0] for s in states), "every rank's state_dict is the same"
    return got, states[0]


def path_lookup(path):
    with stoker.Loader(path, 4, quiet=True) as l:
        return [l.sample(i)[0] for i in range(l.num_samples)]


@pytest.mark.parametrize("n_old,k,m_new", [(4, 2, 2), (2, 3, 3)], ids=["4to2", "2to3"])
@pytest.mark.parametrize("kind", ["folder", "shards"])
def test_elastic_resume(kind, n_old, k, m_new, jpeg_folder, shards):
    """A state_dict saved by n_old ranks, loaded by m_new ranks: the rest of
    the epoch is read once across the new ranks, nothing repeated or lost
    (but for the padding equal shares need, within a rank's own shards)."""
    path, mode = (jpeg_folder, "global") if kind == "folder" else (shards, "shard")
    before, state = run_ranks(path, n_old, 4, mode, stop=k)
    assert state["segments"] == [[n_old, k]] and state["batches"] == k
    after, end = run_ranks(path, m_new, 4, mode, state=state)
    assert end["segments"][0] == [n_old, k] and end["segments"][1][0] == m_new
    read_before = [i for r in before for i in r]
    assert len(read_before) == n_old * k * 4 == len(set(read_before))
    left = set(range(N_IMAGES)) - set(read_before)
    per_rank = len(after[0])
    assert all(len(a) == per_rank for a in after), "equal shares on the new ranks"
    read_after = [i for a in after for i in a]
    assert set(read_after) == left, "the rest of the epoch is read, nothing read again"
    if kind == "folder":
        assert sorted(read_before + read_after) == list(range(N_IMAGES)), "exactly once"
        return
    # shards: each new rank reads whole shards of what was left, its own only;
    # a short share repeats its own samples
    path_of = path_lookup(path)
    owners = {}
    for r, a in enumerate(after):
        for i in a:
            assert owners.setdefault(path_of[i], r) == r, "a shard on two new ranks"
    assert len(read_after) - len(left) == m_new * per_rank - len(left)
    for a in after:
        assert len(a) - len(set(a)) <= per_rank, "padding repeats the rank's own samples"


def test_elastic_resume_under_the_launcher(tmp_path, jpeg_folder, shards):
    """4 ranks under the launcher save a state_dict at batch 2; 2 ranks started
    afresh resume from it: every sample of the epoch once (folder: 60 = 32 +
    28, even over 2 ranks), DDP in lockstep on both sides."""
    runs = [dict(name=kind, path=path, batch_size=4, seed=5, epochs=1, image=False,
                 shuffle_mode=mode, stop_after=2)
            for kind, path, mode in (("folder", jpeg_folder, "global"),
                                     ("shards", shards, "shard"))]
    first = launch(tmp_path, 4, runs, name="four")
    for run in runs:
        states = [r["state"] for r in first[run["name"]]]
        assert all(s == states[0] for s in states)
        run.update(state=states[0], stop_after=None)
    second = launch(tmp_path, 2, runs, name="two")
    for run in runs:
        before = [i for r in first[run["name"]] for b in r["record"] for i in b["indices"]]
        after = [i for r in second[run["name"]] for b in r["record"] for i in b["indices"]]
        assert len(before) == 32 == len(set(before))
        assert set(before).isdisjoint(after) and set(before) | set(after) == \
            set(range(N_IMAGES))
        numbers = [b["number"] for b in second[run["name"]][0]["record"]]
        assert numbers[0] == 2, "batch numbers go on from the state's"
    folder_after = [i for r in second["folder"] for b in r["record"] for i in b["indices"]]
    assert len(folder_after) == 28


def test_state_dict_refused(tmp_path, jpeg_folder):
    """A state_dict from another dataset, seed, batch size or order is refused,
    saying what differs; a pre-elastic one (no fingerprint) too."""
    _, state = run_ranks(jpeg_folder, 2, 4, "global", stop=1)
    other = tmp_path / "other"
    shutil.copytree(jpeg_folder, other)
    victim = sorted(os.listdir(other / "c0000"))[0]
    os.remove(other / "c0000" / victim)
    cases = [(dict(path=str(other)), "another dataset"), (dict(seed=4), "seed 3"),
             (dict(batch_size=8), "batch_size 4"), (dict(drop_last=True), "drop_last off")]
    for change, words in cases:
        kw = dict(path=jpeg_folder, batch_size=4, seed=3)
        kw.update(change)
        with stoker.Loader(kw.pop("path"), kw.pop("batch_size"), quiet=True, **kw) as l:
            with pytest.raises(ValueError, match=words):
                l.load_state_dict(state)
    with stoker.Loader(jpeg_folder, 4, seed=3, quiet=True) as l:
        with pytest.raises(ValueError, match="fingerprint"):
            l.load_state_dict({"seed": 3, "epoch": 1, "batches": 1})
        bad = dict(state, segments=[[2, 1000]], batches=1000)
        with pytest.raises(ValueError, match="more than epoch 1 had"):
            l.load_state_dict(bad)


# --- ranks sharing a host -------------------------------------------------------

def test_cpu_share_from_the_environment(image_folder, monkeypatch):
    """With LOCAL_RANK / LOCAL_WORLD_SIZE set, a loader's default decode and
    I/O threads are its share of the host (libstoker computes it; Python and
    stoker doctor read the same), pinned off the trainer's CPU."""
    for name in ("LOCAL_RANK", "LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
                 "OMPI_COMM_WORLD_LOCAL_SIZE"):
        monkeypatch.delenv(name, raising=False)
    alone = stoker.cpu_share()
    assert alone["source"] == "none" and alone["cpulist"] == ""
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    want = stoker.cpu_share()
    assert (want["source"], want["local_rank"], want["local_world_size"]) == \
        ("LOCAL_WORLD_SIZE", 1, 2)
    assert want["cpus"] == max(1, alone["cpus"] // 2) or want["bound"]
    with stoker.Loader(image_folder, 8, image=stoker.Image(size=16), quiet=True) as l:
        got = l.cpu_share
        assert {k: got[k] for k in ("source", "local_rank", "cpus", "decode_threads")} == \
            {k: want[k] for k in ("source", "local_rank", "cpus", "decode_threads")}
        for _ in l:
            pass
        assert l.stats()["decode_threads"] == want["decode_threads"]
        if want["trainer_cpu"] >= 0:
            assert str(want["trainer_cpu"]) not in want["cpulist"].split(",")
    # explicit arguments win over the environment
    with stoker.Loader(image_folder, 8, quiet=True, local_rank=0, local_world_size=1) as l:
        assert l.cpu_share["source"] == "options" and l.cpu_share["local_world_size"] == 1
    assert stoker.cpu_share(0, 4)["local_world_size"] == 4
    with pytest.raises(ValueError, match="local_rank: 2 must be below local_world_size 2"):
        stoker.Loader(image_folder, 8, local_rank=2, local_world_size=2)
    monkeypatch.setenv("LOCAL_RANK", "5")
    with pytest.raises(stoker.Error, match="LOCAL_RANK=5 is not below LOCAL_WORLD_SIZE=2"):
        stoker.Loader(image_folder, 8, quiet=True)
    with pytest.raises(ValueError, match="LOCAL_RANK=5"):
        stoker.cpu_share()
