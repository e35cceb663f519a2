"""stoker.Loader: libstoker's loader as a PyTorch-style iterable.

Each batch's `data` (raw mode) or `images` (image mode) is a tensor over its
slot in libstoker's fixed pool, with no copy; the slot goes back to the pool
when the last tensor over it is freed (_slots.py), or, with copy_free=True,
when the next batch is asked for.  The small per-sample arrays are copied.
close() stops the C loader at once (stk_loader_stop joins its threads) and
destroys it, unmapping the pool, at once when no tensor over its slots is
alive, else when the last one is freed.

Ctrl-C: the wait for a batch is a loop of stk_loader_next_timeout calls of
_POLL_NS each, in C with the GIL released (ctypes does that for CDLL calls);
Python raises KeyboardInterrupt between two of them, so within _POLL_NS even
while a read hangs.
"""

import collections
import ctypes
import errno
import gc
import operator
import os
import sys
import time

import numpy as np
import torch

from . import _lib, _resume
from ._slots import _Core, _Hist, _Lease, _SlotViews, _closed_message
from .batch import Batch, ImageBatch
from .errors import error_from, option_error
from .image import Image

_ENGINES = {"auto": _lib.ENGINE_AUTO, "io_uring": _lib.ENGINE_URING,
            "uring": _lib.ENGINE_URING, "pread": _lib.ENGINE_PREAD, "null": _lib.ENGINE_NULL}
_ON_ERROR = {"skip": _lib.ON_ERROR_SKIP, "fail": _lib.ON_ERROR_FAIL}
_U32 = 0xFFFFFFFF
_U64 = 0xFFFFFFFFFFFFFFFF
_POLL_NS = 100_000_000     # how long one wait in C lasts before Python checks signals
_ETIMEDOUT = -errno.ETIMEDOUT
_now_ns = time.monotonic_ns

_STATS_FIELDS = [name for name, _ in _lib.Stats._fields_ if name != "size"]


class _EpochIter:
    """What iter(loader) returns: one pass over the current epoch."""

    __slots__ = ("_loader", "_gen")

    def __init__(self, loader, gen):
        self._loader = loader
        self._gen = gen

    def __iter__(self):
        return self

    def __next__(self):
        return self._loader._next(self._gen)

    def __len__(self):
        return len(self._loader)


def _uint(name, value, hi=_U32):
    try:
        if isinstance(value, bool):
            raise TypeError
        value = operator.index(value)
    except TypeError:
        raise TypeError("%s must be an integer, not %r" % (name, value)) from None
    if not 0 <= value <= hi:
        raise ValueError("%s must be in 0..%d, not %d" % (name, hi, value))
    return value


def _env_int(name, default):
    v = os.environ.get(name)
    if v is None or v == "":
        return default
    try:
        return int(v)
    except ValueError:
        raise ValueError("environment %s=%r is not an integer" % (name, v)) from None


