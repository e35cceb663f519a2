/* gen.c — `stoker gen DIR`: a synthetic ImageNet-like folder of real JPEGs
 * (DIR/c0000/00000000.jpg ...) for benchmarks and tests.
 *
 * Pictures must cost what photos cost to store (~100 KB at q90) and to
 * decode, so they are built like photos, not from pure noise: a colour
 * gradient, multi-octave value noise with a near-1/f spectrum, occluding
 * shapes at every scale ("dead leaves") for edges, and mild grain.  Image i
 * depends only on (seed, i), so the bytes do not depend on the thread count.
 * Threads take image numbers from an atomic counter; each file is written as
 * NAME.tmp and renamed, so no half-written JPEG is left under its name. */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <dirent.h>
#include <stdarg.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <jpeglib.h>

#define MAX_W 640
#define MAX_H 480
#define MAX_SHAPES 4096 /* > the 1000 * 640*480/(500*375) drawn at most */

struct gen {
	const char *dir;
	uint64_t seed;
	int64_t images, classes;
	int quality, cwidth, fwidth; /* digits in class and file names */
	atomic_int_fast64_t next, done;
	atomic_uint_fast64_t bytes;
	atomic_int finished; /* worker threads that have returned */
	pthread_mutex_t lock;
	char err[512]; /* the first failure; guarded by lock */
};

/* Set by SIGINT/SIGTERM or a failure: workers finish the image in hand and
 * stop.  A lock-free atomic, so both a handler and threads may set it. */
static atomic_int stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static void fail(struct gen *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(struct gen *g, const char *fmt, ...)
{
	pthread_mutex_lock(&g->lock);
	if (!g->err[0]) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(g->err, sizeof(g->err), fmt, ap);
		va_end(ap);
	}
	pthread_mutex_unlock(&g->lock);
	stop = 1;
}

static uint64_t splitmix64(uint64_t *s)
{
	uint64_t x = *s;
	*s += 0x9e3779b97f4a7c15ull;
	return mix64(x);
}

/* Uniform in [0, 1). */
static float frand(uint64_t *s)
{
	return (float)(splitmix64(s) >> 40) * (1.0f / 16777216.0f);
}

static int irand(uint64_t *s, int lo, int hi) /* inclusive */
{
	return lo + (int)(splitmix64(s) % (uint64_t)(hi - lo + 1));
}

/* Per-thread working memory, sized for the largest picture. */
struct scratch {
	float *lum, *u, *v;   /* texture planes, w*h */
	float *det, *mask;    /* fine detail and where it shows, w*h */
	float *row;           /* one lattice row blended in y */
	float *lat;           /* one octave's lattice */
	int *ix;              /* per-x lattice cell of the current octave */
	float *fx;            /* per-x smoothstep weight */
	uint16_t *id;         /* which shape covers each pixel (0 = none) */
	struct shape *shapes; /* MAX_SHAPES + 1 */
	JSAMPLE *line;        /* one RGB scanline */
};

/* Adds one octave of value noise with cells of `cell` pixels and amplitude
 * `amp`: random values on a lattice, smoothstep-interpolated.  Octaves of
 * near-equal amplitude give equal power per octave, the 1/f amplitude
 * spectrum of natural images that makes JPEG sizes photo-like. */
static void octave(struct scratch *sc, float *dst, int w, int h, float cell, float amp,
		   uint64_t *rng)
{
	int gw = (int)((float)w / cell) + 2, gh = (int)((float)h / cell) + 2;
	for (int i = 0; i < gw * gh; i++)
		sc->lat[i] = (frand(rng) * 2 - 1) * amp;
	for (int x = 0; x < w; x++) {
		float p = (float)x / cell;
		int i = (int)p;
		float f = p - (float)i;
		sc->ix[x] = i;
		sc->fx[x] = f * f * (3 - 2 * f);
	}
	for (int y = 0; y < h; y++) {
		float p = (float)y / cell;
		int j = (int)p;
		float f = p - (float)j;
		f = f * f * (3 - 2 * f);
		const float *a = sc->lat + (size_t)j * gw, *b = a + gw;
		for (int i = 0; i < gw; i++)
			sc->row[i] = a[i] + (b[i] - a[i]) * f;
		float *d = dst + (size_t)y * w;
		for (int x = 0; x < w; x++) {
			const float *r = sc->row + sc->ix[x];
			d[x] += r[0] + (r[1] - r[0]) * sc->fx[x];
		}
	}
}

