/*
 * DESIGN video/video.c — the video options and the public entry points.
 *
 * Options go through the one option table (STK_VIDEO_OPTIONS in stoker.h:
 * defaults and ranges) and the checks across options here; the public calls
 * make the caller's options whole and hand the work to the clip decoder
 * (video/clip.c), the prober (video/probe.c) and the maker (video/make.c).
 */
#include "video/video.h"

#include <stdio.h>

#include "image/image.h"

int stk__video_opts(struct stk_video_opts *dst, const struct stk_video_opts *src, char *err,
		    size_t errlen)
{
	char scratch[256]; /* the message is dropped; sized so it is not cut */
	if (!err || !errlen) {
		err = scratch;
		errlen = sizeof(scratch);
	}
	memset(dst, 0, sizeof(*dst));
	if (src) /* the caller's struct may be older (smaller) than ours */
		memcpy(dst, src, src->size && src->size < sizeof(*dst) ? src->size : sizeof(*dst));
	dst->size = sizeof(*dst);
	int rc = stk__opts_apply(STK_OPT_VIDEO, dst, err, errlen);
	if (rc < 0)
		return rc;
	if (!(dst->scale_min <= dst->scale_max) || !(dst->ratio_min <= dst->ratio_max))
		return stk__errf(err, errlen, -ERANGE,
				 "video crop parameters out of order: scale_min %g > scale_max %g, "
				 "or ratio_min %g > ratio_max %g",
				 dst->scale_min, dst->scale_max, dst->ratio_min, dst->ratio_max);
	if (!(dst->fps >= 0))
		return stk__errf(err, errlen, -ERANGE, "fps: %g is not >= 0", dst->fps);
	return 0;
}

size_t stk__video_clip_bytes(const struct stk_video_opts *o)
{
	return (size_t)o->frames * o->out_size * o->out_size * 3;
}

int stk_video_opts_check(const struct stk_video_opts *opts, char *err, size_t errlen)
{
	struct stk_video_opts o;
	return stk__video_opts(&o, opts, err, errlen);
}

size_t stk_video_clip_bytes(const struct stk_video_opts *opts)
{
	struct stk_video_opts o;
	if (stk__video_opts(&o, opts, NULL, 0) < 0)
		return 0;
	return stk__video_clip_bytes(&o);
}

int stk_video_decode(const struct stk_video_opts *opts, const void *data, size_t len,
		     uint64_t seed, uint64_t epoch, uint64_t index, uint32_t clip, void *out,
		     struct stk_clip_info *info, char *err, size_t errlen)
{
	char scratch[8];
	if (!err || !errlen) {
		err = scratch;
		errlen = sizeof(scratch);
	}
	err[0] = 0;
	struct stk_video_opts o;
	int rc = stk__video_opts(&o, opts, err, errlen);
	if (rc < 0)
		return rc;
	if (clip >= o.clips_per_video)
		return stk__errf(err, errlen, -EINVAL, "clip %u: not below clips_per_video (%u)", clip,
				 o.clips_per_video);
	if (!data && len)
		return stk__errf(err, errlen, -EINVAL, "no data");
	return stk__video_decode(&o, data, len, stk__sample_seed(seed, epoch, (int64_t)index), clip,
				 out, info, err, errlen);
}

int stk_video_probe(const void *data, size_t len, struct stk_video_info *info, char *err,
		    size_t errlen)
{
	char scratch[8];
	if (!err || !errlen) {
		err = scratch;
		errlen = sizeof(scratch);
	}
	err[0] = 0;
	if (!info || (!data && len))
		return stk__errf(err, errlen, -EINVAL, "no data or no info");
	return stk__video_probe(data, len, info, err, errlen);
}
