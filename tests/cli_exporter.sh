#!/bin/sh
# cli_exporter.sh — `stoker exporter`: bad usage exits 2 (a bad --listen with
# the reason); --once on the fake tree in tests/fixtures/doctor/ok gives the
# whole disks in node_exporter's units; two loaders publishing through
# examples/metrics are merged into one valid exposition, while a dead
# process's file is ignored (and kept) and a malformed one is left out and
# counted; a loader that ends removes its file; the server answers GET
# /metrics on an ephemeral loopback port, 404 elsewhere, and Ctrl-C stops it
# with exit 0.  Every exposition goes through `promtool check metrics` when
# promtool is installed (Debian: prometheus) and always through the Python
# checker below (grouping, HELP/TYPE, _total, cumulative buckets, +Inf ==
# _count).  Run by tests/cli.sh with $STOKER set.
. "$(dirname "$0")/cli-common.sh"
if ! "$S" exporter --help >/dev/null 2>&1; then
	echo "skipped: exporter not registered (add cmd_exporter to tools/main.c)"
	exit 77
fi
EX=$(dirname "$S")/examples/metrics
pids=
cleanup() {
	for p in $pids; do kill "$p" 2>/dev/null; done
}
root=$here/fixtures/doctor/ok

# PROMTOOL= (empty) forces the Python checker alone
PROMTOOL=${PROMTOOL-$(command -v promtool 2>/dev/null)}
# Validates the exposition in file $1 (what promtool does not check too).
check() {
	if [ -n "$PROMTOOL" ]; then
		"$PROMTOOL" check metrics <"$1" >"$tmp/promtool" 2>&1 ||
			{ cat "$tmp/promtool"; fail "promtool check metrics: $2"; }
	fi
	$PY - "$1" <<'EOF' || fail "format checker: $2"
import re, sys
text = open(sys.argv[1]).read()
assert text.endswith("\n"), "no final newline"
NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
LABEL = r'[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*"'
SAMPLE = re.compile(r"^(%s)(\{(?:%s(?:,%s)*,?)?\})? (\S+)(?: -?\d+)?$" % (NAME, LABEL, LABEL))
types, helps, done, series, hist, counts = {}, set(), set(), set(), {}, {}
cur = [None]
def switch(fam):
    if fam != cur[0]:
        assert fam not in done, "family %s is not in one group" % fam
        if cur[0]:
            done.add(cur[0])
        cur[0] = fam
def family(name):
    for suf in ("_bucket", "_sum", "_count"):
        base = name[: -len(suf)]
        if name.endswith(suf) and types.get(base) in ("histogram", "summary"):
            return base
    return name
for ln in text.split("\n")[:-1]:
    if ln.startswith("# HELP "):
        fam = ln.split(" ", 3)[2]
        assert fam not in helps, "second HELP for " + fam
        helps.add(fam)
        switch(fam)
    elif ln.startswith("# TYPE "):
        _, _, fam, t = ln.split(" ")
        assert fam not in types, "second TYPE for " + fam
        assert t in ("counter", "gauge", "histogram", "summary", "untyped"), ln
        types[fam] = t
        switch(fam)
    elif ln.startswith("#") or not ln:
        continue
    else:
        m = SAMPLE.match(ln)
        assert m, "not a sample line: " + ln
        name, labels, value = m.group(1), m.group(2) or "", m.group(3)
        v = float(value)
        fam = family(name)
        switch(fam)
        assert fam.startswith("stoker_"), name
        assert fam in types and fam in helps, "no TYPE/HELP before " + name
        assert (name, labels) not in series, "duplicate series " + ln
        series.add((name, labels))
        t = types[fam]
        if t == "counter":
            assert fam.endswith("_total") and v >= 0, ln
        if t == "histogram":
            pairs = re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"', labels)
            rest = tuple(sorted(p for p in pairs if p[0] != "le"))
            if name.endswith("_bucket"):
                le = float(dict(pairs)["le"])
                hist.setdefault((fam, rest), []).append((le, v))
            elif name.endswith("_count"):
                counts[(fam, rest)] = v
for key, b in hist.items():
    assert b == sorted(b), "buckets out of order: %s" % (key,)
    assert all(x[1] <= y[1] for x, y in zip(b, b[1:])), "not cumulative: %s" % (key,)
    assert b[-1][0] == float("inf"), "no +Inf bucket: %s" % (key,)
    assert b[-1][1] == counts.get(key), "+Inf != _count: %s" % (key,)
EOF
}

