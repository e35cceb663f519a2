/* test_jpeg_rst.c — restart-indexed JPEGs: the lossless transcode (the same
 * DCT coefficients, intervals that tile the rows), the decoder's interval
 * path giving the very pixels of the ordinary path for every box, scale and
 * flip (4:2:0, 4:2:2, 4:4:0, 4:4:4, grayscale, CMYK), the fallbacks, a
 * corrupt interval named, the loader's counters, and a replay of the fuzz
 * corpus (tests/fuzz/rst_corpus). */
#include "testjpeg.h"

#include "image/image.h"
#include "image/jpeg_fast.h"
#include "image/jpeg_rst.h"
#include "stoker/stoker.h"

#include <dirent.h>
#include <limits.h>
#include <math.h>
#include <jpeglib.h>

#include "fuzz/fuzz_rst.c"

uint32_t stk__jpeg_interval(uint32_t mcux, uint32_t mcu_w);

enum samp { S420, S422, S440, S444, GRAY, CMYK };
static const char *const samp_name[] = {"4:2:0", "4:2:2", "4:4:0", "4:4:4", "gray", "CMYK"};

static int texture(int x, int y, int c)
{
	return (x * 7 + y * 13 + c * 50 + (x * y) % 31 + ((x / 9 + y / 5) % 3) * 40) % 256;
}

/* A w×h JPEG with the given sampling, restart interval (MCUs, 0: none) and
 * progressive or not.  malloc'ed. */
static uint8_t *encode(int w, int h, enum samp s, unsigned restart, bool progressive, size_t *len)
{
	struct tu_jpeg j = {.w = w, .h = h, .comps = s == GRAY ? 1 : s == CMYK ? 4 : 3,
			    .h_samp = s == S420 || s == S422 ? 2 : 1,
			    .v_samp = s == S420 || s == S440 ? 2 : 1, .restart = restart,
			    .progressive = progressive, .pixel = texture};
	return tu_jpeg(&j, len);
}

static uint8_t *transcode(const uint8_t *src, size_t len, size_t *outlen)
{
	void *out;
	char err[256];
	int rc = stk_jpeg_transcode(src, len, &out, outlen, err, sizeof(err));
	if (rc)
		fail_msg("transcode: %d %s", rc, err);
	return out;
}

/* Every quantized coefficient of a and b, and their quantization tables. */
static void assert_same_coefficients(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen)
{
	struct jpeg_decompress_struct d[2];
	struct jpeg_error_mgr e[2];
	jvirt_barray_ptr *co[2];
	const uint8_t *src[2] = {a, b};
	size_t len[2] = {alen, blen};
	for (int i = 0; i < 2; i++) {
		d[i].err = jpeg_std_error(&e[i]);
		jpeg_create_decompress(&d[i]);
		jpeg_mem_src(&d[i], src[i], (unsigned long)len[i]);
		jpeg_read_header(&d[i], TRUE);
		co[i] = jpeg_read_coefficients(&d[i]);
		assert_int_equal(e[i].num_warnings, 0);
	}
	assert_int_equal(d[0].num_components, d[1].num_components);
	assert_int_equal(d[0].image_width, d[1].image_width);
	assert_int_equal(d[0].image_height, d[1].image_height);
	assert_int_equal(d[0].jpeg_color_space, d[1].jpeg_color_space);
	for (int c = 0; c < d[0].num_components; c++) {
		jpeg_component_info *p = &d[0].comp_info[c], *q = &d[1].comp_info[c];
		assert_int_equal(p->h_samp_factor, q->h_samp_factor);
		assert_int_equal(p->v_samp_factor, q->v_samp_factor);
		assert_memory_equal(p->quant_table->quantval, q->quant_table->quantval,
				    sizeof(p->quant_table->quantval));
		for (JDIMENSION y = 0; y < p->height_in_blocks; y++) {
			JBLOCKARRAY ra = d[0].mem->access_virt_barray((j_common_ptr)&d[0], co[0][c], y, 1, FALSE);
			JBLOCKARRAY rb = d[1].mem->access_virt_barray((j_common_ptr)&d[1], co[1][c], y, 1, FALSE);
			assert_memory_equal(ra[0], rb[0], sizeof(JBLOCK) * p->width_in_blocks);
		}
	}
	for (int i = 0; i < 2; i++)
		jpeg_destroy_decompress(&d[i]);
}

