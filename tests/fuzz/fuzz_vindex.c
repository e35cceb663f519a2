/* fuzz_vindex.c — libFuzzer target for the video index and the ranged path
 * (issue 38: src/video/vindex.c and vrecord.c, demux.c over byte ranges,
 * clip.c through stk__video_decode_ext): a clip read as the ranges a record plans, on any
 * bytes and any record.  The first byte chooses: bit 0 clear, the rest past
 * 4 bytes is a video whose record is made (stk__vidx_make), then byte
 * (in[1] | in[2] << 8) of the record XORed with in[3] (0: as made); bit 0
 * set, the rest is the record's words themselves, for a file of its own
 * size (up to 1 MiB) of bytes 0x00..0xff repeating.  Bits 1..7 choose the
 * clip's shape.  What a caller relies on: a record made is one
 * stk__vidx_view accepts; a record viewed either refused with a reason or
 * planned into at most STK__VSPAN_MAX ranges, in order, inside the file,
 * whose lengths add up, no larger than stk__vidx_max_bytes; the clip over
 * them 0 or a negative code with a reason, never a read out of bounds (ASan,
 * UBSan).  tests/test_video.c replays tests/fuzz/vindex_corpus through this
 * function in every `make test`; `make fuzz` runs it (build/fuzz_vindex). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "stoker/stoker.h"
#include "video/demux.h"
#include "video/video.h"
#include "video/vindex.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 5)
		return 0;
	uint8_t mode = data[0];
	const uint8_t *in = data + 4;
	size_t n = size - 4;
	char why[512];
	uint64_t *rec = NULL;
	size_t words = 0;
	uint8_t *file = NULL;
	const uint8_t *src = in;
	uint64_t fsize = n;
	if (!(mode & 1)) {
		why[0] = 0;
		int rc = stk__vidx_make(in, n, &rec, &words, why, sizeof(why));
		if (rc < 0 || (rc == 1 && !why[0]))
			abort();
		if (rc)
			return 0;
		struct stk__vidx v;
		if (stk__vidx_view(rec, words, n, &v, why, sizeof(why)))
			abort(); /* a record made is one the loader takes */
		size_t at = (size_t)(data[1] | data[2] << 8);
		if (at < words * 8)
			((uint8_t *)rec)[at] ^= data[3];
	} else {
		words = n / 8;
		rec = malloc(words ? words * 8 : 8);
		if (!rec)
			abort();
		memcpy(rec, in, words * 8);
		fsize = words ? rec[0] : 0;
		if (!fsize || fsize > (1u << 20)) {
			free(rec);
			return 0;
		}
		file = malloc(fsize);
		if (!file)
			abort();
		for (uint64_t i = 0; i < fsize; i++)
			file[i] = (uint8_t)i;
		src = file;
	}
	struct stk__vidx v;
	why[0] = 0;
	int rc = stk__vidx_view(rec, words, fsize, &v, why, sizeof(why));
	if (rc && (rc != STK_ECORRUPT || !why[0]))
		abort();
	if (!rc) {
		struct stk_video_opts want = {
			.size = sizeof(want),
			.frames = 1 + (mode >> 1) % 4,
			.stride = 1 + (mode >> 3) % 3,
			.out_size = 16,
			.crop = (mode >> 5) & 1,
			.short_clip = (mode >> 6) & 1,
			.clips_per_video = 2,
			.max_pixels = 1u << 20,
			.max_decode_ns = 1000000000ull,
		}, o;
		if (stk__video_opts(&o, &want, why, sizeof(why)))
			abort();
		uint64_t room = stk__vidx_max_bytes(&v, &o);
		size_t cb = stk__video_clip_bytes(&o);
		uint8_t *out = malloc(cb);
		if (!out)
			abort();
		for (uint32_t clip = 0; clip < 2; clip++) {
			struct stk__vspan sp;
			struct stk__vidx pv;
			stk__vidx_peek(rec, &pv);
			stk__vidx_plan(&pv, &o, 0x9e3779b97f4a7c15ull * (mode + 1), clip, &sp);
			if (!sp.n || sp.n > STK__VSPAN_MAX || sp.bytes > room)
				abort();
			struct stk__vext ext[STK__VSPAN_MAX];
			uint64_t sum = 0;
			for (uint32_t j = 0; j < sp.n; j++) {
				if (!sp.len[j] || sp.off[j] > fsize || sp.len[j] > fsize - sp.off[j] ||
				    (j && sp.off[j] <= sp.off[j - 1] + sp.len[j - 1]))
					abort();
				sum += sp.len[j];
				ext[j] = (struct stk__vext){.off = sp.off[j], .len = sp.len[j],
							    .p = src + sp.off[j]};
			}
			if (sum != sp.bytes)
				abort();
			struct stk_clip_info ci = {.size = sizeof(ci)};
			why[0] = 0;
			rc = stk__video_decode_ext(&o, ext, sp.n, fsize, 7, clip, out, &ci, why,
						   sizeof(why));
			if (rc > 0 || (rc < 0 && !why[0]) || (rc == 0 && ci.padded >= o.frames))
				abort();
		}
		free(out);
	}
	free(rec);
	free(file);
	return 0;
}
