/*
 * DESIGN video/make.c — synthetic videos (stk_video_make) and the reader of
 * the frame numbers they carry (stk_video_frame_number).
 *
 * One owner of making videos for `stoker gen --video`, the tests and the
 * benches, through the same dlopen'ed FFmpeg as decoding (no ffmpeg CLI):
 * each frame is drawn in RGB as it is to be displayed (moving gradients, and
 * in the centre square, whose side is half the short side, a 4×4 grid of
 * black and white cells: four fixed corners, white top-left, and the frame's
 * index in the other twelve), turned into the coded orientation when a
 * rotation is asked for (which is then written as the stream's display
 * matrix), converted by libswscale to the encoder's pixel format and
 * encoded: libx264 for h264 (FFmpeg's own mpeg4 where libx264 is missing),
 * libvpx-vp9, libx265, or any encoder by name; the container from the
 * extension.  Bit-exact (the muxer's and encoder's BITEXACT flags: no
 * random Matroska SegmentUID, no date or version strings), so the same
 * options and seed give the same bytes, except libx264's (its output varies
 * with memory it reads: tests/test_video.c test_make_reproducible).  The cells survive compression, any scale and any centre crop,
 * so a test reads back which frame it got; a rotation not applied, or a
 * mirrored frame, reads as -1 (the corners).
 */
#include "video/av.h"
#include "video/video.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

enum { GRID = 4, NBITS = 12 };
/* cell k (row-major) holding bit b of the frame index, or -1 (a corner) */
static int cell_bit(int k)
{
	static const int bit[GRID * GRID] = {-1, 0, 1, -1, 2, 3, 4, 5, 6, 7, 8, 9, -1, 10, 11, -1};
	return bit[k];
}

/* The displayed picture of frame i, Wd × Hd RGB (gradients moving with i,
 * the marks in the centre square). */
static void draw(uint8_t *rgb, int Wd, int Hd, int64_t i, uint64_t seed)
{
	int m = (Wd < Hd ? Wd : Hd) / 2, mx = (Wd - m) / 2, my = (Hd - m) / 2;
	unsigned s = (unsigned)(seed * 37 % 251);
	for (int y = 0; y < Hd; y++) {
		uint8_t *row = rgb + (size_t)y * Wd * 3;
		uint8_t g = (uint8_t)(y * 255 / (Hd > 1 ? Hd - 1 : 1) + 2 * i);
		for (int x = 0; x < Wd; x++) {
			row[3 * x] = (uint8_t)(x * 255 / (Wd > 1 ? Wd - 1 : 1) + 3 * i + s);
			row[3 * x + 1] = g;
			row[3 * x + 2] = (uint8_t)((x + y) / 2 + 5 * i + 7 * s);
		}
		if (y < my || y >= my + m)
			continue;
		int cy = (y - my) * GRID / m;
		for (int cx = 0; cx < GRID; cx++) {
			int k = cy * GRID + cx, b = cell_bit(k);
			bool white = b < 0 ? k == 0 : (i >> b) & 1;
			int x0 = mx + cx * m / GRID, x1 = mx + (cx + 1) * m / GRID;
			memset(row + 3 * x0, white ? 255 : 0, (size_t)(x1 - x0) * 3);
		}
	}
}

int64_t stk_video_frame_number(const uint8_t *rgb, uint32_t w, uint32_t h, size_t pitch)
{
	uint32_t m = (w < h ? w : h) / 2, mx = (w - m) / 2, my = (h - m) / 2, c = m / GRID;
	if (!rgb || c < 2)
		return -1;
	int64_t n = 0;
	for (int k = 0; k < GRID * GRID; k++) {
		uint32_t x0 = mx + (uint32_t)(k % GRID) * m / GRID + c / 4;
		uint32_t y0 = my + (uint32_t)(k / GRID) * m / GRID + c / 4;
		uint64_t sum = 0, cnt = 0;
		for (uint32_t y = y0; y < y0 + c / 2; y++)
			for (uint32_t x = x0; x < x0 + c / 2; x++, cnt++) {
				const uint8_t *p = rgb + y * pitch + x * 3;
				sum += (uint64_t)p[0] + p[1] + p[2];
			}
		double v = (double)sum / (3.0 * (double)(cnt ? cnt : 1));
		int b = cell_bit(k);
		if (b < 0) {
			if (k == 0 ? v < 160 : v > 96)
				return -1;
		} else if (v > 160) {
			n |= (int64_t)1 << b;
		} else if (v > 96) {
			return -1; /* neither black nor white: not a mark */
		}
	}
	return n;
}

