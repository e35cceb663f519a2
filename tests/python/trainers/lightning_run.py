"""Lightning's Trainer fed by stoker.Loader (test_trainers.py runs it in the
trainers' virtual environment: `lightning` from PyPI, torch 2.x).

    lightning_run.py DATA OUT --devices N [--kill-at STEP] [--resume CKPT]

Each rank appends one JSON line per training step to OUT/steps.<rank>.jsonl:
{"epoch", "step", "indices", "number", "batch_epoch"} (the last two are the
batch's attributes, as training_step gets the batch after Lightning moved it).  --kill-at: the process ends (os._exit, as a
killed job does) at the start of that global step, after the checkpoint of
the step before was written (ModelCheckpoint every 3 steps into OUT/ckpt).
--resume: Trainer.fit(..., ckpt_path=CKPT).

The loaders are made in the module's *_dataloader() hooks, which Lightning
calls once the processes are set up: their rank and world size come from the
process group; their seed from torch's (seed_everything), the same on every
rank.  stoker.Loader has state_dict()/load_state_dict(), so Lightning keeps
its state in the checkpoint (the "combined_loader" of the fit loop) and
restores it before the resumed epoch; it has .sampler.set_epoch, which
Lightning calls at each epoch's start.
"""

import argparse
import json
import os

import lightning as L
import torch

import stoker

# docs/python.md's "Lightning" section is this, cut down.
class Model(L.LightningModule):
    def __init__(self, data, out):
        super().__init__()
        self.data, self.out = data, out
        self.w = torch.nn.Linear(1, 1)

    def train_dataloader(self):
        return stoker.Loader(self.data, batch_size=4, drop_last=True)

    def val_dataloader(self):
        return stoker.Loader(self.data, batch_size=8, shuffle=False)

    def training_step(self, batch, i):
        data, offsets, sizes, labels, indices = batch
        with open(os.path.join(self.out, "steps.%d.jsonl" % self.global_rank), "a") as f:
            f.write(json.dumps({"epoch": self.current_epoch, "step": self.global_step,
                                "indices": indices.tolist(), "number": batch.number,
                                "batch_epoch": batch.epoch}) + "\n")
        x = sizes.float().view(-1, 1) / 1e4
        return torch.nn.functional.mse_loss(self.w(x).view(-1), labels.float())

    def validation_step(self, batch, i):
        self.log("val_n", float(batch.count), sync_dist=True, batch_size=batch.count)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


class Kill(L.Callback):
    def __init__(self, step):
        self.step = step

    def on_train_batch_start(self, trainer, module, batch, i):
        if trainer.global_step == self.step:
            os._exit(0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("data")
    ap.add_argument("out")
    ap.add_argument("--devices", type=int, default=1)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--kill-at", type=int)
    ap.add_argument("--resume")
    a = ap.parse_args()
    L.seed_everything(7)
    cbs = [L.pytorch.callbacks.ModelCheckpoint(dirpath=os.path.join(a.out, "ckpt"),
                                              every_n_train_steps=3, save_top_k=-1,
                                              filename="{step}")]
    if a.kill_at is not None:
        cbs.append(Kill(a.kill_at))
    trainer = L.Trainer(accelerator="cpu", devices=a.devices,
                        strategy="ddp" if a.devices > 1 else "auto", max_epochs=a.epochs,
                        callbacks=cbs, logger=False, enable_progress_bar=False,
                        enable_model_summary=False, num_sanity_val_steps=1)
    trainer.fit(Model(a.data, a.out), ckpt_path=a.resume)


if __name__ == "__main__":
    main()
