/*
 * loader/video_index.c — video mode's index (issue 38): each video's byte
 * layout (video/vindex.c's record), so a clip reads only its ranges
 * (loader/video.c lays them out).
 *
 * At create (stk__vloader_index) a record is loaded from the index cache
 * (dataset/vcache.c: cache_path + ".video"; remote data's under the cache
 * folder's remote-index/) when its key and identity are the file's now, else
 * made from the whole file: a folder's or list's file by its path (key: the
 * path; identity: size, mtime, ctime, inode, device), a tar member from its
 * bytes in its shard (key: shard@offset; identity: the shard's).  O_DIRECT:
 * read buffered once, then dropped from the page cache.  Remote data (S3 /
 * HTTP shards) is not read at create, which would fetch every video: the
 * cache's records are taken (key: URL@offset ETag, so another version of the
 * object is another key), and a video without one is read whole by its first
 * clip, whose decode thread makes the record from those bytes
 * (stk__vloader_learn, published under mu); the file is written when every
 * video was seen, at each epoch's end (the consumer's: every decode done; a
 * run killed later keeps what it learnt) and when the loader is destroyed,
 * each time to a temporary name renamed into place, marking the videos seen
 * (dev 1: a record, or none possible; the others are learnt when read) and
 * keeping what another process wrote there for the videos this one did not
 * see (each rank learns its share).  Every record is checked
 * (stk__vidx_view) before it is used; a record's room (the most a clip of it
 * takes in a read area) counts a shard's tar header and O_DIRECT's rounding.
 */
#include "loader/vloader.h"
#include "io/remote.h"

#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Whole files only: forces every clip to read its whole file (tests compare
 * the two paths' pixels). */
bool stk__video_whole_files;

/* The file's identity as the cache keeps it. */
static void ident(const struct stat *st, struct stk__vcache_item *it)
{
	it->size = (uint64_t)st->st_size;
	it->mtime_ns = stk__mtime_ns(st);
	it->ctime_ns = stk__ctime_ns(st);
	it->ino = (uint64_t)st->st_ino;
	it->dev = (uint64_t)st->st_dev;
}

/* Reads len bytes at off of fd into *buf: how many, or <0. */
static int64_t slurp(int fd, uint64_t off, size_t n, uint8_t **buf, size_t *cap)
{
	if (n > *cap) {
		uint8_t *b = realloc(*buf, n ? n : 1);
		if (!b)
			return -ENOMEM;
		*buf = b;
		*cap = n;
	}
	size_t got = 0;
	while (got < n) {
		ssize_t k = pread(fd, *buf + got, n - got, (off_t)(off + got));
		if (k <= 0)
			break;
		got += (size_t)k;
	}
	return (int64_t)got;
}

/* The room a clip of a video with record v takes in a read area: its
 * bytes, a shard's tar header before its first read (buffered), O_DIRECT's
 * rounding of each read (the header's ranges and one span). */
static uint64_t room_of(const struct stk_loader *l, const struct stk__vidx *v,
			const struct stk_video_opts *o)
{
	uint64_t r = stk__vidx_max_bytes(v, o);
	if (l->direct)
		return r + (uint64_t)(v->nhdr + 1) * 2 * STK_DIRECT_ALIGN;
	return r + (l->ds->shards ? 512 : 0);
}

/* Entry i's key in the cache file: its path; a shard member's offset too;
 * remote data's the object's ETag too (another version is another key). */
static int key_of(const struct stk_loader *l, int64_t i, char *out, size_t len)
{
	const struct stk_dataset *ds = l->ds;
	const struct stk_entry *e = &ds->entries[i];
	const char *name = stk__entry_path(ds, i);
	int n;
	if (ds->remote) {
		const struct stk__robj *o = stk__remote_find(ds->remote, name);
		n = snprintf(out, len, "%s@%llu %s", name, (unsigned long long)e->offset,
			     o ? o->etag : "");
	} else if (ds->shards) {
		n = snprintf(out, len, "%s@%llu", name, (unsigned long long)e->offset);
	} else {
		n = snprintf(out, len, "%s", name);
	}
	return n >= 0 && (size_t)n < len ? 0 : -ENAMETOOLONG;
}

