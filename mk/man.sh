#!/bin/sh
# Man pages from the CLI's own --help (help2man): stoker(1) from `stoker --help`,
# and stoker-CMD(1) for every subcommand that list names, its NAME line being
# the list's summary.  Nothing is written by hand, so the pages cannot drift
# from the options.   usage: man.sh STOKER OUTDIR VERSION
set -eu
stoker=$1 out=$2 version=$3
command -v help2man >/dev/null || {
	echo "stoker: man pages need help2man. Install it with:" >&2
	echo "  sudo apt-get install -y help2man" >&2
	exit 1
}
stoker=$(cd "$(dirname "$stoker")" && pwd)/$(basename "$stoker")
list=$("$stoker" --help | sed -n '/^commands:/,/^$/s/^  \([a-z][a-z0-9-]*\)  *\(.*\)$/\1	\2/p')
[ -n "$list" ] || { echo "stoker: no subcommands in \`$stoker --help\`" >&2; exit 1; }
rm -rf "$out" && mkdir -p "$out/.wrap"
# help2man runs PROGRAM --help: one small wrapper per subcommand.  SEE ALSO
# links the pages both ways.
page() { # NAME SUMMARY SEEALSO [CMD [EXTRA.h2m]]
	w=$out/.wrap/$1
	printf '#!/bin/sh\nexec "%s" %s "$@"\n' "$stoker" "${4:-}" >"$w"
	chmod +x "$w"
	{ [ -z "${5:-}" ] || cat "$5"; printf '[SEE ALSO]\n%s\n' "$3"; } >"$w.h2m"
	help2man --no-info --no-discard-stderr --version-string="$version" --name="$2" \
		--include="$w.h2m" --output="$out/$1.1" "$w"
	grep -q '^\.SH DESCRIPTION' "$out/$1.1" || { echo "stoker: empty man page for $1" >&2; exit 1; }
}
all=$(printf '%s\n' "$list" | cut -f1 | sed 's/.*/.BR stoker-& (1),/' | sed '$s/,$//')
# stoker(1): a section per subcommand, its usage line and what it does (from
# its --help, roff-escaped), pointing to its own page for the options.
roff() { sed -e 's/\\/\\e/g' -e "s/^\([.']\)/\\\\\&\1/"; }
printf '%s\n' "$list" | while IFS='	' read -r cmd summary; do
	printf '[STOKER %s]\n' "$(echo "$cmd" | tr a-z A-Z)"
	"$stoker" "$cmd" --help | sed -n '1p' | sed 's/^usage: //' | roff | sed 's/^/.B /'
	echo .PP
	"$stoker" "$cmd" --help | sed -n '3,/^$/p' | roff
	printf '.PP\nOptions and examples: \\fBstoker\\-%s\\fR(1), or \\fBstoker %s \\-\\-help\\fR.\n' \
		"$cmd" "$cmd"
done >"$out/.wrap/commands.h2m"
page stoker "keeps GPUs fed: an io_uring data loader, storage and pipeline benchmarks" "$all" "" \
	"$out/.wrap/commands.h2m"
printf '%s\n' "$list" | while IFS='	' read -r cmd summary; do
	page "stoker-$cmd" "$summary" ".BR stoker (1)" "$cmd"
done
rm -rf "$out/.wrap"
