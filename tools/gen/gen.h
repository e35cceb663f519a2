/* gen/gen.h — `stoker gen`'s picture synthesis (gen/image.c), used by gen/gen.c's
 * threads: one scratch per thread, one call per image. */
#ifndef STK_GEN_H
#define STK_GEN_H

#include <stddef.h>
#include <stdint.h>

struct gen_scratch;

/* Working memory for the largest picture; NULL when out of memory. */
struct gen_scratch *gen_scratch_new(void);
void gen_scratch_free(struct gen_scratch *sc);

enum gen_format { GEN_JPEG = 0, GEN_PNG, GEN_WEBP };

/* Image i of the dataset of `seed` as a file of `format` (JPEG and WebP
 * at `quality`) in memory: *out points into sc, valid until its next
 * gen_render.  The bytes depend only on (seed, i, format, quality) and the
 * encoders' builds.  0, or -ENOMEM. */
int gen_render(uint64_t seed, int64_t i, enum gen_format format, int quality,
	       struct gen_scratch *sc, const unsigned char **out, size_t *outlen);

/* gen/formats.c: w×h RGB (3 bytes a pixel, rows back to back) as a PNG
 * (8-bit truecolour) or a lossy WebP of `quality`, in *out (malloc'd, the
 * caller frees).  0, or -ENOMEM. */
int gen_png(const unsigned char *rgb, int w, int h, unsigned char **out, size_t *outlen);
int gen_webp(const unsigned char *rgb, int w, int h, int quality, unsigned char **out,
	     size_t *outlen);

#endif
