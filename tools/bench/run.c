/* bench/run.c — one measured run of `stoker bench`, each side: the loader
 * (a ramp not measured, like fio's ramp_time, before the measured part,
 * which starts at an epoch's first batch: whole epochs, or the clock until
 * the minimum measured time, --runtime; every error of the run reported), and the naive
 * synchronous baseline over the same samples in the same order for as long;
 * and what they share: the page cache put in the state asked for before each,
 * and each sample read the way the loader reads it (a tar member's extent,
 * never its whole shard). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bench/bench.h"
#include "common/cli.h"

static double cpu_seconds(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
	       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static double rss_mb(void)
{
	FILE *f = fopen("/proc/self/statm", "re");
	unsigned long size = 0, res = 0;
	if (f) {
		if (fscanf(f, "%lu %lu", &size, &res) != 2)
			res = 0;
		fclose(f);
	}
	return (double)res * (double)sysconf(_SC_PAGESIZE) / 1048576.0;
}

static void sleep_ms(double ms)
{
	if (ms <= 0)
		return;
	struct timespec ts = {.tv_sec = (time_t)(ms / 1000),
			      .tv_nsec = (long)((ms - (double)(time_t)(ms / 1000) * 1000) * 1e6)};
	while (nanosleep(&ts, &ts) && errno == EINTR && !bench_interrupted)
		;
}

/* Whether mincore tells the truth about fd's pages: since Linux 5.0 it answers
 * only for files the caller owns or may write (else it says every page is
 * resident), as cachestat does (EPERM).  Root passes both. */
static bool residency_known(int fd)
{
	struct stat st;
	if (geteuid() == 0)
		return true;
	if (fstat(fd, &st) || st.st_uid == geteuid())
		return st.st_uid == geteuid();
	char self[64];
	snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
	return faccessat(AT_FDCWD, self, W_OK, AT_EACCESS) == 0;
}

/* Fraction of a spread of samples whose pages are in the page cache
 * (mincore); -1 when it cannot be known as this user (no sampled file is
 * the user's own or writable by them). */
double cached_fraction(struct stk_loader *l)
{
	int64_t n = stk_loader_num_samples(l);
	int64_t step = n > 64 ? n / 64 : 1;
	uint64_t pages = 0, resident = 0, unknown = 0;
	long pg = sysconf(_SC_PAGESIZE);
	unsigned char vec[256];
	for (int64_t i = 0; i < n && !bench_interrupted; i += step) { /* Ctrl-C: now */
		char path[PATH_MAX];
		uint64_t off, size;
		if (stk_loader_sample_extent(l, i, path, sizeof(path), &off, &size) || !size)
			continue;
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		if (!residency_known(fd)) {
			close(fd);
			unknown++;
			continue;
		}
		/* the sample's own pages: a tar member's, not its shard's first ones */
		uint64_t start = off / (uint64_t)pg * (uint64_t)pg;
		size += off - start;
		size_t len = size > (uint64_t)pg * 256 ? (size_t)pg * 256 : (size_t)size;
		void *m = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, (off_t)start);
		close(fd);
		if (m == MAP_FAILED)
			continue;
		size_t np = (len + (size_t)pg - 1) / (size_t)pg;
		if (mincore(m, len, vec) == 0)
			for (size_t k = 0; k < np; k++) {
				pages++;
				resident += vec[k] & 1;
			}
		munmap(m, len);
	}
	return pages ? (double)resident / (double)pages : unknown ? -1 : 0;
}

double resident_at_start(struct stk_loader *l, const struct bench_opts *o)
{
	double f = cached_fraction(l);
	char why[256];
	if (o->cache == CACHE_COLD) /* root: else the evict left metadata cached anyway */
		(void)drop_caches(why, sizeof(why));
	return f;
}

const char *cached_words(double cached, char *buf, size_t len)
{
	if (cached < 0)
		snprintf(buf, len, "how much was resident at the start unknown: as this user the "
			 "kernel tells it only for files one owns or may write");
	else
		snprintf(buf, len, "%.0f %% of sampled file pages resident at the start",
			 cached * 100);
	return buf;
}


/* Whether the measured part may end now: the limits the user set always
 * end it; otherwise at least --runtime measured and --epochs done. */
