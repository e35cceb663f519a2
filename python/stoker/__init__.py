"""stoker: keeps GPUs fed.  A PyTorch data loader over libstoker (ctypes).

    import stoker
    with stoker.Loader("/data/train", batch_size=256, seed=0) as loader:
        for epoch in range(epochs):
            loader.set_epoch(epoch)
            for data, offsets, sizes, labels, indices in loader:
                ...   # sample i: data[offsets[i] : offsets[i] + sizes[i]]

    # image mode: C threads decode and crop each JPEG into the batch
    loader = stoker.Loader("/data/train", 256, image=stoker.Image(224))
    for images, labels in loader:   # images: uint8 (256, 3, 224, 224), no copy
        ...

See docs/python.md.  The library is found through $STOKER_LIB, else the build
tree beside this package (build/libstoker.so.0), else the system's libstoker.
"""

from . import _lib
from .errors import Error, NoSlotError
from .batch import Batch, ImageBatch
from .image import IMAGENET_MEAN, IMAGENET_STD, Image
from .loader import Loader

__all__ = ["Loader", "Batch", "Image", "ImageBatch", "Error", "NoSlotError", "IMAGENET_MEAN",
           "IMAGENET_STD", "version", "lib_version", "lib_path"]

__version__ = "0.1.0"

lib_path = _lib.lib_path


def lib_version():
    """libstoker's version at run time, e.g. "0.1.0"."""
    return _lib.version()


version = lib_version
