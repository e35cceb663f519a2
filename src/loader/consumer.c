/*
 * loader/consumer.c — the pipeline's consumer side: start and restart an
 * epoch (draining the old generation's reads), take the next batch in order,
 * release it.
 *
 * Taking a batch that is ready needs no lock: its ring published the slot's
 * number (ready_no) after its last write, and the consumer marks it held.  A
 * consumer waiting for a batch already claimed sleeps on its own condition
 * (wcv), since a ring holds the mutex while it lays out or completes a batch
 * and a consumer woken for the mutex would sleep on it again.  A release
 * takes no lock either: it marks its slot, which an I/O thread takes back
 * under the mutex, and wakes an I/O thread that waits for slots once half
 * the pool is back (the consumer wakes it at once when it would wait itself).
 * Create, stop and destroy are loader/create.c's; queries and statistics
 * loader/stats.c's.
 */
#include "loader/loader.h"
#include "image/image.h"

#include <stdio.h>
#include <string.h>

/* Starts a new stats window: the mark moves to now, the window's histograms
 * and in-flight maximum restart.  Under mu; the device's counters are read
 * by the caller after unlocking (stk__loader_snap_disk). */
static void new_window(struct stk_loader *l)
{
	stk__loader_snap(l, &l->mark);
	stk_hist_reset(l->h_wait);
	stk_hist_reset(l->h_read);
	stk_hist_reset(l->h_decode);
	atomic_store(&l->inflight_max, atomic_load(&l->inflight));
}

/* The consumer's calls (next, start, resume) are one thread's: a second
 * thread inside one at the same time would take the same batch or move the
 * position under the first.  Refused (-EBUSY, said by stk_last_error), not
 * serialized: a caller doing that has two consumers, which is the bug. */
static bool consumer_enter(struct stk_loader *l, const char *what)
{
	if (!atomic_exchange(&l->consuming, true))
		return true;
	pthread_mutex_lock(&l->mu);
	if (!l->fatal)
		stk__loader_detail(l, "%s while another thread was in stk_loader_next or a restart: a "
				   "loader has one consumer thread", what);
	pthread_mutex_unlock(&l->mu);
	return false;
}

int stk_loader_start(struct stk_loader *l, uint64_t epoch, uint64_t start_batch)
{
	return stk__loader_restart(l, epoch, NULL, 0, start_batch, 0);
}

int stk_loader_restart(struct stk_loader *l, uint64_t epoch, uint64_t start_batch,
		       uint32_t flags)
{
	return stk__loader_restart(l, epoch, NULL, 0, start_batch, flags);
}

static int restart(struct stk_loader *l, uint64_t epoch, const struct stk__segment *prev,
		   uint32_t nprev, uint64_t skip, uint32_t flags);

int stk__loader_restart(struct stk_loader *l, uint64_t epoch, const struct stk__segment *prev,
			uint32_t nprev, uint64_t skip, uint32_t flags)
{
	if (!consumer_enter(l, "a restart (stk_loader_start, stk_loader_resume)"))
		return -EBUSY;
	int rc = restart(l, epoch, prev, nprev, skip, flags);
	atomic_store(&l->consuming, false);
	return rc;
}

