/*
 * loader.c — the pipeline: index → sampler → I/O threads → ready batches.
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
 * are only touched by their own thread (wake excepted).
 */
#include "loader.h"
#include "image.h"

#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void set_detail(struct stk_loader *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_detail(struct stk_loader *l, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(l->detail, sizeof(l->detail), fmt, ap);
	va_end(ap);
}

static void notice(const struct stk_loader *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void notice(const struct stk_loader *l, const char *fmt, ...)
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

/* Room a sample takes in a slot: under O_DIRECT its read is rounded to the
 * block size at both ends (a tar member may start anywhere in a block). */
static uint64_t read_len_of(const struct stk_loader *l, uint64_t size)
{
	if (!l->direct)
		return size;
	return STK_ALIGN_UP(size + (l->ds->shards ? STK_DIRECT_ALIGN - 1 : 0), STK_DIRECT_ALIGN);
}

/* Shards: submit a batch's reads in file and offset order, so the device
 * sees runs it can merge; the samples keep their places in the batch. */
static int by_place(const void *a, const void *b)
{
	const struct stk_io *x = *(struct stk_io *const *)a, *y = *(struct stk_io *const *)b;
	if (x->path != y->path)
		return x->path < y->path ? -1 : 1;
	return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* --- in-flight accounting ------------------------------------------------ */

static void inflight_change(struct stk_loader *l, struct ring *r, int delta)
{
	uint64_t now = stk__now_ns();
	r->area += (double)r->inflight * (double)(now - r->area_t);
	r->area_t = now;
	r->inflight = (unsigned)((int)r->inflight + delta);
	uint32_t total = atomic_fetch_add(&l->inflight, (uint32_t)delta) + (uint32_t)delta;
	uint32_t mx = atomic_load_explicit(&l->inflight_max, memory_order_relaxed);
	while (total > mx && !atomic_compare_exchange_weak(&l->inflight_max, &mx, total))
		;
}

/* --- the I/O threads ----------------------------------------------------- */

static struct slot *free_slot(struct stk_loader *l)
{
	for (uint32_t i = 0; i < l->pool.nslots; i++)
		if (l->slots[i].state == SLOT_FREE)
			return &l->slots[i];
	return NULL;
}

/* Compacts a batch whose samples failed under the skip policy. */
static void compact(struct stk_loader *l, struct slot *s)
{
	uint8_t *base = stk__pool_slot(&l->pool, (uint32_t)(s - l->slots));
	uint32_t k = 0;
	uint64_t off = 0;
	for (uint32_t i = 0; i < s->nios; i++) {
		if (s->ios[i].res < 0)
			continue;
		if (off != s->offsets[i])
			memmove(base + off, base + s->offsets[i], s->sizes[i]);
		if (l->image && k != i) {
			size_t ib = stk__image_bytes(&l->img);
			uint8_t *img = base + l->img_off;
			memcpy(img + (size_t)k * ib, img + (size_t)i * ib, ib);
		}
		s->offsets[k] = off;
		s->sizes[k] = s->sizes[i];
		s->labels[k] = s->labels[i];
		s->indices[k] = s->indices[i];
		off += s->sizes[i]; /* the reads are done: no alignment needed any more */
		k++;
	}
	s->offsets[k] = off;
	s->nios = k;
}

/* All reads of a slot are in: it is ready (or free, if from before a restart). */
static void finish_slot(struct stk_loader *l, struct slot *s)
{
	if (s->gen != l->gen) {
		s->state = SLOT_FREE;
	} else {
		bool bad = false;
		for (uint32_t i = 0; i < s->nios; i++)
			bad |= s->ios[i].res < 0;
		if (bad && l->o.on_error == STK_ON_ERROR_SKIP)
			compact(l, s);
		s->state = SLOT_READY;
	}
	pthread_cond_broadcast(&l->cv);
}

/* A failed sample: counts it and records "<path>: <reason>" as the loader's
 * detail and, if it is the slot's first, the slot's (the fail policy reports
 * the batch's first failure when the consumer reaches it).  why may be NULL.
 * Under mu. */
static void sample_error(struct stk_loader *l, struct slot *s, struct stk_io *io, int rc,
			 const char *why)
{
	const char *root = io->path[0] == '/' ? "" : l->ds->root;
	const char *sep = io->path[0] == '/' ? "" : "/";
	io->res = rc;
	if (s->gen != l->gen)
		return; /* from before a restart: nobody will see it */
	atomic_fetch_add(&l->errors, 1);
	if (why)
		set_detail(l, "%s%s%s: %s", root, sep, io->path, why);
	else if (rc == STK_ESHORT)
		set_detail(l, "%s%s%s: short read: indexed %llu bytes, the file has fewer", root, sep,
			   io->path, (unsigned long long)io->len);
	else if (rc == STK_ETOOBIG)
		set_detail(l, "%s%s%s: %llu bytes do not fit in what is left of the batch slot "
			      "(%llu bytes); raise slot_bytes", root, sep, io->path,
			   (unsigned long long)io->len, (unsigned long long)l->raw_bytes);
	else
		set_detail(l, "%s%s%s: %s", root, sep, io->path, stk_strerror(rc));
	if (io->idx < s->err_idx) {
		s->err_idx = io->idx;
		snprintf(s->err, sizeof(s->err), "%s", l->detail);
	}
}

/* Claims batch `number` into slot s for ring r and queues its reads.  Under mu. */
static void claim(struct stk_loader *l, struct ring *r, struct slot *s, int64_t number)
{
	uint32_t n = stk__sampler_batch(&l->sampler, number, l->scratch_idx);
	uint32_t si = (uint32_t)(s - l->slots);
	uint8_t *base = stk__pool_slot(&l->pool, si);
	uint64_t off = 0;
	uint32_t queued = 0;
	s->state = SLOT_FILLING;
	s->gen = l->gen;
	s->number = number;
	s->ring = r->id;
	s->epoch = l->epoch;
	s->err_idx = UINT32_MAX;
	s->decoding = 0;
	s->nios = n;
	for (uint32_t i = 0; i < n; i++) {
		int64_t idx = l->scratch_idx[i];
		const struct stk_entry *e = &l->ds->entries[idx];
		struct stk_io *io = &s->ios[i];
		s->indices[i] = idx;
		s->labels[i] = e->label;
		s->sizes[i] = e->size;
		s->offsets[i] = off;
		*io = (struct stk_io){.path = stk__entry_path(l->ds, idx), .len = e->size,
				      .read_len = read_len_of(l, e->size), .offset = e->offset,
				      .slot = si, .idx = i, .buf_index = (int)si};
		if (l->direct) {
			io->offset = e->offset & ~(uint64_t)(STK_DIRECT_ALIGN - 1);
			io->skip = (uint32_t)(e->offset - io->offset);
			io->read_len = STK_ALIGN_UP(io->skip + e->size, STK_DIRECT_ALIGN);
		}
		if (io->read_len > l->raw_bytes - off) {
			/* a batch far above the size bound (see slot_bytes_for) */
			sample_error(l, s, io, STK_ETOOBIG, NULL);
			continue;
		}
		io->buf = base + off;
		s->offsets[i] = off + io->skip;
		off += l->direct ? io->read_len : e->size;
		r->queue[(r->qhead + r->qlen++) % r->qcap] = io;
		queued++;
	}
	s->offsets[n] = off;
	if (l->ds->shards && queued > 1) { /* sort this batch's stretch of the queue */
		struct stk_io **tmp = l->sort_scratch;
		for (uint32_t k = 0; k < queued; k++)
			tmp[k] = r->queue[(r->qhead + r->qlen - queued + k) % r->qcap];
		qsort(tmp, queued, sizeof(*tmp), by_place);
		for (uint32_t k = 0; k < queued; k++)
			r->queue[(r->qhead + r->qlen - queued + k) % r->qcap] = tmp[k];
	}
	s->pending = s->unsent = queued;
	if (queued == 0)
		finish_slot(l, s);
}

/* One read finished.  Under mu. */
static void complete(struct stk_loader *l, struct stk_io *io, uint64_t now)
{
	struct slot *s = &l->slots[io->slot];
	stk_hist_add(l->h_read, now - io->t_submit);
	if (io->res >= 0 && (uint64_t)io->res < io->skip + io->len)
		io->res = STK_ESHORT;
	if (io->res < 0)
		sample_error(l, s, io, (int)io->res, NULL);
	else if (l->image && s->gen == l->gen) {
		s->decoding++;
		l->dq[(l->dq_head + l->dq_len++) % l->dq_cap] = io;
		pthread_cond_signal(&l->dcv);
	}
	if (--s->pending == 0 && s->unsent == 0 && s->decoding == 0)
		finish_slot(l, s);
}

/* A decode thread: takes landed samples off the queue and writes their
 * cropped images into the slot. */
static void *decode_main(void *arg)
{
	struct stk_loader *l = arg;
	char why[512];
	pthread_mutex_lock(&l->mu);
	for (;;) {
		while (!l->dq_len && !l->stop)
			pthread_cond_wait(&l->dcv, &l->mu);
		if (l->stop)
			break;
		struct stk_io *io = l->dq[l->dq_head];
		l->dq_head = (l->dq_head + 1) % l->dq_cap;
		l->dq_len--;
		struct slot *s = &l->slots[io->slot];
		int rc = 0;
		if (s->gen == l->gen) {
			uint64_t seed = stk__sample_seed(l->o.seed, s->epoch, s->indices[io->idx]);
			uint8_t *out = stk__pool_slot(&l->pool, io->slot) + l->img_off +
				       (size_t)io->idx * stk__image_bytes(&l->img);
			pthread_mutex_unlock(&l->mu);
			uint64_t t0 = stk__now_ns();
			rc = stk__image_decode(&l->img, io->buf + io->skip, io->len, seed, out, why,
					       sizeof(why));
			uint64_t dt = stk__now_ns() - t0;
			stk_hist_add(l->h_decode, dt);
			pthread_mutex_lock(&l->mu);
			l->decode_ns += dt;
		}
		if (rc)
			sample_error(l, s, io, rc, why);
		if (--s->decoding == 0 && s->pending == 0 && s->unsent == 0)
			finish_slot(l, s);
	}
	pthread_mutex_unlock(&l->mu);
	return NULL;
}

static bool can_claim(const struct stk_loader *l)
{
	return !l->draining && !l->fatal && l->next_start < l->sampler.batches &&
	       l->next_start < l->next_out + (int64_t)l->pool.nslots;
}

static void *ring_main(void *arg)
{
	struct ring *r = arg;
	struct stk_loader *l = r->l;
	struct stk_engine_cfg cfg = {.root_fd = l->ds->root_fd, .queue_depth = r->qd,
				     .workers = l->o.io_threads, .direct = l->direct,
				     .null_latency_ns = l->o.null_latency_ns};
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
	pthread_cond_broadcast(&l->cv);
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
		while (!l->stop && r->qlen < r->qd && can_claim(l) && (s = free_slot(l)))
			claim(l, r, s, l->next_start++);
		if ((l->draining || l->stop) && r->qlen) {
			/* drop what was never sent; its slot is freed once idle */
			for (uint32_t i = 0; i < r->qlen; i++) {
				struct stk_io *io = r->queue[(r->qhead + i) % r->qcap];
				l->slots[io->slot].unsent--;
				l->slots[io->slot].pending--;
			}
			r->qlen = 0;
		}
		if (l->draining && r->inflight == 0) {
			for (uint32_t i = 0; i < l->pool.nslots; i++) {
				struct slot *x = &l->slots[i];
				if (x->ring == r->id && (x->state == SLOT_FILLING || x->state == SLOT_READY) &&
				    x->gen != l->gen && x->decoding == 0)
					x->state = SLOT_FREE;
			}
			pthread_cond_broadcast(&l->cv);
		}
		unsigned n = 0;
		uint64_t now = stk__now_ns();
		while (r->qlen && r->inflight + n < r->qd) {
			struct stk_io *io = r->queue[r->qhead];
			r->qhead = (r->qhead + 1) % r->qcap;
			r->qlen--;
			io->t_submit = now;
			l->slots[io->slot].unsent--;
			r->batch[n++] = io;
		}
		if (n)
			inflight_change(l, r, (int)n);
		pthread_mutex_unlock(&l->mu);

		if (n && (rc = r->ops->submit(r->eng, r->batch, n)) < 0)
			goto broken;
		/* blocks until a read lands or another thread wakes us */
		int got = r->ops->reap(r->eng, r->done, r->qd, true);
		if (got < 0) {
			rc = got;
			goto broken;
		}
		pthread_mutex_lock(&l->mu);
		now = stk__now_ns();
		for (int i = 0; i < got; i++)
			complete(l, r->done[i], now);
		if (got)
			inflight_change(l, r, -got);
	}
	pthread_mutex_unlock(&l->mu);
	return NULL;
broken:
	pthread_mutex_lock(&l->mu);
	if (!l->fatal) {
		l->fatal = rc;
		set_detail(l, "%s engine failed: %s", r->ops->name, stk_strerror(rc));
	}
	pthread_cond_broadcast(&l->cv);
	pthread_mutex_unlock(&l->mu);
	return NULL;
}

static void wake_rings(struct stk_loader *l)
{
	for (uint32_t i = 0; i < l->nrings; i++)
		if (l->rings[i].eng)
			l->rings[i].ops->wake(l->rings[i].eng);
}

/* --- create / destroy ---------------------------------------------------- */

/* The most bytes any batch can need: the batch_size largest samples. */
static uint64_t worst_batch_bytes(const struct stk_loader *l)
{
	uint32_t k = l->o.batch_size;
	if ((int64_t)k > l->ds->n)
		k = (uint32_t)l->ds->n;
	uint64_t *heap = calloc(k, sizeof(*heap)); /* min-heap of the k largest */
	if (!heap)
		return UINT64_MAX;
	uint32_t len = 0;
	for (int64_t i = 0; i < l->ds->n; i++) {
		uint64_t v = read_len_of(l, l->ds->entries[i].size);
		if (len < k) {
			uint32_t j = len++;
			heap[j] = v;
			while (j && heap[(j - 1) / 2] > heap[j]) {
				uint64_t t = heap[j];
				heap[j] = heap[(j - 1) / 2];
				heap[(j - 1) / 2] = t;
				j = (j - 1) / 2;
			}
		} else if (v > heap[0]) {
			heap[0] = v;
			for (uint32_t j = 0;;) {
				uint32_t c = 2 * j + 1;
				if (c >= len)
					break;
				if (c + 1 < len && heap[c + 1] < heap[c])
					c++;
				if (heap[j] <= heap[c])
					break;
				uint64_t t = heap[j];
				heap[j] = heap[c];
				heap[c] = t;
				j = c;
			}
		}
	}
	uint64_t sum = 0;
	for (uint32_t i = 0; i < len; i++)
		sum += heap[i];
	free(heap);
	return sum;
}

/* The slot size.  The worst case (the batch_size largest samples together)
 * can be far above any real batch when a few files are huge, and slots are
 * fixed (and pinned) memory; so the slot is the smaller of the worst case and
 * a bound no real batch reaches: batch_size × mean + 8 σ √batch_size + the
 * largest sample.  A batch beyond it anyway loses the samples that do not
 * fit (STK_ETOOBIG, by the error policy); opts.slot_bytes overrides. */
static uint64_t slot_bytes_for(const struct stk_loader *l)
{
	if (l->o.slot_bytes)
		return l->o.slot_bytes;
	uint64_t worst = worst_batch_bytes(l);
	double sum = 0, sq = 0, mx = 0, n = (double)l->ds->n, b = l->o.batch_size;
	for (int64_t i = 0; i < l->ds->n; i++) {
		double v = (double)read_len_of(l, l->ds->entries[i].size);
		sum += v;
		sq += v * v;
		if (v > mx)
			mx = v;
	}
	double mean = sum / n, var = sq / n - mean * mean;
	double bound = b * mean + 8 * sqrt(var > 0 ? var : 0) * sqrt(b) + mx;
	return bound < (double)worst ? (uint64_t)bound : worst;
}

static char *dup_opt(const char *s, bool *oom)
{
	if (!s)
		return NULL;
	char *d = strdup(s);
	if (!d)
		*oom = true;
	return d;
}

/* O_DIRECT is a property of the filesystem: try it on the first sample. */
static void check_direct(struct stk_loader *l)
{
	int fd = openat(l->ds->root_fd, stk__entry_path(l->ds, 0), O_RDONLY | O_DIRECT | O_CLOEXEC);
	if (fd >= 0) {
		close(fd);
		return;
	}
	if (errno == EINVAL) {
		notice(l, "%s: the filesystem refuses O_DIRECT; using buffered reads", l->ds->root);
		l->direct = false;
	}
}

static int pick_engine(struct stk_loader *l, char *err, size_t errlen)
{
	char why[256];
	switch (l->o.engine) {
	case STK_ENGINE_NULL:
		l->ops = &stk__engine_null;
		return 0;
	case STK_ENGINE_PREAD:
		l->ops = &stk__engine_pread;
		return 0;
	case STK_ENGINE_URING:
		if (stk__uring_probe(why, sizeof(why)) < 0) {
			snprintf(err, errlen, "engine io_uring: %s", why);
			return -EOPNOTSUPP;
		}
		l->ops = &stk__engine_uring;
		return 0;
	case STK_ENGINE_AUTO:
		if (getenv("STOKER_NO_URING")) {
			snprintf(why, sizeof(why), "STOKER_NO_URING is set");
		} else if (stk__uring_probe(why, sizeof(why)) == 0) {
			l->ops = &stk__engine_uring;
			return 0;
		}
		notice(l, "io_uring is unavailable (%s); using the pread thread pool", why);
		l->ops = &stk__engine_pread;
		return 0;
	}
	snprintf(err, errlen, "engine %d is not one of auto, io_uring, pread, null", l->o.engine);
	return -EINVAL;
}

static int start_rings(struct stk_loader *l)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	bool uring = l->ops == &stk__engine_uring;
	/* io_uring: a ring per thread; each copies page-cache hits on its own core.
	 * pread and null: one scheduling thread; pread's workers do the reads. */
	l->nrings = 1;
	if (uring)
		l->nrings = l->o.io_threads ? l->o.io_threads : (ncpu >= 2 ? 2 : 1);
	if (l->nrings > l->o.queue_depth)
		l->nrings = l->o.queue_depth;
	if (!uring && !l->o.io_threads)
		l->o.io_threads = l->o.queue_depth < 64 ? l->o.queue_depth : 64;
	l->rings = calloc(l->nrings, sizeof(*l->rings));
	if (!l->rings)
		return -ENOMEM;
	uint32_t per_ring_ios = l->o.batch_size * l->pool.nslots;
	for (uint32_t i = 0; i < l->nrings; i++) {
		struct ring *r = &l->rings[i];
		r->l = l;
		r->id = i;
		r->ops = l->ops;
		r->qd = l->o.queue_depth / l->nrings + (i < l->o.queue_depth % l->nrings);
		if (!uring)
			r->qd = l->o.queue_depth;
		r->qcap = per_ring_ios + r->qd;
		r->queue = calloc(r->qcap, sizeof(*r->queue));
		r->done = calloc(r->qd, sizeof(*r->done));
		r->batch = calloc(r->qd, sizeof(*r->batch));
		if (!r->queue || !r->done || !r->batch)
			return -ENOMEM;
	}
	int rc = 0;
	pthread_mutex_lock(&l->mu);
	for (uint32_t i = 0; i < l->nrings; i++) {
		if ((rc = -pthread_create(&l->rings[i].tid, NULL, ring_main, &l->rings[i]))) {
			l->nrings = i;
			break;
		}
	}
	for (uint32_t i = 0; i < l->nrings; i++) {
		while (!l->rings[i].init_done)
			pthread_cond_wait(&l->cv, &l->mu);
		if (l->rings[i].init_rc && !rc) {
			rc = l->rings[i].init_rc;
			set_detail(l, "%s engine: %s", l->ops->name, stk_strerror(rc));
		}
	}
	pthread_mutex_unlock(&l->mu);
	return rc;
}

