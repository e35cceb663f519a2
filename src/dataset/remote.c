/*
 * dataset/remote.c — the index of tar shards in an object store or behind
 * HTTP(S) (io/remote.h has the URLs and the transport).
 *
 * The shards are found first: an S3 listing of the prefix (every .tar under
 * it, those a glob matches, or the names a {A..B} pattern makes, each of
 * which must be there), or for HTTP the pattern's names, each asked for with
 * HEAD.  Either way each object comes with its size and ETag, and a denied
 * credential or a missing bucket fails here, before any batch, naming the
 * URL and where the credentials came from.
 *
 * A shard with an index beside it (NAME.tar.stoker-index, which `stoker
 * pack` uploads: dataset/sidx.h) is indexed by that one GET, provided the
 * index names the shard's current size and ETag (else it is stale: said,
 * and not used).  Any other shard is indexed as a local one is
 * (dataset/shards.c, the same WebDataset rules), its tar headers read
 * through ranged GETs of 1 MiB windows: a shard of large members costs a
 * request per member's header, one of small members about its size in
 * windows, which go to the remote cache (io/rcache.c; opened before the
 * index is built, answers with the ETag indexed only): the members' bytes
 * they hold are the loader's hits, not fetched again in epoch 1.  Shards are indexed by up to 16 threads at once; over HTTP and
 * for lists of URLs each shard's size and ETag come from a HEAD, 64 in
 * flight before the threads start.  A shard's index is cached on local disk
 * (the cache folder's remote-index/, one file per shard URL) with the ETag and
 * size it was built for: a shard whose ETag or size changed is named and
 * indexed again.  The loader reads with If-Match: that ETag (io/http.c).
 */
#include "dataset/build.h"
#include "dataset/sidx.h"
#include "dataset/tar.h"
#include "io/remote.h"

#include <fcntl.h>
#include <fnmatch.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <sys/stat.h>
#include <unistd.h>

#define WINDOW (1u << 20)
#define MAX_THREADS 16u
#define HEAD_DEPTH 64u /* HEADs in flight at create (http(s), lists of URLs) */

/* A ranged reader over one object, for the tar iterator. */
struct reader {
	struct stk__remote *r;
	CURL *h;
	const struct stk__robj *o;
	uint8_t *buf;
	uint64_t boff, blen;
	int rc;
	char err[1024];
};

static int reader_read(void *ctx, void *dst, size_t len, uint64_t off)
{
	struct reader *rd = ctx;
	if (off >= rd->boff && off + len <= rd->boff + rd->blen) {
		memcpy(dst, rd->buf + (off - rd->boff), len);
		return 0;
	}
	/* with the cache on, a gap under a window since the last read is read
	 * too (the tail of the member that ran past it): the cache then holds
	 * a shard of small members whole, every member a hit */
	uint64_t end = rd->boff + rd->blen, skip = 0;
	if (rd->r->cache && rd->blen && off > end && off - end < WINDOW)
		skip = off - end;
	off -= skip;
	uint64_t n = len + skip > WINDOW ? len + skip : WINDOW;
	if (n > rd->o->size - off)
		n = rd->o->size - off;
	if (n > WINDOW) {
		uint8_t *b = realloc(rd->buf, n);
		if (!b)
			return -ENOMEM;
		rd->buf = b;
	}
	rd->blen = 0;
	bool keep;
	int rc = stk__remote_get(rd->r, rd->h, rd->o->rel, rd->o->etag, rd->o->size, rd->buf, n,
				 off, &keep, rd->err, sizeof(rd->err));
	if (rc) {
		rd->rc = rc;
		return rc;
	}
	/* the bytes read for the headers are the members' too: kept, so the
	 * loader's first epoch reads them from the cache, not the server again */
	if (keep && rd->r->cache)
		stk__rcache_offer(rd->r, rd->o, rd->buf, n, off);
	rd->boff = off;
	rd->blen = n;
	memcpy(dst, rd->buf + skip, len);
	return 0;
}

/* One shard's result: its own builder (entries, bad records), merged in
 * shard order afterwards. */
struct job {
	struct stk__robj *o;
	struct builder b;
	int rc;
	char err[1400];
	char notice[4200];
};

struct pool {
	struct stk__remote *r;
	const struct stk__index_opts *io;
	const char *idx_dir; /* "" when the index cache is off */
	struct stk__robj *idx; /* s3: the listing's NAME.tar.stoker-index objects, sorted */
	size_t nidx;
	struct job *jobs;
	size_t n;
	_Atomic size_t next;
};

