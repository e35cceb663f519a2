"""The CUDA side of stoker.Loader(device="cuda"): whether a GPU can be used
(and why not, in words), and the copies of each batch to it on a side stream.

A batch's tensors are copied with non_blocking=True on a side stream that the
consumer's current stream waits for; the host batch (its slot, pinned when the
pool could be registered) is kept until its copy has finished, and given back
once its event says so.  The consumer's waits on those events are its own time
on the device: the loader counts them (stats copy_wait_s, the gpu-copy-bound
verdict) through the callback it passes.
"""

import collections
import errno
import os
import time

import torch

from . import _lib
from .batch import Batch, ImageBatch, VideoBatch
from .errors import DeviceError

_now_ns = time.monotonic_ns


def _cuda_unusable():
    """None when PyTorch can use a GPU here; else why not, in words: PyTorch's
    reason, and what libstoker finds of the CUDA runtime."""
    if torch.cuda.is_available():
        return None
    if torch.version.cuda is None:
        why = "this PyTorch (%s) is built without CUDA" % torch.__version__
    else:
        why = None
        try:
            torch.cuda.init()  # raises with the runtime's own reason
        except Exception as e:  # RuntimeError, AssertionError: whatever this torch raises
            why = (str(e).strip().splitlines() or [type(e).__name__])[0]
        if not why:
            vis = os.environ.get("CUDA_VISIBLE_DEVICES")
            why = "no CUDA device visible" + ("" if vis is None else
                                              " (CUDA_VISIBLE_DEVICES=%r)" % vis)
    rc, lib_why = _lib.pin_probe(4096)
    if rc < 0:
        why += "; libstoker: " + lib_why
    return why


def device_of(device):
    """The torch.device batches go to: None for None or "cpu"; a CUDA device
    with its index; stoker.DeviceError where no GPU can be used here."""
    if device is None:
        return None
    dev = torch.device(device)
    if dev.type == "cpu":
        return None
    if dev.type != "cuda":
        raise ValueError("device must be None, 'cpu' or a CUDA device, not %r" % (device,))
    why = _cuda_unusable()
    if why:
        raise DeviceError(-errno.ENODEV, "device=%r: no usable GPU: %s" % (device, why))
    if dev.index is None:
        dev = torch.device("cuda", torch.cuda.current_device())
    # Load the CUDA runtime and create the context first, so that the
    # pool is pinned (cudaHostRegister) when the loader is created.
    torch.cuda.init()
    return dev


class Copier:
    """Copies host batches to one device on a side stream; keeps each host
    batch until its copy has finished.  add_wait(ns) counts the consumer's
    waits for a copy."""

    def __init__(self, device, prefetch, add_wait):
        self.device = device
        self.prefetch = prefetch
        self._add_wait = add_wait
        self._stream = torch.cuda.Stream(device)
        self._pending = collections.deque()  # (event, host batch) while copying

    def to_device(self, host):
        """Copies data and labels to the device on the side stream; the current
        stream waits for the copy, and the host batch (its slot) is kept until
        the copy has finished."""
        dev = self.device
        cur = torch.cuda.current_stream(dev)
        big = host.images if isinstance(host, ImageBatch) else \
            host.clips if isinstance(host, VideoBatch) else host.data
        with torch.cuda.stream(self._stream):
            data = big.to(dev, non_blocking=True)
            labels = host.labels.to(dev, non_blocking=True)
            ev = torch.cuda.Event()
            ev.record(self._stream)
        cur.wait_event(ev)
        # Allocated on the side stream, used on the consumer's: tell the
        # caching allocator, so the memory is not reused under the consumer.
        data.record_stream(cur)
        labels.record_stream(cur)
        self._pending.append((ev, host))
        if isinstance(host, VideoBatch):
            batch = VideoBatch(data, labels)
            batch.__dict__.update(host.__dict__)  # the clips' facts stay on the host
        elif isinstance(host, ImageBatch):
            batch = ImageBatch(data, labels)
            batch.indices = host.indices
            batch._raw = None  # the host slot is released once the copy is done
        else:
            batch = Batch(data, host.offsets, host.sizes, labels, host.indices)
        batch.epoch, batch.number, batch.slot = host.epoch, host.number, host.slot
        return batch

    def reap(self):
        """Drops the host batches whose copy is done; waits for the oldest when
        they would hold all but one slot."""
        q = self._pending
        while q and (q[0][0].query() or len(q) >= self.prefetch - 1):
            ev, _ = q.popleft()
            self._sync(ev)

    def drain(self):
        """Waits for every copy in flight and drops their host batches."""
        q = self._pending
        while q:
            ev, _ = q.popleft()
            self._sync(ev)

    def _sync(self, ev):
        t0 = _now_ns()
        ev.synchronize()
        self._add_wait(_now_ns() - t0)
