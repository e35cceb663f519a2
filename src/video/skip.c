/*
 * DESIGN video/skip.c — the frames of a clip no target can take.
 *
 * A clip seeks to the keyframe before its start and decodes forward: on
 * average half a GOP of frames before the first target, and the frames
 * between strided targets, none of which is output.  Those that no other
 * frame references need not be decoded at all: FFmpeg's decoders drop a
 * non-reference frame when AVCodecContext.skip_frame is AVDISCARD_NONREF and
 * decode every reference frame exactly as before, so the frames that are
 * output are bit-identical.  video/clip.c sets skip_frame per packet (the
 * decoders read it per frame; frame threading copies it to its threads with
 * each packet): NONREF for a packet whose frame this file proves is never
 * the one picked, DEFAULT otherwise (and always for the first packet after
 * a seek and for keyframes).
 *
 * The rule.  clip.c's pick (take()) sees the decoded frames in output order
 * f1, f2, ... at times t1, t2, ...; target j (time Tj = t0 + j·step) is
 * filled when the first frame that reaches it comes out, a frame at t
 * reaching j when !(t + tol < Tj): that frame Aj, or the one just before it,
 * Pj, when Tj - tP < tA - Tj (Pj is "picked").  Decoding a subsequence that
 * keeps every Aj and every picked Pj fills every target with the same
 * frame: the first frame of the subsequence that reaches j is still Aj (the
 * frames before it in the subsequence were before it in the whole); the
 * frame before it is Pj where Pj was picked, so Pj is picked again, and
 * where Aj was picked it is Pj or an earlier frame Q, tQ <= tP, so
 * Tj - tQ >= Tj - tP >= tA - Tj and Aj is picked again.  A target past the
 * last frame takes the last frame (its padding): Pj with tA = +inf.
 *
 * The frames come out in pts order, so for a frame f at t with neighbours
 * t' < t < t'' (the frames before and after it in time): f = Aj means f
 * reaches j and t' does not; f = Pj picked means f does not reach j, t''
 * does and Tj - t < t'' - Tj.  The neighbours are not known when f's packet
 * is sent (decode order is not display order), but the packets read so far
 * (those since the seek and a few read ahead) give lo <= t' (the largest
 * pts below t read so far; -inf if none) and hi >= t'' (the smallest above;
 * +inf if none), and "reaches" and x - Tj are monotone in x, so f is kept
 * when some j has f reaching j and lo not, or f not reaching j, hi reaching
 * it and Tj - t < hi - Tj (the same expressions as take()'s, in doubles).
 * Variable frame rate changes nothing: only pts are compared.  On a
 * constant-rate stream at stride 2 the frame between two targets is never
 * picked (the next one is exactly on its target), so it goes where nothing
 * references it.  Nothing is dropped before the first frame after the seek
 * has come out: that frame decides whether the seek overshot (clip.c
 * retries from the video's start), and must be the same one.
 *
 * The end of a clip.  A decoder holds back each frame until enough later
 * ones are decoded to be sure none comes before it (its reorder bound d,
 * has_b_frames): after the last target's frame was sent, clip.c would send
 * d more reference frames to be decoded only to push it out.  Instead it
 * drains the decoder (a NULL packet: the frames it holds come out, in the
 * same order) once no packet left can be taken (stk__vskip_done): each
 * packet read ahead is judged not needed by the rule above, and more than d
 * of the packets read reach the last target.  Then a packet X not yet read
 * reaches it too (else those d + 1 frames, decoded before X, would come
 * after it in time: more than d), and so does the frame before X in time
 * (one of them at least is before X, or again d + 1 come after it): X
 * reaches every target after a frame that reaches it, so X is no Aj and no
 * Pj.  Should a clip still be short after such a drain (a stream that
 * breaks its own bound), it is decoded again from its seek, dropping
 * nothing.
 *
 * What the rule rests on, and what clip.c checks as the frames come out:
 * every packet carries a pts, read once (a packet without one, or a repeat,
 * stops dropping: the frame times would depend on the previous frame);
 * each frame comes out with its packet's pts (best_effort_timestamp = pts)
 * and in increasing pts.  When a check fails after a packet was dropped,
 * the clip is decoded again from its seek with nothing dropped; the first
 * frame after a seek that lands past the clip's start (the retry from the
 * video's start) is handled the same way.  stk__video_skip = 0 turns the
 * dropping off (tests compare the two byte for byte).
 */
#include "video/skip.h"

#include <math.h>
#include <stdlib.h>

int stk__video_skip = 1;

double stk__vskip_target(const struct stk__vskip *s, uint32_t j)
{
	return s->t0 + j * s->step;
}

double stk__vskip_time(const struct stk__vskip *s, int64_t pts)
{
	return (double)(pts - s->start_pts) * s->tb;
}

bool stk__vskip_reaches(const struct stk__vskip *s, double t, uint32_t j)
{
	return !(t + s->tol < stk__vskip_target(s, j));
}

bool stk__vskip_nearer(double T, double tp, double ta)
{
	return T - tp < ta - T;
}

void stk__vskip_reset(struct stk__vskip *s)
{
	s->n = 0;
}

int stk__vskip_note(struct stk__vskip *s, int64_t pts)
{
	if (pts == INT64_MIN) /* AV_NOPTS_VALUE */
		return 1;
	for (size_t i = 0; i < s->n; i++)
		if (s->pts[i] == pts)
			return 1;
	if (s->n == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 256;
		int64_t *p = realloc(s->pts, cap * sizeof(*p));
		if (!p)
			return -ENOMEM;
		s->pts = p;
		s->cap = cap;
	}
	s->pts[s->n++] = pts;
	return 0;
}

bool stk__vskip_needed(const struct stk__vskip *s, int64_t pts)
{
	bool has_lo = false, has_hi = false;
	int64_t lo = 0, hi = 0;
	for (size_t i = 0; i < s->n; i++) {
		int64_t p = s->pts[i];
		if (p < pts && (!has_lo || p > lo))
			lo = p, has_lo = true;
		else if (p > pts && (!has_hi || p < hi))
			hi = p, has_hi = true;
	}
	double t = stk__vskip_time(s, pts);
	double tlo = has_lo ? stk__vskip_time(s, lo) : -INFINITY;
	double thi = has_hi ? stk__vskip_time(s, hi) : INFINITY;
	for (uint32_t j = 0; j < s->frames; j++) {
		double T = stk__vskip_target(s, j);
		if (stk__vskip_reaches(s, t, j)) {
			if (!stk__vskip_reaches(s, tlo, j))
				return true; /* may be Aj */
		} else if (stk__vskip_reaches(s, thi, j) && stk__vskip_nearer(T, t, thi)) {
			return true; /* may be Pj, picked */
		}
	}
	return false;
}

bool stk__vskip_done(const struct stk__vskip *s, int reorder, const int64_t *pending,
		     int npending)
{
	if (reorder < 0 || !s->frames)
		return false;
	size_t reach = 0; /* packets read whose frame reaches the last target */
	for (size_t i = 0; i < s->n; i++)
		reach += stk__vskip_reaches(s, stk__vskip_time(s, s->pts[i]), s->frames - 1);
	if (reach <= (size_t)reorder)
		return false;
	for (int i = 0; i < npending; i++)
		if (pending[i] == INT64_MIN || stk__vskip_needed(s, pending[i]))
			return false;
	return true;
}

void stk__vskip_free(struct stk__vskip *s)
{
	free(s->pts);
	s->pts = NULL;
	s->n = s->cap = 0;
}
