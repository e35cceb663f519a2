"""One rank of test_surface.py's default-seed checks (gloo, CPU): argv[1] is
"before" (the loader made before init_process_group, torch unseeded: the
first iter() must refuse) or "after" (made after it: rank 0's seed is
broadcast).  Prints one JSON line."""
import json
import os
import sys

import torch
import torch.distributed as dist

import stoker
from dist_exit import leave

when, path = sys.argv[1], sys.argv[2]
out = {"rank": int(os.environ["RANK"])}
if when == "world":  # made where the environment said one process
    os.environ["WORLD_SIZE"], rank = "1", os.environ.pop("RANK")
    loader = stoker.Loader(path, 4, quiet=True, seed=1)
    os.environ["RANK"], os.environ["WORLD_SIZE"] = rank, "2"
    dist.init_process_group("gloo")
    try:
        iter(loader)
        out["error"] = None
    except ValueError as e:
        out["error"] = str(e)
elif when == "before":
    loader = stoker.Loader(path, 4, quiet=True)
    dist.init_process_group("gloo")
    try:
        iter(loader)
        out["error"] = None
    except ValueError as e:
        out["error"] = str(e)
else:
    dist.init_process_group("gloo")
    loader = stoker.Loader(path, 4, quiet=True)
    out["seed"] = loader.seed
    out["initial_seed"] = torch.initial_seed()
    out["indices"] = [i for b in loader for i in b.indices.tolist()]
out["world_size"] = loader.world_size
print(json.dumps(out))
dist.barrier()
leave(os.environ["STOKER_TEST_DONE"], dist.get_rank(), dist.get_world_size())  # dist_exit.py