static bool measured_enough(const struct bench_opts *o, const struct run *r, double elapsed,
			    int64_t epochs_done, bool epoch_end, const char **why)
{
	if (bench_interrupted) {
		*why = "interrupted";
		return true;
	}
	if (o->seconds > 0 && elapsed >= o->seconds) {
		*why = "--seconds";
		return true;
	}
	if (o->max_samples > 0 && r->samples >= (uint64_t)o->max_samples) {
		*why = "--max-samples";
		return true;
	}
	if (o->max_batches > 0 && r->batches >= (uint64_t)o->max_batches) {
		*why = "--max-batches";
		return true;
	}
	bool time_ok = elapsed >= o->runtime;
	if (o->epochs > 0) { /* whole epochs: at least --epochs, more to reach the time */
		if (!epoch_end || epochs_done < o->epochs)
			return false;
		*why = epochs_done > o->epochs ? "epochs repeated to reach --runtime" : "--epochs";
		return time_ok || o->runtime <= 0;
	}
	if (o->runtime <= 0)
		return false; /* no minimum and no epochs: the limits above end it */
	*why = "--runtime";
	return time_ok;
}

static uint64_t total_errors(struct stk_loader *l)
{
	struct stk_stats st = {.size = sizeof(st)};
	stk_loader_stats(l, &st);
	return st.total_errors;
}

/* After a batch that came short or with stand-ins: the failure the loader
 * last named (stk_last_error: "path: reason"), once, into r->bad, while it
 * holds fewer than BAD_NAMED.  The text report names the last; --json names
 * these, and how many more it could not (errors - named). */
static void name_errors(struct stk_loader *l, struct run *r)
{
	uint64_t total = total_errors(l);
	if (total == r->bad_seen)
		return;
	r->bad_seen = total;
	if (!r->bad || json_array_size(r->bad) >= BAD_NAMED)
		return;
	const char *msg = stk_last_error(l);
	size_t i;
	json_t *v;
	json_array_foreach(r->bad, i, v) {
		if (!strcmp(json_string_value(v), msg))
			return; /* already named: reads in flight may have failed first */
	}
	if (msg[0])
		json_array_append_new(r->bad, json_string(msg));
}

/* The ramp: epoch0's batches for o->ramp seconds (its end at most), not
 * measured: the queues fill and the depth probe runs.  Then epoch0 again
 * from its start, so the measured part is whole epochs whatever the ramp. */
static int warm_up(struct stk_loader *l, const struct bench_opts *o, uint64_t epoch0,
		   struct run *r, uint32_t batch_size)
{
	double t = now_s();
	uint64_t e0 = total_errors(l);
	struct stk_batch *b;
	int rc = 0;
	uint64_t nb = 0;
	while (!bench_interrupted && now_s() - t < o->ramp && (rc = stk_loader_next(l, &b)) == 1) {
		r->ramp_samples += b->count;
		if (b->count < batch_size || b->replaced)
			name_errors(l, r);
		sleep_ms(o->compute_ms);
		stk_batch_release(l, b);
		if (++nb % 16 == 0)
			progress("run %d/%lld  ramp  %.1f s", o->run_index + 1, (long long)o->repeat,
				 now_s() - t);
	}
	r->ramp_errors = total_errors(l) - e0;
	r->ramp_s = now_s() - t;
	if (rc < 0)
		return rc;
	rc = stk_loader_restart(l, epoch0, 0, STK_START_RESET_STATS);
	return rc < 0 ? rc : 0;
}

/* Before a measured epoch of a cold run with buffered reads: the dataset's
 * pages evicted, the clock (and the device's counters) stopped meanwhile. */
static void evict_paused(struct stk_loader *l, struct run *r, double *t0, double *cpu0)
{
	double tp = now_s(), cp = cpu_seconds();
	dev_stop(&r->dev);
	evict_dataset(l);
	dev_start(&r->dev);
	*t0 += now_s() - tp;
	*cpu0 += cpu_seconds() - cp;
}

