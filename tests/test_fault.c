/* test_fault.c — the fault suite: each way a dataset goes bad under a
 * training job (issue 11's classes) gives the right samples or a counted,
 * named error, never a wrong sample nor a lost count.  One test per class;
 * tests/cli_fault.sh covers the command line, tests/python/test_fault.py
 * the binding. */
#include "testutil.h"

#include "stoker/stoker.h"

#include <errno.h>
#include <limits.h>
#include <time.h>

#define NCLASS 3
#define PER_CLASS 20
#define N (NCLASS * PER_CLASS)
#define MAXLEN 9000

/* Deterministic content of file (c, i): its length and bytes. */
static size_t fill(uint8_t *buf, int c, int i)
{
	size_t len = 100 + (size_t)((c * 7919 + i * 104729) % (MAXLEN - 100));
	for (size_t k = 0; k < len; k++)
		buf[k] = (uint8_t)(k * 131 + (size_t)c * 17 + (size_t)i * 3);
	return len;
}

/* A fresh ImageFolder dataset: NCLASS classes of PER_CLASS files. */
static char *make_dataset(void)
{
	char *d = tu_mkdtemp();
	char p[PATH_MAX];
	uint8_t buf[MAXLEN];
	for (int c = 0; c < NCLASS; c++) {
		snprintf(p, sizeof(p), "%s/c%d", d, c);
		tu_mkdir(p);
		for (int i = 0; i < PER_CLASS; i++) {
			size_t len = fill(buf, c, i);
			snprintf(p, sizeof(p), "%s/c%d/%03d.jpg", d, c, i);
			tu_write(p, buf, len);
		}
	}
	return d;
}

static void drop_dataset(char *d)
{
	tu_rmrf(d);
	free(d);
}

static int try_make(struct stk_loader **l, struct stk_loader_opts o, char *err, size_t errlen)
{
	o.size = sizeof(o);
	o.flags |= STK_F_QUIET;
	return stk_loader_create(l, &o, err, errlen);
}

static struct stk_loader *make(struct stk_loader_opts o)
{
	struct stk_loader *l = NULL;
	char err[PATH_MAX + 256];
	int rc = try_make(&l, o, err, sizeof(err));
	if (rc)
		fail_msg("create %s: %s (%s)", o.path, err, stk_err_name(rc));
	return l;
}

/* What one epoch delivered. */
struct epoch {
	int64_t samples, batches, wrong;
	int rc;
	uint64_t errors;
};

/* Runs the loader's current epoch to its end, checking every sample's bytes
 * and label against the file on disk now (a mismatch is a wrong sample). */
static struct epoch run_epoch(struct stk_loader *l)
{
	struct epoch e = {0};
	struct stk_batch *b;
	uint8_t *want = malloc(MAXLEN + 1);
	assert_non_null(want);
	while ((e.rc = stk_loader_next(l, &b)) == 1) {
		e.batches++;
		for (uint32_t i = 0; i < b->count; i++) {
			char path[PATH_MAX];
			uint64_t size;
			int64_t label;
			e.samples++;
			assert_int_equal(stk_loader_sample(l, b->indices[i], path, sizeof(path), &size,
							   &label), 0);
			FILE *f = fopen(path, "rb");
			size_t got = f ? fread(want, 1, MAXLEN + 1, f) : 0;
			if (f)
				fclose(f);
			char cls[16];
			snprintf(cls, sizeof(cls), "/c%lld/", (long long)b->labels[i]);
			if (!f || got != b->sizes[i] || memcmp(b->data + b->offsets[i], want, got) ||
			    !strstr(path, cls))
				e.wrong++;
		}
		stk_batch_release(l, b);
	}
	free(want);
	struct stk_stats st = {.size = sizeof(st)};
	assert_int_equal(stk_loader_stats(l, &st), 0);
	e.errors = st.errors;
	return e;
}

