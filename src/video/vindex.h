/* video/vindex.h — a video's byte index (video/vindex.c): made once from the
 * whole file, kept as a flat record (the index cache holds it), and the byte
 * ranges a clip needs planned from it. */
#ifndef STK_VIDEO_VINDEX_H
#define STK_VIDEO_VINDEX_H

#include "base/internal.h"

/* A clip's reads: the header's ranges and the span from the keyframe at or
 * before its start to its last needed packet, merged, in file order. */
#define STK__VSPAN_MAX 9
struct stk__vspan {
	uint32_t n;
	uint64_t off[STK__VSPAN_MAX], len[STK__VSPAN_MAX];
	uint64_t bytes;  /* their sum */
};

/* A record read back (stk__vidx_view): pointers into it. */
struct stk__vidx {
	uint64_t size;          /* the file's */
	double fps, tb, duration_s;
	int64_t frames, start_pts;
	uint32_t nhdr, npk, nkey, reorder;
	const uint64_t *hdr;    /* nhdr x (offset, length) */
	const int64_t *pts;     /* npk, decode order */
	const uint64_t *end;    /* npk: the furthest byte of packets 0..i (exclusive) */
	const uint64_t *kfirst; /* nkey: a start frame s >= kfirst[j] (the last such j) */
	const uint64_t *kpos;   /* ... reads from kpos[j] (where FFmpeg's seek lands) */
};

/* Makes the record of the video in src/len (the whole file): 0 and *rec
 * (malloc'd, *words 8-byte words; the caller frees), or 1 with the reason
 * in why when the file has no byte index (not an MP4, fragmented, cut
 * short: clips of it are read whole), or <0 (out of memory). */
int stk__vidx_make(const uint8_t *src, size_t len, uint64_t **rec, size_t *words, char *why,
		   size_t whylen);
/* Checks a record of `words` words against a file of `size` bytes and
 * points v into it: 0, or STK_ECORRUPT with what is wrong in why. */
int stk__vidx_view(const uint64_t *rec, size_t words, uint64_t size, struct stk__vidx *v,
		   char *why, size_t whylen);
/* The ranges clip `clip` (sample_seed: the sample's generator seed) needs,
 * for a decoder of `threads` frame threads. */
void stk__vidx_plan(const struct stk__vidx *v, const struct stk_video_opts *o,
		    uint64_t sample_seed, uint32_t clip, struct stk__vspan *out);
/* The most bytes any clip of these options can need. */
uint64_t stk__vidx_max_bytes(const struct stk__vidx *v, const struct stk_video_opts *o);

#endif