int run_loader(struct stk_loader *l, const struct bench_opts *o, uint64_t epoch0, struct run *r,
	       int64_t **order, uint64_t *norder)
{
	struct stk_loader_opts eff = {.size = sizeof(eff)};
	stk_loader_options(l, &eff, NULL);
	uint64_t cap = (uint64_t)stk_loader_rank_samples(l) * (uint64_t)(o->epochs > 0 ? o->epochs : 1);
	if (cap < 65536)
		cap = 65536;
	*order = malloc(cap * sizeof(**order));
	*norder = 0;
	if (!*order) {
		fprintf(stderr, "stoker bench: out of memory\n");
		return -ENOMEM;
	}
	r->epochs = json_array();
	r->bad = json_array();
	struct stk_stats s0 = {.size = sizeof(s0)};
	stk_loader_stats(l, &s0);
	/* every error of the run is in its report, the ramp's too */
	uint64_t err0 = s0.total_errors;
	r->bad_seen = err0;
	bool cold = o->cache == CACHE_COLD, evict = cold && !s0.direct;
	double resident = 0;
	int rc = 0;
	if (cold)
		dev_open(&r->dev, o->path);
	/* remote data with the local cache on: no ramp (its reads would fill the
	 * cache the measured part then reads, timing epoch 2 as the store's) */
	uint64_t hits0, reads0;
	bool rcache = bench_remote_cache(l, &hits0, &reads0);
	/* a run's reads: since the previous run of this loader ended (or its
	 * creation), so the prefetch before the clock starts counts as its own */
	static const struct stk_loader *last;
	static uint64_t last_hits, last_reads;
	bool same = l == last && reads0 >= last_reads; /* not another loader at its address */
	hits0 = same ? last_hits : 0;
	reads0 = same ? last_reads : 0;
	if (o->ramp > 0 && !rcache)
		rc = warm_up(l, o, epoch0, r, eff.batch_size);
	if (evict && !rc) { /* the ramp's reads, or a drop that could not be done */
		evict_dataset(l);
		resident = cached_fraction(l);
	}
	double t0 = now_s(), cpu0 = cpu_seconds();
	if (cold)
		dev_start(&r->dev);
	bool done = rc < 0;
	const char *why = "";
	uint64_t e = epoch0;
	int64_t epochs_done = 0;
	for (; !done; e++) {
		if (e > epoch0) {
			if (evict)
				evict_paused(l, r, &t0, &cpu0);
			if ((rc = stk_loader_start(l, e, 0)) < 0)
				break;
		}
		double te = now_s();
		uint64_t es = 0, ee = total_errors(l);
		bool cut = false; /* the measured part ended inside this epoch */
		struct stk_batch *b;
		while ((rc = stk_loader_next(l, &b)) == 1) {
			for (uint32_t i = 0; i < b->count && *norder < cap; i++)
				(*order)[(*norder)++] = b->indices[i];
			r->samples += b->count;
			es += b->count;
			for (uint32_t i = 0; i < b->count; i++)
				r->bytes += b->sizes[i];
			r->batches++;
			if (b->count < eff.batch_size || b->replaced)
				name_errors(l, r);
			sleep_ms(o->compute_ms); /* the emulated accelerator holds the batch */
			stk_batch_release(l, b);
			if (r->batches % 16 == 0)
				progress("run %d/%lld  epoch %llu  %.1f s  %.0f samples/s", o->run_index + 1,
					 (long long)o->repeat, (unsigned long long)e + 1, now_s() - t0,
					 r->samples / (now_s() - t0 + 1e-9));
			if (measured_enough(o, r, now_s() - t0, epochs_done, false, &why)) {
				done = cut = true;
				break;
			}
		}
		if (rc < 0) {
			name_errors(l, r); /* the one that ended the run (--on-error fail) */
			break;
		}
		rc = 0;
		if (!done) {
			epochs_done++;
			done = measured_enough(o, r, now_s() - t0, epochs_done, true, &why);
		}
		double rss = rss_mb();
		if (!r->rss_first_mb)
			r->rss_first_mb = rss;
		r->rss_last_mb = rss;
		json_array_append_new(r->epochs,
				      json_pack("{s:I,s:I,s:I,s:b,s:f,s:f}", "epoch", (json_int_t)e,
						"samples", (json_int_t)es, "errors",
						(json_int_t)(total_errors(l) - ee), "whole", !cut, "seconds", now_s() - te, "rss_mb", rss));
	}
	r->wall = now_s() - t0;
	r->cpu = cpu_seconds() - cpu0;
	if (rcache && bench_remote_cache(l, &r->rcache_hits, &r->rcache_reads)) {
		last = l;
		last_hits = r->rcache_hits;
		last_reads = r->rcache_reads;
		r->rcache_hits -= hits0;
		r->rcache_reads -= reads0;
	}
	if (cold)
		dev_stop(&r->dev);
	r->next_epoch = e;
	r->compute = (double)r->batches * o->compute_ms / 1000.0;
	r->ended_by = why;
	r->epochs_measured = stk_loader_len(l) ? (double)r->batches / (double)stk_loader_len(l) : 0;
	progress_done();
	r->st.size = sizeof(r->st);
	stk_loader_stats(l, &r->st);
	r->errors = r->st.total_errors - err0 + r->st.index_errors;
	cold_check(r, o, r->st.direct, resident);
	if (rc < 0)
		fprintf(stderr, "stoker bench: %s (%s)\n", stk_last_error(l), stk_err_name(rc));
	return rc;
}

