/* disk/pat.c — the patterns of `stoker disk` on one target.
 *
 * In a folder the block patterns share one data file, laid out (written
 * whole) the first time a pattern needs it, so reads never hit holes that
 * cost the disk nothing; seqwrite then overwrites it, as fio does with a
 * laid-out file.  Before every read the page cache is kept out: O_DIRECT
 * bypasses it; buffered reads first evict the file (fsync + fadvise
 * DONTNEED, checked with mincore, drop_caches as root when that was not
 * enough), and the result says which, or WARM when nothing worked.
 * Buffered writes count the closing fsync, so the page cache is not
 * reported as disk speed either.
 */
#include "disk/disk.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#define MiB (1024ull * 1024)

static uint32_t buf_align(const struct dk_target *t)
{
	return t->dio_align > 4096 ? t->dio_align : 4096;
}

/* O_DIRECT unless --buffered (checkpoints: buffered unless --direct, as
 * torch.save writes); a filesystem that cannot do it gets buffered I/O. */
static void tell_fallback(struct dk_target *t)
{
	if (!t->dio_told)
		fprintf(stderr,
			"stoker disk: %s (%s) does not support O_DIRECT: falling back to buffered "
			"I/O%s\n",
			t->path, t->fs,
			t->memfs ? "; tmpfs keeps files in memory, so these figures are memory "
				   "speed, not disk speed"
				 : "; the page cache is evicted before each read");
	t->dio_told = true;
}

static bool choose_direct(struct dk_target *t, enum dk_pattern p, const struct dk_conf *cf)
{
	bool want = cf->direct >= 0 ? cf->direct : p != DK_CHECKPOINT;
	if (want && t->dio_refused) {
		tell_fallback(t);
		return false;
	}
	return want;
}

static void set_err(struct dk_result *r, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void set_err(struct dk_result *r, int err, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->errmsg, sizeof(r->errmsg), fmt, ap);
	va_end(ap);
	r->err = err;
}

static void skip(struct dk_result *r, const char *why)
{
	r->skipped = true;
	snprintf(r->errmsg, sizeof(r->errmsg), "%s", why);
}

/* Says "disk full" in words, whatever ran out. */
static int job_error(struct dk_result *r, const struct dk_target *t, const char *file,
		     const struct dk_job_out *o)
{
	char b[32];
	if (o->err == -ENOSPC || o->err == -EDQUOT)
		set_err(r, o->err,
			"%s: disk full (%s) writing %s after %s: the pattern stops here and "
			"its files are removed",
			t->path, o->err == -ENOSPC ? "ENOSPC" : "EDQUOT", file,
			fmt_bytes(b, sizeof(b), (double)o->bytes));
	else
		set_err(r, o->err, "%s: %s: %s%s", t->path, file, o->errmsg,
			o->err == -EINVAL && r->direct ? " (O_DIRECT alignment? try --buffered)"
						       : "");
	return r->err;
}

static int check_space(const struct dk_target *t, uint64_t need, const char *what,
		       struct dk_result *r)
{
	struct statvfs sv;
	if (t->dirfd < 0 || fstatvfs(t->dirfd, &sv))
		return 0;
	uint64_t avail = (uint64_t)sv.f_bavail * sv.f_frsize;
	if (need <= avail)
		return 0;
	char a[32], b[32];
	set_err(r, -ENOSPC,
		"%s: not enough free space (ENOSPC) for %s: needs %s, %s free; nothing written",
		t->path, what, fmt_bytes(a, sizeof(a), (double)need),
		fmt_bytes(b, sizeof(b), (double)avail));
	return r->err;
}

