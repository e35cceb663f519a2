/*
 * DESIGN video/convert.c — a decoded frame into the clip's output.
 *
 * libswscale from the crop box of the decoded frame (plane pointers moved
 * to the box, aligned to the chroma grid) to S×S RGB24 (on x86 its SIMD
 * BGR24 writer: handed V as U and U as V with their coefficients swapped,
 * which writes RGB24, or where that is not used, BGR24 with the bytes
 * swapped or reversed after) with SWS_BILINEAR
 * (docs/BENCHMARKS.md "Video: libswscale's filter": within 2 grey levels of
 * PIL's resize, image mode's tolerance, where SWS_AREA, 0.91x its
 * instructions, is 2.4 off; the conversion is 3.4 % of a clip), straight
 * into the output when nothing else is to be done but mirroring (done there
 * in place, row by row); else into a scratch frame turned (rotation),
 * mirrored (flip) and laid out (THWC, TCHW) into the output.  10-bit, 4:4:4
 * and every other pixel format are swscale's to convert.  The box is made
 * once, for the first frame's size, from the displayed box video/clip.c
 * planned; the libswscale context once a clip.
 */
#include "video/clip.h"
#include "video/video.h"

#include <math.h>
#include <stdio.h>
#include <time.h>

int stk__video_sws_flags = SWS_BILINEAR;
uint64_t *stk__video_sws_ns;

/* libswscale (FFmpeg 5.1) writes a resized frame as packed BGR24 with x86
 * SIMD (its MMXEXT vertical filter and conversion), RGB24 with C alone:
 * 2.2x the time for the same work.  On x86 the frame is written as BGR24
 * and its bytes swapped (docs/BENCHMARKS.md "Video: where a clip's CPU goes");
 * elsewhere both are C and RGB24 is written as it is. */
#if defined(__x86_64__) || defined(__i386__)
#define SWAP_RB 1
#define OUT_FMT AV_PIX_FMT_BGR24
#else
#define SWAP_RB 0
#define OUT_FMT AV_PIX_FMT_RGB24
#endif

/* The displayed box turned into the coded frame's coordinates. */
static void coded_box(struct stk__clip *c, int fw, int fh)
{
	int W = c->d.rotation % 180 ? fh : fw, H = c->d.rotation % 180 ? fw : fh;
	int x0 = (int)floor(c->dbox.x + 1e-6), y0 = (int)floor(c->dbox.y + 1e-6);
	int x1 = (int)ceil(c->dbox.x + c->dbox.w - 1e-6), y1 = (int)ceil(c->dbox.y + c->dbox.h - 1e-6);
	x0 = x0 < 0 ? 0 : x0;
	y0 = y0 < 0 ? 0 : y0;
	x1 = x1 > W ? W : x1 <= x0 ? x0 + 1 : x1;
	y1 = y1 > H ? H : y1 <= y0 ? y0 + 1 : y1;
	int w = x1 - x0, h = y1 - y0;
	switch (c->d.rotation) {
	case 90: /* displayed (x, y) is coded (y, fh-1-x) */
		c->bx = y0, c->by = fh - x0 - w, c->bw = h, c->bh = w;
		break;
	case 180:
		c->bx = fw - x0 - w, c->by = fh - y0 - h, c->bw = w, c->bh = h;
		break;
	case 270: /* displayed (x, y) is coded (fw-1-y, x) */
		c->bx = fw - y0 - h, c->by = x0, c->bw = h, c->bh = w;
		break;
	default:
		c->bx = x0, c->by = y0, c->bw = w, c->bh = h;
	}
	c->fw = fw;
	c->fh = fh;
}

/* A row of n pixels as written (BGR24 where SWAP_RB) mirrored into RGB24 in
 * place: with the channels swapped too, that is the row's bytes reversed,
 * eight at a time from both ends (a byte at a time took 0.7 % of a clip's
 * instructions). */
static void mirror_row(uint8_t *p, uint32_t n)
{
	if (SWAP_RB) {
		size_t a = 0, b = (size_t)n * 3;
		for (; b - a >= 16; a += 8, b -= 8) {
			uint64_t x, y;
			memcpy(&x, p + a, 8);
			memcpy(&y, p + b - 8, 8);
			x = __builtin_bswap64(x);
			y = __builtin_bswap64(y);
			memcpy(p + a, &y, 8);
			memcpy(p + b - 8, &x, 8);
		}
		for (b--; a < b; a++, b--) {
			uint8_t t = p[a];
			p[a] = p[b];
			p[b] = t;
		}
		return;
	}
	for (size_t a = 0, b = (size_t)(n - 1) * 3; a < b; a += 3, b -= 3)
		for (int k = 0; k < 3; k++) {
			uint8_t t = p[a + k];
			p[a + k] = p[b + k];
			p[b + k] = t;
		}
}