static int start_decoders(struct stk_loader *l)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	uint32_t n = l->img.decode_threads ? l->img.decode_threads : (ncpu > 1 ? (uint32_t)ncpu - 1 : 1);
	l->dq_cap = l->pool.nslots * l->o.batch_size;
	l->dq = calloc(l->dq_cap, sizeof(*l->dq));
	l->dthreads = calloc(n, sizeof(*l->dthreads));
	if (!l->dq || !l->dthreads)
		return -ENOMEM;
	for (uint32_t i = 0; i < n; i++) {
		int rc = -pthread_create(&l->dthreads[i], NULL, decode_main, l);
		if (rc)
			return rc;
		l->ndthreads++;
	}
	return 0;
}

/* Shard shuffle: the groups are the shards, whose samples are contiguous in
 * the index. */
static int shard_mode(struct stk_loader *l, char *err, size_t errlen)
{
	if (!l->ds->shards || (l->o.flags & STK_F_NO_SHUFFLE)) {
		snprintf(err, errlen, "%s: shuffle_mode shard needs a tar shard set and shuffling",
			 l->path);
		return -EINVAL;
	}
	int64_t n = l->ds->n;
	uint32_t g = 0;
	l->group_end = malloc((size_t)n * sizeof(*l->group_end));
	if (!l->group_end)
		return -ENOMEM;
	for (int64_t i = 1; i <= n; i++)
		if (i == n || l->ds->entries[i].name != l->ds->entries[i - 1].name)
			l->group_end[g++] = (uint32_t)i;
	return stk__sampler_shard_mode(&l->sampler, l->group_end, g,
				       l->o.shuffle_window ? l->o.shuffle_window : 1000);
}

