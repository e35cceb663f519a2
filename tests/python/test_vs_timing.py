"""stoker._timing, the one rule every side of `stoker bench --vs` is timed
by: start-up (create until the first batch) reported apart, a ramp taken and
not measured, then the window whose samples over its seconds are the steady
rate; and the DataLoader worker counts a user tries."""

import time

from stoker import _timing


def slow_start(delay, batch=4):
    """A loader whose creation (its workers starting) takes delay seconds."""
    def make():
        time.sleep(delay)
        n = 0
        while True:
            n += 1
            time.sleep(0.001)
            yield batch, 100 * batch, n
    return make


def test_startup_apart_from_the_window():
    r = _timing.timed(slow_start(0.5), ramp=0.1, seconds=0.3)
    assert r["startup_s"] >= 0.5
    assert r["first"] == (4, 400, 1)  # the first batch is the start-up's, not the window's
    assert r["ramp_s"] >= 0.1 and r["ramp_samples"] > 0
    assert 0.3 <= r["seconds"] < 0.5 + 0.3  # the window: its own seconds, no start-up
    assert r["samples"] > 0 and r["bytes"] == 100 * r["samples"]
    assert r["samples_per_s"] == r["samples"] / r["seconds"]
    assert not r["ended"]


def test_window_capped_by_samples_and_loader_closed():
    closed = []

    def make():
        try:
            while True:
                yield 4, 0, None
        finally:
            closed.append(True)  # its workers stopped when the window ends

    r = _timing.timed(make, ramp=0, seconds=60, samples=40)
    assert r["samples"] == 40 and r["ramp_samples"] == 0
    assert closed == [True]


def test_a_loader_that_stops_short():
    r = _timing.timed(lambda: iter([(4, 0, None)] * 3), ramp=0, seconds=60,
                      cpu=lambda: 1.0)
    assert r["ended"] and r["samples"] == 8 and r["cpu_s"] == 0.0


def test_worker_counts_a_user_tries():
    assert _timing.worker_counts(1) == [0, 1, 2]
    assert _timing.worker_counts(2) == [0, 2]
    assert _timing.worker_counts(16) == [0, 2, 16]
