/* test_shards.c — tar shards in the loader: a folder packed into shards reads
 * back the same bytes and labels; global and shard shuffles are permutations
 * (shard mode keeps reads near each other, and reads each shard ahead in
 * order, once an epoch, when buffered); stale indexes are rebuilt; a
 * damaged shard is named with its offset, or indexed up to the damage. */
#include "testutil.h"

#include "stoker/stoker.h"
#include "loader/loader.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>

#define N 90

static char *root;

static size_t content(uint8_t *buf, int i)
{
	size_t len = (size_t)(1 + (i * 7919) % 9000);
	for (size_t k = 0; k < len; k++)
		buf[k] = (uint8_t)(k * 13 + (size_t)i);
	return len;
}

/* Packs samples [0, N) into shards of `per` samples with Python's tarfile in
 * `format` (GNU_FORMAT, PAX_FORMAT, USTAR_FORMAT); key i, label i % 3. */
static void pack(const char *dir, int per, const char *format, const char *prefix)
{
	char script[PATH_MAX * 2];
	snprintf(script, sizeof(script),
		 "/usr/bin/python3 -c '\n"
		 "import tarfile, io, sys\n"
		 "d, per, fmt, pre = sys.argv[1], int(sys.argv[2]), getattr(tarfile, sys.argv[3]), sys.argv[4]\n"
		 "for s in range(0, %d, per):\n"
		 "  with tarfile.open(\"%%s/%%s-%%06d.tar\" %% (d, pre, s // per), \"w\", format=fmt) as t:\n"
		 "    for i in range(s, min(s + per, %d)):\n"
		 "      data = open(\"%%s/src/%%04d.bin\" %% (d, i), \"rb\").read()\n"
		 "      for name, b in ((\"%%08d.bin\" %% i, data), (\"%%08d.cls\" %% i, b\"%%d\\n\" %% (i %% 3))):\n"
		 "        ti = tarfile.TarInfo(name); ti.size = len(b); t.addfile(ti, io.BytesIO(b))\n"
		 "' %s %d %s %s",
		 N, N, dir, per, format, prefix);
	assert_int_equal(system(script), 0);
}

static int setup(void **state)
{
	(void)state;
	root = tu_mkdtemp();
	char p[PATH_MAX];
	uint8_t buf[9000];
	snprintf(p, sizeof(p), "%s/src", root);
	tu_mkdir(p);
	for (int i = 0; i < N; i++) {
		snprintf(p, sizeof(p), "%s/src/%04d.bin", root, i);
		tu_write(p, buf, content(buf, i));
	}
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	tu_rmrf(root);
	free(root);
	return 0;
}

static char *shard_dir(int per, const char *format)
{
	char *d = tu_mkdtemp();
	char cmd[PATH_MAX * 2];
	snprintf(cmd, sizeof(cmd), "cp -r '%s/src' '%s/src'", root, d);
	assert_int_equal(system(cmd), 0);
	pack(d, per, format, "train");
	snprintf(cmd, sizeof(cmd), "rm -r '%s/src'", d);
	assert_int_equal(system(cmd), 0);
	return d;
}

static struct stk_loader *make(struct stk_loader_opts o, char *err, size_t errlen)
{
	o.size = sizeof(o);
	o.flags |= STK_F_QUIET;
	struct stk_loader *l = NULL;
	int rc = stk_loader_create(&l, &o, err, errlen);
	if (rc)
		fail_msg("create: %s (%s)", err, stk_err_name(rc));
	return l;
}

/* Reads an epoch; checks bytes and labels against the sources; returns the order. */
static int64_t epoch_check(struct stk_loader *l, int64_t *order, bool check)
{
	struct stk_batch *b;
	int rc;
	int64_t k = 0;
	uint8_t want[9000];
	while ((rc = stk_loader_next(l, &b)) == 1) {
		for (uint32_t i = 0; i < b->count; i++) {
			int64_t idx = b->indices[i];
			assert_true(idx >= 0 && idx < N);
			order[k++] = idx;
			if (!check)
				continue;
			/* in pack order, dataset index i is sample i */
			size_t len = content(want, (int)idx);
			assert_int_equal(b->sizes[i], len);
			assert_memory_equal(b->data + b->offsets[i], want, len);
			assert_int_equal(b->labels[i], idx % 3);
		}
		stk_batch_release(l, b);
	}
	assert_int_equal(rc, 0);
	return k;
}

static int64_t epoch(struct stk_loader *l, int64_t *order)
{
	return epoch_check(l, order, true);
}

