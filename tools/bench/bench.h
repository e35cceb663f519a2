/* bench/bench.h — what the files of `stoker bench` share: options, one run's
 * figures, the verdict's output and the sweep's plot. */
#ifndef STK_BENCH_H
#define STK_BENCH_H

#include <jansson.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/spread.h"
#include "stoker/stoker.h"

struct bench_opts {
	const char *path;
	struct stk_loader_opts lo;  /* the loader's options, as the table parses them */
	struct stk_image_opts img;  /* with --image */
	struct stk_video_opts vid;  /* with --video (bench/video.c) */
	int64_t epochs, max_samples, max_batches, repeat;
	double compute_ms, seconds, runtime, ramp;
	int run_index; /* which of the --repeat runs is going */
	int cache; /* CACHE_* */
	bool image, video, cold, json, no_baseline;
	const char *sweep, *plot, *size, *vs;
};

enum { CACHE_WARM, CACHE_COLD, CACHE_AS_IS };

/* The device's read counters over the measured part (bench/cold.c). */
struct devmeter {
	char disk[64]; /* the whole disk behind PATH, "" when none */
	double s0;     /* sectors read at the segment's start, -1 outside one */
	double bytes;  /* read over the segments so far */
	bool ok;       /* at least one segment counted */
};

struct run {
	double wall, cpu, compute;
	uint64_t samples, bytes, batches, errors;
	struct stk_stats st;
	double rss_first_mb, rss_last_mb;
	double decode_s; /* baseline: time decoding */
	json_t *epochs; /* per-epoch figures */
	uint64_t next_epoch;    /* the epoch after the last this run read */
	double epochs_measured; /* batches measured / batches per epoch */
	const char *ended_by;   /* what ended the measured part ("--runtime", ...) */
	double ramp_s;          /* the warm-up before the measured part */
	uint64_t ramp_samples, ramp_errors;
	struct devmeter dev;    /* cold: what the device read while measured */
	char invalid[400];      /* cold: why the figures mean nothing ("" when they do) */
	uint64_t rcache_hits, rcache_reads; /* remote data: the run's reads the local cache served */
	json_t *bad;            /* the failed samples named, "path: reason", at most BAD_NAMED */
	uint64_t bad_seen;      /* the loader's total_errors when last looked at */
};
#define BAD_NAMED 20

/* A cold window shorter than this, or of fewer samples, is mostly start-up
 * and the epoch's tail: no figure. */
#define COLD_MIN_S 0.05
#define COLD_MIN_READS 256

#define BENCH_MAX_REPEAT SPREAD_MAX
/* Runs whose samples/s spread wider than this (max - min over the median)
 * make the verdict say it is unsure. */
#define WIDE_SPREAD 0.2


/* A run's figures, for spreads over runs. */
double sps_of(const struct run *r);
double mbps_of(const struct run *r);
double cpu_of(const struct run *r);
double au_of(const struct run *r);
/* One figure of n runs into a spread. */
void spread_runs(const struct run *runs, int n, double (*f)(const struct run *), struct spread *s);
/* The run whose samples/s is the median's (its latencies speak for all). */
int median_run(const struct run *runs, int n);
/* "63328", or with runs: "63328 (61.2k-65.0k)". */
const char *fmt_spread(char *buf, size_t len, const struct spread *s, const char *fmt);
/* The verdict most runs gave (its index), and a note when they disagree or
 * spread wide (terse: a table cell's, only then).  base: the plain read
 * loop's runs, paired with runs (NULL: none): "agree" also means their
 * ratios stay on one side of 1.0. */
int pick_verdict(const struct stk_verdict *v, const struct run *runs, const struct run *base,
		 int n, bool terse,
		 char *note, size_t len);
/* A warning for runs measured under the minimum ("" when all were long enough). */
void short_warning(const struct bench_opts *o, const struct run *S, const struct run *B, int n,
		   char *out, size_t len);
/* bench/common.c: the default dataset's path in out, generated once if missing.
 * 0 or -1 (said on stderr). */
int bench_default_dataset(char *out, size_t len);

/* bench/cold.c: evicts the dataset's pages from the page cache (each file
 * or shard once); 0, or the first -errno posix_fadvise gave. */
int evict_dataset(struct stk_loader *l);
/* Whether PATH is on tmpfs or ramfs (its data is in memory, never cold). */
bool memory_fs(const char *path);
/* The device behind path; its read counters counted between start and stop. */
void dev_open(struct devmeter *m, const char *path);
void dev_start(struct devmeter *m);
void dev_stop(struct devmeter *m);
/* A cold run's figure checked: why it means nothing into r->invalid, or "";
 * direct: O_DIRECT reads; resident: the sampled pages left after eviction. */
