/*
 * doctor/doctor.c — `stoker doctor [PATH]`: system checks for feeding GPUs, each ok /
 * warn / fail with the measured value, why it matters and the exact command
 * that fixes it.  CPU, memory against the loader's budget and the cgroup
 * limit, /dev/shm, io_uring (a real probe), vm dirty limits, open-file limit,
 * transparent huge pages, locked-memory limit, FFmpeg's video decoders
 * (doctor/video.c) and GPUs (NVML, when the driver is there); with PATH, its filesystem, device and queue settings, and the
 * I/O plan for that storage (doctor/path.c).  The checks are rows of one
 * table (`checks`), in the order they print.
 *
 * It reads /proc and /sys through stoker/sys.h and changes nothing: the fixes
 * are printed, never run.  --root points the readers at a fake tree, which
 * is how the tests reach every ok / warn / fail path.  Exit 1 when a check
 * fails, 0 otherwise, 2 on bad usage.
 */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>

#include "doctor/doctor.h"

static const char *const status_names[] = {"ok", "warn", "fail"};

/* The mean sample size the memory checks assume: --sample-size, else PATH's
 * mean file, else ImageNet's mean JPEG. */
static uint64_t doc_sample(const struct doctor *d)
{
	return d->sample ? d->sample : d->files ? d->bytes / d->files : 110000;
}

/* The library's own sizing (stk_memory_estimate) of an image-mode loader at
 * the doctor's batch and prefetch. */
static void doc_memory_at(const struct doctor *d, uint64_t sample, uint64_t batch,
			  uint64_t prefetch, struct stk_memory *out)
{
	struct stk_image_opts img = {.size = sizeof(img)};
	struct stk_loader_opts o = {.size = sizeof(o), .batch_size = (uint32_t)batch,
				    .prefetch = (uint32_t)prefetch, .image = &img};
	uint64_t n = d->files ? d->files : 1281167; /* ImageNet's training set */
	if (stk_memory_estimate(&o, n, sample, out, NULL, 0) < 0)
		memset(out, 0, sizeof(*out));
}

static void doc_memory(const struct doctor *d, uint64_t sample, struct stk_memory *out)
{
	doc_memory_at(d, sample, d->batch, d->prefetch, out);
}

static bool doc_fits(const struct doctor *d, uint64_t sample, uint64_t batch, uint64_t prefetch,
		     double room)
{
	struct stk_memory m = {.size = sizeof(m)};
	doc_memory_at(d, sample, batch, prefetch, &m);
	return m.total && (double)m.total <= room;
}

