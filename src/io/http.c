/*
 * io/http.c — the read engine for remote objects: ranged GETs over libcurl's
 * multi interface, many in flight on reused connections (HTTP/2 where the
 * server offers it), driven by the one I/O thread that owns the engine.
 *
 * A READ_FILE io names an object relative to the remote's root (its path)
 * and a byte range; the body lands straight in io->buf (curl's buffer is the
 * only copy before it).  The range is clamped to the object's indexed size
 * and sent with If-Match: the ETag indexed, so an object rewritten since
 * gives HTTP 412 (-ESTALE), never other bytes.  A finished transfer is
 * checked: the Content-Range must start at the offset asked for and every
 * byte it promised must have come, else it is a short body and is tried
 * again like a 5xx, a SlowDown or a reset, after a capped exponential
 * backoff with jitter (a retry waits on the engine's delayed list, not in a
 * sleep, so the other requests go on).  After the bounded tries the io fails
 * with the error, and the loader's on_error policy decides.  A request that
 * timed out fails with -ETIME ("timer expired"), not -ETIMEDOUT, which
 * stk_loader_next_timeout returns when no batch came in time.
 *
 * With the remote's cache on, every read goes first to the cache's reader
 * threads (io/rcache.c: a hit is a pread of local disk, several at once);
 * a miss comes back to be fetched, and a range fetched is kept.
 */
#include "io/engine.h"
#include "io/remote.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define HIT_THREADS 4

struct req {
	struct stk_eng *e;
	CURL *h;
	struct stk_io *io;
	const struct stk__robj *obj;
	struct curl_slist *hdrs;
	uint64_t want;      /* bytes asked for (the range, clamped to the object) */
	uint64_t got;
	uint64_t range_start, range_len; /* from Content-Range; len 0: none seen */
	long status;        /* of the response being received */
	bool enough;        /* a 200 (no range support) at offset 0: stopped at want */
	bool over;          /* more bytes than asked for */
	unsigned attempt;
	uint64_t due, t0;
	struct req *next;
};

struct stk_eng {
	CURLM *m;
	struct stk__remote *r;
	struct req *free_reqs, *delayed;
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
};

static size_t on_header(char *ptr, size_t size, size_t n, void *arg)
{
	struct req *q = arg;
	size_t l = size * n;
	if (l > 5 && !strncmp(ptr, "HTTP/", 5)) {
		q->range_len = 0;
		const char *sp = memchr(ptr, ' ', l);
		q->status = sp ? strtol(sp + 1, NULL, 10) : 0;
	} else if (l > 14 && !strncasecmp(ptr, "content-range:", 14)) {
		/* "bytes A-B/TOTAL" */
		char line[128];
		size_t k = l - 14 < sizeof(line) - 1 ? l - 14 : sizeof(line) - 1;
		memcpy(line, ptr + 14, k);
		line[k] = 0;
		char *p = strstr(line, "bytes"), *end;
		if (p) {
			unsigned long long a = strtoull(p + 5, &end, 10), b;
			if (*end == '-') {
				b = strtoull(end + 1, &end, 10);
				if (b >= a) {
					q->range_start = a;
					q->range_len = b - a + 1;
				}
			}
		}
	}
	return l;
}

static size_t on_body(char *ptr, size_t size, size_t n, void *arg)
{
	struct req *q = arg;
	size_t l = size * n;
	if (q->status != 200 && q->status != 206)
		return l; /* an error's body: dropped */
	if (q->got + l > q->want) {
		if (q->status == 200 && q->io->offset == 0) {
			/* no range support: the object's start is all we need */
			memcpy((uint8_t *)q->io->buf + q->got, ptr, q->want - q->got);
			q->got = q->want;
			q->enough = true;
		} else {
			q->over = true;
		}
		return 0;
	}
	memcpy((uint8_t *)q->io->buf + q->got, ptr, l);
	q->got += l;
	return l;
}

static void finish(struct stk_eng *e, struct stk_io *io, int64_t res)
{
	io->res = res;
	stk__io_push(&e->done_head, &e->done_tail, io);
}

