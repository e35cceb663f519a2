#!/bin/sh
# cli_disk.sh — `stoker disk`: bad options exit 2; a tiny run finishes and
# leaves no file; SIGINT/SIGTERM mid-run leave no file; an existing file and a
# block device are refused; --json matches tests/disk.schema.json; tmpfs takes
# the O_DIRECT fallback; a full disk (a small tmpfs, where mount works) ends
# the pattern with a clear message.  Run by tests/cli.sh with $STOKER set.
. "$(dirname "$0")/cli-common.sh"
mnt=
cleanup() {
	[ -n "$mnt" ] && umount "$mnt" 2>/dev/null
}
fail() {
	echo "FAIL: $*"
	[ -s "$tmp/err" ] && sed 's/^/  stderr: /' "$tmp/err" | tail -n 5
	exit 1
}
# small and short, and never drop the caches of a shared machine
tiny="--no-drop --size 4M -c 4M -n 40 -t 0.2 --ramp 0"
ours() { ls -A "$1" | grep '^\.stoker-disk-' ; }

# --- 1. bad usage exits 2, with the reason -------------------------------------
usage() {
	"$S" disk "$@" >/dev/null 2>"$tmp/err"
	rc=$?
	[ $rc = 2 ] || fail "stoker disk $*: exit $rc, want 2"
	[ -s "$tmp/err" ] || fail "stoker disk $*: no message"
}
usage
usage --qd 0 "$tmp"
usage --qd 5000 "$tmp"
usage --threads 0 "$tmp"
usage --bs 1x "$tmp"
usage --bs 100 "$tmp"
usage --size 10 "$tmp"
usage --runtime -1 "$tmp"
usage --runtime abc "$tmp"
usage --engine aio "$tmp"
usage --pattern seqread,bogus "$tmp"
usage --pattern , "$tmp"
usage --direct --buffered "$tmp"
usage --no-such-option "$tmp"
usage --readonly "$tmp"
usage --readonly --pattern seqwrite "$tmp"
usage --seed -1 "$tmp"
"$S" disk --help >"$tmp/help" 2>&1 || fail "--help exits non-zero"
for o in --pattern --all --bs --qd --threads --engine --direct --buffered --readonly \
	--destructive --json --ramp --runtime; do
	grep -q -- "$o" "$tmp/help" || fail "--help does not mention $o"
done
"$S" disk /nonexistent-stoker-path >/dev/null 2>"$tmp/err"
[ $? = 2 ] || fail "a missing PATH is bad usage: exit 2 (docs/disk.md)"
grep -q nonexistent-stoker-path "$tmp/err" || fail "the message does not name the path"

# --- 2. a tiny run: every pattern, exit 0, nothing left ---------------------------
mkdir "$tmp/d"
"$S" disk $tiny "$tmp/d" >"$tmp/out" 2>"$tmp/err" || fail "tiny run failed"
for p in seqwrite seqread randread smallfiles checkpoint; do
	grep -q "^$p " "$tmp/out" || fail "no $p in the table"
done
grep -q "lat p99.9" "$tmp/out" || fail "no latency percentiles in the table"
grep -q "bypassed (O_DIRECT)" "$tmp/out" || fail "the table does not say how the cache was kept out"
[ -z "$(ls -A "$tmp/d")" ] || fail "files left after a run: $(ls -A "$tmp/d")"
"$S" disk $tiny --engine psync --buffered -p seqread,randread,smallfiles "$tmp/d" \
	>"$tmp/out" 2>"$tmp/err" || fail "psync buffered run failed"
grep -Eq "evicted|dropped" "$tmp/out" || fail "buffered run does not say the cache was evicted"
[ -z "$(ls -A "$tmp/d")" ] || fail "files left after a psync run"

# io_uring refused (as STOKER_NO_URING or a seccomp profile does): psync runs,
# and the header, each pattern's row and the JSON say psync, not io_uring
STOKER_NO_URING=1 "$S" disk $tiny -p seqread,smallfiles,checkpoint "$tmp/d" \
	>"$tmp/out" 2>"$tmp/err" || fail "run without io_uring failed"
grep -q "psync engine (io_uring asked: unavailable here)" "$tmp/out" ||
	fail "header does not say psync ran: $(head -n 1 "$tmp/out")"
[ "$(grep -c "^  engine  *psync$" "$tmp/out")" = 3 ] || fail "per-pattern engine rows: $(cat "$tmp/out")"
! grep -q "io_uring engine" "$tmp/out" || fail "io_uring named as the engine that ran"
STOKER_NO_URING=1 "$S" disk $tiny --json -p seqread,smallfiles "$tmp/d" >"$tmp/j.json" 2>"$tmp/err" ||
	fail "--json without io_uring failed"
"$PY" - "$tmp/j.json" <<'EOF' || fail "JSON engine without io_uring"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["settings"]["engine"] == "psync" and d["settings"]["engine_asked"] == "io_uring", d["settings"]
assert [r["engine"] for r in d["results"]] == ["psync", "psync"], d["results"]
EOF

