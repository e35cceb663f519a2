/* test_jcache.c — image option jpeg_cache (loader/jcache.c, dataset/jcache.c):
 * the loader's lossless rewrite of each JPEG gives the same pixels as the
 * file, is read from the second epoch (and the next create) on, and a copy
 * that is damaged, planted, stale or not the user's alone is refused with a
 * notice naming it, the file being read instead; order and resume do not
 * move. */
#include "testutil.h"
#include "testjpeg.h"

#include "stoker/stoker.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <time.h>

#define NCLASS 2
#define PER 12
#define N (NCLASS * PER)
#define SIDE 40
#define IMG (3 * SIDE * SIDE)

static char *data, *cache;
static uint8_t ref[N][IMG]; /* the images without the cache, by dataset index */

static int pic_seed;
static int pixel(int x, int y, int c)
{
	return (x * (3 + pic_seed) + y * 5 + c * 40 + ((x * y + pic_seed) % 23) * 4) & 255;
}

/* File i: sizes from 64x48 to 157x101, every other one progressive. */
static void write_pic(const char *path, int i, int seed)
{
	pic_seed = seed;
	struct tu_jpeg s = {.w = 64 + 31 * (i % 4), .h = 48 + 17 * (i % 4), .comps = 3,
			    .progressive = i % 2, .pixel = pixel};
	size_t len;
	uint8_t *b = tu_jpeg(&s, &len);
	tu_write(path, b, len);
	free(b);
}

static char *file_path(int i)
{
	static char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/c%d/%03d.jpg", data, i / PER, i % PER);
	return p;
}

static struct stk_loader *make(bool jc, bool shuffle, bool quiet)
{
	struct stk_image_opts im = {.size = sizeof(im), .width = SIDE, .height = SIDE,
				    .crop = STK_CROP_CENTER, .decode_threads = 2,
				    .flags = jc ? STK_IMG_JPEG_CACHE : 0};
	struct stk_loader_opts o = {.size = sizeof(o), .path = data, .batch_size = 5, .prefetch = 2,
				    .image = &im, .cache_dir = cache,
				    .flags = (shuffle ? 0 : STK_F_NO_SHUFFLE) |
					     (quiet ? STK_F_QUIET : 0) | STK_F_NO_PIN};
	o.seed = 7;
	struct stk_loader *l = NULL;
	char err[1024];
	int rc = stk_loader_create(&l, &o, err, sizeof(err));
	if (rc)
		fail_msg("create: %s", err);
	return l;
}

/* One epoch: each image against ref (by dataset index); the samples, the
 * share decoded from restart intervals (from a copy), the indices in order. */
static int64_t epoch(struct stk_loader *l, uint64_t e, uint64_t from, double *fast,
		     int64_t *order)
{
	assert_int_equal(stk_loader_start(l, e, from), 0);
	stk_loader_stats_reset(l);
	struct stk_batch *b;
	int64_t n = 0;
	int rc;
	while ((rc = stk_loader_next(l, &b)) == 1) {
		for (uint32_t i = 0; i < b->count; i++) {
			int64_t idx = b->indices[i];
			assert_true(idx >= 0 && idx < N);
			if (memcmp((uint8_t *)b->images + (size_t)i * b->image_bytes, ref[idx], IMG))
				fail_msg("epoch %llu: sample %lld (%s) differs from the file's pixels",
					 (unsigned long long)e, (long long)idx, file_path((int)idx));
			if (order)
				order[n] = idx;
			n++;
		}
		stk_batch_release(l, b);
	}
	assert_int_equal(rc, 0);
	struct stk_stats st = {.size = sizeof(st)};
	assert_int_equal(stk_loader_stats(l, &st), 0);
	if (fast)
		*fast = st.decode_fast_share;
	return n;
}

static void take_ref(void)
{
	struct stk_loader *l = make(false, false, true);
	assert_int_equal(stk_loader_start(l, 0, 0), 0);
	struct stk_batch *b;
	while (stk_loader_next(l, &b) == 1) {
		for (uint32_t i = 0; i < b->count; i++)
			memcpy(ref[b->indices[i]], (uint8_t *)b->images + (size_t)i * b->image_bytes, IMG);
		stk_batch_release(l, b);
	}
	stk_loader_destroy(l);
}

