/*
 * DESIGN video/todo.c — the video calls whose FFmpeg code is being written
 * (this file goes in the commit that brings video/clip.c, probe.c, make.c):
 * each says so, -ENOSYS, so the header's shape can be merged first.
 */
#include "video/video.h"

int stk__video_decode(const struct stk_video_opts *o, const uint8_t *src, size_t len,
		      uint64_t sample_seed, uint32_t clip, void *out, struct stk_clip_info *info,
		      char *err, size_t errlen)
{
	return stk__errf(err, errlen, -ENOSYS, "video decode: not built yet");
}

int stk__video_probe(const uint8_t *src, size_t len, struct stk_video_info *info, char *err,
		     size_t errlen)
{
	return stk__errf(err, errlen, -ENOSYS, "video probe: not built yet");
}

int stk_video_make(const char *path, const struct stk_video_make_opts *o, char *err,
		   size_t errlen)
{
	return stk__errf(err, errlen, -ENOSYS, "video make: not built yet");
}

int64_t stk_video_frame_number(const uint8_t *rgb, uint32_t w, uint32_t h, size_t pitch)
{
	return -1;
}

int stk_video_codecs(char *out, size_t len)
{
	return stk__errf(out, len, -ENOSYS, "video: not built yet");
}
