/*
 * io/rblock.c — blocking requests, one at a time on the caller's easy handle
 * (the index, the listing, uploads): GET of a range, HEAD, S3's listing
 * (all pages), PUT, and the bucket check, each retried by io/remote.c's rule;
 * and many shards' HEADs at once on a multi handle, one try each (create).
 * A GET's answer is checked against the object indexed as the read
 * engine's is (stk__remote_verify): the index never reads another
 * version's bytes or a proxy's page.
 *
 * Uploads (stoker pack s3://..., dataset/upload.c) are PUTs through the same
 * signing and retries, the body streamed from a file with pread (rewound
 * for each try) and signed as UNSIGNED-PAYLOAD; instead of a total timeout,
 * one that moves under 16 KiB/s for the timeout's length is given up.
 */
#include "io/remote.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

struct sink {
	char *p;
	size_t len, cap;
	bool grow;   /* a growable buffer (listings, error bodies) */
	bool nobody; /* HEAD: Content-Length without a body */
	bool over;   /* more bytes came than fit */
	struct stk__answer a;
	struct stk__upsrc *up; /* PUT: the body's source, rewound before each try */
	/* a ranged GET (p is the caller's buffer of cap bytes): its answer is
	 * checked against the object indexed (etag, size) at the end of the
	 * headers; a 200 (the whole object) gives the range from off */
	bool ranged, enough;
	const char *etag;
	uint64_t size, off, seen;
	int verdict;
	char vwhy[240];
};

static size_t sink_write(char *ptr, size_t size, size_t n, void *arg)
{
	struct sink *s = arg;
	size_t l = size * n, at = 0;
	if (s->ranged) {
		if (s->a.status != 200 && s->a.status != 206)
			return l; /* an error's body: dropped */
		if (s->verdict)
			return 0;
		uint64_t pos = (s->a.status == 206 ? s->off : 0) + s->seen;
		s->seen += l;
		if (pos + l <= s->off)
			return l; /* a 200: before the range */
		at = pos < s->off ? (size_t)(s->off - pos) : 0;
		if (s->a.status == 200 && s->len + (l - at) >= s->cap) {
			memcpy(s->p + s->len, ptr + at, s->cap - s->len);
			s->len = s->cap;
			s->enough = true; /* the range is in: the rest is not needed */
			return 0;
		}
		ptr += at;
		l -= at;
	}
	if (s->len + l > s->cap) {
		if (!s->grow) {
			s->over = true;
			return 0;
		}
		size_t cap = s->cap ? s->cap * 2 : 65536;
		while (cap < s->len + l)
			cap *= 2;
		char *p = realloc(s->p, cap + 1);
		if (!p)
			return 0;
		s->p = p;
		s->cap = cap;
	}
	memcpy(s->p + s->len, ptr, l);
	s->len += l;
	return l + at;
}

static size_t sink_header(char *ptr, size_t size, size_t n, void *arg)
{
	struct sink *s = arg;
	size_t l = size * n;
	if (stk__remote_answer_header(&s->a, ptr, l) && s->ranged &&
	    (s->a.status == 200 || s->a.status == 206))
		s->verdict = stk__remote_verify(&s->a, s->etag, s->size, s->off, s->vwhy,
						sizeof(s->vwhy));
	return l;
}

/* The S3 error's <Code> and <Message>, if the body has them. */
static void s3_error(const struct sink *s, char *out, size_t len)
{
	out[0] = 0;
	if (!s->grow || !s->p || !s->len)
		return;
	s->p[s->len] = 0;
	const char *c = strstr(s->p, "<Code>"), *m = strstr(s->p, "<Message>");
	const char *ce = c ? strstr(c, "</Code>") : NULL, *me = m ? strstr(m, "</Message>") : NULL;
	if (c && ce)
		snprintf(out, len, " %.*s%s%.*s", (int)(ce - c - 6), c + 6, m && me ? ": " : "",
			 m && me ? (int)(me - m - 9) : 0, m && me ? m + 9 : "");
}

static void sleep_ns(uint64_t ns)
{
	struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000ull),
			      .tv_nsec = (long)(ns % 1000000000ull)};
	nanosleep(&ts, NULL);
}

