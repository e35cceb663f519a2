#!/bin/sh
# stoker bench's verdict on constructed loads, and --sweep's table and plot.
. "$(dirname "$0")/cli-common.sh"
t=$tmp
# Exact counts: one run of exactly the epochs asked (no minimum time, no ramp,
# no repeats); tests/cli_figures.sh checks those.
QUICK="--runtime 0 --ramp 0 --repeat 1"
"$STOKER" gen "$t/d" --images 120 --classes 2 --seed 2 >/dev/null || fail "gen"
kind() { "$STOKER" bench $QUICK "$t/d" --no-baseline --json "$@" |
	/usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["verdict"]["kind"])'; }

# storage that answers slowly (the null engine's injected latency), queue full
k=$(kind -e null --null-latency 20ms -q 8 -b 8) && [ "$k" = storage-bound ] || fail "slow storage: $k"
# a consumer that holds each batch long: batches are always ready
k=$(kind --compute-ms 40 -b 8 -E 1) && [ "$k" = consumer-bound ] || fail "slow consumer: $k"
# one decode thread on full-size crops
k=$(kind --image --decode-threads 1 --size 256 -b 8) && [ "$k" = decode-bound ] || fail "decode: $k"
# queue depth 1, one slot
k=$(kind -e null --null-latency 2ms -q 1 -p 1 -b 8) && [ "$k" = configuration ] || fail "config: $k"

# the human form ends with the verdict and what to try
out=$("$STOKER" bench $QUICK "$t/d" --no-baseline -e null --null-latency 5ms -q 4 -b 8) || fail "human exit"
echo "$out" | grep -q "^  verdict: " || fail "no verdict line: $out"
echo "$out" | grep -q "^  try: " || fail "no try line: $out"

# a stall near 100 % with no compute: said once what that means, and not
# when each batch is held (--compute-ms)
echo "$out" | grep -q "stall 9[0-9]\.[0-9] %\|stall 100\.0 %" || fail "null engine at -q 4 not stalled: $out"
[ "$(echo "$out" | grep -c "what a loop without compute looks like")" = 1 ] ||
	fail "the no-compute stall not said once: $out"
out=$("$STOKER" bench $QUICK "$t/d" --no-baseline -b 8 --compute-ms 40) || fail "compute exit"
echo "$out" | grep -q "without compute" && fail "no-compute note under --compute-ms: $out"

# "agree" means the paired ratios stay on one side of 1.0: a consumer that
# sets the pace on both sides puts them around 1.0 (tried until they cross)
crossed=
for try in 1 2 3 4 5 6; do
	"$STOKER" bench --runtime 0 --ramp 0 --repeat 3 "$t/d" -b 8 -E 1 --compute-ms 15 --json \
		>"$t/a.json" || fail "agree exit $?"
	r=$(/usr/bin/python3 - "$t/a.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
r, note = j["ratio_spread"], j["verdict_note"]
if r["min"] < 1 < r["max"]:
    assert "agree (" not in note and "disagree on which side is faster" in note, note
    print("crossed")
elif not (r["min"] < 1 < r["max"]) and "disagree" in note:
    raise SystemExit("disagree said without crossing: %s %s" % (r, note))
PY
) || fail "agreement note: $r"
	[ "$r" = crossed ] && crossed=1 && break
done
[ -n "$crossed" ] || echo "(the ratios never crossed 1.0 in 6 tries: the disagreement note not checked)"

# a sweep: one row per value, and an SVG with one point each
out=$("$STOKER" bench $QUICK "$t/d" --sweep qd=1,4,16 --plot "$t/s.svg" -b 8) || fail "sweep exit $?"
[ "$(echo "$out" | grep -cE '^ +(1|4|16) +[0-9]+')" = 3 ] || fail "sweep rows: $out"
[ "$(grep -c '<circle' "$t/s.svg")" = 3 ] || fail "svg points"
"$STOKER" bench $QUICK "$t/d" --sweep qd=40000,4 2>/dev/null; [ $? = 2 ] || fail "bad sweep value not exit 2"
"$STOKER" bench $QUICK "$t/d" --sweep color=1 2>/dev/null; [ $? = 2 ] || fail "bad sweep knob not exit 2"
exit 0
