/* video_vindex.c — the video index's size and cost (issue 38, items 2 and 5;
 * src/video/vindex.c), over the video files named one a line on stdin:
 * packets and keyframe runs; the record's bytes a packet as made now and as
 * the version-1 record (16 bytes a packet: pts and end as 8-byte words, 2
 * words a header range and a run, 10 words of facts) would hold the same
 * index; and the cost of making it, per video: reading the file whole,
 * opening it and reading every packet (what any index needs), and the whole
 * stk__vidx_make (the seeks for every start frame, Matroska's fresh checks,
 * the coding), CPU time on this thread.  docs/BENCHMARKS.md "The video
 * index: bytes a packet and the cost at create" has the figures:
 *   make && cc -O2 -Iinclude -Isrc -I/usr/include/x86_64-linux-gnu tests/video_vindex.c \
 *     build/libstoker.a $(pkg-config --libs liburing libjpeg libpng libwebp libwebpdemux \
 *     jansson libmicrohttpd libcurl) -ldl -lm -pthread -o build/video_vindex
 *   find DIR -type f | sort | flock -x /work/.measure.lock build/video_vindex */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "stoker/stoker.h"
#include "video/demux.h"
#include "video/vindex.h"

static double cpu_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(void)
{
	char path[4096], why[512];
	uint64_t videos = 0, none = 0, pk = 0, runs = 0, now = 0, old = 0;
	double t_read = 0, t_open = 0, t_make = 0;
	static uint8_t *buf;
	size_t cap = 0;
	AVPacket *pkt = NULL;
	if (stk__av_load(why, sizeof(why)) < 0) { /* (FFmpeg's loading not counted) */
		fprintf(stderr, "%s\n", why);
		return 1;
	}
	while (fgets(path, sizeof(path), stdin)) {
		path[strcspn(path, "\n")] = 0;
		double t0 = cpu_s();
		FILE *f = fopen(path, "rb");
		if (!f)
			continue;
		fseek(f, 0, SEEK_END);
		size_t n = (size_t)ftell(f);
		fseek(f, 0, SEEK_SET);
		if (n > cap) {
			buf = realloc(buf, n);
			cap = n;
		}
		if (!buf || fread(buf, 1, n, f) != n) {
			fclose(f);
			continue;
		}
		fclose(f);
		double t1 = cpu_s();
		struct stk__vdemux d;
		if (stk__vdemux_open(&d, buf, n, false, why, sizeof(why)) == 0) {
			if (!pkt)
				pkt = AV(av_packet_alloc)();
			while (AV(av_read_frame)(d.fc, pkt) >= 0)
				AV(av_packet_unref)(pkt);
			stk__vdemux_close(&d);
		}
		double t2 = cpu_s();
		uint64_t *rec;
		size_t words;
		int rc = stk__vidx_make(buf, n, &rec, &words, why, sizeof(why));
		double t3 = cpu_s();
		t_read += t1 - t0;
		t_open += t2 - t1;
		t_make += t3 - t2;
		videos++;
		if (rc) {
			none++;
			fprintf(stderr, "%s: no index: %s\n", path, why);
			continue;
		}
		struct stk__vidx v;
		if (stk__vidx_view(rec, words, n, &v, why, sizeof(why))) {
			fprintf(stderr, "%s: refused: %s\n", path, why);
			return 1;
		}
		pk += v.npk;
		runs += v.nkey;
		now += words * 8;
		old += 8 * (10 + 2 * (uint64_t)v.nhdr + 2 * (uint64_t)v.npk + 2 * (uint64_t)v.nkey);
		free(rec);
	}
	if (!videos || !pk)
		return 1;
	printf("videos %llu (no index: %llu), packets %llu (%.1f a video), keyframe runs %llu\n",
	       (unsigned long long)videos, (unsigned long long)none, (unsigned long long)pk,
	       (double)pk / (double)(videos - none), (unsigned long long)runs);
	printf("record bytes: now %llu (%.2f a packet, %.0f a video), version 1 %llu (%.2f a "
	       "packet, %.0f a video): %.3fx\n", (unsigned long long)now, (double)now / (double)pk,
	       (double)now / (double)(videos - none), (unsigned long long)old,
	       (double)old / (double)pk, (double)old / (double)(videos - none),
	       (double)now / (double)old);
	printf("CPU ms a video: read whole %.3f, open + every packet %.3f, stk__vidx_make %.3f "
	       "(of which beyond open + packets %.3f)\n", 1e3 * t_read / (double)videos,
	       1e3 * t_open / (double)videos, 1e3 * t_make / (double)videos,
	       1e3 * (t_make - t_open) / (double)videos);
	if (pkt)
		AV(av_packet_free)(&pkt);
	free(buf);
	return 0;
}
