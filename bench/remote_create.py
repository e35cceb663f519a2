#!/usr/bin/python3
"""How long a loader's create takes over many HTTP shards: HTTP has no
listing, so every create asks each shard's size and ETag with a HEAD (its
index comes from the local index cache, keyed by them).  N small shards
(two samples each) served by nginx behind the tests' proxy adding LAT
seconds a request (LAT 0: no proxy, nginx itself); the index is cached
first at no latency, then each round
times one create in a fresh process, alternating the library under test with
the one named by STOKER_LIB_BEFORE (a build of another commit), if given.

    python3 bench/remote_create.py [N] [LAT] [ROUNDS]     (default 10000 0.02 3)
    STOKER_LIB_BEFORE=/tmp/old/build/libstoker.so.0 python3 bench/remote_create.py

Prints each create's seconds, the HEADs it sent, the medians and their ratio,
and the floor N / 64 x LAT (64 HEADs in flight).  Needs nginx (nginx-light)."""
import io
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(TOP, "tests", "python"))
from remote_servers import FaultProxy, Nginx  # noqa: E402

CREATE = """
import sys, time, stoker
t0 = time.monotonic()
with stoker.Loader(sys.argv[1], batch_size=8, cache_dir=sys.argv[2], remote_cache=False,
                   quiet=True) as l:
    print(time.monotonic() - t0)
"""


def shards(n):
    root = os.path.join(os.path.expanduser("~/.cache/stoker"), "remote-create-%d" % n)
    if os.path.exists(os.path.join(root, "s-%06d.tar" % (n - 1))):
        return root
    os.makedirs(root, exist_ok=True)
    for i in range(n):
        with tarfile.open(os.path.join(root, "s-%06d.tar" % i), "w") as t:
            for k in range(2):
                for ext, body in (("bin", os.urandom(1000)), ("cls", b"%d" % k)):
                    ti = tarfile.TarInfo("%06d_%d.%s" % (i, k, ext))
                    ti.size = len(body)
                    t.addfile(ti, io.BytesIO(body))
    return root


def create(lib, url, cache, proxy):
    env = dict(os.environ, STOKER_LIB=lib, PYTHONPATH=os.path.join(TOP, "python"))
    n0 = len(proxy.log) if proxy else 0
    out = subprocess.run([sys.executable, "-c", CREATE, url, cache], env=env, check=True,
                         capture_output=True, text=True).stdout
    heads = sum(1 for m, _, _ in proxy.log[n0:] if m == "HEAD") if proxy else -1
    return float(out.split()[-1]), heads


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10000
    lat = float(sys.argv[2]) if len(sys.argv) > 2 else 0.02
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    libs = [("this build", os.environ.get("STOKER_LIB") or
             os.path.join(TOP, "build", "libstoker.so.0"))]
    if os.environ.get("STOKER_LIB_BEFORE"):
        libs.append(("before", os.environ["STOKER_LIB_BEFORE"]))
    root = shards(n)
    work = tempfile.mkdtemp(prefix="stoker-create-")
    web = Nginx(root, os.path.join(work, "web"))
    # LAT 0: nginx itself (the proxy, Python, would be what is measured)
    proxy = FaultProxy(web.port) if lat else None
    url = "%s/s-{000000..%06d}.tar" % (proxy.url if proxy else web.url, n - 1)
    times = {name: [] for name, _ in libs}
    try:
        for name, lib in libs:  # the index cached (each build its own), no latency
            create(lib, url, os.path.join(work, name), proxy)
        if proxy:
            proxy.latency_s = lat
        for r in range(rounds):
            for name, lib in (libs if r % 2 == 0 else libs[::-1]):
                s, heads = create(lib, url, os.path.join(work, name), proxy)
                times[name].append(s)
                print("round %d %-10s create %6.2f s, %s HEADs"
                      % (r + 1, name, s, heads if heads >= 0 else "(not counted)"), flush=True)
    finally:
        if proxy:
            proxy.close()
        web.close()
    print("%d shards, +%.0f ms a request: floor at 64 in flight %.2f s"
          % (n, lat * 1000, n / 64 * lat))
    med = {name: statistics.median(t) for name, t in times.items()}
    for name, m in med.items():
        print("%-10s median %.2f s (%s)" % (name, m, ", ".join("%.2f" % x for x in times[name])))
    if "before" in med:
        print("before / this build: %.2fx" % (med["before"] / med["this build"]))


if __name__ == "__main__":
    main()
