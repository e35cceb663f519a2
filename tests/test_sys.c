/* test_sys.c — the /proc and /sys readers on fake trees (tests/fixtures/doctor/
 * {ok,warn,fail}), iostat's formulas against hand-computed deltas, and the
 * probes on the running system. */
#include "testutil.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <dirent.h>

#include "stoker/sys.h"

/* Fixture folders sit beside this file: tests/fixtures/doctor/NAME. */
static const char *fx(const char *name)
{
	static char buf[4][PATH_MAX];
	static int k;
	char *b = buf[k++ % 4];
	const char *slash = strrchr(__FILE__, '/');
	snprintf(b, PATH_MAX, "%.*s/fixtures/doctor/%s", slash ? (int)(slash - __FILE__) : 1,
		 slash ? __FILE__ : ".", name);
	return b;
}

/* ---- diskstats ---------------------------------------------------------- */

static void test_diskstat_formats(void **state)
{
	(void)state;
	struct stk_diskstat d = {.size = sizeof(d)};
	/* 5.5+: 17 stat fields */
	assert_int_equal(stk_sys_diskstat_parse(" 254       0 vda 18216005 41012 275884002 6769945 "
						"140297 55998 150996136 381856 3 321140 7154830 "
						"18772 22 8583656 2721 5950 306",
						&d),
			 0);
	assert_int_equal(d.major, 254);
	assert_int_equal(d.minor, 0);
	assert_string_equal(d.name, "vda");
	assert_int_equal(d.nfields, 17);
	assert_int_equal(d.rd_ios, 18216005);
	assert_int_equal(d.rd_merges, 41012);
	assert_int_equal(d.rd_sectors, 275884002);
	assert_int_equal(d.rd_ticks, 6769945);
	assert_int_equal(d.wr_ios, 140297);
	assert_int_equal(d.wr_sectors, 150996136);
	assert_int_equal(d.in_flight, 3);
	assert_int_equal(d.io_ticks, 321140);
	assert_int_equal(d.time_in_queue, 7154830);
	assert_int_equal(d.dc_ios, 18772);
	assert_int_equal(d.dc_sectors, 8583656);
	assert_int_equal(d.dc_ticks, 2721);
	assert_int_equal(d.fl_ios, 5950);
	assert_int_equal(d.fl_ticks, 306);
	/* 4.18+: 15 fields, no flushes */
	memset(&d, 0xff, sizeof(d));
	d.size = sizeof(d);
	assert_int_equal(stk_sys_diskstat_parse("259 1 nvme0n1p1 1100 10 88000 550 300 5 4800 90 0 "
						"950 640 7 1 56 3",
						&d),
			 0);
	assert_int_equal(d.nfields, 15);
	assert_int_equal(d.dc_ios, 7);
	assert_int_equal(d.dc_ticks, 3);
	assert_int_equal(d.fl_ios, 0);
	assert_int_equal(d.fl_ticks, 0);
	/* classic 11 fields */
	assert_int_equal(stk_sys_diskstat_parse("8 0 sda 500 20 40000 2500 100 30 8000 900 0 3000 3400",
						&d),
			 0);
	assert_int_equal(d.nfields, 11);
	assert_int_equal(d.time_in_queue, 3400);
	assert_int_equal(d.dc_ios, 0);
	/* 2.6 partition: reads, read sectors, writes, write sectors */
	assert_int_equal(stk_sys_diskstat_parse("8 1 sda1 480 38000 100 8000\n", &d), 0);
	assert_int_equal(d.nfields, 4);
	assert_int_equal(d.rd_ios, 480);
	assert_int_equal(d.rd_sectors, 38000);
	assert_int_equal(d.wr_ios, 100);
	assert_int_equal(d.wr_sectors, 8000);
	assert_int_equal(d.rd_merges, 0);
	/* a future kernel's extra fields are counted, the known ones kept */
	assert_int_equal(stk_sys_diskstat_parse("8 0 sda 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19",
						&d),
			 0);
	assert_int_equal(d.nfields, 19);
	assert_int_equal(d.fl_ticks, 17);
	/* not diskstats lines */
	assert_int_equal(stk_sys_diskstat_parse("", &d), -EINVAL);
	assert_int_equal(stk_sys_diskstat_parse("8 0", &d), -EINVAL);
	assert_int_equal(stk_sys_diskstat_parse("8 0 sda 1 2 3", &d), -EINVAL);
	assert_int_equal(stk_sys_diskstat_parse("8 0 sda 1 2 x 4", &d), -EINVAL);
	assert_int_equal(stk_sys_diskstat_parse("a b sda 1 2 3 4", &d), -EINVAL);
	char longname[200];
	snprintf(longname, sizeof(longname), "8 0 %0100d 1 2 3 4", 0);
	assert_int_equal(stk_sys_diskstat_parse(longname, &d), -EINVAL);
}

