/* decode_loop.c — one thread decoding and cropping JPEGs through the public
 * API, for profiles (callgrind, perf) of the image pipeline without the
 * loader around it.  Each round decodes every file once (224×224 uint8
 * RandomResizedCrop + flip, or with -c validation's Resize 256 + CenterCrop
 * 224; sample index = argument position) and prints images/s; exits 1 if any
 * file failed to decode.
 *
 *   make build/examples/decode_loop
 *   valgrind --tool=callgrind build/examples/decode_loop 3 $(find /tmp/stoker-data20k/c0000 -name '*.jpg' | sort | head -40)
 *   build/examples/decode_loop -c 3 FILE.jpg...
 */
#include <stoker/stoker.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	struct stk_image_opts o = {.size = sizeof(o)};
	if (argc > 1 && !strcmp(argv[1], "-c")) {
		o.crop = STK_CROP_CENTER;
		argv++;
		argc--;
	}
	if (argc < 3) {
		fprintf(stderr, "usage: decode_loop [-c] ROUNDS FILE.jpg...\n");
		return 2;
	}
	char *end;
	long rounds = strtol(argv[1], &end, 10);
	int n = argc - 2;
	if (*end || rounds < 1 || rounds > 1000000) {
		fprintf(stderr, "decode_loop: ROUNDS must be 1..1000000, not '%s'\n", argv[1]);
		return 2;
	}
	unsigned char **data = calloc((size_t)n, sizeof(*data));
	size_t *len = calloc((size_t)n, sizeof(*len));
	void *out = malloc(stk_image_bytes(&o));
	if (!data || !len || !out)
		return 1;
	for (int i = 0; i < n; i++) {
		FILE *f = fopen(argv[i + 2], "rb");
		if (!f || fseek(f, 0, SEEK_END) || (len[i] = (size_t)ftell(f)) == 0 ||
		    fseek(f, 0, SEEK_SET) || !(data[i] = malloc(len[i])) ||
		    fread(data[i], 1, len[i], f) != len[i]) {
			fprintf(stderr, "decode_loop: %s: cannot read\n", argv[i + 2]);
			return 1;
		}
		fclose(f);
	}
	int failed = 0;
	for (long r = 0; r < rounds; r++) {
		double t0 = now();
		for (int i = 0; i < n; i++) {
			char err[256];
			if (stk_image_decode(&o, data[i], len[i], 0, 0, i, out, err, sizeof(err))) {
				fprintf(stderr, "decode_loop: %s: %s\n", argv[i + 2], err);
				failed = 1;
			}
		}
		printf("%.0f images/s\n", n / (now() - t0));
	}
	for (int i = 0; i < n; i++)
		free(data[i]);
	free(data);
	free(len);
	free(out);
	return failed;
}
