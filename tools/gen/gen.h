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

/* Image i of the dataset of `seed` as a JPEG of `quality` in memory: *out
 * points into sc, valid until its next gen_render.  The bytes depend only on
 * (seed, i, quality) and the libjpeg-turbo build.  0, or -ENOMEM. */
int gen_render(uint64_t seed, int64_t i, int quality, struct gen_scratch *sc,
	       const unsigned char **out, size_t *outlen);

#endif