static void test_round_trip_formats(void **state)
{
	(void)state;
	const char *formats[] = {"GNU_FORMAT", "PAX_FORMAT", "USTAR_FORMAT"};
	for (size_t f = 0; f < 3; f++) {
		char *d = shard_dir(25, formats[f]);
		char err[512];
		for (int direct = 0; direct < 2; direct++) {
			struct stk_loader *l = make((struct stk_loader_opts){
				.path = d, .batch_size = 8, .flags = STK_F_NO_SHUFFLE | (direct ? STK_F_DIRECT : 0)},
				err, sizeof(err));
			assert_int_equal(stk_loader_num_samples(l), N);
			int64_t order[N];
			assert_int_equal(epoch(l, order), N);
			for (int i = 0; i < N; i++)
				assert_int_equal(order[i], i);
			stk_loader_destroy(l);
		}
		/* a brace pattern and a glob name the same set */
		char pat[PATH_MAX];
		snprintf(pat, sizeof(pat), "%s/train-{000000..000003}.tar", d);
		struct stk_loader *l = make((struct stk_loader_opts){.path = pat, .batch_size = 8}, err,
					    sizeof(err));
		assert_int_equal(stk_loader_num_samples(l), N);
		stk_loader_destroy(l);
		snprintf(pat, sizeof(pat), "%s/train-00000[01].tar", d);
		l = make((struct stk_loader_opts){.path = pat, .batch_size = 8}, err, sizeof(err));
		assert_int_equal(stk_loader_num_samples(l), 50);
		stk_loader_destroy(l);
		tu_rmrf(d);
		free(d);
	}
}

static void test_shuffle_modes(void **state)
{
	(void)state;
	char *d = shard_dir(30, "GNU_FORMAT");
	char err[512];
	for (int mode = STK_SHUFFLE_GLOBAL; mode <= STK_SHUFFLE_SHARD; mode++) {
		int64_t a[N], b[N];
		struct stk_loader *l = make((struct stk_loader_opts){.path = d, .batch_size = 7, .seed = 5,
							     .shuffle_mode = mode,
							     .shuffle_window = 8},
					    err, sizeof(err));
		assert_int_equal(epoch(l, a), N);
		stk_loader_start(l, 1, 0);
		assert_int_equal(epoch(l, b), N);
		stk_loader_destroy(l);
		int seen[N] = {0};
		for (int i = 0; i < N; i++)
			seen[a[i]]++;
		for (int i = 0; i < N; i++)
			assert_int_equal(seen[i], 1); /* a permutation */
		assert_memory_not_equal(a, b, sizeof(a)); /* another epoch, another order */
		int switches = 0;
		for (int i = 1; i < N; i++)
			switches += a[i] / 30 != a[i - 1] / 30;
		print_message("mode %d: %d shard switches in %d samples\n", mode, switches, N);
		if (mode == STK_SHUFFLE_SHARD)
			assert_true(switches <= 25); /* shard by shard, give or take the window */
		else
			assert_true(switches > 40); /* anywhere: about 2/3 of the steps */
	}
	/* shard mode needs shards */
	struct stk_loader *l;
	struct stk_loader_opts o = {.size = sizeof(o), .path = root, .extensions = "*",
				    .shuffle_mode = STK_SHUFFLE_SHARD, .flags = STK_F_QUIET};
	assert_int_equal(stk_loader_create(&l, &o, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "shard"));
	tu_rmrf(d);
	free(d);
}

/* Shard shuffle, buffered: every shard is read ahead front to back, each
 * byte once an epoch (the ranges asked for are contiguous from 0: ra_end
 * only grows, by what ra_bytes counts); global shuffle and O_DIRECT read
 * nothing ahead. */
static void test_shard_stream_read_ahead(void **state)
{
	(void)state;
	char *d = shard_dir(30, "GNU_FORMAT");
	char err[512], why[1024];
	struct stk_loader *l = make((struct stk_loader_opts){.path = d, .batch_size = 7, .seed = 5,
						     .shuffle_mode = STK_SHUFFLE_SHARD,
						     .shuffle_window = 8, .flags = STK_F_BUFFERED},
				    err, sizeof(err));
	assert_true(l->stream_ra);
	assert_int_equal(l->nshards, 3);
	uint64_t total = 0;
	for (uint32_t k = 0; k < l->nshards; k++)
		total += l->shards[k].size;
	int64_t order[N];
	for (uint64_t e = 0; e < 2; e++) {
		if (e)
			assert_int_equal(stk_loader_start(l, e, 0), 0);
		assert_int_equal(epoch(l, order), N);
		for (uint32_t k = 0; k < l->nshards; k++) {
			assert_true(l->shards[k].stamped);
			assert_int_equal(l->shards[k].ra_end, l->shards[k].size);
		}
		assert_int_equal(l->ra_bytes, (e + 1) * total); /* each byte once an epoch */
	}
	stk_loader_tuning(l, why, sizeof(why));
	assert_non_null(strstr(why, "each shard read ahead in order"));
	stk_loader_destroy(l);
	for (int direct = 0; direct < 2; direct++) {
		struct stk_loader_opts o = {.path = d, .batch_size = 7, .seed = 5,
					    .shuffle_mode = direct ? STK_SHUFFLE_SHARD : STK_SHUFFLE_GLOBAL,
					    .shuffle_window = 8,
					    .flags = direct ? STK_F_DIRECT : STK_F_BUFFERED};
		l = make(o, err, sizeof(err));
		assert_false(l->stream_ra && !direct);
		assert_int_equal(epoch(l, order), N);
		if (!direct || l->direct) /* (a filesystem that refuses O_DIRECT reads buffered) */
			assert_int_equal(l->ra_bytes, 0);
		stk_loader_destroy(l);
	}
	tu_rmrf(d);
	free(d);
}

