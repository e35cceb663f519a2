/*
 * DESIGN video/probe.c — a video's facts (stk_video_probe) and the decoders
 * the installed FFmpeg has (stk_video_codecs, for `stoker doctor`).  The
 * probe opens the container as a clip does (video/demux.c) with the stream
 * information read whole, so the pixel format is known.
 */
#include "video/demux.h"
#include "video/video.h"

#include <stdio.h>

int stk__video_probe(const uint8_t *src, size_t len, struct stk_video_info *info, char *err,
		     size_t errlen)
{
	struct stk__vdemux d;
	int rc = stk__vdemux_open(&d, src, len, true, err, errlen);
	if (rc < 0)
		return rc;
	struct stk_video_info v = {.size = sizeof(v)};
	const AVCodecParameters *cp = d.st->codecpar;
	v.coded_width = (uint32_t)cp->width;
	v.coded_height = (uint32_t)cp->height;
	bool turn = d.rotation == 90 || d.rotation == 270;
	v.width = turn ? v.coded_height : v.coded_width;
	v.height = turn ? v.coded_width : v.coded_height;
	v.rotation = d.rotation;
	v.duration_s = d.duration_s;
	v.fps = d.fps;
	v.frames = d.frames;
	v.frames_exact = d.frames_exact;
	const AVPixFmtDescriptor *pd = cp->format >= 0 ? AV(av_pix_fmt_desc_get)(cp->format) : NULL;
	v.bit_depth = pd ? (uint32_t)pd->comp[0].depth : 0;
	snprintf(v.codec, sizeof(v.codec), "%s", AV(avcodec_get_name)(cp->codec_id));
	snprintf(v.pix_fmt, sizeof(v.pix_fmt), "%s", pd ? pd->name : "unknown");
	snprintf(v.container, sizeof(v.container), "%s", d.fc->iformat->name);
	stk__vdemux_close(&d);
	/* the caller's struct may be older (smaller) than ours */
	size_t n = info->size && info->size < sizeof(v) ? info->size : sizeof(v);
	memcpy(info, &v, n);
	info->size = (uint32_t)n;
	return 0;
}

int stk_video_codecs(char *out, size_t len)
{
	static const char *const names[] = {"h264", "hevc", "vp9", "av1", "mpeg4"};
	static const enum AVCodecID ids[] = {AV_CODEC_ID_H264, AV_CODEC_ID_HEVC, AV_CODEC_ID_VP9,
					     AV_CODEC_ID_AV1, AV_CODEC_ID_MPEG4};
	if (!out || !len)
		return -EINVAL;
	out[0] = 0;
	int rc = stk__av_load(out, len);
	if (rc < 0)
		return rc;
	size_t o = 0;
	int n = 0;
	for (size_t i = 0; i < STK_ARRAY_SIZE(names); i++)
		if (AV(avcodec_find_decoder)(ids[i])) {
			o += (size_t)snprintf(out + o, o < len ? len - o : 0, "%s%s", n ? " " : "",
					      names[i]);
			n++;
		}
	return n;
}
