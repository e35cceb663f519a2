/*
 * base/hash.c — xxHash64 (seed 0), fed in pieces: the checksum the index
 * cache (dataset/cache.c, around its skipped fields) and the loader's JPEG
 * copies (dataset/jcache.c) are checked with before they are trusted.
 */
#include "base/internal.h"

#define H1 0x9e3779b185ebca87ull
#define H2 0xc2b2ae3d27d4eb4full
#define H3 0x165667b19e3779f9ull
#define H4 0x85ebca77c2b2ae63ull
#define H5 0x27d4eb2f165667c5ull

static uint64_t rotl(uint64_t x, int r)
{
	return (x << r) | (x >> (64 - r));
}

static uint64_t hround(uint64_t acc, uint64_t in)
{
	return rotl(acc + in * H2, 31) * H1;
}

static uint64_t load64(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return v;
}

void stk__xxh64_start(struct stk__xxh64 *h)
{
	*h = (struct stk__xxh64){.v = {H1 + H2, H2, 0, -H1}};
}

void stk__xxh64_feed(struct stk__xxh64 *h, const void *data, size_t len)
{
	const uint8_t *p = data;
	h->total += len;
	if (h->nbuf) {
		size_t take = 32 - h->nbuf < len ? 32 - h->nbuf : len;
		memcpy(h->buf + h->nbuf, p, take);
		h->nbuf += take;
		p += take;
		len -= take;
		if (h->nbuf < 32)
			return;
		for (int i = 0; i < 4; i++)
			h->v[i] = hround(h->v[i], load64(h->buf + 8 * i));
		h->nbuf = 0;
	}
	/* the lanes in locals: through h, every store would alias the bytes */
	uint64_t v0 = h->v[0], v1 = h->v[1], v2 = h->v[2], v3 = h->v[3];
	for (; len >= 32; p += 32, len -= 32) {
		v0 = hround(v0, load64(p));
		v1 = hround(v1, load64(p + 8));
		v2 = hround(v2, load64(p + 16));
		v3 = hround(v3, load64(p + 24));
	}
	h->v[0] = v0;
	h->v[1] = v1;
	h->v[2] = v2;
	h->v[3] = v3;
	memcpy(h->buf, p, len);
	h->nbuf = len;
}

uint64_t stk__xxh64_end(const struct stk__xxh64 *h)
{
	uint64_t x;
	if (h->total >= 32) {
		x = rotl(h->v[0], 1) + rotl(h->v[1], 7) + rotl(h->v[2], 12) + rotl(h->v[3], 18);
		for (int i = 0; i < 4; i++)
			x = (x ^ hround(0, h->v[i])) * H1 + H4;
	} else {
		x = H5;
	}
	x += h->total;
	size_t i = 0;
	for (; i + 8 <= h->nbuf; i += 8)
		x = rotl(x ^ hround(0, load64(h->buf + i)), 27) * H1 + H4;
	for (; i < h->nbuf; i++)
		x = rotl(x ^ (h->buf[i] * H5), 11) * H1;
	x ^= x >> 33;
	x *= H2;
	x ^= x >> 29;
	x *= H3;
	return x ^ (x >> 32);
}

uint64_t stk__xxh64(const void *p, size_t len)
{
	struct stk__xxh64 h;
	stk__xxh64_start(&h);
	stk__xxh64_feed(&h, p, len);
	return stk__xxh64_end(&h);
}
