# cli-common.sh — what every tests/cli_*.sh shares (named apart from them:
# tests/cli.sh runs cli_*.sh).  Sourced first, after the script's comment:
#
#   . "$(dirname "$0")/cli-common.sh"
#
# It sets -u and gives:
#   S     the stoker binary ($STOKER, which tests/cli.sh sets; build/stoker
#         when run by hand from the tree's root)
#   PY    the Python with torch: $PYTHON, else Debian's /usr/bin/python3
#   here  tests/;  top: the tree's root
#   tmp   a fresh folder, removed at exit (after the script's own `cleanup`,
#         if it defines one: processes to stop, mounts to undo)
#   fail MESSAGE   says FAIL with the tails of $tmp/out and $tmp/err, exit 1
#   skip REASON    says why, exit 77 (tests/cli.sh counts it as skipped)
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(dirname "$here")
S=${STOKER:-$top/build/stoker}
STOKER=$S
PY=${PYTHON:-/usr/bin/python3}
export STOKER_NO_PROGRESS=1
tmp=$(mktemp -d "${TMPDIR:-/tmp}/stoker-$(basename "$0" .sh)-XXXXXX") || exit 1
cli_exit() {
	rc=$?
	case $(type cleanup 2>/dev/null) in *function*) cleanup ;; esac
	rm -rf "$tmp"
	exit $rc
}
trap cli_exit EXIT
trap 'exit 1' HUP INT TERM
fail() {
	echo "FAIL: $*"
	[ -s "$tmp/out" ] && sed 's/^/  out: /' "$tmp/out" | tail -n 30
	[ -s "$tmp/err" ] && sed 's/^/  err: /' "$tmp/err" | tail -n 10
	exit 1
}
skip() {
	echo "skipped: $*"
	exit 77
}
