/*
 * doctor/path.c — `stoker doctor`'s checks about the dataset's PATH: its
 * files, filesystem and mount options, the block device behind it and that
 * device's queue (scheduler, read-ahead, nr_requests), the I/O plan for that
 * storage (queue depth and I/O threads, beside the DataLoader rule of thumb),
 * and whether O_DIRECT works there (an O_DIRECT read of one of its files).  Everything
 * is read through stoker/sys.h; nothing is written.
 */
#include <errno.h>
#include <fts.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "doctor/doctor.h"

/* Counts regular files and bytes under the path, stopping after a million
 * files or two seconds: enough to size limits, cheap on a huge tree. */
static void count_files(struct doctor *d)
{
	char *const argv[] = {(char *)d->path, NULL};
	FTS *fts = fts_open(argv, FTS_PHYSICAL | FTS_NOCHDIR, NULL);
	if (!fts)
		return;
	double t0 = now_s();
	for (FTSENT *e; (e = fts_read(fts));) {
		if (e->fts_info == FTS_D && e->fts_level > 0 && e->fts_name[0] == '.')
			fts_set(fts, e, FTS_SKIP); /* .stoker-index, .git...: not samples */
		if (e->fts_info != FTS_F || e->fts_name[0] == '.')
			continue;
		d->files++;
		d->bytes += (uint64_t)e->fts_statp->st_size;
		if ((d->files & 1023) == 0) {
			progress("stoker doctor: counting files under %s: %llu", d->path,
				 (unsigned long long)d->files);
			if (d->files >= 1000000 || now_s() - t0 > 2.0) {
				d->count_capped = true;
				break;
			}
		}
	}
	progress_done();
	fts_close(fts);
}

static void check_files(struct doctor *d)
{
	struct stat st;
	if (stat(d->path, &st)) {
		struct check *c = doc_add(d, "path", ST_FAIL);
		SET(c, value, "%s: %s", d->path, strerror(errno));
		SET(c, why, "the dataset's folder or file list must be readable");
		return;
	}
	d->path_ok = true;
	d->is_dir = S_ISDIR(st.st_mode);
	if (d->is_dir) {
		count_files(d);
	} else {
		d->files = 1;
		d->bytes = (uint64_t)st.st_size;
	}
	struct check *c = doc_add(d, "path", ST_OK);
	char b1[32], b2[32];
	if (d->is_dir && !d->files) {
		c->status = ST_WARN;
		SET(c, value, "%s: a folder with no files", d->path);
		SET(c, why, "there is nothing to load");
		return;
	}
	SET(c, value, "%s%s: %s%llu file%s, %s, mean %s per file", d->path,
	    d->is_dir ? "" : " (a file)", d->count_capped ? ">= " : "",
	    (unsigned long long)d->files, d->files == 1 ? "" : "s",
	    fmt_bytes(b1, sizeof(b1), (double)d->bytes),
	    fmt_bytes(b2, sizeof(b2), d->files ? (double)d->bytes / (double)d->files : 0));
	SET(c, why, "the file count and mean size decide the limits and read-ahead advice below%s",
	    d->count_capped ? " (counting stopped early: the tree is large)" : "");
}

static void check_fs(struct doctor *d, const struct stk_mount *m)
{
	int fk = stk_sys_fs_kind(m->fstype);
	struct check *c = doc_add(d, "filesystem", ST_OK);
	SET(c, value, "%s (%s) mounted at %s", m->fstype, m->source, m->mountpoint);
	if (fk == STK_DEV_NETWORK) {
		c->status = ST_WARN;
		SET(c, why,
		    "a network filesystem: every file costs a round trip (0.2-2 ms), so small files "
		    "cap samples/s at reads in flight / latency; keep the queue deep (stoker's "
		    "default is %s; see the io plan below) and prefer large shards or a local copy",
		    doc_default("queue_depth"));
		SET(c, fix, "stoker pack %s OUT  # tar shards: one open per thousands of samples\n"
			    "cp -r %s /local/nvme/  # or a local copy", d->path, d->path);
	} else if (!strcmp(m->fstype, "overlay")) {
		c->status = ST_WARN;
		SET(c, why, "the container's copy-on-write layer: slower than a volume, and the data "
			    "is baked into the image");
		SET(c, fix, "docker run -v /host/data:/data ...  # mount the dataset as a volume");
	} else if (fk == STK_DEV_MEMORY) {
		SET(c, why, "in memory: no device to wait for (but it takes RAM from training)");
	} else {
		SET(c, why, "a local filesystem");
	}
}

