#!/bin/sh
# bench/peers/setup.sh — the virtual environment the peers run in, for
# `stoker bench --vs dali,spdl,...` and for the binding's tests on PyTorch 2.x.
#
#   sh bench/peers/setup.sh [PEER...]      (make peers; default: every peer)
#
# Made under ${XDG_CACHE_HOME:-~/.cache}/stoker/peers (or $STOKER_PEERS):
# PyTorch 2.x and torchvision first (the versions whose wheels this project's
# machines hold: other versions download gigabytes), pytest, then each peer
# on its own.  A peer that will not install is written to peers.txt beside
# the venv with the last lines of its error, and the others still install;
# the bench reads peers.txt to say why a peer was skipped.  Idempotent: a peer
# already importable is not reinstalled.  Exit 0 when torch installed (the
# peers' own failures are reported, not fatal), 1 when it did not.
set -u
TORCH_PINS=${STOKER_TORCH_PINS:-"torch==2.14.1 torchvision==0.29.1"}
DIR=${STOKER_PEERS:-${XDG_CACHE_HOME:-$HOME/.cache}/stoker/peers}
PY=${PYTHON:-python3}
say() { printf 'peers: %s\n' "$*"; }

if [ ! -x "$DIR/bin/python" ]; then
	mkdir -p "$(dirname "$DIR")"
	"$PY" -m venv "$DIR" || { say "cannot make a venv with $PY (Debian: apt-get install python3-venv)"; exit 1; }
fi
VPY=$DIR/bin/python
PIP="$VPY -m pip install -q --no-input"
LOG=$DIR/peers.txt
STATUS=$DIR/peers.status
touch "$STATUS"

# name|import check|pip arguments.  torch's venv also serves the binding's
# tests on PyTorch 2.x (make test-py-venv, test-wheel): PyAV with it, so the
# video pixel tests run there too.  The video peers (bench/video_bench.py):
# av is PyAV with the FFmpeg its wheel bundles; torchcodec loads the system's
# FFmpeg (Debian 12: 5.1, which its wheels support), its import check loads it,
# and torch stays pinned (pip would otherwise fetch the newest);
# decord's 0.6.0 wheel is py3-none (any CPython 3) with its own FFmpeg;
# DALI's video reader on the CPU comes with the dali entry.
PEERS='torch|import torch, torchvision, av|'"$TORCH_PINS"' numpy pytest av
dali|import nvidia.dali|nvidia-dali-cuda120
spdl|import spdl.io|spdl
simplejpeg|import simplejpeg|simplejpeg
streaming|import streaming, boto3|mosaicml-streaming boto3
litdata|import litdata, boto3|litdata boto3
wds|import webdataset|webdataset
torchdata|from torchdata.stateful_dataloader import StatefulDataLoader|torchdata
ffcv|import ffcv|ffcv
pillow-simd|import PIL; assert "post" in PIL.__version__|pillow-simd
av|import av|av
torchcodec|from torchcodec.decoders import VideoDecoder|torchcodec '"$TORCH_PINS"'
decord|import decord|decord'

want=" ${*:-all} "
# Debian libraries the peers load or build against: SPDL and torchcodec dlopen FFmpeg's
# (Debian 12: 5.1); FFCV's setup.py finds OpenCV and libturbojpeg with
# pkg-config.  Installed as root (like mk/deps.sh), else the line is printed.
DEB="libavdevice59 libavfilter8 libavformat59 libavcodec59 libswscale6 libswresample4 libavutil57 \
	libopencv-dev libturbojpeg0-dev pkg-config"
missing=
for p in $DEB; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
case "$want" in *" all "*|*" spdl "*|*" ffcv "*|*" torchcodec "*) ;; *) missing= ;; esac
if [ -n "$missing" ] && command -v apt-get >/dev/null; then
	if [ "$(id -u)" = 0 ]; then
		say "installing Debian packages:$missing"
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >/dev/null ||
			{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
				--no-install-recommends $missing >/dev/null; } ||
			say "could not install$missing (SPDL and FFCV will fail)"
	else
		say "SPDL and FFCV need: sudo apt-get install -y$missing"
	fi
fi
record() { # name state detail
	grep -v "^$1	" "$STATUS" > "$STATUS.tmp"; printf '%s\t%s\t%s\n' "$1" "$2" "$3" >> "$STATUS.tmp"
	mv "$STATUS.tmp" "$STATUS"
}

echo "$PEERS" | while IFS='|' read -r name check args; do
	case "$want" in *" all "*|*" $name "*) ;; *) [ "$name" = torch ] || continue ;; esac
	if "$VPY" -c "$check" >/dev/null 2>&1; then
		say "$name: already installed"; record "$name" ok ""; continue
	fi
	say "$name: pip install $args"
	t0=$(date +%s)
	out=$DIR/pip-$name.log
	case "$name" in
	pillow-simd)
		# Built from source (libjpeg and zlib headers); it replaces Pillow, so the
		# wheel is built first and Pillow is swapped only when the build worked.
		rm -rf "$DIR/wheels" && mkdir -p "$DIR/wheels"
		if CC="cc -mavx2" "$VPY" -m pip wheel -q --no-deps -w "$DIR/wheels" pillow-simd >"$out" 2>&1; then
			"$VPY" -m pip uninstall -q -y pillow >>"$out" 2>&1
			$PIP --no-deps "$DIR"/wheels/pillow_simd*.whl >>"$out" 2>&1
		else false; fi ;;
	*) $PIP $args >"$out" 2>&1 ;;
	esac
	rc=$?
	if [ $rc -eq 0 ] && "$VPY" -c "$check" >>"$out" 2>&1; then
		say "$name: installed ($(( $(date +%s) - t0 )) s)"; record "$name" ok ""
	else
		err=$(grep -E 'RuntimeError|ModuleNotFoundError|ImportError|fatal error|No matching|Could not find' \
			"$out" | tail -n 2 | sed 's/^ *//' | tr '\t\n' '  ')
		[ -n "$err" ] || err=$(grep -iE 'error|fatal|not found' "$out" | tail -n 3 | tr '\t\n' '  ')
		[ -n "$err" ] || err=$(tail -n 3 "$out" | tr '\t\n' '  ')
		say "$name: FAILED: $err (full log: $out)"; record "$name" failed "$err"
	fi
done

{
	echo "# peers in $DIR ($(date -u +%Y-%m-%dT%H:%MZ))"
	"$VPY" - <<'PYEOF'
import importlib.metadata as m
for d in ("torch", "torchvision", "nvidia-dali-cuda120", "spdl", "simplejpeg", "pillow", "pillow-simd",
          "mosaicml-streaming", "litdata", "boto3", "webdataset", "torchdata", "ffcv", "numpy",
          "av", "torchcodec", "decord"):
    try:
        print("%s %s" % (d, m.version(d)))
    except m.PackageNotFoundError:
        pass
PYEOF
	sed 's/^/status /' "$STATUS"
} > "$LOG"
cat "$LOG"
"$VPY" -c "import torch" 2>/dev/null || exit 1
exit 0
