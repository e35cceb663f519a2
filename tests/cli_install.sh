#!/bin/sh
# cli_install.sh — `make install` / `make uninstall`: into a DESTDIR, exactly
# the expected files land (listed here) and nothing outside PREFIX; with a
# PREFIX, the CLI, a C program built with pkg-config (shared and static) and
# the Python package (from another folder, nothing else on its path) all find
# the installed library; an install over an older one drops the older's extra
# files; uninstall removes exactly what was installed (byte-code included) and
# keeps what it did not install; a prefix the user cannot write stops with the
# command to use; uninstall with nothing installed says so.
# Run by tests/cli.sh from the source tree with $BUILD set.
. "$(dirname "$0")/cli-common.sh"
PY=/usr/bin/python3 # Debian's: the package installs for it
BUILD=${BUILD:-build}
if [ -n "${SANITIZE:-}" ]; then
	echo "skipped: SANITIZE=$SANITIZE build: what gets installed is the plain build (tested in the plain pass)"
	exit 77
fi
unset MAKEFLAGS MFLAGS MAKELEVEL DESTDIR PREFIX STOKER_LIB PYTHONPATH
chmod 755 "$tmp"
mk() { make -s --no-print-directory BUILD="$BUILD" "$@" >"$tmp/out" 2>&1; }
version=$(sed -n 's/^#define STK_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\)$/\2/p' \
	include/stoker/stoker.h | paste -sd.)
[ -n "$version" ] || fail "no STK_VERSION_* in include/stoker/stoker.h"

# --- 1. DESTDIR: exactly these files, and nothing outside PREFIX ----------------------
dest=$tmp/dest
mkdir -p "$dest/usr/local/lib"
echo other >"$dest/usr/local/lib/other.so"          # not ours: must survive uninstall
mk install DESTDIR="$dest" PREFIX=/usr/local || fail "make install DESTDIR=$dest: exit $?"
pydir=$($PY mk/pydir.py /usr/local)
{
	echo /usr/local/bin/stoker
	for f in libstoker.so libstoker.so.0 libstoker.a pkgconfig/stoker.pc; do echo "/usr/local/lib/$f"; done
	for h in include/stoker/*.h; do echo "/usr/local/$h"; done
	for p in python/stoker/*.py; do echo "$pydir/stoker/${p##*/}"; done
	echo "$pydir/stoker/_build.py"
	echo /usr/local/share/man/man1/stoker.1
	"$STOKER" --help | sed -n '/^commands:/,/^$/s|^  \([a-z][a-z0-9-]*\) .*|/usr/local/share/man/man1/stoker-\1.1|p'
	echo /usr/local/share/stoker/install-manifest
	echo /usr/local/lib/other.so
} | sort >"$tmp/want"
(cd "$dest" && find . ! -type d | sed 's|^\.||' | sort) >"$tmp/got"
echo "make install DESTDIR=... PREFIX=/usr/local put:"
sed 's/^/  /' "$tmp/got"
diff "$tmp/want" "$tmp/got" >"$tmp/out" || fail "installed files differ from the expected list (< expected, > found)"
[ "$(readlink "$dest/usr/local/lib/libstoker.so")" = libstoker.so.0 ] || fail "libstoker.so is not a link to libstoker.so.0"
for h in include/stoker/*.h; do cmp -s "$h" "$dest/usr/local/$h" || fail "$h installed differently"; done
grep -qx 'prefix=/usr/local' "$dest/usr/local/lib/pkgconfig/stoker.pc" || fail "stoker.pc: prefix is not /usr/local"
grep -qx "Version: $version" "$dest/usr/local/lib/pkgconfig/stoker.pc" || fail "stoker.pc: no Version: $version"
grep -q 'LIBDIR = "/usr/local/lib"' "$dest$pydir/stoker/_build.py" || fail "_build.py does not name /usr/local/lib"
grep -q "VERSION = \"$version\"" "$dest$pydir/stoker/_build.py" || fail "_build.py does not say $version"
grep -q 'batch\\-size' "$dest/usr/local/share/man/man1/stoker-bench.1" || fail "stoker-bench.1 lacks --batch-size"
grep -q '^\.SH NAME' "$dest/usr/local/share/man/man1/stoker-doctor.1" || fail "stoker-doctor.1 has no NAME"
mk uninstall DESTDIR="$dest" PREFIX=/usr/local || fail "make uninstall DESTDIR=$dest: exit $?"
left=$(cd "$dest" && find . | sort | tr '\n' ' ')
[ "$left" = ". ./usr ./usr/local ./usr/local/lib ./usr/local/lib/other.so " ] ||
	fail "after uninstall: $left (want only what was there before)"

# --- 2. PREFIX: everything finds the installed library --------------------------------
p=$tmp/p
mk install PREFIX="$p" || fail "make install PREFIX=$p: exit $?"
"$p/bin/stoker" --version >"$tmp/out" 2>&1 || fail "$p/bin/stoker --version: exit $?"
grep -qx "stoker $version" "$tmp/out" || fail "installed stoker --version"
cat >"$tmp/v.c" <<'EOF'
#include <stdio.h>
#include <stoker/stoker.h>
int main(void) { return puts(stk_version()) < 0; }
EOF
export PKG_CONFIG_PATH="$p/lib/pkgconfig"
# shellcheck disable=SC2046
cc -o "$tmp/v" "$tmp/v.c" $(pkg-config --cflags --libs stoker) -Wl,-rpath,"$p/lib" >"$tmp/out" 2>&1 ||
	fail "cc with pkg-config --cflags --libs stoker"
[ "$("$tmp/v")" = "$version" ] || fail "a program linked with -lstoker: wrong version"
# shellcheck disable=SC2046
cc -o "$tmp/vs" "$tmp/v.c" $(pkg-config --cflags stoker) "$p/lib/libstoker.a" \
	$(pkg-config --static --libs stoker | sed 's/-L[^ ]*//g; s/-lstoker //') >"$tmp/out" 2>&1 ||
	fail "static link with libstoker.a and pkg-config --static"
