/*
 * image/image.c — JPEG decode and augmentation, straight into a batch slot;
 * PNG and WebP are told apart by their first bytes, their crop box drawn
 * here, and handed to image/png.c and image/webp.c.
 *
 * One call decodes one sample: the crop box is drawn first (image/opts.c:
 * torchvision's RandomResizedCrop, or resize-short-side + centre crop, from
 * the sample's own generator), then libjpeg-turbo
 * decodes only what the box needs: DCT-domain scaling by 1/2, 1/4 or 1/8 when
 * the box will be shrunk that much anyway, jpeg_crop_scanline for its columns,
 * jpeg_skip_scanlines above it, and no rows below it (a progressive file's
 * scans, read whole before any row comes out, jump from the region's last
 * iMCU row to their end: skip_tail).  The region is resampled
 * to the output size with an antialiased bilinear (triangle) filter whose
 * support widens with the shrink factor, as PIL's BILINEAR does (fixed point
 * vertically, floats horizontally; SSE2 where the CPU has it).
 * The generator is seeded by (seed, epoch, sample index), so a batch is
 * bit-identical whatever the thread count.  libjpeg's error exit
 * longjmps back here: a corrupt file is an error, never a dead process.
 *
 * A JPEG whose restart intervals tile its MCU rows (stk_jpeg_transcode's
 * output) takes the interval path: image/jpeg_rst.c builds a JPEG of only the
 * intervals around the same region, and that is decoded with the same
 * settings, cropped to the same columns, read from the same rows.  The
 * region's pixels are the ordinary path's: IDCT and colour conversion are
 * per block and pixel, horizontal upsampling already stops at the crop's
 * iMCU-aligned edges (jpeg_crop_scanline), and an MCU row is added above or
 * below where vertical upsampling reads across the region's first or last
 * row.  Every libjpeg warning on that path is an error naming the interval.
 */
#include "base/internal.h"
#include "image/image.h"
#include "image/resample.h"
#include "image/scratch.h"
#include "image/span.h"

#include <math.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jpeglib.h> /* after stdio.h: it uses FILE */
#include <jerror.h>

#include "image/jpeg_fast.h"
#include "image/png.h"
#include "image/webp.h"

/* --- libjpeg glue --------------------------------------------------------- */

struct err_mgr {
	struct jpeg_error_mgr pub;
	jmp_buf jmp;
	bool truncated;
	/* the restart-interval path: every warning is an error, named by the
	 * interval the decoder was in (the first one only) */
	bool strict;
	char warning[JMSG_LENGTH_MAX];
	size_t warn_pos; /* offset of the decoder's input at that warning */
	/* the limits, checked by libjpeg's progress monitor (djpeg -maxscans
	 * does the same): a scan past max_scans, or CPU time past max_decode_time */
	struct jpeg_progress_mgr progress;
	enum { LIMIT_NONE, LIMIT_SCANS, LIMIT_TIME } limit;
	uint32_t max_scans;
	unsigned calls;
	struct stk__deadline dl;
	/* a progressive file's scans: the iMCU rows from tail_row on are not
	 * needed (0: all are); the entropy bytes jumped over */
	JDIMENSION tail_row;
	size_t skipped;
};

static void on_error_exit(j_common_ptr c)
{
	longjmp(((struct err_mgr *)c->err)->jmp, 1);
}

static void on_message(j_common_ptr c, int level)
{
	struct err_mgr *e = (struct err_mgr *)c->err;
	if (level >= 0)
		return;
	/* a warning: most are harmless (extraneous bytes), but data that ends
	 * early is decoded as grey, which PIL refuses too */
	if (c->err->msg_code == JWRN_JPEG_EOF)
		e->truncated = true;
	if (e->strict && stk__jpeg_fast_padding(c))
		return; /* the padding after an interval (image/jpeg_fast.c) */
	if (e->strict && !e->warning[0]) {
		j_decompress_ptr d = (j_decompress_ptr)c;
		c->err->format_message(c, e->warning);
		e->warn_pos = d->src ? (size_t)d->src->next_input_byte : 0;
	}
}

int stk__image_tail = 1;
int stk__image_scratch = 1;

/* A progressive file's scans each cover the whole image, and libjpeg reads
 * them all before the first row comes out; the rows below the region are
 * never output.  So once a scan reaches the first iMCU row not needed, its
 * input jumps to the scan's end: the next marker (0xFF then a byte neither 0,
 * a fill 0xFF nor a restart marker: files with restart intervals are left
 * whole).  The entropy decoder meets the marker, warns (JWRN_HIT_MARKER, a
 * warning the ordinary path ignores) and leaves the scan's remaining blocks
 * as they are, skipping them; the next scan starts afresh.  Where no marker
 * follows, the input ends there, as a truncated file's does: the same error.
 * Only public fields: the source manager, input_iMCU_row (within a scan
 * while below total_iMCU_rows) and unread_marker (the decoder met one). */
