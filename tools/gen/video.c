/* gen/video.c — `stoker gen DIR --video`: a folder of synthetic H.264 MP4s
 * (DIR/c0000/00000000.mp4 ...) in ImageFolder class folders, for the video
 * benchmarks and tests, written by the library's stk_video_make (FFmpeg's
 * libraries, loaded at run time: no ffmpeg command).
 *
 * Video i's length, size and rate depend only on (seed, i): a length drawn
 * in [min, max] seconds, a size and a rate from the lists, so the set does
 * not depend on the thread count.  Threads take video numbers from an
 * atomic counter; each file is written as NAME.tmp.mp4 and renamed, so no
 * half-written video is left under its name.  Every frame carries its index
 * in pixels (stk_video_frame_number reads it). */
#include "common/cli.h"
#include "common/outdir.h"
#include "gen/gen.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "stoker/stoker.h"

struct vgen {
	const struct gen_video_params *p;
	int cwidth, fwidth;
	atomic_int_fast64_t next, done;
	atomic_uint_fast64_t bytes, frames;
	atomic_int finished;
	pthread_mutex_t lock;
	char err[4500]; /* the first failure; guarded by lock */
};

static atomic_int vstop;

static void on_vsignal(int sig)
{
	(void)sig;
	vstop = 1;
}

static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* Video i's shape: from (seed, i) only. */
static void shape(const struct gen_video_params *p, int64_t i, struct stk_video_make_opts *o)
{
	uint64_t r = mix(p->seed ^ mix((uint64_t)i + 0x51ed27));
	double u = (double)(r >> 11) * 0x1.0p-53;
	int s = (int)(mix(r) % (uint64_t)p->nsizes), f = (int)(mix(r + 1) % (uint64_t)p->nfps);
	*o = (struct stk_video_make_opts){.size = sizeof(*o)};
	o->width = p->sizes[s][0];
	o->height = p->sizes[s][1];
	o->fps = p->fps[f];
	double secs = p->min_seconds + u * (p->max_seconds - p->min_seconds);
	long n = lround(secs * o->fps);
	o->frames = (uint32_t)(n < 1 ? 1 : n > 4095 ? 4095 : n);
	o->gop = p->gop;
	o->seed = r;
}

static void *vworker(void *arg)
{
	struct vgen *g = arg;
	const struct gen_video_params *p = g->p;
	while (!vstop) {
		int64_t i = atomic_fetch_add(&g->next, 1);
		if (i >= p->count)
			break;
		char tmp[4200], path[4200], err[4400];
		int n = snprintf(path, sizeof(path), "%s/c%0*lld/%0*lld.mp4", p->dir, g->cwidth,
				 (long long)(i % p->classes), g->fwidth, (long long)i);
		snprintf(tmp, sizeof(tmp), "%.*s.tmp.mp4", n - 4, path);
		struct stk_video_make_opts o;
		shape(p, i, &o);
		int rc = stk_video_make(tmp, &o, err, sizeof(err));
		if (!rc && rename(tmp, path)) {
			snprintf(err, sizeof(err), "cannot rename %s: %s", tmp, strerror(errno));
			unlink(tmp);
			rc = -1;
		}
		struct stat st;
		if (rc || stat(path, &st)) {
			pthread_mutex_lock(&g->lock);
			if (!g->err[0])
				snprintf(g->err, sizeof(g->err), "video %lld: %s", (long long)i,
					 rc ? err : strerror(errno));
			pthread_mutex_unlock(&g->lock);
			vstop = 1;
			break;
		}
		atomic_fetch_add(&g->bytes, (uint64_t)st.st_size);
		atomic_fetch_add(&g->frames, o.frames);
		atomic_fetch_add(&g->done, 1);
	}
	atomic_fetch_add(&g->finished, 1);
	return NULL;
}

static int report(struct vgen *g, int nthreads, double secs, bool json)
{
	const struct gen_video_params *p = g->p;
	int64_t done = atomic_load(&g->done);
	uint64_t bytes = atomic_load(&g->bytes), frames = atomic_load(&g->frames);
	char mb[32], mn[32];
	if (json) {
		json_t *o = json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:f, s:f, s:i}", "dir",
				      p->dir, "format", "h264-mp4", "videos", (json_int_t)done,
				      "classes", (json_int_t)p->classes, "seed", (json_int_t)p->seed,
				      "frames", (json_int_t)frames, "bytes", (json_int_t)bytes,
				      "seconds", secs, "frames_per_s", secs > 0 ? frames / secs : 0.0,
				      "threads", nthreads);
		int bad = !o || json_dumpf(o, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(6));
		json_decref(o);
		if (bad || putchar('\n') == EOF)
			return EXIT_FAIL;
	} else {
		printf("wrote %lld videos (%llu frames) in %lld classes to %s: %s, mean %s, %.1f s "
		       "(%.0f frames/s)\n",
		       (long long)done, (unsigned long long)frames, (long long)p->classes, p->dir,
		       fmt_bytes(mb, sizeof(mb), (double)bytes),
		       fmt_bytes(mn, sizeof(mn), done ? (double)bytes / (double)done : 0), secs,
		       secs > 0 ? (double)frames / secs : 0.0);
	}
	return fflush(stdout) ? EXIT_FAIL : EXIT_OK;
}