static void test_diskstats_file(void **state)
{
	(void)state;
	struct stk_diskstat d[16];
	memset(d, 0, sizeof(d));
	d[0].size = sizeof(d[0]);
	int n = stk_sys_diskstats(fx("ok"), d, 16);
	assert_int_equal(n, 9);
	assert_string_equal(d[0].name, "loop0");
	assert_string_equal(d[2].name, "vda");
	assert_int_equal(d[2].rd_ios, 18216005);
	assert_string_equal(d[7].name, "sda1");
	assert_int_equal(d[7].nfields, 4);
	/* too little room: the count says how much is needed */
	d[0].size = sizeof(d[0]);
	assert_int_equal(stk_sys_diskstats(fx("ok"), d, 2), 9);
	assert_int_equal(stk_sys_diskstats(fx("ok"), NULL, 0), 9);
	assert_int_equal(stk_sys_diskstats(fx("no-such-tree"), NULL, 0), -ENOENT);
	/* a caller built with a shorter struct: its stride, never past it */
	size_t small = offsetof(struct stk_diskstat, in_flight);
	unsigned char buf[4 * sizeof(struct stk_diskstat)];
	memset(buf, 0xab, sizeof(buf));
	struct stk_diskstat *s = (void *)buf;
	s->size = (uint32_t)small;
	assert_int_equal(stk_sys_diskstats(fx("ok"), s, 3), 9);
	struct stk_diskstat *third = (void *)(buf + 2 * small);
	assert_string_equal(third->name, "vda");
	assert_int_equal(third->size, small);
	assert_int_equal(buf[3 * small], 0xab);
}

static struct stk_diskstat mk(uint64_t rios, uint64_t rm, uint64_t rsec, uint32_t rt, uint64_t wios,
			      uint64_t wm, uint64_t wsec, uint32_t wt, uint32_t io_ticks, uint32_t tiq)
{
	struct stk_diskstat d = {.size = sizeof(d), .nfields = 17};
	snprintf(d.name, sizeof(d.name), "vda");
	d.rd_ios = rios, d.rd_merges = rm, d.rd_sectors = rsec, d.rd_ticks = rt;
	d.wr_ios = wios, d.wr_merges = wm, d.wr_sectors = wsec, d.wr_ticks = wt;
	d.io_ticks = io_ticks, d.time_in_queue = tiq;
	return d;
}

#define NEAR(a, b) assert_true(fabs((double)(a) - (double)(b)) < 1e-9 * (1 + fabs((double)(b))))