static void test_interval_choice(void **state)
{
	(void)state;
	/* ~32 pixels (16-64) when a divisor allows it, else a row */
	assert_int_equal(stk__jpeg_interval(32, 16), 2);
	assert_int_equal(stk__jpeg_interval(63, 8), 3);
	assert_int_equal(stk__jpeg_interval(30, 16), 2);
	assert_int_equal(stk__jpeg_interval(31, 16), 1);
	assert_int_equal(stk__jpeg_interval(65, 8), 5);
	assert_int_equal(stk__jpeg_interval(67, 8), 67);
	assert_int_equal(stk__jpeg_interval(2, 16), 1);
	assert_int_equal(stk__jpeg_interval(1, 16), 1);
	for (uint32_t m = 1; m < 600; m++)
		assert_int_equal(m % stk__jpeg_interval(m, 16), 0);
}

static void test_transcode_lossless(void **state)
{
	(void)state;
	const int dims[][2] = {{320, 240}, {203, 157}, {500, 375}, {17, 9}};
	for (int s = S420; s <= CMYK; s++)
		for (size_t d = 0; d < STK_ARRAY_SIZE(dims); d++)
			for (int prog = 0; prog < 2; prog++) {
				size_t len, tlen;
				uint8_t *jpg = encode(dims[d][0], dims[d][1], (enum samp)s, 0, prog, &len);
				uint8_t *t = transcode(jpg, len, &tlen);
				assert_same_coefficients(jpg, len, t, tlen);
				uint32_t R = 0, n = 0;
				char why[128];
				assert_int_equal(stk_jpeg_restart_info(jpg, len, NULL, NULL, why, sizeof(why)), 0);
				assert_int_equal(stk_jpeg_restart_info(t, tlen, &R, &n, why, sizeof(why)), 1);
				assert_true(R >= 1 && n >= 1);
				/* baseline now, and about the size (optimized tables pay for the markers) */
				assert_int_equal(t[0], 0xff);
				for (size_t i = 2; i + 1 < tlen; i++)
					if (t[i] == 0xff && t[i + 1] >= 0xc0 && t[i + 1] <= 0xcf && t[i + 1] != 0xc4) {
						assert_true(t[i + 1] == 0xc0 || t[i + 1] == 0xc1);
						break;
					}
				if (dims[d][0] > 100 && !prog)
					assert_true(tlen < len * 102 / 100);
				/* a second pass changes nothing */
				size_t t2len;
				uint8_t *t2 = transcode(t, tlen, &t2len);
				assert_int_equal(t2len, tlen);
				assert_memory_equal(t2, t, tlen);
				stk_free(t2);
				stk_free(t);
				free(jpg);
			}
}

static void test_transcode_bad_input(void **state)
{
	(void)state;
	size_t len;
	uint8_t *jpg = encode(320, 240, S420, 0, false, &len);
	void *out = (void *)1;
	size_t olen = 1;
	char err[256];
	assert_int_equal(stk_jpeg_transcode(jpg, len / 2, &out, &olen, err, sizeof(err)), STK_ECORRUPT);
	assert_null(out);
	assert_int_equal(olen, 0);
	assert_non_null(strstr(err, "corrupt JPEG"));
	assert_int_equal(stk_jpeg_transcode("\x89PNG\r\n\x1a\n....", 12, &out, &olen, err, sizeof(err)),
			 STK_EFORMAT);
	assert_non_null(strstr(err, "not a JPEG"));
	assert_int_equal(stk_jpeg_transcode(jpg, 0, &out, &olen, err, sizeof(err)), STK_EFORMAT);
	memcpy(jpg + 3, "\xff\xff\xff\xff", 4); /* a broken header */
	assert_int_equal(stk_jpeg_transcode(jpg, len, &out, &olen, NULL, 0), STK_ECORRUPT);
	free(jpg);
}

static struct stk_image_opts opts(uint32_t w, uint32_t h, uint32_t flags)
{
	struct stk_image_opts o = {.size = sizeof(o), .width = w, .height = h, .flags = flags};
	char err[256];
	assert_int_equal(stk__image_defaults(&o, err, sizeof(err)), 0);
	return o;
}

