#!/bin/sh
# bench/loader_memory.sh [DIR] — the loader's own memory in the train workload
# (docs/BENCHMARKS.md, "The loader's own memory"): stoker against DataLoader +
# PIL, SPDL and DALI (bench/peers' venv), 2 workers or threads each, at each
# loader's default prefetch and at an equal prefetch of 2; then this tree's
# stoker against BASE's (another checkout's build: before/after), alternating,
# images/s and memory; then where stoker's memory goes (bench/loader_memory.py).
#   ROUNDS=5 SECS=8 BASE=/work/main sh bench/loader_memory.sh
# PEERS: the peers measured beside stoker (torch-pil,spdl,dali).
set -u
B=${BUILD:-build}
PY=${STOKER_PEERS_PYTHON:-${XDG_CACHE_HOME:-$HOME/.cache}/stoker/peers/bin/python}
P=${1:-${XDG_CACHE_HOME:-$HOME/.cache}/stoker/default-10000}
R=${ROUNDS:-5}
S=${SECS:-8}
OUT=${OUT:-$B/memory-results}
mkdir -p "$OUT"
run() { # TREE PREFETCH PEERS NAME
	STOKER_LIB="$1/$B/libstoker.so.0" PYTHONPATH="$1/python" STOKER="$1/$B/stoker" \
		"$PY" -m stoker.vs_peers "$P" --peers "$3" --mode train --no-search \
		--stoker-sources folder --rounds "$5" --seconds "$S" --prefetch "$2" --json \
		> "$OUT/$4.json" 2> "$OUT/$4.log" || { tail -3 "$OUT/$4.log"; return; }
	"$PY" -c 'import json, sys; print("\n".join(json.load(open(sys.argv[1]))["table"]))' "$OUT/$4.json"
}
echo "== $(date -u +%H:%M) UTC, load $(cut -d' ' -f1-3 /proc/loadavg)"
run "$PWD" 0 "${PEERS:-torch-pil,spdl,dali}" defaults "$R"
run "$PWD" 2 "${PEERS:-torch-pil,spdl,dali}" equal "$R"
if [ -n "${BASE:-}" ]; then
	i=1
	while [ $i -le "$R" ]; do # alternating: BASE, this tree (stoker's default prefetch, 4)
		run "$BASE" 4 none "base-$i" 1
		run "$PWD" 4 none "this-$i" 1
		i=$((i + 1))
	done
	"$PY" - "$OUT" "$R" <<'PYEOF'
import json, statistics, sys
out, r = sys.argv[1], int(sys.argv[2])
def row(name):
    res = json.load(open("%s/%s.json" % (out, name)))["results"]
    e = [v for v in res.values() if v["peer"] == "stoker"][0]
    return e["samples_per_s"]["median"], e["loader_mb"]
for side in ("base", "this"):
    rows = [row("%s-%d" % (side, i)) for i in range(1, r + 1)]
    print("%-5s images/s %s median %.0f; loader MB %s median %.0f" % (
        side, [round(x) for x, _ in rows], statistics.median(x for x, _ in rows),
        [round(m) for _, m in rows], statistics.median(m for _, m in rows)))
PYEOF
fi
for pf in 4 2; do
	STOKER_LIB="$PWD/$B/libstoker.so.0" PYTHONPATH="$PWD/python" "$PY" bench/loader_memory.py "$P" $pf 24
done
echo "== $(date -u +%H:%M) UTC, load $(cut -d' ' -f1-3 /proc/loadavg)"