/* Whether a remote video's key names its object's version (an ETag): a
 * record made from the bytes of an object without one cannot be told from
 * another version's of the same size, so it is never kept in the file. */
static bool versioned(const char *key)
{
	size_t n = strlen(key);
	return n && key[n - 1] != ' ';
}

/* A record taken for entry i (its words copied, or owned when own): 0, or
 * STK_ECORRUPT when stk__vidx_view refuses it (why says why). */
static int take(const struct stk_loader *l, struct vvid *x, int64_t i, const uint64_t *rec,
		uint64_t words, bool own, char *why, size_t whylen)
{
	uint64_t *r = own ? (uint64_t *)rec : malloc(words * 8);
	if (!r)
		return -ENOMEM;
	if (!own)
		memcpy(r, rec, words * 8);
	struct stk__vidx vx;
	int rc = stk__vidx_view(r, words, l->ds->entries[i].size, &vx, why, whylen);
	if (rc < 0) {
		free(r);
		return rc;
	}
	x->rec = r;
	x->words = words;
	x->room = room_of(l, &vx, &l->video->o);
	/* the decoders' memory from the first batch (Loader.memory()) */
	struct stk__vloader *v = l->video;
	uint64_t px = (uint64_t)vx.width * vx.height, mx = atomic_load(&v->max_pixels);
	while (px > mx && !atomic_compare_exchange_weak(&v->max_pixels, &mx, px))
		;
	return 0;
}

