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
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), OMP_NUM_THREADS="1")
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
    """3 ranks with torchrun's environment, a DDP loop over image mode (folder)
    and raw mode (tar shards, shard shuffle), two epochs each."""
    world = 3
    runs = [dict(name="folder", path=jpeg_folder, batch_size=8, seed=5, epochs=2, image=True,
                 shuffle_mode="global"),
            dict(name="shards", path=shards, batch_size=4, seed=7, epochs=2, image=False,
                 shuffle_mode="shard")]
    got = launch(tmp_path, world, runs)
    for run in runs:
        results = got[run["name"]]
        for r, res in enumerate(results):
            assert res["facts"]["rank"] == r and res["facts"]["world_size"] == world
        check_epochs(results, N_IMAGES, world)
        for r, res in enumerate(results):
            mine = [(b["epoch"], b["number"], b["indices"]) for b in res["record"]]
            assert mine == single_process(run, r, world), \
                "rank %d under the launcher equals one process computing rank %d" % (r, r)
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
    p = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                        "--nproc_per_node", "2", "--redirects", "1", "--tee", "1",
                        "--log_dir", str(tmp_path / "logs"), WORKER, str(cfg), str(out)],
                       env=worker_env(), capture_output=True, text=True, timeout=TIMEOUT)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    results = json.loads(out.read_text())["folder"]
    check_epochs(results, N_IMAGES, 2)
    for r, res in enumerate(results):
        mine = [(b["epoch"], b["number"], b["indices"]) for b in res["record"]]
        assert mine == single_process(run, r, 2)
