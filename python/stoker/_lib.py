"""ctypes view of libstoker: finding the library, the C structs, the prototypes.

The structs mirror include/stoker/stoker.h field for field (ctypes lays them out
with the C ABI's natural alignment, as the compiler does); tests/python checks
the offsets against a compiled probe when a C compiler is present.  Nothing
here needs a compiler at run time.
"""

import ctypes
import ctypes.util
import errno
import operator
import os
import re

# --- finding the library -----------------------------------------------------
#
# Where this package came from decides where its library is:
#   pip (python/setup.py)   libstoker.so.0 carried beside this file; _build.BUNDLED
#   make install / the deb  _build.LIBDIR, the folder make install put it in
#   the source tree         build/libstoker.so.0 beside python/ (no _build module)
# then the system's (ld.so's search).  $STOKER_LIB overrides all of them.  The
# structs below mirror one version's header, so the library must be the
# version the package was built with (include/stoker/stoker.h in the source
# tree): any other, or a bundled library gone missing, fails the import, naming
# both versions.

_HERE = os.path.dirname(os.path.abspath(__file__))
_SONAME = "libstoker.so.0"
_BESIDE = os.path.join(_HERE, _SONAME)
_TREE = os.path.normpath(os.path.join(_HERE, "..", ".."))

try:
    from . import _build  # written by python/setup.py or make install, never in the tree
except ImportError:
    _build = None
_BUNDLED = bool(getattr(_build, "BUNDLED", False))
_LIBDIR = getattr(_build, "LIBDIR", None)


def _tree_version():
    """STK_VERSION_* from the source tree's header, or None outside a tree."""
    try:
        with open(os.path.join(_TREE, "include", "stoker", "stoker.h")) as f:
            text = f.read()
    except OSError:
        return None
    parts = [re.search(r"^#define STK_VERSION_%s (\d+)\s*$" % k, text, re.M)
             for k in ("MAJOR", "MINOR", "PATCH")]
    return ".".join(m.group(1) for m in parts) if all(parts) else None


# The version this package was made for (None: a package copied by hand).
PACKAGE_VERSION = getattr(_build, "VERSION", None) if _build else _tree_version()


def _candidates():
    env = os.environ.get("STOKER_LIB")
    if env:
        # An explicit choice: do not silently fall back to another build.
        return [env]
    if _BUNDLED:
        return [_BESIDE]
    names = [_BESIDE] if os.path.exists(_BESIDE) else []
    if _LIBDIR:
        names.append(os.path.join(_LIBDIR, _SONAME))
    elif _build is None:
        tree = os.path.join(_TREE, "build", _SONAME)
        if os.path.exists(tree):
            names.append(tree)
    found = ctypes.util.find_library("stoker")
    if found:
        names.append(found)
    names.append(_SONAME)
    return names


def _load():
    if _BUNDLED and not os.environ.get("STOKER_LIB") and not os.path.exists(_BESIDE):
        raise ImportError(
            "stoker %s: its bundled library %s is missing (libstoker %s expected there). "
            "Reinstall the package: pip install --force-reinstall --no-build-isolation "
            "./python (from the source tree)." % (PACKAGE_VERSION, _BESIDE, PACKAGE_VERSION))
    errors = []
    for name in _candidates():
        try:
            return ctypes.CDLL(name), name
        except OSError as e:
            errors.append("%s: %s" % (name, e))
    raise ImportError(
        "stoker: cannot load libstoker (tried %s). Build it with `make` in the "
        "source tree, install it with `make install`, or point STOKER_LIB at "
        "libstoker.so.0." % "; ".join(errors))


def _check_version(lib, path):
    fn = getattr(lib, "stk_version", None)
    if fn is None:
        raise ImportError("stoker %s: %s is not libstoker (no stk_version)"
                          % (PACKAGE_VERSION, path))
    fn.restype = ctypes.c_char_p
    fn.argtypes = []
    found = fn().decode("ascii", "replace")
    if PACKAGE_VERSION is not None and found != PACKAGE_VERSION:
        raise ImportError(
            "stoker: the Python package is version %s but %s is libstoker %s; the two "
            "must be the same version (its ctypes structs mirror libstoker %s). Install the "
            "matching pair (make install, or pip install ./python from the same tree), "
            "or point STOKER_LIB at libstoker %s." % (PACKAGE_VERSION, path, found,
                                                       PACKAGE_VERSION, PACKAGE_VERSION))


lib, lib_path = _load()
_check_version(lib, lib_path)

# --- constants (stoker.h) ----------------------------------------------------
# Only what Python passes as numbers; option values travel as text through the
# library's option table (stk_option_set), error codes come from stk_err_at.

HIST_BATCH_WAIT, HIST_READ, HIST_DECODE, HIST_REMOTE = 0, 1, 2, 3   # enum stk_hist_kind
TIME_COPY_WAIT = 0                                  # enum stk_time_kind
START_RESET_STATS = 1 << 0