/* The last region decoded, kept by the hook. */
static struct {
	uint8_t *rgb;
	int w, h;
	double bx, by;
} seen[2];
static int seen_i;

static void keep_region(const uint8_t *rgb, int w, int h, double bx, double by)
{
	free(seen[seen_i].rgb);
	seen[seen_i].rgb = malloc((size_t)w * (size_t)h * 3);
	assert_non_null(seen[seen_i].rgb);
	memcpy(seen[seen_i].rgb, rgb, (size_t)w * (size_t)h * 3);
	seen[seen_i].w = w;
	seen[seen_i].h = h;
	seen[seen_i].bx = bx;
	seen[seen_i].by = by;
}

/* The interval path against the ordinary one for box b at output w×h: the
 * same region decoded (every pixel, not only those the resampler reads) and
 * the same output bytes.  Returns whether the interval path was taken. */
static bool same_pixels(const uint8_t *jpg, size_t len, const struct stk__box *b, uint32_t w,
			uint32_t h, const char *what)
{
	struct stk_image_opts o = opts(w, h, STK_IMG_NHWC);
	size_t n = stk__image_bytes(&o);
	uint8_t *a = malloc(n), *f = malloc(n);
	char err[256];
	struct stk__decode_info ia, ib;
	stk__image_region_hook = keep_region;
	stk__image_fast = 0;
	seen_i = 0;
	int ra = stk__image_decode_box(&o, jpg, len, b, 0, a, err, sizeof(err), &ia);
	stk__image_fast = 1;
	seen_i = 1;
	/* every third decode without the decode_mcu wrapper: libjpeg's own
	 * restart handling, the same pixels */
	static unsigned calls;
	stk__image_hook = calls++ % 3 != 2;
	int rb = stk__image_decode_box(&o, jpg, len, b, 0, f, err, sizeof(err), &ib);
	stk__image_hook = 1;
	stk__image_region_hook = NULL;
	if (ra || rb)
		fail_msg("%s: box %g,%g %gx%g -> %ux%u: rc %d / %d: %s", what, b->x, b->y, b->w, b->h, w,
			 h, ra, rb, err);
	assert_false(ia.fast);
	if (seen[0].w != seen[1].w || seen[0].h != seen[1].h || seen[0].bx != seen[1].bx ||
	    seen[0].by != seen[1].by)
		fail_msg("%s: box %g,%g %gx%g -> %ux%u: region %dx%d vs %dx%d", what, b->x, b->y, b->w,
			 b->h, w, h, seen[0].w, seen[0].h, seen[1].w, seen[1].h);
	for (int y = 0; y < seen[0].h; y++)
		for (int x = 0; x < seen[0].w * 3; x++) {
			size_t i = (size_t)y * (size_t)seen[0].w * 3 + (size_t)x;
			if (seen[0].rgb[i] != seen[1].rgb[i])
				fail_msg("%s: box %g,%g %gx%g -> %ux%u: region %dx%d differs at x %d y %d: "
					 "%d vs %d", what, b->x, b->y, b->w, b->h, w, h, seen[0].w,
					 seen[0].h, x / 3, y, seen[0].rgb[i], seen[1].rgb[i]);
		}
	if (memcmp(a, f, n)) {
		size_t i = 0;
		while (a[i] == f[i])
			i++;
		fail_msg("%s: box %g,%g %gx%g flip %d -> %ux%u: pixel %zu (x %zu, y %zu) %d vs %d", what,
			 b->x, b->y, b->w, b->h, b->flip, w, h, i, i / 3 % w, i / 3 / w, a[i], f[i]);
	}
	assert_true(ib.entropy > 0 && ib.entropy <= 1 && ia.entropy > 0 && ia.entropy <= 1);
	if (ib.fast)
		assert_true(ib.entropy <= ia.entropy + 0.02);
	free(a);
	free(f);
	return ib.fast;
}

/* Under the sanitizers every decode costs ten times more: a third of the
 * boxes there (each still at every scale). */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define BOX_STRIDE 3
#else
#define BOX_STRIDE 1
#endif

/* Boxes at every edge and corner, the whole image, thin strips, one pixel,
 * random ones; outputs that make the decoder scale by 1, 1/2, 1/4 and 1/8. */
