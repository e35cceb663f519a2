/* video/video.h — clips from whole video files in memory, decoded with
 * FFmpeg's libraries loaded at run time (video/av.c).  The loader's decode
 * threads call stk__video_decode with options already made whole by
 * stk__video_opts (once, at create) and the sample's generator seed. */
#ifndef STK_VIDEO_H
#define STK_VIDEO_H

#include "base/internal.h"

/* Copies the caller's options (of any older, smaller size) into dst, fills
 * the defaults and checks them: 0, or <0 with "name: reason" in err (may be
 * NULL). */
int stk__video_opts(struct stk_video_opts *dst, const struct stk_video_opts *src, char *err,
		    size_t errlen);
/* Bytes of one clip for options made whole by stk__video_opts. */
size_t stk__video_clip_bytes(const struct stk_video_opts *o);
/* Decodes clip `clip` of the video in src/len into out (stk__video_clip_bytes)
 * with the clip's start and crop box drawn from sample_seed
 * (stk__sample_seed(seed, epoch, index), as image mode's).  o: made whole by
 * stk__video_opts.  0, or <0 as stk_video_decode, the reason in err (the
 * caller names the file).  info may be NULL.  Any thread; nothing shared. */
int stk__video_decode(const struct stk_video_opts *o, const uint8_t *src, size_t len,
		      uint64_t sample_seed, uint32_t clip, void *out, struct stk_clip_info *info,
		      char *err, size_t errlen);
/* The same over n byte ranges of a file of `size` bytes (video/demux.c's
 * struct stk__vext: a clip's ranges from the video index); a read outside
 * them is STK_ECORRUPT, said so. */
struct stk__vext;
int stk__video_decode_ext(const struct stk_video_opts *o, const struct stk__vext *ext, uint32_t n,
			  size_t size, uint64_t sample_seed, uint32_t clip, void *out,
			  struct stk_clip_info *info, char *err, size_t errlen);
/* Where clip `clip` of a video (fps, frames: its header's) starts, in
 * seconds from its first frame (on its frame grid), and the step between
 * the clip's frames, from the options and the sample's seed only: the clip
 * decoder's plan (video/clip.c) and the loader's read plan (the video index)
 * alike.  0, or 1 when the clip is longer than the video (t0 0; short_clip
 * refuse makes that an error). */
int stk__video_clip_start(const struct stk_video_opts *o, double fps, int64_t frames,
			  uint64_t sample_seed, uint32_t clip, double *t0, double *step);
/* stk_video_probe without the public wrapper's checks. */
int stk__video_probe(const uint8_t *src, size_t len, struct stk_video_info *info, char *err,
		     size_t errlen);

/* libswscale's filter for every clip [SWS_BILINEAR]; benchmarks set others. */
extern int stk__video_sws_flags;
/* Benchmarks: when set, the thread CPU time spent in libswscale (its
 * context's set-up and sws_scale) is added there. */
extern uint64_t *stk__video_sws_ns;

#endif
