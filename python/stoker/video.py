"""stoker.Video: video mode's options (clips decoded in C, struct stk_video_opts)."""

import ctypes
import errno

from . import _lib
from .errors import option_error

_ROWS = _lib.VIDEO_OPTIONS                              # the option table's video rows
_D = {n: r.python_default() for n, r in _ROWS.items()}  # the library's defaults


class Video:
    """Video mode for Loader(video=...): each sample is a clip of a video
    file (MP4, MKV, WebM, MOV: what FFmpeg's libraries decode), which C
    threads demux from the bytes read, decode, crop and resize into the
    batch.  Every default and range is libstoker's option table
    (docs/options.md).

    Args:
        frames: T, frames per clip.
        stride: take every stride-th decoded frame (ignored when fps is set).
        size: the output's side in pixels (H = W).
        crop: "random" (training: a RandomResizedCrop-like box over scale,
            and with flip a horizontal flip, the same for every frame of the
            clip; the clip's start is random too) or "center" (evaluation:
            the centre square, clips spread evenly over the video).
        fps: None, or resample to this many frames a second (the frame
            nearest each 1/fps step) instead of stride.
        clips_per_video: clips a video gives each epoch (the epoch's samples
            are videos x clips_per_video).
        layout: "THWC" (a batch is (B, T, H, W, 3)) or "TCHW" ((B, T, 3, H, W)).
        flip: random horizontal flip (crop="random").
        scale: the random crop's share of the frame's area, (min, max).
        short_clip: a clip longer than the video: "pad" (repeat the last
            frame) or "refuse" (the sample's error).
        max_pixels: larger frames are refused.
        max_decode_time: a clip whose decode takes longer is refused ("5s",
            "200ms", or ns).
        threads: FFmpeg's frame threads inside one decoder (0: 1).

    A clip's start, crop and flip are drawn from (seed, epoch, sample
    number): the same batches whatever the threads do.
    """

    __slots__ = ("frames", "stride", "size", "crop", "fps", "clips_per_video", "layout", "flip",
                 "scale", "ratio", "crop_frac", "short_clip", "codec_threads", "decode_threads",
                 "max_pixels", "max_decode_time", "_c")

    def __init__(self, frames=_D["frames"], stride=_D["stride"], size=_D["size"],
                 crop=_D["crop"], fps=None, clips_per_video=_D["clips_per_video"],
                 layout=_D["layout"], flip=_D["flip"],
                 scale=(_D["scale_min"], _D["scale_max"]),
                 ratio=(_D["ratio_min"], _D["ratio_max"]), crop_frac=_D["crop_frac"],
                 short_clip=_D["short_clip"], codec_threads=_D["codec_threads"],
                 decode_threads=_D["decode_threads"], max_pixels=_D["max_pixels"],
                 max_decode_time=_D["max_decode_time"]):
        if fps is not None and (_lib.is_bool(fps) or not isinstance(fps, (int, float))):
            raise TypeError("Video(fps=%r) must be None or a number of frames a second"
                            % (fps,))
        if fps is not None and not fps > 0:
            raise ValueError("Video(fps=%r) must be more than 0 (or None: stride)" % (fps,))
        values = {"frames": frames, "stride": stride, "size": size, "crop": crop,
                  "fps": 0 if fps is None else fps, "clips_per_video": clips_per_video,
                  "layout": layout, "flip": flip, "crop_frac": crop_frac,
                  "short_clip": short_clip, "codec_threads": codec_threads,
                  "decode_threads": decode_threads, "max_pixels": max_pixels,
                  "max_decode_time": max_decode_time}
        for name, pair in (("scale", scale), ("ratio", ratio)):
            try:
                lo, hi = pair
            except (TypeError, ValueError):
                raise TypeError("Video(%s=%r) must be two numbers (min, max)" % (name, pair)) \
                    from None
            values[name + "_min"], values[name + "_max"] = lo, hi
        c = _lib.VideoOpts(size=ctypes.sizeof(_lib.VideoOpts))
        keep = []
        for name, value in values.items():
            row = _ROWS[name]
            shown = name[:-4] if name.endswith(("_min", "_max")) else name
            if isinstance(value, str) and row.choices:  # "thwc" for "THWC"
                value = {ch.lower(): ch for ch in row.choices}.get(value.lower(), value)
            try:
                row.set(c, _lib.option_text(row, value), keep)
            except TypeError as e:
                raise TypeError("Video(%s=...): %s" % (shown, e)) from None
            except ValueError as e:
                raise option_error(getattr(e, "code", -errno.EINVAL),
                                   "Video(%s=%r): %s" % (shown, value, e)) from None
        err = ctypes.create_string_buffer(512)
        rc = _lib.stk_video_opts_check(ctypes.byref(c), err, len(err))
        if rc < 0:
            raise option_error(rc, "Video(...): %s" % err.value.decode("utf-8", "replace"))
        self._c = c
        # what the library takes, read back (defaults applied, a choice's
        # unique prefix named in full)
        d = _lib.VideoOpts()
        ctypes.pointer(d)[0] = c
        self.frames = self._read(d, "frames")
        self.stride = self._read(d, "stride")
        self.size = self._read(d, "size")
        self.crop = self._read(d, "crop")
        self.fps = self._read(d, "fps") or None
        self.clips_per_video = self._read(d, "clips_per_video")
        self.layout = self._read(d, "layout")
        self.flip = self._read(d, "flip")
        self.scale = (self._read(d, "scale_min"), self._read(d, "scale_max"))
        self.ratio = (self._read(d, "ratio_min"), self._read(d, "ratio_max"))
        self.crop_frac = self._read(d, "crop_frac")
        self.short_clip = self._read(d, "short_clip")
        self.codec_threads = self._read(d, "codec_threads")
        self.decode_threads = self._read(d, "decode_threads")
        self.max_pixels = self._read(d, "max_pixels")
        self.max_decode_time = self._read(d, "max_decode_time")

    @staticmethod
    def _read(c, name):
        """Option `name` of c as Python reads its default: "auto" for the
        library's choice, numbers as numbers, flags as bools."""
        row = _ROWS[name]
        text = row.get(c)
        if row.type in (_lib.OPT_FLAG, _lib.OPT_NOFLAG):
            return text == "true"
        if row.type in (_lib.OPT_U32, _lib.OPT_U64):
            return text if row.choices and text == row.choices[0] else int(text)
        if row.type == _lib.OPT_FLOAT:
            return float(text)
        return text

    # --- what a batch holds ----------------------------------------------------

    @property
    def shape(self):
        """One clip's shape: (T, H, W, 3), or (T, 3, H, W) with layout="TCHW"."""
        if self.layout == "TCHW":
            return (self.frames, 3, self.size, self.size)
        return (self.frames, self.size, self.size, 3)

    @property
    def nbytes(self):
        """Bytes of one clip (uint8)."""
        return _lib.stk_video_clip_bytes(ctypes.byref(self._c))

    def _opts(self):
        """The options as a struct stk_video_opts (a copy)."""
        o = _lib.VideoOpts()
        ctypes.pointer(o)[0] = self._c
        return o

    # --- plumbing ----------------------------------------------------------------

    def _key(self):
        return tuple(getattr(self, k) for k in self.__slots__[:-1])

    def __eq__(self, other):
        return isinstance(other, Video) and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def __repr__(self):
        defaults = Video()
        parts = ["frames=%r" % (self.frames,)]
        for k in self.__slots__[1:-1]:
            v = getattr(self, k)
            if v != getattr(defaults, k):
                parts.append("%s=%r" % (k, v))
        return "stoker.Video(%s)" % ", ".join(parts)

    @classmethod
    def _from(cls, video):
        """Loader(video=...): a Video, or a dict of Video's arguments."""
        if isinstance(video, cls):
            return video
        if isinstance(video, dict):
            return cls(**video)
        raise TypeError("video must be a stoker.Video (or a dict of its arguments), not %r"
                        % (video,))
