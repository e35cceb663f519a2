/* test_loader.c — the loader's promises: every sample once per epoch with the
 * file's bytes and ImageFolder's labels, deterministic order, ranks, resume,
 * engines agreeing, errors named, the index cache. */
#include "testutil.h"

#include "io/engine.h"
#include "stoker/stoker.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <time.h>

#define NCLASS 3
#define PER_CLASS 17
#define N (NCLASS * PER_CLASS)

static char *root;
static const char *const class_dirs[NCLASS] = {"b_cls", "a_cls", "c_cls"}; /* created unsorted */

/* Deterministic content for sample file (class c, file i). */
static size_t fill(uint8_t *buf, int c, int i)
{
	size_t len = (size_t)((c * 7919 + i * 104729) % 20000);
	if (i == 3)
		len = 0; /* an empty file is a valid sample */
	for (size_t k = 0; k < len; k++)
		buf[k] = (uint8_t)(k * 31 + (size_t)c * 7 + (size_t)i);
	return len;
}

static int setup(void **state)
{
	(void)state;
	root = tu_mkdtemp();
	char p[PATH_MAX];
	tu_tree(root, NCLASS, class_dirs, NULL, PER_CLASS, "%03d.jpg", 20000, fill);
	for (int c = 0; c < NCLASS; c++) {
		snprintf(p, sizeof(p), "%s/%s/notes.txt", root, class_dirs[c]);
		tu_write(p, "not an image", 12); /* ImageFolder skips other extensions */
	}
	snprintf(p, sizeof(p), "%s/top.jpg", root);
	tu_write(p, "x", 1); /* files beside class folders are not samples */
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	tu_rmrf(root);
	free(root);
	return 0;
}

static struct stk_loader *make(struct stk_loader_opts o)
{
	o.size = sizeof(o);
	o.flags |= STK_F_QUIET;
	if (!o.path)
		o.path = root;
	struct stk_loader *l = NULL;
	char err[512];
	int rc = stk_loader_create(&l, &o, err, sizeof(err));
	if (rc)
		fail_msg("create: %s (%s)", err, stk_err_name(rc));
	return l;
}

/* A batch's samples hold their files' bytes, sizes and labels. */
static void check_batch(struct stk_loader *l, const struct stk_batch *b)
{
	uint8_t *want = malloc(20000);
	assert_non_null(want);
	for (uint32_t i = 0; i < b->count; i++) {
		char path[PATH_MAX];
		uint64_t size;
		int64_t label;
		assert_int_equal(stk_loader_sample(l, b->indices[i], path, sizeof(path), &size, &label), 0);
		assert_int_equal(b->labels[i], label);
		assert_int_equal(b->sizes[i], size);
		FILE *f = fopen(path, "rb");
		assert_non_null(f);
		size_t got = fread(want, 1, 20000, f);
		fclose(f);
		assert_int_equal(got, b->sizes[i]);
		if (got)
			assert_memory_equal(b->data + b->offsets[i], want, got);
	}
	free(want);
}

/* Runs a whole epoch; writes the delivered indices to out (room for cap). */
static int64_t run_epoch(struct stk_loader *l, int64_t *out, int64_t cap, bool check_bytes)
{
	int64_t k = 0;
	struct stk_batch *b;
	int rc;
	while ((rc = stk_loader_next(l, &b)) == 1) {
		for (uint32_t i = 0; i < b->count; i++) {
			assert_true(k < cap);
			out[k++] = b->indices[i];
		}
		if (check_bytes)
			check_batch(l, b);
		stk_batch_release(l, b);
	}
	assert_int_equal(rc, 0);
	return k;
}

static void test_every_sample_once(void **state)
{
	(void)state;
	for (int engine = STK_ENGINE_AUTO; engine <= STK_ENGINE_PREAD; engine++) {
		struct stk_loader *l = make((struct stk_loader_opts){.batch_size = 7, .prefetch = 3,
								     .queue_depth = 5,
								     .engine = engine});
		assert_int_equal(stk_loader_num_samples(l), N);
		assert_int_equal(stk_loader_len(l), (N + 6) / 7);
		int64_t got[N];
		assert_int_equal(run_epoch(l, got, N, true), N);
		int seen[N] = {0};
		for (int i = 0; i < N; i++)
			seen[got[i]]++;
		for (int i = 0; i < N; i++)
			assert_int_equal(seen[i], 1);
		stk_loader_destroy(l);
	}
}