/* Tuned so that the mean file is ~100 KB at q90 over the default size mix
 * (measured: 103 KB mean, 66-146 KB from 10th to 90th percentile). */
#define TEXTURE 35.0f /* coarsest smooth luma octave; later ones shrink 0.6x */
#define DETAIL 80.0f  /* coarsest (20 px) detail octave ... */
#define PERSIST 0.9f  /* ... and the ratio to the next: close to 1/f */
#define CDETAIL 15.0f /* each fine chroma octave */
#define GRAIN 12.0f   /* luma grain peak; triangular, so sd ~5 levels */
#define LEAVES 600    /* mean shapes in a 500x375 picture, from 1/3 to 5/3 of it */
#define RMIN 3.0f     /* smallest shape radius, pixels */

struct shape {
	float c[3]; /* RGB */
	float tex;  /* how much of the texture shows through */
};

/* libjpeg calls exit() on errors by default; a tool's worker must not. */
struct jerr {
	struct jpeg_error_mgr pub;
	jmp_buf jb;
};

static void jpeg_fail(j_common_ptr ci)
{
	longjmp(((struct jerr *)ci->err)->jb, 1);
}

/* Renders image i into a JPEG in memory.  0, or -ENOMEM. */
static int render(const struct gen *g, struct scratch *sc, int64_t i, unsigned char **out,
		  unsigned long *outlen)
{
	uint64_t rng = g->seed ^ 0x5354b0c3e2f1a7d5ull;
	uint64_t mix = (uint64_t)i ^ splitmix64(&rng);
	rng = splitmix64(&mix); /* the picture's generator: a function of (seed, i) only */

	int w = irand(&rng, 300, 640), h = irand(&rng, 240, 480);
	size_t n = (size_t)w * h;
	memset(sc->lum, 0, n * sizeof(float));
	memset(sc->u, 0, n * sizeof(float));
	memset(sc->v, 0, n * sizeof(float));

	/* Luma = smooth structure (lighting, large forms) + fine detail whose
	 * strength follows a slow mask, so a picture has busy and quiet regions
	 * (foliage and sky) and pictures differ in size as photos do. */
	float big = (float)(w > h ? w : h) * (0.25f + 0.5f * frand(&rng));
	float amp = TEXTURE * (0.7f + 0.6f * frand(&rng));
	for (float cell = big; cell >= 24.0f; cell *= 0.5f, amp *= 0.6f)
		octave(sc, sc->lum, w, h, cell, amp, &rng);
	memset(sc->mask, 0, n * sizeof(float));
	octave(sc, sc->mask, w, h, big * 0.7f, 1.0f, &rng);
	octave(sc, sc->mask, w, h, big * 0.35f, 0.5f, &rng);
	memset(sc->det, 0, n * sizeof(float));
	amp = DETAIL * (0.5f + frand(&rng));
	for (float cell = 20.0f; cell >= 1.0f; cell *= 0.5f, amp *= PERSIST)
		octave(sc, sc->det, w, h, cell, amp, &rng);
	float mbias = 0.55f * (frand(&rng) - 0.5f);
	/* Colour varies slowly, as it does in photos; JPEG halves chroma anyway. */
	float camp = 25.0f + 20.0f * frand(&rng);
	for (float cell = big; cell >= 24.0f; cell *= 0.5f, camp *= 0.5f) {
		octave(sc, sc->u, w, h, cell, camp, &rng);
		octave(sc, sc->v, w, h, cell, camp, &rng);
	}
	for (float cell = 12.0f, a = CDETAIL; cell >= 3.0f; cell *= 0.5f) {
		octave(sc, sc->u, w, h, cell, a, &rng);
		octave(sc, sc->v, w, h, cell, a, &rng);
	}

	/* Background: a gradient between two colours along a random direction. */
	float c0[3], c1[3];
	for (int k = 0; k < 3; k++) {
		c0[k] = 30 + 190 * frand(&rng);
		c1[k] = 30 + 190 * frand(&rng);
	}
	/* No libm trigonometry: it may round differently from one libc to the next. */
	float dx = (2 * frand(&rng) - 1) / (float)w, dy = (2 * frand(&rng) - 1) / (float)h;

	/* "Dead leaves": ellipses and rectangles with radii drawn from r^-3,
	 * later ones on top, as objects occlude each other in a scene.  Edges at
	 * every scale are what give photos their 1/f spectrum and JPEG cost. */
	struct shape *shapes = sc->shapes;
	float area = (float)n / (500.0f * 375.0f);
	int nshapes = (int)((float)irand(&rng, LEAVES / 3, LEAVES * 5 / 3) * area);
	if (nshapes > MAX_SHAPES)
		nshapes = MAX_SHAPES;
	float rmin = RMIN, rmax = (float)(w > h ? w : h) / 3;
	float k2 = 1 - (rmin / rmax) * (rmin / rmax);
	memset(sc->id, 0, n * sizeof(*sc->id));
	for (int s = 1; s <= nshapes; s++) {
		/* Colours from the picture's palette, so that it stays coherent. */
		float t = frand(&rng);
		for (int k = 0; k < 3; k++)
			shapes[s].c[k] = c0[k] + (c1[k] - c0[k]) * t + 120 * (frand(&rng) - 0.5f);
		shapes[s].tex = 0.3f + 0.7f * frand(&rng);
		float r = rmin / sqrtf(1 - frand(&rng) * k2), asp = 0.5f + frand(&rng);
		int rx = (int)(r * asp) + 1, ry = (int)(r / asp) + 1;
		int cx = irand(&rng, 0, w - 1), cy = irand(&rng, 0, h - 1);
		bool ellipse = splitmix64(&rng) % 3;
		int y0 = cy - ry < 0 ? 0 : cy - ry, y1 = cy + ry >= h ? h - 1 : cy + ry;
		int x0 = cx - rx < 0 ? 0 : cx - rx, x1 = cx + rx >= w ? w - 1 : cx + rx;
		for (int y = y0; y <= y1; y++) {
			float ny = (float)(y - cy) / (float)ry;
			for (int x = x0; x <= x1; x++) {
				float nx = (float)(x - cx) / (float)rx;
				if (!ellipse || nx * nx + ny * ny <= 1.0f)
					sc->id[(size_t)y * w + x] = (uint16_t)s;
			}
		}
	}

	struct jpeg_compress_struct ci;
	struct jerr jerr;
	ci.err = jpeg_std_error(&jerr.pub);
	jerr.pub.error_exit = jpeg_fail;
	*out = NULL;
	*outlen = 0;
	if (setjmp(jerr.jb)) { /* libjpeg's only failure here is out of memory */
		jpeg_destroy_compress(&ci);
		free(*out);
		*out = NULL;
		return -ENOMEM;
	}
	jpeg_create_compress(&ci);
	jpeg_mem_dest(&ci, out, outlen);
	ci.image_width = (JDIMENSION)w;
	ci.image_height = (JDIMENSION)h;
	ci.input_components = 3;
	ci.in_color_space = JCS_RGB;
	jpeg_set_defaults(&ci);
	jpeg_set_quality(&ci, g->quality, TRUE);
	jpeg_start_compress(&ci, TRUE);

	uint64_t grng = splitmix64(&rng);
	for (int y = 0; y < h; y++) {
		const float *D = sc->det + (size_t)y * w, *M = sc->mask + (size_t)y * w;
		const float *L = sc->lum + (size_t)y * w, *U = sc->u + (size_t)y * w,
			    *V = sc->v + (size_t)y * w;
		const uint16_t *id = sc->id + (size_t)y * w;
		JSAMPLE *o = sc->line;
		for (int x = 0; x < w; x++) {
			float c[3], tex = 1.0f, t = (float)x * dx + (float)y * dy;
			t -= floorf(t);
			for (int k = 0; k < 3; k++)
				c[k] = id[x] ? shapes[id[x]].c[k] : c0[k] + (c1[k] - c0[k]) * t;
			if (id[x])
				tex = shapes[id[x]].tex;
			/* One 64-bit draw gives triangular luma grain and a little chroma grain. */
			uint64_t z = splitmix64(&grng);
			float gl = (float)((int)(z & 0xff) + (int)((z >> 8) & 0xff) - 255) *
				   (GRAIN / 255.0f);
			float gu = (float)((int)((z >> 16) & 0xff) - 128) * (GRAIN / 512.0f);
			float gv = (float)((int)((z >> 24) & 0xff) - 128) * (GRAIN / 512.0f);
			float m = 1.0f + M[x] + mbias;
			m = m < 0.08f ? 0.08f : m > 1 ? 1 : m;
			float l = (L[x] + D[x] * m) * tex + gl, u = U[x] + gu, v = V[x] + gv;
			c[0] += l + 1.40f * v;
			c[1] += l - 0.34f * u - 0.71f * v;
			c[2] += l + 1.77f * u;
			for (int k = 0; k < 3; k++) {
				/* Fold, not clip: flat clipped patches would waste the detail. */
				float q = c[k] < 0 ? -c[k] : c[k] > 255 ? 510 - c[k] : c[k];
				o[3 * x + k] = (JSAMPLE)(q < 0 ? 0 : q > 255 ? 255 : q + 0.5f);
			}
		}
		JSAMPROW rows[1] = {sc->line};
		jpeg_write_scanlines(&ci, rows, 1);
	}
	jpeg_finish_compress(&ci);
	jpeg_destroy_compress(&ci);
	return *out ? 0 : -ENOMEM;
}