static void test_rates_by_hand(void **state)
{
	(void)state;
	struct stk_diskstat p = mk(1000, 100, 16000, 400, 200, 10, 3200, 1000, 5000, 9000);
	struct stk_diskstat c = mk(1500, 150, 24000, 650, 300, 60, 4800, 1300, 5450, 9700);
	p.dc_ios = 10, p.dc_sectors = 2048, p.dc_ticks = 5, p.fl_ios = 4, p.fl_ticks = 2;
	c.dc_ios = 12, c.dc_sectors = 4096, c.dc_ticks = 9, c.fl_ios = 8, c.fl_ticks = 10;
	struct stk_disk_rates r = {.size = sizeof(r)};
	assert_int_equal(stk_sys_disk_rates(&p, &c, 1000, &r), 0);
	/* Δ over 1 s: 500 reads of 8000 sectors (4000 kB) taking 250 ms; 50 merged */
	NEAR(r.r_s, 500);
	NEAR(r.rkb_s, 4000);
	NEAR(r.rrqm_s, 50);
	NEAR(r.rrqm_pct, 50.0 / 550.0 * 100);
	NEAR(r.r_await, 0.5);
	NEAR(r.rareq_sz, 8);
	/* 100 writes of 1600 sectors (800 kB) taking 300 ms; 50 merged */
	NEAR(r.w_s, 100);
	NEAR(r.wkb_s, 800);
	NEAR(r.wrqm_s, 50);
	NEAR(r.wrqm_pct, 50.0 / 150.0 * 100);
	NEAR(r.w_await, 3);
	NEAR(r.wareq_sz, 8);
	/* 2 discards of 2048 sectors in 4 ms; 4 flushes in 8 ms */
	NEAR(r.d_s, 2);
	NEAR(r.dkb_s, 1024);
	NEAR(r.d_await, 2);
	NEAR(r.dareq_sz, 512);
	NEAR(r.f_s, 4);
	NEAR(r.f_await, 2);
	/* 700 weighted ms in 1000 ms: 0.7 in flight; busy 450 of 1000 ms */
	NEAR(r.aqu_sz, 0.7);
	NEAR(r.util, 45);
	/* the same deltas over 2.5 s: rates scale, per-request figures do not */
	assert_int_equal(stk_sys_disk_rates(&p, &c, 2500, &r), 0);
	NEAR(r.r_s, 200);
	NEAR(r.rkb_s, 1600);
	NEAR(r.r_await, 0.5);
	NEAR(r.rareq_sz, 8);
	NEAR(r.aqu_sz, 0.28);
	NEAR(r.util, 18);
	/* since boot (prev NULL): totals over the uptime */
	assert_int_equal(stk_sys_disk_rates(NULL, &c, 100000, &r), 0);
	NEAR(r.r_s, 15);
	NEAR(r.rkb_s, 120);
	NEAR(r.r_await, 650.0 / 1500.0);
	NEAR(r.util, 5.45);
	/* no I/O: zeros, no division by zero */
	assert_int_equal(stk_sys_disk_rates(&c, &c, 1000, &r), 0);
	NEAR(r.r_await, 0);
	NEAR(r.rareq_sz, 0);
	NEAR(r.rrqm_pct, 0);
	NEAR(r.util, 0);
	assert_int_equal(stk_sys_disk_rates(&p, &c, 0, &r), -EINVAL);
	assert_int_equal(stk_sys_disk_rates(&p, &c, -1, &r), -EINVAL);
	assert_int_equal(stk_sys_disk_rates(&p, NULL, 1000, &r), -EINVAL);
}

static void test_rates_wrap_and_reset(void **state)
{
	(void)state;
	/* the kernel's 32-bit tick counters wrap: 0xffffff00 → 0x100 is 512 ms */
	struct stk_diskstat p = mk(100, 0, 800, 0xffffff00u, 0, 0, 0, 0, 0xfffffe00u, 0xffffff00u);
	struct stk_diskstat c = mk(164, 0, 1312, 0x100, 0, 0, 0, 0, 0x100, 0x100);
	struct stk_disk_rates r = {.size = sizeof(r)};
	assert_int_equal(stk_sys_disk_rates(&p, &c, 1024, &r), 0);
	NEAR(r.r_s, 62.5);
	NEAR(r.r_await, 8);   /* 512 ms / 64 reads */
	NEAR(r.util, 75);     /* 768 ms of 1024 */
	NEAR(r.aqu_sz, 0.5);  /* 512 / 1024 */
	/* one counter going backwards shows 0 for it, like sysstat */
	struct stk_diskstat c2 = c;
	c2.wr_merges = 0;
	p.wr_merges = 5;
	assert_int_equal(stk_sys_disk_rates(&p, &c2, 1000, &r), 0);
	NEAR(r.wrqm_s, 0);
	/* fewer I/Os and sectors than before: another device took the name,
	 * counted from zero */
	struct stk_diskstat old = mk(9000, 0, 90000, 100, 900, 0, 9000, 10, 500, 600);
	struct stk_diskstat fresh = mk(10, 0, 80, 1, 2, 0, 16, 1, 5, 6);
	assert_int_equal(stk_sys_disk_rates(&old, &fresh, 1000, &r), 0);
	NEAR(r.r_s, 10);
	NEAR(r.w_s, 2);
	NEAR(r.rkb_s, 40);
	/* a caller with an older, shorter struct: nothing past its size */
	unsigned char buf[sizeof(struct stk_disk_rates) + 8];
	memset(buf, 0xcd, sizeof(buf));
	struct stk_disk_rates *o = (void *)buf;
	o->size = (uint32_t)offsetof(struct stk_disk_rates, aqu_sz);
	assert_int_equal(stk_sys_disk_rates(&old, &fresh, 1000, o), 0);
	NEAR(o->r_s, 10);
	assert_int_equal(buf[offsetof(struct stk_disk_rates, aqu_sz)], 0xcd);
}