static int restart(struct stk_loader *l, uint64_t epoch, const struct stk__segment *prev,
		   uint32_t nprev, uint64_t skip, uint32_t flags)
{
	pthread_mutex_lock(&l->mu);
	if (l->stop) {
		pthread_mutex_unlock(&l->mu);
		return -ECANCELED;
	}
	l->gen++;
	l->draining = true;
	pthread_mutex_unlock(&l->mu);
	stk__loader_wake_rings(l);
	pthread_mutex_lock(&l->mu);
	/* wait until no read of the old generation is in flight or queued */
	for (;;) {
		bool busy = false;
		for (uint32_t i = 0; i < l->nrings; i++)
			busy |= l->rings[i].inflight || l->rings[i].qlen;
		for (uint32_t i = 0; i < l->pool.nslots; i++)
			busy |= l->slots[i].state == SLOT_FILLING || l->slots[i].state == SLOT_READY;
		if (!busy || l->stop)
			break;
		pthread_cond_wait(&l->cv, &l->mu);
	}
	int rc = stk__sampler_start(&l->sampler, epoch, prev, nprev); /* checked by the caller */
	if (rc) { /* the old layout stands, but its batches were dropped */
		stk__loader_detail(l, "cannot lay out epoch %llu: %s", (unsigned long long)epoch,
				   stk_strerror(rc));
		l->fatal = rc;
		pthread_mutex_unlock(&l->mu);
		return rc;
	}
	l->epoch = epoch;
	if (nprev)
		memcpy(l->prev, prev, (size_t)nprev * sizeof(*prev));
	l->nprev = nprev;
	l->next_start = l->next_out = l->sampler.first + (int64_t)skip;
	l->fatal = 0;
	l->poll_t0 = 0;
	if (flags & STK_START_RESET_STATS) {
		new_window(l);
		/* the device's counters before the new epoch's first read */
		stk__loader_snap_disk(l, &l->mark);
	}
	l->draining = false;
	stk__tune_restart(l);
	pthread_mutex_unlock(&l->mu);
	stk__loader_wake_rings(l);
	return 0;
}

void stk_loader_stats_reset(struct stk_loader *l)
{
	struct stk__snap disk;
	stk__loader_snap_disk(l, &disk);
	pthread_mutex_lock(&l->mu);
	new_window(l);
	l->mark.disk_ok = disk.disk_ok;
	l->mark.disk = disk.disk;
	pthread_mutex_unlock(&l->mu);
}

static struct slot *ready_slot(struct stk_loader *l, int64_t number)
{
	for (uint32_t i = 0; i < l->pool.nslots; i++) {
		struct slot *s = &l->slots[i];
		if (s->gen == l->gen && s->number == number &&
		    (s->state == SLOT_READY || s->state == SLOT_FILLING))
			return s;
	}
	return NULL;
}

/* The next batch's slot if it is ready, found without mu (ready_no is
 * published after the slot's last write), else NULL. */
static struct slot *ready_now(struct stk_loader *l)
{
	if (l->fatal || l->stop)
		return NULL;
	int64_t number = atomic_load_explicit(&l->next_out, memory_order_relaxed);
	for (uint32_t i = 0; i < l->pool.nslots; i++)
		if (atomic_load_explicit(&l->slots[i].ready_no, memory_order_acquire) == number)
			return &l->slots[i];
	return NULL;
}

/* The fail policy's end of the epoch: the batch has a failed sample, or
 * (replace) a place no stand-in could be found for. */
static bool ends_epoch(const struct stk_loader *l, const struct slot *s)
{
	return (l->o.on_error == STK_ON_ERROR_FAIL && s->err_idx != UINT32_MAX) || s->gave_up;
}

/* A ready batch's failed and replaced samples, counted as it is taken. */
static void count_errors(struct stk_loader *l, struct slot *s)
{
	atomic_fetch_add(&l->errors, s->nerr);
	s->replaced = 0;
	for (uint32_t i = 0; i < s->nios; i++)
		s->replaced += s->ios[i].reads > 0 && s->ios[i].io.res >= 0;
	atomic_fetch_add(&l->replaced, s->replaced);
}

/* Hands ready slot s (the next batch) to the consumer; `whole` is how long
 * it waited for it.  The consumer's thread, with or without mu: nothing here
 * is another thread's (the I/O threads only read the state). */
