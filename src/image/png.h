/* image/png.h — PNG for image mode (image/png.c, libpng). */
#ifndef STK_PNG_H
#define STK_PNG_H

#include "image/span.h"

/* 0: chunk CRCs are not checked (the fuzzer's mutations then reach the
 * chunks' contents) [1]. */
extern int stk__png_crc;
/* Whether src starts with PNG's signature. */
bool stk__is_png(const uint8_t *src, size_t len);
/* A PNG's size from its header: 0, or <0 with the reason in err
 * (STK_ECORRUPT: a zero side, no IHDR; STK_ETOOBIG: over o->max_pixels). */
int stk__png_size(const struct stk_image_opts *o, const uint8_t *src, size_t len, int *W, int *H,
		  char *err, size_t errlen);
/* stk__image_decode_box for a PNG whose size was checked: its pixels as
 * PIL's convert("RGB") gives them, box resampled into out.  0, or <0 with
 * the reason in err (STK_ECORRUPT, STK_ETOOBIG past max_decode_time,
 * -ENOMEM). */
int stk__png_decode(const struct stk_image_opts *o, const uint8_t *src, size_t len,
		    const struct stk__box *box, void *out, char *err, size_t errlen,
		    struct stk__decode_info *info);

#endif
