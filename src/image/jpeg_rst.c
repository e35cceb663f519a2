/*
 * image/jpeg_rst.c — the restart intervals of a baseline JPEG, and a JPEG made of
 * some of them.
 *
 * A restart marker (RSTn) ends an interval of `restart` MCUs: the DC
 * predictors reset and the data is byte-aligned, so an interval decodes on
 * its own.  When intervals tile the MCU rows (their length divides the row,
 * or is whole rows), a rectangle of intervals is itself a JPEG: the same
 * headers with the rectangle's height and width in the frame header, the
 * intervals one after the other with their markers renumbered, and EOI.
 * image/image.c decodes such a rectangle around a crop instead of every row above
 * it.  The scanner walks the headers, then finds every marker in the
 * entropy-coded data with memchr (0xFF is followed by 0x00 inside the data);
 * anything it does not expect makes the file "not restart-indexed", never an
 * error: the ordinary decoder then takes it and reports what is wrong.
 */
#include "image/jpeg_rst.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static unsigned be16(const uint8_t *p)
{
	return (unsigned)p[0] << 8 | p[1];
}

__attribute__((format(printf, 3, 4))) static int no(char *why, size_t len, const char *fmt, ...)
{
	if (why && len) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(why, len, fmt, ap);
		va_end(ap);
	}
	return 0;
}

void stk__jpeg_rst_free(struct stk__jpeg_rst *r)
{
	free(r->off);
	r->off = NULL;
}

/* The frame header (SOF0/SOF1, 8-bit): dimensions and the MCU geometry. */
static int frame(struct stk__jpeg_rst *r, const uint8_t *s, size_t n, size_t sof, char *why,
		 size_t wl)
{
	if (n < 6 || s[0] != 8)
		return no(why, wl, "frame header: %s", n < 6 ? "too short" : "not 8-bit");
	unsigned nf = s[5], hmax = 1, vmax = 1;
	if (nf < 1 || nf > 4 || n != 6 + 3 * (size_t)nf)
		return no(why, wl, "frame header: %u components in %zu bytes", nf, n);
	for (unsigned i = 0; i < nf; i++) {
		unsigned h = s[7 + 3 * i] >> 4, v = s[7 + 3 * i] & 15;
		if (h < 1 || h > 4 || v < 1 || v > 4)
			return no(why, wl, "frame header: sampling factors %ux%u", h, v);
		hmax = h > hmax ? h : hmax;
		vmax = v > vmax ? v : vmax;
	}
	r->height = be16(s + 1);
	r->width = be16(s + 3);
	if (!r->width || !r->height)
		return no(why, wl, "frame header: %ux%u pixels", r->width, r->height);
	r->ncomp = nf;
	r->mcu_w = nf == 1 ? 8 : 8 * hmax; /* one component: a block per MCU */
	r->mcu_h = nf == 1 ? 8 : 8 * vmax;
	r->mcux = (r->width + r->mcu_w - 1) / r->mcu_w;
	r->mcuy = (r->height + r->mcu_h - 1) / r->mcu_h;
	r->sof = sof;
	return 1;
}

/* The headers from SOI to the end of the SOS header: 1 with r's geometry,
 * restart and scan set, 0 (why) otherwise. */
static int headers(const uint8_t *src, size_t len, struct stk__jpeg_rst *r, char *why, size_t wl)
{
	if (len < 4 || src[0] != 0xff || src[1] != 0xd8)
		return no(why, wl, "not a JPEG");
	bool have_sof = false;
	for (size_t p = 2;;) {
		if (p + 4 > len || src[p] != 0xff)
			return no(why, wl, p + 4 > len ? "headers end early" : "bytes between headers");
		while (p < len && src[p] == 0xff)
			p++;
		if (p + 3 > len)
			return no(why, wl, "headers end early");
		unsigned m = src[p++], n = be16(src + p);
		if (m == 0xd8 || m == 0xd9 || m == 0x01 || (m >= 0xd0 && m <= 0xd7))
			return no(why, wl, "marker 0x%02x among the headers", m);
		if (n < 2 || n > len - p)
			return no(why, wl, "marker 0x%02x: segment runs past the end", m);
		const uint8_t *s = src + p + 2;
		size_t sn = n - 2;
		if (m == 0xc0 || m == 0xc1) {
			if (have_sof)
				return no(why, wl, "two frame headers");
			if (!frame(r, s, sn, p + 2, why, wl))
				return 0;
			have_sof = true;
		} else if (m >= 0xc2 && m <= 0xcf && m != 0xc4 && m != 0xc8 && m != 0xcc) {
			return no(why, wl, "%s JPEG (SOF%u)",
				  m == 0xc2 || m == 0xc6 || m == 0xca || m == 0xce ? "progressive"
				  : m >= 0xc9 ? "arithmetic-coded" : "lossless or hierarchical",
				  m - 0xc0);
		} else if (m == 0xdd) {
			if (sn != 2)
				return no(why, wl, "restart header of %zu bytes", sn);
			r->restart = be16(s);
		} else if (m == 0xda) {
			if (!have_sof)
				return no(why, wl, "scan before the frame header");
			unsigned ns = sn ? s[0] : 0;
			if (sn < 4 || sn != 1 + 2 * (size_t)ns + 3)
				return no(why, wl, "scan header of %zu bytes", sn);
			if (ns != r->ncomp)
				return no(why, wl, "%u of %u components in the first scan", ns, r->ncomp);
			const uint8_t *t = s + 1 + 2 * ns;
			if (t[0] != 0 || t[1] != 63 || t[2] != 0)
				return no(why, wl, "not a sequential scan");
			r->scan = p + n;
			return 1;
		}
		p += n;
	}
}