static void test_imagefolder_labels(void **state)
{
	(void)state;
	struct stk_loader *l = make((struct stk_loader_opts){.flags = STK_F_NO_SHUFFLE});
	assert_int_equal(stk_loader_num_classes(l), 3);
	assert_string_equal(stk_loader_class_name(l, 0), "a_cls");
	assert_string_equal(stk_loader_class_name(l, 1), "b_cls");
	assert_string_equal(stk_loader_class_name(l, 2), "c_cls");
	for (int64_t i = 0; i < N; i++) {
		char path[PATH_MAX], want[PATH_MAX];
		int64_t label;
		assert_int_equal(stk_loader_sample(l, i, path, sizeof(path), NULL, &label), 0);
		assert_int_equal(label, i / PER_CLASS);
		snprintf(want, sizeof(want), "%s/%s/%03d.jpg", root,
			 stk_loader_class_name(l, label), (int)(i % PER_CLASS));
		char real[PATH_MAX];
		assert_non_null(realpath(want, real));
		assert_string_equal(path, real);
	}
	stk_loader_destroy(l);
}

static void test_order_deterministic(void **state)
{
	(void)state;
	int64_t a[N], b[N], c[N], d[N];
	struct stk_loader *l = make((struct stk_loader_opts){.batch_size = 8, .seed = 42});
	run_epoch(l, a, N, false);
	stk_loader_start(l, 1, 0);
	run_epoch(l, c, N, false);
	stk_loader_destroy(l);
	l = make((struct stk_loader_opts){.batch_size = 8, .seed = 42, .engine = STK_ENGINE_PREAD,
					  .prefetch = 2});
	run_epoch(l, b, N, false);
	stk_loader_destroy(l);
	l = make((struct stk_loader_opts){.batch_size = 8, .seed = 43});
	run_epoch(l, d, N, false);
	stk_loader_destroy(l);
	assert_memory_equal(a, b, sizeof(a));     /* same seed, same order */
	assert_memory_not_equal(a, c, sizeof(a)); /* next epoch, new order */
	assert_memory_not_equal(a, d, sizeof(a)); /* other seed, other order */
}

static void test_ranks(void **state)
{
	(void)state;
	for (int drop = 0; drop < 2; drop++) {
		const uint32_t world = 4; /* 51 samples: not a multiple */
		int seen[N] = {0};
		int64_t per = -1;
		for (uint32_t r = 0; r < world; r++) {
			struct stk_loader *l = make((struct stk_loader_opts){
				.batch_size = 5, .rank = r, .world_size = world, .seed = 7,
				.flags = drop ? STK_F_DROP_LAST : 0});
			int64_t got[N];
			int64_t k = run_epoch(l, got, N, false);
			/* with drop_last the short last batch goes too */
			int64_t want = drop ? (N / world) / 5 * 5 : (N + world - 1) / world;
			assert_int_equal(k, want);
			assert_int_equal(stk_loader_rank_samples(l), drop ? N / world : (N + world - 1) / world);
			if (per >= 0)
				assert_int_equal(k, per);
			per = k;
			for (int64_t i = 0; i < k; i++)
				seen[got[i]]++;
			stk_loader_destroy(l);
		}
		int total = 0;
		for (int i = 0; i < N; i++) {
			if (drop)
				assert_true(seen[i] <= 1); /* disjoint */
			else
				assert_true(seen[i] >= 1 && seen[i] <= 2); /* covering, padded */
			total += seen[i];
		}
		if (!drop)
			assert_int_equal(total, 4 * ((N + 3) / 4));
	}
}

/* world_size auto (0) takes the launcher's $RANK / $WORLD_SIZE, as Python
 * did on its own before: a C program under torchrun gets the same split. */
static void test_rank_from_environment(void **state)
{
	(void)state;
	setenv("RANK", "2", 1);
	setenv("WORLD_SIZE", "3", 1);
	struct stk_loader *l = make((struct stk_loader_opts){.batch_size = 5, .seed = 7});
	struct stk_loader_opts eff = {.size = sizeof(eff)};
	stk_loader_options(l, &eff, NULL);
	assert_int_equal(eff.rank, 2);
	assert_int_equal(eff.world_size, 3);
	int64_t env_got[N], k = run_epoch(l, env_got, N, false);
	stk_loader_destroy(l);
	l = make((struct stk_loader_opts){.batch_size = 5, .seed = 7, .rank = 2, .world_size = 3});
	int64_t got[N];
	assert_int_equal(run_epoch(l, got, N, false), k);
	assert_memory_equal(got, env_got, (size_t)k * sizeof(got[0]));
	stk_loader_destroy(l);
	/* given explicitly, the options win */
	l = make((struct stk_loader_opts){.batch_size = 5, .rank = 0, .world_size = 1});
	stk_loader_options(l, &eff, NULL);
	assert_int_equal(eff.world_size, 1);
	stk_loader_destroy(l);
	/* a launcher's value that is wrong is refused, naming the variable */
	char err[256];
	setenv("RANK", "3", 1);
	struct stk_loader_opts o = {.size = sizeof(o), .path = root, .batch_size = 5};
	assert_int_equal(stk_loader_opts_check(&o, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "RANK=3"));
	setenv("WORLD_SIZE", "x", 1);
	assert_int_equal(stk_loader_opts_check(&o, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "WORLD_SIZE=x"));
	unsetenv("RANK");
	unsetenv("WORLD_SIZE");
}

