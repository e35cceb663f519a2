/* io/remote.h — objects in an S3-compatible store or behind HTTP(S): where
 * they are (URL parsing, endpoints, path-style addressing), who asks
 * (credentials the AWS way, SigV4 signing by libcurl), blocking requests
 * with bounded retries (the index, io/rblock.c), the read engine over
 * libcurl's multi interface (io/http.c) and the bounded local cache of the
 * bytes read (io/rcache.c).  A remote is created by the dataset
 * (dataset/remote.c), shared read-only by every I/O thread; its counters are
 * atomics any thread may update. */
#ifndef STK_IO_REMOTE_H
#define STK_IO_REMOTE_H

#include "base/internal.h"

#include <curl/curl.h>
#include <pthread.h>

/* One shard object: its name relative to the remote's root, size and ETag. */
struct stk__robj {
	char *rel;
	uint64_t size;
	char etag[96]; /* as the server sent it, quotes included; "" if none */
	unsigned line; /* a list of URLs: the line that named it (else 0) */
	bool headed;   /* size and etag from stk__remote_head_all's HEAD */
};

struct stk__rcache;

struct stk__remote_counters {
	_Atomic uint64_t requests, retries, failed, short_bodies, bytes;
	_Atomic uint64_t hits, misses, hit_bytes, evictions, cache_bytes_written;
	_Atomic uint32_t inflight, inflight_max;
	_Atomic uint32_t retrying; /* requests waiting to be tried again */
	/* io/http.c's windows: fetched, and the misses filled from their stream */
	_Atomic uint64_t windows, streamed;
	_Atomic uint32_t win_inflight_max;
};

struct stk__remote {
	bool s3;               /* s3://, else http(s):// */
	char root[1200];       /* what names the data in messages: "s3://bkt/dir" (no slash) */
	char base[2048];       /* the URL objects' names are appended to ("http://host/bkt/dir/") */
	char pattern[512];     /* the last path element when it is a glob or brace pattern */
	char bucket[256];
	char key_dir[768];     /* s3: the key prefix that root names ("dir/"; "" = bucket) */
	char list_prefix[1300]; /* s3: what is listed (key_dir, or the given prefix) */
	char region[64];
	char sigv4[128];       /* CURLOPT_AWS_SIGV4's provider string */
	char access_key[128], secret_key[256];
	char *session_token;   /* malloc'ed, or NULL */
	char token_hdr[48];    /* "x-amz-security-token: " */
	bool anonymous;
	char cred_source[1200]; /* where the credentials came from (never the secret) */
	char endpoint[512];
	char ca_file[1024], ca_dir[1024]; /* the CAs TLS trusts ("": the system's) */
	char ca_source[1100];  /* which variable named them, for messages */
	long timeout_ms, connect_timeout_ms;
	unsigned max_attempts; /* tries of one request at most, the first included */
	uint64_t retry_ns;     /* how long a request is tried again, from its first try */
	uint64_t backoff_base_ns, backoff_cap_ns;
	char list[1024];        /* a list of URLs' path ("" for a URL or pattern) */
	struct stk__robj *objs; /* sorted by rel */
	size_t nobjs;
	struct stk__rcache *cache; /* NULL: off */
	uint64_t window;           /* io/http.c: a miss fetches this much around it (0: itself) */
	struct stk_hist *h_lat;    /* per-request latency (ns) */
	struct stk__remote_counters c;
	/* io/rfail.c: per object, the last read of it that failed for good, with
	 * the transport's reason (an io carries only a -errno); made at the
	 * first failure, freed with the remote */
	pthread_mutex_t fail_mu;
	char **fail_why;
	/* the server answered once (any HTTP status): from then on, a server
	 * that cannot be reached is an outage to ride out; before, a wrong
	 * endpoint or host, said at once (stk__remote_classify) */
	atomic_bool answered;
};

/* Whether path names remote data (s3://, http://, https://). */
bool stk__remote_is_url(const char *path);
/* Parses url, finds credentials, region and endpoint (no request yet).
 * 0, or <0 with the reason in err. */
int stk__remote_create(struct stk__remote **out, const char *url, char *err, size_t errlen);
/* As stk__remote_create for the shards of a list of URLs: root_url is the
 * folder they share ('/' ended), list the list's path (for messages). */
int stk__remote_create_list(struct stk__remote **out, const char *root_url, const char *list,
			    char *err, size_t errlen);
/* The options' time-outs, tries and retry time (0: keep the default); a
 * STOKER_REMOTE_* variable that is set overrides its option. */
void stk__remote_limits(struct stk__remote *r, uint64_t timeout_ns, uint64_t connect_ns,
			unsigned tries, uint64_t retry_ns);
