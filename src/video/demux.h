/* video/demux.h — a container opened over a file held in memory
 * (video/demux.c): the custom AVIOContext, the video stream and its facts. */
#ifndef STK_VIDEO_DEMUX_H
#define STK_VIDEO_DEMUX_H

#include "video/av.h"

struct stk__vdemux {
	AVFormatContext *fc;
	AVIOContext *pb;
	struct {
		const uint8_t *p;
		size_t len;
		int64_t pos;
		bool ran_out; /* a read asked for bytes past the end */
	} mem;
	AVStream *st;
	int si;                /* the stream's index */
	int rotation;          /* degrees clockwise for display: 0, 90, 180, 270 */
	double fps;            /* the stream's average frame rate */
	double tb;             /* seconds per pts tick */
	double duration_s;
	int64_t start_pts;     /* the stream's first pts (0 when unknown) */
	int64_t frames;        /* the container's count, else duration × fps */
	bool frames_exact;
	bool probed;           /* avformat_find_stream_info ran */
};

/* Opens the container in src/len (which must outlive d; d must not move
 * while open) and finds its video stream; `full`: the stream's header read
 * whole (avformat_find_stream_info: the pixel format) even where the
 * container's own header says enough for decoding.  0, or <0 with the
 * reason in err; d is closed on failure. */
int stk__vdemux_open(struct stk__vdemux *d, const uint8_t *src, size_t len, bool full, char *err,
		     size_t errlen);
/* Frees everything open() made; safe on a closed or zeroed d. */
void stk__vdemux_close(struct stk__vdemux *d);

#endif
