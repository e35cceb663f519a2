/*
 * dataset/sidx.c — one tar shard's index as bytes (dataset/sidx.h): a
 * header (magic, the object's size and ETag, counts, an FNV-1a checksum over
 * all of it), then an entry per sample (size, offset, label, header tag),
 * then the bad records as the builder keeps them (NUL-separated strings).
 * Never trusted blindly: magic, lengths and checksum are checked, and an
 * index is used only for the object version (size and ETag) it names.
 */
#include "dataset/sidx.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIDX_MAGIC "STKRSH02" /* 02: each member's header tag */

struct sidx_head {
	char magic[8];
	uint64_t size;
	char etag[96];
	uint64_t n, nbad, bad_len, checksum;
};

struct sidx_ent {
	uint64_t size, offset;
	int64_t label;
	uint64_t tag; /* its tar header's (stk__tar_header_tag): the loader's check */
};

static uint64_t sidx_sum(const struct sidx_head *h, const void *rest, size_t len)
{
	struct sidx_head c = *h;
	c.checksum = 0;
	return stk__fnv1a(stk__fnv1a(0xcbf29ce484222325ull, &c, sizeof(c)), rest, len);
}

int stk__sidx_encode(const struct builder *b, uint64_t size, const char *etag, void **out,
		     size_t *len)
{
	size_t elen = (size_t)b->n * sizeof(struct sidx_ent);
	*len = sizeof(struct sidx_head) + elen + b->bad.len;
	char *p = calloc(1, *len);
	if (!(*out = p))
		return -ENOMEM;
	struct sidx_head h = {.size = size, .n = (uint64_t)b->n, .nbad = b->nbad,
			      .bad_len = b->bad.len};
	memcpy(h.magic, SIDX_MAGIC, 8);
	snprintf(h.etag, sizeof(h.etag), "%s", etag);
	char *rest = p + sizeof(h);
	struct sidx_ent *e = (void *)rest;
	for (int64_t i = 0; i < b->n; i++)
		e[i] = (struct sidx_ent){b->e[i].size, b->e[i].offset, b->e[i].label, b->e[i].tag};
	if (b->bad.len)
		memcpy(rest + elen, b->bad.p, b->bad.len);
	h.checksum = sidx_sum(&h, rest, elen + b->bad.len);
	memcpy(p, &h, sizeof(h));
	return 0;
}

int stk__sidx_decode(struct builder *b, const char *rel, const void *p, size_t len,
		     uint64_t size, const char *etag, char *why, size_t whylen)
{
	struct sidx_head h;
	if (len < sizeof(h) || memcmp(p, SIDX_MAGIC, 8)) {
		snprintf(why, whylen, "not a stoker shard index (%s)",
			 len < sizeof(h) ? "too short" : "another magic");
		return STK_EINDEX;
	}
	memcpy(&h, p, sizeof(h));
	h.etag[sizeof(h.etag) - 1] = 0;
	const char *rest = (const char *)p + sizeof(h);
	len -= sizeof(h);
	if (h.n > len / sizeof(struct sidx_ent) || h.bad_len > len ||
	    h.n * sizeof(struct sidx_ent) + h.bad_len != len || sidx_sum(&h, rest, len) != h.checksum ||
	    (h.bad_len && rest[len - 1])) {
		snprintf(why, whylen, "damaged (its lengths or checksum disagree)");
		return STK_EINDEX;
	}
	if (h.size != size || strcmp(h.etag, etag)) {
		snprintf(why, whylen, "it is for ETag %s, %llu bytes; the object is now %s, %llu "
			 "bytes", h.etag[0] ? h.etag : "none", (unsigned long long)h.size,
			 etag[0] ? etag : "none", (unsigned long long)size);
		return 1;
	}
	uint64_t name;
	if (stk__buf_add(&b->names, rel, strlen(rel), &name))
		return -ENOMEM;
	const struct sidx_ent *e = (const void *)rest;
	for (uint64_t i = 0; i < h.n; i++) {
		struct sidx_ent x;
		memcpy(&x, &e[i], sizeof(x)); /* the bytes of a download need not be aligned */
		if (x.offset > size || x.size > size - x.offset || x.label < -1) {
			snprintf(why, whylen, "damaged (sample %llu lies outside the %llu-byte shard)",
				 (unsigned long long)i, (unsigned long long)size);
			return STK_EINDEX;
		}
		if (stk__build_add_entry(b, name, x.size, x.label, x.offset, x.tag))
			return -ENOMEM;
	}
	if (h.bad_len) {
		if (!(b->bad.p = malloc(h.bad_len)))
			return -ENOMEM;
		memcpy(b->bad.p, rest + h.n * sizeof(struct sidx_ent), h.bad_len);
		b->bad.len = b->bad.cap = h.bad_len;
		b->nbad = h.nbad;
	}
	return 0;
}
