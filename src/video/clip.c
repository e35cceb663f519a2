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
 * container without an index) is done again from the start.  Frames that no
 * target can take and no other frame references are not decoded at all
 * (video/skip.c: the rule, its proof and its checks; skip_frame set per
 * packet, a few packets read ahead; the decoder drained once nothing left
 * can be taken, not pushed by more frames; the output is byte-identical to
 * decoding every frame, stk__video_skip = 0).  The deadline
 * (max_decode_time) is checked between frames: the thread's CPU time, or
 * with codec threads (whose CPU time this thread cannot read) the clip's
 * wall-clock time.
 *
 * Conversion: video/convert.c, each output frame once (a frame that fills
 * two targets is copied).
 */
#include "video/clip.h"
#include "video/video.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* decode(): a check of video/skip.c's rule failed after a packet was sent
 * to be dropped: the clip is decoded again, dropping nothing */
#define AGAIN 3

/* Bad data from the demuxer or the decoder: STK_ECORRUPT, said as
 * truncation when the reads had run out of file. */
static int corrupt(const struct stk__clip *c, const char *what, int averr)
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

static double frame_time(const struct stk__clip *c, const AVFrame *f)
{
	int64_t pts = f->best_effort_timestamp != AV_NOPTS_VALUE ? f->best_effort_timestamp : f->pts;
	if (pts == AV_NOPTS_VALUE)
		return c->prev_ok ? c->prev_t + 1.0 / c->fps : 0;
	return stk__vskip_time(&c->sk, pts);
}

/* Output frame j as a copy of frame j - 1 (the same decoded frame again). */
static void repeat(struct stk__clip *c, uint32_t j)
{
	size_t fb = (size_t)c->S * c->S * 3;
	memcpy(c->out + j * fb, c->out + (j - 1) * fb, fb);
}

/* A decoded frame (in c->cur, at time t): fills the targets it is nearest
 * to; then it becomes prev. */
