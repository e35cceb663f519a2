/*
 * doctor/video.c — `stoker doctor`'s "video" check: whether FFmpeg's
 * libraries load (the library dlopens them at the first video call) and
 * which of the decoders video mode cares for (h264, hevc, vp9, av1, mpeg4)
 * the installed FFmpeg has (stk_video_codecs).  Missing: a warning, since
 * only video mode needs them, with the apt-get line.
 */
#include <stdio.h>
#include <string.h>

#include "doctor/doctor.h"

void doc_video_check(struct doctor *d)
{
	char codecs[512];
	int n = stk_video_codecs(codecs, sizeof(codecs));
	struct check *k = doc_add(d, "video", n > 0 ? ST_OK : ST_WARN);
	SET(k, why, "video mode (stoker.Video, bench --video, gen --video) decodes with FFmpeg's "
		    "libraries, loaded when first used; a codec missing here is refused per file");
	if (n > 0) {
		SET(k, value, "FFmpeg's decoders: %s", codecs);
		return;
	}
	SET(k, value, "unavailable: %s", n == 0 ? "FFmpeg has none of h264, hevc, vp9, av1" : codecs);
	const char *apt = strstr(codecs, "apt-get");
	SET(k, fix, "%s", apt ? apt : "apt-get install libavformat59 libavcodec59 libswscale6");
}
