/* test_image.c — the image pipeline: crop boxes with torchvision's
 * distribution, flips, colour spaces, determinism across thread counts, and
 * the corrupt-file corpus (under ASan in CI: nothing written out of bounds). */
#include "testjpeg.h"

#include "image/image.h"
#include "image/resample.h"
#include "stoker/stoker.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <jpeglib.h>

/* A w×h JPEG at quality 95 with `comps` components (1 gray, 3 RGB, 4 CMYK)
 * whose pixel (x, y) channel c is f(x, y, c).  Returns malloc'ed bytes. */
static uint8_t *encode(int w, int h, int comps, int (*f)(int, int, int), size_t *len)
{
	return tu_jpeg(&(struct tu_jpeg){.w = w, .h = h, .comps = comps, .quality = 95, .pixel = f},
		       len);
}

static int solid(int x, int y, int c)
{
	(void)x;
	(void)y;
	return c == 0 ? 200 : c == 1 ? 100 : 30;
}

static int hgrad(int x, int y, int c)
{
	(void)y;
	(void)c;
	return x * 255 / 399;
}

static int gray(int x, int y, int c)
{
	(void)c;
	return (x + y) % 256;
}

static int texture(int x, int y, int c)
{
	return (x * 7 + y * 13 + c * 50 + (x * y) % 31) % 256;
}

static int cmyk_red(int x, int y, int c)
{
	(void)x;
	(void)y;
	/* Adobe CMYK as libjpeg writes it (inverted): red = C 0, M 1, Y 1, K 0 */
	return c == 0 ? 255 : c == 1 ? 0 : c == 2 ? 0 : 255;
}

static struct stk_image_opts opts(enum stk_crop crop, uint32_t flags)
{
	return (struct stk_image_opts){.size = sizeof(struct stk_image_opts), .crop = crop,
				       .flags = flags, .width = 64, .height = 48};
}

static void test_solid_colour(void **state)
{
	(void)state;
	size_t len;
	uint8_t *jpg = encode(400, 300, 3, solid, &len);
	for (int crop = 0; crop < 2; crop++) {
		struct stk_image_opts o = opts((enum stk_crop)crop, 0);
		size_t n = stk_image_bytes(&o);
		assert_int_equal(n, 64 * 48 * 3);
		uint8_t *out = malloc(n);
		char err[256];
		for (int64_t i = 0; i < 20; i++) {
			assert_int_equal(stk_image_decode(&o, jpg, len, 1, 0, i, out, err, sizeof(err)), 0);
			for (size_t k = 0; k < n; k++) {
				int want = k < n / 3 ? 200 : k < 2 * n / 3 ? 100 : 30; /* NCHW */
				assert_true(abs(out[k] - want) <= 3);
			}
		}
		free(out);
	}
	free(jpg);
}

static void test_deterministic_and_flip(void **state)
{
	(void)state;
	size_t len;
	uint8_t *jpg = encode(400, 300, 3, hgrad, &len);
	struct stk_image_opts o = opts(STK_CROP_RANDOM_RESIZED, STK_IMG_NHWC);
	size_t n = stk_image_bytes(&o);
	uint8_t *a = malloc(n), *b = malloc(n);
	char err[256];
	int flipped = 0, same_as_other = 0;
	for (int64_t i = 0; i < 200; i++) {
		assert_int_equal(stk_image_decode(&o, jpg, len, 5, 2, i, a, err, sizeof(err)), 0);
		assert_int_equal(stk_image_decode(&o, jpg, len, 5, 2, i, b, err, sizeof(err)), 0);
		assert_memory_equal(a, b, n); /* same (seed, epoch, index): same bytes */
		/* the gradient rises left to right, unless flipped */
		int left = a[(24 * 64 + 2) * 3], right = a[(24 * 64 + 61) * 3];
		assert_true(left != right);
		flipped += left > right;
		assert_int_equal(stk_image_decode(&o, jpg, len, 5, 3, i, b, err, sizeof(err)), 0);
		same_as_other += !memcmp(a, b, n);
	}
	assert_true(flipped > 70 && flipped < 130); /* p = 0.5 */
	assert_true(same_as_other < 5);             /* another epoch, another crop */
	o.flags |= STK_IMG_NO_FLIP;
	for (int64_t i = 0; i < 50; i++) {
		assert_int_equal(stk_image_decode(&o, jpg, len, 5, 2, i, a, err, sizeof(err)), 0);
		assert_true(a[(24 * 64 + 2) * 3] < a[(24 * 64 + 61) * 3]);
	}
	free(a);
	free(b);
	free(jpg);
}

