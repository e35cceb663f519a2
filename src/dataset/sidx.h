/* sidx.h — one tar shard's index as bytes: the members' sizes, offsets,
 * labels and header tags, the bad records, and the size and ETag of the
 * object it was built from.  The same bytes are the local cache of a remote
 * shard's index (dataset/remote.c) and the index `stoker pack` uploads
 * beside each shard (dataset/upload.c, NAME.tar.stoker-index). */
#ifndef STK_DATASET_SIDX_H
#define STK_DATASET_SIDX_H

#include "dataset/build.h"

/* The name of the index beside a shard: the shard's name and this. */
#define SIDX_SUFFIX ".stoker-index"

/* The index the builder b holds (one shard, built as its only one) for an
 * object of size bytes with etag, into a malloc'ed *out of *len bytes.
 * 0 or -ENOMEM. */
int stk__sidx_encode(const struct builder *b, uint64_t size, const char *etag, void **out,
		     size_t *len);
/* The index in p (len bytes) into b, the shard named rel, when it was built
 * for an object of size bytes with etag: 0; 1 when it is another version's
 * (why says which); STK_EINDEX when damaged (why says how); -ENOMEM. */
int stk__sidx_decode(struct builder *b, const char *rel, const void *p, size_t len,
		     uint64_t size, const char *etag, char *why, size_t whylen);

#endif