static void skip_tail(j_decompress_ptr d, struct err_mgr *e)
{
	struct jpeg_source_mgr *s = d->src;
	if (d->input_iMCU_row < e->tail_row || d->input_iMCU_row >= d->total_iMCU_rows ||
	    d->unread_marker || !s->bytes_in_buffer)
		return;
	const uint8_t *p = s->next_input_byte, *end = p + s->bytes_in_buffer;
	for (;;) {
		p = memchr(p, 0xff, (size_t)(end - p));
		if (!p || end - p < 2) {
			p = end;
			break;
		}
		if (p[1] != 0 && p[1] != 0xff)
			break;
		p += p[1] == 0xff ? 1 : 2;
	}
	e->skipped += (size_t)(p - s->next_input_byte);
	s->bytes_in_buffer -= (size_t)(p - s->next_input_byte);
	s->next_input_byte = p;
}

/* Called by libjpeg once per iMCU row of each scan while a progressive
 * file is read in, and per read_scanlines call: a progressive JPEG can
 * declare thousands of scans that each walk the whole coefficient buffer
 * (seconds of CPU from a few hundred KB), so the scan count is checked
 * every time and the thread's CPU time (a system call) every 64th: a few
 * times an ordinary image, every few ms at worst. */
static void on_progress(j_common_ptr c)
{
	struct err_mgr *e = (struct err_mgr *)c->err;
	if (c->is_decompressor && ((j_decompress_ptr)c)->input_scan_number > (int)e->max_scans) {
		e->limit = LIMIT_SCANS;
		longjmp(e->jmp, 1);
	}
	if (c->is_decompressor && e->tail_row)
		skip_tail((j_decompress_ptr)c, e);
	if (++e->calls % 64 == 0 && stk__deadline_passed(&e->dl)) {
		e->limit = LIMIT_TIME;
		longjmp(e->jmp, 1);
	}
}

static void no_output(j_common_ptr c)
{
	(void)c;
}

static bool is_jpeg(const uint8_t *p, size_t len)
{
	return len >= 3 && p[0] == 0xff && p[1] == 0xd8 && p[2] == 0xff;
}

static const char *format_name(const uint8_t *p, size_t len)
{
	if (len >= 4 && (!memcmp(p, "GIF8", 4)))
		return "GIF";
	if (len >= 2 && !memcmp(p, "BM", 2))
		return "BMP";
	return NULL;
}

int stk__image_fast = 1;
void (*stk__image_region_hook)(const uint8_t *rgb, int w, int h, double bx, double by);

/* What both decoding paths produce: rows [y0, y1) and columns [cx, cx + cw)
 * of the image scaled by 1/d, the columns widened to iMCU boundaries as
 * jpeg_crop_scanline does (crop: it is called). */
struct region {
	int SW, SH;
	double bx, by, bw, bh; /* the box, in scaled pixels */
	int x0, x1, y0, y1;
	bool crop;
	JDIMENSION cx, cw;
};

static void plan(const struct stk_image_opts *o, const struct jpeg_decompress_struct *ci,
		 const struct stk__box *box, struct region *g)
{
	int W = (int)ci->image_width, H = (int)ci->image_height;
	g->SW = (int)ci->output_width;
	g->SH = (int)ci->output_height;
	double sx = (double)g->SW / W, sy = (double)g->SH / H;
	g->bx = box->x * sx;
	g->by = box->y * sy;
	g->bw = box->w * sx;
	g->bh = box->h * sy;
	/* the rows and columns the filter reaches, plus a margin */
	double fsx = g->bw / o->width > 1 ? g->bw / o->width : 1;
	double fsy = g->bh / o->height > 1 ? g->bh / o->height : 1;
	int mx = (int)ceil(fsx) + 1, my = (int)ceil(fsy) + 1;
	int x0 = (int)floor(g->bx) - mx, x1 = (int)ceil(g->bx + g->bw) + mx;
	int y0 = (int)floor(g->by) - my, y1 = (int)ceil(g->by + g->bh) + my;
	x0 = x0 < 0 ? 0 : x0;
	y0 = y0 < 0 ? 0 : y0;
	x1 = x1 > g->SW ? g->SW : x1;
	y1 = y1 > g->SH ? g->SH : y1;
	g->x0 = x0;
	g->x1 = x1;
	g->y0 = y0;
	g->y1 = y1;
	g->crop = x1 - x0 < g->SW;
	/* jpeg_crop_scanline's rule: the offset down to an iMCU column */
	int align = STK__MIN_SCALED(ci) * (ci->num_components == 1 ? 1 : ci->max_h_samp_factor);
	g->cx = g->crop ? (JDIMENSION)(x0 / align * align) : 0;
	g->cw = g->crop ? (JDIMENSION)x1 - g->cx : (JDIMENSION)g->SW;
}


