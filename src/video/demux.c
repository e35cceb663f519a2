/*
 * DESIGN video/demux.c — demuxing from memory stoker already read.
 *
 * The loader reads each video whole into its slot; FFmpeg reads it from
 * there through a custom AVIOContext whose read and seek callbacks walk the
 * buffer (AVSEEK_SIZE answered), never from a path it opens itself.  The
 * container's own header is trusted for what decoding needs (MP4's moov,
 * Matroska's tracks: size, frame rate, duration), so a clip costs no
 * avformat_find_stream_info (which decodes frames to guess); only where the
 * header leaves the frame rate or size unknown, or a probe asks for the pixel
 * format, is it run.  Errors say what is wrong with the file in words: empty,
 * an MP4 with no moov atom, no video stream (audio only), no decoder.
 *
 * A later step (issue 38): ranged reads of only a clip's bytes, from a
 * per-video keyframe index kept in the index cache; today the whole file.
 */
#include "video/demux.h"

#include <math.h>
#include <stdio.h>

static int mem_read(void *opaque, uint8_t *buf, int n)
{
	struct stk__vdemux *d = opaque;
	if (d->mem.pos < 0 || (uint64_t)d->mem.pos >= d->mem.len) {
		d->mem.ran_out = true;
		return AVERROR_EOF;
	}
	size_t left = d->mem.len - (size_t)d->mem.pos;
	size_t k = (size_t)n < left ? (size_t)n : left;
	d->mem.ran_out |= k < (size_t)n;
	memcpy(buf, d->mem.p + d->mem.pos, k);
	d->mem.pos += (int64_t)k;
	return (int)k;
}

static int64_t mem_seek(void *opaque, int64_t off, int whence)
{
	struct stk__vdemux *d = opaque;
	if (whence & AVSEEK_SIZE)
		return (int64_t)d->mem.len;
	whence &= ~AVSEEK_FORCE;
	int64_t base = whence == SEEK_SET ? 0 : whence == SEEK_CUR ? d->mem.pos :
		       whence == SEEK_END ? (int64_t)d->mem.len : -1;
	if (base < 0 || off < -base || off > INT64_MAX - base)
		return AVERROR(EINVAL);
	d->mem.pos = base + off; /* past the end: reads then say EOF, as a file's */
	return d->mem.pos;
}

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* An ISO BMFF file (ftyp first) whose top-level boxes hold no moov: an
 * unfinished recording, or a file cut before its index. */
static bool mp4_without_moov(const uint8_t *p, size_t len)
{
	if (len < 8 || memcmp(p + 4, "ftyp", 4))
		return false;
	for (size_t o = 0; o + 8 <= len;) {
		uint64_t sz = be32(p + o);
		if (!memcmp(p + o + 4, "moov", 4))
			return false;
		if (sz == 1 && o + 16 <= len)
			sz = (uint64_t)be32(p + o + 8) << 32 | be32(p + o + 12);
		else if (sz == 0)
			break; /* to the end of the file */
		if (sz < 8 || sz > len - o)
			break;
		o += sz;
	}
	return true;
}

void stk__vdemux_close(struct stk__vdemux *d)
{
	if (d->fc)
		AV(avformat_close_input)(&d->fc);
	if (d->pb) {
		AV(av_freep)(&d->pb->buffer);
		AV(avio_context_free)(&d->pb);
	}
}

static int stream_facts(struct stk__vdemux *d, char *err, size_t errlen)
{
	AVStream *st = d->st;
	/* the average rate of an MP4 with B-frames is frames over a duration a
	 * frame short (25.42 for 25); the real base rate is r_frame_rate, when
	 * the two agree to 10 % (a variable-rate stream: the average) */
	AVRational a = st->avg_frame_rate, r = st->r_frame_rate;
	double avg = a.num > 0 && a.den > 0 ? (double)a.num / a.den : 0;
	double base = r.num > 0 && r.den > 0 ? (double)r.num / r.den : 0;
	d->fps = base > 0 && (!(avg > 0) || fabs(base - avg) < 0.1 * avg) ? base : avg;
	d->tb = st->time_base.num > 0 && st->time_base.den > 0 ?
			(double)st->time_base.num / st->time_base.den : 0;
	d->start_pts = st->start_time != AV_NOPTS_VALUE ? st->start_time : 0;
	if (st->duration != AV_NOPTS_VALUE && st->duration > 0 && d->tb > 0)
		d->duration_s = (double)st->duration * d->tb;
	else if (d->fc->duration != AV_NOPTS_VALUE && d->fc->duration > 0)
		d->duration_s = (double)d->fc->duration / AV_TIME_BASE;
	else
		d->duration_s = 0;
	if (!(d->fps > 0) && st->nb_frames > 1 && d->duration_s > 0)
		d->fps = (double)st->nb_frames / d->duration_s;
	else if (!(d->fps > 0) && st->nb_frames == 1)
		d->fps = 25; /* one frame has no rate: any will do */
	d->frames_exact = st->nb_frames > 0;
	d->frames = d->frames_exact ? st->nb_frames : (int64_t)(d->duration_s * d->fps + 0.5);
	const int32_t *m = (const int32_t *)AV(av_stream_get_side_data)(
		st, AV_PKT_DATA_DISPLAYMATRIX, NULL);
	d->rotation = 0;
	if (m) {
		/* the matrix rotates counterclockwise; display turns the frame clockwise
		 * by the opposite (ffmpeg's autorotate) */
		double deg = -AV(av_display_rotation_get)(m);
		if (deg == deg) { /* not NaN */
			int rot = (int)lround(deg / 90.0) * 90 % 360;
			d->rotation = rot < 0 ? rot + 360 : rot;
		}
	}
	(void)err;
	(void)errlen;
	return 0;
}

