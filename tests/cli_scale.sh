#!/bin/sh
# cli_scale.sh — the index at a size where per-epoch costs show (issue 13):
# a file list of 200,000 samples (one small file named under distinct lines),
# and tar shards of 20,000 members packed from a list of real JPEGs.  Every
# sample comes once an epoch, memory stays at the pool's size, and the whole
# process's CPU grows with the samples, not faster (200,000 against 20,000:
# well under 30 times; O(samples x anything) would be hundreds).  The
# 1,000,000-sample run with figures is bench/scale_bench.sh.
. "$(dirname "$0")/cli-common.sh"
t=$tmp
cd "$t" || exit 1
QUICK="--runtime 0 --ramp 0 --repeat 1 --no-baseline --json"

"$STOKER" gen base --images 40 --classes 4 --quality 5 --seed 3 >/dev/null || fail "gen"
"$PY" - <<'EOF' || fail "lists"
import os
files = sorted(os.path.join(r, f) for r, _, fs in os.walk("base") for f in fs if f.endswith(".jpg"))
for name, n in (("big", 200000), ("small", 20000)):
    with open(name + ".txt", "w") as f:
        for i in range(n):
            f.write("%s\t%d\n" % (os.path.abspath(files[i % len(files)]), i % 4))
EOF

# one run: "samples wall_cpu max_rss_mb pool_mb errors" on stdout
run() { # args...
	/usr/bin/time -f "%U %S %M" -o time.txt "$STOKER" bench $QUICK "$@" >out.json 2>err.txt ||
		fail "bench $*: $(tail -n 3 err.txt)"
	"$PY" - out.json time.txt <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
u, s, rss = (float(x) for x in open(sys.argv[2]).read().split())
st = j["stoker"]
print(st["samples"], u + s, rss / 1024, st["pool_bytes"] / 1048576, st["errors"])
EOF
}

# the null engine: the library and the CLI alone (index, sampler, slots, batches)
set -- $(run small.txt --engine null --epochs 2 --batch-size 256)
[ "$1" = 40000 ] || fail "small list: $1 samples in 2 epochs, want 40000"
small_cpu=$2
set -- $(run big.txt --engine null --epochs 2 --batch-size 256)
[ "$1" = 400000 ] || fail "big list: $1 samples in 2 epochs, want 400000"
big_cpu=$2 big_rss=$3 pool=$4
"$PY" -c "import sys; s, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(0 if b < 30 * max(s, 0.02) else 1)" \
	"$small_cpu" "$big_cpu" || fail "CPU: $big_cpu s for 200,000 samples, $small_cpu s for 20,000"
# the index of 200,000 entries and its paths, the pool, the binary: far below 64 MB more
"$PY" -c "import sys; sys.exit(0 if float(sys.argv[1]) < float(sys.argv[2]) + 64 + 80 else 1)" \
	"$big_rss" "$pool" || fail "RSS $big_rss MB with a pool of $pool MB"

# real reads of tar shards: 20,000 members in 1 GiB shards, every one once
"$STOKER" pack small.txt shards --shard-size 1GiB >/dev/null 2>err.txt || fail "pack: $(cat err.txt)"
set -- $(run shards --epochs 1 --batch-size 256)
[ "$1" = 20000 ] || fail "shards: $1 samples, want 20000"
[ "$5" = 0 ] || fail "shards: $5 errors"
set -- $(run shards --epochs 1 --batch-size 256 --shuffle-mode shard --direct)
[ "$1" = 20000 ] || fail "shards, shard shuffle, O_DIRECT: $1 samples, want 20000"
[ "$5" = 0 ] || fail "shards, shard shuffle, O_DIRECT: $5 errors"
echo ok
