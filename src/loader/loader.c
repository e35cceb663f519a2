/*
 * loader/loader.c — the pipeline: index → sampler → I/O threads → ready batches.
 *
 * `prefetch` slots are fixed at create.  Each I/O thread owns one engine (an
 * io_uring ring, or the pread pool) and loops: claim the next batch number if
 * it is within `prefetch` of the consumer and a slot is free, lay its samples
 * out in the slot (sizes come from the index, so every read is exact and lands
 * in place), keep up to its share of the queue depth in flight, reap, and mark
 * a slot ready when its last read lands.  The consumer takes batches strictly
 * in order, whatever order reads finish in, so a run depends only on
 * (seed, epoch, rank, world_size).  In image mode each landed read becomes a
 * decode task for the decode threads, which write the cropped image into the
 * slot's image area; a slot is ready when its last read and decode are done.
 * One mutex guards the slots, the decode queue and the counters; the engines
 * are only touched by their own thread (wake excepted).  A release takes no
 * lock: it marks its slot, which the I/O thread takes back under the mutex,
 * and wakes an I/O thread that waits for slots once half the pool is back
 * (the consumer wakes it at once when it would wait itself).  Nor does taking
 * a batch that is ready: a ring publishes the slot's number (ready_no) after
 * its last write, and the consumer marks it held; a consumer waiting for a
 * batch already claimed sleeps on its own condition (wcv), since a ring holds
 * the mutex while it lays out or completes a batch and a consumer woken for
 * the mutex sleeps on it again.  Create, stop and
 * destroy are loader/create.c's; queries and statistics loader/stats.c's.
 */
#include "loader/loader.h"
#include "image/image.h"

#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void stk__loader_detail(struct stk_loader *l, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(l->detail, sizeof(l->detail), fmt, ap);
	va_end(ap);
}

