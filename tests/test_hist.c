/* test_hist.c — the latency histogram (stk_hist_*): percentiles against known
 * distributions, merging, min/max/mean, bucket iteration, the empty case.
 *
 * The reference is the exact nearest-rank percentile of the sorted values;
 * the histogram promises 1/128 relative bucket width, so 1 % is the bound.
 * Public API only; no temp folders, so no testutil.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>

#include "stoker/stoker.h"

static const double pcts[] = {1, 10, 25, 50, 75, 90, 99, 99.9, 100};

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Nearest rank, the rule stk_hist_percentile documents. */
static uint64_t exact(const uint64_t *sorted, size_t n, double pct)
{
	uint64_t rank = (uint64_t)(pct / 100.0 * (double)n + 0.999999999);
	if (rank < 1)
		rank = 1;
	return sorted[rank - 1];
}

static uint64_t rng_next(uint64_t *s)
{
	uint64_t x = (*s += 0x9e3779b97f4a7c15ull);
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static double uniform01(uint64_t *s)
{
	return ((double)(rng_next(s) >> 11) + 0.5) / 9007199254740992.0;
}

static struct stk_hist *hist_new(void)
{
	struct stk_hist *h = NULL;
	assert_int_equal(stk_hist_create(&h), 0);
	assert_non_null(h);
	return h;
}

/* Fills a histogram with v[0..n), then checks every percentile, the count,
 * min, max and mean against the values themselves. */
static void check_against(uint64_t *v, size_t n)
{
	struct stk_hist *h = hist_new();
	double sum = 0;
	for (size_t i = 0; i < n; i++) {
		stk_hist_add(h, v[i]);
		sum += (double)v[i];
	}
	qsort(v, n, sizeof(*v), cmp_u64);
	assert_int_equal(stk_hist_count(h), n);
	assert_int_equal(stk_hist_min(h), v[0]);
	assert_int_equal(stk_hist_max(h), v[n - 1]);
	assert_true(fabs(stk_hist_mean(h) - sum / (double)n) <= 1e-9 * sum / (double)n + 1e-9);
	for (size_t i = 0; i < sizeof(pcts) / sizeof(pcts[0]); i++) {
		double want = (double)exact(v, n, pcts[i]);
		double got = (double)stk_hist_percentile(h, pcts[i]);
		if (fabs(got - want) > 0.01 * want)
			fail_msg("p%g: histogram %.0f, exact %.0f (%.3f %% off)", pcts[i], got, want,
				 100 * fabs(got - want) / want);
	}
	stk_hist_destroy(h);
}

static void test_empty(void **state)
{
	(void)state;
	struct stk_hist *h = hist_new();
	assert_int_equal(stk_hist_count(h), 0);
	assert_int_equal(stk_hist_min(h), 0);
	assert_int_equal(stk_hist_max(h), 0);
	assert_true(stk_hist_mean(h) == 0.0);
	for (size_t i = 0; i < sizeof(pcts) / sizeof(pcts[0]); i++)
		assert_int_equal(stk_hist_percentile(h, pcts[i]), 0);
	uint32_t cur = 0;
	uint64_t up, cnt;
	assert_int_equal(stk_hist_bucket_next(h, &cur, &up, &cnt), 0);
	stk_hist_destroy(h);
}

static void test_constant(void **state)
{
	(void)state;
	static const uint64_t values[] = {0, 1, 127, 128, 1000, 123456, 987654321, 1ull << 40};
	for (size_t k = 0; k < sizeof(values) / sizeof(values[0]); k++) {
		struct stk_hist *h = hist_new();
		for (int i = 0; i < 1000; i++)
			stk_hist_add(h, values[k]);
		/* every percentile lies in the one bucket, clamped to min = max: exact */
		for (size_t i = 0; i < sizeof(pcts) / sizeof(pcts[0]); i++)
			assert_int_equal(stk_hist_percentile(h, pcts[i]), values[k]);
		assert_int_equal(stk_hist_min(h), values[k]);
		assert_int_equal(stk_hist_max(h), values[k]);
		assert_true(stk_hist_mean(h) == (double)values[k]);
		stk_hist_destroy(h);
	}
}

static void test_uniform(void **state)
{
	(void)state;
	/* 1 µs .. 10 ms, the range of storage latencies */
	size_t n = 200000;
	uint64_t *v = malloc(n * sizeof(*v)), s = 1;
	assert_non_null(v);
	for (size_t i = 0; i < n; i++)
		v[i] = 1000 + (uint64_t)(uniform01(&s) * 9999000.0);
	check_against(v, n);
	/* and the exact grid 1..n, through the exact buckets below 128 too */
	for (size_t i = 0; i < n; i++)
		v[i] = i + 1;
	check_against(v, n);
	free(v);
}

static void test_exponential(void **state)
{
	(void)state;
	/* mean 100 µs: the long tail p99 / p99.9 depend on */
	size_t n = 200000;
	uint64_t *v = malloc(n * sizeof(*v)), s = 7;
	assert_non_null(v);
	for (size_t i = 0; i < n; i++)
		v[i] = (uint64_t)(-log(uniform01(&s)) * 100000.0) + 1;
	check_against(v, n);
	free(v);
}

static void test_lognormal_wide(void **state)
{
	(void)state;
	/* spans ns to seconds: every power of two in between */
	size_t n = 100000;
	uint64_t *v = malloc(n * sizeof(*v)), s = 11;
	assert_non_null(v);
	for (size_t i = 0; i < n; i++) {
		double z = sqrt(-2 * log(uniform01(&s))) * cos(2 * M_PI * uniform01(&s));
		v[i] = (uint64_t)exp(log(50000.0) + 3.0 * z) + 1;
	}
	check_against(v, n);
	free(v);
}

static void test_merge(void **state)
{
	(void)state;
	struct stk_hist *a = hist_new(), *b = hist_new(), *all = hist_new(), *m = hist_new();
	uint64_t s = 3;
	for (int i = 0; i < 50000; i++) {
		uint64_t x = 2000 + rng_next(&s) % 100000;        /* fast device */
		uint64_t y = 500000 + rng_next(&s) % 5000000;     /* slow device */
		stk_hist_add(a, x);
		stk_hist_add(b, y);
		stk_hist_add(all, x);
		stk_hist_add(all, y);
	}
	stk_hist_merge(m, a);
	stk_hist_merge(m, b);
	assert_int_equal(stk_hist_count(m), stk_hist_count(all));
	assert_int_equal(stk_hist_min(m), stk_hist_min(all));
	assert_int_equal(stk_hist_max(m), stk_hist_max(all));
	assert_true(stk_hist_mean(m) == stk_hist_mean(all));
	for (double p = 0; p <= 100; p += 0.5)
		assert_int_equal(stk_hist_percentile(m, p), stk_hist_percentile(all, p));
	assert_int_equal(stk_hist_percentile(m, 99.9), stk_hist_percentile(all, 99.9));
	/* bucket by bucket */
	uint32_t c1 = 0, c2 = 0;
	uint64_t u1, n1, u2, n2;
	int r1, r2;
	do {
		r1 = stk_hist_bucket_next(m, &c1, &u1, &n1);
		r2 = stk_hist_bucket_next(all, &c2, &u2, &n2);
		assert_int_equal(r1, r2);
		if (r1) {
			assert_int_equal(u1, u2);
			assert_int_equal(n1, n2);
		}
	} while (r1);
	/* merging an empty histogram changes nothing, min included */
	struct stk_hist *e = hist_new();
	stk_hist_merge(m, e);
	assert_int_equal(stk_hist_min(m), stk_hist_min(all));
	assert_int_equal(stk_hist_count(m), stk_hist_count(all));
	/* and reset empties it */
	stk_hist_reset(m);
	assert_int_equal(stk_hist_count(m), 0);
	assert_int_equal(stk_hist_percentile(m, 50), 0);
	stk_hist_destroy(a);
	stk_hist_destroy(b);
	stk_hist_destroy(all);
	stk_hist_destroy(m);
	stk_hist_destroy(e);
}

static void test_min_max_mean(void **state)
{
	(void)state;
	struct stk_hist *h = hist_new();
	stk_hist_add(h, 300);
	stk_hist_add(h, 100);
	stk_hist_add(h, 200);
	assert_int_equal(stk_hist_count(h), 3);
	assert_int_equal(stk_hist_min(h), 100);
	assert_int_equal(stk_hist_max(h), 300);
	assert_true(fabs(stk_hist_mean(h) - 200.0) < 1e-12);
	assert_int_equal(stk_hist_percentile(h, 0), 100);
	assert_int_equal(stk_hist_percentile(h, 100), 300);
	/* out-of-range percentiles are clamped, not undefined */
	assert_int_equal(stk_hist_percentile(h, -5), 100);
	assert_int_equal(stk_hist_percentile(h, 250), 300);
	stk_hist_destroy(h);
}

static void test_buckets(void **state)
{
	(void)state;
	struct stk_hist *h = hist_new();
	/* below 128 every value has its own bucket */
	stk_hist_add(h, 5);
	stk_hist_add(h, 5);
	stk_hist_add(h, 7);
	uint32_t cur = 0;
	uint64_t up, cnt;
	assert_int_equal(stk_hist_bucket_next(h, &cur, &up, &cnt), 1);
	assert_int_equal(up, 5);
	assert_int_equal(cnt, 2);
	assert_int_equal(stk_hist_bucket_next(h, &cur, &up, &cnt), 1);
	assert_int_equal(up, 7);
	assert_int_equal(cnt, 1);
	assert_int_equal(stk_hist_bucket_next(h, &cur, &up, &cnt), 0);
	stk_hist_destroy(h);

	/* above, a value's bucket ends at or above it, less than 1/128 further */
	uint64_t s = 5;
	for (int i = 0; i < 2000; i++) {
		uint64_t shift = rng_next(&s) % 60;
		uint64_t v = rng_next(&s) >> shift;
		h = hist_new();
		stk_hist_add(h, v);
		cur = 0;
		assert_int_equal(stk_hist_bucket_next(h, &cur, &up, &cnt), 1);
		assert_int_equal(cnt, 1);
		assert_true(up >= v);
		assert_true((double)(up - v) <= (double)v / 128.0);
		stk_hist_destroy(h);
	}

	/* iteration: upper bounds rise, counts add up to the total */
	h = hist_new();
	for (int i = 0; i < 100000; i++)
		stk_hist_add(h, rng_next(&s) % 10000000);
	cur = 0;
	uint64_t total = 0, last = 0;
	int first = 1;
	while (stk_hist_bucket_next(h, &cur, &up, &cnt)) {
		assert_true(first || up > last);
		assert_true(cnt > 0);
		first = 0;
		last = up;
		total += cnt;
	}
	assert_int_equal(total, stk_hist_count(h));
	assert_true(last >= stk_hist_max(h));
	stk_hist_destroy(h);
}

static void test_huge_values(void **state)
{
	(void)state;
	struct stk_hist *h = hist_new();
	stk_hist_add(h, UINT64_MAX);
	stk_hist_add(h, 1ull << 63);
	assert_int_equal(stk_hist_max(h), UINT64_MAX);
	assert_int_equal(stk_hist_min(h), 1ull << 63);
	assert_true(stk_hist_percentile(h, 100) >= (1ull << 63));
	stk_hist_destroy(h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_empty),        cmocka_unit_test(test_constant),
		cmocka_unit_test(test_uniform),      cmocka_unit_test(test_exponential),
		cmocka_unit_test(test_lognormal_wide), cmocka_unit_test(test_merge),
		cmocka_unit_test(test_min_max_mean), cmocka_unit_test(test_buckets),
		cmocka_unit_test(test_huge_values),
	};
	return cmocka_run_group_tests_name("hist", tests, NULL, NULL);
}
