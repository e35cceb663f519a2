/*
 * io/rcache.c — the bounded local cache of remote bytes, shared by every
 * process and rank on the host.
 *
 * An object version (URL, ETag, size) owns two files in the cache folder,
 * named by a hash of the three, so another ETag or size is another file and
 * never served for this one: NAME.data, a sparse file of the object's size
 * holding the ranges fetched, and NAME.log, an append-only log of 32-byte
 * records (offset, length, check), each appended with one write() after its
 * bytes were written.  A range is served only when the log's records cover
 * it, so a process killed mid-write leaves bytes nobody trusts, never a
 * partial range; a torn or foreign record fails its check and is ignored.
 * Two processes writing one range write the same bytes (one ETag).
 *
 * The limit holds across processes by each one's estimate of the folder's
 * usage (a scan at open, plus what it wrote): past the limit, the one that
 * takes the folder's lock (flock, non-blocking) scans it and removes whole
 * object versions, least recently used first (a log's mtime, touched at most
 * once a second on hits), down to 90 % of the limit.  A reader holding a
 * removed file keeps reading its own (unlinked) copy, still right.  A full
 * disk stops the cache for this process, said once on stderr.
 */
#include "io/remote.h"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define REC_MAGIC 0x53544b52434c4f47ull /* "STKRCLOG" */

struct rec {
	uint64_t magic, off, len, check;
};

struct span {
	uint64_t a, b; /* [a, b) */
};

struct ostate {
	int data_fd, log_fd;
	ino_t data_ino;
	uint64_t log_pos;    /* log bytes taken in */
	uint64_t id;         /* hash of the version: part of each record's check */
	struct span *spans;  /* sorted, disjoint, merged */
	size_t nspans, cap;
	uint64_t touched;    /* ns: the last mtime bump */
	uint64_t checked;    /* ns: the last look at the files (stat, the log) */
	bool open_failed;
};

struct stk__rcache {
	pthread_mutex_t mu;
	char dir[4096];
	uint64_t limit;
	_Atomic uint64_t usage; /* estimate, all processes */
	_Atomic bool off;
	bool quiet;  /* stopping says nothing on stderr */
	int lock_fd;
	struct ostate *st;   /* by object index in the remote's objs */
	size_t nst;
};

static uint64_t version_id(const struct stk__remote *r, const struct stk__robj *o)
{
	uint64_t h = 0xcbf29ce484222325ull;
	const char *parts[] = {r->root, "/", o->rel, "\n", o->etag};
	for (size_t i = 0; i < STK_ARRAY_SIZE(parts); i++)
		for (const char *p = parts[i]; *p; p++)
			h = (h ^ (unsigned char)*p) * 0x100000001b3ull;
	return stk__mix64(h ^ o->size);
}

static uint64_t rec_check(uint64_t id, uint64_t off, uint64_t len)
{
	return stk__mix64(id ^ stk__mix64(off ^ stk__mix64(len ^ REC_MAGIC)));
}

/* Scans the folder: the bytes its .data files take (blocks, as du). */
static uint64_t scan_usage(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return 0;
	uint64_t sum = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		struct stat st;
		if (de->d_name[0] != '.' && !fstatat(dirfd(d), de->d_name, &st, 0))
			sum += (uint64_t)st.st_blocks * 512;
	}
	closedir(d);
	return sum;
}

int stk__rcache_open(struct stk__rcache **out, const char *dir, uint64_t limit, char *err,
		     size_t errlen)
{
	*out = NULL;
	struct stk__rcache *c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	snprintf(c->dir, sizeof(c->dir), "%s", dir);
	if (mkdir(dir, 0755) && errno != EEXIST) {
		int e = errno;
		snprintf(err, errlen, "%s: cannot create the cache folder: %s", dir, strerror(e));
		free(c);
		return -e;
	}
	char lock[4200];
	snprintf(lock, sizeof(lock), "%s/.lock", dir);
	c->lock_fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (c->lock_fd < 0) {
		int e = errno;
		snprintf(err, errlen, "%s: %s", lock, strerror(e));
		free(c);
		return -e;
	}
	pthread_mutex_init(&c->mu, NULL);
	c->limit = limit;
	c->usage = scan_usage(dir);
	*out = c;
	return 0;
}

