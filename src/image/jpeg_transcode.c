/*
 * image/jpeg_transcode.c — a JPEG rewritten losslessly with restart markers that
 * tile its MCU rows, so that image mode decodes only a crop's intervals.
 *
 * libjpeg-turbo's transform path: jpeg_read_coefficients gives the quantized
 * DCT coefficients, jpeg_copy_critical_parameters the frame (quantization
 * tables, sampling, colour space), and jpeg_write_coefficients writes the
 * same coefficients again, so every decoder gets the same pixels.  What
 * changes: a restart interval (DRI) chosen per image so intervals tile the
 * rows, Huffman tables optimized for the image (which wins back the markers'
 * bytes, and more on files written with the standard tables), and a
 * progressive file becomes sequential.  APPn and COM markers are copied as
 * they were (JFIF, Exif, ICC, Adobe: libjpeg writes none of its own), so the
 * colour space reads the same.  Any libjpeg warning on the input (corrupt
 * data, an early end) refuses the file: the caller keeps its bytes.
 */
#include "base/internal.h"
#include "image/jpeg_rst.h"

#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h> /* after stdio.h: it uses FILE */
#include <jerror.h>

/* Intervals about this many pixels wide: narrow enough that a crop decodes
 * little beside itself, wide enough that the markers and the DC values they
 * restart cost ~1 % of the file and the first MCU of each interval, which
 * libjpeg decodes in its slow path, stays a small share (docs/BENCHMARKS.md:
 * 32 beat 16 and 64 by callgrind's count on the default dataset). */
uint32_t stk__jpeg_target_px = 32;
#define TARGET_PX stk__jpeg_target_px

struct err_mgr {
	struct jpeg_error_mgr pub;
	jmp_buf jmp;
	char warning[JMSG_LENGTH_MAX];
	struct jpeg_progress_mgr progress;
	bool scans; /* stopped at a scan past MAX_SCANS */
};

/* A progressive file with thousands of scans (a scan bomb) costs seconds of
 * CPU to read in: refused at the image option table's default max_scans,
 * as image mode does (image/image.c). */
#define MAX_SCANS 100

static void on_progress(j_common_ptr c)
{
	struct err_mgr *e = (struct err_mgr *)c->err;
	if (c->is_decompressor && ((j_decompress_ptr)c)->input_scan_number > MAX_SCANS) {
		e->scans = true;
		longjmp(e->jmp, 1);
	}
}

static void on_error_exit(j_common_ptr c)
{
	longjmp(((struct err_mgr *)c->err)->jmp, 1);
}

static void on_message(j_common_ptr c, int level)
{
	struct err_mgr *e = (struct err_mgr *)c->err;
	if (level < 0 && !e->warning[0])
		c->err->format_message(c, e->warning);
}

static void no_output(j_common_ptr c)
{
	(void)c;
}

/* A growing output buffer that stays ours whatever libjpeg does (its own
 * memory destination loses track of the buffer when an error cuts it short). */
struct dest {
	struct jpeg_destination_mgr pub;
	JOCTET *buf;
	size_t cap;
};

static void dest_init(j_compress_ptr c)
{
	struct dest *d = (struct dest *)c->dest;
	d->pub.next_output_byte = d->buf;
	d->pub.free_in_buffer = d->cap;
}

static boolean dest_grow(j_compress_ptr c)
{
	struct dest *d = (struct dest *)c->dest;
	JOCTET *b = realloc(d->buf, d->cap * 2);
	if (!b)
		ERREXIT1(c, JERR_OUT_OF_MEMORY, 10);
	d->buf = b;
	d->pub.next_output_byte = b + d->cap;
	d->pub.free_in_buffer = d->cap;
	d->cap *= 2;
	return TRUE;
}

static void dest_term(j_compress_ptr c)
{
	(void)c;
}

/* The interval for rows of mcux MCUs of mcu_w pixels: the divisor of mcux
 * whose width is nearest TARGET_PX (log scale) within [TARGET_PX / 2, 2 · TARGET_PX],
 * else the whole row (a width with no such divisor leaves no choice). */
uint32_t stk__jpeg_interval(uint32_t mcux, uint32_t mcu_w);
extern uint32_t stk__jpeg_target_px;
uint32_t stk__jpeg_interval(uint32_t mcux, uint32_t mcu_w)
{
	uint32_t best = mcux;
	double best_d = 1e9;
	for (uint32_t d = 1; d < mcux; d++) {
		uint32_t px = d * mcu_w;
		if (mcux % d || px < TARGET_PX / 2 || px > 2 * TARGET_PX)
			continue;
		double dist = px > TARGET_PX ? (double)px / TARGET_PX : (double)TARGET_PX / px;
		if (dist < best_d) {
			best_d = dist;
			best = d;
		}
	}
	return best;
}

void stk_free(void *p)
{
	free(p);
}

