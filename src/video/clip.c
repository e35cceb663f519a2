/*
 * DESIGN video/clip.c — one clip: seek, decode forward, pick, convert.
 *
 * The plan comes first, from the header's facts and the sample's generator
 * seed only (never from thread timing): the clip's frame times t0 + j·step
 * (step = stride / the stream's fps, or 1 / fps), its start on the stream's
 * frame grid (crop random: drawn; center: the clip-th of clips_per_video
 * spread evenly), and one crop box and flip for every frame (image mode's
 * stk__image_box, in displayed coordinates, then turned into the coded
 * frame's by the rotation).  A video shorter than the clip starts at 0 and
 * repeats its last frame (short_clip pad) or is refused (STK_ECLIP).
 *
 * Then one decoder per clip: av_seek_frame to the keyframe at or before t0
 * (AVSEEK_FLAG_BACKWARD, the container's own index), decode forward only;
 * each target time takes the decoded frame nearest it (the previous frame is
 * held by reference to compare), so stride mode on a constant-rate stream
 * takes exactly frames s, s+stride, ...  A seek that lands after t0 (a
 * container without an index) is done again from the start.  The CPU-time
 * deadline (max_decode_time) is checked between frames.
 *
 * Conversion: libswscale from the crop box of the decoded frame (plane
 * pointers moved to the box, aligned to the chroma grid) to S×S RGB24 with
 * SWS_BILINEAR (docs/BENCHMARKS.md "Video: libswscale's filter": within
 * 2 grey levels of PIL's resize, image mode's tolerance, where SWS_AREA,
 * 0.91x its instructions, is 2.4 off; the conversion is 3.4 % of a clip),
 * straight into the output
 * when nothing else is to be done; else into a scratch frame turned
 * (rotation), mirrored (flip) and laid out (THWC, TCHW) into the output.
 * 10-bit, 4:4:4 and every other pixel format are swscale's to convert.
 */
#include "video/demux.h"
#include "video/video.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "image/image.h"
#include "image/span.h"

int stk__video_sws_flags = SWS_BILINEAR;
uint64_t *stk__video_sws_ns;

/* room past a scratch frame for what libswscale writes beyond its last row */
#define TMP_PAD 64

struct clip {
	const struct stk_video_opts *o;
	struct stk__vdemux d;
	AVCodecContext *cc;
	AVPacket *pkt;
	AVFrame *cur, *prev;
	bool prev_ok;         /* prev holds the last decoded frame */
	bool prev_out;        /* ... and it was the last one written out */
	double prev_t;
	struct SwsContext *sws;
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
	uint32_t decoded;
	int64_t first_pts;
	char *err;
	size_t errlen;
};

/* Bad data from the demuxer or the decoder: STK_ECORRUPT, said as
 * truncation when the reads had run out of file. */
static int corrupt(const struct clip *c, const char *what, int averr)
{
	char ab[128];
	if (c->d.mem.outside)
		return stk__errf(c->err, c->errlen, STK_ECORRUPT,
				 "a read at byte %lld, outside the ranges the video index planned, "
				 "%s after %u frames: the index does not match the file",
				 (long long)c->d.mem.outside_at, what, c->decoded);
	if (c->d.mem.ran_out)
		return stk__errf(c->err, c->errlen, STK_ECORRUPT,
				 "truncated: the file (%zu bytes) ends inside its video data, %s "
				 "after %u frames (%s)", c->d.mem.len, what, c->decoded,
				 stk__av_err(averr, ab, sizeof(ab)));
	return stk__errf(c->err, c->errlen, STK_ECORRUPT, "%s after %u frames (%s)", what,
			 c->decoded, stk__av_err(averr, ab, sizeof(ab)));
}

