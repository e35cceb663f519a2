"""The memory sampler of every `stoker bench --vs` run (stoker._peers
run_sampled / PeakPss): it reads a run's PSS only when it may have risen,
and must still see the peak of children that allocate and free a known
amount: in the process itself, in a forked worker, and through
copy-on-write copies (PSS rises while RSS stays flat)."""

import sys

from stoker import _peers

def run(code, timeout=60):
    stats = {}
    lines, hung, rc, tail, peak, peak_anon, wall = _peers.run_sampled(
        [sys.executable, "-c", code], timeout, stats=stats)
    assert not hung and rc == 0, tail
    return peak, peak_anon, stats


# bytes(n) of ones: every page written (a zeroed bytearray's pages may stay unmapped)
HOLD = "import time\nb = bytearray(b'\\x01') * (%d << 20)\ntime.sleep(%s)\n"


def test_peak_of_an_allocation_freed_before_exit():
    # 200 MiB held 0.6 s, freed, then 1.2 s with no more than the interpreter
    peak, peak_anon, _ = run(HOLD % (200, 0.6) + "del b\ntime.sleep(1.2)\n")
    assert 195 <= peak_anon <= 260, peak_anon
    assert peak >= peak_anon


def test_peak_summed_over_forked_workers():
    code = ("import os, time\n"
            "pid = os.fork()\n"
            + HOLD % (100, 1.0) +
            "if pid == 0:\n    os._exit(0)\n"
            "os.waitpid(pid, 0)\n")
    _, peak_anon, _ = run(code)
    assert 195 <= peak_anon <= 270, peak_anon


def test_peak_of_copy_on_write_under_a_flat_rss():
    # 150 MiB shared by a forked worker (each counts half), then the worker
    # writes every page: its copies double the tree's PSS while the RSS of
    # each process stays what it was
    code = (HOLD % (150, 0) +
            "import os\n"
            "pid = os.fork()\n"
            "time.sleep(1.5)\n"
            "if pid == 0:\n"
            "    b[::4096] = b'\\x02' * len(range(0, len(b), 4096))\n"
            "    time.sleep(2.5)\n"
            "    os._exit(0)\n"
            "os.waitpid(pid, 0)\n")
    _, peak_anon, _ = run(code)
    assert 290 <= peak_anon <= 370, peak_anon


def test_a_steady_run_is_not_read_every_tick():
    # what the rule is for: a process whose memory does not grow costs a
    # PSS read (a page-table walk) far less often than the 20 ticks a second
    _, _, stats = run("import time\ntime.sleep(3)\n")
    assert stats["ticks"] >= 10
    assert stats["pss_reads"] * 3 <= stats["ticks"], stats


def test_tree_pids_finds_workers():
    import os
    import subprocess
    import time
    p = subprocess.Popen([sys.executable, "-c",
                          "import os, time\nif os.fork() == 0:\n    time.sleep(30)\ntime.sleep(30)\n"])
    try:
        for _ in range(100):
            tree = _peers.tree_pids(p.pid)
            if len(tree) == 2:
                break
            time.sleep(0.05)
        assert tree[0] == p.pid and len(tree) == 2
        assert set(tree) == set(_peers.proc_tree(p.pid))
        assert _peers.rss_faults(tree[1])[0] > 0
    finally:
        for q in _peers.tree_pids(p.pid)[1:]:
            os.kill(q, 9)
        p.kill()
        p.wait()


def test_reads_placed_in_the_run_window():
    # the child notes its window on the machine's monotonic clock (timed()
    # calls its cpu callable at the window's start and end); the harness
    # counts the PSS reads that fell inside it
    import time
    marks = []
    cpu = _peers.window_clock(lambda: 1.5, marks)
    assert cpu() == 1.5 and cpu() == 1.5 and len(marks) == 2 and marks[0] <= marks[1] <= time.monotonic()
    s = _peers.sampler_summary({"ticks": 9, "pss_reads": 4, "read_at": [1.0, 2.0, 3.0, 9.0]},
                               {"window_at": [1.5, 3.0]})
    assert s == {"ticks": 9, "pss_reads": 4, "pss_reads_in_window": 2}
    assert _peers.sampler_summary({}, {})["pss_reads_in_window"] == 0