/* Shards kept open while their members are read one by one: a member costs
 * one pread, as in the loader, not an open of its shard each time. */
#define SHARD_FDS 16
struct shard_fds {
	char path[SHARD_FDS][PATH_MAX];
	int fd[SHARD_FDS];
	unsigned next;
};

static struct shard_fds *shard_fds_new(void)
{
	struct shard_fds *c = calloc(1, sizeof(*c));
	for (unsigned i = 0; c && i < SHARD_FDS; i++)
		c->fd[i] = -1;
	return c;
}

static void shard_fds_free(struct shard_fds *c)
{
	for (unsigned i = 0; c && i < SHARD_FDS; i++)
		if (c->fd[i] >= 0)
			close(c->fd[i]);
	free(c);
}

static int shard_fd(struct shard_fds *c, const char *path)
{
	for (unsigned i = 0; i < SHARD_FDS; i++)
		if (c->fd[i] >= 0 && !strcmp(c->path[i], path))
			return c->fd[i];
	unsigned k = c->next++ % SHARD_FDS;
	if (c->fd[k] >= 0)
		close(c->fd[k]);
	snprintf(c->path[k], sizeof(c->path[k]), "%s", path);
	c->fd[k] = open(path, O_RDONLY | O_CLOEXEC);
	return c->fd[k];
}

static bool grow(char **buf, size_t *cap, size_t want)
{
	if (want <= *cap)
		return true;
	char *nb = realloc(*buf, want);
	if (!nb)
		return false;
	*buf = nb;
	*cap = want;
	return true;
}

const char *plain_loop_reads(struct stk_loader *l)
{
	char path[PATH_MAX];
	uint64_t off = 0, size;
	if (!stk_loader_num_samples(l) || stk_loader_sample_extent(l, 0, path, sizeof(path), &off,
								  &size))
		return "open/read/close";
	return off > 0 ? "a pread of each member from its tar shard" : "open/read/close per file";
}

/* Reads sample i's bytes the way the loader does: a sample that is a whole
 * file with open, read to its end and close (what DataLoader does); a tar
 * member with a pread of its (offset, size) from its shard, never the whole
 * shard.  The bytes read, or -1 when the file cannot be opened or read. */
static ssize_t read_sample(struct stk_loader *l, int64_t i, struct shard_fds *c, char **buf,
			   size_t *cap)
{
	char path[PATH_MAX];
	uint64_t off, size;
	if (stk_loader_sample_extent(l, i, path, sizeof(path), &off, &size))
		return -1;
	if (off > 0) { /* a member of a tar shard */
		int fd = shard_fd(c, path);
		if (fd < 0 || !grow(buf, cap, (size_t)size + 1))
			return -1;
		size_t have = 0;
		while (have < size) {
			ssize_t got = pread(fd, *buf + have, (size_t)size - have, (off_t)(off + have));
			if (got < 0 && errno == EINTR)
				continue;
			if (got <= 0)
				return got < 0 ? -1 : (ssize_t)have;
			have += (size_t)got;
		}
		return (ssize_t)have;
	}
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	struct stat st;
	if (fstat(fd, &st) == 0)
		grow(buf, cap, (size_t)st.st_size + 1);
	ssize_t got;
	size_t have = 0;
	while ((got = read(fd, *buf + have, *cap - have)) > 0) {
		have += (size_t)got;
		if (have == *cap && !grow(buf, cap, *cap * 2))
			break;
	}
	close(fd);
	return (ssize_t)have;
}

