/* image/webp.h — WebP for image mode (image/webp.c, libwebp). */
#ifndef STK_WEBP_H
#define STK_WEBP_H

#include "image/span.h"

/* A file of more bytes is fed to libwebp's incremental decoder in pieces
 * of this size, max_decode_time checked between them (tests: SIZE_MAX
 * decodes every file in one call) [64 KiB]. */
extern size_t stk__webp_piece;
/* Whether src is a RIFF container of WebP. */
bool stk__is_webp(const uint8_t *src, size_t len);
/* A WebP's size (an animation's: its canvas) from its headers: 0, or <0
 * with the reason in err (STK_ECORRUPT: truncated, unreadable; STK_ETOOBIG:
 * over o->max_pixels). */
int stk__webp_size(const struct stk_image_opts *o, const uint8_t *src, size_t len, int *W,
		   int *H, char *err, size_t errlen);
/* stk__image_decode_box for a WebP whose size was checked (an animation:
 * its first frame, as PIL gives it): box resampled into out.  0, or <0 with
 * the reason in err (STK_ECORRUPT, STK_ETOOBIG past max_decode_time,
 * -ENOMEM). */
int stk__webp_decode(const struct stk_image_opts *o, const uint8_t *src, size_t len,
		     const struct stk__box *box, void *out, char *err, size_t errlen,
		     struct stk__decode_info *info);

#endif
