/* video/skip.h — which frames of a clip no target can take, so that the
 * decoder may drop them (video/skip.c), and the clip's target times and
 * frame times that video/clip.c's pick uses, computed in one place so that
 * both sides compare the same doubles. */
#ifndef STK_VIDEO_SKIP_H
#define STK_VIDEO_SKIP_H

#include "base/internal.h"

struct stk__vskip {
	double t0, step, tol; /* target j is t0 + j·step; a frame reaches it from t + tol */
	double tb;            /* seconds per pts tick */
	int64_t start_pts;
	uint32_t frames;      /* targets */
	int64_t *pts;         /* the pts of the packets read since the seek */
	size_t n, cap;
};

/* Target j's time. */
double stk__vskip_target(const struct stk__vskip *s, uint32_t j);
/* A pts's time from the stream's start. */
double stk__vskip_time(const struct stk__vskip *s, int64_t pts);
/* Whether a frame at time t is at or past target j (less the tolerance):
 * the frame that fills j is the first such frame or the one before it. */
bool stk__vskip_reaches(const struct stk__vskip *s, double t, uint32_t j);
/* Whether the frame at tp before target time T is nearer to it than the
 * frame at ta that reaches it: the pick takes the earlier one then. */
bool stk__vskip_nearer(double T, double tp, double ta);
/* Forgets the packets read (a seek). */
void stk__vskip_reset(struct stk__vskip *s);
/* Notes a packet read: 0; 1 when its pts cannot be planned with (none, or a
 * pts already read); -ENOMEM. */
int stk__vskip_note(struct stk__vskip *s, int64_t pts);
/* Whether the frame of the packet at pts (noted) may be one that a target
 * takes, judged from the packets read so far: false only when it is not. */
bool stk__vskip_needed(const struct stk__vskip *s, int64_t pts);
/* Whether no packet not yet sent can be one a target takes, so the decoder
 * may be drained now: the packets read ahead (pending, their pts) are not
 * needed, and every packet not yet read lies past the last target, which
 * the stream's reorder bound (frames that may come out before one decoded
 * earlier: the decoder's has_b_frames) says from the pts read so far. */
bool stk__vskip_done(const struct stk__vskip *s, int reorder, const int64_t *pending,
		     int npending);
void stk__vskip_free(struct stk__vskip *s);

/* Frames no target takes are dropped where the decoder can (1, the
 * default); tests and benchmarks set 0 to decode every frame. */
extern int stk__video_skip;

#endif
