"""stoker.Batch: what iterating a Loader yields in raw mode."""

import collections


class Batch(collections.namedtuple("Batch", "data offsets sizes labels indices")):
    """One batch in raw mode: the samples' bytes, back to back.

    Fields (torch tensors; unpack as ``data, offsets, sizes, labels, indices``):
        data:    uint8, flat: the slot memory itself (no copy); on `device`
                 when one was given;
        offsets: int64, count + 1 entries; sample i starts at offsets[i];
                 offsets[count] == len(data);
        sizes:   int64, count entries; sample i is data[offsets[i] :
                 offsets[i] + sizes[i]] (with direct=True samples are padded to
                 4 KiB, so offsets[i + 1] - offsets[i] can exceed sizes[i]);
        labels:  int64, count entries (-1 for unlabelled samples); on `device`
                 when one was given;
        indices: int64, count entries: each sample's index in the dataset
                 (see Loader.sample).

    Attributes: epoch, number (position in the epoch, from 0), slot (the pool
    slot the bytes live in), count (samples in this batch: fewer than the batch
    size when samples were skipped under on_error="skip", or in the last batch).
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