static void check_cpu(struct doctor *d)
{
	const struct stk_cpus c = d->cpus;
	struct check *k = doc_add(d, "cpu", ST_OK);
	if (d->cpus_rc || !c.logical) {
		k->status = ST_WARN;
		SET(k, value, "cannot read the CPU list");
		return;
	}
	/* What this process may really use, and each rank's loader threads: the
	 * library's rules (stk_cpus_usable, stk_cpu_share_for), one rank per GPU. */
	double usable = stk_cpus_usable(&c);
	uint32_t ranks = d->ngpu > 1 ? (uint32_t)d->ngpu : 0;
	struct stk_cpu_share s = {.size = sizeof(s)};
	stk_cpu_share_for(&c, ranks, &s);
	char extra[128] = "", per[128] = "";
	if (c.quota > 0)
		snprintf(extra, sizeof(extra), ", cgroup quota %.1f CPUs", c.quota);
	else if (c.allowed && c.allowed < c.logical)
		snprintf(extra, sizeof(extra), ", %u allowed by affinity", c.allowed);
	if (ranks)
		snprintf(per, sizeof(per), "each of %u ranks (one per GPU): %u CPU%s, ", ranks, s.cpus,
			 s.cpus == 1 ? "" : "s");
	/* figures that add up: the trainer's CPU and the decode threads' make the
	 * share; the I/O threads run beside them (they mostly wait on the kernel) */
	char split[160];
	if (s.cpus > 1)
		snprintf(split, sizeof(split), "1 for the trainer + %u decode thread%s", s.decode_threads,
			 s.decode_threads == 1 ? "" : "s");
	else
		snprintf(split, sizeof(split), "the trainer and %u decode thread%s share it",
			 s.decode_threads, s.decode_threads == 1 ? "" : "s");
	SET(k, value, "%u logical, %u physical cores (%u package%s)%s; %g usable; %s%u CPU%s: %s; "
		      "%u I/O thread%s beside them (waiting on the kernel, mostly)",
	    c.logical, c.physical, c.packages, c.packages == 1 ? "" : "s", extra, usable, per,
	    s.cpus, s.cpus == 1 ? "" : "s", split, s.io_threads, s.io_threads == 1 ? "" : "s");
	if (usable < 4) {
		k->status = ST_WARN;
		SET(k, why, "decode and batching need CPU (a few hundred JPEGs per second per core) and "
			    "the trainer needs cores of its own: with %.1f usable CPUs, decode will be the "
			    "bottleneck",
		    usable);
		if (c.quota > 0 && c.quota < c.logical)
			SET(k, fix, "docker run --cpus=%u ...  # or Kubernetes resources.limits.cpu",
			    c.logical);
		else
			SET(k, fix, "store pre-decoded or smaller images, or decode on the GPU (nvJPEG, DALI)");
	} else {
		SET(k, why, "each rank's loader decodes on its share of the CPUs less the one its "
			    "training thread keeps (the loader's own rule, stoker.cpu_share()); physical "
			    "cores decode faster than their hyper-threads");
	}
}

static void check_memory(struct doctor *d)
{
	struct stk_meminfo m = {.size = sizeof(m)};
	struct check *k = doc_add(d, "memory", ST_OK);
	if (stk_sys_meminfo(d->root, &m)) {
		k->status = ST_WARN;
		SET(k, value, "cannot read /proc/meminfo");
		return;
	}
	uint64_t sample = doc_sample(d);
	struct stk_memory mem = {.size = sizeof(mem)};
	doc_memory(d, sample, &mem);
	double budget = (double)mem.total;
	uint64_t lim = 0, used = 0;
	int limited = stk_sys_cgroup_memory(d->root, &lim, &used);
	double room = (double)m.available;
	char b[11][32], cg[128] = "";
	if (limited == 1) {
		double cg_room = lim > used ? (double)(lim - used) : 0;
		if (cg_room < room)
			room = cg_room;
		snprintf(cg, sizeof(cg), ", cgroup limit %s (%s used)",
			 fmt_bytes(b[0], sizeof(b[0]), (double)lim), fmt_bytes(b[1], sizeof(b[1]), (double)used));
	}
	/* every part of the total, so that the figures add up */
	SET(k, value, "total %s, available %s%s; a loader (image mode, batch %llu, prefetch %llu, "
		      "%s samples) takes %s: slots %llu x %s = %s, slot records %s, index %s, "
		      "decode %s (%u thread%s)",
	    fmt_bytes(b[2], sizeof(b[2]), (double)m.total), fmt_bytes(b[3], sizeof(b[3]), (double)m.available),
	    cg, (unsigned long long)d->batch, (unsigned long long)d->prefetch,
	    fmt_bytes(b[4], sizeof(b[4]), (double)sample), fmt_bytes(b[5], sizeof(b[5]), budget),
	    (unsigned long long)mem.nslots, fmt_bytes(b[6], sizeof(b[6]), (double)mem.slot_bytes),
	    fmt_bytes(b[8], sizeof(b[8]), (double)mem.pool_bytes),
	    fmt_bytes(b[9], sizeof(b[9]), (double)mem.meta_bytes),
	    fmt_bytes(b[10], sizeof(b[10]), (double)mem.index_bytes),
	    fmt_bytes(b[7], sizeof(b[7]), (double)mem.decode_bytes), mem.decode_threads,
	    mem.decode_threads == 1 ? "" : "s");
	SET(k, why, "the loader's batch slots are allocated up front (the library's sizing, "
		    "stk_memory_estimate: each slot holds a batch's reads and its decoded images), "
		    "beside the decode threads' working memory; beyond available memory the kernel "
		    "swaps, or the cgroup OOM-kills the trainer");
	if (budget > room / 2) {
		k->status = budget > room ? ST_FAIL : ST_WARN;
		/* the largest prefetch that fits in half the room, else the largest
		 * batch with a prefetch of 2 */
		uint64_t fit = 0, fitb = 0;
		for (uint64_t p = d->prefetch; p >= 1 && !fit; p--)
			if (doc_fits(d, sample, d->batch, p, room / 2))
				fit = p;
		for (uint64_t bs = d->batch; bs >= 1 && !fit && !fitb; bs /= 2)
			if (doc_fits(d, sample, bs, 2, room / 2))
				fitb = bs;
		char lines[256] = "";
		if (fit >= 1)
			snprintf(lines, sizeof(lines), "stoker bench --prefetch %llu ...  # fits in half "
				 "the room\n", (unsigned long long)fit);
		else if (fitb >= 1)
			snprintf(lines, sizeof(lines), "stoker bench --prefetch 2 --batch-size %llu ...  "
				 "# fits in half the room\n", (unsigned long long)fitb);
		SET(k, fix, "%s%s", lines,
		    limited == 1 ? "docker run --memory=16g ...  # or raise Kubernetes resources.limits.memory"
				 : "stop what holds the memory, or add RAM");
	}
}

