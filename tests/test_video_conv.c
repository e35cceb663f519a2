/* test_video_conv.c — a decoded frame into the clip (src/video/convert.c):
 * the U/V swap that lets libswscale's BGR24 SIMD writer give RGB24 (the
 * same bytes as BGR24 with its channels swapped after, over the formats it
 * is used for, sizes down and up, limited and full range; and different
 * bytes when only the planes are swapped, so the rule is what is checked),
 * and whole clips through each of convert.c's paths (straight into the clip
 * unmirrored: the U/V swap; mirrored in place: each row's bytes reversed
 * eight at a time; through the scratch frame: TCHW) agreeing with each
 * other at output sizes whose rows are not a multiple of 8 bytes; and the
 * demuxer named without a probe (video/demux.c) being the probe's pick.  Skipped,
 * saying so, where FFmpeg's libraries are missing. */
#include "testutil.h"

#include "stoker/stoker.h"

#include <stdbool.h>

#include "video/clip.h"

static bool have_av;

static int setup(void **state)
{
	char cod[128], err[256];
	if (tu_dir_setup(state))
		return -1;
	have_av = stk_video_codecs(cod, sizeof(cod)) > 0 && !stk__av_load(err, sizeof(err));
	if (!have_av) {
		fprintf(stderr, "test_video_conv: skipped: %s\n", cod);
		return 0;
	}
	struct stk_video_make_opts o = {.size = sizeof(o), .width = 160, .height = 96, .frames = 40,
					.gop = 20, .fps = 25, .seed = 9};
	int rc = stk_video_make(tu_path("c.mp4"), &o, err, sizeof(err));
	if (rc)
		fail_msg("stk_video_make: %d %s", rc, err);
	o.codec = "mpeg4";
	rc = stk_video_make(tu_path("m.mov"), &o, err, sizeof(err));
	if (rc)
		fail_msg("stk_video_make: %d %s", rc, err);
	o.codec = NULL;
	rc = stk_video_make(tu_path("w.webm"), &o, err, sizeof(err));
	if (rc)
		fail_msg("stk_video_make: %d %s", rc, err);
	return 0;
}

#define NEED_AV() TU_NEED(have_av)

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint8_t next_byte(void)
{
	return (uint8_t)(tu_xorshift64(&rng) >> 24);
}

/* One frame of w×h in fmt, random but smooth (a picture's chroma, not
 * noise alone), converted to S×S packed 24-bit by a fresh context: BGR24
 * with its bytes swapped after (`how` 0), BGR24 from the planes swapped with
 * the coefficients swapped (1: convert.c's way), or from the planes swapped
 * alone (2). */
static void convert(enum AVPixelFormat fmt, int w, int h, int S, int how, uint8_t *out)
{
	const AVPixFmtDescriptor *pd = AV(av_pix_fmt_desc_get)(fmt);
	int cw = -((-w) >> pd->log2_chroma_w), ch = -((-h) >> pd->log2_chroma_h);
	uint8_t *p[3];
	int ls[4] = {w + 7, cw + 5, cw + 5, 0};
	rng = 0x9e3779b97f4a7c15ull ^ (uint64_t)(w * 131 + h);
	for (int k = 0; k < 3; k++) {
		int pw = ls[k], ph = k ? ch : h;
		p[k] = malloc((size_t)pw * ph + 64);
		assert_non_null(p[k]);
		for (int y = 0; y < ph; y++)
			for (int x = 0; x < pw; x++)
				p[k][y * pw + x] = (uint8_t)((x * (k + 3) + y * (5 - k)) * 2 +
							     (next_byte() & 31));
	}
	struct SwsContext *s = AV(sws_getCachedContext)(NULL, w, h, fmt, S, S, AV_PIX_FMT_BGR24,
							SWS_BILINEAR, NULL, NULL, NULL);
	assert_non_null(s);
	if (how == 1)
		assert_int_equal(stk__video_sws_uv(s), 0);
	const uint8_t *src[4] = {p[0], how ? p[2] : p[1], how ? p[1] : p[2], NULL};
	int dls = S * 3;
	assert_true(AV(sws_scale)(s, src, ls, 0, h, &out, &dls) > 0);
	if (!how)
		for (size_t i = 0; i < (size_t)S * S; i++) {
			uint8_t t = out[i * 3];
			out[i * 3] = out[i * 3 + 2];
			out[i * 3 + 2] = t;
		}
	AV(sws_freeContext)(s);
	for (int k = 0; k < 3; k++)
		free(p[k]);
}

static void test_uv_swap(void **state)
{
	(void)state;
	NEED_AV();
	static const enum AVPixelFormat fmts[] = {AV_PIX_FMT_YUV420P, AV_PIX_FMT_YUVJ420P,
						  AV_PIX_FMT_YUV422P, AV_PIX_FMT_YUV444P};
	static const int sizes[][3] = {{640, 360, 224}, {1000, 700, 224}, {97, 61, 224},
				       {333, 201, 37}, {224, 230, 224}};
	int differ = 0;
	for (size_t f = 0; f < sizeof(fmts) / sizeof(*fmts); f++)
		for (size_t z = 0; z < sizeof(sizes) / sizeof(*sizes); z++) {
			int w = sizes[z][0], h = sizes[z][1], S = sizes[z][2];
			size_t n = (size_t)S * S * 3;
			uint8_t *a = malloc(n + 64), *b = malloc(n + 64), *c = malloc(n + 64);
			assert_true(a && b && c);
			convert(fmts[f], w, h, S, 0, a);
			convert(fmts[f], w, h, S, 1, b);
			convert(fmts[f], w, h, S, 2, c);
			if (memcmp(a, b, n))
				fail_msg("%s %dx%d -> %d: the U/V swap gives other bytes",
					 AV(av_get_pix_fmt_name)(fmts[f]), w, h, S);
			differ += memcmp(a, c, n) != 0;
			free(a);
			free(b);
			free(c);
		}
	/* the planes swapped without their coefficients: another picture */
	assert_int_equal(differ, 4 * 5);
}