static char copies_dir[PATH_MAX + 300];

static int count_copies(void)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/jpeg", cache);
	DIR *d = opendir(p);
	assert_non_null(d);
	struct dirent *e;
	copies_dir[0] = 0;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			snprintf(copies_dir, sizeof(copies_dir), "%s/%s", p, e->d_name);
	closedir(d);
	assert_true(copies_dir[0]);
	int n = 0;
	d = opendir(copies_dir);
	assert_non_null(d);
	while ((e = readdir(d)))
		n += strstr(e->d_name, ".jpg") && !strstr(e->d_name, ".tmp");
	closedir(d);
	return n;
}

/* The copy of file i: found as the one copy whose name changes when file i's
 * copy is removed and made again would be slow; instead each copy's header
 * names its source's inode (word 5). */
static void copy_of(int i, char *out)
{
	struct stat src;
	assert_int_equal(stat(file_path(i), &src), 0);
	DIR *d = opendir(copies_dir);
	assert_non_null(d);
	struct dirent *e;
	out[0] = 0;
	while ((e = readdir(d))) {
		if (!strstr(e->d_name, ".jpg"))
			continue;
		char p[2 * PATH_MAX];
		snprintf(p, sizeof(p), "%s/%s", copies_dir, e->d_name);
		uint64_t h[10];
		int fd = open(p, O_RDONLY);
		assert_true(fd >= 0);
		assert_int_equal(pread(fd, h, sizeof(h), 0), (ssize_t)sizeof(h));
		close(fd);
		if (h[5] == (uint64_t)src.st_ino)
			memcpy(out, p, strlen(p) < PATH_MAX ? strlen(p) + 1 : 1);
	}
	closedir(d);
	assert_true(out[0]);
}

/* Runs one epoch of a fresh loader with stderr captured into err. */
static void epoch_captured(char *err, size_t len, double *fast)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/stderr", cache);
	fflush(stderr);
	int keep = dup(2), fd = open(p, O_RDWR | O_CREAT | O_TRUNC, 0600);
	assert_true(keep >= 0 && fd >= 0);
	dup2(fd, 2);
	struct stk_loader *l = make(true, false, false);
	assert_int_equal(epoch(l, 0, 0, fast, NULL), N);
	stk_loader_destroy(l);
	fflush(stderr);
	dup2(keep, 2);
	close(keep);
	ssize_t n = pread(fd, err, len - 1, 0);
	close(fd);
	err[n > 0 ? n : 0] = 0;
}

static int setup(void **state)
{
	(void)state;
	data = tu_mkdtemp();
	cache = tu_mkdtemp();
	for (int c = 0; c < NCLASS; c++) {
		char p[PATH_MAX];
		snprintf(p, sizeof(p), "%s/c%d", data, c);
		tu_mkdir(p);
	}
	for (int i = 0; i < N; i++)
		write_pic(file_path(i), i, i);
	take_ref();
	/* a file changed less than a second before its read is not copied */
	struct timespec t = {1, 100000000};
	nanosleep(&t, NULL);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	tu_rmrf(data);
	tu_rmrf(cache);
	free(data);
	free(cache);
	return 0;
}

/* Epoch 0 reads the files and writes the copies; epoch 1 and the next
 * create read the copies (every crop from restart intervals): the same
 * pixels every time.  (That the copies are what is read: test_refused.) */