# --- structs -----------------------------------------------------------------

c_u32, c_u64, c_i64 = ctypes.c_uint32, ctypes.c_uint64, ctypes.c_int64


class ImageOpts(ctypes.Structure):
    """struct stk_image_opts."""
    _fields_ = [
        ("size", c_u32),
        ("flags", c_u32),             # IMG_*
        ("width", c_u32),
        ("height", c_u32),
        ("crop", ctypes.c_int),       # enum stk_crop
        ("dtype", ctypes.c_int),      # enum stk_dtype
        ("scale_min", ctypes.c_float),
        ("scale_max", ctypes.c_float),
        ("ratio_min", ctypes.c_float),
        ("ratio_max", ctypes.c_float),
        ("crop_frac", ctypes.c_float),
        ("mean", ctypes.c_float * 3),
        ("std", ctypes.c_float * 3),
        ("decode_threads", c_u32),
        ("max_pixels", c_u64),
        ("max_scans", c_u32),
        ("max_decode_ns", c_u64),
        ("read_areas", c_u32),
        ("jpeg_cache_limit", c_u64),
    ]


class VideoOpts(ctypes.Structure):
    """struct stk_video_opts."""
    _fields_ = [
        ("size", c_u32),
        ("flags", c_u32),             # VID_NO_FLIP
        ("frames", c_u32),
        ("stride", c_u32),
        ("fps", ctypes.c_float),
        ("out_size", c_u32),
        ("crop", c_u32),              # enum stk_video_crop
        ("scale_min", ctypes.c_float),
        ("scale_max", ctypes.c_float),
        ("ratio_min", ctypes.c_float),
        ("ratio_max", ctypes.c_float),
        ("crop_frac", ctypes.c_float),
        ("clips_per_video", c_u32),
        ("layout", c_u32),            # enum stk_video_layout
        ("short_clip", c_u32),        # enum stk_video_short
        ("threads", c_u32),           # FFmpeg's inside one decoder
        ("max_pixels", c_u64),
        ("max_decode_ns", c_u64),
        ("decode_threads", c_u32),
    ]


class ClipInfo(ctypes.Structure):
    """struct stk_clip_info: what a video batch carries per clip."""
    _fields_ = [
        ("size", c_u32),
        ("clip", c_u32),
        ("start_pts", c_i64),
        ("start_s", ctypes.c_double),
        ("frames_decoded", c_u32),
        ("padded", c_u32),
        ("width", c_u32),
        ("height", c_u32),
        ("duration_s", ctypes.c_double),
        ("fps", ctypes.c_double),
    ]


class VideoMakeOpts(ctypes.Structure):
    """struct stk_video_make_opts (stk_video_make: synthetic test videos)."""
    _fields_ = [
        ("size", c_u32),
        ("width", c_u32),
        ("height", c_u32),
        ("frames", c_u32),
        ("fps", ctypes.c_double),
        ("gop", c_u32),
        ("codec", ctypes.c_char_p),
        ("pix_fmt", ctypes.c_char_p),
        ("rotation", ctypes.c_int32),
        ("audio_only", c_u32),
        ("seed", c_u64),
    ]


class LoaderOpts(ctypes.Structure):
    """struct stk_loader_opts."""
    _fields_ = [
        ("size", c_u32),
        ("flags", c_u32),
        ("path", ctypes.c_char_p),
        ("batch_size", c_u32),
        ("prefetch", c_u32),
        ("queue_depth", c_u32),
        ("io_threads", c_u32),
        ("seed", c_u64),
        ("epoch", c_u64),
        ("start_batch", c_u64),
        ("rank", c_u32),
        ("world_size", c_u32),
        ("engine", ctypes.c_int),     # enum stk_engine
        ("on_error", ctypes.c_int),   # enum stk_on_error
        ("extensions", ctypes.c_char_p),
        ("cache_dir", ctypes.c_char_p),
        ("null_latency_ns", c_u64),
        ("slot_bytes", c_u64),
        ("image", ctypes.POINTER(ImageOpts)),  # NULL: raw mode
        ("shuffle_mode", ctypes.c_int),        # enum stk_shuffle
        ("shuffle_window", c_u32),
        ("local_rank", c_u32),
        ("local_world_size", c_u32),           # 0: "auto", from the environment
        ("read_bytes", c_u64),
        ("cache_limit", c_u64),                # remote data's local cache (0: auto)
        ("remote_timeout_ns", c_u64),
        ("remote_connect_timeout_ns", c_u64),
        ("remote_tries", c_u32),
        ("remote_retry_time_ns", c_u64),
        ("video", ctypes.POINTER(VideoOpts)),  # NULL: not video mode
    ]