static void check_all_boxes(const uint8_t *jpg, size_t len, int W, int H, const char *what)
{
	int fast = 0, total = 0, box = 0;
	const double fw[] = {1, 0.45, 0.06}, fx[] = {0, 0.5, 1};
	for (size_t i = 0; i < STK_ARRAY_SIZE(fw); i++)
		for (size_t j = 0; j < STK_ARRAY_SIZE(fw); j++)
			for (size_t u = 0; u < STK_ARRAY_SIZE(fx); u++)
				for (size_t v = 0; v < STK_ARRAY_SIZE(fx); v++) {
					if (box++ % BOX_STRIDE)
						continue;
					double w = floor(W * fw[i]), h = floor(H * fw[j]);
					w = w < 1 ? 1 : w;
					h = h < 1 ? 1 : h;
					struct stk__box b = {floor((W - w) * fx[u]), floor((H - h) * fx[v]), w, h,
							     (i + j + u + v) % 2};
					/* one-to-one, and the four DCT scales */
					const double sc[] = {1, 2.1, 4.2, 8.4};
					for (size_t k = 0; k < STK_ARRAY_SIZE(sc); k++) {
						uint32_t ow = (uint32_t)fmax(1, floor(w / sc[k]));
						uint32_t oh = (uint32_t)fmax(1, floor(h / sc[k]));
						fast += same_pixels(jpg, len, &b, ow, oh, what);
						total++;
					}
				}
	uint64_t x = 12345;
	for (int t = 0; t < 30 / BOX_STRIDE; t++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		int w = 1 + (int)((x >> 20) % (uint64_t)W), h = 1 + (int)((x >> 40) % (uint64_t)H);
		struct stk__box b = {(double)((x >> 8) % (uint64_t)(W - w + 1)),
				     (double)((x >> 30) % (uint64_t)(H - h + 1)), w, h, t % 2};
		uint32_t ow = 8 + (uint32_t)((x >> 50) % 300), oh = 8 + (uint32_t)((x >> 3) % 300);
		fast += same_pixels(jpg, len, &b, ow, oh, what);
		total++;
	}
	/* fractional boxes (the centre crop makes them) */
	struct stk__box b = {W * 0.1 + 0.37, H * 0.2 + 0.61, W * 0.55 + 0.2, H * 0.6 + 0.7, false};
	fast += same_pixels(jpg, len, &b, 64, 48, what);
	total++;
	if (fast != total)
		fail_msg("%s: %d of %d decodes took the interval path", what, fast, total);
}

static void test_fast_path_pixels(void **state)
{
	(void)state;
	/* sizes with partial MCUs at the right and bottom edges, and exact ones */
	const int dims[][2] = {{203, 157}, {130, 420}};
	for (int s = S420; s <= CMYK; s++)
		for (size_t d = 0; d < STK_ARRAY_SIZE(dims); d++) {
			size_t len, tlen;
			uint8_t *jpg = encode(dims[d][0], dims[d][1], (enum samp)s, 0, false, &len);
			uint8_t *t = transcode(jpg, len, &tlen);
			char what[64];
			snprintf(what, sizeof(what), "%s %dx%d", samp_name[s], dims[d][0], dims[d][1]);
			check_all_boxes(t, tlen, dims[d][0], dims[d][1], what);
			stk_free(t);
			free(jpg);
		}
}

/* Intervals of one MCU, and of whole rows (two, three): the same pixels. */
static void test_fast_path_intervals(void **state)
{
	(void)state;
	const struct {
		enum samp s;
		int w, h;
		unsigned restart;
	} c[] = {
		{S420, 203, 157, 1},   /* 13 MCUs a row */
		{S420, 203, 157, 13},  /* a row */
		{S420, 203, 157, 26},  /* two rows */
		{S444, 120, 100, 45},  /* three rows of 15 */
		{S422, 200, 64, 5},    /* 13 MCUs: not tiled by 5 */
		{GRAY, 64, 64, 3},     /* 8 MCUs: not tiled by 3 */
	};
	for (size_t i = 0; i < STK_ARRAY_SIZE(c); i++) {
		size_t len;
		uint8_t *jpg = encode(c[i].w, c[i].h, c[i].s, c[i].restart, false, &len);
		char what[64];
		snprintf(what, sizeof(what), "%s %dx%d interval %u", samp_name[c[i].s], c[i].w, c[i].h,
			 c[i].restart);
		char why[128];
		int tiles = stk_jpeg_restart_info(jpg, len, NULL, NULL, why, sizeof(why));
		if (i < 4) {
			check_all_boxes(jpg, len, c[i].w, c[i].h, what);
		} else { /* the ordinary path, the right pixels */
			assert_int_equal(tiles, 0);
			assert_non_null(strstr(why, "does not tile"));
			struct stk__box b = {10, 10, 30, 30, false};
			assert_false(same_pixels(jpg, len, &b, 30, 30, what));
		}
		free(jpg);
	}
}