void stk__loader_notice(const struct stk_loader *l, const char *fmt, ...)
{
	if (l->o.flags & STK_F_QUIET)
		return;
	va_list ap;
	va_start(ap, fmt);
	fputs("stoker: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

/* Room a sample takes in a slot, which is what its read asks for.  A sample
 * that is a whole file asks for one byte past its indexed size: a file that
 * grew since indexing (rewritten in place, its folder's mtime unchanged)
 * shows as a read longer than the index says, not as a silent prefix.
 * Under O_DIRECT the read is rounded to the block size at both ends (a tar
 * member may start anywhere in a block).  A tar member's room counts the
 * gap to the next one too (its header), which a merged read brings along
 * (loader/shard_read.c). */
uint64_t stk__loader_read_len(const struct stk_loader *l, uint64_t size)
{
	if (l->ds->shards)
		return l->direct ? STK_ALIGN_UP(size + STK_DIRECT_ALIGN - 1 + MERGE_GAP, STK_DIRECT_ALIGN)
				 : size + MERGE_GAP;
	if (!l->direct)
		return size + 1;
	return STK_ALIGN_UP(size + 1, STK_DIRECT_ALIGN);
}

/* --- in-flight accounting ------------------------------------------------ */

static void inflight_change(struct stk_loader *l, struct ring *r, int delta)
{
	uint64_t now = stk__now_ns();
	double da = (double)r->inflight * (double)(now - r->area_t);
	r->area += da;
	r->tarea += da;
	r->area_t = now;
	r->inflight = (unsigned)((int)r->inflight + delta);
	uint32_t total = atomic_fetch_add(&l->inflight, (uint32_t)delta) + (uint32_t)delta;
	uint32_t mx = atomic_load_explicit(&l->inflight_max, memory_order_relaxed);
	while (total > mx && !atomic_compare_exchange_weak(&l->inflight_max, &mx, total))
		;
}

/* --- the I/O threads ----------------------------------------------------- */

/* How many free slots a waiting ring is woken for: half the pool, so that a
 * consumer slower than the reads wakes it every other batch, not every batch
 * (a consumer about to wait for a batch wakes it at once: stk_loader_next). */
static uint32_t wake_at(const struct stk_loader *l)
{
	return l->pool.nslots / 2 ? l->pool.nslots / 2 : 1;
}

/* Released slots (stk_batch_release's marks) become free.  Under mu. */
static void take_back(struct stk_loader *l)
{
	for (uint32_t i = 0; i < l->pool.nslots; i++) {
		struct slot *s = &l->slots[i];
		if (s->state == SLOT_HELD && atomic_load(&s->returned) &&
		    atomic_exchange(&s->returned, false)) {
			s->state = SLOT_FREE;
			atomic_fetch_sub(&l->returned, 1);
		}
	}
}

/* A free slot, once the released ones are taken back.  Under mu. */
static struct slot *free_slot(struct stk_loader *l)
{
	take_back(l);
	for (uint32_t i = 0; i < l->pool.nslots; i++)
		if (l->slots[i].state == SLOT_FREE)
			return &l->slots[i];
	return NULL;
}

/* Wakes the rings that wait for a slot or the window (ring_main's want),
 * not the ones with reads in flight: those look again when a read lands. */
static void wake_wanting(struct stk_loader *l)
{
	for (uint32_t i = 0; i < l->nrings; i++) {
		struct ring *r = &l->rings[i];
		if (atomic_load(&r->want) && atomic_exchange(&r->want, false) && r->eng)
			r->ops->wake(r->eng);
	}
}

/* Compacts a batch whose samples failed under the skip policy. */
static void compact(struct stk_loader *l, struct slot *s)
{
	uint8_t *base = stk__pool_slot(&l->pool, (uint32_t)(s - l->slots));
	uint32_t k = 0;
	uint64_t off = 0;
	for (uint32_t i = 0; i < s->nios; i++) {
		if (s->ios[i].io.res < 0)
			continue;
		if (l->ds->shards) { /* laid out in file order: the bytes stay where they are */
			off = s->offsets[s->nios];
		} else if (off != s->offsets[i]) {
			memmove(base + off, base + s->offsets[i], s->sizes[i]);
		}
		if (l->image && k != i) {
			size_t ib = stk__image_bytes(&l->img);
			uint8_t *img = base + l->img_off;
			memcpy(img + (size_t)k * ib, img + (size_t)i * ib, ib);
		}
		s->offsets[k] = l->ds->shards ? s->offsets[i] : off;
		s->sizes[k] = s->sizes[i];
		s->labels[k] = s->labels[i];
		s->indices[k] = s->indices[i];
		if (!l->ds->shards)
			off += s->sizes[i]; /* the reads are done: no alignment needed any more */
		k++;
	}
	s->offsets[k] = off;
	s->nios = k;
}

/* All reads of a slot are in: it is ready (or free, if from before a
 * restart), unless the replace policy starts another round for its failed
 * samples.  Under mu. */
void stk__loader_finish_slot(struct stk_loader *l, struct slot *s)
{
	if (s->gen != l->gen) {
		s->state = SLOT_FREE;
	} else {
		if (l->o.on_error == STK_ON_ERROR_REPLACE && stk__loader_replace_round(l, s))
			return; /* stand-ins in flight */
		bool bad = false;
		for (uint32_t i = 0; i < s->nios; i++)
			bad |= s->ios[i].io.res < 0;
		if (bad && l->o.on_error == STK_ON_ERROR_SKIP)
			compact(l, s);
		s->state = SLOT_READY;
		/* after the slot's last write: the consumer may take it without mu
		 * (seq_cst: stk__loader_signal's look at `waiting` comes after) */
		atomic_store(&s->ready_no, s->number);
	}
	stk__loader_signal(l);
}

/* Folders and file lists: one read a file, laid out in sample order. */
static uint32_t lay_out_files(struct stk_loader *l, struct ring *r, struct slot *s, uint32_t n)
{
	uint64_t off = 0;
	uint32_t queued = 0;
	for (uint32_t i = 0; i < n; i++) {
		struct sio *x = &s->ios[i];
		uint64_t len = stk__loader_setup_read(l, s, i, l->scratch_idx[i], off);
		x->place = off;
		x->room = len;
		if (len > l->raw_bytes - off) {
			/* a batch far above the size bound (see slot_bytes_for) */
			x->room = 0;
			stk__loader_sample_error(l, s, x, STK_ETOOBIG, NULL);
			continue;
		}
		off += len;
		r->queue[(r->qhead + r->qlen++) % r->qcap] = x;
		queued++;
	}
	s->offsets[n] = off;
	return queued;
}

/* Claims batch `number` into slot s for ring r and queues its reads.  Under mu. */
static void claim(struct stk_loader *l, struct ring *r, struct slot *s, int64_t number)
{
	uint32_t n = stk__sampler_batch(&l->sampler, number, l->scratch_idx);
	s->state = SLOT_FILLING;
	s->gen = l->gen;
	s->number = number;
	s->ring = r->id;
	s->epoch = l->epoch;
	s->err_idx = UINT32_MAX;
	s->nerr = 0;
	s->decoding = 0;
	s->nios = n;
	uint32_t queued = l->ds->shards ? stk__shards_lay_out(l, r, s, n) : lay_out_files(l, r, s, n);
	for (uint32_t i = 0; i < n; i++) { /* each place's history starts, for replace */
		struct sio *x = &s->ios[i];
		x->orig = s->indices[i];
		x->attempt = x->reads = 0;
		if (l->ds->shards) { /* its bytes share a merged read: a stand-in goes after */
			x->place = NO_PLACE;
			x->room = stk__shards_room(l, x->orig);
		}
	}
	s->used = s->offsets[n]; /* stand-ins go after the batch's reads */
	s->replaced = 0;
	s->gave_up = false;
	s->pending = s->unsent = queued;
	if (queued == 0)
		stk__loader_finish_slot(l, s);
}

/* One sample's bytes landed (or not): checked, then decoded or counted.  Under mu. */
static void sample_done(struct stk_loader *l, struct slot *s, struct sio *x)
{
	struct stk_io *io = &x->io;
	char why[256];
	int rc = 0;
	if (l->ops == &stk__engine_null) /* null "reads" whatever it is asked */
		rc = io->res < 0 ? (int)io->res : 0;
	else if (l->ds->shards)
		rc = stk__shards_check(l, x, why, sizeof(why));
	else if (io->res >= 0 && (uint64_t)io->res < x->skip + x->size)
		rc = STK_ESHORT;
	else if (io->res >= 0 && (uint64_t)io->res > x->size && !x->prefix)
		rc = STK_EGREW; /* the byte past the indexed size was there */
	else if (io->res < 0)
		rc = (int)io->res;
	else if (!l->direct && !x->prefix)
		((uint8_t *)io->buf)[x->size] = 0; /* the probe's byte: not left as it was */
	if (rc < 0)
		stk__loader_sample_error(l, s, x, rc, l->ds->shards && l->ops != &stk__engine_null ? why
											   : NULL);
	else if (l->image && s->gen == l->gen) {
		s->decoding++;
		l->dq[(l->dq_head + l->dq_len++) % l->dq_cap] = x;
		pthread_cond_signal(&l->dcv);
	}
}

/* One read finished: its sample, or (shards) every member it brought.  Under mu. */
static void complete(struct stk_loader *l, struct sio *x, uint64_t now)
{
	struct slot *s = &l->slots[x->slot];
	stk_hist_add(l->h_read, now - x->t_submit);
	l->rd_reads++;
	l->rd_lat += (double)(now - x->t_submit);
	if (x->io.res > 0)
		l->rd_bytes += (uint64_t)x->io.res;
	if (l->tune.skip)
		l->tune.skip--;
	for (struct sio *m = x->rider; m; m = m->rider)
		m->io.res = x->io.res;
	for (struct sio *m = x; m; m = m->rider)
		sample_done(l, s, m);
	if (--s->pending == 0 && s->unsent == 0 && s->decoding == 0)
		stk__loader_finish_slot(l, s);
}

/* A decode thread: takes landed samples off the queue and writes their
 * cropped images into the slot. */
void *stk__loader_decode_main(void *arg)
{
	struct stk_loader *l = arg;
	char why[512];
	pthread_mutex_lock(&l->mu);
	for (;;) {
		while (!l->dq_len && !l->stop)
			pthread_cond_wait(&l->dcv, &l->mu);
		if (l->stop)
			break;
		struct sio *x = l->dq[l->dq_head];
		l->dq_head = (l->dq_head + 1) % l->dq_cap;
		l->dq_len--;
		struct slot *s = &l->slots[x->slot];
		int rc = 0;
		if (s->gen == l->gen) {
			uint64_t seed = stk__sample_seed(l->o.seed, s->epoch, s->indices[x->idx]);
			uint8_t *out = stk__pool_slot(&l->pool, x->slot) + l->img_off +
				       (size_t)x->idx * stk__image_bytes(&l->img);
			pthread_mutex_unlock(&l->mu);
			uint64_t t0 = stk__now_ns();
			struct stk__decode_info info;
			rc = stk__image_decode(&l->img, (uint8_t *)x->io.buf + x->skip, x->size, seed,
					       out, why, sizeof(why), &info);
			uint64_t dt = stk__now_ns() - t0;
			stk_hist_add(l->h_decode, dt);
			pthread_mutex_lock(&l->mu);
			l->decode_ns += dt;
			if (!rc) {
				l->decoded++;
				l->decoded_fast += info.fast;
				l->entropy_sum += info.entropy;
			}
		}
		if (rc)
			stk__loader_sample_error(l, s, x, rc, why);
		if (--s->decoding == 0 && s->pending == 0 && s->unsent == 0)
			stk__loader_finish_slot(l, s);
	}
	pthread_mutex_unlock(&l->mu);
	return NULL;
}

/* Free slots (after take_back, under mu; or, without mu, with the
 * released ones not yet taken back: l->returned). */
static uint32_t free_slots(const struct stk_loader *l)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < l->pool.nslots; i++)
		n += l->slots[i].state == SLOT_FREE;
	return n;
}

