/* test_sampler.c — each rank's share of an epoch: DistributedSampler's split
 * (global shuffle), whole shards per rank balanced by samples (shard
 * shuffle), and elastic resume: an epoch run in segments on changing world
 * sizes reads every sample once across all ranks, repeated only where equal
 * shares need padding; the loader's resume point and its refusals. */
#include "testutil.h"

#include "sampler/sampler.h"
#include "stoker/stoker.h"

#include <errno.h>
#include <limits.h>

/* --- the sampler, driven directly ---------------------------------------- */

struct dataset {
	int64_t n;
	uint32_t ngroups;     /* 0: global shuffle */
	uint32_t group_end[64];
	uint32_t window;
};

struct seg {
	uint32_t world;
	int64_t k; /* batches each rank takes; -1: to the segment's end */
};

static uint64_t rng = 12345;
static uint32_t rnd(uint32_t bound)
{
	rng = rng * 6364136223846793005ull + 1442695040888963407ull;
	return (uint32_t)(rng >> 33) % bound;
}

static uint32_t group_of(const struct dataset *d, int64_t i)
{
	uint32_t g = 0;
	while (d->group_end[g] <= (uint32_t)i)
		g++;
	return g;
}

static void make_sampler(struct stk_sampler *s, const struct dataset *d, uint32_t rank,
			 uint32_t world, uint32_t batch, bool drop, uint64_t seed)
{
	assert_int_equal(stk__sampler_init(s, d->n, rank, world, batch, true, drop, seed), 0);
	if (d->ngroups)
		assert_int_equal(stk__sampler_shard_mode(s, d->group_end, d->ngroups, d->window), 0);
}

/* Runs the segments of one epoch, rank by rank, and checks what every rank
 * reads: per segment, equal shares (lockstep), no shard on two ranks (shard
 * mode, while enough shards are left); over the epoch, every sample read,
 * none twice except the padding of a segment that ran to its end.  Returns
 * the reads. */
static int64_t simulate(const struct dataset *d, uint32_t batch, bool drop, uint64_t seed,
			uint64_t epoch, const struct seg *segs, uint32_t nseg)
{
	int64_t n = d->n, reads = 0, allowed_repeats = 0;
	int *cnt = calloc((size_t)n, sizeof(*cnt));
	int64_t *idx = malloc(batch * sizeof(*idx));
	int *gowner = malloc(64 * sizeof(*gowner));
	struct stk__segment prev[STK_RESUME_SEGMENTS];
	assert_true(cnt && idx && gowner);
	bool over = false;
	for (uint32_t i = 0; i < nseg; i++) {
		bool ended = over;
		uint32_t w = segs[i].world;
		int64_t per = -1, take = -1, nb = 0, seg_reads = 0, left = 0, groups_left = 0;
		for (int64_t j = 0; j < n; j++)
			left += cnt[j] == 0;
		for (uint32_t g = 0; g < d->ngroups; g++) {
			bool any = false;
			for (uint32_t j = g ? d->group_end[g - 1] : 0; j < d->group_end[g]; j++)
				any |= cnt[j] == 0;
			groups_left += any;
			gowner[g] = -1;
		}
		int *seen = calloc((size_t)n, sizeof(*seen)); /* rank + 1 that read it here */
		assert_non_null(seen);
		for (uint32_t r = 0; r < w; r++) {
			struct stk_sampler s;
			make_sampler(&s, d, r, w, batch, drop, seed);
			assert_int_equal(stk__sampler_check(&s, epoch, prev, i, NULL), 0);
			assert_int_equal(stk__sampler_start(&s, epoch, prev, i), 0);
			int64_t first = 0;
			for (uint32_t j = 0; j < i; j++)
				first += (int64_t)prev[j].batches;
			assert_int_equal(s.first, first);
			if (per >= 0)
				assert_int_equal(s.per_rank, per); /* equal shares */
			per = s.per_rank;
			nb = s.batches - s.first;
			if (take < 0)
				take = segs[i].k < 0 || segs[i].k > nb ? nb : segs[i].k;
			if (ended)
				assert_int_equal(nb, 0);
			for (int64_t b = s.first; b < s.first + take; b++) {
				uint32_t got = stk__sampler_batch(&s, b, idx);
				assert_true(got >= 1 && got <= batch);
				for (uint32_t j = 0; j < got; j++) {
					int64_t x = idx[j];
					assert_true(x >= 0 && x < n);
					cnt[x]++;
					reads++;
					seg_reads++;
					if (d->ngroups) {
						/* no two ranks share a sample, nor a shard while
						 * every rank can have one of its own */
						if (left >= w)
							assert_true(seen[x] == 0 || seen[x] == (int)r + 1);
						uint32_t g = group_of(d, x);
						if (groups_left >= w && !seen[x])
							assert_true(gowner[g] < 0 || gowner[g] == (int)r);
						gowner[g] = (int)r;
					}
					seen[x] = (int)r + 1;
				}
			}
			assert_int_equal(stk__sampler_batch(&s, s.first + nb, idx), 0);
			stk__sampler_free(&s);
		}
		if (take == nb && nb > 0)
			over = true;
		if (over && !ended && !drop && seg_reads > left) /* the segment that ended pads */
			allowed_repeats += seg_reads - left;
		prev[i] = (struct stk__segment){.world = w, .batches = (uint64_t)take};
		free(seen);
	}
	int64_t repeats = 0;
	for (int64_t j = 0; j < n; j++) {
		if (drop)
			assert_true(cnt[j] <= 1);
		else if (over)
			assert_true(cnt[j] >= 1); /* the epoch covered */
		repeats += cnt[j] > 1 ? cnt[j] - 1 : 0;
	}
	if (repeats != allowed_repeats)
		fail_msg("%lld repeated reads, %lld allowed (padding)", (long long)repeats,
			 (long long)allowed_repeats);
	free(cnt);
	free(idx);
	free(gowner);
	return reads;
}

