#!/bin/sh
# An index cache that cannot be written anywhere (a read-only data folder
# and a cache path that is a file, or a full disk) is said once, with where
# it was tried and why; loading stays correct.
. "$(dirname "$0")/cli-common.sh"
set -uf
t=$tmp
ro=""
cleanup() { [ -n "$ro" ] && umount "$ro" 2>/dev/null; umount "$t/full" 2>/dev/null; rm -rf "$t"; }
cd "$t" || exit 1
QUICK="--runtime 0 --ramp 0 --no-baseline --extensions *"

mkdir -p src/a src/b
for i in 1 2 3 4 5 6 7; do echo "a$i" > src/a/$i.bin; echo "b$i" > src/b/$i.bin; done
# the data folder read-only: a read-only bind mount as root, else its mode
if [ "$(id -u)" = 0 ]; then
	mkdir data
	if mount --bind src data 2>/dev/null && mount -o remount,bind,ro data 2>/dev/null; then
		ro="$t/data"
	else
		umount data 2>/dev/null
		echo "cannot mount a read-only folder here (no CAP_SYS_ADMIN)"
		exit 77
	fi
else
	mv src data && chmod 555 data data/a data/b
fi
touch afile

# cache_dir is a file: where it was tried named with the reason, once over
# three runs, every sample still read; the data folder is not tried (the
# cache goes beside the data only with --index-beside)
"$STOKER" bench $QUICK --repeat 3 --cache-dir afile --json data >out.json 2>err ||
	fail "bench exit $?: $(cat err)"
[ "$(grep -c "index cache not written" err)" = 1 ] || fail "not said once: $(cat err)"
grep -q "afile/index-[0-9a-f]*: Not a directory" err || fail "cache_dir not named: $(cat err)"
! grep -q "stoker-index" err || fail "the data folder tried without --index-beside: $(cat err)"
# --index-beside: both places named with their reasons
"$STOKER" bench $QUICK --repeat 1 --index-beside --cache-dir afile data >/dev/null 2>err ||
	fail "beside exit $?: $(cat err)"
grep -q "index cache not written, so every start indexes data again: .*data/.stoker-index: " err ||
	fail "beside the data not named: $(cat err)"
grep -q "afile/index-[0-9a-f]*: Not a directory" err || fail "cache_dir not named (beside): $(cat err)"
/usr/bin/python3 -c 'import json,sys; s=json.load(open("out.json"))["stoker"]; assert s["samples"] == 14 and s["errors"] == 0, s' ||
	fail "samples"
# the default user cache folder under a file ($XDG_CACHE_HOME/stoker cannot be made)
XDG_CACHE_HOME="$t/afile" "$STOKER" bench $QUICK --repeat 1 data >/dev/null 2>err || fail "xdg exit $?"
grep -q "afile/stoker/index-[0-9a-f]*: Not a directory" err || fail "XDG cache not named: $(cat err)"
# --quiet: nothing said
"$STOKER" bench $QUICK --repeat 1 --quiet --cache-dir afile data >/dev/null 2>err || fail "quiet"
! grep -q "index cache" err || fail "said under --quiet: $(cat err)"

# a --cache-dir whose parents do not exist: made as mkdir -p would, the folder
# itself private, and the index written there (as the remote cache's folder is)
"$STOKER" bench $QUICK --repeat 1 --cache-dir new/deep/idx data >/dev/null 2>err || fail "deep exit $?"
[ -n "$(find new/deep/idx -name 'index-*' -type f)" ] ||
	fail "no index in a --cache-dir made with its parents: $(cat err)"
[ "$(stat -c %a new/deep/idx)" = 700 ] || fail "--cache-dir not private: $(stat -c %a new/deep/idx)"

# a full disk (a 4 KiB tmpfs, filled): ENOSPC named
if [ -n "$ro" ] && mkdir full && mount -t tmpfs -o size=4k,mode=0755 tmpfs full 2>/dev/null; then
	dd if=/dev/zero of=full/fill bs=1k count=16 2>/dev/null
	"$STOKER" bench $QUICK --repeat 1 --cache-dir full data >/dev/null 2>err || fail "full exit $?"
	grep -q "full/index-[0-9a-f]*: No space left on device" err || fail "ENOSPC: $(cat err)"
fi
exit 0
