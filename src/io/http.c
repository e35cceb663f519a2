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
 * for it) are io/hwin.c's; one request's start, checks and end are
 * io/hreq.c's, below both; io/http.h has what the three files share.
 */
#include "io/http.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

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
	e->win_body = stk__hwin_body;
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