static void sidx_path(const struct pool *p, const struct stk__robj *o, char *out, size_t len)
{
	uint64_t h = stk__fnv1a(0xcbf29ce484222325ull, p->r->root, strlen(p->r->root));
	h = stk__fnv1a(h, "/", 1);
	h = stk__fnv1a(h, o->rel, strlen(o->rel));
	snprintf(out, len, "%s/%016llx", p->idx_dir, (unsigned long long)h);
}

/* The shard's cached index into j->b: 0, 1 when absent or for another
 * version (a change is said in j->notice), <0 on damage (rebuilt). */
static int sidx_load(struct pool *p, struct job *j)
{
	char path[PATH_MAX], why[512];
	sidx_path(p, j->o, path, sizeof(path));
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 1;
	struct stat st;
	char *buf = NULL;
	int rc = 1;
	if (fstat(fd, &st) || st.st_size > (1ll << 40) ||
	    !(buf = malloc((size_t)st.st_size + 1)) ||
	    pread(fd, buf, (size_t)st.st_size, 0) != (ssize_t)st.st_size)
		goto out;
	rc = stk__sidx_decode(&j->b, j->o->rel, buf, (size_t)st.st_size, j->o->size, j->o->etag,
			      why, sizeof(why));
	if (rc == 1)
		snprintf(j->notice, sizeof(j->notice), "%s/%s changed since it was indexed (%s): "
			 "indexed again", p->r->root, j->o->rel, why);
out:
	free(buf);
	close(fd);
	return rc;
}

static void sidx_write(struct pool *p, struct job *j)
{
	char path[PATH_MAX], tmp[PATH_MAX + 32];
	void *buf;
	size_t len;
	if (stk__sidx_encode(&j->b, j->o->size, j->o->etag, &buf, &len))
		return;
	sidx_path(p, j->o, path, sizeof(path));
	snprintf(tmp, sizeof(tmp), "%s.%d.tmp", path, (int)getpid());
	FILE *f = fopen(tmp, "we");
	bool ok = f && fwrite(buf, len, 1, f) == 1;
	if (f && fclose(f))
		ok = false;
	if (!ok || rename(tmp, path))
		unlink(tmp);
	free(buf);
}

static void reset_builder(struct pool *p, struct job *j)
{
	free(j->b.e);
	free(j->b.names.p);
	free(j->b.bad.p);
	j->b = (struct builder){.o = p->io, .root_fd = -1, .err = j->err, .errlen = sizeof(j->err),
				.root = p->r->root};
}

/* The index `stoker pack` wrote beside the shard (NAME.tar.stoker-index)
 * into j->b: 0; 1 when there is none, or it is not for this version of the
 * shard (its size and ETag) or damaged (said in j->notice): then the shard
 * is indexed by ranged reads. */
static int beside_load(struct pool *p, struct job *j, CURL *h)
{
	struct stk__remote *r = p->r;
	char rel[1200], etag[96] = "", err[1400], why[1500];
	uint64_t size;
	snprintf(rel, sizeof(rel), "%s%s", j->o->rel, SIDX_SUFFIX);
	if (r->s3) { /* the listing says whether it is there: no request when not */
		struct stk__robj key = {.rel = rel};
		const struct stk__robj *x =
			p->nidx ? bsearch(&key, p->idx, p->nidx, sizeof(key), stk__robj_cmp) : NULL;
		if (!x)
			return 1;
		size = x->size;
		snprintf(etag, sizeof(etag), "%s", x->etag);
	} else {
		int rc = stk__remote_head(r, h, rel, &size, etag, sizeof(etag), err, sizeof(err));
		if (rc == -ENOENT) /* the usual case, not a failure */
			atomic_fetch_sub(&r->c.failed, 1);
		if (rc)
			return 1;
	}
	int rc = 1;
	void *buf = size <= (1ull << 32) ? malloc(size ? size : 1) : NULL;
	if (!buf)
		snprintf(why, sizeof(why), "%llu bytes: too large", (unsigned long long)size);
	else if ((rc = stk__remote_get(r, h, rel, etag, size, buf, size, 0, NULL, err,
				       sizeof(err))))
		snprintf(why, sizeof(why), "%s", err);
	else
		rc = stk__sidx_decode(&j->b, j->o->rel, buf, size, j->o->size, j->o->etag, why,
				      sizeof(why));
	free(buf);
	if (rc)
		snprintf(j->notice, sizeof(j->notice), "%s/%s: not used (%s): the shard indexed by "
			 "ranged reads", r->root, rel, why);
	return rc ? 1 : 0;
}

