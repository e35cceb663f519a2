/*
 * image/opts.c — image mode's options and the crop box: the option table's
 * defaults and the checks its ranges cannot say, the bytes an image takes,
 * the per-sample generator seeded by (seed, epoch, sample index), and the box
 * a sample is cropped to (torchvision's RandomResizedCrop, or resize-short-
 * side + centre crop), drawn before anything is decoded (image/image.c for
 * JPEG, image/png.c, image/webp.c; video/clip.c takes one box a clip).
 */
#include "base/internal.h"
#include "image/image.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

int stk__image_defaults(struct stk_image_opts *o, char *err, size_t errlen)
{
	/* one side given: the image is square */
	if (!o->height)
		o->height = o->width;
	if (!o->width)
		o->width = o->height;
	int rc = stk__opts_apply(STK_OPT_IMAGE, o, err, errlen);
	if (rc < 0)
		return rc;
	if (!(o->flags & STK_IMG_NORMALIZE))
		for (int c = 0; c < 3; c++) {
			o->mean[c] = 0;
			o->std[c] = 1;
		}
	return 0;
}

/* What the table's ranges cannot say: the order of the bounds and std > 0. */
int stk__image_check(const struct stk_image_opts *o, char *err, size_t errlen)
{
	if (!(o->scale_min <= o->scale_max) || !(o->ratio_min <= o->ratio_max)) {
		snprintf(err, errlen, "image crop parameters out of order: scale_min %g > scale_max "
				      "%g, or ratio_min %g > ratio_max %g",
			 o->scale_min, o->scale_max, o->ratio_min, o->ratio_max);
		return -ERANGE;
	}
	if ((o->flags & STK_IMG_NORMALIZE) && o->dtype == STK_DTYPE_UINT8) {
		snprintf(err, errlen, "normalize: needs dtype float32 or float16 (uint8 images hold "
				      "0..255)");
		return -EINVAL;
	}
	for (int c = 0; c < 3; c++)
		if ((o->flags & STK_IMG_NORMALIZE) && !(o->std[c] > 0)) {
			snprintf(err, errlen, "std: each value must be > 0, not %g (channel %d)",
				 o->std[c], c);
			return -ERANGE;
		}
	return 0;
}

size_t stk__image_bytes(const struct stk_image_opts *o)
{
	size_t elem = o->dtype == STK_DTYPE_FLOAT32 ? 4 : o->dtype == STK_DTYPE_FLOAT16 ? 2 : 1;
	return (size_t)o->width * o->height * 3 * elem;
}

/* --- the per-sample generator ------------------------------------------- */

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

/* --- public ---------------------------------------------------------------- */

int stk__image_opts(struct stk_image_opts *dst, const struct stk_image_opts *src, char *err,
		    size_t errlen)
{
	char scratch[256]; /* the message is dropped; sized so it is not cut */
	memset(dst, 0, sizeof(*dst));
	/* the caller's struct may be older (smaller) than ours */
	memcpy(dst, src, src->size && src->size < sizeof(*dst) ? src->size : sizeof(*dst));
	dst->size = sizeof(*dst);
	if (!err) {
		err = scratch;
		errlen = sizeof(scratch);
	}
	int rc = stk__image_defaults(dst, err, errlen);
	return rc < 0 ? rc : stk__image_check(dst, err, errlen);
}

int stk_image_opts_check(const struct stk_image_opts *opts, char *err, size_t errlen)
{
	struct stk_image_opts o;
	return stk__image_opts(&o, opts, err, errlen);
}

size_t stk_image_bytes(const struct stk_image_opts *opts)
{
	struct stk_image_opts o;
	stk__image_opts(&o, opts, NULL, 0);
	return stk__image_bytes(&o);
}
