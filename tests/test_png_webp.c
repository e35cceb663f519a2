/* test_png_webp.c — PNG and WebP in image mode, what the Python tests
 * (tests/python/test_formats.py, pixels against PIL) cannot reach from
 * outside: a damaged zlib stream behind valid chunk CRCs is refused by
 * every crop as by the full decode, and max_decode_time stops a PNG or a
 * WebP as it stops a JPEG. */
#include "testutil.h"

#include "image/image.h"
#include "stoker/stoker.h"

#include <zlib.h>

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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_png_damaged_stream_refused_by_every_crop),
	};
	return cmocka_run_group_tests_name("png_webp", tests, NULL, NULL);
}