static int start(struct stk_eng *e, struct req *q)
{
	struct stk__remote *r = e->r;
	struct stk_io *io = q->io;
	curl_slist_free_all(q->hdrs);
	q->hdrs = NULL;
	int rc = stk__remote_easy(r, q->h, io->path, &q->hdrs);
	if (rc)
		return rc;
	char range[96], im[128];
	snprintf(range, sizeof(range), "%llu-%llu", (unsigned long long)io->offset,
		 (unsigned long long)(io->offset + q->want - 1));
	curl_easy_setopt(q->h, CURLOPT_RANGE, range);
	if (q->obj && q->obj->etag[0]) {
		snprintf(im, sizeof(im), "If-Match: %s", q->obj->etag);
		struct curl_slist *h = curl_slist_append(q->hdrs, im);
		if (!h)
			return -ENOMEM;
		q->hdrs = h;
	}
	curl_easy_setopt(q->h, CURLOPT_HTTPHEADER, q->hdrs);
	curl_easy_setopt(q->h, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(q->h, CURLOPT_WRITEDATA, q);
	curl_easy_setopt(q->h, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(q->h, CURLOPT_HEADERDATA, q);
	curl_easy_setopt(q->h, CURLOPT_PRIVATE, q);
	q->got = q->range_len = q->range_start = 0;
	q->status = 0;
	q->enough = q->over = false;
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
	q->next = e->free_reqs;
	e->free_reqs = q;
}

/* Starts the GET of io's range (want bytes of object o). */
static void fetch(struct stk_eng *e, struct stk_io *io, const struct stk__robj *o, uint64_t want)
{
	struct req *q = e->free_reqs;
	if (q) {
		e->free_reqs = q->next;
	} else {
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
			finish(e, io, -ENOMEM);
			return;
		}
		q->e = e;
		e->all[e->nall++] = q;
	}
	q->io = io;
	q->obj = o;
	q->want = want;
	q->attempt = 0;
	int rc = start(e, q);
	if (rc) {
		put_req(e, q);
		finish(e, io, rc);
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
		io->priv.pending = got != (int64_t)want; /* a miss: the engine fetches it */
		io->res = got;
		pthread_mutex_lock(&e->hmu);
		stk__io_push(&e->hdone_head, &e->hdone_tail, io);
		pthread_mutex_unlock(&e->hmu);
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
		if (io->priv.pending)
			fetch(e, io, stk__remote_find(e->r, io->path), io->priv.t);
		else
			finish(e, io, io->res);
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

static void retry_later(struct stk_eng *e, struct req *q)
{
	q->attempt++;
	q->due = stk__now_ns() + stk__remote_backoff_ns(e->r, q->attempt, &e->rng);
	q->next = e->delayed;
	e->delayed = q;
	atomic_fetch_add(&e->r->c.retries, 1);
}

/* A transfer ended: delivered, retried, or failed. */
static void ended(struct stk_eng *e, struct req *q, CURLcode cc)
{
	struct stk__remote *r = e->r;
	struct stk_io *io = q->io;
	curl_multi_remove_handle(e->m, q->h);
	atomic_fetch_sub(&r->c.inflight, 1);
	atomic_fetch_add(&r->c.requests, 1);
	stk_hist_add(r->h_lat, stk__now_ns() - q->t0);
	long status = 0;
	curl_easy_getinfo(q->h, CURLINFO_RESPONSE_CODE, &status);
	if (cc == CURLE_WRITE_ERROR && q->enough)
		cc = CURLE_OK;
	if (cc == CURLE_WRITE_ERROR && q->over) {
		atomic_fetch_add(&r->c.failed, 1);
		finish(e, io, -EPROTO); /* more than the range: not the bytes asked for */
		put_req(e, q);
		return;
	}
	bool short_body = false;
	if (cc == CURLE_OK && status == 206) {
		if (q->range_len == 0 || q->range_start != io->offset) {
			atomic_fetch_add(&r->c.failed, 1);
			finish(e, io, -EPROTO);
			put_req(e, q);
			return;
		}
		short_body = q->got < q->range_len;
	} else if (cc == CURLE_OK && status == 200) {
		if (io->offset != 0) {
			atomic_fetch_add(&r->c.failed, 1);
			finish(e, io, -EPROTO); /* the server ignores Range */
			put_req(e, q);
			return;
		}
		short_body = q->got < q->want && !q->enough;
		curl_off_t cl = -1;
		curl_easy_getinfo(q->h, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &cl);
		if (cl >= 0 && q->got == (uint64_t)cl)
			short_body = false; /* the whole object, shorter than asked */
	}
	if (cc == CURLE_PARTIAL_FILE || short_body)
		atomic_fetch_add(&r->c.short_bodies, 1);
	char why[256];
	int rc = stk__remote_classify(r, cc, status, short_body, why, sizeof(why));
	if (rc == 1 && q->attempt + 1 < r->max_attempts) {
		retry_later(e, q);
		return;
	}
	if (rc == 1) {
		atomic_fetch_add(&r->c.failed, 1);
		finish(e, io, cc == CURLE_OPERATION_TIMEDOUT ? -ETIME
			      : cc == CURLE_COULDNT_CONNECT ? -ECONNREFUSED : -EIO);
	} else if (rc < 0) {
		atomic_fetch_add(&r->c.failed, 1);
		finish(e, io, rc);
	} else if (status == 416) {
		finish(e, io, 0);
	} else {
		atomic_fetch_add(&r->c.bytes, q->got);
		if (r->cache && q->obj)
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
			int rc = start(e, q);
			if (rc) {
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
			ended(e, q, msg->data.result);
		}
		if (e->done_head || !wait || atomic_exchange(&e->woken, false))
			break;
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
	pthread_mutex_destroy(&e->hmu);
	pthread_cond_destroy(&e->hcv);
	/* transfers still running are dropped: nothing writes into the slots
	 * once their handles are removed */
	for (size_t i = 0; i < e->nall; i++) {
		struct req *q = e->all[i];
		if (q->io && !q->due)
			atomic_fetch_sub(&e->r->c.inflight, 1);
		curl_multi_remove_handle(e->m, q->h);
		curl_slist_free_all(q->hdrs);
		curl_easy_cleanup(q->h);
		free(q);
	}
	free(e->all);
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
