/*
 * sys/plan.c — the I/O plan for the storage behind a path: how many reads the
 * loader should keep in flight and on how many I/O threads, and what the
 * PyTorch DataLoader rule of thumb says for the same storage.  One row per
 * storage kind (the only place these numbers live: `stoker doctor` prints
 * them, and the automatic queue depth falls back on them); the kind comes from
 * the readers of sys/block.c, so a fake root tree reaches every row in tests.
 * Also the RDMA device list, which decides what RLIMIT_MEMLOCK must allow.
 */
#include "sys/sys_int.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>

enum { P_NVME, P_SATA, P_HDD, P_SCSI, P_VIRTIO, P_VIRTUAL, P_MMC, P_NETWORK, P_MEMORY, P_UNKNOWN };

static const struct plan_row {
	uint32_t queue_depth;
	uint32_t threads;       /* at most this many, and at most half the usable CPUs */
	uint32_t wmin, wmax;    /* DataLoader num_workers, as the rule of thumb goes (whatever
				   the CPUs); wmax 0: one per usable CPU */
	const char *why;
} rows[] = {
	[P_NVME] = {256, 4, 8, 12,
		    "NVMe: many hardware queues, each up to 1023 commands deep; the device reaches "
		    "its IOPS only with hundreds of reads in flight, and more than one ring keeps "
		    "the page-cache copies off a single core"},
	[P_SATA] = {32, 1, 2, 4,
		    "a SATA SSD: one queue of 32 commands (NCQ); more reads in flight only wait in "
		    "the block layer, and one ring keeps up with its ~550 MB/s"},
	[P_HDD] = {16, 1, 2, 4,
		   "a spinning disk: every random read costs a seek (100-200 a second); 8-32 in "
		   "flight let NCQ and the scheduler order them, more only add latency (tar "
		   "shards read sequentially do far better)"},
	[P_SCSI] = {64, 2, 4, 8,
		    "SAS/SCSI (or USB, iSCSI): one queue per device, commonly 32-256 commands deep"},
	[P_VIRTIO] = {128, 2, 4, 8,
		      "a virtual disk: the host's storage behind a virtqueue, of a kind that cannot "
		      "be seen from inside (measure it: stoker disk PATH)"},
	[P_VIRTUAL] = {128, 2, 4, 8,
		       "a device-mapper, RAID or loop device: as deep as the disks under it together"},
	[P_MMC] = {8, 1, 1, 2, "SD/eMMC: a shallow queue and slow random reads"},
	[P_NETWORK] = {512, 2, 8, 16,
		       "a network filesystem: every file costs a round trip (0.2-2 ms), so reads in "
		       "flight, not a device, set the rate (samples/s ~ reads in flight / latency); "
		       "the DataLoader needs many workers for the same reason"},
	[P_MEMORY] = {64, 8, 4, 0,
		      "in memory (tmpfs, ramfs): no device to wait for; every read is a copy, so I/O "
		      "threads (CPU), not depth, set the rate"},
	[P_UNKNOWN] = {128, 2, 4, 8, "storage of a kind not recognized: the loader's defaults"},
};

static int plan_row_of(int kind, int rotational)
{
	if (rotational == 1 && kind != STK_DEV_NETWORK && kind != STK_DEV_MEMORY)
		return P_HDD;
	switch (kind) {
	case STK_DEV_NVME: return P_NVME;
	case STK_DEV_SATA: return P_SATA;
	case STK_DEV_SCSI: return P_SCSI;
	case STK_DEV_VIRTIO: return P_VIRTIO;
	case STK_DEV_VIRTUAL: return P_VIRTUAL;
	case STK_DEV_MMC: return P_MMC;
	case STK_DEV_NETWORK: return P_NETWORK;
	case STK_DEV_MEMORY: return P_MEMORY;
	default: return P_UNKNOWN;
	}
}

static uint32_t usable_cpus(const char *root)
{
	struct stk_cpus c = {.size = sizeof(c)};
	if (stk_sys_cpus(root, &c) || !c.logical)
		return 1;
	return (uint32_t)stk_cpus_usable(&c);
}

