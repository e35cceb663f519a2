/*
 * image/webp.c — WebP in image mode (libwebp, libwebpdemux).
 *
 * A still image is decoded by libwebp straight into the region the crop
 * needs (its own cropping: lossy data is decoded no further down than the
 * crop's last macroblock row) and, when the box is at least twice the
 * output's size, shrunk by 2, 4 or 8 on the way (its own rescaler), as
 * JPEG's DCT scaling does: the fast path.  RGB is what PIL's
 * convert("RGB") gives: libwebp's own conversion, alpha dropped.
 *
 * An animation gives its first frame as PIL's WebPAnimDecoder renders it:
 * the frame at its offset on a canvas of the animation's size, zero (black)
 * where it does not reach; decoded whole.
 *
 * max_decode_time: libwebp has no progress callback, so a file over 64 KiB
 * goes through its incremental decoder, shown a longer prefix of the file
 * each call (WebPIUpdate: no copy), and the thread's CPU time is read
 * between calls; lossy data is then decoded until the crop's rows are out,
 * as the one-call decoder stops after the crop's last macroblock row.  A
 * smaller file is decoded in one call.
 */
#include "base/internal.h"
#include "image/webp.h"
#include "image/resample.h"
#include "image/span.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <webp/decode.h>
#include <webp/demux.h>

bool stk__is_webp(const uint8_t *src, size_t len)
{
	return len >= 12 && !memcmp(src, "RIFF", 4) && !memcmp(src + 8, "WEBP", 4);
}

static int status_error(VP8StatusCode st, char *err, size_t errlen)
{
	const char *why = "error";
	switch (st) {
	case VP8_STATUS_OUT_OF_MEMORY:
		snprintf(err, errlen, "out of memory decoding a WebP");
		return -ENOMEM;
	case VP8_STATUS_NOT_ENOUGH_DATA:
		why = "data ends before the image does (truncated file)";
		break;
	case VP8_STATUS_BITSTREAM_ERROR:
		why = "bad bitstream";
		break;
	case VP8_STATUS_UNSUPPORTED_FEATURE:
		why = "a feature libwebp does not support";
		break;
	case VP8_STATUS_INVALID_PARAM:
		why = "invalid parameter";
		break;
	default:
		break;
	}
	snprintf(err, errlen, "corrupt WebP: %s (libwebp status %d)", why, (int)st);
	return STK_ECORRUPT;
}

/* libwebp's decode of p into cfg->output (rows: its height, the crop's or
 * the scaled crop's), in pieces of stk__webp_piece bytes with the deadline
 * checked between them: 0, or <0 with the reason in err (W×H named). */
size_t stk__webp_piece = 64u << 10;
static int decode(const uint8_t *p, size_t n, WebPDecoderConfig *cfg, int rows,
		  const struct stk__deadline *dl, int W, int H, char *err, size_t errlen)
{
	VP8StatusCode st = VP8_STATUS_OUT_OF_MEMORY;
	WebPIDecoder *idec = NULL;
	size_t piece = stk__webp_piece ? stk__webp_piece : 1;
	if (n <= piece)
		st = WebPDecode(p, n, cfg);
	else
		idec = WebPIDecode(NULL, 0, cfg);
	if (!idec) {
		WebPFreeDecBuffer(&cfg->output);
		return st == VP8_STATUS_OK ? 0 : status_error(st, err, errlen);
	}
	st = VP8_STATUS_SUSPENDED;
	for (size_t have = 0; st == VP8_STATUS_SUSPENDED;) {
		have = n - have > piece ? have + piece : n;
		st = WebPIUpdate(idec, p, have);
		int last_y = 0;
		if (st == VP8_STATUS_SUSPENDED && WebPIDecodedArea(idec, NULL, NULL, NULL, &last_y) &&
		    last_y >= rows)
			st = VP8_STATUS_OK; /* lossy: the crop's rows are out */
		else if (st == VP8_STATUS_SUSPENDED && have >= n)
			st = VP8_STATUS_NOT_ENOUGH_DATA; /* the file ends before the image does */
		else if (st == VP8_STATUS_SUSPENDED && stk__deadline_passed(dl))
			st = VP8_STATUS_USER_ABORT;
	}
	WebPIDelete(idec);
	WebPFreeDecBuffer(&cfg->output);
	if (st == VP8_STATUS_USER_ABORT)
		return stk__deadline_error(dl, "WebP", (unsigned)W, (unsigned)H, err, errlen);
	return st == VP8_STATUS_OK ? 0 : status_error(st, err, errlen);
}

