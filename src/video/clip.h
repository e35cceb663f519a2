/* video/clip.h — one clip's state, shared by its decode loop (video/clip.c)
 * and its conversion into the output (video/convert.c). */
#ifndef STK_VIDEO_CLIP_H
#define STK_VIDEO_CLIP_H

#include "video/demux.h"
#include "video/skip.h"

#include "image/image.h"
#include "image/span.h"

/* room past a scratch frame for what libswscale writes beyond its last row */
#define TMP_PAD 64
/* packets read ahead of the one sent, while frames may be dropped: the
 * neighbours in time of a B-frame of MPEG-4 part 2 come after it */
#define LOOK 4

struct stk__clip {
	const struct stk_video_opts *o;
	struct stk__vdemux d;
	AVCodecContext *cc;
	AVPacket *pkt;
	AVFrame *cur, *prev;
	bool prev_ok;         /* prev holds the last decoded frame */
	bool prev_out;        /* ... and it was the last one written out */
	double prev_t;
	struct SwsContext *sws;
	int sws_w, sws_h, sws_fmt; /* what sws was made for */
	bool sws_uv;          /* ... with U and V swapped (video/convert.c) */
	uint8_t *tmp;         /* S×S×3 (+ libswscale's overrun) when the output needs
				 turning, mirroring or planes, or nothing is resized */
	uint8_t *out;
	uint32_t S;
	/* the plan */
	double t0, step, tol, fps;
	uint32_t next;        /* the next target to fill */
	struct stk__box dbox; /* in displayed pixels */
	bool boxed;
	int bx, by, bw, bh;   /* the box in the coded frame */
	int fw, fh;           /* the coded frame size the box was made for */
	struct stk__deadline dl;
	uint64_t wall0;       /* max_decode_time with codec threads: from here */
	uint32_t decoded;
	/* dropping the frames no target takes (video/skip.c) */
	struct stk__vskip sk; /* the targets and the packets' pts read since the seek */
	bool skip;            /* this pass sends packets to be dropped */
	bool unplannable;     /* a packet read has no pts, or a repeated one */
	uint32_t dropped;     /* packets sent with AVDISCARD_NONREF, this pass */
	int64_t out_pts;      /* the last frame out's pts, since the seek */
	bool out_any;
	bool drained;         /* this pass drained the decoder before the stream's end */
	AVPacket *q[LOOK + 1]; /* read ahead: q[0 .. qn-1] */
	int qn, qend;         /* qend: av_read_frame's EOF or error, once the queue is drained */
	int64_t first_pts;
	char *err;
	size_t errlen;
};

/* Writes decoded frame f into output frame j (libswscale from the crop box;
 * turned, mirrored and laid out as the options say): 0, or <0 with the
 * reason in c->err. */
int stk__clip_convert(struct stk__clip *c, const AVFrame *f, uint32_t j);
/* Exchanges the U and V coefficients of a YUV -> RGB context: with its
 * source's U and V planes exchanged too, a BGR24 context writes RGB24
 * (video/convert.c).  0, or -1 where libswscale refuses. */
int stk__video_sws_uv(struct SwsContext *sws);

#endif
