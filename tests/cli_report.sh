#!/bin/sh
# The report's wording tells the truth: --cold as a user who may only read
# the data (the page cache's residency is then unknown, never "100 %"), and
# the README's examples produce figures, not noise warnings.
. "$(dirname "$0")/cli-common.sh"
t=$tmp
cd "$t" || exit 1
"$STOKER" gen data --images 300 --classes 3 --seed 1 >/dev/null || fail "gen"

# --- 1. --cold as non-root, on data that user can read but not write --------
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
	chmod 755 "$t" && chmod -R a+rX,go-w data
	mkdir nc && chown 65534:65534 nc
	nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups \
		env HOME="$t/nc" XDG_CACHE_HOME="$t/nc" "$@"; }
	if nobody test -r "$STOKER" && nobody "$STOKER" --version >/dev/null 2>&1; then
		cat data/*/* >/dev/null # resident before the run: eviction's job to undo
		out=$(nobody "$STOKER" bench data --cold --runtime 0.5 --repeat 1 --no-baseline 2>err) ||
			fail "bench --cold as nobody exit $?: $(cat err)"
		echo "$out" >out
		echo "$out" | grep -q "% of sampled file pages resident" &&
			fail "a residency figure the kernel does not give this user: $out"
		echo "$out" | grep -q "how much was resident at the start unknown: as this user" ||
			fail "unknown residency not said: $out"
		nobody "$STOKER" bench data --cold --runtime 0.5 --repeat 1 --no-baseline --json \
			>c.json 2>/dev/null || fail "json exit $?"
		/usr/bin/python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); assert j["cached_fraction"] is None, j["cached_fraction"]' c.json ||
			fail "cached_fraction not null as nobody"
		# root sees the residency (the files are its own)
		out=$("$STOKER" bench data --cold --runtime 0.5 --repeat 1 --no-baseline 2>/dev/null)
		echo "$out" | grep -q "[0-9] % of sampled file pages resident at the start" ||
			fail "root's residency figure missing: $out"
	else
		echo "(nobody cannot run $STOKER: the non-root --cold case not checked)"
	fi
else
	echo "(not root or no setpriv: the non-root --cold case not checked)"
fi

# --- 2. the README's NVMe-against-SATA example, as written there -------------
cmd=$(sed -n '/^stoker bench \/mnt\/nvme\/train \/mnt\/sata\/train/{N;p;}' "$top/README.md" |
	tr -d '\\\n')
[ -n "$cmd" ] || fail "README's NVMe-against-SATA example not found"
cp -r data data2
set -- $(echo "$cmd" | sed "s|^stoker bench /mnt/nvme/train /mnt/sata/train||")
out=$("$STOKER" bench data data2 "$@" 2>err) || fail "README example exit $?: $(cat err)"
echo "$out" >out
echo "$out" | grep -q "mostly noise" && fail "the README's example warns of noise: $out"
echo "$out" | grep -qE "each run 0\.0+ s measured" && fail "0 s measured: $out"
echo "$out" | grep -qE "^  samples/s +[0-9]+" || fail "no figures: $out"
# --- 3. one formatter: sizes, rates and durations read one way everywhere ---
out=$("$STOKER" bench data --runtime 0.5 --ramp 0.2 --repeat 1 --no-baseline 2>err) ||
	fail "bench exit $?: $(cat err)"
echo "$out" >out
echo "$out" | grep -nE "[0-9]e[+-][0-9]" && fail "a figure in e-notation: $out"
# the header's depth is the chosen: line's
hq=$(echo "$out" | sed -n 's/.*queue depth \([0-9]*\) (auto: chosen below).*/\1/p')
cq=$(echo "$out" | sed -n 's/^ *queue depth \([0-9]*\) (auto[,:].*/\1/p' | head -1)
[ -n "$hq" ] && [ "$hq" = "$cq" ] || fail "header's queue depth '$hq' is not the chosen '$cq': $out"
mx=$(echo "$out" | sed -n 's/.*reads in flight *mean [0-9.]*, max \([0-9]*\).*/\1/p')
if [ "$mx" -gt "$hq" ]; then
	echo "$out" | grep -q "max $mx (above the depth chosen: while the tuner probed deeper)" ||
		fail "a max in flight above the depth, unexplained: $out"
fi
out=$("$STOKER" bench data --runtime 0 --ramp 0 --repeat 1 -E 1 --no-baseline --image --size 32 \
	--decode-threads 1 2>err) || fail "bench --image exit $?: $(cat err)"