static void check_mount_opts(struct doctor *d, const struct stk_mount *m)
{
	if (stk_sys_fs_kind(m->fstype) == STK_DEV_MEMORY)
		return;
	bool noatime = stk_sys_mount_opt(m->options, "noatime", NULL, 0);
	bool relatime = stk_sys_mount_opt(m->options, "relatime", NULL, 0);
	bool ro = stk_sys_mount_opt(m->options, "ro", NULL, 0);
	struct check *c = doc_add(d, "mount options", ST_OK);
	SET(c, value, "%s", m->options);
	if (noatime || ro) {
		SET(c, why, "%s: reads never write access times", ro ? "read-only" : "noatime");
	} else if (relatime) {
		SET(c, why, "relatime: a read writes the access time at most once a day per file; "
			    "noatime removes even that");
		SET(c, fix, "mount -o remount,noatime %s  # optional; add noatime in /etc/fstab to keep it",
		    m->mountpoint);
	} else {
		c->status = ST_WARN;
		SET(c, why, "strictatime: every read of every file writes its access time, a metadata "
			    "write per sample");
		SET(c, fix, "mount -o remount,noatime %s  # and add noatime to its /etc/fstab line",
		    m->mountpoint);
	}
}

/* Virtual disks (virtio-blk, and most disks in a VM) report "rotational"
 * whatever backs them: the flag only counts on bare metal. */
static bool rot_unsure(const struct doctor *d, const struct stk_blockdev *b)
{
	return b->rotational == 1 && (b->kind == STK_DEV_VIRTIO || d->cpus.virtualized);
}

static void check_device(struct doctor *d, const struct stk_blockdev *b)
{
	struct check *c = doc_add(d, "block device", ST_OK);
	char part[80] = "";
	if (b->partition)
		snprintf(part, sizeof(part), ", partition %s", b->name);
	SET(c, value, "%s: %s, %s%s%s%s", b->disk, stk_sys_dev_kind_name(b->kind),
	    b->rotational == 1 ? "rotational" : b->rotational == 0 ? "non-rotational" : "rotation unknown",
	    b->model[0] ? ", " : "", b->model, part);
	if (rot_unsure(d, b)) {
		SET(c, why, "a virtual disk reporting \"rotational\", as most do whatever backs them: "
			    "measure it (SSDs give thousands of random reads per second, disks 100-200)");
		SET(c, fix, "stoker disk %s  # random-read IOPS and latency", d->path);
	} else if (b->rotational == 1) {
		c->status = ST_WARN;
		SET(c, why, "a spinning disk: random reads of small files run at ~100-200 per second "
			    "(seek-bound); read large shards sequentially instead");
		SET(c, fix, "stoker pack %s OUT  # tar shards, read in long sequential runs", d->path);
	} else {
		SET(c, why, "solid state: random reads are cheap; throughput comes from reads in flight");
	}
}

static void check_queue(struct doctor *d, const struct stk_blockdev *b)
{
	struct stk_queue q = {.size = sizeof(q)};
	if (stk_sys_queue(d->root, b->disk, &q))
		return;
	bool rot = b->rotational == 1 && !rot_unsure(d, b);
	struct check *c;
	if (q.scheduler[0]) {
		c = doc_add(d, "scheduler", ST_OK);
		SET(c, value, "%s (offered: %s)", q.scheduler, q.schedulers);
		bool none = !strcmp(q.scheduler, "none"), dl = !strcmp(q.scheduler, "mq-deadline");
		bool has_none = strstr(q.schedulers, "none") != NULL;
		if (rot && none) {
			c->status = ST_WARN;
			SET(c, why, "a spinning disk gains from requests sorted by position");
			SET(c, fix, "echo mq-deadline > /sys/block/%s/queue/scheduler", b->disk);
		} else if (!rot && !none && !dl && has_none) {
			c->status = ST_WARN;
			SET(c, why, "%s costs CPU and latency per request on a fast device; %s queues deep "
				    "enough on its own",
			    q.scheduler, b->kind == STK_DEV_NVME ? "NVMe" : "an SSD");
			SET(c, fix, "echo none > /sys/block/%s/queue/scheduler  # persist with a udev rule",
			    b->disk);
		} else {
			SET(c, why, "%s suits a %s device", q.scheduler, rot ? "rotational" : "solid-state or virtual");
		}
	}
	if (q.read_ahead_kb >= 0) {
		c = doc_add(d, "read-ahead", ST_OK);
		double mean = d->files ? (double)d->bytes / (double)d->files : 0;
		SET(c, value, "%lld kB", (long long)q.read_ahead_kb);
		if (q.read_ahead_kb == 0) {
			c->status = ST_WARN;
			SET(c, why, "0 turns every buffered read into 4 kB requests, one page at a time");
			SET(c, fix, "echo 128 > /sys/block/%s/queue/read_ahead_kb", b->disk);
		} else if (mean >= 4e6 && q.read_ahead_kb < 1024) {
			c->status = ST_WARN;
			SET(c, why, "large files and tar shards are read in long sequential runs: 1-4 MB "
				    "of read-ahead keeps the device busy between reads");
			SET(c, fix, "echo 4096 > /sys/block/%s/queue/read_ahead_kb  # = blockdev --setra 8192 /dev/%s",
			    b->disk, b->disk);
		} else if (mean > 0 && mean < 1e6) {
			SET(c, why, "small files are read whole, one request each: read-ahead matters little; "
				    "reads in flight do (sequential shards would want 1-4 MB)");
		} else {
			SET(c, why, "enough for sequential reads of large files (1-4 MB suits tar shards)");
		}
	}
	if (q.nr_requests >= 0) {
		c = doc_add(d, "nr_requests", ST_OK);
		SET(c, value, "%lld per hardware queue", (long long)q.nr_requests);
		if (q.hw_queues > 0)
			SET(c, value, "%lld per hardware queue (%lld queue%s)", (long long)q.nr_requests,
			    (long long)q.hw_queues, q.hw_queues == 1 ? "" : "s");
		if (q.nr_requests < 32) {
			c->status = ST_WARN;
			SET(c, why, "fewer requests than the loader keeps in flight (%s by default): the "
				    "rest wait in the block layer", doc_default("queue_depth"));
			SET(c, fix, "echo 256 > /sys/block/%s/queue/nr_requests  # the device may cap it",
			    b->disk);
		} else {
			SET(c, why, "room for the loader's reads in flight (%s by default)",
			    doc_default("queue_depth"));
		}
	}
}

