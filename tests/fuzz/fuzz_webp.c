/* fuzz_webp.c — libFuzzer target for the WebP path (image/webp.c, libwebp
 * and its demuxer): stk__image_decode (the dispatch by signature, then
 * image/webp.c) with the options and the sample taken from the input's
 * first 16 bytes (fuzz_opts.h), so every run draws another crop, shrink
 * factor and output; the rest is the file after its RIFF header, which the
 * harness writes with the right size (h[2]'s top bit: the size as the
 * input has it, lies included).  What the loader relies on: a defined
 * return, a message on failure, no read past the data, no write past the
 * output.  Built and run by `make fuzz` (clang); tests/test_fuzz.c replays
 * tests/fuzz/webp_corpus in every `make test`. */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_opts.h"
#include "image/image.h"
#include "image/webp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < FUZZ_HEAD + 4)
		return 0;
	struct fuzz_sample s;
	fuzz_opts(data, &s);
	struct stk_image_opts o;
	if (stk__image_opts(&o, &s.o, NULL, 0))
		abort();
	/* input: head, the RIFF size (4 bytes, little-endian), then the chunks */
	size_t body = size - FUZZ_HEAD - 4, len = 12 + body;
	uint8_t *webp = malloc(len);
	size_t ob = stk__image_bytes(&o);
	uint8_t *out = malloc(ob);
	if (!webp || !out)
		abort();
	memcpy(webp, "RIFF", 4);
	if (data[2] >> 7) {
		memcpy(webp + 4, data + FUZZ_HEAD, 4);
	} else {
		uint32_t n = (uint32_t)(body + 4);
		for (int k = 0; k < 4; k++)
			webp[4 + k] = (uint8_t)(n >> (8 * k));
	}
	memcpy(webp + 8, "WEBP", 4);
	memcpy(webp + 12, data + FUZZ_HEAD + 4, body);
	char err[256];
	err[0] = 0;
	struct stk__decode_info info;
	int rc = stk__image_decode(&o, webp, len, stk__sample_seed(s.seed, s.epoch, s.index), out,
				   err, sizeof(err), &info);
	if (rc != 0 && rc != STK_ECORRUPT && rc != STK_ETOOBIG && rc != -ENOMEM)
		abort();
	if (rc != 0 && (!err[0] || !memchr(err, 0, sizeof(err))))
		abort(); /* a failure always says why */
	if (rc == 0) {
		if (info.format != STK_FORMAT_WEBP || !(info.entropy > 0 && info.entropy <= 1))
			abort();
		volatile uint8_t sink = 0;
		for (size_t i = 0; i < ob; i++)
			sink ^= out[i];
		(void)sink;
	}
	free(webp);
	free(out);
	return 0;
}