class RemoteStats(ctypes.Structure):
    """struct stk_remote_stats."""
    _fields_ = [
        ("size", c_u32),
        ("inflight", c_u32),
        ("inflight_max", c_u32),
        ("cache_on", c_u32),
        ("requests", c_u64),
        ("retries", c_u64),
        ("failed", c_u64),
        ("short_bodies", c_u64),
        ("bytes", c_u64),
        ("latency_p50_ns", c_u64),
        ("latency_p99_ns", c_u64),
        ("latency_max_ns", c_u64),
        ("cache_hits", c_u64),
        ("cache_misses", c_u64),
        ("cache_hit_bytes", c_u64),
        ("cache_evictions", c_u64),
        ("cache_bytes_written", c_u64),
        ("cache_bytes", c_u64),
        ("cache_limit", c_u64),
        ("root", ctypes.c_char * 256),
        ("credentials", ctypes.c_char * 256),
        ("retrying", c_u32),
        ("window", c_u32),
        ("windows", c_u64),
        ("streamed", c_u64),
    ]


class CpuShare(ctypes.Structure):
    """struct stk_cpu_share."""
    _fields_ = [
        ("size", c_u32),
        ("local_rank", c_u32),
        ("local_world_size", c_u32),
        ("source", ctypes.c_char * 40),
        ("host_cpus", c_u32),
        ("allowed", c_u32),
        ("quota", ctypes.c_double),
        ("bound", c_u32),
        ("cpus", c_u32),
        ("io_threads", c_u32),
        ("decode_threads", c_u32),
        ("trainer_cpu", ctypes.c_int32),
        ("oversubscribed", c_u32),
        ("cpulist", ctypes.c_char * 256),
    ]

    def as_dict(self):
        d = {name: getattr(self, name) for name, _ in self._fields_ if name != "size"}
        d["source"] = d["source"].decode("ascii", "replace")
        d["cpulist"] = d["cpulist"].decode("ascii", "replace")
        d["bound"], d["oversubscribed"] = bool(d["bound"]), bool(d["oversubscribed"])
        return d


class BatchStruct(ctypes.Structure):
    """struct stk_batch (read-only view owned by the loader)."""
    _fields_ = [
        ("epoch", c_u64),
        ("number", c_u64),
        ("count", c_u32),
        ("slot", c_u32),
        ("data", ctypes.c_void_p),    # uint8_t *, kept as an address
        ("data_bytes", ctypes.c_size_t),
        ("offsets", ctypes.c_void_p),  # const uint64_t *
        ("sizes", ctypes.c_void_p),    # const uint64_t *
        ("labels", ctypes.c_void_p),   # const int64_t *
        ("indices", ctypes.c_void_p),  # const int64_t *
        # image mode: count images of image_bytes each, back to back
        ("images", ctypes.c_void_p),
        ("image_bytes", ctypes.c_size_t),
        ("channels", c_u32),
        ("height", c_u32),
        ("width", c_u32),
        ("dtype", ctypes.c_int),       # enum stk_dtype
        ("nhwc", c_u32),
        ("replaced", c_u32),           # on_error replace: stand-ins in this batch
        # video mode: count clips of clip_bytes each, back to back
        ("clips", ctypes.c_void_p),
        ("clip_bytes", ctypes.c_size_t),
        ("frames", c_u32),
        ("tchw", c_u32),
        ("clip_info", ctypes.c_void_p),  # const struct stk_clip_info *
    ]


class Stats(ctypes.Structure):
    """struct stk_stats."""
    _fields_ = [
        ("size", c_u32),
        ("samples", c_u64),
        ("bytes", c_u64),
        ("batches", c_u64),
        ("errors", c_u64),
        ("pool_bytes", c_u64),
        ("pinned", c_u32),
        ("inflight_max", c_u32),
        ("inflight_mean", ctypes.c_double),
        ("wall_s", ctypes.c_double),
        ("wait_s", ctypes.c_double),
        ("stall_ratio", ctypes.c_double),
        ("wait_p50_ns", c_u64),
        ("wait_p99_ns", c_u64),
        ("wait_max_ns", c_u64),
        ("read_p50_ns", c_u64),
        ("read_p99_ns", c_u64),
        ("read_max_ns", c_u64),
        ("decode_threads", c_u32),     # image mode
        ("decode_busy_s", ctypes.c_double),
        ("decode_p50_ns", c_u64),
        ("decode_p99_ns", c_u64),
        ("index_errors", c_u64),       # left out of the index; kept by resets
        ("samples_per_s", ctypes.c_double),
        ("mb_per_s", ctypes.c_double),
        ("decode_images_per_s_per_core", ctypes.c_double),
        ("copy_wait_s", ctypes.c_double),
        ("total_s", ctypes.c_double),
        ("total_samples", c_u64),
        ("total_bytes", c_u64),
        ("total_batches", c_u64),
        ("total_errors", c_u64),
        ("total_wait_s", ctypes.c_double),
        ("decode_fast_share", ctypes.c_double),     # restart-interval decodes
        ("decode_entropy_share", ctypes.c_double),  # mean share of entropy data decoded
        ("queue_depth", c_u32),        # what the loader chose (tuning says why)
        ("io_threads", c_u32),
        ("direct", c_u32),
        ("probes", c_u32),
        ("total_decode_busy_s", ctypes.c_double),
        ("total_copy_wait_s", ctypes.c_double),
        ("replaced", c_u64),                        # on_error replace: stand-ins
        ("total_replaced", c_u64),
        # per enum stk_image_format (FORMATS: jpeg, png, webp)
        ("format_decoded", c_u64 * 3),
        ("format_decode_busy_s", ctypes.c_double * 3),
        ("format_fast_share", ctypes.c_double * 3),
        # video mode: clips read as byte ranges (the video index), and whole
        ("total_video_ranged", c_u64),
        ("total_video_whole", c_u64),
    ]