int stk__vloader_index(struct stk_loader *l, char *err, size_t errlen)
{
	struct stk__vloader *v = l->video;
	const struct stk_dataset *ds = l->ds;
	const char *off_why = stk__video_whole_files ? "whole files asked for" :
			      l->o.read_bytes ? "read_bytes" :
			      l->ops == &stk__engine_null ? "null engine" : NULL;
	if (off_why || !ds->n)
		return 0;
	v->vid = calloc((size_t)ds->n, sizeof(*v->vid));
	v->nvid = ds->n;
	if (!v->vid)
		return stk__errf(err, errlen, -ENOMEM, "out of memory (the video index)");
	char path[PATH_MAX + 8], why[PATH_MAX + 256], key[PATH_MAX + 160];
	bool cache = ds->remote ? ds->vcache_path != NULL : ds->cache_path &&
		     snprintf(path, sizeof(path), "%s.video", ds->cache_path) < (int)sizeof(path);
	if (ds->remote && cache)
		snprintf(path, sizeof(path), "%s", ds->vcache_path);
	struct stk__vcache c = {0};
	if (cache) {
		int rc = stk__vcache_load(path, &c, why, sizeof(why));
		if (rc < 0 && rc != -ENOMEM)
			stk__loader_notice(l, "%s; the video index is made again", why);
		else if (rc == -ENOMEM)
			return stk__errf(err, errlen, -ENOMEM, "out of memory (the video index)");
	}
	uint8_t *buf = NULL;
	size_t cap = 0;
	uint64_t made = 0, none = 0;
	int64_t first_none = -1;
	char none_why[256] = "";
	struct stk__vcache_item *items = calloc((size_t)ds->n, sizeof(*items));
	if (!items) {
		stk__vcache_free(&c);
		return stk__errf(err, errlen, -ENOMEM, "out of memory (the video index)");
	}
	/* remote data: no video is read at create (that would fetch them all):
	 * a video's first whole read makes its record (learn) */
	v->learn = ds->remote != NULL;
	int rc = 0, fd = -1;
	uint64_t fd_name = UINT64_MAX; /* shards: the one open (entries[].name) */
	struct stat sst;               /* and its stat */
	for (int64_t i = 0; i < ds->n && !rc; i++) {
		const struct stk_entry *e = &ds->entries[i];
		const char *name = stk__entry_path(ds, i);
		struct vvid *x = &v->vid[i];
		struct stk__vcache_item *it = &items[i];
		if ((rc = key_of(l, i, key, sizeof(key))) || !(it->path = strdup(key))) {
			rc = rc ? rc : -ENOMEM;
			break;
		}
		struct stat st;
		const struct stk__vcache_item *old = (size_t)i < c.n && !strcmp(c.item[i].path, key)
							     ? &c.item[i] : NULL;
		bool have = false, there;
		if (ds->remote) { /* the object's version is in the key; its size here, and
				     dev 1: the video was seen (a record, or none possible) */
			const struct stk__robj *o = stk__remote_find(ds->remote, name);
			it->size = o ? o->size : 0;
			it->dev = 1;
			there = o != NULL && versioned(key);
		} else if (ds->shards) {
			if (fd_name != e->name) {
				if (fd >= 0)
					close(fd);
				fd_name = e->name;
				fd = openat(ds->root_fd, name, O_RDONLY | O_CLOEXEC);
				if (fd >= 0 && fstat(fd, &sst)) {
					close(fd);
					fd = -1;
				}
			}
			if ((there = fd >= 0))
				ident(&sst, it);
		} else if ((there = !fstatat(ds->root_fd, name, &st, 0))) {
			ident(&st, it);
		}
		if (old && there) {
			have = old->size == it->size && old->mtime_ns == it->mtime_ns &&
			       old->ctime_ns == it->ctime_ns && old->ino == it->ino &&
			       old->dev == it->dev && (ds->shards || it->size == e->size);
			if (have && old->words) {
				int t = take(l, x, i, old->rec, old->words, false, why, sizeof(why));
				if (t == -ENOMEM) {
					rc = t;
					break;
				}
				if (t < 0) {
					stk__loader_notice(l, "%s: the video index's record of %s is "
							   "refused (%s); made again", path, key, why);
					have = false;
				}
			}
		}
		if (ds->remote) {
			if (have) /* a record, or none (not an MP4): never learnt again */
				atomic_store(&x->state, 2);
			else
				it->dev = 0; /* not seen yet: learnt at its first read */
			v->known += have;
			it->words = x->words;
			it->rec = x->rec;
			if (x->rec)
				v->rec_bytes += x->words * 8;
			continue;
		}
		if (!have) {
			made++;
			int64_t n;
			if (ds->shards) {
				n = fd >= 0 ? slurp(fd, e->offset, e->size, &buf, &cap) : -errno;
			} else {
				int ffd = openat(ds->root_fd, name, O_RDONLY | O_CLOEXEC);
				n = ffd < 0 ? -errno : fstat(ffd, &st) ? -errno
				    : slurp(ffd, 0, (size_t)st.st_size, &buf, &cap);
				if (ffd >= 0 && l->direct) /* O_DIRECT: the data does not fit in memory */
					posix_fadvise(ffd, 0, 0, POSIX_FADV_DONTNEED);
				if (ffd >= 0)
					close(ffd);
				if (n >= 0)
					ident(&st, it);
			}
			if (n == -ENOMEM) {
				rc = -ENOMEM;
				break;
			}
			if (n < 0) /* the read says it, naming the file */
				continue;
			uint64_t want = ds->shards ? e->size : it->size;
			uint64_t *rec = NULL;
			size_t words = 0;
			int m = n == (int64_t)want && want == e->size
					? stk__vidx_make(buf, (size_t)n, &rec, &words, why, sizeof(why))
					: 1;
			if (m < 0) {
				rc = m;
				break;
			}
			if (m == 0 && (m = take(l, x, i, rec, words, true, why, sizeof(why))) == -ENOMEM) {
				rc = m;
				break;
			}
			if (m && first_none < 0) {
				first_none = i;
				snprintf(none_why, sizeof(none_why), "%.200s", n == (int64_t)want ? why :
					 "it changed while read");
			}
			it->words = x->words;
		}
		it->rec = x->rec;
		if (x->rec) {
			v->rec_bytes += x->words * 8;
		} else {
			none++;
			if (first_none < 0) {
				first_none = i;
				snprintf(none_why, sizeof(none_why), "no byte index");
			}
		}
	}
	if (fd >= 0)
		close(fd);
	if (ds->shards && l->direct) /* what the shards' reads put in the page cache */
		for (int64_t i = 0; i < ds->n; i++)
			if (i == 0 || ds->entries[i].name != ds->entries[i - 1].name) {
				int f = openat(ds->root_fd, stk__entry_path(ds, i), O_RDONLY | O_CLOEXEC);
				if (f >= 0) {
					posix_fadvise(f, 0, 0, POSIX_FADV_DONTNEED);
					close(f);
				}
			}
	free(buf);
	v->ranged = v->learn;
	for (int64_t i = 0; i < ds->n; i++)
		v->ranged |= v->vid[i].rec != NULL;
	if (!rc && cache && made && !v->learn)
		stk__vcache_write(path, items, (size_t)ds->n, 0644); /* read-only: made again */
	if (!rc && v->learn && cache && !(v->cpath = strdup(path)))
		rc = -ENOMEM;
	stk__vcache_free(&c);
	if (rc || !v->learn || !v->cpath) {
		for (int64_t i = 0; i < ds->n; i++)
			free((char *)items[i].path);
		free(items);
	} else {
		v->items = items; /* written as videos are learnt */
	}
	if (rc)
		return stk__errf(err, errlen, rc, rc == -ENAMETOOLONG ? "a video's name is too long "
				 "for the video index" : "out of memory (the video index)");
	if (none)
		stk__loader_notice(l, "%llu of %lld videos have no byte index (the first: %s: %s): "
				   "their clips are read whole", (unsigned long long)none,
				   (long long)ds->n, stk__entry_path(ds, first_none), none_why);
	return 0;
}