static void check_shm(struct doctor *d)
{
	uint64_t total = 0, avail = 0;
	struct check *k = doc_add(d, "/dev/shm", ST_OK);
	SET(k, why, "PyTorch DataLoader workers pass every batch through /dev/shm; containers "
		    "default to 64 MB, which ends in 'bus error' or 'No space left on device' once "
		    "batches are large (stoker itself uses threads and does not need it)");
	if (stk_sys_shm(d->root, &total, &avail)) {
		k->status = ST_WARN;
		SET(k, value, "missing");
		SET(k, fix, "mount -t tmpfs -o size=8g tmpfs /dev/shm");
		return;
	}
	char b1[32], b2[32];
	SET(k, value, "%s (%s free)", fmt_bytes(b1, sizeof(b1), (double)total),
	    fmt_bytes(b2, sizeof(b2), (double)avail));
	if (total < (1ull << 30)) {
		k->status = total < (128ull << 20) ? ST_FAIL : ST_WARN;
		SET(k, fix, "docker run --shm-size=8g ...\n"
			    "Kubernetes: volumes: [{name: dshm, emptyDir: {medium: Memory, sizeLimit: 8Gi}}], "
			    "mounted at /dev/shm\n"
			    "mount -o remount,size=8G /dev/shm  # on a host");
	} else if (avail < total / 4) {
		k->status = ST_WARN;
		SET(k, why, "mostly used: segments left by crashed DataLoader workers (torch_*) take "
			    "room from the next run");
		SET(k, fix, "ls -la /dev/shm  # then remove stale segments no running process uses");
	}
}