static void run_job(struct pool *p, struct job *j, CURL *h)
{
	struct stk__remote *r = p->r;
	j->b = (struct builder){.o = p->io, .root_fd = -1, .err = j->err, .errlen = sizeof(j->err),
				.root = r->root};
	if ((!r->s3 || r->list[0]) && !j->o->headed) { /* HTTP or a list: size, ETag */
		char err[1400], at[1100] = "";
		if (r->list[0])
			snprintf(at, sizeof(at), "%s:%u: ", r->list, j->o->line);
		size_t al = strlen(at);
		int rc = stk__remote_head(r, h, j->o->rel, &j->o->size, j->o->etag,
					  sizeof(j->o->etag), err, sizeof(err));
		if (rc && al) { /* the list's line first */
			memmove(err + al, err, sizeof(err) - al);
			memcpy(err, at, al);
			err[sizeof(err) - 1] = 0;
		}
		if (rc == -ENOENT) { /* a missing shard: by the policy, as a local one */
			j->rc = stk__build_bad(&j->b, BAD_OPEN, j->o->rel, rc, "%s", err);
			return;
		}
		if (rc) {
			j->rc = rc;
			snprintf(j->err, sizeof(j->err), "%s", err);
			return;
		}
	}
	int got = p->idx_dir[0] ? sidx_load(p, j) : 1;
	if (got) { /* the index beside the shard, when stoker pack put one there */
		reset_builder(p, j);
		if (!(got = beside_load(p, j, h)) && p->idx_dir[0])
			sidx_write(p, j);
	}
	if (!got) {
		if (j->b.nbad && !p->io->skip_bad) {
			const char *head = j->b.bad.p, *msg = head + strlen(head) + 1;
			msg += strlen(msg) + 1;
			j->rc = (int)strtol(head + 1, NULL, 10);
			snprintf(j->err, sizeof(j->err), "%s (remembered by the index cache, which a "
				 "run under on_error skip wrote)", msg);
		}
		return;
	}
	/* built again from scratch (a damaged or stale index may have added) */
	reset_builder(p, j);
	struct reader rd = {.r = r, .h = h, .o = j->o, .buf = malloc(WINDOW)};
	struct stk__tar_iter *it = NULL;
	int rc = rd.buf ? stk__tar_open_reader(&it, reader_read, &rd, j->o->size) : -ENOMEM;
	if (!rc)
		rc = stk__shards_index_tar(&j->b, j->o->rel, it);
	stk__tar_close(it);
	free(rd.buf);
	if (rd.rc) { /* the transport failed: the whole index fails, named */
		j->rc = rd.rc;
		snprintf(j->err, sizeof(j->err), "%s", rd.err);
		return;
	}
	j->rc = rc;
	if (!rc && p->idx_dir[0])
		sidx_write(p, j);
}

static void *worker(void *arg)
{
	struct pool *p = arg;
	CURL *h = curl_easy_init();
	for (size_t i; h && (i = atomic_fetch_add(&p->next, 1)) < p->n;)
		run_job(p, &p->jobs[i], h);
	if (!h) /* the main thread's turn at these fails them */
		return NULL;
	curl_easy_cleanup(h);
	return NULL;
}

/* Whether name ends in the suffix of an index beside a shard. */
static bool is_sidx(const char *name)
{
	size_t l = strlen(name), sl = strlen(SIDX_SUFFIX);
	return l > sl && !strcmp(name + l - sl, SIDX_SUFFIX);
}

/* The shards the URL names, into r->objs (sorted), and (s3) the indexes
 * beside them the listing has, into *idx (sorted).  0 or <0 with err. */