# --- 1. usage ---------------------------------------------------------------------
"$S" exporter --help >"$tmp/help" 2>&1 || fail "--help exits non-zero"
for o in --listen --dir --once 127.0.0.1:9464; do
	grep -q -- "$o" "$tmp/help" || fail "--help does not mention $o"
done
for l in nonsense 127.0.0.1 127.0.0.1:99999 127.0.0.1:80x '[::1' '::1:9464' host.example:80 1.2.3.4.5:80; do
	"$S" exporter --listen "$l" --dir "$tmp" >/dev/null 2>"$tmp/err"
	rc=$?
	[ $rc = 2 ] || fail "--listen '$l': exit $rc, want 2"
	grep -qF -- "--listen '$l'" "$tmp/err" || fail "--listen '$l': the message does not name it"
done
"$S" exporter --no-such-option >/dev/null 2>"$tmp/err"
[ $? = 2 ] || fail "an unknown option should exit 2"
"$S" exporter --once stray >/dev/null 2>"$tmp/err"
[ $? = 2 ] || fail "an operand should exit 2"
"$S" exporter --once --root "$tmp/nonexistent" --dir "$tmp" >/dev/null 2>"$tmp/err"
[ $? = 1 ] || fail "a root without /proc/diskstats should exit 1"
grep -q "nonexistent/proc/diskstats" "$tmp/err" || fail "the message does not name the file"

# --- 2. --once on the fake tree ---------------------------------------------------------
mkdir "$tmp/pub"
"$S" exporter --once --root "$root" --dir "$tmp/pub" >"$tmp/out" 2>"$tmp/err" || fail "--once"
check "$tmp/out" "--once on the fixture"
grep -qx 'stoker_disk_read_bytes_total{device="vda"} 141252609024' "$tmp/out" ||
	fail "vda's read bytes (sectors x 512)"
grep -qx 'stoker_disk_read_time_seconds_total{device="vda"} 6769.945' "$tmp/out" ||
	fail "vda's read time in seconds"
grep -qx 'stoker_disk_io_now{device="nvme0n1"} 1' "$tmp/out" || fail "nvme0n1's io_now"
devs=$(sed -n 's/^stoker_disk_reads_completed_total{device="\([^"]*\)"}.*/\1/p' "$tmp/out" | tr '\n' ' ')
[ "$devs" = "vda nvme0n1 sda " ] || fail "devices: '$devs', want the whole disks vda nvme0n1 sda"
grep -q '^stoker_gpu_devices [0-9]' "$tmp/out" || fail "no stoker_gpu_devices"
grep -qx 'stoker_exporter_loaders 0' "$tmp/out" || fail "loaders in an empty folder"

# GPUs through a stand-in NVML (where a C compiler is at hand): the figures
# of two fake GPUs, in base units, and the text still valid
if command -v cc >/dev/null 2>&1; then
	mkdir "$tmp/nvml"
	if cc -shared -fPIC -o "$tmp/nvml/libnvidia-ml.so.1" "$here/fixtures/nvml/fake_nvml.c" 2>"$tmp/err"; then
		LD_LIBRARY_PATH="$tmp/nvml${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
			"$S" exporter --once --root "$root" --dir "$tmp/pub" >"$tmp/out" 2>"$tmp/err" ||
			fail "--once with a fake NVML"
		check "$tmp/out" "--once with two (fake) GPUs"
		for want in 'stoker_gpu_devices 2' 'stoker_gpu_utilization_ratio{gpu="0"} 0.42' \
			'stoker_gpu_utilization_ratio{gpu="1"} 1' \
			'stoker_gpu_memory_used_bytes{gpu="1"} 2147483648' \
			'stoker_gpu_memory_total_bytes{gpu="0"} 85899345920'; do
			grep -qxF "$want" "$tmp/out" || fail "no line '$want'"
		done
	fi
