#!/bin/sh
# bench/gpu_prepare.sh — builds here and gathers into one folder (default
# build/gpu, well under 64 MiB) what bench/gpu_check.sh needs on a GPU machine
# that reaches no package registry:
#   bin/stoker, lib/libstoker.so.0        the build (the CLI finds ../lib)
#   deps/                                 the shared libraries they link, but
#                                         glibc's: liburing2, libjansson4,
#                                         libmicrohttpd12 (and gnutls under
#                                         it), libjpeg62-turbo, libcmocka0...:
#                                         `apt-get download`ed and `dpkg -x`ed
#                                         (or, offline, copied from this system)
#   python/stoker, include/stoker         the Python package (pure ctypes) and
#                                         the header it checks its version by
#   tests/test_pin, tests/stub/           the C pinning test and its stand-in
#   pylib/                                Debian's pytest, for a python3 that
#                                         has none (put on the path only then)
#   env.sh, MANIFEST, GLIBC               what to source; what is where; the
#                                         newest glibc symbol version needed
# usage: sh bench/gpu_prepare.sh [OUT]     (OFFLINE=1: never apt-get download;
#                                          NO_MAKE=1: the build is there already)
# Then carry OUT (the device tool's `carry`) and run bench/gpu_check.sh there.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-build}
out=${1:-$root/$BUILD/gpu}
PY=${PYTHON:-/usr/bin/python3}
cd "$root"
[ -n "${NO_MAKE:-}" ] || make -s -j"$(nproc)" BUILD="$BUILD" all "$BUILD/tests/test_pin" >/dev/null
b=$root/$BUILD
for f in stoker libstoker.so.0 tests/test_pin tests/stub/libcudart.so.12; do
	[ -e "$b/$f" ] || { echo "gpu_prepare: no $b/$f (make first)" >&2; exit 1; }
done

rm -rf "$out"
mkdir -p "$out/bin" "$out/lib" "$out/deps" "$out/python/stoker" "$out/include/stoker" \
	"$out/tests/stub" "$out/pylib"
cp "$b/stoker" "$out/bin/"
cp "$b/libstoker.so.0" "$out/lib/"
ln -s libstoker.so.0 "$out/lib/libstoker.so"
cp python/stoker/*.py "$out/python/stoker/"
cp include/stoker/*.h "$out/include/stoker/"
cp "$b/tests/test_pin" "$out/tests/"
cp "$b/tests/stub/libcudart.so.12" "$out/tests/stub/"

# The libraries they link, less glibc's own (it must be the machine's).
bins="$out/bin/stoker $out/lib/libstoker.so.0 $out/tests/test_pin"
libs=$(for f in $bins; do LD_LIBRARY_PATH="$out/lib" ldd "$f"; done | awk '/=> \//{print $1 " " $3}' |
	grep -Ev '^(libc|libm|libdl|libpthread|librt|libresolv|libstoker)\.so' | sort -u)
[ -n "$libs" ] || { echo "gpu_prepare: ldd found no libraries" >&2; exit 1; }
pkgs=
[ -n "${OFFLINE:-}" ] || for p in $(echo "$libs" | awk '{print $2}'); do
	real=$(readlink -f "$p")
	pkg=
	for q in "$p" "$real" "/usr$p" "/usr$real" "${p#/usr}" "${real#/usr}"; do
		pkg=$(dpkg -S "$q" 2>/dev/null | head -n 1 | cut -d: -f1) && [ -n "$pkg" ] && break
	done
	[ -n "$pkg" ] && pkgs="$pkgs $pkg"
done
pkgs=$(echo $pkgs | tr ' ' '\n' | sort -u | tr '\n' ' ')
how=copied
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ -z "${OFFLINE:-}" ] && [ -n "$pkgs" ] && (cd "$tmp" && apt-get download $pkgs >/dev/null 2>&1); then
	for deb in "$tmp"/*.deb; do dpkg -x "$deb" "$tmp/x"; done
	how="apt-get download + dpkg -x: $pkgs"
fi
echo "$libs" | while read -r soname path; do
	got=$(find "$tmp/x" -name "$soname" 2>/dev/null | head -n 1)
	if [ -n "$got" ]; then
		cp -L "$got" "$out/deps/$soname"
	else # offline, or a package apt no longer has: the installed file is the same
		cp -L "$path" "$out/deps/$soname"
	fi
done

# pytest for a python3 without one: Debian's, pure Python.
site=$("$PY" -c 'import pytest, os; print(os.path.dirname(os.path.dirname(pytest.__file__)))' 2>/dev/null || true)
if [ -n "$site" ]; then
	for m in _pytest pytest pluggy iniconfig packaging py py.py attr attrs exceptiongroup tomli; do
		[ -e "$site/$m" ] && cp -r "$site/$m" "$out/pylib/"
	done
	find "$out/pylib" -name __pycache__ -prune -exec rm -rf {} +
fi

cat >"$out/env.sh" <<'EOF'
# sourced by bench/gpu_check.sh: the carried build first on every path
here=${CARRY:-$(pwd)}
export STOKER_CARRY="$here" STOKER="$here/bin/stoker" STOKER_LIB="$here/lib/libstoker.so.0"
export LD_LIBRARY_PATH="$here/lib:$here/deps${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PYTHONPATH="$here/python${PYTHONPATH:+:$PYTHONPATH}"
EOF
objdump -T $bins "$out"/deps/* 2>/dev/null | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' |
	sort -uV | tail -n 1 >"$out/GLIBC"
{
	echo "stoker $(cat include/stoker/stoker.h | awk '/define STK_VERSION_(MAJOR|MINOR|PATCH)/{printf "%s%s", s, $3; s="."}'), git $(git rev-parse --short HEAD 2>/dev/null || echo '?'), built $(date -u +%Y-%m-%dT%H:%MZ) on $(. /etc/os-release && echo "$PRETTY_NAME"), needs glibc >= $(cat "$out/GLIBC")"
	echo "libraries ($how):"
	(cd "$out/deps" && ls -1)
} >"$out/MANIFEST"
size=$(du -sk "$out" | cut -f1)
if [ "$size" -gt 65536 ]; then
	echo "gpu_prepare: $out is $size KiB, over the 64 MiB that can be carried" >&2
	exit 1
fi
echo "gpu_prepare: $out ($size KiB): $(head -n 1 "$out/MANIFEST")"
echo "gpu_prepare: libraries $how"
echo "gpu_prepare: carry ${out#$root/} and run: sh bench/gpu_check.sh"
