/*
 * bench.c — `stoker bench [PATH]`: the main job.  Runs the loader over PATH the
 * way a training loop would (optionally holding each batch --compute-ms, an
 * emulated accelerator as in MLPerf Storage and DLIO), then a naive baseline in
 * the same run: one thread, open/read/close per file in the same order, which
 * is what DataLoader with num_workers=0 does.  Prints rates, batch wait
 * percentiles, reads in flight, CPU cost, accelerator utilization and the
 * ratio to the baseline.  With no PATH it generates a default dataset once in
 * the cache folder.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stddef.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "cli.h"

#define DEFAULT_IMAGES "10000"
#define DEFAULT_CLASSES "100"

static volatile sig_atomic_t interrupted;
static void on_sigint(int sig)
{
	(void)sig;
	interrupted = 1;
}

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
	while (nanosleep(&ts, &ts) && errno == EINTR && !interrupted)
		;
}

/* The default dataset: generated once into the cache folder, then reused. */
static int default_dataset(char *out, size_t len)
{
	char cache[PATH_MAX];
	int rc = stk_cache_dir(cache, sizeof(cache));
	if (rc < 0) {
		fprintf(stderr, "stoker bench: cannot create the cache folder: %s\n", stk_strerror(rc));
		return -1;
	}
	if (snprintf(out, len, "%s/default-%s", cache, DEFAULT_IMAGES) >= (int)len) {
		fprintf(stderr, "stoker bench: cache folder path too long: %s\n", cache);
		return -1;
	}
	struct stat st;
	if (stat(out, &st) == 0 && S_ISDIR(st.st_mode))
		return 0;
	char tmp[PATH_MAX + 16];
	if (snprintf(tmp, sizeof(tmp), "%s.partial", out) >= (int)sizeof(tmp))
		return -1;
	fprintf(stderr, "stoker bench: no PATH given; generating the default dataset (%s images, "
			"%s classes) once in %s\n", DEFAULT_IMAGES, DEFAULT_CLASSES, out);
	char *argv[] = {"gen", tmp, "--images", DEFAULT_IMAGES, "--classes", DEFAULT_CLASSES,
			"--force", NULL};
	if (cmd_gen(7, argv) != EXIT_OK)
		return -1;
	if (rename(tmp, out)) {
		fprintf(stderr, "stoker bench: %s: cannot rename to %s: %s\n", tmp, out, strerror(errno));
		return -1;
	}
	return 0;
}

