/* image/jpeg_rst.h — restart intervals of a baseline JPEG: where they are, and a
 * smaller JPEG made of only some of them (image/jpeg_rst.c).  Byte-level only (no
 * libjpeg), so it can be fuzzed on its own (tests/fuzz/fuzz_rst.c). */
#ifndef STK_JPEG_RST_H
#define STK_JPEG_RST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The layout of a single-scan Huffman JPEG whose restart intervals tile its
 * MCU rows: either `restart` divides `mcux` (intervals side by side, a row
 * split into mcux / restart of them) or mcux divides `restart` (each interval
 * is restart / mcux whole rows). */
struct stk__jpeg_rst {
	uint32_t width, height;  /* pixels, from the frame header */
	uint32_t ncomp;          /* components, all in the one scan */
	uint32_t mcu_w, mcu_h;   /* MCU size in pixels: 8·hmax × 8·vmax, 8 × 8 for one component */
	uint32_t mcux, mcuy;     /* MCUs per row, MCU rows */
	uint32_t restart;        /* MCUs per interval (DRI) */
	uint32_t nint;           /* intervals: ceil(mcux · mcuy / restart) */
	size_t sof;              /* offset of the frame header's precision byte (height, width follow) */
	size_t scan;             /* first byte of entropy-coded data (after the SOS header) */
	size_t scan_end;         /* the EOI marker after the last interval */
	/* off[i]: first byte of interval i's data; off[nint] = scan_end + 2.  Interval
	 * i's data is [off[i], off[i + 1] - 2), fill bytes before its marker left out. */
	size_t *off;
};

/* Finds the restart intervals of the JPEG in src.  1 when they tile the MCU
 * rows (*r filled; free with stk__jpeg_rst_free), 0 when the file is not such
 * a JPEG (no DRI, progressive or arithmetic-coded, several scans, intervals
 * that straddle rows, a restart marker missing, out of sequence or too many,
 * no EOI: why says which; the caller decodes it the ordinary way), -ENOMEM. */
int stk__jpeg_rst_scan(const uint8_t *src, size_t len, struct stk__jpeg_rst *r, char *why,
		       size_t whylen);
void stk__jpeg_rst_free(struct stk__jpeg_rst *r);

/* Bytes of entropy-coded data in intervals [a, b), markers left out. */
uint64_t stk__jpeg_rst_bytes(const struct stk__jpeg_rst *r, uint32_t a, uint32_t b);

/* A rectangle of whole intervals: MCU columns [c0, c1) and rows [r0, r1).
 * stk__jpeg_rst_box rounds any rectangle out to one (true), or says it
 * cannot (false: empty or out of the image). */
struct stk__jpeg_sub {
	uint32_t c0, c1, r0, r1;
};
bool stk__jpeg_rst_box(const struct stk__jpeg_rst *r, struct stk__jpeg_sub *s);

/* Bytes stk__jpeg_rst_build writes for s with `pad` zero bytes after each
 * interval and `tail` after EOI; 0 if s is not a rectangle of whole intervals. */
size_t stk__jpeg_rst_build_len(const struct stk__jpeg_rst *r, const struct stk__jpeg_sub *s,
			       size_t pad, size_t tail);
/* Writes into out (stk__jpeg_rst_build_len bytes) a JPEG of the sub-image s:
 * src's headers up to the scan with the frame's height and width made the
 * sub-image's, then s's intervals in raster order, each followed by `pad`
 * zero bytes and its restart marker (renumbered from RST0; EOI after the
 * last), then `tail` zero bytes.  Decoded, its pixels are those of the same
 * MCUs of src (edges aside: upsampling sees no neighbours beyond the
 * sub-image).  If starts is not NULL it receives, for each interval written
 * (k of them, k = stk__jpeg_rst_count), its offset in out, and starts[k] the
 * offset just past EOI: interval i's data is [starts[i], starts[i + 1] - 2 -
 * pad).  Returns the length written, or 0 if s is not a rectangle of whole
 * intervals. */
size_t stk__jpeg_rst_build(const uint8_t *src, const struct stk__jpeg_rst *r,
			   const struct stk__jpeg_sub *s, size_t pad, size_t tail, uint8_t *out,
			   size_t *starts);
/* Intervals in s, and the index in src of the sub-image's k-th interval. */
uint32_t stk__jpeg_rst_count(const struct stk__jpeg_rst *r, const struct stk__jpeg_sub *s);
uint32_t stk__jpeg_rst_index(const struct stk__jpeg_rst *r, const struct stk__jpeg_sub *s,
			     uint32_t k);

#endif