static struct stk_batch *hand_out(struct stk_loader *l, struct slot *s, uint64_t whole)
{
	atomic_store_explicit(&s->ready_no, -1, memory_order_relaxed);
	if (atomic_exchange(&s->returned, false)) /* a stale release's mark */
		atomic_fetch_sub(&l->returned, 1);
	s->state = SLOT_HELD;
	struct stk_batch *b = &s->batch;
	b->epoch = l->epoch;
	b->number = (uint64_t)s->number;
	b->count = s->nios;
	b->slot = (uint32_t)(s - l->slots);
	uint8_t *slot = stk__pool_slot(&l->pool, b->slot);
	b->data = l->split ? NULL : slot; /* split: the reads were not kept */
	b->data_bytes = l->split ? 0 : s->offsets[s->nios];
	b->offsets = s->offsets;
	b->sizes = s->sizes;
	b->labels = s->labels;
	b->indices = s->indices;
	b->replaced = s->replaced;
	if (l->image) {
		b->images = slot + l->img_off;
		b->image_bytes = stk__image_bytes(&l->img);
		b->channels = 3;
		b->height = l->img.height;
		b->width = l->img.width;
		b->dtype = l->img.dtype;
		b->nhwc = !!(l->img.flags & STK_IMG_NHWC);
	} else if (l->video) {
		stk__vloader_batch(l, b->slot, b);
	}
	l->next_out++; /* after the state: a ring that sees the window move sees the slot held */
	atomic_fetch_add(&l->batches, 1);
	atomic_fetch_add(&l->samples, b->count);
	uint64_t bytes = 0;
	for (uint32_t i = 0; i < b->count; i++)
		bytes += b->sizes[i];
	atomic_fetch_add(&l->bytes, bytes);
	stk_hist_add(l->h_wait, whole);
	return b;
}

int stk_loader_next(struct stk_loader *l, struct stk_batch **out)
{
	return stk_loader_next_timeout(l, out, UINT64_MAX);
}

/* Takes ready slot s as the next batch: the consumer's thread, without mu
 * (the caller may hold it); t0: when the call began. */
static int take(struct stk_loader *l, struct slot *s, uint64_t t0, struct stk_batch **out)
{
	uint64_t now = stk__now_ns();
	/* polls that timed out and the call that got the batch are one wait */
	uint64_t whole = l->poll_t0 ? now - l->poll_t0 : now - t0;
	l->poll_t0 = 0;
	l->wait_ns += now - t0;
	count_errors(l, s);
	*out = hand_out(l, s, whole);
	/* the window moved and a slot left READY: a ring waiting for either is
	 * woken once half the pool is free or released (as release wakes) */
	if (stk__loader_free_slots(l) + l->returned >= stk__loader_wake_at(l))
		stk__loader_wake_wanting(l);
	stk__loader_tick(l, now);
	return 1;
}

/* What the consumer gets now, under mu: 1 with *ps the next batch's slot
 * READY (one that ends the epoch, or one that became ready since ready_now
 * looked), 0 at the epoch's end, an error, or -EAGAIN: wait. */
static int look(struct stk_loader *l, struct slot **ps)
{
	*ps = NULL;
	if (l->fatal)
		return l->fatal;
	if (l->stop) {
		stk__loader_detail(l, "the loader was stopped (stk_loader_stop)");
		return -ECANCELED;
	}
	if (l->next_out >= l->sampler.batches)
		return 0;
	struct slot *s = ready_slot(l, l->next_out);
	if (s && s->state == SLOT_READY) {
		*ps = s;
		return 1;
	}
	if (!s && !stk__loader_free_slot(l) && l->next_start <= l->next_out) {
		bool all_held = true;
		for (uint32_t i = 0; i < l->pool.nslots; i++)
			all_held &= l->slots[i].state == SLOT_HELD;
		if (all_held) {
			stk__loader_detail(l, "all %u batch slots are held: release batches "
					   "(stk_batch_release) or raise prefetch", l->pool.nslots);
			return STK_ENOSLOT;
		}
	}
	if (stk__loader_free_slot(l)) /* about to wait: a ring waiting for slots claims now,
			   * not at half the pool */
		stk__loader_wake_wanting(l);
	return -EAGAIN;
}

/* Sleeps until the next batch may be ready, the loader fails or stops, or
 * the deadline, on wcv: not on cv, whose wake would wait for mu again. */
