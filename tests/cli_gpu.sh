#!/bin/sh
# cli_gpu.sh — what of the GPU check runs without a GPU: bench/gpu_check.sh says
# there is none (no nvidia-smi, or one that cannot reach a driver) and exits 0;
# bench/gpu_prepare.sh's carried folder runs on its own (the CLI and
# `import stoker` with LD_LIBRARY_PATH only, every library but glibc's from the
# folder); and the training loop of the check runs on the CPU (--cpu-smoke:
# a tiny model fed by stoker and by DataLoader, JSON and table).  Run by
# tests/cli.sh with $STOKER and $BUILD set.
. "$(dirname "$0")/cli-common.sh"
B=${BUILD:-build}
root=$(cd "$(dirname "$0")/.." && pwd)
case "$B" in
*address* | *thread*) echo "skipped: the carried build is checked in the plain build ($B is sanitized)"; exit 77 ;;
esac

# --- 1. no GPU: said, exit 0 ---------------------------------------------------------
if ! nvidia-smi -L >/dev/null 2>&1; then
	sh "$root/bench/gpu_check.sh" "$tmp/nogpu" >"$tmp/out" 2>&1 || fail "no GPU: exit $?"
	grep -q 'no NVIDIA GPU on this machine' "$tmp/out" || fail "no GPU: not said"
	grep -q '"gpu": false' "$tmp/nogpu/gpu_check.json" || fail "no GPU: no JSON"
fi
# an nvidia-smi that cannot reach the driver (a container without the GPU)
mkdir -p "$tmp/bin"
printf '#!/bin/sh\necho "NVIDIA-SMI has failed because it couldn'"'"'t communicate with the NVIDIA driver."\nexit 9\n' \
	>"$tmp/bin/nvidia-smi"
chmod +x "$tmp/bin/nvidia-smi"
PATH="$tmp/bin:$PATH" sh "$root/bench/gpu_check.sh" "$tmp/nogpu2" >"$tmp/out" 2>&1 ||
	fail "broken driver: exit $?"
grep -q "no NVIDIA GPU on this machine (nvidia-smi -L: NVIDIA-SMI has failed" "$tmp/out" ||
	fail "broken driver: not said"

# --- 2. the carried folder, on its own ----------------------------------------------
NO_MAKE=1 OFFLINE=1 BUILD="$B" sh "$root/bench/gpu_prepare.sh" "$tmp/carry" >"$tmp/out" 2>&1 ||
	fail "gpu_prepare: exit $?"
c=$tmp/carry
for l in liburing.so.2 libjansson.so.4 libmicrohttpd.so.12 libjpeg.so.62 libcmocka.so.0; do
	[ -f "$c/deps/$l" ] || fail "the carried folder lacks $l"
	grep -q "^$l$" "$c/MANIFEST" || fail "MANIFEST does not list $l"
done
grep -Eq '^[0-9]+\.[0-9]+$' "$c/GLIBC" || fail "no GLIBC version: $(cat "$c/GLIBC")"
run() { env -i PATH=/usr/bin:/bin LD_LIBRARY_PATH="$c/lib:$c/deps" "$@"; }
run "$c/bin/stoker" --version >"$tmp/out" 2>&1 || fail "the carried CLI does not run"
grep -q "^stoker $("$S" --version | awk '{print $2}')" "$tmp/out" || fail "carried CLI: $(cat "$tmp/out")"
run LD_TRACE_LOADED_OBJECTS=1 "$c/bin/stoker" >"$tmp/out" 2>&1 || fail "ld.so trace"
awk '/=> \//{print $1, $3}' "$tmp/out" | while read -r name path; do
	case "$name" in libc.so* | libm.so* | libdl.so* | libpthread.so* | librt.so* | libresolv.so*) continue ;; esac
	case "$path" in "$c"/*) ;; *) echo "$name from $path"; exit 1 ;; esac
done >"$tmp/stray" || fail "a library does not come from the carried folder: $(cat "$tmp/stray")"
run "$c/bin/stoker" gen "$tmp/g" --images 6 --classes 2 >"$tmp/out" 2>&1 || fail "carried gen"
if "$PY" -c 'import torch' 2>/dev/null; then
	(cd "$tmp" && run PYTHONPATH="$c/python" "$PY" -c '
import sys, stoker
maps = [l.split()[-1] for l in open("/proc/self/maps") if "libstoker" in l]
assert maps and all(m.startswith(sys.argv[1]) for m in maps), maps
with stoker.Loader(sys.argv[2], 2) as l:
    assert sum(b.labels.numel() for b in l) == 6
print("ok", stoker.lib_version())' "$c" "$tmp/g") >"$tmp/out" 2>&1 || fail "import stoker from the carried folder"
else
	echo "note: no torch for $PY: the carried package's import and the CPU smoke are skipped"
	echo ok
	exit 0
fi

# --- 3. the check's training loop, on the CPU ----------------------------------------
PYTHON=$PY CARRY="$c" DATA="$tmp/data" sh "$root/bench/gpu_check.sh" --cpu-smoke "$tmp/smoke" >"$tmp/out" 2>&1 ||
	fail "--cpu-smoke: exit $?"
grep -q 'stoker / DataLoader: ' "$tmp/smoke/gpu_check.txt" || fail "--cpu-smoke: no table"
[ "$(ls "$tmp/smoke")" = "$(printf 'gpu_check.json\ngpu_check.txt')" ] ||
	fail "--cpu-smoke wrote more than its results into OUT: $(ls "$tmp/smoke")"
"$PY" - "$tmp/smoke/gpu_check.json" "$tmp/data" <<'PYEOF' || fail "--cpu-smoke: the JSON"
import json, math, sys
j = json.load(open(sys.argv[1]))
assert j["mode"] == "cpu", j
f = j["parts"]["feed"]
assert f["status"] == "ok", f
for side in ("stoker", "dataloader"):
    assert f["images_per_s"][side] > 0, f
    for run in f[side]:
        assert math.isfinite(run["loss"]) and 0 <= run["stall"] <= 1, run
        assert run["verdict"]["kind"], run
assert f["stoker"][0]["verdict"]["kind"] in ("consumer-bound", "storage-bound", "decode-bound",
    "io-thread-bound", "configuration", "gpu-copy-bound", "unknown"), f["stoker"][0]
assert [x["workers"] for x in f["dataloader_sweep"]] == [0, 2], f["dataloader_sweep"]
assert f["ratio"] > 0
assert j["dataset"]["images"] == 96 and j["dataset"]["dir"] == sys.argv[2], j["dataset"]
PYEOF
echo ok