/* One request with retries: what perform gives, classified.  The sink is
 * reset before each try. */
static int perform(struct stk__remote *r, CURL *h, struct sink *s, const char *what,
		   uint64_t want, char *err, size_t errlen)
{
	uint64_t rng = stk__now_ns() ^ (uintptr_t)s, first = stk__now_ns(), wait;
	char why[256], code[512];
	for (unsigned attempt = 0;; attempt++) {
		s->len = 0;
		if (s->up)
			s->up->off = 0;
		s->over = s->enough = false;
		memset(&s->a, 0, sizeof(s->a));
		s->seen = 0;
		s->verdict = 0;
		uint64_t t0 = stk__now_ns();
		CURLcode cc = curl_easy_perform(h);
		long status = 0;
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
		atomic_fetch_add(&r->c.requests, 1);
		stk_hist_add(r->h_lat, stk__now_ns() - t0);
		if (cc == CURLE_WRITE_ERROR && s->enough)
			cc = CURLE_OK; /* a 200 stopped once the range was in */
		bool short_body = (status == 200 || status == 206) && !s->enough &&
				  ((s->a.has_clen && !s->nobody && !s->ranged && s->len < s->a.clen) ||
				   (want && s->len < want));
		if (s->over && status == 206)
			short_body = false; /* the server sent more than asked: refused below */
		if (short_body)
			atomic_fetch_add(&r->c.short_bodies, 1);
		int rc;
		if (s->verdict) { /* not the object's bytes, or another version's */
			snprintf(why, sizeof(why), "%s", s->vwhy);
			rc = s->verdict;
		} else if (s->over && status == 206) {
			snprintf(why, sizeof(why), "HTTP 206 with more bytes than the range asked for");
			rc = 1;
		} else {
			rc = stk__remote_classify(r, h, cc, status, short_body, why, sizeof(why));
		}
		if (rc <= 0) {
			if (rc == 0) {
				atomic_fetch_add(&r->c.bytes, s->len);
				return 0;
			}
			atomic_fetch_add(&r->c.failed, 1);
			s3_error(s, code, sizeof(code));
			stk__remote_region_hint(r, s->a.region, code, sizeof(code));
			if (rc == -ESTALE)
				return stk__errf(err, errlen, rc, "%s: %s", what, why);
			return stk__errf(err, errlen, rc, "%s: %s%s (credentials: %s)", what, why, code,
					 r->cred_source);
		}
		if (!stk__remote_retry(r, h, first, attempt + 1, &rng, &wait)) {
			atomic_fetch_add(&r->c.failed, 1);
			return stk__errf(err, errlen, cc == CURLE_OPERATION_TIMEDOUT ? -ETIME
					 : cc == CURLE_COULDNT_CONNECT ? -ECONNREFUSED : -EIO,
					 "%s: %s, after %u tries in %.1f s", what, why, attempt + 1,
					 (double)(stk__now_ns() - first) / 1e9);
		}
		if (stk__remote_garbled(h, cc)) /* not on that connection again */
			stk__remote_fresh(h);
		atomic_fetch_add(&r->c.retries, 1);
		atomic_fetch_add(&r->c.retrying, 1);
		sleep_ns(wait);
		atomic_fetch_sub(&r->c.retrying, 1);
	}
}

/* h sends hdrs and takes its answer into s (its body too, unless s->nobody). */
static void to_sink(CURL *h, struct curl_slist *hdrs, struct sink *s)
{
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	if (!s->nobody) {
		curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, sink_write);
		curl_easy_setopt(h, CURLOPT_WRITEDATA, s);
	}
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, sink_header);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, s);
}

/* Sends what h is set up for, with hdrs (then freed), the answer into s
 * through perform's tries; rc: an error of the set-up, which sends nothing. */
static int request(struct stk__remote *r, CURL *h, struct curl_slist *hdrs, struct sink *s,
		   const char *what, uint64_t want, int rc, char *err, size_t errlen)
{
	to_sink(h, hdrs, s);
	if (!rc)
		rc = perform(r, h, s, what, want, err, errlen);
	curl_slist_free_all(hdrs);
	return rc;
}