/* Markers missing, out of order or extra: the ordinary path.  A damaged
 * interval the crop covers: an error naming it and libjpeg's message; one it
 * does not cover: decoded. */
static void test_fast_path_bad_markers(void **state)
{
	(void)state;
	size_t len;
	uint8_t *jpg = encode(256, 256, S420, 4, false, &len); /* 16 MCUs a row: 4 intervals */
	struct stk__jpeg_rst r;
	assert_int_equal(stk__jpeg_rst_scan(jpg, len, &r, NULL, 0), 1);
	assert_int_equal(r.nint, 64);
	char why[128];
	uint8_t *bad = malloc(len);
	/* RST5 (after interval 5) removed */
	size_t m = r.off[6] - 2;
	memcpy(bad, jpg, m);
	memcpy(bad + m, jpg + m + 2, len - m - 2);
	assert_int_equal(stk_jpeg_restart_info(bad, len - 2, NULL, NULL, why, sizeof(why)), 0);
	assert_non_null(strstr(why, "RST6 after interval 5, where RST5 was due"));
	/* RST5 made RST6 */
	memcpy(bad, jpg, len);
	bad[m + 1] = 0xd6;
	assert_int_equal(stk_jpeg_restart_info(bad, len, NULL, NULL, why, sizeof(why)), 0);
	/* an interval cut short: still every marker, but libjpeg sees the damage */
	size_t cut = r.off[41] - 12; /* 10 bytes off interval 40: row 10, MCUs 0-3 */
	memcpy(bad, jpg, cut);
	memcpy(bad + cut, jpg + cut + 10, len - cut - 10);
	assert_int_equal(stk_jpeg_restart_info(bad, len - 10, NULL, NULL, why, sizeof(why)), 1);
	struct stk_image_opts o = opts(64, 64, 0);
	uint8_t *out = malloc(stk__image_bytes(&o));
	char err[256];
	struct stk__decode_info info;
	struct stk__box over = {0, 150, 64, 40, false}, away = {128, 0, 64, 64, false};
	assert_int_equal(stk__image_decode_box(&o, bad, len - 10, &over, 0, out, err, sizeof(err), &info),
			 STK_ECORRUPT);
	assert_true(info.fast);
	if (!strstr(err, "restart interval 40 of 64 (MCU row 10, MCUs 0-3): Corrupt JPEG data"))
		fail_msg("%s", err);
	assert_int_equal(stk__image_decode_box(&o, bad, len - 10, &away, 0, out, err, sizeof(err), &info),
			 0);
	assert_true(info.fast);
	/* garbage inside an interval */
	memcpy(bad, jpg, len);
	memset(bad + r.off[40] + 3, 0x55, 20);
	int rc = stk__image_decode_box(&o, bad, len, &over, 0, out, err, sizeof(err), &info);
	assert_true(rc == 0 || (rc == STK_ECORRUPT && strstr(err, "restart interval 4")));
	/* a header warning (JFIF version 2.1) is the headers', not the intervals':
	 * decoded, as the ordinary path does */
	memcpy(bad, jpg, len);
	uint8_t *jfif = memmem(bad, 64, "JFIF", 5);
	assert_non_null(jfif);
	jfif[5] = 2;
	assert_int_equal(stk__image_decode_box(&o, bad, len, &over, 0, out, err, sizeof(err), &info), 0);
	assert_true(info.fast);
	/* the whole file cut in the scan: the ordinary path says it is truncated */
	assert_int_equal(stk_jpeg_restart_info(jpg, len / 2, NULL, NULL, why, sizeof(why)), 0);
	assert_int_equal(stk__image_decode_box(&o, jpg, len / 2, &over, 0, out, err, sizeof(err), &info),
			 STK_ECORRUPT);
	assert_false(info.fast);
	stk__jpeg_rst_free(&r);
	free(out);
	free(bad);
	free(jpg);
}

