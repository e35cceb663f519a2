#!/bin/sh
# Limits the loader must fit into rather than fail on: a sample far above
# any slot (a 9 GiB tar member), a soft and hard
# `ulimit -n` below the queue depth (io_uring's file table is sized to it),
# and a queue depth above what one io_uring ring can hold (capped, and said).
. "$(dirname "$0")/cli-common.sh"
set -uf
t=$tmp
cd "$t" || exit 1
QUICK="--runtime 0 --ramp 0 --repeat 1 --no-baseline --extensions *"

# a tar member whose header declares 9 GiB (a sparse shard: nothing written):
# an error of that sample, named (shard and member) and counted, never a
# pool sized for it.  prefetch 128: such a pool is far above half of the
# memory of any machine the tests run on.
mkdir big
/usr/bin/python3 - big/shard-000.tar <<'PY' || fail "cannot write the shard"
import sys, tarfile
with open(sys.argv[1], "wb") as f:
    def add(name, data=None, size=None):
        ti = tarfile.TarInfo(name)
        ti.size = len(data) if data is not None else size
        f.write(ti.tobuf(format=tarfile.GNU_FORMAT))  # base-256 size field
        if data is not None:
            f.write(data)
        else:
            f.seek(ti.size, 1)
        f.write(b"\0" * (-ti.size % 512))
    for i in range(8):
        add("%03d.bin" % i, b"sample %d\n" % i)
        add("%03d.cls" % i, b"%d" % (i % 2))
        if i == 3:
            add("003x.bin", size=9 << 30)
            add("003x.cls", b"1")
    f.write(b"\0" * 1024)
PY
out=$("$STOKER" bench $QUICK --prefetch 128 --json big 2>err) || fail "9 GiB member, skip: $(cat err)"
echo "$out" | /usr/bin/python3 -c 'import json,sys; s=json.load(sys.stdin)["stoker"]; assert s["samples"] == 8 and s["errors"] == 1, s' ||
	fail "9 GiB member under skip: not 8 samples and 1 error"
grep -q "1 sample larger than a batch slot can be here.*shard-000.tar: member 003x.bin at offset [0-9]* (9663676416 bytes)" err ||
	fail "9 GiB member: no notice naming it: $(cat err)"
"$STOKER" bench $QUICK --prefetch 128 --on-error fail big >/dev/null 2>err; rc=$?
[ $rc = 1 ] || fail "9 GiB member under fail: exit $rc"
grep -q "shard-000.tar: member 003x.bin at offset [0-9]*: 9663676416 bytes, larger than a batch slot" err ||
	fail "9 GiB member under fail: not named: $(cat err)"

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