int stk__remote_get(struct stk__remote *r, CURL *h, const char *rel, const char *etag,
		    uint64_t size, void *buf, size_t len, uint64_t off, bool *keep, char *err,
		    size_t errlen)
{
	if (keep)
		*keep = false;
	struct curl_slist *hdrs = NULL;
	char range[96], im[128], what[2048];
	snprintf(what, sizeof(what), "%s/%s", r->root, rel);
	if (!len)
		return 0;
	int rc = stk__remote_easy(r, h, rel, &hdrs);
	snprintf(range, sizeof(range), "%llu-%llu", (unsigned long long)off,
		 (unsigned long long)(off + len - 1));
	curl_easy_setopt(h, CURLOPT_RANGE, range);
	if (etag && etag[0]) {
		snprintf(im, sizeof(im), "If-Match: %s", etag);
		struct curl_slist *n = curl_slist_append(hdrs, im);
		if (n)
			hdrs = n;
	}
	struct sink s = {.p = buf, .cap = len, .ranged = true, .etag = etag ? etag : "",
			 .size = size, .off = off};
	rc = request(r, h, hdrs, &s, what, len, rc, err, errlen);
	if (!rc && s.len < len)
		rc = stk__errf(err, errlen, STK_ESHORT, "%s: %zu bytes at offset %llu asked, %zu came",
			       what, len, (unsigned long long)off, s.len);
	if (!rc && keep && etag && etag[0])
		*keep = stk__remote_keepable(&s.a, etag);
	return rc;
}

int stk__remote_head(struct stk__remote *r, CURL *h, const char *rel, uint64_t *size,
		     char *etag, size_t etaglen, char *err, size_t errlen)
{
	struct curl_slist *hdrs = NULL;
	char what[2048];
	snprintf(what, sizeof(what), "%s/%s", r->root, rel);
	int rc = stk__remote_easy(r, h, rel, &hdrs);
	curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
	struct sink s = {.grow = true, .nobody = true};
	rc = request(r, h, hdrs, &s, what, 0, rc, err, errlen);
	free(s.p);
	if (!rc && !s.a.has_clen)
		rc = stk__errf(err, errlen, -EPROTO, "%s: no Content-Length in the answer to HEAD", what);
	if (!rc) {
		*size = s.a.clen;
		snprintf(etag, etaglen, "%s", s.a.etag);
	}
	return rc;
}

