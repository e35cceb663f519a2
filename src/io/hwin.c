/*
 * io/hwin.c — windows, for the remote read engine (io/http.c).
 *
 * Windows (r->window bytes, set by the loader when the cache will keep what
 * they bring: stk__remote_plan_window): a miss fetches the whole aligned
 * window of the object around the member (8 MiB), streamed into the cache
 * through a 1 MiB staging buffer, and waits for it with every other miss in
 * that window; when it is in, they all go back to the cache's readers.  An
 * object store answers a request in milliseconds whatever its size, so one
 * request for ~80 members instead of 80 is the difference between the
 * server's request rate and its bandwidth.  A miss that joins its window
 * before the window's stream has passed its first byte is filled from the
 * stream as it comes (curl's buffer straight into the slot, once the
 * answer's ETag is the index's) and delivered at its last byte, not after
 * the whole window is in the cache and read back: its bytes are copied
 * into the slot once (not from the cache again), and the batch waits for
 * them, not for the window.  At most STK__WIN_INFLIGHT windows are fetched at
 * once (their staging buffers are the memory this costs); the others
 * queue; a miss that starts a window queues the object's next one too
 * (read ahead: its reads come next in shard mode).  A member the window
 * left out (it runs past the window's end) or one whose window failed or
 * could not be cached is fetched alone.
 */
#include "io/http.h"

#include <stdlib.h>
#include <string.h>

static void wjob_push(struct stk_eng *e, struct wjob *j)
{
	pthread_mutex_lock(&e->hmu);
	if (e->wj_tail)
		e->wj_tail->next = j;
	else
		e->wj_head = j;
	e->wj_tail = j;
	pthread_cond_signal(&e->wcv);
	pthread_mutex_unlock(&e->hmu);
}

/* The staged bytes of a window to the cache: handed to the writer with
 * the buffer (a new one staged), or written here when memory is short. */
static void flush_stage(struct stk_eng *e, struct req *q)
{
	if (!q->staged)
		return;
	uint64_t at = q->off + q->flushed;
	pthread_mutex_lock(&e->hmu);
	bool room = e->wrun && e->wq_bytes < WQ_MAX;
	if (room)
		e->wq_bytes += q->staged;
	pthread_mutex_unlock(&e->hmu);
	struct wjob *j = room ? calloc(1, sizeof(*j)) : NULL;
	uint8_t *fresh = j ? malloc(WIN_STAGE) : NULL;
	if (fresh) {
		*j = (struct wjob){.o = q->obj, .off = at, .len = q->staged, .buf = q->stage};
		q->stage = fresh;
		wjob_push(e, j);
	} else {
		if (room) {
			pthread_mutex_lock(&e->hmu);
			e->wq_bytes -= q->staged;
			pthread_mutex_unlock(&e->hmu);
		}
		free(j);
		stk__rcache_write(e->r, q->obj, q->stage, q->staged, at);
	}
	q->flushed += q->staged;
	q->staged = 0;
}

/* The window's next k bytes (at window offset pos) into the waiters that
 * joined before the stream passed their start (priv.pending 2); a waiter
 * whose last byte came is delivered (out of the list). */
static unsigned win_feed(struct stk_eng *e, struct win *w, const uint8_t *p, uint64_t pos,
			 uint64_t k)
{
	unsigned n = 0;
	uint64_t a = w->off + pos, b = a + k;
	for (struct stk_io **pp = &w->waiters, *io; (io = *pp);) {
		uint64_t s = io->offset, t = io->offset + io->priv.t;
		if (io->priv.pending != 2 || t <= a || s >= b) {
			pp = &io->priv.next;
			continue;
		}
		uint64_t from = s > a ? s : a, to = t < b ? t : b;
		memcpy((uint8_t *)io->buf + (from - s), p + (from - a), to - from);
		if (t > b) {
			pp = &io->priv.next;
			continue;
		}
		*pp = io->priv.next;
		atomic_fetch_add(&e->r->c.streamed, 1);
		stk__http_finish(e, io, (int64_t)io->priv.t);
		n++;
	}
	return n;
}

/* One curl_multi_perform reads each transfer while its socket has bytes (up
 * to 100 buffers of it): from a fast server, a whole round of windows,
 * seconds under load, with the misses filled meanwhile waiting for it to
 * return.  A window that delivered a miss, or took WIN_STAGE since it was
 * last resumed, pauses (its bytes so far taken) and the reap loop resumes
 * it on its next turn, after handing out what is done. */
static void win_yield(struct stk_eng *e, struct req *q, unsigned delivered, uint64_t k)
{
	q->burst += k;
	if (q->paused || (!delivered && q->burst < WIN_STAGE))
		return;
	if (curl_easy_pause(q->h, CURLPAUSE_RECV) != CURLE_OK)
		return;
	q->paused = true;
	q->next = e->paused;
	e->paused = q;
}

/* The paused windows go on. */
void stk__hwin_resume(struct stk_eng *e)
{
	while (e->paused) {
		struct req *q = e->paused;
		e->paused = q->next;
		q->next = NULL;
		q->paused = false;
		q->burst = 0;
		curl_easy_pause(q->h, CURLPAUSE_CONT);
	}
}

