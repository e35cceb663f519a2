#!/bin/sh
# stoker bench --video: every clip of the epochs read and decoded (clips/s,
# frames/s in the report and the JSON), nothing of image mode claimed, a
# corrupt video named, the flags that cannot go together refused.  The
# videos are made by `stoker gen --video` (libstoker's stk_video_make).
. "$(dirname "$0")/cli-common.sh"
t=$tmp
QUICK="--runtime 0 --ramp 0 --repeat 1"
# 2 classes x 3 videos, 40 frames of 96x64 at 25 fps
"$S" gen "$t/d" --video --count 6 --classes 2 --min-seconds 1.6 --max-seconds 1.6 \
	--sizes 96x64 --fps 25 --gop 10 >"$t/out" 2>"$t/err" || {
	grep -q "needs FFmpeg's libraries" "$t/err" && skip "$(head -n 1 "$t/err")"
	fail "gen --video exit $?"
}
[ "$(find "$t/d" -name '*.mp4' | wc -l)" = 6 ] || fail "gen --video: not 6 videos"
cls=$(find "$t/d" -name '*.mp4' | sed 's|/[^/]*$||' | sort -u | wc -l)
[ "$cls" = 2 ] || fail "gen --video: $cls class folders, not 2"

"$S" bench $QUICK "$t/d" --video --frames 4 --stride 2 --size 48 --clips-per-video 2 \
	--batch-size 4 --epochs 2 --json >"$t/out" 2>"$t/err" || fail "bench --video exit $?"
"$PY" - "$t/out" <<'EOF' || fail "bench --video json"
import json, sys
j = json.load(open(sys.argv[1]))
s, v = j["stoker"], j["video"]
assert j["dataset_samples"] == 6, j["dataset_samples"]          # videos
assert s["samples"] == 2 * 6 * 2 and s["errors"] == 0, s        # 2 epochs of 12 clips
assert v["frames"] == "4" and v["stride"] == "2" and v["size"] == "48", v
assert v["clips_per_video"] == "2" and v["clips_per_epoch"] == 12, v
assert v["clip_bytes"] == 4 * 48 * 48 * 3, v
assert v["clips_per_s"]["median"] > 0, v
assert abs(v["frames_per_s"]["median"] - 4 * v["clips_per_s"]["median"]) < 1e-6, v
assert abs(v["clips_per_s"]["median"] - j["samples_per_s"]["median"]) < 1e-6, j
assert v["decode_threads"] >= 1 and v["decode_clips_per_s_per_core"] > 0, v
assert "image" not in j and "baseline" not in j and "ratio" not in j, sorted(j)
assert j["verdict"]["kind"], j["verdict"]
assert j["memory"]["decode_bytes"] > 0, j["memory"]
EOF

# the human report: in clips and frames, nothing of image mode's
"$S" bench $QUICK "$t/d" --video --frames 4 --size 48 -b 4 --epochs 1 >"$t/out" 2>"$t/err" ||
	fail "bench --video (text) exit $?"
for want in "6 videos (6 clips an epoch)" "clips/s" "frames/s" "(4 a clip)" "clips/s per core" \
	"verdict:"; do
	grep -qF "$want" "$t/out" || fail "report lacks '$want'"
done
for not in "images/s" "restart intervals" "plain read loop" "formats"; do
	grep -qF "$not" "$t/out" && fail "report says '$not' in video mode"
done

# a corrupt video: named under --on-error fail, counted under skip
bad=$(find "$t/d" -mindepth 1 -maxdepth 1 -type d | head -n 1)
printf 'not an mp4 at all' >"$bad/zzz.mp4"
"$S" bench $QUICK "$t/d" --video --frames 4 --size 48 -b 4 --on-error fail >"$t/out" 2>"$t/err"
rc=$?
[ $rc = 1 ] || fail "corrupt video under --on-error fail: exit $rc"
grep -q "zzz.mp4" "$t/out" "$t/err" || fail "corrupt video not named"
"$S" bench $QUICK "$t/d" --video --frames 4 --size 48 -b 4 --epochs 1 --on-error skip --json \
	>"$t/out" 2>"$t/err" || fail "--on-error skip exit $?"
"$PY" -c '
import json, sys
j = json.load(open(sys.argv[1]))
assert j["stoker"]["errors"] == 1 and j["stoker"]["samples"] == 6, j["stoker"]
assert any("zzz.mp4" in b for b in j["stoker"]["bad_samples"]), j["stoker"]["bad_samples"]
' "$t/out" || fail "skip: the bad video counted and named"
rm "$bad/zzz.mp4"

# usage: what cannot go together, said; the flags in --help
"$S" bench "$t/d" --video --image >"$t/out" 2>"$t/err"
[ $? = 2 ] || fail "--video --image: not a usage error"
grep -q "image and --video" "$t/err" || fail "--video --image: no reason"
"$S" bench "$t/d" --video --vs torch >"$t/out" 2>"$t/err"
[ $? = 2 ] || fail "--video --vs: not a usage error"
"$S" bench "$t/d" --video --frames 0 >"$t/out" 2>"$t/err"
[ $? = 2 ] || fail "--frames 0: not a usage error"
"$S" bench --help >"$t/out" 2>&1
for f in --video --frames --stride --fps --clips-per-video --short-clip; do
	grep -q -- "$f" "$t/out" || fail "bench --help lacks $f"
done
exit 0
