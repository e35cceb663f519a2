"""stoker.Image: image mode's options (decode and crop in C, struct stk_image_opts)."""

import ctypes
import math
import operator

import numpy as np
import torch

from . import _lib
from .errors import error_from

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)

_CROPS = {"random_resized": _lib.CROP_RANDOM_RESIZED, "center": _lib.CROP_CENTER}
_LAYOUTS = ("nchw", "nhwc")
# name -> (C enum, numpy dtype, torch dtype)
_DTYPES = {
    "uint8": (_lib.DTYPE_UINT8, np.uint8, torch.uint8),
    "float32": (_lib.DTYPE_FLOAT32, np.float32, torch.float32),
    "float16": (_lib.DTYPE_FLOAT16, np.float16, torch.float16),
}
_BY_ENUM = {v[0]: v for v in _DTYPES.values()}
_MAX_SIDE = 8192   # stk_image_opts' bound
_U32 = 0xFFFFFFFF
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


def _floats(name, value, n):
    """n finite floats from a number (n == 1) or a sequence of n numbers."""
    try:
        vals = [float(value)] if n == 1 else [float(v) for v in value]
    except (TypeError, ValueError):
        raise TypeError("Image(%s=...) must be %s, not %r"
                        % (name, "a number" if n == 1 else "%d numbers" % n, value)) from None
    if len(vals) != n:
        raise ValueError("Image(%s=%r) must have %d numbers" % (name, value, n))
    if not all(math.isfinite(v) for v in vals):
        raise ValueError("Image(%s=%r) must be finite" % (name, value))
    return vals


def _dtype_name(dtype):
    for name, (_, npt, tt) in _DTYPES.items():
        if dtype == name or dtype is tt:
            return name
    raise ValueError("Image(dtype=%r) must be 'uint8', 'float32' or 'float16' (or the torch "
                     "dtype)" % (dtype,))


