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
 * The record (issue 38, item 2: ~3 bytes a packet, where 16 were): eleven
 * 8-byte words (size, fps, tb, duration, frames, start_pts, the pts tick,
 * counts, frame size, where the coded parts start, their length), then
 * bytes: the header's ranges (gap, length), each packet's pts step in ticks
 * (zigzag) and end step in 256-byte units (rounded up: a clip reads at most
 * 255 bytes more), each run's first frame step, position step (zigzag) and
 * least end; all LEB128 varints.  The loader keeps records coded (the index
 * cache stores them as they are) and a plan decodes the packets it walks.
 * stk__vidx_view checks every word and value before a loader trusts it.
 */
#include "video/vindex.h"

#include "video/demux.h"
#include "video/video.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

enum { W_SIZE, W_FPS, W_TB, W_DUR, W_FRAMES, W_START, W_TICK, W_COUNTS, W_DIMS, W_AT, W_BYTES,
       W_HEAD };
#define NPK_MAX (1u << 22)
#define GRAIN 256u
_Static_assert(STK__VREC_MAX == 8, "struct stk__vidx_raw holds 8 header ranges");

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

static uint64_t gcd(uint64_t a, uint64_t b)
{
	while (b) {
		uint64_t t = a % b;
		a = b;
		b = t;
	}
	return a;
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

/* --- the record: coding and checking ---------------------------------------- */

struct wbuf {
	uint8_t *p;
	size_t n, cap;
	bool oom;
};

static void put_uv(struct wbuf *b, uint64_t v)
{
	if (b->n + 10 > b->cap) {
		size_t cap = b->cap ? 2 * b->cap : 1024;
		uint8_t *p = b->oom ? NULL : realloc(b->p, cap);
		if (!p) {
			b->oom = true;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
	do {
		b->p[b->n++] = (uint8_t)(v & 0x7f) | (v > 0x7f ? 0x80 : 0);
		v >>= 7;
	} while (v);
}

static uint64_t zz(int64_t v)
{
	return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static int64_t unzz(uint64_t u)
{
	return (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
}

/* The next varint of s[*at..lim): false when it runs past lim or 64 bits. */
static bool get_uv(const uint8_t *s, uint32_t *at, uint32_t lim, uint64_t *v)
{
	uint64_t x = 0;
	for (unsigned sh = 0; sh < 64; sh += 7) {
		if (*at >= lim)
			return false;
		uint8_t c = s[(*at)++];
		if (sh == 63 && c > 1)
			return false;
		x |= (uint64_t)(c & 0x7f) << sh;
		if (!(c & 0x80)) {
			*v = x;
			return true;
		}
	}
	return false;
}

/* Unchecked: a record stk__vidx_view accepted. */
static uint64_t uv(const uint8_t *s, uint32_t *at)
{
	uint64_t x = 0;
	for (unsigned sh = 0;; sh += 7) {
		uint8_t c = s[(*at)++];
		x |= (uint64_t)(c & 0x7f) << sh;
		if (!(c & 0x80))
			return x;
	}
}

int stk__vidx_pack(const struct stk__vidx_raw *r, uint64_t **rec, size_t *words)
{
	*rec = NULL;
	if (!r->npk || r->npk > NPK_MAX || !r->nkey || r->nkey > NPK_MAX || !r->nhdr ||
	    r->nhdr > STK__VREC_MAX || r->reorder > 64 || r->kfirst[0])
		return -EINVAL;
	uint64_t tick = 0;
	for (uint32_t i = 0; i < r->npk; i++)
		tick = gcd(tick, (uint64_t)(r->pts[i] > r->start_pts ? r->pts[i] - r->start_pts
								  : r->start_pts - r->pts[i]));
	tick = tick ? tick : 1;
	struct wbuf b = {0};
	uint64_t prev = 0;
	for (uint32_t i = 0; i < r->nhdr; i++) {
		if (r->hdr[2 * i] < prev) {
			free(b.p);
			return -EINVAL;
		}
		put_uv(&b, r->hdr[2 * i] - prev);
		put_uv(&b, r->hdr[2 * i + 1]);
		prev = r->hdr[2 * i] + r->hdr[2 * i + 1];
	}
	size_t at_pk = b.n;
	int64_t pp = r->start_pts;
	uint64_t pu = 0;
	for (uint32_t i = 0; i < r->npk; i++) {
		uint64_t u = (r->end[i] + GRAIN - 1) / GRAIN;
		if (u < pu) {
			free(b.p);
			return -EINVAL;
		}
		put_uv(&b, zz((r->pts[i] - pp) / (int64_t)tick));
		put_uv(&b, u - pu);
		pp = r->pts[i];
		pu = u;
	}
	size_t at_key = b.n;
	uint64_t pf = 0, pk = 0;
	for (uint32_t j = 0; j < r->nkey; j++) {
		if (j && r->kfirst[j] <= pf) {
			free(b.p);
			return -EINVAL;
		}
		put_uv(&b, r->kfirst[j] - pf);
		put_uv(&b, zz((int64_t)(r->kpos[j] - pk)));
		put_uv(&b, r->kend && r->kend[j] >= r->kpos[j] ? r->kend[j] - r->kpos[j] + 1 : 0);
		pf = r->kfirst[j];
		pk = r->kpos[j];
	}
	if (b.oom || b.n > UINT32_MAX) {
		free(b.p);
		return -ENOMEM;
	}
	size_t n = W_HEAD + (b.n + 7) / 8;
	uint64_t *w = calloc(n, 8);
	if (!w) {
		free(b.p);
		return -ENOMEM;
	}
	w[W_SIZE] = r->size;
	w[W_FPS] = dbits(r->fps);
	w[W_TB] = dbits(r->tb);
	w[W_DUR] = dbits(r->duration_s);
	w[W_FRAMES] = (uint64_t)r->frames;
	w[W_START] = (uint64_t)r->start_pts;
	w[W_TICK] = tick;
	w[W_COUNTS] = r->npk | (uint64_t)r->nkey << 24 | (uint64_t)r->nhdr << 48 |
		      (uint64_t)r->reorder << 56;
	w[W_DIMS] = r->width | (uint64_t)r->height << 32;
	w[W_AT] = at_pk | (uint64_t)at_key << 32;
	w[W_BYTES] = b.n;
	if (b.n)
		memcpy(w + W_HEAD, b.p, b.n);
	free(b.p);
	*rec = w;
	*words = n;
	return 0;
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

void stk__vidx_peek(const uint64_t *r, struct stk__vidx *v)
{
	v->size = r[W_SIZE];
	v->fps = bitsd(r[W_FPS]);
	v->tb = bitsd(r[W_TB]);
	v->duration_s = bitsd(r[W_DUR]);
	v->frames = (int64_t)r[W_FRAMES];
	v->start_pts = (int64_t)r[W_START];
	v->tick = (int64_t)r[W_TICK];
	v->npk = (uint32_t)(r[W_COUNTS] & 0xffffff);
	v->nkey = (uint32_t)(r[W_COUNTS] >> 24 & 0xffffff);
	v->nhdr = (uint32_t)(r[W_COUNTS] >> 48 & 0xff);
	v->reorder = (uint32_t)(r[W_COUNTS] >> 56);
	v->width = (uint32_t)r[W_DIMS];
	v->height = (uint32_t)(r[W_DIMS] >> 32);
	v->at_pk = (uint32_t)r[W_AT];
	v->at_key = (uint32_t)(r[W_AT] >> 32);
	v->slen = (uint32_t)r[W_BYTES];
	v->s = (const uint8_t *)(r + W_HEAD);
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
	if (r[W_BYTES] > UINT32_MAX || words != W_HEAD + (r[W_BYTES] + 7) / 8 ||
	    (r[W_AT] & 0xffffffff) > (r[W_AT] >> 32) || (r[W_AT] >> 32) > r[W_BYTES])
		BAD("a video record of %zu words for %llu coded bytes", words,
		    (unsigned long long)r[W_BYTES]);
	stk__vidx_peek(r, v);
	if (!(v->fps > 0 && v->fps < 1e6) || !(v->tb > 0 && v->tb < 1e6) ||
	    !(v->duration_s >= 0 && v->duration_s < 1e9) || v->frames < 0 || v->frames > NPK_MAX ||
	    v->tick < 1 || v->start_pts < -(INT64_C(1) << 62) || v->start_pts > INT64_C(1) << 62 ||
	    !v->width || !v->height || v->width > 1u << 16 || v->height > 1u << 16)
		BAD("a frame rate, time base, duration, frame count, tick or size out of range");
	if (v->nhdr < 1 || v->nhdr > STK__VREC_MAX || v->npk < 1 || v->npk > NPK_MAX ||
	    v->nkey < 1 || v->nkey > NPK_MAX || v->reorder > 64)
		BAD("counts out of range");
	const uint8_t *s = v->s;
	for (uint32_t i = v->slen; i < (words - W_HEAD) * 8; i++)
		if (s[i])
			BAD("bytes after the coded record");
	uint32_t at = 0;
	uint64_t prev = 0, a, b;
	for (uint32_t i = 0; i < v->nhdr; i++) {
		if (!get_uv(s, &at, v->at_pk, &a) || !get_uv(s, &at, v->at_pk, &b) || !b ||
		    a > size - prev || b > size - prev - a)
			BAD("header range %u outside the file", i);
		prev += a + b;
	}
	if (at != v->at_pk)
		BAD("the header's ranges do not end where the packets begin");
	int64_t pts = v->start_pts, lim = INT64_C(1) << 62;
	uint64_t units = 0, maxu = (size + GRAIN - 1) / GRAIN;
	for (uint32_t i = 0; i < v->npk; i++) {
		int64_t d;
		if (!get_uv(s, &at, v->at_key, &a) || !get_uv(s, &at, v->at_key, &b) ||
		    __builtin_mul_overflow(unzz(a), v->tick, &d) || d > lim || d < -lim ||
		    (pts += d) > lim || pts < -lim || b > maxu - units)
			BAD("packet %u's time or end out of range or outside the file", i);
		units += b;
	}
	if (at != v->at_key)
		BAD("the packets do not end where the keyframe runs begin");
	uint64_t first = 0, pos = 0, c;
	int64_t nfr = v->frames > 0 ? v->frames : 1;
	for (uint32_t j = 0; j < v->nkey; j++) {
		if (!get_uv(s, &at, v->slen, &a) || !get_uv(s, &at, v->slen, &b) ||
		    !get_uv(s, &at, v->slen, &c) || (j ? !a : a != 0) || a >= (uint64_t)nfr - first)
			BAD("keyframe run %u's first frame out of order or past the video", j);
		first += a;
		int64_t d = unzz(b);
		if ((d < 0 && (uint64_t)-d > pos) || (d > 0 && (uint64_t)d >= size - pos))
			BAD("keyframe run %u's position outside the file", j);
		pos += (uint64_t)d;
		if (pos >= size || c > size - pos + 1)
			BAD("keyframe run %u's extent outside the file", j);
	}
	if (at != v->slen)
		BAD("bytes left after the keyframe runs");
	return 0;
#undef BAD
}

/* --- a clip's ranges --------------------------------------------------------- */

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


/* Walks a record's packets in decode order. */
struct pcur {
	const struct stk__vidx *v;
	uint32_t at;
	int64_t pts;
	uint64_t units;
};

static void pc_start(struct pcur *c, const struct stk__vidx *v)
{
	*c = (struct pcur){.v = v, .at = v->at_pk, .pts = v->start_pts};
}

static void pc_next(struct pcur *c)
{
	c->pts += unzz(uv(c->v->s, &c->at)) * c->v->tick;
	c->units += uv(c->v->s, &c->at);
}

static uint64_t pc_end(const struct pcur *c)
{
	return c->units * GRAIN < c->v->size ? c->units * GRAIN : c->v->size;
}

/* Run j's (first frame, position, least end), walking from the first. */
struct kcur {
	uint32_t at;
	uint64_t first, pos, end;
};

static void kc_next(const struct stk__vidx *v, struct kcur *k)
{
	k->first += uv(v->s, &k->at);
	k->pos += (uint64_t)unzz(uv(v->s, &k->at));
	uint64_t c = uv(v->s, &k->at);
	k->end = c ? k->pos + c - 1 : 0;
}

/* The packets in display order (stk__vidx_max_bytes plans one clip a run:
 * a search each, where a walk each would cost runs x packets). */
struct ptab {
	struct pk {
		int64_t pts;
		uint32_t i;    /* its decode index */
		uint32_t imax; /* the largest decode index of it and the packets before */
	} *by_pts;
	uint64_t *end;         /* decode order */
};

static int cmp_pk(const void *a, const void *b)
{
	const struct pk *x = a, *y = b;
	return x->pts != y->pts ? (x->pts < y->pts ? -1 : 1) : (x->i > y->i) - (x->i < y->i);
}

/* The last packet a clip whose last target is t_last needs: the first frame
 * at or past it, every frame shown before that, then `more`; its end. */
static uint64_t last_end(const struct stk__vidx *v, const struct stk_video_opts *o,
			 double t_last, const struct ptab *t)
{
	double thr = t_last - 0.25 / v->fps;
	uint64_t more = (uint64_t)v->reorder + (o->threads ? o->threads : 1) + 2;
	uint32_t last = v->npk - 1;
	struct pcur c;
	if (t) {
		uint32_t lo = 0, hi = v->npk; /* the first at or past thr */
		while (lo < hi) {
			uint32_t mid = lo + (hi - lo) / 2;
			if ((double)(t->by_pts[mid].pts - v->start_pts) * v->tb >= thr)
				hi = mid;
			else
				lo = mid + 1;
		}
		if (lo < v->npk) {
			int64_t pf = t->by_pts[lo].pts;
			while (lo + 1 < v->npk && t->by_pts[lo + 1].pts == pf)
				lo++;
			uint32_t dmax = t->by_pts[lo].imax;
			last = dmax + more < v->npk ? (uint32_t)(dmax + more) : v->npk - 1;
		}
		return t->end[last];
	}
	int64_t pf = INT64_MAX;
	pc_start(&c, v);
	for (uint32_t i = 0; i < v->npk; i++) {
		pc_next(&c);
		if ((double)(c.pts - v->start_pts) * v->tb >= thr && c.pts < pf)
			pf = c.pts;
	}
	if (pf != INT64_MAX) {
		uint32_t dmax = 0;
		pc_start(&c, v);
		for (uint32_t i = 0; i < v->npk; i++) {
			pc_next(&c);
			if (c.pts <= pf)
				dmax = i;
		}
		last = dmax + more < v->npk ? (uint32_t)(dmax + more) : v->npk - 1;
	}
	pc_start(&c, v);
	for (uint32_t i = 0; i <= last; i++)
		pc_next(&c);
	return pc_end(&c);
}

/* The ranges of a clip starting at t0 whose last target is t_last. */
static void span_of(const struct stk__vidx *v, const struct stk_video_opts *o, double t0,
		    double t_last, const struct ptab *t, struct stk__vspan *out)
{
	out->n = 0;
	out->bytes = 0;
	uint32_t at = 0;
	uint64_t prev = 0;
	for (uint32_t i = 0; i < v->nhdr; i++) {
		uint64_t off = prev + uv(v->s, &at), len = uv(v->s, &at);
		add(out, off, len);
		prev = off + len;
	}
	int64_t s = llround(t0 * v->fps);
	struct kcur k = {.at = v->at_key};
	kc_next(v, &k);
	struct kcur kn = k;
	for (uint32_t j = 1; j < v->nkey; j++) {
		kn = k;
		kc_next(v, &kn);
		if ((int64_t)kn.first > s)
			break;
		k = kn;
	}
	uint64_t begin = k.pos, end = last_end(v, o, t_last, t);
	end = k.end > end ? k.end : end;
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
	span_of(v, o, t0, t0 + (o->frames - 1) * step, NULL, out);
}

uint64_t stk__vidx_max_bytes(const struct stk__vidx *v, const struct stk_video_opts *o)
{
	/* a run's reads grow with its start: its last start is its largest */
	double step = o->fps > 0 ? 1.0 / o->fps : o->stride / v->fps, span = (o->frames - 1) * step;
	uint64_t mx = 0;
	int64_t frames = v->frames > 0 ? v->frames : 1;
	struct ptab tab = {malloc(v->npk * sizeof(*tab.by_pts)), malloc(v->npk * 8)}, *t = NULL;
	if (tab.by_pts && tab.end) { /* (else walks) */
		struct pcur c;
		pc_start(&c, v);
		for (uint32_t i = 0; i < v->npk; i++) {
			pc_next(&c);
			tab.by_pts[i] = (struct pk){.pts = c.pts, .i = i};
			tab.end[i] = pc_end(&c);
		}
		qsort(tab.by_pts, v->npk, sizeof(*tab.by_pts), cmp_pk);
		for (uint32_t r = 0, m = 0; r < v->npk; r++) {
			m = tab.by_pts[r].i > m ? tab.by_pts[r].i : m;
			tab.by_pts[r].imax = m;
		}
		t = &tab;
	}
	struct kcur k = {.at = v->at_key};
	kc_next(v, &k);
	struct kcur kn = k;
	for (uint32_t j = 0; j < v->nkey; j++) {
		int64_t s = frames - 1;
		if (j + 1 < v->nkey) {
			kn = k;
			kc_next(v, &kn);
			s = (int64_t)kn.first - 1;
		}
		struct stk__vspan sp;
		span_of(v, o, (double)s / v->fps, (double)s / v->fps + span, t, &sp);
		mx = sp.bytes > mx ? sp.bytes : mx;
		k = kn;
	}
	struct stk__vspan sp; /* a clip longer than the video: from 0 */
	span_of(v, o, 0, span, t, &sp);
	free(tab.by_pts);
	free(tab.end);
	return sp.bytes > mx ? sp.bytes : mx;
}
