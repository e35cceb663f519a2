/*
 * loader/producer.c — the pipeline's producer side: index → sampler → I/O
 * threads → ready batches.
 *
 * `prefetch` slots are fixed at create.  Each I/O thread owns one engine (an
 * io_uring ring, or the pread pool) and loops: claim the next batch number if
 * it is within `prefetch` of the consumer and a slot is free, lay its samples
 * out in the slot (loader/read.c: sizes come from the index, so every read is
 * exact and lands in place), keep up to its share of the queue depth in
 * flight, reap, and mark a slot ready when its last read lands.  The consumer
 * (loader/consumer.c) takes batches strictly in order, whatever order reads
 * finish in, so a run depends only on (seed, epoch, rank, world_size).  In
 * image mode each landed read becomes a decode task for the decode threads,
 * which write the cropped image into the slot's image area; a slot is ready
 * when its last read and decode are done.  Unless keep_raw, image mode
 * reads a batch into one of a few read areas (l->areas) taken at claim and
 * given back when its last sample is decoded: a ready batch holds only its
 * images, and a claim waits for a free slot and a free read area.  One mutex guards the slots, the
 * decode queue and the counters; the engines are only touched by their own
 * thread (wake excepted).  A ring publishes a ready slot's number (ready_no)
 * after its last write, so the consumer can take it without the mutex.
 * Failed samples: loader/error.c (counted, named), loader/replace.c
 * (stand-ins); the queue depth's tuning: loader/tune.c.
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

/* --- in-flight accounting ------------------------------------------------ */

static void inflight_change(struct stk_loader *l, struct io_thread *r, int delta)
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

/* Whether the good samples' bytes lie in batch order, each after the one
 * before: a file read again at a larger size (loader/read.c) went after
 * the slot's reads, and moving it down could overwrite the samples after
 * it. */
static bool in_order(const struct slot *s)
{
	uint64_t end = 0;
	for (uint32_t i = 0; i < s->nios; i++) {
		if (s->ios[i].io.res < 0)
			continue;
		if (s->offsets[i] < end)
			return false;
		end = s->offsets[i] + s->sizes[i];
	}
	return true;
}

