/*
 * image/span.c — the region of the source a crop box needs, for the decoders
 * that decode only a region (PNG, WebP): the box widened by the resampler's
 * reach (image/resample.c: the triangle filter's support grows with the
 * shrink factor) and a pixel, clipped to the image, as image/image.c's plan()
 * does for JPEG.  And the decode deadline the decoders share: the decoding
 * thread's CPU time (CLOCK_THREAD_CPUTIME_ID), so that a decode thread
 * that waits for a core is not stopped for the trainer's use of it.
 */
#include "base/internal.h"
#include "image/span.h"

#include <math.h>
#include <stdio.h>
#include <time.h>

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

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;
	if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts))
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void stk__deadline_start(struct stk__deadline *d, const struct stk_image_opts *o)
{
	d->max_ns = o->max_decode_ns ? o->max_decode_ns : UINT64_MAX;
	d->cpu0 = thread_cpu_ns();
}

bool stk__deadline_passed(const struct stk__deadline *d)
{
	return d->max_ns != UINT64_MAX && thread_cpu_ns() - d->cpu0 > d->max_ns;
}

int stk__deadline_error(const struct stk__deadline *d, const char *format, unsigned W, unsigned H,
			char *err, size_t errlen)
{
	snprintf(err, errlen, "%s of %ux%u still decoding after %.3g s of CPU time "
		 "(max_decode_time): refused", format, W, H, (double)d->max_ns / 1e9);
	return STK_ETOOBIG;
}
