# bench/val_threads.py DIR [SECONDS] — the val workload (Resize 256 +
# CenterCrop 224, batch 256, prefetch 2 (PF=), 2 decode threads, read
# areas RA= or auto) over DIR, epoch after epoch, as bench/peers runs it
# but with no harness around it: images/s over a window after 0.5 s, each
# thread's CPU (/proc/self/task), the process's, and the machine's
# (/proc/stat).  SAMPLER=1 runs bench/peers' PSS sampler beside it in a
# process of its own, as the harness's parent does (SAMPLER=nice: at nice 19);
# IMAGES=1 takes each batch's b.images after importing torch, as its child does.
#   STOKER_LIB=build/libstoker.so.0 PYTHONPATH=python \
#     flock -x /work/.measure.lock ~/.cache/stoker/peers/bin/python bench/val_threads.py /work/data/val/base 4
import glob
import os
import subprocess
import sys
import time

import stoker

SAMPLE = r'''
import os, sys, time
from stoker._peers import pss_kb, proc_tree
if sys.argv[3] == "nice":
    os.setpriority(os.PRIO_PROCESS, 0, 19)
pid, t0, n, c0 = int(sys.argv[1]), time.monotonic(), 0, time.process_time()
while time.monotonic() - t0 < float(sys.argv[2]):
    [pss_kb(p) for p in proc_tree(pid)]
    n += 1
    time.sleep(0.05)
dt = time.monotonic() - t0
print("  sampler: %.1f samples/s, %.1f %% of a CPU" % (n / dt, 100 * (time.process_time() - c0) / dt))
'''
src = sys.argv[1]; secs = float(sys.argv[2]) if len(sys.argv) > 2 else 4
pf = int(os.environ.get("PF", "2")); ra = int(os.environ.get("RA", "0"))
kw = {"read_areas": ra} if ra else {}
img = stoker.Image(size=224, crop="center", crop_frac=0.875, decode_threads=2, **kw)
tck = os.sysconf("SC_CLK_TCK")
def threads():
    r = {}
    for t in glob.glob("/proc/self/task/*"):
        try:
            name = open(t + "/comm").read().strip()
            f = open(t + "/stat").read().rsplit(")", 1)[1].split()
            r[t.rsplit("/", 1)[1]] = (name, (int(f[11]) + int(f[12])) / tck)
        except OSError:
            pass
    return r
def sysstat():
    f = open("/proc/stat").readline().split()[1:]
    return [int(x) / tck for x in f]
touch = bool(os.environ.get("IMAGES"))  # take b.images, as bench/peers does
if touch:
    import torch
    torch.set_num_threads(1)
smp = None
if os.environ.get("SAMPLER"):
    smp = subprocess.Popen([sys.executable, "-c", SAMPLE, str(os.getpid()), str(secs + 1),
                            os.environ["SAMPLER"]])
with stoker.Loader(src, 256, image=img, shuffle=True, seed=0, copy_free=True, prefetch=pf) as ld:
    def gen():
        while True:
            for b in ld:
                if touch:
                    b.images
                yield b.count
    it = gen()
    t = time.monotonic()
    while time.monotonic() - t < 0.5:
        next(it)
    th0, s0, t0, n = threads(), sysstat(), time.monotonic(), 0
    while time.monotonic() - t0 < secs:
        n += next(it)
    dt = time.monotonic() - t0
    th1, s1 = threads(), sysstat()
    st = ld.stats() if hasattr(ld, "stats") else None
print("%.0f img/s over %.2f s" % (n / dt, dt))
tot = 0
for k, (name, c) in sorted(th1.items(), key=lambda kv: kv[1][0]):
    c0 = th0.get(k, (name, 0))[1]
    tot += c - c0
    if c - c0 > 0.005:
        print("  %-16s %5.1f %% of a CPU" % (name, 100 * (c - c0) / dt))
print("  process total   %5.1f %%  (%.3f ms CPU an image)" % (100 * tot / dt, 1000 * tot / n))
d = [b - a for a, b in zip(s0, s1)]
names = "user nice system idle iowait irq softirq steal".split()
print("  system (2 CPUs):", " ".join("%s %.0f%%" % (nm, 100 * v / dt) for nm, v in zip(names, d)))
if smp:
    smp.wait()