static int validate(const struct stk_loader_opts *o, char *err, size_t errlen)
{
	if (o->size && o->size < offsetof(struct stk_loader_opts, null_latency_ns)) {
		snprintf(err, errlen, "options struct too small (%u bytes)", o->size);
		return -EINVAL;
	}
	if (o->world_size && o->rank >= o->world_size) {
		snprintf(err, errlen, "rank %u is not below world_size %u", o->rank, o->world_size);
		return -EINVAL;
	}
	if (o->batch_size > (1u << 20) || o->prefetch > 1024 || o->queue_depth > 32768 ||
	    o->io_threads > 256) {
		snprintf(err, errlen,
			 "option out of range: batch_size <= 1048576, prefetch <= 1024, "
			 "queue_depth <= 32768, io_threads <= 256");
		return -ERANGE;
	}
	if ((unsigned)o->engine > STK_ENGINE_NULL || (unsigned)o->on_error > STK_ON_ERROR_FAIL ||
	    (o->size >= offsetof(struct stk_loader_opts, shuffle_mode) + sizeof(o->shuffle_mode) &&
	     (unsigned)o->shuffle_mode > STK_SHUFFLE_SHARD)) {
		snprintf(err, errlen, "engine, on_error or shuffle_mode out of range");
		return -EINVAL;
	}
	return 0;
}