static void test_stale_index(void **state)
{
	(void)state;
	char *d = shard_dir(30, "GNU_FORMAT");
	char err[512], p[PATH_MAX];
	struct stk_loader *l = make((struct stk_loader_opts){.path = d, .flags = STK_F_INDEX_BESIDE}, err, sizeof(err));
	stk_loader_destroy(l);
	snprintf(p, sizeof(p), "%s/.stoker-index", d);
	struct stat st;
	assert_int_equal(stat(p, &st), 0);
	/* a shard rewritten with fewer members: its size changed */
	char cmd[PATH_MAX * 2];
	snprintf(cmd, sizeof(cmd),
		 "/usr/bin/python3 -c 'import tarfile,io;t=tarfile.open(\"%s/train-000002.tar\",\"w\");"
		 "b=b\"x\";i=tarfile.TarInfo(\"a.bin\");i.size=1;t.addfile(i,io.BytesIO(b));t.close()'",
		 d);
	assert_int_equal(system(cmd), 0);
	l = make((struct stk_loader_opts){.path = d, .flags = STK_F_INDEX_BESIDE}, err, sizeof(err));
	assert_int_equal(stk_loader_num_samples(l), 61);
	stk_loader_destroy(l);
	/* a shard removed */
	snprintf(p, sizeof(p), "%s/train-000000.tar", d);
	assert_int_equal(unlink(p), 0);
	l = make((struct stk_loader_opts){.path = d, .flags = STK_F_INDEX_BESIDE}, err, sizeof(err));
	assert_int_equal(stk_loader_num_samples(l), 31);
	stk_loader_destroy(l);
	tu_rmrf(d);
	free(d);
}

static void test_damaged_shard(void **state)
{
	(void)state;
	char *d = shard_dir(30, "GNU_FORMAT");
	char err[512], p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/train-000001.tar", d);
	struct stat st;
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(truncate(p, st.st_size / 2 + 100), 0); /* cut mid-member */
	struct stk_loader *l;
	struct stk_loader_opts o = {.size = sizeof(o), .path = d, .on_error = STK_ON_ERROR_FAIL,
				    .flags = STK_F_QUIET};
	assert_int_equal(stk_loader_create(&l, &o, err, sizeof(err)), STK_ECORRUPT);
	assert_non_null(strstr(err, "train-000001.tar"));
	assert_non_null(strstr(err, "offset"));
	/* skip: the samples before the damage are kept, the loss is counted */
	l = make((struct stk_loader_opts){.path = d, .flags = STK_F_NO_SHUFFLE}, err, sizeof(err));
	int64_t n = stk_loader_num_samples(l);
	assert_true(n > 60 && n < N);
	int64_t order[N];
	/* indices after the cut no longer match the keys: count only */
	assert_int_equal(epoch_check(l, order, false), n);
	struct stk_stats s = {.size = sizeof(s)};
	stk_loader_stats(l, &s);
	assert_int_equal(s.errors, 1);
	assert_non_null(strstr(stk_last_error(l), "train-000001.tar"));
	stk_loader_destroy(l);
	/* not a tar at all */
	snprintf(p, sizeof(p), "%s/train-000002.tar", d);
	tu_write(p, "this is not a tar file, just text that happens to be long enough..", 66);
	o.path = p;
	assert_int_equal(stk_loader_create(&l, &o, err, sizeof(err)), STK_ECORRUPT);
	assert_non_null(strstr(err, "train-000002.tar"));
	tu_rmrf(d);
	free(d);
}

/* A shard changed after the loader opened it: cut short, a read names the
 * shard and the member's offset (STK_ESHORT); a member's header overwritten
 * in place is caught by its check (STK_ECORRUPT), never handed out as bytes
 * of another member.  Both read paths: buffered and O_DIRECT. */
