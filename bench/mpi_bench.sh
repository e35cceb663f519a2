#!/bin/sh
# mpirun -np 2 stoker bench on the cold default dataset against one process
# with the same total threads (2 io_uring rings: one process's default, one
# per rank when each rank's CPU share is a core), alternating rounds; the
# issue 14 target: aggregate >= 95 % of one process.  Root (drops caches).
#   sh bench/mpi_bench.sh [ROUNDS] [PATH]
set -u
S=${STOKER:-$(pwd)/build/stoker}
PY=${PYTHON:-/usr/bin/python3}
N=${1:-5}
D=${2:-$HOME/.cache/stoker/default-10000}
command -v mpirun >/dev/null || { echo "skipped: no mpirun (apt-get install openmpi-bin)"; exit 0; }
[ "$(id -u)" = 0 ] || { echo "skipped: --cold needs root"; exit 0; }
[ -d "$D" ] || "$S" bench --runtime 0 --epochs 1 --no-baseline >/dev/null 2>&1 # makes the default dataset
ones= twos=
for i in $(seq 1 "$N"); do
	one=$("$S" bench "$D" --cold --no-baseline --repeat 1 --json 2>/dev/null |
		"$PY" -c 'import json,sys; d=json.load(sys.stdin); print("%.0f" % d["stoker"]["samples_per_s"])')
	two=$(mpirun --allow-run-as-root -np 2 "$S" bench "$D" --cold --json 2>/dev/null |
		"$PY" -c 'import json,sys; d=json.load(sys.stdin); print("%.0f" % d["aggregate"]["samples_per_s"])')
	echo "round $i: one process $one samples/s, mpirun -np 2 aggregate $two samples/s ($(echo "$two $one" | awk '{printf "%.2f", $1/$2}')x), load $(cut -d' ' -f1 /proc/loadavg)"
	ones="$ones $one" twos="$twos $two"
done
echo "$ones" "|" "$twos" | "$PY" -c '
import statistics, sys
a, b = sys.stdin.read().split("|")
a, b = [float(x) for x in a.split()], [float(x) for x in b.split()]
print("median: one process %.0f, mpirun -np 2 %.0f samples/s: %.2fx (target >= 0.95)" % (
    statistics.median(a), statistics.median(b), statistics.median(b) / statistics.median(a)))'
