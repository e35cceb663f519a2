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
"$STOKER" bench $QUICK --help | tr "\n" " " | tr -s " " | grep -q -- "--queue-depth.*(1\.\.32768, or auto (0))" ||
	fail "--help: queue depth range"
out=$("$STOKER" bench $QUICK data -q 0 --no-baseline) || fail "-q 0 (auto) exit $?"
echo "$out" | grep -q "queue depth [0-9]* (auto: chosen below)" || fail "-q 0 is not auto: $out"
"$STOKER" bench $QUICK --help | grep -q "usage: stoker bench" || fail "--help"

# --vs torch: PyTorch's DataLoader on the same samples at num_workers 0, 2
# and the CPUs, and stoker's Python binding, each side timed alike (start-up
# = create until the first batch, then the ramp, then the window), the ratio
# of the steady rates.  The DataLoader side is Python over this build's
# library: a sanitizer build's library cannot be loaded into Python without
# its runtime preloaded, so that build checks only the usage errors.
"$STOKER" bench $QUICK data --vs tensorflow 2>/dev/null; [ $? = 2 ] || fail "--vs other not exit 2"
err=$(STOKER_PYTHON=/nonexistent/python3 "$STOKER" bench $QUICK data -E 1 --no-baseline --vs torch 2>&1) ||
	fail "--vs torch without an interpreter must still succeed: $err"
echo "$err" | grep -q "DataLoader: not run: cannot start /nonexistent/python3" || fail "no-python: $err"
case "${BUILD:-build}" in
build)
	out=$("$STOKER" bench --runtime 0.3 --ramp 0.1 --repeat 2 data -b 8 -E 1 --no-baseline \
		--vs torch --prefetch 3 --io-threads 1 --json) || fail "--vs torch exit $?"
	echo "$out" > vt.json
	/usr/bin/python3 - vt.json <<'PY' || fail "--vs torch JSON"
import json, os, sys
j = json.load(open(sys.argv[1]))
vt = j["vs_torch"]
cpus = len(os.sched_getaffinity(0))
ws = [r["workers"] for r in vt["runs"]]
assert ws == sorted({0, 2, cpus}), ws
# the window is --runtime's (at least 1 s), after the same ramp, for every side
# as many rounds of every side as stoker's runs (--repeat), each side's medians
assert vt["timing"] == {"ramp_s": 0.1, "window_s": 1.0, "rounds": 2, "window_samples": None}, vt["timing"]
sides = [vt["stoker"]] + vt["runs"]
for s in sides:
    assert len(s["rounds"]) == 2, s
    for r in s["rounds"]:
        assert r["startup_s"] > 0 and r["samples_per_s"] > 0, r
        assert r["ramp_s"] >= 0.1 and r["ramp_samples"] > 0, r  # batches taken, not measured
        assert r["seconds"] >= 1.0 and r["samples"] > 0, r
        # the start-up is not in the steady rate: the window's samples over its seconds alone
        assert abs(r["samples_per_s"] - r["samples"] / r["seconds"]) < 1e-6 * r["samples_per_s"], r
    sps = sorted(r["samples_per_s"] for r in s["rounds"])
    assert abs(s["samples_per_s"] - (sps[0] + sps[1]) / 2) < 1e-6 * s["samples_per_s"], s
    st = sorted(r["startup_s"] for r in s["rounds"])
    assert abs(s["startup_s"] - (st[0] + st[1]) / 2) < 1e-9 + 1e-6 * s["startup_s"], s
assert vt["best"] == max(vt["runs"], key=lambda r: r["samples_per_s"]), vt
assert abs(vt["ratio"] - vt["stoker"]["samples_per_s"] / vt["best"]["samples_per_s"]) < 1e-9 * vt["ratio"]
# stoker's side ran with the options this run was given (the changed ones)
assert sorted(vt["stoker_options"]) == ["io_threads=1", "prefetch=3"], vt["stoker_options"]
PY
	out=$("$STOKER" bench $QUICK data -b 8 -E 1 --no-baseline --vs torch --image --size 32) || fail "--vs torch --image"
	for want in "stoker (Python binding)" "DataLoader num_workers=0" "DataLoader num_workers=2" \
		"stoker / best DataLoader" "start-up = create until the first batch"; do
		echo "$out" | grep -qF "$want" || fail "--vs torch human, no '$want': $out"
	done
	;;
esac

# a sample removed after indexing: skipped and counted, or fatal under --on-error fail.
# A file list's cached index holds while the list is unchanged (a folder's is
# indexed again: its ctime changed), so the file is asked for and missed
find data -name '*.jpg' | sort >list.txt
"$STOKER" bench $QUICK list.txt --no-baseline >/dev/null
rm data/c0001/00000004.jpg
out=$("$STOKER" bench $QUICK list.txt --no-baseline --cache as-is --epochs 1 2>&1) || fail "skip policy exit $?"
echo "$out" | grep -q "errors                     1 (last: .*00000004.jpg: No such file" || fail "skip: $out"
# --json names it too: bad_samples ("path: reason", a bounded list) and the
# count it could not name
"$STOKER" bench $QUICK list.txt --no-baseline --cache as-is --epochs 1 --json >bad.json 2>&1 ||
	fail "skip policy --json exit $?"
"$PY" - bad.json <<'PY' || fail "--json does not name the skipped sample: $(cat bad.json)"
import json, sys
s = json.load(open(sys.argv[1]))["stoker"]
assert s["errors"] == 1, s["errors"]
assert len(s["bad_samples"]) == 1 and s["bad_samples_unnamed"] == 0, s
assert "00000004.jpg: No such file" in s["bad_samples"][0], s["bad_samples"]
PY
err=$("$STOKER" bench $QUICK list.txt --no-baseline --cache as-is --epochs 1 --on-error fail 2>&1); rc=$?
[ $rc = 1 ] || fail "fail policy exit $rc"
echo "$err" | grep -q "00000004.jpg: No such file" || fail "fail policy message: $err"
exit 0