int stk__jpeg_rst_scan(const uint8_t *src, size_t len, struct stk__jpeg_rst *r, char *why,
		       size_t wl)
{
	memset(r, 0, sizeof(*r));
	if (why && wl)
		why[0] = 0;
	if (!headers(src, len, r, why, wl))
		return 0;
	uint32_t R = r->restart;
	if (!R)
		return no(why, wl, "no restart markers");
	if (r->mcux % R && R % r->mcux)
		return no(why, wl, "restart interval of %u MCUs does not tile rows of %u", R, r->mcux);
	uint64_t nint = ((uint64_t)r->mcux * r->mcuy + R - 1) / R;
	/* every interval but the last ends with a 2-byte marker: this bounds
	 * what a lying header can make us allocate */
	if (nint - 1 > (len - r->scan) / 2)
		return no(why, wl, "%llu intervals cannot fit in %zu bytes", (unsigned long long)nint,
			  len - r->scan);
	r->nint = (uint32_t)nint;
	r->off = malloc(sizeof(*r->off) * ((size_t)nint + 1));
	if (!r->off)
		return -ENOMEM;
	r->off[0] = r->scan;
	uint32_t k = 0; /* markers found */
	for (size_t q = r->scan;;) {
		const uint8_t *f = q < len ? memchr(src + q, 0xff, len - q) : NULL;
		size_t at = f ? (size_t)(f - src) : len;
		if (at + 1 >= len) {
			stk__jpeg_rst_free(r);
			return no(why, wl, "the data ends inside the scan (interval %u)", k);
		}
		if (src[at + 1] == 0x00) { /* a stuffed 0xFF data byte */
			q = at + 2;
			continue;
		}
		size_t e = at + 1;
		while (e < len && src[e] == 0xff)
			e++;
		unsigned c = e < len ? src[e] : 0;
		if (c >= 0xd0 && c <= 0xd7 && e == at + 1) {
			if (c != 0xd0 + (k & 7) || k + 1 >= r->nint) {
				stk__jpeg_rst_free(r);
				if (k + 1 >= r->nint)
					return no(why, wl, "more restart markers than the %u intervals",
						  r->nint);
				return no(why, wl, "RST%u after interval %u, where RST%u was due", c - 0xd0,
					  k, k & 7);
			}
			r->off[++k] = e + 1;
			q = e + 1;
			continue;
		}
		if (c != 0xd9 || k + 1 != r->nint) {
			stk__jpeg_rst_free(r);
			if (c >= 0xd0 && c <= 0xd7)
				return no(why, wl, "fill bytes before RST%u after interval %u", c - 0xd0, k);
			if (c == 0xd9)
				return no(why, wl, "%u restart markers for %u intervals", k, r->nint);
			return no(why, wl, "marker 0x%02x after interval %u of the scan", c, k);
		}
		r->scan_end = at;
		r->off[r->nint] = at + 2;
		return 1;
	}
}

uint64_t stk__jpeg_rst_bytes(const struct stk__jpeg_rst *r, uint32_t a, uint32_t b)
{
	return b > a ? (uint64_t)(r->off[b] - r->off[a]) - 2ull * (b - a) : 0;
}

/* Intervals side by side in a row (restart divides mcux), or whole rows each. */
static bool columns(const struct stk__jpeg_rst *r)
{
	return r->mcux % r->restart == 0;
}

