/*
 * loader/state.c — where a loader is in its epoch, and restarting there,
 * also on another number of ranks.  The point is (seed, epoch, the epoch's
 * segments: world size and batches each), with what it is only valid for: the
 * dataset (a hash of the index), the batch size and the order options.  A
 * point that does not match is refused with what differs; the sampler
 * (sampler/sampler.c) replays the segments to find what is left.
 */
#include "loader/loader.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void stk_loader_state(const struct stk_loader *cl, struct stk_loader_state *out)
{
	struct stk_loader *l = (struct stk_loader *)cl;
	pthread_mutex_lock(&l->mu);
	*out = (struct stk_loader_state){.seed = l->o.seed, .epoch = l->epoch,
					 .batches = (uint64_t)l->next_out};
	pthread_mutex_unlock(&l->mu);
}

static uint64_t fp_mix(uint64_t h, uint64_t v)
{
	return stk__mix64(h ^ v) + 0x9e3779b97f4a7c15ull;
}

/* The index's identity: count, and every sample's path, size, offset and
 * label, in index order (which fixes what each index means).  Not the root:
 * a dataset copied elsewhere resumes. */
static uint64_t fingerprint(const struct stk_dataset *ds)
{
	uint64_t h = fp_mix(0x73746f6b65720001ull, (uint64_t)ds->n);
	uint64_t last_name = UINT64_MAX;
	for (int64_t i = 0; i < ds->n; i++) {
		const struct stk_entry *e = &ds->entries[i];
		h = fp_mix(h, e->size);
		h = fp_mix(h, (uint64_t)e->label);
		h = fp_mix(h, e->offset);
		if (e->name == last_name) /* a shard's members share its path */
			continue;
		last_name = e->name;
		const char *p = ds->names + e->name;
		size_t len = strlen(p);
		h = fp_mix(h, len);
		for (size_t k = 0; k < len; k += 8) {
			uint64_t w = 0;
			memcpy(&w, p + k, len - k < 8 ? len - k : 8);
			h = fp_mix(h, w);
		}
	}
	return h ? h : 1;
}

static uint64_t loader_fingerprint(struct stk_loader *l)
{
	uint64_t fp = atomic_load(&l->fingerprint);
	if (!fp) { /* the index never changes: two threads racing here agree */
		fp = fingerprint(l->ds);
		if (l->per_file > 1) /* video: clips a video, which fixes what a sample is */
			fp = fp_mix(fp, l->per_file);
		atomic_store(&l->fingerprint, fp);
	}
	return fp;
}

static uint32_t order_flags(const struct stk_loader *l)
{
	return l->o.flags & (STK_F_NO_SHUFFLE | STK_F_DROP_LAST);
}

static uint32_t window(const struct stk_loader *l)
{
	return l->o.shuffle_mode == STK_SHUFFLE_SHARD ? l->sampler.window : 0;
}

int stk_loader_resume_point(const struct stk_loader *cl, struct stk_resume *out)
{
	struct stk_loader *l = (struct stk_loader *)cl;
	if (out->size && out->size < sizeof(*out))
		return -EINVAL;
	struct stk_resume p = {.size = sizeof(p), .fingerprint = loader_fingerprint(l),
			       .seed = l->o.seed, .batch_size = l->o.batch_size,
			       .flags = order_flags(l), .shuffle_mode = l->o.shuffle_mode,
			       .shuffle_window = window(l)};
	pthread_mutex_lock(&l->mu);
	p.epoch = l->epoch;
	for (uint32_t i = 0; i < l->nprev; i++)
		p.segments[i] = (struct stk_resume_segment){.world_size = l->prev[i].world,
							    .batches = l->prev[i].batches};
	p.segments[l->nprev] = (struct stk_resume_segment){
		.world_size = l->o.world_size, .batches = (uint64_t)(l->next_out - l->sampler.first)};
	p.nsegments = l->nprev + 1;
	pthread_mutex_unlock(&l->mu);
	*out = p;
	return 0;
}

/* The reason stk_last_error gives: l->detail is written under mu. */
__attribute__((format(printf, 2, 3))) static void say(struct stk_loader *l, const char *fmt, ...)
{
	char buf[sizeof(l->detail)];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	pthread_mutex_lock(&l->mu);
	memcpy(l->detail, buf, sizeof(buf));
	pthread_mutex_unlock(&l->mu);
}