static bool can_claim(const struct stk_loader *l)
{
	return !l->draining && !l->fatal && l->next_start < l->sampler.batches &&
	       l->next_start < l->next_out + (int64_t)l->pool.nslots;
}

void *stk__loader_ring_main(void *arg)
{
	struct ring *r = arg;
	struct stk_loader *l = r->l;
	r->os_tid = (int)gettid();
	struct stk_engine_cfg cfg = {.root_fd = l->ds->root_fd, .queue_depth = r->cap,
				     .workers = l->o.io_threads, .direct = l->direct,
				     .null_latency_ns = l->o.null_latency_ns,
				     .remote = l->ds->remote};
	struct iovec *iov = calloc(l->pool.nslots, sizeof(*iov));
	if (iov) {
		for (uint32_t i = 0; i < l->pool.nslots; i++)
			iov[i] = (struct iovec){stk__pool_slot(&l->pool, i), l->pool.slot_bytes};
		/* fixed buffers are limited to 1 GiB each */
		if (l->pool.slot_bytes <= (1ull << 30)) {
			cfg.bufs = iov;
			cfg.nbufs = l->pool.nslots;
		}
	}
	int rc = r->ops->init(&r->eng, &cfg);
	free(iov);
	pthread_mutex_lock(&l->mu);
	r->init_rc = rc;
	r->init_done = true;
	stk__loader_signal(l);
	if (rc) {
		pthread_mutex_unlock(&l->mu);
		return NULL;
	}
	r->area_t = stk__now_ns();
	/* On stop, keep reaping until nothing is in flight: the pool may only be
	 * unmapped once the kernel is done writing into it. */
	while (!l->stop || r->inflight) {
		struct slot *s;
		/* keep enough claimed to fill the queue depth */
		while (!l->stop && r->take && r->qlen < r->qd && can_claim(l) && (s = free_slot(l)))
			claim(l, r, s, l->next_start++);
		/* Room for more, but no slot free or the window full: the flag asks
		 * the consumer for a wake, then the slots are looked at once more
		 * (a release marks its slot, then reads the flag: one of the two
		 * sides sees the other). */
		bool more = !l->stop && r->take && r->qlen < r->qd && !l->draining && !l->fatal &&
			    l->next_start < l->sampler.batches;
		atomic_store(&r->want, more);
		if (more && can_claim(l) && free_slot(l))
			continue;
		if ((l->draining || l->stop) && r->qlen) {
			/* drop what was never sent; its slot is freed once idle */
			for (uint32_t i = 0; i < r->qlen; i++) {
				struct sio *x = r->queue[(r->qhead + i) % r->qcap];
				l->slots[x->slot].unsent--;
				l->slots[x->slot].pending--;
			}
			r->qlen = 0;
		}
		if (l->draining && r->inflight == 0) {
			for (uint32_t i = 0; i < l->pool.nslots; i++) {
				struct slot *x = &l->slots[i];
				if (x->ring == r->id && (x->state == SLOT_FILLING || x->state == SLOT_READY) &&
				    x->gen != l->gen && x->decoding == 0) {
					atomic_store(&x->ready_no, -1);
					x->state = SLOT_FREE;
				}
			}
			stk__loader_signal(l);
		}
		unsigned n = 0;
		uint64_t now = stk__now_ns();
		while (r->qlen && r->inflight + n < r->qd) {
			struct sio *x = r->queue[r->qhead];
			r->qhead = (r->qhead + 1) % r->qcap;
			r->qlen--;
			x->t_submit = now;
			l->slots[x->slot].unsent--;
			r->batch[n++] = &x->io;
		}
		if (n)
			inflight_change(l, r, (int)n);
		pthread_mutex_unlock(&l->mu);

		if (n && (rc = r->ops->submit(r->eng, r->batch, n)) < 0)
			goto broken;
		/* blocks until a read lands or another thread wakes us */
		int got = r->ops->reap(r->eng, r->done, r->cap, true);
		if (got < 0) {
			rc = got;
			goto broken;
		}
		pthread_mutex_lock(&l->mu);
		now = stk__now_ns();
		for (int i = 0; i < got; i++)
			complete(l, (struct sio *)r->done[i], now);
		if (got) {
			inflight_change(l, r, -got);
			stk__tune_tick(l, now);
		}
	}
	pthread_mutex_unlock(&l->mu);
	return NULL;
broken:
	pthread_mutex_lock(&l->mu);
	if (!l->fatal) {
		l->fatal = rc;
		stk__loader_detail(l, "%s engine failed: %s", r->ops->name, stk_strerror(rc));
	}
	stk__loader_signal(l);
	pthread_mutex_unlock(&l->mu);
	return NULL;
}

