#!/bin/sh
# cli_mpi.sh — `mpirun -np 4 stoker bench|disk`: each rank its share, rank 0
# prints the aggregate and the spread (and JSON with both); options that
# differ across ranks are refused; a rank that fails (a file cut short, which
# no longer decodes, under --image --on-error fail), is killed, or stops ends the job with its rank and reason
# on the output, not a hang; without Open MPI's library the message says what
# to install.  Run by tests/cli.sh with $STOKER set.
. "$(dirname "$0")/cli-common.sh"
command -v mpirun >/dev/null || { echo "skipped: no mpirun (apt-get install openmpi-bin libopenmpi-dev)"; exit 77; }
case "$S" in *build-*thread*)
	echo "skipped: Open MPI under ThreadSanitizer reports its own threads (the MPI code runs in the plain and ASan passes)"
	exit 77 ;;
*build-*address*)
	# AddressSanitizer stays on; leak checking is off: libmpi's plugins, loaded
	# and unloaded by MPI_Init/MPI_Finalize, leave allocations LeakSanitizer
	# cannot even name (frames in an unknown module)
	export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" ;;
esac
cleanup() {
	for p in $(pgrep -f "$tmp" 2>/dev/null); do kill -CONT "$p" 2>/dev/null; kill -9 "$p" 2>/dev/null; done
}
MPI="mpirun --allow-run-as-root --oversubscribe"
[ -n "${ASAN_OPTIONS:-}" ] && MPI="$MPI -x ASAN_OPTIONS"
# containers without ptrace refuse the shared-memory transport's single-copy mode
export OMPI_MCA_btl_vader_single_copy_mechanism=none
"$S" gen "$tmp/ds" --images 200 --classes 4 >/dev/null 2>&1 || fail "gen"

# --- 1. bench: the aggregate, the spread, the slowest rank; JSON ----------------
timeout 120 $MPI -np 4 "$S" bench "$tmp/ds" --runtime 0.5 --ramp 0.1 --compute-ms 1 >"$tmp/out" 2>&1 ||
	fail "mpirun bench exited $?"
grep -q "mpirun: 4 ranks on 1 host" "$tmp/out" || fail "no ranks line"
grep -q "^  samples/s  .*[0-9]" "$tmp/out" || fail "no aggregate samples/s"
grep -q "accelerator utilization" "$tmp/out" || fail "no AU % with --compute-ms"
grep -q "batch wait p50/p99/max.*merged over the ranks" "$tmp/out" || fail "no merged latency"
grep -q "slowest  *rank [0-3] " "$tmp/out" || fail "the slowest rank is not named"
[ "$(grep -c '^stoker bench:' "$tmp/out")" = 1 ] || fail "more than one rank printed a report"
timeout 120 $MPI -np 4 "$S" bench "$tmp/ds" --runtime 0.5 --ramp 0.1 --json >"$tmp/json" 2>"$tmp/out" ||
	fail "mpirun bench --json exited $?"
$PY - "$tmp/json" <<'EOF' || fail "bench JSON"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["mpi"]["world_size"] == 4, d["mpi"]
assert d["rank_samples"] == 50, d["rank_samples"]          # 200 samples, rank r of 4
ranks = d["ranks"]
assert [r["rank"] for r in ranks] == [0, 1, 2, 3]
agg = d["aggregate"]
assert agg["samples"] == sum(r["samples"] for r in ranks) > 0, d
assert agg["bytes"] == sum(r["bytes"] for r in ranks), d
assert abs(agg["seconds"] - max(r["seconds"] for r in ranks)) <= 1e-9 * agg["seconds"], d
assert abs(agg["samples_per_s"] - agg["samples"] / agg["seconds"]) < 1e-6 * agg["samples_per_s"], d
sp = d["spread"]["samples_per_s"]
assert sp["min"] <= sp["median"] <= sp["max"]
assert d["slowest"]["rank"] == sp["slowest_rank"]
assert d["slowest"]["samples_per_s"] == min(r["samples_per_s"] for r in ranks)
assert agg["batch_wait_ns"]["p99"] >= agg["batch_wait_ns"]["p50"] > 0
EOF

# --- 2. disk: each rank its own files, aggregate + spread, nothing left ---------
mkdir "$tmp/disk"
timeout 300 $MPI -np 4 "$S" disk "$tmp/disk" --pattern seqwrite,randread,smallfiles --size 8MiB \
	--runtime 0.3 --ramp 0 --files 40 --no-drop --json >"$tmp/json" 2>"$tmp/out" ||
	fail "mpirun disk exited $?"
$PY - "$tmp/json" <<'EOF' || fail "disk JSON"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["mpi"]["world_size"] == 4, d["mpi"]
cases = d["mpi"]["cases"]
assert [c["pattern"] for c in cases] == ["seqwrite", "randread", "smallfiles"], cases
for c, res in zip(cases, d["results"]):
    assert len(c["ranks"]) == 4 and all(r["err"] == 0 for r in c["ranks"]), c
    assert c["mb_per_s"]["min"] <= c["mb_per_s"]["median"] <= c["mb_per_s"]["max"], c
