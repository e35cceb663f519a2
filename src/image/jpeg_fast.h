/* image/jpeg_fast.h — image mode's restart-interval path, libjpeg's side
 * (image/jpeg_fast.c): the sub-image of the intervals around a region, the
 * decode_mcu wrapper that keeps libjpeg-turbo's fast Huffman decoder on, and
 * what an interval is called in an error.  image/image.c decides and decodes. */
#ifndef STK_JPEG_FAST_H
#define STK_JPEG_FAST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jpeglib.h> /* after stdio.h: it uses FILE */

#include "image/jpeg_rst.h"

#if JPEG_LIB_VERSION >= 70
#define STK__MIN_SCALED(ci) ((ci)->min_DCT_v_scaled_size)
#define STK__COMP_SCALED(cp) ((cp)->DCT_v_scaled_size)
#else
#define STK__MIN_SCALED(ci) ((ci)->min_DCT_scaled_size)
#define STK__COMP_SCALED(cp) ((cp)->DCT_scaled_size)
#endif

/* The sub-image being decoded: the MCU rectangle of whole intervals around
 * the region, its JPEG, and where its intervals start in it. */
struct stk__jpeg_fast {
	struct stk__jpeg_rst r;
	struct stk__jpeg_sub sub;
	uint8_t *buf;   /* the sub-image's JPEG, len bytes */
	size_t len;
	size_t *starts; /* n + 1 offsets in buf (stk__jpeg_rst_build) */
	uint32_t n;     /* intervals in it */
	int xoff, yoff; /* the sub-image's origin, in scaled pixels */
};

/* For ci (header read, scaling set, jpeg_calc_output_dimensions done) and
 * the region of scaled rows [y0, y1) and columns [cx, x1) (crop false: all
 * columns): 1 and f ready to decode, 0 when src takes the ordinary path (no
 * restart intervals that tile the rows, progressive, sampling over 2), or
 * -ENOMEM.  One MCU row is added above or below where vertical upsampling
 * reads across the region's first or last row. */
int stk__jpeg_fast_setup(const struct jpeg_decompress_struct *ci, const uint8_t *src, size_t len,
			 int y0, int y1, bool crop, int cx, int x1, struct stk__jpeg_fast *f);
void stk__jpeg_fast_free(struct stk__jpeg_fast *f);
/* Entropy-coded bytes before offset pos of buf, markers and padding left out. */
uint64_t stk__jpeg_fast_done(const struct stk__jpeg_fast *f, size_t pos);
/* "restart interval 37 of 240 (MCU row 4, MCUs 8-11)": the interval of src
 * the decoder was in when its input was at offset pos of buf. */
void stk__jpeg_fast_name(const struct stk__jpeg_fast *f, size_t pos, char *buf, size_t len);
/* Whether the warning c carries is the one the padding after every interval
 * gives (see PAD in image/jpeg_fast.c), to be ignored. */
bool stk__jpeg_fast_padding(j_common_ptr c);

/* The decode_mcu wrapper: call stk__jpeg_hook_prepare after jpeg_read_header
 * of buf and before jpeg_start_decompress, stk__jpeg_hook_install after it.
 * h must live until the decode ends. */
struct stk__jpeg_hook {
	boolean (*decode_mcu)(j_decompress_ptr, JBLOCKROW *);
	unsigned interval, left; /* MCUs per interval, and left in this one */
	bool on;
};
void stk__jpeg_hook_prepare(struct jpeg_decompress_struct *ci, struct stk__jpeg_hook *h);
void stk__jpeg_hook_install(struct jpeg_decompress_struct *ci, struct stk__jpeg_hook *h);

/* 0 turns the wrapper off: libjpeg's slow Huffman path for every MCU (tests
 * and measurements compare) [1]. */
extern int stk__image_hook;

#endif
