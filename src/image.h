/* image.h — JPEG decode and crop into batch slots (image.c). */
#ifndef STK_IMAGE_H
#define STK_IMAGE_H

#include "internal.h"

/* A crop box in source pixels, and whether to mirror the output. */
struct stk__box {
	double x, y, w, h;
	bool flip;
};

/* Fills the zero fields of o with the option table's defaults and checks the
 * table's ranges: 0, or <0 with the option named in err. */
int stk__image_defaults(struct stk_image_opts *o, char *err, size_t errlen);
/* Copies the caller's options (of any older, smaller size) into dst, fills
 * the defaults and checks them: 0, or <0 with the reason in err (may be NULL). */
int stk__image_opts(struct stk_image_opts *dst, const struct stk_image_opts *src, char *err,
		    size_t errlen);
/* The checks across options (bounds in order, std > 0): 0, or <0 naming them. */
int stk__image_check(const struct stk_image_opts *o, char *err, size_t errlen);
/* Bytes of one output image. */
size_t stk__image_bytes(const struct stk_image_opts *o);
/* The generator seed of one sample: a function of (seed, epoch, index) only. */
uint64_t stk__sample_seed(uint64_t seed, uint64_t epoch, int64_t index);
/* Draws the crop box for a W×H image. */
void stk__image_box(const struct stk_image_opts *o, uint64_t sample_seed, int W, int H,
		    struct stk__box *box);
/* Decodes src into out (stk__image_bytes).  0, or <0 with the reason in err
 * (STK_ECORRUPT, STK_EFORMAT, STK_ETOOBIG, -ENOMEM). */
int stk__image_decode(const struct stk_image_opts *o, const uint8_t *src, size_t len,
		      uint64_t sample_seed, void *out, char *err, size_t errlen);

#endif
