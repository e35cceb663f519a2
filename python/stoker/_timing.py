"""The one timing rule of every `stoker bench --vs` comparison: stoker's
Python binding and each peer (PyTorch's DataLoader, DALI, SPDL, ...) are
timed by timed() alike, so no side's figure holds a cost the other's leaves
out.

  start-up  from creating the loader (its index read or its sample list
            taken, its threads or worker processes started) until its
            first batch;
  ramp      then batches for `ramp` seconds, not measured: queues fill,
            workers reach their pace (stoker bench's --ramp);
  window    then batches for `seconds`, or `samples`, whichever ends first:
            the steady rate (samples/s over the window) is what ratios use.

The loader runs epoch after epoch, as training does; the start-up is
reported beside the steady rate, never folded into it.
"""

import time


def worker_counts(cpus):
    """The DataLoader worker counts a user tuning it tries: 0 (the main
    process), 2 and one a core."""
    return sorted({0, 2, max(1, cpus)})


def timed(make, ramp, seconds, samples=1 << 62, cpu=None):
    """Times the loader make() builds: make() returns an iterator of
    (samples, bytes, images or None), one a batch, and is called inside the
    clock.  A dict: startup_s, first (the first batch's item), ramp_s,
    ramp_samples, samples and bytes (the window's), seconds (the window's),
    samples_per_s (the steady rate), ended (the iterator stopped before the
    window did) and, given cpu (a callable: CPU seconds so far), cpu_s over
    the window.  The iterator is closed after the window, outside the clock."""
    clock = time.monotonic
    t = clock()
    it = iter(make())
    try:
        first = next(it)
    except StopIteration:
        raise RuntimeError("the loader gave no batch") from None
    t1 = clock()
    ramp_n, ended = 0, False
    while clock() - t1 < ramp:
        try:
            ramp_n += next(it)[0]
        except StopIteration:
            ended = True
            break
    t0 = clock()
    c0 = cpu() if cpu else 0.0
    n = nbytes = 0
    while not ended and n < samples and clock() - t0 < seconds:
        try:
            c, b, _ = next(it)
        except StopIteration:  # a loader that stops short of what was asked
            ended = True
            break
        n += c
        nbytes += b
    dt = clock() - t0
    out = {"startup_s": t1 - t, "first": first, "ramp_s": t0 - t1, "ramp_samples": ramp_n,
           "samples": n, "bytes": nbytes, "seconds": dt,
           "samples_per_s": n / dt if dt > 0 else 0.0, "ended": ended}
    if cpu:
        out["cpu_s"] = cpu() - c0
    close = getattr(it, "close", None)
    if close:
        close()  # a generator's loader (and its workers) stopped now
    return out
