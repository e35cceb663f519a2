/*
 * sys/sys.c — readers of /proc and the cgroup files: diskstats (and iostat's
 * rates from two snapshots), meminfo, CPUs and cgroup limits, vm/kernel
 * tunables, on the readers of sys/read.c.  Mounts and block devices live in
 * sys/block.c, the probes (io_uring, O_DIRECT, NVML) in sys/probe.c.
 *
 * Every reader takes a root prefix so the tests run on fake trees
 * (tests/fixtures/...).  Files are small and read whole with one read(2)
 * into a stack buffer (/proc files are generated per read: one read gives a
 * consistent snapshot); nothing is cached and nothing global is kept, so
 * the functions are safe from any thread.  The rates follow sysstat's
 * iostat -x formulas exactly, so the two tools agree on the same interval.
 */
#include "sys/sys_int.h"

#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- /proc/diskstats ---------------------------------------------------- */

int stk_sys_diskstat_parse(const char *line, struct stk_diskstat *out)
{
	struct stk_diskstat d;
	memset(&d, 0, sizeof(d));
	const char *p = line;
	char *end;
	unsigned long v[2];
	for (int i = 0; i < 2; i++) {
		errno = 0;
		v[i] = strtoul(p, &end, 10);
		if (end == p || errno || v[i] > UINT32_MAX)
			return -EINVAL;
		p = end;
	}
	d.major = (uint32_t)v[0];
	d.minor = (uint32_t)v[1];
	while (*p == ' ' || *p == '\t')
		p++;
	size_t nl = 0;
	while (p[nl] && !isspace((unsigned char)p[nl]))
		nl++;
	if (!nl || nl >= sizeof(d.name))
		return -EINVAL;
	memcpy(d.name, p, nl);
	p += nl;
	uint64_t f[17] = {0};
	uint32_t n = 0;
	for (;;) {
		while (*p == ' ' || *p == '\t')
			p++;
		if (!*p || *p == '\n')
			break;
		errno = 0;
		unsigned long long x = strtoull(p, &end, 10);
		if (end == p || errno)
			return -EINVAL;
		if (n < 17)
			f[n] = x;
		n++; /* fields past 17 (a future kernel) are counted, not kept */
		p = end;
	}
	if (n == 4) { /* 2.6-era partition line: ios and sectors only */
		d.rd_ios = f[0];
		d.rd_sectors = f[1];
		d.wr_ios = f[2];
		d.wr_sectors = f[3];
	} else if (n >= 11) {
		d.rd_ios = f[0], d.rd_merges = f[1], d.rd_sectors = f[2];
		d.rd_ticks = (uint32_t)f[3];
		d.wr_ios = f[4], d.wr_merges = f[5], d.wr_sectors = f[6];
		d.wr_ticks = (uint32_t)f[7];
		d.in_flight = f[8];
		d.io_ticks = (uint32_t)f[9];
		d.time_in_queue = (uint32_t)f[10];
		d.dc_ios = f[11], d.dc_merges = f[12], d.dc_sectors = f[13];
		d.dc_ticks = (uint32_t)f[14];
		d.fl_ios = f[15];
		d.fl_ticks = (uint32_t)f[16];
	} else {
		return -EINVAL;
	}
	d.nfields = n;
	stk__sys_out(out, &d, sizeof(d));
	return 0;
}

int stk_sys_diskstats(const char *root, struct stk_diskstat *out, size_t max)
{
	long stride = stk__sys_stride(out, max, sizeof(*out), offsetof(struct stk_diskstat, name));
	if (stride < 0)
		return (int)stride;
	char *buf;
	int rc = stk__sys_read_big(root, "/proc/diskstats", &buf);
	if (rc < 0)
		return rc;
	int count = 0;
	for (char *line = buf, *next; line && *line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = 0;
		struct stk_diskstat d = {.size = sizeof(d)};
		if (stk_sys_diskstat_parse(line, &d) < 0)
			continue;
		if ((size_t)count < max)
			stk__sys_out_at(out, (size_t)stride, (size_t)count, &d, sizeof(d));
		if (count == INT32_MAX)
			break;
		count++;
	}
	free(buf);
	return count;
}