static void test_box_distribution(void **state)
{
	(void)state;
	struct stk_image_opts o = opts(STK_CROP_RANDOM_RESIZED, 0);
	assert_int_equal(stk__image_defaults(&o, NULL, 0), 0);
	const int W = 500, H = 375;
	double smin = 1, smax = 0, rmin = 10, rmax = 0;
	for (int64_t i = 0; i < 20000; i++) {
		struct stk__box b;
		stk__image_box(&o, stk__sample_seed(9, 0, i), W, H, &b);
		assert_true(b.x >= 0 && b.y >= 0 && b.x + b.w <= W && b.y + b.h <= H);
		assert_true(b.w >= 1 && b.h >= 1);
		double scale = b.w * b.h / (W * H), ratio = b.w / b.h;
		smin = fmin(smin, scale);
		smax = fmax(smax, scale);
		rmin = fmin(rmin, ratio);
		rmax = fmax(rmax, ratio);
	}
	/* within torchvision's bounds (rounding to whole pixels aside), and spread over them */
	assert_true(smin >= 0.08 * 0.97 && smin < 0.09);
	assert_true(smax <= 1.0 && smax > 0.95);
	assert_true(rmin >= 0.75 * 0.97 && rmin < 0.78);
	assert_true(rmax <= 4.0 / 3 * 1.03 && rmax > 1.28);
	/* an image too wide for any allowed ratio: ten failed tries, centre fallback */
	struct stk__box b;
	stk__image_box(&o, stk__sample_seed(1, 0, 0), 1000, 10, &b);
	assert_true(fabs(b.h - 10) < 1e-9);
	assert_true(fabs(b.w - 13) < 1e-9); /* round(10 × 4/3) */
	assert_true(fabs(b.x - (1000 - 13) / 2) < 1e-9);
	/* the centre crop: short side to out/0.875, centred */
	struct stk_image_opts c = opts(STK_CROP_CENTER, 0);
	c.width = c.height = 224;
	assert_int_equal(stk__image_defaults(&c, NULL, 0), 0);
	stk__image_box(&c, 0, 512, 256, &b); /* resize to 512x256 → no scaling, crop 224 */
	assert_true(fabs(b.w - 224) < 1e-9 && fabs(b.h - 224) < 1e-9);
	assert_true(fabs(b.x - 144) < 1e-9 && fabs(b.y - 16) < 1e-9);
}

static void test_colour_spaces(void **state)
{
	(void)state;
	size_t len;
	char err[256];
	struct stk_image_opts o = opts(STK_CROP_CENTER, STK_IMG_NHWC);
	size_t n = stk_image_bytes(&o);
	uint8_t *out = malloc(n);
	uint8_t *jpg = encode(320, 240, 1, gray, &len);
	assert_int_equal(stk_image_decode(&o, jpg, len, 0, 0, 0, out, err, sizeof(err)), 0);
	for (size_t p = 0; p < n; p += 3) /* grayscale comes out as RGB, R = G = B */
		assert_true(out[p] == out[p + 1] && out[p + 1] == out[p + 2]);
	free(jpg);
	jpg = encode(320, 240, 4, cmyk_red, &len);
	assert_int_equal(stk_image_decode(&o, jpg, len, 0, 0, 0, out, err, sizeof(err)), 0);
	for (size_t p = 0; p < n; p += 3)
		assert_true(out[p] > 240 && out[p + 1] < 15 && out[p + 2] < 15);
	free(jpg);
	free(out);
}

static void test_dtypes_and_layouts(void **state)
{
	(void)state;
	size_t len;
	char err[256];
	uint8_t *jpg = encode(300, 300, 3, hgrad, &len);
	struct stk_image_opts u = opts(STK_CROP_CENTER, 0);
	struct stk_image_opts h = opts(STK_CROP_CENTER, STK_IMG_NHWC);
	struct stk_image_opts f = opts(STK_CROP_CENTER, STK_IMG_NORMALIZE);
	f.dtype = STK_DTYPE_FLOAT32;
	float mean[3] = {0.485f, 0.456f, 0.406f}, std[3] = {0.229f, 0.224f, 0.225f};
	memcpy(f.mean, mean, sizeof(mean));
	memcpy(f.std, std, sizeof(std));
	struct stk_image_opts g = f;
	g.dtype = STK_DTYPE_FLOAT16;
	assert_int_equal(stk_image_bytes(&f), 4 * stk_image_bytes(&u));
	assert_int_equal(stk_image_bytes(&g), 2 * stk_image_bytes(&u));
	size_t n = stk_image_bytes(&u), px = n / 3;
	uint8_t *a = malloc(n), *b = malloc(n);
	float *fl = malloc(4 * n);
	uint16_t *hf = malloc(2 * n);
	assert_int_equal(stk_image_decode(&u, jpg, len, 0, 0, 0, a, err, sizeof(err)), 0);
	assert_int_equal(stk_image_decode(&h, jpg, len, 0, 0, 0, b, err, sizeof(err)), 0);
	assert_int_equal(stk_image_decode(&f, jpg, len, 0, 0, 0, fl, err, sizeof(err)), 0);
	assert_int_equal(stk_image_decode(&g, jpg, len, 0, 0, 0, hf, err, sizeof(err)), 0);
	for (size_t p = 0; p < px; p++)
		for (size_t c = 0; c < 3; c++) {
			uint8_t v = a[c * px + p];
			assert_int_equal(v, b[p * 3 + c]); /* NCHW and NHWC hold the same pixels */
			float want = (v / 255.0f - mean[c]) / std[c];
			assert_true(fabsf(fl[c * px + p] - want) < 0.5f / 255 / std[c] + 1e-5f);
			/* float16: sign, exponent and top mantissa bits agree */
			uint16_t hv = hf[c * px + p];
			float back = ldexpf((float)(1024 + (hv & 0x3ff)), ((hv >> 10) & 0x1f) - 25);
			if (hv & 0x8000)
				back = -back;
			if (((hv >> 10) & 0x1f) == 0)
				back = ldexpf((float)(hv & 0x3ff), -24) * ((hv & 0x8000) ? -1.f : 1.f);
			assert_true(fabsf(back - fl[c * px + p]) < 0.01f);
		}
	free(a);
	free(b);
	free(fl);
	free(hf);
	free(jpg);
}