int stk_loader_create(struct stk_loader **out, const struct stk_loader_opts *opts, char *errbuf,
		      size_t errlen)
{
	char scratch[8];
	if (!errbuf || !errlen) {
		errbuf = scratch;
		errlen = sizeof(scratch);
	}
	errbuf[0] = 0;
	*out = NULL;
	struct stk_loader_opts zero = {0};
	if (!opts)
		opts = &zero;
	int rc = validate(opts, errbuf, errlen);
	if (rc)
		return rc;
	struct stk_loader *l = calloc(1, sizeof(*l));
	if (!l) {
		snprintf(errbuf, errlen, "out of memory");
		return -ENOMEM;
	}
	pthread_mutex_init(&l->mu, NULL);
	pthread_condattr_t ca; /* stk_loader_next_timeout's deadline is CLOCK_MONOTONIC */
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&l->cv, &ca);
	pthread_condattr_destroy(&ca);
	pthread_cond_init(&l->dcv, NULL);
	size_t osz = opts->size && opts->size < sizeof(l->o) ? opts->size : sizeof(l->o);
	memcpy(&l->o, opts, osz);
	l->o.size = sizeof(l->o);
	if (!l->o.batch_size)
		l->o.batch_size = 32;
	if (!l->o.prefetch)
		l->o.prefetch = 4;
	if (!l->o.queue_depth)
		l->o.queue_depth = 128;
	if (!l->o.world_size)
		l->o.world_size = 1;
	bool oom = false;
	l->path = dup_opt(opts->path, &oom);
	l->extensions = dup_opt(opts->extensions, &oom);
	l->cache_dir = dup_opt(opts->cache_dir, &oom);
	l->o.path = l->path;
	l->o.extensions = l->extensions;
	l->o.cache_dir = l->cache_dir;
	if ((!opts->size || opts->size >= offsetof(struct stk_loader_opts, image) + sizeof(void *)) &&
	    opts->image) {
		if ((rc = stk__image_opts(&l->img, opts->image, errbuf, errlen)))
			goto fail;
		l->image = true;
	}
	l->o.image = NULL;
	if (oom || stk_hist_create(&l->h_wait) || stk_hist_create(&l->h_read) ||
	    stk_hist_create(&l->h_decode)) {
		snprintf(errbuf, errlen, "out of memory");
		rc = -ENOMEM;
		goto fail;
	}
	char warning[PATH_MAX + 600] = "";
	struct stk__index_opts io = {.path = l->path, .extensions = l->extensions,
				     .cache_dir = l->cache_dir,
				     .no_cache = l->o.flags & STK_F_NO_CACHE,
				     .skip_bad = l->o.on_error == STK_ON_ERROR_SKIP,
				     .warning = warning, .warnlen = sizeof(warning)};
	if ((rc = stk__dataset_open(&l->ds, &io, errbuf, errlen)))
		goto fail;
	if (warning[0]) {
		notice(l, "%s; indexed the samples before it (on_error skip)", warning);
		atomic_fetch_add(&l->errors, 1);
		snprintf(l->detail, sizeof(l->detail), "%s", warning);
	}
	rc = stk__sampler_init(&l->sampler, l->ds->n, l->o.rank, l->o.world_size, l->o.batch_size,
			       !(l->o.flags & STK_F_NO_SHUFFLE), l->o.flags & STK_F_DROP_LAST,
			       l->o.seed);
	if (!rc && l->o.shuffle_mode == STK_SHUFFLE_SHARD)
		rc = shard_mode(l, errbuf, errlen);
	if (rc) {
		if (!errbuf[0])
			snprintf(errbuf, errlen, "%s: cannot set up the sampler: %s", l->path,
				 stk_strerror(rc));
		goto fail;
	}
	if ((rc = pick_engine(l, errbuf, errlen)))
		goto fail;
	l->direct = (l->o.flags & STK_F_DIRECT) && l->ops != &stk__engine_null;
	if (l->direct)
		check_direct(l);
	l->raw_bytes = slot_bytes_for(l);
	uint64_t slot_bytes = l->raw_bytes;
	l->img_off = STK_ALIGN_UP(l->raw_bytes, 4096);
	if (l->image) /* the images follow the reads, page-aligned */
		slot_bytes = l->img_off + (uint64_t)l->o.batch_size * stk__image_bytes(&l->img);
	uint32_t nslots = l->o.prefetch;
	uint64_t meta = (uint64_t)l->o.batch_size;
	l->slots = calloc(nslots, sizeof(*l->slots));
	l->scratch_idx = calloc(meta, sizeof(int64_t));
	l->sort_scratch = calloc(meta, sizeof(*l->sort_scratch));
	if (!l->slots || !l->scratch_idx || !l->sort_scratch || slot_bytes == UINT64_MAX) {
		snprintf(errbuf, errlen, "out of memory");
		rc = -ENOMEM;
		goto fail;
	}
	if ((rc = stk__pool_init(&l->pool, nslots, slot_bytes, !(l->o.flags & STK_F_NO_PIN)))) {
		snprintf(errbuf, errlen, "cannot map the batch pool (%u slots of %llu bytes): %s",
			 nslots, (unsigned long long)slot_bytes, stk_strerror(rc));
		goto fail;
	}
	for (uint32_t i = 0; i < nslots; i++) {
		struct slot *s = &l->slots[i];
		s->offsets = calloc(meta + 1, sizeof(uint64_t));
		s->sizes = calloc(meta, sizeof(uint64_t));
		s->labels = calloc(meta, sizeof(int64_t));
		s->indices = calloc(meta, sizeof(int64_t));
		s->ios = calloc(meta, sizeof(struct stk_io));
		if (!s->offsets || !s->sizes || !s->labels || !s->indices || !s->ios) {
			snprintf(errbuf, errlen, "out of memory");
			rc = -ENOMEM;
			goto fail;
		}
	}
	if (l->image && (rc = start_decoders(l))) {
		snprintf(errbuf, errlen, "cannot start the decode threads: %s", stk_strerror(rc));
		goto fail;
	}
	l->epoch = l->o.epoch;
	l->next_start = l->next_out = (int64_t)l->o.start_batch;
	stk__sampler_set_epoch(&l->sampler, l->epoch);
	l->t_start = stk__now_ns();
	l->draining = true; /* rings wait until stk_loader_start below */
	if ((rc = start_rings(l))) {
		snprintf(errbuf, errlen, "%s", l->detail);
		goto fail;
	}
	if ((rc = stk_loader_start(l, l->o.epoch, l->o.start_batch))) {
		snprintf(errbuf, errlen, "%s", l->last_error);
		goto fail;
	}
	*out = l;
	return 0;