/* sysstat: a counter below its previous value shows 0, not a huge number. */
static double d64(uint64_t cur, uint64_t prev)
{
	return cur >= prev ? (double)(cur - prev) : 0.0;
}
/* The kernel prints the tick counters as 32-bit: their difference wraps. */
static double d32(uint32_t cur, uint32_t prev)
{
	return (double)(uint32_t)(cur - prev);
}

int stk_sys_disk_rates(const struct stk_diskstat *prev, const struct stk_diskstat *cur,
		       double interval_ms, struct stk_disk_rates *out)
{
	if (!cur || !out || !(interval_ms > 0))
		return -EINVAL;
	static const struct stk_diskstat zero;
	const struct stk_diskstat *p = prev ? prev : &zero;
	/* As iostat: fewer I/Os and fewer sectors than before means the device
	 * was removed and another took its name: count from zero. */
	uint64_t ios_c = cur->rd_ios + cur->wr_ios + cur->dc_ios + cur->fl_ios;
	uint64_t ios_p = p->rd_ios + p->wr_ios + p->dc_ios + p->fl_ios;
	if (ios_c < ios_p && (!p->rd_sectors || cur->rd_sectors < p->rd_sectors) &&
	    (!p->wr_sectors || cur->wr_sectors < p->wr_sectors) &&
	    (!p->dc_sectors || cur->dc_sectors < p->dc_sectors))
		p = &zero;
	struct stk_disk_rates r;
	memset(&r, 0, sizeof(r));
	double s = interval_ms / 1000.0;
	double rios = d64(cur->rd_ios, p->rd_ios), wios = d64(cur->wr_ios, p->wr_ios);
	double dios = d64(cur->dc_ios, p->dc_ios), fios = d64(cur->fl_ios, p->fl_ios);
	double rm = d64(cur->rd_merges, p->rd_merges), wm = d64(cur->wr_merges, p->wr_merges);
	double dm = d64(cur->dc_merges, p->dc_merges);
	double rsec = d64(cur->rd_sectors, p->rd_sectors), wsec = d64(cur->wr_sectors, p->wr_sectors);
	double dsec = d64(cur->dc_sectors, p->dc_sectors);
	r.r_s = rios / s, r.w_s = wios / s, r.d_s = dios / s, r.f_s = fios / s;
	/* 512-byte sectors: / 2 gives kB (KiB, as iostat's kB) */
	r.rkb_s = rsec / 2 / s, r.wkb_s = wsec / 2 / s, r.dkb_s = dsec / 2 / s;
	r.rrqm_s = rm / s, r.wrqm_s = wm / s, r.drqm_s = dm / s;
	r.rrqm_pct = rm + rios > 0 ? rm / (rm + rios) * 100 : 0;
	r.wrqm_pct = wm + wios > 0 ? wm / (wm + wios) * 100 : 0;
	r.drqm_pct = dm + dios > 0 ? dm / (dm + dios) * 100 : 0;
	r.r_await = rios > 0 ? d32(cur->rd_ticks, p->rd_ticks) / rios : 0;
	r.w_await = wios > 0 ? d32(cur->wr_ticks, p->wr_ticks) / wios : 0;
	r.d_await = dios > 0 ? d32(cur->dc_ticks, p->dc_ticks) / dios : 0;
	r.f_await = fios > 0 ? d32(cur->fl_ticks, p->fl_ticks) / fios : 0;
	r.rareq_sz = rios > 0 ? rsec / rios / 2 : 0;
	r.wareq_sz = wios > 0 ? wsec / wios / 2 : 0;
	r.dareq_sz = dios > 0 ? dsec / dios / 2 : 0;
	r.aqu_sz = d32(cur->time_in_queue, p->time_in_queue) / interval_ms;
	r.util = d32(cur->io_ticks, p->io_ticks) / interval_ms * 100;
	stk__sys_out(out, &r, sizeof(r));
	return 0;
}

/* ---- /proc/meminfo ------------------------------------------------------ */

