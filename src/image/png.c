/*
 * image/png.c — PNG in image mode (libspng).
 *
 * The samples are decoded as the file holds them (SPNG_FMT_RAW) and only the
 * crop's columns are turned into RGB here, the way PIL's convert("RGB")
 * does it, so a folder gives torchvision's pixels: grey replicated (1, 2
 * and 4 bits scaled to 0..255; 16 bits saturated at 255, as PIL's mode "I"
 * converts), palette looked up (tRNS's alpha dropped), alpha dropped,
 * 16-bit channels by their high byte.  gAMA, sBIT and iCCP are ignored, as
 * PIL ignores them.  An APNG gives its default image (the IDAT), PIL's
 * first frame.
 *
 * A non-interlaced file is read a row at a time and left after the crop's
 * last row (the rows above it must be inflated and unfiltered anyway): the
 * fast path.  Left early, the decoder would never see that the file ends
 * too soon, so the fast path is taken only when the file's chunks tile it
 * up to IEND; otherwise every row is decoded and zlib says.  An interlaced
 * file is decoded whole.
 */
#include "base/internal.h"
#include "image/png.h"
#include "image/resample.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <spng.h>

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

static int corrupt(const uint8_t *src, size_t len, int r, char *err, size_t errlen)
{
	char why[160] = "";
	if (r == SPNG_EMEM) {
		snprintf(err, errlen, "out of memory decoding a PNG");
		return -ENOMEM;
	}
	/* a chunk that lies about its size says more than the library's code */
	chunks_whole(src, len, why, sizeof(why));
	if (why[0])
		snprintf(err, errlen, "corrupt PNG: %s (%s)", why, spng_strerror(r));
	else
		snprintf(err, errlen, "corrupt PNG: %s", spng_strerror(r));
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
	case SPNG_COLOR_TYPE_GRAYSCALE:
	case SPNG_COLOR_TYPE_INDEXED:
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
			if (c->color == SPNG_COLOR_TYPE_INDEXED) {
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
	case SPNG_COLOR_TYPE_GRAYSCALE_ALPHA: /* the high byte of 16 bits, alpha dropped */
		for (int x = x0, b = d / 8 * 2; x < x1; x++, o += 3)
			o[0] = o[1] = o[2] = row[b * x];
		break;
	case SPNG_COLOR_TYPE_TRUECOLOR:
	case SPNG_COLOR_TYPE_TRUECOLOR_ALPHA: {
		int s = d / 8, b = s * (c->color == SPNG_COLOR_TYPE_TRUECOLOR ? 3 : 4);
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

/* Rows [y0, y1) of the image, columns [x0, x1), into rgb. */
static int read_rows(spng_ctx *ctx, const struct spng_ihdr *ih, const struct conv *c,
		     const uint8_t *src, size_t len, int x0, int y0, int x1, int y1, uint8_t *rgb,
		     bool *fast, char *err, size_t errlen)
{
	size_t size;
	int r = spng_decoded_image_size(ctx, SPNG_FMT_RAW, &size);
	if (r)
		return corrupt(src, len, r, err, errlen);
	size_t rowb = size / ih->height, cw = (size_t)(x1 - x0) * 3;
	if (ih->interlace_method) { /* Adam7: the rows come in seven passes */
		/* libspng 0.7.3 places the samples of 1, 2 and 4 bits of its
		 * passes wrongly in SPNG_FMT_RAW; its RGB8 (the same scaling and
		 * palette as PIL's) has them right */
		int fmt = ih->bit_depth < 8 ? SPNG_FMT_RGB8 : SPNG_FMT_RAW;
		struct conv c8 = {.color = SPNG_COLOR_TYPE_TRUECOLOR, .depth = 8};
		if (fmt == SPNG_FMT_RGB8) {
			r = spng_decoded_image_size(ctx, fmt, &size);
			if (r)
				return corrupt(src, len, r, err, errlen);
			rowb = size / ih->height;
			c = &c8;
		}
		uint8_t *img = malloc(size);
		if (!img) {
			snprintf(err, errlen, "out of memory decoding a %ux%u PNG", ih->width, ih->height);
			return -ENOMEM;
		}
		r = spng_decode_image(ctx, img, size, fmt, 0);
		for (int y = y0; !r && y < y1; y++)
			to_rgb(c, img + rowb * (size_t)y, x0, x1, rgb + cw * (size_t)(y - y0));
		free(img);
		return r ? corrupt(src, len, r, err, errlen) : 0;
	}
	*fast = (uint32_t)y1 < ih->height && chunks_whole(src, len, NULL, 0);
	int last = *fast ? y1 : (int)ih->height;
	uint8_t *row = malloc(rowb);
	if (!row) {
		snprintf(err, errlen, "out of memory decoding a %ux%u PNG", ih->width, ih->height);
		return -ENOMEM;
	}
	r = spng_decode_image(ctx, NULL, 0, SPNG_FMT_RAW, SPNG_DECODE_PROGRESSIVE);
	for (int y = 0; !r && y < last; y++) {
		r = spng_decode_row(ctx, row, rowb);
		if (r == SPNG_EOI && y == last - 1)
			r = 0;
		if (!r && y >= y0 && y < y1)
			to_rgb(c, row, x0, x1, rgb + cw * (size_t)(y - y0));
	}
	free(row);
	return r ? corrupt(src, len, r, err, errlen) : 0;
}

int stk__png_decode(const struct stk_image_opts *o, const uint8_t *src, size_t len,
		    const struct stk__box *boxp, uint64_t sample_seed, void *out, char *err,
		    size_t errlen, struct stk__decode_info *info)
{
	if (info)
		*info = (struct stk__decode_info){.format = STK_FORMAT_PNG, .entropy = 1};
	/* IHDR's fields first: a zero side is named as such, and the pixel
	 * limit holds before libspng allocates anything for the image */
	if (len >= 24 && !memcmp(src + 12, "IHDR", 4)) {
		uint32_t w = be32(src + 16), h = be32(src + 20);
		if (!w || !h) {
			snprintf(err, errlen, "corrupt PNG: the image has a zero dimension (%ux%u)", w, h);
			return STK_ECORRUPT;
		}
		if ((uint64_t)w * h > o->max_pixels) {
			snprintf(err, errlen, "image of %ux%u pixels is above the limit of %llu", w, h,
				 (unsigned long long)o->max_pixels);
			return STK_ETOOBIG;
		}
	}
	spng_ctx *ctx = spng_ctx_new(0);
	if (!ctx) {
		snprintf(err, errlen, "out of memory decoding a PNG");
		return -ENOMEM;
	}
	/* no chunk can be longer than the file; text and profiles inflate to 64 MiB at most */
	spng_set_chunk_limits(ctx, len, 64u << 20);
	if (!stk__png_crc)
		spng_set_crc_action(ctx, SPNG_CRC_USE, SPNG_CRC_USE);
	spng_set_png_buffer(ctx, src, len);
	struct spng_ihdr ih;
	struct conv *c = NULL;
	uint8_t *rgb = NULL;
	int rc = spng_get_ihdr(ctx, &ih);
	if (rc) {
		rc = corrupt(src, len, rc, err, errlen);
		goto out;
	}
	if ((uint64_t)ih.width * ih.height > o->max_pixels) { /* IHDR not where it should be */
		snprintf(err, errlen, "image of %ux%u pixels is above the limit of %llu", ih.width,
			 ih.height, (unsigned long long)o->max_pixels);
		rc = STK_ETOOBIG;
		goto out;
	}
	int W = (int)ih.width, H = (int)ih.height;
	c = calloc(1, sizeof(*c));
	if (!c) {
		snprintf(err, errlen, "out of memory decoding a %dx%d PNG", W, H);
		rc = -ENOMEM;
		goto out;
	}
	c->color = ih.color_type;
	c->depth = ih.bit_depth;
	if (ih.color_type == SPNG_COLOR_TYPE_INDEXED) {
		struct spng_plte plte;
		rc = spng_get_plte(ctx, &plte);
		if (rc) {
			rc = corrupt(src, len, rc, err, errlen);
			goto out;
		}
		c->npal = plte.n_entries > 256 ? 256 : plte.n_entries;
		for (uint32_t i = 0; i < c->npal; i++) {
			c->pal[i][0] = plte.entries[i].red;
			c->pal[i][1] = plte.entries[i].green;
			c->pal[i][2] = plte.entries[i].blue;
		}
	}
	struct stk__box box;
	if (boxp)
		box = *boxp;
	else
		stk__image_box(o, sample_seed, W, H, &box);
	struct stk__span s;
	stk__image_span(o, &box, W, H, 1, &s);
	int rw = s.x1 - s.x0, rh = s.y1 - s.y0;
	rgb = malloc((size_t)rw * (size_t)rh * 3);
	if (!rgb) {
		snprintf(err, errlen, "out of memory decoding a %dx%d PNG", W, H);
		rc = -ENOMEM;
		goto out;
	}
	bool fast = false;
	rc = read_rows(ctx, &ih, c, src, len, s.x0, s.y0, s.x1, s.y1, rgb, &fast, err, errlen);
	if (rc)
		goto out;
	if (info) {
		info->fast = fast;
		info->entropy = fast ? (double)s.y1 / H : 1;
	}
	double bx = box.x - s.x0, by = box.y - s.y0;
	if (stk__image_region_hook)
		stk__image_region_hook(rgb, rw, rh, bx, by);
	rc = stk__resample(o, rgb, rw, rh, bx, by, box.w, box.h, box.flip, out);
	if (rc)
		snprintf(err, errlen, "out of memory resampling");
out:
	spng_ctx_free(ctx);
	free(c);
	free(rgb);
	return rc;
}
