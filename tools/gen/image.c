/* gen/image.c — the pictures `stoker gen` writes.
 *
 * They must cost what photos cost to store (~100 KB at q90) and to decode, so
 * they are built like photos, not from pure noise: a colour gradient,
 * multi-octave value noise with a near-1/f spectrum, occluding shapes at every
 * scale ("dead leaves") for edges, and mild grain.  Image i depends only on
 * (seed, i), so the bytes do not depend on the thread count.
 *
 * Built for speed (the first `make run` waits for 10,000 of them; ~3.5x the
 * per-core rate of the RGB version before it, docs/BENCHMARKS.md): the
 * picture is made in YCbCr at the resolutions JPEG stores (chroma at half
 * size, 4:2:0) and handed to libjpeg as raw planes, so there is no colour
 * conversion or downsampling; smooth octaves are summed on coarse grids and
 * interpolated up once; each octave interpolates its lattice rows along x
 * once, then blends two rows per output row; rows are finished in loops the
 * compiler vectorizes, with table look-ups split out; shapes are filled as
 * spans; the JPEG goes into a buffer kept from one picture to the next.
 * PNG and WebP (`stoker gen --format`) get the same picture as RGB.
 * No libm trigonometry and no fused multiply-adds (see the Makefile), so
 * every build gives the same pixels. */
#include "gen/gen.h"
#include "common/cli.h"

#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>

#define MAX_W 640
#define MAX_H 480
#define MAX_SHAPES 4096 /* > the 1000 * 640*480/(500*375) drawn at most */
#define LO_W (MAX_W / 4 + 2) /* the coarse grids: every 4th luma pixel, */
#define LO_H (MAX_H / 4 + 2) /* every 2nd chroma pixel: the same size */
#define YSTRIDE (MAX_W + 16)
#define CSTRIDE (MAX_W / 2 + 16)

/* Tuned so that the mean file is ~100 KB at q90 over the default size mix
 * (docs/BENCHMARKS.md, "stoker gen"). */
#define TEXTURE 35.0f /* coarsest smooth luma octave; later ones shrink 0.6x */
#define DETAIL 70.0f  /* coarsest (20 px) detail octave ... */
#define PERSIST 1.0f  /* ... and the ratio to the next: 1/f, equal power per octave */
#define CDETAIL 15.0f /* each fine chroma octave */
#define GRAIN 16.0f   /* luma grain peak; triangular, so sd ~5 levels */
#define CGRAIN 4.0f   /* chroma grain peak */
#define LEAVES 600    /* mean shapes in a 500x375 picture, from 1/3 to 5/3 of it */
#define RMIN 3.0f     /* smallest shape radius, pixels */

struct shape {
	float c[3]; /* Y, Cb, Cr */
	float tex;  /* how much of the luma texture shows through */
	float bg;   /* 1 for [0], the background (it takes the gradient's colour), else 0 */
};

struct gen_scratch {
	float *lum, *mask, *det; /* full size: coarse luma, detail mask, fine detail */
	float *u, *v;            /* half size: chroma around 128 */
	float *lo[4];            /* coarse grids: luma, mask, u, v */
	float *lat;              /* one octave's lattice */
	float *row[6];           /* one-row buffers (two grid rows along x; the output's) */
	int *ix;                 /* per-x lattice cell of the current octave */
	float *fx;               /* per-x smoothstep weight */
	uint16_t *id;            /* which shape covers each pixel (0 = none) */
	struct shape *shapes;    /* MAX_SHAPES + 1 */
	uint64_t *rnd;           /* one row's random bits */
	int16_t *i16;            /* one row on its way to bytes */
	unsigned char *jbuf;     /* the JPEG's buffer, jcap bytes */
	unsigned long jcap;
	unsigned char *out;      /* where libjpeg put this one, outlen bytes */
	unsigned long outlen;
	JSAMPLE *yb, *cb, *cr;   /* 16 luma and 8 chroma rows for libjpeg */
	unsigned char *rgb;      /* PNG, WebP: the picture as RGB */
	unsigned char *enc;      /* and its file (gen/formats.c's) */
};