assert d["results"][2]["smallfiles"]["files"] == 160, d["results"][2]   # 40 files each
EOF
[ -z "$(ls -A "$tmp/disk")" ] || fail "disk left files: $(ls -A "$tmp/disk")"
timeout 300 $MPI -np 2 "$S" disk "$tmp/disk" --pattern randread --size 8MiB --runtime 0.3 \
	--ramp 0 --no-drop >"$tmp/out" 2>&1 || fail "mpirun disk (table) exited $?"
grep -q "per rank (mpirun: 2 ranks" "$tmp/out" || fail "no per-rank spread table"
grep -q "slowest rank" "$tmp/out" || fail "no slowest rank"

# --- 3. options that differ across ranks are refused -------------------------
timeout 120 $MPI -np 2 "$S" bench "$tmp/ds" --runtime 0.2 --batch-size 16 : \
	-np 2 "$S" bench "$tmp/ds" --runtime 0.2 --batch-size 32 >"$tmp/out" 2>&1
rc=$?
[ $rc = 2 ] || fail "different options: exit $rc, want 2"
grep -q "rank 0 has 'batch_size=16', rank 2 has 'batch_size=32'" "$tmp/out" ||
	fail "the difference is not named"

# --- 4. a rank that fails names itself and the file on rank 0's output -------
cp -r "$tmp/ds" "$tmp/bad"
"$S" bench "$tmp/bad" --runtime 0 --epochs 1 --no-baseline >/dev/null 2>&1  # index cached
victim=$(ls "$tmp/bad/c0002" | head -n 1)
truncate -s 10 "$tmp/bad/c0002/$victim"
timeout 120 $MPI -np 4 "$S" bench "$tmp/bad" --image --runtime 0 --epochs 1 --on-error fail \
	--cache as-is >"$tmp/out" 2>&1
rc=$?
[ $rc = 1 ] || fail "a failing rank: exit $rc, want 1"
grep -q "^stoker bench: rank [0-3] ([^)]*): .*c0002/$victim: corrupt JPEG" "$tmp/out" ||
	fail "the failing rank and file are not named"

# --- 5. a killed rank ends the job, named, within seconds --------------------
t0=$(date +%s)
timeout 120 $MPI -np 4 "$S" bench "$tmp/ds" --runtime 60 --cache as-is >"$tmp/out" 2>&1 &
job=$!
victim=
for _ in $(seq 1 100); do
	for p in $(pgrep -f "bench $tmp/ds --runtime 60"); do
		tr '\0' '\n' </proc/$p/environ 2>/dev/null | grep -qx OMPI_COMM_WORLD_RANK=2 && victim=$p
	done
	[ -n "$victim" ] && break
	sleep 0.1
done
[ -n "$victim" ] || fail "rank 2 not found"
sleep 1
kill -9 "$victim"
wait $job
rc=$?
[ $rc != 0 ] || fail "a killed rank: exit 0"
[ $(($(date +%s) - t0)) -lt 50 ] || fail "a killed rank: the job took more than 50 s"
grep -q "rank 2.*signal 9" "$tmp/out" || fail "the killed rank is not named"

# --- 6. a rank that stops: the others give up after STOKER_MPI_TIMEOUT ---------
t0=$(date +%s)
STOKER_MPI_TIMEOUT=3 timeout 120 $MPI -x STOKER_MPI_TIMEOUT -np 4 "$S" bench "$tmp/ds" \
	--runtime 4 --ramp 0 --cache as-is >"$tmp/out" 2>&1 &
job=$!
victim=
for _ in $(seq 1 100); do
	for p in $(pgrep -f "bench $tmp/ds --runtime 4 "); do
		tr '\0' '\n' </proc/$p/environ 2>/dev/null | grep -qx OMPI_COMM_WORLD_RANK=2 && victim=$p
	done
	[ -n "$victim" ] && break
	sleep 0.1
done
[ -n "$victim" ] || fail "rank 2 not found (stop)"
sleep 1.5 # in the run: a rank stopped inside MPI_Init hangs Open MPI itself
kill -STOP "$victim"
wait $job
rc=$?
kill -CONT "$victim" 2>/dev/null
[ $rc != 0 ] || fail "a stopped rank: exit 0"
[ $(($(date +%s) - t0)) -lt 60 ] || fail "a stopped rank: the job hung"
grep -q "rank 2 did not reach '[a-z ]*' within 3 s" "$tmp/out" || fail "the stopped rank is not named"

# --- 7. without Open MPI's library: what to install --------------------------
OMPI_COMM_WORLD_SIZE=2 STOKER_LIBMPI=/nonexistent/libmpi.so LD_LIBRARY_PATH=/nonexistent \
	"$S" bench "$tmp/ds" --runtime 0.1 >"$tmp/out" 2>&1
grep -q "started by mpirun .*install it" "$tmp/out" || [ -e /usr/lib/x86_64-linux-gnu/libmpi.so.40 ] ||
	fail "no install hint"
STOKER_NO_MPI=1 OMPI_COMM_WORLD_SIZE=2 "$S" bench "$tmp/ds" --runtime 0.1 --repeat 1 \
	--no-baseline >"$tmp/out" 2>&1 || fail "STOKER_NO_MPI=1: not one process"
echo ok