static double frame_time(const struct clip *c, const AVFrame *f)
{
	int64_t pts = f->best_effort_timestamp != AV_NOPTS_VALUE ? f->best_effort_timestamp : f->pts;
	if (pts == AV_NOPTS_VALUE)
		return c->prev_ok ? c->prev_t + 1.0 / c->fps : 0;
	return (double)(pts - c->d.start_pts) * c->d.tb;
}

/* The displayed box turned into the coded frame's coordinates. */
static void coded_box(struct clip *c, int fw, int fh)
{
	int W = c->d.rotation % 180 ? fh : fw, H = c->d.rotation % 180 ? fw : fh;
	int x0 = (int)floor(c->dbox.x + 1e-6), y0 = (int)floor(c->dbox.y + 1e-6);
	int x1 = (int)ceil(c->dbox.x + c->dbox.w - 1e-6), y1 = (int)ceil(c->dbox.y + c->dbox.h - 1e-6);
	x0 = x0 < 0 ? 0 : x0;
	y0 = y0 < 0 ? 0 : y0;
	x1 = x1 > W ? W : x1 <= x0 ? x0 + 1 : x1;
	y1 = y1 > H ? H : y1 <= y0 ? y0 + 1 : y1;
	int w = x1 - x0, h = y1 - y0;
	switch (c->d.rotation) {
	case 90: /* displayed (x, y) is coded (y, fh-1-x) */
		c->bx = y0, c->by = fh - x0 - w, c->bw = h, c->bh = w;
		break;
	case 180:
		c->bx = fw - x0 - w, c->by = fh - y0 - h, c->bw = w, c->bh = h;
		break;
	case 270: /* displayed (x, y) is coded (fw-1-y, x) */
		c->bx = fw - y0 - h, c->by = x0, c->bw = h, c->bh = w;
		break;
	default:
		c->bx = x0, c->by = y0, c->bw = w, c->bh = h;
	}
	c->fw = fw;
	c->fh = fh;
}

