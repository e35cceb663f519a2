/* test_video_skip.c — the frames a clip leaves undecoded (src/video/skip.c):
 * the rule itself on random frame times (every frame that clip.c's pick can
 * take is kept, whatever the packets read so far), and whole clips decoded
 * with dropping on and off (stk__video_skip) byte for byte, with the same
 * clip info, over videos at GOP 250, 12 and 30, B-frames and none, rotation,
 * H.264, HEVC, MPEG-4 part 2, VP9, variable frame rate (a remux with jittered
 * timestamps), a video shorter than the clip (pad), at strides 1, 2, 3, fps
 * resampling, both layouts, one and two codec threads; fewer frames
 * decoded with dropping where the stream has non-reference frames; the
 * decoder drained once nothing left can be taken (a random decode order
 * within a reorder bound: every frame taken was sent); and a
 * pts read twice (the rule's check fails): those clips decoded again,
 * dropping nothing, the same bytes.  Skipped, saying so, where FFmpeg's
 * libraries are missing. */
#include "testutil.h"

#include "stoker/stoker.h"

#include <math.h>
#include <stdbool.h>

#include "video/av.h"
#include "video/skip.h"

static bool have_av, have_hevc;

/* libx265 keeps an allocation of its own past its encoder's close (making
 * hevc.mp4): not stoker's, so LeakSanitizer is told (SANITIZE=address) */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
	return "leak:libx265\n";
}

static int make(const char *name, struct stk_video_make_opts o)
{
	char err[512];
	o.size = sizeof(o);
	o.width = o.width ? o.width : 128;
	o.height = o.height ? o.height : 96;
	int rc = stk_video_make(tu_path(name), &o, err, sizeof(err));
	if (rc && rc != STK_EFORMAT)
		fail_msg("stk_video_make %s: %d %s", name, rc, err);
	return rc;
}

/* pts (in frames of d ticks) moved later by 2 frames after every 7th frame
 * and half a frame after every 5th: variable frame rate, order kept; with
 * `dup`, frames 60 and 61 share a pts (the rule's checks fail there) */
static int64_t jitter(int64_t ts, int64_t d, bool dup)
{
	if (ts == AV_NOPTS_VALUE || d <= 0)
		return ts;
	int64_t k = ts / d, x = 0;
	for (int64_t i = 0; i < k; i++)
		x += i % 7 == 3 ? 2 * d : i % 5 == 1 ? d / 2 : 0;
	if (dup && k == 61 && ts % d == 0)
		x -= d + (60 % 7 == 3 ? 2 * d : 60 % 5 == 1 ? d / 2 : 0);
	return ts + x;
}

/* Remuxes src into dst (Matroska) with jitter()'s timestamps. */
static void remux_vfr(const char *src, const char *dst, bool dup)
{
	AVFormatContext *in = NULL, *out = NULL;
	assert_int_equal(AV(avformat_open_input)(&in, src, NULL, NULL), 0);
	assert_true(AV(avformat_find_stream_info)(in, NULL) >= 0);
	AVStream *ist = in->streams[0];
	int64_t d = (int64_t)llround(1.0 / (av_q2d(ist->avg_frame_rate) * av_q2d(ist->time_base)));
	assert_true(AV(avformat_alloc_output_context2)(&out, NULL, NULL, dst) >= 0);
	AVStream *ost = AV(avformat_new_stream)(out, NULL);
	assert_non_null(ost);
	assert_true(AV(avcodec_parameters_copy)(ost->codecpar, ist->codecpar) >= 0);
	ost->codecpar->codec_tag = 0;
	ost->time_base = ist->time_base;
	assert_true(AV(avio_open)(&out->pb, dst, AVIO_FLAG_WRITE) >= 0);
	assert_true(AV(avformat_write_header)(out, NULL) >= 0);
	AVPacket *p = AV(av_packet_alloc)();
	while (AV(av_read_frame)(in, p) >= 0) {
		p->pts = jitter(p->pts, d, dup);
		p->dts = jitter(p->dts, d, dup);
		p->duration = 0;
		AV(av_packet_rescale_ts)(p, ist->time_base, ost->time_base);
		p->stream_index = 0;
		assert_true(AV(av_interleaved_write_frame)(out, p) >= 0);
	}
	AV(av_packet_free)(&p);
	assert_true(AV(av_write_trailer)(out) >= 0);
	AV(avio_closep)(&out->pb);
	AV(avformat_free_context)(out);
	AV(avformat_close_input)(&in);
}