void stk__remote_head_all(struct stk__remote *r, struct stk__robj *objs, size_t n,
			  unsigned depth)
{
	struct slot {
		CURL *h;
		struct curl_slist *hdrs;
		struct sink s;
		struct stk__robj *o;
		uint64_t t0;
	} *sl = calloc(depth, sizeof(*sl));
	CURLM *m = curl_multi_init();
	bool ok = sl && m; /* else every HEAD is left to stk__remote_head */
	if (m)
		curl_multi_setopt(m, CURLMOPT_MAXCONNECTS, (long)depth + 4);
	size_t next = 0;
	unsigned running = 0;
	for (unsigned i = 0; ok && i < depth; i++)
		ok = (sl[i].h = curl_easy_init()) != NULL;
	while (ok && (next < n || running)) {
		for (unsigned i = 0; i < depth && next < n; i++) {
			struct slot *q = &sl[i];
			if (q->o)
				continue;
			q->o = &objs[next++];
			q->hdrs = NULL;
			q->s = (struct sink){.nobody = true};
			if (stk__remote_easy(r, q->h, q->o->rel, &q->hdrs)) {
				curl_slist_free_all(q->hdrs);
				q->o = NULL; /* left to stk__remote_head */
				continue;
			}
			curl_easy_setopt(q->h, CURLOPT_NOBODY, 1L);
			to_sink(q->h, q->hdrs, &q->s);
			curl_easy_setopt(q->h, CURLOPT_PRIVATE, q);
			q->t0 = stk__now_ns();
			if (curl_multi_add_handle(m, q->h) != CURLM_OK) {
				curl_slist_free_all(q->hdrs);
				q->o = NULL;
				continue;
			}
			running++;
		}
		int still, left;
		if (curl_multi_perform(m, &still) != CURLM_OK)
			break;
		CURLMsg *msg;
		while ((msg = curl_multi_info_read(m, &left))) {
			if (msg->msg != CURLMSG_DONE)
				continue;
			struct slot *q;
			long status = 0;
			curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&q);
			curl_easy_getinfo(msg->easy_handle, CURLINFO_RESPONSE_CODE, &status);
			atomic_fetch_add(&r->c.requests, 1);
			stk_hist_add(r->h_lat, stk__now_ns() - q->t0);
			char why[256];
			if (msg->data.result == CURLE_OK && status == 200 && q->s.a.has_clen) {
				q->o->size = q->s.a.clen;
				snprintf(q->o->etag, sizeof(q->o->etag), "%s", q->s.a.etag);
				q->o->headed = true;
			} else if (stk__remote_classify(r, q->h, msg->data.result, status, false,
							why, sizeof(why)) > 0) {
				/* the worker's stk__remote_head is its next try */
				atomic_fetch_add(&r->c.retries, 1);
			}
			curl_multi_remove_handle(m, q->h);
			curl_slist_free_all(q->hdrs);
			q->o = NULL;
			running--;
		}
		if (running)
			curl_multi_poll(m, NULL, 0, 100, NULL);
	}
	for (unsigned i = 0; sl && i < depth; i++) {
		if (sl[i].o) {
			curl_multi_remove_handle(m, sl[i].h);
			curl_slist_free_all(sl[i].hdrs);
		}
		if (sl[i].h)
			curl_easy_cleanup(sl[i].h);
	}
	if (m)
		curl_multi_cleanup(m);
	free(sl);
}

/* XML text between <tag> and </tag> from *at on, unescaped into out; moves *at. */
static bool xml_take(const char **at, const char *end, const char *tag, char *out, size_t len)
{
	char open[64], close[64];
	snprintf(open, sizeof(open), "<%s>", tag);
	snprintf(close, sizeof(close), "</%s>", tag);
	const char *a = strstr(*at, open);
	if (!a || a >= end)
		return false;
	a += strlen(open);
	const char *b = strstr(a, close);
	if (!b || b > end)
		return false;
	size_t o = 0;
	static const struct { const char *e; char c; } ents[] = {
		{"&quot;", '"'}, {"&#34;", '"'}, {"&amp;", '&'}, {"&lt;", '<'},
		{"&gt;", '>'},   {"&apos;", '\''}, {"&#39;", '\''}};
	for (const char *p = a; p < b && o + 1 < len;) {
		bool done = false;
		for (size_t i = 0; *p == '&' && i < STK_ARRAY_SIZE(ents); i++) {
			size_t el = strlen(ents[i].e);
			if ((size_t)(b - p) >= el && !strncmp(p, ents[i].e, el)) {
				out[o++] = ents[i].c;
				p += el;
				done = true;
				break;
			}
		}
		if (!done)
			out[o++] = *p++;
	}
	out[o] = 0;
	*at = b + strlen(close);
	return true;
}

static int add_obj(struct stk__remote *r, size_t *cap, const char *rel, uint64_t size,
		   const char *etag)
{
	if (r->nobjs == *cap) {
		size_t c = *cap ? *cap * 2 : 256;
		struct stk__robj *o = realloc(r->objs, c * sizeof(*o));
		if (!o)
			return -ENOMEM;
		r->objs = o;
		*cap = c;
	}
	struct stk__robj *o = &r->objs[r->nobjs];
	memset(o, 0, sizeof(*o));
	if (!(o->rel = strdup(rel)))
		return -ENOMEM;
	o->size = size;
	snprintf(o->etag, sizeof(o->etag), "%s", etag);
	r->nobjs++;
	return 0;
}

