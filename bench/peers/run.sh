#!/bin/sh
# bench/peers/run.sh [PATH] — the peers section of docs/BENCHMARKS.md: stoker
# against every peer in the venv of bench/peers/setup.sh, workload by workload
# (python3 -m stoker.vs_peers, what `stoker bench --vs all` runs), on PATH
# (default: the default dataset of `stoker bench`, ~/.cache/stoker/default-10000).
#   sh bench/peers/run.sh [PATH]     WORKLOADS="train raw-warm raw-cold val" ROUNDS=5 SECS=3
# JSON per workload in $OUT (build/peers-results); the tables on stdout.
# raw-cold drops the page cache before each run: run it as root.
set -u
B=${BUILD:-build}
PY=${STOKER_PEERS_PYTHON:-${STOKER_PEERS:-${XDG_CACHE_HOME:-$HOME/.cache}/stoker/peers}/bin/python}
[ -x "$PY" ] || { echo "no peers venv ($PY): make peers"; exit 1; }
[ -x "$B/stoker" ] || { echo "no $B/stoker: make first"; exit 1; }
OUT=${OUT:-$B/peers-results}
mkdir -p "$OUT"
export STOKER_LIB="$PWD/$B/libstoker.so.0" PYTHONPATH="$PWD/python" STOKER="$PWD/$B/stoker"
P=${1:-${XDG_CACHE_HOME:-$HOME/.cache}/stoker/default-10000}
for w in ${WORKLOADS:-train raw-warm raw-cold val}; do
	case $w in
	train) args="--mode train --stoker-sources folder,transcoded" ;;
	raw-warm) args="--mode raw --no-search --stoker-sources folder,shards,shards-window" ;;
	raw-cold) args="--mode raw --cache cold --no-search --stoker-sources folder,shards,shards-window" ;;
	val) args="--mode val --no-search --stoker-sources ${VAL_SOURCES:-folder,folder-jcache,transcoded}" ;;
	*) echo "unknown workload $w"; exit 2 ;;
	esac
	echo "== $w ($(date -u +%H:%M) UTC, load $(cut -d' ' -f1-3 /proc/loadavg))"
	# shellcheck disable=SC2086
	"$PY" -m stoker.vs_peers "$P" --peers ${PEERS:-all} $args --rounds "${ROUNDS:-5}" \
		--seconds "${SECS:-3}" --json > "$OUT/$w.json" 2> "$OUT/$w.log" || { tail -3 "$OUT/$w.log"; continue; }
	"$PY" -c 'import json, sys; print("\n".join(json.load(open(sys.argv[1]))["table"]))' "$OUT/$w.json"
done