static int find_shards(struct stk__remote *r, struct stk__robj **idx, size_t *nidx, char *err,
		       size_t errlen)
{
	if (r->list[0]) { /* named by the list: each asked for with HEAD */
		if (r->nobjs > 1)
			qsort(r->objs, r->nobjs, sizeof(*r->objs), stk__robj_cmp);
		for (size_t i = 1; i < r->nobjs; i++)
			if (!strcmp(r->objs[i].rel, r->objs[i - 1].rel)) {
				unsigned a = r->objs[i - 1].line, b = r->objs[i].line;
				snprintf(err, errlen, "%s:%u: %s/%s is listed twice (line %u too): each "
					 "shard once", r->list, a > b ? a : b, r->root, r->objs[i].rel,
					 a > b ? b : a);
				return -EINVAL;
			}
		return 0;
	}
	char **names = NULL;
	size_t n = 0;
	int rc = 0;
	bool brace = strchr(r->pattern, '{') != NULL;
	if (!r->s3 || brace) {
		if ((rc = stk__expand_braces(r->pattern, &names, &n, err, errlen))) {
			if (rc == -ENOMEM)
				snprintf(err, errlen, "out of memory");
			goto out;
		}
	}
	if (r->s3 && (rc = stk__remote_list(r, err, errlen)))
		goto out;
	struct stk__robj *keep = calloc(r->s3 ? r->nobjs + 1 : n + 1, sizeof(*keep));
	size_t k = 0;
	if (!keep) {
		rc = -ENOMEM;
		goto out;
	}
	if (!r->s3) {
		for (size_t i = 0; i < n; i++) {
			keep[k].rel = names[i];
			names[i] = NULL;
			k++;
		}
	} else if (brace) {
		for (size_t i = 0; i < n && !rc; i++) {
			const struct stk__robj *o = stk__remote_find(r, names[i]);
			if (!o) {
				snprintf(err, errlen, "%s/%s: no such object (the listing of s3://%s/%s "
					 "has no such key; credentials: %s)", r->root, names[i], r->bucket,
					 r->list_prefix, r->cred_source);
				rc = -ENOENT;
				break;
			}
			keep[k] = *o;
			keep[k++].rel = names[i];
			names[i] = NULL;
		}
	} else {
		for (size_t i = 0; i < r->nobjs; i++) {
			const char *rel = r->objs[i].rel;
			bool take = r->pattern[0] ? !fnmatch(r->pattern, rel, FNM_PATHNAME)
						  : stk__shards_is_tar(rel);
			if (take) {
				keep[k] = r->objs[i];
				if (!(keep[k++].rel = strdup(rel)))
					rc = -ENOMEM;
			}
		}
	}
	for (size_t i = 0; r->s3 && i < r->nobjs; i++) /* keep is sorted by rel, so is this */
		if (is_sidx(r->objs[i].rel) && (*idx || (*idx = calloc(r->nobjs, sizeof(**idx))))) {
			(*idx)[(*nidx)++] = r->objs[i];
			r->objs[i].rel = NULL;
		}
	for (size_t i = 0; i < r->nobjs; i++)
		free(r->objs[i].rel);
	free(r->objs);
	r->objs = keep;
	r->nobjs = k;
	if (k > 1)
		qsort(r->objs, k, sizeof(*r->objs), stk__robj_cmp);
	if (!rc && !k) {
		snprintf(err, errlen, "%s%s%s: no shard found (listed s3://%s/%s%s; credentials: %s)",
			 r->root, r->pattern[0] ? "/" : "", r->pattern, r->bucket, r->list_prefix,
			 r->pattern[0] ? "" : ", looking for .tar", r->cred_source);
		rc = STK_EEMPTY;
	}
out:
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return rc;
}

/* cache_limit auto: a quarter of the free space where the cache lives, at
 * most 100 GiB. */
static uint64_t auto_limit(const char *dir)
{
	struct statvfs vs;
	uint64_t cap = 100ull << 30;
	if (statvfs(dir, &vs))
		return 1ull << 30;
	uint64_t q = (uint64_t)vs.f_bavail * vs.f_frsize / 4;
	return q < cap ? q : cap;
}

/* A list of URLs made into a remote: its root, and its shards as objects. */
static int list_remote(struct stk__remote **out, const char *path, char *err, size_t errlen)
{
	struct stk__url_list ul;
	int rc = stk__url_list_read(path, &ul, err, errlen);
	if (rc)
		return rc;
	if (!(rc = stk__remote_create_list(out, ul.root, path, err, errlen))) {
		struct stk__remote *r = *out;
		if (!(r->objs = calloc(ul.n, sizeof(*r->objs)))) {
			stk__remote_destroy(r);
			*out = NULL;
			snprintf(err, errlen, "out of memory");
			rc = -ENOMEM;
		} else {
			for (size_t i = 0; i < ul.n; i++) {
				r->objs[i] = (struct stk__robj){.rel = ul.rels[i], .line = ul.lines[i]};
				ul.rels[i] = NULL;
			}
			r->nobjs = ul.n;
		}
	}
	stk__url_list_free(&ul);
	return rc;
}