/* Writes frame f into output frame j. */
static int convert(struct clip *c, const AVFrame *f, uint32_t j)
{
	char ab[128];
	if ((uint64_t)f->width * (uint64_t)f->height > c->o->max_pixels)
		return stk__errf(c->err, c->errlen, STK_ETOOBIG,
				 "a frame of %dx%d (%.0f pixels) is above max_pixels (%llu)", f->width,
				 f->height, (double)f->width * f->height,
				 (unsigned long long)c->o->max_pixels);
	if (!c->fw)
		coded_box(c, f->width, f->height);
	else if (f->width != c->fw || f->height != c->fh)
		return stk__errf(c->err, c->errlen, STK_EFORMAT,
				 "the frame size changes mid-stream (%dx%d, then %dx%d)", c->fw, c->fh,
				 f->width, f->height);
	const AVPixFmtDescriptor *pd = AV(av_pix_fmt_desc_get)(f->format);
	if (!pd || (pd->flags & (AV_PIX_FMT_FLAG_BITSTREAM | AV_PIX_FMT_FLAG_HWACCEL)))
		return stk__errf(c->err, c->errlen, STK_EFORMAT, "pixel format %s is not supported",
				 pd ? pd->name : "unknown");
	/* the box on the chroma grid: its corner moves left/up by at most one pixel */
	int ax = (1 << pd->log2_chroma_w) - 1, ay = (1 << pd->log2_chroma_h) - 1;
	int x = c->bx & ~ax, y = c->by & ~ay;
	int w = c->bw + (c->bx - x), h = c->bh + (c->by - y);
	const uint8_t *src[4] = {0};
	int ls[4] = {0};
	for (int p = 0; p < 4 && f->data[p]; p++) {
		src[p] = f->data[p];
		ls[p] = f->linesize[p];
		for (int k = 0; k < pd->nb_components; k++)
			if (pd->comp[k].plane == p) {
				int chroma = !(pd->flags & AV_PIX_FMT_FLAG_RGB) && (k == 1 || k == 2);
				int sx = chroma ? pd->log2_chroma_w : 0, sy = chroma ? pd->log2_chroma_h : 0;
				src[p] += (ptrdiff_t)(y >> sy) * ls[p] + (ptrdiff_t)(x >> sx) * pd->comp[k].step;
				break;
			}
	}
	struct timespec t0, t1;
	if (stk__video_sws_ns) /* benchmarks: the filter's set-up and its work */
		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
	c->sws = AV(sws_getCachedContext)(c->sws, w, h, f->format, (int)c->S, (int)c->S,
					  AV_PIX_FMT_RGB24, stk__video_sws_flags, NULL, NULL, NULL);
	if (!c->sws)
		return stk__errf(c->err, c->errlen, STK_EFORMAT,
				 "libswscale cannot convert %s (%dx%d) to RGB", pd->name, w, h);
	size_t fb = (size_t)c->S * c->S * 3;
	/* straight into the clip unless the output needs turning or mirroring, or
	 * nothing is resized: libswscale's unscaled YUV->RGB24 converters write
	 * whole groups of 8 pixels, up to 24 bytes past the last row (into the
	 * next clip, or past the slot); the scratch frame has room for them */
	bool direct = !c->d.rotation && !c->dbox.flip && c->o->layout == STK_VLAYOUT_THWC &&
		      (w != (int)c->S || h != (int)c->S);
	uint8_t *dst = direct ? c->out + j * fb : c->tmp;
	int dls = (int)c->S * 3;
	int r = AV(sws_scale)(c->sws, src, ls, 0, h, &dst, &dls);
	if (stk__video_sws_ns) {
		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
		*stk__video_sws_ns += (uint64_t)((t1.tv_sec - t0.tv_sec) * 1000000000ll +
						 (t1.tv_nsec - t0.tv_nsec));
	}
	if (r <= 0)
		return stk__errf(c->err, c->errlen, STK_ECORRUPT, "libswscale failed (%s)",
				 stk__av_err(r, ab, sizeof(ab)));
	if (direct)
		return 0;
	int S = (int)c->S;
	uint8_t *o = c->out + j * fb;
	bool tchw = c->o->layout == STK_VLAYOUT_TCHW;
	for (int yd = 0; yd < S; yd++)
		for (int xd = 0; xd < S; xd++) {
			int xs = c->dbox.flip ? S - 1 - xd : xd, xc, yc;
			switch (c->d.rotation) {
			case 90:
				xc = yd, yc = S - 1 - xs;
				break;
			case 180:
				xc = S - 1 - xs, yc = S - 1 - yd;
				break;
			case 270:
				xc = S - 1 - yd, yc = xs;
				break;
			default:
				xc = xs, yc = yd;
			}
			const uint8_t *px = c->tmp + ((size_t)yc * S + xc) * 3;
			if (tchw)
				for (int k = 0; k < 3; k++)
					o[(size_t)k * S * S + (size_t)yd * S + xd] = px[k];
			else
				memcpy(o + ((size_t)yd * S + xd) * 3, px, 3);
		}
	return 0;
}

/* Output frame j as a copy of frame j - 1 (the same decoded frame again). */
static void repeat(struct clip *c, uint32_t j)
{
	size_t fb = (size_t)c->S * c->S * 3;
	memcpy(c->out + j * fb, c->out + (j - 1) * fb, fb);
}

/* A decoded frame (in c->cur, at time t): fills the targets it is nearest
 * to; then it becomes prev. */
