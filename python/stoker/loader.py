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
import concurrent.futures
import ctypes
import errno
import gc
import inspect
import itertools
import logging
import numbers
import os
import sys
import threading
import time
import warnings

import numpy as np
import torch

from . import _lib, _resume, cuda, surface
from ._slots import _Core, _Lease, _SlotViews, _closed_message
from .batch import Batch, ImageBatch, VideoBatch
from .errors import error_from, option_error
from .image import Image
from .video import Video

_LOADER_ROWS = {n: r for n, r in _lib.OPTIONS.items() if r.group == _lib.OPT_LOADER}
_LOADER_DEFAULTS = {n: r.python_default() for n, r in _LOADER_ROWS.items()}
_LOADER_ALIASES = {a: n for n, r in _LOADER_ROWS.items() for a in r.aliases}
_U32 = 0xFFFFFFFF
_U64 = 0xFFFFFFFFFFFFFFFF
_POLL_NS = 100_000_000     # how long one wait in C lasts before Python checks signals
_ETIMEDOUT = -errno.ETIMEDOUT
_now_ns = time.monotonic_ns
_log = logging.getLogger("stoker")

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
        loader = self._loader
        if loader._pool is not None:
            loader._not_from_transform("next()")
            batch = loader._next_transformed(self._gen)
            loader._fresh = False
            return batch
        batch = loader._next(self._gen)
        loader._fresh = False  # a batch taken: the next iter() starts the next epoch
        fn = loader.batch_transform
        if fn is None:
            return batch
        if isinstance(batch, ImageBatch):
            return fn(batch.images, batch.labels)
        if isinstance(batch, VideoBatch):
            return fn(batch.clips, batch.labels)
        return fn(batch)

    def __len__(self):
        return len(self._loader)