void stk__loader_signal(struct stk_loader *l)
{
	pthread_cond_broadcast(&l->cv);
	/* the consumer raises `waiting`, then looks (ready_now, fatal, stop):
	 * the change came first, or this sees the flag */
	if (atomic_load(&l->waiting)) {
		/* the lock waits until the consumer sleeps (or looked again);
		 * the broadcast after it, so the woken one does not wait for wmu */
		pthread_mutex_lock(&l->wmu);
		pthread_mutex_unlock(&l->wmu);
		pthread_cond_broadcast(&l->wcv);
	}
}

void stk__loader_wake_rings(struct stk_loader *l)
{
	for (uint32_t i = 0; i < l->nrings; i++)
		if (l->rings[i].eng)
			l->rings[i].ops->wake(l->rings[i].eng);
}

/* --- the consumer's side ------------------------------------------------- */

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

int stk_loader_start(struct stk_loader *l, uint64_t epoch, uint64_t start_batch)
{
	return stk__loader_restart(l, epoch, NULL, 0, start_batch, 0);
}

int stk_loader_restart(struct stk_loader *l, uint64_t epoch, uint64_t start_batch,
		       uint32_t flags)
{
	return stk__loader_restart(l, epoch, NULL, 0, start_batch, flags);
}

int stk__loader_restart(struct stk_loader *l, uint64_t epoch, const struct stk__segment *prev,
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
	b->data = stk__pool_slot(&l->pool, b->slot);
	b->data_bytes = s->offsets[s->nios];
	b->offsets = s->offsets;
	b->sizes = s->sizes;
	b->labels = s->labels;
	b->indices = s->indices;
	b->replaced = s->replaced;
	if (l->image) {
		b->images = b->data + l->img_off;
		b->image_bytes = stk__image_bytes(&l->img);
		b->channels = 3;
		b->height = l->img.height;
		b->width = l->img.width;
		b->dtype = l->img.dtype;
		b->nhwc = !!(l->img.flags & STK_IMG_NHWC);
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
	if (free_slots(l) + l->returned >= wake_at(l))
		wake_wanting(l);
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
	if (!s && !free_slot(l) && l->next_start <= l->next_out) {
		bool all_held = true;
		for (uint32_t i = 0; i < l->pool.nslots; i++)
			all_held &= l->slots[i].state == SLOT_HELD;
		if (all_held) {
			stk__loader_detail(l, "all %u batch slots are held: release batches "
					   "(stk_batch_release) or raise prefetch", l->pool.nslots);
			return STK_ENOSLOT;
		}
	}
	if (free_slot(l)) /* about to wait: a ring waiting for slots claims now,
			   * not at half the pool */
		wake_wanting(l);
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

int stk_loader_next_timeout(struct stk_loader *l, struct stk_batch **out, uint64_t timeout_ns)
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
			if (free_slots(l) + l->returned) /* about to wait (as look) */
				wake_wanting(l);
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
	if (atomic_fetch_add(&l->returned, 1) + 1 >= wake_at(l))
		wake_wanting(l);
}