/* Keeps the page cache out of the next read of fd; says how in label. */
static void cache_out(int fd, uint64_t size, bool direct, const struct dk_target *t,
		      const struct dk_conf *cf, char *label, size_t len)
{
	if (t->memfs) {
		snprintf(label, len, "none: %s is memory, not a disk", t->fs);
		return;
	}
	if (direct) {
		snprintf(label, len, "bypassed (O_DIRECT)");
		return;
	}
	fdatasync(fd);
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	double res = dk_resident(fd, size);
	if (res >= 0 && res < 0.01) {
		snprintf(label, len, "evicted (fadvise DONTNEED)");
		return;
	}
	char why[160] = "--no-drop";
	if (!cf->no_drop && !drop_caches(why, sizeof(why))) {
		res = dk_resident(fd, size);
		if (res >= 0 && res < 0.01) {
			snprintf(label, len, "dropped (drop_caches)");
			return;
		}
		snprintf(why, sizeof(why), "still cached after drop_caches");
	}
	snprintf(label, len, "WARM: %.0f%% cached, not disk speed", res < 0 ? 100 : res * 100);
	fprintf(stderr, "stoker disk: %s: could not evict the page cache (%s): figures marked "
		"WARM are not disk speed\n", t->path, why);
}

/* Opens `name` in the target's folder, or the target itself when name is
 * NULL; an O_DIRECT open refused with EINVAL is retried buffered. fd or -errno. */
static int open_at(struct dk_target *t, const char *name, int flags, bool *direct)
{
	flags |= O_CLOEXEC;
	for (;;) {
		int f = flags | (*direct ? O_DIRECT : 0);
		int fd = name ? openat(t->dirfd, name, f) : open(t->path, f);
		if (fd >= 0 || errno != EINVAL || !*direct)
			return fd < 0 ? -errno : fd;
		t->dio_refused = true;
		tell_fallback(t);
		*direct = false;
	}
}

/* The target's data: our data file, or the file or device itself. */
static int open_data(struct dk_target *t, bool write, bool *direct)
{
	return open_at(t, t->kind == DK_DIR ? t->data_name : NULL, write ? O_RDWR : O_RDONLY,
		       direct);
}

static void fill_job(struct dk_job *j, const struct dk_case *c, const struct dk_conf *cf,
		     const char *label)
{
	memset(j, 0, sizeof(*j));
	j->kind = DK_JOB_BLOCK;
	j->label = label;
	j->engine = cf->engine;
	j->qd = c->qd;
	j->threads = c->threads;
	j->runtime = c->runtime;
	j->ramp = c->ramp;
	j->bs = c->bs;
	j->seed = cf->seed;
}

/* Writes the data file whole, once per target: not measured. */
static int layout(struct dk_target *t, const struct dk_conf *cf, struct dk_result *r)
{
	uint64_t size = cf->size / MiB * MiB;
	if (size < MiB)
		size = MiB;
	/* one per target: two PATHs naming one folder keep their files apart
	 * while --repeat's rounds alternate them */
	static unsigned seq;
	snprintf(t->data_name, sizeof(t->data_name), DK_PREFIX "%d-data-%u", (int)getpid(), seq++);
	if (check_space(t, size, "the data file", r))
		return r->err;
	/* created buffered: a filesystem that refuses O_DIRECT may still create
	 * the file before failing the open */
	int fd = dk_create(t->dirfd, t->data_name, O_RDWR);
	if (fd < 0) {
		set_err(r, fd, "%s: cannot create %s: %s", t->path, t->data_name, stk_strerror(fd));
		return fd;
	}
	int fr = posix_fallocate(fd, 0, (off_t)size);
	close(fd);
	dk_dio_probe(t, t->dirfd, t->data_name);
	if (fr == ENOSPC || fr == EDQUOT) {
		dk_remove(t->dirfd, t->data_name);
		set_err(r, -fr, "%s: disk full (%s) allocating %s: nothing measured, file removed",
			t->path, fr == ENOSPC ? "ENOSPC" : "EDQUOT", t->data_name);
		return r->err;
	}
	bool direct = choose_direct(t, DK_SEQWRITE, cf);
	fd = open_data(t, true, &direct);
	if (fd < 0) {
		dk_remove(t->dirfd, t->data_name);
		set_err(r, fd, "%s: %s: %s", t->path, t->data_name, stk_strerror(fd));
		return fd;
	}
	char label[300];
	snprintf(label, sizeof(label), "%s: writing the data file", t->path);
	struct dk_case c = {.bs = MiB, .qd = 4, .threads = 1};
	struct dk_job j;
	fill_job(&j, &c, cf, label);
	j.fd = fd;
	j.write = true;
	j.direct = direct;
	j.span = size;
	j.align = buf_align(t);
	struct dk_job_out o = {0};
	int err = stk_hist_create(&o.hist);
	if (!err) {
		err = dk_run(&j, &o);
		stk_hist_destroy(o.hist);
	}
	if (!err && fdatasync(fd)) {
		o.err = err = -errno;
		snprintf(o.errmsg, sizeof(o.errmsg), "fsync");
	}
	close(fd);
	if (err || atomic_load(&dk_stop)) {
		dk_remove(t->dirfd, t->data_name);
		return err ? job_error(r, t, t->data_name, &o) : 0;
	}
	t->data_ready = true;
	t->data_size = size;
	return 0;
}