/* The first frame of an animation: where it lies on the canvas. */
struct frame {
	const uint8_t *p;
	size_t len;
	int x, y, w, h;
};

static int first_frame(const uint8_t *src, size_t len, int *W, int *H, struct frame *f, char *err,
		       size_t errlen)
{
	WebPData d = {src, len};
	WebPDemuxer *dm = WebPDemux(&d);
	if (!dm) {
		snprintf(err, errlen, "corrupt WebP: the animation's container cannot be read "
				      "(truncated, or chunks that lie about their sizes)");
		return STK_ECORRUPT;
	}
	*W = (int)WebPDemuxGetI(dm, WEBP_FF_CANVAS_WIDTH);
	*H = (int)WebPDemuxGetI(dm, WEBP_FF_CANVAS_HEIGHT);
	WebPIterator it;
	int rc = 0;
	if (!WebPDemuxGetFrame(dm, 1, &it)) {
		snprintf(err, errlen, "corrupt WebP: an animation without frames");
		rc = STK_ECORRUPT;
	} else {
		*f = (struct frame){it.fragment.bytes, it.fragment.size, it.x_offset, it.y_offset,
				    it.width, it.height};
		WebPDemuxReleaseIterator(&it);
	}
	WebPDemuxDelete(dm);
	return rc;
}

/* The features and size of src: the canvas's and first frame's for an
 * animation.  0, or <0 with the reason in err. */
static int probe(const struct stk_image_opts *o, const uint8_t *src, size_t len,
		 WebPBitstreamFeatures *ft, int *W, int *H, struct frame *f, char *err,
		 size_t errlen)
{
	VP8StatusCode st = WebPGetFeatures(src, len, ft);
	if (st != VP8_STATUS_OK)
		return status_error(st, err, errlen);
	*W = ft->width;
	*H = ft->height;
	if (ft->has_animation) {
		int rc = first_frame(src, len, W, H, f, err, errlen);
		if (rc)
			return rc;
	}
	if (*W <= 0 || *H <= 0) {
		snprintf(err, errlen, "corrupt WebP: the image has a zero dimension (%dx%d)", *W, *H);
		return STK_ECORRUPT;
	}
	if ((uint64_t)*W * (uint64_t)*H > o->max_pixels) {
		snprintf(err, errlen, "image of %dx%d pixels is above the limit of %llu", *W, *H,
			 (unsigned long long)o->max_pixels);
		return STK_ETOOBIG;
	}
	return 0;
}

int stk__webp_size(const struct stk_image_opts *o, const uint8_t *src, size_t len, int *W,
		   int *H, char *err, size_t errlen)
{
	WebPBitstreamFeatures ft;
	struct frame f;
	return probe(o, src, len, &ft, W, H, &f, err, errlen);
}

