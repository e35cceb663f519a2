#!/usr/bin/python3
"""stoker's centre crop against torchvision's Resize(256) + CenterCrop(224) on
PIL images: the mean absolute difference must stay within 2 grey levels.

usage: image_vs_pil.py LIBSTOKER IMAGE...   (exit 0 pass, 1 fail, 77 skip)
"""
import ctypes
import sys

try:
    import numpy as np
    from PIL import Image
    from torchvision import transforms
except ImportError as e:  # the comparison needs Debian's python3-torchvision
    print("skipped: %s" % e)
    sys.exit(77)


class ImageOpts(ctypes.Structure):
    _fields_ = [("size", ctypes.c_uint32), ("flags", ctypes.c_uint32),
                ("width", ctypes.c_uint32), ("height", ctypes.c_uint32),
                ("crop", ctypes.c_int), ("dtype", ctypes.c_int),
                ("scale_min", ctypes.c_float), ("scale_max", ctypes.c_float),
                ("ratio_min", ctypes.c_float), ("ratio_max", ctypes.c_float),
                ("crop_frac", ctypes.c_float), ("mean", ctypes.c_float * 3),
                ("std", ctypes.c_float * 3), ("decode_threads", ctypes.c_uint32),
                ("max_pixels", ctypes.c_uint64)]


def main():
    lib = ctypes.CDLL(sys.argv[1])
    lib.stk_image_bytes.restype = ctypes.c_size_t
    lib.stk_image_decode.argtypes = [ctypes.POINTER(ImageOpts), ctypes.c_char_p, ctypes.c_size_t,
                                     ctypes.c_uint64, ctypes.c_uint64, ctypes.c_int64,
                                     ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
    o = ImageOpts(size=ctypes.sizeof(ImageOpts), width=224, height=224, crop=1)  # centre
    out = np.zeros(lib.stk_image_bytes(ctypes.byref(o)), dtype=np.uint8)
    err = ctypes.create_string_buffer(256)
    ref = transforms.Compose([transforms.Resize(256), transforms.CenterCrop(224),
                              transforms.PILToTensor()])
    worst = 0.0
    for path in sys.argv[2:]:
        data = open(path, "rb").read()
        rc = lib.stk_image_decode(ctypes.byref(o), data, len(data), 0, 0, 0,
                                  out.ctypes.data, err, len(err))
        if rc:
            print("FAIL: %s: %s" % (path, err.value.decode()))
            return 1
        want = ref(Image.open(path).convert("RGB")).numpy().astype(np.int16)
        mad = np.abs(out.reshape(3, 224, 224).astype(np.int16) - want).mean()
        worst = max(worst, mad)
        print("%s: mean absolute difference %.3f" % (path, mad))
    print("worst %.3f (limit 2.0)" % worst)
    return 0 if worst <= 2.0 else 1


if __name__ == "__main__":
    sys.exit(main())
