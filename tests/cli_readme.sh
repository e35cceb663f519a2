#!/bin/sh
# The README's first example ("Use it in PyTorch") is examples/quickstart.py:
# the README shows exactly its lines, and they run as written (on a generated
# folder in place of /data/train), ending with the loader's verdict.  `import
# stoker` where torch is not says how to get it.  Run by tests/cli.sh with
# $STOKER set.
. "$(dirname "$0")/cli-common.sh"
ex=$top/examples/quickstart.py
# the README's first python block, against the example without its opening comment
awk '/^```python$/ && !n {n = 1; on = 1; next} on && /^```$/ {exit} on' "$top/README.md" >"$tmp/readme.py"
grep -v '^#' "$ex" >"$tmp/example.py"
[ -s "$tmp/readme.py" ] || fail "no python block in README.md"
diff -u "$tmp/example.py" "$tmp/readme.py" >"$tmp/out" ||
	fail "README.md's first python block is not examples/quickstart.py (diff above)"
"$PY" -c 'import torch' 2>/dev/null || fail "no torch for $PY (Debian: apt-get install python3-torch)"
"$S" gen "$tmp/d" --images 150 --classes 3 >/dev/null || fail "gen"
lib=$(dirname "$S")/libstoker.so.0
# a sanitizer build of the library needs its runtime first in the process
pre=
if ldd "$lib" | grep -q libasan; then
	pre="$(cc -print-file-name=libasan.so) $(cc -print-file-name=libubsan.so)"
fi
sed "s|\"/data/train\"|\"$tmp/d\"|" "$ex" >"$tmp/run.py"
grep -q "$tmp/d" "$tmp/run.py" || fail "no \"/data/train\" in $ex to point at the test's folder"
LD_PRELOAD="$pre" ASAN_OPTIONS=detect_leaks=0 STOKER_LIB=$lib PYTHONPATH=$top/python \
	"$PY" "$tmp/run.py" >"$tmp/out" 2>"$tmp/err" || fail "examples/quickstart.py exit $?"
grep -Eq '^[a-z-]+: .*; try: ' "$tmp/out" || fail "no verdict line"
# without torch (no site packages: Debian's PyTorch is one)
LD_PRELOAD="$pre" ASAN_OPTIONS=detect_leaks=0 STOKER_LIB=$lib PYTHONPATH=$top/python \
	"$PY" -S -c 'import stoker' >"$tmp/out" 2>"$tmp/err" && fail "import stoker with no torch"
grep -q "^ImportError: stoker needs PyTorch.* apt-get install python3-torch" "$tmp/err" ||
	fail "import stoker with no torch: not said how to get it"
exit 0