static void random_groups(struct dataset *d, uint32_t ngroups, uint32_t maxsize)
{
	d->ngroups = ngroups;
	uint32_t end = 0;
	for (uint32_t g = 0; g < ngroups; g++) {
		end += 1 + rnd(maxsize);
		d->group_end[g] = end;
	}
	d->n = end;
}

/* A fresh epoch in global mode: torch DistributedSampler's rule over the
 * seeded permutation (rank r takes positions r, r+W, ... mod n). */
static void test_global_split(void **state)
{
	(void)state;
	const int64_t ns[] = {1, 7, 51, 60};
	for (size_t a = 0; a < STK_ARRAY_SIZE(ns); a++)
		for (uint32_t w = 1; w <= 5; w++)
			for (int drop = 0; drop < 2; drop++) {
				struct dataset d = {.n = ns[a]};
				struct stk_sampler s;
				int64_t idx[8];
				make_sampler(&s, &d, w - 1, w, 3, drop, 9);
				assert_int_equal(stk__sampler_start(&s, 4, NULL, 0), 0);
				int64_t per = drop ? d.n / w : (d.n + w - 1) / w;
				assert_int_equal(s.per_rank, per);
				assert_int_equal(s.batches, drop ? per / 3 : (per + 2) / 3);
				for (int64_t b = 0, i = 0; b < s.batches; b++) {
					uint32_t got = stk__sampler_batch(&s, b, idx);
					for (uint32_t j = 0; j < got; j++, i++)
						assert_int_equal(idx[j], s.perm[(w - 1 + i * w) % d.n]);
				}
				stk__sampler_free(&s);
				if (d.n >= w) {
					struct seg whole = {w, -1};
					simulate(&d, 3, drop, 9, 4, &whole, 1);
				}
			}
}

/* Global mode resumed on other world sizes: 4 → 2, 2 → 3, 4 → 2 → 3, and
 * random chains. */
static void test_global_elastic(void **state)
{
	(void)state;
	struct dataset d = {.n = 60};
	const struct seg a[] = {{4, 2}, {2, -1}}, b[] = {{2, 3}, {3, -1}},
			 c[] = {{4, 1}, {2, 2}, {3, -1}}, e[] = {{3, 1}, {3, 2}, {1, -1}};
	for (int drop = 0; drop < 2; drop++) {
		assert_int_equal(simulate(&d, 4, drop, 1, 0, a, 2), drop ? 56 : 60);
		simulate(&d, 4, drop, 1, 0, b, 2);
		simulate(&d, 4, drop, 1, 3, c, 3);
		simulate(&d, 5, drop, 2, 1, e, 3);
	}
	for (int t = 0; t < 300; t++) {
		struct dataset r = {.n = 1 + rnd(80)};
		struct seg segs[4];
		uint32_t nseg = 1 + rnd(4);
		for (uint32_t i = 0; i < nseg; i++)
			segs[i] = (struct seg){1 + rnd(5), i + 1 == nseg ? -1 : (int64_t)rnd(6)};
		simulate(&r, 1 + rnd(6), rnd(2), rnd(100), rnd(3), segs, nseg);
	}
}

