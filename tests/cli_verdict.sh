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

# a sweep: one row per value, and an SVG with one point each
out=$("$STOKER" bench $QUICK "$t/d" --sweep qd=1,4,16 --plot "$t/s.svg" -b 8) || fail "sweep exit $?"
[ "$(echo "$out" | grep -cE '^ +(1|4|16) +[0-9]+')" = 3 ] || fail "sweep rows: $out"
[ "$(grep -c '<circle' "$t/s.svg")" = 3 ] || fail "svg points"
"$STOKER" bench $QUICK "$t/d" --sweep qd=40000,4 2>/dev/null; [ $? = 2 ] || fail "bad sweep value not exit 2"
"$STOKER" bench $QUICK "$t/d" --sweep color=1 2>/dev/null; [ $? = 2 ] || fail "bad sweep knob not exit 2"
exit 0
