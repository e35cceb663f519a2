/* gen/gen.h — `stoker gen`: a generated dataset written by gen/gen.c (also
 * the bench's default dataset), its pictures synthesized by gen/image.c (one
 * scratch per thread, one call per image). */
#ifndef STK_GEN_H
#define STK_GEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What `stoker gen DIR` writes: DIR/<class>/<n>.jpg. */
struct gen_params {
	const char *dir;
	int64_t images, classes; /* 1 <= classes <= images */
	uint64_t seed;
	int threads;             /* encoder threads; 0: the online CPUs */
	int quality;             /* JPEG and WebP quality 1..100 */
	int format;              /* enum gen_format, or 3: the three in turn (mixed) */
	bool replace;            /* a non-empty dir is replaced whole (else refused) */
};

/* Writes the dataset, saying what it does on stderr (a JSON summary on stdout
 * with json); the CLI's exit code (EXIT_OK...). */
int gen_dataset(const struct gen_params *p, bool json);

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

/* gen/video.c: what `stoker gen DIR --video` writes: DIR/<class>/<n>.mp4. */
#define GEN_VIDEO_MAX 16
struct gen_video_params {
	const char *dir;
	int64_t count, classes;
	uint64_t seed;
	int threads;                        /* videos made at once; 0: the online CPUs */
	double min_seconds, max_seconds;
	uint32_t sizes[GEN_VIDEO_MAX][2];   /* width, height: one drawn per video */
	int nsizes;
	double fps[GEN_VIDEO_MAX];          /* one drawn per video */
	int nfps;
	uint32_t gop;                       /* keyframe interval in frames */
	bool replace;
};
/* Writes the videos (the CLI's exit code), as gen_dataset does images. */
int gen_videos(const struct gen_video_params *p, bool json);
/* "640x360,1280x720" and "25,30" into p: 0 or -EINVAL. */
int gen_video_sizes(const char *text, struct gen_video_params *p);
int gen_video_rates(const char *text, struct gen_video_params *p);

#endif
