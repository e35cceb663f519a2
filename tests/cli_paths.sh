#!/bin/sh
# stoker bench PATH1 PATH2 ...: the same options on each path in turn, one
# column each with its device, verdict and ratio to the first; one folder cold
# and one warm move the columns; a path that cannot run says why while the
# others run; paths on one device are said to be; the seeds' "1 KiB of each
# file, batches of 32, 100 batches" is one option set.
. "$(dirname "$0")/cli-common.sh"
t=$tmp
cd "$t" || exit 1

"$STOKER" gen a --images 400 --classes 4 --seed 3 >/dev/null || fail "gen"
cp -r a b
"$STOKER" gen other --images 50 --classes 2 >/dev/null || fail "gen other"

# The seeds' demonstration: 1 KiB of each file, batches of 32, 100 batches.
out=$("$STOKER" bench a b --read-bytes 1024 -b 32 --max-batches 100 --runtime 0 --ramp 0 \
	--repeat 1 --json) || fail "1 KiB x 100 batches exit $?"
echo "$out" > seeds.json
$PY - seeds.json <<'PY' || fail "1 KiB x 100 batches"
import json, sys
j = json.load(open(sys.argv[1]))
assert [p["path"] for p in j["paths"]] == ["a", "b"], j
for p in j["paths"]:
    r = p["runs"][0]["stoker"]
    assert r["batches"] == 100, r
    assert r["bytes"] == r["samples"] * 1024, r   # every file read 1 KiB, no more
    assert p["device"]["kind"] != "unknown" or p["device"]["name"] == "", p
assert j["options"]["read_bytes"] == "1024"
assert abs(j["paths"][0]["ratio"] - 1) < 1e-9
PY

# One cold, one warm: the columns move.  Root drops the page cache; the warm
# folder is then read once; --cache as-is keeps each as it is.
if [ "$(id -u)" = 0 ] && sync && echo 3 >/proc/sys/vm/drop_caches 2>/dev/null; then
	cat b/*/* >/dev/null
	out=$("$STOKER" bench a b missing other --cache as-is --runtime 0 --ramp 0 --repeat 1 -b 16 \
		--json) || fail "cold/warm exit $?"
	echo "$out" > cw.json
	$PY - cw.json <<'PY' || fail "cold and warm columns"
import json, sys
j = json.load(open(sys.argv[1]))
a, b, missing, other = j["paths"]
assert a["cached_fraction"] < 0.5 and b["cached_fraction"] > 0.9, (a, b)
assert a["runs"][0]["stoker"]["samples_per_s"] < b["runs"][0]["stoker"]["samples_per_s"], (a, b)
assert b["ratio"] > 1, b
assert "No such file" in missing["error"] and "missing" in missing["error"], missing
assert "another dataset than a: 50 samples, not 400" in other["error"], other
if a["device"]["name"]:
    assert "same device as a" in b["note"], b
PY
	out=$("$STOKER" bench a b missing --cache as-is --runtime 0 --ramp 0 --repeat 1 -b 16) ||
		fail "human exit $?"
	for want in "ratio to a  " "device" "verdict" "missing: not run: " "same device"; do
		echo "$out" | grep -q "$want" || fail "missing '$want' in: $out"
	done
else
	echo "(not root: the cold/warm columns are not checked)"
fi

# Every path bad: the run fails; --sweep and --vs take one path.
"$STOKER" bench nope1 nope2 --repeat 1 --runtime 0 >/dev/null 2>&1; [ $? = 1 ] || fail "all bad not exit 1"
"$STOKER" bench a b --sweep qd=1,2 2>/dev/null; [ $? = 2 ] || fail "--sweep with two paths not exit 2"
exit 0
