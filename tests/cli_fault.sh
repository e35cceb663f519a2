#!/bin/sh
# The fault suite's command-line half (tests/test_fault.c is the library's):
# errors counted exactly by `stoker bench` run after run, bad usage exiting 2,
# hints naming the CLI's own options, `stoker pack` interrupted leaving nothing.
# Run by tests/cli.sh with $STOKER.
. "$(dirname "$0")/cli-common.sh"
[ -x "$STOKER" ] || { echo "no stoker binary at $STOKER"; exit 77; }
t=$tmp
cd "$t" || exit 1
# Exact counts: one run of exactly the epochs asked (no minimum time, no ramp,
# no repeats); tests/cli_figures.sh checks those.
QUICK="--runtime 0 --ramp 0 --repeat 1"

"$STOKER" gen data --images 60 --classes 3 --seed 1 >/dev/null || fail "gen"
"$STOKER" bench $QUICK data --epochs 1 --no-baseline >/dev/null || fail "first bench (indexes)"

# Class 5: one file cut to 10 bytes on disk (its folder's mtime unchanged, so
# the cached index still has it): read at its size now, it is a JPEG that
# does not decode, so every epoch of every --image run counts exactly one
# error, whatever the warm-up's reads and the counters' reset raced to.  The
# file is the first of the epoch (--no-shuffle): its read lands right after
# the start.  (A run that finds it short drops the cache: each round indexes
# it whole.)
victim=data/c0000/$(ls data/c0000 | head -n 1)
cp "$victim" whole.jpg
i=0
while [ $i -lt 8 ]; do
	cp whole.jpg "$victim"
	"$STOKER" bench $QUICK data --epochs 1 --no-baseline --cache as-is >/dev/null \
		|| fail "round $i: indexing"
	truncate -s 10 "$victim"
	"$STOKER" bench $QUICK data --image --batch-size 8 --epochs 2 --no-shuffle --json >b.json 2>err.txt \
		|| fail "bench run $i exited $?: $(cat err.txt)"
	"$PY" - b.json <<'PY' || fail "run $i: errors not counted exactly: $(cat b.json)"
import json, sys
s = json.load(open(sys.argv[1]))["stoker"]
assert s["errors"] == 2, s["errors"]
assert s["samples"] == 2 * 59, s["samples"]
PY
	i=$((i + 1))
done
# on_error replace: every batch full, the short file counted each epoch.
cp whole.jpg "$victim"
"$STOKER" bench $QUICK data --epochs 1 --no-baseline --cache as-is >/dev/null || fail "indexing"
truncate -s 10 "$victim"
"$STOKER" bench $QUICK data --image --batch-size 8 --epochs 2 --no-shuffle --on-error replace --json \
	>b.json 2>err.txt || fail "bench --on-error replace exited $?: $(cat err.txt)"
"$PY" - b.json <<'PY' || fail "--on-error replace: $(cat b.json)"
import json, sys
s = json.load(open(sys.argv[1]))["stoker"]
assert s["samples"] == 2 * 60, s["samples"]
assert s["errors"] >= 2, s["errors"]
PY
cp whole.jpg "$victim"

# Class 8: a PATH that does not exist is bad usage (exit 2), as documented.
"$STOKER" disk "$t/no/such/folder" >/dev/null 2>err.txt
rc=$?
[ $rc = 2 ] || fail "stoker disk on a missing path exited $rc: $(cat err.txt)"
grep -q "no/such/folder" err.txt || fail "disk error does not name the path: $(cat err.txt)"
# "no samples" names the CLI's option, and that option works.
mkdir -p txt/a && echo one >txt/a/x.txt && echo two >txt/a/y.txt
"$STOKER" bench $QUICK txt --no-baseline >/dev/null 2>err.txt && fail "bench on a folder of .txt passed"
grep -q -- "--extensions" err.txt || fail "no-samples hint: $(cat err.txt)"
grep -q 'extensions="' err.txt && fail "CLI hint names a Python argument: $(cat err.txt)"
"$STOKER" bench $QUICK txt --extensions '*' --epochs 3 --no-baseline --json >b.json 2>err.txt \
	|| fail "--extensions '*': $(cat err.txt)"
