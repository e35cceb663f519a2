#!/bin/sh
# `stoker gen`: layout, valid JPEGs, sizes, determinism across thread counts,
# refusal of a non-empty DIR, usage errors.  Run by tests/cli.sh with $STOKER.
. "$(dirname "$0")/cli-common.sh"
[ -x "$STOKER" ] || { echo "no stoker binary at $STOKER"; exit 77; }

T=$tmp


# Work inside T, so that a stray relative path cannot land in the tree.
cd "$T" || exit 1
"$STOKER" gen --help >help || fail "--help exited $?"
grep -q -- "--images" help || fail "--help does not list --images"
"$STOKER" gen -h x >/dev/null || fail "-h exited $?"
[ "$(ls -A)" = help ] || fail "--help wrote files: $(ls -A)"

# Options may follow DIR, as the usage line shows.
"$STOKER" gen "$T/a" --images 40 --classes 4 --seed 7 --threads 1 >"$T/out" \
	|| fail "gen exited $?"
grep -q "40 images" "$T/out" || fail "summary: $(cat "$T/out")"

[ "$(ls "$T/a" | tr '\n' ' ')" = "c0000 c0001 c0002 c0003 " ] \
	|| fail "class folders: $(ls -A "$T/a")"
n=$(find "$T/a" -type f -name '*.jpg' | wc -l)
[ "$n" -eq 40 ] || fail "$n .jpg files, expected 40"
other=$(find "$T/a" -type f ! -name '*.jpg' | head -n 3)
[ -z "$other" ] || fail "unexpected files: $other"
[ "$(ls "$T/a/c0001" | wc -l)" -eq 10 ] || fail "c0001 does not hold 10 images"
[ -f "$T/a/c0001/00000005.jpg" ] || fail "no c0001/00000005.jpg (round-robin names)"

total=0
for f in "$T"/a/c*/*.jpg; do
	soi=$(head -c 3 "$f" | od -An -tx1 | tr -d ' \n')
	eoi=$(tail -c 2 "$f" | od -An -tx1 | tr -d ' \n')
	[ "$soi" = ffd8ff ] || fail "$f does not start with a JPEG SOI ($soi)"
	[ "$eoi" = ffd9 ] || fail "$f does not end with a JPEG EOI ($eoi)"
	total=$((total + $(wc -c <"$f")))
done
mean=$((total / 40))
# ~100 KB is the aim; 40 images vary, so accept a wide band.
[ "$mean" -gt 50000 ] && [ "$mean" -lt 200000 ] || fail "mean size $mean bytes"

# Every file decodes whole (PIL), at a size of the documented range, as the
# 4:2:0 YCbCr JPEG the raw planes were written as.
if /usr/bin/python3 -c 'import PIL' 2>/dev/null; then
	/usr/bin/python3 - "$T/a" <<'EOF' || fail "a generated JPEG does not decode as documented"
import glob, sys
from PIL import Image
files = sorted(glob.glob(sys.argv[1] + "/c*/*.jpg"))
assert len(files) == 40, len(files)
odd = 0
for f in files:
    im = Image.open(f)
    assert im.format == "JPEG" and im.mode == "RGB", (f, im.format, im.mode)
    w, h = im.size
    assert 300 <= w <= 640 and 240 <= h <= 480, (f, im.size)
    assert [c[1:3] for c in im.layer] == [(2, 2), (1, 1), (1, 1)], (f, im.layer)
    odd += w % 16 != 0 or h % 16 != 0
    px = im.convert("L").getextrema()
    assert px[1] - px[0] > 100, (f, px)  # not flat
    im.load()
assert odd, "no size that is not a multiple of 16: the edge padding is untested"
EOF
else
	echo "note: no PIL; decode check skipped"
fi

# Same seed, other thread count: the same bytes.
"$STOKER" gen --images 40 --classes 4 --seed 7 --threads 2 "$T/b" >/dev/null \
	|| fail "gen --threads 2 exited $?"
diff -r "$T/a" "$T/b" >/dev/null || fail "--threads 1 and 2 differ for one seed"
"$STOKER" gen --images 40 --classes 4 --seed 7 --threads 5 "$T/b5" >/dev/null \
	|| fail "gen --threads 5 exited $?"
diff -r "$T/a" "$T/b5" >/dev/null || fail "--threads 1 and 5 differ for one seed"

# Another seed: other bytes.
"$STOKER" gen --images 40 --classes 4 --seed 8 "$T/c" >/dev/null || fail "gen --seed 8"
if cmp -s "$T/a/c0000/00000000.jpg" "$T/c/c0000/00000000.jpg"; then
	fail "--seed 7 and --seed 8 give the same image"
fi

# A non-empty DIR is refused (exit 2), and named; so is --force, which wrote
# into it (a smaller dataset over a larger one left the larger one's extra
# files); --replace replaces it whole.
"$STOKER" gen --images 4 --classes 2 "$T/a" >/dev/null 2>"$T/err"
rc=$?
[ $rc -eq 2 ] || fail "non-empty DIR: exit $rc, expected 2"
grep -q "$T/a" "$T/err" || fail "the refusal does not name DIR: $(cat "$T/err")"
"$STOKER" gen --images 4 --classes 2 --seed 7 --force "$T/a" >/dev/null 2>&1
rc=$?
[ $rc -eq 2 ] || fail "--force: exit $rc, expected 2"
"$STOKER" gen --images 4 --classes 2 --seed 7 --replace "$T/a" >/dev/null \
	|| fail "--replace exited $?"
