/*
 * image/resample.c — the box of a decoded RGB region to the output image.
 *
 * An antialiased bilinear (triangle) filter whose support widens with the
 * shrink factor, as PIL's BILINEAR does: the vertical pass in 14-bit fixed
 * point over the columns the horizontal taps reach, the horizontal pass in
 * floats a pixel at a time, then the layout and dtype asked.  SSE2 where the
 * CPU has it, plain C elsewhere, the same bytes from both (tested).  Compiled
 * with -O3 (Makefile).
 */
#include "base/internal.h"
#include "image/resample.h"
#include "image/scratch.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define HAVE_AVX2_PATH 1 /* functions built for AVX2, called where the CPU has it */
#endif

int stk__image_simd = 2;

/* The SIMD level one resample uses: stk__image_simd, as far as this CPU and
 * this build have it (asked once per image, passed down). */
static int simd_level(void)
{
	int level = stk__image_simd;
#if defined(HAVE_AVX2_PATH)
	if (level >= 2 && !__builtin_cpu_supports("avx2"))
		level = 1;
#else
	if (level >= 2)
		level = 1;
#endif
#if !defined(__SSE2__)
	level = 0;
#endif
	return level;
}

/* Taps of a triangle filter for each output coordinate, as PIL's
 * precompute_coeffs: support scales with the shrink factor (antialiasing). */
struct taps {
	int *first, *count;
	float *w;
	int max;
};

static int make_taps(struct taps *t, double box0, double box_len, int in_size, int out_size)
{
	double scale = box_len / out_size;
	double fscale = scale > 1 ? scale : 1;
	double support = 1.0 * fscale;
	t->max = (int)ceil(support) * 2 + 1;
	t->first = malloc(sizeof(int) * (size_t)out_size);
	t->count = malloc(sizeof(int) * (size_t)out_size);
	t->w = malloc(sizeof(float) * (size_t)out_size * (size_t)t->max);
	if (!t->first || !t->count || !t->w)
		return -ENOMEM;
	for (int o = 0; o < out_size; o++) {
		double center = box0 + (o + 0.5) * scale;
		int lo = (int)(center - support + 0.5);
		int hi = (int)(center + support + 0.5);
		if (lo < 0)
			lo = 0;
		if (hi > in_size)
			hi = in_size;
		if (hi - lo > t->max)
			hi = lo + t->max;
		double sum = 0;
		float *w = t->w + (size_t)o * t->max;
		for (int i = lo; i < hi; i++) {
			double x = (i - center + 0.5) / fscale;
			double k = x < 0 ? 1 + x : 1 - x;
			w[i - lo] = (float)(k > 0 ? k : 0);
			sum += w[i - lo];
		}
		if (sum <= 0) { /* a box entirely off the edge: nearest pixel */
			lo = (int)center;
			if (lo >= in_size)
				lo = in_size - 1;
			if (lo < 0)
				lo = 0;
			hi = lo + 1;
			w[0] = 1;
			sum = 1;
		}
		for (int i = 0; i < hi - lo; i++)
			w[i] = (float)(w[i] / sum);
		t->first[o] = lo;
		t->count[o] = hi - lo;
	}
	return 0;
}

static void free_taps(struct taps *t)
{
	free(t->first);
	free(t->count);
	free(t->w);
}

static uint16_t to_half(float f)
{
	uint32_t x;
	memcpy(&x, &f, 4);
	uint32_t sign = (x >> 16) & 0x8000u;
	int32_t e = (int32_t)((x >> 23) & 0xff) - 127 + 15;
	uint32_t m = x & 0x7fffffu;
	if (e <= 0) { /* subnormal or zero */
		if (e < -10)
			return (uint16_t)sign;
		m |= 0x800000u;
		uint32_t shift = (uint32_t)(14 - e);
		uint32_t h = m >> shift;
		if ((m >> (shift - 1)) & 1)
			h++;
		return (uint16_t)(sign | h);
	}
	if (e >= 31)
		return (uint16_t)(sign | 0x7c00u);
	uint32_t h = sign | ((uint32_t)e << 10) | (m >> 13);
	if (m & 0x1000u) /* round half up on the dropped bits */
		h++;
	return (uint16_t)h;
}

/* Four floats, one pixel (R, G, B, unused): GCC and clang turn the arithmetic
 * on these into SSE/NEON instructions, without target-specific code. */
