#!/bin/sh
# Units everywhere (#37): every size option takes K/M/G (powers of 1024, and
# KiB/MiB/GiB) and KB/MB/GB (powers of 1000), every duration option ms, s, m,
# through the library's one reader of each (stk_parse_size,
# stk_parse_duration), whether the option is the library's (--slot-bytes) or
# a command's own (--runtime); a bare duration is seconds (--compute-ms: ms).
# A bad value is bad usage (exit 2) naming the flag and the forms it takes.
. "$(dirname "$0")/cli-common.sh"
export XDG_CACHE_HOME="$tmp/cache"
"$S" gen -n 16 -c 2 "$tmp/d" >"$tmp/out" 2>"$tmp/err" || fail "gen"

# bench: the library's size rows and the command's durations, in one run
"$S" bench --no-baseline --slot-bytes 64MiB --read-bytes 1KiB --runtime 0.1s --ramp 10ms \
	--compute-ms 0.5 --repeat 1 --json "$tmp/d" >"$tmp/out" 2>"$tmp/err" || fail "bench with units"
grep -q '"slot_bytes": "67108864"' "$tmp/out" || fail "--slot-bytes 64MiB is not 64 << 20"
grep -q '"read_bytes": "1024"' "$tmp/out" || fail "--read-bytes 1KiB is not 1024"
grep -q '"runtime_s": 0.1[0,]' "$tmp/out" || fail "--runtime 0.1s"
grep -q '"ramp_s": 0.01[0,]' "$tmp/out" || fail "--ramp 10ms"
grep -q '"compute_ms": 0.5[0,]' "$tmp/out" || fail "--compute-ms 0.5 (bare: ms)"
"$S" bench --no-baseline --runtime 0 --epochs 1 --repeat 1 --remote-timeout 1m \
	--max-decode-time 1.5s --json "$tmp/d" >"$tmp/out" 2>"$tmp/err" || fail "durations in minutes"
grep -q '"remote_timeout": "60s"' "$tmp/out" || fail "--remote-timeout 1m is not 60s"

# --sweep's values of a size option read as sizes (the chart's x as bytes)
"$S" bench --no-baseline --runtime 0.05s --ramp 0 --repeat 1 --sweep slot_bytes=1MiB,4MiB \
	--plot "$tmp/p.svg" --json "$tmp/d" >"$tmp/out" 2>"$tmp/err" ||
	fail "--sweep slot_bytes=1MiB,4MiB"
grep -q '"value": 4194304' "$tmp/out" || fail "--sweep slot_bytes=4MiB is not 4 << 20"

# iostat's INTERVAL operand is a duration too
timeout 20 "$S" iostat --json 200ms 2 >"$tmp/out" 2>"$tmp/err" || fail "iostat 200ms 2"
grep -q '"interval_s":0.2[0-9]*[,}]' "$tmp/out" || fail "iostat 200ms: no 0.2 s interval"

# disk: its own sizes and durations
mkdir "$tmp/dk"
"$S" disk --pattern seqread --size 1MiB --bs 64KiB --runtime 100ms --ramp 0s --no-drop --json \
	"$tmp/dk" >"$tmp/out" 2>"$tmp/err" || fail "disk with units"
grep -q '"runtime_s": 0.1[0,]' "$tmp/out" || fail "disk --runtime 100ms"

# refused, named, exit 2, with the forms that read
for bad in "bench --slot-bytes 64XiB" "bench --read-bytes -1k" "bench --runtime 2x" \
	"bench --ramp 5sec" "bench --remote-timeout 30q" "disk --size 1ZB" "disk --runtime 2h5" \
	"pack --shard-size 64Mo"; do
	set -- $bad
	cmd=$1 flag=$2
	"$S" $bad "$tmp/d" "$tmp/o" >"$tmp/out" 2>"$tmp/err"
	rc=$?
	[ $rc = 2 ] || fail "stoker $bad: exit $rc, not 2"
	grep -q -- "$flag.*is not a \(size\|duration\)" "$tmp/err" || fail "stoker $bad: not named"
done
grep -q "e.g. 4096, 64k, 1GiB" "$tmp/err" || fail "a bad size does not show the forms"
# --help says which unit is which
"$S" bench --help | tr '\n' ' ' >"$tmp/out" # wrapped at 100 columns
grep -q "KiB.*powers of 1024" "$tmp/out" && grep -q "KB.*powers of 1000" "$tmp/out" ||
	fail "bench --help does not say which of KiB and KB is which"
exit 0