FORMATS = ("jpeg", "png", "webp")  # enum stk_image_format


class Verdict(ctypes.Structure):
    """struct stk_verdict."""
    _fields_ = [
        ("size", c_u32),
        ("kind", ctypes.c_int),
        ("name", ctypes.c_char_p),
        ("evidence", ctypes.c_char * 320),
        ("advice", ctypes.c_char * 256),
        ("window_s", ctypes.c_double),
        ("samples_per_s", ctypes.c_double),
        ("mb_per_s", ctypes.c_double),
        ("stall_ratio", ctypes.c_double),
        ("copy_wait_ratio", ctypes.c_double),
        ("decode_busy", ctypes.c_double),
        ("inflight_mean", ctypes.c_double),
        ("queue_depth", c_u32),
        ("prefetch", c_u32),
        ("decode_threads", c_u32),
        ("io_threads", c_u32),
        ("device_sampled", c_u32),
        ("device", ctypes.c_char * 64),
        ("dev_r_s", ctypes.c_double),
        ("dev_read_mb_s", ctypes.c_double),
        ("dev_r_await_ms", ctypes.c_double),
        ("dev_aqu_sz", ctypes.c_double),
        ("dev_util", ctypes.c_double),
        ("dev_share", ctypes.c_double),
        ("remote", c_u32),
        ("req_per_s", ctypes.c_double),
        ("req_p50_ms", ctypes.c_double),
        ("req_p99_ms", ctypes.c_double),
        ("req_min_ms", ctypes.c_double),
        ("req_mb_per_s_each", ctypes.c_double),
        ("retries_per_s", ctypes.c_double),
        ("cache_hit_ratio", ctypes.c_double),
        ("remote_retrying", c_u32),
    ]


class Option(ctypes.Structure):
    """struct stk_option: one row of the library's option table."""
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("group", ctypes.c_int),
        ("type", ctypes.c_int),
        ("offset", c_u32),
        ("bit", c_u32),
        ("def", ctypes.c_char_p),
        ("min", ctypes.c_double),
        ("max", ctypes.c_double),
        ("choices", ctypes.c_char_p),
        ("help", ctypes.c_char_p),
        ("alias", ctypes.c_char_p),
    ]


class Memory(ctypes.Structure):
    """struct stk_memory: the memory a loader takes, by the library's rule."""
    _fields_ = [
        ("size", c_u32),
        ("nslots", c_u32),
        ("slot_bytes", c_u64),
        ("pool_bytes", c_u64),
        ("index_bytes", c_u64),
        ("meta_bytes", c_u64),
        ("decode_threads", c_u32),
        ("decode_bytes", c_u64),
        ("total", c_u64),
        ("read_areas", c_u32),
        ("read_area_bytes", c_u64),
        ("read_pool_bytes", c_u64),
    ]


class LoaderState(ctypes.Structure):
    """struct stk_loader_state."""
    _fields_ = [("seed", c_u64), ("epoch", c_u64), ("batches", c_u64)]


RESUME_SEGMENTS = 16  # STK_RESUME_SEGMENTS


class ResumeSegment(ctypes.Structure):
    """struct stk_resume_segment."""
    _fields_ = [("world_size", c_u32), ("reserved", c_u32), ("batches", c_u64)]


class Resume(ctypes.Structure):
    """struct stk_resume: a resume point for any number of ranks."""
    _fields_ = [
        ("size", c_u32),
        ("nsegments", c_u32),
        ("fingerprint", c_u64),
        ("seed", c_u64),
        ("epoch", c_u64),
        ("batch_size", c_u32),
        ("flags", c_u32),
        ("shuffle_mode", c_u32),
        ("shuffle_window", c_u32),
        ("segments", ResumeSegment * RESUME_SEGMENTS),
    ]


# --- prototypes --------------------------------------------------------------

_vp = ctypes.c_void_p  # struct stk_loader * and struct stk_batch * are opaque here


def _proto(name, restype, *argtypes):
    fn = getattr(lib, name)
    fn.restype = restype
    fn.argtypes = list(argtypes)
    return fn


