"""stoker.Image: image mode's options (decode and crop in C, struct stk_image_opts)."""

import ctypes
import errno
import operator

import numpy as np
import torch

from . import _lib
from .errors import error_from, option_error

_ROWS = {n: r for n, r in _lib.OPTIONS.items() if r.group == _lib.OPT_IMAGE}
_D = {n: r.python_default() for n, r in _ROWS.items()}   # the library's defaults

IMAGENET_MEAN = _D["mean"]
IMAGENET_STD = _D["std"]

# name -> (numpy dtype, torch dtype); the names themselves are the table's choices
_DTYPES = {
    "uint8": (np.uint8, torch.uint8),
    "float32": (np.float32, torch.float32),
    "float16": (np.float16, torch.float16),
}
assert sorted(_DTYPES) == sorted(_ROWS["dtype"].choices), "dtype choices differ from libstoker"
_BY_ENUM = [_DTYPES[name] for name in _ROWS["dtype"].choices]
_U64 = 0xFFFFFFFFFFFFFFFF


def _int(name, value, lo, hi):
    try:
        if isinstance(value, bool):
            raise TypeError
        value = operator.index(value)
    except TypeError:
        raise TypeError("Image(%s=...) must be an integer, not %r" % (name, value)) from None
    if not lo <= value <= hi:
        raise ValueError("Image(%s=%d) must be in %d..%d" % (name, value, lo, hi))
    return value


def _dtype_name(dtype):
    for name, (_, tt) in _DTYPES.items():
        if dtype is tt:
            return name
    return dtype