/* The resampler's SIMD paths (SSE2, AVX2 where the CPU has it) and its
 * plain-C ones give the same bytes: the latter are what other CPUs run.  Sizes not a multiple of 8 (the tails),
 * enlarging and shrinking (few taps and many, past the SIMD pair limit). */
static void test_simd_matches_plain(void **state)
{
	(void)state;
	size_t len;
	char err[256];
	uint8_t *jpg = encode(403, 301, 3, texture, &len);
	const uint32_t sizes[][2] = {{224, 224}, {61, 47}, {8, 8}, {500, 333}};
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++)
		for (int variant = 0; variant < 8; variant++) {
			struct stk_image_opts o = opts(variant & 1 ? STK_CROP_CENTER : STK_CROP_RANDOM_RESIZED,
						       variant & 2 ? STK_IMG_NHWC : 0);
			o.width = sizes[s][0];
			o.height = sizes[s][1];
			if (variant & 4)
				o.dtype = STK_DTYPE_FLOAT32;
			size_t n = stk_image_bytes(&o);
			uint8_t *a = malloc(n), *b = malloc(n);
			for (int64_t i = 0; i < 12; i++) {
				stk__image_simd = 0;
				assert_int_equal(stk_image_decode(&o, jpg, len, 9, 0, i, a, err, sizeof(err)), 0);
				for (int level = 1; level <= 2; level++) {
					stk__image_simd = level;
					assert_int_equal(stk_image_decode(&o, jpg, len, 9, 0, i, b, err, sizeof(err)), 0);
					assert_memory_equal(a, b, n);
				}
				stk__image_simd = 2;
			}
			free(a);
			free(b);
		}
	free(jpg);
}

