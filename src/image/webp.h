/* image/webp.h — WebP for image mode (image/webp.c, libwebp). */
#ifndef STK_WEBP_H
#define STK_WEBP_H

#include "image/box.h"

/* Whether src is a RIFF container of WebP. */
bool stk__is_webp(const uint8_t *src, size_t len);
/* stk__image_decode_box for a WebP (an animation: its first frame, as PIL
 * gives it): the box (NULL: drawn from sample_seed) resampled into out.
 * 0, or <0 with the reason in err (STK_ECORRUPT, STK_ETOOBIG, -ENOMEM). */
int stk__webp_decode(const struct stk_image_opts *o, const uint8_t *src, size_t len,
		     const struct stk__box *box, uint64_t sample_seed, void *out, char *err,
		     size_t errlen, struct stk__decode_info *info);

#endif
