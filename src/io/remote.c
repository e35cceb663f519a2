/*
 * io/remote.c — where remote objects are and how one is asked for.
 *
 * URLs: s3://BUCKET/DIR/ (every .tar under it), s3://BUCKET/DIR/PATTERN (a
 * glob, or {A..B} numbers as WebDataset writes them), s3://BUCKET/DIR/X.tar,
 * and http(s)://HOST/DIR/PATTERN or one shard's URL.  S3 requests go to
 * AWS_ENDPOINT_URL (path-style: ENDPOINT/BUCKET/KEY, as MinIO, SeaweedFS and
 * Ceph want) or else to AWS's virtual-hosted https://BUCKET.s3.REGION.
 * amazonaws.com/KEY, signed by libcurl (CURLOPT_AWS_SIGV4) with the
 * credentials io/rcred.c finds.
 *
 * Every request has a connect timeout and a total timeout; a 5xx, a 429, a
 * SlowDown, a reset or a body shorter than its Content-Length/Content-Range
 * is tried again after a capped exponential backoff with jitter (AWS's
 * advice), or the server's Retry-After when longer, for a time (60 s: an
 * outage the AWS SDKs and rclone ride out) and up to max_attempts tries
 * (no cap by default), each retry counted: the rule (stk__remote_classify,
 * stk__remote_retry) is here, for the blocking requests of io/rblock.c and
 * the read engine of io/http.c.  The time-outs, tries and retry time are
 * options (remote_timeout, remote_connect_timeout, remote_tries,
 * remote_retry_time); STOKER_REMOTE_TIMEOUT_MS,
 * STOKER_REMOTE_CONNECT_TIMEOUT_MS, STOKER_REMOTE_TRIES and
 * STOKER_REMOTE_RETRY_MS, when set, override them (a job whose launcher
 * cannot be changed).
 */
#include "io/remote.h"

#include <ctype.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init_once(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
}

bool stk__remote_is_url(const char *path)
{
	return path && (!strncmp(path, "s3://", 5) || !strncmp(path, "http://", 7) ||
			!strncmp(path, "https://", 8));
}

static long env_long(const char *name, long def, long min)
{
	const char *v = getenv(name);
	char *end;
	if (!v || !*v)
		return def;
	long x = strtol(v, &end, 10);
	return *end || x < min ? def : x;
}

/* Splits "DIR/LAST" of path: a pattern or one .tar in LAST, else all of it
 * is a folder. */
static void split_last(const char *path, char *dir, size_t dlen, char *last, size_t llen)
{
	const char *slash = strrchr(path, '/');
	const char *l = slash ? slash + 1 : path;
	size_t n = strlen(l);
	bool is_last = strpbrk(l, "*?[{") || (n > 4 && !strcmp(l + n - 4, ".tar"));
	if (!is_last) {
		snprintf(dir, dlen, "%s%s", path, *path && path[strlen(path) - 1] != '/' ? "/" : "");
		last[0] = 0;
		return;
	}
	snprintf(dir, dlen, "%.*s", slash ? (int)(l - path) : 0, path);
	snprintf(last, llen, "%s", l);
}