static void sample_path(struct stk_loader *l, int64_t i, char *path, size_t len)
{
	assert_int_equal(stk_loader_sample(l, i, path, len, NULL, NULL), 0);
}

/* Class 5: a reset of the counters next to a (re)start never loses an error.
 * The bad file is the first read of every epoch, so its error lands while the
 * caller is between start and reset; any order, any delay, many times. */
static void test_reset_keeps_errors(void **state)
{
	(void)state;
	char *d = make_dataset();
	for (int engine = STK_ENGINE_AUTO; engine <= STK_ENGINE_PREAD; engine++) {
		struct stk_loader *l = make((struct stk_loader_opts){
			.path = d, .batch_size = 4, .prefetch = 4, .queue_depth = 8,
			.flags = STK_F_NO_SHUFFLE, .engine = engine});
		char victim[PATH_MAX];
		sample_path(l, 0, victim, sizeof(victim));
		assert_int_equal(truncate(victim, 10), 0); /* a short read every epoch */
		for (int iter = 0; iter < 150; iter++) {
			struct timespec ts = {0, (iter % 7) * 20000L};
			if (iter % 2) {
				assert_int_equal(stk_loader_start(l, (uint64_t)iter, 0), 0);
				nanosleep(&ts, NULL);
				stk_loader_stats_reset(l);
			} else {
				stk_loader_stats_reset(l);
				nanosleep(&ts, NULL);
				assert_int_equal(stk_loader_start(l, (uint64_t)iter, 0), 0);
			}
			struct epoch e = run_epoch(l);
			assert_int_equal(e.rc, 0);
			assert_int_equal(e.wrong, 0);
			assert_int_equal(e.samples, N - 1);
			if (e.errors != 1)
				fail_msg("iteration %d (engine %d): %llu errors counted, 1 happened", iter,
					 engine, (unsigned long long)e.errors);
		}
		stk_loader_destroy(l);
		/* the next run indexes afresh: the file is whole again */
		uint8_t buf[MAXLEN];
		tu_write(victim, buf, fill(buf, 0, 0));
	}
	drop_dataset(d);
}

/* Class 8: options the index shows cannot work are refused at create, and an
 * option out of range is named. */
static void test_refused_options(void **state)
{
	(void)state;
	char *d = make_dataset();
	struct stk_loader *l = NULL;
	char err[PATH_MAX + 256];
	/* the largest file: c?/0??.jpg of MAXLEN - 1 bytes at most */
	uint64_t biggest = 0;
	int bc = 0, bi = 0;
	uint8_t buf[MAXLEN];
	for (int c = 0; c < NCLASS; c++)
		for (int i = 0; i < PER_CLASS; i++)
			if (fill(buf, c, i) > biggest) {
				biggest = fill(buf, c, i);
				bc = c;
				bi = i;
			}
	char want[64];
	snprintf(want, sizeof(want), "c%d/%03d.jpg", bc, bi);
	assert_int_equal(try_make(&l, (struct stk_loader_opts){.path = d, .slot_bytes = biggest - 1},
				  err, sizeof(err)), -ERANGE);
	assert_null(l);
	assert_non_null(strstr(err, "slot_bytes"));
	assert_non_null(strstr(err, want));
	l = make((struct stk_loader_opts){.path = d, .slot_bytes = biggest});
	stk_loader_destroy(l);
	static const struct {
		struct stk_loader_opts o;
		const char *name;
	} bad[] = {
		{{.queue_depth = 1000000000}, "queue_depth"},
		{{.batch_size = 1u << 21}, "batch_size"},
		{{.prefetch = 5000}, "prefetch"},
		{{.io_threads = 1000}, "io_threads"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct stk_loader_opts o = bad[i].o;
		o.path = d;
		assert_int_equal(try_make(&l, o, err, sizeof(err)), -ERANGE);
		assert_non_null(strstr(err, bad[i].name));
	}
	drop_dataset(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_reset_keeps_errors),
		cmocka_unit_test(test_refused_options),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