class Loader:
    """Loads a dataset folder or file list in batches, asynchronously, in C.

    Args:
        path: a folder in torchvision ImageFolder layout (root/<class>/<file>,
            labels from the sorted class names), a flat folder (labels -1), a
            file list ("path[<TAB>label]" per line), or tar shards (a folder
            of .tar files, a glob, or "train-{000000..000146}.tar").
        batch_size: samples per batch.
        image: None (raw mode: batches of the files' bytes, stoker.Batch) or
            a stoker.Image (image mode: C threads decode and crop each JPEG
            into the batch; iteration yields stoker.ImageBatch, which unpacks
            as ``images, labels``), or a dict of Image's arguments.
        video: None, or a stoker.Video (video mode: each sample is a clip of
            a video file, clips_per_video clips a file; C threads decode and
            crop it into the batch; iteration yields stoker.VideoBatch, which
            unpacks as ``clips, labels`` and carries each clip's video,
            clip number and start time), or a dict of Video's arguments.
            Not with image.
        device: None or "cpu" (batches stay in pinned host memory), or a CUDA
            device: data (or images) and labels are copied there with
            non_blocking=True on a side stream that the current stream waits
            on.  Where no GPU can be used, stoker.DeviceError (a stoker.Error
            and a ValueError) names the cause.  Slots that cannot be pinned
            (no CUDA runtime, registration refused: RLIMIT_MEMLOCK...) are
            said once, in a RuntimeWarning with the reason; copies then go
            through pageable memory.
        copy_free: release each batch's slot when the next batch is asked for,
            even if tensors from it are still referenced: fastest, but then
            tensors from earlier batches must not be used.
        report_every: seconds; every so often while iterating, one line through
            logging (logger "stoker", INFO): samples/s, data stall %, the
            verdict and what to try (see diagnose()).  None: no report.
        batch_transform: fn(images, labels) (image mode), fn(clips, labels)
            (video mode) or fn(batch) (raw
            mode), run on each batch after the device copy; iteration yields
            what it returns (a collate_fn's place: Mixup, CutMix).
        sample_transform: raw mode: fn(sample bytes) per sample, on a pool of
            transform_threads threads the loader owns, a batch or two ahead;
            iteration yields stoker.SampleBatch(samples, labels).
        seed: not given: torch.initial_seed() (rank 0's under a process
            group), so torch.manual_seed governs it; load_state_dict then
            takes the state's.
        **options: every option of libstoker's option table, by name, with its
            default and range there (docs/options.md lists them: shuffle, seed,
            drop_last, rank, world_size, prefetch, queue_depth, io_threads,
            engine, on_error, direct, shuffle_mode, ...).  rank and
            world_size, given neither: the process group's when one is up,
            else the launcher's ($WORLD_SIZE and $RANK from torchrun, or Open
            MPI's), which libstoker reads as it reads local_rank and
            local_world_size (the ranks sharing this host's CPUs:
            stoker.cpu_share).  The table's aliases are accepted too (threads
            for io_threads, qd for queue_depth, ...).

    One thread iterates a loader (a next() while another thread's is under
    way raises RuntimeError); stats() and diagnose() may be called from any
    thread.  A Loader cannot be pickled: another process makes its own from
    the path, the options and state_dict().
    """

    # A DataLoader's attributes for code that builds a DataLoader from one's
    # (accelerate's skip_first_batches: over .dataset and .batch_sampler):
    # no worker processes, so no prefetch_factor (the batches read ahead are
    # `prefetch`), and a collate_fn that gives each batch as it is.
    prefetch_factor = None
    collate_fn = staticmethod(surface.one_batch)

    def __init__(self, path, batch_size=_LOADER_DEFAULTS["batch_size"], *, image=None,
                 video=None, device=None, copy_free=False, report_every=None, batch_transform=None,
                 sample_transform=None, transform_threads=None, publish_metrics=True,
                 **options):
        self._core = None
        self._pool = None
        copy_free = _lib.check_bool("copy_free", copy_free)
        publish_metrics = _lib.check_bool("publish_metrics", publish_metrics)
        if report_every is not None:
            if _lib.is_bool(report_every) or not isinstance(report_every, numbers.Real):
                raise TypeError("report_every must be a number of seconds or None, not %s"
                                % _lib.shown(report_every))
            if not report_every > 0:
                raise ValueError("report_every must be more than 0 seconds, not %r"
                                 % (report_every,))
        if transform_threads is not None:
            transform_threads = _lib.check_int("transform_threads", transform_threads, 1, _U32)
        if batch_transform is not None and not callable(batch_transform):
            raise TypeError("batch_transform must be callable, not %r" % (batch_transform,))
        if sample_transform is not None:
            if not callable(sample_transform):
                raise TypeError("sample_transform must be callable, not %r" % (sample_transform,))
            if image is not None or video is not None:
                raise ValueError("sample_transform is for raw mode (image=None, video=None): "
                                 "image and video modes decode in C; use batch_transform for "
                                 "a transform of the decoded batch")
            if copy_free:
                raise ValueError("sample_transform reads batches ahead of the loop: not with "
                                 "copy_free=True")
        self.batch_transform = batch_transform
        if image is not None and video is not None:
            raise ValueError("image and video together: a loader is in one mode (image=... "
                             "for pictures, video=... for clips)")
        if image is not None:
            image = Image._from(image)
        self.image = image
        if video is not None:
            video = Video._from(video)
        self.video = video
        for alias, name in _LOADER_ALIASES.items():  # the option table's
            if alias in options:
                if name in options:
                    raise TypeError("give %s or %s, not both" % (alias, name))
                options[name] = options.pop(alias)
        unknown = set(options) - set(_LOADER_ROWS)
        if unknown:
            raise surface.unknown_options(unknown, set(_LOADER_ROWS) | set(_LOADER_ALIASES) |
                                          set(_KEYWORDS))
        self._rank_default = "rank" not in options and "world_size" not in options
        rw = surface.default_rank_world() if self._rank_default else None
        if rw:  # a process group that is up; else libstoker reads the launcher's
            options["rank"], options["world_size"] = rw
        self._seed_checked = True
        self._seed_default = options.get("seed") is None
        if self._seed_default:  # torch's: manual_seed governs it
            options["seed"], self._seed_checked = surface.default_seed()
        options["batch_size"] = batch_size

        self._device = cuda.device_of(device)  # None: batches stay in host memory

        if not isinstance(path, (str, bytes, os.PathLike)):
            raise TypeError("path must be a str, bytes or os.PathLike, not %s"
                            % _lib.shown(path))
        self._path = os.fspath(path)
        o = _lib.LoaderOpts(size=ctypes.sizeof(_lib.LoaderOpts))
        self._keep = [os.fsencode(self._path)]  # what o points at, until create copies it
        o.path = self._keep[0]
        try:
            for name, value in options.items():
                row = _LOADER_ROWS[name]
                row.set(o, _lib.option_text(row, value), self._keep)
        except ValueError as e:  # the library's message: the option and its range
            raise option_error(getattr(e, "code", -errno.EINVAL), str(e)) from None
        if image is not None:
            self._image_opts = image._opts()  # kept alive while create reads it
            o.image = ctypes.pointer(self._image_opts)
        if video is not None:
            self._video_opts = video._opts()  # kept alive while create reads it
            o.video = ctypes.pointer(self._video_opts)
        err = ctypes.create_string_buffer(4096)
        rc = _lib.stk_loader_opts_check(ctypes.byref(o), err, len(err))
        if rc < 0:
            raise option_error(rc, err.value.decode("utf-8", "replace"))

        self._o = o                # kept (with _keep): a default seed may be replaced
        h = self._create(o)
        self._core = _Core(h)
        self._pub_name = _pub_name() if publish_metrics else None
        self._core.pub = _publish(h, self._pub_name)
        eff = self._options
        self.batch_size = eff.batch_size
        self.rank = eff.rank
        self.world_size = eff.world_size
        self.prefetch = eff.prefetch
        self.copy_free = copy_free
        self._report_every = None if report_every is None else float(report_every)
        self._report_next = None
        self._len = _lib.stk_loader_len(h)
        self._whole_len = self._len  # an epoch on this world size, as created
        self._elastic = False        # in an epoch resumed from another world size
        self._out = ctypes.c_void_p()
        self._out_ref = ctypes.byref(self._out)
        self._consumer = threading.Lock()  # held by the one thread inside _next
        self._views = {}
        self._prev = None          # copy_free: the lease to release on the next batch
        self._copier = cuda.Copier(self._device, self.prefetch, self._add_copy_wait) \
            if self._device is not None and sample_transform is None else None
        if sample_transform is not None:
            self._pool = surface.Pool(sample_transform,
                                      transform_threads or surface.threads_default())
            self._ahead = collections.deque()
            self._ahead_end = None
        self._sampler = surface.Sampler(self)
        self._batch_sampler = surface.BatchSampler(self)
        self._say_unpinned()
        self._pos = (0, 0)         # where the C loader was last started
        self._fresh = True         # no batch taken since that start
        self._want = None          # (epoch, batch) to start at on the next iter()
        self._iter_gen = 0
        self._at = (None, None)    # _batch_at's iterator and the batch it gives next

    def _create(self, o):
        """A C loader for options o; sets _options (what is in effect: defaults
        applied, auto resolved) and seed."""
        err = ctypes.create_string_buffer(4096)
        h = ctypes.c_void_p()
        rc = _lib.stk_loader_create(ctypes.byref(h), ctypes.byref(o), err, len(err))
        if rc < 0:
            detail = err.value.decode("utf-8", "replace") or None
            if rc == -errno.ERANGE:  # an option out of range, named by the library
                raise option_error(rc, detail)
            raise error_from(rc, detail, self._path)
        eff = _lib.LoaderOpts(size=ctypes.sizeof(_lib.LoaderOpts))
        _lib.stk_loader_options(h.value, ctypes.byref(eff), None)
        self._options = eff
        self.seed = eff.seed
        return h.value

    def _reseed(self, seed):
        """load_state_dict of a loader whose seed was torch's default: the
        state's seed replaces it (a resumed run is a new process, with a new
        default), so the rest of the epoch is the saved run's.  The C loader is
        made again with it (its index comes from the cache)."""
        self._before_restart()
        self._o.seed = seed
        h = self._create(self._o)
        old, self._core = self._core, _Core(h)
        self._views = {}
        old.close()
        self._core.pub = _publish(h, self._pub_name)  # the name the old one had
        self._len = self._whole_len = _lib.stk_loader_len(h)
        self._pos, self._fresh = (0, 0), True

    def _say_unpinned(self):
        """Once, at create: the slots are not pinned although pinning was asked
        for, and copies to a GPU will be slower for it.  Said whatever the
        reason with device="cuda"; without a device only when a GPU is there
        and the registration was refused (a CPU machine has no GPU to pin for)."""
        opts = self.options
        if opts.get("pin") != "true" or opts.get("quiet") == "true":
            return
        st = _lib.Stats(size=ctypes.sizeof(_lib.Stats))
        if _lib.stk_loader_stats(self._core.h, ctypes.byref(st)) < 0 or st.pinned:
            return
        rc, why = _lib.pin_probe(st.pool_bytes)
        if rc == 0:
            why = "the CUDA runtime was not usable when the loader was created"
        if self._device is None and rc not in (-errno.ENOMEM, -errno.EIO):
            return
        to = "to %s" % self._device if self._device is not None else "to a GPU"
        warnings.warn("stoker: the batch slots (%.1f MB) are not pinned: %s; copies %s go "
                      "through pageable memory (slower, and not overlapped with compute)"
                      % (st.pool_bytes / 1e6, why, to), RuntimeWarning, stacklevel=3)

    @property
    def options(self):
        """Every option in effect, as {name: text} in the library's terms
        (defaults applied, "auto" resolved to what the loader chose)."""
        return {name: row.get(self._options) for name, row in _LOADER_ROWS.items()}

    # --- what scripts read of a DataLoader -------------------------------------

    @property
    def dataset(self):
        """The dataset's index as scripts read an ImageFolder's: len(), classes,
        class_to_idx, samples ((path, label) by index), targets, root."""
        return surface.Dataset(self)

    @property
    def sampler(self):
        """DistributedSampler's face: set_epoch(e) (as loader.set_epoch), len()
        (this rank's samples per epoch), num_replicas, rank, seed, shuffle."""
        return self._sampler

    @property
    def batch_sampler(self):
        """BatchSampler's face: .sampler (the above), .batch_size, .drop_last,
        len() (batches per epoch for this rank)."""
        return self._batch_sampler

    @property
    def drop_last(self):
        return self._options.flags & _lib.OPTIONS["drop_last"].bit != 0

    # --- dataset queries -------------------------------------------------------

    def __len__(self):
        """Batches per epoch for this rank (shard shuffle: of the epoch last
        started, as shares follow the shards dealt to each rank; after an
        elastic resume: those before it plus this rank's share of the rest,
        or a whole epoch's on this world size if that is more, as a
        StatefulDataLoader's len() stays the whole epoch's: trainers that read
        len() once (Lightning) then do not cut the epochs after it short; the
        resumed epoch ends by itself)."""
        return max(self._len, self._whole_len) if self._elastic else self._len

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
    def cpu_share(self):
        """This rank's share of the host's CPUs, which set the default thread
        counts and where the loader's threads run (see stoker.cpu_share)."""
        st = _lib.CpuShare(size=ctypes.sizeof(_lib.CpuShare))
        rc = _lib.stk_loader_cpu_share(self._handle(), ctypes.byref(st))
        if rc < 0:
            raise error_from(rc, None, self._path)
        return st.as_dict()

    @property
    def engine(self):
        """The read engine in use: "io_uring", "pread" or "null"."""
        return _lib.stk_loader_engine(self._handle()).decode("ascii")

    @property
    def last_error(self):
        """The last bad sample or failure the loader met, "<path>: <reason>"
        ("" if none): under on_error="skip" or "replace" the one last counted
        in stats()["errors"], or what the index left out."""
        return _lib.stk_last_error(self._handle()).decode("utf-8", "replace")

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
        epoch = _lib.check_int("epoch", epoch, 0, _U64)
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
        d = _resume.to_dict(p, self.world_size, want)
        held = len(self._ahead) if self._pool is not None and want is None else 0
        if held:  # batches taken for sample_transform, not yet yielded
            d["batches"] -= held
            d["segments"][-1][1] -= held
        return d

    def load_state_dict(self, state):
        """Resumes at a state_dict() saved by any number of ranks: the next
        iteration yields this rank's share of the rest of that epoch.  On the
        same world size that is the same batches in the same order as an
        uninterrupted run; on another, the rest is split over the new ranks so
        that every sample not yet read is read once (shard shuffle: whole
        shards per rank).  A state from another dataset, seed, batch size or
        order options raises ValueError saying what differs."""
        self._not_from_transform("load_state_dict()")
        p = _resume.from_dict(state)
        self._handle()
        if self._seed_default and p.seed != self.seed:
            self._reseed(p.seed)  # the saved run's seed, on every rank alike
            self._seed_checked = True
        h = self._handle()
        self._before_restart()
        rc = _lib.stk_loader_resume(h, ctypes.byref(p))
        if rc < 0:
            detail = _lib.stk_last_error(h).decode("utf-8", "replace")
            if rc in (-errno.EINVAL, -errno.ERANGE, -errno.E2BIG):
                raise ValueError("cannot resume %s: %s" % (self._path, detail))
            raise error_from(rc, detail, self._path)
        self._after_restart(p.epoch, sum(p.segments[i].batches for i in range(p.nsegments)))
        self._elastic = p.nsegments > 1 or p.segments[0].world_size != self.world_size
        self._want = None

    def _next_epoch(self):
        """The epoch the next iter() runs."""
        if self._want is not None:
            return self._want[0]
        return self._pos[0] if self._fresh else self._pos[0] + 1

    def _batch_at(self, at):
        """Batch `at` (epoch, number), for a DataLoader built over .dataset and
        .batch_sampler (surface.BatchSampler): the loader starts there unless
        it is already, as set_epoch and a resume point start it."""
        it, nxt = self._at
        if it is None or nxt != at or it._gen != self._iter_gen:
            self._want = tuple(at)
            it = iter(self)
        batch = next(it)
        self._at = (it, (at[0], at[1] + 1))
        return batch

    def _not_from_transform(self, what):
        """Refuses a call from this loader's own sample_transform: the loader
        waits for its transforms, so one that waits for the loader (the next
        batch, a restart, close) would wait for itself."""
        pool = self._pool
        if pool is not None and pool.inside():
            raise RuntimeError(
                "stoker.Loader %r: %s called from inside its own sample_transform; the "
                "loader waits for its transforms, so this would wait for itself (a "
                "deadlock): a transform takes one sample's bytes and returns, and the "
                "training loop calls the loader" % (self._path, what))

    def _before_restart(self):
        if self._pool is not None:
            self._drop_ahead()
        if self._copier is not None:
            self._copier.drain()
        if self._prev is not None:
            self._prev.release()
            self._prev = None

    def _after_restart(self, epoch, batch):
        self._len = _lib.stk_loader_len(self._handle())
        self._elastic = False
        self._pos = (epoch, batch)
        self._fresh = True

    def _start(self, epoch, batch):
        h = self._handle()
        self._before_restart()
        rc = _lib.stk_loader_start(h, epoch, batch)
        if rc < 0:
            raise error_from(rc, _lib.stk_last_error(h).decode("utf-8", "replace"), self._path)
        self._after_restart(epoch, batch)

    def __iter__(self):
        self._not_from_transform("iter()")
        self._handle()
        if self._rank_default:  # made before a process group that is up now?
            self._rank_default = surface.check_rank_world(self.rank, self.world_size)
        if not self._seed_checked:  # a default seed: every rank must have the same
            self._seed_checked = self.world_size == 1 or surface.agree(self.seed,
                                                                      self.world_size)
        if self._want is not None:
            epoch, batch = self._want
            self._want = None
            if not (self._fresh and self._pos == (epoch, batch)):
                self._start(epoch, batch)
        elif not self._fresh:
            self._start(self._pos[0] + 1, 0)
        self._iter_gen += 1
        return _EpochIter(self, self._iter_gen)

    # --- the batches -----------------------------------------------------------

    def _next(self, gen):
        # One consumer: _out, _prev and the copier are this thread's while it
        # is here.  A second thread is refused, never served another batch's
        # bytes (nor made to wait: with copy_free its next() would release
        # the first thread's batch).
        if not self._consumer.acquire(blocking=False):
            raise RuntimeError(
                "stoker.Loader %r: next() called from two threads at once; a loader has "
                "one consumer thread (iterate it in one thread, or give each thread its "
                "own Loader: rank/world_size split the samples)" % (self._path,))
        try:
            return self._next_locked(gen)
        finally:
            self._consumer.release()

    def _next_locked(self, gen):
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
        copier = self._copier
        if self._prev is not None:
            prev, self._prev = self._prev, None
            if copier is not None:
                copier.drain()
            prev.release()
        elif copier is not None:
            copier.reap()

        rc = _lib.stk_loader_next_timeout(h, self._out_ref, _POLL_NS)
        if rc == _ETIMEDOUT:
            rc = self._wait(h)
        if rc == _lib.ENOSLOT and core.owned:
            # Slots may be held only by finished GPU copies or by batches in
            # reference cycles: free those and try once more.
            if copier is not None:
                copier.drain()
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
        if n == self.batch_size and views.block is not None:
            meta = views.block.copy()
        else:
            meta = np.concatenate((views.offsets[:n + 1], views.sizes[:n], views.labels[:n],
                                   views.indices[:n]))
        img = views.image
        if views.video is not None:
            off, cb, shape, info = views.video
            lease = _Lease(core, addr, v.data or v.clips, off + n * cb)
            out.value = None
            span = np.asarray(lease)
            clips = span[off:off + n * cb].reshape((n,) + shape)
            batch = VideoBatch(torch.from_numpy(clips),
                               torch.from_numpy(meta[2 * n + 1:3 * n + 1]))
            batch.indices = torch.from_numpy(meta[3 * n + 1:])
            ci = info[:n].copy()
            batch.clip_ids = torch.from_numpy(ci["clip"].astype(np.int64))
            batch.starts = torch.from_numpy(ci["start_s"].copy())
            batch.start_pts = torch.from_numpy(ci["start_pts"].copy())
            batch.frames_decoded = torch.from_numpy(ci["frames_decoded"].astype(np.int64))
            batch.padded = torch.from_numpy(ci["padded"].astype(np.int64))
        elif img is None:
            lease = _Lease(core, addr, v.data, v.data_bytes)
            out.value = None
            batch = Batch(torch.from_numpy(np.asarray(lease)), torch.from_numpy(meta[:n + 1]),
                          torch.from_numpy(meta[n + 1:2 * n + 1]),
                          torch.from_numpy(meta[2 * n + 1:3 * n + 1]),
                          torch.from_numpy(meta[3 * n + 1:]))
        else:
            # One lease over the raw bytes and the images: every view keeps the slot.
            off, ib, shape, dt = img
            lease = _Lease(core, addr, v.data or v.images, off + n * ib)
            out.value = None
            span = np.asarray(lease)
            images = span[off:].view(dt).reshape((n,) + shape)
            batch = ImageBatch(torch.from_numpy(images),
                               torch.from_numpy(meta[2 * n + 1:3 * n + 1]))
            batch.indices = torch.from_numpy(meta[3 * n + 1:])
            batch._raw = (span, meta, n, v.data_bytes) if v.data else None
        batch.epoch = v.epoch
        batch.number = v.number
        batch.slot = v.slot
        if copier is not None:
            batch = copier.to_device(batch)
        if self.copy_free:
            self._prev = lease
        if self._report_every is not None:
            now = time.monotonic()
            if self._report_next is None:
                self._report_next = now + self._report_every
            elif now >= self._report_next:
                self._report_next = now + self._report_every
                self._report()
        return batch

    def _next_transformed(self, gen):
        """sample_transform: the batches a batch or two ahead are being
        transformed on the pool while the loop trains on this one."""
        ahead, pool = self._ahead, self._pool
        if gen != self._iter_gen:
            self._next(gen)  # raises: superseded
        depth = max(1, min(2, self.prefetch - 1))
        while len(ahead) < depth and self._ahead_end != gen:
            try:
                b = self._next(gen)
            except StopIteration:
                self._ahead_end = gen
                break
            ahead.append(pool.submit(b))
        if not ahead:
            raise StopIteration
        return pool.finish(self, ahead, self._device)

    def _drop_ahead(self):
        while self._ahead:
            _, futs = self._ahead.popleft()
            for f in futs:
                f.cancel()
            concurrent.futures.wait(futs)
        self._ahead_end = None

    def _wait(self, h):
        """stk_loader_next, as short waits in C so that Python sees signals
        (libstoker counts the polls of one batch as one wait)."""
        nxt = _lib.stk_loader_next_timeout
        ref = self._out_ref
        rc = nxt(h, ref, _POLL_NS)
        while rc == _ETIMEDOUT:
            rc = nxt(h, ref, _POLL_NS)   # KeyboardInterrupt is raised between calls
        return rc

    def _add_copy_wait(self, ns):
        """The consumer's wait for a device copy, counted by the library (stats
        copy_wait_s, the gpu-copy-bound verdict)."""
        core = self._core
        if core is not None and core.h is not None:
            _lib.stk_loader_add_time(core.h, _lib.TIME_COPY_WAIT, ns)

    # --- stats, close ----------------------------------------------------------

    def stats(self):
        """The loader's counters (struct stk_stats) as a dict.  One time base,
        the library's: every figure is over the window since the loader was
        created or reset_stats() (wall_s long), samples_per_s, mb_per_s and
        decode_images_per_s_per_core included; the total_* figures run from
        creation and are never reset.  Times in seconds, *_ns latencies in
        nanoseconds.  May be called from any thread."""
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
        d["direct"] = bool(d["direct"])
        for name in ("format_decoded", "format_decode_busy_s", "format_fast_share"):
            d[name] = dict(zip(_lib.FORMATS, d[name]))  # {"jpeg": ..., "png": ..., "webp": ...}
        d["tuning"] = self.tuning()
        return d

    def memory(self):
        """The memory this loader takes, by libstoker's sizing rule (the one
        `stoker doctor` and `stoker bench` print): slot pool, index, per-slot
        records and decode threads' working memory, in bytes."""
        m = _lib.Memory(size=ctypes.sizeof(_lib.Memory))
        rc = _lib.stk_loader_memory(self._handle(), ctypes.byref(m))
        if rc < 0:
            raise error_from(rc, None, self._path)
        return {name: getattr(m, name) for name, _ in _lib.Memory._fields_ if name != "size"}

    def remote_stats(self):
        """Remote data (s3://, http(s)://): the transport's counters (requests,
        retries, failed, short bodies, bytes, in flight, retrying: requests
        waiting now to be tried again, per-request latency; window: the bytes a
        miss fetches around it, windows: how many were fetched, streamed: the
        misses filled from their window's stream as it came)
        and the local cache's (hits, misses, evictions, bytes, limit) since
        creation, as a dict; None for local data.  Any thread."""
        st = _lib.RemoteStats(size=ctypes.sizeof(_lib.RemoteStats))
        core = self._core
        if core is None:
            raise ValueError("the loader is closed")
        with core.lock:
            if core.h is None:
                raise ValueError(_closed_message(core))
            rc = _lib.stk_loader_remote_stats(core.h, ctypes.byref(st))
        if rc < 0:
            return None
        d = {name: getattr(st, name) for name, _ in st._fields_ if name != "size"}
        d["root"] = d["root"].decode(errors="replace")
        d["credentials"] = d["credentials"].decode(errors="replace")
        d["cache_on"] = bool(d["cache_on"])
        return d

    def tuning(self):
        """What the loader chose for the settings left to it, and why: the read
        mode (O_DIRECT or buffered), the queue depth (auto: the probe's
        figures) and the I/O threads, one line each (stk_loader_tuning)."""
        buf = ctypes.create_string_buffer(2048)
        core = self._core
        if core is None:
            raise ValueError("the loader is closed")
        with core.lock:
            if core.h is None:
                raise ValueError(_closed_message(core))
            _lib.stk_loader_tuning(core.h, buf, len(buf))
        return buf.value.decode(errors="replace")

    def reset_stats(self):
        """Starts a new stats window now (e.g. after a warm-up): the window's
        counters, latency histograms and wall_s restart; total_* go on."""
        _lib.stk_loader_stats_reset(self._handle())

    def diagnose(self, window=10.0):
        """What holds the input pipeline back, over the last `window` seconds
        (the library keeps a minute; 0: the stats window since creation or
        reset_stats()): a dict with "kind" ("consumer-bound", "storage-bound",
        "decode-bound", "io-thread-bound", "configuration", "gpu-copy-bound",
        "network-bound" (remote data) or "unknown"), "evidence" and "try" (sentences), and the figures
        behind it (samples_per_s, stall_ratio, decode_busy, inflight_mean,
        the device's iostat -x figures when sampled).  The same verdict as
        `stoker bench` and the exporter.  May be called from any thread."""
        v = _lib.Verdict(size=ctypes.sizeof(_lib.Verdict))
        core = self._core
        if core is None:
            raise ValueError("the loader is closed")
        with core.lock:
            if core.h is None:
                raise ValueError(_closed_message(core))
            rc = _lib.stk_loader_diagnose(core.h, float(window), ctypes.byref(v))
        if rc < 0:
            raise error_from(rc, None, self._path)
        d = {"kind": v.name.decode(), "evidence": v.evidence.decode("utf-8", "replace"),
             "try": v.advice.decode("utf-8", "replace")}
        for name, _ in _lib.Verdict._fields_:
            if name not in ("size", "kind", "name", "evidence", "advice", "device",
                            "device_sampled") and not name.startswith("dev_"):
                d[name] = getattr(v, name)
        if v.device_sampled:
            d["device"] = {"name": v.device.decode(), "r_s": v.dev_r_s,
                           "read_mb_s": v.dev_read_mb_s, "r_await_ms": v.dev_r_await_ms,
                           "aqu_sz": v.dev_aqu_sz, "util": v.dev_util, "share": v.dev_share}
        return d

    def _report(self):
        """report_every's line, through logging."""
        v = self.diagnose(self._report_every)
        _log.info("stoker: %.0f samples/s, data stall %.0f %%: %s: %s; try: %s",
                  v["samples_per_s"], v["stall_ratio"] * 100, v["kind"], v["evidence"],
                  v["try"])

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
        self._not_from_transform("close()")
        self._stop_metrics()  # its thread reads the loader: first
        if self._pool is not None:
            self._drop_ahead()
            self._pool.close()
        self._core = None
        if self._copier is not None:
            try:
                self._copier.drain()
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

    def __reduce__(self):
        raise TypeError(
            "a stoker.Loader cannot be pickled (it holds C threads and the batch memory): "
            "pass what it was made from (loader.path and the options given to it; "
            "loader.options lists every one in effect) and its position "
            "(loader.state_dict()) to the other process, make a Loader there and "
            "load_state_dict() the position")

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
            " image=%r" % (self.image,) if self.image is not None else
            " video=%r" % (self.video,) if self.video is not None else "")


# Loader's own keyword arguments (not options): for the nearest-name hint
_published = itertools.count(1)


def _pub_name():
    """loader="python", then "python-2", ... in this process."""
    n = next(_published)
    return b"python" if n == 1 else b"python-%d" % n


def _publish(h, name):
    """Publishes loader h for `stoker exporter` (stk_metrics_dir(): /run/stoker
    or the user's cache folder; $STOKER_METRICS_DIR) under name, rewritten
    every 5 s until close().  None when name is None, or where no such folder
    can be written: nothing to show, nothing said."""
    if name is None:
        return None
    pub = ctypes.c_void_p()
    if _lib.stk_loader_publish(ctypes.byref(pub), h, None, name, 0.0) < 0:
        return None
    return pub


_KEYWORDS = [p for p in inspect.signature(Loader.__init__).parameters
             if p not in ("self", "options")]
