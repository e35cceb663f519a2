#!/bin/sh
# bench/val_ab.sh BEFORE_BUILD DIR [-c|-r] — one decode thread, before against
# now, alternating (the order swapped each round), 5 rounds: DIR's first 200
# JPEGs × 3 passes through build/examples/decode_loop (-c: Resize 256 +
# CenterCrop 224; -r: RandomResizedCrop 224 + flip), in images per CPU second
# (perf stat's task-clock: a loaded machine's waits left out).
# BEFORE_BUILD: another build's build/ folder (its libstoker.so.0 is used
# through LD_LIBRARY_PATH with this build's decode_loop).
#   git archive f1e3d85 | tar -x -C /tmp/before && make -C /tmp/before build/libstoker.so
#   flock /work/.measure.lock sh bench/val_ab.sh /tmp/before/build /work/data/val/prog -c
set -u
before=$1 dir=$2 mode=${3:--c}
now=$PWD/build
F=$(find "$dir" -name '*.jpg' | sort | head -200)
n=$(echo $F | wc -w)
m=
[ "$mode" = -c ] && m=-c
one() {
	# shellcheck disable=SC2086 # $m and $F: words on purpose
	ms=$(LD_LIBRARY_PATH=$1 perf stat -x, -e task-clock "$now/examples/decode_loop" $m 3 $F 2>&1 >/dev/null |
		grep task-clock | cut -d, -f1)
	echo "$2 $(awk -v ms="$ms" -v n="$n" 'BEGIN { printf "%.0f", 3 * n / (ms / 1000) }') images/CPU-s"
}
echo "load $(cut -d' ' -f1-3 /proc/loadavg)"
for r in 1 2 3 4 5; do
	if [ $((r % 2)) = 1 ]; then
		one "$before" before
		one "$now" now
	else
		one "$now" now
		one "$before" before
	fi
done
echo "load $(cut -d' ' -f1-3 /proc/loadavg)"
