/* image/span.h — the source region a crop box needs (image/span.c), for the
 * decoders that decode only a region (image/png.c, image/webp.c). */
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

#endif