int stk_sys_meminfo(const char *root, struct stk_meminfo *out)
{
	char buf[8192];
	int rc = stk__sys_read(root, buf, sizeof(buf), "/proc/meminfo");
	if (rc < 0)
		return rc;
	struct stk_meminfo m;
	memset(&m, 0, sizeof(m));
	static const struct {
		const char *key;
		size_t off;
	} keys[] = {
#define K(name, field) {name, offsetof(struct stk_meminfo, field)}
		K("MemTotal", total), K("MemFree", free), K("MemAvailable", available),
		K("Buffers", buffers), K("Cached", cached), K("Shmem", shmem), K("Dirty", dirty),
		K("Writeback", writeback), K("SwapTotal", swap_total), K("SwapFree", swap_free),
		K("HugePages_Total", hugepages_total), K("Hugepagesize", hugepage_size),
#undef K
	};
	bool have_avail = false;
	for (char *line = buf, *next; line && *line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = 0;
		char *colon = strchr(line, ':');
		if (!colon)
			continue;
		*colon = 0;
		for (size_t i = 0; i < STK_ARRAY_SIZE(keys); i++) {
			if (strcmp(line, keys[i].key))
				continue;
			char *end;
			errno = 0;
			unsigned long long v = strtoull(colon + 1, &end, 10);
			if (end == colon + 1 || errno)
				break;
			while (*end == ' ')
				end++;
			if (!strcmp(end, "kB"))
				v *= 1024; /* HugePages_Total has no unit: a count */
			memcpy((char *)&m + keys[i].off, &(uint64_t){v}, sizeof(uint64_t));
			have_avail |= i == 2;
			break;
		}
	}
	if (!m.total)
		return -EINVAL;
	/* Kernels before 3.14 have no MemAvailable: the usual estimate. */
	if (!have_avail)
		m.available = m.free + m.buffers + m.cached;
	stk__sys_out(out, &m, sizeof(m));
	return 0;
}

/* ---- cgroups ------------------------------------------------------------ */

/* Finds the mount point of the cgroup hierarchy: v2 (cgroup2) or v1 with
 * `controller` among its options. */
static int cgroup_mount(const char *root, int version, const char *controller, char *mnt,
			size_t len)
{
	char *buf;
	int rc = stk__sys_read_big(root, "/proc/mounts", &buf);
	if (rc < 0)
		return rc;
	rc = -ENOENT;
	for (char *line = buf, *next; line && *line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = 0;
		char *save, *src = strtok_r(line, " ", &save);
		char *mp = strtok_r(NULL, " ", &save);
		char *type = strtok_r(NULL, " ", &save);
		char *opts = strtok_r(NULL, " ", &save);
		if (!src || !mp || !type || !opts)
			continue;
		bool match = version == 2 ? !strcmp(type, "cgroup2")
					  : !strcmp(type, "cgroup") &&
						    stk_sys_mount_opt(opts, controller, NULL, 0);
		if (match) {
			stk__sys_unescape(mp);
			rc = stk__sys_path(mnt, len, root, mp);
			break;
		}
	}
	free(buf);
	return rc;
}

int stk__sys_cgroup_dir(const char *root, const char *controller, char *dir, size_t len,
			char *mnt, size_t mntlen)
{
	char buf[4096];
	int rc = stk__sys_read(root, buf, sizeof(buf), "/proc/self/cgroup");
	if (rc < 0)
		return rc;
	char v1path[PATH_MAX] = "", v2path[PATH_MAX] = "";
	bool v1 = false, v2 = false;
	for (char *line = buf, *next; line && *line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = 0;
		char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (!c2)
			continue;
		*c2 = 0;
		const char *ctrls = c1 + 1, *path = c2 + 1;
		if (!*ctrls && !strncmp(line, "0:", 2)) {
			v2 = snprintf(v2path, sizeof(v2path), "%s", path) < (int)sizeof(v2path);
		} else if (stk_sys_mount_opt(ctrls, controller, NULL, 0)) {
			v1 = snprintf(v1path, sizeof(v1path), "%s", path) < (int)sizeof(v1path);
		}
	}
	/* A v1 controller line wins: on hybrid systems the unified (v2)
	 * hierarchy exists but the controller is bound to v1. */
	int version = v1 ? 1 : v2 ? 2 : 0;
	if (!version)
		return -ENOENT;
	const char *path = version == 1 ? v1path : v2path;
	rc = cgroup_mount(root, version, controller, mnt, mntlen);
	if (rc < 0)
		return rc;
	/* Containers without a cgroup namespace show the host's path while the
	 * mount is their own cgroup: fall back up to what exists. */
	char try[PATH_MAX];
	size_t plen = strlen(path);
	for (;;) {
		if (snprintf(try, sizeof(try), "%s%.*s", mnt, (int)plen, path) >= (int)sizeof(try))
			return -ENAMETOOLONG;
		struct stat st;
		if (!stat(try, &st) && S_ISDIR(st.st_mode))
			break;
		while (plen && path[plen - 1] != '/')
			plen--;
		if (!plen)
			break;
		plen--;
	}
	if (snprintf(dir, len, "%s", try) >= (int)len)
		return -ENAMETOOLONG;
	return version;
}

