"""Batch slots shared with Python: the C handle's owner and the leases.

A batch's `data` tensor is built over its slot without copying: a _Lease
exposes the slot through ``__array_interface__``, numpy keeps the lease as the
array's base, and ``torch.from_numpy`` keeps the array alive from the tensor's
storage.  When the last tensor (or view) over the slot is freed, the lease's
``__del__`` gives the slot back with ``stk_batch_release`` (callable from any
thread).  In image mode the lease spans the slot from its raw bytes to the end
of its images, so the images tensor, any view of it and `raw` all keep it;
in video mode likewise to the end of its clips.
_Core owns the C handle: close() stops the loader at once (stk_loader_stop
joins its threads but keeps the pool mapped) and destroys it, unmapping the
slots, once no lease is left.
"""

import ctypes
import os
import threading
import weakref

import numpy as np

from . import _lib
from .image import _np_dtype


class _Core:
    """Owns the C handle.  Shared by the Loader and every lease on its slots;
    destroys the handle once the loader is closed and no lease is left."""

    def __init__(self, handle):
        self.h = handle
        self.lock = threading.RLock()
        self.owned = {}          # batch address -> id() of the lease holding it
        self.closing = False
        self.forked = False
        _cores.add(self)
        # Bound here so that destruction late in interpreter shutdown still works.
        self._release = _lib.stk_batch_release
        self._destroy_fn = _lib.stk_loader_destroy
        self._stop_fn = _lib.stk_loader_stop
        self.pub = None          # the loader's metrics file for `stoker exporter`
        self._unpublish_fn = _lib.stk_publisher_destroy

    def release(self, addr, token):
        """Releases the batch at addr if the lease with id `token` (or, with
        token None, nobody) holds it: one release per batch handed out."""
        with self.lock:
            if self.h is None:
                return
            if self.owned.get(addr) != token:
                return
            if token is not None:
                del self.owned[addr]
            self._release(self.h, addr)
            if self.closing and not self.owned:
                self._destroy()

    def close(self):
        """Destroys the handle now if no lease is left; else stops it now
        (its threads are joined, the slots stay mapped for the leases) and
        destroys it with the last lease."""
        with self.lock:
            self.closing = True
            self._unpublish()  # its thread reads the loader: first
            if not self.owned:
                self._destroy()
            elif self.h is not None and self._stop_fn is not None:
                self._stop_fn(self.h)

    def _unpublish(self):
        pub, self.pub = self.pub, None
        if pub and self._unpublish_fn is not None:
            self._unpublish_fn(pub)

    def _destroy(self):
        self._unpublish()
        h, self.h = self.h, None
        if h is not None:
            self._destroy_fn(h)


# A forked child has the loader's memory but not its threads (and perhaps a
# mutex some thread held): the child must never call into that loader.
_cores = weakref.WeakSet()


def _after_fork_in_child():
    for core in list(_cores):
        core.h = None
        core.pub = None  # its thread is the parent's
        core.forked = True
        core.owned = {}
        core.lock = threading.RLock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


class _Lease:
    """The base object of a batch's data array: gives the slot back when freed."""

    __slots__ = ("core", "addr", "__array_interface__", "__weakref__")

    def __init__(self, core, addr, data, nbytes):
        self.core = core
        self.addr = addr
        with core.lock:
            core.owned[addr] = id(self)  # not self: the lease must be free to die
        self.__array_interface__ = {"version": 3, "shape": (nbytes,), "typestr": "|u1",
                                    "data": (data, False)}

    def release(self):
        core = getattr(self, "core", None)
        if core is not None:
            self.core = None
            core.release(self.addr, id(self))

    def __del__(self):
        try:
            self.release()
        except Exception:  # interpreter shutdown: nothing sensible left to do
            pass


class _SlotViews:
    """numpy views over one slot's per-sample arrays (fixed C allocations)."""

    __slots__ = ("view", "key", "offsets", "sizes", "labels", "indices", "image", "video",
                 "block")

    def __init__(self, addr, batch_size):
        self.view = _lib.BatchStruct.from_address(addr)
        v = self.view
        # image mode: (images - data, bytes per image, one image's shape, numpy dtype)
        self.image = None
        if v.images:
            shape = (v.height, v.width, v.channels) if v.nhwc else (v.channels, v.height, v.width)
            # without keep_raw the slot holds only the images (data is NULL)
            self.image = (v.images - v.data if v.data else 0, v.image_bytes, shape,
                          _np_dtype(v.dtype))
        # video mode: (clips - data, bytes per clip, one clip's shape, the clip_info array)
        self.video = None
        if v.clips:
            t, h, w = v.frames, v.height, v.width
            shape = (t, 3, h, w) if v.tchw else (t, h, w, 3)
            isz = ctypes.sizeof(_lib.ClipInfo)
            info = (ctypes.c_char * (isz * batch_size)).from_address(v.clip_info)
            # the reads go to read areas (data NULL): the slot holds the clips
            self.video = (v.clips - v.data if v.data else 0, v.clip_bytes, shape,
                          np.frombuffer(info, dtype=_clip_dtype()))

        def arr(ptr, n):
            p = ctypes.cast(ptr, ctypes.POINTER(ctypes.c_int64))
            return np.ctypeslib.as_array(p, shape=(n,))
        # uint64 offsets and sizes are read as int64: they are far below 2^63.
        self.offsets = arr(v.offsets, batch_size + 1)
        self.sizes = arr(v.sizes, batch_size)
        self.labels = arr(v.labels, batch_size)
        self.indices = arr(v.indices, batch_size)
        # libstoker keeps the four arrays in one block (offsets | sizes | labels
        # | indices): a full batch's are then one copy, in the order _next lays
        # them out.  Checked, not assumed.
        self.block = None
        b = batch_size
        if (v.sizes == v.offsets + 8 * (b + 1) and v.labels == v.sizes + 8 * b
                and v.indices == v.labels + 8 * b):
            self.block = arr(v.offsets, 4 * b + 1)
        self.key = self.current()

    def current(self):
        """The slot's array pointers now (fixed for the loader's life; checked
        anyway, cheaply: the other three follow offsets, see above)."""
        v = self.view
        return (v.offsets, v.images, v.clips) if self.block is not None else \
            (v.offsets, v.sizes, v.labels, v.indices, v.images, v.clips)


_CLIP_DTYPE = []


def _clip_dtype():
    """numpy's view of struct stk_clip_info (from the ctypes mirror's fields
    and offsets, padding included)."""
    if not _CLIP_DTYPE:
        c = _lib.ClipInfo
        names = [f for f, _ in c._fields_]
        _CLIP_DTYPE.append(np.dtype({
            "names": names,
            "formats": [np.dtype(t) for _, t in c._fields_],
            "offsets": [getattr(c, f).offset for f in names],
            "itemsize": ctypes.sizeof(c)}))
    return _CLIP_DTYPE[0]


def _closed_message(core):
    if core is not None and core.forked:
        return ("this stoker.Loader was created before fork(): its threads are in the "
                "parent; create a loader in the child process")
    return "the loader is closed"
