/*
 * io/http.c — the read engine for remote objects: ranged GETs over libcurl's
 * multi interface, many in flight on reused connections (HTTP/2 where the
 * server offers it), driven by the one I/O thread that owns the engine.
 *
 * A READ_FILE io names an object relative to the remote's root (its path)
 * and a byte range; the body lands straight in io->buf (curl's buffer is the
 * only copy before it).  The range is clamped to the object's indexed size
 * and sent with If-Match: the ETag indexed, so an object rewritten since
 * gives HTTP 412 (-ESTALE), never other bytes.  The answer's headers are
 * checked before its body is taken (stk__remote_verify), for the proxies
 * and servers that drop If-Match: its ETag and Content-Range's total must
 * be the index's (else -ESTALE), the range the one asked for, and a 200 the
 * whole object (its range is taken from it), else it is tried again.  Only
 * an answer with the index's ETag goes to the cache.  Every byte the
 * answer promised must have come, else it is a short body and is tried
 * again like a 5xx, a SlowDown or a reset, after a capped exponential
 * backoff with jitter or the server's Retry-After (a retry waits on the
 * engine's delayed list, not in a sleep, so the other requests go on).
 * Once its retry time (remote_retry_time) is spent the io fails with the
 * error, and the loader's on_error policy decides.  A request that
 * timed out fails with -ETIME ("timer expired"), not -ETIMEDOUT, which
 * stk_loader_next_timeout returns when no batch came in time.
 *
 * With the remote's cache on, every read goes first to the cache's reader
 * threads (io/rcache.c: a hit is a pread of local disk, several at once);
 * a miss comes back to be fetched, and a range fetched is kept.
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
 * queue.  A member the window left out (it runs past the window's
 * end) or one whose window failed or could not be cached is fetched alone.
 */
#include "io/engine.h"
#include "io/remote.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define HIT_THREADS 4
#define WIN_STAGE (1u << 20)
/* Bytes handed to the cache's writer and not yet written, at most: past it
 * the curl thread writes a stage itself, so a disk slower than the network
 * slows the transfers instead of the queue growing with the dataset. */
#define WQ_MAX (32u << 20)

/* A window of an object being fetched (or queued to be), and the misses
 * waiting on it (linked by priv.next). */
struct win {
	const struct stk__robj *o;
	uint64_t off, len;
	struct stk_io *waiters;
	struct req *q;      /* its request, once started */
	struct win *next;
};

struct req {
	struct stk_eng *e;
	CURL *h;
	struct stk_io *io;  /* a member's read, or NULL for a window's */
	struct win *w;      /* a window's fetch */
	const char *path;
	uint64_t off;       /* where the range starts */
	uint8_t *stage;     /* a window's bytes not yet in the cache */
	uint64_t staged, flushed;
	const struct stk__robj *obj;
	struct curl_slist *hdrs;
	uint64_t want;      /* bytes asked for (the range, clamped to the object) */
	uint64_t got;       /* bytes of the range taken */
	uint64_t seen;      /* bytes of the body that came */
	struct stk__answer a; /* the answer's headers */
	int verdict;        /* stk__remote_verify's, at the end of the headers */
	char vwhy[240];
	bool enough;        /* a 200 (the whole object): stopped at the range's end */
	bool over;          /* more bytes than asked for */
	bool nokeep;        /* a window's answer without the ETag: not for the cache */
	bool fresh;         /* its next try on a new connection */
	bool paused;        /* a window's: on the paused list (win_yield) */
	uint64_t burst;     /* a window's bytes since it was last resumed */
	CURLcode cc;        /* how its last transfer ended */
	unsigned attempt;
	uint64_t first;     /* when its first try started: retries have a time */
	uint64_t due, t0;
	struct req *next;
};

