#!/bin/sh
# `stoker pack`: shards that GNU tar and Python's tarfile read, members in
# WebDataset's pairs, the folder's bytes and labels, classes.txt, a seeded
# shuffle, usage and path errors.  Run by tests/cli.sh with $STOKER.
. "$(dirname "$0")/cli-common.sh"
[ -x "$STOKER" ] || { echo "no stoker binary at $STOKER"; exit 77; }
"$STOKER" pack --help >/dev/null 2>&1 || { echo "pack not registered"; exit 77; }
[ -x "$PY" ] || { echo "no python3 at $PY"; exit 77; }

T=$tmp
cd "$T" || exit 1

"$STOKER" gen --images 30 --classes 3 --seed 1 "$T/data" >/dev/null || fail "gen exited $?"
"$STOKER" pack "$T/data" "$T/out" --shard-size 1MiB >"$T/log" || fail "pack exited $?"
grep -q "30 samples" "$T/log" || fail "summary: $(cat "$T/log")"
n=$(ls "$T/out" | grep -c '^train-[0-9]\{6\}\.tar$')
[ "$n" -ge 2 ] || fail "$n shards for 3 MB at --shard-size 1MiB: $(ls "$T/out")"
[ -z "$(ls "$T/out" | grep '\.tmp$')" ] || fail ".tmp files left: $(ls "$T/out")"
printf 'c0000\nc0001\nc0002\n' | cmp -s - "$T/out/classes.txt" \
	|| fail "classes.txt: $(cat "$T/out/classes.txt")"

# GNU tar lists key.jpg / key.cls pairs, keys in order across the shards.
for s in "$T"/out/train-*.tar; do
	tar -tf "$s" || fail "tar -tf $s exited $?"
done >"$T/list"
k=0
while read -r a && read -r b; do
	key=$(printf '%08d' "$k")
	[ "$a" = "$key.jpg" ] && [ "$b" = "$key.cls" ] || fail "members $a $b, expected $key.jpg/.cls"
	k=$((k + 1))
done <"$T/list"
[ "$k" -eq 30 ] || fail "$k samples listed"

# Python reads every member: the .jpg bytes are the folder's files in
# ImageFolder order (sorted classes, sorted files), the .cls their class index;
# each shard is at most --shard-size.  With a seed: the same samples, reordered.
cat >"$T/check.py" <<'EOF'
import glob, os, sys, tarfile
data, out, limit, shuffled = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1"
want = []
for label, c in enumerate(sorted(os.listdir(data))):
    for f in sorted(os.listdir(os.path.join(data, c))):
        want.append((open(os.path.join(data, c, f), "rb").read(), label))
got = []
for shard in sorted(glob.glob(os.path.join(out, "train-*.tar"))):
    assert os.path.getsize(shard) <= limit, (shard, os.path.getsize(shard))
    with tarfile.open(shard) as t:
        ms = t.getmembers()
        assert ms, shard + ": empty shard"
        for jpg, cls in zip(ms[0::2], ms[1::2]):
            key = jpg.name.split(".")[0]
            assert jpg.name == key + ".jpg" and cls.name == key + ".cls", (jpg.name, cls.name)
            assert int(key) == len(got), (key, len(got))
            text = t.extractfile(cls).read()
            assert text.endswith(b"\n"), text
            got.append((t.extractfile(jpg).read(), int(text)))
if shuffled:
    assert got != want, "--seed kept ImageFolder order"
    got.sort(); want.sort()
assert len(got) == len(want), (len(got), len(want))
assert b"".join(g[0] for g in got) == b"".join(w[0] for w in want), "bytes differ"
assert [g[1] for g in got] == [w[1] for w in want], "labels differ"
EOF
"$PY" "$T/check.py" "$T/data" "$T/out" 1048576 0 || fail "python check"

# A seeded shuffle: the same samples and labels, another order, reproducible.
"$STOKER" pack --seed 5 --prefix train --json "$T/data" "$T/s1" >"$T/json" || fail "--seed exited $?"
for key in samples shards classes bytes seed; do
	grep -q "\"$key\"" "$T/json" || fail "--json lacks $key: $(cat "$T/json")"
done
"$PY" "$T/check.py" "$T/data" "$T/s1" 1073741824 1 || fail "python check, --seed"
"$STOKER" pack --seed 5 "$T/data" "$T/s2" >/dev/null || fail "second --seed 5 exited $?"
cmp -s "$T/s1/train-000000.tar" "$T/s2/train-000000.tar" || fail "--seed 5 twice differs"
"$STOKER" pack --prefix val "$T/data" "$T/p" >/dev/null || fail "--prefix exited $?"
[ -f "$T/p/val-000000.tar" ] || fail "--prefix val: $(ls "$T/p")"

