#!/bin/sh
# cli_doctor.sh — `stoker doctor`: bad usage exits 2; a run on this machine
# gives one ok/warn/fail line per check and valid --json; on the fake trees in
# tests/fixtures/doctor/{ok,warn,fail} (with PATH's device linked into a copy)
# each check lands on the status its numbers call for, and a failed check
# exits 1; the memlock check and the I/O plan of each storage kind; GPUs come through a stub libnvidia-ml.so.1 built here; PATH is
# left as found.  Run by tests/cli.sh with $STOKER set.
. "$(dirname "$0")/cli-common.sh"
if ! "$S" doctor --help >/dev/null 2>&1; then
	echo "skipped: this stoker has no 'doctor' subcommand yet (register cmd_doctor in tools/main.c)"
	exit 77
fi

# --- 1. bad usage exits 2 with a message; --help exits 0 ---------------------------
usage() {
	"$S" doctor "$@" >/dev/null 2>"$tmp/err"
	rc=$?
	[ $rc = 2 ] || fail "stoker doctor $*: exit $rc, want 2"
	[ -s "$tmp/err" ] || fail "stoker doctor $*: no message"
}
usage /a /b
usage --batch-size 0
usage --prefetch x
usage --sample-size 1q
usage --no-such-option
"$S" doctor --help >"$tmp/help" 2>&1 || fail "--help exits non-zero"
for o in --batch-size --prefetch --sample-size --json --root; do
	grep -q -- "$o" "$tmp/help" || fail "--help does not mention $o"
done

# --- 2. this machine: every line a status; --json valid ---------------------------
data=$tmp/data
mkdir -p "$data/cat" "$data/dog"
for i in 1 2 3; do
	head -c 40000 /dev/urandom >"$data/cat/$i.jpg"
	head -c 60000 /dev/urandom >"$data/dog/$i.jpg"
done
ls -laR "$data" >"$tmp/before"
"$S" doctor "$data" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc = 0 ] || [ $rc = 1 ] || fail "doctor on this machine: exit $rc"
grep -Eq '^  (ok|warn|fail) +cpu ' "$tmp/out" || fail "no cpu line"
grep -Eq '^  (ok|warn|fail) +O_DIRECT ' "$tmp/out" || fail "no O_DIRECT line"
grep -Eq '^[0-9]+ ok, [0-9]+ warn, [0-9]+ fail$' "$tmp/out" || fail "no summary line"
"$S" doctor --json "$data" >"$tmp/json" 2>"$tmp/err"
rc2=$?
[ $rc2 = $rc ] || fail "--json exits $rc2, the table $rc"
$PY - "$tmp/json" <<'EOF' || fail "--json is not the documented schema"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["schema_version"] == 1, j
names = [c["name"] for c in j["checks"]]
for c in j["checks"]:
    assert set(c) == {"name", "status", "value", "why", "fix"}, c
    assert c["status"] in ("ok", "warn", "fail"), c
    assert c["value"], c
    if c["status"] != "ok":
        assert c["why"], c
for want in ("cpu", "memory", "/dev/shm", "io_uring", "memlock", "path", "filesystem",
             "io plan", "O_DIRECT", "dirty pages", "open files"):
    assert want in names, (want, names)
assert any(n.startswith("gpu") for n in names), names
s = j["summary"]
assert s["ok"] + s["warn"] + s["fail"] == len(names)
EOF
ls -laR "$data" >"$tmp/after"
cmp -s "$tmp/before" "$tmp/after" || fail "doctor changed PATH: $(diff "$tmp/before" "$tmp/after")"

