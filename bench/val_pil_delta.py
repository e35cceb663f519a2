# bench/val_pil_delta.py DIR [N] — the val transform's pixels against
# torchvision's: Resize(256) + CenterCrop(224) on PIL's decode against
# stoker.Image(224, crop="center") on the same file's bytes, over the first N
# (sorted) JPEGs of DIR: mean and worst per-image mean absolute difference,
# the largest single difference, and an md5 of stoker's output bytes (equal
# md5 between two builds: the same bytes).
#   STOKER_LIB=build/libstoker.so.0 PYTHONPATH=python build/torch-venv/bin/python bench/val_pil_delta.py /work/data/val/mixed 400
import glob
import hashlib
import os
import sys

import numpy as np
from PIL import Image as PILImage
import torchvision.transforms as T

import stoker

d = sys.argv[1]
n = int(sys.argv[2]) if len(sys.argv) > 2 else 400
files = sorted(glob.glob(os.path.join(d, "**", "*.jpg"), recursive=True))[:n]
ref = T.Compose([T.Resize(256), T.CenterCrop(224), T.PILToTensor()])
opts = stoker.Image(224, crop="center")
h = hashlib.md5()
mads, worst_px = [], 0
for f in files:
    data = open(f, "rb").read()
    got = opts.decode(data).numpy()
    h.update(got.tobytes())
    with PILImage.open(f) as im:
        want = ref(im.convert("RGB")).numpy()
    dlt = np.abs(got.astype(np.int16) - want.astype(np.int16))
    mads.append(dlt.mean())
    worst_px = max(worst_px, int(dlt.max()))
print("%d files: mean |delta| %.4f, worst image %.4f, largest pixel delta %d, stoker md5 %s"
      % (len(files), float(np.mean(mads)), float(np.max(mads)), worst_px, h.hexdigest()))