fail:
	stk_loader_destroy(l);
	return rc;
}

void stk_loader_stop(struct stk_loader *l)
{
	pthread_mutex_lock(&l->mu);
	bool joined = l->joined;
	l->stop = l->joined = true;
	pthread_cond_broadcast(&l->dcv);
	pthread_cond_broadcast(&l->cv);
	pthread_mutex_unlock(&l->mu);
	if (joined)
		return;
	wake_rings(l);
	for (uint32_t i = 0; i < l->nrings; i++) {
		struct ring *r = &l->rings[i];
		pthread_join(r->tid, NULL);
		if (r->eng)
			r->ops->exit(r->eng); /* waits for the reads still in flight */
		r->eng = NULL;
	}
	for (uint32_t i = 0; i < l->ndthreads; i++)
		pthread_join(l->dthreads[i], NULL);
}

void stk_loader_destroy(struct stk_loader *l)
{
	if (!l)
		return;
	stk_loader_stop(l);
	free(l->dthreads);
	free(l->dq);
	stk_hist_destroy(l->h_decode);
	for (uint32_t i = 0; l->rings && i < l->nrings; i++) {
		free(l->rings[i].queue);
		free(l->rings[i].done);
		free(l->rings[i].batch);
	}
	free(l->rings);
	for (uint32_t i = 0; l->slots && i < l->o.prefetch; i++) {
		free(l->slots[i].offsets);
		free(l->slots[i].sizes);
		free(l->slots[i].labels);
		free(l->slots[i].indices);
		free(l->slots[i].ios);
	}
	free(l->slots);
	stk__pool_free(&l->pool);
	stk__sampler_free(&l->sampler);
	stk__dataset_close(l->ds);
	stk_hist_destroy(l->h_wait);
	stk_hist_destroy(l->h_read);
	free(l->scratch_idx);
	free(l->sort_scratch);
	free(l->group_end);
	free(l->path);
	free(l->extensions);
	free(l->cache_dir);
	pthread_mutex_destroy(&l->mu);
	pthread_cond_destroy(&l->cv);
	pthread_cond_destroy(&l->dcv);
	free(l);
}

