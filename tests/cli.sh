#!/bin/sh
# Runs each tests/cli_*.sh against $BUILD/stoker.  Each script exits 0 (pass),
# 77 (skipped, with the reason on its last line) or anything else (fail).
BUILD=${BUILD:-build}
export STOKER="$(pwd)/$BUILD/stoker" STOKER_NO_PROGRESS=1
pass=0; fail=0; skip=0
for t in tests/cli_*.sh; do
	[ -e "$t" ] || continue
	out=$(sh "$t" 2>&1); rc=$?
	name=$(basename "$t" .sh)
	if [ $rc = 0 ]; then pass=$((pass + 1)); echo "[ PASS ] $name"
	elif [ $rc = 77 ]; then skip=$((skip + 1)); echo "[ SKIP ] $name: $(echo "$out" | tail -n 1)"
	else fail=$((fail + 1)); echo "[ FAIL ] $name"; echo "$out" | tail -n 30 | sed 's/^/    /'; fi
done
echo "CLI tests: $pass passed, $fail failed, $skip skipped"
[ $fail = 0 ]
