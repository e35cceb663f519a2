"""stoker.Video: video mode's options (clips decoded in C, struct stk_video_opts)."""

import ctypes
import errno

from . import _lib
from .errors import option_error

# The option table's video rows, by the struct field each one writes (the
# keywords below are Python's names for those fields).
_BY_FIELD = {}
for _r in _lib.OPTIONS.values():
    if _r.group == _lib.OPT_VIDEO:
        for _f, _ in _lib.VideoOpts._fields_:
            if getattr(_lib.VideoOpts, _f).offset == _r.offset:
                _BY_FIELD[_f] = _r
_D = {f: r.python_default() for f, r in _BY_FIELD.items()}   # the library's defaults


def _default(field, fallback=None):
    return _D.get(field, fallback)


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
                 "scale", "short_clip", "max_pixels", "max_decode_time", "threads", "_c")

    def __init__(self, frames=_default("frames", 16), stride=_default("stride", 1),
                 size=_default("out_size", 224), crop=_default("crop", "random"), fps=None,
                 clips_per_video=_default("clips_per_video", 1),
                 layout=_default("layout", "thwc"), flip=_default("flip", True),
                 scale=(_default("scale_min", 0.08), _default("scale_max", 1.0)),
                 short_clip=_default("short_clip", "pad"),
                 max_pixels=_default("max_pixels", 0),
                 max_decode_time=_default("max_decode_time", 0),
                 threads=_default("threads", 0)):
        try:
            lo, hi = scale
        except (TypeError, ValueError):
            raise TypeError("Video(scale=%r) must be two numbers (min, max)" % (scale,)) from None
        if fps is not None and (_lib.is_bool(fps) or not isinstance(fps, (int, float))):
            raise TypeError("Video(fps=%r) must be None or a number of frames a second"
                            % (fps,))
        if fps is not None and not fps > 0:
            raise ValueError("Video(fps=%r) must be more than 0 (or None: stride)" % (fps,))
        values = {"frames": frames, "stride": stride, "out_size": size, "crop": crop,
                  "fps": 0 if fps is None else fps, "clips_per_video": clips_per_video,
                  "layout": layout, "flip": flip, "scale_min": lo, "scale_max": hi,
                  "short_clip": short_clip, "max_pixels": max_pixels,
                  "max_decode_time": max_decode_time, "threads": threads}
        c = _lib.VideoOpts(size=ctypes.sizeof(_lib.VideoOpts))
        keep = []
        for field, value in values.items():
            row = _BY_FIELD.get(field)
            shown = {"out_size": "size"}.get(field, field)
            if row is None:  # no row for it in this library: only its default
                if value != _D.get(field, value):
                    raise TypeError("Video(%s=...): not an option of this libstoker" % shown)
                continue
            if isinstance(value, str) and row.choices:  # "THWC" for "thwc"
                low = {ch.lower(): ch for ch in row.choices}
                value = low.get(value.lower(), value)
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
        # what the library takes, read back (a choice's unique prefix named in full)
        self.frames, self.stride, self.size = c.frames or frames, c.stride or stride, \
            c.out_size or size
        self.crop = _BY_FIELD["crop"].get(c) if "crop" in _BY_FIELD else crop
        self.fps = None if not c.fps else c.fps
        self.clips_per_video = c.clips_per_video or clips_per_video
        self.layout = (_BY_FIELD["layout"].get(c) if "layout" in _BY_FIELD else layout).upper()
        self.flip = bool(flip)
        self.scale = (c.scale_min or lo, c.scale_max or hi)
        self.short_clip = _BY_FIELD["short_clip"].get(c) if "short_clip" in _BY_FIELD \
            else short_clip
        self.max_pixels = c.max_pixels or max_pixels
        self.max_decode_time = _BY_FIELD["max_decode_time"].get(c) \
            if "max_decode_time" in _BY_FIELD else max_decode_time
        self.threads = c.threads

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
