/* bench/cold.c — what `--cache cold` needs beyond dropping the page cache
 * once: every measured epoch read from the device, and a check that it was.
 *
 * The loader reads O_DIRECT on a cold run unless --buffered is asked (the
 * page cache never holds the data, so later epochs stay cold and nothing
 * pauses the clock).  With buffered reads the dataset's own pages are evicted
 * before every epoch (posix_fadvise DONTNEED on each file or shard: no root
 * needed, and only this dataset's pages go), the clock stopped meanwhile.
 * The device's read counters (/proc/diskstats) are taken around the measured
 * part, so a cold figure is checked against the bytes the device delivered:
 * a run whose reads came from memory, or too short to mean anything, is said
 * to be so and gets no headline figure. */
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "bench/bench.h"
#include "stoker/sys.h"

#define TMPFS_MAGIC 0x01021994
#define RAMFS_MAGIC 0x858458f6

uint64_t bench_evicted_files;

int evict_dataset(struct stk_loader *l)
{
	int64_t n = stk_loader_num_samples(l);
	char path[PATH_MAX], last[PATH_MAX] = "";
	int rc = 0;
	for (int64_t i = 0; i < n && !bench_interrupted; i++) {
		uint64_t off, size;
		if (stk_loader_sample_extent(l, i, path, sizeof(path), &off, &size))
			continue;
		if (!strcmp(path, last)) /* a shard's members: the shard is evicted whole */
			continue;
		memcpy(last, path, sizeof(last));
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue; /* the loader's read will say why */
		bench_evicted_files++;
		int e = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
		if (e && !rc)
			rc = -e;
		close(fd);
	}
	return rc;
}

bool memory_fs(const char *path)
{
	struct statfs sf;
	return statfs(path, &sf) == 0 &&
	       ((unsigned long)sf.f_type == TMPFS_MAGIC || (unsigned long)sf.f_type == RAMFS_MAGIC);
}

void dev_open(struct devmeter *m, const char *path)
{
	struct stk_blockdev bd = {.size = sizeof(bd)};
	memset(m, 0, sizeof(*m));
	if (stk_sys_blockdev_for_path("", path, &bd) == 0)
		snprintf(m->disk, sizeof(m->disk), "%s", bd.disk);
}

/* Sectors the device has read since boot, or -1. */
static double dev_sectors(const struct devmeter *m)
{
	struct stk_diskstat all[64];
	all[0].size = sizeof(all[0]);
	int n = m->disk[0] ? stk_sys_diskstats("", all, sizeof(all) / sizeof(all[0])) : -1;
	for (int i = 0; i < n && i < (int)(sizeof(all) / sizeof(all[0])); i++)
		if (!strcmp(all[i].name, m->disk))
			return (double)all[i].rd_sectors;
	return -1;
}

void dev_start(struct devmeter *m)
{
	m->s0 = dev_sectors(m);
}

void dev_stop(struct devmeter *m)
{
	double s = m->s0 >= 0 ? dev_sectors(m) : -1;
	if (s >= 0) {
		m->bytes += (s - m->s0) * 512;
		m->ok = true;
	}
	m->s0 = -1;
}

/* Whether a cold run's figure means something: why not into r->invalid. */
void cold_check(struct run *r, const struct bench_opts *o, bool direct, double resident)
{
	char *why = r->invalid;
	size_t len = sizeof(r->invalid);
	why[0] = 0;
	if (o->cache != CACHE_COLD)
		return;
	if (memory_fs(o->path)) {
		snprintf(why, len, "%s is on a memory filesystem (tmpfs or ramfs): its "
			 "data is never read from a device, so no run over it is cold", o->path);
	} else if (!direct && resident > 0.5) { /* unknown (< 0): the device's bytes tell */
		snprintf(why, len, "%.0f %% of the dataset's sampled pages stayed in memory "
			 "after they were evicted: the reads did not come from the device",
			 resident * 100);
	} else if (r->dev.ok && r->bytes > 0 && r->dev.bytes < 0.5 * (double)r->bytes) {
		snprintf(why, len, "the device (%s) read %.1f MB while the loader delivered "
			 "%.1f MB: the reads came from memory, not the device", r->dev.disk,
			 r->dev.bytes / 1e6, (double)r->bytes / 1e6);
	} else if (r->wall < COLD_MIN_S || r->samples < COLD_MIN_READS) {
		snprintf(why, len, "the cold window was %.3f s and %llu samples (under "
			 "%.2f s or %d samples, start-up and the epoch's tail are most of it): use "
			 "more data, or --epochs N for N whole epochs", r->wall,
			 (unsigned long long)r->samples, COLD_MIN_S, COLD_MIN_READS);
	}
}
