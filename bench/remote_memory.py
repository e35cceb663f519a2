#!/usr/bin/python3
"""A loader's memory over remote data does not grow with the dataset: the
same bench (raw bytes, 2 epochs, global shuffle) over shards served by nginx
for a dataset and one ten times its size, with the local cache on (windows)
and off; each row the process's peak RSS (VmHWM, sampled until it exits)
beside the slot pool the library sized (pool_bytes) and the index.

    python3 bench/remote_memory.py [N_IMAGES]      (default 1500, and 10x that)

Needs the built CLI (build/stoker) and nginx (Debian: nginx-light)."""
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(TOP, "tests", "python"))
from remote_servers import Nginx  # noqa: E402

STOKER = os.environ.get("STOKER") or os.path.join(TOP, "build", "stoker")


def peak_rss_mb(cmd, env):
    """(stdout, peak VmHWM in MB) of cmd."""
    out = tempfile.TemporaryFile()
    p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.DEVNULL, env=env)
    peak = 0
    while p.poll() is None:
        try:
            with open("/proc/%d/status" % p.pid) as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        peak = max(peak, int(line.split()[1]))
        except OSError:
            pass
        time.sleep(0.02)
    if p.returncode:
        raise SystemExit("%s exited %d" % (" ".join(cmd), p.returncode))
    out.seek(0)
    return out.read().decode(), peak / 1024.0


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1500
    env = dict(os.environ, STOKER_NO_PROGRESS="1")
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR", "/var/tmp")) as t:
        web = os.path.join(t, "web")
        os.makedirs(web)
        rows = []
        for count in (n, 10 * n):
            ds, sh = os.path.join(t, "ds%d" % count), os.path.join(web, "s%d" % count)
            subprocess.run([STOKER, "gen", ds, "-n", str(count)], check=True, env=env,
                           stdout=subprocess.DEVNULL)
            subprocess.run([STOKER, "pack", ds, sh, "--shard-size", "64MiB"], check=True, env=env,
                           stdout=subprocess.DEVNULL)
            rows.append((count, sh, sorted(f for f in os.listdir(sh) if f.endswith(".tar"))))
        srv = Nginx(web, t)
        try:
            print("%-10s %-12s %10s %10s %10s %12s" % ("samples", "local cache", "peak RSS MB",
                                                     "pool MB", "index MB", "samples/s"))
            for count, sh, tars in rows:
                url = "%s/s%d/train-{000000..%06d}.tar" % (srv.url, count, len(tars) - 1)
                for cache in (True, False):
                    cdir = tempfile.mkdtemp(dir=t)
                    cmd = [STOKER, "bench", url, "--json", "--epochs", "2", "--runtime", "0",
                           "--repeat", "1", "--cache-dir", cdir] + ([] if cache else
                                                                    ["--no-remote-cache"])
                    out, rss = peak_rss_mb(cmd, env)
                    j = json.loads(out)
                    st = j["runs"][0]["stoker"]
                    mem = j.get("memory") or {}
                    print("%-10d %-12s %10.0f %10.0f %10.1f %12.0f" % (
                        count, "on" if cache else "off", rss, st["pool_bytes"] / 2**20,
                        mem.get("index_bytes", 0) / 2**20, st["samples_per_s"]))
        finally:
            srv.close()


if __name__ == "__main__":
    main()