void stk__rcache_close(struct stk__rcache *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->nst; i++) {
		if (c->st[i].data_fd > 0)
			close(c->st[i].data_fd);
		if (c->st[i].log_fd > 0)
			close(c->st[i].log_fd);
		free(c->st[i].spans);
	}
	free(c->st);
	close(c->lock_fd);
	pthread_mutex_destroy(&c->mu);
	free(c);
}

const char *stk__rcache_dir(const struct stk__rcache *c)
{
	return c ? c->dir : NULL;
}

void stk__rcache_quiet(struct stk__rcache *c)
{
	c->quiet = true;
}

void stk__rcache_usage(struct stk__rcache *c, uint64_t *bytes, uint64_t *limit)
{
	*bytes = c ? atomic_load(&c->usage) : 0;
	*limit = c ? c->limit : 0;
}

/* Whether the ranges taken in (s may be NULL) hold all of [off, off+len). */
static bool covered(const struct ostate *s, uint64_t off, uint64_t len)
{
	for (size_t i = 0; s && i < s->nspans; i++)
		if (s->spans[i].a <= off && s->spans[i].b >= off + len)
			return true;
	return false;
}

static void add_span(struct ostate *s, uint64_t a, uint64_t b)
{
	/* insert, then merge neighbours (few spans per object: linear is fine) */
	if (s->nspans == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 16;
		struct span *p = realloc(s->spans, cap * sizeof(*p));
		if (!p)
			return; /* not remembered: a later miss, never wrong bytes */
		s->spans = p;
		s->cap = cap;
	}
	size_t i = 0;
	while (i < s->nspans && s->spans[i].a < a)
		i++;
	memmove(&s->spans[i + 1], &s->spans[i], (s->nspans - i) * sizeof(*s->spans));
	s->spans[i] = (struct span){a, b};
	s->nspans++;
	size_t o = 0;
	for (size_t k = 0; k < s->nspans; k++) {
		if (o && s->spans[k].a <= s->spans[o - 1].b) {
			if (s->spans[k].b > s->spans[o - 1].b)
				s->spans[o - 1].b = s->spans[k].b;
		} else {
			s->spans[o++] = s->spans[k];
		}
	}
	s->nspans = o;
}

static void close_state(struct ostate *s)
{
	if (s->data_fd > 0)
		close(s->data_fd);
	if (s->log_fd > 0)
		close(s->log_fd);
	s->data_fd = s->log_fd = 0;
	s->nspans = 0;
	s->log_pos = 0;
}

/* Opens (or reopens, after an eviction) the object's files; takes in new
 * log records.  Under mu. */
static struct ostate *state_of(struct stk__rcache *c, struct stk__remote *r,
			       const struct stk__robj *o, bool create)
{
	size_t idx = (size_t)(o - r->objs);
	if (idx >= r->nobjs)
		return NULL;
	if (!c->st) {
		c->st = calloc(r->nobjs, sizeof(*c->st));
		if (!c->st)
			return NULL;
		c->nst = r->nobjs;
	}
	struct ostate *s = &c->st[idx];
	char path[4300];
	uint64_t id = version_id(r, o);
	snprintf(path, sizeof(path), "%s/%016llx.data", c->dir, (unsigned long long)id);
	struct stat st;
	if (s->data_fd > 0 && (stat(path, &st) || st.st_ino != s->data_ino))
		close_state(s); /* evicted (and maybe made again) by someone */
	if (s->data_fd <= 0) {
		int fd = open(path, O_RDWR | O_CLOEXEC | (create ? O_CREAT : 0), 0644);
		if (fd < 0)
			return NULL;
		snprintf(path, sizeof(path), "%s/%016llx.log", c->dir, (unsigned long long)id);
		int lfd = open(path, O_RDWR | O_APPEND | O_CLOEXEC | (create ? O_CREAT : 0), 0644);
		if (lfd < 0 || fstat(fd, &st)) {
			close(fd);
			if (lfd >= 0)
				close(lfd);
			return NULL;
		}
		if ((uint64_t)st.st_size < o->size && ftruncate(fd, (off_t)o->size)) {
			close(fd);
			close(lfd);
			return NULL;
		}
		s->data_fd = fd;
		s->log_fd = lfd;
		s->data_ino = st.st_ino;
		s->id = id;
		s->log_pos = 0;
		s->nspans = 0;
	}
	s->checked = stk__now_ns();
	struct rec recs[128];
	for (;;) {
		ssize_t n = pread(s->log_fd, recs, sizeof(recs), (off_t)s->log_pos);
		if (n <= 0)
			break;
		size_t k = (size_t)n / sizeof(struct rec);
		for (size_t i = 0; i < k; i++)
			if (recs[i].magic == REC_MAGIC &&
			    recs[i].check == rec_check(s->id, recs[i].off, recs[i].len) &&
			    recs[i].off <= o->size && recs[i].len <= o->size - recs[i].off)
				add_span(s, recs[i].off, recs[i].off + recs[i].len);
		s->log_pos += k * sizeof(struct rec);
		if (k * sizeof(struct rec) < sizeof(recs))
			break;
	}
	return s;
}

