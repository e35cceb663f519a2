"""Exceptions raised by stoker: C error codes become Python exceptions."""

from . import _lib


class Error(OSError):
    """A libstoker failure.

    Attributes:
        code:   the library's negative return code (-errno, or an STK_E* code
                such as -1001 for a short read);
        name:   its symbolic name, "ENOENT", "STK_ESHORT", ...;
        errno:  the positive errno for system errors, None for STK_E* codes;
        path:   the file the error is about, when the library named one;
        reason: the rest of the library's message.

    str(e) is the library's message, "<path>: <reason>", which names the file.
    """

    def __init__(self, code, detail=None, root=None):
        detail = detail or _lib.strerror(code)
        path, reason = _split_detail(detail, root)
        eno = -code if -1000 < code < 0 else None  # STK_E* codes start at -1001
        super().__init__(eno, reason)
        # OSError's own attributes, so `except FileNotFoundError`-style code that
        # looks at e.errno / e.filename keeps working.
        self.filename = path
        self.code = code
        self.name = _lib.err_name(code)
        self.path = path
        self.reason = reason
        self.detail = detail

    def __str__(self):
        return "%s (%s)" % (self.detail, self.name)

    def __reduce__(self):
        return (type(self), (self.code, self.detail))


class NoSlotError(Error):
    """Every batch slot is held by tensors from earlier batches (STK_ENOSLOT).

    Drop references to old batches (keep `.clone()`s of what must outlive the
    next step), raise `prefetch`, or use `copy_free=True`.
    """


class OptionError(Error, ValueError):
    """An option the library refused (out of range, or not one of its choices):
    a ValueError whose message names the option and its range, and still a
    stoker.Error."""


class DeviceError(Error, ValueError):
    """device="cuda" where no GPU can be used: the message names the cause
    (a PyTorch built without CUDA, no driver, no device, a runtime that does
    not start), as PyTorch and libstoker see it.  A ValueError too."""


def option_error(code, detail):
    """The exception for an option the library refused: its message names the
    option as the option table and the keyword arguments do, with the range."""
    return OptionError(code, detail)


def _split_detail(detail, root=None):
    """Splits "<path>: <reason>" (the C library's format) into its parts.

    The path is only taken when it looks like one: it starts with the dataset
    root or contains a slash.  Otherwise the whole text is the reason.
    """
    start = len(root) if root and detail.startswith(root) else 0
    i = detail.find(": ", start)
    if i > 0:
        head = detail[:i]
        if (root and start) or "/" in head:
            return head, detail[i + 2:]
    return None, detail


def error_from(code, detail=None, root=None):
    """The exception for a negative code and the library's detail text."""
    cls = NoSlotError if code == _lib.ENOSLOT else Error
    return cls(code, detail, root)