/* Whether libswscale's BGR24 writer gives RGB24 for frames of this format
 * when handed V as U and U as V, with the coefficients of the two swapped
 * too (stk__video_sws_uv): 8-bit YUV in three planes, its U in plane 1 and
 * V in plane 2.  Its SIMD code treats the two chroma planes alike (the same
 * horizontal and vertical filters, offsets 128 both) and computes
 * B = Y + ub.U, G = Y + ug.U + vg.V, R = Y + vr.V, so with U, V and their
 * coefficients exchanged byte 0 is R and byte 2 is B: exactly the bytes the
 * swap after it would give (tests/test_video.c test_uv_swap over 4:2:0,
 * 4:2:2, 4:4:4 and full range, sizes up and down), and no pass over the
 * output. */
static bool uv_swappable(const AVPixFmtDescriptor *pd)
{
	return SWAP_RB && !(pd->flags & (AV_PIX_FMT_FLAG_RGB | AV_PIX_FMT_FLAG_PAL)) &&
	       (pd->flags & AV_PIX_FMT_FLAG_PLANAR) && pd->nb_components == 3 &&
	       pd->comp[0].depth == 8 && pd->comp[1].plane == 1 && pd->comp[2].plane == 2;
}

int stk__video_sws_uv(struct SwsContext *sws)
{
	int *inv, *tab, sr, dr, br, con, sat;
	if (AV(sws_getColorspaceDetails)(sws, &inv, &sr, &tab, &dr, &br, &con, &sat) < 0)
		return -1;
	/* inv: crv, cbu, cgu, cgv */
	int swapped[4] = {inv[1], inv[0], inv[3], inv[2]}, t[4];
	memcpy(t, tab, sizeof(t));
	return AV(sws_setColorspaceDetails)(sws, swapped, sr, t, dr, br, con, sat) < 0 ? -1 : 0;
}

