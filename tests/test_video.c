/* test_video.c — video clips (src/video/): videos made by stk_video_make
 * carry each frame's index in pixels, so every clip is checked for the
 * frames it holds: start, start + stride, ... for starts far from the
 * keyframes (the seek lands on the keyframe before and decodes forward),
 * both layouts, fps resampling, determinism in (seed, epoch, index), the
 * centre clips, VP9 in WebM; and every bad input of issue 38: empty,
 * truncated, an MP4 with no moov, audio only, one frame, a clip longer than
 * the video (pad and refuse), rotation, 10-bit and 4:4:4, max_pixels,
 * max_decode_time; and a replay of the fuzz corpus (tests/fuzz/video_corpus).
 * Skipped, saying so, where FFmpeg's libraries are missing. */
#include "testutil.h"

#include "stoker/stoker.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>

#include "fuzz/fuzz_video.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_vindex_one
#include "fuzz/fuzz_vindex.c"
#undef LLVMFuzzerTestOneInput

static bool have_av;

static void make(const char *name, struct stk_video_make_opts o)
{
	char err[512];
	o.size = sizeof(o);
	int rc = stk_video_make(tu_path(name), &o, err, sizeof(err));
	if (rc)
		fail_msg("stk_video_make %s: %d %s", name, rc, err);
}

