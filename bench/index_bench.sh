#!/bin/sh
# Index build and cached-load time for a folder of N files (default 1,000,000
# in 1,000 class folders): `loader ready in` from stoker bench, which is
# dominated by the index.  usage: index_bench.sh [N] [DIR]
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
rm -f "$dir/.stoker-index"
ready() { "$stoker" bench "$dir" --json --no-baseline --cache as-is --max-samples 1 --batch-size 32 |
	/usr/bin/python3 -c 'import json,sys; j=json.load(sys.stdin); print("%.3f s, %d samples" % (j["create_s"], j["dataset_samples"]))'; }
echo "index build (no cache):            $(ready)"
echo "cached index, warm page cache:     $(ready)"
if [ "$(id -u)" = 0 ]; then
	sync; echo 3 > /proc/sys/vm/drop_caches
	echo "cached index, cold page cache:     $(ready)"
fi
