#!/usr/bin/python3
"""Does the network-bound verdict's advice hold?  The same shards behind
nginx, named by a list of URLs, every request delayed LATENCY_MS by a proxy
(tests/python/remote_servers.py), read with 8 to 256 requests in
flight (`-q`), the local cache off (every epoch from the server).  Rounds
alternate the depths; medians of samples/s with the ratio to depth 8, and
each depth's verdict (the last round's) with its evidence.

Raw mode (every member's bytes, no decode), global shuffle (a request per
member).  Needs the built CLI (STOKER).  Usage:
    python3 bench/remote_verdict.py [N_IMAGES] [ROUNDS] [LATENCY_MS]
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "python"))
from remote_servers import FaultProxy, Nginx  # noqa: E402

STOKER = os.environ.get("STOKER") or os.path.join(os.path.dirname(HERE), "build", "stoker")
DEPTHS = (8, 16, 32, 64, 128, 256)


def bench(lst, depth, cache):
    cmd = [STOKER, "bench", "--json", "--epochs", "1", "--runtime", "0", "--ramp", "0",
           "--repeat", "1", "--no-baseline", "--no-remote-cache", "--cache-dir", cache,
           "-q", str(depth), lst]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode:
        raise RuntimeError("%s: %s" % (" ".join(cmd), p.stderr))
    j = json.loads(p.stdout)
    return j["samples_per_s"]["median"], j["verdict"]


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1500
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    lat = float(sys.argv[3]) if len(sys.argv) > 3 else 20.0
    work = tempfile.mkdtemp(prefix="stoker-remote-verdict-")
    web = proxy = None
    try:
        subprocess.run([STOKER, "gen", "-n", str(n), "-c", "10", os.path.join(work, "img")],
                       check=True, stdout=subprocess.DEVNULL)
        shards = os.path.join(work, "shards")
        subprocess.run([STOKER, "pack", os.path.join(work, "img"), shards], check=True,
                       stdout=subprocess.DEVNULL)
        shutil.rmtree(os.path.join(work, "img"))
        web = Nginx(shards, work)
        proxy = FaultProxy(web.port, latency_s=lat / 1000.0)
        lst = os.path.join(work, "shards.list")
        with open(lst, "w") as f:
            f.write("# the shards, through the proxy\n")
            for name in sorted(x for x in os.listdir(shards) if x.endswith(".tar")):
                f.write("%s/%s\n" % (proxy.url, name))
        cache = os.path.join(work, "cache")
        bench(lst, 8, cache)  # indexed once (cached), not measured
        res = {d: [] for d in DEPTHS}
        verdicts = {}
        for r in range(rounds):
            order = DEPTHS if r % 2 == 0 else tuple(reversed(DEPTHS))
            for d in order:
                sps, v = bench(lst, d, cache)
                res[d].append(sps)
                verdicts[d] = v
        base = statistics.median(res[DEPTHS[0]])
        print("%d images, %g ms added per request, %d rounds (medians, samples/s)"
              % (n, lat, rounds))
        for d in DEPTHS:
            m = statistics.median(res[d])
            print("  -q %-3d %8.0f  %5.2fx  %s" % (d, m, m / base, verdicts[d]["kind"]))
        for d in DEPTHS:
            print("  -q %d: %s\n    try: %s" % (d, verdicts[d]["evidence"], verdicts[d]["try"]))
    finally:
        if proxy:
            proxy.close()
        if web:
            web.close()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