/* The list's order: by line, and within a line's {A..B} by name (its order). */
static int cmp_line(const void *a, const void *b)
{
	const struct stk__robj *x = ((const struct job *)a)->o, *y = ((const struct job *)b)->o;
	return x->line != y->line ? (x->line > y->line) - (x->line < y->line)
				  : strcmp(x->rel, y->rel);
}

static void free_objs(struct stk__robj *o, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(o[i].rel);
	free(o);
}

static int remote_open(struct stk_dataset **out, const struct stk__index_opts *o, char *err,
		       size_t errlen)
{
	*out = NULL;
	struct stk__remote *r;
	int rc = stk__remote_is_url(o->path) ? stk__remote_create(&r, o->path, err, errlen)
					     : list_remote(&r, o->path, err, errlen);
	if (rc)
		return rc;
	stk__remote_limits(r, o->remote_timeout_ns, o->remote_connect_timeout_ns, o->remote_tries,
			   o->remote_retry_ns);
	struct stk__robj *idx = NULL;
	size_t nidx = 0;
	if ((rc = find_shards(r, &idx, &nidx, err, errlen))) {
		free_objs(idx, nidx);
		stk__remote_destroy(r);
		return rc;
	}
	char dir[PATH_MAX], idx_dir[PATH_MAX + 16] = "", why[PATH_MAX + 200] = "";
	int mk = 0;
	bool want = !o->no_cache || !o->no_remote_cache;
	if (o->cache_dir && *o->cache_dir) {
		snprintf(dir, sizeof(dir), "%s", o->cache_dir);
		if (want && !(mk = stk__mkdir_p(dir))) /* a folder named is made, parents too */
			mk = stk__trust_dir(dir, why, sizeof(why));
	} else if ((mk = stk__cache_dir(dir, sizeof(dir), why, sizeof(why))) > 0) {
		mk = 0;
	}
	if (mk < 0 && want) { /* said, never silently off */
		if (o->notice && o->noticelen && !o->notice[0] && mk == -EPERM)
			/* another user's, or others may write it: its files are not ours */
			snprintf(o->notice, o->noticelen, "%s: not used; the index and the bytes read "
				 "are not cached", why);
		else if (o->notice && o->noticelen && !o->notice[0])
			snprintf(o->notice, o->noticelen, "%s: cannot make the cache folder: %s: the "
				 "index and the bytes read are not cached", dir[0] ? dir : "cache_dir",
				 strerror(-mk));
		dir[0] = 0;
	}
	if (dir[0] && !o->no_cache) {
		snprintf(idx_dir, sizeof(idx_dir), "%s/remote-index", dir);
		if (mkdir(idx_dir, 0755) && errno != EEXIST)
			idx_dir[0] = 0;
	}
	/* the cache before the index: what the index build reads is kept */
	if (!o->no_remote_cache && dir[0]) {
		char cdir[PATH_MAX + 16];
		snprintf(cdir, sizeof(cdir), "%s/remote", dir);
		uint64_t limit = o->cache_limit ? o->cache_limit : auto_limit(dir);
		why[0] = 0;
		if (stk__rcache_open(&r->cache, cdir, limit, why, sizeof(why)) && o->notice &&
		    o->noticelen && !o->notice[0])
			snprintf(o->notice, o->noticelen, "no remote cache: %s", why);
		if (r->cache && o->quiet)
			stk__rcache_quiet(r->cache);
	}
	struct pool p = {.r = r, .io = o, .idx_dir = idx_dir, .n = r->nobjs, .idx = idx,
			 .nidx = nidx};
	p.jobs = calloc(p.n, sizeof(*p.jobs));
	if (!p.jobs) {
		free_objs(idx, nidx);
		stk__remote_destroy(r);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	/* HTTP and lists have no listing to give each shard's size and ETag: a
	 * HEAD each, many in flight (16 threads' blocking ones took 10^5 shards
	 * ~2 min at 20 ms a request); the workers try again what this could not */
	if ((!r->s3 || r->list[0]) && r->nobjs > 1)
		stk__remote_head_all(r, r->objs, r->nobjs, HEAD_DEPTH);
	for (size_t i = 0; i < p.n; i++)
		p.jobs[i].o = &r->objs[i];
	if (r->list[0]) /* the samples in the list's order, as a local list's */
		qsort(p.jobs, p.n, sizeof(*p.jobs), cmp_line);
	unsigned nt = p.n < MAX_THREADS ? (unsigned)p.n : MAX_THREADS;
	pthread_t tids[MAX_THREADS];
	unsigned started = 0;
	for (unsigned i = 1; i < nt; i++)
		if (!pthread_create(&tids[started], NULL, worker, &p))
			started++;
	worker(&p);
	for (unsigned i = 0; i < started; i++)
		pthread_join(tids[i], NULL);
	free_objs(idx, nidx);

	struct builder b = {.o = o, .root_fd = -1, .err = err, .errlen = errlen, .root = r->root};
	for (size_t i = 0; i < p.n && !rc; i++) {
		struct job *j = &p.jobs[i];
		if (j->notice[0] && o->notice && o->noticelen && !o->notice[0])
			snprintf(o->notice, o->noticelen, "%s", j->notice);
		if (j->rc) {
			rc = j->rc;
			snprintf(err, errlen, "%s", j->err);
			break;
		}
		uint64_t name = 0;
		if (j->b.n && stk__buf_add(&b.names, j->o->rel, strlen(j->o->rel), &name))
			rc = stk__build_fail(&b, -ENOMEM, "out of memory");
		for (int64_t k = 0; k < j->b.n && !rc; k++)
			rc = stk__build_add_entry(&b, name, j->b.e[k].size, j->b.e[k].label,
						  j->b.e[k].offset, j->b.e[k].tag);
		uint64_t off;
		if (!rc && j->b.bad.len) {
			/* records are NUL-separated strings: appended whole */
			if (stk__buf_add(&b.bad, j->b.bad.p, j->b.bad.len - 1, &off))
				rc = stk__build_fail(&b, -ENOMEM, "out of memory");
			b.nbad += j->b.nbad;
		}
	}
	for (size_t i = 0; i < p.n; i++) {
		free(p.jobs[i].b.e);
		free(p.jobs[i].b.names.p);
		free(p.jobs[i].b.bad.p);
		free(p.jobs[i].b.dirs);
		free(p.jobs[i].b.dir_names.p);
	}
	free(p.jobs);
	if (!rc && b.n == 0) {
		if (b.nbad) {
			const char *rel = b.bad.p + strlen(b.bad.p) + 1, *msg = rel + strlen(rel) + 1;
			rc = stk__build_fail(&b, STK_EEMPTY, "%s: no sample could be indexed; the "
					     "first: %s", o->path, msg);
		} else {
			rc = stk__build_fail(&b, STK_EEMPTY, "%s: no samples found", o->path);
		}
	}
	struct stk_dataset *ds = rc ? NULL : calloc(1, sizeof(*ds));
	if (!rc && (!ds || !(ds->root = strdup(r->root))))
		rc = stk__build_fail(&b, -ENOMEM, "out of memory");
	if (rc) {
		free(b.e);
		free(b.names.p);
		free(b.bad.p);
		if (ds)
			free(ds->root);
		free(ds);
		stk__remote_destroy(r);
		return rc;
	}
	ds->root_fd = -1;
	ds->remote = r;
	ds->shards = true;
	if (idx_dir[0]) { /* the video index's, beside the shards' (one file a dataset) */
		uint64_t h = stk__fnv1a(0xcbf29ce484222325ull, r->root, strlen(r->root));
		h = stk__fnv1a(h, r->pattern, strlen(r->pattern));
		h = stk__fnv1a(h, r->list, strlen(r->list));
		char vp[PATH_MAX + 64];
		snprintf(vp, sizeof(vp), "%s/video-%016llx", idx_dir, (unsigned long long)h);
		ds->vcache_path = strdup(vp); /* NULL: not cached */
	}
	ds->n = b.n;
	ds->entries = b.e;
	ds->names = b.names.p;
	ds->names_len = b.names.len;
	for (int64_t i = 0; i < b.n; i++)
		if (b.e[i].size > ds->max_size)
			ds->max_size = b.e[i].size;
	ds->nbad = b.nbad;
	ds->bad = b.bad.p;
	ds->bad_len = b.bad.len;
	stk__index_bad_report(ds, o, NULL, err, errlen);
	*out = ds;
	return 0;
}

int stk__dataset_open_any(struct stk_dataset **out, const struct stk__index_opts *o, char *err,
			  size_t errlen)
{
	if (stk__remote_is_url(o->path) || stk__url_list_is(o->path))
		return remote_open(out, o, err, errlen);
	return stk__dataset_open(out, o, err, errlen);
}

void stk__dataset_close_any(struct stk_dataset *ds)
{
	if (ds && ds->remote) {
		stk__remote_destroy(ds->remote);
		ds->remote = NULL;
	}
	stk__dataset_close(ds);
}
