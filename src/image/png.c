/*
 * image/png.c — PNG in image mode (libpng).
 *
 * The samples are decoded as the file holds them (no libpng transforms:
 * packed bits, 16 bits big-endian, palette indices) and only the
 * crop's columns are turned into RGB here, the way PIL's convert("RGB")
 * does it, so a folder gives torchvision's pixels: grey replicated (1, 2
 * and 4 bits scaled to 0..255; 16 bits saturated at 255, as PIL's mode "I"
 * converts), palette looked up (tRNS's alpha dropped), alpha dropped,
 * 16-bit channels by their high byte.  gAMA, sBIT and iCCP are ignored, as
 * PIL ignores them.  An APNG gives its default image (the IDAT), PIL's
 * first frame.
 *
 * A non-interlaced file is read a row at a time, only the crop's rows
 * turned into RGB; the rows below the crop are inflated and unfiltered
 * all the same, down to the zlib stream's end, so that its data and its
 * Adler-32 are checked for every crop: chunk CRCs, which a file altered on
 * purpose recomputes, do not tell a damaged stream (PIL refuses it), and a
 * sample is decoded right or refused, never half-checked.  (Stopping after
 * the crop's last row saved a fifth of a random crop's CPU time: 16.2 ms
 * against 20.3 on a 1600x1200 RGB file.)  An interlaced file is decoded
 * whole.  max_decode_time is checked between rows, every MiB of them.
 */
#include "base/internal.h"
#include "image/png.h"
#include "image/resample.h"
#include "image/span.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <png.h>

int stk__png_crc = 1;

bool stk__is_png(const uint8_t *src, size_t len)
{
	return len >= 8 && !memcmp(src, "\x89PNG\r\n\x1a\n", 8);
}

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void chunk_type(const uint8_t *p, char t[5])
{
	for (int i = 0; i < 4; i++)
		t[i] = p[i] >= 0x20 && p[i] < 0x7f ? (char)p[i] : '?';
	t[4] = 0;
}

/* Walks the chunk headers: true when they tile the file up to IEND.  If a
 * chunk claims more bytes than are left, why (may be NULL) names it. */
static bool chunks_whole(const uint8_t *src, size_t len, char *why, size_t whylen)
{
	size_t pos = 8;
	while (len - pos >= 12) {
		uint32_t n = be32(src + pos);
		char t[5];
		chunk_type(src + pos + 4, t);
		if (n > 0x7fffffffu || n > len - pos - 12) {
			if (why)
				snprintf(why, whylen, "chunk '%s' at offset %zu claims %u bytes, %zu are "
					 "left in the file", t, pos, n, len - pos - 12);
			return false;
		}
		if (!memcmp(t, "IEND", 4))
			return true;
		pos += 12 + (size_t)n;
	}
	if (why && pos < len)
		snprintf(why, whylen, "the file ends inside a chunk's header at offset %zu", pos);
	return false;
}

/* libpng's side of one decode: its error exit longjmps back here with
 * the message; the buffers are freed whatever way it ends. */
struct dec {
	png_structp pp;
	png_infop ip;
	const uint8_t *src;
	size_t len, pos;
	uint8_t *row, *img;
	char msg[192];
};

static void on_error(png_structp pp, png_const_charp msg)
{
	struct dec *d = png_get_error_ptr(pp);
	snprintf(d->msg, sizeof(d->msg), "%s", msg);
	png_longjmp(pp, 1);
}

static void on_warning(png_structp pp, png_const_charp msg)
{
	(void)pp; /* an odd ancillary chunk (an sRGB profile...): PIL reads on too */
	(void)msg;
}

static void on_read(png_structp pp, png_bytep out, size_t n)
{
	struct dec *d = png_get_io_ptr(pp);
	if (n > d->len - d->pos)
		png_error(pp, "the file ends before the image does (truncated)");
	memcpy(out, d->src + d->pos, n);
	d->pos += n;
}

/* The error of a failed decode: a chunk that lies about its size says more
 * than the library's message. */
static int corrupt(const struct dec *d, char *err, size_t errlen)
{
	char why[160] = "";
	chunks_whole(d->src, d->len, why, sizeof(why));
	if (why[0])
		snprintf(err, errlen, "corrupt PNG: %s (%s)", why, d->msg);
	else
		snprintf(err, errlen, "corrupt PNG: %s", d->msg);
	return STK_ECORRUPT;
}

struct conv {
	uint8_t color, depth;
	uint8_t pal[256][3];
	uint32_t npal;
};

