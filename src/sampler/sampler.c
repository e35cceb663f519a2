/*
 * sampler/sampler.c — the order of an epoch and each rank's share of it, also when
 * the epoch is resumed on another number of ranks.
 *
 * Global shuffle: a seeded permutation of the dataset, split with torch
 * DistributedSampler's rule: rank r takes positions r, r+W, r+2W, ...; without
 * drop_last every rank gets ceil(n/W) samples, the order padded by repeating
 * its start; with drop_last the tail is cut so every rank gets floor(n/W).
 * Shard shuffle: the shards in a seeded order are dealt out whole, balanced
 * by samples (largest first, each to the rank with the fewest so far), so no
 * two ranks read the same shard; each rank streams its own shards through a
 * shuffle window.  Equal shares as DistributedSampler makes them: without
 * drop_last a rank short of the largest share repeats its own first samples,
 * with drop_last every rank stops at the smallest share.  A batch is then
 * `batch_size` consecutive samples of the rank's share.  The order depends
 * only on (seed, epoch, rank, world), so resuming at batch k replays exactly.
 *
 * Elastic resume: an epoch may run in segments, each on its own world size;
 * ranks step together, so a segment is (world, batches each).  Global: the
 * samples a segment consumed are a prefix of what was left of the order (the
 * interleave takes positions in order), so the next segment splits the rest,
 * base.. n, over its ranks.  Shards: the samples left (a bitmap, replayed from
 * the segments) are grouped by shard again and dealt out afresh.  Either way
 * every sample not yet read is read once across the new ranks, and padding
 * repeats only what equal shares need.  A segment that ran to its end ends
 * the epoch.
 */
#include "sampler/sampler.h"

#include <stdlib.h>
#include <string.h>

int stk__sampler_init(struct stk_sampler *s, int64_t n, uint32_t rank, uint32_t world,
		      uint32_t batch_size, bool shuffle, bool drop_last, uint64_t seed)
{
	if (n <= 0 || world == 0 || rank >= world || batch_size == 0 || n > (int64_t)UINT32_MAX - 1)
		return -EINVAL;
	*s = (struct stk_sampler){.n = n, .rank = rank, .world = world, .batch_size = batch_size,
				  .shuffle = shuffle, .drop_last = drop_last, .seed = seed};
	if (shuffle && !(s->perm = malloc((size_t)n * sizeof(*s->perm))))
		return -ENOMEM;
	return 0;
}

void stk__sampler_free(struct stk_sampler *s)
{
	free(s->perm);
	free(s->members);
	free(s->ustart);
	free(s->owner);
	free(s->keys);
	free(s->done);
	free(s->loads);
	free(s->heap);
	*s = (struct stk_sampler){0};
}

/* Room for world sizes up to w in the per-rank scratch. */
static int reserve_world(struct stk_sampler *s, uint32_t w)
{
	if (w <= s->wcap)
		return 0;
	int64_t *loads = realloc(s->loads, (size_t)w * sizeof(*loads));
	if (loads)
		s->loads = loads;
	uint32_t *heap = realloc(s->heap, (size_t)w * sizeof(*heap));
	if (heap)
		s->heap = heap;
	if (!loads || !heap)
		return -ENOMEM;
	s->wcap = w;
	return 0;
}

