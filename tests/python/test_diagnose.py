"""The verdict where training runs: loader.diagnose() and report_every in a
real training loop (examples/train_classifier.py), flipping from input-bound
to compute-bound as the model gets heavier, and on constructed loads."""

import logging
import os
import re
import subprocess
import sys
import time

import pytest

import stoker
from conftest import gen_folder

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))


def train(folder, model, steps):
    ex = os.path.join(ROOT, "examples", "train_classifier.py")
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    p = subprocess.run([sys.executable, ex, folder, "--model", model, "--workers", "1",
                        "--threads", "1", "--steps", str(steps), "--batch-size", "16",
                        "--size", "64", "--report-every", "0.1"],
                       capture_output=True, text=True, env=env, timeout=600)
    assert p.returncode == 0, p.stderr
    m = re.search(r"^verdict: ([a-z-]+): ", p.stdout, re.M)
    assert m, p.stdout
    return m.group(1), p


@pytest.fixture(scope="module")
def train_folder(tmp_path_factory):
    """Enough JPEGs that an epoch holds many batches of 16."""
    return gen_folder(str(tmp_path_factory.mktemp("train") / "ds"), 320, 4)


def test_verdict_flips_with_the_model(train_folder):
    """One decode thread and a tiny model: the loop waits on decoding.  A
    heavier model on the same input: batches are ready, the step is the limit.
    Both through the Python API, inside the training loop."""
    kind, p = train(train_folder, "tiny", 60)
    assert kind == "decode-bound", p.stdout
    # report_every: a log line every 0.1 s through logging, with the verdict (a fast
    # machine runs the 60 steps in under a second)
    assert re.search(r"stoker: \d+ samples/s, data stall \d+ %: [a-z-]+: ", p.stderr), p.stderr
    kind, p = train(train_folder, "wide", 14)
    assert kind == "consumer-bound", p.stdout


def test_diagnose_constructed_loads(folder):
    # reads that take 20 ms each with a queue of 4: every read waits on "storage"
    with stoker.Loader(folder, 4, engine="null", null_latency="20ms", queue_depth=8,
                       quiet=True) as l:
        for _ in l:
            pass
        v = l.diagnose(0)
    assert v["kind"] == "storage-bound", v
    assert v["stall_ratio"] > 0.5 and v["inflight_mean"] > 2, v
    assert v["queue_depth"] == 8 and "reads in flight" in v["evidence"]
    # a consumer that holds each batch: batches are ready when asked for
    with stoker.Loader(folder, 4, quiet=True) as l:
        for _ in l:
            time.sleep(0.02)
        v = l.diagnose(0)
    assert v["kind"] == "consumer-bound", v
    assert v["stall_ratio"] < 0.05


def test_diagnose_windows(folder):
    with stoker.Loader(folder, 4, quiet=True) as l:
        assert l.diagnose(0)["kind"] == "unknown"  # nothing asked for yet
        for _ in l:
            pass
        whole = l.diagnose(0)
        recent = l.diagnose(30)  # younger than 30 s: the whole life
        assert whole["samples_per_s"] > 0 and recent["samples_per_s"] > 0
        assert recent["window_s"] <= whole["window_s"] + 1
        st = l.stats()
        assert abs(st["samples_per_s"] - st["samples"] / st["wall_s"]) < 1e-6 * st["samples_per_s"]


def test_report_every_logs(folder, caplog):
    caplog.set_level(logging.INFO, logger="stoker")
    with stoker.Loader(folder, 2, engine="null", null_latency="30ms", queue_depth=2,
                       quiet=True, report_every=0.2) as l:
        for _ in range(2):
            for _ in l:
                pass
    lines = [r.getMessage() for r in caplog.records if r.name == "stoker"]
    assert lines and all(re.match(r"stoker: \d+ samples/s, data stall \d+ %: [a-z-]+: .*; try: ",
                                  ln) for ln in lines), lines