int64_t stk__rcache_read(struct stk__remote *r, const struct stk__robj *o, void *buf,
			 uint64_t len, uint64_t off)
{
	struct stk__rcache *c = r->cache;
	if (!c || atomic_load(&c->off))
		return 0;
	pthread_mutex_lock(&c->mu);
	/* a range this process already knows is in its open file is read from
	 * it (a file another process removed meanwhile still holds the right
	 * bytes) without a look at the folder: a stat and a read of the log per
	 * hit, under the mutex, were most of a hit's cost.  The files are looked
	 * at again on a miss, and once a second (a removed file is let go). */
	uint64_t now = stk__now_ns();
	size_t idx = (size_t)(o - r->objs);
	struct ostate *s = c->st && idx < c->nst && c->st[idx].data_fd > 0 &&
				   now - c->st[idx].checked < 1000000000ull ? &c->st[idx] : NULL;
	bool have = covered(s, off, len);
	if (!have)
		have = covered(s = state_of(c, r, o, false), off, len);
	int fd = have ? dup(s->data_fd) : -1;
	if (have && now - s->touched > 1000000000ull) {
		s->touched = now;
		futimens(s->log_fd, NULL); /* recently used */
	}
	pthread_mutex_unlock(&c->mu);
	if (fd < 0) {
		atomic_fetch_add(&r->c.misses, 1);
		return 0;
	}
	uint64_t got = 0;
	while (got < len) {
		ssize_t n = pread(fd, (uint8_t *)buf + got, len - got, (off_t)(off + got));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (uint64_t)n;
	}
	close(fd);
	if (got != len) {
		atomic_fetch_add(&r->c.misses, 1);
		return 0;
	}
	atomic_fetch_add(&r->c.hits, 1);
	atomic_fetch_add(&r->c.hit_bytes, len);
	return (int64_t)len;
}

struct victim {
	uint64_t mtime_ns, bytes;
	char name[64]; /* hash, no suffix */
};

static int by_age(const void *a, const void *b)
{
	const struct victim *x = a, *y = b;
	return x->mtime_ns < y->mtime_ns ? -1 : x->mtime_ns > y->mtime_ns;
}