static void class_dir(const struct gen *g, int64_t c, char *buf, size_t len)
{
	snprintf(buf, len, "%s/c%0*lld", g->dir, g->cwidth, (long long)c);
}

/* Writes len bytes to dir/name.jpg through dir/name.tmp.  0, or fills g->err. */
static int write_image(struct gen *g, int64_t i, const unsigned char *buf, size_t len)
{
	char dir[4096], tmp[4200], path[4200];
	class_dir(g, i % g->classes, dir, sizeof(dir));
	snprintf(tmp, sizeof(tmp), "%s/%0*lld.tmp", dir, g->fwidth, (long long)i);
	int n = snprintf(path, sizeof(path), "%s/%0*lld.jpg", dir, g->fwidth, (long long)i);
	if (n < 0 || (size_t)n >= sizeof(path)) {
		fail(g, "%s: path too long", dir);
		return -1;
	}
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		fail(g, "cannot create %s: %s", tmp, strerror(errno));
		return -1;
	}
	const char *what = "write";
	int e = 0;
	for (size_t off = 0; off < len;) {
		ssize_t w = write(fd, buf + off, len - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			e = w < 0 ? errno : EIO;
			break;
		}
		off += (size_t)w;
	}
	/* close() can be the first to report ENOSPC or EIO (NFS, quotas). */
	if (close(fd) && !e) {
		e = errno;
		what = "close";
	}
	if (!e && rename(tmp, path)) {
		e = errno;
		what = "rename";
	}
	if (e) {
		unlink(tmp);
		fail(g, "cannot %s %s: %s", what, !strcmp(what, "rename") ? path : tmp, strerror(e));
		return -1;
	}
	return 0;
}

