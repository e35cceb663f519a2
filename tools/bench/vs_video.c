/* bench/vs_video.c — `stoker bench DIR --video --vs pyav,torchcodec,...`:
 * the video peers (PyAV, torchcodec, decord in a DataLoader; DALI's CPU
 * video reader) and the FFmpeg-alone decode ceiling beside stoker's video
 * mode on the same folder.  The measuring is Python's (python3 -m
 * stoker.vs_video, what bench/video_bench.py runs): each side a process of
 * its own, sampled for peak PSS and CPU, alternating rounds, every run timed
 * by the rule --vs follows for images (start-up, --ramp, the window).  It
 * runs in the peers' venv (bench/peers.c finds it); the peers are compared
 * on the workload they can all do: random clips at --stride, a square
 * RandomResizedCrop with the flip, layout THWC/TCHW alike, one clip a video. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "bench/bench.h"

static const char *const known[] = {"pyav", "torchcodec", "decord", "dali", "ceiling",
				    "ceiling-sws", "all", NULL};

int bench_vs_video_check(const char *vs, const struct stk_video_opts *v, char *why, size_t len)
{
	if (bench_vs_names(vs, known, "video peer", why, len))
		return -1;
	if (v->fps > 0 || v->crop != STK_VCROP_RANDOM || (v->flags & STK_VID_NO_FLIP) ||
	    v->clips_per_video > 1) {
		snprintf(why, len, "the video peers are compared on random clips at --stride with "
				   "the flip, one a video (no --fps, --crop center, --no-flip, "
				   "--clips-per-video)");
		return -1;
	}
	return 0;
}

json_t *bench_vs_video(const struct bench_opts *o, const struct stk_loader_opts *lo,
		       const struct stk_video_opts *v, uint32_t decode_threads, char *why,
		       size_t len)
{
	char py[PATH_MAX + 16], dir[PATH_MAX];
	if (bench_peers_python(py, sizeof(py), dir, sizeof(dir))) {
		snprintf(why, len, "skipped %s: no peers environment at %s; make it with: sh "
				   "bench/peers/setup.sh av torchcodec decord dali", o->vs, dir);
		return NULL;
	}
	char bs[32], seed[32], secs[32], ramp[32], rounds[32], fr[16], st[16], sz[16], th[16];
	snprintf(bs, sizeof(bs), "%u", lo->batch_size);
	snprintf(seed, sizeof(seed), "%llu", (unsigned long long)lo->seed);
	/* each run at least 10 s after its ramp (a clip takes tens of ms a core), 5 rounds */
	snprintf(secs, sizeof(secs), "%g", o->runtime > 10 ? o->runtime : 10);
	snprintf(ramp, sizeof(ramp), "%g", o->ramp > 2 ? o->ramp : 2);
	snprintf(rounds, sizeof(rounds), "%lld", (long long)(o->repeat > 5 ? o->repeat : 5));
	snprintf(fr, sizeof(fr), "%u", v->frames);
	snprintf(st, sizeof(st), "%u", v->stride);
	snprintf(sz, sizeof(sz), "%u", v->out_size);
	snprintf(th, sizeof(th), "%u", decode_threads ? decode_threads : 2);
	const char *argv[] = {py, "-c", BENCH_PY_BOOT("vs_video"), o->path, "--json", "--peers",
			      o->vs, "--batch-size", bs, "--seed", seed, "--seconds", secs,
			      "--ramp", ramp, "--rounds", rounds, "--frames", fr, "--stride", st,
			      "--size", sz, "--decode-threads", th, NULL};
	char ierr[512];
	json_t *j = bench_run_py((char *const *)argv, "vs_video", "table", JSON_ARRAY, ierr,
				 sizeof(ierr), why, len);
	if (!j && !why[0])
		snprintf(why, len, "skipped %s: %s cannot import stoker.vs_video (%s); remake the "
				   "venv: sh bench/peers/setup.sh av torchcodec decord", o->vs, py,
			 ierr[0] ? ierr : "?");
	return j;
}
