#!/usr/bin/python3
"""Trains a small CNN on a `stoker gen` folder, fed by stoker or by DataLoader.

    stoker gen /tmp/data --images 2000 --classes 10
    PYTHONPATH=python /usr/bin/python3 examples/train_classifier.py /tmp/data
    PYTHONPATH=python /usr/bin/python3 examples/train_classifier.py /tmp/data --loader torch

With --loader stoker (the default), stoker's image mode does the input
pipeline in C: its threads read the files, decode each JPEG and apply
RandomResizedCrop(--size) and a random horizontal flip straight into the batch
memory, and each batch comes out as a uint8 (N, 3, size, size) tensor over that
memory (on the GPU when there is one).  --loader torch is the usual
alternative: torchvision's ImageFolder with the same transforms on PIL images,
under a DataLoader with --workers worker processes.  Both print images/s and
the time the training loop spent waiting for its next batch; with stoker,
also the library's verdict on what holds the loop back (loader.diagnose(),
and a log line every --report-every seconds).  --model picks the step's
weight: "tiny" makes the loop input-bound on a CPU, "wide" compute-bound.
Runs on CUDA when present, else CPU.
"""

import argparse
import logging
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def folder_samples(root):
    """(path, label) in ImageFolder's order: sorted class folders, sorted files."""
    classes = sorted(d.name for d in os.scandir(root) if d.is_dir())
    out = []
    for label, c in enumerate(classes):
        for name in sorted(os.listdir(os.path.join(root, c))):
            if name.lower().endswith((".jpg", ".jpeg")):
                out.append((os.path.join(root, c, name), label))
    return out, classes


class SmallCNN(nn.Module):
    def __init__(self, classes):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.BatchNorm2d(16), nn.ReLU(inplace=True),
            nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.BatchNorm2d(32), nn.ReLU(inplace=True),
            nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, classes))

    def forward(self, x):
        return self.body(x)


class TinyNet(nn.Module):
    """Almost no compute: the input pipeline sets the pace."""

    def __init__(self, classes):
        super().__init__()
        self.body = nn.Sequential(nn.AdaptiveAvgPool2d(4), nn.Flatten(), nn.Linear(48, classes))

    def forward(self, x):
        return self.body(x)


class WideCNN(nn.Module):
    """Much compute per image: the training step sets the pace."""

    def __init__(self, classes):
        super().__init__()
        layers, c = [], 3
        for width, stride in ((32, 1), (64, 2), (128, 2)):
            layers += [nn.Conv2d(c, width, 3, stride=stride, padding=1), nn.BatchNorm2d(width),
                       nn.ReLU(inplace=True)]
            c = width
        self.body = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                                  nn.Linear(c, classes))

    def forward(self, x):
        return self.body(x)


MODELS = {"tiny": TinyNet, "small": SmallCNN, "wide": WideCNN}


def stoker_batches(args, device, out):
    """(images, labels) from stoker's image mode: uint8 (N, 3, size, size),
    decoded and cropped in C, already on `device` when it is a GPU.  out[0]
    is the loader, for its verdict."""
    import stoker
    image = stoker.Image(size=args.size, crop="random_resized", flip=True,
                         decode_threads=args.workers)
    loader = stoker.Loader(args.data, args.batch_size, seed=args.seed, drop_last=True,
                           image=image, device=device if device.type == "cuda" else None,
                           report_every=args.report_every)
    out.append(loader)
    print("stoker %s: %d samples, %d classes, engine %s, %d batches/epoch, %s" % (
        stoker.lib_version(), loader.num_samples, len(loader.classes), loader.engine,
        len(loader), image))
    epoch = 0
    with loader:
        while True:
            loader.set_epoch(epoch)
            # The images are the batch memory itself; the slot goes back to the
            # pool when the step drops its last reference.
            for images, labels in loader:
                yield images, labels
            epoch += 1


