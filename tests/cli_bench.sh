#!/bin/sh
# stoker bench: runs over a small generated folder, prints its figures and the
# ratio to the baseline, JSON is parseable, bad input is named, exit codes.
. "$(dirname "$0")/cli-common.sh"
t=$tmp
cd "$t" || exit 1
# Exact counts: one run of exactly the epochs asked (no minimum time, no ramp,
# no repeats); tests/cli_figures.sh checks those.
QUICK="--runtime 0 --ramp 0 --repeat 1"

"$STOKER" gen data --images 60 --classes 3 --seed 1 >/dev/null || fail "gen"

out=$("$STOKER" bench $QUICK data --batch-size 8 --epochs 2) || fail "bench exit $?"
for want in "samples/s" "MB/s" "batch wait p50/p99/max" "reads in flight" \
	"CPU s per 1000 samples" "x" "errors                     0"; do
	echo "$out" | grep -qF -- "$want" || fail "missing '$want' in: $out"
done
# every comparison names its reference, in the header and in words a user knows
echo "$out" | grep -qE "^  +stoker +plain read loop +stoker / plain loop$" ||
	fail "the table's header does not name the reference: $out"
echo "$out" | grep -qF "plain read loop: one thread reading each sample in stoker's order (open/read/close per file)" ||
	fail "the plain read loop is not explained: $out"

out=$("$STOKER" bench $QUICK data --batch-size 8 --compute-ms 2 --epochs 1 --json) || fail "json exit $?"
echo "$out" > b.json
/usr/bin/python3 - b.json <<'PY' || fail "json content"
import json, sys
j = json.load(open(sys.argv[1]))
s = j["stoker"]
assert s["samples"] == 60, s
assert s["batches"] == 8, s
assert 0 < s["au_percent"] <= 100, s
assert j["baseline"]["samples"] == 60, j
assert j["ratio"] > 0
assert s["batch_wait_ns"]["p99"] >= s["batch_wait_ns"]["p50"]
assert len(s["epochs"]) == 1
PY

# both engines, sharding and O_DIRECT run
"$STOKER" bench $QUICK data --engine pread --no-baseline >/dev/null || fail "pread engine"
"$STOKER" bench $QUICK data --rank 1 --world-size 2 --direct --no-baseline >/dev/null || fail "rank/direct"

# where io_uring is unavailable the pread pool takes over, and says so once
err=$(STOKER_NO_URING=1 "$STOKER" bench $QUICK data --no-baseline 2>&1 >/dev/null) || fail "fallback exit $?"
[ "$(echo "$err" | grep -c "using the pread thread pool")" = 1 ] || fail "fallback notice: $err"

# O_DIRECT on a filesystem that refuses it (ramfs; tmpfs accepts it since
# Linux 6.6): a message, then buffered reads.  Mounting needs root.
if [ "$(id -u)" = 0 ] && mkdir "$t/ram" && mount -t ramfs ramfs "$t/ram" 2>/dev/null; then
	cp -r data "$t/ram/"
	err=$("$STOKER" bench $QUICK "$t/ram/data" --direct --no-baseline 2>&1 >/dev/null); rc=$?
	umount "$t/ram"
	[ $rc = 0 ] || fail "direct on ramfs exit $rc: $err"
	echo "$err" | grep -q "refuses O_DIRECT; using buffered reads" || fail "no O_DIRECT notice: $err"
fi

# bad input: named, exit codes 1 and 2
err=$("$STOKER" bench $QUICK "$t/nope" 2>&1); rc=$?
[ $rc = 1 ] || fail "missing path: exit $rc"
echo "$err" | grep -q "$t/nope" || fail "missing path not named: $err"
"$STOKER" bench $QUICK data --batch-size 0 2>/dev/null; [ $? = 2 ] || fail "batch-size 0 not exit 2"
"$STOKER" bench $QUICK data --engine warp 2>/dev/null; [ $? = 2 ] || fail "bad engine not exit 2"
err=$("$STOKER" bench $QUICK data --rank 3 --world-size 2 2>&1); [ $? = 2 ] || fail "bad rank not exit 2"
# the CLI's message names its flags, not the library's field names
echo "$err" | grep -q -- "--rank: 3 must be below --world-size 2" || fail "bad rank message: $err"
# 0 is what --help says it is: auto (the option table's one meaning)
"$STOKER" bench $QUICK --help | grep -q -- "--queue-depth.*(1\.\.32768, or auto (0))" ||
	fail "--help: queue depth range"
out=$("$STOKER" bench $QUICK data -q 0 --no-baseline) || fail "-q 0 (auto) exit $?"
echo "$out" | grep -q "queue depth [0-9]* (auto: chosen below)" || fail "-q 0 is not auto: $out"
"$STOKER" bench $QUICK --help | grep -q "usage: stoker bench" || fail "--help"

# --vs torch: PyTorch's DataLoader on the same samples, every worker count
# tried, stoker's ratio to the best.  The DataLoader side is Python over this
# build's library: a sanitizer build's library cannot be loaded into Python
# without its runtime preloaded, so that build checks only the usage errors.
"$STOKER" bench $QUICK data --vs tensorflow 2>/dev/null; [ $? = 2 ] || fail "--vs other not exit 2"
err=$(STOKER_PYTHON=/nonexistent/python3 "$STOKER" bench $QUICK data -E 1 --no-baseline --vs torch 2>&1) ||
	fail "--vs torch without an interpreter must still succeed: $err"
echo "$err" | grep -q "DataLoader: not run: cannot start /nonexistent/python3" || fail "no-python: $err"
case "${BUILD:-build}" in
build)
	out=$("$STOKER" bench $QUICK data -b 8 -E 1 --no-baseline --vs torch --json) || fail "--vs torch exit $?"
	echo "$out" > vt.json
	/usr/bin/python3 - vt.json <<'PY' || fail "--vs torch JSON"
import json, sys
j = json.load(open(sys.argv[1]))
vt = j["vs_torch"]
ws = [r["workers"] for r in vt["runs"]]
assert ws[:2] == [0, 1], ws
assert all(r["samples"] > 0 and r["samples_per_s"] > 0 for r in vt["runs"]), vt
assert vt["best"]["samples_per_s"] == max(r["samples_per_s"] for r in vt["runs"])
assert abs(vt["ratio"] - j["stoker"]["samples_per_s"] / vt["best"]["samples_per_s"]) < 1e-6 * vt["ratio"]
PY
	out=$("$STOKER" bench $QUICK data -b 8 -E 1 --no-baseline --vs torch --image --size 32) || fail "--vs torch --image"
	echo "$out" | grep -q "stoker / best DataLoader" || fail "--vs torch human: $out"
	;;
esac

# a sample removed after indexing: skipped and counted, or fatal under --on-error fail.
# A file list's index stays valid (its lines did not change); a folder's is
# built again since its ctime moved (base/trust.c), so a list it is.
find data -name '*.jpg' | sort | sed 's/$/	0/' >list.txt
"$STOKER" bench $QUICK list.txt --no-baseline >/dev/null
rm data/c0001/00000004.jpg
out=$("$STOKER" bench $QUICK list.txt --no-baseline --cache as-is --epochs 1 2>&1) || fail "skip policy exit $?"
echo "$out" | grep -q "errors                     1 (last: .*00000004.jpg: No such file" || fail "skip: $out"
err=$("$STOKER" bench $QUICK list.txt --no-baseline --cache as-is --epochs 1 --on-error fail 2>&1); rc=$?
[ $rc = 1 ] || fail "fail policy exit $rc"
echo "$err" | grep -q "00000004.jpg: No such file" || fail "fail policy message: $err"
exit 0
