#!/bin/sh
# cli_iostat.sh — `stoker iostat`: bad usage exits 2; on the fake tree in
# tests/fixtures/doctor/ok the since-boot report holds the whole disks with
# I/O (no partitions, loop or ram devices) with iostat -x's figures, named
# devices and --all widen it, -y INTERVAL COUNT gives COUNT interval reports;
# on this machine it runs, and SIGINT ends a run cleanly.  Run by
# tests/cli.sh with $STOKER set.
. "$(dirname "$0")/cli-common.sh"
if ! "$S" iostat --help >/dev/null 2>&1; then
	echo "skipped: this stoker has no 'iostat' subcommand yet (register cmd_iostat in tools/main.c)"
	exit 77
fi
pid=
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null
}
root=$here/fixtures/doctor/ok

# --- 1. bad usage ---------------------------------------------------------------
usage() {
	"$S" iostat "$@" >/dev/null 2>"$tmp/err"
	rc=$?
	[ $rc = 2 ] || fail "stoker iostat $*: exit $rc, want 2"
	[ -s "$tmp/err" ] || fail "stoker iostat $*: no message"
}
usage 0
usage -1
usage 1 0
usage 1 1.5
usage 1 2 3
usage -y
usage -d
usage --no-such-option
"$S" iostat --root "$root" -d nosuchdev >"$tmp/out" 2>"$tmp/err"
[ $? = 1 ] || fail "an unknown device should exit 1"
grep -q nosuchdev "$tmp/err" || fail "the message does not name the device"
"$S" iostat --help >"$tmp/help" 2>&1 || fail "--help exits non-zero"
for o in --device --all --skip-first --json INTERVAL COUNT; do
	grep -q -- "$o" "$tmp/help" || fail "--help does not mention $o"
done

# --- 2. the fake tree: since boot (uptime 1000 s) -------------------------------
"$S" iostat --root "$root" >"$tmp/out" 2>"$tmp/err" || fail "iostat on the fake tree"
head -n 1 "$tmp/out" | grep -q '^Device  *r/s  *rkB/s  *rrqm/s  *%rrqm  *r_await  *rareq-sz  *w/s .*aqu-sz  *%util$' ||
	fail "not iostat -x's header"
devs=$(awk 'NR > 1 && NF { print $1 }' "$tmp/out" | tr '\n' ' ')
[ "$devs" = "vda nvme0n1 sda " ] || fail "devices shown: '$devs', want whole disks with I/O"
"$S" iostat --root "$root" --json >"$tmp/out" 2>"$tmp/err" || fail "--json"
$PY - "$tmp/out" <<'EOF' || fail "since-boot figures"
import json, sys
lines = open(sys.argv[1]).read().split("\n")
r = json.loads(lines[0])
assert r["schema_version"] == 1 and r["since_boot"] is True, r
assert abs(r["interval_s"] - 1000) < 1e-9, r
d = {x["disk_device"]: x for x in r["disk"]}
v = d["vda"]
# /proc/diskstats' vda line over 1000 s, by sysstat's formulas
want = {"r/s": 18216005 / 1000, "rkB/s": 275884002 / 2 / 1000,
        "rrqm/s": 41012 / 1000, "rrqm": 41012 / (41012 + 18216005) * 100,
        "r_await": 6769945 / 18216005, "rareq-sz": 275884002 / 18216005 / 2,
        "w/s": 140297 / 1000, "wkB/s": 150996136 / 2 / 1000, "w_await": 381856 / 140297,
        "wareq-sz": 150996136 / 140297 / 2, "d/s": 18772 / 1000, "d_await": 2721 / 18772,
        "f/s": 5950 / 1000, "f_await": 306 / 5950,
        "aqu-sz": 7154830 / 1e6, "util": 321140 / 1e6 * 100}
for k, x in want.items():
    assert abs(v[k] - x) <= 1e-6 * max(1, abs(x)), (k, v[k], x)
s = d["sda"]  # an 11-field (pre-4.18) line
assert abs(s["aqu-sz"] - 3400 / 1e6) < 1e-9 and s["d/s"] == 0, s
EOF

# named devices, partitions too (sda1 is a 2.6-style 4-field line); operands too
"$S" iostat --root "$root" -d vda1 --device=sda1,nvme0n1p1 >"$tmp/out" 2>"$tmp/err" || fail "-d"
devs=$(awk 'NR > 1 && NF { print $1 }' "$tmp/out" | tr '\n' ' ')
[ "$devs" = "vda1 nvme0n1p1 sda1 " ] || fail "named devices shown: '$devs'"
"$S" iostat --root "$root" vda 0.1 1 >"$tmp/out" 2>"$tmp/err" || fail "device operand"
devs=$(awk 'NR > 1 && NF { print $1 }' "$tmp/out" | tr '\n' ' ')
[ "$devs" = "vda " ] || fail "operand devices shown: '$devs'"
"$S" iostat --root "$root" --all >"$tmp/out" 2>"$tmp/err" || fail "--all"
n=$(awk 'NR > 1 && NF' "$tmp/out" | wc -l)
[ "$n" = 9 ] || fail "--all shows $n devices, want all 9"

# -y INTERVAL COUNT: COUNT reports over INTERVAL (the fake counters do not move)
"$S" iostat --root "$root" --json -y 0.1 3 >"$tmp/out" 2>"$tmp/err" || fail "-y 0.1 3"
$PY - "$tmp/out" <<'EOF' || fail "interval reports"
import json, sys
reps = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
assert len(reps) == 3, len(reps)
for r in reps:
    assert r["since_boot"] is False and 0.05 < r["interval_s"] < 1, r
    for d in r["disk"]:
        assert all(v == 0 for k, v in d.items() if k != "disk_device"), d
EOF
# without -y: the since-boot report counts as the first of COUNT
"$S" iostat --root "$root" 0.1 2 >"$tmp/out" 2>"$tmp/err" || fail "0.1 2"
n=$(grep -c '^Device' "$tmp/out")
[ "$n" = 2 ] || fail "0.1 2 printed $n reports, want 2"

# --- 3. this machine ---------------------------------------------------------------
"$S" iostat -y 0.2 2 >"$tmp/out" 2>"$tmp/err" || fail "iostat -y 0.2 2 on this machine"
[ "$(grep -c '^Device' "$tmp/out")" = 2 ] || fail "want 2 reports"
"$S" iostat --json --all 0.1 2 >"$tmp/out" 2>"$tmp/err" || fail "--json on this machine"
$PY -c 'import json,sys; [json.loads(l) for l in open(sys.argv[1]) if l.strip()]' "$tmp/out" ||
	fail "--json lines do not parse"

# SIGINT ends an endless run with exit 0
"$S" iostat 0.2 >"$tmp/out" 2>"$tmp/err" &
pid=$!
sleep 0.5
kill -INT "$pid"
wait "$pid"
rc=$?
pid=
[ $rc = 0 ] || fail "SIGINT: exit $rc, want 0"
echo "ok"
