/* epoch.c — the smallest use of libstoker: read one epoch of a dataset and
 * print how many samples and bytes came through, and a checksum of them.
 *
 *   cc epoch.c -lstoker -o epoch && ./epoch /data/train [batch_size]
 */
#include <stdio.h>
#include <stdlib.h>

#include <stoker/stoker.h>

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: %s PATH [BATCH_SIZE]\n", argv[0]);
		return 2;
	}
	struct stk_loader_opts o = {.size = sizeof(o), .path = argv[1], .seed = 1};
	o.batch_size = argc > 2 ? (uint32_t)strtoul(argv[2], NULL, 10) : 64;
	struct stk_loader *l;
	char err[512];
	int rc = stk_loader_create(&l, &o, err, sizeof(err));
	if (rc < 0) {
		fprintf(stderr, "epoch: %s\n", err);
		return 1;
	}
	struct stk_batch *b;
	unsigned long long samples = 0, bytes = 0, sum = 0;
	while ((rc = stk_loader_next(l, &b)) == 1) {
		for (uint32_t i = 0; i < b->count; i++) {
			const uint8_t *p = b->data + b->offsets[i];
			for (uint64_t k = 0; k < b->sizes[i]; k++)
				sum += p[k];
			bytes += b->sizes[i];
		}
		samples += b->count;
		stk_batch_release(l, b);
	}
	if (rc < 0)
		fprintf(stderr, "epoch: %s\n", stk_last_error(l));
	else
		printf("%llu samples %llu bytes checksum %llu\n", samples, bytes, sum);
	stk_loader_destroy(l);
	return rc < 0;
}