static void check_io_uring(struct doctor *d)
{
	char why[256];
	struct stk_tunables t = {.size = sizeof(t)};
	stk_sys_tunables(d->root, &t);
	int rc = stk_sys_io_uring_probe(why, sizeof(why));
	struct check *k = doc_add(d, "io_uring", rc ? ST_WARN : ST_OK);
	SET(k, why, "stoker keeps hundreds of reads in flight from one thread with io_uring; without "
		    "it, it falls back to a pool of pread threads (more CPU per read)");
	if (!rc) {
		SET(k, value, "usable (ring, openat/read/close, direct descriptors)");
		return;
	}
	if (rc == -EPERM && t.io_uring_disabled == 2) {
		SET(k, value, "disabled: kernel.io_uring_disabled = 2");
		SET(k, fix, "sysctl -w kernel.io_uring_disabled=0");
	} else if (rc == -EPERM && t.io_uring_disabled == 1) {
		SET(k, value, "restricted: kernel.io_uring_disabled = 1 and this user is not in "
			      "kernel.io_uring_group");
		SET(k, fix, "sysctl -w kernel.io_uring_disabled=0  # or: sysctl -w kernel.io_uring_group=GID");
	} else if (rc == -EPERM) {
		SET(k, value, "blocked (EPERM): a seccomp filter (container runtimes' default profiles "
			      "block io_uring)");
		SET(k, fix, "docker run --security-opt seccomp=unconfined ...  # or a profile allowing "
			    "io_uring_setup, io_uring_enter, io_uring_register\n"
			    "Kubernetes: securityContext: {seccompProfile: {type: Unconfined}}");
	} else if (rc == -ENOSYS) {
		SET(k, value, "not in this kernel (ENOSYS: before 5.1, or built without CONFIG_IO_URING)");
		SET(k, fix, "run a 5.19 or later kernel");
	} else {
		SET(k, value, "unusable: %s", why);
		SET(k, fix, "run a 5.19 or later kernel  # the loader needs openat/read/close chains "
			    "and sparse file tables");
	}
}

/* ulimit -l's unit: KiB, or "unlimited". */
static const char *fmt_memlock(char *buf, size_t len, uint64_t v)
{
	if (v == UINT64_MAX)
		snprintf(buf, len, "unlimited");
	else
		snprintf(buf, len, "%llu KiB", (unsigned long long)(v / 1024));
	return buf;
}

static void check_memlock(struct doctor *d)
{
	struct stk_tunables t = {.size = sizeof(t)};
	if (stk_sys_tunables(d->root, &t))
		return;
	char rdma[128], soft[32], hard[32], sb[32], pb[32];
	int nrdma = stk_sys_rdma_devices(d->root, rdma, sizeof(rdma));
	struct stk_memory mem = {.size = sizeof(mem)};
	doc_memory(d, doc_sample(d), &mem);
	double pool = (double)mem.pool_bytes; /* what pinning locks */
	struct check *k = doc_add(d, "memlock", ST_OK);
	SET(k, value, "soft %s, hard %s (ulimit -l); slot pool %llu x %s = %s; %s",
	    fmt_memlock(soft, sizeof(soft), t.memlock_soft), fmt_memlock(hard, sizeof(hard), t.memlock_hard),
	    (unsigned long long)mem.nslots, fmt_bytes(sb, sizeof(sb), (double)mem.slot_bytes),
	    fmt_bytes(pb, sizeof(pb), pool), nrdma > 0 ? "RDMA devices: " : "no RDMA devices");
	if (nrdma > 0)
		doc_set(k->value + strlen(k->value), sizeof(k->value) - strlen(k->value), "%s", rdma);
	SET(k, why, "locked memory: NCCL over InfiniBand/RoCE and GPUDirect RDMA register their "
		    "buffers against this limit (too low ends in 'ibv_reg_mr failed' or 'NET/IB ... "
		    "Cannot allocate memory'), and so do stoker's --direct reads (the slot pool as "
		    "io_uring fixed buffers); pinning the pool for the GPU (cudaHostRegister) locks "
		    "the same pages; CAP_IPC_LOCK lifts the limit");
	if (t.memlock_soft == UINT64_MAX)
		return;
	if (t.cap_ipc_lock == 1) {
		doc_set(k->value + strlen(k->value), sizeof(k->value) - strlen(k->value),
			"; CAP_IPC_LOCK: exempt");
		return;
	}
	if (nrdma > 0) {
		k->status = ST_WARN;
		SET(k, why, "RDMA devices are here, so NCCL will register its buffers over "
			    "InfiniBand/RoCE: it needs an unlimited RLIMIT_MEMLOCK (too low ends in "
			    "'ibv_reg_mr failed' or 'NET/IB ... Cannot allocate memory'); stoker's "
			    "--direct reads register the slot pool against it too");
	} else if ((double)t.memlock_soft < pool) {
		k->status = ST_WARN;
		SET(k, why, "the slot pool does not fit under it: --direct reads cannot register it "
			    "with io_uring (each read then pins its pages) and pinning for the GPU may be "
			    "refused (copies then go through pageable memory); NCCL over RDMA would "
			    "need it unlimited too");
	}
	if (k->status == ST_OK)
		return;
	SET(k, fix, "ulimit -l unlimited  # this shell%s\n"
		    "/etc/security/limits.conf: '* soft memlock unlimited' and '* hard memlock "
		    "unlimited', then log in again\n"
		    "docker run --ulimit memlock=-1:-1 ...  # or dockerd's default-ulimits\n"
		    "systemd: LimitMEMLOCK=infinity in the unit's [Service] section\n"
		    "Kubernetes: no ulimit field; raise the runtime's default (LimitMEMLOCK=infinity "
		    "for containerd.service) or add securityContext: {capabilities: {add: [IPC_LOCK]}}",
	    t.memlock_hard == UINT64_MAX ? "" : "; raise the hard limit first (as root, below)");
}