void cold_check(struct run *r, const struct bench_opts *o, bool direct, double resident);

/* bench/run.c: set by SIGINT/SIGTERM; every loop stops at it. */
extern volatile sig_atomic_t bench_interrupted;
/* bench/cold.c: files evict_dataset opened so far (each open reads its folder's
 * and its inode's blocks back: JSON cache_evicted_files). */
extern uint64_t bench_evicted_files;
/* Fraction of a spread of samples whose pages are in the page cache. */
double cached_fraction(struct stk_loader *l);
/* cached_fraction before a run; on a cold one the page cache is dropped once
 * more after it (root), since its opens read back the folders and inodes of
 * the files it sampled: the run opens its files cold, metadata and all. */
double resident_at_start(struct stk_loader *l, const struct bench_opts *o);
/* "37 % of sampled file pages resident at the start", or why that is unknown
 * (cached < 0). */
const char *cached_words(double cached, char *buf, size_t len);
/* The page cache as --cache asks, before a run; *state says what it is. */
void set_cache(struct stk_loader *l, const struct bench_opts *o, const int64_t *order,
	       uint64_t n, const char **state);
/* One measured loader run from epoch0 (after a ramp), recording the order it
 * delivered for the baseline.  0 or <0 (the loader's error, said). */
int run_loader(struct stk_loader *l, const struct bench_opts *o, uint64_t epoch0, struct run *r,
	       int64_t **order, uint64_t *norder);
/* How the baseline (the "plain read loop") reads a sample of l, in words:
 * open/read/close per file, or a pread per tar member. */
const char *plain_loop_reads(struct stk_loader *l);
/* The synchronous baseline over order[0..n) for as long as the loader's run. */
int run_baseline(struct stk_loader *l, const struct bench_opts *o, const int64_t *order, uint64_t n,
		 struct run *r, const struct stk_image_opts *img);
json_t *run_json(const struct run *r);
/* Frees what a run holds (its epochs' figures, the samples it named). */
void run_release(struct run *r);
/* bench/remote.c: remote data's transport and cache figures (none for local data). */
void bench_remote_print(struct stk_loader *l, double wall_s);
/* Remote data: each run's samples/s with the share of its reads the local
 * cache served (a run from the cache is epoch 2's speed, not the store's). */
void bench_remote_runs(const struct run *runs, int n);
/* Remote data with the local cache on: the cache's hits and reads so far
 * (0 and false otherwise). */
bool bench_remote_cache(struct stk_loader *l, uint64_t *hits, uint64_t *reads);
json_t *bench_remote_json(struct stk_loader *l);
/* run_json with the loader's stats: latencies, reads in flight, decode. */
json_t *stats_json(const struct run *r);
/* Image mode, per format decoded (bench/stats.c): "formats  JPEG n images/s
 * per core, ..." (1; 0 and nothing printed for JPEG only) and its JSON
 * ({"jpeg": {...}, ...}, formats not seen left out). */
int print_formats(const struct stk_stats *st);
json_t *formats_json(const struct stk_stats *st);
/* Every option in effect as the table's text; img NULL in raw mode. */
json_t *options_json(const struct stk_loader_opts *lo, const struct stk_image_opts *img);
/* The loader's options from the parsed ones: PATH, and image mode's. */
void loader_opts(const struct bench_opts *o, struct stk_loader_opts *lo,
		 struct stk_image_opts *img);
/* Classes: the folder's, or the distinct labels of shards and file lists. */
int64_t count_classes(struct stk_loader *l);

/* bench/video.c: --video.  The video rows with flags of their own; the
 * options checked and completed from the shared flags (--size, the crop's),
 * or -1 said on stderr; the report's clips/s and frames/s lines, its decode
 * line, and the JSON's "video" object (NULL outside video mode). */
extern const char *const bench_video_rows[];
int bench_video_setup(struct bench_opts *o);
void bench_video_print(struct stk_loader *l, const struct run *S, int n);
void bench_video_decode_print(struct stk_loader *l, const struct stk_stats *st);
json_t *bench_video_json(struct stk_loader *l, const struct run *S, int n,
			 const struct stk_stats *st);