static void test_corrupt_corpus(void **state)
{
	(void)state;
	size_t len;
	char err[256];
	uint8_t *jpg = encode(400, 300, 3, hgrad, &len);
	struct stk_image_opts o = opts(STK_CROP_CENTER, 0);
	size_t n = stk_image_bytes(&o);
	/* a guard zone after the output catches writes past it, ASan or not */
	uint8_t *out = malloc(n + 64);
	memset(out + n, 0xa5, 64);
	/* truncated at several points */
	size_t cuts[] = {1, 2, 3, 10, 100, len / 4, len / 2, len - 10, len - 2};
	for (size_t i = 0; i < STK_ARRAY_SIZE(cuts); i++) {
		int rc = stk_image_decode(&o, jpg, cuts[i], 0, 0, 0, out, err, sizeof(err));
		assert_int_equal(rc, STK_ECORRUPT);
		assert_true(strlen(err) > 5);
	}
	/* zero bytes */
	assert_int_equal(stk_image_decode(&o, jpg, 0, 0, 0, 0, out, err, sizeof(err)), STK_ECORRUPT);
	assert_non_null(strstr(err, "empty"));
	/* random bytes named .jpg */
	uint8_t noise[4096];
	uint64_t x = 1;
	for (size_t i = 0; i < sizeof(noise); i++)
		noise[i] = (uint8_t)((x = x * 6364136223846793005ull + 1442695040888963407ull) >> 56);
	assert_int_equal(stk_image_decode(&o, noise, sizeof(noise), 0, 0, 0, out, err, sizeof(err)),
			 STK_ECORRUPT);
	/* noise after a valid SOI: libjpeg's message, not a dead process */
	memcpy(noise, "\xff\xd8\xff", 3);
	assert_int_equal(stk_image_decode(&o, noise, sizeof(noise), 0, 0, 0, out, err, sizeof(err)),
			 STK_ECORRUPT);
	assert_non_null(strstr(err, "corrupt JPEG"));
	/* flipped bits in the entropy-coded data still decode or fail cleanly */
	uint8_t *bad = malloc(len);
	for (int t = 0; t < 50; t++) {
		memcpy(bad, jpg, len);
		for (int k = 0; k < 8; k++)
			bad[600 + (size_t)((t * 131 + k * 977) % (int)(len - 700))] ^= (uint8_t)(1 << (k % 8));
		int rc = stk_image_decode(&o, bad, len, 0, 0, 0, out, err, sizeof(err));
		assert_true(rc == 0 || rc == STK_ECORRUPT);
	}
	free(bad);
	/* headers claiming 65,535 × 65,535 (libjpeg's own limit is 65,500) and
	 * 20,000 × 20,000 (above the 100-megapixel limit): refused before any
	 * allocation */
	uint8_t *big = malloc(len);
	const int dims[2] = {65535, 20000};
	for (int t = 0; t < 2; t++) {
		memcpy(big, jpg, len);
		for (size_t i = 0; i + 8 < len; i++)
			if (big[i] == 0xff && big[i + 1] == 0xc0) { /* SOF0: len(2) prec(1) h(2) w(2) */
				big[i + 5] = big[i + 7] = (uint8_t)(dims[t] >> 8);
				big[i + 6] = big[i + 8] = (uint8_t)dims[t];
				break;
			}
		int rc = stk_image_decode(&o, big, len, 0, 0, 0, out, err, sizeof(err));
		if (t == 0) {
			assert_true(rc == STK_ECORRUPT || rc == STK_ETOOBIG);
			assert_true(strstr(err, "65500") || strstr(err, "65535"));
		} else {
			assert_int_equal(rc, STK_ETOOBIG);
			assert_non_null(strstr(err, "20000x20000 pixels is above the limit"));
		}
	}
	free(big);
	/* a GIF is named as unsupported; a PNG's signature alone is a corrupt PNG */
	assert_int_equal(stk_image_decode(&o, "GIF89a......", 12, 0, 0, 0, out, err, sizeof(err)),
			 STK_EFORMAT);
	assert_non_null(strstr(err, "GIF"));
	assert_int_equal(stk_image_decode(&o, "\x89PNG\r\n\x1a\n....", 12, 0, 0, 0, out, err,
					  sizeof(err)), STK_ECORRUPT);
	assert_non_null(strstr(err, "corrupt PNG"));
	for (int i = 0; i < 64; i++)
		assert_int_equal(out[n + i], 0xa5);
	free(out);
	free(jpg);
}

/* The loader in image mode: the same batches whatever the decode thread
 * count; a corrupt file is skipped and named, or fails the epoch. */
static void test_loader_image_mode(void **state)
{
	(void)state;
	char *d = tu_mkdtemp();
	char p[PATH_MAX];
	for (int c = 0; c < 2; c++) {
		snprintf(p, sizeof(p), "%s/k%d", d, c);
		tu_mkdir(p);
		for (int i = 0; i < 20; i++) {
			size_t len;
			uint8_t *jpg = encode(160 + i * 7, 120 + c * 40, 3, (c ? hgrad : gray), &len);
			snprintf(p, sizeof(p), "%s/k%d/%02d.jpg", d, c, i);
			tu_write(p, jpg, i == 7 && c == 1 ? len / 2 : len); /* one truncated */
			free(jpg);
		}
	}
	struct stk_image_opts img = {.size = sizeof(img), .width = 32, .height = 32};
	uint8_t *first = NULL;
	size_t first_len = 0;
	for (uint32_t threads = 1; threads <= 3; threads += 2) {
		img.decode_threads = threads;
		struct stk_loader_opts o = {.size = sizeof(o), .path = d, .batch_size = 8, .seed = 4,
					    .image = &img, .flags = STK_F_QUIET};
		struct stk_loader *l;
		char err[512];
		assert_int_equal(stk_loader_create(&l, &o, err, sizeof(err)), 0);
		struct stk_batch *b;
		int rc;
		uint8_t *all = malloc(40 * 32 * 32 * 3);
		size_t off = 0;
		int samples = 0;
		while ((rc = stk_loader_next(l, &b)) == 1) {
			assert_int_equal(b->height, 32);
			assert_int_equal(b->channels, 3);
			assert_int_equal(b->image_bytes, 32 * 32 * 3);
			/* page-aligned, whatever the reads' bytes: float images need it */
			assert_int_equal((uintptr_t)b->images % 4096, 0);
			memcpy(all + off, b->images, b->count * b->image_bytes);
			off += b->count * b->image_bytes;
			samples += (int)b->count;
			stk_batch_release(l, b);
		}
		assert_int_equal(rc, 0);
		assert_int_equal(samples, 39);
		assert_non_null(strstr(stk_last_error(l), "k1/07.jpg: corrupt JPEG"));
		struct stk_stats st = {.size = sizeof(st)};
		stk_loader_stats(l, &st);
		assert_int_equal(st.errors, 1);
		assert_int_equal(st.decode_threads, threads);
		assert_true(st.decode_p50_ns > 0);
		stk_loader_destroy(l);
		if (!first) {
			first = all;
			first_len = off;
		} else {
			assert_int_equal(off, first_len);
			assert_memory_equal(all, first, off); /* bit-identical across thread counts */
			free(all);
		}
	}
	free(first);
	/* under the fail policy the corrupt file ends the epoch, named with libjpeg's reason */
	struct stk_loader_opts o = {.size = sizeof(o), .path = d, .batch_size = 8, .image = &img,
				    .on_error = STK_ON_ERROR_FAIL, .flags = STK_F_QUIET};
	struct stk_loader *l;
	char err[512];
	assert_int_equal(stk_loader_create(&l, &o, err, sizeof(err)), 0);
	struct stk_batch *b;
	int rc;
	while ((rc = stk_loader_next(l, &b)) == 1)
		stk_batch_release(l, b);
	assert_int_equal(rc, STK_ECORRUPT);
	assert_non_null(strstr(stk_last_error(l), "k1/07.jpg: corrupt JPEG"));
	stk_loader_destroy(l);
	/* bad image options are refused with the reason */
	img.scale_min = 0.5f;
	img.scale_max = 0.2f;
	assert_int_equal(stk_loader_create(&l, &o, err, sizeof(err)), -ERANGE);
	assert_non_null(strstr(err, "scale"));
	tu_rmrf(d);
	free(d);
}

