/* bench.h — what the files of `stoker bench` share: options, one run's
 * figures, the verdict's output and the sweep's plot. */
#ifndef STK_BENCH_H
#define STK_BENCH_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "stoker/stoker.h"

struct bench_opts {
	const char *path;
	struct stk_loader_opts lo;  /* the loader's options, as the table parses them */
	struct stk_image_opts img;  /* with --image */
	int64_t epochs, max_samples;
	double compute_ms, seconds;
	int cache; /* CACHE_* */
	bool image, cold, json, no_baseline;
	const char *sweep, *plot, *size, *vs;
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

/* The verdict as bench's JSON has it: kind, evidence, try, and the device. */
json_t *verdict_json(const struct stk_verdict *v);
/* The verdict's human lines: the device behind PATH, then verdict and try. */
void verdict_print(const struct stk_verdict *v);

/* --vs torch: PyTorch's DataLoader over the same samples (python3 -m
 * stoker.vs_torch) at each worker count: its JSON, or NULL with the reason
 * in why (no interpreter, torch not importable, ...). */
json_t *bench_vs_torch(const struct bench_opts *o, const struct stk_loader_opts *lo,
		       const struct stk_image_opts *img, uint64_t samples, char *why, size_t len);
/* Its lines in bench's human report, with stoker's ratio to the best. */
void vs_torch_print(const json_t *vt, double stoker_sps);

/* Writes an SVG line chart of ys against xs (labels as given). 0 or -errno. */
int write_svg(const char *file, const char *title, const char *xlabel, const char *ylabel,
	      const double *xs, const double *ys, int n);

#endif
