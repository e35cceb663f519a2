/*
 * io/hreq.c — one ranged GET of the remote read engine, from start to what
 * its end means: a request record (reused, with its curl easy handle), its
 * headers (If-Match, Range), the answer's checks as it comes (its headers
 * verified against the index, the body's part within the range asked), the
 * transfer's end counted, its outcome (done, again, or the error), the
 * retry's place on the delayed list, and an io handed back.  Below both
 * io/http.c (the engine: submit, reap) and io/hwin.c (windows), which call
 * it; it calls neither (a window's body callback is the engine's
 * e->win_body, set by http.c).
 */
#include "io/http.h"

#include <stdlib.h>
#include <string.h>

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
	curl_easy_setopt(q->h, CURLOPT_WRITEFUNCTION, q->w ? e->win_body : on_body);
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