/* A progressive JPEG whose first scan (its DHT, SOS and entropy data) is
 * repeated `copies` times: a scan bomb, each scan walking every block of the
 * image again.  Returns malloc'ed bytes. */
static uint8_t *scan_bomb(int w, int h, int copies, size_t *len)
{
	struct jpeg_compress_struct c;
	struct jpeg_error_mgr e;
	c.err = jpeg_std_error(&e);
	jpeg_create_compress(&c);
	unsigned char *out = NULL;
	unsigned long outlen = 0;
	jpeg_mem_dest(&c, &out, &outlen);
	c.image_width = (JDIMENSION)w;
	c.image_height = (JDIMENSION)h;
	c.input_components = 1;
	c.in_color_space = JCS_GRAYSCALE;
	jpeg_set_defaults(&c);
	jpeg_simple_progression(&c);
	jpeg_start_compress(&c, TRUE);
	uint8_t *row = malloc((size_t)w);
	assert_non_null(row);
	while (c.next_scanline < c.image_height) {
		for (int x = 0; x < w; x++)
			row[x] = (uint8_t)texture(x, (int)c.next_scanline, 0);
		JSAMPROW r = row;
		jpeg_write_scanlines(&c, &r, 1);
	}
	jpeg_finish_compress(&c);
	jpeg_destroy_compress(&c);
	free(row);
	/* the first scan: from the end of SOF2 to the marker after its data */
	size_t p = 2, start = 0, end = 0;
	while (p + 4 <= outlen && !end) {
		assert_int_equal(out[p], 0xff);
		int m = out[p + 1];
		size_t seg = 2 + ((size_t)out[p + 2] << 8 | out[p + 3]);
		if (m == 0xc2)
			start = p + seg;
		p += seg;
		if (m == 0xda) { /* entropy data up to the next non-RST marker */
			while (p + 1 < outlen && !(out[p] == 0xff && out[p + 1] != 0 &&
						   (out[p + 1] < 0xd0 || out[p + 1] > 0xd7)))
				p++;
			end = p;
		}
	}
	assert_true(start && end > start);
	size_t scan = end - start;
	uint8_t *b = malloc(start + scan * (size_t)copies + 2);
	assert_non_null(b);
	memcpy(b, out, start);
	for (int i = 0; i < copies; i++)
		memcpy(b + start + scan * (size_t)i, out + start, scan);
	b[start + scan * (size_t)copies] = 0xff;
	b[start + scan * (size_t)copies + 1] = 0xd9;
	*len = start + scan * (size_t)copies + 2;
	free(out);
	return b;
}

/* A scan bomb is refused at max_scans, and anything that keeps decoding past
 * max_decode_time is stopped; both STK_ETOOBIG with the limit named.  An
 * ordinary progressive file (a handful of scans) decodes. */