int dk_prepare(struct dk_target *t, const struct dk_conf *cf, struct dk_result *r)
{
	return t->kind == DK_DIR && !t->data_ready ? layout(t, cf, r) : 0;
}

void dk_target_done(struct dk_target *t)
{
	if (t->data_ready)
		dk_remove(t->dirfd, t->data_name);
	t->data_ready = false;
}

static uint64_t target_size(const struct dk_target *t, const struct dk_conf *cf)
{
	if (t->kind == DK_DIR)
		return t->data_size;
	return cf->size_given && cf->size < t->size ? cf->size : t->size;
}

static void copy_out(struct dk_result *r, const struct dk_job_out *o)
{
	r->bytes = o->bytes;
	r->ios = o->ios;
	r->seconds = o->seconds;
	r->engine = o->engine == DK_URING ? "io_uring" : "psync";
}

static int block_case(struct dk_target *t, const struct dk_case *c, const struct dk_conf *cf,
		      struct dk_result *r)
{
	bool write = c->pat == DK_SEQWRITE;
	if (write && t->kind != DK_DIR && !t->destructive) {
		skip(r, "opened read-only (--readonly)");
		return 0;
	}
	if (t->kind == DK_DIR && !t->data_ready && layout(t, cf, r))
		return r->err;
	if (atomic_load(&dk_stop))
		return 0;
	uint64_t size = target_size(t, cf);
	bool direct = choose_direct(t, c->pat, cf);
	if (direct && t->dio_align && c->bs % t->dio_align) {
		set_err(r, -EINVAL, "%s: block size %llu is not a multiple of its direct-I/O "
			"alignment %u: use a multiple or --buffered", t->path,
			(unsigned long long)c->bs, t->dio_align);
		return r->err;
	}
	if (c->bs * c->threads > size) {
		set_err(r, -EINVAL, "%s: %llu bytes is less than one block per thread", t->path,
			(unsigned long long)size);
		return r->err;
	}
	const char *name = t->kind == DK_DIR ? t->data_name : t->path;
	int fd = open_data(t, write, &direct);
	if (fd < 0) {
		set_err(r, fd, "%s: %s", name, stk_strerror(fd));
		return fd;
	}
	r->direct = direct;
	if (write)
		snprintf(r->cache, sizeof(r->cache), "%s",
			 direct ? "bypassed (O_DIRECT)" : "buffered, closing fsync counted");
	else
		cache_out(fd, size, direct, t, cf, r->cache, sizeof(r->cache));
	/* as fio's fadvise_hint: no read-ahead to serve random reads from memory */
	if (!direct)
		posix_fadvise(fd, 0, 0, c->pat == DK_RANDREAD ? POSIX_FADV_RANDOM
							    : POSIX_FADV_SEQUENTIAL);
	char label[300];
	snprintf(label, sizeof(label), "%s: %s", t->path, dk_pattern_name[c->pat]);
	struct dk_job j;
	fill_job(&j, c, cf, label);
	j.fd = fd;
	j.write = write;
	j.random = c->pat == DK_RANDREAD;
	j.direct = direct;
	j.one_pass = !direct;
	j.span = size;
	j.align = buf_align(t);
	struct dk_job_out o = {.hist = r->hist};
	int err = dk_run(&j, &o);
	copy_out(r, &o);
	if (!err && write && !direct) {
		double t0 = now_s();
		if (fdatasync(fd)) {
			o.err = err = -errno;
			snprintf(o.errmsg, sizeof(o.errmsg), "fsync");
		}
		r->fsync_s = now_s() - t0;
		r->seconds += r->fsync_s;
	}
	close(fd);
	return err ? job_error(r, t, name, &o) : 0;
}

