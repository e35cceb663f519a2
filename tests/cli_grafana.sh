#!/bin/sh
# cli_grafana.sh — every panel of docs/grafana/stoker.json against a real
# Prometheus: a Python loader (image mode, serve_metrics on a free port, a
# stand-in NVML so the GPU families have samples) is scraped every second by
# our own `prometheus` (temporary config and data folder, a free loopback
# port); after three scrapes each panel query and each variable's selector,
# with Grafana's variables put in ($__rate_interval: 1m, the others: .*),
# goes through /api/v1/query.  A query over stoker's names must return data;
# one over node_exporter's (node_disk_*) or DCGM's names must parse.  Every
# stoker name the dashboard uses must be a family the loader exports.  The
# checker first proves it can fail (a parse error, an unknown name).  Skipped
# (exit 77) only without the prometheus binary (Debian: prometheus).
. "$(dirname "$0")/cli-common.sh"
lib=$(dirname "$S")/libstoker.so.0
PROMETHEUS=${PROMETHEUS:-$(command -v prometheus 2>/dev/null)}
if [ -z "$PROMETHEUS" ]; then
	echo "skipped: no prometheus binary on PATH (Debian: apt-get install prometheus)"
	exit 77
fi
pids=
cleanup() {
	for p in $pids; do kill "$p" 2>/dev/null; done
	for p in $pids; do wait "$p" 2>/dev/null; done
}
fail() {
	echo "FAIL: $*"
	for f in loader.err prom.err; do
		[ -s "$tmp/$f" ] && sed "s/^/  $f: /" "$tmp/$f" | tail -n 15
	done
	exit 1
}
free_port() {
	$PY -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

"$S" gen "$tmp/d" --images 48 --classes 2 --seed 5 >/dev/null 2>"$tmp/gen.err" || fail "gen: $(cat "$tmp/gen.err")"
mkdir "$tmp/nvml"
cc -shared -fPIC -o "$tmp/nvml/libnvidia-ml.so.1" "$here/fixtures/nvml/fake_nvml.c" 2>"$tmp/cc.err" ||
	fail "the stand-in NVML does not build: $(cat "$tmp/cc.err")"

# --- the loader, serving its metrics ---------------------------------------------
cat >"$tmp/loader.py" <<'EOF'
import os, sys, time
import stoker
data, stop, portfile = sys.argv[1:4]
loader = stoker.Loader(data, batch_size=8, shuffle=True, seed=0, image=stoker.Image(size=64))
port = loader.serve_metrics(0, name="grafana")
with open(portfile + ".tmp", "w") as f:
    f.write("%d\n" % port)
os.rename(portfile + ".tmp", portfile)
end, epoch = time.monotonic() + 120, 0
while time.monotonic() < end and not os.path.exists(stop):
    loader.set_epoch(epoch)
    epoch += 1
    for batch in loader:
        time.sleep(0.01)  # the training step
        if os.path.exists(stop):
            break
loader.close()
EOF
# a sanitizer build of the library needs its runtime first in the process
pre=
if ldd "$lib" | grep -q libasan; then
	pre="$(cc -print-file-name=libasan.so) $(cc -print-file-name=libubsan.so)"
fi
LD_PRELOAD="$pre" ASAN_OPTIONS=detect_leaks=0 STOKER_LIB="$lib" \
	LD_LIBRARY_PATH="$tmp/nvml${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" PYTHONPATH="$top/python" \
	$PY "$tmp/loader.py" "$tmp/d" "$tmp/stop" "$tmp/port" >"$tmp/loader.out" 2>"$tmp/loader.err" &
loader=$!
pids="$pids $loader"
i=0
while [ ! -s "$tmp/port" ]; do
	kill -0 "$loader" 2>/dev/null || fail "the Python loader ended before serving"
	i=$((i + 1))
	[ $i -lt 300 ] || fail "the Python loader did not serve within 30 s"
	sleep 0.1
done
lport=$(cat "$tmp/port")

# --- our own Prometheus ------------------------------------------------------------
pport=$(free_port)
cat >"$tmp/prom.yml" <<EOF
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: stoker
    static_configs:
      - targets: ["127.0.0.1:$lport"]
EOF
"$PROMETHEUS" --config.file="$tmp/prom.yml" --storage.tsdb.path="$tmp/tsdb" \
	--web.listen-address="127.0.0.1:$pport" --log.level=warn >"$tmp/prom.out" 2>"$tmp/prom.err" &
prom=$!
pids="$pids $prom"

# --- every panel's query -------------------------------------------------------------
$PY - "$top/docs/grafana/stoker.json" "$lport" "$pport" "$prom" <<'EOF' || fail "the dashboard's queries (above)"
import json, os, re, sys, time, urllib.parse, urllib.request

dash_file, lport, pport, prom_pid = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
api = "http://127.0.0.1:%s/api/v1/query" % pport

def get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()

def query(expr):
    url = api + "?" + urllib.parse.urlencode({"query": expr})
    try:
        return json.loads(get(url))
    except urllib.error.HTTPError as e:  # 400 bad_data: a parse error; 503 while starting
        body = e.read().decode()
        try:
            return json.loads(body)
        except ValueError:
            return {"status": "http %d" % e.code, "error": body.strip()}

# the loader's own exposition: its families, and which have samples
text = get("http://127.0.0.1:%s/metrics" % lport)
families = set(re.findall(r"^# TYPE (\S+) ", text, re.M))
with_samples = set()
for ln in text.splitlines():
    if ln and not ln.startswith("#"):
        name = re.match(r"[a-zA-Z_:][a-zA-Z0-9_:]*", ln).group(0)
        with_samples.add(name)
        with_samples.add(re.sub(r"_(bucket|sum|count)$", "", name))

# Prometheus up, and three scrapes of the loader in
deadline = time.monotonic() + 30
while True:
    try:
        os.kill(prom_pid, 0)
    except OSError:
        sys.exit("prometheus exited (its log above)")
    try:
        r = query('count_over_time(up{job="stoker"}[1m]) >= 3 and up{job="stoker"} == 1')
        if r.get("status") == "success" and r["data"]["result"]:
            break
    except OSError:
        pass  # not listening yet
    if time.monotonic() > deadline:
        sys.exit("no three successful scrapes of 127.0.0.1:%s within 30 s" % lport)
    time.sleep(0.3)

VARS = {"__rate_interval": "1m", "__interval": "15s", "__range": "1m"}
def fill(expr, names):
    def sub(m):
        v = m.group(1) or m.group(2)
        if v in VARS:
            return VARS[v]
        if v in names:
            return ".*"
        raise SystemExit("unknown variable $%s in: %s" % (v, expr))
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", sub, expr)

def names_in(expr):
    return set(re.findall(r"\b((?:stoker|node|DCGM)_[A-Za-z0-9_]+)", expr))

# the checker fails when it should
assert query("rate(stoker_loader_samples_total[1m]").get("status") == "error", "a parse error passed"
assert not query("stoker_loader_no_such_metric")["data"]["result"], "an unknown name had data"

dash = json.load(open(dash_file))
var_names = {v["name"] for v in dash["templating"]["list"]}
checks = []  # (where, expr)
for v in dash["templating"]["list"]:
    if v["type"] != "query":
        continue
    q = v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
    m = re.fullmatch(r"label_values\((.+),\s*(\w+)\)", q)
    assert m, "variable %s: not label_values(SELECTOR, LABEL): %s" % (v["name"], q)
    checks.append(("variable $%s" % v["name"], m.group(1)))
def walk(panels):
    for p in panels:
        walk(p.get("panels", []))
        for t in p.get("targets", []):
            checks.append(("panel '%s' %s" % (p["title"], t["refId"]), t["expr"]))
walk(dash["panels"])
assert len(checks) > 30, "only %d queries found" % len(checks)

bad, with_data, parsed = [], 0, []
for where, expr in checks:
    q = fill(expr, var_names)
    names = names_in(q)
    ours = {n for n in names if n.startswith("stoker_")}
    for n in sorted(ours):
        base = re.sub(r"_(bucket|sum|count)$", "", n)
        if n not in families and base not in families:
            bad.append("%s: %s is no family the loader exports" % (where, n))
    r = query(q)
    if r.get("status") != "success":
        bad.append("%s: %s: %s" % (where, r.get("errorType"), r.get("error")))
        continue
    empty = [n for n in ours if n not in with_samples]
    if names - ours:
        parsed.append(where)  # node_exporter's or DCGM's: parsing is all we can check
    elif empty:
        parsed.append("%s (%s has no samples here)" % (where, ", ".join(sorted(empty))))
    elif not r["data"]["result"]:
        bad.append("%s: no data for %s" % (where, q))
    else:
        with_data += 1
for b in bad:
    print("FAIL: " + b)
if bad:
    sys.exit(1)
print("ok: %d queries returned data; %d parsed only:" % (with_data, len(parsed)))
for p in parsed:
    print("  " + p)
EOF
touch "$tmp/stop"
wait "$loader" || fail "the Python loader exited with $?"
pids=$prom
