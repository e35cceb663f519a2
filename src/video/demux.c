/*
 * DESIGN video/demux.c — demuxing from memory stoker already read.
 *
 * FFmpeg reads the file from memory the loader filled, through a custom
 * AVIOContext whose read and seek callbacks walk it (AVSEEK_SIZE answered
 * with the file's size), never from a path it opens itself.  The memory is
 * the whole file, or (issue 38: a clip's byte ranges from the video index,
 * video/vindex.c) a few ranges of it: the header's bytes and the span from
 * the keyframe before the clip to its last packet.  A read that starts
 * outside every range fails (mem.outside: the plan did not match the file,
 * said as such by the caller), and one that runs past a range's end stops
 * there, so no byte is ever other than the file's.  While the index is made,
 * the reads the opening makes are noted (struct stk__vrec): replayed over the
 * same bytes FFmpeg makes the same reads, so those ranges are the header a
 * clip needs.  The container's own header is trusted for what decoding needs
 * (MP4's moov, Matroska's tracks: size, frame rate, duration), so a clip
 * costs no avformat_find_stream_info (which decodes frames to guess), and an
 * MP4 no probe of every demuxer (the MOV demuxer named, the one the probe
 * would pick: stk__vdemux_known_format); only
 * where the header leaves the frame rate or size unknown, or a probe asks for
 * the pixel format, is it run.  A header that gives neither the frame count
 * nor the duration (a Matroska written to a pipe) has the stream's packets
 * counted from the whole file, which a clip's start is then drawn over (over
 * ranges it cannot be: the video index does not take such a file).  Streams
 * other than the video's are discarded (their packets never read).  Errors say what is wrong with the file in
 * words: empty, an MP4 with no moov atom, no video stream (audio only), no
 * decoder.
 */
#include "video/demux.h"

#include <math.h>
#include <stdio.h>

/* The range holding byte pos, or NULL. */
static const struct stk__vext *ext_at(const struct stk__vdemux *d, uint64_t pos)
{
	for (uint32_t i = 0; i < d->mem.n; i++)
		if (pos >= d->mem.ext[i].off && pos - d->mem.ext[i].off < d->mem.ext[i].len)
			return &d->mem.ext[i];
	return NULL;
}

static void note(struct stk__vrec *r, uint64_t off, uint64_t len)
{
	for (uint32_t i = 0; i < r->n; i++)
		if (off <= r->off[i] + r->len[i] && r->off[i] <= off + len) { /* touches: merged */
			uint64_t end = off + len > r->off[i] + r->len[i] ? off + len : r->off[i] + r->len[i];
			r->off[i] = off < r->off[i] ? off : r->off[i];
			r->len[i] = end - r->off[i];
			return;
		}
	if (r->n == STK__VREC_MAX) {
		r->over = true;
		return;
	}
	r->off[r->n] = off;
	r->len[r->n++] = len;
}