/* Compacts a batch whose samples failed under the skip policy. */
static void compact(struct stk_loader *l, struct slot *s)
{
	uint8_t *base = stk__loader_read_base(l, s);
	uint8_t *img = stk__pool_slot(&l->pool, (uint32_t)(s - l->slots)) + l->img_off;
	uint32_t k = 0;
	uint64_t off = 0;
	/* shards are laid out in file order, and bytes out of order stay: only
	 * the arrays are compacted (split: the bytes are not kept at all) */
	bool stay = l->ds->shards || l->split || !in_order(s);
	for (uint32_t i = 0; i < s->nios; i++) {
		if (s->ios[i].io.res < 0)
			continue;
		if (stay) {
			off = s->offsets[s->nios];
		} else if (off != s->offsets[i]) {
			memmove(base + off, base + s->offsets[i], s->sizes[i]);
		}
		if (l->image && k != i) {
			size_t ib = stk__image_bytes(&l->img);
			memcpy(img + (size_t)k * ib, img + (size_t)i * ib, ib);
		}
		if (l->video && k != i)
			stk__vloader_move(l, (uint32_t)(s - l->slots), k, i);
		s->offsets[k] = stay ? s->offsets[i] : off;
		s->sizes[k] = s->sizes[i];
		s->labels[k] = s->labels[i];
		s->indices[k] = s->indices[i];
		if (!stay)
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
		stk__loader_area_done(l, s);
		s->state = SLOT_FREE;
	} else {
		if (l->o.on_error == STK_ON_ERROR_REPLACE && stk__loader_replace_round(l, s))
			return; /* stand-ins in flight */
		stk__loader_area_done(l, s); /* every sample is decoded (or failed) */
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

/* Claims batch `number` into slot s for ring r and queues its reads.  Under mu. */
static void claim(struct stk_loader *l, struct io_thread *r, struct slot *s, int64_t number)
{
	uint32_t n = stk__sampler_batch(&l->sampler, number, l->scratch_idx);
	if (l->video) /* clips: their videos are what is read */
		stk__vloader_claim(l, (uint32_t)(s - l->slots), l->scratch_idx, n);
	if (l->split) { /* stk__loader_free_slot saw one free */
		s->area = (uint32_t)__builtin_ctzll(~l->areas_used);
		l->areas_used |= 1ull << s->area;
	}
	s->state = SLOT_FILLING;
	s->gen = l->gen;
	s->number = number;
	s->ring = r->id;
	s->epoch = l->epoch;
	s->err_idx = UINT32_MAX;
	s->nerr = 0;
	s->decoding = 0;
	s->nios = n;
	uint32_t queued = stk__loader_lay_out(l, r, s, n);
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
	s->nbad = 0;
	s->pending = s->unsent = queued;
	stk__meta_kick(l); /* the walk ahead goes on from here */
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
	if (rc < 0 && x->jcopy) { /* jpeg_cache: the decode thread reads the file instead */
		x->jrc = rc;
		rc = 0;
	}
	if ((rc == STK_ESHORT || rc == STK_EGREW) && stk__loader_reread(l, s, x))
		return; /* read again at its size now: this read is no error */
	if (rc < 0)
		stk__loader_sample_error(l, s, x, rc, l->ds->shards && l->ops != &stk__engine_null ? why
											   : NULL);
	else if ((l->image || l->video) && s->gen == l->gen) {
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
	struct sio *w = x->whole ? x->whole : x;
	if (w->nleft) { /* a clip read as ranges: its first read stands for them all */
		if (w->pres >= 0) /* each read counted up to its need: a short one shows */
			w->pres = x->io.res < 0 ? x->io.res
				  : w->pres + (int64_t)((uint64_t)x->io.res < x->need
							? (uint64_t)x->io.res : x->need);
		if (--w->nleft) {
			if (--s->pending == 0 && s->unsent == 0 && s->decoding == 0)
				stk__loader_finish_slot(l, s);
			return;
		}
		w->io.res = w->pres;
		w->changed = x->changed; /* shards: the last read's stat came after them all */
		x = w;
	}
	for (struct sio *m = x->rider; m; m = m->rider) {
		m->io.res = x->io.res;
		m->changed = x->changed;
	}
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
			int64_t video = s->indices[x->idx];
			uint64_t epoch = s->epoch;
			pthread_mutex_unlock(&l->mu);
			uint64_t t0 = stk__now_ns();
			struct stk__decode_info info = {.format = -1};
			if (l->video)
				rc = stk__vloader_decode(l, x->slot, x->idx, video, epoch,
							 (uint8_t *)x->io.buf + x->skip, x->size, why,
							 sizeof(why));
			else if (l->jc)
				rc = stk__loader_jcache_decode(l, x, video, seed, out, why, sizeof(why),
							       &info);
			else
				rc = stk__image_decode(&l->img, (uint8_t *)x->io.buf + x->skip, x->size,
						       seed, out, why, sizeof(why), &info);
			uint64_t dt = stk__now_ns() - t0;
			stk_hist_add(l->h_decode, dt);
			pthread_mutex_lock(&l->mu);
			l->decode_ns += dt;
			if (!rc && l->video) {
				l->decoded++;
			} else if (!rc) {
				l->decoded++;
				l->decoded_fast += info.fast;
				l->entropy_sum += info.entropy;
				if (info.format >= 0 && info.format < STK_FORMATS) {
					l->fmt_decoded[info.format]++;
					l->fmt_fast[info.format] += info.fast;
					l->fmt_ns[info.format] += dt;
				}
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

static bool can_claim(const struct stk_loader *l)
{
	return !l->draining && !l->fatal && l->next_start < l->sampler.batches &&
	       l->next_start < l->next_out + (int64_t)l->pool.nslots;
}

void *stk__loader_io_main(void *arg)
{
	struct io_thread *r = arg;
	struct stk_loader *l = r->l;
	r->os_tid = (int)gettid();
	struct stk_engine_cfg cfg = {.root_fd = l->ds->root_fd, .queue_depth = r->cap,
				     .workers = l->o.io_threads, .direct = l->direct,
				     .null_latency_ns = l->o.null_latency_ns,
				     .remote = l->ds->remote};
	const struct stk_pool *rp = l->split ? &l->areas : &l->pool; /* where reads land */
	struct iovec *iov = calloc(rp->nslots, sizeof(*iov));
	if (iov) {
		for (uint32_t i = 0; i < rp->nslots; i++)
			iov[i] = (struct iovec){stk__pool_slot(rp, i), rp->slot_bytes};
		/* fixed buffers are limited to 1 GiB each */
		if (rp->slot_bytes <= (1ull << 30)) {
			cfg.bufs = iov;
			cfg.nbufs = rp->nslots;
		}
	}
	int rc = r->ops->init(&r->eng, &cfg);
	free(iov);
	if (!rc && r->id == 0)
		stk__meta_start(l);
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
		while (!l->stop && r->take && r->qlen < r->qd && can_claim(l) && (s = stk__loader_free_slot(l)))
			claim(l, r, s, l->next_start++);
		/* Room for more, but no slot free or the window full: the flag asks
		 * the consumer for a wake, then the slots are looked at once more
		 * (a release marks its slot, then reads the flag: one of the two
		 * sides sees the other). */
		bool more = !l->stop && r->take && r->qlen < r->qd && !l->draining && !l->fatal &&
			    l->next_start < l->sampler.batches;
		atomic_store(&r->want, more);
		if (more && can_claim(l) && stk__loader_free_slot(l))
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
					stk__loader_area_done(l, x);
					x->state = SLOT_FREE;
				}
			}
			stk__loader_signal(l);
		}
		/* Decode threads with nothing queued: a few reads go first, reaped
		 * at once, the rest at the next turn.  Page-cache reads complete
		 * inside the submit, so a batch's first submit at the whole depth
		 * (40-128 reads) kept both decoders waiting 2-3 ms at each batch's
		 * start (val, bench/val_loader_ab.sh); reads not done at once
		 * (cold, O_DIRECT) are only sent in a few more submits. */
		unsigned n = 0, first = 2 * (l->ndthreads ? l->ndthreads : 1);
		bool starved = (l->image || l->video) && l->dq_len == 0 && r->qlen > first;
		uint64_t now = stk__now_ns();
		while (r->qlen && r->inflight + n < r->qd && (!starved || n < first)) {
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

		if (r->nra) /* shard shuffle: the shards read ahead before the members */
			stk__shards_read_ahead(r);
		if (n && (rc = r->ops->submit(r->eng, r->batch, n)) < 0)
			goto broken;
		/* blocks until a read lands or another thread wakes us (starved:
		 * only takes what is done, the queue's rest still to send) */
		int got = r->ops->reap(r->eng, r->done, r->cap, !starved || !n);
		if (got < 0) {
			rc = got;
			goto broken;
		}
		if (l->ds->shards && !l->ds->remote && l->ops != &stk__engine_null && got > 0) {
			r->stat_round++;
			for (int i = 0; i < got; i++)
				stk__shards_stat(l, r, (struct sio *)r->done[i]);
		} else if (!l->ds->shards && !l->ds->remote && l->ops != &stk__engine_null) {
			for (int i = 0; i < got; i++) /* a file that changed size: its size now */
				stk__loader_file_stat(l, (struct sio *)r->done[i]);
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
	if (r->id == 0)
		stk__meta_stop(l);
	return NULL;
broken:
	pthread_mutex_lock(&l->mu);
	if (!l->fatal) {
		l->fatal = rc;
		stk__loader_detail(l, "%s engine failed: %s", r->ops->name, stk_strerror(rc));
	}
	stk__loader_signal(l);
	pthread_mutex_unlock(&l->mu);
	if (r->id == 0)
		stk__meta_stop(l);
	return NULL;
}