/* The loader counts the interval path and the share of entropy data. */
static void test_loader_stats(void **state)
{
	(void)state;
	char *d = tu_mkdtemp();
	char p[PATH_MAX];
	for (int t = 0; t < 2; t++) {
		snprintf(p, sizeof(p), "%s/%s", d, t ? "rst" : "plain");
		tu_mkdir(p);
		snprintf(p, sizeof(p), "%s/%s/c", d, t ? "rst" : "plain");
		tu_mkdir(p);
		for (int i = 0; i < 24; i++) {
			size_t len, tlen;
			uint8_t *jpg = encode(300 + i * 4, 200 + i * 3, S420, 0, false, &len);
			uint8_t *w = t ? transcode(jpg, len, &tlen) : jpg;
			snprintf(p, sizeof(p), "%s/%s/c/%02d.jpg", d, t ? "rst" : "plain", i);
			tu_write(p, w, t ? tlen : len);
			if (t)
				stk_free(w);
			free(jpg);
		}
	}
	double share[2];
	for (int t = 0; t < 2; t++) {
		snprintf(p, sizeof(p), "%s/%s", d, t ? "rst" : "plain");
		struct stk_image_opts img = {.size = sizeof(img), .width = 64, .height = 64,
					     .decode_threads = 2};
		struct stk_loader_opts o = {.size = sizeof(o), .path = p, .batch_size = 8,
					    .image = &img, .flags = STK_F_QUIET | STK_F_NO_CACHE};
		struct stk_loader *l;
		char err[512];
		assert_int_equal(stk_loader_create(&l, &o, err, sizeof(err)), 0);
		struct stk_batch *b;
		int rc, n = 0;
		while ((rc = stk_loader_next(l, &b)) == 1) {
			n += (int)b->count;
			stk_batch_release(l, b);
		}
		assert_int_equal(rc, 0);
		assert_int_equal(n, 24);
		struct stk_stats st = {.size = sizeof(st)};
		stk_loader_stats(l, &st);
		assert_true(st.decode_fast_share == (t ? 1.0 : 0.0));
		assert_true(st.decode_entropy_share > 0.05 && st.decode_entropy_share < 1);
		share[t] = st.decode_entropy_share;
		stk_loader_stats_reset(l);
		stk_loader_stats(l, &st);
		assert_true(st.decode_fast_share == 0 && st.decode_entropy_share == 0);
		stk_loader_destroy(l);
	}
	assert_true(share[1] < share[0]); /* the point of it */
	tu_rmrf(d);
	free(d);
}

/* Replays tests/fuzz/rst_corpus through the fuzz target's checks. */
static void corpus_one(const char *path, const uint8_t *buf, size_t n, void *arg)
{
	(void)path;
	LLVMFuzzerTestOneInput(buf, n);
	struct stk__jpeg_rst r;
	*(int *)arg += stk__jpeg_rst_scan(buf, n, &r, NULL, 0) == 1;
	stk__jpeg_rst_free(&r);
}

static void test_corpus(void **state)
{
	(void)state;
	int indexed = 0;
	int files = tu_replay("tests/fuzz/rst_corpus", corpus_one, &indexed);
	if (files < 0)
		skip(); /* run from another folder than the repository's */
	assert_true(files >= 10);
	assert_true(indexed >= 4);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_interval_choice),
		cmocka_unit_test(test_transcode_lossless),
		cmocka_unit_test(test_transcode_bad_input),
		cmocka_unit_test(test_fast_path_pixels),
		cmocka_unit_test(test_fast_path_intervals),
		cmocka_unit_test(test_fast_path_bad_markers),
		cmocka_unit_test(test_loader_stats),
		cmocka_unit_test(test_corpus),
	};
	return cmocka_run_group_tests_name("jpeg_rst", tests, NULL, NULL);
}
