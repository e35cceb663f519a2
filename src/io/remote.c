/*
 * io/remote.c — where remote objects are and how one is asked for.
 *
 * URLs: s3://BUCKET/DIR/ (every .tar under it), s3://BUCKET/DIR/PATTERN (a
 * glob, or {A..B} numbers as WebDataset writes them), s3://BUCKET/DIR/X.tar,
 * and http(s)://HOST/DIR/PATTERN or one shard's URL.  S3 requests go to
 * AWS_ENDPOINT_URL (path-style: ENDPOINT/BUCKET/KEY, as MinIO, SeaweedFS and
 * Ceph want) or else to AWS's virtual-hosted https://BUCKET.s3.REGION.
 * amazonaws.com/KEY, signed by libcurl (CURLOPT_AWS_SIGV4).
 *
 * Credentials are looked up the way the AWS CLI does: AWS_ACCESS_KEY_ID /
 * AWS_SECRET_ACCESS_KEY (+ AWS_SESSION_TOKEN) in the environment, then the
 * profile (AWS_PROFILE, else "default") of ~/.aws/credentials
 * (AWS_SHARED_CREDENTIALS_FILE) and ~/.aws/config (AWS_CONFIG_FILE), which
 * may also hold region and endpoint_url; none found (or
 * AWS_NO_SIGN_REQUEST=true): anonymous requests, for public buckets.  Where
 * they came from is kept for error messages; the secret never leaves this
 * struct (no message, log or metric has it; the key id is shown masked).
 *
 * TLS is always verified.  The certificates trusted are the system's, or
 * those named the way curl's and the AWS CLI's users name them:
 * AWS_CA_BUNDLE (s3:// only), CURL_CA_BUNDLE or SSL_CERT_FILE (a file),
 * SSL_CERT_DIR (a folder); libcurl itself reads none of these.  An untrusted
 * certificate fails the request, naming the URL and where the CAs came from.
 *
 * Every request has a connect timeout and a total timeout; a 5xx, a 429, a
 * SlowDown, a reset or a body shorter than its Content-Length/Content-Range
 * is tried again after a capped exponential backoff with full jitter
 * (AWS's advice), up to max_attempts tries, each retry counted.  The
 * time-outs and tries are options (remote_timeout, remote_connect_timeout,
 * remote_tries); STOKER_REMOTE_TIMEOUT_MS, STOKER_REMOTE_CONNECT_TIMEOUT_MS
 * and STOKER_REMOTE_TRIES, when set, override them (a job whose launcher
 * cannot be changed).
 *
 * Uploads (stoker pack s3://..., dataset/upload.c) are PUTs through the same
 * signing and retries, the body streamed from a file with pread (rewound
 * for each try) and signed as UNSIGNED-PAYLOAD; instead of a total timeout,
 * one that moves under 16 KiB/s for the timeout's length is given up.
 */
#include "io/remote.h"

#include <ctype.h>
#include <pthread.h>
#include <stdarg.h>
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

static int fail(char *err, size_t len, int rc, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int fail(char *err, size_t len, int rc, const char *fmt, ...)
{
	if (err && len) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err, len, fmt, ap);
		va_end(ap);
	}
	return rc;
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

static void trim(char *s)
{
	size_t l = strlen(s);
	while (l && isspace((unsigned char)s[l - 1]))
		s[--l] = 0;
	size_t i = 0;
	while (s[i] && isspace((unsigned char)s[i]))
		i++;
	memmove(s, s + i, l - i + 1);
}

/* Looks up key in [section] of an INI file (~/.aws/credentials, config). */
static bool ini_get(const char *path, const char *section, const char *key, char *out,
		    size_t outlen)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return false;
	char line[2048];
	bool in = false, found = false;
	while (!found && fgets(line, sizeof(line), f)) {
		trim(line);
		if (line[0] == '[') {
			char *end = strchr(line, ']');
			if (end)
				*end = 0;
			char *name = line + 1;
			trim(name);
			in = !strcmp(name, section);
			continue;
		}
		char *eq = strchr(line, '=');
		if (!in || !eq || line[0] == '#' || line[0] == ';')
			continue;
		*eq = 0;
		char *k = line, *v = eq + 1;
		trim(k);
		trim(v);
		if (!strcmp(k, key)) {
			snprintf(out, outlen, "%s", v);
			found = true;
		}
	}
	fclose(f);
	return found;
}

static void aws_file(char *out, size_t len, const char *env, const char *name)
{
	const char *v = getenv(env), *home = getenv("HOME");
	if (v && *v)
		snprintf(out, len, "%s", v);
	else
		snprintf(out, len, "%s/.aws/%s", home && *home ? home : "/root", name);
}