int stk__remote_list(struct stk__remote *r, char *err, size_t errlen)
{
	CURL *h = curl_easy_init();
	if (!h)
		return stk__errf(err, errlen, -ENOMEM, "out of memory");
	char token[2048] = "", enc_prefix[2048], enc_token[4096], url_q[8192], what[1700];
	stk__remote_url_encode(r->list_prefix, enc_prefix, sizeof(enc_prefix), false);
	snprintf(what, sizeof(what), "s3://%s/%s (listing)", r->bucket, r->list_prefix);
	size_t cap = r->nobjs;
	int rc = 0;
	struct sink s = {.grow = true};
	do {
		struct curl_slist *hdrs = NULL;
		if ((rc = stk__remote_easy(r, h, "", &hdrs)))
			break;
		/* the bucket's URL: base without the key folder */
		char bucket_url[1200];
		if (r->endpoint[0])
			snprintf(bucket_url, sizeof(bucket_url), "%s/%s", r->endpoint, r->bucket);
		else
			snprintf(bucket_url, sizeof(bucket_url), "https://%s.s3.%s.amazonaws.com/",
				 r->bucket, r->region);
		/* query parameters in SigV4's canonical (sorted, encoded) order */
		stk__remote_url_encode(token, enc_token, sizeof(enc_token), false);
		snprintf(url_q, sizeof(url_q), "%s?%s%s%slist-type=2&prefix=%s", bucket_url,
			 token[0] ? "continuation-token=" : "", token[0] ? enc_token : "",
			 token[0] ? "&" : "", enc_prefix);
		curl_easy_setopt(h, CURLOPT_URL, url_q);
		rc = request(r, h, hdrs, &s, what, 0, 0, err, errlen);
		if (rc)
			break;
		if (!s.p) {
			rc = stk__errf(err, errlen, -EPROTO, "%s: empty answer", what);
			break;
		}
		s.p[s.len] = 0;
		const char *at = s.p, *end = s.p + s.len;
		char key[1200], etag[96], size[32], trunc[16] = "false";
		size_t dl = strlen(r->key_dir);
		for (;;) {
			const char *c = strstr(at, "<Contents>"), *ce = c ? strstr(c, "</Contents>") : NULL;
			if (!c || !ce)
				break;
			const char *p = c;
			etag[0] = 0;
			if (!xml_take(&p, ce, "Key", key, sizeof(key)) ||
			    !xml_take((p = c, &p), ce, "Size", size, sizeof(size))) {
				rc = stk__errf(err, errlen, -EPROTO, "%s: a <Contents> without Key or Size", what);
				break;
			}
			p = c;
			xml_take(&p, ce, "ETag", etag, sizeof(etag));
			at = ce + 11;
			if (strncmp(key, r->key_dir, dl) || !key[dl])
				continue;
			if ((rc = add_obj(r, &cap, key + dl, strtoull(size, NULL, 10), etag)))
				break;
		}
		if (rc)
			break;
		at = s.p;
		xml_take(&at, end, "IsTruncated", trunc, sizeof(trunc));
		at = s.p;
		token[0] = 0;
		if (!strcmp(trunc, "true") && !xml_take(&at, end, "NextContinuationToken", token,
							 sizeof(token)))
			rc = stk__errf(err, errlen, -EPROTO, "%s: truncated listing without a token", what);
	} while (!rc && token[0]);
	free(s.p);
	curl_easy_cleanup(h);
	if (rc == -ENOMEM && err && !err[0])
		stk__errf(err, errlen, rc, "out of memory");
	if (!rc && r->nobjs > 1)
		qsort(r->objs, r->nobjs, sizeof(*r->objs), stk__robj_cmp);
	return rc;
}

/* --- uploads (stoker pack s3://...) ---------------------------------------- */

static size_t up_read(char *buf, size_t size, size_t n, void *arg)
{
	struct stk__upsrc *u = arg;
	size_t want = size * n;
	if (u->size - u->off < want)
		want = (size_t)(u->size - u->off);
	if (!want)
		return 0;
	if (u->mem) {
		memcpy(buf, (const char *)u->mem + u->off, want);
	} else {
		ssize_t got;
		do
			got = pread(u->fd, buf, want, (off_t)u->off);
		while (got < 0 && errno == EINTR);
		if (got <= 0) { /* the file shrank, or cannot be read */
			u->err = got < 0 ? errno : ENODATA;
			return CURL_READFUNC_ABORT;
		}
		want = (size_t)got;
	}
	u->off += want;
	if (u->progress)
		u->progress(u->ctx, u->off, u->size);
	return want;
}

