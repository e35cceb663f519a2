#!/bin/sh
# cli_layers.sh — the tree's one-way rule (tests/layers.py): in src/ and
# tools/ a file includes and calls only its own folder and the folders below
# it, and no two files call each other, directly or round a loop.  The
# checker first refuses made-up trees that break each rule.  Run by
# tests/cli.sh with $STOKER set (its folder holds the objects).
. "$(dirname "$0")/cli-common.sh"
command -v nm >/dev/null 2>&1 || { echo "FAIL: nm is missing (Debian: binutils)"; exit 1; }
PY=${PYTHON:-python3}
command -v "$PY" >/dev/null 2>&1 || PY=python3
"$PY" "$here/layers.py" "$top" "$(dirname "$S")"
