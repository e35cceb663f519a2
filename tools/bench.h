/* bench.h — what the files of `stoker bench` share: options, one run's
 * figures, the verdict and the sweep's plot. */
#ifndef STK_BENCH_H
#define STK_BENCH_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "stoker/stoker.h"
#include "stoker/sys.h"

struct bench_opts {
	const char *path;
	int64_t batch_size, prefetch, qd, io_threads, epochs, seed, rank, world, max_samples;
	double compute_ms, seconds;
	int engine, on_error;
	int cache; /* CACHE_* */
	bool image, no_flip, normalize;
	int64_t size, decode_threads;
	int crop, layout, dtype;
	bool cold, direct, json, no_baseline, no_shuffle, drop_last;
	const char *sweep, *plot;
	double null_latency_ms;
	int shuffle_mode;
	int64_t shuffle_window;
	const char *extensions;
};

enum { CACHE_WARM, CACHE_COLD, CACHE_AS_IS };

struct run {
	double wall, cpu, compute;
	uint64_t samples, bytes, batches, errors;
	struct stk_stats st;
	double rss_first_mb, rss_last_mb;
	double decode_s; /* baseline: time decoding */
	json_t *epochs; /* per-epoch figures */
};

/* The device behind PATH, sampled around a run (iostat -x's figures). */
struct disk_probe {
	bool ok;
	char name[64];
	struct stk_diskstat before, after;
	double t0, t1;
	struct stk_disk_rates rates;
};

void disk_probe_start(struct disk_probe *d, const char *path);
void disk_probe_stop(struct disk_probe *d);

/* What holds the run back, with its evidence and the change to try. */
struct verdict {
	const char *kind; /* "consumer-bound", "storage-bound", "decode-bound", "configuration",
			     "io-thread-bound" */
	char evidence[256];
	char advice[256];
};

void bench_verdict(const struct bench_opts *o, const struct run *r, const struct disk_probe *d,
		   struct verdict *v);
json_t *verdict_json(const struct verdict *v, const struct disk_probe *d);

/* Writes an SVG line chart of ys against xs (labels as given). 0 or -errno. */
int write_svg(const char *file, const char *title, const char *xlabel, const char *ylabel,
	      const double *xs, const double *ys, int n);

#endif