typedef float v4f __attribute__((vector_size(16)));
typedef int32_t v4i __attribute__((vector_size(16)));

static inline float clamp255(float v)
{
	return v < 0 ? 0 : v > 255 ? 255 : v;
}

/* Rounds eight pixels (RGB_ of px) to bytes and stores each channel's eight
 * at r, r + plane and r + 2 * plane, mirrored if flip: the uint8 NCHW case,
 * transposed four pixels at a time and packed with SSE2's saturating packs. */
#if defined(__SSE2__)
static inline void put8_nchw(uint8_t *r, size_t plane, const v4f *px, bool flip)
{
	v4f h = {0.5f, 0.5f, 0.5f, 0.5f};
	__m128i ch[2][3];
	for (int q = 0; q < 2; q++) {
		const v4f *p = px + (flip ? 4 - 4 * q : 4 * q);
		v4f a = p[0], b = p[1], c = p[2], d = p[3];
		if (flip) {
			v4f t = a;
			a = d;
			d = t;
			t = b;
			b = c;
			c = t;
		}
		v4f ab0 = __builtin_shufflevector(a, b, 0, 4, 1, 5);
		v4f cd0 = __builtin_shufflevector(c, d, 0, 4, 1, 5);
		v4f ab2 = __builtin_shufflevector(a, b, 2, 6, 3, 7);
		v4f cd2 = __builtin_shufflevector(c, d, 2, 6, 3, 7);
		ch[q][0] = _mm_cvttps_epi32((__m128)(__builtin_shufflevector(ab0, cd0, 0, 1, 4, 5) + h));
		ch[q][1] = _mm_cvttps_epi32((__m128)(__builtin_shufflevector(ab0, cd0, 2, 3, 6, 7) + h));
		ch[q][2] = _mm_cvttps_epi32((__m128)(__builtin_shufflevector(ab2, cd2, 0, 1, 4, 5) + h));
	}
	__m128i rg = _mm_packus_epi16(_mm_packs_epi32(ch[0][0], ch[1][0]),
				      _mm_packs_epi32(ch[0][1], ch[1][1]));
	__m128i b = _mm_packs_epi32(ch[0][2], ch[1][2]);
	b = _mm_packus_epi16(b, b);
	_mm_storel_epi64((__m128i *)r, rg);
	_mm_storel_epi64((__m128i *)(r + plane), _mm_unpackhi_epi64(rg, rg));
	_mm_storel_epi64((__m128i *)(r + 2 * plane), b);
}
#endif

#if defined(HAVE_AVX2_PATH)
/* put8_nchw with AVX2: the eight pixels rounded to integers first, packed to
 * bytes (RGBX in lane order), each channel's bytes gathered with one byte
 * shuffle and the two lanes interleaved: a third of SSE2's instructions, the
 * same bytes (same rounding, same saturation). */
__attribute__((target("avx2"), always_inline)) static inline void
put8_nchw_avx2(uint8_t *r, size_t plane, const v4f *px, bool flip)
{
	const __m256 h = _mm256_set1_ps(0.5f);
	const float *f = (const float *)px;
	__m256i q0 = _mm256_cvttps_epi32(_mm256_add_ps(_mm256_loadu_ps(f), h));      /* 0 1 */
	__m256i q1 = _mm256_cvttps_epi32(_mm256_add_ps(_mm256_loadu_ps(f + 8), h));  /* 2 3 */
	__m256i q2 = _mm256_cvttps_epi32(_mm256_add_ps(_mm256_loadu_ps(f + 16), h)); /* 4 5 */
	__m256i q3 = _mm256_cvttps_epi32(_mm256_add_ps(_mm256_loadu_ps(f + 24), h)); /* 6 7 */
	/* bytes, lane 0: pixels 0 2 4 6, lane 1: 1 3 5 7, each R G B X */
	__m256i b = _mm256_packus_epi16(_mm256_packs_epi32(q0, q1), _mm256_packs_epi32(q2, q3));
	/* each lane: its four pixels' R, then G, B, X */
	b = _mm256_shuffle_epi8(b, _mm256_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11,
						    15, 0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3,
						    7, 11, 15));
	__m128i even = _mm256_castsi256_si128(b), odd = _mm256_extracti128_si256(b, 1);
	__m128i rg = _mm_unpacklo_epi8(even, odd); /* R0..R7 G0..G7 */
	__m128i bx = _mm_unpackhi_epi8(even, odd); /* B0..B7 X0..X7 */
	if (flip) {
		const __m128i rev = _mm_setr_epi8(7, 6, 5, 4, 3, 2, 1, 0, 15, 14, 13, 12, 11, 10, 9, 8);
		rg = _mm_shuffle_epi8(rg, rev);
		bx = _mm_shuffle_epi8(bx, rev);
	}
	_mm_storel_epi64((__m128i *)r, rg);
	_mm_storel_epi64((__m128i *)(r + plane), _mm_unpackhi_epi64(rg, rg));
	_mm_storel_epi64((__m128i *)(r + 2 * plane), bx);
}