static const char *flag_word(uint32_t flags, uint32_t f)
{
	return flags & f ? "on" : "off";
}

/* Why point p cannot be applied to l, into l->detail; 0 when it can. */
static int refuse(struct stk_loader *l, const struct stk_resume *p)
{
	uint64_t fp = loader_fingerprint(l);
	if (p->fingerprint != fp) {
		say(l, "resume point is from another dataset: its fingerprint is "
				   "%016llx, %s's is %016llx (samples added, removed, renamed, "
				   "resized or relabelled)", (unsigned long long)p->fingerprint,
				   l->path, (unsigned long long)fp);
		return -EINVAL;
	}
	if (p->seed != l->o.seed) {
		say(l, "resume point has seed %llu, this loader seed %llu: create it "
				   "with seed %llu", (unsigned long long)p->seed,
				   (unsigned long long)l->o.seed, (unsigned long long)p->seed);
		return -EINVAL;
	}
	if (p->batch_size != l->o.batch_size) {
		say(l, "resume point has batch_size %u, this loader %u: create it "
				   "with batch_size %u", p->batch_size, l->o.batch_size, p->batch_size);
		return -EINVAL;
	}
	uint32_t diff = p->flags ^ order_flags(l);
	if (diff & STK_F_NO_SHUFFLE) {
		say(l, "resume point has shuffle %s, this loader %s",
				   flag_word(~p->flags, STK_F_NO_SHUFFLE),
				   flag_word(~order_flags(l), STK_F_NO_SHUFFLE));
		return -EINVAL;
	}
	if (diff & STK_F_DROP_LAST) {
		say(l, "resume point has drop_last %s, this loader %s",
				   flag_word(p->flags, STK_F_DROP_LAST),
				   flag_word(order_flags(l), STK_F_DROP_LAST));
		return -EINVAL;
	}
	if (p->shuffle_mode != (uint32_t)l->o.shuffle_mode || p->shuffle_window != window(l)) {
		say(l, "resume point has shuffle_mode %s (window %u), this loader "
				   "%s (window %u)", p->shuffle_mode ? "shard" : "global",
				   p->shuffle_window, l->o.shuffle_mode ? "shard" : "global", window(l));
		return -EINVAL;
	}
	if (p->nsegments < 1 || p->nsegments > STK_RESUME_SEGMENTS) {
		say(l, "resume point has %u segments (1..%u)", p->nsegments,
				   STK_RESUME_SEGMENTS);
		return p->nsegments ? -E2BIG : -EINVAL;
	}
	return 0;
}

int stk_loader_resume(struct stk_loader *l, const struct stk_resume *p)
{
	if (p->size && p->size < sizeof(*p)) {
		say(l, "resume point struct too small (%u bytes)", p->size);
		return -EINVAL;
	}
	int rc = refuse(l, p);
	if (rc)
		return rc;
	/* the last segment on this world size continues; another world size
	 * starts a new segment after it */
	struct stk__segment prev[STK_RESUME_SEGMENTS];
	uint32_t nprev = 0;
	for (uint32_t i = 0; i < p->nsegments; i++)
		prev[nprev++] = (struct stk__segment){.world = p->segments[i].world_size,
						      .batches = p->segments[i].batches};
	uint64_t skip = 0;
	if (prev[nprev - 1].world == l->o.world_size)
		skip = prev[--nprev].batches;
	else if (nprev == STK_RESUME_SEGMENTS) {
		say(l, "resume point has %u segments: its epoch ran on %u world "
				   "sizes already, the most one epoch keeps", p->nsegments,
				   STK_RESUME_SEGMENTS);
		return -E2BIG;
	}
	/* the current segment is checked as an earlier one would be */
	prev[nprev] = (struct stk__segment){.world = l->o.world_size, .batches = skip};
	uint32_t bad = 0;
	rc = stk__sampler_check(&l->sampler, p->epoch, prev, nprev + 1, &bad);
	if (rc == -ERANGE)
		say(l, "resume point: segment %u says %llu batches on each of %u "
				   "ranks, more than epoch %llu had there", bad + 1,
				   (unsigned long long)prev[bad].batches, prev[bad].world,
				   (unsigned long long)p->epoch);
	else if (rc)
		say(l, "resume point: %s", stk_strerror(rc));
	if (rc)
		return rc;
	return stk__loader_restart(l, p->epoch, prev, nprev, skip, 0);
}