static int create(struct stk__remote **out, const char *url, bool folder_ok, char *err,
		  size_t errlen)
{
	*out = NULL;
	pthread_once(&curl_once, curl_init_once);
	struct stk__remote *r = calloc(1, sizeof(*r));
	if (!r || stk_hist_create(&r->h_lat)) {
		free(r);
		return stk__errf(err, errlen, -ENOMEM, "out of memory");
	}
	pthread_mutex_init(&r->fail_mu, NULL);
	r->timeout_ms = env_long("STOKER_REMOTE_TIMEOUT_MS", 30000, 1);
	r->connect_timeout_ms = env_long("STOKER_REMOTE_CONNECT_TIMEOUT_MS", 5000, 1);
	r->max_attempts = (unsigned)env_long("STOKER_REMOTE_TRIES", (long)UINT_MAX / 2, 1);
	r->retry_ns = (uint64_t)env_long("STOKER_REMOTE_RETRY_MS", 60000, 1) * 1000000ull;
	r->backoff_base_ns = 50 * 1000000ull;
	r->backoff_cap_ns = 2000 * 1000000ull;
	char dir[768], last[512];
	if (!strncmp(url, "s3://", 5)) {
		r->s3 = true;
		const char *b = url + 5, *slash = strchr(b, '/');
		size_t bl = slash ? (size_t)(slash - b) : strlen(b);
		if (!bl || bl >= sizeof(r->bucket)) {
			stk__remote_destroy(r);
			return stk__errf(err, errlen, -EINVAL, "%s: no bucket name after s3://", url);
		}
		snprintf(r->bucket, sizeof(r->bucket), "%.*s", (int)bl, b);
		split_last(slash ? slash + 1 : "", dir, sizeof(dir), last, sizeof(last));
		snprintf(r->key_dir, sizeof(r->key_dir), "%s", dir);
		snprintf(r->pattern, sizeof(r->pattern), "%s", last);
		/* list only what can match: the pattern's literal start */
		size_t lit = strcspn(last, "*?[{");
		snprintf(r->list_prefix, sizeof(r->list_prefix), "%s%.*s", dir, (int)lit, last);
		stk__remote_find_credentials(r);
		size_t dl = strlen(dir);
		snprintf(r->root, sizeof(r->root), "s3://%s%s%.*s", r->bucket, dl ? "/" : "",
			 dl ? (int)dl - 1 : 0, dir);
		/* the key's path as SigV4 canonicalises it: each segment encoded to
		 * RFC 3986's unreserved set (a space, a '+', non-ASCII), which
		 * libcurl signs as it is given */
		char enc[sizeof(dir) * 3];
		stk__remote_url_encode(dir, enc, sizeof(enc), true);
		int n = r->endpoint[0]
				? snprintf(r->base, sizeof(r->base), "%s/%s/%s", r->endpoint, r->bucket, enc)
				: snprintf(r->base, sizeof(r->base), "https://%s.s3.%s.amazonaws.com/%s",
					   r->bucket, r->region, enc);
		if (n < 0 || (size_t)n >= sizeof(r->base)) {
			stk__remote_destroy(r);
			return stk__errf(err, errlen, -ENAMETOOLONG, "%s: the key prefix is too long "
					 "once encoded for the URL", url);
		}
		snprintf(r->sigv4, sizeof(r->sigv4), "aws:amz:%s:s3", r->region);
		snprintf(r->token_hdr, sizeof(r->token_hdr), "x-amz-security-token: ");
	} else {
		const char *host = strstr(url, "://") + 3, *path = strchr(host, '/');
		if (!path || path == host) {
			stk__remote_destroy(r);
			return stk__errf(err, errlen, -EINVAL, "%s: no shard named after the host", url);
		}
		split_last(path + 1, dir, sizeof(dir), last, sizeof(last));
		snprintf(r->pattern, sizeof(r->pattern), "%s", last);
		if (!last[0] && !folder_ok) {
			stk__remote_destroy(r);
			return stk__errf(err, errlen, -EINVAL, "%s: an HTTP source names its shards: one "
					 ".tar URL or a pattern such as shard-{000000..000099}.tar", url);
		}
		snprintf(r->base, sizeof(r->base), "%.*s%s", (int)(path + 1 - url), url, dir);
		snprintf(r->root, sizeof(r->root), "%.*s", (int)strlen(r->base) - 1, r->base);
		/* a user:password@ stays in base (curl's), never in the root that
		 * messages, stats and metrics show */
		char *auth = strstr(r->root, "://") + 3, *at = strchr(auth, '@'),
		     *sl = strchr(auth, '/');
		if (at && (!sl || at < sl))
			memmove(auth, at + 1, strlen(at + 1) + 1);
		r->anonymous = true;
		snprintf(r->cred_source, sizeof(r->cred_source), "none (%s)",
			 strncmp(url, "https:", 6) ? "plain HTTP" : "HTTPS, anonymous");
	}
	int rc = stk__remote_find_ca(r, url, err, errlen);
	if (rc) {
		stk__remote_destroy(r);
		return rc;
	}
	*out = r;
	return 0;
}