"$PY" -c 'import json,sys; s=json.load(open("b.json"))["stoker"]; assert s["samples"] == 3 * 2, s' \
	|| fail "--extensions '*' did not take the .txt files"

# Class 6: `stoker pack` interrupted mid-shard leaves no .tmp.  Caught with a
# .tmp on disk (stopped, checked), then SIGINT (Ctrl-C) or SIGTERM: it dies of
# the signal and the .tmp is gone; finished shards stay whole.  A script's
# background job ignores SIGINT: the wrapper gives it back its default.
mkdir -p big/a
i=0
while [ $i -lt 120 ]; do
	head -c 400000 /dev/urandom >"big/a/$(printf '%04d' $i).jpg"
	i=$((i + 1))
done
for sig in INT:2 TERM:15; do
	num=${sig#*:}
	sig=${sig%:*}
	caught=0
	try=0
	while [ $caught = 0 ] && [ $try -lt 20 ]; do
		rm -rf packed
		"$PY" -c 'import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_DFL)
os.execv(sys.argv[1], sys.argv[1:])' "$STOKER" pack big packed --shard-size 4MiB >/dev/null 2>&1 &
		pid=$!
		while kill -0 $pid 2>/dev/null; do
			if ls packed/*.tmp >/dev/null 2>&1; then
				kill -STOP $pid
				if ls packed/*.tmp >/dev/null 2>&1; then
					caught=1
					kill -$sig $pid
				fi
				kill -CONT $pid
				[ $caught = 1 ] && break
			fi
		done
		wait $pid
		rc=$?
		try=$((try + 1))
	done
	[ $caught = 1 ] || fail "never caught stoker pack with a .tmp in 20 tries"
	want=$((128 + num))
	[ $rc = $want ] || fail "stoker pack on SIG$sig exited $rc, not $want"
	[ -z "$(ls packed | grep '\.tmp$')" ] || fail "pack interrupted by SIG$sig left: $(ls packed)"
	for s in packed/*.tar; do
		[ -e "$s" ] || continue
		tar -tf "$s" >/dev/null || fail "a finished shard is not a whole tar: $s"
	done
done

# Class 7 (and issue 13): `stoker bench` on one shard of >= 300 MB holding
# thousands of samples, default mode (warm cache, 3 epochs, baseline).  The
# warm-up and the baseline read each member, not the whole shard per member
# (which took hours here): a 120 s bound catches that again.  Hard links make
# the folder in no time; the classes are counted from the labels.
mkdir -p many
head -c 100000 /dev/urandom >many/src.jpg
"$PY" -c 'import os
for i in range(3300):
    d = "many/%s" % "abc"[i // 1100]
    os.makedirs(d, exist_ok=True)
    os.link("many/src.jpg", "%s/%05d.jpg" % (d, i))' || fail "links"
rm many/src.jpg
"$STOKER" pack many shards >/dev/null || fail "pack of 3300 samples"
rm -rf many
size=$(stat -c %s shards/train-000000.tar)
[ "$size" -ge 300000000 ] || fail "the shard is $size bytes, not >= 300 MB"
[ ! -e shards/train-000001.tar ] || fail "more than one shard"
timeout 120 "$STOKER" bench shards >out.txt 2>err.txt
rc=$?
[ $rc = 124 ] && fail "stoker bench on one 330 MB shard took over 120 s (O(samples x shard) again?)"
[ $rc = 0 ] || fail "bench on one shard exited $rc: $(cat err.txt)"
grep -q "3300 samples, 3 classes" out.txt || fail "header: $(head -n 2 out.txt)"
grep -q "errors                     0" out.txt || fail "errors: $(cat out.txt)"
grep -q "plain read loop" out.txt || fail "no plain read loop beside stoker: $(cat out.txt)"
rm -rf shards