struct gen_scratch *gen_scratch_new(void)
{
	struct gen_scratch *sc = calloc(1, sizeof(*sc));
	if (!sc)
		return NULL;
	size_t n = (size_t)MAX_W * MAX_H, n2 = (size_t)(MAX_W / 2 + 2) * (MAX_H / 2 + 2), nlo = (size_t)LO_W * LO_H;
	/* Octave cells are >= 1 px: a lattice holds at most (W+2) x (H+2) values. */
	size_t nlat = (size_t)(MAX_W + 4) * (MAX_H + 4) + 4;
	float *f = malloc((3 * n + 2 * n2 + 4 * nlo + nlat + 7 * (MAX_W + 4)) * sizeof(float));
	sc->id = malloc(n * sizeof(*sc->id));
	sc->shapes = malloc((MAX_SHAPES + 1) * sizeof(*sc->shapes));
	sc->ix = malloc((MAX_W + 4) * sizeof(int));
	sc->rnd = malloc((MAX_W / 4 + 1) * sizeof(uint64_t));
	sc->i16 = malloc(MAX_W * sizeof(int16_t));
	sc->jcap = 1 << 20; /* > any picture at q90; libjpeg grows it otherwise */
	sc->jbuf = malloc(sc->jcap);
	sc->yb = malloc(16 * YSTRIDE + 2 * 8 * CSTRIDE);
	if (!f || !sc->id || !sc->shapes || !sc->ix || !sc->rnd || !sc->i16 || !sc->jbuf || !sc->yb) {
		free(f);
		sc->lum = NULL;
		gen_scratch_free(sc);
		return NULL;
	}
	sc->lum = f;
	sc->mask = f + n;
	sc->det = f + 2 * n;
	sc->u = f + 3 * n;
	sc->v = sc->u + n2;
	for (int k = 0; k < 4; k++)
		sc->lo[k] = sc->v + n2 + (size_t)k * nlo;
	sc->lat = sc->lo[3] + nlo;
	for (int k = 0; k < 6; k++)
		sc->row[k] = sc->lat + nlat + (size_t)k * (MAX_W + 4);
	sc->fx = sc->row[5] + MAX_W + 4;
	sc->cb = sc->yb + 16 * YSTRIDE;
	sc->cr = sc->cb + 8 * CSTRIDE;
	return sc;
}