stk_version = _proto("stk_version", ctypes.c_char_p)
stk_strerror = _proto("stk_strerror", ctypes.c_char_p, ctypes.c_int)
stk_err_name = _proto("stk_err_name", ctypes.c_char_p, ctypes.c_int)
stk_loader_create = _proto("stk_loader_create", ctypes.c_int, ctypes.POINTER(_vp),
                           ctypes.POINTER(LoaderOpts), ctypes.c_char_p, ctypes.c_size_t)
stk_loader_destroy = _proto("stk_loader_destroy", None, _vp)
# The out parameter is read as a plain address (struct stk_batch **).
stk_loader_next = _proto("stk_loader_next", ctypes.c_int, _vp, ctypes.POINTER(_vp))
stk_batch_release = _proto("stk_batch_release", None, _vp, _vp)
stk_loader_start = _proto("stk_loader_start", ctypes.c_int, _vp, c_u64, c_u64)
stk_loader_state = _proto("stk_loader_state", None, _vp, ctypes.POINTER(LoaderState))
stk_last_error = _proto("stk_last_error", ctypes.c_char_p, _vp)
stk_loader_len = _proto("stk_loader_len", c_i64, _vp)
stk_loader_rank_samples = _proto("stk_loader_rank_samples", c_i64, _vp)
stk_loader_num_samples = _proto("stk_loader_num_samples", c_i64, _vp)
stk_loader_sample = _proto("stk_loader_sample", ctypes.c_int, _vp, c_i64, ctypes.c_char_p,
                           ctypes.c_size_t, ctypes.POINTER(c_u64), ctypes.POINTER(c_i64))
stk_loader_num_classes = _proto("stk_loader_num_classes", c_i64, _vp)
stk_loader_class_name = _proto("stk_loader_class_name", ctypes.c_char_p, _vp, c_i64)
stk_loader_engine = _proto("stk_loader_engine", ctypes.c_char_p, _vp)
stk_loader_stats = _proto("stk_loader_stats", ctypes.c_int, _vp, ctypes.POINTER(Stats))
stk_loader_remote_stats = _proto("stk_loader_remote_stats", ctypes.c_int, _vp,
                                 ctypes.POINTER(RemoteStats))
stk_loader_options = _proto("stk_loader_options", ctypes.c_int, _vp, ctypes.POINTER(LoaderOpts),
                            ctypes.POINTER(ImageOpts))
stk_sys_pin_probe = _proto("stk_sys_pin_probe", ctypes.c_int, c_u64, ctypes.c_char_p,
                           ctypes.c_size_t)
stk_loader_diagnose = _proto("stk_loader_diagnose", ctypes.c_int, _vp, ctypes.c_double,
                             ctypes.POINTER(Verdict))
stk_loader_add_time = _proto("stk_loader_add_time", None, _vp, ctypes.c_int, c_u64)
stk_loader_restart = _proto("stk_loader_restart", ctypes.c_int, _vp, c_u64, c_u64, c_u32)
stk_option_at = _proto("stk_option_at", ctypes.POINTER(Option), ctypes.c_int)
stk_option_find = _proto("stk_option_find", ctypes.POINTER(Option), ctypes.c_char_p)
stk_video_option_at = _proto("stk_video_option_at", ctypes.POINTER(Option), ctypes.c_int)
stk_video_make = _proto("stk_video_make", ctypes.c_int, ctypes.c_char_p,
                        ctypes.POINTER(VideoMakeOpts), ctypes.c_char_p, ctypes.c_size_t)
stk_video_codecs = _proto("stk_video_codecs", ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t)
stk_loader_memory = _proto("stk_loader_memory", ctypes.c_int, ctypes.c_void_p,
                           ctypes.POINTER(Memory))
stk_option_set = _proto("stk_option_set", ctypes.c_int, ctypes.POINTER(Option), ctypes.c_void_p,
                        ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t)
stk_option_get = _proto("stk_option_get", ctypes.c_int, ctypes.POINTER(Option), ctypes.c_void_p,
                        ctypes.c_char_p, ctypes.c_size_t)
stk_loader_opts_check = _proto("stk_loader_opts_check", ctypes.c_int, ctypes.POINTER(LoaderOpts),
                               ctypes.c_char_p, ctypes.c_size_t)
stk_image_opts_check = _proto("stk_image_opts_check", ctypes.c_int, ctypes.POINTER(ImageOpts),
                              ctypes.c_char_p, ctypes.c_size_t)
stk_struct_size = _proto("stk_struct_size", ctypes.c_size_t, ctypes.c_char_p)
stk_err_at = _proto("stk_err_at", ctypes.c_int, ctypes.c_int)
stk_bound_name = _proto("stk_bound_name", ctypes.c_char_p, ctypes.c_int)