static void test_disk_is_whole(void **state)
{
	(void)state;
	assert_int_equal(stk_sys_disk_is_whole(fx("ok"), "vda"), 1);
	assert_int_equal(stk_sys_disk_is_whole(fx("ok"), "vda1"), 0);
	assert_int_equal(stk_sys_disk_is_whole(fx("ok"), "loop0"), 1);
	assert_int_equal(stk_sys_disk_is_whole(fx("ok"), "../vda"), 0);
	assert_int_equal(stk_sys_disk_is_whole(fx("ok"), ""), 0);
	/* a /proc-only tree cannot tell: every name counts */
	assert_int_equal(stk_sys_disk_is_whole(fx("no-such-tree"), "vda1"), 1);
}

/* ---- memory, CPUs, cgroups, tunables ------------------------------------ */

static void test_meminfo(void **state)
{
	(void)state;
	struct stk_meminfo m = {.size = sizeof(m)};
	assert_int_equal(stk_sys_meminfo(fx("ok"), &m), 0);
	assert_int_equal(m.total, 65869000ull * 1024);
	assert_int_equal(m.available, 60000000ull * 1024);
	assert_int_equal(m.cached, 9000000ull * 1024);
	assert_int_equal(m.dirty, 1200ull * 1024);
	assert_int_equal(m.hugepages_total, 0);
	assert_int_equal(m.hugepage_size, 2048 * 1024);
	/* no MemAvailable (before 3.14): free + buffers + cached */
	assert_int_equal(stk_sys_meminfo(fx("warn"), &m), 0);
	assert_int_equal(m.available, (200000ull + 20000 + 80000) * 1024);
	assert_int_equal(stk_sys_meminfo(fx("no-such-tree"), &m), -ENOENT);
	/* the real one */
	assert_int_equal(stk_sys_meminfo(NULL, &m), 0);
	assert_true(m.total > 0 && m.available <= m.total);
}

