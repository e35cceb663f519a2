#!/bin/sh
# stoker bench's measured window tells the truth (issue 26): every error the
# loader counted in a run is in its report whatever the ramp; an exact-epoch
# run (--runtime 0 -E N) reports every sample of its epochs; a cold run
# reports no figure above what the device's own counters (/proc/diskstats)
# saw, and no figure at all where it cannot be cold or is too short.
. "$(dirname "$0")/cli-common.sh"
t=$tmp
cd "$t" || exit 1

# 201 images, one of them truncated: under skip, one error an epoch
"$STOKER" gen bad --images 201 --classes 3 --seed 1 >/dev/null || fail "gen"
f=$(ls bad/c0001/*.jpg | head -n 1)
head -c 600 "$f" >cut && mv cut "$f"

check_errors() { # JSON file, expected whole epochs (0: any)
	"$PY" - "$1" "$2" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
want = int(sys.argv[2])
s = j["stoker"]
eps = s["epochs"]
# every error of the run in its report: the ramp's and each epoch's
assert s["errors"] == s["ramp"]["errors"] + sum(e["errors"] for e in eps), s
assert s["errors"] >= 1, s
assert s["ramp"]["errors"] <= 1, s
for e in eps:
    if e["whole"]:
        assert e["errors"] == 1 and e["samples"] == 200, e
assert s["samples"] == sum(e["samples"] for e in eps), s
if want:
    assert len(eps) == want and all(e["whole"] for e in eps), eps
    assert s["samples"] == 200 * want, s
PY
}

# the defaults (--runtime 2, --ramp 0.25)
"$STOKER" bench bad --image --on-error skip --no-baseline -r 1 --json >d.json 2>err.txt ||
	fail "default run exit $?: $(cat err.txt)"
check_errors d.json 0 || fail "default run's errors: $(cat d.json)"
# exactly one epoch, the ramp a warm-up before it
"$STOKER" bench bad --image --on-error skip --no-baseline -r 1 --runtime 0 -E 1 --json \
	>e.json 2>err.txt || fail "-E 1 exit $?: $(cat err.txt)"
check_errors e.json 1 || fail "-E 1 errors: $(cat e.json)"
out=$("$STOKER" bench bad --image --on-error skip --no-baseline -r 1 --runtime 0 -E 1) ||
	fail "-E 1 human exit $?"
echo "$out" | grep -Eq "errors +[12] .*c0001" || fail "-E 1 human errors: $out"

# an exact-epoch run longer than the ramp: every sample of its epochs
"$STOKER" gen raw --images 300 --classes 3 --seed 2 >/dev/null || fail "gen raw"
for n in 1 2; do
	"$STOKER" bench raw --no-baseline -r 1 --runtime 0 -E $n --batch-size 10 --compute-ms 15 \
		--json >x.json 2>err.txt || fail "-E $n exit $?: $(cat err.txt)"
	"$PY" - x.json $n <<'PY' || fail "-E $n samples: $(cat x.json)"
import json, sys
j = json.load(open(sys.argv[1]))
n = int(sys.argv[2])
s = j["stoker"]
assert s["ramp"]["seconds"] > 0, s["ramp"]
assert s["samples"] == 300 * n and s["batches"] == 30 * n, s
assert s["epochs_measured"] == n, s
assert [e["samples"] for e in s["epochs"]] == [300] * n, s["epochs"]
PY
done

# cold on a small dataset: never a figure above what the device read
# (the device's counters also count other processes' reads: they can only
# be higher), and no figure for a window too short to mean anything
disk_read() { # device name -> bytes read since boot
	awk -v d="$1" '$3 == d { printf "%.0f\n", $6 * 512 }' /proc/diskstats
}
cold_check() { # JSON file, device bytes read around the run
	"$PY" - "$1" "$2" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
dev = float(sys.argv[2])
s = j["stoker"]
if j["samples_per_s"] is None:
    assert j["invalid"] and s["samples_per_s"] is None, j
    sys.exit(0)
assert "invalid" not in j, j
assert s["bytes"] > 0 and s["bytes"] <= dev, (s["bytes"], dev)
assert s["device"]["read_bytes"] >= 0.5 * s["bytes"], s["device"]
PY
}
name=$("$STOKER" bench raw --no-baseline -r 1 --runtime 0 -E 1 --json --cache cold 2>/dev/null |
	"$PY" -c 'import json,sys; print(json.load(sys.stdin)["stoker"].get("device", {}).get("name", ""))')
if [ -n "$name" ] && [ -n "$(disk_read "$name")" ]; then
	for args in "" "--buffered" "--runtime 0 -E 1" "--runtime 0 -E 1 --buffered"; do
		a=$(disk_read "$name")
		# shellcheck disable=SC2086
		"$STOKER" bench raw --cache cold --no-baseline -r 1 --json $args >c.json 2>err.txt ||
			fail "cold $args exit $?: $(cat err.txt)"
		b=$(disk_read "$name")
		cold_check c.json $((b - a)) || fail "cold $args: device read $((b - a)) B: $(cat c.json)"
	done
	# a cold run opens its files cold: after a drop (root) no file is opened
	# to evict its pages, which read back every folder and inode the drop
	# had let go (the epoch's opens then all ran inline, warm)
	"$PY" - <<'PY' || fail "meta dataset"
import os
for d in range(40):
    os.makedirs("meta/c%02d" % d)
    for i in range(50):
        with open("meta/c%02d/%02d.jpg" % (d, i), "wb") as f:
            f.write(os.urandom(8191))
PY
	"$STOKER" bench meta --cache cold --no-baseline -r 1 --runtime 0 -E 1 -b 50 -p 2 \
		--compute-ms 5 --json >m.json 2>err.txt || fail "cold meta exit $?: $(cat err.txt)"
	"$PY" - m.json <<'PY' || fail "cold run re-read the metadata it dropped: $(cat m.json)"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["cache"].startswith("cold (dropped"), j["cache"]
assert j["stoker"]["samples"] == 2000, j["stoker"]
assert j["cache_evicted_files"] == 0, j["cache_evicted_files"]
PY
	# 200 samples in one epoch (under the 256 a cold figure needs, however
	# long a starved machine takes over them): no figure, said so
	"$STOKER" gen tiny --images 200 --classes 2 --seed 3 >/dev/null || fail "gen tiny"
	out=$("$STOKER" bench tiny --cache cold --no-baseline -r 1 --runtime 0 -E 1) || fail "cold -E 1"
	echo "$out" | grep -q "no figures: the cold window was" || fail "short cold run: $out"
	echo "$out" | grep -q "samples/s" && fail "short cold run printed samples/s: $out"
else
	echo "no block device behind $t: the device-counter checks skipped"
fi
# a memory filesystem is never cold: said, no figure (mounting needs root)
if [ "$(id -u)" = 0 ] && mkdir "$t/mem" && mount -t tmpfs tmpfs "$t/mem" 2>/dev/null; then
	cp -r raw "$t/mem/"
	out=$("$STOKER" bench "$t/mem/raw" --cache cold --no-baseline -r 1 --json 2>/dev/null); rc=$?
	umount "$t/mem"
	[ $rc = 0 ] || fail "cold on tmpfs exit $rc"
	echo "$out" | "$PY" -c '
import json, sys
j = json.load(sys.stdin)
assert j["samples_per_s"] is None and "memory filesystem" in j["invalid"], j' ||
		fail "cold on tmpfs: $out"
fi
exit 0