void stk__remote_destroy(struct stk__remote *r);
/* io/rcred.c: region, endpoint and credentials the AWS way into r (and
 * cred_source, where they came from); none found: anonymous. */
void stk__remote_find_credentials(struct stk__remote *r);
/* io/rcred.c: the CAs the environment names for url, checked readable, into
 * r (ca_file, ca_dir, ca_source).  0 or <0 with err. */
int stk__remote_find_ca(struct stk__remote *r, const char *url, char *err, size_t errlen);
/* Percent-encodes s into out, '/' kept when keep_slash (S3's canonical URI). */
void stk__remote_url_encode(const char *s, char *out, size_t len, bool keep_slash);
/* Orders objects by rel (qsort, bsearch). */
int stk__robj_cmp(const void *a, const void *b);
/* The object named rel (bsearch in objs), or NULL. */
const struct stk__robj *stk__remote_find(const struct stk__remote *r, const char *rel);
/* Sets up an easy handle for rel: URL, signing, timeouts. 0 or -ENOMEM. */
int stk__remote_easy(const struct stk__remote *r, CURL *h, const char *rel,
		     struct curl_slist **hdrs);
/* What an answer's headers said (the last response's: a redirect's or a
 * 100's are replaced by the next), parsed the same way for the read engine
 * and the blocking requests. */
struct stk__answer {
	long status;
	bool has_range, has_clen;
	uint64_t range_start, range_len, range_total; /* total UINT64_MAX: "*" */
	uint64_t clen;
	char etag[96];      /* "" if none */
	char location[512]; /* a redirect's Location ("" if none) */
	char region[64];    /* S3's x-amz-bucket-region ("" if none) */
};
/* Takes one header line of len bytes (curl's header callback) into a:
 * true at the blank line that ends a response's headers. */
bool stk__remote_answer_header(struct stk__answer *a, const char *line, size_t len);
/* Whether a 200 or 206 answer to a GET of the object's bytes from off on
 * is the object indexed (etag, "" for none; size): 0 yes; 1 not the bytes
 * asked for (another range, a 200 that is not the whole object: a proxy's
 * page, a server ignoring Range), tried again; -ESTALE another version of
 * the object (its ETag or its size, Content-Range's total, not the
 * index's).  why says which. */
int stk__remote_verify(const struct stk__answer *a, const char *etag, uint64_t size,
		       uint64_t off, char *why, size_t len);
/* Whether bytes of the answer may be kept in the cache: verified (above)
 * and its ETag the index's (an answer without one is delivered, never kept). */
bool stk__remote_keepable(const struct stk__answer *a, const char *etag);
/* What a finished request of h (NULL: not known) means: 0 done, 1 retry (a
 * 5xx, SlowDown, a reset, a timeout, a short body, a garbled answer on a
 * reused connection, a server unreachable after it answered once), or the
 * -errno / STK_* to report; why says it.  Notes an answer in r->answered. */
int stk__remote_classify(struct stk__remote *r, CURL *h, CURLcode cc, long status,
			 bool short_body, char *why, size_t len);
/* s3://: the region an answer named (x-amz-bucket-region), when not the one
 * signed for, appended to why with what to set. */
void stk__remote_region_hint(const struct stk__remote *r, const char *region, char *why,
			     size_t len);
/* Whether the answer h got was garbled on a reused connection (the tail of
 * an earlier body over-long, read as a status line): tried again on a new
 * connection (stk__remote_fresh). */
bool stk__remote_garbled(CURL *h, CURLcode cc);
/* h's next transfer on a new connection, closed after it. */
void stk__remote_fresh(CURL *h);
/* The wait before try `attempt` (1 = the first retry): capped exponential,
 * full jitter. */
uint64_t stk__remote_backoff_ns(const struct stk__remote *r, unsigned attempt, uint64_t *rng);
/* Whether a request whose first try started at t0 (stk__now_ns) and that
 * was tried `tries` times is tried again, and after how long (*wait_ns): the
 * backoff, or the answer's Retry-After (h's, when longer), cut to what is
 * left of r->retry_ns (a last try at its end); false once that time or
 * max_attempts is spent. */
bool stk__remote_retry(const struct stk__remote *r, CURL *h, uint64_t t0, unsigned tries,
		       uint64_t *rng, uint64_t *wait_ns);
/* Blocking ranged read of len bytes at off of rel (indexed with etag and
 * size: every answer checked against them, stk__remote_verify) into buf,
 * retried; 0, STK_ESHORT (the object ends first) or <0 with the reason in
 * err (-ESTALE: the object changed).  *keep (if not NULL): the answer
 * carried the ETag asked for (stk__remote_keepable: the cache may keep it). */
