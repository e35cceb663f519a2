#!/bin/sh
# scale_bench.sh — a 1,000,000-sample index in 1 GiB shards (issue 13): builds,
# loads and benches, with the memory of each step, and the cost per sample at
# N and at N/10 to show that nothing costs more than O(samples) an epoch.
#
# The data is made fast: BASE real JPEGs (stoker gen, quality 5: ~8 KB each,
# real dimensions), a file list naming them N times over (labels kept), and
# `stoker pack` of that list: N samples under distinct keys, ~N x 9.7 KB of
# shards.  Every step prints seconds, CPU seconds and max RSS (GNU time).
# The loader runs: the null engine (the library and CLI alone: index, sampler,
# slots, batches), then real reads warm and cold (root: drops the cache) in
# global and shard shuffle.
#
# usage: bench/scale_bench.sh [DIR]       (default /tmp/stoker-scale; ~10 GB)
# env:   STOKER (build/stoker), N (1000000), BASE (4000), KEEP=1 keeps DIR
set -eu
dir=${1:-/tmp/stoker-scale}
S=${STOKER:-build/stoker}
N=${N:-1000000}
BASE=${BASE:-4000}
PY=/usr/bin/python3
[ -x "$S" ] || { echo "no stoker binary at $S (run make, or set STOKER)" >&2; exit 1; }
S=$(cd "$(dirname "$S")" && pwd)/$(basename "$S")
mkdir -p "$dir"
cd "$dir"
[ "${KEEP:-0}" = 1 ] || trap 'cd /; rm -rf "$dir/shards" "$dir/shards-small" "$dir/list" "$dir/list-small"' EXIT
trap 'exit 130' INT TERM

# GNU time's figures for one step: "wall s, CPU s, max RSS MB" on stderr
t() { # label cmd...
	label=$1
	shift
	/usr/bin/time -f "%e %U %S %M" -o "$dir/.time" "$@" >/dev/null
	awk -v l="$label" '{printf "%-44s %8.2f s  %8.2f CPU s  %7.1f MB max RSS\n", l, $1, $2 + $3, $4 / 1024}' "$dir/.time"
}
drop() { sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true; }

echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), load $(cut -d' ' -f1 /proc/loadavg), stoker $("$S" --version | cut -d' ' -f2), N=$N, BASE=$BASE, in $dir ($(df --output=source "$dir" | tail -n 1))"
[ -d base ] || t "gen $BASE JPEGs (quality 5)" "$S" gen base -n "$BASE" -c 100 -q 5
# the list: every base file N / BASE times, with its class index as label
"$PY" - "$dir/base" "$N" "$dir/list" <<'EOF'
import os, sys
root, n, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
files = []
for ci, c in enumerate(sorted(os.listdir(root))):
    d = os.path.join(root, c)
    if os.path.isdir(d):
        files += [(os.path.join(d, f), ci) for f in sorted(os.listdir(d)) if f.endswith(".jpg")]
with open(out, "w") as f:
    for i in range(n):
        p, c = files[i % len(files)]
        f.write("%s\t%d\n" % (p, c))
with open(out + "-small", "w") as f:
    for i in range(n // 10):
        p, c = files[i % len(files)]
        f.write("%s\t%d\n" % (p, c))
EOF
rm -rf shards shards-small
t "pack N samples into 1 GiB shards" "$S" pack list shards --shard-size 1GiB
t "pack N/10 samples into 1 GiB shards" "$S" pack list-small shards-small --shard-size 1GiB
echo "shards: $(ls shards/*.tar | wc -l) files, $(du -sh shards | cut -f1)"

# one bench run: label, then bench arguments; prints its figures
b() { # label path args...
	label=$1
	path=$2
	shift 2
	/usr/bin/time -f "%e %U %S %M" -o "$dir/.time" "$S" bench "$path" --json --no-baseline "$@" >"$dir/.json"
	"$PY" - "$dir/.json" "$dir/.time" "$label" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
wall, u, s_, rss = (float(x) for x in open(sys.argv[2]).read().split())
st = j["stoker"]
ep = [e["rss_mb"] for e in st["epochs"]]
print("%-40s create %5.2f s, %8.0f samples/s, %6.0f MB/s, CPU %.4f s/1000, pool %.0f MB, "
      "RSS %.0f MB after epoch 1, %.0f MB after %d, max %.0f MB, errors %d" % (
          sys.argv[3], j["create_s"], st["samples_per_s"], st["mb_per_s"], st["cpu_s_per_1000"],
          st["pool_bytes"] / 1e6, ep[0], ep[-1], len(ep), rss / 1024, st["errors"]))
print("    " + " | ".join(j.get("tuning", [])[:2]))
EOF
}

drop
b "null engine, N, index built (cold)" shards --engine null --epochs 2 --cache as-is
b "null engine, N, index cached" shards --engine null --epochs 2 --cache as-is
b "null engine, N/10, index cached" shards-small --engine null --epochs 2 --cache as-is
b "null engine, N/10, again" shards-small --engine null --epochs 2 --cache as-is
b "null engine, N, again" shards --engine null --epochs 2 --cache as-is
b "io_uring, N, global shuffle, warm" shards --epochs 2
b "io_uring, N, shard shuffle, warm" shards --epochs 2 --shuffle-mode shard
if [ "$(id -u)" = 0 ]; then
	b "io_uring, N, global shuffle, cold" shards --cold
	b "io_uring, N, shard shuffle, cold" shards --cold --shuffle-mode shard
else
	echo "cold runs skipped: dropping the page cache needs root"
fi