static int ckpt_case(struct dk_target *t, const struct dk_case *c, const struct dk_conf *cf,
		     struct dk_result *r)
{
	if (t->kind != DK_DIR && !t->destructive) {
		skip(r, "opened read-only (--readonly)");
		return 0;
	}
	bool direct = choose_direct(t, c->pat, cf);
	r->direct = direct;
	struct dk_case cc = *c;
	uint64_t size = cf->ckpt_size;
	if (t->kind != DK_DIR && size > t->size)
		size = t->size;
	if (cc.bs > size)
		cc.bs = size / MiB * MiB;
	size = size / cc.bs * cc.bs;
	cc.threads = 1;
	cc.runtime = 0; /* a checkpoint is written whole */
	cc.ramp = 0;
	char name[64];
	int fd;
	snprintf(name, sizeof(name), DK_PREFIX "%d-ckpt", (int)getpid());
	if (t->kind == DK_DIR) {
		if (check_space(t, size, "the checkpoint", r))
			return r->err;
		/* created buffered, then reopened: see layout() */
		fd = dk_create(t->dirfd, name, O_WRONLY);
		if (fd >= 0) {
			close(fd);
			fd = open_at(t, name, O_WRONLY, &direct);
		}
	} else {
		fd = open_at(t, NULL, O_WRONLY, &direct);
		snprintf(name, sizeof(name), "%s", "the target");
	}
	r->direct = direct;
	if (fd < 0) {
		set_err(r, fd, "%s: cannot create %s: %s", t->path, name, stk_strerror(fd));
		goto out;
	}
	char label[300];
	snprintf(label, sizeof(label), "%s: checkpoint write", t->path);
	struct dk_job j;
	fill_job(&j, &cc, cf, label);
	j.fd = fd;
	j.write = true;
	j.direct = direct;
	j.span = size;
	j.align = buf_align(t);
	struct dk_job_out o = {.hist = r->hist};
	int err = dk_run(&j, &o);
	copy_out(r, &o);
	r->write_s = o.seconds;
	if (!err && !atomic_load(&dk_stop)) {
		/* seconds to durable: the writes, then fsync as os.fsync does */
		double t0 = now_s();
		if (fsync(fd)) {
			o.err = err = -errno;
			snprintf(o.errmsg, sizeof(o.errmsg), "fsync");
		}
		r->fsync_s = now_s() - t0;
	}
	r->seconds = r->write_s + r->fsync_s;
	close(fd);
	if (err) {
		job_error(r, t, name, &o);
		goto out;
	}
	if (atomic_load(&dk_stop))
		goto out;
	/* read it back, as torch.load does, from the disk */
	fd = open_at(t, t->kind == DK_DIR ? name : NULL, O_RDONLY, &direct);
	if (fd < 0) {
		set_err(r, fd, "%s: cannot reopen %s: %s", t->path, name, stk_strerror(fd));
		goto out;
	}
	cache_out(fd, size, direct, t, cf, r->cache, sizeof(r->cache));
	snprintf(label, sizeof(label), "%s: checkpoint read back", t->path);
	j.write = false;
	struct dk_job_out ro = {0};
	if (!(err = stk_hist_create(&ro.hist))) {
		err = dk_run(&j, &ro);
		stk_hist_destroy(ro.hist);
	}
	close(fd);
	r->read_s = ro.seconds;
	r->read_bytes = ro.bytes;
	if (err)
		job_error(r, t, name, &ro);
out:
	if (t->kind == DK_DIR)
		dk_remove(t->dirfd, name);
	return r->err;
}

/* ImageNet-like sizes: log-normal, mean `mean`, sigma 0.6 (median ≈ 0.84 ×
 * mean), clamped to [1 KiB, 8 × mean]. */
