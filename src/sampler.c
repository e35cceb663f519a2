/*
 * sampler.c — the order of an epoch: a seeded permutation of the dataset, split
 * across ranks with torch DistributedSampler's rule, cut into batches.
 *
 * Rank r takes positions r, r+W, r+2W, ... of the epoch's order.  Without
 * drop_last every rank gets ceil(n/W) samples, the order padded by repeating
 * its start; with drop_last the tail is cut so every rank gets floor(n/W).
 * A batch is then `batch_size` consecutive samples of the rank's share; the
 * last one is short, or dropped under drop_last.  The order depends only on
 * (seed, epoch), so resuming at batch k of an epoch replays exactly.
 */
#include "internal.h"

#include <stdlib.h>

int stk__sampler_init(struct stk_sampler *s, int64_t n, uint32_t rank, uint32_t world,
		      uint32_t batch_size, bool shuffle, bool drop_last, uint64_t seed)
{
	if (n <= 0 || world == 0 || rank >= world || batch_size == 0 || n > (int64_t)UINT32_MAX)
		return -EINVAL;
	*s = (struct stk_sampler){.n = n, .rank = rank, .world = world, .batch_size = batch_size,
				  .shuffle = shuffle, .drop_last = drop_last, .seed = seed};
	if (drop_last && n % world)
		s->per_rank = n / world;
	else
		s->per_rank = (n + world - 1) / world;
	s->batches = drop_last ? s->per_rank / batch_size
			       : (s->per_rank + batch_size - 1) / batch_size;
	if (shuffle) {
		s->perm = malloc((size_t)n * sizeof(*s->perm));
		if (!s->perm)
			return -ENOMEM;
	}
	return 0;
}

void stk__sampler_free(struct stk_sampler *s)
{
	free(s->perm);
	free(s->scratch);
	s->perm = NULL;
	s->scratch = NULL;
}

int stk__sampler_shard_mode(struct stk_sampler *s, const uint32_t *group_end, uint32_t ngroups,
			    uint32_t window)
{
	if (!s->shuffle || !ngroups || !window || group_end[ngroups - 1] != (uint32_t)s->n)
		return -EINVAL;
	s->scratch = malloc(((size_t)ngroups + window) * sizeof(*s->scratch));
	if (!s->scratch)
		return -ENOMEM;
	s->group_end = group_end;
	s->ngroups = ngroups;
	s->window = window;
	s->perm_valid = false;
	return 0;
}

/* A uniform integer in [0, bound) without modulo bias (Lemire's method). */
static uint32_t bounded(uint64_t *state, uint32_t bound)
{
	uint64_t m;
	uint32_t low;
	do {
		*state += 0x9e3779b97f4a7c15ull;
		uint32_t x = (uint32_t)(stk__mix64(*state) >> 32);
		m = (uint64_t)x * bound;
		low = (uint32_t)m;
	} while (low < bound && low < (uint32_t)(-bound) % bound);
	return (uint32_t)(m >> 32);
}

static void shuffle(uint32_t *v, uint32_t n, uint64_t *state)
{
	for (uint32_t i = n - 1; i > 0 && n > 1; i--) { /* Fisher–Yates */
		uint32_t j = bounded(state, i + 1);
		uint32_t t = v[i];
		v[i] = v[j];
		v[j] = t;
	}
}

/* Shard mode: the groups (shards) in random order, their samples streamed
 * through a window of `window` samples from which each next one is drawn at
 * random (WebDataset's shuffle buffer), then the window's rest shuffled. */
static void shard_order(struct stk_sampler *s, uint64_t *state)
{
	uint32_t *order = s->scratch, *win = s->scratch + s->ngroups, k = 0, w = 0;
	for (uint32_t g = 0; g < s->ngroups; g++)
		order[g] = g;
	shuffle(order, s->ngroups, state);
	for (uint32_t gi = 0; gi < s->ngroups; gi++) {
		uint32_t g = order[gi], i = g ? s->group_end[g - 1] : 0;
		for (; i < s->group_end[g]; i++) {
			if (w < s->window) {
				win[w++] = i;
				continue;
			}
			uint32_t j = bounded(state, w);
			s->perm[k++] = win[j];
			win[j] = i;
		}
	}
	shuffle(win, w, state);
	for (uint32_t j = 0; j < w; j++)
		s->perm[k++] = win[j];
}

void stk__sampler_set_epoch(struct stk_sampler *s, uint64_t epoch)
{
	if (!s->shuffle || (s->perm_valid && s->perm_epoch == epoch))
		return;
	uint64_t state = stk__mix64(s->seed ^ stk__mix64(epoch + 0x5851f42d4c957f2dull));
	uint32_t n = (uint32_t)s->n;
	if (s->group_end) {
		shard_order(s, &state);
		s->perm_epoch = epoch;
		s->perm_valid = true;
		return;
	}
	for (uint32_t i = 0; i < n; i++)
		s->perm[i] = i;
	for (uint32_t i = n - 1; i > 0; i--) { /* Fisher–Yates */
		uint32_t j = bounded(&state, i + 1);
		uint32_t t = s->perm[i];
		s->perm[i] = s->perm[j];
		s->perm[j] = t;
	}
	s->perm_epoch = epoch;
	s->perm_valid = true;
}

uint32_t stk__sampler_batch(const struct stk_sampler *s, int64_t b, int64_t *out)
{
	if (b < 0 || b >= s->batches)
		return 0;
	int64_t first = b * s->batch_size;
	int64_t last = first + s->batch_size;
	if (last > s->per_rank)
		last = s->per_rank;
	uint32_t k = 0;
	for (int64_t i = first; i < last; i++) {
		int64_t pos = ((int64_t)s->rank + i * (int64_t)s->world) % s->n;
		out[k++] = s->shuffle ? (int64_t)s->perm[pos] : pos;
	}
	return k;
}