/* What stoker would do on this storage, beside what a DataLoader user would
 * have been told: the plan is the library's (stk_io_plan), one row a kind. */
static void check_io_plan(struct doctor *d)
{
	struct stk_io_plan p = {.size = sizeof(p)};
	int rc = stk_io_plan(d->root, d->path, &p);
	struct check *c = doc_add(d, "io plan", ST_OK);
	if (rc) {
		c->status = ST_WARN;
		SET(c, value, "cannot tell the storage behind %s: %s", d->path, strerror(-rc));
		SET(c, why, "the plan depends on the storage kind");
		return;
	}
	c->explain = true;
	const char *rot = p.rotational == 1 ? " (spinning)" : "";
	SET(c, value, "%s%s%s%s: stoker would keep %u reads in flight on %u I/O thread%s; the "
		      "DataLoader rule of thumb says %u-%u workers",
	    stk_sys_dev_kind_name(p.kind), rot, p.disk[0] ? " " : "", p.disk, p.queue_depth,
	    p.io_threads, p.io_threads == 1 ? "" : "s", p.dl_workers_min, p.dl_workers_max);
	SET(c, why, "%s", p.why);
	SET(c, fix, "stoker bench %s --queue-depth %u --io-threads %u  # to fix them; by default "
		    "(auto) the loader probes for the depth where throughput stops rising, and takes "
		    "this one when the consumer sets the pace\n"
		    "stoker.Loader(..., queue_depth=%u, threads=%u)",
	    d->path, p.queue_depth, p.io_threads, p.queue_depth, p.io_threads);
}

static void check_direct(struct doctor *d)
{
	char dir[PATH_MAX], why[PATH_MAX + 128];
	const char *file = NULL;
	if (d->is_dir) {
		snprintf(dir, sizeof(dir), "%s", d->path);
	} else {
		char tmp[PATH_MAX];
		snprintf(tmp, sizeof(tmp), "%s", d->path);
		snprintf(dir, sizeof(dir), "%s", dirname(tmp));
		file = d->path;
	}
	/* a read of a file there: doctor writes nothing, not even a temporary file */
	int rc = stk_sys_direct_read_probe(dir, file, why, sizeof(why));
	struct check *c = doc_add(d, "O_DIRECT", rc ? ST_WARN : ST_OK);
	if (!rc) {
		SET(c, value, "%s (a read: nothing written)", why);
		SET(c, why, "--direct reads skip the page cache: they measure the device itself and a "
			    "dataset larger than RAM does not evict the trainer's memory");
	} else if (rc == -EINVAL) {
		SET(c, value, "refused by this filesystem (%s)", why);
		SET(c, why, "--direct falls back to buffered reads here (tmpfs before Linux 6.6, many "
			    "FUSE and network filesystems)");
	} else {
		SET(c, value, "could not be tested: %s", why);
		SET(c, why, "--direct may fall back to buffered reads here");
	}
}

void doc_path_checks(struct doctor *d)
{
	check_files(d);
	if (!d->path_ok)
		return;
	struct stk_mount m = {.size = sizeof(m)};
	int rc = stk_sys_mount_for_path(d->root, d->path, &m);
	if (rc < 0) {
		struct check *c = doc_add(d, "filesystem", ST_WARN);
		SET(c, value, "no mount found for %s in /proc/mounts (%s)", d->path, strerror(-rc));
		SET(c, why, "the filesystem and device checks need it");
	} else {
		check_fs(d, &m);
		check_mount_opts(d, &m);
	}
	struct stk_blockdev b = {.size = sizeof(b)};
	rc = stk_sys_blockdev_for_path(d->root, d->path, &b);
	if (!rc) {
		check_device(d, &b);
		check_queue(d, &b);
	} else {
		struct check *c = doc_add(d, "block device", ST_OK);
		SET(c, value, "none%s%s%s", rc == -ENODEV ? "" : " (", rc == -ENODEV ? "" : strerror(-rc),
		    rc == -ENODEV ? "" : ")");
		SET(c, why, "%s", rc == -ENODEV ? "no local disk behind this filesystem (memory, network "
						  "or a virtual layer): no queue settings to check"
						: "the device's queue settings could not be read");
	}
	check_io_plan(d);
	check_direct(d);
}
