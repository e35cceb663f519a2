#!/usr/bin/python3
"""Remote shards vs the same shards on local disk, in one run.

A SeaweedFS S3 gateway on loopback (tests/python/remote_servers.py starts
it) holds the shards; a proxy in front of it adds LATENCY_MS to every
request (a datacenter object store answers in tens of ms).  Rounds
alternate, medians printed with the ratio to local disk:

  local cold    stoker bench DIR after dropping the page cache (root)
  remote e1     s3://... through the proxy, the local cache empty (epoch 1)
  http e1       the same shards from nginx through the proxy, no cache
  local warm    stoker bench DIR, page cache warm (5 epochs)
  remote e2     s3://... through the proxy, the local cache filled by e1 (5 epochs)

Raw mode (every member's bytes, no decode): what the transport delivers.
Needs the built CLI (STOKER), the weed binary (build/remote-venv, or
STOKER_WEED) and root for the cold runs.  Usage:
    python3 bench/remote_bench.py [N_IMAGES] [ROUNDS] [LATENCY_MS]
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
from remote_servers import ACCESS_KEY, SECRET_KEY, FaultProxy, Nginx, SeaweedS3  # noqa: E402

STOKER = os.environ.get("STOKER") or os.path.join(os.path.dirname(HERE), "build", "stoker")


def drop_caches():
    subprocess.run(["sync"], check=True)
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def bench(path, extra=(), env=None, epochs=1):
    cmd = [STOKER, "bench", "--json", "--epochs", str(epochs), "--runtime", "0", "--ramp", "0",
           "--repeat", "1", "--no-baseline", "--cache", "as-is", path] + list(extra)
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode:
        raise RuntimeError("%s: %s" % (" ".join(cmd), p.stderr))
    j = json.loads(p.stdout)
    return j["samples_per_s"]["median"], j.get("remote")


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    lat = float(sys.argv[3]) if len(sys.argv) > 3 else 20.0
    work = tempfile.mkdtemp(prefix="stoker-remote-bench-")
    try:
        subprocess.run([STOKER, "gen", "-n", str(n), "-c", "10", os.path.join(work, "img")],
                       check=True, stdout=subprocess.DEVNULL)
        shards = os.path.join(work, "shards")
        subprocess.run([STOKER, "pack", os.path.join(work, "img"), shards, "--shard-size",
                        "16MiB"], check=True, stdout=subprocess.DEVNULL)
        shutil.rmtree(os.path.join(work, "img"))
        s3 = SeaweedS3(work)
        web = Nginx(shards, work)
        proxy = hproxy = None
        nshards = len([f for f in os.listdir(shards) if f.endswith(".tar")])
        url = "%s/train-{000000..%06d}.tar"
        try:
            s3.upload_dir("bench", "ds/", shards)
            proxy = FaultProxy(s3.port, latency_s=lat / 1000.0)
            hproxy = FaultProxy(web.port, latency_s=lat / 1000.0)
            env = dict(os.environ, AWS_ACCESS_KEY_ID=ACCESS_KEY, AWS_SECRET_ACCESS_KEY=SECRET_KEY,
                       AWS_ENDPOINT_URL=proxy.url)
            res = {k: [] for k in ("local cold", "remote e1", "http e1", "local warm",
                                   "remote e2")}
            last = None
            cold = os.geteuid() == 0
            for r in range(rounds):
                cache = os.path.join(work, "cache%d" % r)
                os.makedirs(cache)
                if cold:
                    drop_caches()
                res["local cold"].append(bench(shards)[0])
                # the index is built in an earlier create: epoch 1 is reads only
                bench("s3://bench/ds/", ["--cache-dir", cache, "--no-remote-cache",
                                         "--seconds", "0.1"], env)
                sps, last = bench("s3://bench/ds/", ["--cache-dir", cache], env)
                res["remote e1"].append(sps)
                hurl = url % (hproxy.url, nshards - 1)
                bench(hurl, ["--cache-dir", cache, "--no-remote-cache", "--seconds", "0.1"])
                res["http e1"].append(bench(hurl, ["--cache-dir", cache, "--no-remote-cache"])[0])
                # from the cache (filled by e1): several epochs, as local warm
                res["local warm"].append(bench(shards, epochs=5)[0])
                res["remote e2"].append(bench("s3://bench/ds/", ["--cache-dir", cache], env,
                                              epochs=5)[0])
                print("round %d: %s" % (r + 1, ", ".join("%s %.0f" % (k, v[-1])
                                                         for k, v in res.items())), flush=True)
        finally:
            for p in (proxy, hproxy):
                if p:
                    p.close()
            web.close()
            s3.close()
        med = {k: statistics.median(v) for k, v in res.items()}
        print("\n%d images in %d shards, +%.0f ms a request, %d rounds (median samples/s)%s"
              % (n, nshards, lat, rounds,
                 "" if cold else " -- not root: 'local cold' is warm"))
        for k, v in med.items():
            print("  %-11s %8.0f" % (k, v))
        print("  remote e1 / local cold  %.2fx" % (med["remote e1"] / med["local cold"]))
        print("  http e1 / local cold    %.2fx" % (med["http e1"] / med["local cold"]))
        print("  remote e2 / local warm  %.2fx" % (med["remote e2"] / med["local warm"]))
        if last:
            print("  epoch 1 transport: %d requests, at most %d in flight, latency p50 %.1f ms "
                  "p99 %.1f ms, retries %d" % (last["requests"], last["inflight_max"],
                                               last["latency_p50_ns"] / 1e6,
                                               last["latency_p99_ns"] / 1e6, last["retries"]))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