int stk__remote_create(struct stk__remote **out, const char *url, char *err, size_t errlen)
{
	return create(out, url, false, err, errlen);
}

int stk__remote_create_list(struct stk__remote **out, const char *root_url, const char *list,
			    char *err, size_t errlen)
{
	int rc = create(out, root_url, true, err, errlen);
	if (!rc)
		snprintf((*out)->list, sizeof((*out)->list), "%s", list);
	return rc;
}

void stk__remote_limits(struct stk__remote *r, uint64_t timeout_ns, uint64_t connect_ns,
			unsigned tries, uint64_t retry_ns)
{
	if (retry_ns && env_long("STOKER_REMOTE_RETRY_MS", 0, 1) == 0)
		r->retry_ns = retry_ns;
	/* a variable create took (set, a number in range) wins over the option */
	if (timeout_ns && env_long("STOKER_REMOTE_TIMEOUT_MS", 0, 1) == 0)
		r->timeout_ms = (long)((timeout_ns + 999999) / 1000000);
	if (connect_ns && env_long("STOKER_REMOTE_CONNECT_TIMEOUT_MS", 0, 1) == 0)
		r->connect_timeout_ms = (long)((connect_ns + 999999) / 1000000);
	if (tries && env_long("STOKER_REMOTE_TRIES", 0, 1) == 0)
		r->max_attempts = tries;
}

void stk__remote_destroy(struct stk__remote *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->nobjs; i++)
		free(r->objs[i].rel);
	free(r->objs);
	stk__rcache_close(r->cache);
	stk_hist_destroy(r->h_lat);
	if (r->session_token) {
		memset(r->session_token, 0, strlen(r->session_token));
		free(r->session_token);
	}
	memset(r->secret_key, 0, sizeof(r->secret_key));
	if (r->fail_why) /* io/rfail.c's records */
		for (size_t i = 0; i < r->nobjs; i++)
			free(r->fail_why[i]);
	free(r->fail_why);
	pthread_mutex_destroy(&r->fail_mu);
	free(r);
}

int stk__robj_cmp(const void *a, const void *b)
{
	return strcmp(((const struct stk__robj *)a)->rel, ((const struct stk__robj *)b)->rel);
}

const struct stk__robj *stk__remote_find(const struct stk__remote *r, const char *rel)
{
	struct stk__robj key = {.rel = (char *)rel};
	return r->nobjs ? bsearch(&key, r->objs, r->nobjs, sizeof(key), stk__robj_cmp) : NULL;
}

void stk__remote_url_encode(const char *s, char *out, size_t len, bool keep_slash)
{
	size_t o = 0;
	for (; *s && o + 4 < len; s++) {
		unsigned char c = (unsigned char)*s;
		if (isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' ||
		    (keep_slash && c == '/'))
			out[o++] = (char)c;
		else
			o += (size_t)snprintf(out + o, len - o, "%%%02X", c);
	}
	out[o] = 0;
}

int stk__remote_easy(const struct stk__remote *r, CURL *h, const char *rel,
		     struct curl_slist **hdrs)
{
	char url[4096], enc[2048];
	stk__remote_url_encode(rel, enc, sizeof(enc), true);
	snprintf(url, sizeof(url), "%s%s", r->base, enc);
	curl_easy_reset(h);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, r->connect_timeout_ms);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, r->timeout_ms);
	curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
	curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
	curl_easy_setopt(h, CURLOPT_PIPEWAIT, 1L);
	if (r->ca_file[0])
		curl_easy_setopt(h, CURLOPT_CAINFO, r->ca_file);
	if (r->ca_dir[0])
		curl_easy_setopt(h, CURLOPT_CAPATH, r->ca_dir);
	if (!r->s3) { /* a redirect is followed, as curl -L does; S3's signed ones are not */
		curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
		curl_easy_setopt(h, CURLOPT_MAXREDIRS, 8L);
	}
	curl_easy_setopt(h, CURLOPT_USERAGENT, "stoker/" STK__STR(STK_VERSION_MAJOR) "." STK__STR(STK_VERSION_MINOR));
	if (r->s3 && !r->anonymous) {
		curl_easy_setopt(h, CURLOPT_AWS_SIGV4, r->sigv4);
		curl_easy_setopt(h, CURLOPT_USERNAME, r->access_key);
		curl_easy_setopt(h, CURLOPT_PASSWORD, r->secret_key);
		if (r->session_token) {
			char *line = malloc(strlen(r->token_hdr) + strlen(r->session_token) + 1);
			if (!line)
				return -ENOMEM;
			memcpy(line, r->token_hdr, strlen(r->token_hdr));
			memcpy(line + strlen(r->token_hdr), r->session_token,
			       strlen(r->session_token) + 1);
			struct curl_slist *n = curl_slist_append(*hdrs, line);
			memset(line, 0, strlen(line));
			free(line);
			if (!n)
				return -ENOMEM;
			*hdrs = n;
		}
	}
	return 0;
}

