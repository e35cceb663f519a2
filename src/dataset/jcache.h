/* dataset/jcache.h — the loader's own rewrites of a folder's JPEGs
 * (dataset/jcache.c): one file a JPEG in the cache folder, its source's
 * identity and its own checksum in a header before the rewritten bytes. */
#ifndef STK_DATASET_JCACHE_H
#define STK_DATASET_JCACHE_H

#include "base/internal.h"

#include <stdatomic.h>
#include <sys/stat.h>

/* The header before a copy's JPEG bytes (little-endian words). */
#define STK_JCACHE_HDR 80

/* A sample's state in this process: not looked at yet, no copy (the file is
 * read, and a copy made after its decode), never (not a JPEG, or nothing to
 * gain), being made, or a trusted copy of (state - STK_JC_COPY) bytes. */
enum { STK_JC_UNKNOWN = 0, STK_JC_NONE, STK_JC_NEVER, STK_JC_MAKING, STK_JC_COPY };

struct stk__jcache {
	char *dir;              /* <cache folder>/jpeg/<key of the dataset's root> */
	size_t dlen, plen;      /* its length; a copy's path's, NUL included */
	int64_t n;              /* samples */
	_Atomic uint32_t *state; /* per sample: STK_JC_* (+ length) */
	_Atomic uint32_t refused; /* copies refused so far (the first few are named) */
	_Atomic uint32_t made;    /* copies written by this process */
};

/* Opens (makes) the copies' folder of the dataset at root (absolute) under
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
/* Writes the copy of a source (its stat) at path: a temporary name in the
 * folder, renamed into place, 0600.  Its length (header included), or <0. */
int64_t stk__jcache_write(const char *path, const struct stat *src, const void *jpeg,
			  size_t jlen);

#endif