echo "$out" | grep -q "decode  *1 thread," || fail "'1 threads': $out"
echo "$out" | grep -q "1 decode threads" && fail "'1 decode threads': $out"
mkdir one && (cd data/c0000 && for f in 00000000 00000003; do cp $f.jpg "$t/one/$f.jpg"; echo 0 >"$t/one/$f.cls"; done)
(cd one && tar cf ../one.tar ./*) || fail "tar"
err=$("$STOKER" bench one.tar --shuffle-mode shard --world-size 2 --rank 0 --no-baseline 2>&1)
echo "$err" | grep -q "1 shard for 2 ranks" || fail "'1 shards': $err"
for c in bench disk; do
	"$STOKER" $c --help | grep -E "[0-9]e\+[0-9]" && fail "$c --help in e-notation"
done
err=$("$STOKER" disk "$t" --bs 1T 2>&1); [ $? = 2 ] || fail "--bs 1T not exit 2"
echo "$err" | grep -q "out of range 512 B\.\.64 MiB" || fail "a size's range not as --help writes it: $err"
err=$("$STOKER" bench data --runtime 2e7 2>&1); [ $? = 2 ] || fail "--runtime 2e7 not exit 2"
echo "$err" | grep -q "out of range 0\.\.1000000$" || fail "a number's range in e-notation: $err"
# --- 4. doctor's figures add up, and it writes nothing -----------------------
"$STOKER" doctor data >doc.txt; rc=$?
[ $rc = 0 ] || [ $rc = 1 ] || fail "doctor exit $rc"
/usr/bin/python3 - doc.txt <<'PY' || fail "doctor's figures: $(cat doc.txt)"
import re, sys
t = open(sys.argv[1]).read()
def bytes_(s):
    v, u = s.split()
    return float(v) * {"B": 1, "kB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12}[u]
cpu = re.search(r"cpu +.*?(\d+) CPUs?: (?:1 for the trainer \+ (\d+) decode threads?|"
                r"the trainer and (\d+) decode threads? share it); (\d+) I/O threads?", t)
assert cpu, "no cpu split"
n, dec, io = int(cpu[1]), int(cpu[2] or 0), int(cpu[4])
assert cpu[3] or 1 + dec == n, "1 + %d decode != %d CPUs" % (dec, n)
share = re.search(r"cpu share +.*?(\d+) decode \+ (\d+) I/O threads?", t)
plan = re.search(r"io plan +.*? on (\d+) I/O threads?", t)
assert int(share[2]) == io and int(plan[1]) == io, (share[0], plan[0], io)
if n < 4:  # docs/options.md: 1 I/O thread below 4 CPUs
    assert io == 1, io
m = re.search(r"takes ([\d.]+ \w+): slots (\d+) x ([\d.]+ \w+) = ([\d.]+ \w+), "
              r"(?:read areas (\d+) x ([\d.]+ \w+), )?"
              r"slot records ([\d.]+ \w+), index ([\d.]+ \w+), decode ([\d.]+ \w+)", t)
assert m, "memory line without its parts"
areas = int(m[5]) * bytes_(m[6]) if m[5] else 0  # image mode's reads, apart from the slots
parts = bytes_(m[4]) + areas + bytes_(m[7]) + bytes_(m[8]) + bytes_(m[9])
assert abs(parts - bytes_(m[1])) <= 0.01 * bytes_(m[1]), (m[0], parts)
assert abs(int(m[2]) * bytes_(m[3]) - bytes_(m[4])) <= 0.01 * bytes_(m[4]), m[0]
assert re.search(r"O_DIRECT +O_DIRECT read of data/\S+ works \(a read: nothing written\)", t) \
    or "refused" in t, "O_DIRECT probe not a read"
PY
"$STOKER" doctor --help | grep -q "nothing written (the O_DIRECT check reads" ||
	fail "doctor's help does not say the O_DIRECT check only reads"
# --- 5. stoker disk: a summary first, the short pattern named, labels apart --
mkdir dk
out=$("$STOKER" disk dk -p randread,checkpoint --size 8MiB -c 8MiB -t 0.3 --ramp 0 2>err) ||
	fail "disk exit $?: $(cat err)"
echo "$out" >out
echo "$out" | grep -qE "^  pattern +PATH +MB/s +IOPS +lat p50 +lat p99$" || fail "no summary table: $out"
s=$(echo "$out" | grep -nE "^  randread 4 KiB qd32 +\[1\] +[0-9.]+ +[0-9]+ " | cut -d: -f1)
d=$(echo "$out" | grep -n "^randread  4 KiB blocks" | cut -d: -f1)
[ -n "$s" ] && [ -n "$d" ] && [ "$s" -lt "$d" ] || fail "the summary's line not before the details: $out"
echo "$out" | grep -qE "^  checkpoint 4 MiB qd1 +\[1\] " || fail "no summary line for checkpoint: $out"
echo "$out" | grep -qE "^warning: (randread|checkpoint) on dk was measured only [0-9.]+ s" ||
	fail "the short pattern not named: $out"
# the quick set's smallfiles: epochs over its files, each cold, up to --runtime: no warning
out=$("$STOKER" disk dk -p smallfiles -n 300 2>err) || fail "smallfiles exit $?: $(cat err)"
echo "$out" >out
echo "$out" | grep -q "^warning" && fail "the quick set's smallfiles warns: $out"
# a second PATH's ratios name their reference
mkdir dk2
out=$("$STOKER" disk dk dk2 -p randread --size 8MiB -t 0.2 --ramp 0 2>/dev/null) || fail "two PATHs"
echo "$out" | grep -q "\[2\] dk2 (and its ratio to \[1\])" || fail "ratio's reference unnamed: $out"
# the chart's labels: two lines each, and every other one lower when crowded (--all's 10)
"$STOKER" disk dk --all --size 8MiB -c 8MiB -n 50 -t 0.1 --ramp 0 --plot a.svg >/dev/null 2>&1 ||
	fail "disk --all --plot exit $?"
/usr/bin/python3 - a.svg <<'PY' || fail "the chart's x labels overlap"
import re, sys
svg = open(sys.argv[1]).read()
ticks = re.findall(r'<text x="([\d.]+)" y="(\d+)" text-anchor="middle" class="xtick"[^>]*>'
                   r'([^<]*)(?:<tspan[^>]*>([^<]*)</tspan>)?</text>', svg)
assert len(ticks) == 10, ticks
for (x1, y1, a1, b1), (x2, y2, a2, b2) in zip(ticks, ticks[1:]):
    room = float(x2) - float(x1)
    size = 6 if 'font-size="10"' in svg else 7
    wide = max(len(a1), len(b1 or ""), len(a2), len(b2 or "")) * size
    assert y1 != y2 or wide < room, (a1, b1, a2, b2, room)
PY
exit 0