static void *worker(void *arg)
{
	struct gen *g = arg;
	struct scratch sc = {0};
	size_t n = (size_t)MAX_W * MAX_H;
	/* Octave cells are >= 1 px: a lattice holds at most (W+2) x (H+2) values. */
	size_t nlat = (size_t)(MAX_W + 4) * (MAX_H + 4);
	float *f = malloc((5 * n + nlat + 2 * MAX_W + 4) * sizeof(float));
	sc.id = malloc(n * sizeof(*sc.id));
	sc.shapes = malloc((MAX_SHAPES + 1) * sizeof(*sc.shapes));
	sc.ix = malloc(MAX_W * sizeof(int));
	sc.line = malloc(MAX_W * 3);
	if (!f || !sc.id || !sc.shapes || !sc.ix || !sc.line) {
		fail(g, "out of memory");
		goto out;
	}
	sc.lum = f;
	sc.u = f + n;
	sc.v = f + 2 * n;
	sc.det = f + 3 * n;
	sc.mask = f + 4 * n;
	sc.lat = f + 5 * n;
	sc.row = sc.lat + nlat; /* MAX_W + 4 */
	sc.fx = sc.row + MAX_W + 4;
	while (!stop) {
		int64_t i = atomic_fetch_add(&g->next, 1);
		if (i >= g->images)
			break;
		unsigned char *jpg;
		unsigned long len;
		if (render(g, &sc, i, &jpg, &len)) {
			fail(g, "out of memory encoding image %lld", (long long)i);
			break;
		}
		int r = write_image(g, i, jpg, len);
		free(jpg);
		if (r)
			break;
		atomic_fetch_add(&g->bytes, len);
		atomic_fetch_add(&g->done, 1);
	}
out:
	free(f);
	free(sc.id);
	free(sc.shapes);
	free(sc.ix);
	free(sc.line);
	atomic_fetch_add(&g->finished, 1);
	return NULL;
}