size_t stk__hwin_body(char *ptr, size_t size, size_t n, void *arg)
{
	struct req *q = arg;
	size_t l = size * n, at = 0, done = 0;
	int64_t k = stk__http_in_range(q, l, &at);
	if (k < 0)
		return 0;
	if (k && !stk__remote_keepable(&q->a, q->obj->etag)) {
		q->nokeep = true; /* not known to be the indexed version's: never cached */
		return 0;
	}
	unsigned delivered = k ? win_feed(q->e, q->w, (const uint8_t *)ptr + at, q->got, (uint64_t)k)
			       : 0;
	while (done < (size_t)k) {
		size_t c = WIN_STAGE - q->staged < (size_t)k - done ? WIN_STAGE - q->staged
							      : (size_t)k - done;
		memcpy(q->stage + q->staged, ptr + at + done, c);
		q->staged += c;
		done += c;
		if (q->staged == WIN_STAGE)
			flush_stage(q->e, q);
	}
	q->got += (uint64_t)k;
	if (!q->enough)
		win_yield(q->e, q, delivered, (uint64_t)k);
	return q->enough ? 0 : l;
}

static uint8_t *wstate_of(struct stk_eng *e, const struct stk__robj *o, uint64_t *nwin)
{
	size_t i = (size_t)(o - e->r->objs);
	*nwin = (o->size + e->r->window - 1) / e->r->window;
	if (!e->wstate && !(e->wstate = calloc(e->r->nobjs, sizeof(*e->wstate))))
		return NULL;
	if (!e->wstate[i])
		e->wstate[i] = calloc(*nwin ? *nwin : 1, 1);
	return e->wstate[i];
}

/* The window will not be fetched again (it came in, or failed). */
void stk__hwin_settled(struct stk_eng *e, const struct win *w)
{
	uint64_t nwin;
	uint8_t *st = wstate_of(e, w->o, &nwin);
	if (st)
		st[w->off / e->r->window] = 2;
}

/* Misses back to the cache's readers (a window came in): hits now, or
 * misses again (not in the window, or not cached), then fetched alone. */
static void to_readers(struct stk_eng *e, struct stk_io *list)
{
	if (!list)
		return;
	pthread_mutex_lock(&e->hmu);
	while (list) {
		struct stk_io *io = list;
		list = io->priv.next;
		io->priv.file_slot = 1; /* after its window: a second miss is fetched alone */
		stk__io_push(&e->htodo_head, &e->htodo_tail, io);
	}
	pthread_cond_broadcast(&e->hcv);
	pthread_mutex_unlock(&e->hmu);
}

/* The window is done (ok, or failed: state 2 either way); its waiters go
 * back to the readers: once its bytes are in the cache when it came (a
 * marker behind them in the writer's queue), now when it failed. */
void stk__hwin_done(struct stk_eng *e, struct win *w, bool ok)
{
	struct win **pp = w->q ? &e->wfly : &e->wqueue;
	while (*pp && *pp != w)
		pp = &(*pp)->next;
	if (*pp)
		*pp = w->next;
	if (w->q) {
		e->nfly--;
		free(w->q->stage);
		w->q->stage = NULL;
	}
	struct wjob *j = ok && e->wrun ? calloc(1, sizeof(*j)) : NULL;
	if (j) {
		j->waiters = w->waiters;
		wjob_push(e, j);
	} else {
		to_readers(e, w->waiters);
	}
	free(w);
}

void *stk__hwin_writer(void *arg)
{
	struct stk_eng *e = arg;
	pthread_mutex_lock(&e->hmu);
	for (;;) {
		while (!e->wj_head && !e->wstop)
			pthread_cond_wait(&e->wcv, &e->hmu);
		if (!e->wj_head)
			break;
		struct wjob *j = e->wj_head;
		if (!(e->wj_head = j->next))
			e->wj_tail = NULL;
		pthread_mutex_unlock(&e->hmu);
		uint64_t written = j->buf ? j->len : 0;
		if (j->buf)
			stk__rcache_write(e->r, j->o, j->buf, j->len, j->off);
		else
			to_readers(e, j->waiters);
		free(j->buf);
		free(j);
		pthread_mutex_lock(&e->hmu);
		e->wq_bytes -= written;
	}
	pthread_mutex_unlock(&e->hmu);
	return NULL;
}

/* Starts queued windows while fewer than STK__WIN_INFLIGHT are in flight. */
static void win_pump(struct stk_eng *e)
{
	while (e->wqueue && e->nfly < STK__WIN_INFLIGHT) {
		struct win *w = e->wqueue;
		struct req *q = stk__http_get_req(e);
		uint8_t *stage = q ? malloc(WIN_STAGE) : NULL;
		if (!stage) { /* its waiters are fetched alone */
			if (q)
				stk__http_put_req(e, q);
			stk__hwin_done(e, w, false);
			continue;
		}
		e->wqueue = w->next;
		w->q = q;
		w->next = e->wfly;
		e->wfly = w;
		e->nfly++;
		q->w = w;
		q->stage = stage;
		q->path = w->o->rel;
		q->off = w->off;
		q->obj = w->o;
		q->want = w->len;
		q->attempt = 0;
		q->fresh = false;
		q->first = stk__now_ns();
		if (stk__http_start(e, q)) {
			stk__http_put_req(e, q);
			stk__hwin_done(e, w, false);
		} else {
			atomic_fetch_add(&e->r->c.windows, 1);
			if (e->nfly > atomic_load(&e->r->c.win_inflight_max))
				atomic_store(&e->r->c.win_inflight_max, e->nfly);
		}
	}
}

