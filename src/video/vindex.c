/*
 * DESIGN video/vindex.c — a video's byte index, and a clip's byte ranges.
 *
 * Issue 38: a clip reads only the bytes it needs.  The index of a video is
 * made once from the whole file in memory, by FFmpeg itself, so it says what
 * the demuxer will do rather than what a hand parser guesses: the container
 * is opened as a clip opens it (video/demux.c) while its reads are noted (the
 * header's ranges: MP4's ftyp and moov, where they lie); every packet of the
 * video stream is read in decode order (its pts, and the furthest byte read
 * so far); and for every start frame s the seek a clip does (av_seek_frame
 * to s/fps, AVSEEK_FLAG_BACKWARD) is done and the position of the first
 * packet it reads kept, as runs (one a keyframe).  A clip then needs the
 * header's ranges and the span from its keyframe's position to the end of
 * the packet the decoder needs last: the first frame at or past the clip's
 * last target time (clip.c takes the nearest frame), every frame shown before
 * it, and as many packets again as the stream reorders (B-frames), the
 * decoder's frame threads hold and two more.  Starts and targets come from
 * video/video.c's stk__video_clip_start, the clip decoder's own plan, so the
 * two agree; where they would not, the read outside the ranges fails (the
 * demuxer says so) and never decodes other bytes.  Only MP4/MOV (not
 * fragmented) is indexed: Matroska's seeks read from a cluster's start, which
 * its packets do not say; other files are read whole (the caller says so).
 *
 * The record is flat 8-byte words (the index cache stores it as is):
 * size, fps, tb, duration, frames, start_pts, nhdr, npk, nkey, reorder, then
 * nhdr (offset, length) pairs, npk pts, npk ends, nkey first frames, nkey
 * positions.  stk__vidx_view checks every word before a loader trusts it.
 */
#include "video/vindex.h"

#include "video/demux.h"
#include "video/video.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

enum { W_SIZE, W_FPS, W_TB, W_DUR, W_FRAMES, W_START, W_NHDR, W_NPK, W_NKEY, W_REORDER, W_HEAD };
#define NPK_MAX (1u << 22)

static uint64_t dbits(double x)
{
	uint64_t u;
	memcpy(&u, &x, 8);
	return u;
}

