"""accelerate fed by stoker.Loader (test_trainers.py runs it in the trainers'
virtual environment: `accelerate` from PyPI, torch 2.x).

    accelerate_run.py DATA OUT [--save-at STEP] [--kill-at STEP] [--resume DIR] [--skip]

accelerator.prepare() hands a stoker.Loader back as it is (it wraps only
torch DataLoaders: no re-sharding, re-shuffling or copy); the loader's state
rides in accelerate's own checkpoints through register_for_checkpointing
(it has state_dict/load_state_dict).  --skip: accelerate's other recipe
instead: the loader is not checkpointed, and the resumed epoch's first
batches are skipped with accelerator.skip_first_batches(loader, n).  One
JSON line per step goes to OUT/steps.<rank>.jsonl: {"epoch", "step",
"indices", "number"}.
"""

import argparse
import json
import os

import torch
from accelerate import Accelerator

import stoker


class Steps:
    """The step counter, checkpointed with the rest."""

    def __init__(self):
        self.n = 0

    def state_dict(self):
        return {"n": self.n}

    def load_state_dict(self, d):
        self.n = d["n"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("data")
    ap.add_argument("out")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--save-at", type=int)
    ap.add_argument("--kill-at", type=int)
    ap.add_argument("--resume")
    ap.add_argument("--skip", action="store_true")
    a = ap.parse_args()

    # docs/python.md's "accelerate" section is this, cut down.
    acc = Accelerator(cpu=True)
    torch.manual_seed(11)                         # the loader's default seed follows it
    loader = stoker.Loader(a.data, batch_size=4, drop_last=True)
    model = torch.nn.Linear(1, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    model, opt, prepared = acc.prepare(model, opt, loader)
    assert prepared is loader, "accelerate wrapped the loader: %r" % (prepared,)
    steps = Steps()
    if a.skip:
        acc.register_for_checkpointing(steps)
    else:
        acc.register_for_checkpointing(loader, steps)
    if a.resume:
        acc.load_state(a.resume)
    first, skip = loader.state_dict()["epoch"], 0
    if a.skip:
        first, skip = divmod(steps.n, len(loader))
    for epoch in range(first, a.epochs):
        loader.set_epoch(epoch)
        active = acc.skip_first_batches(loader, skip) if skip else loader
        skip = 0
        for batch in active:
            data, offsets, sizes, labels, indices = batch
            if steps.n == a.kill_at:
                os._exit(0)
            with open(os.path.join(a.out, "steps.%d.jsonl" % acc.process_index), "a") as f:
                f.write(json.dumps({"epoch": epoch, "step": steps.n,
                                    "indices": indices.tolist(),
                                    "number": batch.number}) + "\n")
            loss = torch.nn.functional.mse_loss(
                model(sizes.float().view(-1, 1) / 1e4).view(-1), labels.float())
            acc.backward(loss)
            opt.step()
            opt.zero_grad()
            steps.n += 1
            if steps.n == a.save_at:
                acc.save_state(os.path.join(a.out, "ckpt"))


if __name__ == "__main__":
    main()