static int mem_read(void *opaque, uint8_t *buf, int n)
{
	struct stk__vdemux *d = opaque;
	if (d->mem.pos < 0 || (uint64_t)d->mem.pos >= d->mem.len) {
		d->mem.ran_out = true;
		return AVERROR_EOF;
	}
	const struct stk__vext *e = ext_at(d, (uint64_t)d->mem.pos);
	if (!e) {
		d->mem.outside = true;
		d->mem.outside_at = d->mem.pos;
		return AVERROR(EIO);
	}
	uint64_t in = (uint64_t)d->mem.pos - e->off;
	size_t left = (size_t)(e->len - in);
	size_t k = (size_t)n < left ? (size_t)n : left;
	/* short of n only at the file's end (a range's end: the next read asks) */
	d->mem.ran_out |= k < (size_t)n && e->off + e->len >= d->mem.len;
	memcpy(buf, e->p + in, k);
	if (d->mem.rec)
		note(d->mem.rec, (uint64_t)d->mem.pos, k);
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

/* The demuxer FFmpeg's probe would pick for a file starting with p, where
 * that is certain without running every demuxer's probe over its first
 * bytes (0.12 % of a clip's instructions): an ISO BMFF file (ftyp first,
 * not a JPEG 2000 or JPEG XL brand) scores the MOV demuxer's maximum, which
 * no other demuxer reaches for it.  NULL: probed as before.
 * (tests/test_video_conv.c test_format_known checks it is probing's pick.) */
const AVInputFormat *stk__vdemux_known_format(const uint8_t *p, size_t len)
{
	if (!p || len < 12 || memcmp(p + 4, "ftyp", 4) || be32(p) < 12 ||
	    !memcmp(p + 8, "jp2 ", 4) || !memcmp(p + 8, "jpx ", 4) || !memcmp(p + 8, "jxl ", 4))
		return NULL;
	return AV(av_find_input_format)("mov");
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

/* A header without the stream's length: its packets are counted (the whole
 * file is held; no decoding), the duration taken from the last packet's end,
 * and the demuxer put back at the start.  0 or <0. */
static int count_frames(struct stk__vdemux *d)
{
	AVPacket *p = AV(av_packet_alloc)();
	if (!p)
		return -ENOMEM;
	int64_t n = 0, first = AV_NOPTS_VALUE, end = AV_NOPTS_VALUE;
	while (AV(av_read_frame)(d->fc, p) >= 0) {
		if (p->stream_index == d->si) {
			n++;
			int64_t t = p->pts != AV_NOPTS_VALUE ? p->pts : p->dts;
			if (t != AV_NOPTS_VALUE) {
				first = first == AV_NOPTS_VALUE || t < first ? t : first;
				t += p->duration > 0 ? p->duration : 0;
				end = end == AV_NOPTS_VALUE || t > end ? t : end;
			}
		}
		AV(av_packet_unref)(p);
	}
	AV(av_packet_free)(&p);
	d->mem.ran_out = false;
	if (n < 1 || d->mem.outside)
		return STK_ECORRUPT;
	if (d->st->start_time == AV_NOPTS_VALUE && first != AV_NOPTS_VALUE)
		d->start_pts = first;
	d->frames = n;
	d->frames_exact = d->counted = true;
	if (end != AV_NOPTS_VALUE && end > d->start_pts)
		d->duration_s = (double)(end - d->start_pts) * d->tb;
	/* back to the start: the demuxer has seen every cluster now, so later
	 * seeks find their keyframes even without Cues */
	return AV(av_seek_frame)(d->fc, d->si, d->start_pts, AVSEEK_FLAG_BACKWARD) < 0 ?
		       STK_ECORRUPT : 0;
}

static bool header_enough(const struct stk__vdemux *d)
{
	const AVCodecParameters *cp = d->st->codecpar;
	return cp->width > 0 && cp->height > 0 && d->fps > 0 && d->tb > 0;
}

/* A read outside the ranges held, said as what it is. */
static int outside(struct stk__vdemux *d, char *err, size_t errlen)
{
	int64_t at = d->mem.outside_at;
	stk__vdemux_close(d);
	return stk__errf(err, errlen, STK_ECORRUPT,
			 "a read at byte %lld, outside the ranges the video index planned: the "
			 "index does not match the file", (long long)at);
}

int stk__vdemux_open(struct stk__vdemux *d, const uint8_t *src, size_t len, bool full, char *err,
		     size_t errlen)
{
	struct stk__vext one = {.off = 0, .len = len, .p = src};
	return stk__vdemux_open_ext(d, &one, 1, len, full, NULL, err, errlen);
}

int stk__vdemux_open_ext(struct stk__vdemux *d, const struct stk__vext *ext, uint32_t next,
			 size_t len, bool full, struct stk__vrec *rec, char *err, size_t errlen)
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
	if (next == 1 && ext[0].off == 0 && ext[0].len == len) { /* whole: held in d (it may move
								  the caller's copy) */
		d->mem.one = ext[0];
		d->mem.ext = &d->mem.one;
	} else {
		d->mem.ext = ext;
	}
	d->mem.n = next;
	d->mem.len = len;
	d->mem.rec = rec;
	const uint8_t *src = ext[0].off == 0 ? ext[0].p : NULL;
	size_t srclen = src ? (size_t)ext[0].len : 0;
	enum { BUF = 4096 }; /* small: the header's ranges are what the opening reads in it */
	uint8_t *buf = AV(av_malloc)(BUF);
	if (!buf)
		return stk__errf(err, errlen, -ENOMEM, "out of memory (FFmpeg's I/O buffer)");
	d->pb = AV(avio_alloc_context)(buf, BUF, 0, d, mem_read, NULL, mem_seek);
	if (!d->pb) {
		AV(av_free)(buf);
		return stk__errf(err, errlen, -ENOMEM, "out of memory (FFmpeg's I/O context)");
	}
	/* every seek a seek: a short one forward would otherwise read through
	 * the bytes between (a gap between a clip's ranges) */
	d->pb->direct = 1;
	d->fc = AV(avformat_alloc_context)();
	if (!d->fc) {
		stk__vdemux_close(d);
		return stk__errf(err, errlen, -ENOMEM, "out of memory (FFmpeg's format context)");
	}
	d->fc->pb = d->pb;
	d->fc->flags |= AVFMT_FLAG_CUSTOM_IO;
	int e = AV(avformat_open_input)(&d->fc, NULL, stk__vdemux_known_format(src, srclen),
					NULL); /* frees fc on failure */
	if (e < 0) {
		if (d->mem.outside)
			return outside(d, err, errlen);
		stk__vdemux_close(d);
		if (src && mp4_without_moov(src, srclen))
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
		if (e < 0 && d->mem.outside)
			return outside(d, err, errlen);
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
	for (unsigned i = 0; i < d->fc->nb_streams; i++) /* their packets are never read */
		if ((int)i != d->si)
			d->fc->streams[i]->discard = AVDISCARD_ALL;
	d->mem.rec = NULL;
	if (!d->frames_exact && !(d->duration_s > 0)) {
		/* no count and no duration in the header (a Matroska written to a
		 * pipe): a start drawn over "1 frame" would always be 0 */
		bool whole = next == 1 && ext[0].off == 0 && ext[0].len == len;
		rc = whole ? count_frames(d) : STK_EFORMAT;
		if (rc < 0) {
			stk__vdemux_close(d);
			return stk__errf(err, errlen, rc,
					 rc == -ENOMEM ? "out of memory (counting the video's frames)" :
					 "the header gives neither the video's frame count nor its "
					 "duration, and its frames could not be counted");
		}
	}
	return 0;
}