int stk__webp_decode(const struct stk_image_opts *o, const uint8_t *src, size_t len,
		     const struct stk__box *boxp, void *out, char *err, size_t errlen,
		     struct stk__decode_info *info)
{
	if (info)
		*info = (struct stk__decode_info){.format = STK_FORMAT_WEBP, .entropy = 1};
	WebPBitstreamFeatures ft;
	struct frame f = {0};
	int W, H;
	struct stk__deadline dl;
	stk__deadline_start(&dl, o);
	int rc = probe(o, src, len, &ft, &W, &H, &f, err, errlen); /* (the caller's check too) */
	if (rc)
		return rc;
	const struct stk__box box = *boxp;
	/* libwebp crops from even offsets (lossy's chroma is subsampled) */
	int d = ft.has_animation ? 1 : stk__image_shrink(o, &box);
	struct stk__span s;
	stk__image_span(o, &box, W, H, d, &s);
	s.x0 &= ~1;
	s.y0 &= ~1;
	int cw = s.x1 - s.x0, ch = s.y1 - s.y0;
	int rw = (cw + d - 1) / d, rh = (ch + d - 1) / d;
	size_t stride = (size_t)rw * 3;
	uint8_t *rgb = malloc(stride * (size_t)rh), *canvas = NULL;
	if (!rgb) {
		snprintf(err, errlen, "out of memory decoding a %dx%d WebP", W, H);
		return -ENOMEM;
	}
	if (ft.has_animation) {
		/* (the frame lies inside the canvas: the demuxer checks it) */
		size_t cstride = (size_t)W * 3;
		canvas = calloc((size_t)H, cstride);
		if (!canvas) {
			snprintf(err, errlen, "out of memory decoding a %dx%d WebP", W, H);
			rc = -ENOMEM;
			goto out;
		}
		WebPDecoderConfig cfg;
		if (!WebPInitDecoderConfig(&cfg)) {
			snprintf(err, errlen, "libwebp: version mismatch");
			rc = -EINVAL;
			goto out;
		}
		cfg.output.colorspace = MODE_RGB;
		cfg.output.is_external_memory = 1;
		cfg.output.u.RGBA.rgba = canvas + (size_t)f.y * cstride + (size_t)f.x * 3;
		cfg.output.u.RGBA.stride = (int)cstride;
		cfg.output.u.RGBA.size = cstride * (size_t)(H - f.y) - (size_t)f.x * 3;
		rc = decode(f.p, f.len, &cfg, f.h, &dl, W, H, err, errlen);
		if (rc)
			goto out;
		for (int y = 0; y < rh; y++)
			memcpy(rgb + stride * (size_t)y,
			       canvas + (size_t)(s.y0 + y) * cstride + (size_t)s.x0 * 3, stride);
	} else {
		WebPDecoderConfig cfg;
		if (!WebPInitDecoderConfig(&cfg)) {
			snprintf(err, errlen, "libwebp: version mismatch");
			rc = -EINVAL;
			goto out;
		}
		bool crop = cw < W || ch < H;
		cfg.options.use_cropping = crop;
		cfg.options.crop_left = s.x0;
		cfg.options.crop_top = s.y0;
		cfg.options.crop_width = cw;
		cfg.options.crop_height = ch;
		cfg.options.use_scaling = d > 1;
		cfg.options.scaled_width = rw;
		cfg.options.scaled_height = rh;
		cfg.output.colorspace = MODE_RGB;
		cfg.output.is_external_memory = 1;
		cfg.output.u.RGBA.rgba = rgb;
		cfg.output.u.RGBA.stride = (int)stride;
		cfg.output.u.RGBA.size = stride * (size_t)rh;
		rc = decode(src, len, &cfg, rh, &dl, W, H, err, errlen);
		if (rc)
			goto out;
		if (info) {
			info->fast = crop || d > 1;
			info->entropy = (double)s.y1 / H;
		}
	}
	/* the box in the region's pixels */
	double sx = (double)rw / cw, sy = (double)rh / ch;
	double bx = (box.x - s.x0) * sx, by = (box.y - s.y0) * sy;
	rc = stk__resample(o, rgb, rw, rh, bx, by, box.w * sx, box.h * sy, box.flip, out);
	if (rc)
		snprintf(err, errlen, "out of memory resampling");
out:
	free(canvas);
	free(rgb);
	return rc;
}