def torch_batches(args):
    try:
        from torchvision import datasets, transforms
    except ImportError:
        sys.exit("--loader torch needs torchvision (Debian: apt-get install "
                 "python3-torchvision)")
    tf = transforms.Compose([transforms.RandomResizedCrop(args.size, antialias=True),
                             transforms.RandomHorizontalFlip(), transforms.PILToTensor()])
    ds = datasets.ImageFolder(args.data, transform=tf)
    dl = torch.utils.data.DataLoader(ds, batch_size=args.batch_size, shuffle=True,
                                     drop_last=True, num_workers=args.workers,
                                     persistent_workers=args.workers > 0,
                                     generator=torch.Generator().manual_seed(args.seed))
    print("DataLoader: %d samples, %d workers, %d batches/epoch" % (
        len(ds), args.workers, len(dl)))
    while True:
        yield from dl


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data", help="folder in ImageFolder layout (e.g. from `stoker gen`)")
    ap.add_argument("--loader", choices=("stoker", "torch"), default="stoker")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--size", type=int, default=64, help="image side after the crop")
    ap.add_argument("--workers", type=int, default=2,
                    help="decode threads (stoker; 0: CPUs - 1) or DataLoader worker processes "
                         "(torch)")
    ap.add_argument("--model", choices=sorted(MODELS), default="small",
                    help="tiny: input-bound on a CPU; wide: compute-bound")
    ap.add_argument("--threads", type=int, default=0,
                    help="torch's intra-op threads for the step (0: torch's default)")
    ap.add_argument("--report-every", type=float, default=None,
                    help="stoker: log the verdict every N seconds while training")
    ap.add_argument("--warmup", type=int, default=2,
                    help="stoker: steps before the verdict's window starts")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    torch.manual_seed(args.seed)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.report_every:
        logging.basicConfig(level=logging.INFO, format="%(message)s")
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    _, classes = folder_samples(args.data)
    model = MODELS[args.model](len(classes)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    mean = torch.tensor([0.485, 0.456, 0.406], device=device).view(1, 3, 1, 1) * 255
    std = torch.tensor([0.229, 0.224, 0.225], device=device).view(1, 3, 1, 1) * 255

    made = []
    batches = (stoker_batches(args, device, made) if args.loader == "stoker"
               else torch_batches(args))
    wait = 0.0
    seen = correct = 0  # since the last report
    t0 = time.perf_counter()
    for step in range(1, args.steps + 1):
        tw = time.perf_counter()
        images, labels = next(batches)
        images = images.to(device, non_blocking=True)
        labels = labels.to(device, non_blocking=True)
        wait += time.perf_counter() - tw
        if made and step == min(args.warmup, args.steps - 1) + 1:
            # the verdict is over the steady state: the first steps (filling the
            # prefetch, first allocations) are the warm-up
            made[0].reset_stats()

        x = (images.float() - mean) / std
        out = model(x)
        loss = F.cross_entropy(out, labels)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        seen += labels.shape[0]
        correct += int((out.argmax(1) == labels).sum())
        if step % 50 == 0 or step == args.steps:
            el = time.perf_counter() - t0
            print("step %4d  loss %.3f  train acc %.2f  %.0f images/s  waiting for data %.0f%%" % (
                step, loss.item(), correct / seen, step * args.batch_size / el, 100 * wait / el))
            seen = correct = 0
    if device.type == "cuda":
        torch.cuda.synchronize()
    el = time.perf_counter() - t0
    n = args.steps * args.batch_size
    print("%s: %d steps, %.0f images/s, waiting for data %.2f s of %.2f s (%.0f%%)" % (
        args.loader, args.steps, n / el, wait, el, 100 * wait / el))
    if made:  # the library's verdict over the training loop, in the loop
        v = made[0].diagnose(window=0)
        print("verdict: %s: %s; try: %s" % (v["kind"], v["evidence"], v["try"]))
    batches.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