/* Shard mode: whole shards per rank, balanced by samples; padding repeats
 * a rank's own samples; the assignment changes with the epoch. */
static void test_shard_split(void **state)
{
	(void)state;
	struct dataset d = {.window = 4};
	random_groups(&d, 14, 6);
	for (uint32_t w = 1; w <= 5; w++) {
		struct seg whole = {w, -1};
		for (int drop = 0; drop < 2; drop++)
			simulate(&d, 4, drop, 3, 0, &whole, 1);
		/* balanced: shares differ by less than the largest shard */
		int64_t lo = INT64_MAX, hi = 0, per = 0;
		uint32_t owner0[64];
		for (uint32_t r = 0; r < w; r++) {
			struct stk_sampler s;
			make_sampler(&s, &d, r, w, 4, false, 3);
			assert_int_equal(stk__sampler_start(&s, 0, NULL, 0), 0);
			lo = s.load < lo ? s.load : lo;
			hi = s.load > hi ? s.load : hi;
			per = s.per_rank;
			for (int64_t i = 0; i < s.load; i++)
				owner0[group_of(&d, s.perm[i])] = r;
			stk__sampler_free(&s);
		}
		assert_true(hi - lo <= 6);
		assert_int_equal(per, hi); /* the short ones pad */
		/* another epoch deals the shards otherwise */
		if (w > 1) {
			bool differs = false;
			for (uint64_t ep = 1; ep < 4 && !differs; ep++) {
				struct stk_sampler s;
				make_sampler(&s, &d, 0, w, 4, false, 3);
				assert_int_equal(stk__sampler_start(&s, ep, NULL, 0), 0);
				for (int64_t i = 0; i < s.load; i++)
					differs |= owner0[group_of(&d, s.perm[i])] != 0;
				stk__sampler_free(&s);
			}
			assert_true(differs);
		}
	}
}

static void test_shard_elastic(void **state)
{
	(void)state;
	struct dataset d = {.window = 3};
	random_groups(&d, 14, 6);
	const struct seg a[] = {{4, 2}, {2, -1}}, b[] = {{2, 3}, {3, -1}},
			 c[] = {{4, 1}, {2, 2}, {3, -1}}, e[] = {{3, 1}, {3, 2}, {1, -1}};
	for (int drop = 0; drop < 2; drop++) {
		simulate(&d, 4, drop, 1, 0, a, 2);
		simulate(&d, 4, drop, 1, 0, b, 2);
		simulate(&d, 4, drop, 1, 3, c, 3);
		simulate(&d, 2, drop, 2, 1, e, 3);
	}
	for (int t = 0; t < 300; t++) {
		struct dataset r = {.window = 1 + rnd(8)};
		random_groups(&r, 5 + rnd(40), 1 + rnd(9));
		struct seg segs[4];
		uint32_t nseg = 1 + rnd(4);
		for (uint32_t i = 0; i < nseg; i++)
			segs[i] = (struct seg){1 + rnd(5), i + 1 == nseg ? -1 : (int64_t)rnd(8)};
		simulate(&r, 1 + rnd(6), rnd(2), rnd(100), rnd(3), segs, nseg);
	}
}

/* A segment claiming more batches than it had is refused, with its index. */
static void test_check_refuses(void **state)
{
	(void)state;
	struct dataset g = {.n = 60}, sh = {.window = 2};
	random_groups(&sh, 10, 5);
	const struct dataset *ds[] = {&g, &sh};
	for (int k = 0; k < 2; k++) {
		struct stk_sampler s;
		make_sampler(&s, ds[k], 0, 2, 4, false, 0);
		struct stk__segment ok[] = {{4, 1}, {3, 1}}, bad[] = {{4, 1}, {3, 99}},
				    zero[] = {{0, 1}};
		uint32_t at = 7;
		assert_int_equal(stk__sampler_check(&s, 0, ok, 2, &at), 0);
		assert_int_equal(stk__sampler_check(&s, 0, bad, 2, &at), -ERANGE);
		assert_int_equal(at, 1);
		assert_int_equal(stk__sampler_check(&s, 0, zero, 1, &at), -ERANGE);
		assert_int_equal(at, 0);
		struct stk__segment many[STK_RESUME_SEGMENTS + 1] = {{0}};
		assert_int_equal(stk__sampler_check(&s, 0, many, STK_RESUME_SEGMENTS + 1, &at), -E2BIG);
		stk__sampler_free(&s);
	}
}

/* --- the loader's resume point ------------------------------------------- */

#define NFILES 60
static char *root, *other;

