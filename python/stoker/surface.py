"""What training scripts touch of a DataLoader, on a stoker.Loader; the
default seed; and the user's own transforms.

- loader.dataset: len() (samples in the dataset), .classes, .class_to_idx,
  .samples / .imgs ((path, label) pairs, read from the index on access),
  .targets, .root: what torchvision's ImageFolder offers scripts that only
  look (the reference script's `len(data_loader.dataset)`).
- loader.sampler: set_epoch() (DistributedSampler's), len(): this rank's
  samples per epoch.  Lightning calls it at each epoch start.
- The default seed (seed= not given) follows torch's RNG: torch.initial_seed(),
  so torch.manual_seed(s) before creating the loader fixes the order and an
  unseeded run differs from the last.  Every rank must use one seed: with a
  process group up, rank 0's is broadcast; else each rank takes its own and
  the first iter() with a process group up compares them (see agree()).
- batch_transform: fn(images, labels) in image mode (torchvision's v2 MixUp,
  CutMix: the place a collate_fn held), fn(batch) in raw mode; run on the
  consumer's thread after the device copy.
- A DataLoader's keywords (num_workers, pin_memory, collate_fn, sampler,
  prefetch_factor, ...) given to a Loader: unknown_options() says what stoker
  does instead, by the Loader's real keyword names; any other unknown name
  gets the nearest real one (difflib), never the list of every option.
- sample_transform (raw mode): fn(sample bytes) per sample, on a thread pool
  the loader owns, a batch or two ahead of the training loop.  The loader
  waits for its pool (next(), a restart, close()), so a transform that calls
  its own loader would wait for itself: Pool.inside() tells the loader's
  methods so, and they refuse (RuntimeError) instead of deadlocking.
"""

import collections
import collections.abc
import concurrent.futures
import difflib
import os
import threading
import traceback

import torch

from .batch import _Movable


def _dist():
    """torch.distributed when a process group is up, else None."""
    d = getattr(torch, "distributed", None)
    if d is not None and d.is_available() and d.is_initialized():
        return d
    return None


def default_rank_world():
    """(rank, world_size) from a process group that is up, else None."""
    d = _dist()
    return (d.get_rank(), d.get_world_size()) if d is not None else None


def check_rank_world(rank, world_size):
    """At an iter() of a loader whose rank and world size were defaults: a
    process group that is up now must agree with them (a loader made before
    Lightning's or accelerate's processes were set up took WORLD_SIZE from an
    environment that said otherwise).  Returns False once checked."""
    rw = default_rank_world()
    if rw is None:
        return True
    if rw != (rank, world_size):
        raise ValueError(
            "stoker.Loader: made as rank %d of %d, but the process group says rank %d of %d: "
            "it was created before the processes were set up.  Create it after "
            "torch.distributed.init_process_group() (with Lightning: in the "
            "*_dataloader() hooks), or pass rank= and world_size=" % ((rank, world_size) + rw))
    return False


def default_seed():
    """(seed, checked): torch's initial seed, rank 0's where a process group is
    up (checked True: every rank has it).  Not a draw: the user's random
    stream is left as it was."""
    seed = torch.initial_seed() & 0xFFFFFFFFFFFFFFFF
    d = _dist()
    if d is None or d.get_world_size() == 1:
        return seed, d is not None
    box = [seed]
    d.broadcast_object_list(box, src=0)
    return int(box[0]), True


def agree(seed, world_size):
    """At the first iter() of a loader whose seed was not given and not yet
    checked: every rank must have drawn the same one, or their shares
    overlap.  Returns True when checked (a process group is up)."""
    d = _dist()
    if d is None or world_size == 1:
        return False
    seeds = [None] * d.get_world_size()
    d.all_gather_object(seeds, int(seed))
    if len(set(seeds)) > 1:
        raise ValueError(
            "stoker.Loader: the ranks' default seeds differ (%s): each rank took its own "
            "torch.initial_seed(), so their shares of each epoch would overlap.  Call "
            "torch.manual_seed(<same value>) on every rank before creating the loader "
            "(lightning.seed_everything does), pass seed=, or create the loader after "
            "torch.distributed.init_process_group()" % ", ".join(str(s) for s in seeds))
    return True