static uint64_t *small_sizes(uint32_t n, uint64_t mean, uint64_t seed, uint64_t *total,
			     uint64_t *max)
{
	uint64_t *s = malloc((size_t)n * sizeof(*s));
	if (!s)
		return NULL;
	const double sigma = 0.6, mu = log((double)mean) - sigma * sigma / 2;
	uint64_t x = mix64(seed ^ 0x5eed);
	*total = *max = 0;
	for (uint32_t i = 0; i < n; i++) {
		x = mix64(x);
		double u1 = ((double)(x >> 11) + 1) / 9007199254740993.0;
		x = mix64(x);
		double u2 = (double)(x >> 11) / 9007199254740992.0;
		double z = sqrt(-2 * log(u1)) * cos(2 * M_PI * u2);
		double v = exp(mu + sigma * z);
		if (v < 1024)
			v = 1024;
		if (v > 8.0 * (double)mean)
			v = 8.0 * (double)mean;
		s[i] = (uint64_t)v;
		*total += (s[i] + 4095) / 4096 * 4096;
		if (s[i] > *max)
			*max = s[i];
	}
	return s;
}

/* Makes the small files cold before a pass: their pages out one by one (no
 * root needed); as root, drop_caches makes names and inodes cold too, as in
 * a fresh epoch.  The first pass says how, in r->cache. */
static void small_cold(struct dk_target *t, const struct dk_conf *cf, int sd, uint32_t n,
		       bool direct, struct dk_result *r, bool say)
{
	if (!direct && !t->memfs)
		for (uint32_t i = 0; i < n; i++) {
			char name[32];
			dk_small_name(name, sizeof(name), i);
			int fd = openat(sd, name, O_RDONLY | O_CLOEXEC);
			if (fd >= 0) {
				posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
				close(fd);
			}
		}
	char why[160];
	bool dropped = !t->memfs && !cf->no_drop && !drop_caches(why, sizeof(why));
	if (!say)
		return;
	if (t->memfs)
		snprintf(r->cache, sizeof(r->cache), "none: %s is memory, not a disk", t->fs);
	else if (dropped)
		snprintf(r->cache, sizeof(r->cache), "dropped (drop_caches: data and metadata)");
	else
		snprintf(r->cache, sizeof(r->cache), "%s; metadata cached",
			 direct ? "bypassed (O_DIRECT)" : "evicted (fadvise DONTNEED)");
}

