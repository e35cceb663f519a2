/* gen/formats.c — `stoker gen --format png|webp`: a picture's RGB as a PNG
 * (libpng's simplified writer: 8-bit truecolour, zlib's default level,
 * adaptive filters, as PIL and most tools write them) or a lossy WebP (libwebp at the quality
 * asked, its default method). */
#include "gen/gen.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <png.h>
#include <webp/encode.h>

int gen_png(const unsigned char *rgb, int w, int h, unsigned char **out, size_t *outlen)
{
	png_image im = {.version = PNG_IMAGE_VERSION, .width = (png_uint_32)w,
			.height = (png_uint_32)h, .format = PNG_FORMAT_RGB};
	size_t n = 0;
	/* the size first, then the bytes: libpng's simplified API */
	if (!png_image_write_to_memory(&im, NULL, &n, 0, rgb, w * 3, NULL))
		return -ENOMEM;
	*out = malloc(n);
	if (!*out)
		return -ENOMEM;
	if (!png_image_write_to_memory(&im, *out, &n, 0, rgb, w * 3, NULL)) {
		free(*out);
		*out = NULL;
		return -ENOMEM;
	}
	*outlen = n;
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
