#!/bin/sh
# --help a person can read (#37): every line under 100 columns, the options
# in groups (bench: data, reading, image, output, remote, as the library's
# rows fall), every option once, and two or three examples at the end, each
# a command of that name whose flags are the command's own.  `stoker --help`
# keeps two spaces between a command and its summary, so help2man gives
# each command a paragraph of its own (transcode, nine letters, ran into the
# next before).
. "$(dirname "$0")/cli-common.sh"
for c in bench gen pack transcode disk doctor iostat exporter; do
	"$S" $c --help >"$tmp/out" 2>"$tmp/err" || fail "$c --help exited $?"
	long=$(awk 'length > 99' "$tmp/out")
	[ -z "$long" ] || fail "$c --help has lines of 100 columns or more: $long"
	n=$(sed -n '/^Examples:$/,$p' "$tmp/out" | grep -c "^  \$ stoker $c ")
	[ "$n" -ge 2 ] && [ "$n" -le 3 ] || fail "$c --help: $n examples, not 2 or 3"
	[ "$(tail -n 1 "$tmp/out" | cut -c1-11)" = "  \$ stoker " ] ||
		fail "$c --help does not end with examples"
	# each example's long flags are options of the command
	sed -n '/^Examples:$/,$p' "$tmp/out" | grep -o -- ' --[a-z][a-z-]*' | sort -u |
		while read -r flag; do
			grep -q -- "^ \{2,6\}\(-[a-zA-Z], \)\?$flag\b" "$tmp/out" ||
				fail "$c --help: its example's $flag is not among its options"
		done || exit 1
	# every option once, under a heading
	dup=$(grep -o -- '^ \{2,6\}\(-[a-zA-Z], \)\?--[a-z][a-z-]*' "$tmp/out" | sed 's/.*--//' | sort | uniq -d)
	[ -z "$dup" ] || fail "$c --help lists twice: $dup"
	awk '/^[A-Za-z][^:]*:$/ { h = 1 } /^ +-/ && !h { bad = 1 } END { exit bad }' "$tmp/out" ||
		fail "$c --help has options before any heading"
done
"$S" bench --help >"$tmp/out"
for g in "data (" "reading (" "image (" "remote (" "output:"; do
	grep -q "^$g" "$tmp/out" || fail "bench --help has no group '$g'"
done
# a library row sits in its group: --queue-depth under reading, --remote-timeout under remote
awk '/^[a-z]/ { g = $1 } /^ +(-., )?--queue-depth / { q = g } /^ +--remote-timeout / { r = g }
	/^ +--crop-frac / { c = g }
	END { exit !(q == "reading" && r == "remote" && c == "image") }' "$tmp/out" ||
	fail "bench --help: library options in the wrong groups"
# the command list: two spaces at least between each name and its summary
"$S" --help | sed -n '/^commands:/,/^$/p' | grep '^  [a-z]' >"$tmp/cmds"
[ "$(wc -l <"$tmp/cmds")" -ge 8 ] || fail "stoker --help lists fewer than 8 commands"
grep -v '^  [a-z]*   *[^ ]' "$tmp/cmds" && fail "a command runs into its summary"
if command -v help2man >/dev/null; then
	sh "$top/mk/man.sh" "$S" "$tmp/man" 9.9.9 >"$tmp/out" 2>"$tmp/err" || fail "mk/man.sh"
	for c in bench gen pack transcode disk doctor iostat exporter; do
		grep -q "^\.SH \"\?STOKER $(echo $c | tr a-z A-Z)\"\?" "$tmp/man/stoker.1" ||
			fail "stoker.1 has no section for $c"
		grep -q '^\.SH EXAMPLES' "$tmp/man/stoker-$c.1" || fail "stoker-$c.1 has no EXAMPLES"
	done
fi
exit 0