/* Walks from dir up to mnt (inclusive), calling fn on each level. */
static void cgroup_walk(char *dir, const char *mnt, void (*fn)(const char *dir, void *arg),
			void *arg)
{
	size_t mlen = strlen(mnt);
	for (;;) {
		fn(dir, arg);
		size_t l = strlen(dir);
		if (l <= mlen)
			break;
		while (l > mlen && dir[l - 1] != '/')
			l--;
		if (l > mlen)
			l--; /* drop the '/' too */
		dir[l] = 0;
	}
}

struct memwalk {
	int version;
	uint64_t limit;
	bool limited;
};

static void mem_level(const char *dir, void *arg)
{
	struct memwalk *w = arg;
	char path[PATH_MAX], buf[64];
	int64_t v;
	if (snprintf(path, sizeof(path), "%s/%s", dir,
		     w->version == 2 ? "memory.max" : "memory.limit_in_bytes") >= (int)sizeof(path))
		return;
	if (stk__sys_read_whole(path, buf, sizeof(buf)) <= 0 || !strcmp(buf, "max") || stk__sys_parse_i64(buf, &v))
		return;
	/* v1's "no limit" is PAGE_COUNTER_MAX pages: far above any real memory. */
	if (v <= 0 || (uint64_t)v >= (1ull << 60))
		return;
	if (!w->limited || (uint64_t)v < w->limit)
		w->limit = (uint64_t)v;
	w->limited = true;
}

int stk_sys_cgroup_memory(const char *root, uint64_t *limit, uint64_t *usage)
{
	char dir[PATH_MAX], mnt[PATH_MAX];
	if (usage)
		*usage = 0;
	int version = stk__sys_cgroup_dir(root, "memory", dir, sizeof(dir), mnt, sizeof(mnt));
	if (version == -ENOENT)
		return 0;
	if (version < 0)
		return version;
	if (usage) {
		int64_t u;
		if (!stk__sys_read_i64("", &u, "%s/%s", dir,
				       version == 2 ? "memory.current" : "memory.usage_in_bytes") &&
		    u > 0)
			*usage = (uint64_t)u;
	}
	struct memwalk w = {.version = version};
	cgroup_walk(dir, mnt, mem_level, &w);
	if (w.limited && limit)
		*limit = w.limit;
	return w.limited ? 1 : 0;
}

struct cpuwalk {
	int version;
	double quota; /* CPUs; 0 = none */
};

static void cpu_level(const char *dir, void *arg)
{
	struct cpuwalk *w = arg;
	char buf[128];
	int64_t q = -1, period = 0;
	if (w->version == 2) {
		if (stk__sys_read("", buf, sizeof(buf), "%s/cpu.max", dir) <= 0 ||
		    !strncmp(buf, "max", 3))
			return;
		char *sp = strchr(buf, ' ');
		if (stk__sys_parse_i64(buf, &q) || !sp || stk__sys_parse_i64(sp + 1, &period))
			return;
	} else if (stk__sys_read_i64("", &q, "%s/cpu.cfs_quota_us", dir) ||
		   stk__sys_read_i64("", &period, "%s/cpu.cfs_period_us", dir)) {
		return;
	}
	if (q <= 0 || period <= 0)
		return;
	double cpus = (double)q / (double)period;
	if (!w->quota || cpus < w->quota)
		w->quota = cpus;
}

