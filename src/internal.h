/* internal.h — shared by libstoker's subsystems; never installed. */
#ifndef STK_INTERNAL_H
#define STK_INTERNAL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "stoker/stoker.h"

#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define STK__XSTR(x) #x
#define STK__STR(x) STK__XSTR(x)
#define STK_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define STK_ALIGN_UP(x, a) (((x) + (a)-1) & ~((uint64_t)(a)-1))
#define STK_DIRECT_ALIGN 4096u

static inline uint64_t stk__now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* splitmix64: seeds and per-sample generators. */
static inline uint64_t stk__mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* --- options.c ---------------------------------------------------------- */

/* Gives each zero field of `opts` (a struct stk_loader_opts or stk_image_opts,
 * as group says) its row's default and checks every option's range.  0, or
 * <0 with "name: reason" in err. */
int stk__opts_apply(enum stk_opt_group group, void *opts, char *err, size_t errlen);

/* --- dataset.c ---------------------------------------------------------- */

struct stk_entry {
	uint64_t size;
	int64_t label;
	uint64_t name;   /* offset of the path (relative to root) in names */
	uint64_t offset; /* where the sample's bytes start in that file (tar shards) */
};

struct stk_dataset {
	char *root;            /* folder, or the file list's folder */
	int root_fd;           /* O_PATH|O_DIRECTORY descriptor of root */
	int64_t n;
	struct stk_entry *entries;
	char *names;           /* NUL-separated paths */
	uint64_t names_len;
	int64_t nclasses;
	char **classes;        /* pointers into class_names */
	char *class_names;
	uint64_t max_size;
	bool shards;           /* samples are members of tar shards */
	void *map;             /* the cached index when loaded by mmap */
	size_t map_len;
	uint64_t nbad;         /* files, folders or shards left out (skip policy) */
	const char *bad;       /* their records (dataset.h), bad_len bytes */
	uint64_t bad_len;
	char *cache_path;      /* the cache file loaded or written, NULL if none */
};

struct stk__index_opts {
	const char *path;
	const char *extensions;
	const char *cache_dir;
	bool no_cache;
	bool skip_bad;   /* what cannot be indexed is left out and counted (a warning);
			    else it fails the index */
	char *warning;   /* out: what was left out ("" if nothing), the first named */
	size_t warnlen;
	char *notice;    /* out: a damaged cache rebuilt, said once ("" if nothing) */
	size_t noticelen;
};

int stk__dataset_open(struct stk_dataset **out, const struct stk__index_opts *o, char *err,
		      size_t errlen);
void stk__dataset_close(struct stk_dataset *ds);
static inline const char *stk__entry_path(const struct stk_dataset *ds, int64_t i)
{
	return ds->names + ds->entries[i].name;
}

/* --- cpushare.c --------------------------------------------------------- */

/* What a CPU share is computed from (the running system, or a test's). */
struct stk__cpu_facts {
	cpu_set_t host;   /* the cgroup's cpuset within the online CPUs */
	cpu_set_t mask;   /* this process's affinity */
	double quota;     /* cpu.max in CPUs, 0: none */
	int current;      /* the CPU the calling thread runs on, -1: unknown */
};
int stk__cpu_facts(struct stk__cpu_facts *f);
/* The share from facts; local_world 0: no launcher.  loader_set gets the
 * CPUs for the loader's threads, *pin whether to pin them. */
void stk__cpu_share_of(const struct stk__cpu_facts *f, uint32_t local_rank,
		       uint32_t local_world, const char *source, struct stk_cpu_share *out,
		       cpu_set_t *loader_set, bool *pin);
/* stk_cpu_share with the loader's CPU set; the reason in why on -EINVAL. */
int stk__cpu_share(uint32_t local_rank, uint32_t local_world, struct stk_cpu_share *out,
		   cpu_set_t *loader_set, bool *pin, char *why, size_t wlen);

/* --- sampler.c ---------------------------------------------------------- */

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