void gen_scratch_free(struct gen_scratch *sc)
{
	if (!sc)
		return;
	free(sc->lum);
	free(sc->id);
	free(sc->shapes);
	free(sc->ix);
	free(sc->rnd);
	free(sc->i16);
	free(sc->jbuf);
	free(sc->yb);
	free(sc->rgb);
	free(sc->enc);
	free(sc);
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

/* One lattice row interpolated at every x of the output. */
static void xrow(const struct gen_scratch *sc, float *restrict out, const float *restrict lat, int w)
{
	const int *restrict ix = sc->ix;
	const float *restrict fx = sc->fx;
	for (int x = 0; x < w; x++) {
		float a = lat[ix[x]], b = lat[ix[x] + 1];
		out[x] = a + (b - a) * fx[x];
	}
}

/* The weight of x within its cell: smoothstep for noise, linear to upsample. */
static float weight(float f, bool smooth)
{
	return smooth ? f * f * (3 - 2 * f) : f;
}

/* dst (w x h) = (or +=) the grid src (sw values a row, a sample every `cell`
 * pixels) interpolated: along x once per grid row, then two rows blended per
 * output row, a loop the compiler vectorizes. */
static void interp(struct gen_scratch *sc, float *restrict dst, int w, int h, const float *src,
		   int sw, float cell, bool smooth, bool add)
{
	for (int x = 0; x < w; x++) {
		float p = (float)x / cell;
		int i = (int)p;
		sc->ix[x] = i;
		sc->fx[x] = weight(p - (float)i, smooth);
	}
	float *ra = sc->row[0], *rb = sc->row[1];
	int cur = -2;
	for (int y = 0; y < h; y++) {
		float p = (float)y / cell;
		int j = (int)p;
		float f = weight(p - (float)j, smooth);
		if (j == cur + 1) { /* the next grid row: the lower one becomes the upper */
			float *t = ra;
			ra = rb;
			rb = t;
			xrow(sc, rb, src + (size_t)(j + 1) * sw, w);
		} else if (j != cur) {
			xrow(sc, ra, src + (size_t)j * sw, w);
			xrow(sc, rb, src + (size_t)(j + 1) * sw, w);
		}
		cur = j;
		const float *restrict a = ra, *restrict b = rb;
		float *restrict d = dst + (size_t)y * w;
		if (add)
			for (int x = 0; x < w; x++)
				d[x] += a[x] + (b[x] - a[x]) * f;
		else
			for (int x = 0; x < w; x++)
				d[x] = a[x] + (b[x] - a[x]) * f;
	}
}

/* Adds one octave of value noise with cells of `cell` pixels and amplitude
 * `amp` to dst (w x h): random values on a lattice, smoothstep-interpolated.
 * Octaves of near-equal amplitude give equal power per octave, the 1/f
 * amplitude spectrum of natural images that makes JPEG sizes photo-like. */
static void octave(struct gen_scratch *sc, float *restrict dst, int w, int h, float cell, float amp,
		   uint64_t *rng)
{
	int gw = (int)((float)w / cell) + 2, gh = (int)((float)h / cell) + 2;
	float *lat = sc->lat, k = amp * (2.0f / 65536.0f);
	for (int i = 0; i < gw * gh; i += 4) { /* four 16-bit values per draw */
		uint64_t z = splitmix64(rng);
		for (int b = 0; b < 4; b++, z >>= 16)
			lat[i + b] = (float)(int)(z & 0xffff) * k - amp;
	}
	interp(sc, dst, w, h, lat, gw, cell, true, true);
}

/* dst (w x h) = src, a grid with a sample every `step` pixels, sw wide,
 * interpolated bilinearly. */
static void upsample(struct gen_scratch *sc, float *restrict dst, int w, int h,
		     const float *src, int sw, int step)
{
	interp(sc, dst, w, h, src, sw, (float)step, false, false);
}

/* The bytes of n values: rounded, then folded into 0..255 (fold, not clip:
 * flat clipped patches would waste the detail).  Integer steps on 16 bits
 * after one conversion, all vectorized: a third of the float version's time. */
static void to_bytes(const float *restrict v, int16_t *restrict t, JSAMPLE *restrict o, int n)
{
	for (int x = 0; x < n; x++) {
		float c = v[x];
		c = c < -600 ? -600 : c;
		c = c > 800 ? 800 : c;
		t[x] = (int16_t)((int)(c + 1000.5f) - 1000); /* round half up */
	}
	for (int x = 0; x < n; x++) {
		int16_t q = t[x];
		q = q < 0 ? (int16_t)-q : q;
		int16_t r = (int16_t)(510 - q);
		q = q < r ? q : r;
		o[x] = (JSAMPLE)(q < 0 ? 0 : q);
	}
}

/* t - floor(t), with a select rather than a branch (vectorizes). */
static float frac(float t)
{
	float k = (float)(int)t;
	return t - k + (k > t ? 1.0f : 0.0f);
}

static void to_ycc(const float rgb[3], float out[3])
{
	out[0] = 0.299f * rgb[0] + 0.587f * rgb[1] + 0.114f * rgb[2];
	out[1] = 128 - 0.168736f * rgb[0] - 0.331264f * rgb[1] + 0.5f * rgb[2];
	out[2] = 128 + 0.5f * rgb[0] - 0.418688f * rgb[1] - 0.081312f * rgb[2];
}

/* What one picture's rows need besides the scratch planes. */
struct pic {
	int w, h, w2, h2;
	float g0[3], g1[3]; /* background gradient ends, YCbCr */
	float dx, dy, mbias;
	uint64_t grain;
};

static void luma_row(const struct gen_scratch *sc, struct pic *p, int y, JSAMPLE *restrict o)
{
	int w = p->w;
	const float *restrict D = sc->det + (size_t)y * w, *restrict L = sc->lum + (size_t)y * w,
			      *restrict M = sc->mask + (size_t)y * w;
	const uint16_t *restrict id = sc->id + (size_t)y * w;
	const struct shape *restrict shapes = sc->shapes; /* [0]: the background */
	float *restrict t = sc->row[0], *restrict gr = sc->row[1], *restrict v = sc->row[2];
	float ty = (float)y * p->dy, dx = p->dx, gy = p->g0[0], gd = p->g1[0] - p->g0[0];
	float mb = 1.0f + p->mbias;
	/* the texture, and the gradient where no shape covers (vectorized) */
	for (int x = 0; x < w; x++) {
		float m = mb + M[x];
		m = m < 0.08f ? 0.08f : m;
		m = m > 1 ? 1 : m;
		t[x] = L[x] + D[x] * m;
		gr[x] = gy + gd * frac((float)x * dx + ty);
	}
	/* Grain: two random bytes a pixel, summed (triangular); the shapes'
	 * colour and texture looked up; then the rest vectorized. */
	uint64_t *restrict rnd = sc->rnd;
	for (int x = 0; x < w; x += 4)
		rnd[x / 4] = splitmix64(&p->grain);
	const uint8_t *restrict rb = (const uint8_t *)rnd;
	float *restrict sy = sc->row[3], *restrict st = sc->row[4];
	for (int x = 0; x < w; x++) {
		const struct shape *sh = &shapes[id[x]];
		sy[x] = sh->c[0] + sh->bg * gr[x]; /* a sum, not a branch */
		st[x] = sh->tex;
	}
	for (int x = 0; x < w; x++) {
		float g = (float)((int)rb[2 * x] + (int)rb[2 * x + 1] - 255) * (GRAIN / 255.0f);
		v[x] = sy[x] + t[x] * st[x] + g;
	}
	to_bytes(v, sc->i16, o, w);
	for (int x = w; x < ((w + 7) & ~7); x++) /* libjpeg reads whole blocks */
		o[x] = o[w - 1];
}

/* Half-size row y of Cb and Cr; ly is the luma row at 2y (for saturation). */
static void chroma_row(const struct gen_scratch *sc, struct pic *p, int y, const JSAMPLE *ly,
		       JSAMPLE *restrict ob, JSAMPLE *restrict ocr)
{
	int w2 = p->w2;
	const float *restrict U = sc->u + (size_t)y * w2, *restrict V = sc->v + (size_t)y * w2;
	const uint16_t *restrict id = sc->id + (size_t)(2 * y) * p->w;
	const struct shape *restrict shapes = sc->shapes;
	float *restrict gb = sc->row[0], *restrict gc = sc->row[1], *restrict sat = sc->row[2];
	float *restrict vb = sc->row[3], *restrict vc = sc->row[4];
	float ty = (float)(2 * y) * p->dy, dx2 = 2 * p->dx;
	float b0 = p->g0[1], bd = p->g1[1] - p->g0[1], c0 = p->g0[2], cd = p->g1[2] - p->g0[2];
	for (int x = 0; x < w2; x++) { /* vectorized */
		float f = frac((float)x * dx2 + ty);
		gb[x] = b0 + bd * f;
		gc[x] = c0 + cd * f;
		/* Dark and bright areas carry little colour, as in photos (and as
		 * RGB's gamut allows). */
		float yv = (float)ly[2 * x], q = (yv < 128 ? yv : 255 - yv) * (1.0f / 64.0f);
		q = q < 0.35f ? 0.35f : q;
		sat[x] = q > 1 ? 1 : q;
	}
	uint64_t *restrict rnd = sc->rnd;
	for (int x = 0; x < w2; x += 4)
		rnd[x / 4] = splitmix64(&p->grain);
	const uint8_t *restrict rb = (const uint8_t *)rnd;
	for (int x = 0; x < w2; x++) {
		const struct shape *sh = &shapes[id[2 * x]];
		vb[x] = sh->c[1] + sh->bg * gb[x];
		vc[x] = sh->c[2] + sh->bg * gc[x];
	}
	for (int x = 0; x < w2; x++) {
		float gu = (float)((int)rb[2 * x] - 128) * (CGRAIN / 128.0f);
		float gv = (float)((int)rb[2 * x + 1] - 128) * (CGRAIN / 128.0f);
		vb[x] += U[x] + gu;
		vc[x] += V[x] + gv;
	}
	for (int x = 0; x < w2; x++) { /* vectorized */
		vb[x] = 128 + (vb[x] - 128) * sat[x];
		vc[x] = 128 + (vc[x] - 128) * sat[x];
	}
	to_bytes(vb, sc->i16, ob, w2);
	to_bytes(vc, sc->i16, ocr, w2);
	for (int x = w2; x < ((w2 + 7) & ~7); x++) {
		ob[x] = ob[w2 - 1];
		ocr[x] = ocr[w2 - 1];
	}
}

/* "Dead leaves": ellipses and rectangles with radii drawn from r^-3, later
 * ones on top, as objects occlude each other in a scene.  Edges at every
 * scale are what give photos their 1/f spectrum and JPEG cost. */
static void leaves(struct gen_scratch *sc, const struct pic *p, uint64_t *rng)
{
	int w = p->w, h = p->h;
	struct shape *shapes = sc->shapes;
	float area = (float)w * (float)h / (500.0f * 375.0f);
	int nshapes = (int)((float)irand(rng, LEAVES / 3, LEAVES * 5 / 3) * area);
	if (nshapes > MAX_SHAPES)
		nshapes = MAX_SHAPES;
	float rmin = RMIN, rmax = (float)(w > h ? w : h) / 3;
	float k2 = 1 - (rmin / rmax) * (rmin / rmax);
	memset(sc->id, 0, (size_t)w * h * sizeof(*sc->id));
	shapes[0] = (struct shape){.tex = 1.0f, .bg = 1.0f};
	for (int s = 1; s <= nshapes; s++) {
		/* Colours from the picture's palette, so that it stays coherent. */
		float t = frand(rng), rgb[3];
		for (int k = 0; k < 3; k++) {
			float c0 = p->g0[k], c1 = p->g1[k]; /* RGB here: see gen_render */
			rgb[k] = c0 + (c1 - c0) * t + 120 * (frand(rng) - 0.5f);
		}
		to_ycc(rgb, shapes[s].c);
		shapes[s].tex = 0.3f + 0.7f * frand(rng);
		float r = rmin / sqrtf(1 - frand(rng) * k2), asp = 0.5f + frand(rng);
		int rx = (int)(r * asp) + 1, ry = (int)(r / asp) + 1;
		int cx = irand(rng, 0, w - 1), cy = irand(rng, 0, h - 1);
		bool ellipse = splitmix64(rng) % 3;
		int y0 = cy - ry < 0 ? 0 : cy - ry, y1 = cy + ry >= h ? h - 1 : cy + ry;
		for (int y = y0; y <= y1; y++) {
			int half = rx;
			if (ellipse) {
				float ny = (float)(y - cy) / (float)ry;
				half = (int)((float)rx * sqrtf(1 - ny * ny));
			}
			int a = cx - half < 0 ? 0 : cx - half, b = cx + half >= w ? w - 1 : cx + half;
			uint16_t *row = sc->id + (size_t)y * w;
			for (int x = a; x <= b; x++)
				row[x] = (uint16_t)s;
		}
	}
}

/* libjpeg calls exit() on errors by default; a tool's worker must not. */
struct jerr {
	struct jpeg_error_mgr pub;
	jmp_buf jb;
};

static void jpeg_fail(j_common_ptr ci)
{
	longjmp(((struct jerr *)ci->err)->jb, 1);
}

/* Hands the planes to libjpeg, 16 luma rows (one MCU row) at a time. */
static int encode(struct gen_scratch *sc, struct pic *p, int quality)
{
	struct jpeg_compress_struct ci;
	struct jerr jerr;
	ci.err = jpeg_std_error(&jerr.pub);
	jerr.pub.error_exit = jpeg_fail;
	/* Into the scratch's buffer: libjpeg mallocs a larger one only when a
	 * picture does not fit, and that one is kept (no growth, copies or page
	 * faults per picture). */
	sc->out = sc->jbuf;
	sc->outlen = sc->jcap;
	if (setjmp(jerr.jb)) { /* libjpeg's only failure here is out of memory */
		jpeg_destroy_compress(&ci);
		if (sc->out != sc->jbuf)
			free(sc->out);
		return -ENOMEM;
	}
	jpeg_create_compress(&ci);
	jpeg_mem_dest(&ci, &sc->out, &sc->outlen);
	ci.image_width = (JDIMENSION)p->w;
	ci.image_height = (JDIMENSION)p->h;
	ci.input_components = 3;
	ci.in_color_space = JCS_YCbCr;
	jpeg_set_defaults(&ci); /* YCbCr, 4:2:0 */
	jpeg_set_quality(&ci, quality, TRUE);
	ci.raw_data_in = TRUE;
	jpeg_start_compress(&ci, TRUE);
	JSAMPROW yr[16], br[8], rr[8];
	for (int k = 0; k < 16; k++)
		yr[k] = sc->yb + (size_t)k * YSTRIDE;
	for (int k = 0; k < 8; k++) {
		br[k] = sc->cb + (size_t)k * CSTRIDE;
		rr[k] = sc->cr + (size_t)k * CSTRIDE;
	}
	size_t ylen = (size_t)((p->w + 7) & ~7), clen = (size_t)((p->w2 + 7) & ~7);
	for (int y0 = 0; y0 < p->h; y0 += 16) {
		/* Rows past the bottom repeat the last one (libjpeg reads whole MCUs). */
		for (int r = 0; r < 16; r++) {
			if (y0 + r < p->h)
				luma_row(sc, p, y0 + r, yr[r]);
			else
				memcpy(yr[r], yr[r - 1], ylen);
		}
		for (int r = 0; r < 8; r++) {
			if (y0 / 2 + r < p->h2) {
				chroma_row(sc, p, y0 / 2 + r, yr[2 * r], br[r], rr[r]);
			} else {
				memcpy(br[r], br[r - 1], clen);
				memcpy(rr[r], rr[r - 1], clen);
			}
		}
		JSAMPARRAY planes[3] = {yr, br, rr};
		jpeg_write_raw_data(&ci, planes, 16);
	}
	jpeg_finish_compress(&ci);
	jpeg_destroy_compress(&ci);
	if (sc->out != sc->jbuf) {
		free(sc->jbuf);
		sc->jbuf = sc->out;
		sc->jcap = sc->outlen;
	}
	return 0;
}

/* The same picture as RGB rows (PNG, WebP): the planes made in the same
 * order as encode() makes them (the grain's generator runs through them),
 * chroma replicated to full size and converted as JFIF does. */
static int rgb_image(struct gen_scratch *sc, struct pic *p)
{
	if (!sc->rgb) {
		sc->rgb = malloc((size_t)MAX_W * MAX_H * 3);
		if (!sc->rgb)
			return -ENOMEM;
	}
	JSAMPLE *yr = sc->yb, *br = sc->cb, *rr = sc->cr;
	for (int y0 = 0; y0 < p->h; y0 += 16) {
		int rows = p->h - y0 < 16 ? p->h - y0 : 16;
		for (int r = 0; r < rows; r++)
			luma_row(sc, p, y0 + r, yr + (size_t)r * YSTRIDE);
		for (int r = 0; r < 8 && y0 / 2 + r < p->h2; r++)
			chroma_row(sc, p, y0 / 2 + r, yr + (size_t)(2 * r) * YSTRIDE,
				   br + (size_t)r * CSTRIDE, rr + (size_t)r * CSTRIDE);
		for (int r = 0; r < rows; r++) {
			const JSAMPLE *Y = yr + (size_t)r * YSTRIDE, *B = br + (size_t)(r / 2) * CSTRIDE,
				      *R = rr + (size_t)(r / 2) * CSTRIDE;
			unsigned char *o = sc->rgb + ((size_t)(y0 + r) * p->w) * 3;
			for (int x = 0; x < p->w; x++, o += 3) {
				/* JFIF in 16.16 fixed point, rounded */
				int yy = Y[x] << 16, cb = B[x / 2] - 128, cr = R[x / 2] - 128;
				int c[3] = {(yy + 91881 * cr + 32768) >> 16,
					    (yy - 22554 * cb - 46802 * cr + 32768) >> 16,
					    (yy + 116130 * cb + 32768) >> 16};
				for (int k = 0; k < 3; k++)
					o[k] = (unsigned char)(c[k] < 0 ? 0 : c[k] > 255 ? 255 : c[k]);
			}
		}
	}
	return 0;
}

int gen_render(uint64_t seed, int64_t i, enum gen_format format, int quality,
	       struct gen_scratch *sc, const unsigned char **out, size_t *outlen)
{
	uint64_t rng = seed ^ 0x5354b0c3e2f1a7d5ull;
	uint64_t mix = (uint64_t)i ^ splitmix64(&rng);
	rng = splitmix64(&mix); /* the picture's generator: a function of (seed, i) only */

	struct pic p = {0};
	int w = p.w = irand(&rng, 300, 640), h = p.h = irand(&rng, 240, 480);
	p.w2 = (w + 1) / 2;
	p.h2 = (h + 1) / 2;
	int lw = (w - 1) / 4 + 2, lh = (h - 1) / 4 + 2;         /* every 4th luma pixel */
	int cw = (p.w2 - 1) / 2 + 2, ch = (p.h2 - 1) / 2 + 2; /* every 2nd chroma pixel */
	for (int k = 0; k < 4; k++)
		memset(sc->lo[k], 0, (size_t)LO_W * LO_H * sizeof(float));

	/* Luma = smooth structure (lighting, large forms) + fine detail whose
	 * strength follows a slow mask, so a picture has busy and quiet regions
	 * (foliage and sky) and pictures differ in size as photos do. */
	float big = (float)(w > h ? w : h) * (0.25f + 0.5f * frand(&rng));
	float amp = TEXTURE * (0.7f + 0.6f * frand(&rng));
	for (float cell = big; cell >= 24.0f; cell *= 0.5f, amp *= 0.6f)
		octave(sc, sc->lo[0], lw, lh, cell / 4, amp, &rng);
	octave(sc, sc->lo[1], lw, lh, big * 0.7f / 4, 1.0f, &rng);
	octave(sc, sc->lo[1], lw, lh, big * 0.35f / 4, 0.5f, &rng);
	/* Detail: octaves of 20, 10 and 5 px on a grid of every 2nd pixel,
	 * interpolated up, and one of 2.5 px at full size (finer than that, the
	 * grain does the same for JPEG at a fraction of the cost). */
	amp = DETAIL * (0.5f + frand(&rng));
	int dw = (w - 1) / 2 + 2, dh = (h - 1) / 2 + 2;
	memset(sc->u, 0, (size_t)dw * dh * sizeof(float)); /* u: free until the chroma */
	for (float cell = 20.0f; cell >= 5.0f; cell *= 0.5f, amp *= PERSIST)
		octave(sc, sc->u, dw, dh, cell / 2, amp, &rng);
	upsample(sc, sc->det, w, h, sc->u, dw, 2);
	octave(sc, sc->det, w, h, 2.5f, amp, &rng);
	p.mbias = 0.55f * (frand(&rng) - 0.5f);
	/* Colour varies slowly, as it does in photos (JPEG keeps it at half size). */
	float camp = 25.0f + 20.0f * frand(&rng);
	for (float cell = big; cell >= 24.0f; cell *= 0.5f, camp *= 0.5f) {
		octave(sc, sc->lo[2], cw, ch, cell / 4, camp, &rng);
		octave(sc, sc->lo[3], cw, ch, cell / 4, camp, &rng);
	}
	upsample(sc, sc->u, p.w2, p.h2, sc->lo[2], cw, 2);
	upsample(sc, sc->v, p.w2, p.h2, sc->lo[3], cw, 2);
	for (float cell = 12.0f; cell >= 6.0f; cell *= 0.5f) {
		octave(sc, sc->u, p.w2, p.h2, cell / 2, CDETAIL, &rng);
		octave(sc, sc->v, p.w2, p.h2, cell / 2, CDETAIL, &rng);
	}
	upsample(sc, sc->lum, w, h, sc->lo[0], lw, 4);
	upsample(sc, sc->mask, w, h, sc->lo[1], lw, 4);

	/* Background: a gradient between two colours along a random direction
	 * (RGB while the leaves take their palette from it, then YCbCr). */
	for (int k = 0; k < 3; k++) {
		p.g0[k] = 30 + 190 * frand(&rng);
		p.g1[k] = 30 + 190 * frand(&rng);
	}
	p.dx = (2 * frand(&rng) - 1) / (float)w;
	p.dy = (2 * frand(&rng) - 1) / (float)h;
	leaves(sc, &p, &rng);
	float g0[3], g1[3];
	to_ycc(p.g0, g0);
	to_ycc(p.g1, g1);
	memcpy(p.g0, g0, sizeof(g0));
	memcpy(p.g1, g1, sizeof(g1));
	p.grain = splitmix64(&rng);
	if (format != GEN_JPEG) {
		free(sc->enc);
		sc->enc = NULL;
		int rc = rgb_image(sc, &p);
		if (!rc)
			rc = format == GEN_PNG ? gen_png(sc->rgb, w, h, &sc->enc, outlen)
					       : gen_webp(sc->rgb, w, h, quality, &sc->enc, outlen);
		*out = rc ? NULL : sc->enc;
		return rc;
	}
	int rc = encode(sc, &p, quality);
	*out = rc ? NULL : sc->out;
	*outlen = rc ? 0 : (size_t)sc->outlen;
	return rc;
}