class Image:
    """Image mode for Loader(image=...): each sample is a JPEG that C threads
    decode, crop and resize into the batch, as torchvision's transforms would.

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
        decode_threads: decode threads (0: online CPUs - 1, at least 1).
        max_pixels: larger JPEGs are refused before decoding (0: 100 M).
        scale, ratio: RandomResizedCrop's area share (0 < lo <= hi <= 1) and
            aspect-ratio range (0 < lo <= hi).
        crop_frac: center crop: size / resized short side (224 of 256 is
            0.875), in (0, 1].

    The crop of each sample is drawn from (seed, epoch, sample index): the
    same batches whatever decode_threads is.  `decode()` decodes one JPEG as
    the loader would.
    """

    __slots__ = ("height", "width", "crop", "flip", "layout", "dtype", "normalize",
                 "decode_threads", "max_pixels", "scale", "ratio", "crop_frac")

    def __init__(self, size=224, crop="random_resized", flip=True, layout="nchw", dtype="uint8",
                 normalize=None, decode_threads=0, max_pixels=0, scale=(0.08, 1.0),
                 ratio=(3 / 4, 4 / 3), crop_frac=0.875):
        if isinstance(size, (tuple, list)):
            if len(size) != 2:
                raise ValueError("Image(size=%r) must be an int or (height, width)" % (size,))
            self.height = _int("size", size[0], 1, _MAX_SIDE)
            self.width = _int("size", size[1], 1, _MAX_SIDE)
        else:
            self.height = self.width = _int("size", size, 1, _MAX_SIDE)
        if crop not in _CROPS:
            raise ValueError("Image(crop=%r) must be 'random_resized' (training) or 'center' "
                             "(validation)" % (crop,))
        self.crop = crop
        self.flip = bool(flip)
        if layout not in _LAYOUTS:
            raise ValueError("Image(layout=%r) must be 'nchw' or 'nhwc'" % (layout,))
        self.layout = layout
        self.dtype = _dtype_name(dtype)
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
            mean = _floats("normalize", mean, 1 if np.ndim(mean) == 0 else 3)
            std = _floats("normalize", std, 1 if np.ndim(std) == 0 else 3)
            mean, std = tuple(mean * (3 // len(mean))), tuple(std * (3 // len(std)))
            if not all(s > 0 for s in std):
                raise ValueError("Image(normalize=...) std must be > 0, not %r" % (std,))
            if self.dtype == "uint8":
                raise ValueError("Image(normalize=...) needs dtype='float32' or 'float16': "
                                 "uint8 images hold 0..255")
            normalize = (mean, std)
        self.normalize = normalize
        self.decode_threads = _int("decode_threads", decode_threads, 0, _U32)
        self.max_pixels = _int("max_pixels", max_pixels, 0, _U64)
        lo, hi = _floats("scale", scale, 2)
        if not 0 < lo <= hi <= 1:
            raise ValueError("Image(scale=%r) must satisfy 0 < min <= max <= 1" % (scale,))
        self.scale = (lo, hi)
        lo, hi = _floats("ratio", ratio, 2)
        if not 0 < lo <= hi:
            raise ValueError("Image(ratio=%r) must satisfy 0 < min <= max" % (ratio,))
        self.ratio = (lo, hi)
        self.crop_frac = _floats("crop_frac", crop_frac, 1)[0]
        if not 0 < self.crop_frac <= 1:
            raise ValueError("Image(crop_frac=%r) must be in (0, 1]" % (crop_frac,))

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
        return _DTYPES[self.dtype][2]

    @property
    def nbytes(self):
        """Bytes of one output image."""
        return self.height * self.width * 3 * np.dtype(_DTYPES[self.dtype][1]).itemsize

    def _opts(self):
        """The options as a struct stk_image_opts."""
        o = _lib.ImageOpts()
        o.size = ctypes.sizeof(o)
        flags = 0
        if not self.flip:
            flags |= _lib.IMG_NO_FLIP
        if self.layout == "nhwc":
            flags |= _lib.IMG_NHWC
        if self.normalize is not None:
            flags |= _lib.IMG_NORMALIZE
            o.mean[:] = self.normalize[0]
            o.std[:] = self.normalize[1]
        o.flags = flags
        o.width = self.width
        o.height = self.height
        o.crop = _CROPS[self.crop]
        o.dtype = _DTYPES[self.dtype][0]
        o.scale_min, o.scale_max = self.scale
        o.ratio_min, o.ratio_max = self.ratio
        o.crop_frac = self.crop_frac
        o.decode_threads = self.decode_threads
        o.max_pixels = self.max_pixels
        return o

    def decode(self, data, seed=0, epoch=0, index=0):
        """Decodes one JPEG as the loader does for dataset sample `index` of
        `epoch` under `seed` (the same crop and flip): a tensor of `shape`
        and `torch_dtype`.  data: bytes-like, or a uint8 numpy array or CPU
        tensor.  Raises stoker.Error (STK_ECORRUPT, STK_EFORMAT, ...)."""
        if _lib.stk_image_decode is None:
            raise NotImplementedError("this libstoker (%s) has no image mode" % _lib.lib_path)
        if isinstance(data, torch.Tensor):
            data = data.detach().cpu().numpy()
        if isinstance(data, np.ndarray):
            buf = np.ascontiguousarray(data).reshape(-1).view(np.uint8)
        else:
            buf = np.frombuffer(memoryview(data).cast("B"), dtype=np.uint8)
        out = np.empty(self.shape, dtype=_DTYPES[self.dtype][1])
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
        return tuple(getattr(self, k) for k in self.__slots__)

    def __eq__(self, other):
        return isinstance(other, Image) and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def __repr__(self):
        defaults = Image()
        parts = ["size=%r" % (self.size,)]
        for k in self.__slots__[2:]:
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
    return _BY_ENUM[c_dtype][1]
