/*
 * image/span.c — the region of the source a crop box needs, for the decoders
 * that decode only a region (PNG, WebP): the box widened by the resampler's
 * reach (image/resample.c: the triangle filter's support grows with the
 * shrink factor) and a pixel, clipped to the image, as image/image.c's plan()
 * does for JPEG.
 */
#include "base/internal.h"
#include "image/span.h"

#include <math.h>

void stk__image_span(const struct stk_image_opts *o, const struct stk__box *box, int W, int H,
		     int d, struct stk__span *s)
{
	/* the filter's support in shrunk pixels */
	double fsx = box->w / d / o->width > 1 ? box->w / d / o->width : 1;
	double fsy = box->h / d / o->height > 1 ? box->h / d / o->height : 1;
	int mx = ((int)ceil(fsx) + 1) * d, my = ((int)ceil(fsy) + 1) * d;
	int x0 = (int)floor(box->x) - mx, x1 = (int)ceil(box->x + box->w) + mx;
	int y0 = (int)floor(box->y) - my, y1 = (int)ceil(box->y + box->h) + my;
	s->x0 = x0 < 0 ? 0 : x0;
	s->y0 = y0 < 0 ? 0 : y0;
	s->x1 = x1 > W ? W : x1;
	s->y1 = y1 > H ? H : y1;
}

int stk__image_shrink(const struct stk_image_opts *o, const struct stk__box *box)
{
	for (int d = 8; d > 1; d /= 2)
		if (box->w / d >= o->width && box->h / d >= o->height)
			return d;
	return 1;
}
