#!/bin/sh
# The C example builds against the public header alone and reads every byte
# of an epoch: its checksum equals the files' own.  The decode loop decodes
# every file without an error.  The header also compiles
# as C++.
. "$(dirname "$0")/cli-common.sh"
t=$tmp
bin=$(dirname "$STOKER")
"$STOKER" gen "$t/d" --images 30 --classes 2 >/dev/null || { echo "FAIL: gen"; exit 1; }
out=$("$bin/examples/epoch" "$t/d" 7) || { echo "FAIL: example exit $?"; exit 1; }
want=$(cat "$t"/d/*/*.jpg | od -An -v -tu1 | tr -s ' ' '\n' | awk 'NF{s+=$1; n++} END{printf "%d bytes checksum %d", n, s}')
echo "$out" | grep -q "^30 samples $want\$" || { echo "FAIL: got '$out', want '30 samples $want'"; exit 1; }
# the decode loop (profiling harness) decodes every file of a round
out=$("$bin/examples/decode_loop" 2 "$t"/d/*/*.jpg 2>&1) || { echo "FAIL: decode_loop exit $?: $out"; exit 1; }
[ "$(echo "$out" | grep -c ' images/s$')" = 2 ] || { echo "FAIL: decode_loop: $out"; exit 1; }
if command -v g++ >/dev/null; then
	echo '#include <stoker/stoker.h>
#include <stoker/upload.h>
int main() { return stk_version() == nullptr; }' > "$t/x.cc"
	g++ -Wall -Wextra -Werror -fsyntax-only -Iinclude "$t/x.cc" || { echo "FAIL: header as C++"; exit 1; }
fi
exit 0