[ "$("$tmp/vs")" = "$version" ] || fail "the statically linked program: wrong version"
ldd "$tmp/vs" | grep -q libstoker && fail "the static program still needs libstoker.so"
mkdir -p "$tmp/data/a"
for i in 1 2 3 4 5; do head -c $((1000 * i)) /dev/urandom >"$tmp/data/a/$i.bin"; done
pysite=$p/lib/python3/dist-packages
(cd "$tmp" && env -u PYTHONDONTWRITEBYTECODE PYTHONPATH="$pysite" $PY -c '
import sys, stoker
print(stoker.lib_path, stoker.__version__)
assert stoker.lib_path == sys.argv[1] + "/lib/libstoker.so.0", stoker.lib_path
assert stoker.__version__ == stoker.lib_version() == sys.argv[2]
assert stoker.__file__.startswith(sys.argv[1]), stoker.__file__
n = sum(int(b[3].numel()) for b in stoker.Loader(sys.argv[3], batch_size=2, shuffle=False, extensions="*"))
assert n == 5, n
' "$p" "$version" "$tmp/data") >"$tmp/out" 2>&1 || fail "the installed Python package (PYTHONPATH=$pysite)"
[ -d "$pysite/stoker/__pycache__" ] || fail "importing left no __pycache__ (the uninstall check below needs one)"

# --- 3. over an older install: its extra files go ---------------------------------
echo "# from an older stoker" >"$pysite/stoker/gone.py"
echo "f $pysite/stoker/gone.py" >>"$p/share/stoker/install-manifest"
mk install PREFIX="$p" || fail "make install over the older: exit $?"
grep -q "removed $pysite/stoker/gone.py" "$tmp/out" || fail "install over the older does not say it removed gone.py"
[ -e "$pysite/stoker/gone.py" ] && fail "install over an older one left its gone.py"
grep -q gone.py "$p/share/stoker/install-manifest" && fail "the new manifest still lists gone.py"
mk uninstall PREFIX="$p" || fail "make uninstall PREFIX=$p: exit $?"
[ -e "$p" ] && fail "after uninstall: $(find "$p" | head -n 5 | tr '\n' ' ')(make install created $p)"
mk uninstall PREFIX="$p" && fail "make uninstall with nothing installed: exit 0"
grep -q "nothing to uninstall: no $p/share/stoker/install-manifest" "$tmp/out" ||
	fail "make uninstall with nothing installed: no clear message"

# --- 4. a prefix this user cannot write: stop, with the command to use --------------
sys=$tmp/sys
mkdir -p "$sys"
if [ "$(id -u)" = 0 ]; then
	# As root, ask as nobody, from a copy of the tree that nobody can read.
	tree=$tmp/tree
	mkdir -p "$tree"
	cp -a Makefile mk include python src tools "$tree/" && cp -a "$BUILD" "$tree/$BUILD" || fail "copy of the tree"
	rm -rf "$tree/python/build" "$tree/python/stoker/__pycache__"
	chmod -R a+rX "$tree"
	(cd "$tree" && setpriv --reuid=65534 --regid=65534 --clear-groups \
		make -s --no-print-directory install PREFIX="$sys") >"$tmp/out" 2>&1
else
	chmod 555 "$sys"
	make -s --no-print-directory BUILD="$BUILD" install PREFIX="$sys" >"$tmp/out" 2>&1
fi
rc=$?
[ $rc != 0 ] || fail "make install into an unwritable $sys: exit 0"
grep -q "cannot install: $sys/bin is not writable by" "$tmp/out" || fail "no message naming $sys/bin"
grep -Eq "^  sudo make install (.* )?PREFIX=$sys( |\$)" "$tmp/out" || fail "no 'sudo make install PREFIX=$sys' line"
[ -z "$(ls -A "$sys")" ] || fail "the refused install wrote into $sys"
echo "ok: install, upgrade, uninstall, refusal"
