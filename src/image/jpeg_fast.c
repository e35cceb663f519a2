/*
 * image/jpeg_fast.c — image mode's restart-interval path, libjpeg's side.
 *
 * image/image.c plans a region of the scaled image (rows [y0, y1), iMCU-aligned
 * columns [cx, x1)); for a JPEG whose restart intervals tile its MCU rows
 * this file rounds the region out to whole intervals, adds an MCU row above
 * or below where vertical chroma upsampling reads across the region's first
 * or last row (horizontal upsampling already stops at the crop's edges), and
 * builds the sub-image's JPEG with image/jpeg_rst.c.  Two things keep
 * libjpeg-turbo at full speed on it:
 *  - its Huffman decoder leaves the fast path for every MCU of a file that
 *    declares restart intervals.  It needs the interval only where one
 *    starts: there it reads the marker, resets the DC predictors and
 *    byte-aligns (process_restart, run when its countdown reaches 0).  So the
 *    sub-image is decoded with a countdown of 1 and a wrapper around
 *    decode_mcu shows libjpeg the interval (1) for the first MCU of each
 *    interval and none (0) for the others, which take the fast path: the
 *    same coefficients, the same checks.  decode_mcu is the public entropy
 *    decoder method of jpegint.h, unchanged since libjpeg 6b;
 *  - its fast path reads up to 6 bytes ahead and gives up on (and redoes in
 *    the slow path) an MCU whose read-ahead meets a marker, and is not used
 *    within 512 bytes per block of the end of the data.  PAD zero bytes
 *    after each interval and TAIL after EOI keep both from happening.
 *    libjpeg skips the padding before each restart marker and warns that it
 *    did (JWRN_EXTRANEOUS_DATA): a count of exactly PAD is ours, any other
 *    count is damage.
 */
#include "base/internal.h"
#include "image/jpeg_fast.h"

#include <stdlib.h>
#include <string.h>

#include <jerror.h>
#include <jpegint.h> /* struct jpeg_entropy_decoder */

#define PAD 16
#define TAIL (512 * 10) /* D_MAX_BLOCKS_IN_MCU blocks of 512 bytes */

int stk__image_hook = 1;

int stk__jpeg_fast_setup(const struct jpeg_decompress_struct *ci, const uint8_t *src, size_t len,
			 int y0, int y1, bool crop, int cx, int x1, struct stk__jpeg_fast *f)
{
	memset(f, 0, sizeof(*f));
	if (!ci->restart_interval || ci->progressive_mode || ci->max_h_samp_factor > 2 ||
	    ci->max_v_samp_factor > 2)
		return 0;
	int rc = stk__jpeg_rst_scan(src, len, &f->r, NULL, 0);
	if (rc <= 0)
		return rc;
	if (f->r.ncomp != (uint32_t)ci->num_components || f->r.width != ci->image_width ||
	    f->r.height != ci->image_height) { /* libjpeg read other headers than we did */
		stk__jpeg_rst_free(&f->r);
		return 0;
	}
	bool one = ci->num_components == 1;
	int mw = STK__MIN_SCALED(ci) * (one ? 1 : ci->max_h_samp_factor);
	int mh = STK__MIN_SCALED(ci) * (one ? 1 : ci->max_v_samp_factor);
	bool vctx = false; /* a component upsampled vertically: rows read their neighbours */
	for (int c = 0; c < ci->num_components && !one; c++)
		vctx |= ci->max_v_samp_factor * STK__MIN_SCALED(ci) >
			ci->comp_info[c].v_samp_factor * STK__COMP_SCALED(&ci->comp_info[c]);
	uint32_t fy = (uint32_t)(y0 / mh), ly = (uint32_t)((y1 - 1) / mh);
	if (vctx && y0 % mh == 0 && fy > 0)
		fy--;
	if (vctx && y1 % mh == 0 && ly + 1 < f->r.mcuy)
		ly++;
	f->sub = (struct stk__jpeg_sub){.c0 = crop ? (uint32_t)(cx / mw) : 0,
					.c1 = crop ? (uint32_t)((x1 - 1) / mw) + 1 : f->r.mcux,
					.r0 = fy, .r1 = ly + 1};
	if (!stk__jpeg_rst_box(&f->r, &f->sub)) {
		stk__jpeg_rst_free(&f->r);
		return 0;
	}
	f->xoff = (int)f->sub.c0 * mw;
	f->yoff = (int)f->sub.r0 * mh;
	f->n = stk__jpeg_rst_count(&f->r, &f->sub);
	f->len = stk__jpeg_rst_build_len(&f->r, &f->sub, PAD, TAIL);
	f->buf = malloc(f->len);
	f->starts = malloc(sizeof(*f->starts) * ((size_t)f->n + 1));
	if (!f->buf || !f->starts) {
		stk__jpeg_fast_free(f);
		return -ENOMEM;
	}
	stk__jpeg_rst_build(src, &f->r, &f->sub, PAD, TAIL, f->buf, f->starts);
	return 1;
}

