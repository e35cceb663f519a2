/* image/span.h — the source region a crop box needs (image/span.c), for the
 * decoders that decode only a region (image/png.c, image/webp.c), and the
 * decode deadline (max_decode_time) every decoder checks. */
#ifndef STK_SPAN_H
#define STK_SPAN_H

#include "image/image.h"

/* The source pixels the resampler reads for box: columns [x0, x1), rows
 * [y0, y1) of the W×H image, the filter's support plus a pixel, when the
 * region is shrunk d times (d ≥ 1) before it is resampled. */
struct stk__span {
	int x0, y0, x1, y1;
};
void stk__image_span(const struct stk_image_opts *o, const struct stk__box *box, int W, int H,
		     int d, struct stk__span *s);
/* The largest of 8, 4, 2 that keeps box at least the output's size once
 * shrunk by it, else 1 (for a decoder that shrinks natively, as JPEG's DCT
 * scaling and libwebp's rescaler do). */
int stk__image_shrink(const struct stk_image_opts *o, const struct stk__box *box);

/* max_decode_time, in the decoding thread's own CPU time: set at the
 * decode's start, checked between pieces of its work (JPEG: libjpeg's
 * progress calls; PNG: rows; WebP: pieces of the file fed to libwebp). */
struct stk__deadline {
	uint64_t cpu0, max_ns;
};
void stk__deadline_start(struct stk__deadline *d, const struct stk_image_opts *o);
/* Whether the decode has run past it: a system call, so once per few
 * milliseconds of work, not per pixel. */
bool stk__deadline_passed(const struct stk__deadline *d);
/* The error of a decode stopped there, naming the format, the image's size
 * and the limit: STK_ETOOBIG. */
int stk__deadline_error(const struct stk__deadline *d, const char *format, unsigned W, unsigned H,
			char *err, size_t errlen);

#endif