static uint8_t *slurp(const char *name, size_t *len)
{
	FILE *f = fopen(tu_path(name), "rb");
	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	rewind(f);
	uint8_t *b = malloc(n > 0 ? (size_t)n : 1);
	assert_non_null(b);
	assert_int_equal(fread(b, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	*len = (size_t)n;
	return b;
}

static int setup(void **state)
{
	char cod[128];
	if (tu_dir_setup(state))
		return -1;
	have_av = stk_video_codecs(cod, sizeof(cod)) > 0;
	if (!have_av) {
		fprintf(stderr, "test_video: skipped: %s\n", cod);
		return 0;
	}
	/* 25 fps, a keyframe every 30 frames, B-frames (libx264's preset) */
	make("a.mp4", (struct stk_video_make_opts){.width = 128, .height = 128, .frames = 90,
						    .gop = 30, .fps = 25});
	make("b.webm", (struct stk_video_make_opts){.width = 96, .height = 96, .frames = 40,
						     .gop = 16, .fps = 30});
	return 0;
}

#define NEED_AV() TU_NEED(have_av)

/* The frame number in output frame j of a clip of S×S (THWC or TCHW). */
static int64_t number(const uint8_t *clip, uint32_t S, uint32_t j, bool tchw)
{
	size_t fb = (size_t)S * S * 3;
	if (!tchw)
		return stk_video_frame_number(clip + j * fb, S, S, (size_t)S * 3);
	uint8_t *rgb = malloc(fb);
	assert_non_null(rgb);
	for (size_t i = 0; i < (size_t)S * S; i++)
		for (int c = 0; c < 3; c++)
			rgb[i * 3 + c] = clip[j * fb + (size_t)c * S * S + i];
	int64_t n = stk_video_frame_number(rgb, S, S, (size_t)S * 3);
	free(rgb);
	return n;
}

/* Options whose crop is the whole (square) picture: the marks read back. */
static struct stk_video_opts whole(uint32_t frames, uint32_t stride, uint32_t S, bool random)
{
	return (struct stk_video_opts){
		.size = sizeof(struct stk_video_opts), .frames = frames, .stride = stride,
		.out_size = S, .crop = random ? STK_VCROP_RANDOM : STK_VCROP_CENTER,
		.crop_frac = 1, .scale_min = 1, .scale_max = 1, .ratio_min = 1, .ratio_max = 1,
		.flags = STK_VID_NO_FLIP};
}

static int decode(const char *name, const struct stk_video_opts *o, uint64_t index,
		  uint32_t clip, uint8_t **out, struct stk_clip_info *ci, char *err, size_t errlen)
{
	size_t len;
	uint8_t *data = slurp(name, &len);
	*out = malloc(stk_video_clip_bytes(o));
	assert_non_null(*out);
	ci->size = sizeof(*ci);
	int rc = stk_video_decode(o, data, len, 7, 0, index, clip, *out, ci, err, errlen);
	free(data);
	return rc;
}

/* Random starts at strides 1, 2, 3, 5, both layouts: the frames are
 * start, start + stride, ... and the start is what info says. */
static void test_stride_exact(void **state)
{
	(void)state;
	NEED_AV();
	static const uint32_t strides[] = {1, 2, 3, 5};
	int off_key = 0;
	for (int layout = 0; layout < 2; layout++)
		for (size_t s = 0; s < 4; s++)
			for (uint64_t idx = 0; idx < 6; idx++) {
				struct stk_video_opts o = whole(8, strides[s], 64, true);
				o.layout = layout ? STK_VLAYOUT_TCHW : STK_VLAYOUT_THWC;
				uint8_t *out;
				struct stk_clip_info ci;
				char err[256];
				int rc = decode("a.mp4", &o, idx * 11 + s, 0, &out, &ci, err, sizeof(err));
				if (rc)
					fail_msg("decode: %d %s", rc, err);
				int64_t n0 = number(out, 64, 0, layout);
				assert_true(n0 >= 0);
				assert_int_equal(n0, lround(ci.start_s * 25));
				off_key += n0 % 30 > 5;
				for (uint32_t j = 0; j < 8; j++)
					assert_int_equal(number(out, 64, j, layout), n0 + (int64_t)j * strides[s]);
				assert_int_equal(ci.padded, 0);
				assert_true(ci.frames_decoded >= 8);
				assert_true(ci.frames_decoded <= 30 + 8 * strides[s]); /* from the keyframe before */
				assert_int_equal(ci.width, 128);
				assert_true(fabs(ci.fps - 25) < 1e-9);
				free(out);
			}
	assert_true(off_key >= 10); /* most starts far from a keyframe */
}

/* THWC and TCHW hold the same pixels. */
static void test_layouts_agree(void **state)
{
	(void)state;
	NEED_AV();
	struct stk_video_opts a = whole(4, 2, 48, true), b = a;
	a.flags = 0, b.flags = 0; /* flip drawn too */
	a.scale_min = b.scale_min = 0.3f;
	a.ratio_min = b.ratio_min = 0.75f;
	a.ratio_max = b.ratio_max = 1.333f;
	b.layout = STK_VLAYOUT_TCHW;
	for (uint64_t idx = 0; idx < 4; idx++) {
		uint8_t *x, *y;
		struct stk_clip_info ci;
		char err[256];
		assert_int_equal(decode("a.mp4", &a, idx, 0, &x, &ci, err, sizeof(err)), 0);
		assert_int_equal(decode("a.mp4", &b, idx, 0, &y, &ci, err, sizeof(err)), 0);
		size_t S = 48, fb = S * S * 3;
		for (size_t j = 0; j < 4; j++)
			for (size_t i = 0; i < S * S; i++)
				for (size_t c = 0; c < 3; c++)
					assert_int_equal(x[j * fb + i * 3 + c], y[j * fb + c * S * S + i]);
		free(x);
		free(y);
	}
}

/* fps resampling: each frame is the one nearest its time. */
static void test_fps(void **state)
{
	(void)state;
	NEED_AV();
	static const float rates[] = {12.5f, 10, 50};
	for (size_t r = 0; r < 3; r++)
		for (uint64_t idx = 0; idx < 4; idx++) {
			struct stk_video_opts o = whole(10, 1, 64, true);
			o.fps = rates[r];
			uint8_t *out;
			struct stk_clip_info ci;
			char err[256];
			assert_int_equal(decode("a.mp4", &o, idx, 0, &out, &ci, err, sizeof(err)), 0);
			for (uint32_t j = 0; j < 10; j++) {
				double want = (ci.start_s + j / rates[r]) * 25;
				int64_t got = number(out, 64, j, false);
				if (fabs((double)got - want) > 0.5 + 1e-6)
					fail_msg("fps %g: frame %u is %lld, want ~%.2f", rates[r], j,
						 (long long)got, want);
			}
			free(out);
		}
}

/* The same (seed, epoch, index) gives the same bytes; epochs differ. */
static void test_determinism(void **state)
{
	(void)state;
	NEED_AV();
	struct stk_video_opts o = {.size = sizeof(o), .frames = 4, .stride = 2, .out_size = 32};
	size_t len, cb = stk_video_clip_bytes(&o);
	assert_int_equal(cb, 4 * 32 * 32 * 3);
	uint8_t *data = slurp("a.mp4", &len), *x = malloc(cb), *y = malloc(cb);
	int differ = 0;
	for (uint64_t e = 0; e < 6; e++) {
		struct stk_clip_info a = {.size = sizeof(a)}, b = {.size = sizeof(b)};
		assert_int_equal(stk_video_decode(&o, data, len, 3, e, 5, 0, x, &a, NULL, 0), 0);
		assert_int_equal(stk_video_decode(&o, data, len, 3, e, 5, 0, y, &b, NULL, 0), 0);
		assert_memory_equal(x, y, cb);
		assert_int_equal(a.start_pts, b.start_pts);
		if (e) {
			struct stk_clip_info c = {.size = sizeof(c)};
			assert_int_equal(stk_video_decode(&o, data, len, 3, e - 1, 5, 0, y, &c, NULL, 0), 0);
			differ += memcmp(x, y, cb) != 0;
		}
	}
	assert_true(differ >= 4);
	free(data);
	free(x);
	free(y);
}

/* crop center: clip k of n starts at the k-th of n evenly spread places. */
static void test_center_clips(void **state)
{
	(void)state;
	NEED_AV();
	struct stk_video_opts o = whole(5, 4, 32, false);
	o.clips_per_video = 4;
	int64_t last = -1;
	for (uint32_t k = 0; k < 4; k++) {
		uint8_t *out;
		struct stk_clip_info ci;
		char err[256];
		assert_int_equal(decode("a.mp4", &o, 100 + k, k, &out, &ci, err, sizeof(err)), 0);
		int64_t n0 = number(out, 32, 0, false);
		/* 90 frames, a clip spans 17: starts 0..73, the k-th of 4 at (2k+1)/8 */
		assert_int_equal(n0, lround(73.0 * (2 * k + 1) / 8));
		assert_true(n0 > last);
		last = n0;
		assert_int_equal(ci.clip, k);
		free(out);
	}
	uint8_t out[8];
	char err[256];
	assert_int_equal(stk_video_decode(&o, out, 1, 0, 0, 0, 4, out, NULL, err, sizeof(err)), -EINVAL);
}

static void test_vp9_webm(void **state)
{
	(void)state;
	NEED_AV();
	size_t len;
	uint8_t *data = slurp("b.webm", &len);
	struct stk_video_info vi = {.size = sizeof(vi)};
	char err[256];
	assert_int_equal(stk_video_probe(data, len, &vi, err, sizeof(err)), 0);
	assert_string_equal(vi.codec, "vp9");
	assert_int_equal(vi.width, 96);
	assert_true(fabs(vi.fps - 30) < 1e-6);
	free(data);
	for (uint64_t idx = 0; idx < 5; idx++) {
		struct stk_video_opts o = whole(6, 3, 48, true);
		uint8_t *out;
		struct stk_clip_info ci;
		assert_int_equal(decode("b.webm", &o, idx, 0, &out, &ci, err, sizeof(err)), 0);
		int64_t n0 = number(out, 48, 0, false);
		assert_int_equal(n0, lround(ci.start_s * 30));
		for (uint32_t j = 0; j < 6; j++)
			assert_int_equal(number(out, 48, j, false), n0 + 3 * j);
		free(out);
	}
}

static int bad(const uint8_t *data, size_t len, const struct stk_video_opts *o, char *err,
	       size_t errlen)
{
	uint8_t *out = malloc(stk_video_clip_bytes(o));
	assert_non_null(out);
	int rc = stk_video_decode(o, data, len, 1, 0, 0, 0, out, NULL, err, errlen);
	free(out);
	return rc;
}

#define ASSERT_ERR(rc, code, err, word)                                                           \
	do {                                                                                     \
		if ((rc) != (code) || !strstr((err), (word)))                                    \
			fail_msg("got %d '%s', want %d with '%s'", (rc), (err), (code), (word)); \
	} while (0)

static void test_bad_containers(void **state)
{
	(void)state;
	NEED_AV();
	struct stk_video_opts o = whole(4, 1, 32, true);
	char err[512];
	size_t len;
	uint8_t *data = slurp("a.mp4", &len);
	/* zero-length */
	ASSERT_ERR(bad(data, 0, &o, err, sizeof(err)), STK_ECORRUPT, err, "empty");
	/* garbage */
	uint8_t junk[4096];
	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = (uint8_t)(i * 131 + 7);
	ASSERT_ERR(bad(junk, sizeof(junk), &o, err, sizeof(err)), STK_ECORRUPT, err, "container");
	/* an MP4 whose moov box is gone (as a recording stopped before writing it) */
	uint8_t *nomoov = malloc(len);
	const uint8_t *m = memmem(data, len, "moov", 4);
	assert_non_null(m);
	size_t at = (size_t)(m - data) - 4;
	size_t box = (size_t)m[-4] << 24 | (size_t)m[-3] << 16 | (size_t)m[-2] << 8 | m[-1];
	memcpy(nomoov, data, at);
	memcpy(nomoov + at, data + at + box, len - at - box);
	ASSERT_ERR(bad(nomoov, len - box, &o, err, sizeof(err)), STK_ECORRUPT, err, "no moov");
	free(nomoov);
	/* truncated: the index (first) whole, the frames cut at 40 % */
	struct stk_video_opts late = whole(4, 1, 32, false);
	late.clips_per_video = 1; /* centre: frames from the middle, past the cut */
	int rc = bad(data, len * 4 / 10, &late, err, sizeof(err));
	if (rc != STK_ECORRUPT || (!strstr(err, "truncated") && !strstr(err, "unreadable")))
		fail_msg("truncated: %d %s", rc, err);
	/* the probe of the same says the header's facts */
	struct stk_video_info vi = {.size = sizeof(vi)};
	assert_int_equal(stk_video_probe(data, len, &vi, err, sizeof(err)), 0);
	assert_int_equal(vi.frames, 90);
	assert_int_equal(vi.frames_exact, 1);
	assert_string_equal(vi.codec, "h264");
	free(data);
	/* audio only */
	make("audio.mp4", (struct stk_video_make_opts){.audio_only = 1});
	data = slurp("audio.mp4", &len);
	ASSERT_ERR(bad(data, len, &o, err, sizeof(err)), STK_EFORMAT, err, "audio only");
	ASSERT_ERR(stk_video_probe(data, len, &vi, err, sizeof(err)), STK_EFORMAT, err, "no video");
	free(data);
}

/* One frame, and a clip longer than the video: pad with the last frame or
 * refuse. */
static void test_short_videos(void **state)
{
	(void)state;
	NEED_AV();
	char err[512];
	make("one.mp4", (struct stk_video_make_opts){.width = 64, .height = 64, .frames = 1});
	make("short.mkv", (struct stk_video_make_opts){.width = 64, .height = 64, .frames = 20,
							.codec = "mpeg4"});
	struct stk_video_opts o = whole(8, 1, 32, true);
	uint8_t *out;
	struct stk_clip_info ci;
	assert_int_equal(decode("one.mp4", &o, 3, 0, &out, &ci, err, sizeof(err)), 0);
	for (uint32_t j = 0; j < 8; j++)
		assert_int_equal(number(out, 32, j, false), 0);
	assert_int_equal(ci.padded, 7);
	free(out);
	o.short_clip = STK_VSHORT_REFUSE;
	ASSERT_ERR(decode("one.mp4", &o, 3, 0, &out, &ci, err, sizeof(err)), STK_ECLIP, err,
		   "short_clip refuse");
	free(out);
	o = whole(16, 2, 32, true); /* needs 31 frames of 20 */
	assert_int_equal(decode("short.mkv", &o, 9, 0, &out, &ci, err, sizeof(err)), 0);
	/* frames 0, 2, ..., 18, then the last (19) for every later time */
	for (uint32_t j = 0; j < 16; j++)
		assert_int_equal(number(out, 32, j, false), j < 10 ? 2 * j : 19);
	assert_int_equal(ci.padded, 5);
	assert_int_equal(ci.start_s, 0);
	free(out);
	o.short_clip = STK_VSHORT_REFUSE;
	ASSERT_ERR(decode("short.mkv", &o, 9, 0, &out, &ci, err, sizeof(err)), STK_ECLIP, err,
		   "20 frames");
	free(out);
	/* exactly long enough: no padding */
	o = whole(10, 2, 32, true);
	o.short_clip = STK_VSHORT_REFUSE;
	assert_int_equal(decode("short.mkv", &o, 9, 0, &out, &ci, err, sizeof(err)), 0);
	assert_int_equal(number(out, 32, 9, false), 18);
	assert_int_equal(ci.padded, 0);
	free(out);
}

/* Rotation metadata is applied: the marks read upright, and the size is
 * the displayed one. */
static void test_rotation(void **state)
{
	(void)state;
	NEED_AV();
	static const int rots[] = {90, 180, 270};
	for (int r = 0; r < 3; r++) {
		char name[32], err[256];
		snprintf(name, sizeof(name), "rot%d.mp4", rots[r]);
		make(name, (struct stk_video_make_opts){.width = 96, .height = 64, .frames = 12,
							 .rotation = rots[r]});
		size_t len;
		uint8_t *data = slurp(name, &len);
		struct stk_video_info vi = {.size = sizeof(vi)};
		assert_int_equal(stk_video_probe(data, len, &vi, err, sizeof(err)), 0);
		free(data);
		assert_int_equal(vi.rotation, rots[r]);
		assert_int_equal(vi.width, rots[r] == 180 ? 96 : 64);
		assert_int_equal(vi.height, rots[r] == 180 ? 64 : 96);
		struct stk_video_opts o = whole(4, 2, 48, false);
		uint8_t *out;
		struct stk_clip_info ci;
		assert_int_equal(decode(name, &o, 0, 0, &out, &ci, err, sizeof(err)), 0);
		assert_int_equal(ci.width, vi.width);
		int64_t n0 = number(out, 48, 0, false);
		if (n0 < 0)
			fail_msg("rotation %d: the marks do not read upright", rots[r]);
		for (uint32_t j = 0; j < 4; j++)
			assert_int_equal(number(out, 48, j, false), n0 + 2 * j);
		free(out);
	}
}

/* 10-bit and 4:4:4: swscale converts them; the frames read back. */
static void test_pixel_formats(void **state)
{
	(void)state;
	NEED_AV();
	static const char *const fmts[] = {"yuv420p10le", "yuv444p", "yuv422p"};
	static const uint32_t depth[] = {10, 8, 8};
	for (int f = 0; f < 3; f++) {
		char name[48], err[256];
		snprintf(name, sizeof(name), "%s.mp4", fmts[f]);
		make(name, (struct stk_video_make_opts){.width = 64, .height = 64, .frames = 24,
							 .pix_fmt = fmts[f]});
		size_t len;
		uint8_t *data = slurp(name, &len);
		struct stk_video_info vi = {.size = sizeof(vi)};
		assert_int_equal(stk_video_probe(data, len, &vi, err, sizeof(err)), 0);
		free(data);
		assert_string_equal(vi.pix_fmt, fmts[f]);
		assert_int_equal(vi.bit_depth, depth[f]);
		for (uint64_t idx = 0; idx < 3; idx++) {
			struct stk_video_opts o = whole(5, 3, 40, true);
			uint8_t *out;
			struct stk_clip_info ci;
			assert_int_equal(decode(name, &o, idx, 0, &out, &ci, err, sizeof(err)), 0);
			int64_t n0 = number(out, 40, 0, false);
			assert_true(n0 >= 0);
			for (uint32_t j = 0; j < 5; j++)
				assert_int_equal(number(out, 40, j, false), n0 + 3 * j);
			free(out);
		}
	}
}

static void test_limits(void **state)
{
	(void)state;
	NEED_AV();
	char err[512];
	uint8_t *out;
	struct stk_clip_info ci;
	struct stk_video_opts o = whole(4, 1, 32, true);
	o.max_pixels = 128 * 128 - 1;
	ASSERT_ERR(decode("a.mp4", &o, 0, 0, &out, &ci, err, sizeof(err)), STK_ETOOBIG, err,
		   "max_pixels");
	free(out);
	o.max_pixels = 128 * 128;
	assert_int_equal(decode("a.mp4", &o, 0, 0, &out, &ci, err, sizeof(err)), 0);
	free(out);
	make("big.mp4", (struct stk_video_make_opts){.width = 640, .height = 480, .frames = 120,
						      .gop = 120});
	o = whole(30, 3, 64, false);
	o.max_decode_ns = 1000000; /* 1 ms of CPU for ~100 frames of 640x480 */
	ASSERT_ERR(decode("big.mp4", &o, 0, 0, &out, &ci, err, sizeof(err)), STK_ETOOBIG, err,
		   "max_decode_time");
	free(out);
	/* with frame threads the decoding is theirs: the clip's wall-clock time counts */
	o.threads = 4;
	ASSERT_ERR(decode("big.mp4", &o, 0, 0, &out, &ci, err, sizeof(err)), STK_ETOOBIG, err,
		   "wall clock");
	free(out);
	o.threads = 0;
	o.max_decode_ns = 0; /* the default, 5 s: enough */
	assert_int_equal(decode("big.mp4", &o, 0, 0, &out, &ci, err, sizeof(err)), 0);
	free(out);
}

static void test_options(void **state)
{
	(void)state;
	char err[256];
	struct stk_video_opts o = {.size = sizeof(o)};
	assert_int_equal(stk_video_opts_check(&o, err, sizeof(err)), 0);
	assert_int_equal(stk_video_clip_bytes(&o), (size_t)16 * 224 * 224 * 3);
	o.frames = 2000;
	assert_int_equal(stk_video_opts_check(&o, err, sizeof(err)), -ERANGE);
	assert_non_null(strstr(err, "frames"));
	assert_int_equal(stk_video_clip_bytes(&o), 0);
	o = (struct stk_video_opts){.size = sizeof(o), .scale_min = 0.9f, .scale_max = 0.5f};
	assert_true(stk_video_opts_check(&o, err, sizeof(err)) < 0);
	/* the table's rows: found by name, set and read back as text */
	const struct stk_option *r = stk_video_option_find("layout");
	assert_non_null(r);
	assert_int_equal(r->group, STK_OPT_VIDEO);
	o = (struct stk_video_opts){.size = sizeof(o)};
	assert_int_equal(stk_option_set(r, &o, "TCHW", err, sizeof(err)), 0);
	assert_int_equal(o.layout, STK_VLAYOUT_TCHW);
	char v[64];
	assert_true(stk_option_get(r, &o, v, sizeof(v)) > 0);
	assert_string_equal(v, "TCHW");
	r = stk_video_option_find("flip");
	assert_int_equal(stk_option_set(r, &o, "false", err, sizeof(err)), 0);
	assert_true(o.flags & STK_VID_NO_FLIP);
	int n = 0;
	for (int i = 0; (r = stk_video_option_at(i)); i++, n++)
		assert_int_equal(r->group, STK_OPT_VIDEO);
	assert_true(n >= 15);
	/* the image rows' names still find the image rows */
	assert_int_equal(stk_option_find("crop")->group, STK_OPT_IMAGE);
	assert_null(stk_option_find("clips_per_video"));
}

/* Replays tests/fuzz/video_corpus through the fuzz target's checks. */
static void test_corpus(void **state)
{
	(void)state;
	NEED_AV();
	struct tu_target t = {LLVMFuzzerTestOneInput};
	int files = tu_replay("tests/fuzz/video_corpus", tu_target_one, &t);
	if (files < 0)
		skip(); /* run from another folder than the repository's */
	assert_true(files >= 6);
}

/* Replays tests/fuzz/vindex_corpus (the video index and the ranged path). */
static void test_vindex_corpus(void **state)
{
	(void)state;
	NEED_AV();
	struct tu_target t = {fuzz_vindex_one};
	int files = tu_replay("tests/fuzz/vindex_corpus", tu_target_one, &t);
	if (files < 0)
		skip();
	assert_true(files >= 12);
}

/* The same options and seed give the same bytes in every container
 * stk_video_make writes (Matroska's SegmentUID and date, the muxer's and
 * encoder's version strings: none may vary), so two runs of `stoker gen
 * --video` make the same dataset; another seed gives other bytes. */
static void test_make_reproducible(void **state)
{
	(void)state;
	NEED_AV();
	static const char *const ext[] = {"mp4", "mkv", "webm", "mov"};
	/* FFmpeg's own MPEG-4 encoder (and libvpx for WebM): libx264's bytes
	 * vary with the contents of memory it reads (3-9 of 20 calls in one
	 * process, none under MALLOC_PERTURB_), so the muxers are checked here */
	static const char *const codec[] = {"mpeg4", "mpeg4", NULL, "mpeg4"};
	for (int k = 0; k < 4; k++)
		for (int j = 0; j < 3; j++) {
			char name[32];
			snprintf(name, sizeof(name), "rep%d.%s", j, ext[k]);
			make(name, (struct stk_video_make_opts){.width = 64, .height = 48,
								 .frames = 8, .codec = codec[k],
								 .seed = j == 2 ? 9 : 5});
		}
	for (int k = 0; k < 4; k++) {
		char n0[32], n1[32], n2[32];
		snprintf(n0, sizeof(n0), "rep0.%s", ext[k]);
		snprintf(n1, sizeof(n1), "rep1.%s", ext[k]);
		snprintf(n2, sizeof(n2), "rep2.%s", ext[k]);
		size_t l0, l1, l2;
		uint8_t *a = slurp(n0, &l0), *b = slurp(n1, &l1), *c = slurp(n2, &l2);
		if (l0 != l1 || memcmp(a, b, l0))
			fail_msg("%s and %s (one seed) differ: %zu and %zu bytes", n0, n1, l0, l1);
		assert_true(l0 != l2 || memcmp(a, c, l0));
		free(a);
		free(b);
		free(c);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_options),
		cmocka_unit_test(test_stride_exact),
		cmocka_unit_test(test_layouts_agree),
		cmocka_unit_test(test_fps),
		cmocka_unit_test(test_determinism),
		cmocka_unit_test(test_center_clips),
		cmocka_unit_test(test_vp9_webm),
		cmocka_unit_test(test_bad_containers),
		cmocka_unit_test(test_short_videos),
		cmocka_unit_test(test_rotation),
		cmocka_unit_test(test_pixel_formats),
		cmocka_unit_test(test_limits),
		cmocka_unit_test(test_corpus),
		cmocka_unit_test(test_vindex_corpus),
		cmocka_unit_test(test_make_reproducible),
	};
	return cmocka_run_group_tests_name("video", tests, setup, tu_dir_teardown);
}