int stk__clip_convert(struct stk__clip *c, const AVFrame *f, uint32_t j)
{
	char ab[128];
	if ((uint64_t)f->width * (uint64_t)f->height > c->o->max_pixels)
		return stk__errf(c->err, c->errlen, STK_ETOOBIG,
				 "a frame of %dx%d (%.0f pixels) is above max_pixels (%llu)", f->width,
				 f->height, (double)f->width * f->height,
				 (unsigned long long)c->o->max_pixels);
	if (!c->fw)
		coded_box(c, f->width, f->height);
	else if (f->width != c->fw || f->height != c->fh)
		return stk__errf(c->err, c->errlen, STK_EFORMAT,
				 "the frame size changes mid-stream (%dx%d, then %dx%d)", c->fw, c->fh,
				 f->width, f->height);
	const AVPixFmtDescriptor *pd = AV(av_pix_fmt_desc_get)(f->format);
	if (!pd || (pd->flags & (AV_PIX_FMT_FLAG_BITSTREAM | AV_PIX_FMT_FLAG_HWACCEL)))
		return stk__errf(c->err, c->errlen, STK_EFORMAT, "pixel format %s is not supported",
				 pd ? pd->name : "unknown");
	/* the box on the chroma grid: its corner moves left/up by at most one pixel */
	int ax = (1 << pd->log2_chroma_w) - 1, ay = (1 << pd->log2_chroma_h) - 1;
	int x = c->bx & ~ax, y = c->by & ~ay;
	int w = c->bw + (c->bx - x), h = c->bh + (c->by - y);
	const uint8_t *src[4] = {0};
	int ls[4] = {0};
	for (int p = 0; p < 4 && f->data[p]; p++) {
		src[p] = f->data[p];
		ls[p] = f->linesize[p];
		for (int k = 0; k < pd->nb_components; k++)
			if (pd->comp[k].plane == p) {
				int chroma = !(pd->flags & AV_PIX_FMT_FLAG_RGB) && (k == 1 || k == 2);
				int sx = chroma ? pd->log2_chroma_w : 0, sy = chroma ? pd->log2_chroma_h : 0;
				src[p] += (ptrdiff_t)(y >> sy) * ls[p] + (ptrdiff_t)(x >> sx) * pd->comp[k].step;
				break;
			}
	}
	struct timespec t0, t1;
	if (stk__video_sws_ns) /* benchmarks: the filter's set-up and its work */
		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
	size_t fb = (size_t)c->S * c->S * 3;
	/* straight into the clip (mirrored there, row by row) unless the output
	 * needs turning or planes, or nothing is resized: libswscale's unscaled
	 * YUV->RGB24 converters write whole groups of 8 pixels, up to 24 bytes
	 * past the last row (into the next clip, or past the slot); the scratch
	 * frame has room for them */
	bool direct = !c->d.rotation && c->o->layout == STK_VLAYOUT_THWC &&
		      (w != (int)c->S || h != (int)c->S);
	/* unmirrored straight into the clip: RGB24 from the BGR24 writer, U and
	 * V swapped (uv_swappable) */
	bool uv = direct && !c->dbox.flip && uv_swappable(pd);
	/* made once a clip (a frame of another size is refused above) */
	if (c->sws && uv != c->sws_uv) { /* sws_getCachedContext would keep its details */
		AV(sws_freeContext)(c->sws);
		c->sws = NULL;
	}
	if (!c->sws || w != c->sws_w || h != c->sws_h || f->format != c->sws_fmt || uv != c->sws_uv) {
		struct SwsContext *s = AV(sws_getCachedContext)(c->sws, w, h, f->format, (int)c->S,
								(int)c->S, OUT_FMT,
								stk__video_sws_flags, NULL, NULL, NULL);
		if (s && uv && stk__video_sws_uv(s) < 0) {
			AV(sws_freeContext)(s);
			s = NULL;
		}
		c->sws = s;
		if (!c->sws)
			return stk__errf(c->err, c->errlen, STK_EFORMAT,
					 "libswscale cannot convert %s (%dx%d) to RGB", pd->name, w, h);
		c->sws_w = w, c->sws_h = h, c->sws_fmt = f->format, c->sws_uv = uv;
	}
	if (uv) {
		const uint8_t *t = src[1];
		src[1] = src[2];
		src[2] = t;
		int l = ls[1];
		ls[1] = ls[2];
		ls[2] = l;
	}
	uint8_t *dst = direct ? c->out + j * fb : c->tmp;
	int dls = (int)c->S * 3;
	int r = AV(sws_scale)(c->sws, src, ls, 0, h, &dst, &dls);
	if (stk__video_sws_ns) {
		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
		*stk__video_sws_ns += (uint64_t)((t1.tv_sec - t0.tv_sec) * 1000000000ll +
						 (t1.tv_nsec - t0.tv_nsec));
	}
	if (r <= 0)
		return stk__errf(c->err, c->errlen, STK_ECORRUPT, "libswscale failed (%s)",
				 stk__av_err(r, ab, sizeof(ab)));
	if (direct && c->dbox.flip) {
		for (uint32_t row = 0; row < c->S; row++)
			mirror_row(dst + (size_t)row * dls, c->S);
		return 0;
	}
	if (direct && !uv) {
		for (uint8_t *p = dst, *e = dst + fb * SWAP_RB; p < e; p += 3) {
			uint8_t b = p[0];
			p[0] = p[2];
			p[2] = b;
		}
		return 0;
	}
	if (direct)
		return 0;
	int S = (int)c->S;
	uint8_t *o = c->out + j * fb;
	bool tchw = c->o->layout == STK_VLAYOUT_TCHW;
	for (int yd = 0; yd < S; yd++)
		for (int xd = 0; xd < S; xd++) {
			int xs = c->dbox.flip ? S - 1 - xd : xd, xc, yc;
			switch (c->d.rotation) {
			case 90:
				xc = yd, yc = S - 1 - xs;
				break;
			case 180:
				xc = S - 1 - xs, yc = S - 1 - yd;
				break;
			case 270:
				xc = S - 1 - yd, yc = xs;
				break;
			default:
				xc = xs, yc = yd;
			}
			const uint8_t *px = c->tmp + ((size_t)yc * S + xc) * 3;
			if (tchw)
				for (int k = 0; k < 3; k++)
					o[(size_t)k * S * S + (size_t)yd * S + xd] = px[SWAP_RB ? 2 - k : k];
			else
				for (int k = 0; k < 3; k++)
					o[((size_t)yd * S + xd) * 3 + k] = px[SWAP_RB ? 2 - k : k];
		}
	return 0;
}
