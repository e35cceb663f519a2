#!/bin/sh
# bench/val_loader_ab.sh BASE DIR... — the val workload (Resize 256 +
# CenterCrop 224, batch 256, prefetch 2, 2 decode threads, warm cache) of
# stoker alone through bench/peers' harness, BASE's build (another
# checkout's, before) against this tree's, alternating (the order swapped
# each round), ROUNDS rounds of SECS s per DIR: images/s, CPU s per 1,000
# images, loader MB; medians.
#   git archive 87a5238 | tar -x -C /tmp/main && make -C /tmp/main build/libstoker.so build/stoker
#   ROUNDS=5 SECS=3 flock -x /work/.measure.lock sh bench/val_loader_ab.sh /tmp/main /work/data/val/mixed /work/data/val/prog
set -u
B=${BUILD:-build}
PY=${STOKER_PEERS_PYTHON:-${XDG_CACHE_HOME:-$HOME/.cache}/stoker/peers/bin/python}
base=$1
shift
R=${ROUNDS:-5}
S=${SECS:-3}
OUT=${OUT:-$B/val-ab}
mkdir -p "$OUT"
one() { # TREE DIR NAME
	STOKER_LIB="$1/$B/libstoker.so.0" PYTHONPATH="$1/python" STOKER="$1/$B/stoker" \
		"$PY" -m stoker.vs_peers "$2" --peers none --mode val --no-search \
		--stoker-sources folder --rounds 1 --seconds "$S" --json > "$OUT/$3.json" 2> "$OUT/$3.log" ||
		tail -3 "$OUT/$3.log"
}
echo "== $(date -u +%H:%M:%S) UTC, load $(cut -d' ' -f1-3 /proc/loadavg)"
for d in "$@"; do
	n=$(basename "$d")
	i=1
	while [ $i -le "$R" ]; do
		if [ $((i % 2)) = 1 ]; then
			one "$base" "$d" "$n-base-$i"
			one "$PWD" "$d" "$n-this-$i"
		else
			one "$PWD" "$d" "$n-this-$i"
			one "$base" "$d" "$n-base-$i"
		fi
		i=$((i + 1))
	done
	"$PY" - "$OUT" "$n" "$R" <<'PYEOF'
import json, statistics, sys
out, n, r = sys.argv[1], sys.argv[2], int(sys.argv[3])
def row(name):
    e = [v for v in json.load(open("%s/%s.json" % (out, name)))["results"].values()][0]
    return e["samples_per_s"]["median"], e["cpu_s_per_1000"], e["loader_mb"]
med = {}
for side in ("base", "this"):
    rows = [row("%s-%s-%d" % (n, side, i)) for i in range(1, r + 1)]
    med[side] = [statistics.median(x[j] for x in rows) for j in range(3)]
    print("%-6s %-5s images/s %s median %.0f; CPU s/1k median %.2f; loader MB median %.0f" % (
        n, side, [round(x[0]) for x in rows], med[side][0], med[side][1], med[side][2]))
print("%-6s this / base: images/s %.3f, CPU per image %.3f" % (
    n, med["this"][0] / med["base"][0], med["this"][1] / med["base"][1]))
PYEOF
done
echo "== $(date -u +%H:%M:%S) UTC, load $(cut -d' ' -f1-3 /proc/loadavg)"