static void test_cgroup_memory(void **state)
{
	(void)state;
	uint64_t lim = 7, used = 7;
	/* v2 with memory.max "max" up the tree: unlimited */
	assert_int_equal(stk_sys_cgroup_memory(fx("ok"), &lim, &used), 0);
	assert_int_equal(lim, 7);
	assert_int_equal(used, 1073741824);
	/* v1 (hybrid: a memory line wins over 0::) with the "no limit" value */
	assert_int_equal(stk_sys_cgroup_memory(fx("warn"), &lim, &used), 0);
	assert_int_equal(used, 52428800);
	/* v2 in a container: its own cgroup at the mount's root */
	assert_int_equal(stk_sys_cgroup_memory(fx("fail"), &lim, &used), 1);
	assert_int_equal(lim, 268435456);
	assert_int_equal(used, 209715200);

	/* nested: the smallest limit on the way up wins; a host path the mount
	 * does not show (no cgroup namespace) falls back to what exists */
	char *t = tu_mkdtemp();
	char p[PATH_MAX];
	const char *dirs[] = {"/proc", "/proc/self", "/cg", "/cg/a", "/cg/a/b"};
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		snprintf(p, sizeof(p), "%s%s", t, dirs[i]);
		tu_mkdir(p);
	}
	snprintf(p, sizeof(p), "%s/proc/mounts", t);
	tu_write(p, "cgroup2 /cg cgroup2 rw 0 0\n", 27);
	snprintf(p, sizeof(p), "%s/proc/self/cgroup", t);
	tu_write(p, "0::/a/b\n", 8);
	snprintf(p, sizeof(p), "%s/cg/a/memory.max", t);
	tu_write(p, "1073741824\n", 11);
	snprintf(p, sizeof(p), "%s/cg/a/b/memory.max", t);
	tu_write(p, "2147483648\n", 11);
	assert_int_equal(stk_sys_cgroup_memory(t, &lim, NULL), 1);
	assert_int_equal(lim, 1073741824);
	snprintf(p, sizeof(p), "%s/proc/self/cgroup", t);
	tu_write(p, "0::/docker/abc\n", 15);
	snprintf(p, sizeof(p), "%s/cg/memory.max", t);
	tu_write(p, "536870912\n", 10);
	assert_int_equal(stk_sys_cgroup_memory(t, &lim, NULL), 1);
	assert_int_equal(lim, 536870912);
	tu_rmrf(t);
	free(t);
	/* the running system answers one way or the other */
	assert_true(stk_sys_cgroup_memory(NULL, &lim, &used) >= 0);
}

static void test_cpus(void **state)
{
	(void)state;
	struct stk_cpus c = {.size = sizeof(c)};
	assert_int_equal(stk_sys_cpus(fx("ok"), &c), 0);
	assert_int_equal(c.logical, 8);
	assert_int_equal(c.physical, 4); /* 4 cores x 2 threads */
	assert_int_equal(c.packages, 1);
	assert_int_equal(c.allowed, 0);  /* a fake tree has no affinity to ask */
	assert_true(c.quota == 0);       /* cpu.max "max 100000" */
	assert_int_equal(c.virtualized, 0);
	assert_int_equal(stk_sys_cpus(fx("warn"), &c), 0);
	assert_int_equal(c.logical, 2);
	assert_int_equal(c.physical, 1);
	assert_true(c.quota == 0);       /* v1 cfs_quota_us -1 */
	assert_int_equal(stk_sys_cpus(fx("fail"), &c), 0);
	assert_int_equal(c.logical, 16);
	assert_int_equal(c.physical, 8);
	NEAR(c.quota, 1.5);              /* cpu.max "150000 100000" */
	assert_int_equal(c.virtualized, 1);
	assert_int_equal(stk_sys_cpus(NULL, &c), 0);
	assert_true(c.logical >= 1 && c.physical >= 1 && c.physical <= c.logical);
	assert_true(c.allowed >= 1);
}

static void test_tunables(void **state)
{
	(void)state;
	struct stk_tunables t = {.size = sizeof(t)};
	assert_int_equal(stk_sys_tunables(fx("ok"), &t), 0);
	assert_int_equal(t.dirty_ratio, 20);
	assert_int_equal(t.dirty_background_ratio, 10);
	assert_int_equal(t.dirty_bytes, 0);
	assert_int_equal(t.io_uring_disabled, 0);
	assert_string_equal(t.thp_enabled, "madvise");
	assert_string_equal(t.thp_defrag, "madvise");
	assert_true(t.nofile_soft > 0 && t.nofile_soft <= t.nofile_hard);
	assert_int_equal(stk_sys_tunables(fx("warn"), &t), 0);
	assert_int_equal(t.dirty_bytes, 34359738368ll);
	assert_int_equal(t.io_uring_disabled, 1);
	assert_string_equal(t.thp_enabled, "always");
	assert_int_equal(stk_sys_tunables(fx("fail"), &t), 0);
	assert_int_equal(t.io_uring_disabled, 2);
	assert_string_equal(t.thp_enabled, "never");
	/* missing files read -1 / "" */
	assert_int_equal(stk_sys_tunables(fx("no-such-tree"), &t), 0);
	assert_int_equal(t.dirty_ratio, -1);
	assert_int_equal(t.io_uring_disabled, -1);
	assert_string_equal(t.thp_enabled, "");
}

