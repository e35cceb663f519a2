#!/bin/sh
# bench/binding_cost.sh — what one batch costs stoker.Loader, in counts that
# do not move with the machine's speed (issue 12; the wall-clock figures are
# bench/python_vs_c.py's):
#   futex calls and context switches a batch, all threads together (perf
#   stat's syscall tracepoint: on a VM a wake is an inter-processor interrupt,
#   the costliest thing a batch does);
#   instructions a batch in the consumer (Python) thread and in the loader's
#   own threads (callgrind, instrumenting only the measured epochs).
# Null engine (no I/O), batch 256, queue depth 128, warm-up epochs first.
#
# usage: sh bench/binding_cost.sh DIR [PREFETCH] [EPOCHS]
#   DIR: a folder of samples (stoker gen DIR --images 20000 --classes 100)
# Needs perf, and valgrind with its headers (Debian: linux-perf, valgrind).
set -eu
dir=${1:?usage: sh bench/binding_cost.sh DIR [PREFETCH] [EPOCHS]}
pf=${2:-4}
epochs=${3:-40}
here=$(cd "$(dirname "$0")/.." && pwd)
py=${PYTHON:-/usr/bin/python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

cat > "$tmp/loop.py" <<'EOF'
import ctypes, sys, stoker
path, pf, warm, epochs, cg = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
l = stoker.Loader(path, 256, seed=0, engine="null", quiet=True, prefetch=pf, queue_depth=128)
def run(a, b):
    n = 0
    for e in range(a, b):
        l.set_epoch(e)
        for _ in l:
            n += 1
    return n
run(0, warm)
mark = ctypes.CDLL(cg) if cg != "-" else None
if mark:
    mark.cg_start()
n = run(warm, warm + epochs)
if mark:
    mark.cg_stop()
print(n)
EOF
export PYTHONPATH="$here/python"

# 1. kernel transitions: a run with the epochs minus one without them
count() { # EPOCHS OUT
	perf stat -x, -e syscalls:sys_enter_futex,context-switches -o "$2" \
		"$py" "$tmp/loop.py" "$dir" "$pf" 3 "$1" - > "$2.n"
}
count "$epochs" "$tmp/a"
count 0 "$tmp/b"
field() { grep "$2" "$1" | cut -d, -f1; }
n=$(cat "$tmp/a.n")
awk -v n="$n" -v fa="$(field "$tmp/a" futex)" -v fb="$(field "$tmp/b" futex)" \
    -v ca="$(field "$tmp/a" context)" -v cb="$(field "$tmp/b" context)" -v pf="$pf" 'BEGIN {
	printf "prefetch %d, %d batches: %.2f futex calls and %.2f context switches a batch\n",
	       pf, n, (fa - fb) / n, (ca - cb) / n }'

# 2. instructions: callgrind instruments only the measured epochs (a client
# request from a two-function library); thread 1 is the consumer's
cat > "$tmp/cg.c" <<'EOF'
#include <valgrind/callgrind.h>
void cg_start(void) { CALLGRIND_START_INSTRUMENTATION; CALLGRIND_DUMP_STATS; }
void cg_stop(void) { CALLGRIND_DUMP_STATS; CALLGRIND_STOP_INSTRUMENTATION; }
EOF
cc -O1 -shared -fPIC -o "$tmp/libcg.so" "$tmp/cg.c"
ce=$((epochs / 4 > 0 ? epochs / 4 : 1))
valgrind --tool=callgrind --instr-atstart=no --separate-threads=yes \
	--callgrind-out-file="$tmp/cg.%p" "$py" "$tmp/loop.py" "$dir" "$pf" 2 "$ce" "$tmp/libcg.so" \
	> "$tmp/cg.n" 2> "$tmp/cg.log"
n=$(cat "$tmp/cg.n")
all=$(sed -n 's/.*Collected : *\([0-9]*\).*/\1/p' "$tmp/cg.log")
c1=$(cat "$tmp"/cg.*.1-01 | sed -n 's/^summary: *//p')
c2=$(cat "$tmp"/cg.*.2-01 | sed -n 's/^summary: *//p')
awk -v n="$n" -v all="$all" -v c1="$c1" -v c2="$c2" 'BEGIN {
	printf "%d batches: %.1f k instructions a batch in the consumer thread, %.1f k in the loader'"'"'s threads\n",
	       n, c2 / n / 1000, (all - c1 - c2) / n / 1000 }'