class Dataset:
    """loader.dataset: the dataset's index, as scripts read an ImageFolder's."""

    def __init__(self, loader):
        self._loader = loader

    def __len__(self):
        return self._loader.num_samples

    @property
    def root(self):
        return self._loader.path

    @property
    def classes(self):
        return self._loader.classes

    @property
    def class_to_idx(self):
        return {c: i for i, c in enumerate(self.classes)}

    @property
    def samples(self):
        """(path, label) of every sample, by index (read on access)."""
        return _Samples(self._loader, False)

    imgs = samples

    @property
    def targets(self):
        return _Samples(self._loader, True)

    def __getitem__(self, key):
        """The batch that `key` (what loader.batch_sampler's iteration yields)
        names, for a torch DataLoader built over loader.dataset and
        loader.batch_sampler: accelerate's skip_first_batches builds one."""
        if isinstance(key, _At):
            return self._loader._batch_at(key)
        raise TypeError("loader.dataset[...] takes the batch names that loader.batch_sampler "
                        "yields, not %s: a sample's (path, label) is loader.dataset.samples[i]"
                        % type(key).__name__)

    def __repr__(self):
        return "<stoker dataset %r: %d samples, %d classes>" % (
            self.root, len(self), len(self.classes))


class _Samples(collections.abc.Sequence):
    __slots__ = ("_loader", "_label")

    def __init__(self, loader, label):
        self._loader = loader
        self._label = label

    def __len__(self):
        return self._loader.num_samples

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("sample index out of range")
        path, _, label = self._loader.sample(i)
        return label if self._label else (path, label)


class Sampler:
    """loader.sampler: DistributedSampler's set_epoch, and its len()."""

    def __init__(self, loader):
        self._loader = loader

    def set_epoch(self, epoch):
        self._loader.set_epoch(epoch)

    def __len__(self):
        return self._loader.samples_per_epoch

    @property
    def num_replicas(self):
        return self._loader.world_size

    @property
    def rank(self):
        return self._loader.rank

    @property
    def seed(self):
        return self._loader.seed

    @property
    def shuffle(self):
        return self._loader.options.get("shuffle") == "true"


class BatchSampler:
    """loader.batch_sampler: BatchSampler's face over loader.sampler (len():
    batches per epoch for this rank)."""

    def __init__(self, loader):
        self._loader = loader

    @property
    def sampler(self):
        return self._loader.sampler

    @property
    def batch_size(self):
        return self._loader.batch_size

    @property
    def drop_last(self):
        return self._loader.drop_last

    def __len__(self):
        return len(self._loader)

    def __iter__(self):
        """One [name] per batch of the epoch the loader runs next, as a
        BatchSampler's lists of indices: a torch DataLoader built over
        loader.dataset and this (accelerate's skip_first_batches: it drops the
        first names) gets dataset[name], the loader's batch, from its
        collate_fn as it is.  Nothing is read for the names skipped: the
        loader starts at the first batch asked for."""
        loader = self._loader
        epoch, k = loader._next_epoch(), 0
        while k < len(loader):
            yield [_At((epoch, k))]
            k += 1


class _At(tuple):
    """(epoch, number): a batch, as BatchSampler's iteration names it."""

    __slots__ = ()


def one_batch(items):
    """A DataLoader's collate_fn over BatchSampler's names: each list holds
    one name, so the one batch fetched is the batch, as it is."""
    return items[0]


# DataLoader keywords, with what a stoker.Loader does instead.  Every `name=`
# here is a real keyword of Loader or Image (a test checks it).
HABITS = {
    "num_workers": "stoker has no worker processes: C threads read (io_threads=, "
                   "default from the CPUs: stoker.cpu_share) and decode "
                   "(image=stoker.Image(decode_threads=)); a per-sample Python function goes "
                   "in sample_transform= on transform_threads= threads",
    "pin_memory": "batches are in pinned memory already (pin=True is the default); "
                  "device=\"cuda\" copies each batch to the GPU on a side stream",
    "pin_memory_device": "device=\"cuda:N\" copies each batch there",
    "collate_fn": "batches are built in C; batch_transform= runs on each batch "
                  "(fn(images, labels) in image mode, fn(batch) in raw mode: Mixup, "
                  "CutMix), sample_transform= on each sample",
    "sampler": "the order and the split are options: shuffle=, seed=, "
               "shuffle_mode=\"global\" or \"shard\", rank= and world_size= (the process "
               "group's or torchrun's when not given, as DistributedSampler's); "
               "loader.sampler.set_epoch(e) is there",
    "batch_sampler": "batch_size= and drop_last= make the batches; shuffle=, seed=, "
                     "rank= and world_size= the order and the split",
    "prefetch_factor": "prefetch= is the batches read ahead for the whole loader "
                       "(not per worker)",
    "persistent_workers": "the loader's threads live as long as the loader; nothing to set",
    "worker_init_fn": "there are no worker processes to set up; sample_transform= runs in "
                      "this process, on the loader's threads",
    "generator": "seed= sets the order (torch.initial_seed() when not given)",
}