static void write_folder(const char *dir, int n)
{
	char p[PATH_MAX];
	tu_mkdir(dir);
	for (int c = 0; c < 3; c++) {
		snprintf(p, sizeof(p), "%s/c%d", dir, c);
		tu_mkdir(p);
	}
	for (int i = 0; i < n; i++) {
		snprintf(p, sizeof(p), "%s/c%d/%03d.jpg", dir, i % 3, i);
		tu_write(p, "sample", 1 + (size_t)(i % 6));
	}
}

static int setup(void **state)
{
	(void)state;
	char *t = tu_mkdtemp();
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/a", t);
	root = strdup(p);
	write_folder(root, NFILES);
	snprintf(p, sizeof(p), "%s/b", t);
	other = strdup(p);
	write_folder(other, NFILES - 1);
	*state = t;
	return 0;
}

static int teardown(void **state)
{
	tu_rmrf(*state);
	free(*state);
	free(root);
	free(other);
	return 0;
}

static struct stk_loader *make(struct stk_loader_opts o)
{
	o.size = sizeof(o);
	o.flags |= STK_F_QUIET | STK_F_NO_CACHE;
	o.engine = STK_ENGINE_NULL;
	if (!o.path)
		o.path = root;
	struct stk_loader *l = NULL;
	char err[512];
	int rc = stk_loader_create(&l, &o, err, sizeof(err));
	if (rc)
		fail_msg("create: %s (%s)", err, stk_err_name(rc));
	return l;
}

/* Takes up to k batches (-1: all); counts each sample into cnt. */
static int64_t take(struct stk_loader *l, int64_t k, int *cnt, int64_t *order)
{
	struct stk_batch *b;
	int64_t got = 0, m = 0;
	while ((k < 0 || got < k) && stk_loader_next(l, &b) == 1) {
		for (uint32_t i = 0; i < b->count; i++) {
			if (cnt)
				cnt[b->indices[i]]++;
			if (order)
				order[m] = b->indices[i];
			m++;
		}
		stk_batch_release(l, b);
		got++;
	}
	return m;
}

static struct stk_loader *rank_of(uint32_t r, uint32_t w, uint64_t epoch)
{
	return make((struct stk_loader_opts){.batch_size = 4, .seed = 5, .epoch = epoch,
					     .rank = r, .world_size = w});
}

/* 4 ranks save at batch 2; 2 ranks resume and save at their batch 1; 3
 * ranks read the rest: every sample once, but for one padded repeat. */
static void test_loader_elastic(void **state)
{
	(void)state;
	int cnt[NFILES] = {0};
	struct stk_resume p[4], q[2];
	for (uint32_t r = 0; r < 4; r++) {
		struct stk_loader *l = rank_of(r, 4, 1);
		take(l, 2, cnt, NULL);
		p[r].size = sizeof(p[r]);
		assert_int_equal(stk_loader_resume_point(l, &p[r]), 0);
		assert_memory_equal(&p[r], &p[0], sizeof(p[0])); /* every rank's is the same */
		stk_loader_destroy(l);
	}
	assert_int_equal(p[0].nsegments, 1);
	assert_int_equal(p[0].segments[0].world_size, 4);
	assert_int_equal(p[0].segments[0].batches, 2);
	assert_int_equal(p[0].epoch, 1);
	for (uint32_t r = 0; r < 2; r++) {
		struct stk_loader *l = rank_of(r, 2, 0);
		assert_int_equal(stk_loader_resume(l, &p[0]), 0);
		struct stk_batch *b;
		assert_int_equal(stk_loader_next(l, &b), 1);
		assert_int_equal(b->number, 2); /* numbers go on from the point's */
		for (uint32_t i = 0; i < b->count; i++)
			cnt[b->indices[i]]++;
		stk_batch_release(l, b);
		q[r].size = sizeof(q[r]);
		assert_int_equal(stk_loader_resume_point(l, &q[r]), 0);
		assert_memory_equal(&q[r], &q[0], sizeof(q[0]));
		stk_loader_destroy(l);
	}
	assert_int_equal(q[0].nsegments, 2);
	assert_int_equal(q[0].segments[1].world_size, 2);
	assert_int_equal(q[0].segments[1].batches, 1);
	for (uint32_t r = 0; r < 3; r++) {
		struct stk_loader *l = rank_of(r, 3, 7);
		assert_int_equal(stk_loader_resume(l, &q[0]), 0);
		take(l, -1, cnt, NULL);
		stk_loader_destroy(l);
	}
	/* 32 + 8 read, 20 left over 3 ranks: 7 each, one padded repeat */
	int repeats = 0;
	for (int i = 0; i < NFILES; i++) {
		assert_true(cnt[i] >= 1 && cnt[i] <= 2);
		repeats += cnt[i] - 1;
	}
	assert_int_equal(repeats, 1);
}

