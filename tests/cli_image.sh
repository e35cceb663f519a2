#!/bin/sh
# The image pipeline from the CLI: stoker bench --image decodes every sample
# and names a corrupt file.  (The comparison with torchvision/PIL, which can
# be skipped, is cli_image_pil.sh: a skip is never counted as a pass here.)
. "$(dirname "$0")/cli-common.sh"
t=$tmp
# Exact counts: one run of exactly the epochs asked (no minimum time, no ramp,
# no repeats); tests/cli_figures.sh checks those.
QUICK="--runtime 0 --ramp 0 --repeat 1"
"$STOKER" gen "$t/d" --images 24 --classes 2 --seed 3 >/dev/null || fail "gen"
out=$("$STOKER" bench $QUICK "$t/d" --image --size 96 --batch-size 5 --epochs 1 --json) || fail "bench --image exit $?"
echo "$out" | /usr/bin/python3 -c '
import json, sys
j = json.load(sys.stdin)
s = j["stoker"]
assert s["samples"] == 24 and s["errors"] == 0, s
assert s["decode_images_per_s_per_core"] > 0, s
assert j["image"]["width"] == 96, j
' || fail "bench --image json: $out"
printf 'not a jpeg' > "$t/d/c0001/zzz.jpg"
err=$("$STOKER" bench $QUICK "$t/d" --image --no-baseline --on-error fail 2>&1); rc=$?
[ $rc = 1 ] || fail "corrupt file under --on-error fail: exit $rc"
echo "$err" | grep -q "zzz.jpg: not a JPEG" || fail "corrupt file not named: $err"
exit 0
