/* gen/formats.c — `stoker gen --format png|webp`: a picture's RGB as a PNG
 * (libspng: 8-bit truecolour, zlib's default level, adaptive filters, as
 * PIL and most tools write them) or a lossy WebP (libwebp at the quality
 * asked, its default method). */
#include "gen/gen.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <spng.h>
#include <webp/encode.h>

int gen_png(const unsigned char *rgb, int w, int h, unsigned char **out, size_t *outlen)
{
	spng_ctx *ctx = spng_ctx_new(SPNG_CTX_ENCODER);
	if (!ctx)
		return -ENOMEM;
	struct spng_ihdr ih = {.width = (uint32_t)w, .height = (uint32_t)h, .bit_depth = 8,
			       .color_type = SPNG_COLOR_TYPE_TRUECOLOR};
	int e = spng_set_option(ctx, SPNG_ENCODE_TO_BUFFER, 1);
	if (!e)
		e = spng_set_ihdr(ctx, &ih);
	if (!e)
		e = spng_encode_image(ctx, rgb, (size_t)w * (size_t)h * 3, SPNG_FMT_PNG,
				      SPNG_ENCODE_FINALIZE);
	*out = e ? NULL : spng_get_png_buffer(ctx, outlen, &e);
	spng_ctx_free(ctx);
	if (e || !*out) { /* the encoder's only failure on valid input: memory */
		free(*out);
		*out = NULL;
		return -ENOMEM;
	}
	return 0;
}

int gen_webp(const unsigned char *rgb, int w, int h, int quality, unsigned char **out,
	     size_t *outlen)
{
	uint8_t *buf = NULL;
	size_t n = WebPEncodeRGB(rgb, w, h, w * 3, (float)quality, &buf);
	if (!n) {
		WebPFree(buf);
		*out = NULL;
		return -ENOMEM;
	}
	/* WebPFree is free() unless libwebp was built with its own allocator;
	 * copy to keep the caller's free() right either way */
	*out = malloc(n);
	if (*out) {
		memcpy(*out, buf, n);
		*outlen = n;
	}
	WebPFree(buf);
	return *out ? 0 : -ENOMEM;
}