static void check_dirty(struct doctor *d)
{
	struct stk_tunables t = {.size = sizeof(t)};
	struct stk_meminfo m = {.size = sizeof(m)};
	if (stk_sys_tunables(d->root, &t) || (t.dirty_ratio < 0 && t.dirty_bytes < 0))
		return;
	stk_sys_meminfo(d->root, &m);
	struct check *k = doc_add(d, "dirty pages", ST_OK);
	/* the kernel takes the ratios of dirtyable memory, close to MemAvailable */
	double limit = t.dirty_bytes > 0 ? (double)t.dirty_bytes
					 : (double)m.available * (t.dirty_ratio > 0 ? t.dirty_ratio : 0) / 100;
	char b[32];
	if (t.dirty_bytes > 0)
		SET(k, value, "vm.dirty_bytes %lld, vm.dirty_background_bytes %lld",
		    (long long)t.dirty_bytes, (long long)t.dirty_background_bytes);
	else
		SET(k, value, "vm.dirty_ratio %d, vm.dirty_background_ratio %d (writers block past %s)",
		    t.dirty_ratio, t.dirty_background_ratio, fmt_bytes(b, sizeof(b), limit));
	SET(k, why, "checkpoints and `stoker gen`/`pack` write through the page cache: a high limit "
		    "lets gigabytes pile up, then write-back floods the device and stalls the reads "
		    "of the next batches");
	bool inverted = t.dirty_bytes <= 0 && t.dirty_background_ratio >= t.dirty_ratio &&
			t.dirty_ratio > 0;
	if (limit > 16.0 * (1ull << 30) || inverted) {
		k->status = ST_WARN;
		SET(k, fix, "sysctl -w vm.dirty_background_bytes=268435456 vm.dirty_bytes=1073741824");
	}
}