static int take(struct clip *c)
{
	double t = frame_time(c, c->cur);
	bool cur_out = false; /* cur is in output frame next - 1 */
	while (c->next < c->o->frames) {
		double target = c->t0 + c->next * c->step;
		if (t + c->tol < target)
			break;
		bool use_prev = c->prev_ok && target - c->prev_t < t - target;
		int rc = 0;
		if (use_prev && c->prev_out)
			repeat(c, c->next);
		else if (use_prev)
			rc = convert(c, c->prev, c->next);
		else if (cur_out)
			repeat(c, c->next);
		else
			rc = convert(c, c->cur, c->next);
		if (rc < 0)
			return rc;
		if (!c->next)
			c->first_pts = (use_prev ? c->prev : c->cur)->best_effort_timestamp;
		c->prev_out = use_prev;
		cur_out = !use_prev;
		c->next++;
	}
	AV(av_frame_unref)(c->prev);
	AVFrame *s = c->prev;
	c->prev = c->cur;
	c->cur = s;
	c->prev_ok = true;
	c->prev_t = t;
	c->prev_out = cur_out;
	return 0;
}

/* Drains the decoder's frames; 1 when the clip is full. */
static int receive(struct clip *c, bool *first, bool *retry)
{
	for (;;) {
		int e = AV(avcodec_receive_frame)(c->cc, c->cur);
		if (e == AVERROR(EAGAIN) || e == AVERROR_EOF)
			return 0;
		if (e < 0)
			return corrupt(c, "corrupt video data", e);
		c->decoded++;
		if (*first) {
			*first = false;
			double t = frame_time(c, c->cur);
			if (t > c->t0 + c->tol && *retry) { /* the seek overshot: from the start */
				AV(av_frame_unref)(c->cur);
				*retry = false;
				return 2;
			}
		}
		int rc = take(c);
		AV(av_frame_unref)(c->cur);
		if (rc < 0)
			return rc;
		if (c->next == c->o->frames)
			return 1;
		if (stk__deadline_passed(&c->dl))
			return stk__errf(c->err, c->errlen, STK_ETOOBIG,
					 "video of %dx%d still decoding after %.3g s of CPU time "
					 "(max_decode_time), %u frames decoded: refused",
					 c->d.st->codecpar->width, c->d.st->codecpar->height,
					 (double)c->dl.max_ns / 1e9, c->decoded);
	}
}

static int seek(struct clip *c, double t)
{
	int64_t ts = c->d.start_pts + (int64_t)llround(t / c->d.tb);
	int e = AV(av_seek_frame)(c->d.fc, c->d.si, ts, AVSEEK_FLAG_BACKWARD);
	if (e < 0 && t > 0) /* no index: from the start, decoding forward */
		e = AV(av_seek_frame)(c->d.fc, c->d.si, c->d.start_pts, AVSEEK_FLAG_BACKWARD);
	AV(avcodec_flush_buffers)(c->cc);
	c->prev_ok = c->prev_out = false;
	AV(av_frame_unref)(c->prev);
	return e;
}

static int decode(struct clip *c)
{
	bool first = true, retry = c->t0 > 0, sought = c->t0 > 0 || c->d.probed;
	if (sought && seek(c, c->t0) < 0 && c->t0 > 0)
		retry = false; /* reading on from where it is: the first frames */
	for (;;) {
		int e = AV(av_read_frame)(c->d.fc, c->pkt);
		if (e == AVERROR_EOF)
			break;
		if (e < 0)
			return corrupt(c, "unreadable container", e);
		if (c->pkt->stream_index != c->d.si) {
			AV(av_packet_unref)(c->pkt);
			continue;
		}
		e = AV(avcodec_send_packet)(c->cc, c->pkt);
		AV(av_packet_unref)(c->pkt);
		if (e < 0 && e != AVERROR(EAGAIN))
			return corrupt(c, "corrupt video data", e);
		int rc = receive(c, &first, &retry);
		if (rc == 2) {
			seek(c, 0);
			first = true;
			continue;
		}
		if (rc)
			return rc < 0 ? rc : 0;
	}
	AV(avcodec_send_packet)(c->cc, NULL); /* the frames the decoder still holds */
	int rc = receive(c, &first, &retry);
	return rc < 0 ? rc : 0;
}

