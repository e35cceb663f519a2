"""torchvision's reference classification script (references/classification/
train.py), cut down, with stoker.Loader in place of DataLoader +
DistributedSampler: only the lines marked `# stoker` differ from the
reference's.  Everything else reads the loader as the reference reads a
DataLoader: len(data_loader), len(data_loader.dataset), train_sampler.set_epoch
(distributed only), a collate_fn's Mixup/CutMix (here batch_transform).

    torchrun --standalone --nproc_per_node 2 examples/train_reference.py DATA \\
        --epochs 2 --ckpt-every 3 --output-dir /tmp/out
    ... --resume /tmp/out/checkpoint.pth          # continues mid-epoch

Debian 12's torchrun needs `--redirects 1 --tee 1` (docs/python.md).
--log-steps FILE appends one JSON line per training step (epoch, step,
rank, the batch's dataset indices): tests/python/test_trainers.py compares
an interrupted and resumed run with an uninterrupted one.
"""

import argparse
import json
import os
import sys
import time

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import stoker  # noqa: E402  # stoker


def init_distributed_mode(args):
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        args.rank = int(os.environ["RANK"])
        args.world_size = int(os.environ["WORLD_SIZE"])
        args.distributed = args.world_size > 1
    else:
        args.rank, args.world_size, args.distributed = 0, 1, False
    if args.distributed:
        dist.init_process_group("gloo")
        dist.barrier()


def mixup_cutmix(num_classes, mixup_alpha, cutmix_alpha):
    """The reference's get_mixup_cutmix: torchvision.transforms.v2."""
    from torchvision.transforms import v2
    choices = []
    if mixup_alpha > 0:
        choices.append(v2.MixUp(alpha=mixup_alpha, num_classes=num_classes))
    if cutmix_alpha > 0:
        choices.append(v2.CutMix(alpha=cutmix_alpha, num_classes=num_classes))
    return v2.RandomChoice(choices) if choices else None


def train_one_epoch(model, criterion, optimizer, data_loader, epoch, args, state):
    model.train()
    start = time.time()
    for i, batch in enumerate(data_loader):
        image, target = batch
        if args.stop_at is not None and state["step"] == args.stop_at:
            # as a job killed here: no teardown (an interpreter exit with the
            # process group and the loader's threads live could abort in torch)
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)
        if args.log_steps:  # without batch_transform, a stoker.ImageBatch: .indices
            with open(args.log_steps, "a") as f:
                f.write(json.dumps({"epoch": epoch, "step": state["step"], "rank": args.rank,
                                    "indices": batch.indices.tolist()}) + "\n")
        output = model(image)
        loss = criterion(output, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        state["step"] += 1
        if i % args.print_freq == 0 and args.rank == 0:
            print("Epoch: [%d] [%d/%d] loss %.4f (%.1f img/s)" % (
                epoch, i, len(data_loader), loss.item(),
                (i + 1) * args.batch_size / (time.time() - start)))
        if args.ckpt_every and state["step"] % args.ckpt_every == 0 and args.rank == 0:
            save(model, optimizer, epoch, state, data_loader, args)


def save(model, optimizer, epoch, state, data_loader, args):
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                "epoch": epoch, "step": state["step"], "args": vars(args),
                "loader": data_loader.state_dict()},  # stoker
               os.path.join(args.output_dir, "checkpoint.pth"))


def evaluate(model, criterion, data_loader, args):
    model.eval()
    correct = seen = 0
    with torch.inference_mode():
        for image, target in data_loader:
            output = model(image)
            correct += (output.argmax(1) == target).sum().item()
            seen += image.shape[0]
    if args.distributed:
        t = torch.tensor([correct, seen])
        dist.all_reduce(t)
        correct, seen = t.tolist()
    if seen != len(data_loader.dataset) and args.rank == 0:
        # the reference's check: DistributedSampler pads the ranks' shares
        print("It looks like the dataset has %d samples, but %d samples were used for the "
              "validation" % (len(data_loader.dataset), seen))
    if args.rank == 0:
        print("Acc@1 %.3f" % (correct / max(seen, 1)))


def main(args):
    init_distributed_mode(args)
    traindir = os.path.join(args.data_path, "train")
    valdir = os.path.join(args.data_path, "val")
    if not os.path.isdir(traindir):
        traindir = valdir = args.data_path

    # The reference: ImageFolder + ClassificationPresetTrain/Eval, then
    # DistributedSampler/RandomSampler and DataLoader(..., collate_fn=collate_fn).
    norm = dict(dtype="float32", normalize="imagenet")
    num_classes = len(stoker.Loader(traindir, 1, quiet=True).classes)          # stoker
    mix = mixup_cutmix(num_classes, args.mixup_alpha, args.cutmix_alpha)
    data_loader = stoker.Loader(traindir, args.batch_size,                       # stoker
                                image=stoker.Image(args.train_crop_size, **norm),
                                batch_transform=mix and (lambda x, y: mix(x, y)))
    train_sampler = data_loader.sampler                                          # stoker
    data_loader_test = stoker.Loader(valdir, args.batch_size, shuffle=False,     # stoker
                                     image=stoker.Image(args.val_crop_size, crop="center",
                                                        **norm))

    torch.manual_seed(0)  # the same initial weights on every rank
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, stride=2), torch.nn.ReLU(),
                                torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
                                torch.nn.Linear(8, num_classes))
    if args.distributed:
        model = torch.nn.parallel.DistributedDataParallel(model)
    criterion = torch.nn.CrossEntropyLoss(label_smoothing=args.label_smoothing)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    state = {"step": 0}
    if args.resume:
        checkpoint = torch.load(args.resume, map_location="cpu", weights_only=False) \
            if "weights_only" in torch.load.__code__.co_varnames else \
            torch.load(args.resume, map_location="cpu")
        model.load_state_dict(checkpoint["model"])
        optimizer.load_state_dict(checkpoint["optimizer"])
        data_loader.load_state_dict(checkpoint["loader"])                        # stoker
        args.start_epoch = checkpoint["epoch"]   # mid-epoch: the loader goes on from there
        state["step"] = checkpoint["step"]

    for epoch in range(args.start_epoch, args.epochs):
        if args.distributed:
            train_sampler.set_epoch(epoch)
        train_one_epoch(model, criterion, optimizer, data_loader, epoch, args, state)
        evaluate(model, criterion, data_loader_test, args)
    if args.distributed:
        dist.destroy_process_group()


def get_args_parser():
    p = argparse.ArgumentParser(description="Classification training (stoker.Loader)")
    p.add_argument("data_path")
    p.add_argument("--batch-size", "-b", type=int, default=8)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--start-epoch", type=int, default=0)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--label-smoothing", type=float, default=0.0)
    p.add_argument("--mixup-alpha", type=float, default=0.0)
    p.add_argument("--cutmix-alpha", type=float, default=0.0)
    p.add_argument("--train-crop-size", type=int, default=32)
    p.add_argument("--val-crop-size", type=int, default=32)
    p.add_argument("--print-freq", type=int, default=10)
    p.add_argument("--output-dir", default=".")
    p.add_argument("--ckpt-every", type=int, default=0, help="checkpoint every N steps")
    p.add_argument("--resume", default="")
    p.add_argument("--stop-at", type=int, help="exit at the start of this step (tests)")
    p.add_argument("--log-steps", help="append each step's batch indices to this file")
    return p


if __name__ == "__main__":
    main(get_args_parser().parse_args())
