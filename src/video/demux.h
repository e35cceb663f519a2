/* video/demux.h — a container opened over a file held in memory, whole or
 * as byte ranges of it (video/demux.c): the custom AVIOContext, the video
 * stream and its facts. */
#ifndef STK_VIDEO_DEMUX_H
#define STK_VIDEO_DEMUX_H

#include "video/av.h"

/* Bytes of the file at off..off+len, held at p. */
struct stk__vext {
	uint64_t off, len;
	const uint8_t *p;
};

/* The reads open() made (offset ranges, merged): the header's bytes. */
#define STK__VREC_MAX 8
struct stk__vrec {
	uint32_t n;
	bool over;    /* more ranges than fit: no byte index for this file */
	uint64_t off[STK__VREC_MAX], len[STK__VREC_MAX];
};

struct stk__vdemux {
	AVFormatContext *fc;
	AVIOContext *pb;
	struct {
		const struct stk__vext *ext; /* sorted by off, not overlapping */
		uint32_t n;
		struct stk__vext one;   /* a whole file */
		size_t len;             /* the file's size */
		int64_t pos;
		bool ran_out;           /* a read asked for bytes past the end */
		bool outside;           /* a read fell outside every range held */
		int64_t outside_at;
		struct stk__vrec *rec;  /* while open() runs: its reads noted here */
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
	bool counted;          /* the header gave no length: frames counted (whole file) */
	bool probed;           /* avformat_find_stream_info ran */
};

/* Opens the container in src/len (which must outlive d; d must not move
 * while open) and finds its video stream; `full`: the stream's header read
 * whole (avformat_find_stream_info: the pixel format) even where the
 * container's own header says enough for decoding.  0, or <0 with the
 * reason in err; d is closed on failure. */
int stk__vdemux_open(struct stk__vdemux *d, const uint8_t *src, size_t len, bool full, char *err,
		     size_t errlen);
/* The same over n ranges of a file of `size` bytes (ext must outlive d): a
 * read outside them fails (mem.outside), never gives other bytes.  rec, if
 * not NULL, notes the reads the opening made. */
int stk__vdemux_open_ext(struct stk__vdemux *d, const struct stk__vext *ext, uint32_t n,
			 size_t size, bool full, struct stk__vrec *rec, char *err, size_t errlen);
/* The demuxer FFmpeg's probe would pick for a file whose first len bytes
 * are p, where that is known from them; else NULL (probed). */
const AVInputFormat *stk__vdemux_known_format(const uint8_t *p, size_t len);
/* Frees everything open() made; safe on a closed or zeroed d. */
void stk__vdemux_close(struct stk__vdemux *d);

#endif
