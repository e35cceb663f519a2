/*
 * DESIGN video/vindex.c — a video's byte index, and a clip's byte ranges.
 *
 * Issue 38: a clip reads only the bytes it needs.  The index of a video is
 * made once from the whole file in memory, by FFmpeg itself, so it says what
 * the demuxer will do rather than what a hand parser guesses: the container
 * is opened as a clip opens it (video/demux.c) while its reads are noted (the
 * header's ranges: MP4's ftyp and moov; Matroska's EBML header, SeekHead,
 * Info, Tracks); every packet of the video stream is read in decode order
 * (its pts, and the furthest byte the demuxer had taken so far); and for
 * every start frame s the seek a clip does (av_seek_frame to s/fps,
 * AVSEEK_FLAG_BACKWARD) is done and where its reads begin kept, as runs (one
 * a keyframe).  A clip then needs the header's ranges and the span from its
 * run's position to the end of the packet the decoder needs last: the first
 * frame at or past the clip's last target time (clip.c takes the nearest
 * frame), every frame shown before it, and as many packets again as the
 * stream reorders (B-frames), the decoder's frame threads hold and two more.
 * Starts and targets come from video/video.c's stk__video_clip_start, the
 * clip decoder's own plan, so the two agree; where they would not, the read
 * outside the ranges fails (the demuxer says so) and never decodes other
 * bytes.
 *
 * MP4/MOV (not fragmented): a seek reads nothing; the first packet's
 * position is where the clip's reads begin.  Matroska/WebM: a seek lands on
 * a cluster's start (a Cues entry), which no packet says, and FFmpeg reads
 * the Cues at a demuxer's first seek, and past the last Cues entry parses
 * clusters forward within the seek; so the reads each step makes are noted
 * (the first packet's: the run's start), and each run's seek is done again
 * in a fresh demuxer as a clip's would be: its reads (the Cues, the first
 * run's, join the header; a later run's are its span's least extent), and a
 * fresh seek that lands elsewhere than the run says refuses the index (read
 * whole, said).  Other containers are read whole (the caller says so).
 *
 * The record is coded and checked by video/vrecord.c.
 */
#include "video/vindex.h"

#include "video/demux.h"
#include "video/video.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define NPK_MAX STK__VIDX_NPK_MAX
_Static_assert(STK__VREC_MAX == STK__VIDX_HDR_MAX, "a demuxer's header ranges fit a record");

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

/* --- making: FFmpeg's reads and packets ------------------------------------ */

/* The demuxer's position (avio_tell, which is inline over avio_seek). */
static uint64_t tell(const struct stk__vdemux *d)
{
	const AVIOContext *pb = d->fc->pb;
	int64_t t = pb->pos - (int64_t)(pb->buf_end - pb->buf_ptr);
	return t > 0 ? (uint64_t)t : 0;
}

/* The first video packet's position from where the demuxer is (its pts in
 * *pts): -1 if none. */
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

/* One step's reads noted in r (cleared): their least offset, or UINT64_MAX. */
static uint64_t rec_min(const struct stk__vrec *r)
{
	uint64_t m = UINT64_MAX;
	for (uint32_t i = 0; i < r->n; i++)
		m = r->off[i] < m ? r->off[i] : m;
	return m;
}

/* Adds off/len to the header's ranges (merged, in file order): false when
 * they would be more than 8. */
static bool hdr_add(struct stk__vidx_raw *r, uint64_t off, uint64_t len)
{
	uint64_t o[2 * STK__VREC_MAX + 2];
	uint32_t n = 0;
	bool put = false;
	for (uint32_t i = 0; i <= r->nhdr; i++) {
		uint64_t a, b;
		if (i < r->nhdr && (put || r->hdr[2 * i] <= off)) {
			a = r->hdr[2 * i], b = r->hdr[2 * i + 1];
		} else if (!put) {
			a = off, b = len, put = true, i--;
		} else {
			break;
		}
		if (n && a <= o[2 * n - 2] + o[2 * n - 1]) { /* touches the one before */
			uint64_t e = a + b > o[2 * n - 2] + o[2 * n - 1] ? a + b : o[2 * n - 2] + o[2 * n - 1];
			o[2 * n - 1] = e - o[2 * n - 2];
		} else {
			if (n == STK__VREC_MAX)
				return false;
			o[2 * n] = a, o[2 * n + 1] = b, n++;
		}
	}
	memcpy(r->hdr, o, 2 * n * sizeof(*o));
	r->nhdr = n;
	return true;
}