fi

# --- 3. published loaders ----------------------------------------------------------------
[ -x "$EX" ] || fail "$EX is missing (make builds examples/metrics.c)"
for c in a b; do
	mkdir -p "$tmp/data/$c"
	for i in 1 2 3 4 5; do head -c $((i * 1000)) /dev/zero >"$tmp/data/$c/$i.jpg"; done
done
for n in cli-a cli-b; do
	"$EX" "$tmp/data" --publish "$n" --dir "$tmp/pub" --seconds 60 >"$tmp/$n.out" 2>&1 &
	pids="$pids $!"
done
i=0
while [ "$(ls "$tmp/pub" | grep -c '^[0-9]*-cli-[ab]\.prom$')" != 2 ]; do
	i=$((i + 1))
	[ $i -lt 100 ] || { cat "$tmp"/cli-*.out; fail "the loaders did not publish within 10 s"; }
	sleep 0.1
done
# a file left by a process that is gone, and a malformed one of a live process
dead=$(sh -c 'echo $$')
sed 's/loader="cli-a"/loader="stale"/' "$(ls "$tmp"/pub/*-cli-a.prom)" >"$tmp/pub/$dead-stale.prom"
echo "this is not prometheus text" >"$tmp/pub/$$-bad.prom"
echo "garbage" >"$tmp/pub/.$$-hidden.prom.tmp"
"$S" exporter --once --root "$root" --dir "$tmp/pub" >"$tmp/out" 2>"$tmp/err" || fail "--once with loaders"
check "$tmp/out" "--once with two published loaders"
for n in cli-a cli-b; do
	grep -q "^stoker_loader_samples_total{loader=\"$n\",pid=\"[0-9]*\"} [0-9]" "$tmp/out" ||
		fail "loader $n is not in the exposition"
	grep -q "^stoker_loader_batch_wait_seconds_bucket{loader=\"$n\",pid=\"[0-9]*\",le=\"+Inf\"}" "$tmp/out" ||
		fail "loader $n has no batch wait histogram"
done
[ "$(grep -c '^# TYPE stoker_loader_samples_total counter$' "$tmp/out")" = 1 ] ||
	fail "the loaders' families are not merged"
# each loader's verdict: one series per kind, exactly one of them 1
[ "$(grep -c '^# TYPE stoker_loader_bottleneck gauge$' "$tmp/out")" = 1 ] ||
	fail "stoker_loader_bottleneck is not one merged family"
for n in cli-a cli-b; do
	kinds=$(grep -c "^stoker_loader_bottleneck{loader=\"$n\",pid=\"[0-9]*\",kind=\"[a-z-]*\"} [01]$" "$tmp/out")
	ones=$(grep -c "^stoker_loader_bottleneck{loader=\"$n\",.*} 1$" "$tmp/out")
	[ "$kinds" -ge 7 ] && [ "$ones" = 1 ] ||
		fail "loader $n: $kinds bottleneck series with $ones at 1 (want every kind, one at 1)"
	grep -q "^stoker_loader_diagnosis_data_stall_ratio{loader=\"$n\"," "$tmp/out" ||
		fail "loader $n: no diagnosis evidence"
done
grep -q 'loader="stale"' "$tmp/out" && fail "a dead process's file was served"
[ -e "$tmp/pub/$dead-stale.prom" ] || fail "the exporter removed a file it does not own"
grep -qx 'stoker_exporter_loaders 2' "$tmp/out" || fail "stoker_exporter_loaders is not 2"
grep -qx 'stoker_exporter_invalid_files 1' "$tmp/out" || fail "the malformed file is not counted"

