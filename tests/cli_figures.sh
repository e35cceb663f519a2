#!/bin/sh
# Figures a user can trust: every run measured at least --runtime after a
# ramp, --repeat runs with medians and spreads (the table shows what JSON
# carries), a forced short run warned about, and charts with round ticks and
# a log2 axis for powers of two.
. "$(dirname "$0")/cli-common.sh"
t=$tmp
cd "$t" || exit 1

"$STOKER" gen data --images 100 --classes 2 --seed 5 >/dev/null || fail "gen"

# A sweep over 100 files: every point runs --repeat 3 times, each run measured
# at least --runtime (epochs repeat to reach it), a median per point.
out=$("$STOKER" bench data --sweep qd=4,16,64 --runtime 0.4 --ramp 0.1 --repeat 3 -b 8 \
	--plot "$t/s.svg" --json) || fail "sweep exit $?"
echo "$out" > sweep.json
$PY - sweep.json "$t/s.svg" <<'PY' || fail "sweep figures"
import json, math, re, statistics, sys
j = json.load(open(sys.argv[1]))
assert j["repeat"] == 3 and j["runtime_s"] == 0.4, j
assert [r["value"] for r in j["runs"]] == [4, 16, 64]
for row in j["runs"]:
    runs = row["runs"]
    assert len(runs) == 3, row
    for r in runs:
        assert r["run"]["seconds"] >= 0.4, r["run"]  # measured at least the minimum
        assert r["run"]["samples"] > 100, r["run"]   # 100 files: epochs repeated to get there
    rates = [r["run"]["samples_per_s"] for r in runs]
    assert abs(row["samples_per_s"]["median"] - statistics.median(rates)) < 1e-6, row
    assert row["samples_per_s"]["min"] == min(rates) and row["samples_per_s"]["max"] == max(rates)
    assert len(row["samples_per_s"]["ci95"]) == 2
# the chart: round y ticks (one 1-2-5 step apart), the qd axis in powers of two on log2
svg = open(sys.argv[2]).read()
ys = [float(v) for v in re.findall(r'class="ytick">([0-9.e+-]+)<', svg)]
steps = {round(b - a, 9) for a, b in zip(ys, ys[1:])}
assert len(ys) >= 3 and len(steps) == 1, ys
step = steps.pop()
mant = step / 10 ** math.floor(math.log10(step))
assert any(abs(mant - m) < 1e-6 for m in (1, 2, 5)), step
xs = [float(v) for v in re.findall(r'class="xtick">([0-9.e+-]+)<', svg)]
assert xs == [4, 8, 16, 32, 64], xs
assert "log2 scale" in svg and svg.count('class="errbar"') == 3, svg
assert 'class="legend"' in svg and "samples/s" in svg and 'class="caption"' in svg
PY
# the table shows the medians JSON has
out=$("$STOKER" bench data --sweep qd=4,16 --runtime 0.3 --ramp 0 --repeat 3 -b 8 \
	--plot "$t/t.svg") || fail "sweep table exit $?"
[ "$(echo "$out" | grep -cE '^ +(4|16) +[0-9]+ \([0-9.]+k?-[0-9.]+k?\)')" = 2 ] || fail "sweep rows: $out"
if command -v rsvg-convert >/dev/null; then
	[ -s "$t/t.svg.png" ] || [ -s "$t/t.png" ] || fail "no PNG beside the SVG with rsvg-convert"
	echo "$out" | grep -q "plot: $t/t.svg, $t/t.png" || fail "PNG not named: $out"
fi

# --repeat 3 with the baseline: three runs of each side, alternating; the
# ratio is the median of the paired ratios.
out=$("$STOKER" bench data --runtime 0.3 --ramp 0.05 --repeat 3 -b 8 --json) || fail "repeat exit $?"
echo "$out" > rep.json
$PY - rep.json <<'PY' || fail "repeat figures"
import json, statistics, sys
j = json.load(open(sys.argv[1]))
runs = j["runs"]
assert len(runs) == 3 and j["repeat"] == 3
for r in runs:
    assert r["stoker"]["seconds"] >= 0.3 and r["baseline"]["seconds"] >= 0.3, r
    assert abs(r["ratio"] - r["stoker"]["samples_per_s"] / r["baseline"]["samples_per_s"]) < 1e-9
assert abs(j["ratio"] - statistics.median(r["ratio"] for r in runs)) < 1e-9
assert abs(j["samples_per_s"]["median"] -
           statistics.median(r["stoker"]["samples_per_s"] for r in runs)) < 1e-6
assert "warnings" in j and "0.3" in j["warnings"][0]   # under the 2 s minimum: said
PY
out=$("$STOKER" bench data --runtime 0.3 --ramp 0 --repeat 3 -b 8) || fail "repeat human exit $?"
echo "$out" | grep -q "3 runs of each side, alternating, each 0.3[0-9] s measured" || fail "runs line: $out"
echo "$out" | grep -qE "^  samples/s +[0-9]+ \([0-9.]+k?-[0-9.]+k?\) +[0-9]+ \([0-9.]+k?-[0-9.]+k?\) +[0-9.]+x \(" ||
	fail "medians and spreads: $out"
echo "$out" | grep -q "warning: a run measured only 0.3" || fail "short-run warning: $out"

# The default: one run of at least 2 s (no baseline), no warning; --max-samples
# forces a short run, and that is said.
out=$("$STOKER" bench data --no-baseline -b 8 --json) || fail "default exit $?"
echo "$out" > def.json
$PY - def.json <<'PY' || fail "default run"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["repeat"] == 1 and j["runtime_s"] == 2 and j["ramp_s"] > 0, j
assert j["stoker"]["seconds"] >= 2, j["stoker"]
assert j["stoker"]["ended_by"] == "--runtime", j["stoker"]
assert "warnings" not in j, j["warnings"]
PY
out=$("$STOKER" bench data --no-baseline -b 8 --max-samples 40 --json) || fail "short exit $?"
echo "$out" | $PY -c 'import json,sys; j=json.load(sys.stdin); assert "--max-samples" in j["warnings"][0], j' ||
	fail "forced short run has no warning"
# --epochs: whole epochs, repeated past the number asked until the minimum
out=$("$STOKER" bench data --no-baseline -b 10 -E 1 --runtime 0.3 --ramp 0 --json) || fail "-E exit $?"
echo "$out" | $PY -c '
import json, sys
s = json.load(sys.stdin)["stoker"]
assert s["seconds"] >= 0.3 and s["samples"] % 100 == 0 and s["samples"] > 100, s
assert s["ended_by"] == "epochs repeated to reach --runtime", s' || fail "--epochs extended: $out"
"$STOKER" bench data --repeat 65 2>/dev/null; [ $? = 2 ] || fail "--repeat out of range not exit 2"
exit 0