/* One sizing rule: a loader's memory (stk_loader_memory) is what the
 * estimate for its options gives (stk_memory_estimate), over a folder of
 * equal files where the mean says everything; and the pool is what it maps. */
static void test_memory_rule(void **state)
{
	(void)state;
	char *d = tu_mkdtemp(), p[PATH_MAX];
	static uint8_t buf[3000];
	for (int i = 0; i < 40; i++) {
		snprintf(p, sizeof(p), "%s/%03d.jpg", d, i);
		tu_write(p, buf, sizeof(buf));
	}
	for (uint32_t batch = 4; batch <= 64; batch *= 4) {
		struct stk_loader_opts o = {.path = d, .batch_size = batch, .prefetch = 3,
					    .flags = STK_F_BUFFERED};
		struct stk_loader *l = make(o);
		struct stk_memory got = {.size = sizeof(got)}, want = {.size = sizeof(want)};
		assert_int_equal(stk_loader_memory(l, &got), 0);
		o.size = sizeof(o);
		assert_int_equal(stk_memory_estimate(&o, 40, sizeof(buf), &want, NULL, 0), 0);
		assert_int_equal(got.nslots, 3);
		assert_int_equal(got.slot_bytes, want.slot_bytes);
		assert_int_equal(got.pool_bytes, want.pool_bytes);
		assert_int_equal(got.meta_bytes, want.meta_bytes);
		struct stk_stats st = {.size = sizeof(st)};
		assert_int_equal(stk_loader_stats(l, &st), 0);
		assert_int_equal(got.pool_bytes, st.pool_bytes);
		assert_true(got.total >= got.pool_bytes + got.index_bytes);
		stk_loader_destroy(l);
	}
	struct stk_memory m = {.size = sizeof(m)};
	char err[256];
	struct stk_loader_opts bad = {.size = sizeof(bad), .prefetch = 5000};
	assert_int_equal(stk_memory_estimate(&bad, 10, 100, &m, err, sizeof(err)), -ERANGE);
	assert_non_null(strstr(err, "prefetch"));
	tu_rmrf(d);
	free(d);
}

static void test_resume(void **state)
{
	(void)state;
	int64_t full[N], tail[N];
	struct stk_loader *l = make((struct stk_loader_opts){.batch_size = 6, .seed = 3, .epoch = 2});
	assert_int_equal(run_epoch(l, full, N, false), N);
	stk_loader_destroy(l);
	for (uint64_t k = 1; k < 9; k += 3) {
		l = make((struct stk_loader_opts){.batch_size = 6, .seed = 3, .epoch = 2, .start_batch = k});
		int64_t got = run_epoch(l, tail, N, true);
		assert_int_equal(got, N - (int64_t)k * 6);
		assert_memory_equal(tail, full + k * 6, (size_t)got * sizeof(int64_t));
		struct stk_loader_state st;
		stk_loader_state(l, &st);
		assert_int_equal(st.epoch, 2);
		assert_int_equal(st.batches, 9);
		stk_loader_destroy(l);
	}
	/* mid-epoch restart through stk_loader_start gives the same */
	l = make((struct stk_loader_opts){.batch_size = 6, .seed = 3});
	struct stk_batch *b;
	assert_int_equal(stk_loader_next(l, &b), 1);
	stk_batch_release(l, b);
	stk_loader_start(l, 2, 4);
	assert_int_equal(run_epoch(l, tail, N, false), N - 24);
	assert_memory_equal(tail, full + 24, (size_t)(N - 24) * sizeof(int64_t));
	stk_loader_destroy(l);
}

static void test_engines_identical(void **state)
{
	(void)state;
	char why[128];
	if (stk__uring_probe(why, sizeof(why)) < 0) {
		print_message("skipped: io_uring unavailable: %s\n", why);
		skip();
	}
	struct stk_loader *a = make((struct stk_loader_opts){.batch_size = 9, .engine = STK_ENGINE_URING});
	struct stk_loader *b = make((struct stk_loader_opts){.batch_size = 9, .engine = STK_ENGINE_PREAD,
							     .io_threads = 3});
	assert_string_equal(stk_loader_engine(a), "io_uring");
	assert_string_equal(stk_loader_engine(b), "pread");
	struct stk_batch *x, *y;
	int rx, ry;
	while ((rx = stk_loader_next(a, &x)) == 1) {
		ry = stk_loader_next(b, &y);
		assert_int_equal(ry, 1);
		assert_int_equal(x->count, y->count);
		assert_int_equal(x->data_bytes, y->data_bytes);
		assert_memory_equal(x->indices, y->indices, x->count * sizeof(int64_t));
		assert_memory_equal(x->offsets, y->offsets, (x->count + 1) * sizeof(uint64_t));
		if (x->data_bytes)
			assert_memory_equal(x->data, y->data, x->data_bytes);
		stk_batch_release(a, x);
		stk_batch_release(b, y);
	}
	assert_int_equal(rx, 0);
	assert_int_equal(stk_loader_next(b, &y), 0);
	stk_loader_destroy(a);
	stk_loader_destroy(b);
}