static int setup(void **state)
{
	char cod[128], err[256];
	if (tu_dir_setup(state))
		return -1;
	have_av = stk_video_codecs(cod, sizeof(cod)) > 0 && !stk__av_load(err, sizeof(err));
	if (!have_av) {
		fprintf(stderr, "test_video_skip: skipped: %s\n", cod);
		return 0;
	}
	/* libx264's veryfast: B-frames, some of them referenced (b-pyramid) */
	make("g250.mp4", (struct stk_video_make_opts){.frames = 300, .gop = 250, .fps = 25});
	make("g12.mp4", (struct stk_video_make_opts){.frames = 120, .gop = 12, .fps = 30});
	make("rot.mp4", (struct stk_video_make_opts){.frames = 90, .gop = 30, .fps = 25,
						    .rotation = 90, .seed = 3});
	make("short.mp4", (struct stk_video_make_opts){.frames = 20, .gop = 250, .fps = 25});
	make("mpeg4.mp4", (struct stk_video_make_opts){.frames = 90, .gop = 30, .fps = 25,
						      .codec = "mpeg4"}); /* no B-frames */
	make("vp9.webm", (struct stk_video_make_opts){.frames = 60, .gop = 30, .fps = 30});
	have_hevc = !make("hevc.mp4", (struct stk_video_make_opts){.frames = 120, .gop = 60,
								   .fps = 25, .codec = "hevc"});
	if (!have_hevc)
		fprintf(stderr, "test_video_skip: no libx265 encoder: HEVC not tried\n");
	make("g30.mp4", (struct stk_video_make_opts){.frames = 150, .gop = 30, .fps = 25, .seed = 5});
	remux_vfr(tu_path("g30.mp4"), tu_path("vfr.mkv"), false);
	remux_vfr(tu_path("g30.mp4"), tu_path("dup.mkv"), true);
	return 0;
}

#define NEED_AV() TU_NEED(have_av)

static uint64_t rng = 88172645463325252ull;
static uint64_t next_rand(void)
{
	return tu_xorshift64(&rng);
}

/* A random clip over n frames at random increasing pts (a random rate,
 * step and tolerance; t0 left for the caller). */
static void random_frames(struct stk__vskip *s, int64_t *pts, int n)
{
	*s = (struct stk__vskip){.tb = 1.0 / 1000, .start_pts = 0, .frames = 1 + next_rand() % 12};
	double fps = 10 + (double)(next_rand() % 50);
	s->tol = 0.25 / fps;
	s->step = (double)(1 + next_rand() % 4) / fps * (next_rand() % 3 ? 1 : 0.7);
	int64_t t = (int64_t)(next_rand() % 100);
	for (int i = 0; i < n; i++) {
		pts[i] = t;
		t += 1 + (int64_t)(next_rand() % (uint64_t)(8000 / fps));
	}
}

/* The model of the pick: need[f] set for every frame the clip takes. */
static void model_pick(const struct stk__vskip *s, const int64_t *pts, int n, bool *need)
{
	for (uint32_t j = 0; j < s->frames; j++) {
		int a = 0;
		while (a < n && !stk__vskip_reaches(s, stk__vskip_time(s, pts[a]), j))
			a++;
		double T = stk__vskip_target(s, j);
		if (a < n)
			need[a] = true; /* Aj */
		if (a > 0 && (a == n || stk__vskip_nearer(T, stk__vskip_time(s, pts[a - 1]),
							  stk__vskip_time(s, pts[a]))))
			need[a - 1] = true; /* Pj picked, or the last frame for a target past it */
	}
}

/* The rule on its own: frames at random increasing times (gaps from a tenth
 * of a frame to eight frames: variable rate), targets at a random start and
 * step; every frame that reaches a target first, and every frame before
 * one that the pick takes instead, is needed, judged from any packets read
 * that hold it (video/skip.c's proof needs both kept). */
