/*
 * DESIGN video/vrecord.c — a video's byte index as a record, and a clip's
 * byte ranges planned from it (issue 38; video/vindex.c finds the index).
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

#include "video/video.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

enum { W_SIZE, W_FPS, W_TB, W_DUR, W_FRAMES, W_START, W_TICK, W_COUNTS, W_DIMS, W_AT, W_BYTES,
       W_HEAD };
#define NPK_MAX STK__VIDX_NPK_MAX
#define GRAIN 256u

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

static uint64_t gcd(uint64_t a, uint64_t b)
{
	while (b) {
		uint64_t t = a % b;
		a = b;
		b = t;
	}
	return a;
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
	    r->nhdr > STK__VIDX_HDR_MAX || r->reorder > 64 || r->kfirst[0])
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
	if (v->nhdr < 1 || v->nhdr > STK__VIDX_HDR_MAX || v->npk < 1 || v->npk > NPK_MAX ||
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
