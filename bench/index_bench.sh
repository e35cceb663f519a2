#!/bin/sh
# Index build and cached-load time for a folder of N files (default 1,000,000
# in 1,000 class folders): `loader ready in` from stoker bench, which is
# dominated by the index.  Each figure is the median of ROUNDS runs (default
# 3) with its min-max.  usage: index_bench.sh [N] [DIR]   (ROUNDS=5 ...)
set -eu
n=${1:-1000000}
dir=${2:-/tmp/stoker-index-$n}
stoker=${STOKER:-$(dirname "$0")/../${BUILD:-build}/stoker}
if [ ! -d "$dir" ]; then
	echo "creating $n files under $dir ..." >&2
	/usr/bin/python3 - "$dir" "$n" <<'PY'
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
classes = 1000
for c in range(classes):
    d = os.path.join(root, "c%04d" % c)
    os.makedirs(d)
    for i in range(c, n, classes):
        fd = os.open(os.path.join(d, "%08d.jpg" % i), os.O_WRONLY | os.O_CREAT, 0o644)
        os.write(fd, b"x" * (1 + i % 97))
        os.close(fd)
PY
fi
rounds=${ROUNDS:-3}
one() { "$stoker" bench "$dir" --json --no-baseline --cache as-is --max-samples 1 --batch-size 32 \
	--runtime 0 --ramp 0 --repeat 1 |
	/usr/bin/python3 -c 'import json,sys; j=json.load(sys.stdin); print(j["create_s"], j["dataset_samples"])'; }
# ready PREP: ROUNDS runs, PREP before each; "median s (min-max), N samples"
ready() {
	out=""
	for i in $(seq "$rounds"); do
		eval "$1"
		out="$out
$(one)"
	done
	echo "$out" | /usr/bin/python3 -c '
import statistics, sys
v = [l.split() for l in sys.stdin.read().splitlines() if l.strip()]
t = [float(a) for a, _ in v]
print("%.3f s (%.3f-%.3f, %d runs), %s samples" % (statistics.median(t), min(t), max(t), len(t), v[0][1]))'
}
echo "index build (no cache):            $(ready 'rm -f "$dir/.stoker-index"')"
echo "cached index, warm page cache:     $(ready ':')"
if [ "$(id -u)" = 0 ]; then
	echo "cached index, cold page cache:     $(ready 'sync; echo 3 > /proc/sys/vm/drop_caches')"
fi
