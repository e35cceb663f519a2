#!/bin/sh
# bench/val_probe_ab.sh BASE DIR... — the loader alone in the val workload
# (bench/val_threads.py: Resize 256 + CenterCrop 224, batch 256, prefetch 2,
# 2 decode threads, no harness around it), BASE's build (another checkout's,
# before) against this tree's, alternating (the order swapped each round),
# ROUNDS rounds of SECS s per DIR, each run under `flock -x $LOCK` by
# itself (LOCK=: none, for a caller that holds it around the whole script);
# prints images/s, CPU ms an image, the process's CPU and its two decode
# threads' (percent of one CPU, summed) of each run with the load beside
# it, then the medians and the images/s ratio.
#   git archive main | tar -x -C /tmp/vmain && make -C /tmp/vmain -j2 build/libstoker.so build/stoker
#   LOCK= ROUNDS=6 SECS=4 flock -x /work/.measure.lock sh bench/val_probe_ab.sh /tmp/vmain /work/data/val/base /work/data/val/mixed
set -u
B=${BUILD:-build}
PY=${STOKER_PEERS_PYTHON:-${XDG_CACHE_HOME:-$HOME/.cache}/stoker/peers/bin/python}
LOCK=${LOCK-/work/.measure.lock}
base=$1
shift
R=${ROUNDS:-6}
S=${SECS:-4}
here=$(pwd)
this=${THIS:-$here} # the tree measured as "this" (a frozen copy of a build: its build/ and python/)
one() { # TREE DIR -> "images/s ms"
	STOKER_LIB="$1/$B/libstoker.so.0" PYTHONPATH="$1/python" ${LOCK:+flock -x "$LOCK"} \
		"$PY" "$here/bench/val_threads.py" "$2" "$S" 2>&1 |
		awk '/img\/s over/ {r=$1} /stk-decode/ {d+=$2} /CPU an image/ {gsub(/[(]/, ""); m=$(NF-4); c=$3}
		     END {print r, m, c, d}'
}
med() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
for d in "$@"; do
	n=$(basename "$d")
	: > "/tmp/probe-ab-$$-base" && : > "/tmp/probe-ab-$$-this"
	i=1
	while [ $i -le "$R" ]; do
		if [ $((i % 2)) = 1 ]; then order="base this"; else order="this base"; fi
		for w in $order; do
			if [ $w = base ]; then t=$base; else t=$this; fi
			set -- $(one "$t" "$d")
			echo "$n round $i $w: $1 img/s, $2 ms an image, process $3 %, decode threads $4 %, load $(cut -d' ' -f1 /proc/loadavg), $(date -u +%H:%M:%S)"
			echo "$1 $2 $3 $4" >> "/tmp/probe-ab-$$-$w"
		done
		i=$((i + 1))
	done
	mb=$(cut -d' ' -f1 "/tmp/probe-ab-$$-base" | med); mt=$(cut -d' ' -f1 "/tmp/probe-ab-$$-this" | med)
	cb=$(cut -d' ' -f2 "/tmp/probe-ab-$$-base" | med); ct=$(cut -d' ' -f2 "/tmp/probe-ab-$$-this" | med)
	pb=$(cut -d' ' -f3 "/tmp/probe-ab-$$-base" | med); pt=$(cut -d' ' -f3 "/tmp/probe-ab-$$-this" | med)
	db=$(cut -d' ' -f4 "/tmp/probe-ab-$$-base" | med); dt=$(cut -d' ' -f4 "/tmp/probe-ab-$$-this" | med)
	echo "$n medians: base $mb img/s ($cb ms, process $pb %, decode threads $db %), this $mt img/s ($ct ms, $pt %, $dt %), this/base $(echo "$mt $mb" | awk '{printf "%.3f", $1 / $2}')"
	rm -f "/tmp/probe-ab-$$-base" "/tmp/probe-ab-$$-this"
done