static bool valid(const struct stk__jpeg_rst *r, const struct stk__jpeg_sub *s)
{
	if (s->c0 >= s->c1 || s->r0 >= s->r1 || s->c1 > r->mcux || s->r1 > r->mcuy)
		return false;
	if (columns(r))
		return s->c0 % r->restart == 0 && s->c1 % r->restart == 0;
	uint32_t k = r->restart / r->mcux;
	return s->c0 == 0 && s->c1 == r->mcux && s->r0 % k == 0 && (s->r1 % k == 0 || s->r1 == r->mcuy);
}

bool stk__jpeg_rst_box(const struct stk__jpeg_rst *r, struct stk__jpeg_sub *s)
{
	if (s->c0 >= s->c1 || s->r0 >= s->r1 || s->c1 > r->mcux || s->r1 > r->mcuy)
		return false;
	if (columns(r)) {
		uint32_t R = r->restart;
		s->c0 = s->c0 / R * R;
		s->c1 = (s->c1 + R - 1) / R * R;
	} else {
		uint32_t k = r->restart / r->mcux;
		s->c0 = 0;
		s->c1 = r->mcux;
		s->r0 = s->r0 / k * k;
		uint64_t r1 = ((uint64_t)s->r1 + k - 1) / k * k;
		s->r1 = r1 < r->mcuy ? (uint32_t)r1 : r->mcuy;
	}
	return true;
}

uint32_t stk__jpeg_rst_count(const struct stk__jpeg_rst *r, const struct stk__jpeg_sub *s)
{
	if (columns(r))
		return (s->c1 - s->c0) / r->restart * (s->r1 - s->r0);
	uint32_t k = r->restart / r->mcux;
	return (s->r1 + k - 1) / k - s->r0 / k;
}

uint32_t stk__jpeg_rst_index(const struct stk__jpeg_rst *r, const struct stk__jpeg_sub *s,
			     uint32_t k)
{
	if (!columns(r))
		return s->r0 / (r->restart / r->mcux) + k;
	uint32_t per = (s->c1 - s->c0) / r->restart;
	return (s->r0 + k / per) * (r->mcux / r->restart) + s->c0 / r->restart + k % per;
}

size_t stk__jpeg_rst_build_len(const struct stk__jpeg_rst *r, const struct stk__jpeg_sub *s,
			       size_t pad, size_t tail)
{
	if (!valid(r, s))
		return 0;
	uint32_t n = stk__jpeg_rst_count(r, s);
	uint64_t bytes = 0;
	if (columns(r)) {
		uint32_t per = (s->c1 - s->c0) / r->restart;
		for (uint32_t y = s->r0; y < s->r1; y++) { /* each row's intervals are adjacent */
			uint32_t a = stk__jpeg_rst_index(r, s, (y - s->r0) * per);
			bytes += stk__jpeg_rst_bytes(r, a, a + per);
		}
	} else {
		uint32_t a = stk__jpeg_rst_index(r, s, 0);
		bytes = stk__jpeg_rst_bytes(r, a, a + n);
	}
	return r->scan + (size_t)bytes + (2 + pad) * (size_t)n + tail;
}

size_t stk__jpeg_rst_build(const uint8_t *src, const struct stk__jpeg_rst *r,
			   const struct stk__jpeg_sub *s, size_t pad, size_t tail, uint8_t *out,
			   size_t *starts)
{
	if (!valid(r, s))
		return 0;
	uint32_t w = s->c1 == r->mcux ? r->width - s->c0 * r->mcu_w : (s->c1 - s->c0) * r->mcu_w;
	uint32_t h = s->r1 == r->mcuy ? r->height - s->r0 * r->mcu_h : (s->r1 - s->r0) * r->mcu_h;
	memcpy(out, src, r->scan);
	out[r->sof + 1] = (uint8_t)(h >> 8);
	out[r->sof + 2] = (uint8_t)h;
	out[r->sof + 3] = (uint8_t)(w >> 8);
	out[r->sof + 4] = (uint8_t)w;
	size_t o = r->scan;
	uint32_t n = stk__jpeg_rst_count(r, s);
	for (uint32_t k = 0; k < n; k++) {
		if (starts)
			starts[k] = o;
		uint32_t i = stk__jpeg_rst_index(r, s, k);
		size_t len = r->off[i + 1] - 2 - r->off[i];
		memcpy(out + o, src + r->off[i], len);
		memset(out + o + len, 0, pad);
		o += len + pad;
		out[o++] = 0xff;
		out[o++] = (uint8_t)(k + 1 < n ? 0xd0 + (k & 7) : 0xd9);
	}
	if (starts)
		starts[n] = o;
	memset(out + o, 0, tail);
	return o + tail;
}