static double bitsd(uint64_t u)
{
	double x;
	memcpy(&x, &u, 8);
	return x;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

/* The first video packet's position from where the demuxer is: -1 if none. */
static int64_t first_pos(struct stk__vdemux *d, AVPacket *pkt, int64_t *pts)
{
	for (;;) {
		if (AV(av_read_frame)(d->fc, pkt) < 0)
			return -1;
		int64_t pos = pkt->stream_index == d->si ? pkt->pos : -2;
		*pts = pkt->pts;
		AV(av_packet_unref)(pkt);
		if (pos != -2)
			return pos;
	}
}

int stk__vidx_make(const uint8_t *src, size_t len, uint64_t **rec, size_t *words, char *why,
		   size_t whylen)
{
	struct stk__vdemux d;
	struct stk__vrec hr = {0};
	struct stk__vext one = {.off = 0, .len = len, .p = src};
	*rec = NULL;
	if (stk__vdemux_open_ext(&d, &one, 1, len, false, &hr, why, whylen) < 0)
		return 1; /* the clip says what is wrong with it */
	int rc = 1;
	int64_t *pts = NULL, *sorted = NULL;
	uint64_t *end = NULL, *kfirst = NULL, *kpos = NULL;
	AVPacket *pkt = AV(av_packet_alloc)();
	if (!pkt) {
		rc = -ENOMEM;
		goto out;
	}
	if (!strstr(d.fc->iformat->name, "mp4")) {
		snprintf(why, whylen, "a %s container: no byte index (read whole)", d.fc->iformat->name);
		goto out;
	}
	if (hr.over || !hr.n) {
		snprintf(why, whylen, "its header is read in more than %d pieces", STK__VREC_MAX);
		goto out;
	}
	uint32_t npk = 0, cap = 256;
	pts = malloc(cap * sizeof(*pts));
	end = malloc(cap * sizeof(*end));
	if (!pts || !end) {
		rc = -ENOMEM;
		goto out;
	}
	uint64_t far = 0;
	int64_t pos0 = -1;
	for (;;) {
		int e = AV(av_read_frame)(d.fc, pkt);
		if (e == AVERROR_EOF)
			break;
		if (e < 0) {
			snprintf(why, whylen, "its packets cannot all be read");
			goto out;
		}
		if (pkt->stream_index != d.si) {
			AV(av_packet_unref)(pkt);
			continue;
		}
		if (pkt->pts == AV_NOPTS_VALUE || pkt->pos < 0 || npk == NPK_MAX ||
		    (uint64_t)pkt->pos + (uint64_t)pkt->size > len) {
			AV(av_packet_unref)(pkt);
			snprintf(why, whylen, "a packet without a time or position, or past the end");
			goto out;
		}
		if (npk == cap) {
			cap *= 2;
			int64_t *p2 = realloc(pts, cap * sizeof(*pts));
			if (p2)
				pts = p2;
			uint64_t *e2 = p2 ? realloc(end, cap * sizeof(*end)) : NULL;
			if (!e2) {
				AV(av_packet_unref)(pkt);
				rc = -ENOMEM;
				goto out;
			}
			end = e2;
		}
		if (pos0 < 0)
			pos0 = pkt->pos;
		uint64_t pe = (uint64_t)pkt->pos + (uint64_t)pkt->size;
		far = pe > far ? pe : far;
		pts[npk] = pkt->pts;
		end[npk++] = far;
		AV(av_packet_unref)(pkt);
	}
	if (!npk) {
		snprintf(why, whylen, "no packets");
		goto out;
	}
	/* how far decode order runs ahead of display order (B-frames) */
	uint32_t reorder = 0;
	sorted = malloc(npk * sizeof(*sorted));
	if (!sorted) {
		rc = -ENOMEM;
		goto out;
	}
	memcpy(sorted, pts, npk * sizeof(*sorted));
	qsort(sorted, npk, sizeof(*sorted), cmp_i64);
	for (uint32_t i = 0; i < npk; i++) {
		int64_t *at = bsearch(&pts[i], sorted, npk, sizeof(*sorted), cmp_i64);
		uint32_t rank = (uint32_t)(at - sorted);
		if (i > rank && i - rank > reorder)
			reorder = i - rank;
	}
	if (reorder > 64) {
		snprintf(why, whylen, "it reorders %u frames", reorder);
		goto out;
	}
	/* each start frame's seek, as video/clip.c's */
	int64_t frames = d.frames > 0 ? d.frames : 1;
	if (frames > (int64_t)NPK_MAX) {
		snprintf(why, whylen, "too many frames");
		goto out;
	}
	kfirst = malloc((size_t)frames * sizeof(*kfirst));
	kpos = malloc((size_t)frames * sizeof(*kpos));
	if (!kfirst || !kpos) {
		rc = -ENOMEM;
		goto out;
	}
	uint32_t nkey = 1;
	kfirst[0] = 0;
	kpos[0] = (uint64_t)pos0;
	for (int64_t s = 1; s < frames; s++) {
		double t0 = (double)s / d.fps;
		int64_t ts = d.start_pts + (int64_t)llround(t0 / d.tb), p;
		int e = AV(av_seek_frame)(d.fc, d.si, ts, AVSEEK_FLAG_BACKWARD);
		int64_t pos = e < 0 ? -1 : first_pos(&d, pkt, &p);
		if (pos < 0 || (double)(p - d.start_pts) * d.tb > t0 + 0.25 / d.fps)
			pos = pos0; /* no index, or it overshot: the clip reads from the start */
		if ((uint64_t)pos != kpos[nkey - 1]) {
			kfirst[nkey] = (uint64_t)s;
			kpos[nkey++] = (uint64_t)pos;
		}
	}
	size_t n = W_HEAD + 2 * (size_t)hr.n + 2 * (size_t)npk + 2 * (size_t)nkey;
	uint64_t *r = malloc(n * 8);
	if (!r) {
		rc = -ENOMEM;
		goto out;
	}
	r[W_SIZE] = len;
	r[W_FPS] = dbits(d.fps);
	r[W_TB] = dbits(d.tb);
	r[W_DUR] = dbits(d.duration_s);
	r[W_FRAMES] = (uint64_t)d.frames;
	r[W_START] = (uint64_t)d.start_pts;
	r[W_NHDR] = hr.n;
	r[W_NPK] = npk;
	r[W_NKEY] = nkey;
	r[W_REORDER] = reorder;
	uint64_t *w = r + W_HEAD;
	/* the header's ranges in file order */
	for (uint32_t i = 0; i < hr.n; i++)
		for (uint32_t j = i + 1; j < hr.n; j++)
			if (hr.off[j] < hr.off[i]) {
				uint64_t o = hr.off[i], l = hr.len[i];
				hr.off[i] = hr.off[j], hr.len[i] = hr.len[j];
				hr.off[j] = o, hr.len[j] = l;
			}
	for (uint32_t i = 0; i < hr.n; i++) {
		*w++ = hr.off[i];
		*w++ = hr.len[i];
	}
	memcpy(w, pts, npk * 8);
	w += npk;
	memcpy(w, end, npk * 8);
	w += npk;
	memcpy(w, kfirst, nkey * 8);
	w += nkey;
	memcpy(w, kpos, nkey * 8);
	*rec = r;
	*words = n;
	rc = 0;
out:
	free(pts);
	free(end);
	free(sorted);
	free(kfirst);
	free(kpos);
	if (pkt)
		AV(av_packet_free)(&pkt);
	stk__vdemux_close(&d);
	return rc;
}

int stk__vidx_view(const uint64_t *r, size_t words, uint64_t size, struct stk__vidx *v,
		   char *why, size_t whylen)
{
#define BAD(...) return stk__errf(why, whylen, STK_ECORRUPT, __VA_ARGS__)
	if (words < W_HEAD)
		BAD("a video record of %zu words", words);
	if (r[W_SIZE] != size)
		BAD("made for a file of %llu bytes, not %llu", (unsigned long long)r[W_SIZE],
		    (unsigned long long)size);
	v->size = size;
	v->fps = bitsd(r[W_FPS]);
	v->tb = bitsd(r[W_TB]);
	v->duration_s = bitsd(r[W_DUR]);
	v->frames = (int64_t)r[W_FRAMES];
	v->start_pts = (int64_t)r[W_START];
	if (!(v->fps > 0 && v->fps < 1e6) || !(v->tb > 0 && v->tb < 1e6) ||
	    !(v->duration_s >= 0 && v->duration_s < 1e9) || v->frames < 0 || v->frames > NPK_MAX)
		BAD("a frame rate, time base, duration or frame count out of range");
	if (r[W_NHDR] < 1 || r[W_NHDR] > STK__VREC_MAX || r[W_NPK] < 1 || r[W_NPK] > NPK_MAX ||
	    r[W_NKEY] < 1 || r[W_NKEY] > NPK_MAX || r[W_REORDER] > 64)
		BAD("counts out of range");
	v->nhdr = (uint32_t)r[W_NHDR];
	v->npk = (uint32_t)r[W_NPK];
	v->nkey = (uint32_t)r[W_NKEY];
	v->reorder = (uint32_t)r[W_REORDER];
	if (words != W_HEAD + 2 * (size_t)v->nhdr + 2 * (size_t)v->npk + 2 * (size_t)v->nkey)
		BAD("a video record of %zu words for its counts", words);
	v->hdr = r + W_HEAD;
	v->pts = (const int64_t *)(v->hdr + 2 * v->nhdr);
	v->end = (const uint64_t *)(v->pts + v->npk);
	v->kfirst = v->end + v->npk;
	v->kpos = v->kfirst + v->nkey;
	for (uint32_t i = 0; i < v->nhdr; i++) {
		uint64_t o = v->hdr[2 * i], l = v->hdr[2 * i + 1];
		if (!l || o > size || l > size - o || (i && o < v->hdr[2 * i - 2] + v->hdr[2 * i - 1]))
			BAD("header range %u (%llu+%llu) outside the file or out of order", i,
			    (unsigned long long)o, (unsigned long long)l);
	}
	for (uint32_t i = 0; i < v->npk; i++)
		if (v->end[i] > size || (i && v->end[i] < v->end[i - 1]))
			BAD("packet %u's end (%llu) outside the file or out of order", i,
			    (unsigned long long)v->end[i]);
	for (uint32_t j = 0; j < v->nkey; j++)
		if (v->kpos[j] >= size || (j ? v->kfirst[j] <= v->kfirst[j - 1] : v->kfirst[0] != 0) ||
		    (int64_t)v->kfirst[j] >= (v->frames > 0 ? v->frames : 1))
			BAD("keyframe run %u (frame %llu at byte %llu) out of order or outside the file",
			    j, (unsigned long long)v->kfirst[j], (unsigned long long)v->kpos[j]);
	return 0;
#undef BAD
}

static void add(struct stk__vspan *s, uint64_t off, uint64_t len)
{
	uint32_t i = 0; /* insert in order, merging what touches */
	while (i < s->n && s->off[i] + s->len[i] < off)
		i++;
	if (i < s->n && s->off[i] <= off + len) {
		uint64_t e = off + len > s->off[i] + s->len[i] ? off + len : s->off[i] + s->len[i];
		s->off[i] = off < s->off[i] ? off : s->off[i];
		s->len[i] = e - s->off[i];
		while (i + 1 < s->n && s->off[i + 1] <= s->off[i] + s->len[i]) { /* swallows the next */
			uint64_t e2 = s->off[i + 1] + s->len[i + 1];
			if (e2 > s->off[i] + s->len[i])
				s->len[i] = e2 - s->off[i];
			memmove(&s->off[i + 1], &s->off[i + 2], (s->n - i - 2) * 8);
			memmove(&s->len[i + 1], &s->len[i + 2], (s->n - i - 2) * 8);
			s->n--;
		}
		return;
	}
	memmove(&s->off[i + 1], &s->off[i], (s->n - i) * 8);
	memmove(&s->len[i + 1], &s->len[i], (s->n - i) * 8);
	s->off[i] = off;
	s->len[i] = len;
	s->n++;
}

/* The ranges of a clip starting at t0 whose last target is t_last. */
static void span_of(const struct stk__vidx *v, const struct stk_video_opts *o, double t0,
		    double t_last, struct stk__vspan *out)
{
	out->n = 0;
	out->bytes = 0;
	for (uint32_t i = 0; i < v->nhdr; i++)
		add(out, v->hdr[2 * i], v->hdr[2 * i + 1]);
	int64_t s = llround(t0 * v->fps);
	uint32_t j = 0;
	while (j + 1 < v->nkey && (int64_t)v->kfirst[j + 1] <= s)
		j++;
	uint64_t begin = v->kpos[j];
	/* the first frame at or past the last target, then every frame before it */
	double thr = t_last - 0.25 / v->fps;
	int64_t pf = INT64_MAX;
	for (uint32_t i = 0; i < v->npk; i++)
		if ((double)(v->pts[i] - v->start_pts) * v->tb >= thr && v->pts[i] < pf)
			pf = v->pts[i];
	uint32_t last = v->npk - 1;
	if (pf != INT64_MAX) {
		uint32_t dmax = 0;
		for (uint32_t i = 0; i < v->npk; i++)
			if (v->pts[i] <= pf)
				dmax = i;
		uint64_t more = (uint64_t)v->reorder + (o->threads ? o->threads : 1) + 2;
		last = dmax + more < v->npk ? (uint32_t)(dmax + more) : v->npk - 1;
	}
	uint64_t end = v->end[last];
	if (end > begin)
		add(out, begin, end - begin);
	for (uint32_t i = 0; i < out->n; i++)
		out->bytes += out->len[i];
}

void stk__vidx_plan(const struct stk__vidx *v, const struct stk_video_opts *o,
		    uint64_t sample_seed, uint32_t clip, struct stk__vspan *out)
{
	double t0, step;
	stk__video_clip_start(o, v->fps, v->frames, sample_seed, clip, &t0, &step);
	span_of(v, o, t0, t0 + (o->frames - 1) * step, out);
}

uint64_t stk__vidx_max_bytes(const struct stk__vidx *v, const struct stk_video_opts *o)
{
	/* a run's reads grow with its start: its last start is its largest */
	double step = o->fps > 0 ? 1.0 / o->fps : o->stride / v->fps, span = (o->frames - 1) * step;
	uint64_t mx = 0;
	int64_t frames = v->frames > 0 ? v->frames : 1;
	for (uint32_t j = 0; j < v->nkey; j++) {
		int64_t s = j + 1 < v->nkey ? (int64_t)v->kfirst[j + 1] - 1 : frames - 1;
		struct stk__vspan sp;
		span_of(v, o, (double)s / v->fps, (double)s / v->fps + span, &sp);
		mx = sp.bytes > mx ? sp.bytes : mx;
	}
	struct stk__vspan sp; /* a clip longer than the video: from 0 */
	span_of(v, o, 0, span, &sp);
	return sp.bytes > mx ? sp.bytes : mx;
}