/* Fraction of a spread of samples whose pages are in the page cache (mincore). */
static double cached_fraction(struct stk_loader *l)
{
	int64_t n = stk_loader_num_samples(l);
	int64_t step = n > 64 ? n / 64 : 1;
	uint64_t pages = 0, resident = 0;
	long pg = sysconf(_SC_PAGESIZE);
	unsigned char vec[256];
	for (int64_t i = 0; i < n; i += step) {
		char path[PATH_MAX];
		uint64_t size;
		if (stk_loader_sample(l, i, path, sizeof(path), &size, NULL) || !size)
			continue;
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		size_t len = size > (uint64_t)pg * 256 ? (size_t)pg * 256 : (size_t)size;
		void *m = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
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
	return pages ? (double)resident / (double)pages : 0;
}

static bool over_limit(const struct bench_opts *o, double t0, uint64_t samples)
{
	return interrupted || (o->seconds > 0 && now_s() - t0 >= o->seconds) ||
	       (o->max_samples > 0 && samples >= (uint64_t)o->max_samples);
}

/* The loader run.  Records the delivered order into *order for the baseline. */
static int run_loader(struct stk_loader *l, const struct bench_opts *o, struct run *r,
		      int64_t **order, uint64_t *norder)
{
	uint64_t cap = (uint64_t)stk_loader_rank_samples(l) * (uint64_t)o->epochs;
	struct stk_loader_opts eff = {.size = sizeof(eff)};
	stk_loader_options(l, &eff, NULL);
	if (o->max_samples > 0 && cap > (uint64_t)o->max_samples + eff.batch_size)
		cap = (uint64_t)o->max_samples + eff.batch_size;
	*order = malloc((cap ? cap : 1) * sizeof(**order));
	if (!*order) {
		fprintf(stderr, "stoker bench: out of memory\n");
		return -ENOMEM;
	}
	r->epochs = json_array();
	double cpu0 = cpu_seconds(), t0 = now_s();
	int rc = 0;
	int64_t total_batches = stk_loader_len(l) * o->epochs;
	for (int64_t e = 0; e < o->epochs && !rc && !over_limit(o, t0, r->samples); e++) {
		if (e > 0 && (rc = stk_loader_start(l, (uint64_t)e, 0)) < 0)
			break;
		double te = now_s();
		uint64_t es = 0;
		struct stk_batch *b;
		while (!over_limit(o, t0, r->samples) && (rc = stk_loader_next(l, &b)) == 1) {
			for (uint32_t i = 0; i < b->count && *norder < cap; i++)
				(*order)[(*norder)++] = b->indices[i];
			r->samples += b->count;
			es += b->count;
			for (uint32_t i = 0; i < b->count; i++)
				r->bytes += b->sizes[i];
			r->batches++;
			sleep_ms(o->compute_ms); /* the emulated accelerator holds the batch */
			stk_batch_release(l, b);
			if (r->batches % 16 == 0)
				progress("epoch %lld/%lld  batch %llu/%lld  %.0f samples/s",
					 (long long)e + 1, (long long)o->epochs,
					 (unsigned long long)r->batches, (long long)total_batches,
					 (double)r->samples / (now_s() - t0));
		}
		if (rc == 0 || rc == 1) {
			rc = 0;
			double rss = rss_mb();
			if (e == 0)
				r->rss_first_mb = rss;
			r->rss_last_mb = rss;
			json_array_append_new(r->epochs,
					      json_pack("{s:I,s:I,s:f,s:f}", "epoch", (json_int_t)e,
							"samples", (json_int_t)es, "seconds", now_s() - te,
							"rss_mb", rss));
		}
	}
	r->wall = now_s() - t0;
	r->cpu = cpu_seconds() - cpu0;
	r->compute = (double)r->batches * o->compute_ms / 1000.0;
	progress_done();
	r->st.size = sizeof(r->st);
	stk_loader_stats(l, &r->st);
	r->errors = r->st.errors;
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

/* The naive baseline: one thread, in the loader run's order, holding each
 * batch for compute_ms as the loader run did.  A folder's sample is an
 * open/read/close of its file; a shard's, a pread of its member. */
static int run_baseline(struct stk_loader *l, const struct bench_opts *o, const int64_t *order,
			uint64_t n, struct run *r, const struct stk_image_opts *img)
{
	size_t cap = 1 << 20;
	char *buf = malloc(cap);
	void *pixels = img ? malloc(stk_image_bytes(img)) : NULL;
	struct shard_fds *fds = shard_fds_new();
	struct stk_loader_opts eff = {.size = sizeof(eff)};
	stk_loader_options(l, &eff, NULL);
	if (!buf || (img && !pixels) || !fds) {
		free(buf);
		free(pixels);
		shard_fds_free(fds);
		return -ENOMEM;
	}
	double cpu0 = cpu_seconds(), t0 = now_s();
	for (uint64_t i = 0; i < n && !interrupted; i++) {
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
		if ((i + 1) % eff.batch_size == 0 || i + 1 == n) {
			r->batches++;
			sleep_ms(o->compute_ms);
		}
		if (i % 512 == 0)
			progress("baseline %llu/%llu  %.0f samples/s", (unsigned long long)i,
				 (unsigned long long)n, (double)i / (now_s() - t0 + 1e-9));
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
static void set_cache(struct stk_loader *l, const struct bench_opts *o, const int64_t *order,
		      uint64_t n, const char **state)
{
	char why[256];
	if (o->cache == CACHE_AS_IS)
		return;
	if (o->cache == CACHE_COLD) {
		if (drop_caches(why, sizeof(why)) == 0) {
			*state = "cold (dropped before each run)";
		} else {
			fprintf(stderr, "stoker bench: --cold: %s; measuring with the cache as it is\n",
				why);
			*state = "as found (could not drop)";
		}
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
	for (uint64_t i = 0; i < want && !interrupted; i++) {
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

static json_t *run_json(const struct run *r)
{
	double sps = r->wall > 0 ? (double)r->samples / r->wall : 0;
	return json_pack("{s:I,s:I,s:I,s:f,s:f,s:f,s:f,s:f,s:I}", "samples", (json_int_t)r->samples,
			 "bytes", (json_int_t)r->bytes, "batches", (json_int_t)r->batches, "seconds",
			 r->wall, "samples_per_s", sps, "mb_per_s",
			 r->wall > 0 ? (double)r->bytes / r->wall / 1e6 : 0, "cpu_s_per_1000",
			 r->samples ? r->cpu / (double)r->samples * 1000 : 0, "au_percent",
			 r->wall > 0 && r->compute > 0 ? 100 * r->compute / r->wall : 0, "errors",
			 (json_int_t)r->errors);
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

/* Classes: the folder's class folders, or for shards and file lists (which
 * name no classes) the distinct labels of the samples. */
static int64_t count_classes(struct stk_loader *l)
{
	int64_t k = stk_loader_num_classes(l), n = stk_loader_num_samples(l);
	int64_t *v = k > 0 || n <= 0 ? NULL : malloc((size_t)n * sizeof(*v));
	if (!v)
		return k;
	int64_t m = 0;
	for (int64_t i = 0; i < n; i++)
		if (stk_loader_sample(l, i, NULL, 0, NULL, &v[m]) == 0 && v[m] >= 0)
			m++;
	qsort(v, (size_t)m, sizeof(*v), cmp_i64);
	for (int64_t i = 0; i < m; i++)
		k += i == 0 || v[i] != v[i - 1];
	free(v);
	return k;
}

static void print_human(struct stk_loader *l, const struct bench_opts *o, const struct run *s,
			const struct run *b, const char *cache, double cached, double create_s)
{
	char t1[32], t2[32], t3[32];
	double sps = s->wall > 0 ? (double)s->samples / s->wall : 0;
	double bps = b && b->wall > 0 ? (double)b->samples / b->wall : 0;
	struct stk_loader_opts eff = {.size = sizeof(eff)};
	stk_loader_options(l, &eff, NULL);
	printf("stoker bench: %s\n", o->path);
	printf("  %lld samples, %lld classes; engine %s, queue depth %u%s, batch %u, prefetch %u%s\n",
	       (long long)stk_loader_num_samples(l), (long long)count_classes(l),
	       stk_loader_engine(l), s->st.queue_depth, eff.queue_depth ? "" : " (auto)",
	       eff.batch_size, eff.prefetch, s->st.direct ? ", O_DIRECT" : "");
	printf("  loader ready in %.3f s (index, pool, threads); page cache: %s (%.0f %% of sampled\n"
	       "  file pages resident at the start)\n", create_s, cache, cached * 100);
	char tuning[1024];
	stk_loader_tuning(l, tuning, sizeof(tuning));
	for (char *line = tuning, *nl; line; line = nl ? nl + 1 : NULL) {
		if ((nl = strchr(line, '\n')))
			*nl = 0;
		printf("  %s %s\n", line == tuning ? "chosen:" : "       ", line);
	}
	printf("\n");
	printf("  %-26s %14s %14s\n", "", "stoker", b ? "baseline" : "");
	printf("  %-26s %14.0f", "samples/s", sps);
	if (b)
		printf(" %14.0f   %.2fx", bps, bps > 0 ? sps / bps : 0);
	if (b && s->st.decode_threads) /* like with like: the baseline decodes on one thread */
		printf(" (%u decode thread%s vs 1)", s->st.decode_threads,
		       s->st.decode_threads == 1 ? "" : "s");
	printf("\n  %-26s %14.1f", "MB/s", s->wall > 0 ? (double)s->bytes / s->wall / 1e6 : 0);
	if (b)
		printf(" %14.1f", b->wall > 0 ? (double)b->bytes / b->wall / 1e6 : 0);
	printf("\n  %-26s %14.3f", "CPU s per 1000 samples",
	       s->samples ? s->cpu / (double)s->samples * 1000 : 0);
	if (b)
		printf(" %14.3f", b->samples ? b->cpu / (double)b->samples * 1000 : 0);
	if (o->compute_ms > 0) {
		printf("\n  %-26s %13.1f%%", "accelerator utilization",
		       s->wall > 0 ? 100 * s->compute / s->wall : 0);
		if (b)
			printf(" %13.1f%%", b->wall > 0 ? 100 * b->compute / b->wall : 0);
	}
	printf("\n  %-26s %14.2f", "seconds", s->wall);
	if (b)
		printf(" %14.2f", b->wall);
	printf("\n\n  batch wait p50/p99/max     %s / %s / %s   (stall %.1f %% of wall time)\n",
	       fmt_ns(t1, sizeof(t1), (double)s->st.wait_p50_ns),
	       fmt_ns(t2, sizeof(t2), (double)s->st.wait_p99_ns),
	       fmt_ns(t3, sizeof(t3), (double)s->st.wait_max_ns), s->st.stall_ratio * 100);
	printf("  read latency p50/p99/max   %s / %s / %s\n",
	       fmt_ns(t1, sizeof(t1), (double)s->st.read_p50_ns),
	       fmt_ns(t2, sizeof(t2), (double)s->st.read_p99_ns),
	       fmt_ns(t3, sizeof(t3), (double)s->st.read_max_ns));
	printf("  reads in flight            mean %.1f, max %u\n", s->st.inflight_mean,
	       s->st.inflight_max);
	if (s->st.decode_threads) {
		printf("  decode                     %u threads, %.0f images/s per core, p50/p99 %s / %s",
		       s->st.decode_threads,
		       s->st.decode_busy_s > 0 ? (double)s->samples / s->st.decode_busy_s : 0,
		       fmt_ns(t1, sizeof(t1), (double)s->st.decode_p50_ns),
		       fmt_ns(t2, sizeof(t2), (double)s->st.decode_p99_ns));
		if (b && b->decode_s > 0)
			printf(" (baseline %.0f/s)", (double)b->samples / b->decode_s);
		printf("\n  restart intervals          %.1f %% of samples decoded from their crop's "
		       "intervals only;\n                             %.1f %% of the entropy-coded data "
		       "decoded per sample\n", 100 * s->st.decode_fast_share,
		       100 * s->st.decode_entropy_share);
	}
	printf("  memory                     pool %s%s, RSS %.0f MB after epoch 1, %.0f MB at the end\n",
	       fmt_bytes(t1, sizeof(t1), (double)s->st.pool_bytes),
	       s->st.pinned ? " (pinned)" : "", s->rss_first_mb, s->rss_last_mb);
	printf("  errors                     %llu", (unsigned long long)s->errors);
	if (s->errors)
		printf(" (last: %s)", stk_last_error(l));
	printf("\n");
}

/* The loader's options from the parsed ones: PATH, and image mode's. */
static void loader_opts(const struct bench_opts *o, struct stk_loader_opts *lo,
			struct stk_image_opts *img)
{
	*lo = o->lo;
	lo->size = sizeof(*lo);
	lo->path = o->path;
	*img = o->img;
	img->size = sizeof(*img);
	lo->image = o->image ? img : NULL;
}

/* --sweep's knob: a numeric row of the option table, by its name or a short
 * alias (threads, qd, batch), and the struct it lives in. */
static const struct stk_option *sweep_knob(struct bench_opts *o, const char *name, void **base)
{
	static const struct {
		const char *alias, *name;
	} aliases[] = {{"threads", "io_threads"}, {"qd", "queue_depth"}, {"batch", "batch_size"}};
	for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++)
		if (!strcmp(name, aliases[i].alias))
			name = aliases[i].name;
	const struct stk_option *r = stk_option_find(name);
	if (!r || (r->type != STK_OPT_U32 && r->type != STK_OPT_U64))
		return NULL;
	*base = r->group == STK_OPT_IMAGE ? (void *)&o->img : (void *)&o->lo;
	return r;
}

/* --sweep knob=v1,v2,...: one loader run per value (no baseline), a table,
 * and an SVG chart of samples/s against the knob. */
static int run_sweep(struct bench_opts o)
{
	char knob[32] = "";
	const char *eq = strchr(o.sweep, '=');
	void *base = NULL;
	const struct stk_option *row = NULL;
	if (eq && (size_t)(eq - o.sweep) < sizeof(knob)) {
		memcpy(knob, o.sweep, (size_t)(eq - o.sweep));
		knob[eq - o.sweep] = 0;
		row = sweep_knob(&o, knob, &base);
	}
	char vals[64][24], why[512] = "";
	double xs[64], ys[64];
	int n = 0;
	for (const char *p = eq ? eq + 1 : ""; row && *p && n < 64;) {
		const char *c = strchr(p, ',');
		size_t l = c ? (size_t)(c - p) : strlen(p);
		if (l >= sizeof(vals[0]) || !l) {
			n = 0;
			break;
		}
		memcpy(vals[n], p, l);
		vals[n][l] = 0;
		/* the table's parser and range, checked before any run */
		struct bench_opts probe = o;
		void *pb = (char *)&probe + ((char *)base - (char *)&o);
		char *end;
		xs[n] = strtod(vals[n], &end);
		if (stk_option_set(row, pb, vals[n], why, sizeof(why)) < 0 || *end) {
			if (!why[0])
				snprintf(why, sizeof(why), "'%.23s' is not a number", vals[n]);
			n = 0;
			break;
		}
		n++;
		p = c ? c + 1 : p + l;
	}
	if (!row || n == 0) {
		fprintf(stderr, "stoker bench: --sweep '%s': %s%swant KNOB=V1,V2,... with KNOB a "
				"numeric loader option (threads, qd, prefetch, batch, decode-threads, ...)\n",
			o.sweep, why, why[0] ? "; " : "");
		return EXIT_USAGE;
	}
	char plot[256];
	snprintf(plot, sizeof(plot), "%s", o.plot ? o.plot : "");
	if (!o.plot)
		snprintf(plot, sizeof(plot), "stoker-sweep-%s.svg", knob);
	json_t *rows = json_array();
	if (!o.json)
		printf("stoker bench --sweep %s: %s\n\n  %14s %12s %10s %8s %10s  %s\n", knob, o.path,
		       knob, "samples/s", "MB/s", "stall", "in flight", "verdict");
	int rc = 0;
	for (int i = 0; i < n && !interrupted; i++) {
		stk_option_set(row, base, vals[i], NULL, 0);
		struct stk_loader_opts lo;
		struct stk_image_opts img;
		loader_opts(&o, &lo, &img);
		struct stk_loader *l;
		char err[PATH_MAX + 256];
		if ((rc = stk_loader_create(&l, &lo, err, sizeof(err))) < 0) {
			fprintf(stderr, "stoker bench: %s=%s: %s\n", knob, vals[i], err);
			break;
		}
		const char *cache = "as found";
		if (o.cache != CACHE_AS_IS) {
			set_cache(l, &o, NULL, 0, &cache);
			stk_loader_restart(l, 0, 0, STK_START_RESET_STATS);
		}
		struct run r = {0};
		int64_t *order = NULL;
		uint64_t norder = 0;
		rc = run_loader(l, &o, &r, &order, &norder);
		struct stk_verdict v = {.size = sizeof(v)};
		stk_loader_diagnose(l, 0, &v);
		free(order);
		json_decref(r.epochs);
		stk_loader_destroy(l);
		if (rc < 0)
			break;
		ys[i] = r.wall > 0 ? (double)r.samples / r.wall : 0;
		if (o.json)
			json_array_append_new(rows, json_pack("{s:f,s:o,s:o}", "value", xs[i], "run",
							      run_json(&r), "verdict",
							      verdict_json(&v)));
		else
			printf("  %14s %12.0f %10.1f %7.1f%% %10.1f  %s\n", vals[i], ys[i],
			       r.wall > 0 ? (double)r.bytes / r.wall / 1e6 : 0, r.st.stall_ratio * 100,
			       r.st.inflight_mean, v.name);
	}
	if (rc == 0 && !interrupted) {
		char title[128];
		snprintf(title, sizeof(title), "stoker bench: samples/s against %s", knob);
		int w = write_svg(plot, title, knob, "samples/s", xs, ys, n);
		if (w < 0)
			fprintf(stderr, "stoker bench: %s: %s\n", plot, strerror(-w));
		else if (!o.json)
			printf("\n  plot: %s\n", plot);
		if (o.json) {
			json_t *j = json_pack("{s:s,s:s,s:o,s:s}", "path", o.path, "knob", knob, "runs",
					      rows, "plot", plot);
			json_dumpf(j, stdout, JSON_INDENT(2));
			putchar('\n');
			json_decref(j);
			rows = NULL;
		}
	}
	json_decref(rows);
	return rc < 0 || interrupted ? EXIT_FAIL : EXIT_OK;
}

/* Every option in effect, as the table's text (JSON: the run is reproducible
 * from it). */
static json_t *options_json(const struct stk_loader_opts *lo, const struct stk_image_opts *img)
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

int cmd_bench(int argc, char **argv)
{
	struct bench_opts o = {0};
	static const struct cmd_help help = {
		"bench", "[options] [PATH]",
		"Runs the loader over PATH (a folder in ImageFolder layout, a flat folder, a file\n"
		"list or tar shards) and a naive synchronous baseline in the same run, and prints\n"
		"how fast this machine can feed a GPU and what holds it back.  Without PATH, a\n"
		"default dataset is generated once in the cache folder (~/.cache/stoker).  The\n"
		"loader's options, their defaults and ranges are the library's (docs/options.md)."};
	struct opt opts[128] = {
		{"epochs", 'E', OPT_INT, &o.epochs, "0", 0, 1000000, NULL, "N",
		 "epochs to run (0: 1 with --cache cold, where later epochs would be warm; else 3)"},
		{"seconds", 's', OPT_DOUBLE, &o.seconds, "0", 0, 1e9, NULL, "S",
		 "stop after S seconds (0 = no limit)"},
		{"max-samples", 0, OPT_INT, &o.max_samples, "0", 0, 1e15, NULL, "N",
		 "stop after N samples (0 = no limit)"},
		{"compute-ms", 'c', OPT_DOUBLE, &o.compute_ms, "0", 0, 1e6, NULL, "MS",
		 "hold each batch MS ms (an emulated accelerator); prints AU %"},
		{"cache", 0, OPT_CHOICE, &o.cache, "warm", 0, 0, "warm,cold,as-is", "C",
		 "page cache before each run: warmed by one untimed pass, dropped (root), or as found"},
		{"cold", 0, OPT_BOOL, &o.cold, NULL, 0, 0, NULL, NULL, "same as --cache cold"},
		{"no-baseline", 0, OPT_BOOL, &o.no_baseline, NULL, 0, 0, NULL, NULL,
		 "skip the synchronous baseline"},
		{"image", 'i', OPT_BOOL, &o.image, NULL, 0, 0, NULL, NULL,
		 "decode and crop every sample (JPEG) into the batch, as training does"},
		{"size", 0, OPT_STR, &o.size, NULL, 0, 0, NULL, "N",
		 "--image: output N x N pixels (sets --width and --height)"},
		{"sweep", 0, OPT_STR, &o.sweep, NULL, 0, 0, NULL, "K=V,..",
		 "one run per value of a numeric option (threads, qd, prefetch, batch, "
		 "decode-threads, ...); a table and a plot"},
		{"plot", 0, OPT_STR, &o.plot, NULL, 0, 0, NULL, "FILE",
		 "--sweep: SVG chart file [stoker-sweep-KNOB.svg]"},
		{"vs", 0, OPT_STR, &o.vs, NULL, 0, 0, NULL, "torch",
		 "also PyTorch's DataLoader on the same samples at its best worker count "
		 "(python3 -m stoker.vs_torch), and stoker's ratio to it"},
		{"json", 'j', OPT_BOOL, &o.json, NULL, 0, 0, NULL, NULL, "print JSON"},
		OPT_END,
	};
	size_t nopts = 0;
	while (opts[nopts].name)
		nopts++;
	nopts = opt_add_library(opts, nopts, sizeof(opts) / sizeof(opts[0]), STK_OPT_LOADER, &o.lo,
				 NULL);
	opt_add_library(opts, nopts, sizeof(opts) / sizeof(opts[0]), STK_OPT_IMAGE, &o.img, NULL);
	int first = opt_parse(&help, opts, argc, argv);
	if (first < 0)
		return -first;
	if (argc - first > 1) {
		fprintf(stderr, "stoker bench: one PATH at most (got %d)\n", argc - first);
		return EXIT_USAGE;
	}
	if (o.size) {
		char why[256];
		if (stk_option_set(stk_option_find("width"), &o.img, o.size, why, sizeof(why)) < 0 ||
		    stk_option_set(stk_option_find("height"), &o.img, o.size, why, sizeof(why)) < 0) {
			fprintf(stderr, "stoker bench: --size: %s\n", why);
			return EXIT_USAGE;
		}
	}
	if (o.vs && strcmp(o.vs, "torch")) {
		fprintf(stderr, "stoker bench: --vs: '%s' is not torch (the one comparison there is)\n",
			o.vs);
		return EXIT_USAGE;
	}
	struct stk_loader_opts lo;
	struct stk_image_opts img;
	loader_opts(&o, &lo, &img);
	char err[PATH_MAX + 256];
	if (stk_loader_opts_check(&lo, err, sizeof(err)) < 0) {
		fprintf(stderr, "stoker bench: %s\n", err);
		return EXIT_USAGE;
	}
	char defpath[PATH_MAX];
	if (first < argc) {
		o.path = argv[first];
	} else {
		if (default_dataset(defpath, sizeof(defpath)))
			return EXIT_FAIL;
		o.path = defpath;
	}
	loader_opts(&o, &lo, &img);
	struct sigaction sa = {.sa_handler = on_sigint};
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	if (o.cold)
		o.cache = CACHE_COLD;
	if (!o.epochs)
		o.epochs = o.cache == CACHE_COLD ? 1 : 3;
	if (o.sweep)
		return run_sweep(o);

	const char *cache = "as found";
	struct stk_loader *l;
	double tc = now_s();
	int rc = stk_loader_create(&l, &lo, err, sizeof(err));
	double create_s = now_s() - tc;
	if (rc < 0) {
		fprintf(stderr, "stoker bench: %s (%s)\n", err, stk_err_name(rc));
		if (rc == STK_EEMPTY && strstr(err, "extension"))
			fprintf(stderr, "try: --extensions '*' for every file, or --extensions "
					".EXT,... for some\n");
		return EXIT_FAIL;
	}
	struct stk_loader_opts eff = {.size = sizeof(eff)};
	struct stk_image_opts effimg = {.size = sizeof(effimg)};
	stk_loader_options(l, &eff, &effimg);
	struct run s = {0}, b = {0};
	if (o.cache != CACHE_AS_IS) {
		/* the first batches are already being read: start over, in a new
		 * stats window, once the cache is as asked */
		set_cache(l, &o, NULL, 0, &cache);
		stk_loader_restart(l, 0, 0, STK_START_RESET_STATS);
	}
	double cached = cached_fraction(l);
	int64_t *order = NULL;
	uint64_t norder = 0;
	rc = run_loader(l, &o, &s, &order, &norder);
	struct stk_verdict verdict = {.size = sizeof(verdict)};
	stk_loader_diagnose(l, 0, &verdict);
	char tuning[1024];
	stk_loader_tuning(l, tuning, sizeof(tuning));
	bool base = !o.no_baseline && rc == 0 && !interrupted;
	if (base) {
		set_cache(l, &o, order, norder, &cache);
		rc = run_baseline(l, &o, order, norder, &b, o.image ? &effimg : NULL);
	}
	json_t *vt = NULL;
	char vt_why[512] = "";
	if (o.vs && rc == 0 && !interrupted) {
		if (o.cache == CACHE_WARM)
			set_cache(l, &o, order, norder, &cache);
		vt = bench_vs_torch(&o, &eff, &effimg, s.samples, vt_why, sizeof(vt_why));
	}
	if (o.json) {
		json_t *j = json_pack(
			"{s:s,s:s,s:s,s:I,s:I,s:I,s:I,s:I,s:f,s:f,s:b,s:o}", "path", o.path, "engine",
			stk_loader_engine(l), "cache", cache, "dataset_samples",
			(json_int_t)stk_loader_num_samples(l), "batch_size", (json_int_t)eff.batch_size,
			"queue_depth", (json_int_t)s.st.queue_depth, "prefetch", (json_int_t)eff.prefetch,
			"epochs", (json_int_t)o.epochs, "compute_ms", o.compute_ms, "cached_fraction",
			cached, "direct", s.st.direct != 0, "stoker", run_json(&s));
		json_object_set_new(j, "options", options_json(&eff, o.image ? &effimg : NULL));
		json_object_set_new(j, "create_s", json_real(create_s));
		json_t *tl = json_array(); /* one line each: reads, queue depth, I/O threads */
		for (char *line = tuning, *nl; line && *line; line = nl ? nl + 1 : NULL) {
			if ((nl = strchr(line, '\n')))
				*nl = 0;
			json_array_append_new(tl, json_string(line));
		}
		json_object_set_new(j, "tuning", tl);
		json_object_set_new(j, "verdict", verdict_json(&verdict));
		if (o.image) {
			json_object_set_new(j, "image", json_pack("{s:I,s:I,s:s,s:I}", "width",
								  (json_int_t)effimg.width, "height",
								  (json_int_t)effimg.height, "crop",
								  effimg.crop ? "center" : "random_resized",
								  "decode_threads",
								  (json_int_t)s.st.decode_threads));
			json_object_set_new(json_object_get(j, "stoker"), "decode_images_per_s_per_core",
					    json_real(s.st.decode_images_per_s_per_core));
			json_object_set_new(json_object_get(j, "stoker"), "decode_fast_share",
					    json_real(s.st.decode_fast_share));
			json_object_set_new(json_object_get(j, "stoker"), "decode_entropy_share",
					    json_real(s.st.decode_entropy_share));
			json_object_set_new(json_object_get(j, "image"), "baseline_decode_threads",
					    json_integer(1));
		}
		json_t *st = json_object_get(j, "stoker");
		json_object_set_new(st, "batch_wait_ns",
				    json_pack("{s:I,s:I,s:I}", "p50", (json_int_t)s.st.wait_p50_ns,
					      "p99", (json_int_t)s.st.wait_p99_ns, "max",
					      (json_int_t)s.st.wait_max_ns));
		json_object_set_new(st, "read_latency_ns",
				    json_pack("{s:I,s:I,s:I}", "p50", (json_int_t)s.st.read_p50_ns,
					      "p99", (json_int_t)s.st.read_p99_ns, "max",
					      (json_int_t)s.st.read_max_ns));
		json_object_set_new(st, "inflight_mean", json_real(s.st.inflight_mean));
		json_object_set_new(st, "inflight_max", json_integer(s.st.inflight_max));
		json_object_set_new(st, "stall_ratio", json_real(s.st.stall_ratio));
		json_object_set_new(st, "pool_bytes", json_integer((json_int_t)s.st.pool_bytes));
		json_object_set_new(st, "pinned", json_boolean(s.st.pinned));
		json_object_set_new(st, "epochs", s.epochs ? s.epochs : json_array());
		s.epochs = NULL;
		if (vt) {
			double bsps = json_real_value(
				json_object_get(json_object_get(vt, "best"), "samples_per_s"));
			json_object_set_new(vt, "ratio",
					    json_real(bsps > 0 && s.wall > 0
							      ? (double)s.samples / s.wall / bsps
							      : 0));
			json_object_set_new(j, "vs_torch", vt);
			vt = NULL;
		} else if (o.vs) {
			json_object_set_new(j, "vs_torch", json_pack("{s:s}", "error", vt_why));
		}
		if (base) {
			json_object_set_new(j, "baseline", run_json(&b));
			double sps = s.wall > 0 ? (double)s.samples / s.wall : 0;
			double bps = b.wall > 0 ? (double)b.samples / b.wall : 0;
			json_object_set_new(j, "ratio", json_real(bps > 0 ? sps / bps : 0));
		}
		json_dumpf(j, stdout, JSON_INDENT(2));
		putchar('\n');
		json_decref(j);
	} else if (s.batches || rc == 0) {
		print_human(l, &o, &s, base ? &b : NULL, cache, cached, create_s);
		if (vt)
			vs_torch_print(vt, s.wall > 0 ? (double)s.samples / s.wall : 0);
		else if (o.vs)
			printf("\n  vs PyTorch's DataLoader: not run: %s\n", vt_why);
		verdict_print(&verdict);
	}
	json_decref(s.epochs);
	json_decref(vt);
	free(order);
	stk_loader_destroy(l);
	if (interrupted) {
		fprintf(stderr, "stoker bench: interrupted\n");
		return EXIT_FAIL;
	}
	return rc < 0 ? EXIT_FAIL : EXIT_OK;
}