static void test_direct(void **state)
{
	(void)state;
	/* O_DIRECT where the filesystem allows it; a clear fallback where not */
	struct stk_loader *l = make((struct stk_loader_opts){.batch_size = 10, .flags = STK_F_DIRECT});
	int64_t got[N];
	assert_int_equal(run_epoch(l, got, N, true), N);
	stk_loader_destroy(l);
}

/* A copy of the fixture, so tests that delete files leave the shared one whole. */
static char *copy_fixture(void)
{
	char *d = tu_mkdtemp();
	char cmd[2 * PATH_MAX];
	snprintf(cmd, sizeof(cmd), "cp -r '%s'/. '%s'/", root, d);
	assert_int_equal(system(cmd), 0);
	return d;
}

static void test_deleted_file(void **state)
{
	(void)state;
	for (int policy = STK_ON_ERROR_SKIP; policy <= STK_ON_ERROR_FAIL; policy++) {
		for (int engine = STK_ENGINE_AUTO; engine <= STK_ENGINE_PREAD; engine++) {
			char *d = copy_fixture();
			struct stk_loader *l = make((struct stk_loader_opts){
				.path = d, .batch_size = 4, .prefetch = 1, .queue_depth = 2,
				.flags = STK_F_NO_SHUFFLE, .on_error = policy, .engine = engine});
			/* the first batch may be in flight already: delete a later file */
			char victim[PATH_MAX];
			assert_int_equal(stk_loader_sample(l, 30, victim, sizeof(victim), NULL, NULL), 0);
			assert_int_equal(unlink(victim), 0);
			struct stk_batch *b;
			int rc;
			int64_t samples = 0;
			while ((rc = stk_loader_next(l, &b)) == 1) {
				for (uint32_t i = 0; i < b->count; i++)
					assert_true(b->indices[i] != 30);
				samples += b->count;
				stk_batch_release(l, b);
			}
			struct stk_stats st = {.size = sizeof(st)};
			stk_loader_stats(l, &st);
			assert_int_equal(st.errors, 1);
			assert_non_null(strstr(stk_last_error(l), victim));
			assert_non_null(strstr(stk_last_error(l), "No such file"));
			if (policy == STK_ON_ERROR_SKIP) {
				assert_int_equal(rc, 0);
				assert_int_equal(samples, N - 1);
			} else {
				assert_int_equal(rc, -ENOENT);
				assert_int_equal(samples, 28); /* the batches before it */
				assert_int_equal(stk_loader_next(l, &b), -ENOENT); /* stays failed */
			}
			stk_loader_destroy(l);
			tu_rmrf(d);
			free(d);
		}
	}
}

/* A file cut short after it was indexed (its folder's mtime unchanged: the
 * cached index, with the full size, is used) is read at its size now, even
 * under fail: the batch holds its bytes as they are, no error; also when
 * read_bytes asked for a prefix longer than what is left. */
static void test_truncated_file(void **state)
{
	(void)state;
	char *d = copy_fixture();
	struct stk_loader_opts o = {.path = d, .batch_size = 64, .prefetch = 1,
				    .flags = STK_F_NO_SHUFFLE, .on_error = STK_ON_ERROR_FAIL};
	stk_loader_destroy(make(o)); /* indexed and cached with the full sizes */
	char victim[PATH_MAX];
	snprintf(victim, sizeof(victim), "%s/a_cls/005.jpg", d);
	uint8_t head[10];
	int fd = open(victim, O_RDONLY);
	assert_int_equal(read(fd, head, sizeof(head)), (ssize_t)sizeof(head));
	close(fd);
	assert_int_equal(truncate(victim, 10), 0); /* same folder mtime: cache still used */
	for (int k = 0; k < 2; k++) {
		o.read_bytes = k ? 100 : 0;
		struct stk_loader *l = make(o);
		struct stk_batch *b;
		int found = 0;
		assert_int_equal(stk_loader_next(l, &b), 1);
		for (uint32_t i = 0; i < b->count; i++) {
			char p[PATH_MAX];
			assert_int_equal(stk_loader_sample(l, b->indices[i], p, sizeof(p), NULL, NULL), 0);
			if (strcmp(p, victim))
				continue;
			found++;
			assert_int_equal(b->sizes[i], 10);
			assert_memory_equal(b->data + b->offsets[i], head, 10);
		}
		assert_int_equal(found, 1);
		struct stk_stats st = {.size = sizeof(st)};
		stk_loader_stats(l, &st);
		assert_int_equal(st.errors, 0);
		stk_batch_release(l, b);
		stk_loader_destroy(l);
	}
	tu_rmrf(d);
	free(d);
}