# --- 3. JSON against the schema, two PATHs with ratios ----------------------------
"$S" disk $tiny --json -p seqread,smallfiles,checkpoint "$tmp/d" "$tmp/d" \
	>"$tmp/j.json" 2>"$tmp/err" || fail "--json run failed"
"$PY" - "$here/disk.schema.json" "$tmp/j.json" <<'EOF' || fail "JSON does not match the schema"
import json, sys
schema, doc = (json.load(open(p)) for p in sys.argv[1:3])
TYPES = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None)}
def is_type(v, t):
    if t == "integer":
        return isinstance(v, int) and not isinstance(v, bool)
    if t == "number":
        return isinstance(v, (int, float)) and not isinstance(v, bool)
    return isinstance(v, TYPES[t])
def check(s, v, where):
    # the subset of JSON Schema the schema file uses
    t = s.get("type")
    if t is not None:
        ts = t if isinstance(t, list) else [t]
        if not any(is_type(v, x) for x in ts):
            raise SystemExit("%s: %r is not %s" % (where, v, t))
    if "const" in s and v != s["const"]:
        raise SystemExit("%s: %r != %r" % (where, v, s["const"]))
    if "enum" in s and v not in s["enum"]:
        raise SystemExit("%s: %r not in %r" % (where, v, s["enum"]))
    if "minimum" in s and is_type(v, "number") and v < s["minimum"]:
        raise SystemExit("%s: %r < %r" % (where, v, s["minimum"]))
    if isinstance(v, dict):
        for k in s.get("required", []):
            if k not in v:
                raise SystemExit("%s: missing %s" % (where, k))
        for k, sub in s.get("properties", {}).items():
            if k in v:
                check(sub, v[k], where + "." + k)
    if isinstance(v, list):
        if len(v) < s.get("minItems", 0):
            raise SystemExit("%s: fewer than %d items" % (where, s["minItems"]))
        for i, x in enumerate(v):
            check(s.get("items", {}), x, "%s[%d]" % (where, i))
check(schema, doc, "$")
try:
    import jsonschema  # the real validator, where installed
    jsonschema.validate(doc, schema)
except ImportError:
    pass
res = doc["results"]
assert len(res) == 6, len(res)
assert all(r["status"] == "ok" for r in res), [(r["pattern"], r["error"]) for r in res]
assert all(r["ios"] > 0 and r["latency_ns"]["p99"] > 0 for r in res)
assert res[0]["ratio_to_first"] is None and res[3]["ratio_to_first"] is not None
assert res[2]["checkpoint"]["durable_s"] > 0 and res[1]["smallfiles"]["files"] == 40
EOF
[ -z "$(ls -A "$tmp/d")" ] || fail "files left after the JSON run"

