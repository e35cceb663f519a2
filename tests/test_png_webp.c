/* test_png_webp.c — PNG and WebP in image mode, what the Python tests
 * (tests/python/test_formats.py, pixels against PIL) cannot reach from
 * outside: a damaged zlib stream behind valid chunk CRCs is refused by
 * every crop as by the full decode; a WebP fed to libwebp in pieces gives
 * the one-call decoder's pixels; max_decode_time stops a PNG or a WebP as
 * it stops a JPEG. */
#include "testutil.h"

#include "image/image.h"
#include "image/webp.h"
#include "stoker/stoker.h"

#include <zlib.h>
#include <webp/decode.h>
#include <webp/encode.h>

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

/* Appends one chunk (length, type, data, CRC over type and data) at *pos. */
static void chunk(uint8_t *buf, size_t *pos, const char *type, const uint8_t *data, size_t n)
{
	uint8_t *p = buf + *pos;
	put32(p, (uint32_t)n);
	memcpy(p + 4, type, 4);
	if (n)
		memcpy(p + 8, data, n);
	put32(p + 8 + n, (uint32_t)crc32(0, p + 4, (uInt)(n + 4)));
	*pos += 12 + n;
}

static int texture(int x, int y, int c)
{
	return (x * 7 + y * 13 + c * 50 + (x * y) % 31) % 256;
}

/* A w×h 8-bit RGB PNG, non-interlaced, of texture(): one IDAT chunk (its
 * payload at *idat, *idatlen bytes, when asked).  malloc'ed. */
static uint8_t *png(int w, int h, size_t *len, size_t *idat, size_t *idatlen)
{
	size_t rowb = (size_t)w * 3 + 1, raw = rowb * (size_t)h;
	uint8_t *rows = malloc(raw);
	assert_non_null(rows);
	for (int y = 0; y < h; y++) {
		uint8_t *r = rows + rowb * (size_t)y;
		r[0] = (uint8_t)(y % 5); /* every filter type, as a real encoder mixes them */
		for (int x = 0; x < w; x++)
			for (int c = 0; c < 3; c++)
				r[1 + x * 3 + c] = (uint8_t)texture(x, y, c);
	}
	uLongf zlen = compressBound((uLong)raw);
	uint8_t *z = malloc(zlen);
	assert_non_null(z);
	assert_int_equal(compress2(z, &zlen, rows, (uLong)raw, 6), Z_OK);
	uint8_t *buf = malloc(zlen + 128);
	assert_non_null(buf);
	size_t pos = 8;
	memcpy(buf, "\x89PNG\r\n\x1a\n", 8);
	uint8_t ihdr[13] = {0};
	put32(ihdr, (uint32_t)w);
	put32(ihdr + 4, (uint32_t)h);
	ihdr[8] = 8; /* depth */
	ihdr[9] = 2; /* RGB */
	chunk(buf, &pos, "IHDR", ihdr, 13);
	if (idat)
		*idat = pos + 8;
	if (idatlen)
		*idatlen = zlen;
	chunk(buf, &pos, "IDAT", z, zlen);
	chunk(buf, &pos, "IEND", NULL, 0);
	free(rows);
	free(z);
	*len = pos;
	return buf;
}

/* Byte i of the IDAT payload xored with x, and the chunk's CRC made right
 * again: only zlib can tell. */
static void damage(uint8_t *p, size_t idat, size_t n, size_t i, uint8_t x)
{
	p[idat + i] ^= x;
	put32(p + idat + n, (uint32_t)crc32(0, p + idat - 4, (uInt)(n + 4)));
}

/* The full decode (the whole image as the box) and 30 random crops: each
 * 0, or each STK_ECORRUPT naming a PNG.  Returns how many decoded. */