void stk__vidx_raw_free(struct stk__vidx_raw *r)
{
	free(r->pts);
	free(r->end);
	free(r->kfirst);
	free(r->kpos);
	free(r->kend);
	memset(r, 0, sizeof(*r));
}

/* Matroska: run j's seek (its first start, s) in a fresh demuxer over the
 * file, as a clip's: its seek's reads into *seekr, and where the reads for
 * its first packet begin (-1: the seek failed, or no packet). */
static int64_t fresh_seek(const uint8_t *src, size_t len, const struct stk__vdemux *like,
			  int64_t s, AVPacket *pkt, struct stk__vrec *seekr)
{
	struct stk__vdemux d;
	char why[256];
	if (stk__vdemux_open(&d, src, len, false, why, sizeof(why)) < 0)
		return -1;
	double t0 = (double)s / like->fps;
	int64_t ts = like->start_pts + (int64_t)llround(t0 / like->tb), p;
	struct stk__vrec pr = {0};
	memset(seekr, 0, sizeof(*seekr));
	d.mem.rec = seekr;
	int e = AV(av_seek_frame)(d.fc, d.si, ts, AVSEEK_FLAG_BACKWARD);
	d.mem.rec = &pr;
	int64_t pos = e < 0 ? -1 : first_pos(&d, pkt, &p);
	d.mem.rec = NULL;
	if (pos >= 0 && !pr.over && rec_min(&pr) < (uint64_t)pos)
		pos = (int64_t)rec_min(&pr);
	stk__vdemux_close(&d);
	return seekr->over || pr.over ? -1 : pos;
}