/* The naive baseline: one thread, in the loader run's order (again from its
 * start when that is read before --runtime is up, except cold), holding each
 * batch for compute_ms as the loader run did.  A folder's sample is an
 * open/read/close of its file; a shard's, a pread of its member. */
int run_baseline(struct stk_loader *l, const struct bench_opts *o, const int64_t *order, uint64_t n,
		 struct run *r, const struct stk_image_opts *img)
{
	size_t cap = 1 << 20;
	char *buf = malloc(cap);
	void *pixels = img ? malloc(stk_image_bytes(img)) : NULL;
	struct shard_fds *fds = shard_fds_new();
	struct stk_loader_opts eff = {.size = sizeof(eff)};
	stk_loader_options(l, &eff, NULL);
	if (!buf || (img && !pixels) || !fds || !n) {
		free(buf);
		free(pixels);
		shard_fds_free(fds);
		return n ? -ENOMEM : 0;
	}
	double cpu0 = cpu_seconds(), t0 = now_s();
	r->ended_by = "the loader run's samples";
	for (uint64_t k = 0; !bench_interrupted; k++) {
		uint64_t i = k % n;
		if (k && i == 0) { /* the whole order read: again, unless the time is up */
			double el = now_s() - t0;
			if (el >= o->runtime || (o->seconds > 0 && el >= o->seconds))
				break;
			if (o->cache == CACHE_COLD) { /* cold again, the clock stopped */
				double tp = now_s(), cp = cpu_seconds();
				evict_dataset(l);
				t0 += now_s() - tp;
				cpu0 += cpu_seconds() - cp;
			}
			r->ended_by = "--runtime (the samples read again)";
		}
		if (k > i && now_s() - t0 >= o->runtime)
			break;
		ssize_t have = read_sample(l, order[i], fds, &buf, &cap);
		if (have < 0) {
			r->errors++;
			continue;
		}
		r->bytes += (uint64_t)have;
		if (img) { /* decode as the loader does, on this one thread */
			char why[256];
			double td = now_s();
			if (stk_image_decode(img, buf, (size_t)have, eff.seed, 0, order[i], pixels, why,
					     sizeof(why)))
				r->errors++;
			r->decode_s += now_s() - td;
		}
		r->samples++;
		if ((k + 1) % eff.batch_size == 0) {
			r->batches++;
			sleep_ms(o->compute_ms);
		}
		if (k % 512 == 0)
			progress("baseline, run %d/%lld  %.1f s  %.0f samples/s", o->run_index + 1,
				 (long long)o->repeat, now_s() - t0, (double)k / (now_s() - t0 + 1e-9));
	}
	r->wall = now_s() - t0;
	r->cpu = cpu_seconds() - cpu0;
	r->compute = (double)r->batches * o->compute_ms / 1000.0;
	progress_done();
	free(buf);
	free(pixels);
	shard_fds_free(fds);
	return 0;
}

/* Puts the page cache in the state asked for before a timed run, so the
 * loader and the baseline start from the same one.  Warm: one untimed pass
 * over the epoch's samples, each read as the loader reads it (a shard's
 * members, not the shard per member), when they fit in half of the
 * available memory. */
