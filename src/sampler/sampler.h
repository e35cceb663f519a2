/*
 * sampler.h — the epoch's order (sampler/sampler.c): a seeded permutation split by
 * rank, samples or whole shards, resumable on another world size.
 */
#ifndef STK_SAMPLER_H
#define STK_SAMPLER_H

#include "base/internal.h"

/* A part of an epoch run on one world size: `batches` batches on each rank. */
struct stk__segment {
	uint32_t world;
	uint64_t batches;
};

struct stk_sampler {
	int64_t n;            /* dataset size */
	uint32_t rank, world;
	uint32_t batch_size;
	bool shuffle, drop_last;
	uint64_t seed;
	/* the current segment of the epoch */
	int64_t per_rank;     /* samples this rank sees in it */
	int64_t first;        /* number of its first batch (batches of the earlier segments) */
	int64_t batches;      /* number after its last batch: first + its batches */
	int64_t base;         /* global: positions of the order read by the earlier segments */
	uint32_t *perm;       /* global: the epoch's permutation (n entries, shuffle only);
				 shard: this rank's samples in order (n entries) */
	int64_t load, cycle;  /* shard: real samples in perm; padding wraps at cycle */
	/* shard mode: group g is samples [group_end[g-1], group_end[g]) */
	const uint32_t *group_end;
	uint32_t ngroups, window;
	uint32_t *members, *ustart, *owner; /* a deal: units of samples left, their ranks */
	uint64_t *keys;       /* a deal: units by size */
	uint64_t *done;       /* replay: samples the earlier segments read (bitmap) */
	int64_t *loads;       /* a deal: samples per rank (wcap entries) */
	uint32_t *heap, wcap;
	/* what perm and the segment were computed for */
	uint64_t perm_epoch;
	bool perm_valid;
	struct stk__segment prev[STK_RESUME_SEGMENTS];
	uint32_t nprev;
};

int stk__sampler_init(struct stk_sampler *s, int64_t n, uint32_t rank, uint32_t world,
		      uint32_t batch_size, bool shuffle, bool drop_last, uint64_t seed);
void stk__sampler_free(struct stk_sampler *s);
/* Shard mode (after init with shuffle): groups end at group_end[0..ngroups)
 * (kept by the caller); window >= 1. */
int stk__sampler_shard_mode(struct stk_sampler *s, const uint32_t *group_end, uint32_t ngroups,
			    uint32_t window);
/* Checks that an epoch's earlier segments fit this dataset: 0, -ERANGE with
 * *bad the first segment that claims more batches than it had (or no ranks),
 * -E2BIG past STK_RESUME_SEGMENTS, -ENOMEM.  Leaves the current layout as it
 * is (stk__sampler_batch may run meanwhile). */
int stk__sampler_check(struct stk_sampler *s, uint64_t epoch, const struct stk__segment *prev,
		       uint32_t nprev, uint32_t *bad);
/* Lays out `epoch` after the segments prev[0..nprev) (none: from its start):
 * this rank's share of what they left, numbered from the sum of their
 * batches.  Fails only where stk__sampler_check does; unchanged then. */
int stk__sampler_start(struct stk_sampler *s, uint64_t epoch, const struct stk__segment *prev,
		       uint32_t nprev);
/* Writes batch b's dataset indices; returns how many (0 outside the
 * segment's [first, batches)). */
uint32_t stk__sampler_batch(const struct stk_sampler *s, int64_t b, int64_t *out);

#endif