static bool transient(CURLcode cc)
{
	switch (cc) {
	case CURLE_OPERATION_TIMEDOUT:
	case CURLE_COULDNT_CONNECT:
	case CURLE_RECV_ERROR:
	case CURLE_SEND_ERROR:
	case CURLE_GOT_NOTHING:
	case CURLE_PARTIAL_FILE:
	case CURLE_HTTP2:
	case CURLE_HTTP2_STREAM:
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_COULDNT_RESOLVE_HOST:
		return true;
	default:
		return false;
	}
}

/* " (to http://host:port)" of h's request, or " (host NAME)" (dns), into
 * out; "" when not known.  Never the URL's user:password. */
static void server_of(CURL *h, bool dns, char *out, size_t len)
{
	char *url = NULL, *scheme = NULL, *host = NULL, *port = NULL;
	CURLU *u = h ? curl_url() : NULL;
	out[0] = 0;
	if (u && curl_easy_getinfo(h, CURLINFO_EFFECTIVE_URL, &url) == CURLE_OK && url &&
	    curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK &&
	    !curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) &&
	    !curl_url_get(u, CURLUPART_HOST, &host, 0) &&
	    !curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT)) {
		if (dns)
			snprintf(out, len, " (host %s)", host);
		else
			snprintf(out, len, " (to %s://%s:%s)", scheme, host, port);
	}
	curl_free(scheme);
	curl_free(host);
	curl_free(port);
	curl_url_cleanup(u);
}

/* A redirect not followed: its status (0: too many of them) and where it
 * pointed, into why. */
static void redirect_why(CURL *h, long status, char *why, size_t len)
{
	char *to = NULL;
	if (h)
		curl_easy_getinfo(h, CURLINFO_REDIRECT_URL, &to);
	size_t l = strlen(why);
	if (status)
		l = (size_t)snprintf(why, len, "HTTP %ld", status);
	if (l < len && to)
		snprintf(why + l, len - l, " to %.400s%s", to, status ? " (not followed: the data's "
			 "URL or, s3://, its endpoint or region is another)" : "");
}

bool stk__remote_garbled(CURL *h, CURLcode cc)
{
	long made = 1;
	return h && (cc == CURLE_UNSUPPORTED_PROTOCOL || cc == CURLE_WEIRD_SERVER_REPLY) &&
	       curl_easy_getinfo(h, CURLINFO_NUM_CONNECTS, &made) == CURLE_OK && made == 0;
}

void stk__remote_fresh(CURL *h)
{
	curl_easy_setopt(h, CURLOPT_FRESH_CONNECT, 1L);
	curl_easy_setopt(h, CURLOPT_FORBID_REUSE, 1L);
}