struct stk_eng {
	CURLM *m;
	struct stk__remote *r;
	struct req *free_reqs, *delayed;
	struct req *paused; /* windows paused to let the thread out (win_yield) */
	struct req **all;   /* every req made, for exit */
	size_t nall, capall;
	/* the cache's readers (hit_main) */
	pthread_t hit[HIT_THREADS];
	unsigned nhit;
	pthread_mutex_t hmu;
	pthread_cond_t hcv;
	struct stk_io *htodo_head, *htodo_tail, *hdone_head, *hdone_tail;
	bool hstop;
	struct stk_io *done_head, *done_tail;
	_Atomic bool woken;
	uint64_t rng;
	/* windows: each object's state per window (0 none, 1 queued or in
	 * flight, 2 done or failed), the windows queued and in flight */
	uint8_t **wstate;
	struct win *wqueue, *wfly;
	unsigned nfly;
	/* the cache's writer: windows' bytes into the cache off this thread,
	 * then (a marker after them, in order) their waiters to the readers */
	pthread_t wthr;
	bool wrun, wstop;
	pthread_cond_t wcv;
	struct wjob *wj_head, *wj_tail;
	uint64_t wq_bytes; /* queued to the writer, not yet written (hmu) */
};

struct wjob {
	struct wjob *next;
	const struct stk__robj *o;
	uint64_t off, len;
	uint8_t *buf;           /* bytes to keep (freed once written), or NULL */
	struct stk_io *waiters; /* a marker: these go to the readers */
};

static size_t on_header(char *ptr, size_t size, size_t n, void *arg)
{
	struct req *q = arg;
	size_t l = size * n;
	if (stk__remote_answer_header(&q->a, ptr, l) && q->obj &&
	    (q->a.status == 200 || q->a.status == 206))
		q->verdict = stk__remote_verify(&q->a, q->obj->etag, q->obj->size, q->off, q->vwhy,
						sizeof(q->vwhy));
	return l;
}

/* Of a body's next l bytes, the part within the range asked for: its start
 * in *at and its length, or -1 to stop the transfer (not the object's
 * bytes, more than asked; or, a 200, the range is all in). */
static int64_t in_range(struct req *q, size_t l, size_t *at)
{
	if ((q->a.status != 200 && q->a.status != 206) || !l)
		return 0; /* an error's body: dropped */
	if (q->verdict)
		return -1;
	/* a 206's body starts at the offset asked (verified), a 200's at 0 */
	uint64_t pos = (q->a.status == 206 ? q->off : 0) + q->seen;
	q->seen += l;
	if (pos + l <= q->off)
		return 0; /* a 200: before the range */
	*at = pos < q->off ? (size_t)(q->off - pos) : 0;
	uint64_t k = l - *at;
	if (q->got + k > q->want) {
		if (q->a.status == 206) {
			q->over = true;
			return -1;
		}
		k = q->want - q->got; /* a 200: the range is in, the rest not needed */
		q->enough = true;
	}
	return (int64_t)k;
}

static size_t on_body(char *ptr, size_t size, size_t n, void *arg)
{
	struct req *q = arg;
	size_t l = size * n, at = 0;
	int64_t k = in_range(q, l, &at);
	if (k < 0)
		return 0;
	memcpy((uint8_t *)q->io->buf + q->got, ptr + at, (size_t)k);
	q->got += (uint64_t)k;
	return q->enough ? 0 : l;
}

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

static void finish(struct stk_eng *e, struct stk_io *io, int64_t res);

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
		finish(e, io, (int64_t)io->priv.t);
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
static void win_resume(struct stk_eng *e)
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