/* The targets the video ended before. */
static int finish(struct clip *c, uint32_t *padded)
{
	*padded = 0;
	if (c->next == c->o->frames)
		return 0;
	if (!c->prev_ok)
		return stk__errf(c->err, c->errlen, STK_ECORRUPT,
				 "no frame decoded (%u frames in the stream's header)",
				 (unsigned)c->d.frames);
	double expect = c->d.frames_exact ? (c->d.frames - 1) / c->fps : c->d.duration_s - 1 / c->fps;
	if (c->prev_t < expect - 2.0 / c->fps)
		return stk__errf(c->err, c->errlen, STK_ECORRUPT,
				 "truncated: the frames end at %.3f s of the %.3f s the header says",
				 c->prev_t, expect);
	if (c->o->short_clip == STK_VSHORT_REFUSE)
		return stk__errf(c->err, c->errlen, STK_ECLIP,
				 "the video ends at %.3f s, before frame %u of the clip (%.3f s): "
				 "short_clip refuse", c->prev_t, c->next, c->t0 + c->next * c->step);
	while (c->next < c->o->frames) {
		if (!c->prev_out) {
			int rc = convert(c, c->prev, c->next);
			if (rc < 0)
				return rc;
			if (!c->next)
				c->first_pts = c->prev->best_effort_timestamp;
			c->prev_out = true;
		} else {
			repeat(c, c->next);
			(*padded)++;
		}
		c->next++;
	}
	return 0;
}

/* Where the clip starts and its box: from the header and the seed only. */
static int plan(struct clip *c, uint64_t sample_seed, uint32_t clip)
{
	const struct stk_video_opts *o = c->o;
	c->fps = c->d.fps;
	c->tol = 0.25 / c->fps;
	if (stk__video_clip_start(o, c->d.fps, c->d.frames, sample_seed, clip, &c->t0, &c->step)) {
		int64_t n = c->d.frames > 0 ? c->d.frames : 1;
		return stk__errf(c->err, c->errlen, STK_ECLIP,
				 "the video has %lld frames (%.3f s): a clip of %u frames "
				 "spans %.3f s (short_clip refuse)",
				 (long long)n, c->d.duration_s, o->frames,
				 (o->frames - 1) * c->step + 1 / c->fps);
	}
	const AVCodecParameters *cp = c->d.st->codecpar;
	int W = c->d.rotation % 180 ? cp->height : cp->width;
	int H = c->d.rotation % 180 ? cp->width : cp->height;
	struct stk_image_opts io = {
		.size = sizeof(io),
		.width = o->out_size,
		.height = o->out_size,
		.crop = o->crop == STK_VCROP_CENTER ? STK_CROP_CENTER : STK_CROP_RANDOM_RESIZED,
		.scale_min = o->scale_min,
		.scale_max = o->scale_max,
		.ratio_min = o->ratio_min,
		.ratio_max = o->ratio_max,
		.crop_frac = o->crop_frac,
		.flags = o->flags & STK_VID_NO_FLIP ? STK_IMG_NO_FLIP : 0,
		.max_decode_ns = o->max_decode_ns,
	};
	stk__image_box(&io, sample_seed, W, H, &c->dbox);
	stk__deadline_start(&c->dl, &io);
	return 0;
}