static void check_nofile(struct doctor *d)
{
	struct stk_tunables t = {.size = sizeof(t)};
	if (stk_sys_tunables(d->root, &t))
		return;
	struct check *k = doc_add(d, "open files", ST_OK);
	char soft[32], hard[32];
	snprintf(soft, sizeof(soft), t.nofile_soft == UINT64_MAX ? "unlimited" : "%llu",
		 (unsigned long long)t.nofile_soft);
	snprintf(hard, sizeof(hard), t.nofile_hard == UINT64_MAX ? "unlimited" : "%llu",
		 (unsigned long long)t.nofile_hard);
	if (d->path_ok && d->is_dir)
		SET(k, value, "soft %s, hard %s; dataset %s%llu files", soft, hard,
		    d->count_capped ? ">= " : "", (unsigned long long)d->files);
	else
		SET(k, value, "soft %s, hard %s", soft, hard);
	SET(k, why, "the loader keeps up to queue-depth files open (%s by default, and io_uring's "
		    "file table counts against the limit); DataLoader workers sharing tensors by file "
		    "descriptor and readers keeping shards open need one per file",
	    doc_default("queue_depth"));
	const char *raise = t.nofile_hard > t.nofile_soft
				    ? ""
				    : "  # raise the hard limit first: /etc/security/limits.conf "
				      "nofile, docker run --ulimit nofile=1048576:1048576, or systemd "
				      "LimitNOFILE=1048576";
	if (t.nofile_soft < 256) {
		k->status = ST_FAIL;
	} else if (d->path_ok && d->is_dir && t.nofile_soft < d->files && t.nofile_soft < 65536) {
		k->status = ST_WARN;
	}
	if (k->status != ST_OK)
		SET(k, fix, "ulimit -n %s%s", t.nofile_hard > t.nofile_soft ? hard : "1048576", raise);
}

static void check_thp(struct doctor *d)
{
	struct stk_tunables t = {.size = sizeof(t)};
	if (stk_sys_tunables(d->root, &t) || !t.thp_enabled[0])
		return;
	struct check *k = doc_add(d, "huge pages", ST_OK);
	SET(k, value, "transparent_hugepage enabled [%s], defrag [%s]", t.thp_enabled,
	    t.thp_defrag[0] ? t.thp_defrag : "?");
	if (!strcmp(t.thp_enabled, "always") && !strcmp(t.thp_defrag, "always")) {
		k->status = ST_WARN;
		SET(k, why, "with defrag 'always', allocations stall in direct compaction once the page "
			    "cache (a dataset being read) has fragmented memory");
		SET(k, fix, "echo madvise > /sys/kernel/mm/transparent_hugepage/defrag");
	} else {
		SET(k, why, "no allocation waits for compaction (defrag is not 'always')");
	}
}

static void check_gpus(struct doctor *d)
{
	if (d->ngpu <= 0) {
		struct check *k = doc_add(d, "gpu", ST_OK);
		SET(k, value, "%s", d->gpu_why[0] ? d->gpu_why : "no NVIDIA driver found");
		SET(k, why, "with NVML (the NVIDIA driver) the doctor reports each GPU's PCIe link, the "
			    "ceiling for host-to-GPU copies");
		return;
	}
	for (int i = 0; i < d->ngpu && i < DOCTOR_MAX_GPUS; i++) {
		const struct stk_gpu *g = &d->gpus[i];
		char name[16], b1[32];
		snprintf(name, sizeof(name), "gpu %d", i);
		struct check *k = doc_add(d, name, ST_OK);
		SET(k, value, "%s, %s, PCIe gen %d x%d (max gen %d x%d) -> %.1f GB/s host-to-GPU ceiling",
		    g->name[0] ? g->name : "NVIDIA GPU", fmt_bytes(b1, sizeof(b1), (double)g->mem_total),
		    g->pcie_gen, g->pcie_width, g->pcie_gen_max, g->pcie_width_max, g->h2d_gbps);
		SET(k, why, "every batch crosses PCIe to the GPU: pinned copies reach ~80-90 %% of this "
			    "ceiling (an idle GPU trains its link down; it returns to the max under load)");
		if (g->pcie_width > 0 && g->pcie_width_max > 0 && g->pcie_width < g->pcie_width_max) {
			k->status = ST_WARN;
			SET(k, why, "the link runs at x%d of x%d lanes: a fraction of the host-to-GPU "
				    "bandwidth",
			    g->pcie_width, g->pcie_width_max);
			SET(k, fix, "reseat the card in a full x%d slot, or check the slot's lane "
				    "bifurcation in the BIOS  # nvidia-smi -q -d PCIE",
			    g->pcie_width_max);
		}
	}
}