# a loader that ends removes its file
"$EX" "$tmp/data" --publish cli-c --dir "$tmp/pub" --seconds 0.3 >"$tmp/c.out" 2>&1 ||
	{ cat "$tmp/c.out"; fail "examples/metrics --seconds 0.3"; }
f=$(sed -n 's/^published //p' "$tmp/c.out")
[ -n "$f" ] || fail "examples/metrics did not say where it published"
[ -e "$f" ] && fail "$f is left after its loader ended"

# a running `stoker bench` publishes its loader where the exporter looks
mkdir "$tmp/pub-bench"
STOKER_METRICS_DIR="$tmp/pub-bench" "$S" bench "$tmp/data" --runtime 4 --repeat 1 --no-baseline \
	>"$tmp/bench.out" 2>&1 &
bench=$!
pids="$pids $bench"
i=0
until ls "$tmp/pub-bench" | grep -q "^$bench-bench\.prom$"; do
	i=$((i + 1))
	[ $i -lt 150 ] || { cat "$tmp/bench.out"; fail "stoker bench did not publish within 15 s"; }
	sleep 0.1
done
"$S" exporter --once --root "$root" --dir "$tmp/pub-bench" >"$tmp/out" 2>"$tmp/err" ||
	fail "--once beside a running bench"
grep -qx 'stoker_exporter_loaders 1' "$tmp/out" || fail "the running bench is not counted"
grep -q "^stoker_loader_samples_total{loader=\"bench\",pid=\"$bench\"} " "$tmp/out" ||
	fail "the running bench's loader is not served"
wait "$bench" || { cat "$tmp/bench.out"; fail "stoker bench exit $?"; }
[ -z "$(ls "$tmp/pub-bench")" ] || fail "stoker bench left $(ls "$tmp/pub-bench")"

# --- 4. the server -------------------------------------------------------------------------
"$S" exporter --listen 127.0.0.1:0 --root "$root" --dir "$tmp/pub" >"$tmp/srv.out" 2>"$tmp/srv.err" &
srv=$!
pids="$pids $srv"
i=0
port=
while [ -z "$port" ]; do
	port=$(sed -n 's|.*serving http://127\.0\.0\.1:\([0-9][0-9]*\)/metrics.*|\1|p' "$tmp/srv.err")
	i=$((i + 1))
	[ $i -lt 100 ] || { cat "$tmp/srv.err"; fail "the server did not start within 10 s"; }
	[ -n "$port" ] || sleep 0.1
done
$PY - "$port" "$tmp/out" <<'EOF' || fail "GET on the server"
import sys, urllib.request, urllib.error
base = "http://127.0.0.1:%s" % sys.argv[1]
with urllib.request.urlopen(base + "/metrics", timeout=10) as r:
    assert r.status == 200, r.status
    ctype = r.headers["Content-Type"]
    assert ctype.startswith("text/plain") and "version=0.0.4" in ctype, ctype
    body = r.read().decode()
open(sys.argv[2], "w").write(body)
assert 'stoker_loader_samples_total{loader="cli-a"' in body, body[:2000]
assert 'stoker_disk_reads_completed_total{device="vda"} 18216005' in body
try:
    urllib.request.urlopen(base + "/nothing-here", timeout=10)
    raise AssertionError("no 404")
except urllib.error.HTTPError as e:
    assert e.code == 404, e.code
EOF
check "$tmp/out" "the server's /metrics"
kill -INT "$srv"
wait "$srv"
rc=$?
[ $rc = 0 ] || fail "SIGINT: exit $rc, want 0"
grep -q "stopped" "$tmp/srv.err" || fail "no closing message"
if [ -n "$PROMTOOL" ]; then
	echo "ok (validated with $PROMTOOL check metrics and the Python checker)"
else
	echo "ok (promtool absent: validated with the Python checker only; Debian's prometheus package provides promtool)"
fi
