/* image/resample.h — a decoded region's crop box to the output image (image/resample.c). */
#ifndef STK_RESAMPLE_H
#define STK_RESAMPLE_H

#include "base/internal.h"

/* The most SIMD the resampler may use (as far as the CPU has it): 0 plain C,
 * 1 SSE2, 2 AVX2 [2].  Tests compare the levels: they give the same bytes. */
extern int stk__image_simd;

/* Resamples the box (bx, by, bw, bh, in region pixels) of an rw×rh RGB
 * region (3 bytes a pixel, rows back to back) to o's output size, layout and
 * dtype, mirrored if flip, into out (stk__image_bytes).  0 or -ENOMEM. */
int stk__resample(const struct stk_image_opts *o, const uint8_t *rgb, int rw, int rh,
		  double bx, double by, double bw, double bh, bool flip, void *out);

#endif