/* Row y's pixels, eight at a time, while eight are left: returns how many
 * were done.  One call a row: put8_nchw_avx2 inlined, not called per eight
 * pixels (a sixth of the output's instructions went to those calls). */
__attribute__((target("avx2"))) static size_t put_row8_avx2(uint8_t *u, size_t W, size_t plane,
							     int y, const v4f *px, bool flip)
{
	size_t x = 0;
	for (; x + 8 <= W; x += 8)
		put8_nchw_avx2(u + (size_t)y * W + (flip ? W - 8 - x : x), plane, px + x, flip);
	return x;
}
#endif

/* Writes one output row of pixels with the layout and dtype asked; the
 * common uint8 cases get loops of their own. */
static void put_row(const struct stk_image_opts *o, void *out, int y, const v4f *px, bool flip,
		    int simd)
{
	size_t W = o->width, H = o->height, plane = W * H;
	bool nhwc = o->flags & STK_IMG_NHWC;
	if (o->dtype == STK_DTYPE_UINT8) {
		/* No clamp: the taps are non-negative and sum to 1, so every value
		 * lies within its inputs' 0..255, give or take rounding, and +0.5
		 * then truncation lands in 0..255. */
		uint8_t *u = out;
		size_t x = 0;
#if defined(HAVE_AVX2_PATH)
		if (!nhwc && simd >= 2)
			x = put_row8_avx2(u, W, plane, y, px, flip);
#endif
#if defined(__SSE2__)
		if (!nhwc && simd >= 1)
			for (; x + 8 <= W; x += 8)
				put8_nchw(u + (size_t)y * W + (flip ? W - 8 - x : x), plane, px + x, flip);
#endif
		for (; x < W; x++) {
			size_t dx = flip ? W - 1 - x : x;
			v4i q = __builtin_convertvector(px[x] + (v4f){0.5f, 0.5f, 0.5f, 0.5f}, v4i);
			if (nhwc) {
				uint8_t *d = u + ((size_t)y * W + dx) * 3;
				d[0] = (uint8_t)q[0];
				d[1] = (uint8_t)q[1];
				d[2] = (uint8_t)q[2];
			} else {
				size_t i = (size_t)y * W + dx;
				u[i] = (uint8_t)q[0];
				u[plane + i] = (uint8_t)q[1];
				u[2 * plane + i] = (uint8_t)q[2];
			}
		}
		return;
	}
	for (size_t x = 0; x < W; x++) {
		size_t dx = flip ? W - 1 - x : x;
		for (int c = 0; c < 3; c++) {
			float v = (clamp255(px[x][c]) / 255.0f - o->mean[c]) / o->std[c];
			size_t idx = nhwc ? ((size_t)y * W + dx) * 3 + (size_t)c
					  : (size_t)c * plane + (size_t)y * W + dx;
			if (o->dtype == STK_DTYPE_FLOAT32)
				((float *)out)[idx] = v;
			else
				((uint16_t *)out)[idx] = to_half(v);
		}
	}
}

/* Vertical taps in fixed point: 1.0 is 1 << VBITS. */
#define VBITS 14

#if defined(HAVE_AVX2_PATH)
/* vpass's SIMD loop with AVX2, sixteen bytes of each row zero-extended at
 * once (vpmovzxbw), tap pairs interleaved and multiplied-added (vpmaddwd):
 * half the instructions of SSE2's.  Returns how many bytes it did. */