static bool header_enough(const struct stk__vdemux *d)
{
	const AVCodecParameters *cp = d->st->codecpar;
	return cp->width > 0 && cp->height > 0 && d->fps > 0 && d->tb > 0;
}

int stk__vdemux_open(struct stk__vdemux *d, const uint8_t *src, size_t len, bool full, char *err,
		     size_t errlen)
{
	char ab[128];
	memset(d, 0, sizeof(*d));
	int rc = stk__av_load(err, errlen);
	if (rc < 0)
		return rc;
	if (!len)
		return stk__errf(err, errlen, STK_ECORRUPT, "empty file (0 bytes): not a video");
	if (len > (size_t)INT64_MAX)
		return stk__errf(err, errlen, STK_ETOOBIG, "file too large");
	d->mem.p = src;
	d->mem.len = len;
	enum { BUF = 64 * 1024 };
	uint8_t *buf = AV(av_malloc)(BUF);
	if (!buf)
		return stk__errf(err, errlen, -ENOMEM, "out of memory (FFmpeg's I/O buffer)");
	d->pb = AV(avio_alloc_context)(buf, BUF, 0, d, mem_read, NULL, mem_seek);
	if (!d->pb) {
		AV(av_free)(buf);
		return stk__errf(err, errlen, -ENOMEM, "out of memory (FFmpeg's I/O context)");
	}
	d->fc = AV(avformat_alloc_context)();
	if (!d->fc) {
		stk__vdemux_close(d);
		return stk__errf(err, errlen, -ENOMEM, "out of memory (FFmpeg's format context)");
	}
	d->fc->pb = d->pb;
	d->fc->flags |= AVFMT_FLAG_CUSTOM_IO;
	int e = AV(avformat_open_input)(&d->fc, NULL, NULL, NULL); /* frees fc on failure */
	if (e < 0) {
		stk__vdemux_close(d);
		if (mp4_without_moov(src, len))
			return stk__errf(err, errlen, STK_ECORRUPT,
					 "an MP4 with no moov atom (an unfinished recording, or cut "
					 "before its index): unreadable");
		return stk__errf(err, errlen, STK_ECORRUPT, "not a readable video container (%s)",
				 stk__av_err(e, ab, sizeof(ab)));
	}
	int si = -1;
	for (unsigned i = 0; i < d->fc->nb_streams; i++)
		if (d->fc->streams[i]->codecpar->codec_type == AVMEDIA_TYPE_VIDEO &&
		    !(d->fc->streams[i]->disposition & AV_DISPOSITION_ATTACHED_PIC)) {
			si = (int)i;
			break;
		}
	if (si < 0 && d->fc->nb_streams) {
		unsigned n = d->fc->nb_streams, audio = 0;
		for (unsigned i = 0; i < n; i++)
			audio += d->fc->streams[i]->codecpar->codec_type == AVMEDIA_TYPE_AUDIO;
		stk__vdemux_close(d);
		return stk__errf(err, errlen, STK_EFORMAT, "no video stream (%u stream%s, %u audio%s)",
				 n, n == 1 ? "" : "s", audio, audio == n ? ": audio only" : "");
	}
	if (si >= 0) {
		d->si = si;
		d->st = d->fc->streams[si];
		stream_facts(d, err, errlen);
	}
	if (si < 0 || full || !header_enough(d)) {
		d->probed = true;
		e = AV(avformat_find_stream_info)(d->fc, NULL);
		if (e < 0) {
			stk__vdemux_close(d);
			return stk__errf(err, errlen, STK_ECORRUPT, "unreadable stream headers (%s)",
					 stk__av_err(e, ab, sizeof(ab)));
		}
		if (si < 0) {
			si = AV(av_find_best_stream)(d->fc, AVMEDIA_TYPE_VIDEO, -1, -1, NULL, 0);
			if (si < 0) {
				stk__vdemux_close(d);
				return stk__errf(err, errlen, STK_EFORMAT, "no video stream (no streams)");
			}
			d->si = si;
			d->st = d->fc->streams[si];
		}
		stream_facts(d, err, errlen);
	}
	const AVCodecParameters *cp = d->st->codecpar;
	if (cp->width <= 0 || cp->height <= 0) {
		stk__vdemux_close(d);
		return stk__errf(err, errlen, STK_ECORRUPT, "the video stream has no frame size");
	}
	if (!(d->fps > 0) || !(d->tb > 0)) {
		stk__vdemux_close(d);
		return stk__errf(err, errlen, STK_ECORRUPT, "the video stream has no frame rate");
	}
	return 0;
}
