"""ctypes view of libstoker: finding the library, the C structs, the prototypes.

The structs mirror include/stoker/stoker.h field for field (ctypes lays them out
with the C ABI's natural alignment, as the compiler does); tests/python checks
the offsets against a compiled probe when a C compiler is present.  Nothing
here needs a compiler at run time.
"""

import ctypes
import ctypes.util
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
PACKAGE_VERSION = _build.VERSION if _build else _tree_version()


def _candidates():
    env = os.environ.get("STOKER_LIB")
    if env:
        # An explicit choice: do not silently fall back to another build.
        return [env]
    if _build is not None and _build.BUNDLED:
        return [_BESIDE]
    names = [_BESIDE] if os.path.exists(_BESIDE) else []
    if _build is not None and _build.LIBDIR:
        names.append(os.path.join(_build.LIBDIR, _SONAME))
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
    if _build is not None and _build.BUNDLED and not os.environ.get("STOKER_LIB") \
            and not os.path.exists(_BESIDE):
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

ENGINE_AUTO, ENGINE_URING, ENGINE_PREAD, ENGINE_NULL = 0, 1, 2, 3
ON_ERROR_SKIP, ON_ERROR_FAIL = 0, 1

F_NO_SHUFFLE = 1 << 0
F_DROP_LAST = 1 << 1
F_DIRECT = 1 << 2
F_NO_PIN = 1 << 3
F_QUIET = 1 << 4
F_NO_CACHE = 1 << 5

ESHORT = -1001
ECORRUPT = -1002
EINDEX = -1003
EEMPTY = -1004
EFORMAT = -1005
ETOOBIG = -1006
ENOSLOT = -1007

HIST_BATCH_WAIT, HIST_READ, HIST_DECODE = 0, 1, 2

# image mode
CROP_RANDOM_RESIZED, CROP_CENTER = 0, 1
DTYPE_UINT8, DTYPE_FLOAT32, DTYPE_FLOAT16 = 0, 1, 2
IMG_NO_FLIP = 1 << 0
IMG_NHWC = 1 << 1
IMG_NORMALIZE = 1 << 2

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
    ]


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


def _optional(name, restype, *argtypes):
    """A call that newer libraries have; None when this one lacks it."""
    return _proto(name, restype, *argtypes) if hasattr(lib, name) else None


stk_hist_create = _proto("stk_hist_create", ctypes.c_int, ctypes.POINTER(_vp))
stk_hist_destroy = _proto("stk_hist_destroy", None, _vp)
stk_hist_reset = _proto("stk_hist_reset", None, _vp)
stk_hist_add = _proto("stk_hist_add", None, _vp, c_u64)
stk_hist_max = _proto("stk_hist_max", c_u64, _vp)
stk_hist_percentile = _proto("stk_hist_percentile", c_u64, _vp, ctypes.c_double)
stk_loader_stats_reset = _optional("stk_loader_stats_reset", None, _vp)
# Polled by the iteration so that Ctrl-C is seen while a read hangs.
stk_loader_next_timeout = _optional("stk_loader_next_timeout", ctypes.c_int, _vp,
                                    ctypes.POINTER(_vp), c_u64)
# Joins the threads at close() while tensors over the pool are still alive.
stk_loader_stop = _optional("stk_loader_stop", None, _vp)
stk_metrics_serve = _optional("stk_metrics_serve", ctypes.c_int, ctypes.POINTER(_vp),
                              ctypes.c_char_p, _vp, ctypes.c_char_p)
stk_metrics_server_port = _optional("stk_metrics_server_port", ctypes.c_int, _vp)
stk_metrics_server_destroy = _optional("stk_metrics_server_destroy", None, _vp)
# Where a sample's bytes lie (a tar member's offset in its shard).
stk_loader_sample_extent = _optional("stk_loader_sample_extent", ctypes.c_int, _vp, c_i64,
                                     ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(c_u64),
                                     ctypes.POINTER(c_u64))
stk_loader_resume_point = _optional("stk_loader_resume_point", ctypes.c_int, _vp,
                                    ctypes.POINTER(Resume))
stk_loader_resume = _optional("stk_loader_resume", ctypes.c_int, _vp, ctypes.POINTER(Resume))
stk_image_bytes = _optional("stk_image_bytes", ctypes.c_size_t, ctypes.POINTER(ImageOpts))
stk_image_decode = _optional("stk_image_decode", ctypes.c_int, ctypes.POINTER(ImageOpts),
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