static void wait_ready(struct stk_loader *l, uint64_t deadline)
{
	pthread_mutex_lock(&l->wmu);
	atomic_store(&l->waiting, true);
	if (!ready_now(l) && !l->fatal && !l->stop) {
		if (deadline == UINT64_MAX) {
			pthread_cond_wait(&l->wcv, &l->wmu);
		} else {
			struct timespec ts = {.tv_sec = (time_t)(deadline / 1000000000ull),
					      .tv_nsec = (long)(deadline % 1000000000ull)};
			pthread_cond_timedwait(&l->wcv, &l->wmu, &ts);
		}
	}
	atomic_store(&l->waiting, false);
	pthread_mutex_unlock(&l->wmu);
}

static int next_timeout(struct stk_loader *l, struct stk_batch **out, uint64_t timeout_ns);

int stk_loader_next_timeout(struct stk_loader *l, struct stk_batch **out, uint64_t timeout_ns)
{
	if (!consumer_enter(l, "stk_loader_next"))
		return -EBUSY; /* *out is the other thread's to write: left alone */
	int rc = next_timeout(l, out, timeout_ns);
	atomic_store(&l->consuming, false);
	return rc;
}

static int next_timeout(struct stk_loader *l, struct stk_batch **out, uint64_t timeout_ns)
{
	*out = NULL;
	uint64_t t0 = stk__now_ns();
	uint64_t deadline = timeout_ns > UINT64_MAX - t0 ? UINT64_MAX : t0 + timeout_ns;
	struct slot *s;
	int rc;
	for (;;) {
		/* A ready batch is taken without mu, which a ring holds while it
		 * lays out or completes a batch (the consumer would sleep on it). */
		if ((s = ready_now(l)) && !ends_epoch(l, s))
			return take(l, s, t0, out);
		/* Claimed, so on its way (a failure is a batch too; a stop or an
		 * engine's failure wakes the wait): waited for apart from mu. */
		if (!s && !l->fatal && !l->stop && l->next_start > l->next_out &&
		    stk__now_ns() < deadline) {
			if (stk__loader_free_slots(l) + l->returned) /* about to wait (as look) */
				stk__loader_wake_wanting(l);
			wait_ready(l, deadline);
			continue;
		}
		pthread_mutex_lock(&l->mu);
		rc = look(l, &s);
		if (rc == 1 && !ends_epoch(l, s)) { /* ready since ready_now looked */
			pthread_mutex_unlock(&l->mu);
			return take(l, s, t0, out);
		}
		if (rc != -EAGAIN)
			break;
		if (stk__now_ns() >= deadline) {
			rc = -ETIMEDOUT;
			break;
		}
		pthread_mutex_unlock(&l->mu);
		wait_ready(l, deadline);
	}
	/* under mu: the epoch's end, an error, a time-out, or a READY batch
	 * that ends the epoch (its first failed sample) */
	l->poll_t0 = rc == -ETIMEDOUT ? (l->poll_t0 ? l->poll_t0 : t0) : 0;
	if (rc == 0) /* the epoch's end: what video mode learnt is kept now */
		stk__vloader_epoch_end(l);
	if (rc == 1) {
		count_errors(l, s);
		rc = s->gave_up ? s->gave_up_rc : (int)s->ios[s->err_idx].io.res;
		snprintf(l->detail, sizeof(l->detail), "%s", s->err);
		l->fatal = rc;
		atomic_store(&s->ready_no, -1);
		s->state = SLOT_FREE;
	}
	l->wait_ns += stk__now_ns() - t0;
	if (rc < 0 && rc != -ETIMEDOUT)
		snprintf(l->last_error, sizeof(l->last_error), "%s", l->detail);
	pthread_mutex_unlock(&l->mu);
	return rc;
}

void stk_batch_release(struct stk_loader *l, struct stk_batch *b)
{
	if (!b)
		return;
	struct slot *s = (struct slot *)b; /* the view is the slot's first member */
	/* No lock: the ring holding mu for a claim would make every release
	 * wait for it.  free_slot takes the slot back under mu; no waiter on cv
	 * waits for a release (next says STK_ENOSLOT at once). */
	if (atomic_exchange(&s->returned, true))
		return; /* released twice: once counts */
	if (atomic_fetch_add(&l->returned, 1) + 1 >= stk__loader_wake_at(l))
		stk__loader_wake_wanting(l);
}

