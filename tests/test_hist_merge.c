/* test_hist_merge.c — histograms from other processes (stoker bench|disk under
 * mpirun send each rank's to rank 0): merged from their bucket lists with
 * stk_hist_merge_buckets they equal stk_hist_merge of the histograms
 * themselves, bucket for bucket, count, min, max, mean and percentiles. */
#include "testutil.h"

#include "stoker/stoker.h"

static uint64_t rng = 88172645463325252ull;
static uint64_t next(void)
{
	return tu_xorshift64(&rng);
}

/* What a rank sends: its buckets, min, max and sum; merged into dst. */
static void merge_remote(struct stk_hist *dst, const struct stk_hist *src)
{
	uint64_t up[8192], ct[8192];
	size_t n = 0;
	uint32_t cur = 0;
	while (n < 8192 && stk_hist_bucket_next(src, &cur, &up[n], &ct[n]))
		n++;
	stk_hist_merge_buckets(dst, up, ct, n, stk_hist_min(src), stk_hist_max(src),
			       stk_hist_sum(src));
}

static void test_same_as_merge(void **state)
{
	(void)state;
	struct stk_hist *ranks[5], *local, *remote;
	assert_int_equal(stk_hist_create(&local), 0);
	assert_int_equal(stk_hist_create(&remote), 0);
	for (int r = 0; r < 5; r++) {
		assert_int_equal(stk_hist_create(&ranks[r]), 0);
		int n = r == 3 ? 0 : 1000 + r * 3777; /* rank 3: nothing (a skipped case) */
		for (int i = 0; i < n; i++) {
			/* log-uniform from 50 ns to ~1 s, each rank its own range */
			uint64_t v = 50 + (next() % (1ull << (10 + (next() % (18 + r)))));
			stk_hist_add(ranks[r], v);
		}
		stk_hist_merge(local, ranks[r]);
		merge_remote(remote, ranks[r]);
	}
	assert_int_equal(stk_hist_count(remote), stk_hist_count(local));
	assert_int_equal(stk_hist_min(remote), stk_hist_min(local));
	assert_int_equal(stk_hist_max(remote), stk_hist_max(local));
	assert_int_equal(stk_hist_sum(remote), stk_hist_sum(local));
	assert_true(stk_hist_mean(remote) == stk_hist_mean(local));
	const double pct[] = {0, 1, 10, 50, 90, 99, 99.9, 99.99, 100};
	for (size_t i = 0; i < sizeof(pct) / sizeof(pct[0]); i++)
		assert_int_equal(stk_hist_percentile(remote, pct[i]), stk_hist_percentile(local, pct[i]));
	uint32_t a = 0, b = 0;
	uint64_t ua, ca, ub, cb;
	int ka, kb;
	do { /* bucket for bucket */
		ka = stk_hist_bucket_next(local, &a, &ua, &ca);
		kb = stk_hist_bucket_next(remote, &b, &ub, &cb);
		assert_int_equal(ka, kb);
		if (ka) {
			assert_int_equal(ua, ub);
			assert_int_equal(ca, cb);
		}
	} while (ka);
	/* an empty list adds nothing, not even a min */
	struct stk_hist *e;
	assert_int_equal(stk_hist_create(&e), 0);
	stk_hist_merge_buckets(e, NULL, NULL, 0, 5, 10, 15);
	assert_int_equal(stk_hist_count(e), 0);
	assert_int_equal(stk_hist_min(e), 0);
	stk_hist_destroy(e);
	for (int r = 0; r < 5; r++)
		stk_hist_destroy(ranks[r]);
	stk_hist_destroy(local);
	stk_hist_destroy(remote);
}

int main(void)
{
	const struct CMUnitTest tests[] = {cmocka_unit_test(test_same_as_merge)};
	return cmocka_run_group_tests_name("hist_merge", tests, NULL, NULL);
}
