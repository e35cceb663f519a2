#!/bin/sh
# cli_deb.sh — `make deb`: stoker_<version>_<arch>.deb, lintian-clean of errors
# (make deb checks), holding the CLI, the library under its soname, headers,
# pkg-config file, the Python package and a man page per subcommand, with a
# Depends naming the package of every library the binaries link.  As root:
# `apt-get install ./stoker_*.deb` over an older version (whose extra file
# must go), then stoker --version, stoker doctor, import stoker (and a loader),
# a C program built with pkg-config; `apt-get purge` leaves nothing of it.
# Without root the package is built and checked, the install part skipped.
# Run by tests/cli.sh from the source tree with $BUILD set.
. "$(dirname "$0")/cli-common.sh"
PY=/usr/bin/python3 # Debian's: the package installs for it
BUILD=${BUILD:-build}
if [ -n "${SANITIZE:-}" ]; then
	echo "skipped: SANITIZE=$SANITIZE build: the package holds the plain build (tested in the plain pass)"
	exit 77
fi
unset MAKEFLAGS MFLAGS MAKELEVEL STOKER_LIB PYTHONPATH DESTDIR PREFIX
installed=
cleanup() {
	[ -n "$installed" ] && apt-get purge -y -q stoker >/dev/null 2>&1
}
version=$(sed -n 's/^#define STK_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\)$/\2/p' \
	include/stoker/stoker.h | paste -sd.)
arch=$(dpkg-architecture -qDEB_HOST_ARCH 2>/dev/null || dpkg --print-architecture)
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null)
make -s --no-print-directory BUILD="$BUILD" deb DEBDIR="$tmp" >"$tmp/out" 2>&1 || fail "make deb: exit $?"
deb=$tmp/stoker_${version}_$arch.deb
[ -f "$deb" ] || fail "make deb wrote no $deb"

# --- what the package holds --------------------------------------------------------
dpkg-deb -c "$deb" | awk '{print $6}' | sed 's|^\./|/|' >"$tmp/contents"
want="/usr/bin/stoker /usr/lib/$multiarch/libstoker.so.0 /usr/lib/$multiarch/libstoker.so
/usr/lib/$multiarch/libstoker.a /usr/lib/$multiarch/pkgconfig/stoker.pc
/usr/lib/python3/dist-packages/stoker/_build.py /usr/share/man/man1/stoker.1.gz
/usr/share/doc/stoker/copyright"
for h in include/stoker/*.h; do want="$want /usr/$h"; done
for p in python/stoker/*.py; do want="$want /usr/lib/python3/dist-packages/stoker/${p##*/}"; done
for c in $("$STOKER" --help | sed -n '/^commands:/,/^$/s/^  \([a-z][a-z0-9-]*\) .*/\1/p'); do
	want="$want /usr/share/man/man1/stoker-$c.1.gz"