/* "0-3,8,10-11" → count; 0 for an empty or malformed list. */
static int parse_cpulist(const char *s, uint32_t *ids, uint32_t max)
{
	uint32_t n = 0;
	while (*s) {
		char *end;
		unsigned long a = strtoul(s, &end, 10), b;
		if (end == s)
			return 0;
		b = a;
		if (*end == '-') {
			s = end + 1;
			b = strtoul(s, &end, 10);
			if (end == s || b < a)
				return 0;
		}
		for (unsigned long c = a; c <= b && n < max; c++)
			ids[n++] = (uint32_t)c;
		s = *end == ',' ? end + 1 : end;
		if (*end && *end != ',')
			break;
	}
	return (int)n;
}

int stk_sys_cpus(const char *root, struct stk_cpus *out)
{
	enum { MAXCPU = 8192 };
	char buf[4096];
	struct stk_cpus c;
	memset(&c, 0, sizeof(c));
	uint32_t *ids = malloc(MAXCPU * sizeof(*ids));
	uint64_t *cores = malloc(MAXCPU * sizeof(*cores));
	if (!ids || !cores) {
		free(ids);
		free(cores);
		return -ENOMEM;
	}
	int n = 0;
	if (stk__sys_read(root, buf, sizeof(buf), "/sys/devices/system/cpu/online") > 0)
		n = parse_cpulist(buf, ids, MAXCPU);
	if (n <= 0 && (!root || !*root)) {
		long k = sysconf(_SC_NPROCESSORS_ONLN);
		n = k > 0 ? (int)(k < MAXCPU ? k : MAXCPU) : 0;
		for (int i = 0; i < n; i++)
			ids[i] = (uint32_t)i;
	}
	c.logical = (uint32_t)n;
	uint32_t ncores = 0, npk = 0;
	int64_t pkgs[64];
	for (int i = 0; i < n; i++) {
		int64_t core, pkg;
		if (stk__sys_read_i64(root, &core, "/sys/devices/system/cpu/cpu%u/topology/core_id",
				      ids[i]) ||
		    stk__sys_read_i64(root, &pkg,
				      "/sys/devices/system/cpu/cpu%u/topology/physical_package_id",
				      ids[i])) {
			core = ids[i]; /* no topology: count each CPU as a core */
			pkg = 0;
		}
		uint64_t key = (uint64_t)(pkg & 0xffffffff) << 32 | (uint64_t)(core & 0xffffffff);
		bool seen = false;
		for (uint32_t j = 0; j < ncores && !seen; j++)
			seen = cores[j] == key;
		if (!seen)
			cores[ncores++] = key;
		seen = false;
		for (uint32_t j = 0; j < npk && !seen; j++)
			seen = pkgs[j] == pkg;
		if (!seen && npk < STK_ARRAY_SIZE(pkgs))
			pkgs[npk++] = pkg;
	}
	free(ids);
	free(cores);
	c.physical = ncores;
	c.packages = npk;
	if (!root || !*root) {
		cpu_set_t set;
		if (!sched_getaffinity(0, sizeof(set), &set))
			c.allowed = (uint32_t)CPU_COUNT(&set);
	}
	char *info;
	if (stk__sys_read_big(root, "/proc/cpuinfo", &info) >= 0) {
		char *flags = strstr(info, "\nflags");
		char *eol = flags ? strchr(flags + 1, '\n') : NULL;
		if (eol)
			*eol = 0;
		c.virtualized = flags && strstr(flags, " hypervisor") != NULL;
		free(info);
	}
	char dir[PATH_MAX], mnt[PATH_MAX];
	int version = stk__sys_cgroup_dir(root, "cpu", dir, sizeof(dir), mnt, sizeof(mnt));
	if (version > 0) {
		struct cpuwalk w = {.version = version};
		cgroup_walk(dir, mnt, cpu_level, &w);
		c.quota = w.quota;
	}
	stk__sys_out(out, &c, sizeof(c));
	return 0;
}

/* ---- tunables ----------------------------------------------------------- */