# --- 3. fake trees: each check on the status its numbers call for ------------------
# A copy of a fixture with PATH's device (st_dev) linked to one of its disks.
tree() { # name disk-folder
	rm -rf "$tmp/root"
	cp -a "$here/fixtures/doctor/$1" "$tmp/root"
	dev=$(stat -c '%Hd:%Ld' "$data")
	ln -sfn "../../block/$2" "$tmp/root/sys/dev/block/$dev"
}
# runs doctor on the tree; $1 = wanted exit code, then "name=status" pairs
expect() {
	want=$1; shift
	"$S" doctor --root "$tmp/root" --json $opts "$data" >"$tmp/out" 2>"$tmp/err"
	rc=$?
	[ $rc = "$want" ] || fail "doctor on the $name tree: exit $rc, want $want"
	$PY - "$tmp/out" "$@" <<'EOF' || fail "doctor on the $name tree: wrong statuses"
import json, sys
checks = {c["name"]: c for c in json.load(open(sys.argv[1]))["checks"]}
bad = []
for pair in sys.argv[2:]:
    name, want = pair.split("=")
    got = checks.get(name, {}).get("status")
    if got != want:
        bad.append("%s: %s, want %s (%s)" % (name, got, want, checks.get(name, {}).get("value")))
    elif want != "ok" and not checks[name]["fix"] and name not in ("O_DIRECT",):
        bad.append("%s: %s without a fix" % (name, want))
if bad:
    print("\n".join(bad))
    sys.exit(1)
EOF
}
name=ok; tree ok vda/vda1; opts="--sample-size 110000"
( ulimit -n 4096 2>/dev/null; expect 0 cpu=ok memory=ok /dev/shm=ok "mount options=ok" \
	filesystem=ok "block device=ok" scheduler=ok read-ahead=ok nr_requests=ok \
	"dirty pages=ok" "open files=ok" "huge pages=ok" gpu=ok ) || exit 1
name=warn; tree warn sda/sda1
( ulimit -n 4096 2>/dev/null; expect 0 cpu=warn memory=warn /dev/shm=warn "mount options=warn" \
	"block device=warn" scheduler=ok read-ahead=warn nr_requests=warn "dirty pages=warn" \
	"huge pages=warn" "open files=ok" ) || exit 1
grep -q 'echo 128 > /sys/block/sda/queue/read_ahead_kb' "$tmp/out" || fail "no read-ahead fix"
grep -q 'mount -o remount,noatime /' "$tmp/out" || fail "no noatime fix"
grep -q 'docker run --shm-size=8g' "$tmp/out" || fail "no --shm-size fix"
name=fail; tree fail nvme0n1/nvme0n1p1
( ulimit -n 128 2>/dev/null || exit 77
  expect 1 cpu=warn memory=fail /dev/shm=fail filesystem=warn scheduler=warn \
	"dirty pages=warn" "open files=fail" "huge pages=ok" "block device=ok" )
rc=$?
[ $rc = 77 ] && echo "note: cannot lower the open-file limit here; skipped that case"
[ $rc = 0 ] || [ $rc = 77 ] || exit 1
grep -q 'emptyDir: {medium: Memory' "$tmp/out" || fail "no Kubernetes shm fix"
grep -q 'echo none > /sys/block/nvme0n1/queue/scheduler' "$tmp/out" || fail "no scheduler fix"
"$S" doctor --root "$tmp/root" "$data" >"$tmp/out" 2>&1
[ $? = 1 ] || fail "a failed check must exit 1 in the table too"
grep -Eq '^  fail +memory ' "$tmp/out" || fail "no fail line for memory"
grep -q 'fix: docker run --memory=' "$tmp/out" || fail "no memory fix line"

