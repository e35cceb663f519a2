/* make_video_corpus.c — writes the seeds of tests/fuzz/video_corpus with
 * stk_video_make: small videos of each codec and container, rotated,
 * 10-bit, 4:4:4, audio only, one frame, and cut copies.
 *   cc -Iinclude tests/fuzz/make_video_corpus.c build/libstoker.so.0 \
 *     -Wl,-rpath,$PWD/build -o build/make_video_corpus
 *   build/make_video_corpus tests/fuzz/video_corpus */
#include <stdio.h>
#include <stdlib.h>

#include "stoker/stoker.h"

static void make(const char *dir, const char *name, struct stk_video_make_opts o)
{
	char p[4096], err[512];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	o.size = sizeof(o);
	if (stk_video_make(p, &o, err, sizeof(err)))
		fprintf(stderr, "%s: %s (left out)\n", p, err);
}

/* a copy of the first `keep` parts in 8 of a seed */
static void cut(const char *dir, const char *from, const char *to, int keep)
{
	char p[4096];
	snprintf(p, sizeof(p), "%s/%s", dir, from);
	FILE *f = fopen(p, "rb");
	if (!f)
		return;
	static unsigned char buf[1 << 20];
	size_t n = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	snprintf(p, sizeof(p), "%s/%s", dir, to);
	f = fopen(p, "wb");
	if (!f)
		return;
	fwrite(buf, 1, n * (size_t)keep / 8, f);
	fclose(f);
}

int main(int argc, char **argv)
{
	const char *d = argc > 1 ? argv[1] : "tests/fuzz/video_corpus";
	make(d, "h264.mp4", (struct stk_video_make_opts){.width = 32, .height = 32, .frames = 8, .gop = 4});
	make(d, "vp9.webm", (struct stk_video_make_opts){.width = 32, .height = 32, .frames = 6, .gop = 3});
	make(d, "mpeg4.mkv", (struct stk_video_make_opts){.width = 32, .height = 32, .frames = 6,
							.codec = "mpeg4"});
	make(d, "hevc.mp4", (struct stk_video_make_opts){.width = 32, .height = 32, .frames = 4,
						       .codec = "hevc"});
	make(d, "rot90.mp4", (struct stk_video_make_opts){.width = 48, .height = 32, .frames = 4,
							.rotation = 90});
	make(d, "yuv444.mp4", (struct stk_video_make_opts){.width = 32, .height = 32, .frames = 4,
							 .pix_fmt = "yuv444p"});
	make(d, "10bit.mp4", (struct stk_video_make_opts){.width = 32, .height = 32, .frames = 4,
							.pix_fmt = "yuv420p10le"});
	make(d, "one.mp4", (struct stk_video_make_opts){.width = 32, .height = 32, .frames = 1});
	make(d, "audio.mkv", (struct stk_video_make_opts){.audio_only = 1});
	cut(d, "h264.mp4", "h264_cut.mp4", 5);
	cut(d, "vp9.webm", "vp9_cut.webm", 4);
	cut(d, "mpeg4.mkv", "mpeg4_cut.mkv", 6);
	return 0;
}
