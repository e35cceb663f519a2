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

#include "fuzz_opts.h"
#include "image/image.h"
#include "stoker/stoker.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_IMAGE_HEAD FUZZ_HEAD

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < FUZZ_IMAGE_HEAD)
		return 0;
	const uint8_t *h = data;
	struct fuzz_sample s;
	fuzz_opts(h, &s); /* the head: the options and the sample (fuzz_opts.h) */
	struct stk_image_opts o = s.o;
	uint64_t seed = s.seed, epoch = s.epoch;
	int64_t index = s.index;
	stk__image_fast = h[2] >> 7;
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
