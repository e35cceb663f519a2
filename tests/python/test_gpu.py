"""The GPU path's failures, on a machine without a GPU: device="cuda" with no
usable GPU raises stoker.DeviceError naming the cause; slots that cannot be
pinned (no driver, a runtime that does not start, registration refused under
RLIMIT_MEMLOCK) are said once, with the reason, and the loader goes on with
pageable memory.  The CUDA runtime is tests/stub_cudart.c (built here, loaded
through $STOKER_CUDART) in a child process each, so that nothing of it stays
in this one; for device="cuda" the child also tells torch.cuda a GPU is there.
The real GPU's tests are test_loader.py/test_image.py's `cuda` ones and
tests/test_pin.c, which bench/gpu_check.sh runs on a GPU machine."""

import json
import os
import shutil
import subprocess
import sys

import pytest
import torch

import stoker

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is usable here")
def test_cuda_without_gpu_names_the_cause(folder):
    with pytest.raises(stoker.DeviceError) as e:
        stoker.Loader(folder, 4, device="cuda")
    err = e.value
    assert isinstance(err, stoker.Error) and isinstance(err, ValueError)
    assert err.name == "ENODEV"
    msg = str(err)
    assert "device='cuda': no usable GPU: " in msg, msg
    causes = ("built without CUDA", "driver", "no CUDA device", "CUDA_VISIBLE_DEVICES",
              "does not start", "initialization")
    assert any(c in msg for c in causes), msg
    if torch.version.cuda is None:
        assert "this PyTorch (%s) is built without CUDA" % torch.__version__ in msg


def test_bad_device_is_a_value_error(folder):
    with pytest.raises(ValueError, match="device must be"):
        stoker.Loader(folder, 4, device="meta")


@pytest.fixture(scope="module")
def stub(tmp_path_factory):
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler to build the stand-in CUDA runtime")
    d = tmp_path_factory.mktemp("cudart")
    so = str(d / "libcudart.so.12")
    subprocess.run([cc, "-shared", "-fPIC", "-o", so, os.path.join(ROOT, "tests", "stub_cudart.c"),
                    "-Wl,-soname,libcudart.so.12"], check=True)
    return so


# One child for every case (importing torch is the slow part): each case sets
# the stand-in's mode, the memlock limit and what torch.cuda says, makes a
# loader and reports what it said.
CHILD = r"""
import json, os, resource, sys, warnings
import torch
import stoker
folder, cases = sys.argv[1], json.loads(sys.argv[2])
real = {k: getattr(torch.cuda, k) for k in ("is_available", "current_device", "init", "Stream")}
soft, hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
out = []
for c in cases:
    os.environ["FAKE_CUDA"] = c["mode"]
    os.environ["STOKER_CUDART"] = c["cudart"]
    resource.setrlimit(resource.RLIMIT_MEMLOCK, (c.get("memlock") or soft, hard))
    for k, v in real.items():
        setattr(torch.cuda, k, v)
    if c["device"] == "cuda":  # a GPU as far as torch.cuda tells (no copies are made)
        torch.cuda.is_available = lambda: True
        torch.cuda.current_device = lambda: 0
        torch.cuda.init = lambda: None
        torch.cuda.Stream = lambda *a, **k: object()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with stoker.Loader(folder, 4, device=c["device"] or None, quiet=c.get("quiet", False)) as l:
            pinned = l.stats()["pinned"]
            batches = sum(1 for _ in l) if c.get("epoch") else 0
    said = [str(x.message) for x in w if issubclass(x.category, RuntimeWarning)]
    out.append({"pinned": pinned, "said": said, "batches": batches})
print(json.dumps(out))
"""

CASES = {
    "ok cuda": {"mode": "ok", "device": "cuda"},
    "memlock cuda": {"mode": "memlock", "device": "cuda", "memlock": 64 * 1024},
    "memlock epoch": {"mode": "memlock", "device": "", "memlock": 64 * 1024, "epoch": True},
    "memlock quiet": {"mode": "memlock", "device": "cuda", "memlock": 64 * 1024, "quiet": True},
    "nodriver cuda": {"mode": "nodriver", "device": "cuda"},
    "nodriver": {"mode": "nodriver", "device": ""},
    "nodevice cuda": {"mode": "nodevice", "device": "cuda"},
    "nodevice": {"mode": "nodevice", "device": ""},
    "initfail cuda": {"mode": "initfail", "device": "cuda"},
    "initfail": {"mode": "initfail", "device": ""},
    "no runtime cuda": {"mode": "ok", "device": "cuda", "cudart": "/nonexistent/libcudart.so.12"},
}


@pytest.fixture(scope="module")
def said(stub, tmp_path_factory):
    """What each of CASES came to: {name: {"pinned", "said", "batches"}}."""
    import conftest
    folder = conftest.write_folder(str(tmp_path_factory.mktemp("gpu") / "data"))
    names = list(CASES)
    cases = [dict({"cudart": stub}, **CASES[n]) for n in names]
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    r = subprocess.run([sys.executable, "-c", CHILD, folder, json.dumps(cases)],
                       env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return dict(zip(names, json.loads(r.stdout.strip().splitlines()[-1])))


def test_pinned_with_a_gpu_and_nothing_said(said):
    r = said["ok cuda"]
    assert r["pinned"] and r["said"] == []


def test_memlock_refusal_said_once_with_the_reason(said):
    r = said["memlock cuda"]
    assert not r["pinned"]
    assert len(r["said"]) == 1, r["said"]
    msg = r["said"][0]
    for want in ("are not pinned", "cudaHostRegister of", "refused", "RLIMIT_MEMLOCK is 64 KiB",
                 "copies to cuda:0 go through pageable memory"):
        assert want in msg, (want, msg)


def test_refusal_said_without_a_device_once_per_loader_not_per_batch(said):
    r = said["memlock epoch"]
    assert not r["pinned"] and r["batches"] > 1
    assert len(r["said"]) == 1 and "copies to a GPU" in r["said"][0], r["said"]


@pytest.mark.parametrize("mode,words", [
    ("nodriver", "driver version is insufficient"),
    ("nodevice", "no CUDA-capable device"),
    ("initfail", "does not start: initialization error"),
])
def test_runtime_failures_said_for_cuda_only(said, mode, words):
    r = said[mode + " cuda"]
    assert not r["pinned"] and len(r["said"]) == 1 and words in r["said"][0], r
    # without a device, a machine with a runtime but no GPU is not worth a word
    r = said[mode]
    assert not r["pinned"] and r["said"] == [], r


def test_quiet_says_nothing(said):
    r = said["memlock quiet"]
    assert not r["pinned"] and r["said"] == []


def test_no_runtime_at_all(said):
    r = said["no runtime cuda"]
    assert not r["pinned"] and len(r["said"]) == 1
    assert "STOKER_CUDART=/nonexistent/libcudart.so.12 does not load" in r["said"][0]