/* The same world size continues exactly as the uninterrupted run. */
static void test_loader_same_world(void **state)
{
	(void)state;
	int64_t full[NFILES], tail[NFILES];
	for (int mode = 0; mode < 2; mode++) {
		uint32_t flags = mode ? STK_F_DROP_LAST : 0;
		struct stk_loader *l = make((struct stk_loader_opts){
			.batch_size = 3, .seed = 8, .epoch = 2, .rank = 1, .world_size = 3, .flags = flags});
		int64_t n = take(l, -1, NULL, full);
		stk_loader_start(l, 2, 0);
		int64_t head = take(l, 2, NULL, NULL);
		struct stk_resume p = {.size = sizeof(p)};
		assert_int_equal(stk_loader_resume_point(l, &p), 0);
		stk_loader_destroy(l);
		l = make((struct stk_loader_opts){.batch_size = 3, .seed = 8, .rank = 1,
						  .world_size = 3, .flags = flags});
		assert_int_equal(stk_loader_resume(l, &p), 0);
		assert_int_equal(take(l, -1, NULL, tail), n - head);
		assert_memory_equal(tail, full + head, (size_t)(n - head) * sizeof(int64_t));
		stk_loader_destroy(l);
	}
}

static void expect_refused(struct stk_loader_opts o, const struct stk_resume *p, int err,
			   const char *words)
{
	struct stk_loader *l = make(o);
	int64_t before[NFILES], after[NFILES];
	int64_t n = take(l, 1, NULL, before);
	stk_loader_start(l, 0, 0);
	assert_int_equal(stk_loader_resume(l, p), err);
	const char *why = stk_last_error(l);
	if (!strstr(why, words))
		fail_msg("'%s' does not say '%s'", why, words);
	/* unchanged: it still reads the epoch it was at */
	assert_int_equal(take(l, 1, NULL, after), n);
	assert_memory_equal(before, after, (size_t)n * sizeof(int64_t));
	stk_loader_destroy(l);
}

static void test_loader_refuses(void **state)
{
	(void)state;
	struct stk_loader_opts o = {.batch_size = 4, .seed = 5, .world_size = 2};
	struct stk_loader *l = make(o);
	take(l, 2, NULL, NULL);
	struct stk_resume p = {.size = sizeof(p)};
	assert_int_equal(stk_loader_resume_point(l, &p), 0);
	stk_loader_destroy(l);
	struct stk_loader_opts x = o;
	x.path = other;
	expect_refused(x, &p, -EINVAL, "another dataset");
	x = o;
	x.seed = 6;
	expect_refused(x, &p, -EINVAL, "seed 5");
	x = o;
	x.batch_size = 8;
	expect_refused(x, &p, -EINVAL, "batch_size 4");
	x = o;
	x.flags = STK_F_DROP_LAST;
	expect_refused(x, &p, -EINVAL, "drop_last off");
	x = o;
	x.flags = STK_F_NO_SHUFFLE;
	expect_refused(x, &p, -EINVAL, "shuffle on");
	struct stk_resume q = p;
	q.segments[0].batches = 1000;
	expect_refused(o, &q, -ERANGE, "more than epoch 0 had");
	q = p;
	q.nsegments = 0;
	expect_refused(o, &q, -EINVAL, "0 segments");
	q = p;
	q.nsegments = STK_RESUME_SEGMENTS;
	for (uint32_t i = 0; i < STK_RESUME_SEGMENTS; i++)
		q.segments[i] = (struct stk_resume_segment){.world_size = 3 + (i & 1), .batches = 0};
	expect_refused(o, &q, -E2BIG, "world sizes already");
	/* the old sampler's resume point is still reachable: same world, same order */
	struct stk_loader_state st;
	l = make(o);
	take(l, 2, NULL, NULL);
	stk_loader_state(l, &st);
	assert_int_equal(st.batches, 2);
	stk_loader_destroy(l);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_global_split),
		cmocka_unit_test(test_global_elastic),
		cmocka_unit_test(test_shard_split),
		cmocka_unit_test(test_shard_elastic),
		cmocka_unit_test(test_check_refuses),
		cmocka_unit_test(test_loader_elastic),
		cmocka_unit_test(test_loader_same_world),
		cmocka_unit_test(test_loader_refuses),
	};
	return cmocka_run_group_tests_name("sampler", tests, setup, teardown);
}