/* A miss of io (want bytes of o) waits for its window: true, or false when
 * it is to be fetched alone (no windows, its window done already, a member
 * too large for one). */
/* Window k of o queued (FIFO: the oldest misses first), or NULL. */
static struct win *win_queue(struct stk_eng *e, const struct stk__robj *o, uint8_t *st,
			     uint64_t k)
{
	uint64_t W = e->r->window;
	struct win *w = calloc(1, sizeof(*w));
	if (!w)
		return NULL;
	w->o = o;
	w->off = k * W;
	w->len = o->size - w->off < W ? o->size - w->off : W;
	struct win **pp = &e->wqueue;
	while (*pp)
		pp = &(*pp)->next;
	*pp = w;
	st[k] = 1;
	return w;
}

bool stk__hwin_wait(struct stk_eng *e, struct stk_io *io, const struct stk__robj *o,
		     uint64_t want)
{
	uint64_t W = e->r->window, nwin;
	if (!W || !o || !e->r->cache || want > W / 2)
		return false;
	uint8_t *st = wstate_of(e, o, &nwin);
	uint64_t k = io->offset / W;
	if (!st || k >= nwin)
		return false;
	if (st[k] == 2) {
		/* its window came in, maybe after this read missed, and its bytes
		 * may still be on their way to the cache: once more to the readers,
		 * behind them in the writer's queue; a second miss is fetched alone */
		struct wjob *j = !io->priv.file_slot && e->wrun ? calloc(1, sizeof(*j)) : NULL;
		if (!j)
			return false;
		io->priv.file_slot = 1;
		io->priv.next = NULL;
		j->waiters = io;
		wjob_push(e, j);
		return true;
	}
	struct win *w = NULL;
	if (st[k] == 1) {
		for (w = e->wfly; w && !(w->o == o && w->off == k * W); w = w->next)
			;
		for (struct win *x = w ? NULL : e->wqueue; x && !w; x = x->next)
			if (x->o == o && x->off == k * W)
				w = x;
	}
	if (!w) {
		if (!(w = win_queue(e, o, st, k)))
			return false;
		/* read ahead: the object's next window, which the reads after
		 * these will want (a shard is read in order in shard mode; under
		 * global shuffle every window is wanted at once anyway) */
		if (k + 1 < nwin && !st[k + 1])
			win_queue(e, o, st, k + 1);
	}
	/* filled from the stream unless it has passed the member's start (a
	 * retry starts the window again: the bytes come again, the same) */
	io->priv.pending = !w->q || w->off + w->q->got <= io->offset ? 2 : 1;
	io->priv.next = w->waiters;
	w->waiters = io;
	win_pump(e);
	return true;
}

/* A window's transfer ended: into the cache and its waiters back to the
 * readers, retried, or failed (its waiters fetched alone). */
void stk__hwin_ended(struct stk_eng *e, struct req *q, CURLcode cc)
{
	struct stk__remote *r = e->r;
	struct win *w = q->w;
	long status = stk__http_transfer_ended(e, q, &cc);
	char why[256];
	/* an answer without the ETag (the server never sends one): its
	 * members are fetched alone, delivered without being kept */
	int rc = q->nokeep ? -EPROTO : stk__http_outcome(q, cc, status, why, sizeof(why));
	if (rc == 1) {
		flush_stage(e, q); /* the bytes that came are right: kept */
		if (stk__http_retry_later(e, q))
			return;
	}
	stk__hwin_settled(e, w);
	if (rc == 0 && status != 416) {
		flush_stage(e, q);
		atomic_fetch_add(&r->c.bytes, q->got);
	}
	/* failed: no count here; each waiter's own fetch says what it gets */
	stk__hwin_done(e, w, rc == 0 && status != 416);
	stk__http_put_req(e, q);
	win_pump(e);
}

void stk__remote_plan_window(struct stk__remote *r, bool shard_mode)
{
	const char *v = getenv("STOKER_REMOTE_WINDOW");
	char *end;
	r->window = 0;
	if (v && *v) {
		unsigned long long x = strtoull(v, &end, 10);
		if (!*end)
			r->window = x && x < 65536 ? 65536 : x;
		return;
	}
	if (!r->cache)
		return;
	uint64_t total = 0, used, limit;
	for (size_t i = 0; i < r->nobjs; i++)
		total += r->objs[i].size;
	stk__rcache_usage(r->cache, &used, &limit);
	if (shard_mode || total <= limit / 2)
		r->window = 8u << 20;
}