static void set_params(struct jpeg_decompress_struct *ci, bool cmyk, unsigned denom)
{
	ci->out_color_space = cmyk ? JCS_CMYK : JCS_RGB;
	ci->scale_num = 1;
	ci->scale_denom = denom;
	ci->dct_method = JDCT_ISLOW;
}

int stk__image_decode_box(const struct stk_image_opts *o, const uint8_t *src, size_t len,
			  const struct stk__box *boxp, uint64_t sample_seed, void *out, char *err,
			  size_t errlen, struct stk__decode_info *info)
{
	if (info)
		*info = (struct stk__decode_info){.format = STK_FORMAT_JPEG};
	/* the format from the file's first bytes, never from its name; PNG and
	 * WebP: the size from the header (pixel limit checked), the box, then
	 * the pixels */
	bool png = stk__is_png(src, len);
	if (png || stk__is_webp(src, len)) {
		int W, H, rc = png ? stk__png_size(o, src, len, &W, &H, err, errlen)
				   : stk__webp_size(o, src, len, &W, &H, err, errlen);
		if (rc)
			return rc;
		struct stk__box box;
		if (boxp)
			box = *boxp;
		else
			stk__image_box(o, sample_seed, W, H, &box);
		return png ? stk__png_decode(o, src, len, &box, out, err, errlen, info)
			   : stk__webp_decode(o, src, len, &box, out, err, errlen, info);
	}
	if (!is_jpeg(src, len)) {
		const char *f = format_name(src, len);
		if (f)
			snprintf(err, errlen, "unsupported format: %s (JPEG, PNG and WebP only)", f);
		else
			snprintf(err, errlen, len ? "not a JPEG, PNG or WebP (no signature of "
						    "theirs at the start)" : "empty file");
		return f ? STK_EFORMAT : STK_ECORRUPT;
	}
	struct jpeg_decompress_struct ci;
	struct err_mgr em;
	struct stk__jpeg_fast fs = {0};
	struct stk__jpeg_mem jm = {0};
	uint8_t *volatile region = NULL;
	volatile bool fast = false;
	volatile int rc = 0;
	ci.err = jpeg_std_error(&em.pub);
	em.pub.error_exit = on_error_exit;
	em.pub.emit_message = on_message;
	em.pub.output_message = no_output;
	em.truncated = false;
	em.strict = false;
	em.warning[0] = 0;
	em.limit = LIMIT_NONE;
	em.max_scans = o->max_scans ? o->max_scans : UINT32_MAX;
	em.calls = 0;
	em.tail_row = 0;
	em.skipped = 0;
	stk__deadline_start(&em.dl, o);
	em.progress = (struct jpeg_progress_mgr){.progress_monitor = on_progress};
	if (setjmp(em.jmp)) {
		char msg[JMSG_LENGTH_MAX], where[128];
		em.pub.format_message((j_common_ptr)&ci, msg);
		if (em.limit == LIMIT_SCANS) {
			snprintf(err, errlen, "progressive JPEG of %ux%u with more than %u scans "
				 "(max_scans): refused, as a scan bomb would be", ci.image_width,
				 ci.image_height, em.max_scans);
		} else if (em.limit == LIMIT_TIME) {
			stk__deadline_error(&em.dl, "JPEG", ci.image_width, ci.image_height, err, errlen);
		} else if (em.pub.msg_code == JERR_OUT_OF_MEMORY) {
			snprintf(err, errlen, "out of memory decoding %ux%u", ci.image_width,
				 ci.image_height);
		} else if (fast) {
			stk__jpeg_fast_name(&fs, (size_t)(ci.src->next_input_byte - fs.buf), where,
					    sizeof(where));
			snprintf(err, errlen, "corrupt JPEG: %s: %s", where, msg);
		} else {
			snprintf(err, errlen, "corrupt JPEG: %s", msg);
		}
		bool oom = em.limit == LIMIT_NONE && em.pub.msg_code == JERR_OUT_OF_MEMORY;
		stk__jpeg_fast_free(&fs);
		jpeg_destroy_decompress(&ci);
		stk__jpeg_mem_release(&jm);
		stk__scratch_put(STK__SCRATCH_REGION, region);
		return oom ? -ENOMEM : em.limit != LIMIT_NONE ? STK_ETOOBIG : STK_ECORRUPT;
	}
	jpeg_create_decompress(&ci);
	ci.progress = &em.progress;
	jpeg_mem_src(&ci, src, (unsigned long)len);
	jpeg_read_header(&ci, TRUE);
	uint64_t pixels = (uint64_t)ci.image_width * ci.image_height;
	if (pixels > o->max_pixels || !ci.image_width || !ci.image_height) {
		snprintf(err, errlen, "image of %ux%u pixels is above the limit of %llu",
			 ci.image_width, ci.image_height, (unsigned long long)o->max_pixels);
		jpeg_destroy_decompress(&ci);
		return STK_ETOOBIG;
	}
	int W = (int)ci.image_width, H = (int)ci.image_height;
	struct stk__box box;
	if (boxp)
		box = *boxp;
	else
		stk__image_box(o, sample_seed, W, H, &box);

	/* DCT scaling: the largest 1/d that keeps the box at least output-sized.
	 * Not for the centre crop: it is validation's, promised within 0.2 grey
	 * levels of torchvision's Resize + CenterCrop on PIL, whose antialiasing
	 * filter a DCT-domain 1/2 is not (3 grey levels apart on a textured
	 * 800x600 photo); training's random crops keep the speed. */
	bool cmyk = ci.jpeg_color_space == JCS_CMYK || ci.jpeg_color_space == JCS_YCCK;
	unsigned denom = 1;
	for (unsigned d = 8; d > 1 && o->crop != STK_CROP_CENTER; d /= 2)
		if (box.w / d >= o->width && box.h / d >= o->height) {
			denom = d;
			break;
		}
	set_params(&ci, cmyk, denom);
	jpeg_calc_output_dimensions(&ci);
	struct region g;
	plan(o, &ci, &box, &g);
	size_t scan0 = (size_t)(ci.src->next_input_byte - src), total = len > scan0 ? len - scan0 : 1;
	int frc = stk__image_fast ? stk__jpeg_fast_setup(&ci, src, len, g.y0, g.y1, g.crop, (int)g.cx,
							g.x1, &fs)
				  : 0;
	if (frc < 0) {
		jpeg_destroy_decompress(&ci);
		snprintf(err, errlen, "out of memory decoding %dx%d", W, H);
		return -ENOMEM;
	}
	const uint8_t *base = src; /* what the decoder reads */
	int yoff = 0;
	if (frc) { /* the sub-image's JPEG, read with the same settings */
		fast = true;
		yoff = fs.yoff;
		total = stk__jpeg_rst_bytes(&fs.r, 0, fs.r.nint);
		base = fs.buf;
		jpeg_abort_decompress(&ci);
		jpeg_mem_src(&ci, fs.buf, (unsigned long)fs.len);
		jpeg_read_header(&ci, TRUE);
		set_params(&ci, cmyk, denom);
		/* from here on every warning is about the intervals: an error.  The
		 * headers' warnings (an odd JFIF version...) the ordinary path
		 * ignores too. */
		em.strict = true;
	}
	if (ci.progressive_mode && !ci.restart_interval && stk__image_tail) {
		/* the region's last iMCU row and the one below it, which vertical
		 * upsampling reads (skip_tail) */
		int mh = STK__MIN_SCALED(&ci) * (ci.num_components == 1 ? 1 : ci.max_v_samp_factor);
		em.tail_row = (JDIMENSION)((g.y1 - 1) / mh + 2);
	}
	struct stk__jpeg_hook hook;
	if (fast)
		stk__jpeg_hook_prepare(&ci, &hook);
	else if (stk__image_scratch) /* the interval path has one scan: no coefficient arrays */
		stk__jpeg_mem_install(&ci, &jm);
	jpeg_start_decompress(&ci);
	if (fast)
		stk__jpeg_hook_install(&ci, &hook);
	JDIMENSION cx = g.cx, cw = g.cw;
	if (g.crop && !fast) {
		cx = (JDIMENSION)g.x0;
		cw = (JDIMENSION)(g.x1 - g.x0);
		jpeg_crop_scanline(&ci, &cx, &cw); /* widens to iMCU boundaries */
	} else if (g.crop && cw < ci.output_width) { /* the same columns of the sub-image */
		JDIMENSION want = g.cx - (JDIMENSION)fs.xoff, x = want, w = cw;
		jpeg_crop_scanline(&ci, &x, &w);
		if (x != want || w != cw) { /* never: plan() follows libjpeg's rule */
			snprintf(err, errlen, "internal error: crop at %u+%u where %u+%u was planned", x,
				 w, want, cw);
			rc = -EINVAL;
			goto done;
		}
	}
	int comps = ci.out_color_components;
	/* volatile: read after the jump target below (gcc -Wclobbered) */
	volatile size_t stride = (size_t)ci.output_width * (size_t)comps; /* after crop: cw columns */
	volatile int rows = g.y1 - g.y0;
	region = stk__scratch_get(STK__SCRATCH_REGION, stride * (size_t)rows +
						   (cmyk ? (size_t)cw * 3 * (size_t)rows : 0));
	if (!region) {
		snprintf(err, errlen, "out of memory decoding %dx%d", W, H);
		rc = -ENOMEM;
		goto done;
	}
	if (g.y0 > yoff)
		jpeg_skip_scanlines(&ci, (JDIMENSION)(g.y0 - yoff));
	while ((int)ci.output_scanline < g.y1 - yoff) {
		JSAMPROW row = region + stride * (ci.output_scanline - (JDIMENSION)(g.y0 - yoff));
		jpeg_read_scanlines(&ci, &row, 1);
	}
	size_t pos = (size_t)(ci.src->next_input_byte - base);
	if (fast && em.warning[0]) {
		char where[128];
		stk__jpeg_fast_name(&fs, em.warn_pos - (size_t)base, where, sizeof(where));
		snprintf(err, errlen, "corrupt JPEG: %s: %s", where, em.warning);
		rc = STK_ECORRUPT;
	} else if (em.truncated) {
		snprintf(err, errlen, "corrupt JPEG: data ends before the image does (truncated file)");
		rc = STK_ECORRUPT;
	}
	if (info) {
		uint64_t done_bytes = pos > scan0 + em.skipped ? pos - scan0 - em.skipped : 0;
		if (fast)
			done_bytes = stk__jpeg_fast_done(&fs, pos);
		info->fast = fast;
		info->entropy = total ? (double)done_bytes / (double)total : 1;
		info->entropy = info->entropy > 1 ? 1 : info->entropy;
	}
done:
	jpeg_abort_decompress(&ci);
	bool adobe_inverted = ci.saw_Adobe_marker;
	jpeg_destroy_decompress(&ci);
	stk__jpeg_mem_release(&jm);
	stk__jpeg_fast_free(&fs);
	if (rc) {
		stk__scratch_put(STK__SCRATCH_REGION, region);
		return rc;
	}
	uint8_t *rgb = region;
	if (cmyk) { /* to RGB: Adobe writes CMYK inverted */
		rgb = region + stride * (size_t)rows;
		for (size_t i = 0; i < (size_t)cw * (size_t)rows; i++) {
			const uint8_t *p = region + i * 4;
			int c = p[0], m = p[1], y = p[2], k = p[3];
			if (!adobe_inverted) {
				c = 255 - c;
				m = 255 - m;
				y = 255 - y;
				k = 255 - k;
			}
			rgb[i * 3] = (uint8_t)(c * k / 255);
			rgb[i * 3 + 1] = (uint8_t)(m * k / 255);
			rgb[i * 3 + 2] = (uint8_t)(y * k / 255);
		}
	}
	if (stk__image_region_hook)
		stk__image_region_hook(rgb, (int)cw, rows, g.bx - (double)cx, g.by - (double)g.y0);
	rc = stk__resample(o, rgb, (int)cw, rows, g.bx - (double)cx, g.by - (double)g.y0, g.bw, g.bh,
			   box.flip, out);
	stk__scratch_put(STK__SCRATCH_REGION, region);
	if (rc)
		snprintf(err, errlen, "out of memory resampling");
	return rc;
}

int stk__image_decode(const struct stk_image_opts *o, const uint8_t *src, size_t len,
		      uint64_t sample_seed, void *out, char *err, size_t errlen,
		      struct stk__decode_info *info)
{
	return stk__image_decode_box(o, src, len, NULL, sample_seed, out, err, errlen, info);
}

/* --- public ---------------------------------------------------------------- */

int stk_image_decode(const struct stk_image_opts *opts, const void *data, size_t len,
		     uint64_t seed, uint64_t epoch, int64_t index, void *out, char *err,
		     size_t errlen)
{
	char scratch[8];
	if (!err || !errlen) {
		err = scratch;
		errlen = sizeof(scratch);
	}
	err[0] = 0;
	struct stk_image_opts o;
	int rc = stk__image_opts(&o, opts, err, errlen);
	if (rc)
		return rc;
	return stk__image_decode(&o, data, len, stk__sample_seed(seed, epoch, index), out, err,
				 errlen, NULL);
}