void stk__vloader_learn_write(struct stk__vloader *v)
{
	if (!v->cpath || !v->items)
		return;
	/* what another process wrote since (the other ranks learn the other
	 * videos) is kept where this one has none: the same key, the same
	 * object size (checked again, as every record, when loaded) */
	struct stk__vcache c = {0};
	char why[PATH_MAX + 256];
	if (stk__vcache_load(v->cpath, &c, why, sizeof(why)) != 1)
		c.n = 0;
	for (int64_t i = 0; i < v->nvid; i++) {
		struct stk__vcache_item *it = &v->items[i];
		const struct stk__vcache_item *o = (size_t)i < c.n ? &c.item[i] : NULL;
		it->rec = v->vid[i].rec;
		it->words = v->vid[i].rec ? v->vid[i].words : 0;
		it->dev = atomic_load(&v->vid[i].state) == 2;
		if (!versioned(it->path)) { /* learnt again each run */
			it->rec = NULL;
			it->words = it->dev = 0;
		} else if (!it->dev && o && o->dev == 1 && o->size == it->size && !strcmp(o->path, it->path)) {
			it->rec = o->rec;
			it->words = o->words;
			it->dev = 1;
		}
	}
	stk__vcache_write(v->cpath, v->items, (size_t)v->nvid, 0600);
	stk__vcache_free(&c);
	v->written = v->learned;
}

/* The member's bytes, which the transport checked against the object's
 * ETag and size: its later clips read only their ranges.  Once a video
 * (state), by the decode thread that got there first. */
void stk__vloader_learn(struct stk_loader *l, int64_t idx, const void *data, size_t len)
{
	struct stk__vloader *v = l->video;
	struct vvid *x = &v->vid[idx];
	int zero = 0;
	if (!atomic_compare_exchange_strong(&x->state, &zero, 1))
		return;
	const struct stk_entry *e = &l->ds->entries[idx];
	uint64_t *rec = NULL;
	size_t words = 0;
	char why[256];
	struct vvid got = {0};
	bool ok = false;
	if (len == e->size && stk__vidx_make(data, len, &rec, &words, why, sizeof(why)) == 0 &&
	    take(l, &got, idx, rec, words, true, why, sizeof(why)) == 0) { /* (rec is got's) */
		/* a room above the whole read's would not fit the slots sized for it */
		ok = got.room <= stk__loader_read_len(l, e->size);
		if (!ok)
			free(got.rec);
	}
	pthread_mutex_lock(&l->mu);
	if (ok) {
		x->words = got.words;
		x->room = got.room;
		x->rec = got.rec; /* the I/O threads see it under mu */
		v->rec_bytes += got.words * 8;
		v->learned++;
	}
	atomic_store(&x->state, 2);
	if (++v->known == (uint64_t)v->nvid && v->learned > v->written)
		stk__vloader_learn_write(v); /* every video seen: kept for the next run */
	pthread_mutex_unlock(&l->mu);
}

uint64_t stk__vloader_room(const struct stk_loader *l, int64_t idx)
{
	const struct stk__vloader *v = l->video;
	return v && v->vid && v->vid[idx].rec ? v->vid[idx].room : 0;
}
