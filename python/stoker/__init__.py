"""stoker: keeps GPUs fed.  A PyTorch data loader over libstoker (ctypes).

    import stoker
    with stoker.Loader("/data/train", batch_size=128, seed=0) as loader:
        for epoch in range(10):
            loader.set_epoch(epoch)
            for data, offsets, sizes, labels, indices in loader:
                ...   # sample i: data[offsets[i] : offsets[i] + sizes[i]]

    # image mode: C threads decode and crop each JPEG into the batch
    loader = stoker.Loader("/data/train", 256, image=stoker.Image(224))
    for images, labels in loader:   # images: uint8 (256, 3, 224, 224), no copy
        ...

    # video mode: random 16-frame clips, decoded in C threads into the batch
    loader = stoker.Loader("/data/videos", 8, video=stoker.Video(frames=16, stride=2))
    for clips, labels in loader:    # clips: uint8 (8, 16, 224, 224, 3)
        ...

See docs/python.md.  The library is found through $STOKER_LIB, else beside this
file (pip), where make install put it, the build tree (build/libstoker.so.0),
else the system's libstoker; it must be this package's version.
"""

from . import _lib

try:
    import torch  # noqa: F401  (batches are torch tensors: every module below needs it)
except ImportError as e:
    import sys as _sys
    raise ImportError(
        "stoker needs PyTorch, and %s cannot import torch (%s).  For Debian's "
        "/usr/bin/python3: sudo apt-get install python3-torch; in a virtual environment: "
        "make it from /usr/bin/python3 with --system-site-packages (Debian's PyTorch), or "
        "pip install torch in it" % (_sys.executable, e)) from e

from .errors import DeviceError, Error, NoSlotError, OptionError
from .batch import Batch, ImageBatch, VideoBatch
from .image import IMAGENET_MEAN, IMAGENET_STD, Image
from .video import Video
from .cpus import cpu_share
from .loader import Loader
from .surface import SampleBatch, TransformError
from .jpeg import restart_info, transcode_jpeg

__all__ = ["Loader", "cpu_share", "Batch", "Image", "ImageBatch", "Video", "VideoBatch",
           "Error", "NoSlotError",
           "OptionError", "DeviceError", "IMAGENET_MEAN", "IMAGENET_STD", "version", "lib_version",
           "lib_path", "transcode_jpeg", "restart_info", "SampleBatch", "TransformError"]

# The version this package was made for: include/stoker/stoker.h's, one owner.
__version__ = _lib.PACKAGE_VERSION or _lib.version()

lib_path = _lib.lib_path


def lib_version():
    """libstoker's version at run time, e.g. "0.1.0"."""
    return _lib.version()


version = lib_version