__attribute__((target("avx2"))) static size_t vpass_avx2(float *acc, const uint8_t *p,
							 size_t stride, const int16_t *wq,
							 int n_taps, size_t n)
{
	__m256i w[8];
	int pairs = (n_taps + 1) / 2;
	if (pairs > 8)
		return 0;
	for (int k = 0; k < pairs; k++) {
		int hi = 2 * k + 1 < n_taps ? (uint16_t)wq[2 * k + 1] : 0;
		w[k] = _mm256_set1_epi32((int)((uint16_t)wq[2 * k] | (uint32_t)hi << 16));
	}
	size_t j = 0;
	for (; j + 16 <= n; j += 16) {
		__m256i lo = _mm256_setzero_si256(), hi = lo;
		for (int k = 0; k < pairs; k++) {
			const uint8_t *a = p + (size_t)k * 2 * stride + j;
			__m256i va = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)a));
			__m256i vb = 2 * k + 1 < n_taps
					     ? _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(a + stride)))
					     : _mm256_setzero_si256();
			/* per 128-bit lane: bytes 0-3 | 8-11 and 4-7 | 12-15 */
			lo = _mm256_add_epi32(lo, _mm256_madd_epi16(_mm256_unpacklo_epi16(va, vb), w[k]));
			hi = _mm256_add_epi32(hi, _mm256_madd_epi16(_mm256_unpackhi_epi16(va, vb), w[k]));
		}
		_mm256_storeu_ps(acc + j, _mm256_cvtepi32_ps(_mm256_permute2x128_si256(lo, hi, 0x20)));
		_mm256_storeu_ps(acc + j + 8, _mm256_cvtepi32_ps(_mm256_permute2x128_si256(lo, hi, 0x31)));
	}
	return j;
}
#endif

/* One row of the vertical pass: acc[j] = sum over k < n_taps of wq[k] times
 * byte j of row k (rows stride apart from p), for j < n: exact integers,
 * stored as floats (the horizontal taps take the 1 << VBITS off).  SSE2 does
 * sixteen bytes at a time with the taps in pairs (pmaddwd); the rest, and
 * other CPUs, take the plain loop: the same integers, the same result. */
static void vpass(float *acc, const uint8_t *p, size_t stride, const int16_t *wq, int n_taps,
		  size_t n, int simd)
{
	size_t j = 0;
#if defined(HAVE_AVX2_PATH)
	if (simd >= 2)
		j = vpass_avx2(acc, p, stride, wq, n_taps, n);
#endif
#if defined(__SSE2__)
	/* the taps in pairs (the last one's partner weighted 0), each pair's two
	 * 16-bit weights in every 32-bit lane: pmaddwd's operand */
	const __m128i zero = _mm_setzero_si128();
	__m128i w[8];
	int pairs = (n_taps + 1) / 2;
	for (int k = 0; k < pairs && k < 8; k++) {
		int hi = 2 * k + 1 < n_taps ? (uint16_t)wq[2 * k + 1] : 0;
		w[k] = _mm_set1_epi32((int)((uint16_t)wq[2 * k] | (uint32_t)hi << 16));
	}
	for (; simd >= 1 && pairs <= 8 && j + 16 <= n; j += 16) {
		__m128i s0 = zero, s1 = zero, s2 = zero, s3 = zero;
		for (int k = 0; k < pairs; k++) {
			const uint8_t *a = p + (size_t)k * 2 * stride + j;
			__m128i va = _mm_loadu_si128((const __m128i *)a);
			__m128i vb = 2 * k + 1 < n_taps ? _mm_loadu_si128((const __m128i *)(a + stride)) : zero;
			__m128i lo = _mm_unpacklo_epi8(va, vb), hi = _mm_unpackhi_epi8(va, vb);
			s0 = _mm_add_epi32(s0, _mm_madd_epi16(_mm_unpacklo_epi8(lo, zero), w[k]));
			s1 = _mm_add_epi32(s1, _mm_madd_epi16(_mm_unpackhi_epi8(lo, zero), w[k]));
			s2 = _mm_add_epi32(s2, _mm_madd_epi16(_mm_unpacklo_epi8(hi, zero), w[k]));
			s3 = _mm_add_epi32(s3, _mm_madd_epi16(_mm_unpackhi_epi8(hi, zero), w[k]));
		}
		_mm_storeu_ps(acc + j, _mm_cvtepi32_ps(s0));
		_mm_storeu_ps(acc + j + 4, _mm_cvtepi32_ps(s1));
		_mm_storeu_ps(acc + j + 8, _mm_cvtepi32_ps(s2));
		_mm_storeu_ps(acc + j + 12, _mm_cvtepi32_ps(s3));
	}
#endif
	for (; j < n; j++) {
		int32_t s = 0;
		for (int k = 0; k < n_taps; k++)
			s += wq[k] * p[(size_t)k * stride + j];
		acc[j] = (float)s;
	}
}

