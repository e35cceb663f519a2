#!/bin/sh
# Mistakes get help (#37): a misspelt command or flag gets "did you mean";
# a flag short for several options names them; one without its value says
# so; --plot without --sweep is refused before the run, saying why nothing
# would be written; a file given where a folder was expected says it was read
# as a file list; an empty folder says it is empty (bench, pack, transcode,
# which also fails rather than copying nothing).
. "$(dirname "$0")/cli-common.sh"
export XDG_CACHE_HOME="$tmp/cache"

usage_err() { # PATTERN ARGS...: exit 2, PATTERN on stderr
	pat=$1
	shift
	"$S" "$@" >"$tmp/out" 2>"$tmp/err"
	rc=$?
	[ $rc = 2 ] || fail "stoker $*: exit $rc, not 2"
	grep -q -- "$pat" "$tmp/err" || fail "stoker $*: no '$pat'"
}
usage_err "unknown command 'bnech'; did you mean 'stoker bench'?" bnech
usage_err "did you mean 'stoker transcode'?" transcdoe
usage_err "unknown option '--batchsize'; did you mean --batch-size?" bench --batchsize 4 "$tmp"
usage_err "did you mean --images?" gen --imagse 4 "$tmp/g"
usage_err "did you mean --shard-size?" pack --shard-szie 1G "$tmp" "$tmp/o"
usage_err "'--no' is short for more than one option: --no-baseline" bench --no "$tmp"
usage_err "--batch-size needs a value" bench --batch-size
usage_err "--json takes no value" bench --json=1 "$tmp"
"$S" bench --frobnicate "$tmp" 2>"$tmp/err"
grep -q "did you mean" "$tmp/err" && fail "--frobnicate: a guess for a word near nothing"
"$S" frobnicate 2>"$tmp/err"
grep -q "did you mean" "$tmp/err" && fail "frobnicate: a guess for a command near nothing"

"$S" gen -n 6 -c 2 "$tmp/d" >"$tmp/out" 2>"$tmp/err" || fail "gen"
usage_err "--plot $tmp/x.svg: nothing would be written: the chart is --sweep's" \
	bench --plot "$tmp/x.svg" --no-baseline "$tmp/d"
[ -e "$tmp/x.svg" ] && fail "--plot without --sweep wrote a chart"

# a file given for a folder: read as a file list, and said so
jpg=$(ls "$tmp"/d/c0000/*.jpg | head -n 1)
"$S" bench --no-baseline --runtime 0 --epochs 1 --repeat 1 "$jpg" >"$tmp/out" 2>"$tmp/err" &&
	fail "bench on a JPEG passed"
grep -q "a file, so it was read as a file list.*not text: a folder or .tar shards were expected" \
	"$tmp/err" || fail "bench on a JPEG does not say it was read as a file list"
grep -q "$(printf '\377')" "$tmp/err" && fail "bench on a JPEG quotes its bytes"
printf '%s\t1x\n' "$jpg" >"$tmp/list"
"$S" bench --no-baseline --runtime 0 --epochs 1 --repeat 1 "$tmp/list" >"$tmp/out" 2>"$tmp/err"
grep -q "label '1x' is not an integer >= -1 (a file, so it was read as a file list" "$tmp/err" ||
	fail "a bad label does not say the file was read as a file list"
"$S" pack "$jpg" "$tmp/p1" >"$tmp/out" 2>"$tmp/err" && fail "pack of a JPEG passed"
grep -q "read as a file list" "$tmp/err" || fail "pack of a JPEG does not say how it was read"

# an empty folder, or one of empty folders, says it is empty
mkdir -p "$tmp/empty" "$tmp/hollow/a" "$tmp/hollow/b"
for e in empty hollow; do
	"$S" bench --no-baseline --runtime 0 --epochs 1 --repeat 1 "$tmp/$e" >"$tmp/out" 2>"$tmp/err" &&
		fail "bench on $e passed"
	grep -q "no samples found: the folder is empty" "$tmp/err" || fail "bench on $e"
	grep -q -- "--extensions" "$tmp/err" && fail "bench on $e suggests --extensions"
	"$S" pack "$tmp/$e" "$tmp/p-$e" >"$tmp/out" 2>"$tmp/err" && fail "pack of $e passed"
	grep -q "the folder is empty" "$tmp/err" || fail "pack of $e"
	"$S" transcode "$tmp/$e" "$tmp/t-$e" >"$tmp/out" 2>"$tmp/err"
	rc=$?
	[ $rc = 1 ] || fail "transcode of $e: exit $rc, not 1"
	grep -q "$e: the folder is empty: no file to transcode" "$tmp/err" || fail "transcode of $e"
	[ -e "$tmp/t-$e" ] && fail "transcode of $e made DST"
done
"$S" bench --no-baseline --runtime 0 --epochs 1 --repeat 1 "$tmp/hollow" 2>"$tmp/err"
grep -q "no file in it or its subfolders" "$tmp/err" || fail "hollow: not said its subfolders are empty"
exit 0