struct mk {
	AVFormatContext *oc;
	AVCodecContext *cc;
	AVStream *st;
	AVPacket *pkt;
	AVFrame *frame;
	struct SwsContext *sws;
	uint8_t *rgb, *disp;
};

static int drain(struct mk *m, char *err, size_t errlen)
{
	char ab[128];
	for (;;) {
		int e = AV(avcodec_receive_packet)(m->cc, m->pkt);
		if (e == AVERROR(EAGAIN) || e == AVERROR_EOF)
			return 0;
		if (e < 0)
			return stk__errf(err, errlen, STK_EFORMAT, "encoder: %s",
					 stk__av_err(e, ab, sizeof(ab)));
		if (m->cc->codec_type == AVMEDIA_TYPE_VIDEO && m->pkt->duration <= 0)
			m->pkt->duration = 1; /* one frame (else a lone frame's edit list is empty) */
		AV(av_packet_rescale_ts)(m->pkt, m->cc->time_base, m->st->time_base);
		m->pkt->stream_index = m->st->index;
		e = AV(av_interleaved_write_frame)(m->oc, m->pkt); /* takes the packet's data */
		if (e < 0)
			return stk__errf(err, errlen, -EIO, "writing a packet: %s",
					 stk__av_err(e, ab, sizeof(ab)));
	}
}

static int encode(struct mk *m, AVFrame *f, char *err, size_t errlen)
{
	char ab[128];
	int e = AV(avcodec_send_frame)(m->cc, f);
	if (e < 0)
		return stk__errf(err, errlen, STK_EFORMAT, "encoder: %s", stk__av_err(e, ab, sizeof(ab)));
	return drain(m, err, errlen);
}

static const AVCodec *pick_encoder(const char *codec, const char *path)
{
	const char *ext = strrchr(path, '.');
	if (!codec)
		codec = ext && !strcasecmp(ext, ".webm") ? "vp9" : "h264";
	const AVCodec *c = NULL;
	if (!strcmp(codec, "h264")) {
		c = AV(avcodec_find_encoder_by_name)("libx264");
		if (!c)
			c = AV(avcodec_find_encoder_by_name)("mpeg4");
	} else if (!strcmp(codec, "vp9")) {
		c = AV(avcodec_find_encoder_by_name)("libvpx-vp9");
	} else if (!strcmp(codec, "hevc")) {
		c = AV(avcodec_find_encoder_by_name)("libx265");
	} else {
		c = AV(avcodec_find_encoder_by_name)(codec);
	}
	return c;
}