static void test_changed_after_create(void **state)
{
	(void)state;
	for (int direct = 0; direct < 2; direct++) {
		char *d = shard_dir(30, "GNU_FORMAT");
		char err[512], p[PATH_MAX], name[PATH_MAX];
		struct stk_loader *l = make((struct stk_loader_opts){
			.path = d, .batch_size = 16, .on_error = STK_ON_ERROR_SKIP,
			.flags = STK_F_NO_SHUFFLE | (direct ? STK_F_DIRECT : STK_F_BUFFERED)},
			err, sizeof(err));
		struct stk_loader *l2 = make((struct stk_loader_opts){
			.path = d, .batch_size = 16, .on_error = STK_ON_ERROR_FAIL,
			.flags = STK_F_NO_SHUFFLE | (direct ? STK_F_DIRECT : STK_F_BUFFERED)},
			err, sizeof(err));
		/* sample 45 (shard 1): its header zeroed; shard 2 cut after sample 65 */
		uint64_t at, size, at2, size2;
		assert_int_equal(stk_loader_sample_extent(l, 45, name, sizeof(name), &at, &size), 0);
		assert_non_null(strstr(name, "train-000001.tar"));
		assert_int_equal(stk_loader_sample_extent(l, 65, p, sizeof(p), &at2, &size2), 0);
		assert_non_null(strstr(p, "train-000002.tar"));
		uint8_t zero[512] = {0};
		int fd = open(name, O_WRONLY);
		assert_true(fd >= 0);
		assert_int_equal(pwrite(fd, zero, 512, (off_t)(at - 512)), 512);
		close(fd);
		assert_int_equal(truncate(p, (off_t)(at2 + size2)), 0);
		/* the batches in flight were read before the change: start over */
		assert_int_equal(stk_loader_start(l, 0, 0), 0);
		int64_t order[N];
		int64_t got = epoch_check(l, order, true); /* whatever comes, bytes are right */
		struct stk_stats st = {.size = sizeof(st)};
		stk_loader_stats(l, &st);
		/* 66..89 gone with the cut; 45 caught where its header was read */
		assert_true(st.errors >= 24);
		assert_int_equal(got + (int64_t)st.errors, N);
		bool found45 = false;
		for (int64_t i = 0; i < got; i++)
			found45 |= order[i] == 45;
		if (!direct || (at % 4096) >= 512)
			assert_false(found45);
		stk_loader_destroy(l);
		/* fail policy: the error names the shard and an offset */
		l = l2;
		assert_int_equal(stk_loader_start(l, 0, 0), 0);
		struct stk_batch *b;
		int rc;
		while ((rc = stk_loader_next(l, &b)) == 1)
			stk_batch_release(l, b);
		assert_true(rc == STK_ECORRUPT || rc == STK_ESHORT);
		const char *e = stk_last_error(l);
		assert_non_null(strstr(e, ".tar"));
		assert_non_null(strstr(e, "offset"));
		stk_loader_destroy(l);
		tu_rmrf(d);
		free(d);
	}
}

static void test_duplicate_key(void **state)
{
	(void)state;
	char *d = tu_mkdtemp();
	char cmd[PATH_MAX * 2], err[512];
	snprintf(cmd, sizeof(cmd),
		 "/usr/bin/python3 -c 'import tarfile,io\nt=tarfile.open(\"%s/x.tar\",\"w\")\n"
		 "for n in (\"a.jpg\",\"a.cls\",\"b.jpg\",\"a.txt\"):\n"
		 "  i=tarfile.TarInfo(n);b=b\"1\";i.size=1;t.addfile(i,io.BytesIO(b))\nt.close()'",
		 d);
	assert_int_equal(system(cmd), 0);
	struct stk_loader *l;
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/x.tar", d);
	struct stk_loader_opts o = {.size = sizeof(o), .path = p, .on_error = STK_ON_ERROR_FAIL,
				    .flags = STK_F_QUIET};
	assert_int_equal(stk_loader_create(&l, &o, err, sizeof(err)), STK_ECORRUPT);
	assert_non_null(strstr(err, "duplicate key"));
	assert_non_null(strstr(err, "x.tar"));
	tu_rmrf(d);
	free(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip_formats),
		cmocka_unit_test(test_shuffle_modes),
		cmocka_unit_test(test_shard_stream_read_ahead),
		cmocka_unit_test(test_stale_index),
		cmocka_unit_test(test_damaged_shard),
		cmocka_unit_test(test_duplicate_key),
		cmocka_unit_test(test_changed_after_create),
	};
	return cmocka_run_group_tests_name("shards", tests, setup, teardown);
}