/* --- the consumer's side ------------------------------------------------- */

/* Restarts the time base of the rates.  Under mu. */
static void restart_clock(struct stk_loader *l)
{
	uint64_t now = stk__now_ns();
	l->t_start = now;
	l->wait_ns = 0;
	l->poll_t0 = 0;
	for (uint32_t i = 0; i < l->nrings; i++) {
		l->rings[i].area = 0;
		l->rings[i].area_t = now;
	}
}

int stk_loader_start(struct stk_loader *l, uint64_t epoch, uint64_t start_batch)
{
	pthread_mutex_lock(&l->mu);
	if (l->stop) {
		pthread_mutex_unlock(&l->mu);
		return -ECANCELED;
	}
	l->gen++;
	l->draining = true;
	pthread_mutex_unlock(&l->mu);
	wake_rings(l);
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
	l->epoch = epoch;
	stk__sampler_set_epoch(&l->sampler, epoch);
	l->next_start = l->next_out = (int64_t)start_batch;
	l->fatal = 0;
	l->draining = false;
	restart_clock(l);
	pthread_mutex_unlock(&l->mu);
	wake_rings(l);
	return 0;
}

void stk_loader_stats_reset(struct stk_loader *l)
{
	pthread_mutex_lock(&l->mu);
	restart_clock(l);
	stk_hist_reset(l->h_wait);
	stk_hist_reset(l->h_read);
	stk_hist_reset(l->h_decode);
	l->decode_ns = 0;
	atomic_store(&l->samples, 0);
	atomic_store(&l->bytes, 0);
	atomic_store(&l->batches, 0);
	atomic_store(&l->errors, 0);
	atomic_store(&l->inflight_max, atomic_load(&l->inflight));
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

int stk_loader_next(struct stk_loader *l, struct stk_batch **out)
{
	return stk_loader_next_timeout(l, out, UINT64_MAX);
}

int stk_loader_next_timeout(struct stk_loader *l, struct stk_batch **out, uint64_t timeout_ns)
{
	*out = NULL;
	uint64_t t0 = stk__now_ns();
	uint64_t deadline = timeout_ns > UINT64_MAX - t0 ? UINT64_MAX : t0 + timeout_ns;
	pthread_mutex_lock(&l->mu);
	int rc = 0;
	struct slot *s = NULL;
	for (;;) {
		if (l->fatal) {
			rc = l->fatal;
			break;
		}
		if (l->stop) {
			set_detail(l, "the loader was stopped (stk_loader_stop)");
			rc = -ECANCELED;
			break;
		}
		if (l->next_out >= l->sampler.batches)
			break;
		s = ready_slot(l, l->next_out);
		if (s && s->state == SLOT_READY)
			break;
		if (!s && !free_slot(l) && l->next_start <= l->next_out) {
			bool all_held = true;
			for (uint32_t i = 0; i < l->pool.nslots; i++)
				all_held &= l->slots[i].state == SLOT_HELD;
			if (all_held) {
				set_detail(l, "all %u batch slots are held: release batches "
					      "(stk_batch_release) or raise prefetch", l->pool.nslots);
				rc = STK_ENOSLOT;
				break;
			}
		}
		if (deadline == UINT64_MAX) {
			pthread_cond_wait(&l->cv, &l->mu);
		} else {
			if (stk__now_ns() >= deadline) {
				rc = -ETIMEDOUT;
				break;
			}
			struct timespec ts = {.tv_sec = (time_t)(deadline / 1000000000ull),
					      .tv_nsec = (long)(deadline % 1000000000ull)};
			pthread_cond_timedwait(&l->cv, &l->mu, &ts);
		}
	}
	uint64_t now = stk__now_ns(), waited = now - t0;
	/* polls that timed out and the call that got the batch are one wait */
	uint64_t whole = l->poll_t0 ? now - l->poll_t0 : waited;
	l->poll_t0 = rc == -ETIMEDOUT ? (l->poll_t0 ? l->poll_t0 : t0) : 0;
	if (rc == 0 && s && s->state == SLOT_READY) {
		/* fail policy: the batch's first failed sample ends the epoch */
		if (l->o.on_error == STK_ON_ERROR_FAIL && s->err_idx != UINT32_MAX) {
			rc = (int)s->ios[s->err_idx].res;
			snprintf(l->detail, sizeof(l->detail), "%s", s->err);
			l->fatal = rc;
			s->state = SLOT_FREE;
		}
		if (rc == 0) {
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
			if (l->image) {
				b->images = b->data + l->img_off;
				b->image_bytes = stk__image_bytes(&l->img);
				b->channels = 3;
				b->height = l->img.height;
				b->width = l->img.width;
				b->dtype = l->img.dtype;
				b->nhwc = !!(l->img.flags & STK_IMG_NHWC);
			}
			l->next_out++;
			*out = b;
			rc = 1;
			atomic_fetch_add(&l->batches, 1);
			atomic_fetch_add(&l->samples, b->count);
			uint64_t bytes = 0;
			for (uint32_t i = 0; i < b->count; i++)
				bytes += b->sizes[i];
			atomic_fetch_add(&l->bytes, bytes);
			stk_hist_add(l->h_wait, whole);
		}
	}
	l->wait_ns += waited;
	if (rc < 0 && rc != -ETIMEDOUT)
		snprintf(l->last_error, sizeof(l->last_error), "%s", l->detail);
	pthread_mutex_unlock(&l->mu);
	if (rc == 1)
		wake_rings(l); /* the window moved */
	return rc;
}

void stk_batch_release(struct stk_loader *l, struct stk_batch *b)
{
	if (!b)
		return;
	struct slot *s = (struct slot *)b; /* the view is the slot's first member */
	pthread_mutex_lock(&l->mu);
	if (s->state == SLOT_HELD)
		s->state = SLOT_FREE;
	pthread_cond_broadcast(&l->cv);
	pthread_mutex_unlock(&l->mu);
	wake_rings(l);
}