static void test_scan_bomb(void **state)
{
	(void)state;
	size_t len;
	uint8_t *bomb = scan_bomb(1024, 1024, 400, &len);
	struct stk_image_opts o = opts(STK_CROP_CENTER, 0);
	char err[512];
	assert_int_equal(stk__image_defaults(&o, err, sizeof(err)), 0);
	assert_int_equal(o.max_scans, 100); /* the table's defaults */
	assert_int_equal(o.max_decode_ns, 5000000000ull);
	uint8_t out[64 * 48 * 3];
	int rc = stk__image_decode(&o, bomb, len, 1, out, err, sizeof(err), NULL);
	assert_int_equal(rc, STK_ETOOBIG);
	assert_non_null(strstr(err, "more than 100 scans (max_scans)"));
	/* no scan limit: the time limit stops it (1 ms of CPU; the 400 scans
	 * take far more than that) */
	o.max_scans = 65535;
	o.max_decode_ns = 1000000;
	rc = stk__image_decode(&o, bomb, len, 1, out, err, sizeof(err), NULL);
	assert_int_equal(rc, STK_ETOOBIG);
	assert_non_null(strstr(err, "(max_decode_time): refused"));
	/* the public call and its option table: the same */
	struct stk_image_opts pub = {.size = sizeof(pub), .width = 32, .height = 32};
	assert_int_equal(stk_image_decode(&pub, bomb, len, 0, 0, 0, out, err, sizeof(err)),
			 STK_ETOOBIG);
	/* the lossless rewrite for image mode (stoker pack --transcode) refuses it too */
	void *tx = NULL;
	size_t txlen = 0;
	assert_int_equal(stk_jpeg_transcode(bomb, len, &tx, &txlen, err, sizeof(err)), STK_ETOOBIG);
	assert_non_null(strstr(err, "more than 100 scans"));
	assert_null(tx);
	/* one copy of the scan: an ordinary progressive file */
	free(bomb);
	bomb = scan_bomb(256, 256, 1, &len);
	o = opts(STK_CROP_CENTER, 0);
	assert_int_equal(stk__image_defaults(&o, err, sizeof(err)), 0);
	assert_int_equal(stk__image_decode(&o, bomb, len, 1, out, err, sizeof(err), NULL), 0);
	assert_int_equal(stk_jpeg_transcode(bomb, len, &tx, &txlen, err, sizeof(err)), 0);
	stk_free(tx);
	free(bomb);

	/* in a loader under skip: counted, named, the rest delivered */
	char *d = tu_mkdtemp();
	char p[PATH_MAX];
	for (int i = 0; i < 6; i++) {
		uint8_t *jpg = encode(64, 48, 3, hgrad, &len);
		snprintf(p, sizeof(p), "%s/%02d.jpg", d, i);
		tu_write(p, jpg, len);
		free(jpg);
	}
	bomb = scan_bomb(1024, 1024, 400, &len);
	snprintf(p, sizeof(p), "%s/03-bomb.jpg", d);
	tu_write(p, bomb, len);
	free(bomb);
	struct stk_loader_opts lo = {.size = sizeof(lo), .path = d, .batch_size = 4, .image = &pub,
				     .flags = STK_F_QUIET};
	struct stk_loader *l;
	assert_int_equal(stk_loader_create(&l, &lo, err, sizeof(err)), 0);
	struct stk_batch *b;
	int samples = 0;
	while ((rc = stk_loader_next(l, &b)) == 1) {
		samples += (int)b->count;
		stk_batch_release(l, b);
	}
	assert_int_equal(rc, 0);
	assert_int_equal(samples, 6);
	assert_non_null(strstr(stk_last_error(l), "03-bomb.jpg: progressive JPEG of 1024x1024 "
					    "with more than 100 scans (max_scans)"));
	struct stk_stats st = {.size = sizeof(st)};
	stk_loader_stats(l, &st);
	assert_int_equal(st.errors, 1);
	stk_loader_destroy(l);
	tu_rmrf(d);
	free(d);
}

/* The last decoded region (stk__image_region_hook), every pixel of it. */
static uint8_t *region_rgb;
static size_t region_len;
static void keep_region(const uint8_t *rgb, int w, int h, double bx, double by)
{
	(void)bx;
	(void)by;
	free(region_rgb);
	region_len = (size_t)w * (size_t)h * 3;
	region_rgb = malloc(region_len);
	assert_non_null(region_rgb);
	memcpy(region_rgb, rgb, region_len);
}

/* A progressive JPEG's scans are decoded only down to the rows the crop
 * needs (image/image.c, skip_tail): the same output bytes as decoding every
 * scan to its end, for the centre crop and random crops (DCT scaling
 * included), every chroma sampling, grey, landscape and portrait, every
 * pixel of the decoded region (the row below it that vertical upsampling
 * reads included); the
 * entropy share shows the tail was skipped; a file cut in the skipped part
 * is still refused as truncated. */
