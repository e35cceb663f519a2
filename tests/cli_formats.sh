#!/bin/sh
# PNG and WebP beside JPEG: `stoker gen --format png|webp|mixed` writes real
# files of the format (signatures, decodable by PIL when present, the same
# bytes whatever the thread count); `stoker pack` carries them under
# WebDataset's .png / .webp keys, and image mode decodes the shards and the
# folder alike; `stoker bench --image` reports each format.
# Run by tests/cli.sh with $STOKER.
. "$(dirname "$0")/cli-common.sh"
[ -x "$STOKER" ] || { echo "no stoker binary at $STOKER"; exit 77; }

T=$tmp
trap 'exit 1' HUP INT TERM
cd "$T" || exit 1

"$STOKER" gen --help | grep -q -- "--format" || fail "gen --help does not list --format"
for f in png webp; do
	"$STOKER" gen "$T/$f" --images 12 --classes 2 --format $f --threads 2 >/dev/null \
		|| fail "gen --format $f exited $?"
	[ "$(find "$T/$f" -type f -name "*.$f" | wc -l)" -eq 12 ] || fail "$f: not 12 .$f files"
	"$STOKER" gen "$T/$f-1" --images 12 --classes 2 --format $f --threads 1 >/dev/null \
		|| fail "gen --format $f --threads 1 exited $?"
	diff -r "$T/$f" "$T/$f-1" >/dev/null || fail "$f: the bytes depend on the thread count"
done
for x in "$T"/png/c*/*.png; do
	[ "$(head -c 8 "$x" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] \
		|| fail "$x has no PNG signature"
done
for x in "$T"/webp/c*/*.webp; do
	[ "$(head -c 4 "$x")$(dd if="$x" bs=1 skip=8 count=4 2>/dev/null)" = RIFFWEBP ] \
		|| fail "$x is not RIFF/WEBP"
done
"$STOKER" gen "$T/mixed" --images 30 --classes 3 --format mixed --json >"$T/gen.json" \
	|| fail "gen --format mixed exited $?"
grep -q '"format": "mixed"' "$T/gen.json" || fail "gen --json: $(cat "$T/gen.json")"
for e in jpg png webp; do
	for c in c0000 c0001 c0002; do
		[ "$(ls "$T/mixed/$c" | grep -c "\.$e$")" -ge 3 ] || fail "mixed: $c has few .$e files"
	done
done
# PIL (torchvision's decoder) reads every file as what its signature says
if "$PY" -c "import PIL" 2>/dev/null; then
	"$PY" - "$T/mixed" <<'PYEOF' || fail "PIL cannot read the generated files"
import os, sys
from PIL import Image
want = {".jpg": "JPEG", ".png": "PNG", ".webp": "WEBP"}
for d, _, names in os.walk(sys.argv[1]):
    for n in names:
        im = Image.open(os.path.join(d, n))
        assert im.format == want[os.path.splitext(n)[1]], (n, im.format)
        im.load()
PYEOF
fi

# pack: WebDataset's keys carry each format; image mode reads shards and folder alike
"$STOKER" pack "$T/mixed" "$T/shards" >/dev/null || fail "pack exited $?"
for s in "$T"/shards/*.tar; do tar -tf "$s"; done >"$T/list"
for e in jpg png webp; do
	[ "$(grep -c "^[0-9]*\.$e$" "$T/list")" -eq 10 ] || fail "shards: not 10 .$e members"
done
for p in "$T/mixed" "$T/shards"; do
	"$STOKER" bench "$p" --image --size 64 --batch-size 6 --epochs 1 --runtime 0 --ramp 0 \
		--no-baseline --json >"$T/b.json" 2>"$T/err" || fail "bench --image $p: $(cat "$T/err")"
	"$PY" - "$T/b.json" <<'PYEOF' || fail "bench --image $p: $(cat "$T/b.json" | head -c 2000)"
import json, sys
d = json.load(open(sys.argv[1]))
def find(o):
    if isinstance(o, dict):
        if "formats" in o and isinstance(o["formats"], dict):
            return o
        for v in o.values():
            r = find(v)
            if r:
                return r
    if isinstance(o, list):
        for v in o:
            r = find(v)
            if r:
                return r
st = find(d)
f = st["formats"]
assert sorted(f) == ["jpeg", "png", "webp"], f
assert all(f[k]["decoded"] == 10 for k in f), f
assert all(f[k]["images_per_s_per_core"] > 0 for k in f), f
assert f["webp"]["fast_share"] > 0.5, f  # a 64 px crop of a ~500 px picture: cropped and scaled
PYEOF
done
"$STOKER" bench "$T/mixed" --image --size 64 --batch-size 6 --epochs 1 --runtime 0 --ramp 0 \
	--no-baseline >"$T/b.txt" 2>&1 || fail "bench --image: $(cat "$T/b.txt")"
for f in JPEG PNG WebP; do
	grep -q "^  .*$f .*% of samples, [0-9]* images/s per core" "$T/b.txt" \
		|| fail "bench --image does not report $f: $(cat "$T/b.txt")"
done
echo "gen, pack and bench --image over JPEG, PNG and WebP"