static void mask(const char *key, char *out, size_t len)
{
	size_t l = strlen(key);
	snprintf(out, len, "****%s", l > 4 ? key + l - 4 : "");
}

static void find_credentials(struct stk__remote *r)
{
	const char *nosign = getenv("AWS_NO_SIGN_REQUEST");
	const char *profile = getenv("AWS_PROFILE");
	char creds[1024], config[1024], csec[300], tok[4096] = "", m[16];
	if (!profile || !*profile)
		profile = "default";
	aws_file(creds, sizeof(creds), "AWS_SHARED_CREDENTIALS_FILE", "credentials");
	aws_file(config, sizeof(config), "AWS_CONFIG_FILE", "config");
	/* config names profiles "[profile NAME]", except the default one */
	if (!strcmp(profile, "default"))
		snprintf(csec, sizeof(csec), "default");
	else
		snprintf(csec, sizeof(csec), "profile %s", profile);

	const char *reg = getenv("AWS_REGION");
	if (!reg || !*reg)
		reg = getenv("AWS_DEFAULT_REGION");
	if (reg && *reg)
		snprintf(r->region, sizeof(r->region), "%s", reg);
	else if (!ini_get(config, csec, "region", r->region, sizeof(r->region)))
		snprintf(r->region, sizeof(r->region), "us-east-1");
	const char *ep = getenv("AWS_ENDPOINT_URL_S3");
	if (!ep || !*ep)
		ep = getenv("AWS_ENDPOINT_URL");
	if (ep && *ep)
		snprintf(r->endpoint, sizeof(r->endpoint), "%s", ep);
	else
		ini_get(config, csec, "endpoint_url", r->endpoint, sizeof(r->endpoint));
	size_t el = strlen(r->endpoint);
	while (el && r->endpoint[el - 1] == '/')
		r->endpoint[--el] = 0;

	if (nosign && (!strcasecmp(nosign, "true") || !strcmp(nosign, "1"))) {
		r->anonymous = true;
		snprintf(r->cred_source, sizeof(r->cred_source),
			 "anonymous (AWS_NO_SIGN_REQUEST is set)");
		return;
	}
	const char *id = getenv("AWS_ACCESS_KEY_ID"), *sec = getenv("AWS_SECRET_ACCESS_KEY");
	if (id && *id && sec && *sec) {
		snprintf(r->access_key, sizeof(r->access_key), "%s", id);
		snprintf(r->secret_key, sizeof(r->secret_key), "%s", sec);
		const char *t = getenv("AWS_SESSION_TOKEN");
		if (t && *t)
			snprintf(tok, sizeof(tok), "%s", t);
		mask(id, m, sizeof(m));
		snprintf(r->cred_source, sizeof(r->cred_source),
			 "environment (AWS_ACCESS_KEY_ID %s)", m);
	} else if (ini_get(creds, profile, "aws_access_key_id", r->access_key,
			   sizeof(r->access_key)) &&
		   ini_get(creds, profile, "aws_secret_access_key", r->secret_key,
			   sizeof(r->secret_key))) {
		ini_get(creds, profile, "aws_session_token", tok, sizeof(tok));
		mask(r->access_key, m, sizeof(m));
		snprintf(r->cred_source, sizeof(r->cred_source), "profile '%s' of %s (key %s)",
			 profile, creds, m);
	} else if (ini_get(config, csec, "aws_access_key_id", r->access_key,
			   sizeof(r->access_key)) &&
		   ini_get(config, csec, "aws_secret_access_key", r->secret_key,
			   sizeof(r->secret_key))) {
		ini_get(config, csec, "aws_session_token", tok, sizeof(tok));
		mask(r->access_key, m, sizeof(m));
		snprintf(r->cred_source, sizeof(r->cred_source), "profile '%s' of %s (key %s)",
			 profile, config, m);
	} else {
		r->access_key[0] = r->secret_key[0] = 0;
		r->anonymous = true;
		snprintf(r->cred_source, sizeof(r->cred_source),
			 "anonymous (no AWS_ACCESS_KEY_ID, no profile '%s' in %s)", profile, creds);
	}
	if (tok[0])
		r->session_token = strdup(tok);
}