stk_hist_create = _proto("stk_hist_create", ctypes.c_int, ctypes.POINTER(_vp))
stk_hist_destroy = _proto("stk_hist_destroy", None, _vp)
stk_hist_reset = _proto("stk_hist_reset", None, _vp)
stk_hist_add = _proto("stk_hist_add", None, _vp, c_u64)
stk_hist_max = _proto("stk_hist_max", c_u64, _vp)
stk_hist_percentile = _proto("stk_hist_percentile", c_u64, _vp, ctypes.c_double)
stk_loader_stats_reset = _proto("stk_loader_stats_reset", None, _vp)
stk_loader_tuning = _proto("stk_loader_tuning", ctypes.c_int, _vp, ctypes.c_char_p,
                           ctypes.c_size_t)
# Polled by the iteration so that Ctrl-C is seen while a read hangs.
stk_loader_next_timeout = _proto("stk_loader_next_timeout", ctypes.c_int, _vp,
                                    ctypes.POINTER(_vp), c_u64)
# Joins the threads at close() while tensors over the pool are still alive.
stk_loader_stop = _proto("stk_loader_stop", None, _vp)
stk_metrics_serve = _proto("stk_metrics_serve", ctypes.c_int, ctypes.POINTER(_vp),
                              ctypes.c_char_p, _vp, ctypes.c_char_p)
stk_metrics_server_port = _proto("stk_metrics_server_port", ctypes.c_int, _vp)
stk_metrics_server_destroy = _proto("stk_metrics_server_destroy", None, _vp)
# The one formatter every front end writes sizes a user types with ("1 TiB").
stk_fmt_ibytes = _proto("stk_fmt_ibytes", ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t,
                        ctypes.c_double)
# Where `stoker exporter` finds the loaders of this machine.
stk_loader_publish = _proto("stk_loader_publish", ctypes.c_int, ctypes.POINTER(_vp), _vp,
                            ctypes.c_char_p, ctypes.c_char_p, ctypes.c_double)
stk_publisher_path = _proto("stk_publisher_path", ctypes.c_char_p, _vp)
stk_publisher_destroy = _proto("stk_publisher_destroy", None, _vp)
# Where a sample's bytes lie (a tar member's offset in its shard).
stk_loader_sample_extent = _proto("stk_loader_sample_extent", ctypes.c_int, _vp, c_i64,
                                  ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(c_u64),
                                  ctypes.POINTER(c_u64))
stk_loader_resume_point = _proto("stk_loader_resume_point", ctypes.c_int, _vp,
                                 ctypes.POINTER(Resume))
stk_loader_resume = _proto("stk_loader_resume", ctypes.c_int, _vp, ctypes.POINTER(Resume))
stk_cpu_share = _proto("stk_cpu_share", ctypes.c_int, c_u32, c_u32, ctypes.POINTER(CpuShare),
                       ctypes.c_char_p, ctypes.c_size_t)
stk_loader_cpu_share = _proto("stk_loader_cpu_share", ctypes.c_int, _vp,
                              ctypes.POINTER(CpuShare))
stk_image_bytes = _proto("stk_image_bytes", ctypes.c_size_t, ctypes.POINTER(ImageOpts))
stk_jpeg_transcode = _proto("stk_jpeg_transcode", ctypes.c_int, ctypes.c_void_p,
                               ctypes.c_size_t, ctypes.POINTER(ctypes.c_void_p),
                               ctypes.POINTER(ctypes.c_size_t), ctypes.c_char_p, ctypes.c_size_t)
stk_jpeg_restart_info = _proto("stk_jpeg_restart_info", ctypes.c_int, ctypes.c_void_p,
                                  ctypes.c_size_t, ctypes.POINTER(ctypes.c_uint32),
                                  ctypes.POINTER(ctypes.c_uint32), ctypes.c_char_p,
                                  ctypes.c_size_t)
stk_free = _proto("stk_free", None, ctypes.c_void_p)
stk_video_opts_check = _proto("stk_video_opts_check", ctypes.c_int, ctypes.POINTER(VideoOpts),
                              ctypes.c_char_p, ctypes.c_size_t)
stk_video_clip_bytes = _proto("stk_video_clip_bytes", ctypes.c_size_t,
                              ctypes.POINTER(VideoOpts))
stk_loader_video_options = _proto("stk_loader_video_options", ctypes.c_int, ctypes.c_void_p,
                                  ctypes.POINTER(VideoOpts))
stk_image_decode = _proto("stk_image_decode", ctypes.c_int, ctypes.POINTER(ImageOpts),
                             ctypes.c_void_p, ctypes.c_size_t, c_u64, c_u64, c_i64,
                             ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t)


def strerror(code):
    """The library's message for a negative code (-errno or STK_E*)."""
    s = stk_strerror(code)
    return s.decode("utf-8", "replace") if s else "error %d" % code


def err_name(code):
    """The code's symbolic name, e.g. "ENOENT" or "STK_ESHORT"."""
    s = stk_err_name(code)
    return s.decode("ascii", "replace") if s else str(code)


def version():
    """libstoker's version at run time, e.g. "0.1.0"."""
    return stk_version().decode("ascii")


# --- the library's own codes (STK_ERR_MAP), e.g. ESHORT = -1001 ---------------

