/* dataset/jcache.h — the loader's own rewrites of a folder's JPEGs
 * (dataset/jcache.c): one file a JPEG in the cache folder, its source's
 * identity and its own checksum in a header before the rewritten bytes. */
#ifndef STK_DATASET_JCACHE_H
#define STK_DATASET_JCACHE_H

#include "base/internal.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <sys/stat.h>

struct stk_dataset;

/* The header before a copy's JPEG bytes (little-endian words). */
#define STK_JCACHE_HDR 80

/* A sample's state in this process: not looked at yet, no copy (the file is
 * read, and a copy made after its decode), never (not a JPEG, or nothing to
 * gain), being made, or a trusted copy of (state - STK_JC_COPY) bytes. */
enum { STK_JC_UNKNOWN = 0, STK_JC_NONE, STK_JC_NEVER, STK_JC_MAKING, STK_JC_COPY };

struct stk__jcache {
	char *dir;              /* <cache folder>/jpeg/<key of its folder or list> */
	char *root;             /* that folder or list (absolute) */
	size_t dlen, plen;      /* its length; a copy's path's, NUL included */
	int64_t n;              /* samples */
	_Atomic uint32_t *state; /* per sample: STK_JC_* (+ length) */
	_Atomic uint32_t refused; /* copies refused so far (the first few are named) */
	_Atomic uint32_t made;    /* copies written by this process */
	uint64_t limit;           /* jpeg_cache_limit: all datasets' copies' bytes at most */
	uint64_t others;          /* the other datasets' copies' bytes, at the sweep */
	_Atomic uint64_t used;    /* all copies' bytes now (the sweep's, then this run's) */
	bool swept;               /* the sweep ran: the folder's record is written at close */
	_Atomic bool stopped;     /* no more copies this run: the limit, or a full disk */
	_Atomic bool said;        /* and that was said */
};

/* What stk__jcache_sweep found and did. */
struct stk__jcache_sweep {
	uint64_t kept, kept_bytes;       /* copies of the dataset's files, kept */
	uint64_t orphans, orphan_bytes;  /* copies of no file of the dataset: removed */
	uint64_t evicted, evicted_bytes; /* copies above the limit: removed */
	uint64_t temps;                  /* a dead writer's temporary files: removed */
	uint64_t others_bytes;           /* the other datasets' copies, as last counted */
	uint64_t gone, gone_bytes, gone_sets; /* copies (and folders) of datasets gone: removed */
};

/* Opens (makes) the copies' folder of the dataset whose key is root (its
 * folder, or its file list: absolute) under
 * cache_dir (NULL: the user's cache folder), refused when it or a folder
 * above it in the cache is another user's or writable by others: 0, or <0
 * with the reason, naming the folder, in why. */
int stk__jcache_open(struct stk__jcache *jc, const char *cache_dir, const char *root, int64_t n,
		     char *why, size_t whylen);
void stk__jcache_close(struct stk__jcache *jc);
/* The copy's path of the sample at relative (or absolute) path rel, in buf
 * (jc->plen bytes). */
void stk__jcache_path(const struct stk__jcache *jc, const char *rel, char *buf);
/* Looks at the copy at path: its length (header included) when it is there
 * and trusted (a regular file, this user's, not writable by others), 0 when
 * there is none, <0 (refused) with the reason in why. */
int64_t stk__jcache_look(const char *path, char *why, size_t whylen);
/* Checks a copy's bytes (len, header included) against the source's stat
 * now: 0 and the JPEG's bytes in *jpeg / *jlen, or STK_ECORRUPT / -ESTALE
 * with the reason in why. */
int stk__jcache_check(const uint8_t *buf, size_t len, const struct stat *src,
		      const uint8_t **jpeg, size_t *jlen, char *why, size_t whylen);
/* At create, before any read: the copies' folder of a dataset (ds, its
 * entries) walked once; a copy whose name is no file's of the dataset now
 * (the file removed or renamed) is removed, and so is a writer's temporary
 * file older than a minute; the copies kept are counted in jc->used with
 * the other datasets' in the cache (stk__jcache_others: the folders of
 * datasets gone are removed) and, when all are above jc->limit (lowered
 * since, or the others grew), this dataset's removed until under it.  Only
 * regular files with a copy's or a temporary's name are touched.  A limit
 * of 0 (auto) becomes a quarter of the free space where the copies live
 * plus what all datasets' take, at most 100 GiB.  0 or
 * -ENOMEM / -errno (the folder unreadable). */
int stk__jcache_sweep(struct stk__jcache *jc, const struct stk_dataset *ds,
		      struct stk__jcache_sweep *out);
/* dataset/jcroom.c: a copy's name ("%016llx.jpg") read back (its hash), and
 * a writer's temporary's name (a copy's, then ".<pid>.<n>.tmp"). */
bool stk__jcache_name(const char *name, uint64_t *h);
bool stk__jcache_temp_name(const char *name);
/* Writes the folder's record: its dataset's path (jc->root) and the bytes its
 * copies take, for the other datasets' sweeps to count (best effort). */
void stk__jcache_record(const struct stk__jcache *jc, uint64_t bytes);
/* Walks the cache's other datasets' folders (by their records; one without
 * is walked): those whose dataset is gone (ENOENT, by a record this
 * machine wrote) are emptied of stoker's names and removed (out->gone*), the others' bytes summed in
 * out->others_bytes.  0, or -errno when the cache's folder is unreadable. */
int stk__jcache_others(const struct stk__jcache *jc, struct stk__jcache_sweep *out);
/* Takes room for a copy of len bytes under the limit: false when it does not
 * fit (then no more copies are made this run: jc->stopped). */
bool stk__jcache_reserve(struct stk__jcache *jc, uint64_t len);
/* Gives back room taken (a copy not written, or removed). */
void stk__jcache_release(struct stk__jcache *jc, uint64_t len);
/* Writes the copy of a source (its stat) at path: a temporary name in the
 * folder, renamed into place, 0600.  Its length (header included), or <0. */
int64_t stk__jcache_write(const char *path, const struct stat *src, const void *jpeg,
			  size_t jlen);

#endif