void set_cache(struct stk_loader *l, const struct bench_opts *o, const int64_t *order,
		      uint64_t n, const char **state)
{
	char why[256];
	if (o->cache == CACHE_AS_IS)
		return;
	if (o->cache == CACHE_COLD) {
		/* dropped (root): file metadata too; evicted: the dataset's pages
		 * without root.  Not both: the drop let every page go, and opening
		 * each file to evict it again read back every folder and inode the
		 * drop had dropped, so the epoch opened its files with warm metadata
		 * (a 10,000-file epoch: none of its opens waited on a read) */
		bool dropped = drop_caches(why, sizeof(why)) == 0;
		if (!dropped && o->run_index == 0)
			fprintf(stderr, "stoker bench: --cold: %s; evicting the dataset's pages "
					"instead (file metadata may stay cached)\n", why);
		if (!dropped)
			evict_dataset(l);
		*state = dropped ? "cold (dropped before each run, file metadata too)"
				 : "cold (the dataset's pages evicted before each run; could not drop)";
		return;
	}
	uint64_t bytes = 0;
	int64_t total = stk_loader_num_samples(l);
	for (int64_t i = 0; i < total; i++) {
		uint64_t size;
		if (stk_loader_sample(l, i, NULL, 0, &size, NULL) == 0)
			bytes += size;
	}
	long avail = sysconf(_SC_AVPHYS_PAGES), pg = sysconf(_SC_PAGESIZE);
	if (avail > 0 && bytes > (uint64_t)avail * (uint64_t)pg / 2) {
		*state = "as found (the dataset does not fit in half of free memory)";
		return;
	}
	size_t cap = 1 << 20;
	char *buf = malloc(cap);
	struct shard_fds *fds = shard_fds_new();
	if (!buf || !fds) {
		free(buf);
		shard_fds_free(fds);
		return;
	}
	uint64_t want = order ? n : (uint64_t)total;
	for (uint64_t i = 0; i < want && !bench_interrupted; i++) {
		read_sample(l, order ? order[i] : (int64_t)i, fds, &buf, &cap);
		if (i % 1024 == 0)
			progress("warming the page cache: %llu/%llu samples", (unsigned long long)i,
				 (unsigned long long)want);
	}
	progress_done();
	free(buf);
	shard_fds_free(fds);
	*state = "warm (files read once before each run)";
}