/* By default nothing of ours in the data's folders (scripts list them): the
 * index cache goes to the user's cache folder ($XDG_CACHE_HOME/stoker), or
 * cache_dir, under a name keyed by the dataset. */
static int count_indexes(const char *dir)
{
	int found = 0;
	DIR *dh = opendir(dir);
	for (struct dirent *de; dh && (de = readdir(dh));)
		found += strncmp(de->d_name, "index-", 6) == 0;
	if (dh)
		closedir(dh);
	return found;
}

static void default_cache_place(void)
{
	char *d = copy_fixture();
	char p[PATH_MAX];
	struct stk_loader *l;
	char dir[PATH_MAX];
	assert_true(stk_cache_dir(dir, sizeof(dir)) > 0);
	int before = count_indexes(dir);
	snprintf(p, sizeof(p), "%s/.stoker-index", d);
	l = make((struct stk_loader_opts){.path = d});
	stk_loader_destroy(l);
	assert_int_equal(access(p, F_OK), -1);
	assert_int_equal(count_indexes(dir), before + 1);
	char cd[PATH_MAX];
	snprintf(cd, sizeof(cd), "%s.cache", d);
	l = make((struct stk_loader_opts){.path = d, .cache_dir = cd});
	stk_loader_destroy(l);
	assert_int_equal(access(p, F_OK), -1);
	/* cache_dir given: the index is there, under a name keyed by the dataset */
	assert_int_equal(count_indexes(cd), 1);
	tu_rmrf(cd);
	tu_rmrf(d);
	free(d);
}

static void test_index_cache(void **state)
{
	(void)state;
	char *d = copy_fixture();
	char p[PATH_MAX];
	struct stk_loader *l;
	default_cache_place();
	l = make((struct stk_loader_opts){.path = d, .flags = STK_F_INDEX_BESIDE});
	stk_loader_destroy(l);
	snprintf(p, sizeof(p), "%s/.stoker-index", d);
	struct stat st1, st2;
	assert_int_equal(stat(p, &st1), 0); /* cached beside the data */
	l = make((struct stk_loader_opts){.path = d, .flags = STK_F_INDEX_BESIDE});
	assert_int_equal(stk_loader_num_samples(l), N);
	stk_loader_destroy(l);
	assert_int_equal(stat(p, &st2), 0);
	assert_int_equal(st1.st_ino, st2.st_ino); /* reused, not rewritten */
	/* a new file in a class folder makes it stale */
	snprintf(p, sizeof(p), "%s/b_cls/zzz.png", d);
	tu_write(p, "png", 3);
	l = make((struct stk_loader_opts){.path = d, .flags = STK_F_INDEX_BESIDE});
	assert_int_equal(stk_loader_num_samples(l), N + 1);
	stk_loader_destroy(l);
	/* a new class folder too */
	snprintf(p, sizeof(p), "%s/0_first", d);
	tu_mkdir(p);
	snprintf(p, sizeof(p), "%s/0_first/x.jpeg", d);
	tu_write(p, "j", 1);
	l = make((struct stk_loader_opts){.path = d, .flags = STK_F_NO_SHUFFLE | STK_F_INDEX_BESIDE});
	assert_int_equal(stk_loader_num_samples(l), N + 2);
	assert_string_equal(stk_loader_class_name(l, 0), "0_first");
	int64_t label;
	assert_int_equal(stk_loader_sample(l, 1, NULL, 0, NULL, &label), 0);
	assert_int_equal(label, 1);
	stk_loader_destroy(l);
	/* a corrupt cache is ignored and rebuilt */
	snprintf(p, sizeof(p), "%s/.stoker-index", d);
	assert_int_equal(truncate(p, 100), 0);
	l = make((struct stk_loader_opts){.path = d, .flags = STK_F_INDEX_BESIDE});
	assert_int_equal(stk_loader_num_samples(l), N + 2);
	stk_loader_destroy(l);
	tu_rmrf(d);
	free(d);
}

