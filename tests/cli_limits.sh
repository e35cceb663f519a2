#!/bin/sh
# Limits the loader must fit into rather than fail on: a soft and hard
# `ulimit -n` below the queue depth (io_uring's file table is sized to it),
# and a queue depth above what one io_uring ring can hold (capped, and said).
set -uf
t=$(mktemp -d) || exit 1
trap 'rm -rf "$t"' EXIT
cd "$t" || exit 1
fail() { echo "FAIL: $*"; exit 1; }
QUICK="--runtime 0 --ramp 0 --repeat 1 --no-baseline --extensions *"

mkdir -p f300/a
i=0
while [ $i -lt 300 ]; do
	printf 'sample %d\n' $i > "f300/a/$i.bin"
	i=$((i + 1))
done
out=$("$STOKER" bench $QUICK f300 2>&1) || fail "bench over 300 files: $out"
if ! echo "$out" | grep -q "engine io_uring"; then
	echo "io_uring is unavailable here: the limits below are io_uring's"
	exit 77
fi

# ulimit -n 256 (soft and hard) in a child shell: auto depth goes to 512
# (batch 256 x prefetch 4 can hold more), each ring's file table to 256
out=$(sh -c 'set -f; ulimit -n 256 && exec "$0" bench $1 f300' "$STOKER" "$QUICK" 2>&1) ||
	fail "ulimit -n 256: $out"
echo "$out" | grep -q "engine io_uring" || fail "ulimit -n 256: not io_uring: $out"
echo "$out" | grep -q "samples/s" || fail "ulimit -n 256: no figures: $out"
echo "$out" | grep -q "queue depth up to 256 a ring.*ulimit -n is 256" ||
	fail "ulimit -n 256: the cap is not said in chosen: $out"
# every sample still read: the JSON's count
out=$(sh -c 'set -f; ulimit -n 256 && exec "$0" bench $1 f300 --json' "$STOKER" "$QUICK" 2>/dev/null) ||
	fail "ulimit -n 256 --json"
echo "$out" | /usr/bin/python3 -c 'import json,sys; s=json.load(sys.stdin)["stoker"]; assert s["samples"] == 300 and s["errors"] == 0, s' ||
	fail "ulimit -n 256: samples"
# an asked depth above the limit: cut to what the rings hold, and said
out=$(sh -c 'set -f; ulimit -n 256 && exec "$0" bench $1 f300 -q 1000 -t 2' "$STOKER" "$QUICK" 2>&1) ||
	fail "ulimit -n 256 -q 1000: $out"
echo "$out" | grep -q "queue depth 512 (asked 1000" || fail "-q 1000 under ulimit: $out"

# the documented range's top: 32768 reads in flight, more than a ring's
# 10920 (3 requests a read, 32768 entries a ring): capped, said, and it runs
out=$("$STOKER" bench $QUICK f300 -q 32768 -t 1 2>&1) || fail "-q 32768 -t 1: $out"
echo "$out" | grep -q "queue depth 10920 (asked 32768" || fail "-q 32768 -t 1: $out"
echo "$out" | grep -q "queue_depth 32768: an io_uring ring holds 10920 reads at most" ||
	fail "-q 32768: no notice: $out"
out=$("$STOKER" bench $QUICK f300 -q 32768 -t 3 2>&1) || fail "-q 32768 -t 3: $out"
echo "$out" | grep -q "queue depth 32760 (asked 32768" || fail "-q 32768 -t 3: $out"
exit 0