json_t *run_json(const struct run *r)
{
	double sps = r->wall > 0 ? (double)r->samples / r->wall : 0;
	json_t *j = json_pack("{s:I,s:I,s:I,s:f,s:f,s:f,s:f,s:f,s:I}", "samples",
			      (json_int_t)r->samples, "bytes", (json_int_t)r->bytes, "batches",
			      (json_int_t)r->batches, "seconds", r->wall, "samples_per_s", sps,
			      "mb_per_s", r->wall > 0 ? (double)r->bytes / r->wall / 1e6 : 0,
			      "cpu_s_per_1000", r->samples ? r->cpu / (double)r->samples * 1000 : 0,
			      "au_percent",
			      r->wall > 0 && r->compute > 0 ? 100 * r->compute / r->wall : 0, "errors",
			      (json_int_t)r->errors);
	if (r->invalid[0]) { /* no figure rather than a false one */
		json_object_set_new(j, "samples_per_s", json_null());
		json_object_set_new(j, "mb_per_s", json_null());
		json_object_set_new(j, "invalid", json_string(r->invalid));
	}
	return j;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

/* Classes: the folder's class folders, or for shards and file lists (which
 * name no classes) the distinct labels of the samples. */
int64_t count_classes(struct stk_loader *l)
{
	int64_t k = stk_loader_num_classes(l), n = stk_loader_num_samples(l);
	int64_t *v = k > 0 || n <= 0 ? NULL : malloc((size_t)n * sizeof(*v));
	if (!v)
		return k;
	int64_t m = 0;
	bool small = true; /* labels below 2^24: a bitmap, no sort (1M samples: ~10 ms) */
	for (int64_t i = 0; i < n; i++)
		if (stk_loader_sample(l, i, NULL, 0, NULL, &v[m]) == 0 && v[m] >= 0)
			small &= v[m++] < (1 << 24);
	uint8_t *bits = small ? calloc(1 << 21, 1) : NULL;
	if (bits) {
		for (int64_t i = 0; i < m; i++) {
			k += !(bits[v[i] >> 3] & (1u << (v[i] & 7)));
			bits[v[i] >> 3] |= (uint8_t)(1u << (v[i] & 7));
		}
		free(bits);
		free(v);
		return k;
	}
	qsort(v, (size_t)m, sizeof(*v), cmp_i64);
	for (int64_t i = 0; i < m; i++)
		k += i == 0 || v[i] != v[i - 1];
	free(v);
	return k;
}


/* The loader's options from the parsed ones: PATH, and image mode's. */
void loader_opts(const struct bench_opts *o, struct stk_loader_opts *lo,
			struct stk_image_opts *img)
{
	*lo = o->lo;
	lo->size = sizeof(*lo);
	lo->path = o->path;
	*img = o->img;
	img->size = sizeof(*img);
	lo->image = o->image ? img : NULL;
	lo->video = o->video ? &o->vid : NULL;
}

void run_release(struct run *r)
{
	json_decref(r->epochs);
	json_decref(r->bad);
	r->epochs = r->bad = NULL;
}

json_t *stats_json(const struct run *r)
{
	json_t *st = run_json(r);
	/* the failed samples the run named, and those it could not (several
	 * between two looks, or past BAD_NAMED): the text report's "last" */
	size_t named = json_array_size(r->bad);
	json_object_set_new(st, "bad_samples", r->bad ? json_incref(r->bad) : json_array());
	json_object_set_new(st, "bad_samples_unnamed",
			    json_integer((json_int_t)(r->errors > named ? r->errors - named : 0)));
	json_object_set_new(st, "batch_wait_ns",
			    json_pack("{s:I,s:I,s:I}", "p50", (json_int_t)r->st.wait_p50_ns, "p99",
				      (json_int_t)r->st.wait_p99_ns, "max",
				      (json_int_t)r->st.wait_max_ns));
	json_object_set_new(st, "read_latency_ns",
			    json_pack("{s:I,s:I,s:I}", "p50", (json_int_t)r->st.read_p50_ns, "p99",
				      (json_int_t)r->st.read_p99_ns, "max",
				      (json_int_t)r->st.read_max_ns));
	json_object_set_new(st, "inflight_mean", json_real(r->st.inflight_mean));
	json_object_set_new(st, "inflight_max", json_integer(r->st.inflight_max));
	json_object_set_new(st, "stall_ratio", json_real(r->st.stall_ratio));
	json_object_set_new(st, "pool_bytes", json_integer((json_int_t)r->st.pool_bytes));
	json_object_set_new(st, "pinned", json_boolean(r->st.pinned));
	json_object_set_new(st, "epochs_measured", json_real(r->epochs_measured));
	json_object_set_new(st, "ended_by", json_string(r->ended_by ? r->ended_by : ""));
	json_object_set_new(st, "ramp", json_pack("{s:f,s:I,s:I}", "seconds", r->ramp_s, "samples",
						  (json_int_t)r->ramp_samples, "errors",
						  (json_int_t)r->ramp_errors));
	if (r->rcache_reads) /* remote data: the run's reads the local cache served */
		json_object_set_new(st, "remote_cache", json_pack("{s:I,s:I}", "hits",
								  (json_int_t)r->rcache_hits, "reads",
								  (json_int_t)r->rcache_reads));
	if (r->dev.ok) /* cold: what the device read while measured */
		json_object_set_new(st, "device", json_pack("{s:s,s:I,s:f}", "name", r->dev.disk,
							    "read_bytes", (json_int_t)r->dev.bytes,
							    "read_mb_per_s", r->wall > 0 ?
							    r->dev.bytes / r->wall / 1e6 : 0));
	if (r->st.decode_threads) {
		json_object_set_new(st, "decode_images_per_s_per_core",
				    json_real(r->st.decode_images_per_s_per_core));
		json_object_set_new(st, "decode_fast_share", json_real(r->st.decode_fast_share));
		json_object_set_new(st, "decode_entropy_share",
				    json_real(r->st.decode_entropy_share));
		json_object_set_new(st, "formats", formats_json(&r->st));
	}
	return st;
}

/* Every option in effect, as the table's text (JSON: the run is reproducible
 * from it). */
json_t *options_json(const struct stk_loader_opts *lo, const struct stk_image_opts *img)
{
	json_t *j = json_object();
	const struct stk_option *r;
	for (int i = 0; (r = stk_option_at(i)); i++) {
		if (r->group == STK_OPT_IMAGE && !img)
			continue;
		char v[256];
		if (stk_option_get(r, r->group == STK_OPT_IMAGE ? (const void *)img : (const void *)lo,
				   v, sizeof(v)) >= 0)
			json_object_set_new(j, r->name, json_string(v));
	}
	return j;
}

