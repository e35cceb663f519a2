/* image/png.h — PNG for image mode (image/png.c, libpng). */
#ifndef STK_PNG_H
#define STK_PNG_H

#include "image/box.h"

/* 0: chunk CRCs are not checked (the fuzzer's mutations then reach the
 * chunks' contents) [1]. */
extern int stk__png_crc;
/* Whether src starts with PNG's signature. */
bool stk__is_png(const uint8_t *src, size_t len);
/* stk__image_decode_box for a PNG: its pixels as PIL's convert("RGB") gives
 * them, the box (NULL: drawn from sample_seed) resampled into out.  0, or
 * <0 with the reason in err (STK_ECORRUPT, STK_ETOOBIG, -ENOMEM). */
int stk__png_decode(const struct stk_image_opts *o, const uint8_t *src, size_t len,
		    const struct stk__box *box, uint64_t sample_seed, void *out, char *err,
		    size_t errlen, struct stk__decode_info *info);

#endif