/* curl rewinds a body it must send again (a reused connection closed). */
static int up_seek(void *arg, curl_off_t off, int origin)
{
	struct stk__upsrc *u = arg;
	if (origin != SEEK_SET || off < 0 || (uint64_t)off > u->size)
		return CURL_SEEKFUNC_CANTSEEK;
	u->off = (uint64_t)off;
	return CURL_SEEKFUNC_OK;
}

int stk__remote_put(struct stk__remote *r, CURL *h, const char *rel, struct stk__upsrc *src,
		    char *etag, size_t etaglen, char *err, size_t errlen)
{
	struct curl_slist *hdrs = NULL, *n;
	char what[2048];
	snprintf(what, sizeof(what), "%s/%s", r->root, rel);
	int rc = stk__remote_easy(r, h, rel, &hdrs);
	/* AWS wants the payload's hash signed; streaming a shard, it is not known
	 * before the last byte: S3's UNSIGNED-PAYLOAD, as the AWS CLI sends. */
	if (!rc && !(n = curl_slist_append(hdrs, "x-amz-content-sha256: UNSIGNED-PAYLOAD")))
		rc = -ENOMEM;
	else if (!rc)
		hdrs = n;
	curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
	curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, (curl_off_t)src->size);
	curl_easy_setopt(h, CURLOPT_READFUNCTION, up_read);
	curl_easy_setopt(h, CURLOPT_READDATA, src);
	curl_easy_setopt(h, CURLOPT_SEEKFUNCTION, up_seek);
	curl_easy_setopt(h, CURLOPT_SEEKDATA, src);
	curl_easy_setopt(h, CURLOPT_UPLOAD_BUFFERSIZE, 1L << 20);
	/* a 1 GiB shard on a slow link outlasts any total timeout: instead, one
	 * that moves under 16 KiB/s for the timeout's length is given up */
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 0L);
	curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 16384L);
	curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, (r->timeout_ms + 999) / 1000);
	struct sink s = {.grow = true, .up = src};
	src->err = 0;
	rc = request(r, h, hdrs, &s, what, 0, rc, err, errlen);
	free(s.p);
	if (src->err) /* the local file failed us, not the store */
		return stk__errf(err, errlen, -src->err, "%s: reading the file to upload: %s", what,
				 src->err == ENODATA ? "it shrank while uploading" : strerror(src->err));
	if (!rc && !s.a.etag[0])
		rc = stk__errf(err, errlen, -EPROTO, "%s: no ETag in the answer to PUT", what);
	if (!rc)
		snprintf(etag, etaglen, "%s", s.a.etag);
	return rc;
}

int stk__remote_check(struct stk__remote *r, char *err, size_t errlen)
{
	CURL *h = curl_easy_init();
	if (!h)
		return stk__errf(err, errlen, -ENOMEM, "out of memory");
	struct curl_slist *hdrs = NULL;
	char enc[2048], url[4096], what[1400];
	snprintf(what, sizeof(what), "s3://%s/%s", r->bucket, r->key_dir);
	int rc = stk__remote_easy(r, h, "", &hdrs);
	stk__remote_url_encode(r->key_dir, enc, sizeof(enc), false);
	if (r->endpoint[0])
		snprintf(url, sizeof(url), "%s/%s?list-type=2&max-keys=1&prefix=%s", r->endpoint,
			 r->bucket, enc);
	else
		snprintf(url, sizeof(url), "https://%s.s3.%s.amazonaws.com/?list-type=2&max-keys=1"
			 "&prefix=%s", r->bucket, r->region, enc);
	curl_easy_setopt(h, CURLOPT_URL, url);
	struct sink s = {.grow = true};
	rc = request(r, h, hdrs, &s, what, 0, rc, err, errlen);
	free(s.p);
	curl_easy_cleanup(h);
	return rc;
}
