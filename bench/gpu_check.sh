#!/bin/sh
# bench/gpu_check.sh — the GPU path proven on a GPU (issue 16), in one run
# under 6 minutes: the CUDA tests that skip elsewhere, host->GPU bandwidth from
# stoker's pinned slots against PyTorch's pinned and pageable memory, a
# ResNet-50 fed by stoker against DataLoader at its best worker count, and
# stoker's NVML figures against nvidia-smi (bench/gpu_check.py says how).
#
#   sh bench/gpu_check.sh [OUT]              # results: OUT/gpu_check.{json,txt}
#   sh bench/gpu_check.sh --cpu-smoke [OUT]  # the training loop on the CPU, tiny
#
# On a machine without an NVIDIA GPU it says so and exits 0 at once.  It uses
# the carried build when there is one (bench/gpu_prepare.sh writes build/gpu:
# binaries, libstoker, the shared libraries they link, the Python package; set
# CARRY to another folder), else the tree's build/.  PYTHON: the interpreter
# with PyTorch (default: the first python3 whose torch sees CUDA, in GPU mode).
# BUDGET: seconds for the checks (default 320).  DATA: the generated dataset's
# folder (default build/gpu-check-data-N; not under OUT, which stays small).
# Exit 1 when a check failed or missed its target.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
mode=gpu
if [ "${1:-}" = --cpu-smoke ]; then
	mode=cpu
	shift
fi
out=${1:-$root/build/gpu-check}
mkdir -p "$out" || exit 1

if [ $mode = gpu ]; then
	why=
	if ! command -v nvidia-smi >/dev/null 2>&1; then
		why="no nvidia-smi (no NVIDIA driver installed)"
	elif ! gpus=$(nvidia-smi -L 2>&1) || [ -z "$gpus" ]; then
		why="nvidia-smi -L: $(echo "$gpus" | head -n 1)"
	fi
	if [ -n "$why" ]; then
		echo "gpu_check: no NVIDIA GPU on this machine ($why): nothing to check"
		printf '{"schema_version": 1, "mode": "gpu", "gpu": false, "why": "%s"}\n' \
			"$(echo "$why" | tr -d '"\\')" >"$out/gpu_check.json"
		exit 0
	fi
	echo "gpu_check: $gpus"
fi

# The build: carried (with its libraries), else the tree's.
CARRY=${CARRY:-$root/build/gpu}
[ -d "$CARRY" ] && CARRY=$(cd "$CARRY" && pwd)
if [ -f "$CARRY/env.sh" ]; then
	. "$CARRY/env.sh"
	need=$(cat "$CARRY/GLIBC" 2>/dev/null)
	have=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')
	if [ -n "$need" ] && [ -n "$have" ] &&
		[ "$(printf '%s\n%s\n' "$need" "$have" | sort -V | head -n 1)" != "$need" ]; then
		echo "gpu_check: the carried build needs glibc $need, this machine has $have:" \
			"build it here (make) or on an older system"
		exit 1
	fi
	echo "gpu_check: carried build $CARRY ($(cat "$CARRY/MANIFEST" 2>/dev/null | head -n 1))"
elif [ -x "$root/build/stoker" ]; then
	export STOKER="$root/build/stoker" STOKER_LIB="$root/build/libstoker.so.0"
	export PYTHONPATH="$root/python${PYTHONPATH:+:$PYTHONPATH}"
	echo "gpu_check: the tree's build ($root/build)"
else
	echo "gpu_check: no build: run make (or bench/gpu_prepare.sh, and carry build/gpu)"
	exit 1
fi

if [ -z "${PYTHON:-}" ]; then
	for p in python3 /usr/bin/python3; do
		command -v "$p" >/dev/null 2>&1 || continue
		if [ $mode = cpu ] && "$p" -c 'import torch' 2>/dev/null; then PYTHON=$p; break; fi
		if "$p" -c 'import torch, sys; sys.exit(not torch.cuda.is_available())' 2>/dev/null; then
			PYTHON=$p
			break
		fi
	done
	PYTHON=${PYTHON:-python3}
fi
budget=${BUDGET:-}
limit=$(( ${budget:-320} + 40 ))
exec timeout -k 10 "$limit" "$PYTHON" "$root/bench/gpu_check.py" --mode "$mode" --out "$out" \
	${budget:+--budget "$budget"} ${DATA:+--data "$DATA"}