static void test_progressive_tail(void **state)
{
	(void)state;
	const struct {
		int w, h, comps, hs, vs;
	} pics[] = {{403, 301, 3, 0, 0}, {240, 421, 3, 0, 0}, {333, 500, 3, 2, 1},
		    {300, 449, 3, 1, 1}, {257, 390, 1, 0, 0}, {800, 1200, 3, 0, 0}};
	const uint32_t sizes[][2] = {{224, 224}, {61, 47}, {32, 96}};
	char err[256];
	for (size_t p = 0; p < sizeof(pics) / sizeof(pics[0]); p++) {
		size_t len;
		uint8_t *jpg = tu_jpeg(&(struct tu_jpeg){.w = pics[p].w, .h = pics[p].h,
							  .comps = pics[p].comps, .h_samp = pics[p].hs,
							  .v_samp = pics[p].vs, .progressive = true,
							  .pixel = texture},
				       &len);
		double least = 1;
		for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++)
			for (int crop = 0; crop < 2; crop++) {
				struct stk_image_opts o = opts(crop ? STK_CROP_CENTER : STK_CROP_RANDOM_RESIZED, 0);
				o.width = sizes[s][0];
				o.height = sizes[s][1];
				assert_int_equal(stk__image_defaults(&o, err, sizeof(err)), 0);
				size_t n = stk__image_bytes(&o);
				uint8_t *a = malloc(n), *b = malloc(n);
				assert_non_null(a);
				assert_non_null(b);
				for (int64_t i = 0; i < (crop ? 1 : 16); i++) {
					uint64_t seed = stk__sample_seed(5, 0, i);
					struct stk__decode_info ia, ib;
					stk__image_region_hook = keep_region;
					stk__image_tail = 0;
					assert_int_equal(stk__image_decode(&o, jpg, len, seed, a, err, sizeof(err), &ia), 0);
					uint8_t *whole = region_rgb;
					size_t whole_len = region_len;
					region_rgb = NULL;
					stk__image_tail = 1;
					int rc = stk__image_decode(&o, jpg, len, seed, b, err, sizeof(err), &ib);
					stk__image_region_hook = NULL;
					if (rc)
						fail_msg("%dx%d: %s", pics[p].w, pics[p].h, err);
					bool same = whole_len == region_len && !memcmp(whole, region_rgb, region_len);
					free(whole);
					if (memcmp(a, b, n) || !same)
						fail_msg("%dx%d comps %d sampling %dx%d, %ux%u %s crop %lld: output "
							 "or region differs when the scans' tails are skipped", pics[p].w,
							 pics[p].h, pics[p].comps, pics[p].hs, pics[p].vs, o.width,
							 o.height, crop ? "centre" : "random", (long long)i);
					assert_true(ia.entropy > 0.999);
					least = ib.entropy < least ? ib.entropy : least;
				}
				free(a);
				free(b);
			}
		free(region_rgb);
		region_rgb = NULL;
		/* random crops end above the bottom: some scans' tails went unread */
		if (least > 0.95)
			fail_msg("%dx%d: no scan tail skipped (least entropy share %.3f)", pics[p].w,
				 pics[p].h, least);
		/* cut inside the last scan, below any crop's rows: truncated */
		struct stk_image_opts o = opts(STK_CROP_CENTER, 0);
		assert_int_equal(stk__image_defaults(&o, err, sizeof(err)), 0);
		uint8_t *out = malloc(stk__image_bytes(&o));
		assert_non_null(out);
		assert_int_equal(stk__image_decode(&o, jpg, len - 40, 1, out, err, sizeof(err), NULL),
				 STK_ECORRUPT);
		assert_non_null(strstr(err, "truncated"));
		free(out);
		free(jpg);
	}
}

/* A progressive JPEG's coefficient arrays live in the decoding thread's kept
 * buffer (image/scratch.c), which holds the previous image's coefficients
 * when the next one starts: the same output bytes as libjpeg's own fresh,
 * zeroed arrays, image after image, larger and smaller ones in turn (a
 * stale coefficient the scans do not overwrite would show), every chroma
 * sampling and grey, centre and random crops. */
