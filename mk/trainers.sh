#!/bin/sh
# The trainers' virtual environment for tests/python/test_trainers.py:
# lightning and accelerate (PyPI) over torch 2.x, which Debian does not
# package.  ~/.cache/stoker/trainers (or $1; make test: build/trainers-venv,
# mk/venvs.sh).  Made once; kept while it imports.  A torch 2.x already in
# $STOKER_PEERS or ~/.cache/stoker/peers (the peers' environment; make test:
# build/torch-venv) is used as it is (a .pth), else torch comes from PyPI.
set -e
V=${1:-$HOME/.cache/stoker/trainers}
PY=${PYTHON:-/usr/bin/python3}
if [ -x "$V/bin/python" ] && "$V/bin/python" -c 'import lightning, accelerate, torch, torchvision' 2>/dev/null; then
	exit 0
fi
"$PY" -m venv "$V"
peers=${STOKER_PEERS:-$HOME/.cache/stoker/peers}
site=$("$V/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
if [ -x "$peers/bin/python" ] && "$peers/bin/python" -c 'import torch, torchvision' 2>/dev/null; then
	"$peers/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' >"$site/stoker-peers.pth"
else
	"$V/bin/pip" install -q torch==2.14.1 torchvision==0.29.1
fi
"$V/bin/pip" install -q lightning accelerate pytest numpy
"$V/bin/python" -c 'import lightning, accelerate, torch; print("trainers:", torch.__version__, "lightning", lightning.__version__, "accelerate", accelerate.__version__)'