static int take(struct stk__clip *c)
{
	double t = frame_time(c, c->cur);
	bool cur_out = false; /* cur is in output frame next - 1 */
	while (c->next < c->o->frames) {
		double target = stk__vskip_target(&c->sk, c->next);
		if (!stk__vskip_reaches(&c->sk, t, c->next))
			break;
		bool use_prev = c->prev_ok && stk__vskip_nearer(target, c->prev_t, t);
		int rc = 0;
		if (use_prev && c->prev_out)
			repeat(c, c->next);
		else if (use_prev)
			rc = stk__clip_convert(c, c->prev, c->next);
		else if (cur_out)
			repeat(c, c->next);
		else
			rc = stk__clip_convert(c, c->cur, c->next);
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

/* While frames may be dropped: whether frame f keeps to what video/skip.c's
 * rule rests on (its packet's pts, in increasing pts). */
static bool in_order(struct stk__clip *c, const AVFrame *f)
{
	bool ok = f->pts != AV_NOPTS_VALUE && f->best_effort_timestamp == f->pts &&
		  (!c->out_any || f->pts > c->out_pts);
	c->out_pts = f->pts;
	c->out_any = true;
	return ok;
}

static uint64_t wall_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* max_decode_time: this thread's CPU time (image mode's deadline); when the
 * decoder runs threads of its own (codec_threads > 1), whose CPU time no
 * clock of this thread counts, the clip's wall-clock time, which bounds it
 * (threads × the limit at most). */
static bool late(const struct stk__clip *c)
{
	if (!c->cc->active_thread_type)
		return stk__deadline_passed(&c->dl);
	return c->dl.max_ns != UINT64_MAX && wall_ns() - c->wall0 > c->dl.max_ns;
}

/* Drains the decoder's frames; 1 when the clip is full, 2 to decode from the
 * video's start, AGAIN. */
static int receive(struct stk__clip *c, bool *first, bool *retry)
{
	for (;;) {
		int e = AV(avcodec_receive_frame)(c->cc, c->cur);
		if (e == AVERROR(EAGAIN) || e == AVERROR_EOF)
			return 0;
		if (e < 0)
			return corrupt(c, "corrupt video data", e);
		c->decoded++;
		if ((c->skip || c->dropped) && !in_order(c, c->cur)) {
			if (c->dropped) {
				AV(av_frame_unref)(c->cur);
				return AGAIN;
			}
			c->skip = false;
		}
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
		if (late(c))
			return stk__errf(c->err, c->errlen, STK_ETOOBIG,
					 "video of %dx%d still decoding after %.3g s of %s "
					 "(max_decode_time), %u frames decoded: refused",
					 c->d.st->codecpar->width, c->d.st->codecpar->height,
					 (double)c->dl.max_ns / 1e9,
					 c->cc->active_thread_type ? "time (wall clock: the codec's "
								     "own threads decode)" : "CPU time",
					 c->decoded);
	}
}

static int seek(struct stk__clip *c, double t)
{
	int64_t ts = c->d.start_pts + (int64_t)llround(t / c->d.tb);
	int e = AV(av_seek_frame)(c->d.fc, c->d.si, ts, AVSEEK_FLAG_BACKWARD);
	if (e < 0 && t > 0) /* no index: from the start, decoding forward */
		e = AV(av_seek_frame)(c->d.fc, c->d.si, c->d.start_pts, AVSEEK_FLAG_BACKWARD);
	AV(avcodec_flush_buffers)(c->cc);
	c->prev_ok = c->prev_out = false;
	AV(av_frame_unref)(c->prev);
	for (int i = 0; i < c->qn; i++)
		AV(av_packet_unref)(c->q[i]);
	c->qn = c->qend = 0;
	c->dropped = 0;
	c->out_any = false;
	stk__vskip_reset(&c->sk);
	return e;
}

/* The next packet of the stream into c->pkt, reading ahead while frames may
 * be dropped: 0, AVERROR_EOF, or av_read_frame's error (once the packets read
 * before it are sent). */
static int next_packet(struct stk__clip *c)
{
	int want = c->skip ? LOOK + 1 : 1;
	while (c->qn < want && !c->qend) {
		AVPacket *p = c->q[c->qn];
		int e = AV(av_read_frame)(c->d.fc, p);
		if (e < 0) {
			c->qend = e;
			break;
		}
		if (p->stream_index != c->d.si) {
			AV(av_packet_unref)(p);
			continue;
		}
		e = stk__vskip_note(&c->sk, p->pts);
		if (e < 0)
			return e;
		if (e)
			c->unplannable = true;
		c->qn++;
	}
	if (!c->qn)
		return c->qend ? c->qend : AVERROR_EOF;
	AVPacket *h = c->q[0];
	memmove(c->q, c->q + 1, LOOK * sizeof(*c->q));
	c->q[LOOK] = c->pkt;
	c->pkt = h;
	c->qn--;
	return 0;
}

/* Whether the decoder may be drained now: no packet read ahead, nor any
 * not yet read, can be one a target takes (video/skip.c), given the reorder
 * bound the decoder keeps to itself. */
static bool done(const struct stk__clip *c)
{
	int64_t pend[LOOK + 1];
	for (int i = 0; i < c->qn; i++)
		pend[i] = c->q[i]->pts;
	return stk__vskip_done(&c->sk, c->cc->has_b_frames, pend, c->qn);
}

/* One pass from the seek to the clip's last target.  Frames are dropped
 * only after a seek that worked: a second pass starts from the same one. */
static int decode_pass(struct stk__clip *c)
{
	bool first = true, retry = c->t0 > 0, sought = c->t0 > 0 || c->d.probed;
	if (!sought) {
		c->skip = false;
	} else if (seek(c, c->t0) < 0) {
		c->skip = false;
		if (c->t0 > 0)
			retry = false; /* reading on from where it is: the first frames */
	}
	c->drained = false;
	for (;;) {
		if (c->skip && c->out_any && !c->unplannable && done(c)) {
			c->drained = true; /* nothing left to send that a target takes */
			break;
		}
		int e = next_packet(c);
		if (e == AVERROR_EOF)
			break;
		if (e == -ENOMEM)
			return stk__errf(c->err, c->errlen, -ENOMEM, "out of memory (a clip's plan)");
		if (e < 0)
			return corrupt(c, "unreadable container", e);
		if (c->unplannable) {
			c->unplannable = false;
			if (c->dropped) {
				AV(av_packet_unref)(c->pkt);
				return AGAIN;
			}
			c->skip = false;
		}
		bool drop = c->skip && c->out_any && !(c->pkt->flags & AV_PKT_FLAG_KEY) &&
			    !stk__vskip_needed(&c->sk, c->pkt->pts);
		c->cc->skip_frame = drop ? AVDISCARD_NONREF : AVDISCARD_DEFAULT;
		c->dropped += drop;
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
			return rc < 0 || rc == AGAIN ? rc : 0;
	}
	AV(avcodec_send_packet)(c->cc, NULL); /* the frames the decoder still holds */
	int rc = receive(c, &first, &retry);
	if (!rc && c->drained && c->next < c->o->frames)
		return AGAIN; /* (never, for a stream within its reorder bound) */
	return rc < 0 || rc == AGAIN ? rc : 0;
}

/* Decodes the clip, dropping the frames no target takes (video/skip.c);
 * should a check of that rule fail after a frame was dropped, once more from
 * the seek, dropping none. */
static int decode(struct stk__clip *c)
{
	c->skip = stk__video_skip != 0;
	int rc = decode_pass(c);
	if (rc != AGAIN)
		return rc;
	c->skip = false;
	c->dropped = 0;
	c->next = 0;
	c->first_pts = AV_NOPTS_VALUE;
	rc = decode_pass(c);
	return rc == AGAIN ? 0 : rc;
}

/* The targets the video ended before. */
static int finish(struct stk__clip *c, uint32_t *padded)
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
			int rc = stk__clip_convert(c, c->prev, c->next);
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
static int plan(struct stk__clip *c, uint64_t sample_seed, uint32_t clip)
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
	c->wall0 = wall_ns();
	c->sk.t0 = c->t0;
	c->sk.step = c->step;
	c->sk.tol = c->tol;
	c->sk.tb = c->d.tb;
	c->sk.start_pts = c->d.start_pts;
	c->sk.frames = o->frames;
	return 0;
}

static int open_decoder(struct stk__clip *c)
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
	bool q = true;
	for (int i = 0; i <= LOOK; i++)
		q = (c->q[i] = AV(av_packet_alloc)()) && q;
	if (!c->cc || !c->pkt || !c->cur || !c->prev || !q)
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
	struct stk__clip c = {.o = o, .out = out, .S = o->out_size, .err = err, .errlen = errlen};
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
	for (int i = 0; i <= LOOK; i++)
		if (c.q[i])
			AV(av_packet_free)(&c.q[i]);
	stk__vskip_free(&c.sk);
	if (c.cc)
		AV(avcodec_free_context)(&c.cc);
	stk__vdemux_close(&c.d);
	return rc;
}