static void test_progressive_scratch(void **state)
{
	(void)state;
	const struct {
		int w, h, comps, hs, vs;
	} pics[] = {{800, 1200, 3, 0, 0}, {403, 301, 3, 0, 0}, {1024, 700, 3, 2, 1},
		    {240, 421, 3, 0, 0}, {300, 449, 3, 1, 1}, {257, 390, 1, 0, 0},
		    {640, 480, 1, 0, 0}, {333, 500, 3, 2, 1}};
	char err[256];
	for (int pass = 0; pass < 2; pass++)
		for (size_t p = 0; p < sizeof(pics) / sizeof(pics[0]); p++) {
			size_t len;
			uint8_t *jpg = tu_jpeg(&(struct tu_jpeg){.w = pics[p].w, .h = pics[p].h,
								  .comps = pics[p].comps,
								  .h_samp = pics[p].hs,
								  .v_samp = pics[p].vs,
								  .progressive = true,
								  .pixel = pass ? gray : texture},
					       &len);
			for (int crop = 0; crop < 2; crop++) {
				struct stk_image_opts o = opts(crop ? STK_CROP_CENTER : STK_CROP_RANDOM_RESIZED, 0);
				o.width = o.height = 224;
				assert_int_equal(stk__image_defaults(&o, err, sizeof(err)), 0);
				size_t n = stk__image_bytes(&o);
				uint8_t *a = malloc(n), *b = malloc(n);
				assert_non_null(a);
				assert_non_null(b);
				for (int64_t i = 0; i < (crop ? 1 : 4); i++) {
					uint64_t seed = stk__sample_seed(9, 0, i);
					stk__image_scratch = 0;
					assert_int_equal(stk__image_decode(&o, jpg, len, seed, a, err, sizeof(err), NULL), 0);
					stk__image_scratch = 1;
					int rc = stk__image_decode(&o, jpg, len, seed, b, err, sizeof(err), NULL);
					if (rc)
						fail_msg("%dx%d: %s", pics[p].w, pics[p].h, err);
					if (memcmp(a, b, n))
						fail_msg("%dx%d comps %d sampling %dx%d, %s crop %lld: output differs "
							 "with the coefficients in the kept buffer", pics[p].w, pics[p].h,
							 pics[p].comps, pics[p].hs, pics[p].vs,
							 crop ? "centre" : "random", (long long)i);
				}
				free(a);
				free(b);
			}
			free(jpg);
		}
}

/* The same picture progressive and as its lossless sequential twin
 * (stk_jpeg_transcode: the same coefficients, restart intervals, decoded by
 * the interval path): the same output bytes, centre and random crops, DCT
 * scaling included, every chroma sampling and grey.  The progressive path's
 * memory and scan-tail skipping against the baseline path, exactly. */
static void test_progressive_equals_baseline(void **state)
{
	(void)state;
	const struct {
		int w, h, comps, hs, vs;
	} pics[] = {{403, 301, 3, 0, 0}, {240, 421, 3, 0, 0}, {333, 500, 3, 2, 1},
		    {300, 449, 3, 1, 1}, {257, 390, 1, 0, 0}, {1024, 768, 3, 0, 0}};
	char err[256];
	for (size_t p = 0; p < sizeof(pics) / sizeof(pics[0]); p++) {
		size_t len, blen;
		uint8_t *jpg = tu_jpeg(&(struct tu_jpeg){.w = pics[p].w, .h = pics[p].h,
							  .comps = pics[p].comps, .h_samp = pics[p].hs,
							  .v_samp = pics[p].vs, .progressive = true,
							  .pixel = texture},
				       &len);
		void *base;
		assert_int_equal(stk_jpeg_transcode(jpg, len, &base, &blen, err, sizeof(err)), 0);
		assert_int_equal(stk_jpeg_restart_info(base, blen, NULL, NULL, NULL, 0), 1);
		for (int crop = 0; crop < 2; crop++) {
			struct stk_image_opts o = opts(crop ? STK_CROP_CENTER : STK_CROP_RANDOM_RESIZED, 0);
			o.width = o.height = crop ? 224 : 96;
			assert_int_equal(stk__image_defaults(&o, err, sizeof(err)), 0);
			size_t n = stk__image_bytes(&o);
			uint8_t *a = malloc(n), *b = malloc(n);
			assert_non_null(a);
			assert_non_null(b);
			for (int64_t i = 0; i < (crop ? 1 : 12); i++) {
				uint64_t seed = stk__sample_seed(3, 1, i);
				struct stk__decode_info ia, ib;
				assert_int_equal(stk__image_decode(&o, jpg, len, seed, a, err, sizeof(err), &ia), 0);
				assert_int_equal(stk__image_decode(&o, base, blen, seed, b, err, sizeof(err), &ib), 0);
				assert_false(ia.fast);
				assert_true(ib.fast);
				if (memcmp(a, b, n))
					fail_msg("%dx%d comps %d sampling %dx%d, %s crop %lld: progressive and "
						 "its sequential twin differ", pics[p].w, pics[p].h, pics[p].comps,
						 pics[p].hs, pics[p].vs, crop ? "centre" : "random", (long long)i);
			}
			free(a);
			free(b);
		}
		stk_free(base);
		free(jpg);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_solid_colour),
		cmocka_unit_test(test_deterministic_and_flip),
		cmocka_unit_test(test_box_distribution),
		cmocka_unit_test(test_colour_spaces),
		cmocka_unit_test(test_dtypes_and_layouts),
		cmocka_unit_test(test_simd_matches_plain),
		cmocka_unit_test(test_corrupt_corpus),
		cmocka_unit_test(test_loader_image_mode),
		cmocka_unit_test(test_scan_bomb),
		cmocka_unit_test(test_progressive_tail),
		cmocka_unit_test(test_progressive_scratch),
		cmocka_unit_test(test_progressive_equals_baseline),
	};
	return cmocka_run_group_tests_name("image", tests, NULL, NULL);
}