static int small_case(struct dk_target *t, const struct dk_case *c, const struct dk_conf *cf,
		      struct dk_result *r)
{
	if (t->kind != DK_DIR) {
		skip(r, "needs a folder to create files in");
		return 0;
	}
	uint32_t n = (uint32_t)cf->files;
	uint64_t total = 0, max = 0;
	uint64_t *sizes = small_sizes(n, cf->file_mean, cf->seed, &total, &max);
	uint32_t *order = malloc((size_t)n * sizeof(*order));
	char *buf = malloc(max);
	char dir[64];
	int sd = -1;
	snprintf(dir, sizeof(dir), DK_PREFIX "%d-small", (int)getpid());
	if (!sizes || !order || !buf) {
		set_err(r, -ENOMEM, "out of memory");
		goto out;
	}
	if (check_space(t, total, "the small files", r))
		goto out;
	int e = dk_mkdir(t->dirfd, dir);
	if (e || (sd = openat(t->dirfd, dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
		set_err(r, e ? e : -errno, "%s: cannot create %s: %s", t->path, dir,
			stk_strerror(e ? e : -errno));
		goto out;
	}
	uint64_t x = mix64(cf->seed ^ 0xf11e);
	for (uint64_t i = 0; i + 8 <= max; i += 8, x = mix64(x))
		memcpy(buf + i, &x, 8);
	double t0 = now_s(), shown = 0;
	uint64_t written = 0;
	for (uint32_t i = 0; i < n && !atomic_load(&dk_stop); i++) {
		char name[32];
		dk_small_name(name, sizeof(name), i);
		int fd = openat(sd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd < 0) {
			int ce = -errno;
			struct dk_job_out o = {.err = ce, .bytes = written};
			snprintf(o.errmsg, sizeof(o.errmsg), "create %s: %s", name, stk_strerror(ce));
			job_error(r, t, dir, &o); /* inodes run out too: "disk full" */
			goto out;
		}
		dk_note_small(t->dirfd, dir, i + 1);
		ssize_t w = write(fd, buf, sizes[i]);
		int we = errno;
		close(fd);
		if (w != (ssize_t)sizes[i]) {
			struct dk_job_out o = {.err = w < 0 ? -we : -ENOSPC, .bytes = written};
			snprintf(o.errmsg, sizeof(o.errmsg), "write: %s", stk_strerror(o.err));
			job_error(r, t, dir, &o);
			goto out;
		}
		written += sizes[i];
		if (now_s() - shown > 0.25) {
			shown = now_s();
			progress("%s: smallfiles: creating %u/%u files", t->path, i + 1, n);
		}
	}
	progress_done();
	if (atomic_load(&dk_stop))
		goto out;
	syncfs(sd);
	r->create_s = now_s() - t0;
	r->nfiles = n;
	r->files_bytes = total;
	bool direct = choose_direct(t, c->pat, cf);
	r->direct = direct;
	/* Epochs over the files, each cold (the clock stopped between them),
	 * until --runtime is measured: one pass of the quick set's files is
	 * well under a second on a fast device, too short to mean anything. */
	for (unsigned pass = 0; !atomic_load(&dk_stop); pass++) {
		small_cold(t, cf, sd, n, direct, r, pass == 0);
		/* the random order of an epoch, another each pass */
		for (uint32_t i = 0; i < n; i++)
			order[i] = i;
		x = mix64(cf->seed ^ 0x0de5 ^ ((uint64_t)pass << 32));
		for (uint32_t i = n - 1; i > 0; i--) {
			x = mix64(x);
			uint32_t k = (uint32_t)(x % (i + 1)), tmp = order[i];
			order[i] = order[k];
			order[k] = tmp;
		}
		char label[300];
		snprintf(label, sizeof(label), "%s: smallfiles read", t->path);
		struct dk_job j;
		fill_job(&j, c, cf, label);
		j.kind = DK_JOB_FILES;
		j.dirfd = sd;
		j.direct = direct;
		j.nfiles = n;
		j.order = order;
		j.sizes = sizes;
		j.max_size = max;
		j.align = buf_align(t);
		j.ramp = pass ? 0 : c->ramp; /* the first pass's ramp warms the engine */
		if (c->runtime > 0)
			j.runtime = c->runtime - r->seconds;
		struct dk_job_out o = {.hist = r->hist};
		int err = dk_run(&j, &o);
		r->bytes += o.bytes;
		r->ios += o.ios;
		r->seconds += o.seconds;
		r->engine = o.engine == DK_URING ? "io_uring" : "psync";
		r->passes = pass + 1;
		if (err) {
			job_error(r, t, dir, &o);
			break;
		}
		if (c->runtime <= 0 || r->seconds >= c->runtime || !o.ios)
			break;
	}
	if (r->passes > 1) {
		size_t k = strlen(r->cache);
		snprintf(r->cache + k, sizeof(r->cache) - k, ", before each of %u passes",
			 r->passes);
	}
out:
	progress_done();
	if (sd >= 0)
		close(sd);
	dk_remove(t->dirfd, dir);
	free(sizes);
	free(order);
	free(buf);
	return r->err;
}

int dk_run_case(struct dk_target *t, const struct dk_case *c, const struct dk_conf *cf,
		struct dk_result *r)
{
	r->c = *c;
	r->target = t->path;
	r->engine = dk_engine_ran(cf->engine) == DK_URING ? "io_uring" : "psync";
	switch (c->pat) {
	case DK_SEQREAD:
	case DK_SEQWRITE:
	case DK_RANDREAD:
		return block_case(t, c, cf, r);
	case DK_SMALLFILES:
		return small_case(t, c, cf, r);
	case DK_CHECKPOINT:
		return ckpt_case(t, c, cf, r);
	default:
		return -EINVAL;
	}
}