def unknown_options(names, known):
    """The TypeError for Loader keywords that are not options: a DataLoader
    habit says what stoker does instead; a misspelling, the nearest of
    `known` (the table's names and aliases, Loader's own keywords)."""
    lines = []
    for name in sorted(names):
        if name in HABITS:
            lines.append("%s= is a DataLoader keyword; %s" % (name, HABITS[name]))
            continue
        near = difflib.get_close_matches(name, sorted(known), n=1)
        lines.append("%s= is not an option%s" % (
            name, "; did you mean %s=?" % near[0] if near else ""))
    if len(lines) == 1:
        text = "a keyword it does not take: " + lines[0]
    else:
        text = "keywords it does not take:\n  " + "\n  ".join(lines)
    return TypeError("stoker.Loader() got %s\n(docs/options.md lists every option)" % text)


class TransformError(RuntimeError):
    """A user's transform raised: the message names the sample (its path and
    index); the original exception is __cause__.  The loader stays usable:
    the next next() gives the next batch."""

    def __init__(self, message, path=None, index=None):
        super().__init__(message)
        self.path = path
        self.index = index


class SampleBatch(_Movable, collections.namedtuple("SampleBatch", "samples labels")):
    """What a raw-mode loader with sample_transform yields: the transform's
    outputs (stacked into one tensor when they are tensors of one shape, else
    a list) and the labels.  Attributes: indices, epoch, number, count;
    .to(device, ...) moves the tensors and keeps them."""

    @property
    def count(self):
        return self.labels.shape[0]


class Pool:
    """sample_transform's threads: one pool per loader, `threads` wide."""

    def __init__(self, fn, threads):
        self.fn = fn
        self.threads = threads
        self.ex = concurrent.futures.ThreadPoolExecutor(threads, thread_name_prefix="stk-py")
        self._in = threading.local()  # .on: this thread runs fn now

    def _run(self, data):
        here = self._in
        here.on = True
        try:
            return self.fn(data)
        finally:
            here.on = False

    def inside(self):
        """Whether the calling thread is running this pool's transform."""
        return getattr(self._in, "on", False)

    def submit(self, batch):
        """Starts the batch's samples; returns what finish() takes."""
        run = self._run
        views = batch.samples()
        futs = [self.ex.submit(run, v) for v in views]
        return batch, futs

    def finish(self, loader, ahead, device):
        """The first batch of `ahead` (submit()'s), transformed; it leaves
        `ahead` unless a Ctrl-C interrupted the wait for it: then it stays
        first, and the next call finishes it (state_dict() does not count it
        as yielded).  KeyboardInterrupt and SystemExit, from the wait or
        raised by the transform, reach the caller as they are; an Exception
        from the transform becomes a TransformError naming the sample."""
        batch, futs = ahead[0]
        out = []
        for i, f in enumerate(futs):
            try:
                out.append(f.result())
            except Exception as e:
                ahead.popleft()
                for g in futs[i + 1:]:
                    g.cancel()
                concurrent.futures.wait(futs)
                idx = int(batch.indices[i])
                path = loader.sample(idx)[0]
                err = TransformError("sample_transform raised %s on sample %d (%s) of epoch %d "
                                     "batch %d: %s" % (type(e).__name__, idx, path, batch.epoch,
                                                       batch.number, e), path, idx)
                # The traceback keeps its lines, not the frames' locals: a
                # sample's bytes there would hold its batch slot while the
                # exception is kept.
                traceback.clear_frames(e.__traceback__)
                batch = futs = out = f = None
                raise err from e
            except BaseException as e:
                if f.done() and not f.cancelled() and f.exception() is e:
                    # The transform raised it (sys.exit(), a KeyboardInterrupt
                    # of its own): the batch goes, the rest of it is not waited
                    # for, and the exception is the caller's as it is.
                    ahead.popleft()
                    for g in futs:
                        g.cancel()
                    traceback.clear_frames(e.__traceback__)
                batch = futs = out = f = None
                raise
        ahead.popleft()
        if out and all(isinstance(t, torch.Tensor) for t in out) and \
                len({(t.shape, t.dtype) for t in out}) == 1:
            out = torch.stack(out)
            if device is not None:
                out = out.to(device, non_blocking=True)
        labels = batch.labels if device is None else batch.labels.to(device, non_blocking=True)
        sb = SampleBatch(out, labels)
        sb.indices, sb.epoch, sb.number = batch.indices, batch.epoch, batch.number
        return sb

    def close(self):
        self.ex.shutdown(wait=True, cancel_futures=True)


def threads_default():
    return max(1, (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                   else os.cpu_count() or 1) - 1)