done
for f in $want; do grep -qx "$f" "$tmp/contents" || fail "the package lacks $f"; done
grep -q '^/usr/local\|^/usr/share/stoker' "$tmp/contents" && fail "the package holds a /usr/local or install-manifest path"
dpkg-deb -x "$deb" "$tmp/x"
soname=$(readelf -d "$tmp/x/usr/lib/$multiarch/libstoker.so.0" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$soname" = libstoker.so.0 ] || fail "libstoker.so.0's SONAME is '$soname'"
depends=$(dpkg-deb -f "$deb" Depends)
for elf in usr/bin/stoker "usr/lib/$multiarch/libstoker.so.0"; do
	for lib in $(readelf -d "$tmp/x/$elf" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
		[ "$lib" = libstoker.so.0 ] && continue
		path=$(LD_LIBRARY_PATH="$tmp/x/usr/lib/$multiarch" ldd "$tmp/x/$elf" | awk -v l="$lib" '$1 == l { print $3 }')
		pkg=
		for p in "$path" "${path#/usr}" "/usr$path"; do
			pkg=$(dpkg -S "$p" 2>/dev/null | head -n 1 | cut -d: -f1) && [ -n "$pkg" ] && break
		done
		[ -n "$pkg" ] || fail "no Debian package holds $lib ($path, NEEDED by $elf)"
		echo "$depends" | grep -q "\(^\|, \)$pkg\( \|,\|$\)" || fail "Depends ($depends) lacks $pkg, for $lib"
	done
done
echo "built $(basename "$deb"): Depends: $depends"

# --- installing it: root only ------------------------------------------------------
if [ "$(id -u)" != 0 ]; then
	echo "skipped: built and checked $(basename "$deb"); apt-get install needs root"
	exit 77
fi
# One install at a time on this machine (other trees' tests included).
exec 9>"${TMPDIR:-/tmp}/stoker-cli-deb.lock"
flock 9
if dpkg-query -W -f='${Status}' stoker 2>/dev/null | grep -q 'ok installed'; then
	echo "skipped: built and checked; a stoker package is installed here already (not replacing it)"
	exit 77
fi
for f in $(grep -v '/$' "$tmp/contents"); do
	if [ -e "$f" ] || [ -L "$f" ]; then
		echo "skipped: built and checked; $f exists here already (not overwriting it)"
		exit 77
	fi
done
apt() { DEBIAN_FRONTEND=noninteractive apt-get -y -q -o DPkg::Lock::Timeout=300 \
	--no-install-recommends "$@" >"$tmp/out" 2>&1; }

# An older version, with one file this one no longer has.
dpkg-deb -R "$deb" "$tmp/old" || fail "dpkg-deb -R"
sed -i "s/^Version: .*/Version: $version~old1/" "$tmp/old/DEBIAN/control"
echo "from the older package" >"$tmp/old/usr/share/doc/stoker/OLDER"
(cd "$tmp/old" && find usr -type f -exec md5sum {} + >DEBIAN/md5sums)
dpkg-deb --root-owner-group -b "$tmp/old" "$tmp/stoker_${version}~old1_$arch.deb" >/dev/null || fail "dpkg-deb -b (older)"
installed=1
apt install "$tmp/stoker_${version}~old1_$arch.deb" || fail "apt-get install the older package"
[ -e /usr/share/doc/stoker/OLDER ] || fail "the older package's extra file is not there"
apt install "$deb" || fail "apt-get install ./$(basename "$deb") over the older one"
grep -q "Unpacking stoker ($version) over ($version~old1)" "$tmp/out" || fail "apt did not upgrade from $version~old1"
[ "$(dpkg-query -W -f='${Version}' stoker)" = "$version" ] || fail "installed version is not $version"
[ -e /usr/share/doc/stoker/OLDER ] && fail "the upgrade left the older package's file"

/usr/bin/stoker --version >"$tmp/out" 2>&1 || fail "stoker --version: exit $?"
grep -qx "stoker $version" "$tmp/out" || fail "stoker --version"
(cd / && /usr/bin/stoker doctor) >"$tmp/out" 2>&1
rc=$?
[ $rc = 0 ] || [ $rc = 1 ] || fail "stoker doctor: exit $rc"
grep -Eq '^[0-9]+ ok, [0-9]+ warn, [0-9]+ fail$' "$tmp/out" || fail "stoker doctor: no summary line"
mkdir -p "$tmp/data/a"
for i in 1 2 3; do head -c $((1000 * i)) /dev/urandom >"$tmp/data/a/$i.jpg"; done
(cd / && $PY -c '
import sys, stoker
assert stoker.__file__ == "/usr/lib/python3/dist-packages/stoker/__init__.py", stoker.__file__
assert stoker.lib_path == "/usr/lib/%s/libstoker.so.0" % sys.argv[1], stoker.lib_path
assert stoker.__version__ == stoker.lib_version() == sys.argv[2]
assert sum(b.count for b in stoker.Loader(sys.argv[3], batch_size=2)) == 3
' "$multiarch" "$version" "$tmp/data") >"$tmp/out" 2>&1 || fail "python3 -c 'import stoker' (and a loader)"
printf '#include <stoker/stoker.h>\n#include <stdio.h>\nint main(void) { return puts(stk_version()) < 0; }\n' >"$tmp/v.c"
# shellcheck disable=SC2046
cc -o "$tmp/v" "$tmp/v.c" $(pkg-config --cflags --libs stoker) >"$tmp/out" 2>&1 || fail "cc with the package's pkg-config file"
[ "$("$tmp/v")" = "$version" ] || fail "a program built against the package: wrong version"
if command -v man >/dev/null; then
	man -w stoker-bench >"$tmp/out" 2>&1 || fail "man -w stoker-bench"
fi

dpkg -L stoker >"$tmp/files"
apt purge stoker || fail "apt-get purge stoker"
installed=
dpkg-query -W -f='${Status}' stoker 2>/dev/null | grep -q 'installed' && fail "stoker still installed after purge"
dirs=
while read -r f; do
	[ "$f" = /. ] && continue
	if [ -L "$f" ] || [ -f "$f" ]; then fail "left after purge: $f"; fi
	[ -d "$f" ] && dirs="$dirs $f"
done <"$tmp/files"
# A folder may stay only while another package owns it.
# shellcheck disable=SC2086
dpkg -S $dirs 2>&1 | sed -n 's/^dpkg-query: no path found matching pattern //p' >"$tmp/out"
[ -s "$tmp/out" ] && fail "folders left after purge that no package owns"
echo "ok: built, lintian-clean, upgraded over $version~old1, ran, purged clean"