static void test_rule(void **state)
{
	(void)state;
	enum { N = 64 };
	int64_t pts[N];
	int dropped = 0;
	for (int round = 0; round < 3000; round++) {
		struct stk__vskip s;
		random_frames(&s, pts, N);
		s.t0 = stk__vskip_time(&s, pts[next_rand() % N]) + (double)(next_rand() % 3) / 1000;
		bool need[N] = {0};
		model_pick(&s, pts, N, need);
		for (int f = 0; f < N; f++) {
			/* the packets read: f and a random subset of the others */
			stk__vskip_reset(&s);
			assert_int_equal(stk__vskip_note(&s, pts[f]), 0);
			uint64_t keep = next_rand() % 4;
			for (int i = 0; i < N; i++)
				if (i != f && next_rand() % 4 >= keep)
					assert_int_equal(stk__vskip_note(&s, pts[i]), 0);
			bool n = stk__vskip_needed(&s, pts[f]);
			if (need[f] && !n)
				fail_msg("round %d: frame %d (t %.3f) is taken but judged not needed",
					 round, f, stk__vskip_time(&s, pts[f]));
			dropped += !n;
		}
		stk__vskip_reset(&s);
		assert_int_equal(stk__vskip_note(&s, pts[0]), 0);
		assert_int_equal(stk__vskip_note(&s, pts[0]), 1); /* a repeat */
		assert_int_equal(stk__vskip_note(&s, AV_NOPTS_VALUE), 1);
		stk__vskip_free(&s);
	}
	assert_true(dropped > 3000); /* it does judge frames unneeded */
}

/* The decoder drained early (stk__vskip_done): frames at random increasing
 * times, put in a random decode order that keeps a reorder bound d (no
 * frame comes after more than d frames it precedes in time), read in that
 * order LOOK ahead of the one sent, as clip.c does; whenever the rule says
 * done, every frame the pick takes has been sent.  It must also say done
 * before the stream's end in most rounds (else it saves nothing). */
