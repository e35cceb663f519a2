"""Lossless JPEG rewriting for image mode (stk_jpeg_transcode in the C library).

    with open(path, "rb") as f:
        data = stoker.transcode_jpeg(f.read())   # the same pixels, restart-indexed
    stoker.restart_info(data)                    # (interval, intervals) or None

A rewritten JPEG has restart markers that tile its MCU rows and optimized
Huffman tables; the loader's image mode then entropy-decodes only the
intervals a crop covers.  `stoker transcode SRC DST` does a whole folder.
"""

import ctypes

from . import _lib
from .errors import Error


def transcode_jpeg(data):
    """The JPEG in `data` (bytes-like) rewritten losslessly with restart
    markers; raises stoker.Error (STK_EFORMAT: not a JPEG, STK_ECORRUPT:
    corrupt or unsupported, with libjpeg's message) when it cannot be."""
    if _lib.stk_jpeg_transcode is None:
        raise NotImplementedError("this libstoker has no stk_jpeg_transcode")
    data = bytes(data)
    out, n = ctypes.c_void_p(), ctypes.c_size_t()
    err = ctypes.create_string_buffer(512)
    rc = _lib.stk_jpeg_transcode(data, len(data), ctypes.byref(out), ctypes.byref(n), err,
                                 len(err))
    if rc:
        raise Error(rc, err.value.decode("utf-8", "replace") or None)
    try:
        return ctypes.string_at(out, n.value)
    finally:
        _lib.stk_free(out)


def restart_info(data):
    """(interval in MCUs, interval count) when image mode can decode this
    JPEG by its restart intervals, else None."""
    if _lib.stk_jpeg_restart_info is None:
        return None
    data = bytes(data)
    r, n = ctypes.c_uint32(), ctypes.c_uint32()
    rc = _lib.stk_jpeg_restart_info(data, len(data), ctypes.byref(r), ctypes.byref(n), None, 0)
    if rc < 0:
        raise Error(rc)
    return (r.value, n.value) if rc == 1 else None
