/* soak.c — `make soak`: the loader over many epochs in image mode while
 * another thread deletes dataset files and restores them, the way a sync job,
 * a cleaner or a flaky mount treats a training set.  Checks, every epoch:
 * every sample of the epoch is delivered or counted as an error (never
 * both, never neither: errors counted exactly), every delivered sample's
 * image is its file's, decoded (stk_image_decode, the same crop), and under
 * keep_raw its bytes are the file's; and over the run: resident memory and
 * open descriptors flat.  Skip runs with the read areas (the default),
 * replace with keep_raw (the reads kept in the slots).  Public API only.
 *   usage: soak DATASET [EPOCHS [SKIP|REPLACE]]     (prints one JSON line)  */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "stoker/stoker.h"

struct file {
	char path[PATH_MAX];
	uint8_t *bytes;
	size_t len;
};

static struct file *files;
static int64_t nfiles;
static atomic_int stop_chaos;
static atomic_ullong chaos_ops;
/* held by the chaos thread while it has a file open, so that counting the
 * process's descriptors sees the loader's only */
static pthread_mutex_t chaos_fd_mu = PTHREAD_MUTEX_INITIALIZER;

static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static long rss_kb(void)
{
	FILE *f = fopen("/proc/self/status", "re");
	char line[256];
	long kb = -1;
	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, "VmRSS:", 6))
			kb = strtol(line + 6, NULL, 10);
	if (f)
		fclose(f);
	return kb;
}

static int open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;
	struct dirent *e;
	while (d && (e = readdir(d)))
		n += e->d_name[0] != '.';
	if (d)
		closedir(d);
	return n - 1; /* the listing's own */
}

static void die(const char *what)
{
	fprintf(stderr, "soak: %s\n", what);
	exit(1);
}

/* Deletes a few random files and restores them a moment later (their bytes
 * rewritten under their names, new inodes), again and again, until told to
 * stop. */
