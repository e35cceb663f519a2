/*
 * hist.c — latency histograms.
 *
 * Histograms are log-linear, as fio's and HdrHistogram's: values below 128 get a
 * bucket each; above, each power of two is split into 128 equal buckets, so a
 * bucket is at most 1/128 (0.8 %) of its value wide.  Buckets are relaxed
 * atomics: any number of threads add at once, merging is adding arrays, and a
 * snapshot taken while others add is off by at most the adds in progress.
 */
#include "base/internal.h"

#include <stdlib.h>
#include <string.h>

#define SUB_BITS 7
#define SUB (1u << SUB_BITS)
#define NBUCKETS ((64 - SUB_BITS + 1) * SUB)

struct stk_hist {
	_Atomic uint64_t bucket[NBUCKETS];
	_Atomic uint64_t count;
	_Atomic uint64_t sum;
	_Atomic uint64_t min;
	_Atomic uint64_t max;
};

static uint32_t bucket_of(uint64_t v)
{
	if (v < SUB)
		return (uint32_t)v;
	unsigned e = 63 - (unsigned)__builtin_clzll(v); /* >= SUB_BITS */
	unsigned shift = e - SUB_BITS;
	return (shift + 1) * SUB + (uint32_t)((v >> shift) - SUB);
}

/* Smallest and largest value that land in bucket b. */
static void bucket_range(uint32_t b, uint64_t *lo, uint64_t *hi)
{
	if (b < SUB) {
		*lo = *hi = b;
		return;
	}
	unsigned shift = b / SUB - 1;
	uint64_t m = SUB + b % SUB;
	*lo = m << shift;
	*hi = *lo + ((1ull << shift) - 1);
}

int stk_hist_create(struct stk_hist **out)
{
	*out = NULL;
	struct stk_hist *h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	stk_hist_reset(h);
	*out = h;
	return 0;
}

void stk_hist_destroy(struct stk_hist *h)
{
	free(h);
}

void stk_hist_reset(struct stk_hist *h)
{
	for (uint32_t i = 0; i < NBUCKETS; i++)
		atomic_store_explicit(&h->bucket[i], 0, memory_order_relaxed);
	atomic_store(&h->count, 0);
	atomic_store(&h->sum, 0);
	atomic_store(&h->min, UINT64_MAX);
	atomic_store(&h->max, 0);
}

static void store_min(_Atomic uint64_t *p, uint64_t v)
{
	uint64_t cur = atomic_load_explicit(p, memory_order_relaxed);
	while (v < cur && !atomic_compare_exchange_weak_explicit(p, &cur, v, memory_order_relaxed,
								 memory_order_relaxed))
		;
}

static void store_max(_Atomic uint64_t *p, uint64_t v)
{
	uint64_t cur = atomic_load_explicit(p, memory_order_relaxed);
	while (v > cur && !atomic_compare_exchange_weak_explicit(p, &cur, v, memory_order_relaxed,
								 memory_order_relaxed))
		;
}

void stk_hist_add(struct stk_hist *h, uint64_t v)
{
	atomic_fetch_add_explicit(&h->bucket[bucket_of(v)], 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&h->count, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&h->sum, v, memory_order_relaxed);
	store_min(&h->min, v);
	store_max(&h->max, v);
}

void stk_hist_merge(struct stk_hist *dst, const struct stk_hist *src)
{
	struct stk_hist *s = (struct stk_hist *)src; /* atomic loads need non-const */
	for (uint32_t i = 0; i < NBUCKETS; i++) {
		uint64_t c = atomic_load_explicit(&s->bucket[i], memory_order_relaxed);
		if (c)
			atomic_fetch_add_explicit(&dst->bucket[i], c, memory_order_relaxed);
	}
	atomic_fetch_add(&dst->count, atomic_load(&s->count));
	atomic_fetch_add(&dst->sum, atomic_load(&s->sum));
	store_min(&dst->min, atomic_load(&s->min));
	store_max(&dst->max, atomic_load(&s->max));
}

void stk_hist_merge_buckets(struct stk_hist *h, const uint64_t *upper, const uint64_t *count,
			    size_t n, uint64_t min, uint64_t max, uint64_t sum)
{
	uint64_t total = 0;
	for (size_t i = 0; i < n; i++) {
		if (!count[i])
			continue;
		atomic_fetch_add_explicit(&h->bucket[bucket_of(upper[i])], count[i],
					  memory_order_relaxed);
		total += count[i];
	}
	if (!total)
		return;
	atomic_fetch_add(&h->count, total);
	atomic_fetch_add(&h->sum, sum);
	store_min(&h->min, min);
	store_max(&h->max, max);
}

uint64_t stk_hist_sum(const struct stk_hist *h)
{
	return atomic_load(&((struct stk_hist *)h)->sum);
}

uint64_t stk_hist_count(const struct stk_hist *h)
{
	return atomic_load(&((struct stk_hist *)h)->count);
}

uint64_t stk_hist_min(const struct stk_hist *h)
{
	return stk_hist_count(h) ? atomic_load(&((struct stk_hist *)h)->min) : 0;
}

uint64_t stk_hist_max(const struct stk_hist *h)
{
	return atomic_load(&((struct stk_hist *)h)->max);
}

double stk_hist_mean(const struct stk_hist *h)
{
	uint64_t n = stk_hist_count(h);
	return n ? (double)atomic_load(&((struct stk_hist *)h)->sum) / (double)n : 0.0;
}

uint64_t stk_hist_percentile(const struct stk_hist *h, double pct)
{
	struct stk_hist *s = (struct stk_hist *)h;
	uint64_t total = 0;
	for (uint32_t i = 0; i < NBUCKETS; i++)
		total += atomic_load_explicit(&s->bucket[i], memory_order_relaxed);
	if (!total)
		return 0;
	if (pct < 0)
		pct = 0;
	if (pct > 100)
		pct = 100;
	/* rank of the wanted value, 1-based, nearest-rank method */
	uint64_t rank = (uint64_t)(pct / 100.0 * (double)total + 0.999999999);
	if (rank < 1)
		rank = 1;
	uint64_t seen = 0;
	for (uint32_t i = 0; i < NBUCKETS; i++) {
		seen += atomic_load_explicit(&s->bucket[i], memory_order_relaxed);
		if (seen >= rank) {
			uint64_t lo, hi, mn = stk_hist_min(h), mx = stk_hist_max(h);
			bucket_range(i, &lo, &hi);
			uint64_t mid = lo + (hi - lo) / 2;
			if (mid < mn)
				mid = mn;
			if (mid > mx)
				mid = mx;
			return mid;
		}
	}
	return stk_hist_max(h);
}

int stk_hist_bucket_next(const struct stk_hist *h, uint32_t *cursor, uint64_t *upper,
			 uint64_t *count)
{
	struct stk_hist *s = (struct stk_hist *)h;
	for (uint32_t i = *cursor; i < NBUCKETS; i++) {
		uint64_t c = atomic_load_explicit(&s->bucket[i], memory_order_relaxed);
		if (c) {
			uint64_t lo;
			bucket_range(i, &lo, upper);
			*count = c;
			*cursor = i + 1;
			return 1;
		}
	}
	*cursor = NBUCKETS;
	return 0;
}
