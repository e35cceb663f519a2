/* image/box.h — what every format's decoder shares (image/box.c): the
 * per-sample generator, the crop box, the region a box needs. */
#ifndef STK_BOX_H
#define STK_BOX_H

#include "base/internal.h"

/* A crop box in source pixels, and whether to mirror the output. */
struct stk__box {
	double x, y, w, h;
	bool flip;
};

/* The generator seed of one sample: a function of (seed, epoch, index) only. */
uint64_t stk__sample_seed(uint64_t seed, uint64_t epoch, int64_t index);
/* Draws the crop box for a W×H image. */
void stk__image_box(const struct stk_image_opts *o, uint64_t sample_seed, int W, int H,
		    struct stk__box *box);

/* The source pixels the resampler reads for box: columns [x0, x1), rows
 * [y0, y1) of the W×H image, the filter's support plus a pixel, when the
 * region is shrunk d times (d ≥ 1) before it is resampled. */
struct stk__span {
	int x0, y0, x1, y1;
};
void stk__image_span(const struct stk_image_opts *o, const struct stk__box *box, int W, int H,
		     int d, struct stk__span *s);
/* The largest of 8, 4, 2 that keeps box at least the output's size once
 * shrunk by it, else 1 (a decoder that scales natively: JPEG, WebP). */
int stk__image_shrink(const struct stk_image_opts *o, const struct stk__box *box);

/* How one sample was decoded. */
struct stk__decode_info {
	int format;     /* enum stk_image_format */
	bool fast;      /* the format's crop-only path: JPEG's restart intervals, WebP's
			   native crop or scale, a PNG left undecoded below the crop */
	double entropy; /* share of the file's coded data the decoder went through */
};

/* Tests: sees each decoded RGB region (w×h, the box's origin in it) before
 * it is resampled [NULL]. */
extern void (*stk__image_region_hook)(const uint8_t *rgb, int w, int h, double bx, double by);

#endif