/* Where PATH's checks print (they run before the others, see cmd_doctor). */
static void path_slot(struct doctor *d)
{
	(void)d;
}

/* The checks in the order they print: a new check is one more row. */
static void (*const checks[])(struct doctor *) = {
	check_cpu,      doc_share_check, check_memory, check_shm, check_io_uring, check_memlock,
	path_slot,      check_dirty,  check_nofile, check_thp,    doc_video_check, check_gpus,
};

static void print_human(const struct doctor *d, bool verbose)
{
	struct utsname u;
	if (!uname(&u))
		printf("stoker doctor: %s%s%s (Linux %s)\n", d->path ? d->path : "this machine",
		       d->root[0] ? ", root " : "", d->root, u.release);
	int counts[3] = {0};
	for (int i = 0; i < d->n; i++) {
		const struct check *c = &d->checks[i];
		counts[c->status]++;
		printf("  %-5s %-14s %s\n", status_names[c->status], c->name, c->value);
		if (c->status != ST_OK || verbose || c->explain) {
			if (c->why[0])
				printf("  %-5s %-14s why: %s\n", "", "", c->why);
			for (const char *p = c->fix; *p;) {
				const char *nl = strchr(p, '\n');
				int l = nl ? (int)(nl - p) : (int)strlen(p);
				printf("  %-5s %-14s fix: %.*s\n", "", "", l, p);
				p += l + (nl != NULL);
			}
		}
	}
	printf("%d ok, %d warn, %d fail\n", counts[ST_OK], counts[ST_WARN], counts[ST_FAIL]);
}

static int print_json(const struct doctor *d)
{
	json_t *arr = json_array();
	int counts[3] = {0};
	for (int i = 0; arr && i < d->n; i++) {
		const struct check *c = &d->checks[i];
		counts[c->status]++;
		if (json_array_append_new(arr, json_pack("{s:s,s:s,s:s,s:s,s:s}", "name", c->name,
							 "status", status_names[c->status], "value",
							 c->value, "why", c->why, "fix", c->fix))) {
			json_decref(arr);
			arr = NULL; /* out of memory: reported below */
		}
	}
	json_t *j = NULL;
	if (arr)
		j = json_pack("{s:i,s:s,s:s?,s:o,s:{s:i,s:i,s:i}}", "schema_version", 1, "stoker",
			      stk_version(), "path", d->path, "checks", arr, "summary", "ok",
			      counts[ST_OK], "warn", counts[ST_WARN], "fail", counts[ST_FAIL]);
	if (!j || json_dumpf(j, stdout, JSON_INDENT(2)) < 0) {
		json_decref(j);
		fprintf(stderr, "stoker doctor: cannot write JSON\n");
		return -1;
	}
	json_decref(j);
	putchar('\n');
	return 0;
}

