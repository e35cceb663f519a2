#!/bin/sh
# Runs the cmocka test binaries; prints one closing line for the lot.
# usage: run_c.sh BUILD BIN...
build=$1; shift
pass=0; fail=0; failed=
for t in "$@"; do
	if "$t"; then pass=$((pass + 1)); else fail=$((fail + 1)); failed="$failed $(basename "$t")"; fi
done
echo "C test binaries: $pass passed, $fail failed${failed:+ ($failed )}"
[ "$fail" = 0 ]