/* Calls fn(args..., K) with K a constant for the common tap counts, so that
 * an always-inline pass unrolls its tap loop: no per-pixel branch. */
#define WITH_TAPS(fn, K, ...)                          \
	do {                                           \
		switch (K) {                           \
		case 1: fn(__VA_ARGS__, 1); break;     \
		case 2: fn(__VA_ARGS__, 2); break;     \
		case 3: fn(__VA_ARGS__, 3); break;     \
		case 4: fn(__VA_ARGS__, 4); break;     \
		case 5: fn(__VA_ARGS__, 5); break;     \
		default: fn(__VA_ARGS__, K);           \
		}                                      \
	} while (0)

/* Two rows of the horizontal pass (src and src + n floats into row and
 * row + ow): pixel x is the sum of K pixels from float offset off[x],
 * weighted by w4[x * K ...]; both rows share the offsets and taps.  Inlined
 * with K a constant, the tap loop unrolls. */
static inline __attribute__((always_inline)) void hpass(v4f *row, const float *src, size_t n,
							const int *off, const v4f *w4, int ow,
							int K)
{
	for (int x = 0; x < ow; x++) {
		const float *p = src + off[x], *q = p + n;
		const v4f *w = w4 + (size_t)x * K;
		v4f a, b, acc, acc2;
		memcpy(&acc, p, sizeof(acc));
		memcpy(&acc2, q, sizeof(acc2));
		acc *= w[0];
		acc2 *= w[0];
		for (int k = 1; k < K; k++) {
			memcpy(&a, p + 3 * k, sizeof(a));
			memcpy(&b, q + 3 * k, sizeof(b));
			acc += w[k] * a;
			acc2 += w[k] * b;
		}
		row[x] = acc;
		row[ow + x] = acc2;
	}
}

#if defined(HAVE_AVX2_PATH)
/* hpass with AVX2: the two rows in the two 128-bit lanes, each tap's weight
 * broadcast to both; the same multiplications and additions in the same
 * order as hpass, so the same bits. */
__attribute__((target("avx2"), always_inline)) static inline void
hpass_avx2_k(v4f *row, const float *src, size_t n, const int *off, const v4f *w4, int ow, int K)
{
	for (int x = 0; x < ow; x++) {
		const float *p = src + off[x];
		const float *w = (const float *)(w4 + (size_t)x * K);
		__m256 a = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(p)),
						_mm_loadu_ps(p + n), 1);
		__m256 acc = _mm256_mul_ps(a, _mm256_broadcast_ps((const __m128 *)w));
		for (int k = 1; k < K; k++) {
			a = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(p + 3 * k)),
						 _mm_loadu_ps(p + n + 3 * k), 1);
			acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_broadcast_ps((const __m128 *)(w + 4 * k)), a));
		}
		_mm_store_ps((float *)&row[x], _mm256_castps256_ps128(acc));
		_mm_store_ps((float *)&row[ow + x], _mm256_extractf128_ps(acc, 1));
	}
}

__attribute__((target("avx2"))) static void hpass_avx2(v4f *row, const float *src, size_t n,
						       const int *off, const v4f *w4, int ow, int K)
{
	WITH_TAPS(hpass_avx2_k, K, row, src, n, off, w4, ow);
}
#endif

/* Resamples the box (region coordinates) of an RGB region to the output:
 * vertical pass first, over only the columns the horizontal taps reach, on
 * the row as a flat run of bytes, in 14-bit fixed point (vpass), then
 * horizontal in floats, a pixel (four floats, the fourth ignored) at a time
 * with every column's taps padded to the same count (hpass), then out in the
 * layout and dtype asked (put_row).  Integer sums and float arithmetic in a
 * fixed order: the same bits whatever the thread count, with or without
 * SIMD. */
