/* test_tune.c — what the loader chooses when left to it: the queue depth
 * probe finds the knee of a device modelled by the null engine (K channels
 * of fixed latency: throughput stops rising at depth K), climbing from a
 * quarter of the storage's planned depth, an explicit depth
 * wins, O_DIRECT is chosen only for a dataset larger than the page cache,
 * the choices are reported (stats, stk_loader_tuning), a stop in the
 * middle of a probe is prompt, and the verdict's advice on I/O threads
 * follows what the tuner found (never more of what gained nothing, never a
 * core that is not free), and O_DIRECT reads of files have their metadata
 * looked up ahead of the ring's opens (loader/meta.c), a missing file still
 * the read's error. */
#include "testutil.h"

#include "stoker/stoker.h"
#include "stoker/sys.h"
#include "loader/loader.h"

#include <errno.h>
#include <limits.h>
#include <time.h>

static char *root;

/* 2000 files of 1000-4990 bytes. */
static size_t fill(uint8_t *buf, int c, int i)
{
	(void)c;
	size_t n = (size_t)(1000 + i % 400 * 10);
	memset(buf, 7, n);
	return n;
}

static int setup(void **state)
{
	(void)state;
	root = tu_mkdtemp();
	static const char *const one[] = {"c"};
	tu_tree(root, 1, one, NULL, 2000, "%04d.jpg", 5000, fill);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	tu_rmrf(root);
	free(root);
	return 0;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static struct stk_loader *make(struct stk_loader_opts o)
{
	o.size = sizeof(o);
	o.flags |= STK_F_QUIET;
	o.path = root;
	struct stk_loader *l = NULL;
	char err[512];
	int rc = stk_loader_create(&l, &o, err, sizeof(err));
	if (rc)
		fail_msg("create: %s (%s)", err, stk_err_name(rc));
	return l;
}

/* Consumes epochs until `seconds` have passed; returns the epochs run. */
static int consume(struct stk_loader *l, double seconds)
{
	double t0 = now_s();
	int epochs = 0;
	for (uint64_t e = 0; now_s() - t0 < seconds; e++) {
		assert_int_equal(stk_loader_start(l, e, 0), 0);
		struct stk_batch *b;
		int rc;
		while ((rc = stk_loader_next(l, &b)) == 1)
			stk_batch_release(l, b);
		assert_int_equal(rc, 0);
		epochs++;
	}
	return epochs;
}

/* One probe on a fresh loader: 0 when it found the knee (16, or 32 with a
 * noisy window under the 5 % rule), -1 with its reasoning in `why`. */
static int probe_once(char *why, size_t cap)
{
	struct stk_loader *l = make((struct stk_loader_opts){.batch_size = 16, .prefetch = 8,
							     .engine = STK_ENGINE_NULL,
							     .null_latency_ns = 10000000});
	consume(l, 5.0);
	struct stk_stats st = {.size = sizeof(st)};
	assert_int_equal(stk_loader_stats(l, &st), 0);
	assert_true(stk_loader_tuning(l, why, cap) > 0);
	print_message("%s\n", why);
	assert_int_equal(st.probes >= 1, 1);
	assert_non_null(strstr(why, "queue depth"));
	assert_non_null(strstr(why, "auto"));
	assert_non_null(strstr(why, "16: "));
	/* the climb starts two doublings below the storage's plan (a deeper
	 * start spent a cold epoch's first third past the knee) */
	struct stk_io_plan plan = {.size = sizeof(plan)};
	assert_int_equal(stk_io_plan(NULL, root, &plan), 0);
	unsigned most = l->tune.max_qd; /* what the slots and engines hold */
	unsigned planned = plan.queue_depth < most ? plan.queue_depth : most;
	unsigned start = planned / 4 > 8 ? planned / 4 : 8;
	start = start < most ? start : most;
	char first[32];
	snprintf(first, sizeof(first), "probe 1: %u: ", start);
	if (!strstr(why, first))
		fail_msg("the probe did not start at %u (plan %u): %s", start, plan.queue_depth, why);
	/* each level's fill (reads in flight over the depth) is a share, not
	 * an unsigned difference of clocks gone below zero */
	for (unsigned i = 0; i < l->tune.npts; i++)
		if (!(l->tune.pts[i].fill >= 0 && l->tune.pts[i].fill < 1.5))
			fail_msg("level %u: fill %g", l->tune.pts[i].qd, l->tune.pts[i].fill);
	unsigned qd = st.queue_depth;
	stk_loader_destroy(l);
	return qd == 16 || qd == 32 ? 0 : -1;
}

static void test_probe_finds_the_knee(void **state)
{
	(void)state;
	/* 16 channels of 10 ms: 1600 reads/s at depth 16 and above.  The probe
	 * times windows of real time: on a machine starved of CPU (the sanitizers,
	 * other jobs) one window can stall, so a miss is probed once more on a
	 * fresh loader; two misses fail. */
	setenv("STOKER_NULL_CHANNELS", "16", 1);
	char why[1024];
	if (probe_once(why, sizeof(why)) != 0) {
		print_message("probe missed the knee once, probing again\n");
		if (probe_once(why, sizeof(why)) != 0)
			fail_msg("queue depth away from the knee at 16 twice: %s", why);
	}
	unsetenv("STOKER_NULL_CHANNELS");
}

/* O_DIRECT reads go to the device: while the opens are cold the probe
 * never steps below where it started (a cold epoch's first levels wait on
 * their opens' metadata and read flat, which walked the depth down to 8 on
 * a disk that wanted 32 and more).  The same knee at 16 as above, the climb starting at 32; the null
 * engine stands in for the device (it reads nothing, so the loader never
 * takes it for O_DIRECT: the flag O_DIRECT sets is set by hand, before the
 * climb's end). */
static void test_direct_never_below_the_start(void **state)
{
	(void)state;
	setenv("STOKER_NULL_CHANNELS", "16", 1);
	struct stk_loader *l = NULL;
	/* set before the first level closes (40 ms of reads at the least); a
	 * starved test thread that comes later tries a fresh loader */
	for (int tries = 0; !l; tries++) {
		l = make((struct stk_loader_opts){.batch_size = 16, .prefetch = 8,
						  .engine = STK_ENGINE_NULL,
						  .null_latency_ns = 10000000});
		pthread_mutex_lock(&l->mu);
		bool early = l->tune.npts == 0;
		l->tune.floor_start = true;
		pthread_mutex_unlock(&l->mu);
		if (!early) {
			if (tries == 4)
				fail_msg("the probe's first level closed before the test could set the floor");
			stk_loader_destroy(l);
			l = NULL;
		}
	}
	struct stk_stats st = {.size = sizeof(st)};
	consume(l, 3.0);
	char why[1024];
	assert_int_equal(stk_loader_stats(l, &st), 0);
	assert_true(stk_loader_tuning(l, why, sizeof(why)) > 0);
	print_message("%s\n", why);
	unsigned start = l->tune.plan_qd / 4 > 8 ? l->tune.plan_qd / 4 : 8;
	start = start < l->tune.max_qd ? start : l->tune.max_qd;
	assert_true(l->tune.npts >= 1);
	for (unsigned i = 0; i < l->tune.npts; i++)
		if (l->tune.pts[i].qd < start)
			fail_msg("probed %u, below the start %u: %s", l->tune.pts[i].qd, start, why);
	if (st.queue_depth < start)
		fail_msg("queue depth %u below the start %u: %s", st.queue_depth, start, why);
	stk_loader_destroy(l);
	unsetenv("STOKER_NULL_CHANNELS");
}

/* On O_DIRECT, once loader/meta.c's lookups are ahead of the reads (set by
 * hand here: the null engine has no opens), the probe may go one halving
 * below its start and no further: a device that reads alike at every depth
 * (4 channels) is probed at start/2 and never at start/4. */
static void test_direct_one_halving_when_warm(void **state)
{
	(void)state;
	setenv("STOKER_NULL_CHANNELS", "4", 1);
	struct stk_loader *l = NULL;
	for (int tries = 0; !l; tries++) {
		l = make((struct stk_loader_opts){.batch_size = 16, .prefetch = 8,
						  .engine = STK_ENGINE_NULL, .io_threads = 128,
						  .null_latency_ns = 10000000});
		pthread_mutex_lock(&l->mu);
		/* a plan of 128 (virtio's), so the start (32) is two halvings above
		 * the probe's least depth (8), whatever disk the tests run on (the
		 * null engine's one thread takes io_threads reads at most) */
		bool early = l->tune.npts == 0 && !l->tune.warmed;
		l->tune.plan_qd = l->tune.max_qd < 128 ? l->tune.max_qd : 128;
		l->tune.floor_start = true;
		l->meta_warm = true;
		pthread_mutex_unlock(&l->mu);
		if (!early) {
			if (tries == 4)
				fail_msg("the probe's first window closed before the test could set it up");
			stk_loader_destroy(l);
			l = NULL;
		}
	}
	/* the epoch create started (a start would be a restart: opens cold again) */
	double t0 = now_s();
	struct stk_batch *b;
	while (now_s() - t0 < 3.0 && stk_loader_next(l, &b) == 1)
		stk_batch_release(l, b);
	char why[1024];
	assert_true(stk_loader_tuning(l, why, sizeof(why)) > 0);
	print_message("%s\n", why);
	unsigned start = l->tune.plan_qd / 4 > 8 ? l->tune.plan_qd / 4 : 8;
	start = start < l->tune.max_qd ? start : l->tune.max_qd;
	unsigned lowest = start / 2 > 8 ? start / 2 : 8;
	bool halved = false;
	assert_true(l->tune.npts >= 2);
	for (unsigned i = 0; i < l->tune.npts; i++) {
		if (l->tune.pts[i].qd < lowest)
			fail_msg("probed %u, below %u (start %u): %s", l->tune.pts[i].qd, lowest, start, why);
		halved |= l->tune.pts[i].qd == start / 2;
	}
	if (start / 2 >= 8 && !halved)
		fail_msg("never probed %u, half the start, with the opens warm: %s", start / 2, why);
	stk_loader_destroy(l);
	unsetenv("STOKER_NULL_CHANNELS");
}

static void test_explicit_depth_wins(void **state)
{
	(void)state;
	setenv("STOKER_NULL_CHANNELS", "16", 1);
	struct stk_loader *l = make((struct stk_loader_opts){.batch_size = 16, .prefetch = 8,
							     .queue_depth = 5,
							     .engine = STK_ENGINE_NULL,
							     .null_latency_ns = 2000000});
	consume(l, 1.0);
	struct stk_stats st = {.size = sizeof(st)};
	assert_int_equal(stk_loader_stats(l, &st), 0);
	assert_int_equal(st.queue_depth, 5);
	assert_int_equal(st.probes, 0);
	assert_true(st.inflight_max <= 5);
	char why[1024];
	stk_loader_tuning(l, why, sizeof(why));
	assert_non_null(strstr(why, "queue depth 5 (asked)"));
	stk_loader_destroy(l);
	unsetenv("STOKER_NULL_CHANNELS");
}

/* A stop while the probe climbs returns promptly (no wait on a window). */
static void test_stop_during_probe(void **state)
{
	(void)state;
	setenv("STOKER_NULL_CHANNELS", "64", 1);
	struct stk_loader *l = make((struct stk_loader_opts){.batch_size = 16, .prefetch = 8,
							     .engine = STK_ENGINE_NULL,
							     .null_latency_ns = 20000000});
	struct stk_batch *b;
	assert_int_equal(stk_loader_next(l, &b), 1);
	stk_batch_release(l, b);
	double t0 = now_s();
	stk_loader_stop(l);
	double dt = now_s() - t0;
	if (dt > 0.1)
		fail_msg("stop took %.0f ms during the probe", dt * 1000);
	assert_int_equal(stk_loader_next(l, &b), -ECANCELED);
	stk_loader_destroy(l);
	unsetenv("STOKER_NULL_CHANNELS");
}

static void test_direct_policy(void **state)
{
	(void)state;
	char why[1024];
	/* 2000 files of ~3 KB fit in any page cache */
	struct stk_loader *l = make((struct stk_loader_opts){.batch_size = 16});
	struct stk_stats st = {.size = sizeof(st)};
	assert_int_equal(stk_loader_stats(l, &st), 0);
	assert_int_equal(st.direct, 0);
	stk_loader_tuning(l, why, sizeof(why));
	assert_non_null(strstr(why, "reads: buffered (auto: the dataset"));
	stk_loader_destroy(l);
	/* a page cache of 100 KB: too small, O_DIRECT where the filesystem takes it */
	setenv("STOKER_PAGE_CACHE_BYTES", "100000", 1);
	l = make((struct stk_loader_opts){.batch_size = 16});
	assert_int_equal(stk_loader_stats(l, &st), 0);
	stk_loader_tuning(l, why, sizeof(why));
	if (st.direct)
		assert_non_null(strstr(why, "reads: O_DIRECT (auto: the dataset"));
	else
		assert_non_null(strstr(why, "refuses O_DIRECT")); /* e.g. tmpfs */
	int64_t seen = 0;
	struct stk_batch *b;
	int rc;
	while ((rc = stk_loader_next(l, &b)) == 1) {
		for (uint32_t i = 0; i < b->count; i++) {
			uint64_t size;
			assert_int_equal(stk_loader_sample(l, b->indices[i], NULL, 0, &size, NULL), 0);
			assert_int_equal(b->sizes[i], size);
			const uint8_t *d = b->data + b->offsets[i];
			for (uint64_t k = 0; k < size; k++)
				if (d[k] != 7)
					fail_msg("sample %lld byte %llu differs", (long long)b->indices[i],
						 (unsigned long long)k);
		}
		seen += b->count;
		stk_batch_release(l, b);
	}
	assert_int_equal(rc, 0);
	assert_int_equal(seen, 2000);
	stk_loader_destroy(l);
	/* asked for buffered: buffered whatever the size */
	l = make((struct stk_loader_opts){.batch_size = 16, .flags = STK_F_BUFFERED});
	assert_int_equal(stk_loader_stats(l, &st), 0);
	assert_int_equal(st.direct, 0);
	stk_loader_tuning(l, why, sizeof(why));
	assert_non_null(strstr(why, "reads: buffered (asked)"));
	stk_loader_destroy(l);
	unsetenv("STOKER_PAGE_CACHE_BYTES");
}

/* The files looked up ahead, from the tuning text's metadata line; -1: no line. */
static long long looked_up(struct stk_loader *l)
{
	char why[2048];
	assert_true(stk_loader_tuning(l, why, sizeof(why)) > 0);
	const char *m = strstr(why, "file metadata: ");
	if (!m)
		return -1;
	assert_non_null(strstr(m, "files looked up ahead"));
	return strtoll(m + strlen("file metadata: "), NULL, 10);
}

/* The epoch create started, to its end: samples seen, their bytes checked;
 * errors into *errs. */
static int64_t epoch_checked(struct stk_loader *l, uint64_t *errs)
{
	int64_t seen = 0;
	struct stk_batch *b;
	int rc;
	while ((rc = stk_loader_next(l, &b)) == 1) {
		for (uint32_t i = 0; i < b->count; i++) {
			uint64_t size;
			assert_int_equal(stk_loader_sample(l, b->indices[i], NULL, 0, &size, NULL), 0);
			assert_int_equal(b->sizes[i], size);
			const uint8_t *p = b->data + b->offsets[i];
			for (uint64_t k = 0; k < size; k++)
				if (p[k] != 7)
					fail_msg("sample %lld byte %llu differs", (long long)b->indices[i],
						 (unsigned long long)k);
		}
		seen += b->count;
		stk_batch_release(l, b);
	}
	assert_int_equal(rc, 0);
	struct stk_stats st = {.size = sizeof(st)};
	assert_int_equal(stk_loader_stats(l, &st), 0);
	*errs = st.total_errors;
	return seen;
}

static void test_metadata_ahead(void **state)
{
	(void)state;
	for (int engine = STK_ENGINE_URING; engine <= STK_ENGINE_PREAD; engine++) {
		/* O_DIRECT: every file of the epoch looked up ahead, at most once (the
		 * walk starts at the batch being sent and jumps to the claims when
		 * behind), a file deleted after the index still the read's error */
		struct stk_loader *l = make((struct stk_loader_opts){
			.batch_size = 16, .prefetch = 2, .queue_depth = 8, .engine = engine,
			.flags = STK_F_DIRECT | STK_F_NO_SHUFFLE, .on_error = STK_ON_ERROR_SKIP});
		struct stk_stats st = {.size = sizeof(st)};
		assert_int_equal(stk_loader_stats(l, &st), 0);
		if (!st.direct) {
			print_message("skipped: the filesystem under %s refuses O_DIRECT\n", root);
			stk_loader_destroy(l);
			return;
		}
		char victim[PATH_MAX];
		assert_int_equal(stk_loader_sample(l, 1500, victim, sizeof(victim), NULL, NULL), 0);
		char keep[PATH_MAX + 8];
		snprintf(keep, sizeof(keep), "%s.keep", victim);
		assert_int_equal(rename(victim, keep), 0);
		uint64_t errs;
		int64_t seen = epoch_checked(l, &errs);
		assert_int_equal(rename(keep, victim), 0);
		assert_int_equal(seen, 1999);
		assert_int_equal(errs, 1);
		long long n = looked_up(l);
		print_message("%s: %lld files looked up ahead\n", engine == STK_ENGINE_URING ? "io_uring"
											 : "pread", n);
		if (n < 1 || n > 2000)
			fail_msg("%lld files looked up ahead of 2000", n);
		stk_loader_destroy(l);
		/* buffered reads: their later epochs come from the page cache */
		l = make((struct stk_loader_opts){.batch_size = 16, .engine = engine,
						   .flags = STK_F_BUFFERED});
		assert_int_equal(epoch_checked(l, &errs), 2000);
		assert_int_equal(looked_up(l), -1);
		stk_loader_destroy(l);
	}
	/* off for measuring */
	setenv("STOKER_NO_META_AHEAD", "1", 1);
	struct stk_loader *l = make((struct stk_loader_opts){.batch_size = 16, .flags = STK_F_DIRECT});
	uint64_t errs;
	assert_int_equal(epoch_checked(l, &errs), 2000);
	assert_int_equal(looked_up(l), -1);
	stk_loader_destroy(l);
	unsetenv("STOKER_NO_META_AHEAD");
}

static void test_rings_advice_follows_the_tuner(void **state)
{
	(void)state;
	char b[256];
	/* the tuner added a second I/O thread and measured no gain */
	struct stk__rings_facts f = {.found = STK__RINGS_NO_GAIN, .busy = 0.9, .auto_rings = true,
				     .uring = true, .active = 1, .nrings = 2, .free_cpus = 4,
				     .cpus = 8};
	stk__rings_advice(&f, b, sizeof(b));
	assert_null(strstr(b, "more io_threads ("));
	assert_non_null(strstr(b, "not more io_threads: the tuner measured no gain past 1"));
	/* still rising with every one, but no CPU free (2 CPUs: the trainer's, 2 rings) */
	f = (struct stk__rings_facts){.found = STK__RINGS_RISING, .busy = 0.9, .auto_rings = true,
				      .uring = true, .active = 2, .nrings = 2, .free_cpus = 0,
				      .cpus = 2};
	stk__rings_advice(&f, b, sizeof(b));
	assert_null(strstr(b, "more io_threads"));
	assert_null(strstr(b, "free core"));
	assert_non_null(strstr(b, "more CPUs for the loader: none is free (2 CPUs: the trainer's, "
				  "2 I/O threads)"));
	assert_non_null(strstr(b, "the tuner gained with every I/O thread"));
	/* free CPUs: the count to ask for, and how many are free */
	f.free_cpus = 3;
	f.cpus = 8;
	stk__rings_advice(&f, b, sizeof(b));
	assert_non_null(strstr(b, "more io_threads (--io-threads 3: 3 CPUs free of 8)"));
	assert_non_null(strstr(b, "gained with every I/O thread"));
	/* the pread pool: its workers' count, not a core each */
	f = (struct stk__rings_facts){.found = STK__RINGS_UNTRIED, .busy = -1, .nrings = 64,
				      .cpus = 2};
	stk__rings_advice(&f, b, sizeof(b));
	assert_non_null(strstr(b, "pread workers, 64 now"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_probe_finds_the_knee),
		cmocka_unit_test(test_direct_never_below_the_start),
		cmocka_unit_test(test_direct_one_halving_when_warm),
		cmocka_unit_test(test_explicit_depth_wins),
		cmocka_unit_test(test_stop_during_probe),
		cmocka_unit_test(test_direct_policy),
		cmocka_unit_test(test_metadata_ahead),
		cmocka_unit_test(test_rings_advice_follows_the_tuner),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