/* mkdir -p.  0, or -errno with path cut at the component that failed. */
static int mkdirs(char *path)
{
	for (char *p = path + 1;; p++) {
		if (*p && *p != '/')
			continue;
		char c = *p;
		*p = 0;
		if (mkdir(path, 0755) && errno != EEXIST)
			return -errno;
		if (!c)
			break;
		*p = c;
	}
	struct stat st;
	if (stat(path, &st))
		return -errno;
	return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
}

/* 1 if dir holds anything, 0 if empty or missing, -errno if unreadable. */
static int dir_nonempty(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return errno == ENOENT ? 0 : -errno;
	struct dirent *de;
	int r = 0;
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) {
			r = 1;
			break;
		}
	closedir(d);
	return r;
}

/* opt_parse stops at the first operand (getopt's "+"), yet the usage reads
 * `stoker gen DIR --images N`: put the options first, each with its argument,
 * then "--" and the operands.  out has room for argc + 2; returns its count. */
static char sep[] = "--";

static int options_first(const struct opt *opts, int argc, char **argv, char **out)
{
	int k = 1;
	out[0] = argv[0];
	for (int pass = 0; pass < 2; pass++) {
		if (pass == 1)
			out[k++] = sep;
		for (int a = 1; a < argc; a++) {
			const char *s = argv[a];
			if (!strcmp(s, "--")) {
				for (a++; pass == 1 && a < argc; a++)
					out[k++] = argv[a];
				break;
			}
			if (s[0] != '-' || !s[1]) {
				if (pass == 1)
					out[k++] = argv[a];
				continue;
			}
			/* Does it take the next word?  Long names may be abbreviated. */
			bool takes = false;
			size_t l = strlen(s + 2);
			for (const struct opt *o = opts; o->name; o++)
				if (o->type != OPT_BOOL &&
				    (s[1] == '-' ? !strncmp(s + 2, o->name, l) && !strchr(s, '=')
						 : o->short_name == s[1] && !s[2]))
					takes = true;
			if (pass == 0)
				out[k++] = argv[a];
			if (takes && a + 1 < argc && pass == 0)
				out[k++] = argv[a + 1];
			a += takes && a + 1 < argc;
		}
	}
	out[k] = NULL;
	return k;
}