/* ---- mounts and devices ------------------------------------------------- */

static void test_mounts(void **state)
{
	(void)state;
	struct stk_mount m = {.size = sizeof(m)};
	assert_int_equal(stk_sys_mount_for_path(fx("ok"), "/data set/x/y.jpg", &m), 0);
	assert_string_equal(m.mountpoint, "/data set"); /* \040 undone */
	assert_string_equal(m.fstype, "xfs");
	assert_string_equal(m.source, "/dev/nvme0n1p1");
	/* the last mount on a point hides the ones before */
	assert_int_equal(stk_sys_mount_for_path(fx("ok"), "/data set/inner/a", &m), 0);
	assert_string_equal(m.fstype, "tmpfs");
	/* a prefix of the name is not a parent folder */
	assert_int_equal(stk_sys_mount_for_path(fx("ok"), "/data setx/a", &m), 0);
	assert_string_equal(m.mountpoint, "/");
	assert_string_equal(m.options, "rw,noatime");
	assert_int_equal(stk_sys_mount_for_path(fx("ok"), "/mnt/nfs/train", &m), 0);
	assert_string_equal(m.fstype, "nfs4");
	assert_int_equal(stk_sys_fs_kind(m.fstype), STK_DEV_NETWORK);
	assert_int_equal(stk_sys_mount_for_path(fx("ok"), "relative/path/nowhere", &m), -ENOENT);
	assert_int_equal(stk_sys_mount_for_path(fx("no-such-tree"), "/", &m), -ENOENT);
	/* the real system: "/" is mounted */
	assert_int_equal(stk_sys_mount_for_path(NULL, "/", &m), 0);
	assert_string_equal(m.mountpoint, "/");

	char v[32];
	const char *o = "rw,relatime,size=8388608k,mode=755";
	assert_int_equal(stk_sys_mount_opt(o, "relatime", NULL, 0), 1);
	assert_int_equal(stk_sys_mount_opt(o, "atime", NULL, 0), 0);
	assert_int_equal(stk_sys_mount_opt(o, "noatime", NULL, 0), 0);
	assert_int_equal(stk_sys_mount_opt(o, "size", v, sizeof(v)), 1);
	assert_string_equal(v, "8388608k");
	assert_int_equal(stk_sys_mount_opt(o, "rw", v, sizeof(v)), 1);
	assert_string_equal(v, "");
	assert_int_equal(stk_sys_mount_opt("cpu,cpuacct", "cpu", NULL, 0), 1);
	assert_int_equal(stk_sys_mount_opt("cpuacct,cpuset", "cpu", NULL, 0), 0);

	assert_int_equal(stk_sys_fs_kind("tmpfs"), STK_DEV_MEMORY);
	assert_int_equal(stk_sys_fs_kind("fuse.s3fs"), STK_DEV_NETWORK);
	assert_int_equal(stk_sys_fs_kind("lustre"), STK_DEV_NETWORK);
	assert_int_equal(stk_sys_fs_kind("ext4"), STK_DEV_UNKNOWN);
	assert_string_equal(stk_sys_dev_kind_name(STK_DEV_NVME), "nvme");
	assert_string_equal(stk_sys_dev_kind_name(STK_DEV_NETWORK), "network");
	assert_string_equal(stk_sys_dev_kind_name(99), "unknown");
}

