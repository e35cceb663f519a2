#!/bin/sh
# cli_pip.sh — the Python package for pip: a fresh venv (system site packages,
# for Debian's torch), `pip install --no-build-isolation --no-index ./python`
# offline; from another folder with nothing else on its path, `import stoker`
# loads the library carried beside the module, of the header's version, a
# loader yields every sample's bytes, the `stoker` command runs the carried CLI;
# a bundled library of another version or missing fails the import naming
# both versions / the path; `pip uninstall` leaves nothing of stoker behind.
# Run by tests/cli.sh from the source tree with $BUILD set.
. "$(dirname "$0")/cli-common.sh"
if [ -n "${SANITIZE:-}" ]; then
	echo "skipped: SANITIZE=$SANITIZE build: the wheel carries the plain build (tested in the plain pass)"
	exit 77
fi
if ! $PY -c 'import ensurepip, venv' 2>/dev/null; then
	echo "skipped: no venv module for $PY: sudo apt-get install -y python3-venv"
	exit 77
fi
unset MAKEFLAGS MFLAGS MAKELEVEL STOKER_LIB PYTHONPATH
version=$(sed -n 's/^#define STK_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\)$/\2/p' \
	include/stoker/stoker.h | paste -sd.)
venv=$tmp/venv
$PY -m venv --system-site-packages "$venv" >"$tmp/out" 2>&1 || fail "python3 -m venv"
"$venv/bin/pip" install -q --no-build-isolation --no-index ./python >"$tmp/out" 2>&1 ||
	fail "pip install --no-build-isolation --no-index ./python"
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_path("platlib"))')
pkg=$site/stoker
[ -f "$pkg/libstoker.so.0" ] || fail "no libstoker.so.0 in $pkg"
[ -x "$pkg/stoker" ] || fail "no executable CLI in $pkg"

mkdir -p "$tmp/data/a" "$tmp/data/b"
for i in 1 2 3; do
	head -c $((3000 * i)) /dev/urandom >"$tmp/data/a/$i.jpg"
	head -c $((2000 * i)) /dev/urandom >"$tmp/data/b/$i.jpg"
done
mkdir "$tmp/run"
imp() { (cd "$tmp/run" && "$venv/bin/python" -c "$1" "$pkg" "$version" "$tmp/data" "$(pwd)") >"$tmp/out" 2>&1; }
imp '
import os, sys, stoker, torch
pkg, version, data, tree = sys.argv[1:]
assert not [p for p in sys.path if p.startswith(tree)], sys.path
assert os.path.dirname(stoker.__file__) == pkg, stoker.__file__
assert stoker.lib_path == os.path.join(pkg, "libstoker.so.0"), stoker.lib_path
assert stoker.__version__ == stoker.lib_version() == version, (stoker.__version__, version)
want = {}
for root, _, files in os.walk(data):
    for f in files:
        p = os.path.join(root, f)
        want[p] = open(p, "rb").read()
got = []
with stoker.Loader(data, batch_size=4, shuffle=True, seed=1) as loader:
    for batch in loader:
        got += [bytes(batch.sample(i).numpy()) for i in range(batch.count)]
assert sorted(got) == sorted(want.values()), (len(got), len(want))
print("ok", len(got), "samples")
' || fail "import stoker from the venv and iterate a loader"
"$venv/bin/stoker" --version >"$tmp/out" 2>&1 || fail "the venv's stoker --version: exit $?"
grep -qx "stoker $version" "$tmp/out" || fail "the venv's stoker --version"

# --- the bundled library of another version, then missing -----------------------------
mv "$pkg/libstoker.so.0" "$tmp/libstoker.so.0.orig"
printf 'const char *stk_version(void) { return "9.9.9"; }\n' >"$tmp/stub.c"
cc -shared -fPIC -o "$pkg/libstoker.so.0" "$tmp/stub.c" || fail "cc stub library"
imp 'import stoker' && fail "import with a libstoker 9.9.9 bundled: no error"
grep -q "version $version but $pkg/libstoker.so.0 is libstoker 9.9.9" "$tmp/out" ||
	fail "the error does not name both versions and the library"
rm "$pkg/libstoker.so.0"
imp 'import stoker' && fail "import with no bundled library: no error"
grep -q "stoker $version: its bundled library $pkg/libstoker.so.0 is missing" "$tmp/out" ||
	fail "the error does not name the missing library and the version"
mv "$tmp/libstoker.so.0.orig" "$pkg/libstoker.so.0"

"$venv/bin/pip" uninstall -y -q stoker >"$tmp/out" 2>&1 || fail "pip uninstall stoker"
left=$(find "$venv" -iname '*stoker*' | head -n 5)
[ -z "$left" ] || fail "left after pip uninstall: $left"
echo "ok: venv install, import, loader, CLI, version checks, uninstall"