void stk__jpeg_fast_free(struct stk__jpeg_fast *f)
{
	free(f->starts);
	free(f->buf);
	f->starts = NULL;
	f->buf = NULL;
	stk__jpeg_rst_free(&f->r);
}

/* The interval of the sub-image at offset pos of buf (the largest k < n with
 * starts[k] <= pos), and the entropy bytes before pos. */
static uint32_t locate(const struct stk__jpeg_fast *f, size_t pos, uint64_t *bytes)
{
	uint32_t lo = 0, hi = f->n;
	if (pos <= f->starts[0]) {
		*bytes = 0;
		return 0;
	}
	while (hi - lo > 1) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (f->starts[mid] <= pos)
			lo = mid;
		else
			hi = mid;
	}
	size_t in = pos - f->starts[lo], n = f->starts[lo + 1] - 2 - PAD - f->starts[lo];
	*bytes = f->starts[lo] - f->starts[0] - (2ull + PAD) * lo + (in < n ? in : n);
	return lo;
}

uint64_t stk__jpeg_fast_done(const struct stk__jpeg_fast *f, size_t pos)
{
	uint64_t bytes;
	locate(f, pos, &bytes);
	return bytes;
}

void stk__jpeg_fast_name(const struct stk__jpeg_fast *f, size_t pos, char *buf, size_t len)
{
	uint64_t bytes;
	/* the byte before pos: after a marker libjpeg's input is past it */
	uint32_t i = stk__jpeg_rst_index(&f->r, &f->sub, locate(f, pos ? pos - 1 : 0, &bytes));
	uint32_t R = f->r.restart;
	if (f->r.mcux % R == 0) {
		uint32_t per = f->r.mcux / R;
		snprintf(buf, len, "restart interval %u of %u (MCU row %u, MCUs %u-%u)", i, f->r.nint,
			 i / per, i % per * R, i % per * R + R - 1);
	} else {
		uint32_t rows = R / f->r.mcux;
		snprintf(buf, len, "restart interval %u of %u (MCU rows %u-%u)", i, f->r.nint,
			 i * rows, i * rows + rows - 1);
	}
}

bool stk__jpeg_fast_padding(j_common_ptr c)
{
	return c->err->msg_code == JWRN_EXTRANEOUS_DATA && c->err->msg_parm.i[0] == PAD &&
	       c->err->msg_parm.i[1] >= 0xd0 && c->err->msg_parm.i[1] <= 0xd7;
}

static boolean hooked_decode_mcu(j_decompress_ptr ci, JBLOCKROW *blocks)
{
	struct stk__jpeg_hook *h = ci->client_data;
	bool first = h->left == 0;
	ci->restart_interval = first;
	boolean ok = h->decode_mcu(ci, blocks);
	ci->restart_interval = 0;
	if (ok)
		h->left = first ? h->interval - 1 : h->left - 1;
	return ok;
}

void stk__jpeg_hook_prepare(struct jpeg_decompress_struct *ci, struct stk__jpeg_hook *h)
{
	*h = (struct stk__jpeg_hook){.interval = ci->restart_interval};
	h->on = stk__image_hook && h->interval > 1;
	if (h->on)
		ci->restart_interval = 1; /* the countdown each restart resets to */
}

void stk__jpeg_hook_install(struct jpeg_decompress_struct *ci, struct stk__jpeg_hook *h)
{
	if (!h->on)
		return;
	h->decode_mcu = ci->entropy->decode_mcu;
	ci->client_data = h;
	ci->entropy->decode_mcu = hooked_decode_mcu;
	ci->restart_interval = 0;
}
