/*
 * image/box.c — the crop box every format's decoder draws, and the region
 * it needs.  The box comes from a generator seeded by (seed, epoch, sample
 * index) only, so a batch is bit-identical whatever the thread count:
 * torchvision's RandomResizedCrop.get_params, or Resize(short side) +
 * CenterCrop expressed in source pixels.  A decoder then decodes the box's
 * span (the filter's reach around it) and resamples it (image/resample.c).
 */
#include "base/internal.h"
#include "image/box.h"

#include <math.h>

void (*stk__image_region_hook)(const uint8_t *rgb, int w, int h, double bx, double by);

struct rng {
	uint64_t s;
};

static double uniform(struct rng *r) /* [0, 1) */
{
	r->s += 0x9e3779b97f4a7c15ull;
	return (double)(stk__mix64(r->s) >> 11) * 0x1.0p-53;
}

static int randint(struct rng *r, int lo, int hi) /* inclusive, like torch.randint(lo, hi+1) */
{
	return lo + (int)(uniform(r) * (double)(hi - lo + 1));
}

uint64_t stk__sample_seed(uint64_t seed, uint64_t epoch, int64_t index)
{
	return stk__mix64(seed ^ stk__mix64(epoch ^ stk__mix64((uint64_t)index + 0x632be59bd9b4e019ull)));
}

/* The crop box in source pixels: torchvision's RandomResizedCrop.get_params
 * (ten tries, then the centre-crop fallback), or Resize(short side) +
 * CenterCrop expressed in source coordinates. */
void stk__image_box(const struct stk_image_opts *o, uint64_t sample_seed, int W, int H,
		    struct stk__box *box)
{
	struct rng r = {sample_seed};
	box->flip = false;
	if (o->crop == STK_CROP_CENTER) {
		/* torchvision: Resize(S) gives the short side S and the long side
		 * int(S × long / short); CenterCrop offsets are int(round(d / 2)) with
		 * Python's round half to even (nearbyint's default). */
		int S = (int)lround((o->width < o->height ? o->width : o->height) / o->crop_frac);
		int nw = W <= H ? S : (int)((double)S * W / H);
		int nh = W <= H ? (int)((double)S * H / W) : S;
		double sx = (double)W / nw, sy = (double)H / nh;
		box->x = nearbyint((nw - (double)o->width) / 2.0) * sx;
		box->y = nearbyint((nh - (double)o->height) / 2.0) * sy;
		box->w = o->width * sx;
		box->h = o->height * sy;
	} else {
		double area = (double)W * H;
		double lr0 = log(o->ratio_min), lr1 = log(o->ratio_max);
		bool found = false;
		for (int t = 0; t < 10 && !found; t++) {
			double target = area * (o->scale_min + uniform(&r) * (o->scale_max - o->scale_min));
			double aspect = exp(lr0 + uniform(&r) * (lr1 - lr0));
			int w = (int)lround(sqrt(target * aspect));
			int h = (int)lround(sqrt(target / aspect));
			if (w > 0 && w <= W && h > 0 && h <= H) {
				box->y = randint(&r, 0, H - h);
				box->x = randint(&r, 0, W - w);
				box->w = w;
				box->h = h;
				found = true;
			}
		}
		if (!found) {
			double in_ratio = (double)W / H;
			int w = W, h = H;
			if (in_ratio < o->ratio_min)
				h = (int)lround(w / o->ratio_min);
			else if (in_ratio > o->ratio_max)
				w = (int)lround(h * o->ratio_max);
			box->x = (W - w) / 2;
			box->y = (H - h) / 2;
			box->w = w;
			box->h = h;
		}
		if (!(o->flags & STK_IMG_NO_FLIP))
			box->flip = uniform(&r) < 0.5;
	}
}

void stk__image_span(const struct stk_image_opts *o, const struct stk__box *box, int W, int H,
		     int d, struct stk__span *s)
{
	/* the filter's support in shrunk pixels (image/image.c's plan() for JPEG) */
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