/* The verdict as bench's JSON has it: kind, evidence, try, and the device. */
json_t *verdict_json(const struct stk_verdict *v);
/* The device behind PATH as the verdict sampled it (iostat -x's figures). */
void device_print(const struct stk_verdict *v);
/* The verdict's human lines: verdict and try. */
void verdict_print(const struct stk_verdict *v);

/* --vs torch: PyTorch's DataLoader over the same samples (python3 -m
 * stoker.vs_torch) at num_workers 0, 2 and the CPUs, and stoker's Python
 * binding, every side timed by one rule (start-up, --ramp, a window of
 * --runtime): its JSON, or NULL with the reason in why (no interpreter,
 * torch not importable, ...). */
json_t *bench_vs_torch(const struct bench_opts *o, const struct stk_loader_opts *lo,
		       const struct stk_image_opts *img, uint64_t samples, char *why, size_t len);
/* Runs a Python helper (argv[0] an interpreter) with this tree's python/ on
 * PYTHONPATH and STOKER_LIB set to the library this process runs; its
 * stdout in *out (malloc'd); the exit status, or -errno when it cannot start. */
int bench_run_capture(char *const argv[], char **out);
/* bench_run_capture for a side started with BENCH_PY_BOOT("MODULE"): its
 * JSON result when it printed one holding key as a value of type (a jansson
 * JSON_* type), else NULL with the reason in why; when it could not import
 * (exit 3), NULL with why empty and the import error's line in ierr, for the
 * caller's install advice. */
json_t *bench_run_py(char *const argv[], const char *module, const char *key, int type,
		     char *ierr, size_t ielen, char *why, size_t len);
/* The crop both Python sides take: "--size W --crop-frac F --scale A B
 * --ratio A B" appended to argv at k, their text in a (which argv points
 * into: it must outlive argv); the new k. */
struct py_crop_args {
	char size[32], frac[32], scale[2][32], ratio[2][32];
};
int bench_py_crop_args(const struct stk_image_opts *img, struct py_crop_args *a,
		       const char **argv, int k);
/* python3 -c BENCH_PY_BOOT("vs_torch") ARGS: stoker.MODULE's main(ARGS), or
 * exit 3 with the import error on stdout (one line, no traceback) when
 * PyTorch or the package cannot be imported. */
#define BENCH_PY_BOOT(module)                                                                    \
	"import sys\ntry:\n import torch\n from stoker." module " import main\n"                 \
	"except Exception as e:\n print('%s: %s' % (type(e).__name__, e)); sys.exit(3)\n"          \
	"sys.exit(main(sys.argv[1:]))"

/* --vs NAME,...: "torch" alone is bench_vs_torch's (Debian's interpreter);
 * anything else runs python3 -m stoker.vs_peers in the peers' venv (bench/
 * peers.c).  bench_vs_check: 0, or -1 with the reason for a bad list. */
int bench_vs_check(const char *vs, char *why, size_t len);
/* Every name of the comma list vs among names (NULL-ended): 0, or -1 with
 * the reason naming the kind ("peer", "video peer") and the names known. */
int bench_vs_names(const char *vs, const char *const *names, const char *kind, char *why,
		   size_t len);
bool bench_vs_torch_only(const char *vs);
json_t *bench_vs_peers(const struct bench_opts *o, const struct stk_loader_opts *lo,
		       const struct stk_image_opts *img, char *why, size_t len);
void vs_peers_print(const json_t *vp);
/* The peers' venv interpreter into buf (STOKER_PEERS_PYTHON, STOKER_PEERS,
 * the cache's stoker/peers); 0, or -1 with where it was looked for in dir. */
int bench_peers_python(char *buf, size_t len, char *dir, size_t dlen);
/* --video --vs NAME,...: the video peers (bench/vs_video.c, python3 -m
 * stoker.vs_video in the peers' venv).  The check: 0, or -1 with the reason
 * (a name that is no video peer, options the peers cannot match). */
int bench_vs_video_check(const char *vs, const struct stk_video_opts *v, char *why, size_t len);
json_t *bench_vs_video(const struct bench_opts *o, const struct stk_loader_opts *lo,
		       const struct stk_video_opts *v, uint32_t decode_threads, char *why,
		       size_t len);
/* stoker bench PATH1 PATH2 ...: the paths side by side (bench/paths.c). */
int bench_paths(struct bench_opts *o, char **paths, int n);
/* Its lines in bench's human report: each side's start-up and steady rate,
 * and stoker's ratio to the best DataLoader's (the steady rates). */
void vs_torch_print(const json_t *vt);

#endif