int gen_videos(const struct gen_video_params *p, bool json)
{
	char codecs[256];
	if (stk_video_codecs(codecs, sizeof(codecs)) < 0) {
		fprintf(stderr, "stoker gen: --video: %s\n", codecs);
		return EXIT_FAIL;
	}
	int nthreads = p->threads;
	if (!nthreads) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);
		nthreads = n > 0 ? (int)n : 1;
	}
	if (nthreads > p->count)
		nthreads = (int)p->count;
	int oc = outdir_check("gen", NULL, NULL, "DIR", p->dir, p->replace);
	if (oc)
		return oc;
	if (p->replace && outdir_clear("gen", p->dir))
		return EXIT_FAIL;
	char buf[4200];
	int e = mkdirs(p->dir, buf, sizeof(buf));
	if (e) {
		fprintf(stderr, "stoker gen: cannot create %s: %s\n",
			e == -ENAMETOOLONG ? p->dir : buf, strerror(-e));
		return EXIT_FAIL;
	}
	int cw = snprintf(NULL, 0, "%lld", (long long)p->classes - 1);
	int fw = snprintf(NULL, 0, "%lld", (long long)p->count - 1);
	struct vgen g = {.p = p, .cwidth = cw < 4 ? 4 : cw, .fwidth = fw < 8 ? 8 : fw};
	for (int64_t c = 0; c < p->classes; c++) {
		snprintf(buf, sizeof(buf), "%s/c%0*lld", p->dir, g.cwidth, (long long)c);
		if (mkdir(buf, 0755) && errno != EEXIST) {
			fprintf(stderr, "stoker gen: cannot create %s: %s\n", buf, strerror(errno));
			return EXIT_FAIL;
		}
	}
	pthread_mutex_init(&g.lock, NULL);
	vstop = 0;
	struct sigaction sa = {.sa_handler = on_vsignal, .sa_flags = SA_RESETHAND}, oi, ot;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, &oi);
	sigaction(SIGTERM, &sa, &ot);
	pthread_t *tids = calloc((size_t)nthreads, sizeof(*tids));
	int started = 0;
	double t0 = now_s();
	for (; tids && started < nthreads; started++)
		if (pthread_create(&tids[started], NULL, vworker, &g))
			break;
	const struct timespec tick = {0, 100 * 1000 * 1000};
	char mb[32];
	while (atomic_load(&g.finished) < started) {
		nanosleep(&tick, NULL);
		double dt = now_s() - t0;
		progress("gen %s: %lld/%lld videos, %s, %.0f frames/s", p->dir,
			 (long long)atomic_load(&g.done), (long long)p->count,
			 fmt_bytes(mb, sizeof(mb), (double)atomic_load(&g.bytes)),
			 dt > 0 ? (double)atomic_load(&g.frames) / dt : 0.0);
	}
	for (int t = 0; t < started; t++)
		pthread_join(tids[t], NULL);
	free(tids);
	double secs = now_s() - t0;
	progress_done();
	sigaction(SIGINT, &oi, NULL);
	sigaction(SIGTERM, &ot, NULL);
	pthread_mutex_destroy(&g.lock);
	if (g.err[0] || !started) {
		fprintf(stderr, "stoker gen: %s\n", g.err[0] ? g.err : "cannot start a thread");
		return EXIT_FAIL;
	}
	if (atomic_load(&g.done) < p->count) {
		fprintf(stderr, "stoker gen: interrupted after %lld of %lld videos in %s\n",
			(long long)atomic_load(&g.done), (long long)p->count, p->dir);
		return EXIT_FAIL;
	}
	return report(&g, nthreads, secs, json);
}

int gen_video_sizes(const char *text, struct gen_video_params *p)
{
	p->nsizes = 0;
	for (const char *s = text; s && *s;) {
		char *end;
		unsigned long w = strtoul(s, &end, 10), h;
		if (end == s || (*end != 'x' && *end != 'X'))
			return -EINVAL;
		s = end + 1;
		h = strtoul(s, &end, 10);
		if (end == s || (*end && *end != ',') || w < 16 || h < 16 || w > 8192 || h > 8192 ||
		    w % 2 || h % 2 || p->nsizes == GEN_VIDEO_MAX)
			return -EINVAL;
		p->sizes[p->nsizes][0] = (uint32_t)w;
		p->sizes[p->nsizes++][1] = (uint32_t)h;
		s = *end ? end + 1 : end;
	}
	return p->nsizes ? 0 : -EINVAL;
}

int gen_video_rates(const char *text, struct gen_video_params *p)
{
	p->nfps = 0;
	for (const char *s = text; s && *s;) {
		char *end;
		double f = strtod(s, &end);
		if (end == s || (*end && *end != ',') || !(f >= 1 && f <= 240) ||
		    p->nfps == GEN_VIDEO_MAX)
			return -EINVAL;
		p->fps[p->nfps++] = f;
		s = *end ? end + 1 : end;
	}
	return p->nfps ? 0 : -EINVAL;
}