class Loader:
    """Loads a dataset folder or file list in batches, asynchronously, in C.

    Args:
        path: a folder in torchvision ImageFolder layout (root/<class>/<file>,
            labels from the sorted class names), a flat folder (labels -1), or
            a file list ("path[<TAB>label]" per line).
        batch_size: samples per batch.
        shuffle: a seeded permutation per epoch (False: index order).
        seed: the shuffle seed; (seed, epoch, rank, world_size) fix the order.
        drop_last: drop the tail that does not fill a batch (otherwise the
            last batch is short; across ranks, shares are padded by
            repetition like DistributedSampler).
        rank, world_size: this process's share; default to the RANK and
            WORLD_SIZE environment variables (torchrun), else 0 and 1.
        prefetch: batch slots (in flight + ready + held by you). Batches you
            still reference hold their slot, so keep it >= 2.
        queue_depth: reads in flight, all I/O threads together.
        threads: I/O threads (0: automatic).
        engine: "auto" (io_uring, else the pread pool), "io_uring", "pread",
            or "null" (no I/O; for tests).
        direct: O_DIRECT reads (samples padded to 4 KiB in `data`).
        image: None (raw mode: batches of the files' bytes, stoker.Batch) or
            a stoker.Image (image mode: C threads decode and crop each JPEG
            into the batch; iteration yields stoker.ImageBatch, which unpacks
            as ``images, labels``).
        device: None or "cpu" (batches stay in pinned host memory), or a CUDA
            device: data (or images) and labels are copied there with
            non_blocking=True on a side stream that the current stream waits
            on.
        on_error: "skip" (a missing, unreadable or short file, or in image
            mode a corrupt or unsupported image, is dropped from its batch and
            counted in stats()["errors"]) or "fail" (iteration raises
            stoker.Error naming the file).
        copy_free: release each batch's slot when the next batch is asked for,
            even if tensors from it are still referenced: fastest, but then
            tensors from earlier batches must not be used.

    Keyword-only extras: extensions (folder mode: ".jpg,.png" or "*"),
    cache_dir (where indexes go for read-only data folders), index_cache
    (False: never read or write the index cache), pin (False: never pin the
    pool with CUDA), quiet (no notices on stderr), slot_bytes (bytes per batch
    slot; 0: sized from the dataset's sample sizes), null_latency_ns (the
    null engine's per-read latency; tests), shuffle_mode ("global", or "shard"
    for tar shards: shards in random order, samples shuffled within
    shuffle_window samples).  path may also be tar shards: a folder of .tar
    files, a glob or a brace pattern such as "train-{000000..000146}.tar".

    One thread iterates a loader; stats() may be called from any thread.
    """

    def __init__(self, path, batch_size, shuffle=True, seed=0, drop_last=False, rank=None,
                 world_size=None, prefetch=4, queue_depth=128, threads=0, engine="auto",
                 direct=False, image=None, device=None, on_error="skip", copy_free=False, *,
                 extensions=None, cache_dir=None, index_cache=True, pin=True, quiet=False,
                 slot_bytes=0, null_latency_ns=0, shuffle_mode="global", shuffle_window=1000):
        self._core = None
        if image is not None:
            image = Image._from(image)
            if _lib.stk_image_decode is None:
                raise NotImplementedError("stoker.Loader(image=...): this libstoker (%s) has no "
                                          "image mode; rebuild it" % _lib.lib_path)
        self.image = image
        if engine not in _ENGINES:
            raise ValueError("engine must be one of auto, io_uring, pread, null; not %r"
                             % (engine,))
        if on_error not in _ON_ERROR:
            raise ValueError("on_error must be 'skip' or 'fail', not %r" % (on_error,))
        if world_size is None:
            world_size = _env_int("WORLD_SIZE", 1)
        if rank is None:
            rank = _env_int("RANK", 0)
        world_size = _uint("world_size", world_size)
        rank = _uint("rank", rank)
        if world_size < 1 or rank >= world_size:
            raise ValueError("rank %d must be below world_size %d" % (rank, world_size))
        batch_size = _uint("batch_size", batch_size)
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        prefetch = _uint("prefetch", prefetch)
        if prefetch < 1:
            raise ValueError("prefetch must be at least 1")

        self._device = None
        if device is not None:
            dev = torch.device(device)
            if dev.type == "cuda":
                if not torch.cuda.is_available():
                    raise ValueError("device=%r but torch.cuda.is_available() is False" % (device,))
                if dev.index is None:
                    dev = torch.device("cuda", torch.cuda.current_device())
                # Load the CUDA runtime and create the context first, so that the
                # pool is pinned (cudaHostRegister) when the loader is created.
                torch.cuda.init()
                self._device = dev
            elif dev.type != "cpu":
                raise ValueError("device must be None, 'cpu' or a CUDA device, not %r" % (device,))

        flags = 0
        if not shuffle:
            flags |= _lib.F_NO_SHUFFLE
        if drop_last:
            flags |= _lib.F_DROP_LAST
        if direct:
            flags |= _lib.F_DIRECT
        if not pin:
            flags |= _lib.F_NO_PIN
        if quiet:
            flags |= _lib.F_QUIET
        if not index_cache:
            flags |= _lib.F_NO_CACHE
        self._path = os.fspath(path)
        seed = _uint("seed", seed, _U64)
        o = _lib.LoaderOpts()
        o.size = ctypes.sizeof(o)
        o.flags = flags
        o.path = os.fsencode(self._path)
        o.batch_size = batch_size
        o.prefetch = prefetch
        o.queue_depth = _uint("queue_depth", queue_depth)
        o.io_threads = _uint("threads", threads)
        o.seed = seed
        o.rank = rank
        o.world_size = world_size
        o.engine = _ENGINES[engine]
        o.on_error = _ON_ERROR[on_error]
        o.extensions = os.fsencode(extensions) if extensions is not None else None
        o.cache_dir = os.fsencode(cache_dir) if cache_dir is not None else None
        o.null_latency_ns = _uint("null_latency_ns", null_latency_ns, _U64)
        o.slot_bytes = _uint("slot_bytes", slot_bytes, _U64)
        if shuffle_mode not in ("global", "shard"):
            raise ValueError("shuffle_mode must be 'global' or 'shard', not %r" % (shuffle_mode,))
        o.shuffle_mode = 1 if shuffle_mode == "shard" else 0
        o.shuffle_window = _uint("shuffle_window", shuffle_window)
        if image is not None:
            self._image_opts = image._opts()  # kept alive while create reads it
            o.image = ctypes.pointer(self._image_opts)

        h = ctypes.c_void_p()
        err = ctypes.create_string_buffer(4096)
        rc = _lib.stk_loader_create(ctypes.byref(h), ctypes.byref(o), err, len(err))
        if rc < 0:
            detail = err.value.decode("utf-8", "replace") or None
            if rc == -errno.ERANGE:  # an option out of range, named by the library
                raise option_error(rc, detail)
            raise error_from(rc, detail, self._path)
        self._core = _Core(h.value)
        self.batch_size = batch_size
        self.seed = seed
        self.rank = rank
        self.world_size = world_size
        self.prefetch = prefetch
        self.copy_free = bool(copy_free)
        self._len = _lib.stk_loader_len(h.value)
        self._out = ctypes.c_void_p()
        self._out_ref = ctypes.byref(self._out)
        self._views = {}
        self._prev = None          # copy_free: the lease to release on the next batch
        self._pending_copies = collections.deque()  # (event, host batch) while copying
        self._stream = torch.cuda.Stream(self._device) if self._device is not None else None
        self._pos = (0, 0)         # where the C loader was last started
        self._fresh = True         # no iteration since that start
        self._want = None          # (epoch, batch) to start at on the next iter()
        self._iter_gen = 0
        self._stats_base = 0       # samples delivered before the last start
        # Each batch's whole wait, which the C histogram would record as its
        # last poll only (see _wait); stats() reports its percentiles.
        self._wait_hist = _Hist() if _lib.stk_loader_next_timeout is not None else None

    # --- dataset queries -------------------------------------------------------

    def __len__(self):
        """Batches per epoch for this rank (shard shuffle: of the epoch last
        started, as shares follow the shards dealt to each rank; after an
        elastic resume: those before it plus this rank's share of the rest)."""
        return self._len

    @property
    def path(self):
        return self._path

    @property
    def num_samples(self):
        """Samples in the dataset (all ranks)."""
        return _lib.stk_loader_num_samples(self._handle())

    @property
    def samples_per_epoch(self):
        """Samples this rank gets per epoch (padding included)."""
        return _lib.stk_loader_rank_samples(self._handle())

    @property
    def classes(self):
        """Class names by label (folder mode; empty otherwise)."""
        h = self._handle()
        n = _lib.stk_loader_num_classes(h)
        return [os.fsdecode(_lib.stk_loader_class_name(h, i)) for i in range(n)]

    @property
    def engine(self):
        """The read engine in use: "io_uring", "pread" or "null"."""
        return _lib.stk_loader_engine(self._handle()).decode("ascii")

    def sample(self, index):
        """(path, size, label) of the dataset's sample `index`."""
        buf = ctypes.create_string_buffer(4096 + 256)
        size = ctypes.c_uint64()
        label = ctypes.c_int64()
        rc = _lib.stk_loader_sample(self._handle(), index, buf, len(buf), ctypes.byref(size),
                                    ctypes.byref(label))
        if rc < 0:
            if rc == -errno.ERANGE:
                raise IndexError("sample index %d out of range 0..%d"
                                 % (index, self.num_samples - 1))
            raise error_from(rc, None, self._path)
        return os.fsdecode(buf.value), size.value, label.value

    def sample_extent(self, index):
        """(path, offset, size): where sample `index`'s bytes lie in its file, as
        the loader reads them (a tar shard's member starts at `offset`; a
        sample that is a whole file at 0)."""
        fn = _lib.stk_loader_sample_extent
        if fn is None:
            raise NotImplementedError("this libstoker (%s) has no stk_loader_sample_extent"
                                      % _lib.lib_path)
        buf = ctypes.create_string_buffer(4096 + 256)
        off = ctypes.c_uint64()
        size = ctypes.c_uint64()
        rc = fn(self._handle(), index, buf, len(buf), ctypes.byref(off), ctypes.byref(size))
        if rc < 0:
            if rc == -errno.ERANGE:
                raise IndexError("sample index %d out of range 0..%d"
                                 % (index, self.num_samples - 1))
            raise error_from(rc, None, self._path)
        return os.fsdecode(buf.value), off.value, size.value

    # --- epochs and resume -----------------------------------------------------

    def set_epoch(self, epoch):
        """Makes the next iteration run `epoch` from its start (like
        DistributedSampler.set_epoch).  Without it, each new iteration runs the
        epoch after the last one.  Right after load_state_dict() a call with the
        restored epoch keeps the resume point."""
        epoch = _uint("epoch", epoch, _U64)
        if self._fresh and self._want is None and self._pos[0] == epoch:
            return
        if self._want is not None and self._want[0] == epoch:
            return
        self._want = (epoch, 0)

    def state_dict(self):
        """The resume point, valid on any number of ranks (every rank's is the
        same: save any one); see _resume.py and docs/python.md for its keys.
        Plain ints, strings and bools: torch.save and json both keep it."""
        p = _lib.Resume(size=ctypes.sizeof(_lib.Resume))
        rc = _lib.stk_loader_resume_point(self._handle(), ctypes.byref(p))
        if rc < 0:
            raise error_from(rc, None, self._path)
        want = self._want  # set_epoch() not yet acted on: that epoch's start
        return _resume.to_dict(p, self.world_size, want)

    def load_state_dict(self, state):
        """Resumes at a state_dict() saved by any number of ranks: the next
        iteration yields this rank's share of the rest of that epoch.  On the
        same world size that is the same batches in the same order as an
        uninterrupted run; on another, the rest is split over the new ranks so
        that every sample not yet read is read once (shard shuffle: whole
        shards per rank).  A state from another dataset, seed, batch size or
        order options raises ValueError saying what differs."""
        p = _resume.from_dict(state)
        h = self._handle()
        self._before_restart()
        rc = _lib.stk_loader_resume(h, ctypes.byref(p))
        if rc < 0:
            detail = _lib.stk_last_error(h).decode("utf-8", "replace")
            if rc in (-errno.EINVAL, -errno.ERANGE, -errno.E2BIG):
                raise ValueError("cannot resume %s: %s" % (self._path, detail))
            raise error_from(rc, detail, self._path)
        self._after_restart(p.epoch, sum(p.segments[i].batches for i in range(p.nsegments)))
        self._want = None

    def _before_restart(self):
        self._drain_copies()
        if self._prev is not None:
            self._prev.release()
            self._prev = None

    def _after_restart(self, epoch, batch):
        self._len = _lib.stk_loader_len(self._handle())
        self._pos = (epoch, batch)
        self._fresh = True
        st = _lib.Stats(size=ctypes.sizeof(_lib.Stats))
        if _lib.stk_loader_stats(self._handle(), ctypes.byref(st)) == 0:
            self._stats_base = st.samples

    def _start(self, epoch, batch):
        h = self._handle()
        self._before_restart()
        rc = _lib.stk_loader_start(h, epoch, batch)
        if rc < 0:
            raise error_from(rc, _lib.stk_last_error(h).decode("utf-8", "replace"), self._path)
        self._after_restart(epoch, batch)

    def __iter__(self):
        self._handle()
        if self._want is not None:
            epoch, batch = self._want
            self._want = None
            if not (self._fresh and self._pos == (epoch, batch)):
                self._start(epoch, batch)
        elif not self._fresh:
            self._start(self._pos[0] + 1, 0)
        self._fresh = False
        self._iter_gen += 1
        return _EpochIter(self, self._iter_gen)

    # --- the batches -----------------------------------------------------------

    def _next(self, gen):
        core = self._core
        if core is None or core.h is None or core.closing:
            raise ValueError(_closed_message(core))
        if gen != self._iter_gen:
            raise RuntimeError("this iterator was superseded by a newer iter() on the same "
                               "stoker.Loader (a loader has one position)")
        h = core.h
        out = self._out
        if out.value:
            # A batch handed out while an exception (Ctrl-C) interrupted its
            # wrapping: give it back unless a lease took it.
            core.release(out.value, None)
            out.value = None
        if self._prev is not None:
            prev, self._prev = self._prev, None
            if self._pending_copies:
                self._drain_copies()
            prev.release()
        elif self._pending_copies:
            self._reap_copies()

        rc = self._wait(h)
        if rc == _lib.ENOSLOT and core.owned:
            # Slots may be held only by finished GPU copies or by batches in
            # reference cycles: free those and try once more.
            self._drain_copies()
            gc.collect()
            rc = self._wait(h)
        if rc != 1:
            if rc == 0:
                raise StopIteration
            detail = _lib.stk_last_error(h).decode("utf-8", "replace")
            if rc == _lib.ENOSLOT:
                detail = ("all %d batch slots are held by tensors from earlier batches that are "
                          "still referenced: drop those references (.clone() what must be kept), "
                          "raise prefetch (now %d), or use copy_free=True" %
                          (self.prefetch, self.prefetch))
            raise error_from(rc, detail, self._path)

        addr = out.value
        views = self._views.get(addr)
        if views is None or views.key != views.current():
            views = self._views[addr] = _SlotViews(addr, self.batch_size)
        v = views.view
        n = v.count
        # One copy of the small arrays, then a tensor over each part.
        meta = np.concatenate((views.offsets[:n + 1], views.sizes[:n], views.labels[:n],
                               views.indices[:n]))
        img = views.image
        if img is None:
            lease = _Lease(core, addr, v.data, v.data_bytes)
            out.value = None
            batch = Batch(torch.from_numpy(np.asarray(lease)), torch.from_numpy(meta[:n + 1]),
                          torch.from_numpy(meta[n + 1:2 * n + 1]),
                          torch.from_numpy(meta[2 * n + 1:3 * n + 1]),
                          torch.from_numpy(meta[3 * n + 1:]))
        else:
            # One lease over the raw bytes and the images: every view keeps the slot.
            off, ib, shape, dt = img
            lease = _Lease(core, addr, v.data, off + n * ib)
            out.value = None
            span = np.asarray(lease)
            images = span[off:].view(dt).reshape((n,) + shape)
            batch = ImageBatch(torch.from_numpy(images),
                               torch.from_numpy(meta[2 * n + 1:3 * n + 1]))
            batch.indices = torch.from_numpy(meta[3 * n + 1:])
            batch._raw = (span, meta, n, v.data_bytes)
        batch.epoch = v.epoch
        batch.number = v.number
        batch.slot = v.slot
        if self._device is not None:
            batch = self._to_device(batch)
        if self.copy_free:
            self._prev = lease
        return batch

    def _wait(self, h):
        """stk_loader_next, as short waits in C so that Python sees signals.
        libstoker's wait histogram then sees only the last of them, so the
        whole wait is recorded here too."""
        nxt = _lib.stk_loader_next_timeout
        if nxt is None:  # an older libstoker: one wait
            return _lib.stk_loader_next(h, self._out_ref)
        ref = self._out_ref
        t0 = _now_ns()
        rc = nxt(h, ref, _POLL_NS)
        while rc == _ETIMEDOUT:
            rc = nxt(h, ref, _POLL_NS)   # KeyboardInterrupt is raised between calls
        if rc == 1:
            hist = self._wait_hist
            hist.add(hist.h, _now_ns() - t0)
        return rc

    # --- CUDA ------------------------------------------------------------------

    def _to_device(self, host):
        """Copies data and labels to the device on the side stream; the current
        stream waits for the copy, and the host batch (its slot) is kept until
        the copy has finished."""
        dev = self._device
        cur = torch.cuda.current_stream(dev)
        big = host.images if isinstance(host, ImageBatch) else host.data
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
        self._pending_copies.append((ev, host))
        if isinstance(host, ImageBatch):
            batch = ImageBatch(data, labels)
            batch.indices = host.indices
            batch._raw = None  # the host slot is released once the copy is done
        else:
            batch = Batch(data, host.offsets, host.sizes, labels, host.indices)
        batch.epoch, batch.number, batch.slot = host.epoch, host.number, host.slot
        return batch

    def _reap_copies(self):
        """Drops the host batches whose copy is done; waits for the oldest when
        they would hold all but one slot."""
        q = self._pending_copies
        while q and (q[0][0].query() or len(q) >= self.prefetch - 1):
            ev, _ = q.popleft()
            ev.synchronize()

    def _drain_copies(self):
        q = self._pending_copies
        while q:
            ev, _ = q.popleft()
            ev.synchronize()

    # --- stats, close ----------------------------------------------------------

    def stats(self):
        """The loader's counters (struct stk_stats) as a dict, plus
        samples_per_s (samples since the last epoch start or reset_stats(),
        divided by wall_s) and decode_images_per_s_per_core (image mode:
        samples / decode_busy_s; 0.0 before any decode).  Times in seconds,
        *_ns latencies in nanoseconds; wall_s, wait_s and stall_ratio count
        from the last epoch start (a new iteration, set_epoch,
        load_state_dict) or reset_stats().  May be called from any thread."""
        st = _lib.Stats(size=ctypes.sizeof(_lib.Stats))
        core = self._core
        if core is None:
            raise ValueError("the loader is closed")
        with core.lock:  # not while another thread destroys the handle
            if core.h is None:
                raise ValueError(_closed_message(core))
            rc = _lib.stk_loader_stats(core.h, ctypes.byref(st))
        if rc < 0:
            raise error_from(rc, None, self._path)
        d = {name: getattr(st, name) for name in _STATS_FIELDS}
        d["pinned"] = bool(d["pinned"])
        hist = self._wait_hist
        if hist is not None:  # the whole waits, not their last poll (see _wait)
            d["wait_p50_ns"] = hist.percentile(50)
            d["wait_p99_ns"] = hist.percentile(99)
            d["wait_max_ns"] = hist.max()
        wall = d["wall_s"]
        d["samples_per_s"] = (d["samples"] - self._stats_base) / wall if wall > 0 else 0.0
        busy = d.get("decode_busy_s", 0.0)
        d["decode_images_per_s_per_core"] = d["samples"] / busy if busy > 0 else 0.0
        return d

    def reset_stats(self):
        """Zeroes the counters and latency histograms and restarts wall_s (e.g.
        after a warm-up).  Needs a libstoker with stk_loader_stats_reset."""
        fn = _lib.stk_loader_stats_reset
        if fn is None:
            raise NotImplementedError("this libstoker (%s) has no stk_loader_stats_reset"
                                      % _lib.lib_path)
        fn(self._handle())
        if self._wait_hist is not None:
            self._wait_hist.reset()
        self._stats_base = 0

    def serve_metrics(self, port=9464, host="127.0.0.1", name="loader"):
        """Serves this loader's metrics (with the machine's disks and GPUs) as
        Prometheus text on http://host:port/metrics from a C thread, until
        close().  Loopback unless told otherwise; port 0 picks a free one.
        Returns the port.  See docs/metrics.md for the names."""
        if _lib.stk_metrics_serve is None:
            raise NotImplementedError("this libstoker (%s) has no stk_metrics_serve"
                                      % _lib.lib_path)
        if getattr(self, "_metrics_srv", None):
            raise RuntimeError("this loader already serves its metrics")
        listen = ("[%s]:%d" % (host, port) if ":" in host else "%s:%d" % (host, port)).encode()
        srv = ctypes.c_void_p()
        rc = _lib.stk_metrics_serve(ctypes.byref(srv), listen, self._handle(),
                                    name.encode())
        if rc < 0:
            raise error_from(rc, "cannot serve metrics on %s: %s" % (
                listen.decode(), _lib.strerror(rc)), self._path)
        self._metrics_srv = srv
        return _lib.stk_metrics_server_port(srv)

    def _stop_metrics(self):
        srv = getattr(self, "_metrics_srv", None)
        if srv:
            self._metrics_srv = None
            _lib.stk_metrics_server_destroy(srv)

    def close(self):
        """Stops the loader: its I/O and decode threads are joined now.  Its
        memory is freed now if no tensor over its slots is alive, else when
        the last one is freed; until then those tensors stay valid
        (copy_free=True: freed now; earlier batches' tensors become invalid)."""
        core = self._core
        if core is None:
            return
        self._stop_metrics()  # its thread reads the loader: first
        self._core = None
        try:
            self._drain_copies()
        except Exception:
            pass
        if self._prev is not None:
            self._prev.release()
            self._prev = None
        out = self._out
        if out is not None and out.value:
            core.release(out.value, None)
            out.value = None
        self._views = {}
        if sys.is_finalizing():
            # Threads are torn down with the process; joining them now could
            # wait on a runtime that is going away.
            return
        core.close()

    @property
    def closed(self):
        return self._core is None

    def _handle(self):
        core = self._core
        if core is None or core.h is None:
            raise ValueError(_closed_message(core))
        return core.h

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self):
        if self._core is None:
            return "<stoker.Loader %r closed>" % (self._path,)
        return "<stoker.Loader %r batch_size=%d rank=%d/%d %d batches/epoch%s>" % (
            self._path, self.batch_size, self.rank, self.world_size, self._len,
            " image=%r" % (self.image,) if self.image is not None else "")