static int open_decoder(struct clip *c)
{
	char ab[128];
	const AVCodecParameters *cp = c->d.st->codecpar;
	if ((uint64_t)cp->width * (uint64_t)cp->height > c->o->max_pixels)
		return stk__errf(c->err, c->errlen, STK_ETOOBIG,
				 "frames of %dx%d (%.0f pixels) are above max_pixels (%llu)", cp->width,
				 cp->height, (double)cp->width * cp->height,
				 (unsigned long long)c->o->max_pixels);
	const AVCodec *dec = AV(avcodec_find_decoder)(cp->codec_id);
	if (!dec)
		return stk__errf(c->err, c->errlen, STK_EFORMAT,
				 "no decoder for %s in the installed FFmpeg",
				 AV(avcodec_get_name)(cp->codec_id));
	c->cc = AV(avcodec_alloc_context3)(dec);
	c->pkt = AV(av_packet_alloc)();
	c->cur = AV(av_frame_alloc)();
	c->prev = AV(av_frame_alloc)();
	if (!c->cc || !c->pkt || !c->cur || !c->prev)
		return stk__errf(c->err, c->errlen, -ENOMEM, "out of memory (FFmpeg's decoder)");
	int e = AV(avcodec_parameters_to_context)(c->cc, cp);
	if (e >= 0) {
		c->cc->pkt_timebase = c->d.st->time_base;
		c->cc->thread_count = (int)(c->o->threads ? c->o->threads : 1);
		e = AV(avcodec_open2)(c->cc, dec, NULL);
	}
	if (e < 0)
		return stk__errf(c->err, c->errlen, STK_ECORRUPT, "cannot open the %s decoder (%s)",
				 dec->name, stk__av_err(e, ab, sizeof(ab)));
	return 0;
}

int stk__video_decode(const struct stk_video_opts *o, const uint8_t *src, size_t len,
		      uint64_t sample_seed, uint32_t clip, void *out, struct stk_clip_info *info,
		      char *err, size_t errlen)
{
	struct stk__vext one = {.off = 0, .len = len, .p = src};
	return stk__video_decode_ext(o, &one, 1, len, sample_seed, clip, out, info, err, errlen);
}

int stk__video_decode_ext(const struct stk_video_opts *o, const struct stk__vext *ext, uint32_t next,
			  size_t size, uint64_t sample_seed, uint32_t clip, void *out,
			  struct stk_clip_info *info, char *err, size_t errlen)
{
	struct clip c = {.o = o, .out = out, .S = o->out_size, .err = err, .errlen = errlen};
	uint32_t padded = 0;
	int rc = stk__vdemux_open_ext(&c.d, ext, next, size, false, NULL, err, errlen);
	if (rc < 0)
		return rc;
	rc = open_decoder(&c);
	if (!rc)
		rc = plan(&c, sample_seed, clip);
	if (!rc) { /* whether a frame goes through it is known only at its size */
		c.tmp = malloc((size_t)c.S * c.S * 3 + TMP_PAD);
		if (!c.tmp)
			rc = stk__errf(err, errlen, -ENOMEM, "out of memory (a %ux%u frame)", c.S, c.S);
	}
	if (!rc)
		rc = decode(&c);
	if (!rc)
		rc = finish(&c, &padded);
	if (!rc && info) {
		struct stk_clip_info v = {.size = sizeof(v), .clip = clip};
		const AVCodecParameters *cp = c.d.st->codecpar;
		v.start_pts = c.first_pts;
		v.start_s = c.first_pts == AV_NOPTS_VALUE ? c.t0 : (double)(c.first_pts - c.d.start_pts) * c.d.tb;
		v.frames_decoded = c.decoded;
		v.padded = padded;
		v.width = (uint32_t)(c.d.rotation % 180 ? cp->height : cp->width);
		v.height = (uint32_t)(c.d.rotation % 180 ? cp->width : cp->height);
		v.duration_s = c.d.duration_s;
		v.fps = c.d.fps;
		size_t n = info->size && info->size < sizeof(v) ? info->size : sizeof(v);
		memcpy(info, &v, n);
		info->size = (uint32_t)n;
	}
	free(c.tmp);
	if (c.sws)
		AV(sws_freeContext)(c.sws);
	if (c.cur)
		AV(av_frame_free)(&c.cur);
	if (c.prev)
		AV(av_frame_free)(&c.prev);
	if (c.pkt)
		AV(av_packet_free)(&c.pkt);
	if (c.cc)
		AV(avcodec_free_context)(&c.cc);
	stk__vdemux_close(&c.d);
	return rc;
}