/* Columns [x0, x1) of one decoded row into RGB, as PIL's convert("RGB"). */
static void to_rgb(const struct conv *c, const uint8_t *row, int x0, int x1, uint8_t *o)
{
	int d = c->depth;
	switch (c->color) {
	case PNG_COLOR_TYPE_GRAY:
	case PNG_COLOR_TYPE_PALETTE:
		for (int x = x0; x < x1; x++, o += 3) {
			unsigned v;
			if (d == 16) /* PIL's "I": values over 255 saturate */
				v = (unsigned)row[2 * x] << 8 | row[2 * x + 1];
			else if (d == 8)
				v = row[x];
			else {
				int ppb = 8 / d, sh = 8 - d * (x % ppb + 1);
				v = (unsigned)(row[x / ppb] >> sh) & ((1u << d) - 1);
			}
			if (c->color == PNG_COLOR_TYPE_PALETTE) {
				if (v < c->npal)
					memcpy(o, c->pal[v], 3);
				else /* PIL's palette is black past PLTE's entries */
					memset(o, 0, 3);
				continue;
			}
			if (d < 8)
				v = v * 255 / ((1u << d) - 1);
			o[0] = o[1] = o[2] = (uint8_t)(v > 255 ? 255 : v);
		}
		break;
	case PNG_COLOR_TYPE_GRAY_ALPHA: /* the high byte of 16 bits, alpha dropped */
		for (int x = x0, b = d / 8 * 2; x < x1; x++, o += 3)
			o[0] = o[1] = o[2] = row[b * x];
		break;
	case PNG_COLOR_TYPE_RGB:
	case PNG_COLOR_TYPE_RGB_ALPHA: {
		int s = d / 8, b = s * (c->color == PNG_COLOR_TYPE_RGB ? 3 : 4);
		if (s == 1 && b == 3) {
			memcpy(o, row + 3 * x0, (size_t)(x1 - x0) * 3);
			break;
		}
		for (int x = x0; x < x1; x++, o += 3) {
			o[0] = row[b * x];
			o[1] = row[b * x + s];
			o[2] = row[b * x + 2 * s];
		}
		break;
	}
	}
}

/* Whether the decode is past max_decode_time, asked after each row of
 * rowb bytes: the clock is read once a MiB (~1 ms of inflate). */
static bool late(const struct stk__deadline *dl, size_t *since, size_t rowb)
{
	*since += rowb;
	if (*since < (1u << 20))
		return false;
	*since = 0;
	return stk__deadline_passed(dl);
}

/* Rows [y0, y1) of the image, columns [x0, x1), into rgb; every row is
 * decoded, down to the zlib stream's end (libpng checks it after the last
 * row).  0, 1 from libpng's error exit (d->msg says why), or 2 past the
 * deadline. */
static int read_rows(struct dec *d, uint32_t h, int interlace, const struct conv *c, int x0,
		     int y0, int x1, int y1, uint8_t *rgb, const struct stk__deadline *dl)
{
	if (setjmp(png_jmpbuf(d->pp)))
		return 1;
	size_t cw = (size_t)(x1 - x0) * 3, since = 0;
	if (interlace) { /* Adam7: every pass fills in the same rows */
		int passes = png_set_interlace_handling(d->pp);
		png_read_update_info(d->pp, d->ip);
		size_t rowb = png_get_rowbytes(d->pp, d->ip);
		d->img = malloc(rowb * h);
		if (!d->img)
			return -ENOMEM;
		for (int p = 0; p < passes; p++)
			for (uint32_t y = 0; y < h; y++) {
				png_read_row(d->pp, d->img + rowb * y, NULL);
				if (late(dl, &since, rowb))
					return 2;
			}
		for (int y = y0; y < y1; y++)
			to_rgb(c, d->img + rowb * (size_t)y, x0, x1, rgb + cw * (size_t)(y - y0));
		return 0;
	}
	png_read_update_info(d->pp, d->ip);
	size_t rowb = png_get_rowbytes(d->pp, d->ip);
	d->row = malloc(rowb);
	if (!d->row)
		return -ENOMEM;
	for (int y = 0; y < (int)h; y++) {
		png_read_row(d->pp, d->row, NULL);
		if (y >= y0 && y < y1)
			to_rgb(c, d->row, x0, x1, rgb + cw * (size_t)(y - y0));
		if (late(dl, &since, rowb))
			return 2;
	}
	return 0;
}

/* libpng's header: 0, or 1 from its error exit. */
static int read_header(struct dec *d, png_uint_32 *w, png_uint_32 *h, int *depth,
		       int *color, int *interlace, struct conv *c)
{
	if (setjmp(png_jmpbuf(d->pp)))
		return 1;
	png_set_read_fn(d->pp, d, on_read);
	/* no chunk can be longer than the file; text and profiles inflate to 64 MiB at most */
	png_set_chunk_malloc_max(d->pp, 64u << 20);
	png_set_user_limits(d->pp, 0x7fffffff, 0x7fffffff);
	if (!stk__png_crc)
		png_set_crc_action(d->pp, PNG_CRC_QUIET_USE, PNG_CRC_QUIET_USE);
	png_read_info(d->pp, d->ip);
	png_get_IHDR(d->pp, d->ip, w, h, depth, color, interlace, NULL, NULL);
	png_colorp pal;
	int n = 0;
	if (*color == PNG_COLOR_TYPE_PALETTE && png_get_PLTE(d->pp, d->ip, &pal, &n)) {
		c->npal = n < 0 ? 0 : n > 256 ? 256 : (uint32_t)n;
		for (uint32_t i = 0; i < c->npal; i++) {
			c->pal[i][0] = pal[i].red;
			c->pal[i][1] = pal[i].green;
			c->pal[i][2] = pal[i].blue;
		}
	}
	return 0;
}