int stk__remote_get(struct stk__remote *r, CURL *h, const char *rel, const char *etag,
		    uint64_t size, void *buf, size_t len, uint64_t off, bool *keep, char *err,
		    size_t errlen);
/* HEAD of rel: size and ETag.  0 or <0 with the reason in err. */
int stk__remote_head(struct stk__remote *r, CURL *h, const char *rel, uint64_t *size,
		     char *etag, size_t etaglen, char *err, size_t errlen);
/* HEADs of objs[0..n), up to depth in flight on one multi handle, one try
 * each: the size and ETag of each answered 200 with a Content-Length, and
 * headed set; the others (any failure, out of memory too) are left for
 * stk__remote_head's tries and messages. */
void stk__remote_head_all(struct stk__remote *r, struct stk__robj *objs, size_t n,
			  unsigned depth);
/* s3: lists the objects under list_prefix into objs (rel relative to
 * key_dir), all pages.  0 or <0 with the reason in err (a missing bucket,
 * denied credentials: named, with the credential source). */
int stk__remote_list(struct stk__remote *r, char *err, size_t errlen);

/* A PUT's body: a file read with pread (never held in memory whole), or
 * bytes in memory when mem is set.  progress, when set, hears of the bytes
 * sent (from the calling thread). */
struct stk__upsrc {
	int fd;
	const void *mem;
	uint64_t size, off;
	int err; /* the file's read error (errno), if any */
	void (*progress)(void *ctx, uint64_t done, uint64_t total);
	void *ctx;
};
/* s3: PUTs the body as rel (under key_dir), signed, retried like reads, with
 * no total timeout but a floor on the speed; the ETag the store gave it into
 * etag.  0 or <0 with the URL and the reason (the S3 error code, the
 * credential source) in err. */
int stk__remote_put(struct stk__remote *r, CURL *h, const char *rel, struct stk__upsrc *src,
		    char *etag, size_t etaglen, char *err, size_t errlen);
/* s3: whether the bucket is there and the credentials are taken: a listing
 * of one key under key_dir.  0 or <0 with the reason in err. */
int stk__remote_check(struct stk__remote *r, char *err, size_t errlen);

/* io/rfail.c: records that a read of o failed for good after `tries` tries,
 * the last one's reason why (any thread). */
void stk__remote_failed(struct stk__remote *r, const struct stk__robj *o, unsigned tries,
			const char *why);
/* The last recorded failure of a read of rel into out ("HTTP 503 (SlowDown),
 * 6 tries"): 1, or 0 when none is recorded (any thread). */
int stk__remote_failure(struct stk__remote *r, const char *rel, char *out, size_t len);

/* io/http.c: the window a cache miss fetches (r->window), for a loader that
 * streams shards (shard_mode) or otherwise: 8 MiB when the cache is on and
 * will keep what windows bring (shard mode, or all the objects fit in half
 * its limit), else 0 (a member a request); STOKER_REMOTE_WINDOW (bytes, 0:
 * off) overrides. */
void stk__remote_plan_window(struct stk__remote *r, bool shard_mode);
/* Windows fetched at once, at most (io/http.c; the others queue). */
#define STK__WIN_INFLIGHT 16

/* io/rcache.c: the bounded local cache of remote bytes.  Ranges of an
 * object (by URL, ETag and size) live in a sparse file with a log of the
 * ranges written; a range is served only once its log record is complete. */
int stk__rcache_open(struct stk__rcache **out, const char *dir, uint64_t limit, char *err,
		     size_t errlen);
void stk__rcache_close(struct stk__rcache *c);
/* The cache stops (a full disk) without saying so on stderr (quiet loaders);
 * before the first read. */
void stk__rcache_quiet(struct stk__rcache *c);
/* Reads [off, off+len) of the object from the cache into buf: len, or 0 on
 * a miss. */
int64_t stk__rcache_read(struct stk__remote *r, const struct stk__robj *o, void *buf,
			 uint64_t len, uint64_t off);
/* Keeps [off, off+len) of the object (best effort: a full disk stops the
 * cache with a notice). */
void stk__rcache_write(struct stk__remote *r, const struct stk__robj *o, const void *buf,
		       uint64_t len, uint64_t off);
/* As stk__rcache_write for bytes read for another purpose (the index
 * build's): a full disk skips them, and stops the cache only when the
 * loader's own reads find it full. */
void stk__rcache_offer(struct stk__remote *r, const struct stk__robj *o, const void *buf,
		       uint64_t len, uint64_t off);
/* The cache's folder, or NULL for none. */
const char *stk__rcache_dir(const struct stk__rcache *c);
/* The bytes the cache holds now (all processes), and its limit. */
void stk__rcache_usage(struct stk__rcache *c, uint64_t *bytes, uint64_t *limit);

#endif
