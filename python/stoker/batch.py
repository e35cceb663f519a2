"""stoker.Batch, stoker.ImageBatch and stoker.VideoBatch: what iterating a
Loader yields.

They are namedtuples (``images, labels = batch`` unpacks as a DataLoader's
batch does) with attributes besides the fields (indices, epoch, number,
slot).  A trainer that moves a namedtuple by rebuilding it from its fields
(Lightning's apply_to_collection, torch's default_convert) would drop those;
but Lightning (move_data_to_device) and accelerate (send_to_device) call the
.to() of any object that has one, and .to() here keeps them.
"""

import collections

import torch


def _moved(x, args, kwargs):
    """x with its tensors moved by Tensor.to(*args, **kwargs); lists and
    tuples of tensors (a SampleBatch's outputs) too; anything else as it is."""
    if isinstance(x, torch.Tensor):
        return x.to(*args, **kwargs)
    if type(x) in (list, tuple):
        return type(x)(_moved(v, args, kwargs) for v in x)
    return x


class _Movable:
    """.to() for the batch namedtuples: every tensor, field or attribute, moved
    as Tensor.to moves it; epoch, number and slot kept.  The batch itself
    when nothing moves."""

    __slots__ = ()

    def to(self, *args, **kwargs):
        fields = [_moved(f, args, kwargs) for f in self]
        attrs = {k: _moved(v, args, kwargs) for k, v in self.__dict__.items() if k != "_raw"}
        if all(a is b for a, b in zip(fields, self)) and \
                all(v is self.__dict__[k] for k, v in attrs.items()):
            return self
        out = type(self)(*fields)
        out.__dict__.update(attrs)
        if "_raw" in self.__dict__:
            out._raw = None  # the file bytes stay in the host slot
        return out


class Batch(_Movable, collections.namedtuple("Batch", "data offsets sizes labels indices")):
    """One batch in raw mode: the samples' bytes, back to back.

    Fields (torch tensors; unpack as ``data, offsets, sizes, labels, indices``):
        data:    uint8, flat: the slot memory itself (no copy); on `device`
                 when one was given;
        offsets: int64, count + 1 entries; sample i starts at offsets[i];
                 offsets[count] == len(data);
        sizes:   int64, count entries; sample i is data[offsets[i] :
                 offsets[i] + sizes[i]] (offsets[i + 1] - offsets[i] can
                 exceed sizes[i]: a whole file is read with one byte more, to
                 catch a file that grew since indexing, and with direct=True
                 samples are padded to 4 KiB);
        labels:  int64, count entries (-1 for unlabelled samples); on `device`
                 when one was given;
        indices: int64, count entries: each sample's index in the dataset
                 (see Loader.sample).

    Attributes: epoch, number (position in the epoch, from 0), slot (the pool
    slot the bytes live in), count (samples in this batch: fewer than the batch
    size when samples were skipped under on_error="skip", or in the last batch).
    .to(device, ...) moves every tensor as Tensor.to does and keeps them.
    """

    @property
    def count(self):
        """Samples in the batch."""
        return self.sizes.shape[0]

    def __repr__(self):
        return "Batch(epoch=%s, number=%s, count=%d, bytes=%d, slot=%s, device=%s)" % (
            getattr(self, "epoch", "?"), getattr(self, "number", "?"), self.count,
            self.data.shape[0], getattr(self, "slot", "?"), self.data.device)

    def sample(self, i):
        """Sample i's bytes: a uint8 view into `data`."""
        start = int(self.offsets[i])
        return self.data[start:start + int(self.sizes[i])]

    def samples(self):
        """The samples' bytes as a list of uint8 views into `data`."""
        offs = self.offsets.tolist()
        sizes = self.sizes.tolist()
        data = self.data
        return [data[o:o + s] for o, s in zip(offs, sizes)]


class ImageBatch(_Movable, collections.namedtuple("ImageBatch", "images labels")):
    """One batch in image mode (Loader(image=stoker.Image(...))).

    Unpacks as ``images, labels``, like a DataLoader over an ImageFolder:
        images: (count, 3, H, W), or (count, H, W, 3) with layout="nhwc",
                uint8 / float32 / float16 as the Image asked: the slot memory
                itself (no copy); on `device` when one was given;
        labels: int64, count entries (-1 for unlabelled samples); on `device`
                when one was given.

    Attributes: indices (int64 tensor: each sample's index in the dataset,
    see Loader.sample), epoch, number (position in the epoch, from 0), slot
    (the pool slot), count (samples: fewer than the batch size when samples
    were skipped under on_error="skip", or in the last batch), and raw: the
    samples' file bytes as a stoker.Batch over the same slot (None when the
    batch was copied to a device).  .to(device, ...) moves images, labels and
    indices as Tensor.to does and keeps the attributes.
    """

    @property
    def count(self):
        """Samples in the batch."""
        return self.labels.shape[0]

    @property
    def raw(self):
        """The samples' JPEG bytes: a stoker.Batch viewing the same slot
        (built on first use), or None for a batch copied to a device."""
        src = self.__dict__.get("_raw")
        if src is None or isinstance(src, Batch):
            return src
        span, meta, n, nbytes = src
        b = Batch(torch.from_numpy(span[:nbytes]), torch.from_numpy(meta[:n + 1]),
                  torch.from_numpy(meta[n + 1:2 * n + 1]), self.labels, self.indices)
        b.epoch, b.number, b.slot = self.epoch, self.number, self.slot
        self._raw = b
        return b

    def __repr__(self):
        im = self.images
        return "ImageBatch(epoch=%s, number=%s, count=%d, shape=%s, dtype=%s, slot=%s, " \
            "device=%s)" % (getattr(self, "epoch", "?"), getattr(self, "number", "?"),
                            self.count, tuple(im.shape), str(im.dtype).replace("torch.", ""),
                            getattr(self, "slot", "?"), im.device)


class VideoBatch(_Movable, collections.namedtuple("VideoBatch", "clips labels")):
    """One batch in video mode (Loader(video=stoker.Video(...))).

    Unpacks as ``clips, labels``:
        clips:  uint8 (count, T, H, W, 3), or (count, T, 3, H, W) with
                layout="TCHW": the slot memory itself (no copy); on `device`
                when one was given;
        labels: int64, count entries (the video's class; -1 unlabelled); on
                `device` when one was given.

    Attributes (CPU tensors, copied out of the slot: they stay valid after
    the batch is freed): indices (int64: each clip's video, an index of
    Loader.dataset), clip_ids (int64: which of the video's clips_per_video
    clips, from 0), starts (float64: the clip's first frame, in seconds),
    start_pts (int64: the same in the stream's time base), frames_decoded
    (int64: frames the decoder went through for the clip, those before its
    start included), padded (int64: frames repeated at its end, a video
    shorter than the clip); epoch, number, slot and count as ImageBatch's.
    .to(device, ...) moves clips, labels and the attributes as Tensor.to
    does.
    """

    @property
    def count(self):
        """Clips in the batch."""
        return self.labels.shape[0]

    def __repr__(self):
        c = self.clips
        return "VideoBatch(epoch=%s, number=%s, count=%d, shape=%s, slot=%s, device=%s)" % (
            getattr(self, "epoch", "?"), getattr(self, "number", "?"), self.count,
            tuple(c.shape), getattr(self, "slot", "?"), c.device)