int stk__sampler_shard_mode(struct stk_sampler *s, const uint32_t *group_end, uint32_t ngroups,
			    uint32_t window)
{
	if (!s->shuffle || !ngroups || !window || group_end[ngroups - 1] != (uint32_t)s->n)
		return -EINVAL;
	size_t n = (size_t)s->n;
	s->members = malloc(n * sizeof(*s->members));
	s->ustart = malloc((n + 1) * sizeof(*s->ustart));
	s->owner = malloc(n * sizeof(*s->owner));
	s->keys = malloc(n * sizeof(*s->keys));
	s->done = calloc((n + 63) / 64, sizeof(*s->done));
	if (!s->members || !s->ustart || !s->owner || !s->keys || !s->done ||
	    reserve_world(s, s->world))
		return -ENOMEM;
	s->group_end = group_end;
	s->ngroups = ngroups;
	s->window = window;
	s->perm_valid = false;
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
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

static uint64_t epoch_state(const struct stk_sampler *s, uint64_t epoch)
{
	return stk__mix64(s->seed ^ stk__mix64(epoch + 0x5851f42d4c957f2dull));
}

static bool is_done(const struct stk_sampler *s, uint32_t i)
{
	return s->done[i / 64] >> (i % 64) & 1;
}

/* --- global shuffle ------------------------------------------------------ */

static int64_t share_of(const struct stk_sampler *s, int64_t left, uint32_t world)
{
	return s->drop_last ? left / world : (left + world - 1) / world;
}

static int64_t batches_of(const struct stk_sampler *s, int64_t per_rank)
{
	return s->drop_last ? per_rank / s->batch_size
			    : (per_rank + s->batch_size - 1) / s->batch_size;
}

/* Where segment after `prev` starts in the epoch's order; -ERANGE (and *bad)
 * when a segment claims more batches than it had. */
static int global_base(const struct stk_sampler *s, const struct stk__segment *prev,
		       uint32_t nprev, int64_t *base, uint32_t *bad)
{
	int64_t b = 0;
	for (uint32_t i = 0; i < nprev; i++) {
		int64_t left = s->n - b;
		int64_t per = share_of(s, left, prev[i].world);
		int64_t nb = batches_of(s, per);
		if (prev[i].batches > (uint64_t)nb) {
			*bad = i;
			return -ERANGE;
		}
		if (nb > 0 && prev[i].batches == (uint64_t)nb)
			b = s->n; /* ran to its end: the epoch is over */
		else          /* k·B < per ≤ ceil(left/W), so this stays below n */
			b += (int64_t)prev[i].batches * s->batch_size * prev[i].world;
	}
	*base = b;
	return 0;
}

/* --- shard shuffle ------------------------------------------------------- */

/* Segment `seg` of the epoch on `world` ranks: the shards (groups) in seeded
 * order, each one's samples not yet read as a unit; the units dealt out
 * largest first, each to the rank with the fewest samples so far (ties: the
 * lower rank).  With fewer units than ranks (a resume near the end of an
 * epoch) every sample is a unit of its own.  Fills members, ustart, owner,
 * loads; returns the number of units. */
static uint32_t deal(struct stk_sampler *s, uint64_t epoch, uint32_t seg, uint32_t world,
		     uint32_t *nmembers)
{
	uint64_t st = epoch_state(s, epoch) ^ stk__mix64(seg + 0x2545f4914f6cdd1dull);
	uint32_t *order = s->owner; /* borrowed until the units are built */
	for (uint32_t g = 0; g < s->ngroups; g++)
		order[g] = g;
	shuffle(order, s->ngroups, &st);
	uint32_t k = 0, nu = 0;
	for (uint32_t gi = 0; gi < s->ngroups; gi++) {
		uint32_t g = order[gi], i = g ? s->group_end[g - 1] : 0, k0 = k;
		for (; i < s->group_end[g]; i++)
			if (!is_done(s, i))
				s->members[k++] = i;
		if (k > k0)
			s->ustart[nu++] = k0;
	}
	s->ustart[nu] = k;
	*nmembers = k;
	if (nu < world) {
		for (uint32_t u = 0; u <= k; u++)
			s->ustart[u] = u;
		nu = k;
	}
	/* largest first; equal sizes keep the seeded order */
	for (uint32_t u = 0; u < nu; u++)
		s->keys[u] = (uint64_t)(UINT32_MAX - (s->ustart[u + 1] - s->ustart[u])) << 32 | u;
	qsort(s->keys, nu, sizeof(*s->keys), cmp_u64);
	/* a min-heap of ranks by (load, rank) */
	for (uint32_t r = 0; r < world; r++) {
		s->loads[r] = 0;
		s->heap[r] = r;
	}
	for (uint32_t j = 0; j < nu; j++) {
		uint32_t u = (uint32_t)s->keys[j], r = s->heap[0];
		s->owner[u] = r;
		s->loads[r] += s->ustart[u + 1] - s->ustart[u];
		for (uint32_t p = 0;;) { /* sift the root down */
			uint32_t c = 2 * p + 1, m = p;
			for (uint32_t q = c; q < c + 2 && q < world; q++) {
				uint32_t a = s->heap[q], b = s->heap[m];
				if (s->loads[a] < s->loads[b] || (s->loads[a] == s->loads[b] && a < b))
					m = q;
			}
			if (m == p)
				break;
			uint32_t t = s->heap[p];
			s->heap[p] = s->heap[m];
			s->heap[m] = t;
			p = m;
		}
	}
	return nu;
}

/* Rank r's samples of a dealt segment: its units in the seeded order,
 * streamed through a window of `window` samples from which each next one is
 * drawn at random (WebDataset's shuffle buffer), the window's rest shuffled
 * last.  Writes loads[r] entries to out. */
static void rank_stream(const struct stk_sampler *s, uint64_t epoch, uint32_t seg, uint32_t r,
			uint32_t nunits, uint32_t *out, uint32_t *win)
{
	uint64_t st = epoch_state(s, epoch) ^ stk__mix64(seg + 0x2545f4914f6cdd1dull) ^
		      stk__mix64(((uint64_t)r << 32) + 0x9e3779b97f4a7c15ull);
	uint32_t k = 0, w = 0;
	for (uint32_t u = 0; u < nunits; u++) {
		if (s->owner[u] != r)
			continue;
		for (uint32_t m = s->ustart[u]; m < s->ustart[u + 1]; m++) {
			uint32_t i = s->members[m];
			if (w < s->window) {
				win[w++] = i;
				continue;
			}
			uint32_t j = bounded(&st, w);
			out[k++] = win[j];
			win[j] = i;
		}
	}
	shuffle(win, w, &st);
	memcpy(out + k, win, (size_t)w * sizeof(*win));
}

static int64_t shard_share(const struct stk_sampler *s, uint32_t world)
{
	int64_t lo = s->loads[0], hi = s->loads[0];
	for (uint32_t r = 1; r < world; r++) {
		lo = s->loads[r] < lo ? s->loads[r] : lo;
		hi = s->loads[r] > hi ? s->loads[r] : hi;
	}
	return s->drop_last ? lo : hi;
}

/* Replays the segments before the current one: marks what each read.
 * Scratch: seq (n entries) and win (window entries). */
static int shard_replay(struct stk_sampler *s, uint64_t epoch, const struct stk__segment *prev,
			uint32_t nprev, uint32_t *seq, uint32_t *win, uint32_t *bad)
{
	memset(s->done, 0, (((size_t)s->n + 63) / 64) * sizeof(*s->done));
	for (uint32_t i = 0; i < nprev; i++) {
		uint32_t nm, w = prev[i].world;
		uint32_t nu = deal(s, epoch, i, w, &nm);
		int64_t nb = batches_of(s, shard_share(s, w));
		if (prev[i].batches > (uint64_t)nb) {
			*bad = i;
			return -ERANGE;
		}
		bool over = nb > 0 && prev[i].batches == (uint64_t)nb; /* ends the epoch */
		for (uint32_t r = 0; r < w; r++) {
			int64_t take = over ? s->loads[r] : (int64_t)prev[i].batches * s->batch_size;
			if (take > s->loads[r])
				take = s->loads[r]; /* the rest of its share was padding */
			if (take <= 0)
				continue;
			rank_stream(s, epoch, i, r, nu, seq, win);
			for (int64_t j = 0; j < take; j++)
				s->done[seq[j] / 64] |= 1ull << (seq[j] % 64);
		}
	}
	return 0;
}

static uint32_t max_world(const struct stk__segment *prev, uint32_t nprev, uint32_t w)
{
	for (uint32_t i = 0; i < nprev; i++)
		w = prev[i].world > w ? prev[i].world : w;
	return w;
}

int stk__sampler_check(struct stk_sampler *s, uint64_t epoch, const struct stk__segment *prev,
		       uint32_t nprev, uint32_t *bad)
{
	uint32_t scratch_bad = 0;
	if (!bad)
		bad = &scratch_bad;
	if (nprev > STK_RESUME_SEGMENTS)
		return -E2BIG;
	for (uint32_t i = 0; i < nprev; i++)
		if (prev[i].world == 0) {
			*bad = i;
			return -ERANGE;
		}
	if (!s->group_end) {
		int64_t base;
		return global_base(s, prev, nprev, &base, bad);
	}
	s->perm_valid = false; /* the scratch the layout shares is about to change */
	if (nprev == 0) {
		memset(s->done, 0, (((size_t)s->n + 63) / 64) * sizeof(*s->done));
		return 0;
	}
	int rc = reserve_world(s, max_world(prev, nprev, s->world));
	uint32_t *seq = malloc((size_t)s->n * sizeof(*seq));
	uint32_t *win = malloc((size_t)s->window * sizeof(*win));
	if (!rc && (!seq || !win))
		rc = -ENOMEM;
	if (!rc)
		rc = shard_replay(s, epoch, prev, nprev, seq, win, bad);
	free(seq);
	free(win);
	return rc;
}

static bool same_start(const struct stk_sampler *s, uint64_t epoch,
		       const struct stk__segment *prev, uint32_t nprev)
{
	if (!s->perm_valid || s->perm_epoch != epoch || s->nprev != nprev)
		return false;
	for (uint32_t i = 0; i < nprev; i++)
		if (s->prev[i].world != prev[i].world || s->prev[i].batches != prev[i].batches)
			return false;
	return true;
}

int stk__sampler_start(struct stk_sampler *s, uint64_t epoch, const struct stk__segment *prev,
		       uint32_t nprev)
{
	if (nprev >= STK_RESUME_SEGMENTS)
		return -E2BIG;
	if (same_start(s, epoch, prev, nprev))
		return 0;
	uint32_t bad;
	int64_t first = 0;
	for (uint32_t i = 0; i < nprev; i++)
		first += (int64_t)prev[i].batches;
	if (!s->group_end) {
		int64_t base = 0;
		int rc = global_base(s, prev, nprev, &base, &bad);
		if (rc)
			return rc;
		s->base = base;
		s->per_rank = share_of(s, s->n - base, s->world);
		if (s->shuffle && !(s->perm_valid && s->perm_epoch == epoch)) {
			uint64_t st = epoch_state(s, epoch);
			for (uint32_t i = 0; i < (uint32_t)s->n; i++)
				s->perm[i] = i;
			shuffle(s->perm, (uint32_t)s->n, &st);
		}
	} else {
		int rc = stk__sampler_check(s, epoch, prev, nprev, &bad);
		uint32_t *win = malloc((size_t)s->window * sizeof(*win));
		if (!rc && !win)
			rc = -ENOMEM;
		if (rc) {
			free(win);
			return rc;
		}
		/* check replayed the segments into done; deal the rest */
		uint32_t nm, nu = deal(s, epoch, nprev, s->world, &nm);
		s->per_rank = shard_share(s, s->world);
		s->load = s->loads[s->rank];
		if (s->load > 0) {
			rank_stream(s, epoch, nprev, s->rank, nu, s->perm, win);
		} else if (nm > 0) { /* no sample left for this rank: pad from the others' */
			s->perm[0] = s->members[s->rank % nm];
			s->load = 0;
		}
		s->cycle = s->load > 0 ? s->load : 1;
		free(win);
	}
	s->first = first;
	s->batches = first + batches_of(s, s->per_rank);
	if (nprev)
		memcpy(s->prev, prev, (size_t)nprev * sizeof(*prev));
	s->nprev = nprev;
	s->perm_epoch = epoch;
	s->perm_valid = true;
	return 0;
}

uint32_t stk__sampler_batch(const struct stk_sampler *s, int64_t b, int64_t *out)
{
	if (b < s->first || b >= s->batches)
		return 0;
	int64_t first = (b - s->first) * s->batch_size;
	int64_t last = first + s->batch_size;
	if (last > s->per_rank)
		last = s->per_rank;
	uint32_t k = 0;
	for (int64_t i = first; i < last; i++) {
		if (s->group_end) {
			out[k++] = s->perm[i < s->load ? i : i % s->cycle];
			continue;
		}
		int64_t pos = (s->base + (int64_t)s->rank + i * (int64_t)s->world) % s->n;
		out[k++] = s->shuffle ? (int64_t)s->perm[pos] : pos;
	}
	return k;
}