static int video_stream(struct mk *m, const char *path, const struct stk_video_make_opts *o,
			char *err, size_t errlen)
{
	char ab[128];
	const AVCodec *enc = pick_encoder(o->codec, path);
	if (!enc)
		return stk__errf(err, errlen, STK_EFORMAT, "%s: no %s encoder in the installed FFmpeg",
				 path, o->codec ? o->codec : "h264");
	enum AVPixelFormat pf = AV(av_get_pix_fmt)(o->pix_fmt ? o->pix_fmt : "yuv420p");
	if (pf == AV_PIX_FMT_NONE)
		return stk__errf(err, errlen, -EINVAL, "%s: no pixel format %s", path, o->pix_fmt);
	m->cc = AV(avcodec_alloc_context3)(enc);
	if (!m->cc)
		return stk__errf(err, errlen, -ENOMEM, "out of memory (an encoder)");
	AVCodecContext *cc = m->cc;
	cc->width = (int)o->width;
	cc->height = (int)o->height;
	cc->pix_fmt = pf;
	cc->time_base = (AVRational){1000, (int)llround(o->fps * 1000)};
	cc->framerate = (AVRational){cc->time_base.den, cc->time_base.num};
	cc->gop_size = (int)o->gop;
	if (!strcmp(enc->name, "mpeg4")) {
		cc->flags |= AV_CODEC_FLAG_QSCALE;
		cc->global_quality = FF_QP2LAMBDA * 3;
	} else if (!strcmp(enc->name, "libx264") || !strcmp(enc->name, "libx265")) {
		AV(av_opt_set)(cc->priv_data, "preset", "veryfast", 0);
		AV(av_opt_set)(cc->priv_data, !strcmp(enc->name, "libx265") ? "x265-params" : "x264-params",
			       !strcmp(enc->name, "libx265") ? "log-level=none" : "log-level=-1", 0);
	} else if (!strcmp(enc->name, "libvpx-vp9")) {
		AV(av_opt_set)(cc->priv_data, "deadline", "realtime", 0);
		AV(av_opt_set)(cc->priv_data, "cpu-used", "8", 0);
		cc->bit_rate = (int64_t)o->width * o->height * 4;
	}
	if (m->oc->oformat->flags & AVFMT_GLOBALHEADER)
		cc->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
	cc->flags |= AV_CODEC_FLAG_BITEXACT; /* no version string in the stream */
	int e = AV(avcodec_open2)(cc, enc, NULL);
	if (e < 0)
		return stk__errf(err, errlen, STK_EFORMAT, "%s: the %s encoder refuses %ux%u %s (%s)",
				 path, enc->name, o->width, o->height,
				 AV(av_get_pix_fmt_name)(pf), stk__av_err(e, ab, sizeof(ab)));
	m->st = AV(avformat_new_stream)(m->oc, NULL);
	if (!m->st || AV(avcodec_parameters_from_context)(m->st->codecpar, cc) < 0)
		return stk__errf(err, errlen, -ENOMEM, "out of memory (a stream)");
	m->st->time_base = cc->time_base;
	if (o->rotation) {
		int32_t *mat = (int32_t *)AV(av_stream_new_side_data)(m->st, AV_PKT_DATA_DISPLAYMATRIX,
								      9 * sizeof(int32_t));
		if (!mat)
			return stk__errf(err, errlen, -ENOMEM, "out of memory (a display matrix)");
		/* FFmpeg 5.1's setter turns clockwise, its getter reads counterclockwise:
		 * this gives the "rotation -90" of a phone's portrait video for 90 */
		AV(av_display_rotation_set)(mat, (double)o->rotation);
	}
	return 0;
}

static int audio_stream(struct mk *m, const char *path, char *err, size_t errlen)
{
	char ab[128];
	const AVCodec *enc = AV(avcodec_find_encoder_by_name)("aac");
	if (!enc)
		return stk__errf(err, errlen, STK_EFORMAT, "%s: no aac encoder", path);
	m->cc = AV(avcodec_alloc_context3)(enc);
	if (!m->cc)
		return stk__errf(err, errlen, -ENOMEM, "out of memory (an encoder)");
	m->cc->sample_fmt = AV_SAMPLE_FMT_FLTP;
	m->cc->sample_rate = 44100;
	m->cc->bit_rate = 64000;
	m->cc->time_base = (AVRational){1, 44100};
	AV(av_channel_layout_default)(&m->cc->ch_layout, 1);
	if (m->oc->oformat->flags & AVFMT_GLOBALHEADER)
		m->cc->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
	m->cc->flags |= AV_CODEC_FLAG_BITEXACT;
	int e = AV(avcodec_open2)(m->cc, enc, NULL);
	if (e < 0)
		return stk__errf(err, errlen, STK_EFORMAT, "%s: the aac encoder: %s", path,
				 stk__av_err(e, ab, sizeof(ab)));
	m->st = AV(avformat_new_stream)(m->oc, NULL);
	if (!m->st || AV(avcodec_parameters_from_context)(m->st->codecpar, m->cc) < 0)
		return stk__errf(err, errlen, -ENOMEM, "out of memory (a stream)");
	m->st->time_base = m->cc->time_base;
	return 0;
}

