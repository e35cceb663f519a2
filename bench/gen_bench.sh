#!/bin/sh
# bench/gen_bench.sh — `stoker gen`'s speed: images per CPU second (one
# thread, what "per core" means) and images/s with every core; with OLD=<another stoker binary>, the two alternate round by round
# and the median ratio is printed (CPU time is what a busy machine disturbs
# least; note `uptime` beside the figures all the same).
#   sh bench/gen_bench.sh [DIR]      # N=300 ROUNDS=5 OLD=/path/to/stoker
set -u
S=${STOKER:-build/stoker}
N=${N:-300}
ROUNDS=${ROUNDS:-5}
OLD=${OLD:-}
base=${1:-${TMPDIR:-/tmp}}
PY=${PYTHON:-/usr/bin/python3}
[ -x "$S" ] || { echo "no stoker binary at $S (make first)"; exit 1; }
d=$(mktemp -d "$base/stoker-gen-bench-XXXXXX") || exit 1
trap 'rm -rf "$d"' EXIT
trap 'exit 1' HUP INT TERM
export STOKER_NO_PROGRESS=1

# one BINARY THREADS -> "images_per_cpu_s images_per_s mean_bytes", CPU time
# from the child's rusage (so an older stoker without those --json keys works)
one() {
	rm -rf "$d/out"
	$PY - "$1" "$2" "$N" "$d/out" <<'EOF' || exit 1
import os, resource, subprocess, sys, time
exe, threads, n, out = sys.argv[1:]
r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
t0 = time.monotonic()
subprocess.run([exe, "gen", "--images", n, "--classes", "10", "--threads", threads, out],
               check=True, stdout=subprocess.DEVNULL)
wall = time.monotonic() - t0
r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
size = sum(os.path.getsize(os.path.join(dp, f)) for dp, _, fs in os.walk(out) for f in fs)
print("%.1f %.1f %.0f" % (int(n) / cpu, int(n) / wall, size / int(n)))
EOF
}
cores=$(nproc)
echo "stoker gen, $N images a run, $ROUNDS rounds; load: $(cut -d' ' -f1-3 /proc/loadavg)"
r=1
while [ $r -le "$ROUNDS" ]; do
	new1=$(one "$S" 1); newn=$(one "$S" "$cores")
	line="round $r: new 1 thread ${new1%% *} images/CPU-s, $cores threads $(echo "$newn" | cut -d' ' -f2) images/s, mean $(echo "$new1" | cut -d' ' -f3) B"
	if [ -n "$OLD" ]; then
		old1=$(one "$OLD" 1); oldn=$(one "$OLD" "$cores")
		line="$line | old ${old1%% *} images/CPU-s, $(echo "$oldn" | cut -d' ' -f2) images/s"
		echo "$old1 $new1 $oldn $newn" >>"$d/pairs"
	fi
	echo "$line"
	r=$((r + 1))
done
if [ -n "$OLD" ]; then
	$PY - "$d/pairs" <<'EOF'
import statistics, sys
rows = [list(map(float, l.split())) for l in open(sys.argv[1])]
cpu = [r[3] / r[0] for r in rows]      # images per CPU second, new / old
wall = [r[10] / r[7] for r in rows]    # images/s with every core, new / old
print("median ratio new/old: per CPU second %.2f (min %.2f, max %.2f); all cores %.2f"
      % (statistics.median(cpu), min(cpu), max(cpu), statistics.median(wall)))
EOF
fi
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