# Bad usage: exit 2, nothing written.
for args in "--shard-size x" "--shard-size 1" "--seed -1" "--prefix a/b" "--prefix .hid" \
	"--bogus" "" "$T/data"; do
	# shellcheck disable=SC2086
	"$STOKER" pack $args ${args:+"$T/data"} "$T/e" >/dev/null 2>&1
	rc=$?
	[ $rc -eq 2 ] || fail "pack $args: exit $rc, expected 2"
done
[ ! -e "$T/e" ] || fail "a usage error created OUT"

# A missing DIR, or an OUT that cannot be made: exit 1, named.
"$STOKER" pack "$T/nope" "$T/o" >/dev/null 2>"$T/err"
rc=$?
[ $rc -eq 1 ] || fail "missing DIR: exit $rc, expected 1"
grep -q "$T/nope" "$T/err" || fail "the error does not name DIR: $(cat "$T/err")"
"$STOKER" pack "$T/data" "$T/log/x" >/dev/null 2>"$T/err"
rc=$?
[ $rc -eq 1 ] || fail "OUT under a file: exit $rc, expected 1"
grep -q "$T/log" "$T/err" || fail "the error does not name OUT: $(cat "$T/err")"
# Round trip through the loader: the shards give the folder's samples, the same
# bytes (the C example's checksum over an epoch) whatever order each reads in.
ex=$(dirname "$STOKER")/examples/epoch
if [ -x "$ex" ]; then
	a=$("$ex" "$T/data" 7) || fail "epoch over the folder"
	b=$("$ex" "$T/out" 7) || fail "epoch over the shards"
	[ "$a" = "$b" ] || fail "folder '$a' but shards '$b'"
fi

# --align 4096: every sample's bytes start on a 4 KiB boundary, GNU tar and
# Python's tarfile see only the samples (the padding is PAX comments), and
# the loader reads the same bytes (the epoch checksum above).
"$STOKER" pack "$T/data" "$T/al" --align 4096 --shard-size 64k >/dev/null 2>"$T/err" ||
	fail "--align: $(cat "$T/err")"
/usr/bin/python3 - "$T/al" <<'EOF' || fail "--align: members not aligned or padding visible"
import glob, sys, tarfile
n = 0
for f in sorted(glob.glob(sys.argv[1] + "/*.tar")):
    for m in tarfile.open(f).getmembers():
        assert m.name.endswith((".jpg", ".cls")), m.name
        if m.name.endswith(".jpg"):
            assert m.offset_data % 4096 == 0, (f, m.name, m.offset_data)
            n += 1
assert n > 0
EOF
tar tf "$T/al/train-000000.tar" | grep -qv '\.jpg$\|\.cls$' && fail "--align: GNU tar lists the padding"
"$STOKER" pack "$T/data" "$T/bad" --align 1000 >/dev/null 2>&1
[ $? = 2 ] || fail "--align 1000 accepted"
if [ -x "$ex" ]; then
	c=$("$ex" "$T/al" 7) || fail "epoch over the aligned shards"
	[ "$a" = "$c" ] || fail "folder '$a' but aligned shards '$c'"
fi

# A write that fails names the shard: a file size limit (SIGXFSZ ignored:
# EFBIG, as a full disk gives ENOSPC) stops the first shard.
(trap '' XFSZ; ulimit -f 64 && exec "$STOKER" pack "$T/data" "$T/full") >/dev/null 2>"$T/err"
rc=$?
[ $rc -eq 1 ] || fail "EFBIG: exit $rc, expected 1"
grep -q "train-000000.tar.tmp: File too large" "$T/err" || fail "EFBIG: $(cat "$T/err")"
[ -z "$(ls "$T/full")" ] || fail "a failed write left $(ls "$T/full")"

# A FIFO put in a sample's place once DIR is indexed (pack stopped with a
# .tmp on disk): refused and named, never waited on for ever (the open
# blocked before).  Tried again when pack had passed that file already.
mkdir -p "$T/ff/a" || exit 1
i=0
while [ $i -lt 200 ]; do
	head -c 200000 /dev/urandom >"$T/ff/a/$(printf '%04d' $i).jpg"
	i=$((i + 1))