static void test_blockdev(void **state)
{
	(void)state;
	struct stk_blockdev b = {.size = sizeof(b)};
	assert_int_equal(stk_sys_blockdev_by_devnum(fx("ok"), 254, 1, &b), 0);
	assert_string_equal(b.name, "vda1");
	assert_string_equal(b.disk, "vda");
	assert_int_equal(b.partition, 1);
	assert_int_equal(b.kind, STK_DEV_VIRTIO);
	assert_int_equal(b.rotational, 0);
	assert_int_equal(stk_sys_blockdev_by_devnum(fx("ok"), 259, 0, &b), 0);
	assert_string_equal(b.disk, "nvme0n1");
	assert_int_equal(b.partition, 0);
	assert_int_equal(b.kind, STK_DEV_NVME);
	assert_string_equal(b.model, "Samsung SSD 990 PRO 2TB"); /* padding trimmed */
	assert_int_equal(stk_sys_blockdev_by_devnum(fx("ok"), 8, 1, &b), 0);
	assert_string_equal(b.name, "sda1");
	assert_string_equal(b.disk, "sda");
	assert_int_equal(b.kind, STK_DEV_SATA); /* vendor "ATA" */
	assert_int_equal(b.rotational, 1);
	assert_int_equal(stk_sys_blockdev_by_devnum(fx("ok"), 9, 9, &b), -ENODEV);
	/* the real system: the device of "/" when it has one */
	int rc = stk_sys_blockdev_for_path(NULL, "/", &b);
	assert_true(rc == 0 || rc == -ENODEV);
	if (!rc)
		assert_true(b.disk[0] != 0);
	assert_true(stk_sys_blockdev_for_path(NULL, "/no/such/path", &b) == -ENOENT);
}

static void test_queue(void **state)
{
	(void)state;
	struct stk_queue q = {.size = sizeof(q)};
	assert_int_equal(stk_sys_queue(fx("ok"), "vda", &q), 0);
	assert_string_equal(q.scheduler, "none");
	assert_string_equal(q.schedulers, "[none] mq-deadline");
	assert_int_equal(q.read_ahead_kb, 128);
	assert_int_equal(q.nr_requests, 256);
	assert_int_equal(q.rotational, 0);
	assert_int_equal(q.logical_block_size, 512);
	assert_int_equal(q.max_sectors_kb, 1280);
	assert_int_equal(q.hw_queues, 1);
	assert_int_equal(stk_sys_queue(fx("ok"), "sda", &q), 0);
	assert_string_equal(q.scheduler, "bfq");
	assert_int_equal(q.read_ahead_kb, 0);
	assert_int_equal(q.nr_requests, 16);
	/* loop0 has no queue folder: every value missing */
	assert_int_equal(stk_sys_queue(fx("ok"), "loop0", &q), 0);
	assert_string_equal(q.scheduler, "");
	assert_int_equal(q.read_ahead_kb, -1);
	assert_int_equal(q.hw_queues, -1);
	assert_int_equal(stk_sys_queue(fx("ok"), "sdz", &q), -ENOENT);
	assert_int_equal(stk_sys_queue(fx("ok"), "../vda", &q), -EINVAL);
}

static void test_shm(void **state)
{
	(void)state;
	uint64_t total = 0, avail = 0;
	assert_int_equal(stk_sys_shm(fx("ok"), &total, &avail), 0);
	assert_int_equal(total, 8388608ull * 1024);
	assert_int_equal(stk_sys_shm(fx("fail"), &total, &avail), 0);
	assert_int_equal(total, 64ull << 20); /* Docker's default */
	int rc = stk_sys_shm(NULL, &total, &avail);
	assert_true(rc == 0 || rc == -ENOENT);
	if (!rc)
		assert_true(total > 0 && avail <= total);
}

/* ---- probes ------------------------------------------------------------- */

static void test_direct_probe(void **state)
{
	(void)state;
	char *t = tu_mkdtemp(), why[PATH_MAX + 128];
	int rc = stk_sys_direct_probe(t, NULL, why, sizeof(why));
	/* works, or the filesystem refuses (tmpfs before 6.6): both say so */
	assert_true(rc == 0 || rc == -EINVAL);
	assert_non_null(strstr(why, t));
	/* and nothing is left behind */
	DIR *d = opendir(t);
	assert_non_null(d);
	int entries = 0;
	for (struct dirent *e; (e = readdir(d));)
		entries += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
	closedir(d);
	assert_int_equal(entries, 0);
	assert_true(stk_sys_direct_probe("/no/such/dir", NULL, why, sizeof(why)) < 0);
	tu_rmrf(t);
	free(t);
}

