/* video_sws.c — which libswscale filter video clips use (src/video/clip.c):
 * the CPU time of a 16-frame clip at stride 2 (RandomResizedCrop to 224)
 * from a 720p H.264 video, and of its conversions alone, with SWS_BILINEAR,
 * SWS_AREA and SWS_FAST_BILINEAR, rounds alternating the order, medians;
 * and each filter's mean |difference| from the best swscale does (Lanczos,
 * accurate rounding, full chroma) on the same clips.  docs/BENCHMARKS.md
 * "Video: swscale's filter" has the figures and the command:
 *   make && cc -O2 -Iinclude -Isrc -I/usr/include/x86_64-linux-gnu tests/video_sws.c \
 *     build/libstoker.a $(pkg-config --libs liburing libjpeg libpng libwebp libwebpdemux \
 *     jansson libmicrohttpd libcurl) -ldl -lm -pthread -o build/video_sws
 *   flock /work/.measure.lock build/video_sws [ROUNDS]
 *   valgrind --tool=callgrind build/video_sws 1 K   # filter K alone: its instructions */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <libswscale/swscale.h>

#include "stoker/stoker.h"
#include "video/video.h"

enum { CLIPS = 12, NF = 3 };
static const int flags[NF] = {SWS_BILINEAR, SWS_AREA, SWS_FAST_BILINEAR};
static const char *const names[NF] = {"SWS_BILINEAR", "SWS_AREA", "SWS_FAST_BILINEAR"};

static double cpu_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? (int)strtol(argv[1], NULL, 10) : 5;
	if (rounds < 1)
		rounds = 1;
	/* one filter only (0, 1, 2), no reference: for callgrind's counts */
	int only = argc > 2 ? (int)strtol(argv[2], NULL, 10) : -1;
	const char *path = "build/video_sws_720p.mp4";
	char err[512];
	struct stk_video_make_opts mo = {.size = sizeof(mo), .width = 1280, .height = 720,
					 .frames = 250, .fps = 25, .gop = 250};
	FILE *f = fopen(path, "rb");
	if (!f && stk_video_make(path, &mo, err, sizeof(err))) {
		fprintf(stderr, "%s: %s\n", path, err);
		return 1;
	}
	if (!f)
		f = fopen(path, "rb");
	fseek(f, 0, SEEK_END);
	size_t len = (size_t)ftell(f);
	rewind(f);
	uint8_t *data = malloc(len);
	if (fread(data, 1, len, f) != len)
		return 1;
	fclose(f);
	struct stk_video_opts o = {.size = sizeof(o), .frames = 16, .stride = 2, .out_size = 224,
				   .max_decode_ns = 3600000000000ull}; /* callgrind is slow */
	size_t cb = stk_video_clip_bytes(&o);
	uint8_t *out[NF + 1];
	for (int k = 0; k <= NF; k++)
		out[k] = malloc(cb * CLIPS);
	/* the reference: swscale's best */
	stk__video_sws_flags = SWS_LANCZOS | SWS_ACCURATE_RND | SWS_FULL_CHR_H_INT |
			       SWS_FULL_CHR_H_INP;
	for (int c = 0; only < 0 && c < CLIPS; c++)
		if (stk_video_decode(&o, data, len, 1, 0, (uint64_t)c, 0, out[NF] + c * cb, NULL, err,
				     sizeof(err))) {
			fprintf(stderr, "%s\n", err);
			return 1;
		}
	double *clip_t[NF], *sws_t[NF];
	for (int k = 0; k < NF; k++) {
		clip_t[k] = calloc((size_t)rounds, sizeof(double));
		sws_t[k] = calloc((size_t)rounds, sizeof(double));
	}
	for (int r = 0; r < rounds; r++)
		for (int i = 0; i < NF; i++) {
			int k = (i + r) % NF; /* alternate the order */
			if (only >= 0 && k != only)
				continue;
			uint64_t ns = 0;
			stk__video_sws_flags = flags[k];
			stk__video_sws_ns = &ns;
			double t0 = cpu_s();
			for (int c = 0; c < CLIPS; c++)
				if (stk_video_decode(&o, data, len, 1, 0, (uint64_t)c, 0, out[k] + c * cb,
						     NULL, err, sizeof(err))) {
					fprintf(stderr, "%s\n", err);
					return 1;
				}
			clip_t[k][r] = (cpu_s() - t0) / CLIPS;
			sws_t[k][r] = (double)ns * 1e-9 / CLIPS;
			stk__video_sws_ns = NULL;
		}
	printf("720p H.264 (gop 250), 16-frame clips at stride 2, RandomResizedCrop 224, %d "
	       "clips x %d rounds, medians of thread CPU time\n", CLIPS, rounds);
	printf("%-18s %10s %10s %8s %12s %12s\n", "filter", "clip ms", "sws ms", "vs BIL",
	       "|d| vs best", "|d| vs BIL");
	double base = 0;
	for (int k = 0; only < 0 && k < NF; k++) {
		qsort(clip_t[k], (size_t)rounds, sizeof(double), cmp);
		qsort(sws_t[k], (size_t)rounds, sizeof(double), cmp);
		double ct = clip_t[k][rounds / 2] * 1e3, st = sws_t[k][rounds / 2] * 1e3;
		if (!k)
			base = st;
		double d_ref = 0, d_bil = 0;
		for (size_t b = 0; b < cb * CLIPS; b++) {
			d_ref += abs(out[k][b] - out[NF][b]);
			d_bil += abs(out[k][b] - out[0][b]);
		}
		printf("%-18s %10.2f %10.3f %7.2fx %12.3f %12.3f\n", names[k], ct, st, st / base,
		       d_ref / (double)(cb * CLIPS), d_bil / (double)(cb * CLIPS));
	}
	return 0;
}