/* The CAs from the environment, checked readable: 0 or <0 with err. */
static int find_ca(struct stk__remote *r, const char *url, char *err, size_t errlen)
{
	const char *files[] = {r->s3 ? "AWS_CA_BUNDLE" : NULL, "CURL_CA_BUNDLE", "SSL_CERT_FILE"};
	snprintf(r->ca_source, sizeof(r->ca_source), "the system's CA certificates");
	for (size_t i = 0; i < STK_ARRAY_SIZE(files); i++) {
		const char *v = files[i] ? getenv(files[i]) : NULL;
		if (!v || !*v)
			continue;
		if (access(v, R_OK))
			return fail(err, errlen, -errno, "%s: %s=%s: cannot read the CA certificates: %s",
				    url, files[i], v, strerror(errno));
		snprintf(r->ca_file, sizeof(r->ca_file), "%s", v);
		snprintf(r->ca_source, sizeof(r->ca_source), "CA certificates from %s=%s", files[i], v);
		break;
	}
	const char *d = getenv("SSL_CERT_DIR");
	if (d && *d) {
		if (access(d, R_OK | X_OK))
			return fail(err, errlen, -errno, "%s: SSL_CERT_DIR=%s: cannot read the CA "
				    "certificates: %s", url, d, strerror(errno));
		snprintf(r->ca_dir, sizeof(r->ca_dir), "%s", d);
		if (!r->ca_file[0])
			snprintf(r->ca_source, sizeof(r->ca_source), "CA certificates from "
				 "SSL_CERT_DIR=%s", d);
	}
	return 0;
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
		return fail(err, errlen, -ENOMEM, "out of memory");
	}
	pthread_mutex_init(&r->fail_mu, NULL);
	r->timeout_ms = env_long("STOKER_REMOTE_TIMEOUT_MS", 30000, 1);
	r->connect_timeout_ms = env_long("STOKER_REMOTE_CONNECT_TIMEOUT_MS", 5000, 1);
	r->max_attempts = (unsigned)env_long("STOKER_REMOTE_TRIES", 6, 1);
	r->backoff_base_ns = 50 * 1000000ull;
	r->backoff_cap_ns = 2000 * 1000000ull;
	char dir[768], last[512];
	if (!strncmp(url, "s3://", 5)) {
		r->s3 = true;
		const char *b = url + 5, *slash = strchr(b, '/');
		size_t bl = slash ? (size_t)(slash - b) : strlen(b);
		if (!bl || bl >= sizeof(r->bucket)) {
			stk__remote_destroy(r);
			return fail(err, errlen, -EINVAL, "%s: no bucket name after s3://", url);
		}
		snprintf(r->bucket, sizeof(r->bucket), "%.*s", (int)bl, b);
		split_last(slash ? slash + 1 : "", dir, sizeof(dir), last, sizeof(last));
		snprintf(r->key_dir, sizeof(r->key_dir), "%s", dir);
		snprintf(r->pattern, sizeof(r->pattern), "%s", last);
		/* list only what can match: the pattern's literal start */
		size_t lit = strcspn(last, "*?[{");
		snprintf(r->list_prefix, sizeof(r->list_prefix), "%s%.*s", dir, (int)lit, last);
		find_credentials(r);
		size_t dl = strlen(dir);
		snprintf(r->root, sizeof(r->root), "s3://%s%s%.*s", r->bucket, dl ? "/" : "",
			 dl ? (int)dl - 1 : 0, dir);
		if (r->endpoint[0])
			snprintf(r->base, sizeof(r->base), "%s/%s/%s", r->endpoint, r->bucket, dir);
		else
			snprintf(r->base, sizeof(r->base), "https://%s.s3.%s.amazonaws.com/%s",
				 r->bucket, r->region, dir);
		snprintf(r->sigv4, sizeof(r->sigv4), "aws:amz:%s:s3", r->region);
		snprintf(r->token_hdr, sizeof(r->token_hdr), "x-amz-security-token: ");
	} else {
		const char *host = strstr(url, "://") + 3, *path = strchr(host, '/');
		if (!path || path == host) {
			stk__remote_destroy(r);
			return fail(err, errlen, -EINVAL, "%s: no shard named after the host", url);
		}
		split_last(path + 1, dir, sizeof(dir), last, sizeof(last));
		snprintf(r->pattern, sizeof(r->pattern), "%s", last);
		if (!last[0] && !folder_ok) {
			stk__remote_destroy(r);
			return fail(err, errlen, -EINVAL, "%s: an HTTP source names its shards: one "
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
	int rc = find_ca(r, url, err, errlen);
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
			unsigned tries)
{
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

static int cmp_obj(const void *a, const void *b)
{
	return strcmp(((const struct stk__robj *)a)->rel, ((const struct stk__robj *)b)->rel);
}

const struct stk__robj *stk__remote_find(const struct stk__remote *r, const char *rel)
{
	struct stk__robj key = {.rel = (char *)rel};
	return r->nobjs ? bsearch(&key, r->objs, r->nobjs, sizeof(key), cmp_obj) : NULL;
}

/* Percent-encodes s into out, '/' kept when keep_slash (S3's canonical URI). */
static void url_encode(const char *s, char *out, size_t len, bool keep_slash)
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
	url_encode(rel, enc, sizeof(enc), true);
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

int stk__remote_classify(const struct stk__remote *r, CURLcode cc, long status, bool short_body,
			 char *why, size_t len)
{
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
		snprintf(why, len, "%s", curl_easy_strerror(cc));
		if (transient(cc))
			return 1;
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
		snprintf(why, len, "HTTP 412: the object changed since it was indexed (ETag)");
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

/* --- blocking requests (the index) ---------------------------------------- */

struct sink {
	char *p;
	size_t len, cap;
	bool grow;   /* a growable buffer (listings, error bodies) */
	bool nobody; /* HEAD: Content-Length without a body */
	bool over;   /* more bytes came than fit */
	char hdr_range[128];
	uint64_t clen;
	bool has_clen;
	char etag[96];
	struct stk__upsrc *up; /* PUT: the body's source, rewound before each try */
};

static size_t sink_write(char *ptr, size_t size, size_t n, void *arg)
{
	struct sink *s = arg;
	size_t l = size * n;
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
	return l;
}

static size_t sink_header(char *ptr, size_t size, size_t n, void *arg)
{
	struct sink *s = arg;
	size_t l = size * n;
	char line[256];
	snprintf(line, sizeof(line), "%.*s", (int)(l < 255 ? l : 255), ptr);
	trim(line);
	if (!strncasecmp(line, "content-range:", 14)) {
		snprintf(s->hdr_range, sizeof(s->hdr_range), "%.100s", line + 14);
		trim(s->hdr_range);
	} else if (!strncasecmp(line, "content-length:", 15)) {
		s->clen = strtoull(line + 15, NULL, 10);
		s->has_clen = true;
	} else if (!strncasecmp(line, "etag:", 5)) {
		snprintf(s->etag, sizeof(s->etag), "%.90s", line + 5);
		trim(s->etag);
	} else if (!strncmp(line, "HTTP/", 5)) {
		s->hdr_range[0] = 0; /* a new response (after a redirect or 100) */
		s->has_clen = false;
		s->etag[0] = 0;
	}
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
	uint64_t rng = stk__now_ns() ^ (uintptr_t)s;
	char why[256], code[512];
	for (unsigned attempt = 0;; attempt++) {
		s->len = 0;
		if (s->up)
			s->up->off = 0;
		s->over = false;
		s->has_clen = false;
		s->hdr_range[0] = 0;
		uint64_t t0 = stk__now_ns();
		CURLcode cc = curl_easy_perform(h);
		long status = 0;
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
		atomic_fetch_add(&r->c.requests, 1);
		stk_hist_add(r->h_lat, stk__now_ns() - t0);
		bool short_body = (status == 200 || status == 206) &&
				  ((s->has_clen && !s->nobody && s->len < s->clen) ||
				   (want && s->len < want));
		if (s->over && status == 206)
			short_body = false; /* the server sent more than asked: refused below */
		if (short_body)
			atomic_fetch_add(&r->c.short_bodies, 1);
		int rc = stk__remote_classify(r, cc, status, short_body, why, sizeof(why));
		if (rc <= 0) {
			if (rc == 0 && s->over && status == 206)
				return fail(err, errlen, -EIO, "%s: the server sent more than the "
					    "range asked for", what);
			if (rc == 0) {
				atomic_fetch_add(&r->c.bytes, s->len);
				return 0;
			}
			atomic_fetch_add(&r->c.failed, 1);
			s3_error(s, code, sizeof(code));
			return fail(err, errlen, rc, "%s: %s%s (credentials: %s)", what, why, code,
				    r->cred_source);
		}
		if (attempt + 1 >= r->max_attempts) {
			atomic_fetch_add(&r->c.failed, 1);
			return fail(err, errlen, cc == CURLE_OPERATION_TIMEDOUT ? -ETIME
						 : cc == CURLE_COULDNT_CONNECT ? -ECONNREFUSED : -EIO,
				    "%s: %s, after %u tries", what, why, attempt + 1);
		}
		atomic_fetch_add(&r->c.retries, 1);
		sleep_ns(stk__remote_backoff_ns(r, attempt + 1, &rng));
	}
}

int stk__remote_get(struct stk__remote *r, CURL *h, const char *rel, const char *etag,
		    void *buf, size_t len, uint64_t off, char *err, size_t errlen)
{
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
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	struct sink s = {.p = buf, .cap = len};
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, sink_write);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &s);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, sink_header);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, &s);
	if (!rc)
		rc = perform(r, h, &s, what, len, err, errlen);
	curl_slist_free_all(hdrs);
	if (!rc && s.len < len)
		rc = fail(err, errlen, STK_ESHORT, "%s: %zu bytes at offset %llu asked, %zu came",
			  what, len, (unsigned long long)off, s.len);
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
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	struct sink s = {.grow = true, .nobody = true};
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, sink_header);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, &s);
	if (!rc)
		rc = perform(r, h, &s, what, 0, err, errlen);
	curl_slist_free_all(hdrs);
	free(s.p);
	if (!rc && !s.has_clen)
		rc = fail(err, errlen, -EPROTO, "%s: no Content-Length in the answer to HEAD", what);
	if (!rc) {
		*size = s.clen;
		snprintf(etag, etaglen, "%s", s.etag);
	}
	return rc;
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
		return fail(err, errlen, -ENOMEM, "out of memory");
	char token[2048] = "", enc_prefix[2048], enc_token[4096], url_q[8192], what[1700];
	url_encode(r->list_prefix, enc_prefix, sizeof(enc_prefix), false);
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
		url_encode(token, enc_token, sizeof(enc_token), false);
		snprintf(url_q, sizeof(url_q), "%s?%s%s%slist-type=2&prefix=%s", bucket_url,
			 token[0] ? "continuation-token=" : "", token[0] ? enc_token : "",
			 token[0] ? "&" : "", enc_prefix);
		curl_easy_setopt(h, CURLOPT_URL, url_q);
		curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
		curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, sink_write);
		curl_easy_setopt(h, CURLOPT_WRITEDATA, &s);
		curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, sink_header);
		curl_easy_setopt(h, CURLOPT_HEADERDATA, &s);
		rc = perform(r, h, &s, what, 0, err, errlen);
		curl_slist_free_all(hdrs);
		if (rc)
			break;
		if (!s.p) {
			rc = fail(err, errlen, -EPROTO, "%s: empty answer", what);
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
				rc = fail(err, errlen, -EPROTO, "%s: a <Contents> without Key or Size", what);
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
			rc = fail(err, errlen, -EPROTO, "%s: truncated listing without a token", what);
	} while (!rc && token[0]);
	free(s.p);
	curl_easy_cleanup(h);
	if (rc == -ENOMEM && err && !err[0])
		fail(err, errlen, rc, "out of memory");
	if (!rc && r->nobjs > 1)
		qsort(r->objs, r->nobjs, sizeof(*r->objs), cmp_obj);
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
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
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
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, sink_write);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &s);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, sink_header);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, &s);
	src->err = 0;
	if (!rc)
		rc = perform(r, h, &s, what, 0, err, errlen);
	curl_slist_free_all(hdrs);
	free(s.p);
	if (src->err) /* the local file failed us, not the store */
		return fail(err, errlen, -src->err, "%s: reading the file to upload: %s", what,
			    src->err == ENODATA ? "it shrank while uploading" : strerror(src->err));
	if (!rc && !s.etag[0])
		rc = fail(err, errlen, -EPROTO, "%s: no ETag in the answer to PUT", what);
	if (!rc)
		snprintf(etag, etaglen, "%s", s.etag);
	return rc;
}

int stk__remote_check(struct stk__remote *r, char *err, size_t errlen)
{
	CURL *h = curl_easy_init();
	if (!h)
		return fail(err, errlen, -ENOMEM, "out of memory");
	struct curl_slist *hdrs = NULL;
	char enc[2048], url[4096], what[1400];
	snprintf(what, sizeof(what), "s3://%s/%s", r->bucket, r->key_dir);
	int rc = stk__remote_easy(r, h, "", &hdrs);
	url_encode(r->key_dir, enc, sizeof(enc), false);
	if (r->endpoint[0])
		snprintf(url, sizeof(url), "%s/%s?list-type=2&max-keys=1&prefix=%s", r->endpoint,
			 r->bucket, enc);
	else
		snprintf(url, sizeof(url), "https://%s.s3.%s.amazonaws.com/?list-type=2&max-keys=1"
			 "&prefix=%s", r->bucket, r->region, enc);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	struct sink s = {.grow = true};
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, sink_write);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &s);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, sink_header);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, &s);
	if (!rc)
		rc = perform(r, h, &s, what, 0, err, errlen);
	curl_slist_free_all(hdrs);
	free(s.p);
	curl_easy_cleanup(h);
	return rc;
}