int cmd_doctor(int argc, char **argv)
{
	static struct doctor d; /* ~100 kB: kept off the stack */
	memset(&d, 0, sizeof(d));
	bool json = false, verbose = false;
	struct stk_loader_opts lo = {.size = sizeof(lo)}; /* batch size, prefetch: the table's */
	const char *root = "";
	static const struct cmd_help help = {
		"doctor", "[options] [PATH]",
		"Checks this machine for feeding GPUs: CPU cores, memory against the loader's budget\n"
		"and the cgroup limit, /dev/shm, io_uring, the locked-memory limit (pinning, RDMA),\n"
		"vm dirty limits, open-file limit, huge pages, FFmpeg's video decoders and GPUs\n"
		"(through NVML when the driver is present); with PATH, also its filesystem, mount options, device, I/O scheduler,\n"
		"read-ahead, nr_requests, O_DIRECT, and the I/O plan for that storage (queue depth\n"
		"and I/O threads, beside the DataLoader rule of thumb).  Each line is ok, warn or\n"
		"fail, with why it matters and the command that fixes it.  Nothing on the system is\n"
		"changed, nothing written (the O_DIRECT check reads one of PATH's files).  Exit 1\n"
		"when a check fails.",
		"stoker doctor                  # the machine: memory, io_uring, limits, GPUs\n"
		"stoker doctor /data/train      # and the storage under the data, with its I/O plan\n"
		"stoker doctor -j -v /data      # every check as JSON, the passed ones with why"};
	struct opt opts[24] = {
		OPT_GROUP("data"),
		{"sample-size", 0, OPT_SIZE, &d.sample, "0", 0, 1e12, NULL, "BYTES",
		 "bytes per sample (0 = PATH's mean file size, else 110 kB)"},
		OPT_GROUP("reading"),
		{"local-world-size", 0, OPT_INT, &d.local_world, "0", 0, 1 << 20, NULL, "N",
		 "ranks per host, for the cpu share (0 = LOCAL_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_SIZE)"},
		{"decode-threads", 0, OPT_INT, &d.decode_threads, "0", 0, 1024, NULL, "N",
		 "decode threads per rank, for the cpu share (0 = the share's default)"},
		OPT_GROUP("output"),
		{"json", 'j', OPT_BOOL, &json, NULL, 0, 0, NULL, NULL, "print JSON"},
		{"verbose", 'v', OPT_BOOL, &verbose, NULL, 0, 0, NULL, NULL,
		 "say why for the checks that pass too"},
		OPT_GROUP("testing"),
		{"root", 0, OPT_STR, &root, NULL, 0, 0, NULL, "DIR",
		 "read /proc and /sys under DIR (a fake tree, for tests)"},
		OPT_END,
	};
	static const char *const budget[] = {"batch_size", "prefetch", NULL}; /* the memory budget's */
	size_t nopts = 0;
	while (opts[nopts].name)
		nopts++;
	opt_add_library(opts, nopts, sizeof(opts) / sizeof(opts[0]), STK_OPT_LOADER, &lo, budget);
	int first = opt_parse(&help, opts, argc, argv);
	if (first < 0)
		return -first;
	if (argc - first > 1) {
		fprintf(stderr, "stoker doctor: one PATH at most (got %d)\ntry 'stoker doctor --help'\n",
			argc - first);
		return EXIT_USAGE;
	}
	d.root = root;
	d.path = first < argc ? argv[first] : NULL;
	d.batch = opt_lib_u64(&lo, "batch_size");
	d.prefetch = opt_lib_u64(&lo, "prefetch");
	d.cpus.size = sizeof(d.cpus);
	d.cpus_rc = stk_sys_cpus(d.root, &d.cpus);
	d.gpus[0].size = sizeof(d.gpus[0]);
	d.ngpu = stk_sys_gpus(d.gpus, DOCTOR_MAX_GPUS, d.gpu_why, sizeof(d.gpu_why));
	if (d.path)
		doc_path_checks(&d); /* first: the file count feeds the memory and limit checks */
	/* ... but they print at their row of the table */
	static struct check path_checks[DOCTOR_MAX_CHECKS];
	int npath = d.n;
	memcpy(path_checks, d.checks, sizeof(d.checks[0]) * (size_t)npath);
	d.n = 0;
	for (size_t i = 0; i < sizeof(checks) / sizeof(checks[0]); i++) {
		if (checks[i] != path_slot) {
			checks[i](&d);
			continue;
		}
		for (int j = 0; j < npath && d.n < DOCTOR_MAX_CHECKS; j++)
			d.checks[d.n++] = path_checks[j];
	}
	if (json) {
		if (print_json(&d))
			return EXIT_FAIL;
	} else {
		print_human(&d, verbose);
	}
	for (int i = 0; i < d.n; i++)
		if (d.checks[i].status == ST_FAIL)
			return EXIT_FAIL;
	return EXIT_OK;
}
