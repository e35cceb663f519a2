/* dataset/vcache.h — the video index's cache file (dataset/vcache.c): one
 * record a video, its file's identity beside its byte index's words. */
#ifndef STK_DATASET_VCACHE_H
#define STK_DATASET_VCACHE_H

#include "base/internal.h"

struct stk__vcache_item {
	const char *path;        /* under the dataset's root */
	uint64_t size, mtime_ns, ctime_ns, ino, dev; /* the file's, when indexed */
	const uint64_t *rec;     /* its byte index (video/vindex.h); words 0: none */
	uint64_t words;
};

struct stk__vcache {
	struct stk__vcache_item *item;
	size_t n;
	uint64_t *words;         /* the file's payload, which the items point into */
};

/* Loads the cache file at path: 1 and c filled, 0 when there is none, or <0
 * (STK_ECORRUPT: damaged or altered; -EPERM: not the user's, or writable by
 * others) with the reason, naming the file, in why.  Free with
 * stk__vcache_free (safe on a zeroed c). */
int stk__vcache_load(const char *path, struct stk__vcache *c, char *why, size_t whylen);
void stk__vcache_free(struct stk__vcache *c);
/* Writes n items to path (a temporary name renamed into place, with mode:
 * 0644 beside the index cache, 0600 for remote data's): 0 or -errno. */
int stk__vcache_write(const char *path, const struct stk__vcache_item *items, size_t n,
		      mode_t mode);

#endif
