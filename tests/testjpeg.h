/* testjpeg.h — JPEG pictures for the cmocka tests, encoded with libjpeg-turbo:
 * any size, components (gray, RGB, CMYK), chroma sampling, quality, restart
 * interval and progressive or baseline, pixel (x, y) channel c from a
 * function.  One encoder for test_image and test_jpeg_rst. */
#ifndef STK_TESTJPEG_H
#define STK_TESTJPEG_H

#include "testutil.h"

#include <stdbool.h>
#include <jpeglib.h> /* after stdio.h (testutil.h): it uses FILE */

struct tu_jpeg {
	int w, h;
	int comps;             /* 1 gray, 3 RGB, 4 CMYK */
	int quality;           /* 0: 90 */
	int h_samp, v_samp;    /* RGB: the luma's sampling factors; 0: libjpeg's (2x2, 4:2:0) */
	unsigned restart;      /* restart interval in MCUs; 0: none */
	bool progressive;
	int (*pixel)(int x, int y, int c);
};

/* The picture as a JPEG in memory (malloc'ed; free() it). */
static inline uint8_t *tu_jpeg(const struct tu_jpeg *s, size_t *len)
{
	struct jpeg_compress_struct c;
	struct jpeg_error_mgr e;
	c.err = jpeg_std_error(&e);
	jpeg_create_compress(&c);
	unsigned char *out = NULL;
	unsigned long outlen = 0;
	jpeg_mem_dest(&c, &out, &outlen);
	c.image_width = (JDIMENSION)s->w;
	c.image_height = (JDIMENSION)s->h;
	c.input_components = s->comps;
	c.in_color_space = s->comps == 1 ? JCS_GRAYSCALE : s->comps == 4 ? JCS_CMYK : JCS_RGB;
	jpeg_set_defaults(&c);
	jpeg_set_quality(&c, s->quality ? s->quality : 90, TRUE);
	if (s->comps == 3 && s->h_samp) {
		c.comp_info[0].h_samp_factor = s->h_samp;
		c.comp_info[0].v_samp_factor = s->v_samp;
	}
	c.restart_interval = s->restart;
	if (s->progressive)
		jpeg_simple_progression(&c);
	jpeg_start_compress(&c, TRUE);
	uint8_t *row = malloc((size_t)s->w * (size_t)s->comps);
	assert_non_null(row);
	while (c.next_scanline < c.image_height) {
		for (int x = 0; x < s->w; x++)
			for (int k = 0; k < s->comps; k++)
				row[x * s->comps + k] = (uint8_t)s->pixel(x, (int)c.next_scanline, k);
		JSAMPROW r = row;
		jpeg_write_scanlines(&c, &r, 1);
	}
	jpeg_finish_compress(&c);
	jpeg_destroy_compress(&c);
	free(row);
	*len = outlen;
	return out;
}

#endif