int stk__remote_classify(struct stk__remote *r, CURL *h, CURLcode cc, long status,
			 bool short_body, char *why, size_t len)
{
	if (status > 0 && !atomic_load_explicit(&r->answered, memory_order_relaxed))
		atomic_store_explicit(&r->answered, true, memory_order_relaxed);
	if (stk__remote_garbled(h, cc)) {
		snprintf(why, len, "%s: a garbled answer on a reused connection",
			 curl_easy_strerror(cc));
		return 1;
	}
	if (cc == CURLE_PEER_FAILED_VERIFICATION) { /* never retried, never skipped */
		snprintf(why, len, "the server's TLS certificate is not trusted, or not for this "
			 "host (trusted: %s; name a CA file with CURL_CA_BUNDLE or SSL_CERT_FILE)",
			 r->ca_source);
		return -EACCES;
	}
	if (cc == CURLE_SSL_CACERT_BADFILE) {
		snprintf(why, len, "the CA certificates cannot be used (%s)", r->ca_source);
		return -EINVAL;
	}
	if (cc != CURLE_OK) {
		char at[600] = "";
		if (cc == CURLE_COULDNT_CONNECT || cc == CURLE_COULDNT_RESOLVE_HOST ||
		    cc == CURLE_SSL_CONNECT_ERROR || cc == CURLE_OPERATION_TIMEDOUT)
			server_of(h, cc == CURLE_COULDNT_RESOLVE_HOST, at, sizeof(at));
		snprintf(why, len, "%s%s", curl_easy_strerror(cc), at);
		if (cc == CURLE_TOO_MANY_REDIRECTS)
			redirect_why(h, 0, why, len);
		/* a host that never resolved or a server that never answered: a
		 * wrong endpoint, not an outage (a minute of tries would only
		 * delay saying so) */
		if ((cc == CURLE_COULDNT_RESOLVE_HOST || cc == CURLE_COULDNT_CONNECT) &&
		    !atomic_load_explicit(&r->answered, memory_order_relaxed)) {
			size_t l = strlen(why);
			if (l < len)
				snprintf(why + l, len - l, ": it never answered (the endpoint, host "
					 "or port?)");
			return cc == CURLE_COULDNT_RESOLVE_HOST ? -EHOSTUNREACH : -ECONNREFUSED;
		}
		if (transient(cc))
			return 1;
		return -EIO;
	}
	if (status >= 300 && status < 400) { /* not followed (s3://), or not to be */
		redirect_why(h, status, why, len);
		return -EIO;
	}
	if (status >= 500 || status == 429) {
		snprintf(why, len, "HTTP %ld%s", status, status == 503 ? " (SlowDown)" : "");
		return 1;
	}
	if (status == 200 || status == 206) {
		if (short_body) {
			snprintf(why, len, "short body: fewer bytes than Content-Length/Content-Range");
			return 1;
		}
		return 0;
	}
	snprintf(why, len, "HTTP %ld", status);
	switch (status) {
	case 404:
		return -ENOENT;
	case 401:
	case 403:
		return -EACCES;
	case 412:
		snprintf(why, len, "HTTP 412 to If-Match: the object changed since it was indexed "
			 "(its ETag differs)");
		return -ESTALE;
	case 416:
		return 0;
	default:
		return -EIO;
	}
}

uint64_t stk__remote_backoff_ns(const struct stk__remote *r, unsigned attempt, uint64_t *rng)
{
	uint64_t cap = r->backoff_base_ns << (attempt < 16 ? attempt : 16);
	if (cap > r->backoff_cap_ns)
		cap = r->backoff_cap_ns;
	*rng = stk__mix64(*rng);
	return cap / 2 + *rng % (cap / 2 + 1); /* "equal jitter": never 0 */
}


bool stk__remote_answer_header(struct stk__answer *a, const char *p, size_t l)
{
	char line[640];
	snprintf(line, sizeof(line), "%.*s", (int)(l < sizeof(line) - 1 ? l : sizeof(line) - 1), p);
	stk__trim(line);
	if (!line[0])
		return true;
	if (!strncmp(line, "HTTP/", 5)) { /* a new response (after a redirect or a 100) */
		const char *sp = strchr(line, ' ');
		memset(a, 0, sizeof(*a));
		a->status = sp ? strtol(sp + 1, NULL, 10) : 0;
	} else if (!strncasecmp(line, "content-range:", 14)) {
		/* "bytes A-B/TOTAL" (TOTAL may be "*") */
		char *q = strstr(line + 14, "bytes"), *end;
		unsigned long long x, y;
		if (q && (x = strtoull(q + 5, &end, 10), *end == '-') &&
		    (y = strtoull(end + 1, &end, 10)) >= x && *end == '/') {
			a->has_range = true;
			a->range_start = x;
			a->range_len = y - x + 1;
			a->range_total = end[1] == '*' ? UINT64_MAX : strtoull(end + 1, NULL, 10);
		}
	} else if (!strncasecmp(line, "content-length:", 15)) {
		a->clen = strtoull(line + 15, NULL, 10);
		a->has_clen = true;
	} else if (!strncasecmp(line, "etag:", 5)) {
		snprintf(a->etag, sizeof(a->etag), "%.90s", line + 5);
		stk__trim(a->etag);
	} else if (!strncasecmp(line, "location:", 9)) {
		snprintf(a->location, sizeof(a->location), "%.500s", line + 9);
		stk__trim(a->location);
	} else if (!strncasecmp(line, "x-amz-bucket-region:", 20)) {
		snprintf(a->region, sizeof(a->region), "%.60s", line + 20);
		stk__trim(a->region);
	}
	return false;
}

