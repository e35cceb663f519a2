#!/bin/sh
# stoker bench --vs PEER,...: a bad name is a usage error; without the peers'
# venv, or with an interpreter that cannot import PyTorch, the bench still
# runs and one line says what was skipped and how to install it (no traceback).
. "$(dirname "$0")/cli-common.sh"
t=$tmp
cd "$t" || exit 1
QUICK="--runtime 0 --ramp 0 --repeat 1 --no-baseline -E 1"
"$STOKER" gen data --images 20 --classes 2 --seed 1 >/dev/null || fail "gen"

"$STOKER" bench $QUICK data --vs dali,tensorflow 2>err; [ $? = 2 ] || fail "--vs unknown not exit 2"
grep -q "'tensorflow' is not a peer" err || fail "unknown peer not named: $(cat err)"

out=$(STOKER_PEERS_PYTHON= STOKER_PEERS="$t/none" "$STOKER" bench $QUICK data --vs dali,spdl 2>&1) ||
	fail "--vs dali without a venv must still succeed: $out"
echo "$out" | grep -q "vs the peers: not run: skipped dali,spdl: no peers environment at $t/none; make it with: make peers" ||
	fail "no venv: $out"

# an interpreter without PyTorch (Python without its site packages)
printf '#!/bin/sh\nexec %s -S "$@"\n' "$(command -v python3)" > nosite && chmod +x nosite
out=$(STOKER_PYTHON="$t/nosite" "$STOKER" bench $QUICK data --vs torch 2>&1) || fail "--vs torch, no torch: $out"
echo "$out" | grep -q "DataLoader: not run: skipped: $t/nosite (ModuleNotFoundError: No module named 'torch'); install: apt-get install python3-torch" ||
	fail "no torch: $out"
echo "$out" | grep -q Traceback && fail "a traceback: $out"
exit 0