static int crops_decoded(const uint8_t *p, size_t len, int w, int h, int want)
{
	struct stk_image_opts o = {.size = sizeof(o), .width = 32, .height = 32};
	char err[256];
	assert_int_equal(stk__image_defaults(&o, err, sizeof(err)), 0);
	uint8_t *out = malloc(stk__image_bytes(&o));
	assert_non_null(out);
	struct stk__box whole = {0, 0, w, h, false};
	int rc = stk__image_decode_box(&o, p, len, &whole, 0, out, err, sizeof(err), NULL);
	assert_int_equal(rc, want);
	int ok = !rc;
	for (int64_t i = 0; i < 30; i++) {
		err[0] = 0;
		rc = stk__image_decode(&o, p, len, stk__sample_seed(7, 0, i), out, err, sizeof(err),
				       NULL);
		if (rc != want)
			fail_msg("crop %lld: %d (%s), the full decode gave %d", (long long)i, rc, err,
				 want);
		if (rc)
			assert_non_null(strstr(err, "corrupt PNG"));
		ok += !rc;
	}
	free(out);
	return ok;
}

/* A PNG whose zlib data or Adler-32 is wrong behind right chunk CRCs (PIL
 * refuses it) is refused by every crop, as by the full decode: a crop that
 * ends above the last row still reaches the stream's end. */
static void test_png_damaged_stream_refused_by_every_crop(void **state)
{
	(void)state;
	int w = 160, h = 120;
	size_t len, idat, n;
	uint8_t *good = png(w, h, &len, &idat, &n);
	assert_int_equal(crops_decoded(good, len, w, h, 0), 31);
	uint8_t *p = malloc(len);
	assert_non_null(p);
	/* the Adler-32 (the stream's last 4 bytes), then deflate data near its end */
	const size_t at[] = {n - 1, n - 4, n - 12};
	for (size_t k = 0; k < sizeof(at) / sizeof(at[0]); k++) {
		memcpy(p, good, len);
		damage(p, idat, n, at[k], 0x55);
		assert_int_equal(crops_decoded(p, len, w, h, STK_ECORRUPT), 0);
	}
	free(p);
	free(good);
}

/* texture() with noise: what a lossless encoder cannot fold away. */
static int noisy(int x, int y, int c)
{
	uint32_t v = (uint32_t)x * 73856093u ^ (uint32_t)y * 19349663u ^ (uint32_t)c * 83492791u;
	v ^= v >> 13;
	v *= 0x5bd1e995u;
	return (texture(x, y, c) + (int)(v >> 28)) % 256;
}

/* A w×h WebP of noisy(), lossy (quality 90) or lossless.  Free with
 * WebPFree. */
static uint8_t *webp(int w, int h, bool lossless, size_t *len)
{
	uint8_t *rgb = malloc((size_t)w * (size_t)h * 3), *out = NULL;
	assert_non_null(rgb);
	for (int y = 0; y < h; y++)
		for (int x = 0; x < w; x++)
			for (int c = 0; c < 3; c++)
				rgb[((size_t)y * (size_t)w + (size_t)x) * 3 + (size_t)c] =
					(uint8_t)noisy(x, y, c);
	*len = lossless ? WebPEncodeLosslessRGB(rgb, w, h, w * 3, &out)
			: WebPEncodeRGB(rgb, w, h, w * 3, 90, &out);
	assert_true(*len > 0);
	free(rgb);
	return out;
}

/* A WebP over 64 KiB goes through libwebp's incremental decoder (so that
 * max_decode_time can stop it): the same pixels as the one-call decoder,
 * for the whole image and for random crops, lossy and lossless; cut short,
 * it is named as truncated. */
