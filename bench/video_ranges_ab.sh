#!/bin/sh
# Issue 38, ranged video reads (docs/BENCHMARKS.md "Video clips read as byte
# ranges"): 5 alternating rounds of stoker after (this tree) and before (the
# tree at BASE, a build of the commit before them), each beside torchcodec in
# the same invocation; results in OUT/res-{after,before}-N.json.
#   git archive 87a5238 | (mkdir -p /tmp/vr/base && tar -x -C /tmp/vr/base)
#   make -C /tmp/vr/base build/libstoker.so
#   flock -x /work/.measure.lock sh bench/video_ranges_ab.sh
D=$HOME/.cache/stoker/video-gen200
PY=$HOME/.cache/stoker/peers/bin/python
W=${W:-$(cd "$(dirname "$0")/.." && pwd)}
BASE=${BASE:-/tmp/vr/base}
OUT=${OUT:-/tmp/vr}
mkdir -p "$OUT"
for r in 1 2 3 4 5; do
  for side in after before; do
    if [ $side = after ]; then T=$W; else T=$BASE; fi; LIB=$T/build/libstoker.so.0
    echo "round $r $side load $(cut -d' ' -f1-3 /proc/loadavg)"
    STOKER_LIB=$LIB PYTHONPATH=$T/python $PY $T/bench/video_bench.py $D --peers torchcodec \
      --rounds 1 --seconds 10 --ramp 2 --seed $r --out $OUT/res-$side-$r.json > $OUT/out-$side-$r.txt 2>&1
    echo "  rc $?"
  done
done
echo "end load $(cut -d' ' -f1-3 /proc/loadavg)"