int stk__png_size(const struct stk_image_opts *o, const uint8_t *src, size_t len, int *W, int *H,
		  char *err, size_t errlen)
{
	/* IHDR's fields (libpng checks them again): a zero side is named as
	 * such, and the pixel limit holds before libpng allocates anything */
	if (len < 33 || memcmp(src + 12, "IHDR", 4)) {
		snprintf(err, errlen, "corrupt PNG: %s", len < 33 ? "the file ends before its header "
				      "does (truncated)" : "the first chunk is not IHDR");
		return STK_ECORRUPT;
	}
	uint32_t w = be32(src + 16), h = be32(src + 20);
	if (!w || !h || w > 0x7fffffffu || h > 0x7fffffffu) {
		snprintf(err, errlen, "corrupt PNG: the image has %s dimension (%ux%u)",
			 !w || !h ? "a zero" : "an invalid", w, h);
		return STK_ECORRUPT;
	}
	if ((uint64_t)w * h > o->max_pixels) {
		snprintf(err, errlen, "image of %ux%u pixels is above the limit of %llu", w, h,
			 (unsigned long long)o->max_pixels);
		return STK_ETOOBIG;
	}
	*W = (int)w;
	*H = (int)h;
	return 0;
}

int stk__png_decode(const struct stk_image_opts *o, const uint8_t *src, size_t len,
		    const struct stk__box *boxp, void *out, char *err, size_t errlen,
		    struct stk__decode_info *info)
{
	if (info)
		*info = (struct stk__decode_info){.format = STK_FORMAT_PNG, .entropy = 1};
	int W, H;
	int rc = stk__png_size(o, src, len, &W, &H, err, errlen); /* (the caller's check) */
	if (rc)
		return rc;
	uint32_t w = (uint32_t)W, h = (uint32_t)H;
	struct stk__deadline dl;
	stk__deadline_start(&dl, o);
	const struct stk__box box = *boxp;
	struct stk__span s;
	stk__image_span(o, &box, W, H, 1, &s);
	struct dec *d = calloc(1, sizeof(*d));
	struct conv *c = calloc(1, sizeof(*c));
	uint8_t *rgb = NULL;
	if (!d || !c) {
		rc = -ENOMEM;
		goto out;
	}
	d->src = src;
	d->len = len;
	d->pp = png_create_read_struct(PNG_LIBPNG_VER_STRING, d, on_error, on_warning);
	d->ip = d->pp ? png_create_info_struct(d->pp) : NULL;
	if (!d->ip) {
		rc = -ENOMEM;
		goto out;
	}
	png_uint_32 pw, ph;
	int depth, color, interlace;
	if (read_header(d, &pw, &ph, &depth, &color, &interlace, c)) {
		rc = corrupt(d, err, errlen);
		goto out;
	}
	if (pw != w || ph != h || interlace != src[28]) { /* never: the same bytes */
		snprintf(err, errlen, "corrupt PNG: the header says %ux%u, libpng read %ux%u", w, h,
			 (unsigned)pw, (unsigned)ph);
		rc = STK_ECORRUPT;
		goto out;
	}
	c->color = (uint8_t)color;
	c->depth = (uint8_t)depth;
	int rw = s.x1 - s.x0, rh = s.y1 - s.y0;
	rgb = malloc((size_t)rw * (size_t)rh * 3);
	if (!rgb) {
		rc = -ENOMEM;
		goto out;
	}
	rc = read_rows(d, h, interlace, c, s.x0, s.y0, s.x1, s.y1, rgb, &dl);
	if (rc == 1)
		rc = corrupt(d, err, errlen);
	else if (rc == 2)
		rc = stk__deadline_error(&dl, "PNG", w, h, err, errlen);
	if (rc)
		goto out;
	double bx = box.x - s.x0, by = box.y - s.y0;
	rc = stk__resample(o, rgb, rw, rh, bx, by, box.w, box.h, box.flip, out);
	if (rc)
		snprintf(err, errlen, "out of memory resampling");
out:
	if (rc == -ENOMEM)
		snprintf(err, errlen, "out of memory decoding a %dx%d PNG", W, H);
	if (d) {
		if (d->pp)
			png_destroy_read_struct(&d->pp, d->ip ? &d->ip : NULL, NULL);
		free(d->row);
		free(d->img);
	}
	free(d);
	free(c);
	free(rgb);
	return rc;
}