[ "$(find "$T/a" -type f | wc -l)" -eq 4 ] || fail "--replace kept old files: $(find "$T/a")"
# ... but not a folder that holds the current one or $HOME (".", "~" by a slip)
(cd "$T/a/c0000" && "$STOKER" gen --images 2 --classes 1 --replace .. >/dev/null 2>"$T/err")
rc=$?
[ $rc -eq 2 ] && grep -q "current folder" "$T/err" || fail "--replace of the cwd: exit $rc"
HOME=$T/a/c0001 "$STOKER" gen --images 2 --classes 1 --replace "$T/a" >/dev/null 2>"$T/err"
rc=$?
[ $rc -eq 2 ] && grep -q "home folder" "$T/err" || fail "--replace of \$HOME: exit $rc"
[ "$(find "$T/a" -type f | wc -l)" -eq 4 ] || fail "a refused --replace removed files"

# --json prints the summary.
"$STOKER" gen --images 3 --classes 1 --json "$T/d" >"$T/json" || fail "--json exited $?"
for k in images classes bytes seconds mean_bytes images_per_s cpu_s images_per_cpu_s; do
	grep -q "\"$k\"" "$T/json" || fail "--json lacks $k: $(cat "$T/json")"
done

# Bad usage: exit 2.
for args in "--images -1" "--images 0" "--quality 0" "--quality 101" "--classes 0" \
	"--images 2 --classes 3" "--threads x" "--bogus" "--seed -1" "-s -5"; do
	# shellcheck disable=SC2086
	"$STOKER" gen $args "$T/e" >/dev/null 2>&1
	rc=$?
	[ $rc -eq 2 ] || fail "gen $args: exit $rc, expected 2"
done
"$STOKER" gen >/dev/null 2>&1
[ $? -eq 2 ] || fail "gen without DIR: expected exit 2"
[ ! -e "$T/e" ] || fail "a usage error created DIR"

# A DIR that cannot be made is an error that names it (root too).
"$STOKER" gen --images 2 --classes 1 "$T/json/x" >/dev/null 2>"$T/err"
rc=$?
[ $rc -eq 1 ] || fail "DIR under a file: exit $rc, expected 1"
grep -q "$T/json" "$T/err" || fail "the error does not name DIR: $(cat "$T/err")"
if [ "$(id -u)" != 0 ]; then
	mkdir "$T/ro" && chmod 555 "$T/ro"
	"$STOKER" gen --images 2 --classes 1 "$T/ro/x" >/dev/null 2>"$T/err"
	rc=$?
	chmod 755 "$T/ro"
	[ $rc -eq 1 ] || fail "unwritable DIR: exit $rc, expected 1"
	grep -q "$T/ro/x" "$T/err" || fail "the error does not name DIR: $(cat "$T/err")"
fi
# --video: H.264 MP4s in class folders (FFmpeg's libraries, when present),
# each of the length and size asked; the same folder rules; bad lists refused.
if "$STOKER" doctor 2>/dev/null | grep -Eq '^  ok +video '; then
	"$STOKER" gen --video --count 3 --classes 2 --min-seconds 0.4 --max-seconds 0.8 \
		--sizes 64x48,96x64 --fps 25 --json "$T/v" >"$T/vjson" 2>"$T/err" ||
		fail "gen --video: $(cat "$T/err")"
	n=$(find "$T/v" -name '*.mp4' | wc -l)
	[ "$n" = 3 ] || fail "gen --video: $n videos, want 3"
	[ -s "$T/v/c0000/00000000.mp4" ] && [ -s "$T/v/c0001/00000001.mp4" ] ||
		fail "gen --video: not in class folders: $(find "$T/v")"
	find "$T/v" -name '*.tmp*' | grep -q . && fail "gen --video left a .tmp file"
	grep -q '"videos": 3' "$T/vjson" || fail "gen --video --json: $(cat "$T/vjson")"
	frames=$(sed -n 's/.*"frames": \([0-9]*\).*/\1/p' "$T/vjson")
	[ "$frames" -ge 30 ] && [ "$frames" -le 60 ] || fail "gen --video: $frames frames for 3 x 0.4-0.8 s"
	"$STOKER" gen --video --count 3 "$T/v" >/dev/null 2>&1
	[ $? -eq 2 ] || fail "gen --video into a non-empty DIR: expected exit 2"
	for args in "--sizes 64x" "--sizes 63x48" "--fps 0" "--count 1 --classes 2" \
		"--min-seconds 3 --max-seconds 2"; do
		# shellcheck disable=SC2086
		"$STOKER" gen --video $args "$T/ve" >/dev/null 2>&1
		rc=$?
		[ $rc -eq 2 ] || fail "gen --video $args: exit $rc, expected 2"
	done
else
	echo "gen --video: skipped (no FFmpeg libraries: stoker doctor says why)"
fi
echo "ok"