# --- 3b. memlock: the slot pool, RDMA devices, CAP_IPC_LOCK -------------------------
# (the fake trees' proc/self/status: ok and warn without CAP_IPC_LOCK, fail with it;
# warn has two RDMA devices in sys/class/infiniband)
field() { # check-name key: that field of the last JSON output (whole, then grep'ed)
	v=$($PY -c 'import json,sys; c={c["name"]: c for c in json.load(open(sys.argv[1]))["checks"]}; print(c[sys.argv[2]][sys.argv[3]])' "$tmp/out" "$1" "$2")
	printf '%s\n' "$v"
}
# tree limit-KiB wanted-status [batch]: the slot pool is 4 slots of batch 224 x 224
# x 3 images (256: 154 MB, over any limit an unprivileged shell can set; 4: 2.4 MB,
# under most; the reads go to read areas, never pinned)
memlock() {
	tree "$1" vda/vda1
	( ulimit -l "$2" 2>/dev/null || exit 77
	  "$S" doctor --root "$tmp/root" --json --sample-size 110000 --batch-size "${4:-256}" \
		"$data" >"$tmp/out" 2>"$tmp/err"
	  got=$(field memlock status)
	  [ "$got" = "$3" ] || { echo "memlock on $1 with ulimit -l $2: $got, want $3 ($(field memlock value))"; exit 1; } )
}
for case in "ok 64 warn" "ok 4096 ok 4" "warn 4096 warn 4" "fail 64 ok"; do
	# shellcheck disable=SC2086
	memlock $case
	rc=$?
	[ $rc = 77 ] && { echo "note: cannot set ulimit -l here; memlock case '$case' skipped"; continue; }
	[ $rc = 0 ] || fail "memlock case '$case'"
	case "$case" in
	"ok 64 warn")
		field memlock value | grep -q 'soft 64 KiB' || fail "memlock value: $(field memlock value)"
		field memlock value | grep -Eq 'slot pool 4 x [0-9.]+ MB = [0-9.]+ MB' ||
			fail "memlock does not give the slot pool: $(field memlock value)"
		for f in 'ulimit -l unlimited' 'memlock unlimited' 'docker run --ulimit memlock=-1' \
			'LimitMEMLOCK=infinity' 'IPC_LOCK'; do
			field memlock fix | grep -q -- "$f" || fail "memlock fix lacks '$f'"
		done ;;
	"warn 4096 warn 4")
		field memlock value | grep -q 'RDMA devices: mlx5_[01],mlx5_[01]' ||
			fail "RDMA devices not named: $(field memlock value)"
		field memlock why | grep -q 'NCCL' || fail "RDMA case does not say why" ;;
	"fail 64 ok")
		field memlock value | grep -q 'CAP_IPC_LOCK' || fail "CAP_IPC_LOCK not said" ;;
	esac
done

# --- 3c. the I/O plan by storage kind (the library's stk_io_plan) ------------------
# tree disk-folder [extra mount line for $data] -> the "io plan" check
plan() {
	tree ok "$1"
	[ -n "${2:-}" ] && printf '%s\n' "$2" >>"$tmp/root/proc/mounts"
	"$S" doctor --root "$tmp/root" --json "$data" >"$tmp/out" 2>"$tmp/err"
	[ "$(field 'io plan' status)" = ok ] || fail "io plan on $1 ${2:-}: $(field 'io plan' value)"
	field 'io plan' value
}
want_plan() { # what value-pattern why-pattern
	echo "$1" | grep -Eq "$2" || fail "io plan: '$1' does not match '$2'"
	field 'io plan' why | grep -Eiq "$3" || fail "io plan why: '$(field 'io plan' why)' lacks '$3'"
}
want_plan "$(plan nvme0n1/nvme0n1p1)" '^nvme nvme0n1: stoker would keep 256 reads in flight on [0-9]+ I/O threads?; the DataLoader rule of thumb says 8-12 workers$' 'many hardware queues'
want_plan "$(plan sdb/sdb1)" '^sata sdb: stoker would keep 32 reads in flight on 1 I/O thread; .* 2-4 workers$' 'one queue of 32'
field 'io plan' why | grep -q 'nr_requests is 16 here' || fail "io plan does not say nr_requests is below its depth"
want_plan "$(plan sda/sda1)" '^sata \(spinning\) sda: stoker would keep 16 reads in flight on 1 I/O thread; .* 2-4 workers$' 'seek'
want_plan "$(plan vda/vda1)" '^virtio vda: stoker would keep 128 reads in flight' 'virtqueue'
want_plan "$(plan vda/vda1 "server:/export $data nfs4 rw,relatime,vers=4.2 0 0")" '^network: stoker would keep 512 reads in flight on [0-9]+ I/O threads?; .* 8-16 workers$' 'round trip'
want_plan "$(plan vda/vda1 "tmpfs $data tmpfs rw,size=1g 0 0")" '^memory: stoker would keep 64 reads in flight' 'copy'
field 'io plan' fix | grep -q -- "--queue-depth 64" || fail "io plan fix: $(field 'io plan' fix)"
"$S" doctor --root "$tmp/root" "$data" >"$tmp/out" 2>&1
grep -q '^ *why: in memory' "$tmp/out" || fail "the io plan's why is not printed when ok"