static int transcode(const uint8_t *p, size_t len, void **out, size_t *outlen, char *err,
		     size_t errlen)
{
	struct jpeg_decompress_struct in;
	struct jpeg_compress_struct dst;
	struct err_mgr em;
	struct dest d = {.pub = {.init_destination = dest_init, .empty_output_buffer = dest_grow,
				 .term_destination = dest_term}};
	volatile bool have_dst = false;
	in.err = jpeg_std_error(&em.pub);
	dst.err = &em.pub;
	em.pub.error_exit = on_error_exit;
	em.pub.emit_message = on_message;
	em.pub.output_message = no_output;
	em.warning[0] = 0;
	em.scans = false;
	em.progress = (struct jpeg_progress_mgr){.progress_monitor = on_progress};
	if (setjmp(em.jmp)) {
		char msg[JMSG_LENGTH_MAX];
		em.pub.format_message((j_common_ptr)&in, msg);
		if (em.scans)
			snprintf(err, errlen, "progressive JPEG with more than %d scans: refused, as a "
				 "scan bomb would be", MAX_SCANS);
		else
			snprintf(err, errlen, "corrupt or unsupported JPEG: %s", msg);
		if (have_dst)
			jpeg_destroy_compress(&dst);
		jpeg_destroy_decompress(&in);
		free(d.buf);
		return em.scans ? STK_ETOOBIG : STK_ECORRUPT;
	}
	jpeg_create_decompress(&in);
	in.progress = &em.progress;
	jpeg_mem_src(&in, p, (unsigned long)len);
	for (int m = 0; m < 16; m++)
		jpeg_save_markers(&in, JPEG_APP0 + m, 0xffff);
	jpeg_save_markers(&in, JPEG_COM, 0xffff);
	jpeg_read_header(&in, TRUE);
	jvirt_barray_ptr *coefs = jpeg_read_coefficients(&in);
	if (em.warning[0]) {
		snprintf(err, errlen, "corrupt JPEG: %s", em.warning);
		jpeg_destroy_decompress(&in);
		return STK_ECORRUPT;
	}
	jpeg_create_compress(&dst);
	have_dst = true;
	d.cap = len + len / 8 + 4096; /* the output is about the input's size */
	d.buf = malloc(d.cap);
	if (!d.buf)
		ERREXIT1(&dst, JERR_OUT_OF_MEMORY, 11);
	dst.dest = &d.pub;
	jpeg_copy_critical_parameters(&in, &dst);
	dst.write_JFIF_header = FALSE; /* the input's own APP0/APP14 are copied below */
	dst.write_Adobe_marker = FALSE;
	dst.optimize_coding = TRUE;
	dst.arith_code = FALSE;
	int hmax = 1;
	for (int c = 0; c < dst.num_components; c++)
		hmax = dst.comp_info[c].h_samp_factor > hmax ? dst.comp_info[c].h_samp_factor : hmax;
	uint32_t mcu_w = dst.num_components == 1 ? 8 : 8u * (uint32_t)hmax;
	uint32_t mcux = (dst.image_width + mcu_w - 1) / mcu_w;
	dst.restart_interval = stk__jpeg_interval(mcux, mcu_w);
	dst.restart_in_rows = 0;
	jpeg_write_coefficients(&dst, coefs);
	for (jpeg_saved_marker_ptr m = in.marker_list; m; m = m->next)
		jpeg_write_marker(&dst, m->marker, m->data, m->data_length);
	jpeg_finish_compress(&dst);
	size_t n = d.cap - d.pub.free_in_buffer;
	jpeg_destroy_compress(&dst);
	have_dst = false;
	jpeg_destroy_decompress(&in);
	/* what image mode will see: intervals that tile the rows */
	struct stk__jpeg_rst r;
	char why[128];
	int rc = stk__jpeg_rst_scan(d.buf, n, &r, why, sizeof(why));
	stk__jpeg_rst_free(&r);
	if (rc <= 0) {
		free(d.buf);
		snprintf(err, errlen, rc < 0 ? "out of memory" : "rewritten file is not restart-indexed: %s",
			 why);
		return rc < 0 ? rc : STK_EFORMAT;
	}
	*out = d.buf;
	*outlen = n;
	return 0;
}

int stk_jpeg_transcode(const void *data, size_t len, void **out, size_t *outlen, char *err,
		       size_t errlen)
{
	char scratch[8];
	if (!err || !errlen) {
		err = scratch;
		errlen = sizeof(scratch);
	}
	err[0] = 0;
	*out = NULL;
	*outlen = 0;
	const uint8_t *p = data;
	if (len < 3 || p[0] != 0xff || p[1] != 0xd8 || p[2] != 0xff) {
		snprintf(err, errlen, len ? "not a JPEG (no SOI marker)" : "empty file");
		return STK_EFORMAT;
	}
	return transcode(p, len, out, outlen, err, errlen);
}

int stk_jpeg_restart_info(const void *data, size_t len, uint32_t *interval, uint32_t *intervals,
			  char *why, size_t whylen)
{
	struct stk__jpeg_rst r;
	int rc = stk__jpeg_rst_scan(data, len, &r, why, whylen);
	if (rc == 1) {
		if (interval)
			*interval = r.restart;
		if (intervals)
			*intervals = r.nint;
	}
	stk__jpeg_rst_free(&r);
	return rc;
}
