#!/bin/sh
# disk_vs_fio.sh — `stoker disk` against fio: same file, same settings, same
# run.  For each case (seqread, seqwrite, randread 4 KiB at qd 1 and 32) it
# runs fio and stoker back to back ROUNDS times, interleaved (fio, stoker,
# stoker, fio, ...: the order alternates), so drift on a shared machine hits
# both alike.  It prints the medians of each, and the ratio stoker / fio as
# the median of the ratios of each back-to-back pair.  Targets: within ±5 %
# (bandwidth, IOPS: issue 13, for seqread 1 MiB qd 8 and randread 4 KiB qd
# 32) and ±20 % (p99).  stoker runs on the loader's own engines.
#
# Both use io_uring and O_DIRECT.  stoker's latency runs from just before
# the submit call to the completion, like fio's "lat" (which also counts
# fio's own time between preparing an I/O and submitting it); fio's default
# "clat" starts after the submit call returns.  Both p99 ratios are printed.
#
# usage: bench/disk_vs_fio.sh [DIR]      (the file goes in DIR, default $TMPDIR or /tmp)
# env:   STOKER (build/stoker), SIZE (2G), RUNTIME (4), RAMP (1), ROUNDS (7),
#        CASES (all four: "seqread seqwrite randread-qd1 randread-qd32")
set -eu
dir=${1:-${TMPDIR:-/tmp}}
S=${STOKER:-build/stoker}
SIZE=${SIZE:-2G}
RUNTIME=${RUNTIME:-4}
RAMP=${RAMP:-1}
ROUNDS=${ROUNDS:-7}
CASES=${CASES:-"seqread seqwrite randread-qd1 randread-qd32"}
PY=/usr/bin/python3
command -v fio >/dev/null || { echo "fio is not installed (apt-get install fio)" >&2; exit 1; }
[ -x "$S" ] || { echo "no stoker binary at $S (run make, or set STOKER)" >&2; exit 1; }
work=$(mktemp -d "$dir/stoker-vs-fio-XXXXXX")
f=$work/file
trap 'rm -rf "$work"' EXIT
trap 'exit 130' INT TERM

echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(uname -r), $(fio --version), stoker $("$S" --version | cut -d' ' -f2)"
echo "# file $f ($SIZE on $(df --output=source "$dir" | tail -n 1)), runtime ${RUNTIME}s + ramp ${RAMP}s, $ROUNDS rounds each, interleaved"
# fio lays the file out (written whole, so no read meets a hole)
fio --name=layout --filename="$f" --size="$SIZE" --rw=write --bs=1M --iodepth=8 \
	--ioengine=io_uring --direct=1 --output-format=terse >/dev/null

# one fio run → "bytes/s iops lat_p99_ns clat_p99_ns" on stdout
run_fio() { # rw bs qd
	fio --name=case --filename="$f" --size="$SIZE" --rw="$1" --bs="$2" --iodepth="$3" \
		--ioengine=io_uring --direct=1 --time_based --runtime="$RUNTIME" \
		--ramp_time="$RAMP" --randrepeat=0 --lat_percentiles=1 \
		--output-format=json >"$work/fio.json"
	"$PY" - "$work/fio.json" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))["jobs"][0]
d = j["write"] if j["write"]["io_bytes"] else j["read"]
print(d["bw_bytes"], d["iops"], d["lat_ns"]["percentile"]["99.000000"],
      d["clat_ns"]["percentile"]["99.000000"])
EOF
}

# one stoker run on the same file → "bytes/s iops p99_ns"
run_stoker() { # pattern bs qd seed
	if [ "$1" = seqwrite ]; then access="--destructive=$f"; else access=--readonly; fi
	"$S" disk --json --no-drop "$access" -p "$1" -b "$2" -q "$3" -t "$RUNTIME" \
		--ramp "$RAMP" --seed "$4" "$f" >"$work/stoker.json"
	"$PY" - "$work/stoker.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))["results"][0]
if r["status"] != "ok":
    sys.exit("stoker: " + str(r["error"]))
print(r["mb_per_s"] * 1e6, r["iops"], r["latency_ns"]["p99"])
EOF
}

: >"$work/rows"
for c in $CASES; do
	case $c in
	seqread) rw=read pat=seqread bs=1M qd=8 ;;
	seqwrite) rw=write pat=seqwrite bs=1M qd=8 ;;
	randread-qd1) rw=randread pat=randread bs=4k qd=1 ;;
	randread-qd32) rw=randread pat=randread bs=4k qd=32 ;;
	*) echo "unknown case $c" >&2; exit 2 ;;
	esac
	i=1
	while [ $i -le "$ROUNDS" ]; do
		if [ $((i % 2)) = 1 ]; then
			a=$(run_fio $rw $bs $qd)
			b=$(run_stoker $pat $bs $qd $i)
		else
			b=$(run_stoker $pat $bs $qd $i)
			a=$(run_fio $rw $bs $qd)
		fi
		echo "$c $i $a $b" >>"$work/rows"
		tail -n 1 "$work/rows" | sed 's/^/  # case round, fio: B\/s IOPS p99, stoker: same: /' >&2
		i=$((i + 1))
	done
done

"$PY" - "$work/rows" "$ROUNDS" <<'EOF'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    case, _, *v = line.split()
    # fio: bw iops lat-p99 clat-p99, stoker: bw iops p99
    f, s = [float(x) for x in v[:4]], [float(x) for x in v[4:]]
    rows.setdefault(case, []).append(f[:3] + s + [f[3]])
def flag(r, tol):
    return "" if abs(r - 1) <= tol else " !"
print()
print("| case | fio MB/s | stoker MB/s | ratio | fio IOPS | stoker IOPS | ratio "
      "| fio p99 lat (clat) | stoker p99 | ratio to lat (clat) |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for case, runs in rows.items():
    m = [statistics.median(r[k] for r in runs) for k in range(7)]
    q = [statistics.median(r[k + 3] / r[k] for r in runs) for k in range(3)]
    qc = statistics.median(r[5] / r[6] for r in runs)
    print("| %s | %.0f | %.0f | %.2f%s | %.0f | %.0f | %.2f%s | %.0f (%.0f) us | %.0f us "
          "| %.2f%s (%.2f%s) |" % (
        case, m[0] / 1e6, m[3] / 1e6, q[0], flag(q[0], 0.05), m[1], m[4], q[1], flag(q[1], 0.05),
        m[2] / 1e3, m[6] / 1e3, m[5] / 1e3, q[2], flag(q[2], 0.20), qc, flag(qc, 0.20)))
print()
print("values: medians of %s runs each; ratio: median of stoker / fio over the back-to-back pairs;"
      " ! = outside ±5 %% (MB/s, IOPS) or ±20 %% (p99).  seq: 1 MiB blocks at qd 8." % sys.argv[2])
EOF
