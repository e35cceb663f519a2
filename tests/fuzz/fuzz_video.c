/* fuzz_video.c — libFuzzer target for the video path (src/video/): the
 * demuxer over memory, the probe and a clip's decode (seek, decode, pick,
 * swscale into the output) on any bytes.  Every call returns 0 or a
 * negative code with a reason, a probe that succeeds gives a size and a
 * frame rate, a clip repeats fewer frames than it holds, and nothing is read
 * or written out of bounds (ASan, UBSan).  The last byte chooses the clip's
 * shape (frames, stride, layout, crop, pad or refuse).  tests/test_video.c
 * replays tests/fuzz/video_corpus through this function in every
 * `make test`; `make fuzz` runs it (build/fuzz_video). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "stoker/stoker.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[512];
	err[0] = 0;
	struct stk_video_info vi = {.size = sizeof(vi)};
	int rc = stk_video_probe(data, size, &vi, err, sizeof(err));
	if (rc > 0 || (rc < 0 && !err[0]) || (rc == 0 && (!vi.width || !vi.height || !(vi.fps > 0))))
		abort();
	uint8_t sel = size ? data[size - 1] : 0;
	struct stk_video_opts o = {
		.size = sizeof(o),
		.frames = 1 + sel % 4,
		.stride = 1 + (sel >> 2) % 3,
		.out_size = 16,
		.layout = (sel >> 4) & 1,
		.crop = (sel >> 5) & 1,
		.short_clip = (sel >> 6) & 1,
		.max_pixels = 1u << 20,
		.max_decode_ns = 1000000000ull,
	};
	size_t n = stk_video_clip_bytes(&o);
	uint8_t *out = malloc(n);
	if (!out)
		abort();
	struct stk_clip_info ci = {.size = sizeof(ci)};
	err[0] = 0;
	rc = stk_video_decode(&o, data, size, 1, 0, sel, 0, out, &ci, err, sizeof(err));
	if (rc > 0 || (rc < 0 && !err[0]) || (rc == 0 && ci.padded >= o.frames))
		abort();
	free(out);
	return 0;
}