static void test_copies_same_pixels(void **state)
{
	(void)state;
	struct stk_loader *l = make(true, false, true);
	double fast;
	/* epoch 0: each file rewritten, the rewrite decoded (by its restart
	 * intervals) and kept */
	assert_int_equal(epoch(l, 0, 0, &fast, NULL), N);
	assert_true(fast > 0.99);
	assert_int_equal(count_copies(), N);
	assert_int_equal(epoch(l, 1, 0, &fast, NULL), N);
	assert_true(fast > 0.99);
	stk_loader_destroy(l);
	l = make(true, false, true);
	assert_int_equal(epoch(l, 0, 0, &fast, NULL), N);
	assert_true(fast > 0.99);
	stk_loader_destroy(l);
	/* without the option nothing is read from the copies */
	l = make(false, false, true);
	assert_int_equal(epoch(l, 0, 0, &fast, NULL), N);
	assert_true(fast < 0.01);
	stk_loader_destroy(l);
}

/* A damaged copy (a byte of its JPEG flipped), one writable by others, one
 * planted (another file's valid copy under this one's name) and a stale one
 * (its file touched) are each refused with a notice naming the copy and the
 * file; the file is read: the same pixels. */
static void test_refused(void **state)
{
	(void)state;
	count_copies();
	char dmg[PATH_MAX], open_mode[PATH_MAX], planted[PATH_MAX], stale[PATH_MAX], other[PATH_MAX];
	copy_of(1, dmg);
	copy_of(2, open_mode);
	copy_of(3, planted);
	copy_of(4, other);
	copy_of(5, stale);
	int fd = open(dmg, O_RDWR);
	assert_true(fd >= 0);
	uint8_t byte;
	assert_int_equal(pread(fd, &byte, 1, 300), 1);
	byte ^= 0x10;
	assert_int_equal(pwrite(fd, &byte, 1, 300), 1);
	close(fd);
	assert_int_equal(chmod(open_mode, 0666), 0);
	tu_sh("cp '%s' '%s'", other, planted);
	struct timespec ts[2] = {{0, UTIME_OMIT}, {1000000, 0}};
	assert_int_equal(utimensat(AT_FDCWD, file_path(5), ts, 0), 0); /* mtime moved */
	char err[8192];
	double fast;
	epoch_captured(err, sizeof(err), &fast);
	const struct {
		const char *copy, *why;
		int file;
	} want[] = {{dmg, "checksum", 1},
		    {open_mode, "writable by every user", 2},
		    {planted, "another version of the file", 3},
		    {stale, "another version of the file", 5}};
	for (size_t k = 0; k < sizeof(want) / sizeof(want[0]); k++) {
		char line[PATH_MAX * 2];
		snprintf(line, sizeof(line), "JPEG copy %s of %s refused: ", want[k].copy,
			 file_path(want[k].file));
		const char *at = strstr(err, line);
		if (!at || !strstr(at, want[k].why))
			fail_msg("no notice \"%s...%s\" in:\n%s", line, want[k].why, err);
	}
	assert_true(fast > 0.5 && fast < 0.99); /* the others from their copies */
	/* made again from the files (a second later: racy-clean), and read */
	struct timespec t = {1, 100000000};
	nanosleep(&t, NULL);
	epoch_captured(err, sizeof(err), &fast);
	epoch_captured(err, sizeof(err), &fast);
	assert_string_equal(err, "");
	assert_true(fast > 0.99);
	struct stat st;
	assert_int_equal(stat(open_mode, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
}

/* Shuffled epochs and a resumed one give the same order with and without
 * the cache. */
static void test_order_and_resume(void **state)
{
	(void)state;
	int64_t a[N], b[N], c[N];
	struct stk_loader *l = make(false, true, true), *j = make(true, true, true);
	for (uint64_t e = 0; e < 2; e++) {
		assert_int_equal(epoch(l, e, 0, NULL, a), N);
		assert_int_equal(epoch(j, e, 0, NULL, b), N);
		assert_memory_equal(a, b, sizeof(a));
	}
	/* resumed at batch 2 of epoch 3 */
	assert_int_equal(epoch(l, 3, 0, NULL, a), N);
	assert_int_equal(epoch(j, 3, 2, NULL, c), N - 10);
	assert_memory_equal(a + 10, c, sizeof(int64_t) * (N - 10));
	stk_loader_destroy(l);
	stk_loader_destroy(j);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_copies_same_pixels),
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_order_and_resume),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