/* ETags equal, a weak one's W/ aside (a CDN may mark a GET's weak). */
static bool etag_eq(const char *a, const char *b)
{
	return !strcmp(a + (strncmp(a, "W/", 2) ? 0 : 2), b + (strncmp(b, "W/", 2) ? 0 : 2));
}

int stk__remote_verify(const struct stk__answer *a, const char *etag, uint64_t size,
		       uint64_t off, char *why, size_t len)
{
	if (a->status == 206 && (!a->has_range || a->range_start != off)) {
		snprintf(why, len, "HTTP 206 for another range than asked (from %llu: %s%llu)",
			 (unsigned long long)off, a->has_range ? "got from " : "no Content-Range, ",
			 (unsigned long long)a->range_start);
		return 1;
	}
	if (a->status == 200 && (!a->has_clen || a->clen != size)) {
		/* the whole object would do (a server without Range support);
		 * anything else is someone's page, never the object's bytes */
		snprintf(why, len, "HTTP 200 to a ranged GET with %s%llu bytes, not the object's %llu "
			 "(a proxy's or the server's own page, or no Range support)",
			 a->has_clen ? "" : "no Content-Length, ", (unsigned long long)a->clen,
			 (unsigned long long)size);
		return 1;
	}
	if (etag[0] && a->etag[0] && !etag_eq(etag, a->etag)) {
		snprintf(why, len, "ETag %s, %s when indexed: the object changed since it was "
			 "indexed", a->etag, etag);
		return -ESTALE;
	}
	if (a->status == 206 && a->range_total != UINT64_MAX && a->range_total != size) {
		snprintf(why, len, "the object is %llu bytes, %llu when indexed: it changed since "
			 "it was indexed", (unsigned long long)a->range_total, (unsigned long long)size);
		return -ESTALE;
	}
	if (a->status == 200 && etag[0] && !a->etag[0]) {
		snprintf(why, len, "HTTP 200 to a ranged GET without the object's ETag");
		return 1;
	}
	return 0;
}

bool stk__remote_keepable(const struct stk__answer *a, const char *etag)
{
	return etag_eq(a->etag, etag);
}

bool stk__remote_retry(const struct stk__remote *r, CURL *h, uint64_t t0, unsigned tries,
		       uint64_t *rng, uint64_t *wait_ns)
{
	uint64_t now = stk__now_ns(), end = t0 + r->retry_ns;
	if (tries >= r->max_attempts || now >= end)
		return false;
	uint64_t w = stk__remote_backoff_ns(r, tries, rng);
	curl_off_t after = 0; /* seconds; curl reads both of its forms */
	if (h && curl_easy_getinfo(h, CURLINFO_RETRY_AFTER, &after) == CURLE_OK && after > 0 &&
	    (uint64_t)after * 1000000000ull > w)
		w = (uint64_t)after * 1000000000ull;
	*wait_ns = now + w > end ? end - now : w;
	return true;
}

void stk__remote_region_hint(const struct stk__remote *r, const char *region, char *why,
			     size_t len)
{
	size_t l = strlen(why);
	if (r->s3 && region[0] && strcmp(region, r->region) && l < len)
		snprintf(why + l, len - l, "; the bucket is in region %s, not %s: set AWS_REGION=%s "
			 "(or the profile's region)", region, r->region, region);
}