int stk__resample(const struct stk_image_opts *o, const uint8_t *rgb, int rw, int rh,
		  double bx, double by, double bw, double bh, bool flip, void *out)
{
	int ow = (int)o->width, oh = (int)o->height, simd = simd_level();
	struct taps tx = {0}, ty = {0};
	float *tmp = NULL;
	v4f *row = NULL, *w4 = NULL;
	int *off = NULL;
	int16_t *wq = NULL;
	int rc = make_taps(&tx, bx, bw, rw, ow);
	if (!rc)
		rc = make_taps(&ty, by, bh, rh, oh);
	int c0 = rw, c1 = 0;
	for (int x = 0; !rc && x < ow; x++) {
		c0 = tx.first[x] < c0 ? tx.first[x] : c0;
		c1 = tx.first[x] + tx.count[x] > c1 ? tx.first[x] + tx.count[x] : c1;
	}
	size_t n3 = (size_t)(c1 - c0) * 3;
	/* +1 float: the horizontal pass loads four floats for a three-float pixel */
	if (!rc && (!(tmp = stk__scratch_get(STK__SCRATCH_RESAMPLE,
					     sizeof(float) * (n3 * (size_t)oh + 1))) ||
		    !(row = malloc(sizeof(v4f) * 2 * (size_t)ow)) ||
		    !(w4 = malloc(sizeof(v4f) * (size_t)ow * (size_t)tx.max)) ||
		    !(off = malloc(sizeof(int) * (size_t)ow)) ||
		    !(wq = malloc(sizeof(int16_t) * (size_t)oh * (size_t)ty.max))))
		rc = -ENOMEM;
	if (rc)
		goto out;
	tmp[n3 * (size_t)oh] = 0;
	size_t stride = (size_t)rw * 3;
	/* the vertical taps in fixed point, rounded so that each row's sum to
	 * exactly 1 << VBITS (the largest tap takes the difference) */
	for (int y = 0; y < oh; y++) {
		const float *w = ty.w + (size_t)y * ty.max;
		int16_t *q = wq + (size_t)y * ty.max;
		int sum = 0, big = 0;
		for (int k = 0; k < ty.count[y]; k++) {
			q[k] = (int16_t)lrintf(w[k] * (1 << VBITS));
			sum += q[k];
			big = q[k] > q[big] ? k : big;
		}
		q[big] = (int16_t)(q[big] + (1 << VBITS) - sum);
	}
	for (int y = 0; y < oh; y++)
		vpass(tmp + (size_t)y * n3, rgb + (size_t)ty.first[y] * stride + (size_t)c0 * 3, stride,
		      wq + (size_t)y * ty.max, ty.count[y], n3, simd);
	/* the horizontal taps: every column gets K, the most any column has,
	 * zero-weighted past its own (moved left where they would run off the
	 * region), each broadcast to a pixel's four lanes once */
	int K = 1;
	for (int x = 0; x < ow; x++)
		K = tx.count[x] > K ? tx.count[x] : K;
	for (int x = 0; x < ow; x++) {
		int f = tx.first[x] + K > c1 ? c1 - K : tx.first[x];
		for (int k = 0; k < K; k++) {
			int j = f + k - tx.first[x];
			/* the vertical pass's 1 << VBITS comes off here, exactly */
			float w = j >= 0 && j < tx.count[x] ? tx.w[(size_t)x * tx.max + j] / (1 << VBITS) : 0;
			w4[(size_t)x * K + k] = (v4f){w, w, w, w};
		}
		off[x] = (f - c0) * 3;
	}
	for (int y = 0; y < oh; y += 2) {
		/* two rows at a time (an odd last one computed twice) */
		size_t n = y + 1 < oh ? n3 : 0;
		const float *src = tmp + (size_t)y * n3;
#if defined(HAVE_AVX2_PATH)
		if (simd >= 2)
			hpass_avx2(row, src, n, off, w4, ow, K);
		else
#endif
			WITH_TAPS(hpass, K, row, src, n, off, w4, ow);
		put_row(o, out, y, row, flip, simd);
		if (y + 1 < oh)
			put_row(o, out, y + 1, row + ow, flip, simd);
	}
out:
	stk__scratch_put(STK__SCRATCH_RESAMPLE, tmp);
	free(row);
	free(w4);
	free(off);
	free(wq);
	free_taps(&tx);
	free_taps(&ty);
	return rc;
}
