/* fuzz_opts.h — the options and sample of one fuzzing run, from the input's
 * first 16 bytes, as fuzz_image.c draws them (fuzz_png.c, fuzz_webp.c): any
 * output size, type and layout, a random crop box or a centre crop, scale
 * and ratio ranges, a pixel limit; h[2]'s top bit is the harness's own. */
#ifndef STK_FUZZ_OPTS_H
#define STK_FUZZ_OPTS_H

#include <stdint.h>

#include "stoker/stoker.h"

#define FUZZ_HEAD 16

struct fuzz_sample {
	struct stk_image_opts o;
	uint64_t seed, epoch;
	int64_t index;
};

static inline void fuzz_opts(const uint8_t *h, struct fuzz_sample *s)
{
	struct stk_image_opts o = {.size = sizeof(o)};
	o.width = 1 + h[0] % 96;
	o.height = 1 + h[1] % 96;
	o.crop = h[2] & 1 ? STK_CROP_CENTER : STK_CROP_RANDOM_RESIZED;
	o.dtype = (enum stk_dtype)((h[2] >> 1) % 3);
	o.flags = (h[2] & 8 ? STK_IMG_NO_FLIP : 0) | (h[2] & 16 ? STK_IMG_NHWC : 0) |
		  (h[2] & 32 && o.dtype != STK_DTYPE_UINT8 ? STK_IMG_NORMALIZE : 0);
	/* valid ranges only: the options' own checks are not what is fuzzed */
	o.scale_min = 0.01f + (float)h[3] / 255.0f * 0.98f;
	o.scale_max = o.scale_min + (1.0f - o.scale_min) * (float)h[4] / 255.0f;
	o.ratio_min = 0.1f + (float)h[5] / 255.0f * 2.0f;
	o.ratio_max = o.ratio_min + (float)h[6] / 255.0f * 8.0f;
	o.crop_frac = 0.05f + (float)h[7] / 255.0f * 0.95f;
	o.max_pixels = h[2] & 64 ? 1 + (uint64_t)h[8] * 4096 : 0;
	s->o = o;
	s->seed = (uint64_t)h[9] | (uint64_t)h[10] << 8 | (uint64_t)h[11] << 16;
	s->epoch = h[12];
	s->index = (int64_t)h[13] | (int64_t)h[14] << 8 | (int64_t)h[15] << 16;
}

#endif
