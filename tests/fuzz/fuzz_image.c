/* fuzz_image.c — libFuzzer target for the JPEG path: stk_image_decode with
 * the options and the sample's (seed, epoch, index) taken from the input's
 * first 16 bytes, so every run draws another random crop box (or centre
 * crop), output size, type, layout, scale and ratio range, and the restart
 * interval fast path on or off; the rest is the JPEG.  What the loader
 * relies on: a defined return (0, STK_ECORRUPT, STK_EFORMAT, STK_ETOOBIG,
 * -ENOMEM), a message on failure, no read past the data, no write past the
 * output.  Built and run by `make fuzz` (clang); tests/test_fuzz.c replays
 * tests/fuzz/image_corpus in every `make test`, with any C compiler. */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "image/image.h"
#include "stoker/stoker.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_IMAGE_HEAD 16

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < FUZZ_IMAGE_HEAD)
		return 0;
	const uint8_t *h = data;
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
	stk__image_fast = h[2] >> 7;
	uint64_t seed = (uint64_t)h[9] | (uint64_t)h[10] << 8 | (uint64_t)h[11] << 16;
	uint64_t epoch = h[12];
	int64_t index = (int64_t)h[13] | (int64_t)h[14] << 8 | (int64_t)h[15] << 16;
	size_t len = size - FUZZ_IMAGE_HEAD;
	/* the JPEG in a buffer of exactly its size: ASan sees any read past it */
	uint8_t *jpg = malloc(len ? len : 1);
	size_t ob = stk_image_bytes(&o);
	uint8_t *out = malloc(ob);
	if (!jpg || !out)
		abort();
	memcpy(jpg, data + FUZZ_IMAGE_HEAD, len);
	char err[256];
	err[0] = 0;
	int rc = stk_image_decode(&o, jpg, len, seed, epoch, index, out, err, sizeof(err));
	if (rc != 0 && rc != STK_ECORRUPT && rc != STK_EFORMAT && rc != STK_ETOOBIG &&
	    rc != -ENOMEM)
		abort();
	if (rc != 0 && (!err[0] || !memchr(err, 0, sizeof(err))))
		abort(); /* a failure always says why */
	if (rc == 0) { /* every byte of the output written: reading it is defined */
		volatile uint8_t sink = 0;
		for (size_t i = 0; i < ob; i++)
			sink ^= out[i];
		(void)sink;
	}
	stk__image_fast = 1;
	free(jpg);
	free(out);
	return 0;
}