static uint8_t *clip(const struct stk_video_opts *o, uint64_t index)
{
	FILE *f = fopen(tu_path("c.mp4"), "rb");
	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	long len = ftell(f);
	rewind(f);
	uint8_t *data = malloc((size_t)len);
	assert_non_null(data);
	assert_int_equal(fread(data, 1, (size_t)len, f), (size_t)len);
	fclose(f);
	uint8_t *out = malloc(stk_video_clip_bytes(o));
	assert_non_null(out);
	char err[256];
	struct stk_clip_info ci = {.size = sizeof(ci)};
	int rc = stk_video_decode(o, data, (size_t)len, 5, 0, index, 0, out, &ci, err, sizeof(err));
	if (rc)
		fail_msg("clip %llu: %d %s", (unsigned long long)index, rc, err);
	free(data);
	return out;
}

/* Each clip drawn with its flip (THWC: straight into the clip, mirrored in
 * place or written by the U/V swap), the same unflipped (THWC) and drawn
 * again as TCHW (the scratch frame, BGR24 read back swapped): the first is
 * the third's pixels, and the second or its mirror.  Row lengths of 37 and
 * 61 pixels (111 and 183 bytes) leave a tail to the eight-byte reversal. */
static void test_paths_agree(void **state)
{
	(void)state;
	NEED_AV();
	static const uint32_t sizes[] = {37, 61, 48};
	int flipped = 0, straight = 0;
	for (size_t z = 0; z < 3; z++)
		for (uint64_t idx = 0; idx < 8; idx++) {
			uint32_t S = sizes[z];
			struct stk_video_opts a = {.size = sizeof(a), .frames = 3, .stride = 2,
						   .out_size = S, .scale_min = 0.3f,
						   .ratio_min = 0.75f, .ratio_max = 1.333f};
			struct stk_video_opts n = a, t = a;
			n.flags = STK_VID_NO_FLIP;
			t.layout = STK_VLAYOUT_TCHW;
			uint8_t *x = clip(&a, idx), *y = clip(&n, idx), *u = clip(&t, idx);
			size_t fb = (size_t)S * S * 3;
			bool same = true, mirror = true;
			for (size_t j = 0; j < 3; j++)
				for (size_t r = 0; r < S; r++)
					for (size_t i = 0; i < S; i++)
						for (size_t c = 0; c < 3; c++) {
							uint8_t v = x[j * fb + (r * S + i) * 3 + c];
							assert_int_equal(v, u[j * fb + c * S * S + r * S + i]);
							same &= v == y[j * fb + (r * S + i) * 3 + c];
							mirror &= v == y[j * fb + (r * S + S - 1 - i) * 3 + c];
						}
			assert_true(same || mirror);
			flipped += !same;
			straight += same;
			free(x);
			free(y);
			free(u);
		}
	/* both ways taken (the draws are fixed: seed 5, indices 0-7) */
	assert_true(flipped > 0 && straight > 0);
}

/* The demuxer named without probing (video/demux.c) is the one FFmpeg's
 * probe picks for the file (opened by path, probed); files it does not
 * know are left to the probe. */
static void test_format_known(void **state)
{
	(void)state;
	NEED_AV();
	static const char *const files[] = {"c.mp4", "m.mov", "w.webm"};
	int named = 0;
	for (int i = 0; i < 3; i++) {
		FILE *f = fopen(tu_path(files[i]), "rb");
		assert_non_null(f);
		uint8_t head[64];
		size_t n = fread(head, 1, sizeof(head), f);
		fclose(f);
		const AVInputFormat *k = stk__vdemux_known_format(head, n);
		AVFormatContext *fc = NULL;
		assert_int_equal(AV(avformat_open_input)(&fc, tu_path(files[i]), NULL, NULL), 0);
		if (k)
			assert_ptr_equal(k, fc->iformat);
		named += k != NULL;
		AV(avformat_close_input)(&fc);
	}
	assert_int_equal(named, 2); /* the MP4 and the MOV; WebM probed */
	uint8_t jp2[16] = {0, 0, 0, 12, 'f', 't', 'y', 'p', 'j', 'p', '2', ' '};
	assert_null(stk__vdemux_known_format(jp2, sizeof(jp2)));
	assert_null(stk__vdemux_known_format(jp2, 8)); /* too short to say */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_uv_swap),
		cmocka_unit_test(test_paths_agree),
		cmocka_unit_test(test_format_known),
	};
	return cmocka_run_group_tests_name("video_conv", tests, setup, tu_dir_teardown);
}