# --- 4. SIGINT and SIGTERM mid-run: exit 130, nothing left ------------------------
# (a background job of sh starts with SIGINT ignored; stoker installs its own handler)
interrupt() { # signal, options...
	sig=$1; shift
	"$S" disk --no-drop "$@" "$tmp/d" >/dev/null 2>"$tmp/err" &
	pid=$!
	i=0
	while [ -z "$(ours "$tmp/d")" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
	[ -n "$(ours "$tmp/d")" ] || { kill -KILL $pid; fail "no file appeared to interrupt"; }
	sleep 0.5
	kill -"$sig" $pid
	wait $pid
	rc=$?
	[ $rc = 130 ] || fail "after SIG$sig: exit $rc, want 130"
	grep -q interrupted "$tmp/err" || fail "no 'interrupted' message after SIG$sig"
	[ -z "$(ls -A "$tmp/d")" ] || fail "files left after SIG$sig: $(ls -A "$tmp/d" | head -3)"
}
interrupt INT --size 64M -t 30 -p seqread
interrupt TERM -p smallfiles -n 200000 --file-size 4k

# --- 5. refusals: an existing file, a block device ---------------------------------
printf 'precious\n' >"$tmp/victim"
"$S" disk $tiny "$tmp/victim" >/dev/null 2>"$tmp/err"
[ $? = 2 ] || fail "an existing file was not refused"
grep -q -- "--destructive" "$tmp/err" || fail "the refusal does not name --destructive"
[ "$(cat "$tmp/victim")" = precious ] || fail "the existing file was changed"
ln -s "$tmp/victim" "$tmp/link"
"$S" disk $tiny "$tmp/link" >/dev/null 2>"$tmp/err"
[ $? = 2 ] || fail "a symlink to an existing file was not refused"
"$S" disk $tiny --destructive="$tmp/other" "$tmp/victim" >/dev/null 2>"$tmp/err"
[ $? = 2 ] || fail "--destructive naming another file allowed this one"
[ "$(cat "$tmp/victim")" = precious ] || fail "the existing file was changed"
dev=
for d in /dev/vda /dev/sda /dev/nvme0n1 /dev/xvda /dev/loop0; do
	[ -b "$d" ] && { dev=$d; break; }
done
if [ -n "$dev" ]; then
	"$S" disk $tiny "$dev" >/dev/null 2>"$tmp/err"
	[ $? = 2 ] || fail "block device $dev was not refused"
	grep -q "block device" "$tmp/err" || fail "the refusal does not say 'block device'"
else
	echo "note: no block device here: the device refusal is not checked"
fi

# --- 6. tmpfs: O_DIRECT falls back, and the output says it is memory --------------
shm=/dev/shm
if [ -d $shm ] && [ -w $shm ] && [ "$(stat -f -c %T $shm 2>/dev/null)" = tmpfs ]; then
	mkdir "$shm/stoker-cli-disk-$$" || fail "cannot make a folder in $shm"
	"$S" disk $tiny -p seqread,smallfiles "$shm/stoker-cli-disk-$$" >"$tmp/out" 2>"$tmp/err"
	rc=$?
	left=$(ls -A "$shm/stoker-cli-disk-$$")
	rm -rf "$shm/stoker-cli-disk-$$"
	[ $rc = 0 ] || fail "tmpfs run: exit $rc"
	grep -q "does not support O_DIRECT" "$tmp/err" || fail "no O_DIRECT fallback message on tmpfs"
	grep -q "memory, not a disk" "$tmp/out" || fail "tmpfs figures not marked as memory"
	[ -z "$left" ] || fail "files left on tmpfs: $left"
else
	echo "note: no writable tmpfs at $shm: the O_DIRECT fallback is not checked"
fi

# --- 7. a full disk: a 8 MiB tmpfs (needs mount rights) ----------------------------
mkdir "$tmp/small"
if mount -t tmpfs -o size=8m,nr_inodes=64 tmpfs "$tmp/small" 2>/dev/null; then
	mnt=$tmp/small
	"$S" disk $tiny --size 32M -p seqread "$mnt" >/dev/null 2>"$tmp/err"
	[ $? = 1 ] || fail "a data file larger than the disk did not fail"
	grep -q ENOSPC "$tmp/err" || fail "no ENOSPC message for the data file"
	"$S" disk $tiny -c 32M -p checkpoint "$mnt" >/dev/null 2>"$tmp/err"
	[ $? = 1 ] || fail "a checkpoint larger than the disk did not fail"
	grep -q ENOSPC "$tmp/err" || fail "no ENOSPC message for the checkpoint"
	# inodes run out half-way through creating the small files
	"$S" disk $tiny -n 200 --file-size 4k -p smallfiles "$mnt" >/dev/null 2>"$tmp/err"
	[ $? = 1 ] || fail "running out of inodes did not fail"
	grep -q "disk full" "$tmp/err" || fail "no 'disk full' message when inodes ran out"
	[ -z "$(ls -A "$mnt")" ] || fail "files left on the full disk: $(ls -A "$mnt" | head -3)"
	umount "$mnt" && mnt=
else
	echo "note: cannot mount a small tmpfs (not root?): the full-disk case is not checked"
fi
# --- repeats, the short-run warning and the chart ------------------------------------
mkdir -p "$tmp/r1" "$tmp/r2"
"$S" disk $tiny -p seqread,randread --repeat 3 --json --plot "$tmp/d.svg" "$tmp/r1" "$tmp/r2" \
	>"$tmp/r.json" || fail "--repeat exit $?"
"$PY" - "$tmp/r.json" "$tmp/d.svg" <<'EOF' || fail "--repeat figures"
import json, statistics, sys
j = json.load(open(sys.argv[1]))
assert j["repeat"] == 3, j.get("repeat")
assert "0.2" in j["warnings"][0], j.get("warnings")   # -t 0.2: under the 2 s minimum, said
for r in j["results"]:
    runs = r["runs"]
    assert len(runs) == 3, r
    assert abs(r["mb_per_s_spread"]["median"] - statistics.median(x["mb_per_s"] for x in runs)) < 1e-6
    assert r["mb_per_s_spread"]["min"] == min(x["mb_per_s"] for x in runs)
svg = open(sys.argv[2]).read()
assert svg.count("<rect x=") >= 4 and 'class="legend"' in svg and "MB/s" in svg, svg[:300]
assert svg.count('class="errbar"') == 4, svg.count('class="errbar"')
EOF
out=$("$S" disk $tiny -p seqread --repeat 2 "$tmp/r1") || fail "--repeat table exit $?"
echo "$out" | grep -q "2 rounds, the PATHs alternating" || fail "rounds line: $out"
echo "$out" | grep -qE "MB/s +[0-9.]+ \([0-9.]+-[0-9.]+\)" || fail "median (min-max): $out"
echo "$out" | grep -q "^warning: seqread on $tmp/r1 was measured only 0.2" || fail "warning: $out"
[ -z "$(find "$tmp/r1" "$tmp/r2" -mindepth 1)" ] || fail "files left behind by --repeat"
"$S" disk --repeat 0 "$tmp/r1" 2>/dev/null; [ $? = 2 ] || fail "--repeat 0 not exit 2"

echo "ok"
exit 0
