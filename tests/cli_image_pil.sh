#!/bin/sh
# stoker's centre crop against torchvision/PIL (Resize(256) + CenterCrop(224)):
# within 2 grey levels on average (tests/image_vs_pil.py).  Passes only when
# the comparison ran and held; without torchvision/PIL it exits 77 with the
# reason (tests/cli.sh counts a skip, never a pass); anything else fails.
. "$(dirname "$0")/cli-common.sh"
t=$tmp
"$STOKER" gen "$t/d" --images 24 --classes 2 --seed 3 >/dev/null || fail "gen"
lib=$(dirname "$STOKER")/libstoker.so.0
# a sanitizer build of the library needs its runtime first in the process
pre=
if ldd "$lib" | grep -q libasan; then
	pre="$(cc -print-file-name=libasan.so) $(cc -print-file-name=libubsan.so)"
fi
LD_PRELOAD="$pre" ASAN_OPTIONS=detect_leaks=0 \
	/usr/bin/python3 "$(dirname "$0")/image_vs_pil.py" "$lib" "$t"/d/c0000/*.jpg >"$t/out" 2>&1
rc=$?
case $rc in
0) tail -n 1 "$t/out"; exit 0 ;;
77) echo "skipped: the comparison with torchvision: $(tail -n 1 "$t/out" | sed "s/^skipped: //") (Debian: python3-torchvision)"
    exit 77 ;;
*) cat "$t/out"; fail "centre crop differs from torchvision (image_vs_pil.py exit $rc)" ;;
esac