static void test_done(void **state)
{
	(void)state;
	enum { N = 48, LOOKAHEAD = 4 };
	int64_t pts[N], order[N];
	int early = 0;
	for (int round = 0; round < 3000; round++) {
		struct stk__vskip s;
		random_frames(&s, pts, N);
		/* targets within the frames, or past them (the padding: never done) */
		s.t0 = stk__vskip_time(&s, pts[next_rand() % (N / 2)]) +
		       (double)(next_rand() % 3) / 1000;
		int d = (int)(next_rand() % 4);
		/* decode order: the frame taken next is one of the d + 1 earliest
		 * left whose taking keeps every earlier frame left within d */
		bool left[N], need[N] = {0};
		int after[N] = {0}; /* frames taken so far that come after it in time */
		for (int i = 0; i < N; i++)
			left[i] = true;
		for (int k = 0; k < N; k++) {
			int cand[4], nc = 0, seen = 0;
			for (int i = 0; i < N && seen <= d; i++) {
				if (!left[i])
					continue;
				bool ok = true;
				for (int e = 0; e < i; e++)
					ok &= !left[e] || after[e] < d;
				if (ok)
					cand[nc++] = i;
				seen++;
			}
			int f = cand[next_rand() % (uint64_t)nc];
			left[f] = false;
			for (int e = 0; e < f; e++)
				after[e] += left[e];
			order[k] = f;
		}
		model_pick(&s, pts, N, need);
		stk__vskip_reset(&s);
		int read = 0;
		for (int sent = 0; sent < N; sent++) {
			while (read < N && read < sent + LOOKAHEAD)
				assert_int_equal(stk__vskip_note(&s, pts[order[read++]]), 0);
			int64_t pend[LOOKAHEAD];
			for (int i = sent; i < read; i++)
				pend[i - sent] = pts[order[i]];
			if (!stk__vskip_done(&s, d, pend, read - sent))
				continue;
			for (int i = sent; i < N; i++)
				if (need[order[i]])
					fail_msg("round %d (reorder %d): done after %d of %d packets, but "
						 "frame %d (t %.3f), taken, is not sent yet",
						 round, d, sent, N, order[i],
						 stk__vskip_time(&s, pts[order[i]]));
			early++;
			break;
		}
		stk__vskip_free(&s);
	}
	assert_true(early > 1500); /* it does end clips before the stream's end */
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

/* Clips of one video with dropping on and off: the same bytes and info; the
 * frames decoded with it on, and without. */
static void same(const char *name, int clips, uint64_t *on, uint64_t *off, int *again)
{
	size_t len;
	uint8_t *data = slurp(name, &len);
	*on = *off = 0;
	*again = 0;
	for (int k = 0; k < clips; k++) {
		struct stk_video_opts o = {.size = sizeof(o), .frames = 8 + k % 9, .out_size = 24 + k % 3,
					   .threads = 1 + k % 2,
					   .layout = k % 5 == 4 ? STK_VLAYOUT_TCHW : STK_VLAYOUT_THWC};
		if (k % 4 == 3)
			o.fps = 7 + k % 11;
		else
			o.stride = 1 + k % 3;
		char err[256];
		assert_int_equal(stk_video_opts_check(&o, err, sizeof(err)), 0);
		size_t cb = stk_video_clip_bytes(&o);
		uint8_t *x = malloc(cb), *y = malloc(cb);
		assert_true(x && y);
		memset(x, 1, cb);
		memset(y, 2, cb);
		struct stk_clip_info a = {.size = sizeof(a)}, b = {.size = sizeof(b)};
		stk__video_skip = 1;
		int rc = stk_video_decode(&o, data, len, 11, 0, (uint64_t)k, 0, x, &a, err, sizeof(err));
		if (rc)
			fail_msg("%s clip %d, dropping: %d %s", name, k, rc, err);
		stk__video_skip = 0;
		rc = stk_video_decode(&o, data, len, 11, 0, (uint64_t)k, 0, y, &b, err, sizeof(err));
		stk__video_skip = 1;
		if (rc)
			fail_msg("%s clip %d, every frame: %d %s", name, k, rc, err);
		if (memcmp(x, y, cb))
			fail_msg("%s clip %d (frames %u stride %u fps %g threads %u): the pixels differ",
				 name, k, o.frames, o.stride, o.fps, o.threads);
		assert_int_equal(a.start_pts, b.start_pts);
		assert_true(a.start_s == b.start_s);
		assert_int_equal(a.padded, b.padded);
		/* more: decoded again, dropping nothing, after a check failed */
		*again += a.frames_decoded > b.frames_decoded;
		*on += a.frames_decoded;
		*off += b.frames_decoded;
		free(x);
		free(y);
	}
	free(data);
}

static void test_same_bytes(void **state)
{
	(void)state;
	NEED_AV();
	static const struct {
		const char *name;
		bool fewer; /* has non-reference frames: fewer decoded */
	} v[] = {{"g250.mp4", true}, {"g12.mp4", true},   {"rot.mp4", true},
		 {"short.mp4", true}, {"mpeg4.mp4", false}, {"vp9.webm", false},
		 {"vfr.mkv", true},   {"hevc.mp4", true}};
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		if (!strcmp(v[i].name, "hevc.mp4") && !have_hevc)
			continue;
		uint64_t on, off;
		int again;
		same(v[i].name, 36, &on, &off, &again);
		assert_int_equal(again, 0);
		fprintf(stderr, "test_video_skip: %-10s frames decoded %llu of %llu\n", v[i].name,
			(unsigned long long)on, (unsigned long long)off);
		if (v[i].fewer)
			assert_true(on < off);
	}
}

/* A pts read twice (frames 60 and 61 of a remux): the clips whose frames
 * were being dropped when it is read are decoded again from their seek,
 * dropping nothing, and come out the same as decoding every frame. */
static void test_again(void **state)
{
	(void)state;
	NEED_AV();
	uint64_t on, off;
	int again;
	same("dup.mkv", 60, &on, &off, &again);
	fprintf(stderr, "test_video_skip: dup.mkv frames decoded %llu of %llu, %d clips again\n",
		(unsigned long long)on, (unsigned long long)off, again);
	assert_true(again > 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rule),
		cmocka_unit_test(test_done),
		cmocka_unit_test(test_same_bytes),
		cmocka_unit_test(test_again),
	};
	return cmocka_run_group_tests_name("video_skip", tests, setup, tu_dir_teardown);
}
