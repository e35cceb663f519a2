/* test_remote.c — the remote transport's parts that need no server: URLs
 * (root, base, key folder, pattern), the AWS credential order (environment,
 * then the profile's credentials file, then config; anonymous), the secret
 * never in what is shown, the backoff's bounds, and the local cache (a
 * range served only with a complete record, another ETag never served, a
 * torn record ignored, the limit kept by eviction).  The requests
 * themselves are tested against real servers (tests/python/test_remote.py). */
#include "testutil.h"

#include <dirent.h>

#include "base/internal.h"
#include "io/remote.h"


static void clear_aws(void)
{
	const char *vars[] = {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
			      "AWS_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL",
			      "AWS_ENDPOINT_URL_S3", "AWS_NO_SIGN_REQUEST"};
	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
		unsetenv(vars[i]);
	char p[4200];
	snprintf(p, sizeof(p), "%s/credentials", tu_dir);
	setenv("AWS_SHARED_CREDENTIALS_FILE", p, 1);
	snprintf(p, sizeof(p), "%s/config", tu_dir);
	setenv("AWS_CONFIG_FILE", p, 1);
}

static void write_file(const char *name, const char *text)
{
	char p[4200];
	snprintf(p, sizeof(p), "%s/%s", tu_dir, name);
	FILE *f = fopen(p, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void test_urls(void **state)
{
	(void)state;
	clear_aws();
	setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9000/", 1);
	struct stk__remote *r;
	char err[512];
	assert_int_equal(stk__remote_create(&r, "s3://bkt/a/b/shard-{000..009}.tar", err,
					    sizeof(err)), 0);
	assert_string_equal(r->root, "s3://bkt/a/b");
	assert_string_equal(r->base, "http://127.0.0.1:9000/bkt/a/b/");
	assert_string_equal(r->key_dir, "a/b/");
	assert_string_equal(r->pattern, "shard-{000..009}.tar");
	assert_string_equal(r->list_prefix, "a/b/shard-");
	stk__remote_destroy(r);
	assert_int_equal(stk__remote_create(&r, "s3://bkt/a/b", err, sizeof(err)), 0);
	assert_string_equal(r->key_dir, "a/b/"); /* a prefix names a folder */
	assert_string_equal(r->pattern, "");
	stk__remote_destroy(r);
	assert_int_equal(stk__remote_create(&r, "s3://bkt", err, sizeof(err)), 0);
	assert_string_equal(r->root, "s3://bkt");
	assert_string_equal(r->key_dir, "");
	stk__remote_destroy(r);
	unsetenv("AWS_ENDPOINT_URL");
	setenv("AWS_REGION", "eu-west-3", 1);
	assert_int_equal(stk__remote_create(&r, "s3://bkt/x/one.tar", err, sizeof(err)), 0);
	assert_string_equal(r->base, "https://bkt.s3.eu-west-3.amazonaws.com/x/");
	assert_string_equal(r->sigv4, "aws:amz:eu-west-3:s3");
	assert_string_equal(r->pattern, "one.tar");
	stk__remote_destroy(r);
	assert_int_equal(stk__remote_create(&r, "https://h:8443/d/s-{00..03}.tar", err,
					    sizeof(err)), 0);
	assert_false(r->s3);
	assert_string_equal(r->root, "https://h:8443/d");
	assert_string_equal(r->base, "https://h:8443/d/");
	stk__remote_destroy(r);
	assert_true(stk__remote_create(&r, "s3://", err, sizeof(err)) < 0);
	assert_non_null(strstr(err, "no bucket"));
	assert_true(stk__remote_create(&r, "http://h/d/", err, sizeof(err)) < 0);
	assert_non_null(strstr(err, "names its shards"));
}

static void test_credentials_order(void **state)
{
	(void)state;
	clear_aws();
	struct stk__remote *r;
	char err[512];
	/* nothing anywhere: anonymous */
	assert_int_equal(stk__remote_create(&r, "s3://b/k/", err, sizeof(err)), 0);
	assert_true(r->anonymous);
	assert_non_null(strstr(r->cred_source, "anonymous"));
	stk__remote_destroy(r);
	/* a profile in the credentials file, region and endpoint from config */
	write_file("credentials", "[default]\naws_access_key_id = DEFKEY1\n"
		   "aws_secret_access_key = defsecret\n[p2]\n aws_access_key_id=P2KEY9999 \n"
		   "aws_secret_access_key = p2secret\naws_session_token = tok\n");
	write_file("config", "[profile p2]\nregion = ap-south-1\nendpoint_url = http://e:1/\n");
	setenv("AWS_PROFILE", "p2", 1);
	assert_int_equal(stk__remote_create(&r, "s3://b/k/", err, sizeof(err)), 0);
	assert_false(r->anonymous);
	assert_string_equal(r->access_key, "P2KEY9999");
	assert_string_equal(r->secret_key, "p2secret");
	assert_string_equal(r->region, "ap-south-1");
	assert_string_equal(r->base, "http://e:1/b/k/");
	assert_non_null(strstr(r->cred_source, "profile 'p2'"));
	assert_non_null(strstr(r->cred_source, "****9999"));
	assert_null(strstr(r->cred_source, "P2KEY9999"));
	assert_null(strstr(r->cred_source, "p2secret"));
	assert_string_equal(r->session_token, "tok");
	stk__remote_destroy(r);
	/* the environment comes first; AWS_REGION over config */
	setenv("AWS_ACCESS_KEY_ID", "ENVKEYABCD", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "envsecret", 1);
	setenv("AWS_REGION", "us-west-2", 1);
	assert_int_equal(stk__remote_create(&r, "s3://b/k/", err, sizeof(err)), 0);
	assert_string_equal(r->access_key, "ENVKEYABCD");
	assert_string_equal(r->region, "us-west-2");
	assert_non_null(strstr(r->cred_source, "environment"));
	assert_null(strstr(r->cred_source, "envsecret"));
	stk__remote_destroy(r);
	/* AWS_NO_SIGN_REQUEST wins over keys */
	setenv("AWS_NO_SIGN_REQUEST", "true", 1);
	assert_int_equal(stk__remote_create(&r, "s3://b/k/", err, sizeof(err)), 0);
	assert_true(r->anonymous);
	stk__remote_destroy(r);
	clear_aws();
}

static void test_backoff_bounds(void **state)
{
	(void)state;
	clear_aws();
	struct stk__remote *r;
	char err[256];
	assert_int_equal(stk__remote_create(&r, "s3://b/", err, sizeof(err)), 0);
	uint64_t rng = 1, prev_cap = 0;
	for (unsigned a = 1; a < 40; a++) {
		uint64_t cap = r->backoff_base_ns << (a < 16 ? a : 16);
		if (cap > r->backoff_cap_ns)
			cap = r->backoff_cap_ns;
		assert_true(cap >= prev_cap);
		prev_cap = cap;
		for (int k = 0; k < 50; k++) {
			uint64_t w = stk__remote_backoff_ns(r, a, &rng);
			assert_true(w >= cap / 2 && w <= cap); /* jittered, capped, never 0 */
		}
	}
	char why[128];
	assert_int_equal(stk__remote_classify(r, NULL, CURLE_OK, 503, false, why, sizeof(why)), 1);
	assert_int_equal(stk__remote_classify(r, NULL, CURLE_OK, 500, false, why, sizeof(why)), 1);
	assert_int_equal(stk__remote_classify(r, NULL, CURLE_RECV_ERROR, 0, false, why, sizeof(why)), 1);
	assert_int_equal(stk__remote_classify(r, NULL, CURLE_OK, 206, true, why, sizeof(why)), 1);
	assert_int_equal(stk__remote_classify(r, NULL, CURLE_OK, 206, false, why, sizeof(why)), 0);
	assert_int_equal(stk__remote_classify(r, NULL, CURLE_OK, 403, false, why, sizeof(why)), -EACCES);
	assert_int_equal(stk__remote_classify(r, NULL, CURLE_OK, 404, false, why, sizeof(why)), -ENOENT);
	assert_int_equal(stk__remote_classify(r, NULL, CURLE_OK, 412, false, why, sizeof(why)), -ESTALE);
	/* tried again for a time, the last wait cut to its end; tries a cap */
	uint64_t wait, now = stk__now_ns();
	r->retry_ns = 1000000000ull;
	assert_true(stk__remote_retry(r, NULL, now, 1, &rng, &wait));
	assert_true(wait > 0 && wait <= r->retry_ns);
	assert_true(stk__remote_retry(r, NULL, now - 999000000ull, 20, &rng, &wait));
	assert_true(wait <= 1000000ull);
	assert_false(stk__remote_retry(r, NULL, now - 2000000000ull, 1, &rng, &wait));
	r->max_attempts = 3;
	assert_false(stk__remote_retry(r, NULL, stk__now_ns(), 3, &rng, &wait));
	/* an answer checked against the index: its range, ETag and total */
	struct stk__answer a = {0};
	const char *hdrs[] = {"HTTP/1.1 206 Partial Content\r\n", "ETag: \"e1\"\r\n",
			      "Content-Range: bytes 100-199/1000\r\n", "Content-Length: 100\r\n"};
	for (size_t i = 0; i < STK_ARRAY_SIZE(hdrs); i++)
		assert_false(stk__remote_answer_header(&a, hdrs[i], strlen(hdrs[i])));
	assert_true(stk__remote_answer_header(&a, "\r\n", 2));
	assert_int_equal(a.status, 206);
	assert_int_equal(stk__remote_verify(&a, "\"e1\"", 1000, 100, why, sizeof(why)), 0);
	assert_int_equal(stk__remote_verify(&a, "\"e1\"", 1000, 0, why, sizeof(why)), 1);
	assert_int_equal(stk__remote_verify(&a, "\"e0\"", 1000, 100, why, sizeof(why)), -ESTALE);
	assert_int_equal(stk__remote_verify(&a, "\"e1\"", 999, 100, why, sizeof(why)), -ESTALE);
	assert_true(stk__remote_keepable(&a, "W/\"e1\""));
	a.status = 200; /* a 200: the whole object or nothing */
	assert_int_equal(stk__remote_verify(&a, "\"e1\"", 1000, 100, why, sizeof(why)), 1);
	a.clen = 1000;
	assert_int_equal(stk__remote_verify(&a, "\"e1\"", 1000, 100, why, sizeof(why)), 0);
	a.etag[0] = 0;
	assert_int_equal(stk__remote_verify(&a, "\"e1\"", 1000, 100, why, sizeof(why)), 1);
	assert_false(stk__remote_keepable(&a, "\"e1\""));
	/* an untrusted TLS certificate: refused, never tried again */
	char tls[400];
	assert_int_equal(stk__remote_classify(r, NULL, CURLE_PEER_FAILED_VERIFICATION, 0, false, tls,
					      sizeof(tls)), -EACCES);
	assert_non_null(strstr(tls, "not trusted"));
	stk__remote_destroy(r);
}

/* A remote with one object of `size` bytes (ETag etag) and a cache in tu_dir/c. */
static struct stk__remote *cached_remote(uint64_t size, const char *etag, uint64_t limit)
{
	clear_aws();
	struct stk__remote *r;
	char err[512], c[4200];
	assert_int_equal(stk__remote_create(&r, "s3://b/k/", err, sizeof(err)), 0);
	r->objs = calloc(1, sizeof(*r->objs));
	r->objs[0].rel = strdup("s.tar");
	r->objs[0].size = size;
	snprintf(r->objs[0].etag, sizeof(r->objs[0].etag), "%s", etag);
	r->nobjs = 1;
	snprintf(c, sizeof(c), "%s/c", tu_dir);
	assert_int_equal(stk__rcache_open(&r->cache, c, limit, err, sizeof(err)), 0);
	return r;
}

static void test_cache(void **state)
{
	(void)state;
	enum { N = 1 << 20 };
	uint8_t *src = malloc(N), *got = malloc(N);
	for (size_t i = 0; i < N; i++)
		src[i] = (uint8_t)(i * 131 + 7);
	struct stk__remote *r = cached_remote(N, "\"e1\"", 64 << 20);
	const struct stk__robj *o = &r->objs[0];
	assert_int_equal(stk__rcache_read(r, o, got, 4096, 0), 0); /* empty: a miss */
	stk__rcache_write(r, o, src, 8192, 0);
	stk__rcache_write(r, o, src + 8192, 8192, 8192);
	assert_int_equal(stk__rcache_read(r, o, got, 16384, 0), 16384); /* two records, merged */
	assert_memory_equal(got, src, 16384);
	assert_int_equal(stk__rcache_read(r, o, got, 100, 16380), 0);  /* past what is kept */
	stk__remote_destroy(r);

	/* another process (a new remote) sees it; another ETag does not */
	r = cached_remote(N, "\"e1\"", 64 << 20);
	assert_int_equal(stk__rcache_read(r, &r->objs[0], got, 1000, 5000), 1000);
	assert_memory_equal(got, src + 5000, 1000);
	stk__remote_destroy(r);
	r = cached_remote(N, "\"e2\"", 64 << 20);
	assert_int_equal(stk__rcache_read(r, &r->objs[0], got, 1000, 5000), 0);
	stk__remote_destroy(r);

	/* bytes written without their record (a process killed between the
	 * two), or under a torn record: never served */
	char c[4200];
	snprintf(c, sizeof(c), "%s/c", tu_dir);
	DIR *d = opendir(c);
	struct dirent *de;
	int torn = 0;
	while ((de = readdir(d))) {
		size_t l = strlen(de->d_name);
		if (l < 5 || strcmp(de->d_name + l - 4, ".log"))
			continue;
		char p[4400];
		snprintf(p, sizeof(p), "%s/%s", c, de->d_name);
		struct stat st;
		assert_int_equal(stat(p, &st), 0);
		if (st.st_size == 64) { /* e1's two records: the second torn */
			assert_int_equal(truncate(p, 48), 0);
			torn++;
		}
	}
	closedir(d);
	assert_int_equal(torn, 1);
	r = cached_remote(N, "\"e1\"", 64 << 20);
	assert_int_equal(stk__rcache_read(r, &r->objs[0], got, 8192, 0), 8192);
	assert_int_equal(stk__rcache_read(r, &r->objs[0], got, 100, 8192), 0);
	/* records appended after a torn one are misaligned and refused too:
	 * that version's cache stops growing until evicted, never serving
	 * wrong bytes */
	stk__rcache_write(r, &r->objs[0], src + 20000, 100, 20000);
	assert_int_equal(stk__rcache_read(r, &r->objs[0], got, 100, 20000), 100);
	stk__remote_destroy(r);
	free(src);
	free(got);
}

static void test_cache_limit(void **state)
{
	(void)state;
	char c[4200];
	snprintf(c, sizeof(c), "%s/c", tu_dir);
	tu_rmrf(c);
	enum { N = 4 << 20 };
	uint8_t *src = calloc(1, N);
	memset(src, 0x5a, N);
	/* objects of 1 MiB under a 2.5 MiB limit: the oldest go */
	struct stk__remote *r = NULL;
	uint64_t evicted = 0;
	for (int k = 0; k < 6; k++) {
		char etag[32];
		snprintf(etag, sizeof(etag), "\"v%d\"", k);
		r = cached_remote(1 << 20, etag, (5 << 20) / 2);
		stk__rcache_write(r, &r->objs[0], src, 1 << 20, 0);
		evicted += r->c.evictions;
		uint64_t bytes, limit;
		stk__rcache_usage(r->cache, &bytes, &limit);
		assert_true(bytes <= limit);
		stk__remote_destroy(r);
	}
	assert_true(evicted >= 3);
	/* the newest is still there, whole */
	r = cached_remote(1 << 20, "\"v5\"", (5 << 20) / 2);
	uint8_t *got = malloc(1 << 20);
	assert_int_equal(stk__rcache_read(r, &r->objs[0], got, 1 << 20, 0), 1 << 20);
	assert_memory_equal(got, src, 1 << 20);
	stk__remote_destroy(r);
	free(got);
	free(src);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_urls),
		cmocka_unit_test(test_credentials_order),
		cmocka_unit_test(test_backoff_bounds),
		cmocka_unit_test(test_cache),
		cmocka_unit_test(test_cache_limit),
	};
	return cmocka_run_group_tests(tests, tu_dir_setup, tu_dir_teardown);
}
