/* video/vindex.h — a video's byte index: found once from the whole file
 * (video/vindex.c), kept as a compact record (video/vrecord.c; the index
 * cache holds it as is, and so does the loader's memory), and the byte
 * ranges a clip needs planned from it (vrecord.c). */
#ifndef STK_VIDEO_VINDEX_H
#define STK_VIDEO_VINDEX_H

#include "base/internal.h"

#define STK__VIDX_NPK_MAX (1u << 22) /* packets, frames and runs a record holds */
#define STK__VIDX_HDR_MAX 8          /* header ranges */

/* A clip's reads: the header's ranges and the span from the keyframe at or
 * before its start to its last needed packet, merged, in file order. */
#define STK__VSPAN_MAX 9
struct stk__vspan {
	uint32_t n;
	uint64_t off[STK__VSPAN_MAX], len[STK__VSPAN_MAX];
	uint64_t bytes;  /* their sum */
};

/* The index as arrays (what stk__vidx_make found; stk__vidx_pack codes it). */
struct stk__vidx_raw {
	uint64_t size;           /* the file's */
	double fps, tb, duration_s;
	int64_t frames, start_pts;
	uint32_t width, height;  /* the video's coded frame size */
	uint32_t nhdr, npk, nkey, reorder;
	uint64_t hdr[2 * STK__VIDX_HDR_MAX]; /* nhdr x (offset, length), in file order */
	int64_t *pts;            /* npk, decode order */
	uint64_t *end;           /* npk: the furthest byte read up to packet i (exclusive) */
	uint64_t *kfirst;        /* nkey: a start frame s >= kfirst[j] (the last such j) */
	uint64_t *kpos;          /* ... reads from kpos[j] */
	uint64_t *kend;          /* ... and at least to kend[j] (its seek reads that far; 0) */
};

/* A record read back (stk__vidx_view): its facts, and where its coded
 * packets and runs lie. */
struct stk__vidx {
	uint64_t size;
	double fps, tb, duration_s;
	int64_t frames, start_pts, tick;
	uint32_t width, height;
	uint32_t nhdr, npk, nkey, reorder;
	const uint8_t *s;        /* the coded bytes: ranges, packets, runs */
	uint32_t at_pk, at_key, slen;
};

/* Finds the index of the video in src/len (the whole file): 0 and r filled
 * (free with stk__vidx_raw_free), or 1 with the reason in why when the file
 * has no byte index (not an MP4 or Matroska/WebM, fragmented, seeks that a
 * fresh demuxer would not repeat: clips of it are read whole), or <0 (out
 * of memory). */
int stk__vidx_make_raw(const uint8_t *src, size_t len, struct stk__vidx_raw *r, char *why,
		       size_t whylen);
void stk__vidx_raw_free(struct stk__vidx_raw *r);
/* Codes r as a record: 0 and *rec (malloc'd, *words 8-byte words; the
 * caller frees), or -ENOMEM / -EINVAL (r out of range). */
int stk__vidx_pack(const struct stk__vidx_raw *r, uint64_t **rec, size_t *words);
/* stk__vidx_make_raw then stk__vidx_pack. */
int stk__vidx_make(const uint8_t *src, size_t len, uint64_t **rec, size_t *words, char *why,
		   size_t whylen);
/* Checks every word and coded value of a record of `words` words against a
 * file of `size` bytes and points v into it: 0, or STK_ECORRUPT with what is
 * wrong in why. */
int stk__vidx_view(const uint64_t *rec, size_t words, uint64_t size, struct stk__vidx *v,
		   char *why, size_t whylen);
/* v again from a record stk__vidx_view accepted (no checks: O(1)). */
void stk__vidx_peek(const uint64_t *rec, struct stk__vidx *v);
/* The ranges clip `clip` (sample_seed: the sample's generator seed) needs,
 * for a decoder of `threads` frame threads. */
void stk__vidx_plan(const struct stk__vidx *v, const struct stk_video_opts *o,
		    uint64_t sample_seed, uint32_t clip, struct stk__vspan *out);
/* The most bytes any clip of these options can need. */
uint64_t stk__vidx_max_bytes(const struct stk__vidx *v, const struct stk_video_opts *o);

#endif
