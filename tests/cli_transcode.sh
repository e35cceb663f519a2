#!/bin/sh
# `stoker transcode` and `stoker pack --transcode`: the same layout, JPEGs
# rewritten with restart markers to the same pixels (PIL decodes both), other
# and corrupt files copied byte for byte and named with the reason, usage
# and path errors.  Run by tests/cli.sh with $STOKER.
. "$(dirname "$0")/cli-common.sh"
[ -x "$STOKER" ] || { echo "no stoker binary at $STOKER"; exit 77; }
"$STOKER" transcode --help >/dev/null 2>&1 || { echo "transcode not registered"; exit 77; }
[ -x "$PY" ] && "$PY" -c 'import PIL, numpy' 2>/dev/null || { echo "no PIL/numpy for $PY"; exit 77; }

T=$tmp

"$STOKER" gen --images 12 --classes 2 --seed 3 "$T/data" >/dev/null || fail "gen exited $?"
mkdir -p "$T/data/c0001/deeper" || exit 1
cp "$T/data/c0000/00000000.jpg" "$T/data/c0001/deeper/copy.jpg"
head -c 3000 "$T/data/c0000/00000002.jpg" >"$T/data/c0000/broken.jpg"
printf 'hello\n' >"$T/data/c0001/notes.txt"
printf '\211PNG\r\n\032\n....' >"$T/data/c0001/image.png"
mkdir -p "$T/data/.git" && printf 'x\n' >"$T/data/.git/HEAD" && printf 'y' >"$T/data/.stoker-index"

"$STOKER" transcode "$T/data" "$T/out" >"$T/log" || fail "transcode exited $?: $(cat "$T/log")"
grep -q "transcoded 13 of 16 files" "$T/log" || fail "summary: $(cat "$T/log")"
grep -q "kept as they were (3)" "$T/log" || fail "kept: $(cat "$T/log")"
grep -q "c0000/broken.jpg: corrupt JPEG" "$T/log" || fail "broken.jpg not named: $(cat "$T/log")"
grep -q "c0001/notes.txt: not a JPEG" "$T/log" || fail "notes.txt not named: $(cat "$T/log")"
[ ! -e "$T/out/.git" ] && [ ! -e "$T/out/.stoker-index" ] || fail "hidden entries copied"
(cd "$T/data" && find . -type f ! -path './.*' | sort) >"$T/a"
(cd "$T/out" && find . -type f | sort) >"$T/b"
cmp -s "$T/a" "$T/b" || fail "layout differs: $(diff "$T/a" "$T/b")"
for f in c0000/broken.jpg c0001/notes.txt c0001/image.png; do
	cmp -s "$T/data/$f" "$T/out/$f" || fail "$f was not copied as it was"
done

# Every rewritten JPEG: restart markers (DRI), baseline, the same pixels in PIL.
cat >"$T/check.py" <<'PYEOF'
import os, sys
import numpy as np
from PIL import Image
a, b, n = sys.argv[1], sys.argv[2], 0
for d, _, files in os.walk(a):
    for f in files:
        if not f.endswith(".jpg") or f == "broken.jpg":
            continue
        p = os.path.relpath(os.path.join(d, f), a)
        x, y = open(os.path.join(a, p), "rb").read(), open(os.path.join(b, p), "rb").read()
        assert x != y and b"\xff\xdd" in y[:2000], p + ": not rewritten with restart markers"
        assert np.array_equal(np.asarray(Image.open(os.path.join(a, p))),
                              np.asarray(Image.open(os.path.join(b, p)))), p + ": pixels differ"
        n += 1
assert n == int(sys.argv[3]), n
PYEOF
"$PY" "$T/check.py" "$T/data" "$T/out" 13 || fail "PIL check"

"$STOKER" transcode --json -T 1 "$T/data" "$T/out2" >"$T/json" || fail "--json exited $?"
for key in files transcoded kept bytes_in bytes_out threads files_per_s_per_thread files_per_cpu_s; do
	grep -q "\"$key\"" "$T/json" || fail "--json lacks $key: $(cat "$T/json")"
done
cmp -s "$T/out/c0000/00000000.jpg" "$T/out2/c0000/00000000.jpg" || fail "two runs differ"

# Refusals (exit 2, before anything is made): a non-empty DST without
# --replace (which replaces it whole), --force (it wrote into DST, old files
# beside new), DST inside SRC (an empty class folder was left before), SRC
# inside DST; then a missing SRC (exit 1), wrong operands.
"$STOKER" transcode "$T/data" "$T/out" >/dev/null 2>"$T/err"; rc=$?
[ $rc = 2 ] && grep -q "not empty" "$T/err" || fail "non-empty DST: rc $rc $(cat "$T/err")"
"$STOKER" transcode --force "$T/data" "$T/out" >/dev/null 2>"$T/err"; rc=$?
[ $rc = 2 ] && grep -q -- "--replace" "$T/err" || fail "--force: rc $rc $(cat "$T/err")"
printf 'old\n' >"$T/out/old.txt"
"$STOKER" transcode --replace "$T/data" "$T/out" >/dev/null || fail "--replace exited $?"
[ ! -e "$T/out/old.txt" ] || fail "--replace kept a file of the old DST"
"$PY" "$T/check.py" "$T/data" "$T/out" 13 || fail "PIL check after --replace"
for dst in "$T/data/sub" "$T/data/c0000/sub/.." "$T/data"; do
	"$STOKER" transcode --replace "$T/data" "$dst" >/dev/null 2>"$T/err"; rc=$?
	[ $rc = 2 ] && grep -q "SRC $T/data" "$T/err" || fail "DST $dst: rc $rc $(cat "$T/err")"