done
caught=0
try=0
while [ $caught = 0 ] && [ $try -lt 10 ]; do
	rm -rf "$T/ffo"
	rm -f "$T/ff/a/0199.jpg" && head -c 200000 /dev/urandom >"$T/ff/a/0199.jpg"
	"$STOKER" pack "$T/ff" "$T/ffo" --shard-size 1MiB >/dev/null 2>"$T/err" &
	pid=$!
	while kill -0 $pid 2>/dev/null; do
		if ls "$T/ffo"/*.tmp >/dev/null 2>&1; then
			kill -STOP $pid
			rm -f "$T/ff/a/0199.jpg" && mkfifo "$T/ff/a/0199.jpg"
			kill -CONT $pid
			break
		fi
	done
	i=0
	while [ $i -lt 200 ] && kill -0 $pid 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
	if kill -0 $pid 2>/dev/null; then
		kill $pid
		fail "pack waited on a FIFO in a sample's place"
	fi
	wait $pid
	rc=$?
	[ $rc = 1 ] && caught=1
	try=$((try + 1))
done
[ $caught = 1 ] || fail "never caught pack before its last sample in 10 tries"
grep -q "0199.jpg: not a regular file" "$T/err" || fail "FIFO: $(cat "$T/err")"
rm -rf "$T/ff" "$T/ffo"

# A repack: shards in, shards out.  Each member keeps its own extension (not
# ".tar"), its bytes (the copy starts at the member, not at the shard's
# start: "the file grew since it was indexed" before) and its label, and
# classes.txt goes on.  --transcode reads members the same way.
"$STOKER" pack "$T/out" "$T/re" >/dev/null 2>"$T/err" || fail "repack: $(cat "$T/err")"
"$PY" "$T/check.py" "$T/data" "$T/re" 1073741824 0 || fail "python check, repack"
cmp -s "$T/out/classes.txt" "$T/re/classes.txt" || fail "repack classes.txt: $(cat "$T/re/classes.txt")"
"$STOKER" pack --transcode "$T/out" "$T/re2" >"$T/log" 2>"$T/err" ||
	fail "repack --transcode: $(cat "$T/err")"
grep -q "transcoded 30 JPEGs" "$T/log" || fail "repack --transcode: $(cat "$T/log")"

# OUT apart from DIR, checked before anything is made: not DIR, not inside
# it (a new class), not holding it; a non-empty OUT only with --replace,
# which replaces it whole.
cp -r "$T/data" "$T/d2"
for out in "$T/d2" "$T/d2/shards" "$T/d2/c0000/.." "$T"; do
	"$STOKER" pack --replace "$T/d2" "$out" >/dev/null 2>"$T/err"; rc=$?
	[ $rc -eq 2 ] || fail "pack d2 $out: exit $rc, expected 2"
	grep -q "$out" "$T/err" || fail "the refusal does not name $out: $(cat "$T/err")"
done
[ ! -e "$T/d2/shards" ] || fail "a refused pack made OUT inside DIR"
diff -r "$T/data" "$T/d2" >/dev/null || fail "a refused --replace changed DIR"
"$STOKER" pack "$T/data" "$T/out" >/dev/null 2>"$T/err"; rc=$?
[ $rc -eq 2 ] && grep -q "not empty" "$T/err" || fail "non-empty OUT: exit $rc $(cat "$T/err")"
mkdir "$T/keep" && echo keep >"$T/keep/f" && ln -s "$T/keep" "$T/p/link" && ln -s "$T/d2" "$T/p/d2"
"$STOKER" pack --replace "$T/p/d2" "$T/p" >/dev/null 2>"$T/err"; rc=$?
[ $rc -eq 2 ] || fail "DIR a link inside OUT: exit $rc $(cat "$T/err")"
"$STOKER" pack --replace --prefix t "$T/data" "$T/p" >/dev/null || fail "--replace exited $?"
[ "$(ls "$T/p")" = "classes.txt
t-000000.tar" ] || fail "--replace left $(ls "$T/p")"
[ "$(cat "$T/keep/f")" = keep ] && diff -r "$T/data" "$T/d2" >/dev/null ||
	fail "--replace followed a link out of OUT"
# nor a sample's file that lies in OUT: a file list's entry, a link in DIR
cp "$T/data/c0000/00000000.jpg" "$T/p/in-out.jpg"
printf '%s\t0\n%s\t1\n' "$T/p/in-out.jpg" "$T/data/c0001/00000001.jpg" >"$T/list.txt"
ln -s "$T/p/in-out.jpg" "$T/d2/c0001/link.jpg"
for dir in "$T/list.txt" "$T/d2"; do
	"$STOKER" pack --replace "$dir" "$T/p" >/dev/null 2>"$T/err"; rc=$?
	[ $rc -eq 2 ] && grep -q "holds $T/p/in-out.jpg" "$T/err" ||
		fail "a sample of $dir in OUT: exit $rc $(cat "$T/err")"
	[ -f "$T/p/in-out.jpg" ] || fail "--replace removed a sample of $dir"
done
echo "ok"
