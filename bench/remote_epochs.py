#!/usr/bin/python3
"""One stoker run for bench/remote_bench.py: creates a loader over PATH (raw
mode: every member's bytes, no decode) and reads EPOCHS epochs, printing
JSON with each epoch's samples, bytes, wall seconds and CPU seconds (the
process's, all its threads).  The first epoch's clock starts before the
loader is created: `stoker bench` restarts its
loader after create, so reads made before its clock starts (a whole
epoch's, once the transport fetches windows) would not be counted; here
they are.  Usage: remote_epochs.py PATH EPOCHS CACHE_DIR [KEY=VALUE...]
(loader options, e.g. remote_cache=False)."""
import json
import resource
import sys
import time

import stoker


def value(v):
    if v in ("True", "False"):
        return v == "True"
    try:
        return int(v)
    except ValueError:
        return v


def main():
    path, epochs, cache = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    kw = dict(a.split("=", 1) for a in sys.argv[4:])
    kw = {k: value(v) for k, v in kw.items()}
    out = []
    ru = resource.getrusage(resource.RUSAGE_SELF)
    c0 = ru.ru_utime + ru.ru_stime
    t0 = time.monotonic()
    with stoker.Loader(path, batch_size=256, cache_dir=cache, quiet=True, **kw) as l:
        create_s = time.monotonic() - t0
        for e in range(epochs):
            l.set_epoch(e)
            n = nbytes = 0
            for data, offsets, sizes, labels, indices in l:
                n += len(indices)
                nbytes += int(sizes.sum())
            t1 = time.monotonic()
            ru = resource.getrusage(resource.RUSAGE_SELF)
            c1 = ru.ru_utime + ru.ru_stime
            out.append({"samples": n, "bytes": nbytes, "seconds": t1 - t0, "cpu_s": c1 - c0})
            t0, c0 = t1, c1
        rs = l.remote_stats()
    print(json.dumps({"create_s": create_s, "epochs": out, "remote": rs}))


if __name__ == "__main__":
    main()