static int run(struct gen *g, int nthreads, bool json)
{
	char buf[4200];
	for (int64_t c = 0; c < g->classes; c++) {
		class_dir(g, c, buf, sizeof(buf));
		if (mkdir(buf, 0755) && errno != EEXIST) {
			fprintf(stderr, "stoker gen: cannot create %s: %s\n", buf, strerror(errno));
			return EXIT_FAIL;
		}
	}

	/* Stop cleanly on ^C: in-flight images are finished and renamed, so no
	 * .tmp is left behind.  A second ^C kills at once. */
	struct sigaction sa = {.sa_handler = on_signal, .sa_flags = SA_RESETHAND};
	struct sigaction old_int, old_term;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, &old_int);
	sigaction(SIGTERM, &sa, &old_term);

	pthread_t *tids = calloc((size_t)nthreads, sizeof(*tids));
	if (!tids) {
		fprintf(stderr, "stoker gen: out of memory\n");
		return EXIT_FAIL;
	}
	double t0 = now_s();
	int started = 0;
	for (; started < nthreads; started++) {
		int e = pthread_create(&tids[started], NULL, worker, g);
		if (e) {
			fail(g, "cannot start a thread: %s", strerror(e));
			break;
		}
	}
	char mb[32];
	const struct timespec tick = {0, 100 * 1000 * 1000};
	while (atomic_load(&g->finished) < started) {
		nanosleep(&tick, NULL);
		double dt = now_s() - t0;
		int64_t done = atomic_load(&g->done);
		progress("gen %s: %lld/%lld images, %s, %.0f images/s", g->dir, (long long)done,
			 (long long)g->images, fmt_bytes(mb, sizeof(mb), (double)atomic_load(&g->bytes)),
			 dt > 0 ? (double)done / dt : 0.0);
	}
	for (int t = 0; t < started; t++)
		pthread_join(tids[t], NULL);
	free(tids);
	double secs = now_s() - t0;
	progress_done();
	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGTERM, &old_term, NULL);

	int64_t done = atomic_load(&g->done);
	uint64_t bytes = atomic_load(&g->bytes);
	if (g->err[0]) {
		fprintf(stderr, "stoker gen: %s\n", g->err);
		return EXIT_FAIL;
	}
	if (done < g->images) {
		fprintf(stderr, "stoker gen: interrupted after %lld of %lld images in %s\n",
			(long long)done, (long long)g->images, g->dir);
		return EXIT_FAIL;
	}
	double mean = (double)bytes / (double)done;
	if (json) {
		json_t *o = json_pack("{s:s, s:I, s:I, s:I, s:i, s:I, s:f, s:f, s:f, s:i}",
				      "dir", g->dir, "images", (json_int_t)done, "classes",
				      (json_int_t)g->classes, "seed", (json_int_t)g->seed,
				      "quality", g->quality, "bytes", (json_int_t)bytes,
				      "seconds", secs, "mean_bytes", mean, "images_per_s",
				      secs > 0 ? (double)done / secs : 0.0, "threads", nthreads);
		int bad = !o || json_dumpf(o, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(6));
		json_decref(o);
		if (bad || putchar('\n') == EOF)
			return EXIT_FAIL;
	} else {
		char mn[32];
		printf("wrote %lld images in %lld classes to %s: %s, mean %s, %.1f s (%.0f images/s)\n",
		       (long long)done, (long long)g->classes, g->dir,
		       fmt_bytes(mb, sizeof(mb), (double)bytes), fmt_bytes(mn, sizeof(mn), mean),
		       secs, secs > 0 ? (double)done / secs : 0.0);
	}
	return fflush(stdout) ? EXIT_FAIL : EXIT_OK;
}