done
[ ! -e "$T/data/sub" ] && [ ! -e "$T/data/c0000/sub" ] || fail "a refused DST inside SRC was made"
"$STOKER" transcode --replace "$T/data/c0000" "$T/data" >/dev/null 2>"$T/err"; rc=$?
[ $rc = 2 ] && grep -q "holds SRC" "$T/err" || fail "SRC inside DST: rc $rc $(cat "$T/err")"
[ -f "$T/data/c0000/broken.jpg" ] || fail "a refused --replace removed SRC's files"
mkdir -p "$T/src2/c0" "$T/dst2" && cp "$T/data/c0000/00000000.jpg" "$T/dst2/kept.jpg" &&
	ln -s "$T/dst2/kept.jpg" "$T/src2/c0/link.jpg" || exit 1
"$STOKER" transcode --replace "$T/src2" "$T/dst2" >/dev/null 2>"$T/err"; rc=$?
[ $rc = 2 ] && grep -q "links to $T/dst2/kept.jpg" "$T/err" || fail "a link into DST: rc $rc $(cat "$T/err")"
[ -f "$T/dst2/kept.jpg" ] || fail "--replace removed the file a link in SRC names"
"$STOKER" transcode "$T/nothing" "$T/o3" >/dev/null 2>"$T/err"; rc=$?
[ $rc = 1 ] && grep -q "nothing" "$T/err" || fail "missing SRC: rc $rc $(cat "$T/err")"
"$STOKER" transcode "$T/data" >/dev/null 2>&1; rc=$?
[ $rc = 2 ] || fail "one operand: rc $rc"

# SIGTERM while a .tmp is being written (a FIFO in its place holds the open):
# the .tmp is removed and the process dies of the signal.  DST must be empty,
# so the FIFO is made once transcode has made DST/c0000, for the last of 40
# files (one thread takes them in order); tried again if it came too late.
mkdir -p "$T/sigsrc/c0000" || exit 1
for i in 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 \
	30 31 32 33 34 35 36 37 38; do
	cp "$T/data/c0000/00000000.jpg" "$T/sigsrc/c0000/a$i.jpg"
done
cp "$T/data/c0000/00000000.jpg" "$T/sigsrc/c0000/zz.jpg"
for try in 1 2 3; do
	rm -rf "$T/sig"
	"$STOKER" transcode --threads 1 "$T/sigsrc" "$T/sig" >/dev/null 2>&1 &
	pid=$!
	i=0
	# (polled every 5 ms for up to 10 s: a sanitizer build starts slowly)
	while [ $i -lt 2000 ] && [ ! -d "$T/sig/c0000" ]; do sleep 0.005; i=$((i + 1)); done
	mkfifo "$T/sig/c0000/zz.jpg.tmp" 2>/dev/null
	i=0
	while [ $i -lt 300 ] && kill -0 $pid 2>/dev/null &&
		! grep -qs wait_for_partner /proc/$pid/task/*/wchan; do
		sleep 0.1; i=$((i + 1))
	done
	kill -0 $pid 2>/dev/null && break
	wait $pid
done
kill -TERM $pid; wait $pid; rc=$?
[ $rc = 143 ] || fail "SIGTERM: exit $rc"
[ ! -e "$T/sig/c0000/zz.jpg.tmp" ] || fail "SIGTERM left the .tmp being written"

# pack --transcode: the shard members are the rewritten files, the corrupt
# one goes in as it was and is named.
rm -rf "$T/data/c0001/notes.txt" "$T/data/c0001/image.png" "$T/data/.git" "$T/data/.stoker-index"
rm -rf "$T/data/c0001/deeper"
"$STOKER" pack --transcode "$T/data" "$T/shards" >"$T/log" || fail "pack --transcode exited $?"
grep -q "transcoded 12 JPEGs" "$T/log" && grep -q "broken.jpg: corrupt JPEG" "$T/log" \
	|| fail "pack summary: $(cat "$T/log")"
cat >"$T/tar.py" <<'PYEOF'
import io, os, sys, tarfile
import numpy as np
from PIL import Image
data, shard = sys.argv[1], sys.argv[2]
files = [os.path.join(data, c, f) for c in sorted(os.listdir(data))
         for f in sorted(os.listdir(os.path.join(data, c)))]
with tarfile.open(shard) as t:
    ms = [m for m in t.getmembers() if m.name.endswith(".jpg")]
    assert len(ms) == len(files), (len(ms), len(files))
    for m, f in zip(ms, files):
        y, x = t.extractfile(m).read(), open(f, "rb").read()
        if f.endswith("broken.jpg"):
            assert x == y
            continue
        assert b"\xff\xdd" in y[:2000], f
        assert np.array_equal(np.asarray(Image.open(io.BytesIO(y))), np.asarray(Image.open(f))), f
PYEOF
"$PY" "$T/tar.py" "$T/data" "$T/shards/train-000000.tar" || fail "pack --transcode members"
"$STOKER" pack --transcode --json "$T/data" "$T/shards2" >"$T/json" || fail "pack --json exited $?"
grep -q '"transcoded": 12' "$T/json" && grep -q '"kept"' "$T/json" || fail "pack --json: $(cat "$T/json")"
exit 0
