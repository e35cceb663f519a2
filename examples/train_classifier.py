#!/usr/bin/python3
"""Trains a small CNN on a `stoker gen` folder, fed by stoker or by DataLoader.

    stoker gen /tmp/data --images 2000 --classes 10
    PYTHONPATH=python /usr/bin/python3 examples/train_classifier.py /tmp/data
    PYTHONPATH=python /usr/bin/python3 examples/train_classifier.py /tmp/data --loader torch

stoker's raw mode hands over each batch's JPEG bytes (zero-copy tensors over
its batch memory); this script decodes them with torchvision.io.decode_jpeg
(PIL when torchvision is absent) on --workers threads, one batch ahead of the
training step, and resizes to --size x --size.  --loader torch is the usual alternative: a Dataset that
reads each whole file and decodes it the same way, under a DataLoader with
--workers worker processes.  Both print images/s and the time the training
loop spent waiting for its next batch.  Runs on CUDA when present, else CPU.
"""

import argparse
import io
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

try:
    from torchvision.io import decode_jpeg
except ImportError:  # Debian: apt-get install python3-torchvision
    decode_jpeg = None
    import importlib.util
    if importlib.util.find_spec("PIL") is None:
        sys.exit("train_classifier.py decodes JPEGs with torchvision or PIL; install one: "
                 "apt-get install python3-torchvision")


def decode(jpeg, size):
    """uint8 JPEG bytes (1-D tensor) -> uint8 (3, size, size)."""
    if decode_jpeg is not None:
        img = decode_jpeg(jpeg)  # (C, H, W) uint8
        if img.shape[0] == 1:
            img = img.expand(3, -1, -1)
    else:
        from PIL import Image
        im = Image.open(io.BytesIO(jpeg.numpy().tobytes()))
        im.draft("RGB", (2 * size, 2 * size))
        img = torch.from_numpy(np.array(im.convert("RGB"))).permute(2, 0, 1)
    img = F.interpolate(img[None].float(), size=(size, size), mode="bilinear",
                        antialias=True, align_corners=False)
    return img[0].clamp_(0, 255).to(torch.uint8)


class Files(torch.utils.data.Dataset):
    """What a DataLoader user writes: one file per sample, read whole, decoded."""

    def __init__(self, samples, size):
        self.samples, self.size = samples, size

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, i):
        path, label = self.samples[i]
        with open(path, "rb") as f:
            raw = torch.frombuffer(bytearray(f.read()), dtype=torch.uint8)
        return decode(raw, self.size), label


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


def stoker_batches(args, pool):
    """(images, labels) from stoker: raw bytes in, decoded on `pool` threads,
    one batch ahead of the training step (as DataLoader workers would)."""
    import stoker
    loader = stoker.Loader(args.data, args.batch_size, seed=args.seed, drop_last=True)
    print("stoker %s: %d samples, %d classes, engine %s, %d batches/epoch" % (
        stoker.lib_version(), loader.num_samples, len(loader.classes), loader.engine, len(loader)))

    def decode_batch(batch):
        # The decoded images are new tensors: the batch's slot is released
        # as soon as `batch` goes out of scope here.
        images = torch.stack(list(pool.map(lambda s: decode(s, args.size), batch.samples())))
        return images, batch.labels

    ahead = ThreadPoolExecutor(1)
    pending = None
    epoch = 0
    try:
        with loader:
            while True:
                loader.set_epoch(epoch)
                for batch in loader:
                    job = ahead.submit(decode_batch, batch)
                    del batch
                    if pending is not None:
                        yield pending.result()
                    pending = job
                epoch += 1
    finally:
        ahead.shutdown(cancel_futures=True)


def torch_batches(args):
    samples, _ = folder_samples(args.data)
    dl = torch.utils.data.DataLoader(Files(samples, args.size), batch_size=args.batch_size,
                                     shuffle=True, drop_last=True, num_workers=args.workers,
                                     persistent_workers=args.workers > 0,
                                     generator=torch.Generator().manual_seed(args.seed))
    print("DataLoader: %d samples, %d workers, %d batches/epoch" % (
        len(samples), args.workers, len(dl)))
    while True:
        yield from dl


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data", help="folder in ImageFolder layout (e.g. from `stoker gen`)")
    ap.add_argument("--loader", choices=("stoker", "torch"), default="stoker")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--size", type=int, default=64, help="image side after resizing")
    ap.add_argument("--workers", type=int, default=2,
                    help="decode threads (stoker) or DataLoader worker processes (torch)")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    torch.manual_seed(args.seed)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    _, classes = folder_samples(args.data)
    model = SmallCNN(len(classes)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    mean = torch.tensor([0.485, 0.456, 0.406], device=device).view(1, 3, 1, 1) * 255
    std = torch.tensor([0.229, 0.224, 0.225], device=device).view(1, 3, 1, 1) * 255

    pool = ThreadPoolExecutor(max(1, args.workers))
    batches = stoker_batches(args, pool) if args.loader == "stoker" else torch_batches(args)
    wait = 0.0
    seen = correct = 0  # since the last report
    t0 = time.perf_counter()
    for step in range(1, args.steps + 1):
        tw = time.perf_counter()
        images, labels = next(batches)
        images = images.to(device, non_blocking=True)
        labels = labels.to(device, non_blocking=True)
        wait += time.perf_counter() - tw

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
    batches.close()
    pool.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
