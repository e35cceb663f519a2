#!/bin/sh
# bench/val_probe_ab.sh BASE DIR... — the loader alone in the val workload
# (bench/val_threads.py: Resize 256 + CenterCrop 224, batch 256, prefetch 2,
# 2 decode threads, no harness around it), BASE's build (another checkout's,
# before) against this tree's, alternating (the order swapped each round),
# ROUNDS rounds of SECS s per DIR, each run under `flock -x
# /work/.measure.lock` by itself; prints images/s and CPU ms an image of
# each run with the load beside it, then the medians and their ratio.
#   git archive main | tar -x -C /tmp/vmain && make -C /tmp/vmain -j2 build/libstoker.so build/stoker
#   ROUNDS=6 SECS=4 sh bench/val_probe_ab.sh /tmp/vmain /work/data/val/base /work/data/val/mixed
set -u
B=${BUILD:-build}
PY=${STOKER_PEERS_PYTHON:-${XDG_CACHE_HOME:-$HOME/.cache}/stoker/peers/bin/python}
LOCK=${LOCK:-/work/.measure.lock}
base=$1
shift
R=${ROUNDS:-6}
S=${SECS:-4}
here=$(pwd)
one() { # TREE DIR -> "images/s ms"
	STOKER_LIB="$1/$B/libstoker.so.0" PYTHONPATH="$1/python" flock -x "$LOCK" \
		"$PY" "$here/bench/val_threads.py" "$2" "$S" 2>&1 |
		awk '/img\/s over/ {r=$1} /CPU an image/ {gsub(/[(]/, ""); m=$(NF-4)} END {print r, m}'
}
med() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
for d in "$@"; do
	n=$(basename "$d")
	: > "/tmp/probe-ab-$$-base" && : > "/tmp/probe-ab-$$-this"
	i=1
	while [ $i -le "$R" ]; do
		if [ $((i % 2)) = 1 ]; then order="base this"; else order="this base"; fi
		for w in $order; do
			if [ $w = base ]; then t=$base; else t=$here; fi
			set -- $(one "$t" "$d")
			echo "$n round $i $w: $1 img/s, $2 ms an image, load $(cut -d' ' -f1 /proc/loadavg), $(date -u +%H:%M:%S)"
			echo "$1 $2" >> "/tmp/probe-ab-$$-$w"
		done
		i=$((i + 1))
	done
	mb=$(cut -d' ' -f1 "/tmp/probe-ab-$$-base" | med); mt=$(cut -d' ' -f1 "/tmp/probe-ab-$$-this" | med)
	cb=$(cut -d' ' -f2 "/tmp/probe-ab-$$-base" | med); ct=$(cut -d' ' -f2 "/tmp/probe-ab-$$-this" | med)
	echo "$n medians: base $mb img/s ($cb ms), this $mt img/s ($ct ms), this/base $(echo "$mt $mb" | awk '{printf "%.3f", $1 / $2}')"
	rm -f "/tmp/probe-ab-$$-base" "/tmp/probe-ab-$$-this"
done