static void test_flat_and_list(void **state)
{
	(void)state;
	char *d = tu_mkdtemp();
	char p[PATH_MAX];
	for (int i = 0; i < 5; i++) {
		snprintf(p, sizeof(p), "%s/f%d.JPG", d, i);
		tu_write(p, "abc", 3);
	}
	snprintf(p, sizeof(p), "%s/data.bin", d);
	tu_write(p, "abcdef", 6);
	struct stk_loader *l = make((struct stk_loader_opts){.path = d});
	assert_int_equal(stk_loader_num_samples(l), 5);
	assert_int_equal(stk_loader_num_classes(l), 0);
	int64_t label;
	assert_int_equal(stk_loader_sample(l, 0, NULL, 0, NULL, &label), 0);
	assert_int_equal(label, -1);
	stk_loader_destroy(l);
	l = make((struct stk_loader_opts){.path = d, .extensions = "*"});
	assert_int_equal(stk_loader_num_samples(l), 6);
	stk_loader_destroy(l);

	/* a file list: relative to its folder, or absolute; optional labels */
	snprintf(p, sizeof(p), "%s/list.txt", d);
	char abs[PATH_MAX], text[2 * PATH_MAX];
	snprintf(abs, sizeof(abs), "%s/f2.JPG", d);
	snprintf(text, sizeof(text), "data.bin\t7\n# a comment\n%s\nf1.JPG\t3\n", abs);
	tu_write(p, text, strlen(text));
	l = make((struct stk_loader_opts){.path = p, .flags = STK_F_NO_SHUFFLE});
	assert_int_equal(stk_loader_num_samples(l), 3);
	int64_t got[3];
	struct stk_batch *b;
	assert_int_equal(stk_loader_next(l, &b), 1);
	assert_int_equal(b->count, 3);
	assert_int_equal(b->labels[0], 7);
	assert_int_equal(b->labels[1], -1);
	assert_int_equal(b->labels[2], 3);
	assert_int_equal(b->sizes[0], 6);
	assert_memory_equal(b->data + b->offsets[0], "abcdef", 6);
	stk_batch_release(l, b);
	(void)got;
	stk_loader_destroy(l);
	/* a list naming a missing file: refused under the fail policy, naming the
	 * line; left out and counted under skip */
	snprintf(text, sizeof(text), "f0.JPG\nmissing.jpg\n");
	tu_write(p, text, strlen(text));
	struct stk_loader_opts o = {.size = sizeof(o), .path = p, .on_error = STK_ON_ERROR_FAIL};
	char err[512];
	assert_int_equal(stk_loader_create(&l, &o, err, sizeof(err)), -ENOENT);
	assert_null(l);
	assert_non_null(strstr(err, "list.txt:2"));
	assert_non_null(strstr(err, "missing.jpg"));
	o.on_error = STK_ON_ERROR_SKIP;
	o.flags = STK_F_QUIET;
	assert_int_equal(stk_loader_create(&l, &o, err, sizeof(err)), 0);
	assert_int_equal(stk_loader_num_samples(l), 1);
	struct stk_stats st = {.size = sizeof(st)};
	stk_loader_stats(l, &st);
	assert_int_equal(st.index_errors, 1);
	assert_int_equal(st.errors, 1);
	assert_non_null(strstr(stk_last_error(l), "missing.jpg"));
	stk_loader_destroy(l);
	tu_rmrf(d);
	free(d);
}

static void test_bad_input(void **state)
{
	(void)state;
	struct stk_loader *l;
	char err[512];
	struct stk_loader_opts o = {.size = sizeof(o), .path = "/nonexistent/stoker/data"};
	assert_int_equal(stk_loader_create(&l, &o, err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, "/nonexistent/stoker/data"));
	o.path = root;
	o.rank = 2;
	o.world_size = 2;
	assert_int_equal(stk_loader_create(&l, &o, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "rank"));
	char *d = tu_mkdtemp();
	o = (struct stk_loader_opts){.size = sizeof(o), .path = d};
	assert_int_equal(stk_loader_create(&l, &o, err, sizeof(err)), STK_EEMPTY);
	assert_non_null(strstr(err, "no samples"));
	tu_rmrf(d);
	free(d);
	assert_string_equal(stk_err_name(STK_ESHORT), "STK_ESHORT");
	assert_string_equal(stk_err_name(-ENOENT), "ENOENT");
	assert_non_null(strstr(stk_strerror(STK_ENOSLOT), "slot"));
}

static void test_slots_held(void **state)
{
	(void)state;
	struct stk_loader *l = make((struct stk_loader_opts){.batch_size = 4, .prefetch = 2});
	struct stk_batch *a, *b, *c;
	assert_int_equal(stk_loader_next(l, &a), 1);
	assert_int_equal(stk_loader_next(l, &b), 1);
	assert_int_equal(stk_loader_next(l, &c), STK_ENOSLOT);
	/* batches stay valid while held; releasing out of order is fine */
	stk_batch_release(l, b);
	assert_int_equal(stk_loader_next(l, &c), 1);
	assert_int_equal(c->number, 2);
	stk_batch_release(l, a);
	stk_batch_release(l, c);
	stk_loader_destroy(l);
}

/* Slots come back without the loader's lock, and a waiting I/O thread is
 * woken once half the pool is free (or when the consumer is about to wait):
 * batches released in any order, twice, or by another thread while the
 * consumer waits all come back, and every batch still holds its own bytes. */
struct releaser {
	struct stk_loader *l;
	struct stk_batch *q[16];
	unsigned head, tail;
	bool done;
	pthread_mutex_t mu;
	pthread_cond_t cv;
};