def _codes():
    out, i = {}, 0
    while True:
        code = stk_err_at(i)
        if not code:
            return out
        out[err_name(code)[len("STK_"):]] = code
        i += 1


globals().update(_codes())

# --- layout check: every mirrored struct against the library's sizeof --------

def _check_layout():
    bad = []
    for cname, cls in (("stk_loader_opts", LoaderOpts), ("stk_image_opts", ImageOpts),
                       ("stk_batch", BatchStruct), ("stk_stats", Stats),
                       ("stk_loader_state", LoaderState), ("stk_verdict", Verdict),
                       ("stk_option", Option), ("stk_resume", Resume),
                       ("stk_resume_segment", ResumeSegment), ("stk_cpu_share", CpuShare),
                       ("stk_memory", Memory), ("stk_remote_stats", RemoteStats),
                       ("stk_video_opts", VideoOpts), ("stk_clip_info", ClipInfo),
                       ("stk_video_make_opts", VideoMakeOpts)):
        theirs, ours = stk_struct_size(cname.encode()), ctypes.sizeof(cls)
        if theirs != ours:
            bad.append("struct %s: %d bytes in %s, %d in stoker/_lib.py" % (cname, theirs,
                                                                        lib_path, ours))
    if bad:
        raise ImportError("stoker: this libstoker (%s, version %s) does not match the Python "
                          "package: %s. Rebuild the library and the package together."
                          % (lib_path, version(), "; ".join(bad)))


_check_layout()

# --- the option table ---------------------------------------------------------

OPT_LOADER, OPT_IMAGE, OPT_VIDEO = 0, 1, 2
(OPT_U32, OPT_U64, OPT_FLOAT, OPT_FLOAT3, OPT_DURATION, OPT_STR, OPT_ENUM, OPT_FLAG,
 OPT_NOFLAG, OPT_BITCHOICE) = range(10)
OPT_BYTES = 1  # a U64 row's bit: a size in bytes (stoker.h's STK_OPT_BYTES)


class OptionRow:
    """One row of the library's option table, in Python's terms."""

    __slots__ = ("name", "group", "type", "offset", "bit", "default", "min", "max", "choices",
                 "help", "aliases", "short", "_ptr")

    def __init__(self, ptr):
        r = ptr.contents
        self._ptr = ptr
        self.name = r.name.decode()
        self.group = r.group
        self.type = r.type
        self.offset = r.offset
        self.bit = r.bit
        self.default = getattr(r, "def").decode()
        self.min, self.max = r.min, r.max
        self.choices = r.choices.decode().split(",") if r.choices else None
        self.help = r.help.decode()
        names = r.alias.decode().split(",") if r.alias else []
        self.aliases = [a for a in names if len(a) > 1]  # other keywords for it
        self.short = next((a for a in names if len(a) == 1), None)  # the CLI's -X

    def python_default(self):
        """The default as a Python value (what the keyword's default reads)."""
        d = self.default
        if self.type in (OPT_FLAG, OPT_NOFLAG):
            return d == "true"
        if self.type in (OPT_U32, OPT_U64):
            return d if self.choices and d == self.choices[0] else int(d)
        if self.type == OPT_FLOAT:
            return float(d)
        if self.type == OPT_FLOAT3:
            return tuple(float(x) for x in d.split(","))
        if self.type == OPT_STR:
            return d or None
        if self.type == OPT_DURATION:
            return d
        return d

    def set(self, struct, text, keep):
        """Parses text into the option's field of struct (ctypes); ValueError
        with the library's message (the option's name and range)."""
        raw = os.fsencode(text) if isinstance(text, str) else text
        keep.append(raw)  # a STR field points at it until create copies it
        err = ctypes.create_string_buffer(512)
        rc = stk_option_set(self._ptr, ctypes.addressof(struct), raw, err, len(err))
        if rc < 0:
            e = ValueError(err.value.decode("utf-8", "replace"))
            e.code = rc  # errors.option_error makes it a stoker.OptionError
            raise e

    def get(self, struct):
        buf = ctypes.create_string_buffer(512)
        n = stk_option_get(self._ptr, ctypes.addressof(struct), buf, len(buf))
        return buf.value.decode() if n >= 0 else None


def _rows(at):
    out, i = {}, 0
    while True:
        p = at(i)
        if not p:
            return out
        row = OptionRow(p)
        out[row.name] = row
        i += 1


OPTIONS = _rows(stk_option_at)
# The video rows are a list of their own: their names repeat image rows'.
VIDEO_OPTIONS = _rows(stk_video_option_at)


def _check_offsets():
    for row in list(OPTIONS.values()) + list(VIDEO_OPTIONS.values()):
        cls = {OPT_LOADER: LoaderOpts, OPT_IMAGE: ImageOpts, OPT_VIDEO: VideoOpts}[row.group]
        mine = [f for f, _ in cls._fields_ if getattr(cls, f).offset == row.offset]
        if not mine:
            raise ImportError("stoker: option %s sits at offset %d of the C struct, where "
                              "stoker/_lib.py has no field; rebuild the package with the "
                              "library" % (row.name, row.offset))


