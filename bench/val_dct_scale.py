#!/usr/bin/env python3
"""Why validation's centre crop decodes JPEGs at full scale (issue 39): how far
a DCT-domain 1/2, 1/4 or 1/8 decode (libjpeg's scaling, here through PIL's
draft mode, the same library) moves torchvision's Resize(256) + CenterCrop(224)
from the full decode it is documented against (within 0.2 grey levels, mean
absolute difference, and 2 at most: tests/python/test_image.py).  Only scales
that keep the crop box at least 224 pixels are tried: the rule training's
random crops use.

    build/torch-venv/bin/python bench/val_dct_scale.py [JPEG...]

With no files: the textured pictures of the tolerance test (smooth colour
plus per-pixel noise, quality 90) from 800x600 to 4000x3000.  Prints one
line per picture and scale.
"""
import io
import sys

import numpy as np
from PIL import Image
from torchvision import transforms

REF = transforms.Compose([transforms.Resize(256), transforms.CenterCrop(224),
                          transforms.PILToTensor()])


def textured(w, h, rng):
    base = rng.integers(0, 256, (h // 8 + 1, w // 8 + 1, 3)).astype(np.uint8)
    im = np.asarray(Image.fromarray(base).resize((w, h), Image.BICUBIC), np.int16)
    im = np.clip(im + rng.integers(-40, 40, (h, w, 3)), 0, 255).astype(np.uint8)
    b = io.BytesIO()
    Image.fromarray(im).save(b, "JPEG", quality=90)
    return b.getvalue()


def compare(name, data):
    full = Image.open(io.BytesIO(data))
    W, H = full.size
    want = REF(full.convert("RGB")).numpy().astype(np.int16)
    box = min(W, H) * 224 / 256  # the centre crop's box in source pixels
    for d in (2, 4, 8):
        if box / d < 224:
            break
        im = Image.open(io.BytesIO(data))
        im.draft("RGB", ((W + d - 1) // d, (H + d - 1) // d))
        got = REF(im.convert("RGB")).numpy().astype(np.int16)
        diff = np.abs(got - want)
        print("%-28s %5dx%-5d 1/%d (decoded %dx%d, box/224 %.2f): mean %.3f max %d%s" % (
            name, W, H, d, im.size[0], im.size[1], box / d / 224, diff.mean(), diff.max(),
            "" if diff.mean() <= 0.2 and diff.max() <= 2 else "  outside the tolerance"))


def main():
    if len(sys.argv) > 1:
        for p in sys.argv[1:]:
            compare(p, open(p, "rb").read())
        return
    rng = np.random.default_rng(0)
    for w, h in ((800, 600), (1024, 768), (1280, 960), (1600, 1200), (2048, 1536), (3000, 2000),
                 (4000, 3000)):
        compare("textured", textured(w, h, rng))


if __name__ == "__main__":
    main()