static void *releaser_main(void *arg)
{
	struct releaser *r = arg;
	pthread_mutex_lock(&r->mu);
	for (;;) {
		while (r->head == r->tail && !r->done)
			pthread_cond_wait(&r->cv, &r->mu);
		if (r->head == r->tail)
			break;
		struct stk_batch *b = r->q[r->head++ % 16];
		pthread_mutex_unlock(&r->mu);
		struct timespec d = {0, 200000}; /* the consumer reaches its next wait first */
		nanosleep(&d, NULL);
		stk_batch_release(r->l, b);
		pthread_mutex_lock(&r->mu);
	}
	pthread_mutex_unlock(&r->mu);
	return NULL;
}

/* A batch within 10 s: a lost wake fails the test instead of hanging it. */
static int next_or_hang(struct stk_loader *l, struct stk_batch **b)
{
	int rc = stk_loader_next_timeout(l, b, 10000000000ull);
	if (rc == -ETIMEDOUT)
		fail_msg("no batch in 10 s: the I/O thread was not woken");
	return rc;
}

static void test_release_patterns(void **state)
{
	(void)state;
	for (uint32_t prefetch = 1; prefetch <= 8; prefetch++) {
		struct stk_loader *l = make((struct stk_loader_opts){.batch_size = 2,
								     .prefetch = prefetch});
		struct stk_batch *held[8], *b;
		unsigned nh = 0, step = 0;
		int64_t samples = 0;
		int rc;
		for (uint64_t epoch = 0; epoch < 3; epoch++) {
			assert_int_equal(stk_loader_start(l, epoch, 0), 0);
			while ((rc = next_or_hang(l, &b)) == 1) {
				check_batch(l, b);
				samples += b->count;
				held[nh++] = b;
				step++;
				/* keep between 0 and prefetch - 1 held; give back one from the middle */
				while (nh > step % prefetch) {
					unsigned k = step % nh;
					stk_batch_release(l, held[k]);
					if (step % 3 == 0)
						stk_batch_release(l, held[k]); /* twice: once counts */
					held[k] = held[--nh];
				}
			}
			assert_int_equal(rc, 0);
		}
		while (nh)
			stk_batch_release(l, held[--nh]);
		assert_int_equal(samples, 3 * N);

		/* released by another thread, late, while this one waits in next */
		struct releaser r = {.l = l};
		pthread_mutex_init(&r.mu, NULL);
		pthread_cond_init(&r.cv, NULL);
		pthread_t t;
		assert_int_equal(pthread_create(&t, NULL, releaser_main, &r), 0);
		assert_int_equal(stk_loader_start(l, 3, 0), 0);
		samples = 0;
		while ((rc = next_or_hang(l, &b)) == 1 || rc == STK_ENOSLOT) {
			if (rc == STK_ENOSLOT) { /* all held by the releaser: let it catch up */
				struct timespec d = {0, 1000000};
				nanosleep(&d, NULL);
				continue;
			}
			check_batch(l, b);
			samples += b->count;
			pthread_mutex_lock(&r.mu);
			r.q[r.tail++ % 16] = b;
			pthread_cond_signal(&r.cv);
			pthread_mutex_unlock(&r.mu);
		}
		assert_int_equal(rc, 0);
		assert_int_equal(samples, N);
		pthread_mutex_lock(&r.mu);
		r.done = true;
		pthread_cond_signal(&r.cv);
		pthread_mutex_unlock(&r.mu);
		pthread_join(t, NULL);
		pthread_mutex_destroy(&r.mu);
		pthread_cond_destroy(&r.cv);
		stk_loader_destroy(l);
	}
}

static void test_slot_too_small(void **state)
{
	(void)state;
	/* a slot smaller than some batches: what does not fit is skipped and named */
	struct stk_loader *l = make((struct stk_loader_opts){.batch_size = 8, .slot_bytes = 30000});
	int64_t got[N];
	int64_t k = run_epoch(l, got, N, true);
	struct stk_stats st = {.size = sizeof(st)};
	stk_loader_stats(l, &st);
	assert_true(k < N);
	assert_int_equal(st.errors, N - k);
	assert_non_null(strstr(stk_last_error(l), "raise slot_bytes"));
	stk_loader_destroy(l);
	l = make((struct stk_loader_opts){.batch_size = 8, .slot_bytes = 30000,
					  .on_error = STK_ON_ERROR_FAIL});
	struct stk_batch *b;
	int rc;
	while ((rc = stk_loader_next(l, &b)) == 1)
		stk_batch_release(l, b);
	assert_int_equal(rc, STK_ETOOBIG);
	stk_loader_destroy(l);
}

static void *stop_later(void *l)
{
	struct timespec d = {0, 100000000};
	nanosleep(&d, NULL);
	stk_loader_stop(l);
	return NULL;
}