#define CHAOS_FILES 4
static void *chaos(void *arg)
{
	(void)arg;
	uint64_t s = 42;
	while (!atomic_load(&stop_chaos)) {
		struct file *gone[CHAOS_FILES];
		int n = 0;
		for (int k = 0; k < CHAOS_FILES; k++) {
			struct file *f = &files[mix(s++) % (uint64_t)nfiles];
			bool dup = false;
			for (int j = 0; j < n; j++)
				dup |= gone[j] == f;
			if (dup)
				continue;
			if (unlink(f->path))
				die("chaos: unlink");
			gone[n++] = f;
		}
		struct timespec ts = {0, 500000 + (long)(mix(s++) % 3000000)};
		nanosleep(&ts, NULL);
		for (int k = 0; k < n; k++) {
			struct file *f = gone[k];
			pthread_mutex_lock(&chaos_fd_mu);
			int fd = open(f->path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
			if (fd < 0 || write(fd, f->bytes, f->len) != (ssize_t)f->len || close(fd))
				die("chaos: restore");
			pthread_mutex_unlock(&chaos_fd_mu);
		}
		atomic_fetch_add(&chaos_ops, (unsigned long long)n);
		ts.tv_nsec = 1000000 + (long)(mix(s++) % 3000000);
		nanosleep(&ts, NULL);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		die("usage: soak DATASET [EPOCHS [skip|replace]]");
	int epochs = argc > 2 ? (int)strtol(argv[2], NULL, 10) : 200;
	bool replace = argc > 3 && !strcmp(argv[3], "replace");
	struct stk_image_opts img = {.size = sizeof(img), .width = 64, .height = 64,
				     .flags = replace ? STK_IMG_KEEP_RAW : 0};
	struct stk_loader_opts o = {.size = sizeof(o), .path = argv[1], .batch_size = 32,
				    .prefetch = 4, .seed = 7, .image = &img, .flags = STK_F_QUIET,
				    .on_error = replace ? STK_ON_ERROR_REPLACE : STK_ON_ERROR_SKIP};
	struct stk_loader *l;
	char err[PATH_MAX + 256];
	if (stk_loader_create(&l, &o, err, sizeof(err)))
		die(err);
	nfiles = stk_loader_num_samples(l);
	files = calloc((size_t)nfiles, sizeof(*files));
	if (!files)
		die("out of memory");
	for (int64_t i = 0; i < nfiles; i++) { /* what every delivered sample must be */
		uint64_t size;
		if (stk_loader_sample(l, i, files[i].path, sizeof(files[i].path), &size, NULL))
			die("sample");
		FILE *f = fopen(files[i].path, "rb");
		files[i].bytes = malloc(size ? size : 1);
		if (!f || !files[i].bytes || fread(files[i].bytes, 1, size, f) != size)
			die("reading the dataset");
		fclose(f);
		files[i].len = size;
	}
	pthread_t tid;
	if (pthread_create(&tid, NULL, chaos, NULL))
		die("thread");
	long rss_first = 0, rss_last = 0, rss_max = 0;
	int fds_first = 0, fds_last = 0, fds_max = 0;
	uint64_t wrong = 0, uncounted = 0, delivered = 0, errors = 0, short_batches = 0;
	int64_t per_epoch = stk_loader_rank_samples(l), nb = stk_loader_len(l);
	uint32_t bs = o.batch_size;
	size_t ib = stk_image_bytes(&img);
	uint8_t *want = malloc(ib);
	if (!want)
		die("out of memory");
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int e = 0; e < epochs; e++) {
		if (stk_loader_start(l, (uint64_t)e, 0))
			die("start");
		struct stk_stats st0 = {.size = sizeof(st0)}, st1 = {.size = sizeof(st1)};
		stk_loader_stats(l, &st0);
		struct stk_batch *b;
		int rc;
		uint64_t got = 0;
		while ((rc = stk_loader_next(l, &b)) == 1) {
			uint32_t full = (int64_t)b->number + 1 < nb ? bs : (uint32_t)(per_epoch - (nb - 1) * bs);
			short_batches += b->count != full;
			if (!b->images || b->image_bytes != ib || !b->data != !replace) {
				wrong++;
				goto next;
			}
			for (uint32_t i = 0; i < b->count; i++) {
				const struct file *f = &files[b->indices[i]];
				if (b->sizes[i] != f->len ||
				    (b->data && memcmp(b->data + b->offsets[i], f->bytes, f->len)) ||
				    stk_image_decode(&img, f->bytes, f->len, o.seed, (uint64_t)e,
						     b->indices[i], want, NULL, 0) ||
				    memcmp((uint8_t *)b->images + i * ib, want, ib))
					wrong++;
			}
		next:
			got += b->count;
			stk_batch_release(l, b);
		}
		if (rc != 0) {
			fprintf(stderr, "soak: epoch %d: %s (%s)\n", e, stk_last_error(l), stk_err_name(rc));
			return 1;
		}
		stk_loader_stats(l, &st1);
		uint64_t ee = st1.errors - st0.errors;
		/* skip: delivered + errors is the epoch; replace: every sample delivered */
		if (replace ? got != (uint64_t)per_epoch || ee < st1.replaced - st0.replaced
			    : got + ee != (uint64_t)per_epoch)
			uncounted++;
		delivered += got;
		errors += ee;
		long rss = rss_kb();
		pthread_mutex_lock(&chaos_fd_mu);
		int fds = open_fds();
		pthread_mutex_unlock(&chaos_fd_mu);
		if (e == 9) { /* after the warm-up epochs: caches, the allocator's arenas */
			rss_first = rss;
			fds_first = fds;
		}
		if (e >= 9) {
			rss_max = rss > rss_max ? rss : rss_max;
			fds_max = fds > fds_max ? fds : fds_max;
		}
		rss_last = rss;
		fds_last = fds;
		if ((e + 1) % 20 == 0)
			fprintf(stderr, "soak: epoch %d/%d: %llu errors so far, RSS %ld kB, %d fds\n",
				e + 1, epochs, (unsigned long long)errors, rss, fds);
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	atomic_store(&stop_chaos, 1);
	pthread_join(tid, NULL);
	double growth = rss_first > 0 ? 100.0 * (double)(rss_max - rss_first) / (double)rss_first : 0;
	printf("{\"epochs\": %d, \"policy\": \"%s\", \"samples_per_epoch\": %lld, \"delivered\": %llu, "
	       "\"errors\": %llu, \"chaos_deletes\": %llu, \"wrong_samples\": %llu, "
	       "\"uncounted_epochs\": %llu, \"short_batches\": %llu, \"rss_kb_epoch10\": %ld, "
	       "\"rss_kb_max\": %ld, \"rss_kb_last\": %ld, \"rss_growth_percent\": %.2f, "
	       "\"fds_epoch10\": %d, \"fds_max\": %d, \"fds_last\": %d, \"seconds\": %.1f}\n",
	       epochs, replace ? "replace" : "skip", (long long)per_epoch,
	       (unsigned long long)delivered, (unsigned long long)errors,
	       (unsigned long long)atomic_load(&chaos_ops), (unsigned long long)wrong,
	       (unsigned long long)uncounted, (unsigned long long)short_batches, rss_first, rss_max,
	       rss_last, growth, fds_first, fds_max, fds_last,
	       (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
	stk_loader_destroy(l);
	free(want);
	for (int64_t i = 0; i < nfiles; i++)
		free(files[i].bytes);
	free(files);
	bool ok = !wrong && !uncounted && growth <= 2.0 && fds_max == fds_first &&
		  (!replace || !short_batches) && errors > 0;
	if (!ok)
		fprintf(stderr, "soak: FAILED (wrong samples, uncounted errors, RSS over 2 %%, "
				"descriptors growing, short batches under replace, or no error at all)\n");
	return ok ? 0 : 1;
}
