#!/bin/sh
# stoker bench --video --vs PEER,...: a name that is no video peer, or video
# options the peers cannot match, is a usage error; without the peers' venv
# the bench still runs and one line says what was skipped and how to make it.
. "$(dirname "$0")/cli-common.sh"
t=$tmp
QUICK="--runtime 0 --ramp 0 --repeat 1"
export STOKER_LIB=${STOKER_LIB:-$(dirname "$S")/libstoker.so.0}
PYTHONPATH="$top/python" "$PY" - "$t/d" <<'PYEOF' >"$t/mk" 2>&1 || skip "no video making here: $(tail -1 "$t/mk")"
import ctypes, os, sys
from stoker import _lib
b = ctypes.create_string_buffer(256)
if _lib.stk_video_codecs(b, len(b)) <= 0:
    sys.exit("no FFmpeg: " + b.value.decode())
os.makedirs(os.path.join(sys.argv[1], "a"))
for i in range(2):
    m = _lib.VideoMakeOpts(size=ctypes.sizeof(_lib.VideoMakeOpts), width=64, height=48,
                           frames=30, fps=25, gop=10, seed=i)
    err = ctypes.create_string_buffer(512)
    if _lib.stk_video_make(os.path.join(sys.argv[1], "a", "v%d.mp4" % i).encode(),
                           ctypes.byref(m), err, len(err)):
        sys.exit(err.value.decode())
PYEOF

"$S" bench $QUICK --video --frames 4 "$t/d" --vs pyav,torch >"$t/out" 2>"$t/err"
[ $? = 2 ] || fail "--video --vs torch: not a usage error"
grep -q "'torch' is not a video peer" "$t/err" || fail "no video peer not named: $(cat "$t/err")"
"$S" bench $QUICK --video --frames 4 --crop center "$t/d" --vs pyav >"$t/out" 2>"$t/err"
[ $? = 2 ] || fail "--crop center --vs: not a usage error"
grep -q "random clips" "$t/err" || fail "--crop center --vs: no reason: $(cat "$t/err")"

out=$(STOKER_PEERS_PYTHON= STOKER_PEERS="$t/none" "$S" bench $QUICK --video --frames 4 "$t/d" \
	--vs pyav,torchcodec 2>&1) || fail "--video --vs without a venv must still succeed: $out"
echo "$out" | grep -q "vs the peers: not run: skipped pyav,torchcodec: no peers environment at $t/none; make it with: sh bench/peers/setup.sh av torchcodec decord dali" ||
	fail "no venv: $out"
echo "$out" | grep -q "clips/s" || fail "stoker's own run missing: $out"
out=$(STOKER_PEERS_PYTHON= STOKER_PEERS="$t/none" "$S" bench $QUICK --video --frames 4 --json \
	"$t/d" --vs all 2>&1) || fail "--json --vs all without a venv: $out"
echo "$out" | grep -q '"vs_peers"' || fail "no vs_peers in the JSON: $out"
exit 0
