/* fuzz_rst.c — libFuzzer target for the restart-interval scanner and the
 * sub-image builder (src/image/jpeg_rst.c).  For any input the scanner returns a
 * defined code; when it finds intervals, sub-images drawn from the input's
 * bytes (rounded out to whole intervals) are built into a buffer of exactly
 * the announced size, and scanning a built one finds its own intervals with
 * the same bytes as the source's: what image/image.c feeds libjpeg is a valid
 * restart-indexed JPEG of the MCUs asked for, and nothing is read or written
 * out of bounds.  tests/test_jpeg_rst.c replays tests/fuzz/rst_corpus
 * through this function in every `make test`.
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -std=gnu11 -D_GNU_SOURCE \
 *     -Isrc tests/fuzz/fuzz_rst.c src/image/jpeg_rst.c -o build/fuzz_rst
 *   build/fuzz_rst -max_total_time=300 -max_len=65536 tests/fuzz/rst_corpus */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "image/jpeg_rst.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_sub(const uint8_t *data, const struct stk__jpeg_rst *r, struct stk__jpeg_sub s)
{
	if (!stk__jpeg_rst_box(r, &s))
		return;
	if (s.c0 >= s.c1 || s.r0 >= s.r1 || s.c1 > r->mcux || s.r1 > r->mcuy)
		abort();
	/* zero padding after each interval, as image/image.c asks, or none */
	size_t pad = (s.c0 + s.r1) % 2 ? 16 : 0, tail = pad ? 100 : 0;
	size_t max = stk__jpeg_rst_build_len(r, &s, pad, tail);
	uint32_t n = stk__jpeg_rst_count(r, &s);
	if (!max || !n || n > r->nint)
		abort();
	uint8_t *out = malloc(max);
	size_t *starts = malloc(sizeof(*starts) * ((size_t)n + 1));
	if (!out || !starts)
		abort();
	size_t len = stk__jpeg_rst_build(data, r, &s, pad, tail, out, starts);
	if (len != max || starts[0] != r->scan || starts[n] != len - tail)
		abort();
	struct stk__jpeg_rst b;
	if (stk__jpeg_rst_scan(out, len, &b, NULL, 0) != 1)
		abort();
	if (b.nint != n || b.restart != r->restart || b.mcux != s.c1 - s.c0 ||
	    b.mcuy != s.r1 - s.r0 || b.ncomp != r->ncomp || b.off[n] != starts[n])
		abort();
	for (uint32_t k = 0; k < n; k++) {
		uint32_t i = stk__jpeg_rst_index(r, &s, k);
		size_t a = r->off[i + 1] - 2 - r->off[i], c = b.off[k + 1] - 2 - b.off[k];
		if (i >= r->nint || a + pad != c || b.off[k] != starts[k] ||
		    memcmp(data + r->off[i], out + b.off[k], a))
			abort();
		for (size_t z = 0; z < pad; z++)
			if (out[b.off[k] + a + z])
				abort();
		if (k && stk__jpeg_rst_index(r, &s, k - 1) >= i) /* raster order */
			abort();
	}
	if (stk__jpeg_rst_bytes(&b, 0, b.nint) + b.scan + 2ull * b.nint + tail != len)
		abort();
	stk__jpeg_rst_free(&b);
	free(starts);
	free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct stk__jpeg_rst r;
	char why[128];
	int rc = stk__jpeg_rst_scan(data, size, &r, why, sizeof(why));
	if (rc == 0) {
		if (!why[0] || r.off)
			abort();
		return 0;
	}
	if (rc != 1)
		abort();
	if (r.nint < 1 || r.off[0] != r.scan || r.scan_end >= size || r.off[r.nint] != r.scan_end + 2)
		abort();
	for (uint32_t i = 0; i < r.nint; i++)
		if (r.off[i + 1] < r.off[i] + 2 || r.off[i + 1] > size)
			abort();
	/* sub-images from the last bytes of the input, then the whole image and
	 * its corners */
	uint64_t h = 1469598103934665603ull;
	for (size_t i = size > 64 ? size - 64 : 0; i < size; i++)
		h = (h ^ data[i]) * 1099511628211ull;
	for (int t = 0; t < 4; t++) {
		uint32_t c0 = (uint32_t)(h % r.mcux), r0 = (uint32_t)((h >> 16) % r.mcuy);
		uint32_t c1 = c0 + 1 + (uint32_t)((h >> 32) % (r.mcux - c0));
		uint32_t r1 = r0 + 1 + (uint32_t)((h >> 48) % (r.mcuy - r0));
		check_sub(data, &r, (struct stk__jpeg_sub){c0, c1, r0, r1});
		h = h * 6364136223846793005ull + 1442695040888963407ull;
	}
	check_sub(data, &r, (struct stk__jpeg_sub){0, r.mcux, 0, r.mcuy});
	check_sub(data, &r, (struct stk__jpeg_sub){0, 1, 0, 1});
	check_sub(data, &r, (struct stk__jpeg_sub){r.mcux - 1, r.mcux, r.mcuy - 1, r.mcuy});
	/* rectangles out of the image are refused */
	struct stk__jpeg_sub bad = {0, r.mcux + 1, 0, 1};
	if (stk__jpeg_rst_box(&r, &bad) || stk__jpeg_rst_build_len(&r, &bad, 0, 0))
		abort();
	stk__jpeg_rst_free(&r);
	return 0;
}
