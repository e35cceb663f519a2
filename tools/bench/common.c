/*
 * bench/common.c — what every part of `stoker bench` shares: the Ctrl-C flag
 * its loops look at, and the dataset it runs on when given no PATH (`stoker
 * gen`'s default, 10,000 images in 100 classes, generated once into the cache
 * folder, then reused).
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "bench/bench.h"
#include "common/cli.h"
#include "gen/gen.h"

/* Set by SIGINT (bench/bench.c, bench/bench_mpi.c): every loop stops. */
volatile sig_atomic_t bench_interrupted;

#define DEFAULT_IMAGES 10000
#define DEFAULT_CLASSES 100

/* The default dataset: generated once into the cache folder, then reused. */
int bench_default_dataset(char *out, size_t len)
{
	char cache[PATH_MAX];
	int rc = stk_cache_dir(cache, sizeof(cache));
	if (rc < 0) {
		fprintf(stderr, "stoker bench: cannot create the cache folder: %s\n", stk_strerror(rc));
		return -1;
	}
	if (snprintf(out, len, "%s/default-%d", cache, DEFAULT_IMAGES) >= (int)len) {
		fprintf(stderr, "stoker bench: cache folder path too long: %s\n", cache);
		return -1;
	}
	struct stat st;
	if (stat(out, &st) == 0 && S_ISDIR(st.st_mode))
		return 0;
	char tmp[PATH_MAX + 16];
	if (snprintf(tmp, sizeof(tmp), "%s.partial", out) >= (int)sizeof(tmp))
		return -1;
	fprintf(stderr, "stoker bench: no PATH given; generating the default dataset (%d images, "
			"%d classes) once in %s\n", DEFAULT_IMAGES, DEFAULT_CLASSES, out);
	struct gen_params p = {.dir = tmp, .images = DEFAULT_IMAGES, .classes = DEFAULT_CLASSES,
			       .quality = 90, .replace = true}; /* an interrupted one's */
	if (gen_dataset(&p, false) != EXIT_OK)
		return -1;
	if (rename(tmp, out)) {
		fprintf(stderr, "stoker bench: %s: cannot rename to %s: %s\n", tmp, out, strerror(errno));
		return -1;
	}
	return 0;
}
