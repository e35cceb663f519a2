/* image/image.h — decode and crop into batch slots (image/image.c): JPEG
 * there, PNG and WebP in image/png.c and image/webp.c, chosen by content. */
#ifndef STK_IMAGE_H
#define STK_IMAGE_H

#include "base/internal.h"

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
/* How one sample was decoded. */
struct stk__decode_info {
	int format;     /* enum stk_image_format */
	bool fast;      /* the format's crop-only path: JPEG's restart intervals covering the
			   crop only, WebP's native crop or scaling; never a PNG,
			   whose zlib stream is checked to its end */
	double entropy; /* share of the file's entropy-coded bytes the decoder went through */
};
/* 0 disables the restart-interval path (tests compare the two) [1]. */
extern int stk__image_fast;
/* 0 makes a progressive JPEG's every scan decoded to its end, also below the
 * rows the crop needs (tests compare the two) [1]. */
extern int stk__image_tail;
/* 0 leaves a multi-scan JPEG's coefficient arrays to libjpeg's own memory
 * manager instead of the thread's kept buffer (image/scratch.c; tests compare
 * the two) [1]. */
extern int stk__image_scratch;
/* Tests: sees each decoded RGB region (w×h, the box's origin in it) before
 * it is resampled [NULL]. */
extern void (*stk__image_region_hook)(const uint8_t *rgb, int w, int h, double bx, double by);
/* Decodes src into out (stk__image_bytes), with the crop box drawn from
 * sample_seed.  0, or <0 with the reason in err (STK_ECORRUPT, STK_EFORMAT,
 * STK_ETOOBIG, -ENOMEM).  info (may be NULL) says how. */
int stk__image_decode(const struct stk_image_opts *o, const uint8_t *src, size_t len,
		      uint64_t sample_seed, void *out, char *err, size_t errlen,
		      struct stk__decode_info *info);
/* The same with a given box (box NULL: drawn from sample_seed). */
int stk__image_decode_box(const struct stk_image_opts *o, const uint8_t *src, size_t len,
			  const struct stk__box *box, uint64_t sample_seed, void *out, char *err,
			  size_t errlen, struct stk__decode_info *info);

#endif
