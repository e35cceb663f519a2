/*
 * bench/video.c — `stoker bench --video`: the loader in video mode, where a
 * sample is a clip.  Its flags are the video rows of the option table
 * (frames, stride, fps, clips_per_video, short_clip, codec_threads); the
 * crop's (--crop, --no-flip, --scale-min, ..., --max-pixels,
 * --max-decode-time), --decode-threads and --size are image mode's flags,
 * which mean the same for a clip.  The report is bench's, in clips: clips/s and
 * frames/s, the decode threads' clips/s a core, the verdict.  No plain read
 * loop: it would only read the files, and a ratio to it would say nothing
 * about decoding video.
 */
#include "bench/bench.h"
#include "common/cli.h"

#include <stdio.h>
#include <string.h>

/* The video rows that get flags of their own (the others share image mode's). */
const char *const bench_video_rows[] = {"frames", "stride", "fps", "clips_per_video",
					"short_clip", "codec_threads", NULL};

int bench_video_setup(struct bench_opts *o)
{
	if (!o->video)
		return 0;
	if (o->image) {
		fprintf(stderr, "stoker bench: --image and --video together: a run decodes images "
				"or clips, not both\n");
		return -1;
	}
	struct stk_video_opts *v = &o->vid;
	const struct stk_image_opts *i = &o->img;
	char why[256];
	if (o->size && stk_option_set(stk_video_option_find("size"), v, o->size, why,
				      sizeof(why)) < 0) {
		fprintf(stderr, "stoker bench: --size: %s\n", why);
		return -1;
	}
	/* the crop's flags are image mode's, in the same terms (0: the default) */
	v->crop = i->crop == STK_CROP_CENTER ? STK_VCROP_CENTER : STK_VCROP_RANDOM;
	if (i->flags & STK_IMG_NO_FLIP)
		v->flags |= STK_VID_NO_FLIP;
	v->scale_min = i->scale_min;
	v->scale_max = i->scale_max;
	v->ratio_min = i->ratio_min;
	v->ratio_max = i->ratio_max;
	v->crop_frac = i->crop_frac;
	v->max_pixels = i->max_pixels;
	v->max_decode_ns = i->max_decode_ns;
	v->decode_threads = i->decode_threads;
	v->size = sizeof(*v);
	if (stk_video_opts_check(v, why, sizeof(why)) < 0) {
		fprintf(stderr, "stoker bench: %s\n", why);
		return -1;
	}
	if (o->vs && bench_vs_video_check(o->vs, v, why, sizeof(why))) {
		fprintf(stderr, "stoker bench: %s\n", why);
		return -1;
	}
	o->no_baseline = true;
	return 0;
}

/* Frames a clip, from the options in effect. */
static uint32_t frames_of(struct stk_loader *l)
{
	struct stk_video_opts v = {.size = sizeof(v)};
	return stk_loader_video_options(l, &v) == 1 ? v.frames : 0;
}

/* frames/s of each run, and its spread */
static void frames_spread(const struct run *S, int n, uint32_t t, struct spread *f)
{
	double fr[BENCH_MAX_REPEAT];
	for (int i = 0; i < n; i++)
		fr[i] = sps_of(&S[i]) * t;
	spread_of(fr, n, f);
}

void bench_video_print(struct stk_loader *l, const struct run *S, int n)
{
	struct spread a, f;
	char t1[64], t2[64];
	uint32_t t = frames_of(l);
	spread_runs(S, n, sps_of, &a);
	frames_spread(S, n, t, &f);
	printf("  %-24s %-24s\n  %-24s %-24s (%u a clip)\n", "clips/s",
	       fmt_spread(t1, sizeof(t1), &a, "%.1f"), "frames/s",
	       fmt_spread(t2, sizeof(t2), &f, "%.0f"), t);
}

void bench_video_decode_print(struct stk_loader *l, const struct stk_stats *st)
{
	char t1[32], t2[32];
	uint32_t t = frames_of(l);
	double per = st->decode_images_per_s_per_core; /* samples: clips */
	printf("  decode                     %u thread%s, %.1f clips/s per core (%.0f frames/s), "
	       "p50/p99 %s / %s a clip\n", st->decode_threads, st->decode_threads == 1 ? "" : "s",
	       per, per * t, fmt_ns(t1, sizeof(t1), (double)st->decode_p50_ns),
	       fmt_ns(t2, sizeof(t2), (double)st->decode_p99_ns));
}

json_t *bench_video_json(struct stk_loader *l, const struct run *S, int n,
			 const struct stk_stats *st)
{
	struct stk_video_opts v = {.size = sizeof(v)};
	if (stk_loader_video_options(l, &v) != 1)
		return NULL;
	json_t *j = json_object();
	char text[64];
	for (int i = 0; stk_video_option_at(i); i++) { /* every video option in effect */
		const struct stk_option *r = stk_video_option_at(i);
		if (stk_option_get(r, &v, text, sizeof(text)) >= 0)
			json_object_set_new(j, r->name, json_string(text));
	}
	struct spread a, f;
	spread_runs(S, n, sps_of, &a);
	frames_spread(S, n, v.frames, &f);
	json_object_set_new(j, "clips_per_s", spread_json(&a));
	json_object_set_new(j, "frames_per_s", spread_json(&f));
	json_object_set_new(j, "clips_per_epoch", json_integer(stk_loader_rank_samples(l)));
	json_object_set_new(j, "clip_bytes", json_integer((json_int_t)stk_video_clip_bytes(&v)));
	json_object_set_new(j, "decode_threads", json_integer(st->decode_threads));
	json_object_set_new(j, "decode_clips_per_s_per_core",
			    json_real(st->decode_images_per_s_per_core));
	return j;
}
