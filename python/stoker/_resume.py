"""Loader.state_dict() <-> struct stk_resume.

The dict: {"version" (of this layout: VERSION), "seed", "epoch", "batches"
(handed out so far in the epoch, on each rank), "segments" (the epoch's parts
as [world_size, batches each]; more than one after an elastic resume),
"world_size" (the saver's), "batch_size", "fingerprint" (of the dataset's
index, hex), "shuffle", "drop_last", "shuffle_mode", "shuffle_window"}.  A
state without "version" is the previous release's, which wrote these same
keys: read as version 1.  libstoker checks it against the loader
(stk_loader_resume); this side checks it is one: no other key, each field's
type (TypeError naming it), and the fields that must agree with each other
("batches" is the segments' sum, "world_size" the last segment's, a
"shuffle_window" only in shard mode), ValueError naming the field.
"""

import collections.abc
import ctypes
import operator

from . import _lib

VERSION = 1
_KEYS = ("version", "seed", "epoch", "batches", "segments", "world_size", "batch_size",
         "fingerprint", "shuffle", "drop_last", "shuffle_mode", "shuffle_window")
_U32 = 0xFFFFFFFF
_U64 = 0xFFFFFFFFFFFFFFFF


def _field(name):
    return "state_dict[%r]" % name


def _uint(name, value, hi=_U32, lo=0):
    try:
        if _lib.is_bool(value):
            raise TypeError
        value = operator.index(value)
    except TypeError:
        raise TypeError("%s must be an integer, not %s"
                        % (_field(name), _lib.shown(value))) from None
    if not lo <= value <= hi:
        raise ValueError("%s must be in %d..%d, not %d" % (_field(name), lo, hi, value))
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
    return {"version": VERSION, "seed": p.seed, "epoch": epoch,
            "batches": sum(k for _, k in segs), "segments": segs, "world_size": world_size, "batch_size": p.batch_size,
            "fingerprint": "%016x" % p.fingerprint,
            "shuffle": not p.flags & _NO_SHUFFLE,
            "drop_last": bool(p.flags & _DROP_LAST),
            "shuffle_mode": _MODES[p.shuffle_mode],
            "shuffle_window": p.shuffle_window}


def _segments(segs):
    if isinstance(segs, (str, bytes)) or not isinstance(segs, collections.abc.Sequence):
        raise TypeError("%s must be a list of [world_size, batches] pairs, not %s"
                        % (_field("segments"), _lib.shown(segs)))
    if not 1 <= len(segs) <= _lib.RESUME_SEGMENTS:
        raise ValueError("%s must have 1..%d entries, not %d"
                         % (_field("segments"), _lib.RESUME_SEGMENTS, len(segs)))
    out = []
    for seg in segs:
        if isinstance(seg, (str, bytes)) or not isinstance(seg, collections.abc.Sequence) \
                or len(seg) != 2:
            raise TypeError("%s must hold [world_size, batches] pairs, not %s"
                            % (_field("segments"), _lib.shown(seg)))
        out.append((_uint("segments", seg[0], lo=1), _uint("segments", seg[1], _U64)))
    return out


def from_dict(state):
    """A struct stk_resume from a state_dict(); TypeError or ValueError
    naming the field if it is not one."""
    if not isinstance(state, collections.abc.Mapping):
        raise TypeError("a state_dict is a dict, as Loader.state_dict() makes, not %s"
                        % _lib.shown(state))
    version = state.get("version")
    if version is not None and _uint("version", version, _U64) > VERSION:
        raise ValueError("%s is %d: written by a newer stoker (this one reads states up to "
                         "version %d)" % (_field("version"), version, VERSION))
    missing = [k for k in _KEYS if k not in state and k != "version"]
    if missing:
        raise ValueError("state_dict lacks %s: it was not made by this stoker's "
                         "Loader.state_dict() (older ones kept only seed, epoch and batches, "
                         "and no fingerprint of the dataset to check it against)"
                         % ", ".join(repr(k) for k in missing))
    unknown = sorted(str(k) for k in state if k not in _KEYS)
    if unknown:
        raise ValueError("state_dict has key%s %s, which Loader.state_dict() does not write "
                         "(its keys: %s)" % ("s" if len(unknown) > 1 else "",
                                             ", ".join(repr(k) for k in unknown),
                                             ", ".join(_KEYS)))
    segs = _segments(state["segments"])
    mode = state["shuffle_mode"]
    if not isinstance(mode, str):
        raise TypeError("%s must be a string, not %s" % (_field("shuffle_mode"),
                                                         _lib.shown(mode)))
    if mode not in _MODES:
        raise ValueError("%s must be one of %s, not %r"
                         % (_field("shuffle_mode"), ", ".join(_MODES), mode))
    fp = state["fingerprint"]
    if not isinstance(fp, str):
        raise TypeError("%s must be a hex string, not %s" % (_field("fingerprint"),
                                                             _lib.shown(fp)))
    try:
        fp = int(fp, 16)
    except ValueError:
        raise ValueError("%s must be a hex string, not %r" % (_field("fingerprint"), fp)) \
            from None
    shuffle = _lib.check_bool(_field("shuffle"), state["shuffle"])
    drop_last = _lib.check_bool(_field("drop_last"), state["drop_last"])
    window = _uint("shuffle_window", state["shuffle_window"])
    batches = _uint("batches", state["batches"], _U64)
    world = _uint("world_size", state["world_size"], lo=1)
    # The fields that say one thing twice must say the same.
    if batches != sum(k for _, k in segs):
        raise ValueError("%s is %d, but its segments %s add up to %d batches"
                         % (_field("batches"), batches, [list(s) for s in segs],
                            sum(k for _, k in segs)))
    if world != segs[-1][0]:
        raise ValueError("%s is %d, but its last segment was run on %d ranks"
                         % (_field("world_size"), world, segs[-1][0]))
    if window and mode != "shard":
        raise ValueError("%s is %d with shuffle_mode %r: a window is shard mode's only"
                         % (_field("shuffle_window"), window, mode))
    p = _lib.Resume(size=ctypes.sizeof(_lib.Resume))
    p.nsegments = len(segs)
    p.fingerprint = _uint("fingerprint", fp, _U64)
    p.seed = _uint("seed", state["seed"], _U64)
    p.epoch = _uint("epoch", state["epoch"], _U64)
    p.batch_size = _uint("batch_size", state["batch_size"])
    p.flags = (0 if shuffle else _NO_SHUFFLE) | (_DROP_LAST if drop_last else 0)
    p.shuffle_mode = _MODES.index(mode)
    p.shuffle_window = window
    for i, (world_i, batches_i) in enumerate(segs):
        p.segments[i].world_size = world_i
        p.segments[i].batches = batches_i
    return p
