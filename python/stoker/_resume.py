"""Loader.state_dict() <-> struct stk_resume.

The dict: {"seed", "epoch", "batches" (handed out so far in the epoch, on each
rank), "segments" (the epoch's parts as [world_size, batches each]; more than
one after an elastic resume), "world_size" (the saver's), "batch_size",
"fingerprint" (of the dataset's index, hex), "shuffle", "drop_last",
"shuffle_mode", "shuffle_window"}.  libstoker checks it against the loader
(stk_loader_resume); this side only checks its shape.
"""

import ctypes
import operator

from . import _lib

_KEYS = ("seed", "epoch", "segments", "batch_size", "fingerprint", "shuffle", "drop_last",
         "shuffle_mode", "shuffle_window")
_U32 = 0xFFFFFFFF
_U64 = 0xFFFFFFFFFFFFFFFF


def _uint(name, value, hi=_U32):
    try:
        if isinstance(value, bool):
            raise TypeError
        value = operator.index(value)
    except TypeError:
        raise ValueError("state_dict[%r] must be an integer, not %r" % (name, value)) from None
    if not 0 <= value <= hi:
        raise ValueError("state_dict[%r] must be in 0..%d, not %d" % (name, hi, value))
    return value


# The flags and choices the resume point carries, as the option table has them.
_NO_SHUFFLE = _lib.OPTIONS["shuffle"].bit
_DROP_LAST = _lib.OPTIONS["drop_last"].bit
_MODES = _lib.OPTIONS["shuffle_mode"].choices


def to_dict(p, world_size, want=None):
    """The dict of resume point p; want=(epoch, batch) replaces the point
    with that one of the same loader (a set_epoch not yet acted on)."""
    segs = [[p.segments[i].world_size, p.segments[i].batches] for i in range(p.nsegments)]
    epoch = p.epoch
    if want is not None:
        epoch, segs = want[0], [[world_size, want[1]]]
    return {"seed": p.seed, "epoch": epoch, "batches": sum(k for _, k in segs),
            "segments": segs, "world_size": world_size, "batch_size": p.batch_size,
            "fingerprint": "%016x" % p.fingerprint,
            "shuffle": not p.flags & _NO_SHUFFLE,
            "drop_last": bool(p.flags & _DROP_LAST),
            "shuffle_mode": _MODES[p.shuffle_mode],
            "shuffle_window": p.shuffle_window}


def from_dict(state):
    """A struct stk_resume from a state_dict(); ValueError if it is not one."""
    missing = [k for k in _KEYS if k not in state]
    if missing:
        raise ValueError("state_dict lacks %s: it was not made by this stoker's "
                         "Loader.state_dict() (older ones kept only seed, epoch and batches, "
                         "and no fingerprint of the dataset to check it against)"
                         % ", ".join(repr(k) for k in missing))
    segs = state["segments"]
    if not 1 <= len(segs) <= _lib.RESUME_SEGMENTS:
        raise ValueError("state_dict['segments'] must have 1..%d entries, not %d"
                         % (_lib.RESUME_SEGMENTS, len(segs)))
    if state["shuffle_mode"] not in _MODES:
        raise ValueError("state_dict['shuffle_mode'] must be one of %s, not %r"
                         % (", ".join(_MODES), state["shuffle_mode"]))
    try:
        fp = int(state["fingerprint"], 16)
    except (TypeError, ValueError):
        raise ValueError("state_dict['fingerprint'] must be a hex string, not %r"
                         % (state["fingerprint"],)) from None
    p = _lib.Resume(size=ctypes.sizeof(_lib.Resume))
    p.nsegments = len(segs)
    p.fingerprint = _uint("fingerprint", fp, _U64)
    p.seed = _uint("seed", state["seed"], _U64)
    p.epoch = _uint("epoch", state["epoch"], _U64)
    p.batch_size = _uint("batch_size", state["batch_size"])
    p.flags = ((0 if state["shuffle"] else _NO_SHUFFLE) |
               (_DROP_LAST if state["drop_last"] else 0))
    p.shuffle_mode = _MODES.index(state["shuffle_mode"])
    p.shuffle_window = _uint("shuffle_window", state["shuffle_window"])
    for i, seg in enumerate(segs):
        world, batches = seg
        p.segments[i].world_size = _uint("segments", world)
        p.segments[i].batches = _uint("segments", batches, _U64)
    return p
