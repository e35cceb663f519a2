/* fuzz_png.c — libFuzzer target for the PNG path (image/png.c, libpng):
 * stk__image_decode (the dispatch by signature, then image/png.c) with the
 * options and the sample taken from the input's first 16 bytes
 * (fuzz_opts.h), so every run draws another crop (rows and columns of its
 * own, the row-by-row fast path or not); the rest is the PNG, behind its
 * signature.  h[2]'s top bit turns the chunk CRC checks off, so mutations
 * reach the chunks' contents and the image data.  What the loader relies
 * on: a defined return, a message on failure, no read past the data, no
 * write past the output.  Built and run by `make fuzz` (clang);
 * tests/test_fuzz.c replays tests/fuzz/png_corpus in every `make test`. */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_opts.h"
#include "image/image.h"
#include "image/png.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < FUZZ_HEAD)
		return 0;
	struct fuzz_sample s;
	fuzz_opts(data, &s);
	struct stk_image_opts o;
	if (stk__image_opts(&o, &s.o, NULL, 0))
		abort();
	stk__png_crc = !(data[2] >> 7);
	/* the file behind a signature, in a buffer of exactly its size */
	size_t len = size - FUZZ_HEAD + 8;
	uint8_t *png = malloc(len);
	size_t ob = stk__image_bytes(&o);
	uint8_t *out = malloc(ob);
	if (!png || !out)
		abort();
	memcpy(png, "\x89PNG\r\n\x1a\n", 8);
	memcpy(png + 8, data + FUZZ_HEAD, size - FUZZ_HEAD);
	char err[256];
	err[0] = 0;
	struct stk__decode_info info;
	int rc = stk__image_decode(&o, png, len, stk__sample_seed(s.seed, s.epoch, s.index), out,
				   err, sizeof(err), &info);
	if (rc != 0 && rc != STK_ECORRUPT && rc != STK_ETOOBIG && rc != -ENOMEM)
		abort();
	if (rc != 0 && (!err[0] || !memchr(err, 0, sizeof(err))))
		abort(); /* a failure always says why */
	if (rc == 0) { /* every byte of the output written: reading it is defined */
		if (info.format != STK_FORMAT_PNG || !(info.entropy > 0 && info.entropy <= 1))
			abort();
		volatile uint8_t sink = 0;
		for (size_t i = 0; i < ob; i++)
			sink ^= out[i];
		(void)sink;
	}
	stk__png_crc = 1;
	free(png);
	free(out);
	return 0;
}