int stk__vidx_make_raw(const uint8_t *src, size_t len, struct stk__vidx_raw *r, char *why,
		       size_t whylen)
{
	struct stk__vdemux d, sk = {0};
	struct stk__vrec hr = {0}, sr;
	struct stk__vext one = {.off = 0, .len = len, .p = src};
	memset(r, 0, sizeof(*r));
	if (stk__vdemux_open_ext(&d, &one, 1, len, false, &hr, why, whylen) < 0)
		return 1; /* the clip says what is wrong with it */
	int rc = 1;
	int64_t *sorted = NULL;
	AVPacket *pkt = AV(av_packet_alloc)();
	if (!pkt) {
		rc = -ENOMEM;
		goto out;
	}
	const char *fmt = d.fc->iformat->name;
	bool mkv = strstr(fmt, "matroska") != NULL;
	if (!strstr(fmt, "mp4") && !mkv) {
		snprintf(why, whylen, "a %s container: no byte index (read whole)", fmt);
		goto out;
	}
	if (d.counted) { /* a clip's demuxer over ranges could not count them */
		snprintf(why, whylen, "its header gives no length (its frames counted from the "
			 "whole file): read whole");
		goto out;
	}
	if (hr.over || !hr.n) {
		snprintf(why, whylen, "its header is read in more than %d pieces", STK__VREC_MAX);
		goto out;
	}
	for (uint32_t i = 0; i < hr.n; i++)
		hdr_add(r, hr.off[i], hr.len[i]); /* (8 fit) */
	uint32_t npk = 0, cap = 256;
	r->pts = malloc(cap * sizeof(*r->pts));
	r->end = malloc(cap * sizeof(*r->end));
	if (!r->pts || !r->end) {
		rc = -ENOMEM;
		goto out;
	}
	uint64_t far = 0;
	int64_t pos0 = -1;
	struct stk__vrec fr = {0}; /* the first packet's reads: where a clip from 0 begins */
	d.mem.rec = &fr;
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
			int64_t *p2 = realloc(r->pts, cap * sizeof(*r->pts));
			if (p2)
				r->pts = p2;
			uint64_t *e2 = p2 ? realloc(r->end, cap * sizeof(*r->end)) : NULL;
			if (!e2) {
				AV(av_packet_unref)(pkt);
				rc = -ENOMEM;
				goto out;
			}
			r->end = e2;
		}
		if (pos0 < 0) {
			pos0 = pkt->pos;
			d.mem.rec = NULL;
			if (mkv && !fr.over && rec_min(&fr) < (uint64_t)pos0)
				pos0 = (int64_t)rec_min(&fr); /* the cluster's start */
		}
		uint64_t pe = (uint64_t)pkt->pos + (uint64_t)pkt->size, t = tell(&d);
		far = pe > far ? pe : far;
		far = mkv && t > far && t <= len ? t : far; /* the block's header and end */
		r->pts[npk] = pkt->pts;
		r->end[npk++] = far;
		AV(av_packet_unref)(pkt);
	}
	d.mem.rec = NULL;
	if (!npk) {
		snprintf(why, whylen, "no packets");
		goto out;
	}
	/* Matroska: the clip needing the last packet reads on to the file's end
	 * (what follows the last cluster: its Cues, tags), as the demuxer does */
	if (mkv)
		r->end[npk - 1] = len;
	/* how far decode order runs ahead of display order (B-frames) */
	uint32_t reorder = 0;
	sorted = malloc(npk * sizeof(*sorted));
	if (!sorted) {
		rc = -ENOMEM;
		goto out;
	}
	memcpy(sorted, r->pts, npk * sizeof(*sorted));
	qsort(sorted, npk, sizeof(*sorted), cmp_i64);
	for (uint32_t i = 0; i < npk; i++) {
		int64_t *at = bsearch(&r->pts[i], sorted, npk, sizeof(*sorted), cmp_i64);
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
	if (frames > (int64_t)NPK_MAX || frames > 2 * (int64_t)npk + 64) {
		/* (a seek for every start: a header claiming frames its packets do
		 * not hold would cost that many) */
		snprintf(why, whylen, "its header says %lld frames for %u packets",
			 (long long)frames, npk);
		goto out;
	}
	r->kfirst = malloc((size_t)frames * sizeof(*r->kfirst));
	r->kpos = malloc((size_t)frames * sizeof(*r->kpos));
	if (!r->kfirst || !r->kpos) {
		rc = -ENOMEM;
		goto out;
	}
	uint32_t nkey = 1;
	r->kfirst[0] = 0;
	r->kpos[0] = (uint64_t)pos0;
	/* The seeks in a demuxer that has read no packets (Matroska: reading
	 * them adds index entries a clip's demuxer would not have), without
	 * FFmpeg's parsers: a seek's first packet is a keyframe, which the
	 * H.264 parser would scan whole at every start (70 % of the index's
	 * instructions); the packets' positions and times are the demuxer's,
	 * and where Matroska's seeks read otherwise, the fresh checks below
	 * (with parsers, as a clip's) refuse the index */
	struct stk__vdemux *sd = &sk;
	if (stk__vdemux_open(&sk, src, len, false, why, whylen) < 0)
		goto out;
	sk.fc->flags |= AVFMT_FLAG_NOPARSE;
	for (int64_t s = 1; s < frames; s++) {
		double t0 = (double)s / d.fps;
		int64_t ts = d.start_pts + (int64_t)llround(t0 / d.tb), p;
		int e = AV(av_seek_frame)(sd->fc, sd->si, ts, AVSEEK_FLAG_BACKWARD);
		sr = (struct stk__vrec){0};
		sd->mem.rec = &sr;
		int64_t pos = e < 0 ? -1 : first_pos(sd, pkt, &p);
		sd->mem.rec = NULL;
		if (pos >= 0 && mkv && !sr.over && rec_min(&sr) < (uint64_t)pos)
			pos = (int64_t)rec_min(&sr);
		if (pos < 0 || (double)(p - d.start_pts) * d.tb > t0 + 0.25 / d.fps)
			pos = pos0; /* no index, or it overshot: the clip reads from the start */
		if ((uint64_t)pos != r->kpos[nkey - 1]) {
			r->kfirst[nkey] = (uint64_t)s;
			r->kpos[nkey++] = (uint64_t)pos;
		}
	}
	r->kend = calloc(nkey, sizeof(*r->kend));
	if (!r->kend) {
		rc = -ENOMEM;
		goto out;
	}
	/* Matroska: each run's seek again, in a fresh demuxer as a clip's */
	for (uint32_t j = 0; mkv && j < nkey; j++) {
		int64_t s = j ? (int64_t)r->kfirst[j] : frames > 1 ? 1 : 0;
		if (!s)
			break; /* one frame: a clip never seeks */
		int64_t pos = fresh_seek(src, len, &d, s, pkt, &sr);
		uint64_t lo = UINT64_MAX, hi = 0;
		for (uint32_t i = 0; i < sr.n; i++) {
			if (!j) { /* the first seek's reads (the Cues) join the header */
				if (!hdr_add(r, sr.off[i], sr.len[i])) {
					snprintf(why, whylen, "its header and Cues are read in more than "
						 "%d pieces", STK__VREC_MAX);
					goto out;
				}
				continue;
			}
			bool in = false; /* a later run's reads past the header: its span's */
			for (uint32_t h = 0; h < r->nhdr && !in; h++)
				in = sr.off[i] >= r->hdr[2 * h] &&
				     sr.off[i] + sr.len[i] <= r->hdr[2 * h] + r->hdr[2 * h + 1];
			if (!in) {
				lo = sr.off[i] < lo ? sr.off[i] : lo;
				hi = sr.off[i] + sr.len[i] > hi ? sr.off[i] + sr.len[i] : hi;
			}
		}
		/* (run 0's first start, 0, is read without a seek: its seek's
		 * check is at frame 1, whichever run that is) */
		uint32_t jj = !j && nkey > 1 && r->kfirst[1] == 1 ? 1 : j;
		if (pos < 0 || (uint64_t)pos != r->kpos[jj]) {
			snprintf(why, whylen, "a Matroska seek to frame %lld lands at byte %lld fresh, "
				 "%llu in a demuxer that has sought before: no byte index", (long long)s,
				 (long long)pos, (unsigned long long)r->kpos[jj]);
			goto out;
		}
		if (lo < r->kpos[j])
			r->kpos[j] = lo;
		r->kend[j] = hi;
	}
	r->size = len;
	r->fps = d.fps;
	r->tb = d.tb;
	r->duration_s = d.duration_s;
	r->frames = d.frames;
	r->start_pts = d.start_pts;
	r->width = (uint32_t)d.st->codecpar->width;
	r->height = (uint32_t)d.st->codecpar->height;
	r->npk = npk;
	r->nkey = nkey;
	r->reorder = reorder;
	rc = 0;
out:
	free(sorted);
	if (pkt)
		AV(av_packet_free)(&pkt);
	stk__vdemux_close(&sk);
	stk__vdemux_close(&d);
	if (rc)
		stk__vidx_raw_free(r);
	return rc;
}

int stk__vidx_make(const uint8_t *src, size_t len, uint64_t **rec, size_t *words, char *why,
		   size_t whylen)
{
	struct stk__vidx_raw r;
	*rec = NULL;
	int rc = stk__vidx_make_raw(src, len, &r, why, whylen);
	if (rc)
		return rc;
	rc = stk__vidx_pack(&r, rec, words);
	stk__vidx_raw_free(&r);
	if (rc == -EINVAL) {
		snprintf(why, whylen, "its index does not fit the record");
		return 1;
	}
	/* what a loader would refuse (a frame rate past 10^6, ...) is not made */
	struct stk__vidx v;
	char vw[256];
	if (!rc && stk__vidx_view(*rec, *words, len, &v, vw, sizeof(vw)) < 0) {
		snprintf(why, whylen, "its index is outside the record's ranges: %s", vw);
		free(*rec);
		*rec = NULL;
		return 1;
	}
	return rc;
}