/* Removes least recently used versions down to 90 % of the limit. */
static void evict(struct stk__rcache *c, struct stk__remote *r)
{
	if (flock(c->lock_fd, LOCK_EX | LOCK_NB))
		return; /* another process is at it */
	DIR *d = opendir(c->dir);
	struct victim *v = NULL;
	size_t n = 0, cap = 0;
	uint64_t total = 0;
	struct dirent *de;
	while (d && (de = readdir(d))) {
		size_t l = strlen(de->d_name);
		struct stat st, ls;
		if (l < 6 || l > 60 || strcmp(de->d_name + l - 5, ".data") ||
		    fstatat(dirfd(d), de->d_name, &st, 0))
			continue;
		char logn[80];
		snprintf(logn, sizeof(logn), "%.*s.log", (int)(l - 5), de->d_name);
		uint64_t log_bytes = 0;
		if (fstatat(dirfd(d), logn, &ls, 0))
			ls = st;
		else /* the log's blocks are the cache's too (a block each at least) */
			log_bytes = (uint64_t)ls.st_blocks * 512;
		if (n == cap) {
			size_t nc = cap ? cap * 2 : 256;
			struct victim *p = realloc(v, nc * sizeof(*p));
			if (!p)
				break;
			v = p;
			cap = nc;
		}
		v[n].mtime_ns = (uint64_t)ls.st_mtim.tv_sec * 1000000000ull + (uint64_t)ls.st_mtim.tv_nsec;
		v[n].bytes = (uint64_t)st.st_blocks * 512 + log_bytes;
		snprintf(v[n].name, sizeof(v[n].name), "%.*s", (int)(l - 5), de->d_name);
		total += v[n].bytes;
		n++;
	}
	if (d)
		closedir(d);
	if (n > 1)
		qsort(v, n, sizeof(*v), by_age);
	uint64_t goal = c->limit / 10 * 9;
	for (size_t i = 0; i < n && total > goal; i++) {
		char p[4300];
		/* the log first: without it nothing of the data is trusted */
		snprintf(p, sizeof(p), "%s/%s.log", c->dir, v[i].name);
		unlink(p);
		snprintf(p, sizeof(p), "%s/%s.data", c->dir, v[i].name);
		unlink(p);
		total -= v[i].bytes;
		atomic_fetch_add(&r->c.evictions, 1);
	}
	free(v);
	atomic_store(&c->usage, total);
	flock(c->lock_fd, LOCK_UN);
}

static void write_range(struct stk__remote *r, const struct stk__robj *o, const void *buf,
			uint64_t len, uint64_t off, bool stop_when_full);

void stk__rcache_write(struct stk__remote *r, const struct stk__robj *o, const void *buf,
		       uint64_t len, uint64_t off)
{
	write_range(r, o, buf, len, off, true);
}

void stk__rcache_offer(struct stk__remote *r, const struct stk__robj *o, const void *buf,
		       uint64_t len, uint64_t off)
{
	write_range(r, o, buf, len, off, false);
}

static void write_range(struct stk__remote *r, const struct stk__robj *o, const void *buf,
			uint64_t len, uint64_t off, bool stop_when_full)
{
	struct stk__rcache *c = r->cache;
	if (!c || atomic_load(&c->off) || !len || len > c->limit)
		return;
	pthread_mutex_lock(&c->mu);
	struct ostate *s = state_of(c, r, o, true);
	int rc = s ? 0 : -errno;
	bool have = covered(s, off, len);
	if (s && !have) {
		uint64_t done = 0;
		while (done < len && !rc) {
			ssize_t n = pwrite(s->data_fd, (const uint8_t *)buf + done, len - done,
					   (off_t)(off + done));
			if (n < 0 && errno != EINTR)
				rc = -errno;
			else if (n > 0)
				done += (uint64_t)n;
		}
		struct rec rec = {REC_MAGIC, off, len, rec_check(s->id, off, len)};
		if (!rc && write(s->log_fd, &rec, sizeof(rec)) != (ssize_t)sizeof(rec))
			rc = -(errno ? errno : EIO);
		if (!rc) {
			add_span(s, off, off + len);
			/* blocks, as the scan counts them: the range's (it may
			 * straddle one more) and the log's, over rather than under */
			atomic_fetch_add(&c->usage, STK_ALIGN_UP(len, 4096) + 2 * 4096);
			atomic_fetch_add(&r->c.cache_bytes_written, len);
		}
	}
	pthread_mutex_unlock(&c->mu);
	if ((rc == -ENOSPC || rc == -EDQUOT) && !stop_when_full)
		return;
	if (rc == -ENOSPC || rc == -EDQUOT) {
		if (!atomic_exchange(&c->off, true) && !c->quiet)
			fprintf(stderr, "stoker: the remote cache in %s stops: %s (reads go to the "
				"server)\n", c->dir, strerror(-rc));
		return;
	}
	if (atomic_load(&c->usage) > c->limit)
		evict(c, r);
}
