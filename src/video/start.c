/*
 * DESIGN video/start.c — where a clip starts: from the header's facts (frame
 * rate, frame count), the options and the sample's generator seed only,
 * never from thread timing.  One rule for the clip decoder (video/clip.c,
 * which decodes from there) and the video index (video/vindex.c, which plans
 * the clip's byte ranges before anything is read), so the two agree.
 */
#include "video/video.h"

#include <math.h>

int stk__video_clip_start(const struct stk_video_opts *o, double fps, int64_t frames,
			  uint64_t sample_seed, uint32_t clip, double *t0, double *step)
{
	*step = o->fps > 0 ? 1.0 / o->fps : o->stride / fps;
	double tol = 0.25 / fps;
	double span = (o->frames - 1) * *step;
	int64_t n = frames > 0 ? frames : 1;
	double last = (n - 1) / fps;
	if (span > last + tol) {
		*t0 = 0;
		return o->short_clip == STK_VSHORT_REFUSE;
	}
	int64_t starts = (int64_t)floor((last - span) * fps + 1e-6) + 1;
	int64_t s;
	if (o->crop == STK_VCROP_CENTER)
		s = (int64_t)((double)(starts - 1) * (2.0 * clip + 1) / (2.0 * o->clips_per_video) + 0.5);
	else
		s = (int64_t)((double)(stk__mix64(sample_seed ^ 0x5bd1e9955bd1e995ull) >> 11) *
			      0x1.0p-53 * (double)starts);
	*t0 = s >= starts ? (double)(starts - 1) / fps : (double)s / fps;
	return 0;
}