# --- 4. GPUs through a stub NVML ------------------------------------------------
if command -v cc >/dev/null 2>&1; then
	cat >"$tmp/nvml.c" <<'EOF'
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
typedef struct { unsigned long long total, free, used; } mem_t;
static int dev(void *d) { return (int)(uintptr_t)d - 1; }
int nvmlInit_v2(void) { return getenv("FAKE_NVML_FAIL") ? 9 : 0; }
int nvmlShutdown(void) { return 0; }
const char *nvmlErrorString(int r) { return r == 9 ? "Driver Not Loaded" : "Unknown Error"; }
int nvmlDeviceGetCount_v2(unsigned *n) { *n = 2; return 0; }
int nvmlDeviceGetHandleByIndex_v2(unsigned i, void **d) { *d = (void *)(uintptr_t)(i + 1); return 0; }
int nvmlDeviceGetName(void *d, char *n, unsigned len) { snprintf(n, len, "FakeGPU %d", dev(d)); return 0; }
int nvmlDeviceGetMemoryInfo(void *d, mem_t *m) { m->total = 80ull << 30; m->used = 1ull << 30; m->free = m->total - m->used; return 0; }
int nvmlDeviceGetCurrPcieLinkGeneration(void *d, unsigned *v) { *v = 4; return 0; }
int nvmlDeviceGetCurrPcieLinkWidth(void *d, unsigned *v) { *v = dev(d) ? 8 : 16; return 0; }
int nvmlDeviceGetMaxPcieLinkGeneration(void *d, unsigned *v) { *v = 4; return 0; }
int nvmlDeviceGetMaxPcieLinkWidth(void *d, unsigned *v) { *v = 16; return 0; }
EOF
	mkdir -p "$tmp/lib"
	if cc -shared -fPIC -o "$tmp/lib/libnvidia-ml.so.1" "$tmp/nvml.c" 2>"$tmp/err"; then
		LD_LIBRARY_PATH="$tmp/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
			"$S" doctor --json >"$tmp/out" 2>"$tmp/err"
		$PY - "$tmp/out" <<'EOF' || fail "GPUs through the stub NVML"
import json, sys
c = {c["name"]: c for c in json.load(open(sys.argv[1]))["checks"]}
g0, g1 = c["gpu 0"], c["gpu 1"]
assert g0["status"] == "ok" and "FakeGPU 0" in g0["value"], g0
assert "gen 4 x16" in g0["value"] and "31.5 GB/s" in g0["value"], g0
assert g1["status"] == "warn" and "x8 of x16" in g1["why"], g1
assert "15.8 GB/s" in g1["value"], g1
EOF
		FAKE_NVML_FAIL=1 LD_LIBRARY_PATH="$tmp/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
			"$S" doctor >"$tmp/out" 2>"$tmp/err"
		grep -Eq '^  ok +gpu +NVML does not start: Driver Not Loaded' "$tmp/out" ||
			fail "a driver that does not start is not said plainly"
	else
		echo "note: cc cannot build the NVML stub; GPU case skipped"
	fi
fi
"$S" doctor >"$tmp/out" 2>&1
grep -Eq '^  ok +gpu +(no NVIDIA driver found|NVML does not start)|^  (ok|warn) +gpu 0 ' "$tmp/out" ||
	fail "no plain GPU line"
# One thread rule: the CPU check's loader threads are the CPU share's (the
# library's rule), not a count of the doctor's own.
"$S" doctor --json >"$tmp/cpu.json" 2>/dev/null
python3 - "$tmp/cpu.json" <<'EOF' || fail "the cpu check and the cpu share disagree on the loader's threads"
import json, re, sys
c = {c["name"]: c for c in json.load(open(sys.argv[1]))["checks"]}
a = re.search(r"(\d+) decode threads?(?: share it)?; (\d+) I/O thread", c["cpu"]["value"])
b = re.search(r"(\d+) decode \+ (\d+) I/O thread", c["cpu share"]["value"])
assert a and b and a.groups() == b.groups(), (c["cpu"]["value"], c["cpu share"]["value"])
EOF
echo "ok"
