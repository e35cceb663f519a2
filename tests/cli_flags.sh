#!/bin/sh
# Short flags mean one thing in every command (#37): -j --json, -s --seed,
# -q --queue-depth, -T --threads.  A letter that meant another option in a
# command before is refused there (exit 2), naming both, rather than taken
# silently for the other (bench -s 30 was 30 seconds, now it would be a
# seed); one that clashes with nothing is still taken (gen -q, --quality).
# Each --help says so.
. "$(dirname "$0")/cli-common.sh"
export XDG_CACHE_HOME="$tmp/cache"

refused() { # LETTER WAS NOW CMD ARGS...
	l=$1 was=$2 now=$3
	shift 3
	"$S" "$@" >"$tmp/out" 2>"$tmp/err"
	rc=$?
	[ $rc = 2 ] || fail "stoker $*: exit $rc, not 2"
	grep -q -- "-$l is refused here: it meant --$was, and -$l now means --$now" "$tmp/err" ||
		fail "stoker $*: does not say -$l meant --$was"
	grep -q -- "write --$was" "$tmp/err" || fail "stoker $*: does not name --$was"
}
refused s seconds seed bench -s 30 "$tmp/none"
refused s size seed disk -s 1G "$tmp/none"
refused j threads json gen -j 4 "$tmp/none"
refused j threads json transcode -j 4 "$tmp/none" "$tmp/none2"
refused j threads json disk -j 4 "$tmp/none"

# the one meaning, where the command has the option
"$S" gen -n 4 -c 1 -s 7 -T 2 -q 50 --json "$tmp/d" >"$tmp/out" 2>"$tmp/err" ||
	fail "gen -s 7 -T 2 -q 50 (-q: --quality, still taken)"
grep -q '"seed": 7' "$tmp/out" || fail "gen -s is not --seed"
"$S" bench -j -q 4 --no-baseline --runtime 0 --epochs 1 --repeat 1 "$tmp/d" \
	>"$tmp/out" 2>"$tmp/err" || fail "bench -j -q 4"
grep -q '"queue_depth": 4' "$tmp/out" || fail "bench -q is not --queue-depth"
mkdir "$tmp/dk"
"$S" disk -p seqread --size 1MiB -T 1 -q 2 --runtime 50ms --ramp 0 --no-drop --json "$tmp/dk" \
	>"$tmp/out" 2>"$tmp/err" || fail "disk -T 1 -q 2"
grep -q '"queue_depth": 2' "$tmp/out" && grep -q '"threads": 1' "$tmp/out" ||
	fail "disk -q, -T are not the queue depth and threads"

# each --help says it, and which letters it refuses
for c in bench gen pack transcode disk doctor iostat exporter; do
	"$S" $c --help >"$tmp/out" || fail "$c --help"
	grep -q "^Short flags mean one thing in every command: -j --json, -s --seed" "$tmp/out" ||
		fail "$c --help does not say what short flags mean"
done
"$S" bench --help | grep -q "Refused here: -s, which meant --seconds before" ||
	fail "bench --help does not say -s is refused"
"$S" gen --help | grep -q "Still taken here: -q for --quality" || fail "gen --help: -q"
exit 0