int cmd_gen(int argc, char **argv)
{
	int64_t images, classes, seed, threads, quality;
	bool force = false, json = false;
	const struct opt opts[] = {
		{"images", 'n', OPT_INT, &images, "10000", 1, 1e9, NULL, "N", "number of images"},
		{"classes", 'c', OPT_INT, &classes, "100", 1, 1e6, NULL, "K",
		 "class folders c0000..., images dealt round-robin (K <= N)"},
		{"seed", 's', OPT_INT, &seed, "0", 0, 0, NULL, "S",
		 "image i depends only on (seed, i)"},
		{"threads", 'j', OPT_INT, &threads, "0", 0, 256, NULL, "T",
		 "encoder threads (0 = online CPUs)"},
		{"quality", 'q', OPT_INT, &quality, "90", 1, 100, NULL, "Q", "JPEG quality"},
		{"force", 'f', OPT_BOOL, &force, NULL, 0, 0, NULL, NULL,
		 "write into a non-empty DIR, overwriting files of the same name"},
		{"json", 0, OPT_BOOL, &json, NULL, 0, 0, NULL, NULL, "print a JSON summary"},
		OPT_END,
	};
	const struct cmd_help help = {
		"gen", "[options] DIR",
		"Writes an ImageNet-like folder of real JPEGs, DIR/<class>/<n>.jpg: 300-640 x\n"
		"240-480 pixels, ~100 KB each at quality 90, labelled by sorted class folder.\n"
		"The bytes depend only on the seed, not on the thread count.",
	};
	char **av = malloc((size_t)(argc + 2) * sizeof(*av));
	if (!av) {
		fprintf(stderr, "stoker gen: out of memory\n");
		return EXIT_FAIL;
	}
	int ac = options_first(opts, argc, argv, av);
	int first = opt_parse(&help, opts, ac, av);
	/* A parse that ran to the end stopped just past our "--"; one that
	 * stopped elsewhere printed --help (opt_parse returns optind then). */
	bool helped = first > 0 && av[first - 1] != sep;
	char *dirarg = first > 0 && first < ac ? av[first] : NULL;
	int nops = first > 0 ? ac - first : 0;
	free(av);
	if (first <= 0 || helped)
		return first < 0 ? -first : EXIT_OK;
	if (nops != 1) {
		fprintf(stderr, "stoker gen: %s\ntry 'stoker gen --help'\n",
			nops ? "give exactly one DIR" : "missing DIR");
		return EXIT_USAGE;
	}
	if (classes > images) { /* an empty class folder would not load */
		fprintf(stderr, "stoker gen: --classes is more than --images\n");
		return EXIT_USAGE;
	}
	if (!threads) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);
		threads = n > 0 ? n : 1;
	}
	if (threads > images)
		threads = images;

	int ne = dir_nonempty(dirarg);
	if (ne < 0) {
		fprintf(stderr, "stoker gen: cannot read %s: %s\n", dirarg, strerror(-ne));
		return EXIT_FAIL;
	}
	if (ne && !force) {
		fprintf(stderr, "stoker gen: %s is not empty; choose another DIR, or --force to "
			"write into it\n", dirarg);
		return EXIT_FAIL;
	}
	char *path = strdup(dirarg); /* mkdirs writes into it */
	int e = path ? mkdirs(path) : -ENOMEM;
	if (e)
		fprintf(stderr, "stoker gen: cannot create %s: %s\n", path ? path : dirarg,
			strerror(-e));
	free(path);
	if (e)
		return EXIT_FAIL;

	/* Names at least c0000 and 00000000, wider when needed so that sorted
	 * names stay in number order. */
	int cw = snprintf(NULL, 0, "%lld", (long long)classes - 1);
	int fw = snprintf(NULL, 0, "%lld", (long long)images - 1);
	struct gen g = {
		.dir = dirarg,
		.seed = (uint64_t)seed,
		.images = images,
		.classes = classes,
		.quality = (int)quality,
		.cwidth = cw < 4 ? 4 : cw,
		.fwidth = fw < 8 ? 8 : fw,
	};
	pthread_mutex_init(&g.lock, NULL);
	stop = 0;
	int rc = run(&g, (int)threads, json);
	pthread_mutex_destroy(&g.lock);
	return rc;
}