_check_offsets()


def shown(value):
    """A value as an error quotes it: its type, and its repr cut short."""
    r = repr(value)
    return "%s %s" % (type(value).__name__, r if len(r) <= 60 else r[:57] + "...")


def is_bool(value):
    """True for a bool or a numpy bool: what a yes/no option takes (not a
    string, where 'False' would be true, nor 0/1)."""
    t = type(value)
    # numpy.bool_ is named "bool" from NumPy 2 on (pip's, beside PyTorch 2.x).
    return isinstance(value, bool) or (t.__module__ == "numpy" and t.__name__ in ("bool_", "bool"))


def check_bool(name, value):
    """value as a bool, or TypeError naming `name` and the value's type."""
    if not is_bool(value):
        raise TypeError("%s must be True or False, not %s" % (name, shown(value)))
    return bool(value)


def check_int(name, value, lo, hi):
    """value as an int in lo..hi: TypeError (not an integer: bools, floats,
    strings) or ValueError, each naming `name`.  For the binding's own
    arguments; the options' ranges are the table's (option_text)."""
    try:
        if is_bool(value):
            raise TypeError
        value = operator.index(value)
    except TypeError:
        raise TypeError("%s must be an integer, not %s" % (name, shown(value))) from None
    if not lo <= value <= hi:
        raise ValueError("%s must be in %d..%d, not %d" % (name, lo, hi, value))
    return value


_WIDTH = {OPT_U32: 0xFFFFFFFF, OPT_U64: 0xFFFFFFFFFFFFFFFF}


def option_text(row, value):
    """A Python value as the text the library's parser reads for `row`, or
    TypeError naming the option and the value's type when its type cannot
    be the option's: the one place every keyword's type is checked.  A flag
    takes a bool only ('False' and 0 are not read by truthiness); the
    ranges are the library's, but for an integer past its C field's width."""
    t = row.type

    def integer(v):
        if is_bool(v):
            raise TypeError
        return operator.index(v)

    try:
        if t in (OPT_U32, OPT_U64):
            if isinstance(value, str) and row.choices and value in row.choices:
                return value
            if isinstance(value, str) and t == OPT_U64 and row.bit & OPT_BYTES:
                return value  # a size: "64MiB", "1.5G" (stk_parse_size reads it)
            n = integer(value)
            if not 0 <= n <= _WIDTH[t]:
                e = ValueError("%s: %d is out of range 0..%d" % (row.name, n, _WIDTH[t]))
                e.code = -errno.ERANGE
                raise e
            return str(n)
        if t == OPT_DURATION:
            return value if isinstance(value, str) else str(integer(value))
        if t == OPT_FLOAT:
            if is_bool(value) or isinstance(value, str):
                raise TypeError
            return repr(float(value))
        if t == OPT_FLOAT3:
            vals = [value] if not hasattr(value, "__len__") else list(value)
            if any(is_bool(v) or isinstance(v, str) for v in vals):
                raise TypeError
            return ",".join(repr(float(v)) for v in vals)
        if t in (OPT_FLAG, OPT_NOFLAG):
            if not is_bool(value):
                raise TypeError
            return "true" if value else "false"
        if t in (OPT_ENUM, OPT_BITCHOICE):
            if not isinstance(value, str):
                raise TypeError
            return value
        if t == OPT_STR:
            if value is None:
                return ""
            if not isinstance(value, (str, bytes, os.PathLike)):
                raise TypeError
            return os.fsdecode(value)
    except (TypeError, ValueError) as e:
        if getattr(e, "code", None):
            raise
    if t == OPT_U64 and row.bit & OPT_BYTES:
        kind = "a number of bytes or a size like '64MiB'"
    else:
        kind = {OPT_U32: "an integer", OPT_U64: "an integer",
                OPT_DURATION: "ns or text like '5ms'", OPT_FLOAT: "a number",
                OPT_FLOAT3: "one number or three", OPT_ENUM: "a string",
                OPT_BITCHOICE: "a string", OPT_STR: "a path or string",
                OPT_FLAG: "True or False", OPT_NOFLAG: "True or False"}.get(t, "a value")
    if row.choices and t in (OPT_U32, OPT_U64):
        kind += " or %r" % row.choices[0]
    raise TypeError("%s must be %s, not %s" % (row.name, kind, shown(value)))


def pin_probe(nbytes):
    """(rc, why): whether nbytes can be pinned for GPU copies here, as the
    loader pins its slots (stk_sys_pin_probe): 0, or -errno and the reason."""
    buf = ctypes.create_string_buffer(256)
    rc = stk_sys_pin_probe(int(nbytes), buf, len(buf))
    return rc, buf.value.decode("utf-8", "replace")