static int audio_frames(struct mk *m, char *err, size_t errlen)
{
	int n = m->cc->frame_size > 0 ? m->cc->frame_size : 1024;
	for (int64_t t = 0; t < 44100; t += n) {
		AVFrame *f = m->frame;
		AV(av_frame_unref)(f);
		f->nb_samples = n;
		f->format = m->cc->sample_fmt;
		f->sample_rate = 44100;
		AV(av_channel_layout_default)(&f->ch_layout, 1);
		if (AV(av_frame_get_buffer)(f, 0) < 0)
			return stk__errf(err, errlen, -ENOMEM, "out of memory (an audio frame)");
		float *s = (float *)f->data[0];
		for (int k = 0; k < n; k++)
			s[k] = 0.25f * (float)sin(2 * M_PI * 440 * (double)(t + k) / 44100);
		f->pts = t;
		int rc = encode(m, f, err, errlen);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* Frame i: drawn as displayed, turned into the coded orientation. */
static int video_frame(struct mk *m, const struct stk_video_make_opts *o, int64_t i, char *err,
		       size_t errlen)
{
	int W = (int)o->width, H = (int)o->height, r = o->rotation;
	int Wd = r % 180 ? H : W, Hd = r % 180 ? W : H;
	draw(r ? m->disp : m->rgb, Wd, Hd, i, o->seed);
	for (int yc = 0; r && yc < H; yc++)
		for (int xc = 0; xc < W; xc++) {
			int xd = xc, yd = yc;
			if (r == 90)
				xd = H - 1 - yc, yd = xc;
			else if (r == 180)
				xd = W - 1 - xc, yd = H - 1 - yc;
			else if (r == 270)
				xd = yc, yd = W - 1 - xc;
			memcpy(m->rgb + ((size_t)yc * W + xc) * 3, m->disp + ((size_t)yd * Wd + xd) * 3, 3);
		}
	AVFrame *f = m->frame;
	AV(av_frame_unref)(f);
	f->format = m->cc->pix_fmt;
	f->width = W;
	f->height = H;
	if (AV(av_frame_get_buffer)(f, 0) < 0)
		return stk__errf(err, errlen, -ENOMEM, "out of memory (a frame)");
	m->sws = AV(sws_getCachedContext)(m->sws, W, H, AV_PIX_FMT_RGB24, W, H, m->cc->pix_fmt,
					  SWS_BILINEAR, NULL, NULL, NULL);
	if (!m->sws)
		return stk__errf(err, errlen, STK_EFORMAT, "libswscale cannot write %s",
				 AV(av_get_pix_fmt_name)(m->cc->pix_fmt));
	const uint8_t *src[4] = {m->rgb};  /* sws_scale reads four of each */
	int sls[4] = {W * 3};
	AV(sws_scale)(m->sws, src, sls, 0, H, f->data, f->linesize);
	f->pts = i;
	return encode(m, f, err, errlen);
}

int stk_video_make(const char *path, const struct stk_video_make_opts *opts, char *err,
		   size_t errlen)
{
	char ab[128], scratch[8];
	if (!err || !errlen) {
		err = scratch;
		errlen = sizeof(scratch);
	}
	err[0] = 0;
	struct stk_video_make_opts o = {0};
	if (opts)
		memcpy(&o, opts, opts->size && opts->size < sizeof(o) ? opts->size : sizeof(o));
	o.width = o.width ? o.width : 320;
	o.height = o.height ? o.height : 240;
	o.frames = o.frames ? o.frames : 50;
	o.fps = o.fps > 0 ? o.fps : 25;
	o.gop = o.gop ? o.gop : 12;
	if (!path || o.width > 16384 || o.height > 16384 || o.width < 16 || o.height < 16 ||
	    o.fps > 1000 || o.frames >= (1u << NBITS) ||
	    (o.rotation != 0 && o.rotation != 90 && o.rotation != 180 && o.rotation != 270))
		return stk__errf(err, errlen, -EINVAL,
				 "stk_video_make: width and height 16..16384, at most %u frames, fps "
				 "up to 1000, rotation 0, 90, 180 or 270", (1u << NBITS) - 1);
	int rc = stk__av_load(err, errlen);
	if (rc < 0)
		return rc;
	struct mk m = {0};
	int e = AV(avformat_alloc_output_context2)(&m.oc, NULL, NULL, path);
	if (e < 0 || !m.oc)
		return stk__errf(err, errlen, STK_EFORMAT, "%s: no container for this extension (%s)",
				 path, stk__av_err(e, ab, sizeof(ab)));
	/* the same bytes for the same seed: no random Matroska SegmentUID, no
	 * date, no muxer version string (tests compare files made twice) */
	m.oc->flags |= AVFMT_FLAG_BITEXACT;
	m.pkt = AV(av_packet_alloc)();
	m.frame = AV(av_frame_alloc)();
	if (!m.pkt || !m.frame) {
		rc = stk__errf(err, errlen, -ENOMEM, "out of memory");
		goto out;
	}
	rc = o.audio_only ? audio_stream(&m, path, err, errlen) : video_stream(&m, path, &o, err, errlen);
	if (rc < 0)
		goto out;
	if (!o.audio_only) {
		/* libswscale's SIMD reads up to 16 bytes past a source's last
		 * pixel: zeroed room there, or those bytes (another allocation's)
		 * reach the frame and the same seed gives other bytes */
		size_t fb = (size_t)o.width * o.height * 3 + 64;
		m.rgb = calloc(1, fb);
		m.disp = calloc(1, fb);
		if (!m.rgb || !m.disp) {
			rc = stk__errf(err, errlen, -ENOMEM, "out of memory (a %ux%u frame)", o.width,
				       o.height);
			goto out;
		}
	}
	e = AV(avio_open)(&m.oc->pb, path, AVIO_FLAG_WRITE);
	if (e < 0) {
		rc = stk__errf(err, errlen, -EIO, "%s: %s", path, stk__av_err(e, ab, sizeof(ab)));
		goto out;
	}
	AVDictionary *mux = NULL; /* MP4: the index first, so a cut file keeps it */
	if (strstr(m.oc->oformat->name, "mp4") || strstr(m.oc->oformat->name, "mov"))
		AV(av_dict_set)(&mux, "movflags", "+faststart", 0);
	e = AV(avformat_write_header)(m.oc, &mux);
	AV(av_dict_free)(&mux);
	if (e < 0) {
		rc = stk__errf(err, errlen, STK_EFORMAT, "%s: the container refuses the stream (%s)",
			       path, stk__av_err(e, ab, sizeof(ab)));
		goto out;
	}
	if (o.audio_only)
		rc = audio_frames(&m, err, errlen);
	for (int64_t i = 0; !o.audio_only && rc == 0 && i < o.frames; i++)
		rc = video_frame(&m, &o, i, err, errlen);
	if (rc == 0)
		rc = encode(&m, NULL, err, errlen); /* the frames the encoder holds */
	if (rc == 0 && (e = AV(av_write_trailer)(m.oc)) < 0)
		rc = stk__errf(err, errlen, -EIO, "%s: writing the index: %s", path,
			       stk__av_err(e, ab, sizeof(ab)));
out:
	if (m.oc && m.oc->pb)
		AV(avio_closep)(&m.oc->pb);
	if (m.oc)
		AV(avformat_free_context)(m.oc);
	if (m.cc)
		AV(avcodec_free_context)(&m.cc);
	if (m.sws)
		AV(sws_freeContext)(m.sws);
	if (m.frame)
		AV(av_frame_free)(&m.frame);
	if (m.pkt)
		AV(av_packet_free)(&m.pkt);
	free(m.rgb);
	free(m.disp);
	if (rc < 0 && path)
		remove(path); /* no half-written file left behind */
	return rc;
}