static void test_webp_pieces_give_the_same_pixels(void **state)
{
	(void)state;
	struct stk_image_opts o = {.size = sizeof(o), .width = 48, .height = 40};
	char err[256];
	assert_int_equal(stk__image_defaults(&o, err, sizeof(err)), 0);
	size_t n = stk__image_bytes(&o);
	uint8_t *a = malloc(n), *b = malloc(n);
	assert_non_null(a);
	assert_non_null(b);
	for (int lossless = 0; lossless < 2; lossless++) {
		int w = lossless ? 400 : 1200, h = lossless ? 300 : 900;
		size_t len;
		uint8_t *p = webp(w, h, lossless, &len);
		assert_true(len > 2 * stk__webp_piece); /* (several pieces) */
		struct stk__box whole = {0, 0, w, h, false};
		for (int64_t i = -1; i < 20; i++) {
			const struct stk__box *box = i < 0 ? &whole : NULL;
			uint64_t seed = stk__sample_seed(3, 0, i);
			assert_int_equal(stk__image_decode_box(&o, p, len, box, seed, a, err, sizeof(err),
							       NULL), 0);
			size_t piece = stk__webp_piece;
			stk__webp_piece = SIZE_MAX; /* one call */
			int rc = stk__image_decode_box(&o, p, len, box, seed, b, err, sizeof(err), NULL);
			stk__webp_piece = piece;
			assert_int_equal(rc, 0);
			assert_memory_equal(a, b, n);
		}
		/* cut at two thirds: named, whatever path */
		struct stk__box top = {0, 0, w, h / 4, false};
		assert_int_equal(stk__image_decode_box(&o, p, len * 2 / 3, &whole, 0, a, err,
						       sizeof(err), NULL), STK_ECORRUPT);
		assert_non_null(strstr(err, "corrupt WebP"));
		/* lossy: a crop above the cut decodes, as libwebp's one call does */
		if (!lossless)
			assert_int_equal(stk__image_decode_box(&o, p, len * 2 / 3, &top, 0, a, err,
							       sizeof(err), NULL), 0);
		WebPFree(p);
	}
	free(a);
	free(b);
}

/* max_decode_time stops a PNG (between rows) and a WebP (between pieces of
 * the file) as it stops a JPEG: STK_ETOOBIG, the format, size and limit
 * named; with the default limit both decode. */
static void test_max_decode_time_png_webp(void **state)
{
	(void)state;
	struct stk_image_opts o = {.size = sizeof(o), .width = 32, .height = 32};
	char err[256];
	assert_int_equal(stk__image_defaults(&o, err, sizeof(err)), 0);
	uint8_t *out = malloc(stk__image_bytes(&o));
	assert_non_null(out);
	size_t plen, wlen;
	int w = 2000, h = 1500;
	uint8_t *p = png(w, h, &plen, NULL, NULL);
	uint8_t *wp = webp(w, h, false, &wlen);
	struct stk__box whole = {0, 0, w, h, false};
	for (int k = 0; k < 2; k++) {
		const uint8_t *f = k ? wp : p;
		size_t len = k ? wlen : plen;
		o.max_decode_ns = 5000000000ull; /* the default */
		assert_int_equal(stk__image_decode_box(&o, f, len, &whole, 0, out, err, sizeof(err),
						       NULL), 0);
		/* 1 ms of CPU: the whole image takes tens */
		o.max_decode_ns = 1000000;
		err[0] = 0;
		int rc = stk__image_decode_box(&o, f, len, &whole, 0, out, err, sizeof(err), NULL);
		assert_int_equal(rc, STK_ETOOBIG);
		char want[128];
		snprintf(want, sizeof(want), "%s of 2000x1500 still decoding after 0.001 s of CPU "
			 "time (max_decode_time): refused", k ? "WebP" : "PNG");
		if (strcmp(err, want))
			fail_msg("%s, not %s", err, want);
	}
	free(p);
	WebPFree(wp);
	free(out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_png_damaged_stream_refused_by_every_crop),
		cmocka_unit_test(test_webp_pieces_give_the_same_pixels),
		cmocka_unit_test(test_max_decode_time_png_webp),
	};
	return cmocka_run_group_tests_name("png_webp", tests, NULL, NULL);
}
