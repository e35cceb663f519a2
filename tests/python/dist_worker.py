"""One rank of test_distributed.py's training loop, started the way torchrun
starts its workers: RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
MASTER_ADDR and MASTER_PORT in the environment, torch.distributed on the gloo
backend (CPU).

    dist_worker.py CONFIG.json OUT.json

CONFIG: {"runs": [{"name", "path", "batch_size", "seed", "epochs", "image",
"shuffle_mode", "state" (a state_dict to resume from, or null),
"stop_after" (batches per rank before saving a state_dict, or null)}]}.
Each run trains a tiny model under DistributedDataParallel (so every step is a
gloo all-reduce: ranks that disagree on the number of batches would hang),
records (epoch, batch number, dataset indices, shards) of every batch, and
all-gathers the records; rank 0 writes them, with each rank's loader facts,
to OUT.
"""

import json
import os
import sys

import torch
import torch.distributed as dist

import stoker
from dist_exit import leave


def features(batch, image):
    if image:
        images, _ = batch
        return images.float().mean(dim=(2, 3)) / 255.0  # N x 3
    return batch.sizes.float().unsqueeze(1) / 1e4     # N x 1


def shard_of(loader, i):
    path = loader.sample(i)[0]
    return path if path.endswith(".tar") else None


def run_one(run, rank):
    image = stoker.Image(size=16) if run["image"] else None
    loader = stoker.Loader(run["path"], run["batch_size"], seed=run["seed"], image=image,
                           shuffle_mode=run["shuffle_mode"], quiet=True)
    facts = {"rank": loader.rank, "world_size": loader.world_size, "len": len(loader),
             "cpu_share": getattr(loader, "cpu_share", None)}
    if run.get("state"):
        loader.load_state_dict(run["state"])
    torch.manual_seed(0)
    model = torch.nn.Linear(3 if run["image"] else 1, 4)
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    record, state = [], None
    first = run["state"]["epoch"] if run.get("state") else 0
    for epoch in range(first, first + run["epochs"]):
        loader.set_epoch(epoch)
        for batch in loader:
            x = features(batch, run["image"])
            labels = batch.labels % 4
            loss = torch.nn.functional.cross_entropy(ddp(x), labels)
            opt.zero_grad()
            loss.backward()
            opt.step()
            idx = batch.indices.tolist()
            record.append({"epoch": epoch, "number": batch.number, "indices": idx,
                           "shards": sorted({s for s in (shard_of(loader, i) for i in idx)
                                             if s})})
            if run.get("stop_after") is not None and len(record) == run["stop_after"]:
                state = loader.state_dict()
                break
        if state is not None:
            break
    loader.close()
    return {"facts": facts, "record": record, "state": state}


def main():
    cfg = json.load(open(sys.argv[1]))
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    assert (rank, world) == (int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]))
    results = {}
    for run in cfg["runs"]:
        mine = run_one(run, rank)
        everyone = [None] * world
        dist.all_gather_object(everyone, mine)
        results[run["name"]] = everyone
    if rank == 0:
        with open(sys.argv[2] + ".tmp", "w") as f:
            json.dump(results, f)
        os.rename(sys.argv[2] + ".tmp", sys.argv[2])
    dist.barrier()
    leave(sys.argv[2] + ".done", rank, world)  # not destroy_process_group: dist_exit.py


if __name__ == "__main__":
    main()