/* doctor's probe: a read of a file there, nothing written (no entry, the
 * folder's mtime kept); an empty folder has nothing to read */
static void test_direct_read_probe(void **state)
{
	(void)state;
	char *t = tu_mkdtemp(), why[PATH_MAX + 128], f[PATH_MAX];
	assert_int_equal(stk_sys_direct_read_probe(t, NULL, why, sizeof(why)), -ENOENT);
	assert_non_null(strstr(why, "holds no file to read"));
	snprintf(f, sizeof(f), "%s/a.bin", t);
	FILE *fp = fopen(f, "w");
	assert_non_null(fp);
	for (int i = 0; i < 8192; i++)
		fputc(i & 0xff, fp);
	fclose(fp);
	struct stat before, after;
	assert_int_equal(stat(t, &before), 0);
	int rc = stk_sys_direct_read_probe(t, NULL, why, sizeof(why));
	assert_true(rc == 0 || rc == -EINVAL);
	assert_non_null(strstr(why, f));
	assert_int_equal(stat(t, &after), 0);
	assert_true(before.st_mtim.tv_sec == after.st_mtim.tv_sec &&
		    before.st_mtim.tv_nsec == after.st_mtim.tv_nsec);
	DIR *d = opendir(t);
	assert_non_null(d);
	int entries = 0;
	for (struct dirent *e; (e = readdir(d));)
		entries += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
	closedir(d);
	assert_int_equal(entries, 1);
	tu_rmrf(t);
	free(t);
}

static void test_io_uring_probe(void **state)
{
	(void)state;
	char why[256] = "";
	int rc = stk_sys_io_uring_probe(why, sizeof(why));
	if (rc)
		print_message("io_uring unusable here (%s): the probe says why\n", why);
	assert_true(why[0] != 0);
	assert_true(rc <= 0);
}

static void test_gpus_and_pcie(void **state)
{
	(void)state;
	struct stk_gpu g[4];
	memset(g, 0, sizeof(g));
	g[0].size = sizeof(g[0]);
	char why[256] = "";
	int n = stk_sys_gpus(g, 4, why, sizeof(why));
	/* no driver (-ENOENT), a driver without GPUs (-ENODEV), or GPUs */
	assert_true(n >= 0 || n == -ENOENT || n == -ENODEV);
	assert_true(why[0] != 0);
	NEAR(stk_sys_pcie_gbps(3, 16), 0.9846 * 16);
	NEAR(stk_sys_pcie_gbps(4, 16), 1.9692 * 16);
	NEAR(stk_sys_pcie_gbps(5, 16), 3.9385 * 16);
	NEAR(stk_sys_pcie_gbps(1, 1), 0.25);
	NEAR(stk_sys_pcie_gbps(0, 16), 0);
	NEAR(stk_sys_pcie_gbps(4, 0), 0);
	NEAR(stk_sys_pcie_gbps(99, 16), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_diskstat_formats),
		cmocka_unit_test(test_diskstats_file),
		cmocka_unit_test(test_rates_by_hand),
		cmocka_unit_test(test_rates_wrap_and_reset),
		cmocka_unit_test(test_disk_is_whole),
		cmocka_unit_test(test_meminfo),
		cmocka_unit_test(test_cgroup_memory),
		cmocka_unit_test(test_cpus),
		cmocka_unit_test(test_tunables),
		cmocka_unit_test(test_mounts),
		cmocka_unit_test(test_blockdev),
		cmocka_unit_test(test_queue),
		cmocka_unit_test(test_shm),
		cmocka_unit_test(test_direct_probe),
		cmocka_unit_test(test_direct_read_probe),
		cmocka_unit_test(test_io_uring_probe),
		cmocka_unit_test(test_gpus_and_pcie),
	};
	return cmocka_run_group_tests_name("sys", tests, NULL, NULL);
}
