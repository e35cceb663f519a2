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
 * Windows (a miss fetching the 8 MiB around it, and the misses that wait
 * for it) are io/hwin.c's; io/http.h has what the two files share.
 */
#include "io/http.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

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
int64_t stk__http_in_range(struct req *q, size_t l, size_t *at)
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
	int64_t k = stk__http_in_range(q, l, &at);
	if (k < 0)
		return 0;
	memcpy((uint8_t *)q->io->buf + q->got, ptr + at, (size_t)k);
	q->got += (uint64_t)k;
	return q->enough ? 0 : l;
}

void stk__http_finish(struct stk_eng *e, struct stk_io *io, int64_t res)
{
	io->res = res;
	stk__io_push(&e->done_head, &e->done_tail, io);
}

int stk__http_start(struct stk_eng *e, struct req *q)
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
	curl_easy_setopt(q->h, CURLOPT_WRITEFUNCTION, q->w ? stk__hwin_body : on_body);
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

void stk__http_put_req(struct stk_eng *e, struct req *q)
{
	q->io = NULL;
	q->w = NULL;
	q->next = e->free_reqs;
	e->free_reqs = q;
}

/* A free request, or NULL (out of memory). */
struct req *stk__http_get_req(struct stk_eng *e)
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
	struct req *q = stk__http_get_req(e);
	if (!q) {
		stk__http_finish(e, io, -ENOMEM);
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
	int rc = stk__http_start(e, q);
	if (rc) {
		stk__http_put_req(e, q);
		stk__http_finish(e, io, rc);
	}
}

/* A transfer is over, whatever its outcome: out of the multi handle and
 * counted; its HTTP status (a 200 stopped at what was asked is a success). */
long stk__http_transfer_ended(struct stk_eng *e, struct req *q, CURLcode *cc)
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

/* What a transfer's end means, the answer's checks first: 0 done, 1 try
 * again, or the -errno to fail with; why says it. */
int stk__http_outcome(struct req *q, CURLcode cc, long status, char *why, size_t len)
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
			stk__http_finish(e, io, io->res);
			continue;
		}
		const struct stk__robj *o = stk__remote_find(e->r, io->path);
		if (!stk__hwin_wait(e, io, o, io->priv.t))
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
			stk__http_finish(e, io, -EOPNOTSUPP);
			continue;
		}
		io->priv.file_slot = 0; /* not yet sent back to the cache after its window */
		const struct stk__robj *o = stk__remote_find(r, io->path);
		uint64_t want = io->len;
		if (o) {
			if (io->offset >= o->size) {
				stk__http_finish(e, io, 0);
				continue;
			}
			if (want > o->size - io->offset)
				want = o->size - io->offset;
		}
		if (!want) {
			stk__http_finish(e, io, 0);
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
bool stk__http_retry_later(struct stk_eng *e, struct req *q)
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
	long status = stk__http_transfer_ended(e, q, &cc);
	char why[256];
	int rc = stk__http_outcome(q, cc, status, why, sizeof(why));
	if (rc == 1 && stk__http_retry_later(e, q))
		return;
	if (rc == 1) {
		atomic_fetch_add(&r->c.failed, 1);
		stk__remote_failed(r, q->obj, q->attempt + 1, why);
		stk__http_finish(e, io, cc == CURLE_OPERATION_TIMEDOUT ? -ETIME
			      : cc == CURLE_COULDNT_CONNECT ? -ECONNREFUSED
			      : q->verdict || q->over ? -EPROTO : -EIO);
	} else if (rc < 0) {
		atomic_fetch_add(&r->c.failed, 1);
		stk__remote_failed(r, q->obj, q->attempt + 1, why);
		stk__http_finish(e, io, rc);
	} else if (status == 416) {
		stk__http_finish(e, io, 0);
	} else {
		atomic_fetch_add(&r->c.bytes, q->got);
		/* only what was verified against the index's ETag and size */
		if (r->cache && q->obj && stk__remote_keepable(&q->a, q->obj->etag))
			stk__rcache_write(r, q->obj, io->buf, q->got, io->offset);
		stk__http_finish(e, io, (int64_t)q->got);
	}
	stk__http_put_req(e, q);
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
			int rc = stk__http_start(e, q);
			if (rc && q->w) {
				struct win *w = q->w;
				stk__hwin_settled(e, w);
				stk__hwin_done(e, w, false);
				stk__http_put_req(e, q);
			} else if (rc) {
				stk__http_finish(e, q->io, rc);
				stk__http_put_req(e, q);
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
		stk__hwin_resume(e);
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
				stk__hwin_ended(e, q, msg->data.result);
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
	if (e->r->cache && e->r->window && !pthread_create(&e->wthr, NULL, stk__hwin_writer, e)) {
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

const struct stk_engine_ops stk__engine_http = {
	.name = "http",
	.init = http_init,
	.submit = http_submit,
	.reap = http_reap,
	.wake = http_wake,
	.exit = http_exit,
};