/* "always [madvise] never" → "madvise". */
static void bracketed(const char *s, char *out, size_t len)
{
	const char *a = strchr(s, '['), *b = a ? strchr(a, ']') : NULL;
	if (!a || !b) {
		snprintf(out, len, "%s", s);
		return;
	}
	snprintf(out, len, "%.*s", (int)(b - a - 1), a + 1);
}

int stk_sys_tunables(const char *root, struct stk_tunables *out)
{
	struct stk_tunables t;
	memset(&t, 0, sizeof(t));
	int64_t v;
	t.dirty_ratio = stk__sys_read_i64(root, &v, "/proc/sys/vm/dirty_ratio") ? -1 : (int32_t)v;
	t.dirty_background_ratio =
		stk__sys_read_i64(root, &v, "/proc/sys/vm/dirty_background_ratio") ? -1 : (int32_t)v;
	t.dirty_bytes = stk__sys_read_i64(root, &v, "/proc/sys/vm/dirty_bytes") ? -1 : v;
	t.dirty_background_bytes =
		stk__sys_read_i64(root, &v, "/proc/sys/vm/dirty_background_bytes") ? -1 : v;
	t.io_uring_disabled =
		stk__sys_read_i64(root, &v, "/proc/sys/kernel/io_uring_disabled") ? -1 : (int32_t)v;
	char buf[128];
	if (stk__sys_read(root, buf, sizeof(buf), "/sys/kernel/mm/transparent_hugepage/enabled") > 0)
		bracketed(buf, t.thp_enabled, sizeof(t.thp_enabled));
	if (stk__sys_read(root, buf, sizeof(buf), "/sys/kernel/mm/transparent_hugepage/defrag") > 0)
		bracketed(buf, t.thp_defrag, sizeof(t.thp_defrag));
	struct rlimit rl;
	if (!getrlimit(RLIMIT_NOFILE, &rl)) {
		t.nofile_soft = rl.rlim_cur == RLIM_INFINITY ? UINT64_MAX : (uint64_t)rl.rlim_cur;
		t.nofile_hard = rl.rlim_max == RLIM_INFINITY ? UINT64_MAX : (uint64_t)rl.rlim_max;
	}
	/* CAP_IPC_LOCK (bit 14 of the effective set) exempts from RLIMIT_MEMLOCK. */
	char st[4096];
	t.cap_ipc_lock = -1;
	if (stk__sys_read(root, st, sizeof(st), "/proc/self/status") > 0) {
		const char *cap = strstr(st, "\nCapEff:");
		if (cap)
			t.cap_ipc_lock = (int32_t)((strtoull(cap + 8, NULL, 16) >> 14) & 1);
	}
	if (!getrlimit(RLIMIT_MEMLOCK, &rl)) {
		t.memlock_soft = rl.rlim_cur == RLIM_INFINITY ? UINT64_MAX : (uint64_t)rl.rlim_cur;
		t.memlock_hard = rl.rlim_max == RLIM_INFINITY ? UINT64_MAX : (uint64_t)rl.rlim_max;
	}
	stk__sys_out(out, &t, sizeof(t));
	return 0;
}

/* ---- processes ----------------------------------------------------------- */

double stk__sys_process_start(const char *root, long pid)
{
	char buf[2048];
	if (stk__sys_read(root, buf, sizeof(buf), "/proc/%ld/stat", pid) <= 0)
		return 0;
	char *p = strrchr(buf, ')'); /* the command name may hold spaces and parens */
	if (!p)
		return 0;
	/* field 22 (starttime, clock ticks since boot) is the 20th after ')' */
	for (int i = 0; i < 20 && p; i++)
		p = strchr(p + 1, ' ');
	if (!p)
		return 0;
	double ticks = strtod(p + 1, NULL);
	char *st = NULL;
	double btime = 0;
	if (stk__sys_read_big(root, "/proc/stat", &st) > 0) {
		const char *b = strstr(st, "\nbtime ");
		if (b)
			btime = strtod(b + 7, NULL);
		free(st);
	}
	long hz = sysconf(_SC_CLK_TCK);
	return btime > 0 && hz > 0 ? btime + ticks / (double)hz : 0;
}
