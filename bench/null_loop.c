/* null_loop.c — N epochs of the null engine over PATH, batch 256: the loader's own
 * instructions, for callgrind (docs/BENCHMARKS.md, "The house").
 *   cc -O2 -Iinclude bench/null_loop.c build/libstoker.a $(pkg-config --libs liburing libjpeg jansson libmicrohttpd) -ldl -lm -pthread -o null_loop
 *   valgrind --tool=callgrind ./null_loop DIR 13   # and 3: the difference is 10 epochs */
#include <stdio.h>
#include <stdlib.h>
#include <stoker/stoker.h>
int main(int argc, char **argv)
{
	struct stk_loader_opts o = {.size = sizeof(o), .path = argv[1], .seed = 1, .batch_size = 256,
				    .engine = STK_ENGINE_NULL, .queue_depth = 128, .flags = STK_F_QUIET};
	int epochs = argc > 2 ? (int)strtol(argv[2], NULL, 10) : 1;
	struct stk_loader *l;
	char err[512];
	if (stk_loader_create(&l, &o, err, sizeof(err)) < 0) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	unsigned long long n = 0;
	for (int e = 0; e < epochs; e++) {
		stk_loader_start(l, (uint64_t)e, 0);
		struct stk_batch *b;
		while (stk_loader_next(l, &b) == 1) {
			n += b->count;
			stk_batch_release(l, b);
		}
	}
	printf("%llu\n", n);
	stk_loader_destroy(l);
	return 0;
}
