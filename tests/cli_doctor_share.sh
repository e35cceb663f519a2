#!/bin/sh
# cli_doctor_share.sh — `stoker doctor`'s "cpu share" check: one process is
# ok and unpinned; ranks from --local-world-size or the launcher's environment
# (torchrun, Open MPI) get their share, and more ranks than CPUs (or more
# decode threads than the share) warn with the fix; a malformed environment
# is named.  Run by tests/cli.sh with $STOKER set.
. "$(dirname "$0")/cli-common.sh"
command -v taskset >/dev/null || { echo "skipped: no taskset (util-linux)"; exit 77; }
unset LOCAL_RANK LOCAL_WORLD_SIZE OMPI_COMM_WORLD_LOCAL_RANK OMPI_COMM_WORLD_LOCAL_SIZE
fail() {
	echo "FAIL: $*"
	sed 's/^/  out: /' "$tmp/out" | tail -n 20
	exit 1
}
share() { # the cpu share line and its why/fix lines
	"$@" >"$tmp/all" 2>&1
	awk '/ cpu share /{p=1; print; next} p && /^  [a-z]/{exit} p' "$tmp/all" >"$tmp/out"
}

# one process on one CPU: ok, not pinned
share taskset -c 0 "$S" doctor
grep -q "^  ok    cpu share      one process" "$tmp/out" || fail "one process: not ok"
grep -q "not pinned" "$tmp/out" || fail "one process: pinned?"

# three ranks on one CPU: more ranks than CPUs, warned with the fix
share taskset -c 0 "$S" doctor --local-world-size 3
grep -q "^  warn  cpu share      3 ranks on this host (--local-world-size)" "$tmp/out" ||
	fail "3 ranks on 1 CPU: no warning"
grep -q "fix: run at most 1 rank on this host" "$tmp/out" || fail "3 ranks: no fix"

# torchrun's environment, then Open MPI's, name their source
share env LOCAL_RANK=0 LOCAL_WORLD_SIZE=2 taskset -c 0 "$S" doctor
grep -q "2 ranks on this host (LOCAL_WORLD_SIZE)" "$tmp/out" || fail "LOCAL_WORLD_SIZE not read"
share env OMPI_COMM_WORLD_LOCAL_RANK=1 OMPI_COMM_WORLD_LOCAL_SIZE=2 taskset -c 0 "$S" doctor
grep -q "2 ranks on this host (OMPI_COMM_WORLD_LOCAL_SIZE).*rank 1's threads" "$tmp/out" ||
	fail "OMPI_COMM_WORLD_LOCAL_SIZE not read"

# a malformed launcher environment is named
share env LOCAL_WORLD_SIZE=two "$S" doctor
grep -q "warn  cpu share      environment LOCAL_WORLD_SIZE=two is not a positive integer" \
	"$tmp/out" || fail "LOCAL_WORLD_SIZE=two not named"

# on two CPUs, one rank with 4 decode threads oversubscribes its share
if taskset -c 0,1 true 2>/dev/null; then
	share taskset -c 0,1 "$S" doctor --local-world-size 1 --decode-threads 4
	grep -q "^  warn  cpu share .*CPU [01] left to the trainer" "$tmp/out" ||
		fail "1 rank, 2 CPUs: no trainer CPU or no warning"
	grep -q "1 rank x (4 decode threads + 1 training thread) = 5 threads for 2 CPUs" \
		"$tmp/out" || fail "the arithmetic is not shown"
	share taskset -c 0,1 "$S" doctor --local-world-size 1
	grep -q "^  ok    cpu share" "$tmp/out" || fail "1 rank, 2 CPUs, defaults: not ok"
fi
# --json has the check
"$S" doctor --json --local-world-size 2 >"$tmp/out" 2>&1
grep -q '"name": "cpu share"' "$tmp/out" || fail "--json lacks cpu share"
echo ok