static uint64_t mono_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static void test_timeout_and_stop(void **state)
{
	(void)state;
	struct stk_loader *l = make((struct stk_loader_opts){.batch_size = 4, .prefetch = 2,
							     .queue_depth = 4,
							     .engine = STK_ENGINE_NULL,
							     .null_latency_ns = 300000000});
	struct stk_batch *b;
	assert_int_equal(stk_loader_next_timeout(l, &b, 10000000), -ETIMEDOUT);
	assert_null(b);
	int rc;
	while ((rc = stk_loader_next_timeout(l, &b, 20000000)) == -ETIMEDOUT)
		;
	assert_int_equal(rc, 1);
	/* the polls were one wait of about the read latency, not the last poll's */
	struct stk_stats st = {.size = sizeof(st)};
	stk_loader_stats(l, &st);
	assert_true(st.wait_max_ns >= 250000000);
	stk_loader_destroy(l);

	/* stop: threads joined, the held batch stays readable until destroy */
	l = make((struct stk_loader_opts){.batch_size = 4, .prefetch = 2});
	assert_int_equal(stk_loader_next(l, &b), 1);
	stk_loader_stop(l);
	stk_loader_stop(l); /* idempotent */
	char path[PATH_MAX];
	assert_int_equal(stk_loader_sample(l, b->indices[0], path, sizeof(path), NULL, NULL), 0);
	FILE *f = fopen(path, "rb");
	assert_non_null(f);
	uint8_t want[20000];
	size_t got = fread(want, 1, sizeof(want), f);
	fclose(f);
	assert_int_equal(got, b->sizes[0]);
	if (got)
		assert_memory_equal(b->data + b->offsets[0], want, got);
	struct stk_batch *c;
	assert_int_equal(stk_loader_next(l, &c), -ECANCELED);
	assert_int_equal(stk_loader_start(l, 1, 0), -ECANCELED);
	stk_batch_release(l, b);
	stk_loader_destroy(l);

	/* a stop from another thread wakes a consumer waiting for a batch whose
	 * reads are in flight (3 s each) at once, not when they land */
	l = make((struct stk_loader_opts){.batch_size = 4, .prefetch = 2, .queue_depth = 4,
					  .engine = STK_ENGINE_NULL,
					  .null_latency_ns = 3000000000ull});
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, stop_later, l), 0);
	uint64_t t0 = mono_ns();
	assert_int_equal(stk_loader_next_timeout(l, &b, 10000000000ull), -ECANCELED);
	uint64_t dt = mono_ns() - t0;
	if (dt > 1500000000ull)
		fail_msg("stk_loader_next returned %.2f s after the stop, when the reads landed",
			 (double)dt / 1e9 - 0.1);
	pthread_join(t, NULL);
	stk_loader_destroy(l);
}

static void test_null_engine_and_stats(void **state)
{
	(void)state;
	struct stk_loader *l = make((struct stk_loader_opts){.batch_size = 10,
							     .engine = STK_ENGINE_NULL,
							     .null_latency_ns = 200000});
	assert_string_equal(stk_loader_engine(l), "null");
	int64_t got[N];
	assert_int_equal(run_epoch(l, got, N, false), N);
	struct stk_stats st = {.size = sizeof(st)};
	assert_int_equal(stk_loader_stats(l, &st), 0);
	assert_int_equal(st.samples, N);
	assert_int_equal(st.batches, 6);
	assert_true(st.read_p50_ns >= 200000);
	assert_true(st.inflight_max >= 1);
	assert_true(st.pool_bytes > 0);
	struct stk_hist *h;
	assert_int_equal(stk_hist_create(&h), 0);
	assert_int_equal(stk_loader_hist(l, STK_HIST_READ, h), 0);
	assert_int_equal(stk_hist_count(h), N);
	stk_hist_destroy(h);
	stk_loader_destroy(l);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_sample_once),
		cmocka_unit_test(test_imagefolder_labels),
		cmocka_unit_test(test_order_deterministic),
		cmocka_unit_test(test_rank_from_environment),
		cmocka_unit_test(test_memory_rule),
		cmocka_unit_test(test_ranks),
		cmocka_unit_test(test_resume),
		cmocka_unit_test(test_engines_identical),
		cmocka_unit_test(test_direct),
		cmocka_unit_test(test_deleted_file),
		cmocka_unit_test(test_truncated_file),
		cmocka_unit_test(test_index_cache),
		cmocka_unit_test(test_flat_and_list),
		cmocka_unit_test(test_bad_input),
		cmocka_unit_test(test_slots_held),
		cmocka_unit_test(test_release_patterns),
		cmocka_unit_test(test_slot_too_small),
		cmocka_unit_test(test_timeout_and_stop),
		cmocka_unit_test(test_null_engine_and_stats),
	};
	return cmocka_run_group_tests_name("loader", tests, setup, teardown);
}
