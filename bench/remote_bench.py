#!/usr/bin/python3
"""Remote shards vs the same shards on local disk, and vs the peers reading
the same data from the same servers, in one run.

A SeaweedFS S3 gateway on loopback (tests/python/remote_servers.py starts
it) holds the shards (`stoker pack DIR s3://...`: with their index beside
them), and the same images as Mosaic Streaming's MDS and LitData's chunks
(16 MB, as the shards); nginx serves the shards over HTTP.  A proxy in front
of each adds LATENCY_MS to every request (a datacenter object store answers
in tens of ms).  Every figure is epoch 1 read from a cold start in its own
process, the clock started before the loader or dataset is made (bytes
only, no decode: what the transport delivers), samples/s; rounds alternate
(the order rotated each round), medians printed with the ratios:

  local cold       stoker over the shards on local disk, page cache dropped (root)
  local warm       the same process's epoch 2 (page cache warm)
  s3 e1            stoker, s3://, the local cache empty (windows: io/http.c)
  s3 e2            the same process's epoch 2, from the local cache
  s3 e1 shard      s3://, shuffle_mode shard (shards in random order, as WebDataset)
  s3 e1 direct     s3:// straight to the gateway, no proxy: what the proxy's
                   latency and its own copying of every byte (Python, on the
                   same cores) cost
  s3 e1 shard direct  the same in shard mode
  curl direct      the server's ceiling: curl --parallel fetching the same
  curl proxy       shards as 8 MiB ranges, 16 at once (the windows' size and
                   number), straight to the gateway and through the proxy;
                   samples/s = the dataset's samples over its seconds (no
                   create, no cache: what a transport could reach at best)
  s3 e1 member     s3://, STOKER_REMOTE_WINDOW=0: a member a request
  s3 e1 before     s3:// with STOKER_BEFORE's build (the tree before a
  s3 e1 before direct  change), if given, through the proxy and without it
  http e1          stoker, the shards from nginx
  wds              WebDataset over HTTP from nginx (its curl pipes)
  streaming        Mosaic Streaming, remote=s3://... (boto3), a local cache dir
  litdata          LitData, s3://... (boto3), a cache dir

The peers run in the peers' virtual environment (bench/peers/setup.sh;
$STOKER_PEERS or ~/.cache/stoker/peers) with PEER_WORKERS DataLoader workers
(2); a peer that fails or hangs (PEER_TIMEOUT, 300 s) prints its error and
the others go on.  PEERS=wds,streaming,litdata picks them ("" none).
Needs the built CLI and library (build/), the weed binary (build/remote-venv
or STOKER_WEED), nginx, and root for the cold runs.  Usage:
    sudo python3 bench/remote_bench.py [N_IMAGES] [ROUNDS] [LATENCY_MS]
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(TOP, "tests", "python"))
from remote_servers import ACCESS_KEY, SECRET_KEY, FaultProxy, Nginx, SeaweedS3  # noqa: E402

STOKER = os.environ.get("STOKER") or os.path.join(TOP, "build", "stoker")
PEERS_DIR = os.environ.get("STOKER_PEERS") or os.path.join(
    os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "stoker", "peers")
PEERS_PY = os.path.join(PEERS_DIR, "bin", "python")


def drop_caches():
    subprocess.run(["sync"], check=True)
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def stoker_run(path, cache, env, epochs=2, build=None, **kw):
    """Epochs of stoker in a fresh process: [samples/s per epoch], remote stats."""
    b = build or os.path.join(TOP, "build")
    top = os.path.dirname(b.rstrip("/"))
    e = dict(env, STOKER_LIB=os.path.join(b, "libstoker.so.0"),
             PYTHONPATH=os.path.join(top, "python"))
    cmd = ["/usr/bin/python3", os.path.join(HERE, "remote_epochs.py"), path, str(epochs), cache]
    cmd += ["%s=%s" % kv for kv in kw.items()]
    p = subprocess.run(cmd, capture_output=True, text=True, env=e, timeout=600)
    if p.returncode:
        raise RuntimeError("%s: %s" % (" ".join(cmd), p.stderr[-800:]))
    j = json.loads(p.stdout.strip().splitlines()[-1])
    return [x["samples"] / x["seconds"] for x in j["epochs"]], j["remote"], j["epochs"]


def peer_run(spec, env):
    """(samples/s, None) or (None, why)."""
    try:
        p = subprocess.run([PEERS_PY, os.path.join(HERE, "remote_peers.py"), json.dumps(spec)],
                           capture_output=True, text=True, env=env, start_new_session=True,
                           timeout=float(os.environ.get("PEER_TIMEOUT", "300")))
    except subprocess.TimeoutExpired:
        return None, "hung: no result after %s s" % os.environ.get("PEER_TIMEOUT", "300")
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if p.returncode or not lines:
        tail = [ln for ln in p.stderr.splitlines() if ln.strip() and "warn" not in ln.lower()]
        return None, "exited %d: %s" % (p.returncode, " | ".join(tail[-3:])[-500:])
    j = json.loads(lines[-1])
    if j["samples"] < spec["samples"]:
        return None, "delivered %d of %d samples" % (j["samples"], spec["samples"])
    return j["samples"] / j["seconds"], None


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1500
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    lat = float(sys.argv[3]) if len(sys.argv) > 3 else 20.0
    peers = [p for p in os.environ.get("PEERS", "wds,streaming,litdata").split(",") if p]
    workers = int(os.environ.get("PEER_WORKERS", "2"))
    before = os.environ.get("STOKER_BEFORE")
    if peers and not os.access(PEERS_PY, os.X_OK):
        print("peers skipped: no peers environment at %s (make peers)" % PEERS_DIR)
        peers = []
    work = tempfile.mkdtemp(prefix="stoker-remote-bench-")
    servers = []
    try:
        img = os.path.join(work, "img")
        subprocess.run([STOKER, "gen", "-n", str(n), "-c", "10", img], check=True,
                       stdout=subprocess.DEVNULL)
        shards = os.path.join(work, "shards")
        subprocess.run([STOKER, "pack", img, shards, "--shard-size", "16MiB"], check=True,
                       stdout=subprocess.DEVNULL)
        nshards = len([f for f in os.listdir(shards) if f.endswith(".tar")])
        s3 = SeaweedS3(work)
        servers.append(s3)
        web = Nginx(shards, work)
        servers.append(web)
        base = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        up = dict(base, AWS_ACCESS_KEY_ID=ACCESS_KEY, AWS_SECRET_ACCESS_KEY=SECRET_KEY,
                  AWS_ENDPOINT_URL=s3.endpoint)
        s3.make_bucket("bench")
        subprocess.run([STOKER, "pack", img, "s3://bench/ds/", "--shard-size", "16MiB"],
                       check=True, stdout=subprocess.DEVNULL, env=up)
        fmt = {}
        for peer, kind in (("streaming", "mds"), ("litdata", "litdata")):
            if peer not in peers:
                continue
            out = os.path.join(work, kind)
            r = subprocess.run([PEERS_PY, os.path.join(HERE, "remote_peers.py"),
                                json.dumps({"convert": kind, "source": img, "out": out})],
                               capture_output=True, text=True, env=base)
            if r.returncode:
                print("%s: conversion failed: %s" % (peer, r.stderr.strip()[-400:]))
                continue
            s3.upload_dir("bench", kind + "/", out, only="")
            fmt[peer] = "s3://bench/%s/" % kind
        proxy = FaultProxy(s3.port, latency_s=lat / 1000.0)
        hproxy = FaultProxy(web.port, latency_s=lat / 1000.0)
        servers += [proxy, hproxy]
        env = dict(up, AWS_ENDPOINT_URL=proxy.url, S3_ENDPOINT_URL=proxy.url)
        hurl = "%s/train-{000000..%06d}.tar" % (hproxy.url, nshards - 1)
        cold = os.geteuid() == 0
        res = {}

        def add(k, v):
            res.setdefault(k, []).append(v)

        def cache():
            return tempfile.mkdtemp(dir=work)

        def local():
            if cold:
                drop_caches()
            sps, _, _ = stoker_run(shards, cache(), base)
            add("local cold", sps[0])
            add("local warm", sps[1])

        def s3e():
            sps, rs, _ = stoker_run("s3://bench/ds/", cache(), env)
            add("s3 e1", sps[0])
            add("s3 e2", sps[1])
            res.setdefault("_rs", []).append(rs)

        def shard():
            add("s3 e1 shard", stoker_run("s3://bench/ds/", cache(), env, epochs=1,
                                          shuffle_mode="shard")[0][0])

        def direct():
            add("s3 e1 direct", stoker_run("s3://bench/ds/", cache(), up, epochs=1)[0][0])

        def shard_direct():
            add("s3 e1 shard direct", stoker_run("s3://bench/ds/", cache(), up, epochs=1,
                                                 shuffle_mode="shard")[0][0])

        def ceiling(name, endpoint):
            def run():
                cmd = ["curl", "-s", "--fail", "--parallel", "--parallel-max", "16",
                       "--aws-sigv4", "aws:amz:us-east-1:s3",
                       "--user", "%s:%s" % (ACCESS_KEY, SECRET_KEY)]
                for f in sorted(os.listdir(shards)):
                    if f.endswith(".tar"):
                        size = os.path.getsize(os.path.join(shards, f))
                        for a in range(0, size, 8 << 20):
                            cmd += ["-r", "%d-%d" % (a, min(a + (8 << 20), size) - 1),
                                    "-o", "/dev/null", "%s/bench/ds/%s" % (endpoint, f)]
                t = time.monotonic()
                subprocess.run(cmd, check=True)
                add(name, n / (time.monotonic() - t))
            return run

        def member():
            add("s3 e1 member", stoker_run("s3://bench/ds/", cache(), dict(
                env, STOKER_REMOTE_WINDOW="0"), epochs=1)[0][0])

        def old():
            add("s3 e1 before", stoker_run("s3://bench/ds/", cache(), env, epochs=1,
                                           build=before)[0][0])
            add("s3 e1 before direct", stoker_run("s3://bench/ds/", cache(), up, epochs=1,
                                                  build=before)[0][0])

        def http():
            add("http e1", stoker_run(hurl, cache(), base, epochs=1)[0][0])

        def peer(name):
            def run():
                src = hurl if name == "wds" else fmt.get(name)
                if not src:
                    return
                spec = {"peer": name, "source": src, "cache": cache(), "workers": workers,
                        "batch": 256, "samples": n}
                sps, why = peer_run(spec, env if name != "wds" else base)
                if why:
                    print("  %s: %s" % (name, why), flush=True)
                    res.setdefault(name, [])
                else:
                    add(name, sps)
            return run

        runs = [local, s3e, shard, direct, shard_direct, member, http,
                ceiling("curl direct", s3.endpoint), ceiling("curl proxy", proxy.url)] + ([old] if before else []) + [peer(p) for p in peers]
        for r in range(rounds):
            k = r % len(runs)
            for f in runs[k:] + runs[:k]:
                f()
            print("round %d: %s" % (r + 1, ", ".join("%s %.0f" % (k, v[-1]) for k, v in
                                                     res.items() if v and k[0] != "_")),
                  flush=True)
        med = {k: statistics.median(v) for k, v in res.items() if v and k[0] != "_"}
        print("\n%d images (%.0f MB) in %d shards, +%.0f ms a request, %d rounds, epoch 1 from "
              "a cold start (median samples/s)%s; load average %s"
              % (n, sum(os.path.getsize(os.path.join(shards, f)) for f in os.listdir(shards))
                 / 1e6, nshards, lat, rounds, "" if cold else " -- not root: 'local cold' is warm",
                 " ".join("%.2f" % x for x in os.getloadavg())))
        for k, v in med.items():
            print("  %-13s %8.0f   (%s)" % (k, v, " ".join("%.0f" % x for x in res[k])))
        for p in peers:
            if p not in med:
                print("  %-13s   failed" % p)

        def ratio(a, b, what):
            if a in med and b in med:
                print("  %-34s %.2fx" % (what, med[a] / med[b]))

        ratio("s3 e1", "local cold", "s3 e1 / local cold (target 0.8)")
        ratio("s3 e2", "local warm", "s3 e2 / local warm (target 0.9)")
        ratio("s3 e1", "s3 e1 member", "s3 e1 windows / a member a request")
        ratio("s3 e1 shard", "local cold", "s3 e1 shard mode / local cold")
        ratio("s3 e1 direct", "local cold", "s3 e1 without the proxy / local cold (target 0.8)")
        ratio("s3 e1 shard direct", "local cold", "s3 e1 shard mode, no proxy / local cold (0.9)")
        ratio("s3 e1 direct", "curl direct", "s3 e1 without the proxy / curl's ceiling")
        ratio("s3 e1", "curl proxy", "s3 e1 through the proxy / curl's ceiling")
        ratio("curl direct", "local cold", "curl's ceiling, no proxy / local cold")
        ratio("s3 e1", "s3 e1 before", "s3 e1 / before this change")
        ratio("s3 e1 direct", "s3 e1 before direct", "s3 e1 without the proxy / before")
        ratio("http e1", "local cold", "http e1 / local cold")
        best = max((p for p in peers if p in med), key=lambda p: med[p], default=None)
        if best:
            ratio("s3 e1", best, "s3 e1 / best peer, %s (target 1.5)" % best)
            for p in peers:
                ratio("s3 e1", p, "s3 e1 / %s" % p)
        rs = res.get("_rs", [None])[-1]
        if rs:
            print("  stoker s3 e1+e2 transport: %d requests (%d windows of %d MiB, %.1f MB a "
                  "request), at most %d reads in flight, latency p50 %.1f ms p99 %.1f ms, "
                  "retries %d; %d misses, %d of them filled from a window's stream"
                  % (rs["requests"], rs["windows"], rs["window"] >> 20,
                     rs["bytes"] / 1e6 / max(rs["requests"], 1), rs["inflight_max"],
                     rs["latency_p50_ns"] / 1e6, rs["latency_p99_ns"] / 1e6, rs["retries"],
                     rs["cache_misses"], rs["streamed"]))
    finally:
        for s in reversed(servers):
            try:
                s.close()
            except Exception:
                pass
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