class Image:
    """Image mode for Loader(image=...): each sample is a JPEG, PNG or WebP
    that C threads decode, crop and resize into the batch, as torchvision's
    transforms would (colour modes to RGB as PIL's convert("RGB")).
    Every default and range is libstoker's option table (docs/options.md).

    Args:
        size: output side in pixels (an int), or (height, width).
        crop: "random_resized" (training: RandomResizedCrop(size, scale,
            ratio) and, with flip, RandomHorizontalFlip) or "center"
            (validation: Resize(size / crop_frac) then CenterCrop(size); no
            flip).
        flip: random horizontal flip with probability 0.5 (random_resized).
        layout: "nchw" (batches are (N, 3, H, W)) or "nhwc" ((N, H, W, 3)).
        dtype: "uint8" (0..255), "float32" or "float16" (x / 255, or
            normalized); the torch dtypes are accepted too.
        normalize: None, (mean, std) with three numbers (or one) each, or
            "imagenet": float output is (x / 255 - mean) / std.  Needs a
            float dtype.
        decode_threads: decode threads ("auto" or 0: online CPUs - 1).
        max_pixels: larger JPEGs are refused before decoding.
        max_scans: progressive JPEGs with more scans are refused (a scan
            bomb: thousands of scans, seconds of CPU each image).
        max_decode_time: a decode that takes more CPU time than this ("5s",
            "200ms", or ns) is stopped and the sample refused.
        keep_raw: each batch keeps its samples' file bytes beside the images
            (ImageBatch.raw); by default they are read into a separate pool
            of read areas, reused as soon as their batch is decoded, so a
            batch waiting for the trainer holds only its images (raw is
            None).
        read_areas: without keep_raw, how many batches of reads may be in
            flight or being decoded ("auto" or 0: enough for 256 reads, one
            at batch 256; two for s3:// and http(s):// data; at most
            prefetch).  Two read the next batch while this one decodes.
        jpeg_cache: folders and file lists: each JPEG, the first time it
            is read, is rewritten losslessly (the same pixels; sequential,
            restart intervals, so a crop decodes only its own intervals)
            into the cache folder (cache_dir/jpeg/) and read from there from
            then on, each read checked against its file first (size, mtime,
            ctime, inode, device, checksum; a copy refused is named and the
            file read).  Costs about the images' size again on disk and
            2-4x the CPU in the epoch that writes the copies.  A changed
            file's copy is refused and written over; copies of files no
            longer in the dataset are removed at the next Loader.
        jpeg_cache_limit: the bound on the copies of every dataset in
            the cache folder, bytes or a size ("20GiB"; "auto" or 0: a
            quarter of the free space where they live plus what they take,
            at most 100 GiB).  Once reached no more copies are made in the
            run (the files are read); a Loader removes its dataset's copies
            above it, and the copies of datasets gone, at create.  A full disk
            (ENOSPC) stops the copies too, said once naming the folder; no
            sample is lost.
        scale, ratio: RandomResizedCrop's area share (0 < lo <= hi <= 1) and
            aspect-ratio range (0 < lo <= hi).
        crop_frac: center crop: size / resized short side (224 of 256 is
            0.875), in (0, 1].

    The crop of each sample is drawn from (seed, epoch, sample index): the
    same batches whatever decode_threads is.  `decode()` decodes one JPEG as
    the loader would.
    """

    __slots__ = ("height", "width", "crop", "flip", "layout", "dtype", "normalize",
                 "decode_threads", "max_pixels", "max_scans", "max_decode_time", "scale",
                 "ratio", "crop_frac", "keep_raw", "read_areas", "jpeg_cache", "jpeg_cache_limit",
                 "_c")

    def __init__(self, size=_D["width"], crop=_D["crop"], flip=_D["flip"], layout=_D["layout"],
                 dtype=_D["dtype"], normalize=None, decode_threads=_D["decode_threads"],
                 max_pixels=_D["max_pixels"], scale=(_D["scale_min"], _D["scale_max"]),
                 ratio=(_D["ratio_min"], _D["ratio_max"]), crop_frac=_D["crop_frac"],
                 max_scans=_D["max_scans"], max_decode_time=_D["max_decode_time"],
                 keep_raw=_D["keep_raw"], read_areas=_D["read_areas"],
                 jpeg_cache=_D["jpeg_cache"], jpeg_cache_limit=_D["jpeg_cache_limit"]):
        if isinstance(size, (tuple, list)):
            if len(size) != 2:
                raise ValueError("Image(size=%r) must be an int or (height, width)" % (size,))
            height, width = size
        else:
            height = width = size
        values = {"width": width, "height": height, "crop": crop, "flip": flip,
                  "layout": layout, "dtype": _dtype_name(dtype), "decode_threads": decode_threads,
                  "max_pixels": max_pixels, "crop_frac": crop_frac, "max_scans": max_scans,
                  "max_decode_time": max_decode_time, "keep_raw": keep_raw,
                  "read_areas": read_areas, "jpeg_cache": jpeg_cache,
                  "jpeg_cache_limit": jpeg_cache_limit}
        for name, pair in (("scale", scale), ("ratio", ratio)):
            try:
                lo, hi = pair
            except (TypeError, ValueError):
                raise TypeError("Image(%s=%r) must be two numbers (min, max)" % (name, pair)) \
                    from None
            values[name + "_min"], values[name + "_max"] = lo, hi
        if normalize is not None:
            if isinstance(normalize, str):
                if normalize.lower() != "imagenet":
                    raise ValueError("Image(normalize=%r) must be None, 'imagenet' or "
                                     "(mean, std)" % (normalize,))
                mean, std = IMAGENET_MEAN, IMAGENET_STD
            else:
                try:
                    mean, std = normalize
                except (TypeError, ValueError):
                    raise ValueError("Image(normalize=%r) must be None, 'imagenet' or "
                                     "(mean, std)" % (normalize,)) from None
            values.update(normalize=True, mean=mean, std=std)
        c = _lib.ImageOpts(size=ctypes.sizeof(_lib.ImageOpts))
        keep = []
        for name, value in values.items():
            row = _ROWS[name]
            shown = "size" if name in ("width", "height") else name
            try:
                row.set(c, _lib.option_text(row, value), keep)
            except TypeError as e:
                raise TypeError("Image(%s=...): %s" % (shown, e)) from None
            except ValueError as e:
                raise option_error(getattr(e, "code", -errno.EINVAL),
                                   "Image(%s=%r): %s" % (shown, value, e)) from None
        err = ctypes.create_string_buffer(512)
        rc = _lib.stk_image_opts_check(ctypes.byref(c), err, len(err))
        if rc < 0:
            raise option_error(rc, "Image(...): %s" % err.value.decode("utf-8", "replace"))
        self._c = c
        # what the library took, read back (a choice's unique prefix named in full)
        self.height, self.width = c.height, c.width
        self.crop = _ROWS["crop"].get(c)
        self.flip = _ROWS["flip"].get(c) == "true"
        self.layout = _ROWS["layout"].get(c)
        self.dtype = _ROWS["dtype"].get(c)
        self.normalize = ((tuple(c.mean), tuple(c.std)) if _ROWS["normalize"].get(c) == "true"
                          else None)
        self.decode_threads = c.decode_threads
        self.max_pixels = c.max_pixels
        self.max_scans = c.max_scans
        self.max_decode_time = _ROWS["max_decode_time"].get(c)
        self.scale = (c.scale_min, c.scale_max)
        self.ratio = (c.ratio_min, c.ratio_max)
        self.crop_frac = c.crop_frac
        self.keep_raw = _ROWS["keep_raw"].get(c) == "true"
        self.read_areas = c.read_areas
        self.jpeg_cache = _ROWS["jpeg_cache"].get(c) == "true"
        self.jpeg_cache_limit = c.jpeg_cache_limit

    # --- what a batch holds ----------------------------------------------------

    @property
    def size(self):
        """The output size: an int when square, else (height, width)."""
        return self.height if self.height == self.width else (self.height, self.width)

    @property
    def shape(self):
        """One image's shape: (3, H, W), or (H, W, 3) with layout="nhwc"."""
        if self.layout == "nhwc":
            return (self.height, self.width, 3)
        return (3, self.height, self.width)

    @property
    def torch_dtype(self):
        return _DTYPES[self.dtype][1]

    @property
    def nbytes(self):
        """Bytes of one output image."""
        return self.height * self.width * 3 * np.dtype(_DTYPES[self.dtype][0]).itemsize

    def _opts(self):
        """The options as a struct stk_image_opts (a copy)."""
        o = _lib.ImageOpts()
        ctypes.pointer(o)[0] = self._c
        return o

    def decode(self, data, seed=0, epoch=0, index=0):
        """Decodes one image (JPEG, PNG, WebP) as the loader does for dataset
        sample `index` of `epoch` under `seed` (the same crop and flip): a
        tensor of `shape` and `torch_dtype`.  data: bytes-like, or a uint8
        numpy array or CPU tensor.  Raises stoker.Error (STK_ECORRUPT, STK_EFORMAT, ...)."""
        if isinstance(data, torch.Tensor):
            data = data.detach().cpu().numpy()
        if isinstance(data, np.ndarray):
            buf = np.ascontiguousarray(data).reshape(-1).view(np.uint8)
        else:
            buf = np.frombuffer(memoryview(data).cast("B"), dtype=np.uint8)
        out = np.empty(self.shape, dtype=_DTYPES[self.dtype][0])
        err = ctypes.create_string_buffer(512)
        o = self._opts()
        rc = _lib.stk_image_decode(ctypes.byref(o), buf.ctypes.data, buf.size,
                                   _int("seed", seed, 0, _U64), _int("epoch", epoch, 0, _U64),
                                   _int("index", index, -(1 << 63), (1 << 63) - 1),
                                   out.ctypes.data, err, len(err))
        if rc < 0:
            raise error_from(rc, err.value.decode("utf-8", "replace") or None)
        return torch.from_numpy(out)

    # --- plumbing ----------------------------------------------------------------

    def _key(self):
        return tuple(getattr(self, k) for k in self.__slots__[:-1])

    def __eq__(self, other):
        return isinstance(other, Image) and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def __repr__(self):
        defaults = Image()
        parts = ["size=%r" % (self.size,)]
        for k in self.__slots__[2:-1]:
            v = getattr(self, k)
            if v != getattr(defaults, k):
                parts.append("%s=%r" % (k, v))
        return "stoker.Image(%s)" % ", ".join(parts)

    @classmethod
    def _from(cls, image):
        """Loader(image=...): an Image, or a dict of Image's arguments."""
        if isinstance(image, cls):
            return image
        if isinstance(image, dict):
            return cls(**image)
        raise TypeError("image must be a stoker.Image (or a dict of its arguments), not %r"
                        % (image,))


def _np_dtype(c_dtype):
    """numpy dtype of a batch's enum stk_dtype."""
    return _BY_ENUM[c_dtype][0]
