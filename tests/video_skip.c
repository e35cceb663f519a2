/* video_skip.c — what leaving the unneeded non-reference frames undecoded
 * (src/video/skip.c) saves a clip: 16 frames at stride 2, RandomResizedCrop
 * to 224, one codec thread, as `stoker bench --video` decodes them; the
 * thread CPU time of CLIPS clips with dropping on and off (rounds
 * alternating which goes first, medians), the frames decoded a clip, and
 * the bytes of every clip compared between the two.  The videos: the files
 * named, or with `gop N`, four 640x360 25 fps 10 s H.264 videos that
 * stk_video_make writes with a keyframe every N frames (build/video-skip-data/).
 * docs/BENCHMARKS.md "Video: the frames no clip needs, not decoded" has the
 * figures and the commands:
 *   make && cc -O2 -Iinclude -Isrc -I/usr/include/x86_64-linux-gnu tests/video_skip.c \
 *     build/libstoker.a $(pkg-config --libs liburing libjpeg libpng libwebp libwebpdemux \
 *     jansson libmicrohttpd libcurl) -ldl -lm -pthread -o build/video_skip
 *   flock -x /work/.measure.lock build/video_skip ROUNDS CLIPS gop 250 | FILE...
 *   STOKER_SKIP=1 valgrind --tool=callgrind build/video_skip 1 CLIPS ...   # one side only
 * STOKER_HASH=1 with STOKER_SKIP prints a hash of every clip's bytes, to
 * compare builds (outside the timed CPU it is not: time without it). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "stoker/stoker.h"
#include "video/skip.h"

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

static uint8_t *slurp(const char *p, size_t *len)
{
	FILE *f = fopen(p, "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	rewind(f);
	uint8_t *b = malloc(n > 0 ? (size_t)n : 1);
	if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
		free(b);
		b = NULL;
	}
	fclose(f);
	*len = (size_t)n;
	return b;
}

enum { MAXV = 256 };
static uint8_t *data[MAXV];
static size_t lens[MAXV];
static int nv;

/* CLIPS clips with dropping on (1) or off (0): CPU seconds; frames decoded
 * into *frames; each clip's bytes into keep (when not NULL). */
static uint64_t fnv = 14695981039346656037ull; /* every clip's bytes, hashed (FNV-1a) */

static double run(int on, int clips, const struct stk_video_opts *o, uint64_t *frames,
		  uint8_t *keep)
{
	size_t cb = stk_video_clip_bytes(o);
	uint8_t *out = malloc(cb);
	char err[256];
	stk__video_skip = on;
	*frames = 0;
	double t0 = cpu_s();
	for (int k = 0; k < clips; k++) {
		struct stk_clip_info ci = {.size = sizeof(ci)};
		int rc = stk_video_decode(o, data[k % nv], lens[k % nv], 38, 0, (uint64_t)k, 0,
					  keep ? keep + (size_t)k * cb : out, &ci, err, sizeof(err));
		if (rc) {
			fprintf(stderr, "video %d clip %d: %d %s\n", k % nv, k, rc, err);
			exit(1);
		}
		*frames += ci.frames_decoded;
		if (getenv("STOKER_HASH"))
			for (size_t i = 0; i < cb; i++)
				fnv = (fnv ^ (keep ? keep + (size_t)k * cb : out)[i]) * 1099511628211ull;
	}
	double t = cpu_s() - t0;
	free(out);
	return t;
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: video_skip ROUNDS CLIPS gop N | FILE...\n");
		return 2;
	}
	int rounds = (int)strtol(argv[1], NULL, 10), clips = (int)strtol(argv[2], NULL, 10);
	rounds = rounds < 1 ? 1 : rounds;
	clips = clips < 1 ? 1 : clips;
	char path[4][256];
	char **files = argv + 3;
	int nfiles = argc - 3;
	char *made[4];
	if (!strcmp(argv[3], "gop") && argc > 4) {
		unsigned gop = (unsigned)strtoul(argv[4], NULL, 10);
		mkdir("build/video-skip-data", 0755);
		for (int i = 0; i < 4; i++) {
			snprintf(path[i], sizeof(path[i]), "build/video-skip-data/gop%u-%d.mp4", gop, i);
			struct stk_video_make_opts mo = {.size = sizeof(mo), .width = 640, .height = 360,
							 .frames = 250, .fps = 25, .gop = gop,
							 .seed = (uint64_t)i};
			char err[512];
			struct stat st;
			if (stat(path[i], &st) && stk_video_make(path[i], &mo, err, sizeof(err))) {
				fprintf(stderr, "%s: %s\n", path[i], err);
				return 1;
			}
			made[i] = path[i];
		}
		files = made;
		nfiles = 4;
	}
	for (int i = 0; i < nfiles && nv < MAXV; i++, nv++)
		if (!(data[nv] = slurp(files[i], &lens[nv]))) {
			fprintf(stderr, "%s: cannot read\n", files[i]);
			return 1;
		}
	struct stk_video_opts o = {.size = sizeof(o), .frames = 16, .stride = 2, .threads = 1};
	char err[256];
	if (stk_video_opts_check(&o, err, sizeof(err)))
		return fprintf(stderr, "%s\n", err), 1;
	const char *only = getenv("STOKER_SKIP"); /* callgrind: one side, one round */
	if (only) /* valgrind runs it some 50 times slower than max_decode_time's 5 s allow */
		o.max_decode_ns = 3600000000000ull;
	uint64_t fon = 0, foff = 0;
	if (only) {
		double t = run(only[0] == '1', clips, &o, &fon, NULL);
		printf("dropping %s: %.2f ms a clip, %.1f frames decoded a clip\n",
		       only[0] == '1' ? "on" : "off", t * 1e3 / clips, (double)fon / clips);
		if (getenv("STOKER_HASH")) /* compare builds: the same clips' bytes */
			printf("clips' bytes FNV-1a %016llx\n", (unsigned long long)fnv);
		return 0;
	}
	/* the bytes, once: every clip the same with dropping on and off */
	size_t cb = stk_video_clip_bytes(&o);
	uint8_t *a = malloc(cb * (size_t)clips), *b = malloc(cb * (size_t)clips);
	if (!a || !b)
		return 1;
	run(1, clips, &o, &fon, a);
	run(0, clips, &o, &foff, b);
	int same = !memcmp(a, b, cb * (size_t)clips);
	free(a);
	free(b);
	double on[64], off[64];
	rounds = rounds > 64 ? 64 : rounds;
	for (int r = 0; r < rounds; r++) {
		uint64_t f;
		if (r % 2) {
			off[r] = run(0, clips, &o, &f, NULL);
			on[r] = run(1, clips, &o, &f, NULL);
		} else {
			on[r] = run(1, clips, &o, &f, NULL);
			off[r] = run(0, clips, &o, &f, NULL);
		}
		fprintf(stderr, "round %d: on %.1f ms off %.1f ms a clip\n", r, on[r] * 1e3 / clips,
			off[r] * 1e3 / clips);
	}
	qsort(on, (size_t)rounds, sizeof(double), cmp);
	qsort(off, (size_t)rounds, sizeof(double), cmp);
	double mon = on[rounds / 2] * 1e3 / clips, moff = off[rounds / 2] * 1e3 / clips;
	printf("%d videos, %d clips, %d rounds: CPU a clip %.1f ms dropping, %.1f ms every frame "
	       "(%.2fx); frames decoded a clip %.1f / %.1f; bytes %s\n",
	       nv, clips, rounds, mon, moff, moff / mon, (double)fon / clips, (double)foff / clips,
	       same ? "identical" : "DIFFER");
	return !same;
}