int stk_io_plan(const char *root, const char *path, struct stk_io_plan *out)
{
	if (!path || !out)
		return -EINVAL;
	struct stk_io_plan p;
	memset(&p, 0, sizeof(p));
	p.kind = STK_DEV_UNKNOWN;
	p.rotational = -1;
	struct stk_mount m = {.size = sizeof(m)};
	int fk = stk_sys_mount_for_path(root, path, &m) ? STK_DEV_UNKNOWN : stk_sys_fs_kind(m.fstype);
	struct stk_queue q = {.size = sizeof(q), .nr_requests = -1, .hw_queues = -1};
	char extra[256] = "";
	if (fk == STK_DEV_NETWORK || fk == STK_DEV_MEMORY) {
		p.kind = fk;
		snprintf(extra, sizeof(extra), " (%s)", m.fstype);
	} else {
		struct stk_blockdev b = {.size = sizeof(b)};
		int rc = stk_sys_blockdev_for_path(root, path, &b);
		if (rc && rc != -ENODEV)
			return rc;
		if (!rc) {
			p.kind = b.kind;
			snprintf(p.disk, sizeof(p.disk), "%s", b.disk);
			struct stk_cpus c = {.size = sizeof(c)};
			stk_sys_cpus(root, &c);
			/* A virtual machine's disks say "rotational" whatever backs them. */
			bool unsure = b.rotational == 1 && (b.kind == STK_DEV_VIRTIO || c.virtualized);
			p.rotational = unsure ? -1 : b.rotational;
			if (stk_sys_queue(root, b.disk, &q)) {
				q.nr_requests = -1;
				q.hw_queues = -1;
			}
		}
	}
	const struct plan_row *r = &rows[plan_row_of(p.kind, p.rotational)];
	uint32_t cpus = usable_cpus(root), half = cpus / 2 ? cpus / 2 : 1;
	p.queue_depth = r->queue_depth;
	p.io_threads = r->threads < half ? r->threads : half;
	p.dl_workers_min = r->wmin;
	p.dl_workers_max = r->wmax ? r->wmax : cpus; /* memory: decode-bound, one a CPU */
	if (p.dl_workers_max < p.dl_workers_min)
		p.dl_workers_max = p.dl_workers_min;
	if (r == &rows[P_NVME] && q.hw_queues > 0 && q.nr_requests > 0)
		snprintf(extra, sizeof(extra), " (here %lld hardware queue%s of %lld)",
			 (long long)q.hw_queues, q.hw_queues == 1 ? "" : "s", (long long)q.nr_requests);
	if (q.nr_requests > 0 && q.hw_queues > 0 && q.nr_requests * q.hw_queues < p.queue_depth)
		snprintf(extra + strlen(extra), sizeof(extra) - strlen(extra),
			 "; nr_requests is %lld here, fewer than that: raise it", (long long)q.nr_requests);
	if (p.io_threads < r->threads)
		snprintf(extra + strlen(extra), sizeof(extra) - strlen(extra),
			 "; %u I/O thread%s: at most half the %u usable CPUs, the rest decode and train",
			 p.io_threads, p.io_threads == 1 ? "" : "s", cpus);
	snprintf(p.why, sizeof(p.why), "%s%s", r->why, extra);
	stk__sys_out(out, &p, sizeof(p));
	return 0;
}

int stk_sys_rdma_devices(const char *root, char *names, size_t len)
{
	char dir[PATH_MAX];
	if (names && len)
		names[0] = 0;
	int rc = stk__sys_path(dir, sizeof(dir), root, "/sys/class/infiniband");
	if (rc)
		return rc;
	DIR *d = opendir(dir);
	if (!d)
		return errno == ENOENT || errno == ENOTDIR ? 0 : -errno;
	int n = 0;
	size_t used = 0;
	for (struct dirent *e; (e = readdir(d));) {
		if (e->d_name[0] == '.')
			continue;
		if (names && len > used + 1) {
			int w = snprintf(names + used, len - used, "%s%s", n ? "," : "", e->d_name);
			if (w > 0)
				used = (size_t)w >= len - used ? len - 1 : used + (size_t)w;
		}
		n++;
	}
	closedir(d);
	return n;
}