static size_t on_wbody(char *ptr, size_t size, size_t n, void *arg)
{
	struct req *q = arg;
	size_t l = size * n, at = 0, done = 0;
	int64_t k = in_range(q, l, &at);
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

static void finish(struct stk_eng *e, struct stk_io *io, int64_t res)
{
	io->res = res;
	stk__io_push(&e->done_head, &e->done_tail, io);
}

static int start(struct stk_eng *e, struct req *q)
{
	struct stk__remote *r = e->r;
	curl_slist_free_all(q->hdrs);
	q->hdrs = NULL;
	int rc = stk__remote_easy(r, q->h, q->path, &q->hdrs);
	if (rc)
		return rc;
	if (q->fresh) /* the last answer was garbled on a reused connection */
		stk__remote_fresh(q->h);
	char range[96], im[128];
	snprintf(range, sizeof(range), "%llu-%llu", (unsigned long long)q->off,
		 (unsigned long long)(q->off + q->want - 1));
	curl_easy_setopt(q->h, CURLOPT_RANGE, range);
	if (q->obj && q->obj->etag[0]) {
		snprintf(im, sizeof(im), "If-Match: %s", q->obj->etag);
		struct curl_slist *h = curl_slist_append(q->hdrs, im);
		if (!h)
			return -ENOMEM;
		q->hdrs = h;
	}
	curl_easy_setopt(q->h, CURLOPT_HTTPHEADER, q->hdrs);
	curl_easy_setopt(q->h, CURLOPT_WRITEFUNCTION, q->w ? on_wbody : on_body);
	/* a window comes in large reads: fewer calls, fewer wakeups */
	if (q->w)
		curl_easy_setopt(q->h, CURLOPT_BUFFERSIZE, 512L << 10);
	curl_easy_setopt(q->h, CURLOPT_WRITEDATA, q);
	q->staged = q->flushed = q->burst = 0;
	curl_easy_setopt(q->h, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(q->h, CURLOPT_HEADERDATA, q);
	curl_easy_setopt(q->h, CURLOPT_PRIVATE, q);
	q->got = q->seen = 0;
	memset(&q->a, 0, sizeof(q->a));
	q->verdict = 0;
	q->enough = q->over = q->nokeep = false;
	q->due = 0;
	q->t0 = stk__now_ns();
	if (curl_multi_add_handle(e->m, q->h) != CURLM_OK)
		return -EIO;
	uint32_t now = atomic_fetch_add(&r->c.inflight, 1) + 1;
	uint32_t mx = atomic_load(&r->c.inflight_max);
	while (now > mx && !atomic_compare_exchange_weak(&r->c.inflight_max, &mx, now))
		;
	return 0;
}

static void put_req(struct stk_eng *e, struct req *q)
{
	q->io = NULL;
	q->w = NULL;
	q->next = e->free_reqs;
	e->free_reqs = q;
}

/* A free request, or NULL (out of memory). */
static struct req *get_req(struct stk_eng *e)
{
	struct req *q = e->free_reqs;
	if (q) {
		e->free_reqs = q->next;
		return q;
	}
	q = calloc(1, sizeof(*q));
	if (e->nall == e->capall) {
		size_t c = e->capall ? 2 * e->capall : 64;
		struct req **a = realloc(e->all, c * sizeof(*a));
		if (a) {
			e->all = a;
			e->capall = c;
		}
	}
	if (!q || e->nall == e->capall || !(q->h = curl_easy_init())) {
		free(q);
		return NULL;
	}
	q->e = e;
	e->all[e->nall++] = q;
	return q;
}

/* Starts the GET of io's range (want bytes of object o). */
static void fetch(struct stk_eng *e, struct stk_io *io, const struct stk__robj *o, uint64_t want)
{
	struct req *q = get_req(e);
	if (!q) {
		finish(e, io, -ENOMEM);
		return;
	}
	q->io = io;
	q->path = io->path;
	q->off = io->offset;
	q->obj = o;
	q->want = want;
	q->attempt = 0;
	q->fresh = false;
	q->first = stk__now_ns();
	int rc = start(e, q);
	if (rc) {
		put_req(e, q);
		finish(e, io, rc);
	}
}

/* --- windows ---------------------------------------------------------------- */

static bool retry_later(struct stk_eng *e, struct req *q);

/* A transfer is over, whatever its outcome: out of the multi handle and
 * counted; its HTTP status (a 200 stopped at what was asked is a success). */
static long transfer_ended(struct stk_eng *e, struct req *q, CURLcode *cc)
{
	struct stk__remote *r = e->r;
	for (struct req **pp = &e->paused; q->paused && *pp; pp = &(*pp)->next)
		if (*pp == q) { /* ended while paused: off the list */
			*pp = q->next;
			q->paused = false;
			break;
		}
	curl_multi_remove_handle(e->m, q->h);
	atomic_fetch_sub(&r->c.inflight, 1);
	atomic_fetch_add(&r->c.requests, 1);
	stk_hist_add(r->h_lat, stk__now_ns() - q->t0);
	long status = 0;
	curl_easy_getinfo(q->h, CURLINFO_RESPONSE_CODE, &status);
	if (*cc == CURLE_WRITE_ERROR && q->enough)
		*cc = CURLE_OK;
	q->cc = *cc;
	return status;
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
static void win_settled(struct stk_eng *e, const struct win *w)
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
static void win_done(struct stk_eng *e, struct win *w, bool ok)
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

static void *writer_main(void *arg)
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
		struct req *q = get_req(e);
		uint8_t *stage = q ? malloc(WIN_STAGE) : NULL;
		if (!stage) { /* its waiters are fetched alone */
			if (q)
				put_req(e, q);
			win_done(e, w, false);
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
		if (start(e, q)) {
			put_req(e, q);
			win_done(e, w, false);
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
static bool win_wait(struct stk_eng *e, struct stk_io *io, const struct stk__robj *o,
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
		if (!(w = calloc(1, sizeof(*w))))
			return false;
		w->o = o;
		w->off = k * W;
		w->len = o->size - w->off < W ? o->size - w->off : W;
		struct win **pp = &e->wqueue; /* FIFO: the oldest misses first */
		while (*pp)
			pp = &(*pp)->next;
		*pp = w;
		st[k] = 1;
	}
	/* filled from the stream unless it has passed the member's start (a
	 * retry starts the window again: the bytes come again, the same) */
	io->priv.pending = !w->q || w->off + w->q->got <= io->offset ? 2 : 1;
	io->priv.next = w->waiters;
	w->waiters = io;
	win_pump(e);
	return true;
}

/* What a transfer's end means, the answer's checks first: 0 done, 1 try
 * again, or the -errno to fail with; why says it. */
static int outcome(struct req *q, CURLcode cc, long status, char *why, size_t len)
{
	if (q->verdict) { /* not the object's bytes (1), or another version's */
		snprintf(why, len, "%s", q->vwhy);
		return q->verdict;
	}
	if (q->over) {
		snprintf(why, len, "HTTP 206 with more bytes than the range asked for");
		return 1;
	}
	bool short_body = cc == CURLE_OK &&
			  (status == 206 ? q->got < q->a.range_len && q->got < q->want
					 : status == 200 && q->got < q->want && !q->enough);
	if (cc == CURLE_PARTIAL_FILE || short_body)
		atomic_fetch_add(&q->e->r->c.short_bodies, 1);
	int rc = stk__remote_classify(q->e->r, q->h, cc, status, short_body, why, len);
	if (rc < 0)
		stk__remote_region_hint(q->e->r, q->a.region, why, len);
	return rc;
}

/* A window's transfer ended: into the cache and its waiters back to the
 * readers, retried, or failed (its waiters fetched alone). */
static void wended(struct stk_eng *e, struct req *q, CURLcode cc)
{
	struct stk__remote *r = e->r;
	struct win *w = q->w;
	long status = transfer_ended(e, q, &cc);
	char why[256];
	/* an answer without the ETag (the server never sends one): its
	 * members are fetched alone, delivered without being kept */
	int rc = q->nokeep ? -EPROTO : outcome(q, cc, status, why, sizeof(why));
	if (rc == 1) {
		flush_stage(e, q); /* the bytes that came are right: kept */
		if (retry_later(e, q))
			return;
	}
	win_settled(e, w);
	if (rc == 0 && status != 416) {
		flush_stage(e, q);
		atomic_fetch_add(&r->c.bytes, q->got);
	}
	/* failed: no count here; each waiter's own fetch says what it gets */
	win_done(e, w, rc == 0 && status != 416);
	put_req(e, q);
	win_pump(e);
}

/* The cache's readers: a hit is a pread of local disk, several at once as
 * io_uring does for local data, off the thread that drives curl.  A miss
 * comes back to it (priv.pending = 1) to be fetched. */
static void *hit_main(void *arg)
{
	struct stk_eng *e = arg;
	pthread_mutex_lock(&e->hmu);
	for (;;) {
		while (!e->htodo_head && !e->hstop)
			pthread_cond_wait(&e->hcv, &e->hmu);
		if (e->hstop)
			break;
		struct stk_io *io = stk__io_pop(&e->htodo_head, &e->htodo_tail);
		pthread_mutex_unlock(&e->hmu);
		const struct stk__robj *o = stk__remote_find(e->r, io->path);
		uint64_t want = io->priv.t;
		int64_t got = stk__rcache_read(e->r, o, io->buf, want, io->offset);
		if (io->priv.file_slot) { /* its window just came: counted when it missed */
			if (got == (int64_t)want) {
				atomic_fetch_sub(&e->r->c.hits, 1);
				atomic_fetch_sub(&e->r->c.hit_bytes, want);
			} else {
				atomic_fetch_sub(&e->r->c.misses, 1);
			}
		}
		io->priv.pending = got != (int64_t)want; /* a miss: the engine fetches it */
		io->res = got;
		pthread_mutex_lock(&e->hmu);
		/* the engine's thread takes the whole list when woken: a wake for
		 * the first io on it, not one (a send() on curl's socketpair) each */
		bool first = !e->hdone_head;
		stk__io_push(&e->hdone_head, &e->hdone_tail, io);
		pthread_mutex_unlock(&e->hmu);
		if (first)
			curl_multi_wakeup(e->m);
		pthread_mutex_lock(&e->hmu);
	}
	pthread_mutex_unlock(&e->hmu);
	return NULL;
}

/* What the cache's readers finished: hits delivered, misses fetched. */
static void take_hits(struct stk_eng *e)
{
	if (!e->nhit)
		return;
	pthread_mutex_lock(&e->hmu);
	struct stk_io *head = e->hdone_head;
	e->hdone_head = e->hdone_tail = NULL;
	pthread_mutex_unlock(&e->hmu);
	while (head) {
		struct stk_io *io = head;
		head = io->priv.next;
		/* read once: an io win_wait hands on may be back with the readers,
		 * its fields theirs, before win_wait returns */
		if (!io->priv.pending) {
			finish(e, io, io->res);
			continue;
		}
		const struct stk__robj *o = stk__remote_find(e->r, io->path);
		if (!win_wait(e, io, o, io->priv.t))
			fetch(e, io, o, io->priv.t);
	}
}

static int http_submit(struct stk_eng *e, struct stk_io **ios, unsigned n)
{
	struct stk__remote *r = e->r;
	bool hits = false;
	for (unsigned i = 0; i < n; i++) {
		struct stk_io *io = ios[i];
		if (io->op != STK_IO_READ_FILE) {
			finish(e, io, -EOPNOTSUPP);
			continue;
		}
		io->priv.file_slot = 0; /* not yet sent back to the cache after its window */
		const struct stk__robj *o = stk__remote_find(r, io->path);
		uint64_t want = io->len;
		if (o) {
			if (io->offset >= o->size) {
				finish(e, io, 0);
				continue;
			}
			if (want > o->size - io->offset)
				want = o->size - io->offset;
		}
		if (!want) {
			finish(e, io, 0);
			continue;
		}
		if (r->cache && o && e->nhit) {
			io->priv.t = want;
			pthread_mutex_lock(&e->hmu);
			stk__io_push(&e->htodo_head, &e->htodo_tail, io);
			pthread_mutex_unlock(&e->hmu);
			hits = true;
			continue;
		}
		fetch(e, io, o, want);
	}
	if (hits) {
		pthread_mutex_lock(&e->hmu);
		pthread_cond_broadcast(&e->hcv);
		pthread_mutex_unlock(&e->hmu);
	}
	return 0;
}

/* Puts q on the delayed list to be tried again (stk__remote_retry's rule):
 * true, or false when its time or tries are spent. */
static bool retry_later(struct stk_eng *e, struct req *q)
{
	uint64_t wait;
	if (!stk__remote_retry(e->r, q->h, q->first, q->attempt + 1, &e->rng, &wait))
		return false;
	q->fresh = q->fresh || stk__remote_garbled(q->h, q->cc);
	q->attempt++;
	q->due = stk__now_ns() + wait;
	q->next = e->delayed;
	e->delayed = q;
	atomic_fetch_add(&e->r->c.retries, 1);
	atomic_fetch_add(&e->r->c.retrying, 1);
	return true;
}

/* A transfer ended: delivered, retried, or failed. */
static void ended(struct stk_eng *e, struct req *q, CURLcode cc)
{
	struct stk__remote *r = e->r;
	struct stk_io *io = q->io;
	long status = transfer_ended(e, q, &cc);
	char why[256];
	int rc = outcome(q, cc, status, why, sizeof(why));
	if (rc == 1 && retry_later(e, q))
		return;
	if (rc == 1) {
		atomic_fetch_add(&r->c.failed, 1);
		stk__remote_failed(r, q->obj, q->attempt + 1, why);
		finish(e, io, cc == CURLE_OPERATION_TIMEDOUT ? -ETIME
			      : cc == CURLE_COULDNT_CONNECT ? -ECONNREFUSED
			      : q->verdict || q->over ? -EPROTO : -EIO);
	} else if (rc < 0) {
		atomic_fetch_add(&r->c.failed, 1);
		stk__remote_failed(r, q->obj, q->attempt + 1, why);
		finish(e, io, rc);
	} else if (status == 416) {
		finish(e, io, 0);
	} else {
		atomic_fetch_add(&r->c.bytes, q->got);
		/* only what was verified against the index's ETag and size */
		if (r->cache && q->obj && stk__remote_keepable(&q->a, q->obj->etag))
			stk__rcache_write(r, q->obj, io->buf, q->got, io->offset);
		finish(e, io, (int64_t)q->got);
	}
	put_req(e, q);
}

/* Starts the delayed retries that are due; the wait until the next, in ms
 * (-1: none). */
static long run_delayed(struct stk_eng *e)
{
	uint64_t now = stk__now_ns(), next = 0;
	struct req **pp = &e->delayed;
	while (*pp) {
		struct req *q = *pp;
		if (q->due <= now) {
			*pp = q->next;
			atomic_fetch_sub(&e->r->c.retrying, 1);
			int rc = start(e, q);
			if (rc && q->w) {
				struct win *w = q->w;
				win_settled(e, w);
				win_done(e, w, false);
				put_req(e, q);
			} else if (rc) {
				finish(e, q->io, rc);
				put_req(e, q);
			}
			continue;
		}
		if (!next || q->due < next)
			next = q->due;
		pp = &q->next;
	}
	return next ? (long)((next - now) / 1000000 + 1) : -1;
}

static int http_reap(struct stk_eng *e, struct stk_io **done, unsigned max, bool wait)
{
	for (;;) {
		win_resume(e);
		take_hits(e);
		long delay = run_delayed(e);
		int running = 0;
		if (curl_multi_perform(e->m, &running) != CURLM_OK)
			return -EIO;
		CURLMsg *msg;
		int left;
		while ((msg = curl_multi_info_read(e->m, &left))) {
			if (msg->msg != CURLMSG_DONE)
				continue;
			struct req *q = NULL;
			curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&q);
			if (q->w)
				wended(e, q, msg->data.result);
			else
				ended(e, q, msg->data.result);
		}
		if (e->done_head || !wait || atomic_exchange(&e->woken, false))
			break;
		if (e->paused) /* resumed at the loop's top: no sleep */
			continue;
		/* nothing in flight: sleeps until wake (a slot freed, a stop) */
		int timeout = delay >= 0 && delay < 1000 ? (int)delay : 1000;
		curl_multi_poll(e->m, NULL, 0, timeout, NULL);
	}
	unsigned n = 0;
	while (e->done_head && n < max)
		done[n++] = stk__io_pop(&e->done_head, &e->done_tail);
	return (int)n;
}

static void http_wake(struct stk_eng *e)
{
	atomic_store(&e->woken, true);
	curl_multi_wakeup(e->m);
}

static void http_exit(struct stk_eng *e)
{
	if (!e)
		return;
	pthread_mutex_lock(&e->hmu);
	e->hstop = true;
	pthread_cond_broadcast(&e->hcv);
	pthread_mutex_unlock(&e->hmu);
	for (unsigned i = 0; i < e->nhit; i++)
		pthread_join(e->hit[i], NULL);
	if (e->wrun) { /* what it holds is written first: the bytes are right */
		pthread_mutex_lock(&e->hmu);
		e->wstop = true;
		pthread_cond_signal(&e->wcv);
		pthread_mutex_unlock(&e->hmu);
		pthread_join(e->wthr, NULL);
	}
	pthread_mutex_destroy(&e->hmu);
	pthread_cond_destroy(&e->hcv);
	pthread_cond_destroy(&e->wcv);
	for (int k = 0; k < 2; k++)
		for (struct win *w = k ? e->wfly : e->wqueue, *n; w; w = n) {
			n = w->next;
			if (w->q)
				free(w->q->stage);
			free(w);
		}
	/* transfers still running are dropped: nothing writes into the slots
	 * once their handles are removed */
	for (size_t i = 0; i < e->nall; i++) {
		struct req *q = e->all[i];
		if ((q->io || q->w) && !q->due)
			atomic_fetch_sub(&e->r->c.inflight, 1);
		else if (q->io || q->w) /* on the delayed list */
			atomic_fetch_sub(&e->r->c.retrying, 1);
		curl_multi_remove_handle(e->m, q->h);
		curl_slist_free_all(q->hdrs);
		curl_easy_cleanup(q->h);
		free(q);
	}
	free(e->all);
	for (size_t i = 0; e->wstate && i < e->r->nobjs; i++)
		free(e->wstate[i]);
	free(e->wstate);
	curl_multi_cleanup(e->m);
	free(e);
}

static int http_init(struct stk_eng **out, const struct stk_engine_cfg *cfg)
{
	if (!cfg->remote)
		return -EINVAL;
	struct stk_eng *e = calloc(1, sizeof(*e));
	if (!e || !(e->m = curl_multi_init())) {
		free(e);
		return -ENOMEM;
	}
	e->r = cfg->remote;
	e->rng = stk__now_ns() ^ (uintptr_t)e;
	curl_multi_setopt(e->m, CURLMOPT_MAXCONNECTS, (long)(cfg->queue_depth + 4));
	curl_multi_setopt(e->m, CURLMOPT_PIPELINING, (long)CURLPIPE_MULTIPLEX);
	pthread_mutex_init(&e->hmu, NULL);
	pthread_cond_init(&e->hcv, NULL);
	pthread_cond_init(&e->wcv, NULL);
	if (e->r->cache && e->r->window && !pthread_create(&e->wthr, NULL, writer_main, e)) {
		pthread_setname_np(e->wthr, "stk-cachew");
		e->wrun = true;
	}
	for (unsigned i = 0; e->r->cache && i < HIT_THREADS; i++) {
		if (pthread_create(&e->hit[i], NULL, hit_main, e))
			break;
		pthread_setname_np(e->hit[i], "stk-cache");
		e->nhit++;
	}
	*out = e;
	return 0;
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

const struct stk_engine_ops stk__engine_http = {
	.name = "http",
	.init = http_init,
	.submit = http_submit,
	.reap = http_reap,
	.wake = http_wake,
	.exit = http_exit,
};
