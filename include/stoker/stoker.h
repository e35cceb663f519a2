/*
 * stoker — keeps GPUs fed.  The public C API of libstoker.
 *
 * Conventions (see shared/STYLE.md):
 *  - functions return 0 (or a count) on success and a negative code on failure:
 *    -errno for system errors, or one of the STK_E* codes below; errno is never set;
 *  - opaque handles come in create/destroy pairs; option structs are passed by
 *    const pointer, all-zero means "defaults", and their first field is their size;
 *  - strings and options are copied at create: the caller may free them after.
 */
#ifndef STOKER_STOKER_H
#define STOKER_STOKER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(STK_BUILDING) && defined(__GNUC__)
#define STK_API __attribute__((visibility("default")))
#else
#define STK_API
#endif

#define STK_VERSION_MAJOR 0
#define STK_VERSION_MINOR 1
#define STK_VERSION_PATCH 0

/* The library's version at run time, e.g. "0.1.0". */
STK_API const char *stk_version(void);

/* ------------------------------------------------------------------------ */
/* Errors.  Any thread.                                                     */

/* Library-specific codes, below the errno range.  X(name, value, message). */
#define STK_ERR_MAP(X)                                                        \
	X(SHORT, -1001, "short read: the file is smaller than when indexed")   \
	X(CORRUPT, -1002, "corrupt sample")                                    \
	X(INDEX, -1003, "index file is invalid or from another version")       \
	X(EMPTY, -1004, "the dataset has no samples")                          \
	X(FORMAT, -1005, "unsupported format")                                 \
	X(TOOBIG, -1006, "sample larger than the batch slot")                  \
	X(NOSLOT, -1007, "every batch slot is held by the consumer")

enum stk_err {
#define STK__ERR_ENUM(name, value, msg) STK_E##name = (value),
	STK_ERR_MAP(STK__ERR_ENUM)
#undef STK__ERR_ENUM
};

/* A static message for a code returned by this library (-errno or STK_E*). */
STK_API const char *stk_strerror(int err);
/* The code's symbolic name: "ENOENT", "STK_ESHORT", ...  Static string. */
STK_API const char *stk_err_name(int err);

/* ------------------------------------------------------------------------ */
/* Latency histograms.  Log-linear buckets (128 per power of two: at most
 * 0.8 % relative error), values in nanoseconds.  stk_hist_add may be called
 * from several threads at once; reading while adding gives a consistent-enough
 * snapshot (each bucket is read atomically).                               */

struct stk_hist;

/* Allocates an empty histogram.  Free with stk_hist_destroy. */
STK_API int stk_hist_create(struct stk_hist **out);
STK_API void stk_hist_destroy(struct stk_hist *h);
STK_API void stk_hist_reset(struct stk_hist *h);
/* Records one value (ns). */
STK_API void stk_hist_add(struct stk_hist *h, uint64_t value);
/* Adds src's counts into dst: histograms from several threads combine exactly. */
STK_API void stk_hist_merge(struct stk_hist *dst, const struct stk_hist *src);
STK_API uint64_t stk_hist_count(const struct stk_hist *h);
STK_API uint64_t stk_hist_min(const struct stk_hist *h);
STK_API uint64_t stk_hist_max(const struct stk_hist *h);
STK_API double stk_hist_mean(const struct stk_hist *h);
/* The value below which `pct` percent (0..100) of the values fall; 0 if empty. */
STK_API uint64_t stk_hist_percentile(const struct stk_hist *h, double pct);
/* Iterates the non-empty buckets: *cursor starts at 0; returns 1 with the
 * bucket's upper bound (inclusive) and count, 0 when done.  For exporters.  */
STK_API int stk_hist_bucket_next(const struct stk_hist *h, uint32_t *cursor,
				 uint64_t *upper, uint64_t *count);

/* ------------------------------------------------------------------------ */
/* The loader.  One consumer thread calls stk_loader_next / stk_batch_release /
 * stk_loader_start; stk_loader_stats, stk_loader_hist and the dataset queries
 * may be called from any thread.                                           */

struct stk_loader;

enum stk_engine {
	STK_ENGINE_AUTO = 0, /* io_uring, or pread when io_uring is unavailable */
	STK_ENGINE_URING,
	STK_ENGINE_PREAD,
	STK_ENGINE_NULL,     /* no I/O: fills samples with a pattern (tests) */
};

enum stk_on_error {
	STK_ON_ERROR_SKIP = 0, /* drop the sample from its batch and count it */
	STK_ON_ERROR_FAIL,     /* stk_loader_next returns the error */
};

/* Flags for stk_loader_opts.flags; zero gives the defaults. */
#define STK_F_NO_SHUFFLE (1u << 0) /* sampler order 0..n-1 */
#define STK_F_DROP_LAST  (1u << 1) /* drop the tail instead of padding/short batch */
#define STK_F_DIRECT     (1u << 2) /* O_DIRECT reads (falls back with a message) */
#define STK_F_NO_PIN     (1u << 3) /* never pin slots with the CUDA runtime */
#define STK_F_QUIET      (1u << 4) /* no notices on stderr (engine fallback...) */
#define STK_F_NO_CACHE   (1u << 5) /* do not read or write the index cache */

/* Image mode: each sample is decoded (JPEG) and cropped into a fixed-size
 * RGB image in the batch.  Zero fields take the defaults in brackets. */
enum stk_crop {
	STK_CROP_RANDOM_RESIZED = 0, /* training: torchvision's RandomResizedCrop */
	STK_CROP_CENTER,             /* validation: resize the short side, centre crop */
};
enum stk_dtype { STK_DTYPE_UINT8 = 0, STK_DTYPE_FLOAT32, STK_DTYPE_FLOAT16 };
#define STK_IMG_NO_FLIP   (1u << 0) /* no random horizontal flip (p = 0.5 otherwise) */
#define STK_IMG_NHWC      (1u << 1) /* channels last [NCHW] */
#define STK_IMG_NORMALIZE (1u << 2) /* float: (x / 255 - mean) / std [x / 255] */

struct stk_image_opts {
	uint32_t size;          /* sizeof(struct stk_image_opts) */
	uint32_t flags;         /* STK_IMG_* */
	uint32_t width, height; /* output [224 × 224] */
	enum stk_crop crop;
	enum stk_dtype dtype;
	float scale_min, scale_max; /* random crop: share of the area [0.08, 1] */
	float ratio_min, ratio_max; /* random crop: aspect ratio [3/4, 4/3] */
	float crop_frac;        /* centre crop: output / resized short side [0.875: 224 of 256] */
	float mean[3], std[3];  /* with STK_IMG_NORMALIZE */
	uint32_t decode_threads; /* [online CPUs − 1, at least 1] */
	uint64_t max_pixels;    /* larger images are refused before decoding [100 M] */
};

/* Bytes of one output image for these options. */
STK_API size_t stk_image_bytes(const struct stk_image_opts *opts);
/* Decodes and crops one JPEG as the loader would for sample `index` of
 * `epoch` under `seed`, into out (stk_image_bytes).  0, or <0 with the reason
 * in err (STK_ECORRUPT, STK_EFORMAT, STK_ETOOBIG, -ERANGE for options). */
STK_API int stk_image_decode(const struct stk_image_opts *opts, const void *data, size_t len,
			     uint64_t seed, uint64_t epoch, int64_t index, void *out,
			     char *err, size_t errlen);

struct stk_loader_opts {
	uint32_t size;        /* sizeof(struct stk_loader_opts); 0 is taken as current */
	uint32_t flags;       /* STK_F_* */
	const char *path;     /* folder (ImageFolder layout or flat) or file list */
	uint32_t batch_size;  /* samples per batch; 0 → 32 */
	uint32_t prefetch;    /* batch slots (batches in flight + ready); 0 → 4 */
	uint32_t queue_depth; /* reads in flight, all I/O threads together; 0 → 128 */
	uint32_t io_threads;  /* I/O threads (io_uring: one ring each; pread: workers); 0 → auto */
	uint64_t seed;
	uint64_t epoch;
	uint64_t start_batch; /* resume: batches of this epoch already consumed */
	uint32_t rank;
	uint32_t world_size;  /* 0 → 1 */
	enum stk_engine engine;
	enum stk_on_error on_error;
	const char *extensions; /* folder mode: comma list ".jpg,.png"; NULL → ImageFolder's; "*" → all */
	const char *cache_dir;  /* where indexes go when the data folder is read-only;
				   NULL → $XDG_CACHE_HOME/stoker or ~/.cache/stoker */
	uint64_t null_latency_ns; /* STK_ENGINE_NULL: each read completes after this long */
	uint64_t slot_bytes;    /* bytes per batch slot; 0 → the smaller of the batch_size
				   largest samples and a bound no real batch reaches */
	const struct stk_image_opts *image; /* non-NULL: image mode (copied at create) */
	enum stk_shuffle {
		STK_SHUFFLE_GLOBAL = 0, /* any sample after any other */
		STK_SHUFFLE_SHARD,      /* tar shards in random order, samples shuffled
					   within a window: near-sequential reads */
	} shuffle_mode;
	uint32_t shuffle_window; /* STK_SHUFFLE_SHARD: window in samples [1000] */
};

/* A batch: a read-only view owned by the loader, valid until stk_batch_release.
 * Sample i's bytes are data[offsets[i] .. offsets[i] + sizes[i]). */
struct stk_batch {
	uint64_t epoch;
	uint64_t number;        /* position in the epoch, from 0 */
	uint32_t count;         /* samples (fewer than batch_size when some were skipped) */
	uint32_t slot;          /* pool slot (for bindings that track memory) */
	uint8_t *data;          /* page-aligned */
	size_t data_bytes;      /* bytes of data in use */
	const uint64_t *offsets;
	const uint64_t *sizes;
	const int64_t *labels;  /* -1 for unlabelled samples */
	const int64_t *indices; /* dataset index of each sample */
	/* image mode: count images of image_bytes each, back to back */
	void *images;
	size_t image_bytes;
	uint32_t channels, height, width;
	enum stk_dtype dtype;
	uint32_t nhwc;          /* 1: N×H×W×C, 0: N×C×H×W */
};

/* Creates a loader: indexes the dataset (or loads the cached index), sizes and
 * allocates the pool, starts the I/O threads and the first batches' reads.
 * On failure returns <0, *out is NULL, and if errbuf is not NULL it receives
 * the reason naming the file (errbuf may be NULL). */
STK_API int stk_loader_create(struct stk_loader **out, const struct stk_loader_opts *opts,
			      char *errbuf, size_t errlen);
/* Stops the threads, waits for reads in flight, frees everything.  Batches
 * not yet released become invalid. */
STK_API void stk_loader_destroy(struct stk_loader *loader);
/* Stops the threads and waits for the reads in flight, but keeps the pool
 * mapped: batches held stay valid until stk_loader_destroy.  Afterwards
 * stk_loader_next returns -ECANCELED.  Idempotent; destroy calls it. */
STK_API void stk_loader_stop(struct stk_loader *loader);

/* The next batch of the epoch, in sampler order.  Returns 1 and sets *out, 0
 * at the end of the epoch, or <0 (see stk_last_error for the path and reason).
 * STK_ENOSLOT when every slot is held by the caller. */
STK_API int stk_loader_next(struct stk_loader *loader, struct stk_batch **out);
/* The same, giving up after timeout_ns: -ETIMEDOUT then, and the call may
 * be repeated (a binding polls with it to stay responsive to signals). */
STK_API int stk_loader_next_timeout(struct stk_loader *loader, struct stk_batch **out,
				    uint64_t timeout_ns);
/* Gives the batch's slot back to the pool.  Any order, and from any thread
 * (a binding may release when the last tensor over the slot is freed). */
STK_API void stk_batch_release(struct stk_loader *loader, struct stk_batch *batch);
/* (Re)starts at `epoch`, skipping `start_batch` batches: waits for reads in
 * flight, drops batches not yet handed out, then starts reading. */
STK_API int stk_loader_start(struct stk_loader *loader, uint64_t epoch, uint64_t start_batch);

/* The resume point: restoring (seed, epoch, batches) reproduces the rest. */
struct stk_loader_state {
	uint64_t seed;
	uint64_t epoch;
	uint64_t batches; /* handed out so far in this epoch */
};
STK_API void stk_loader_state(const struct stk_loader *loader, struct stk_loader_state *out);

/* The resume point of an epoch, for any number of ranks (elastic resume).  An
 * epoch may run in segments, each on its own world size; ranks step together,
 * so segment i is segments[i].batches batches on each of its world_size
 * ranks, and every rank's resume point is the same: save any rank's.  The
 * fingerprint identifies the dataset (every sample's path, size, offset and
 * label); the order options are kept so that a point is only ever applied to
 * the order it was taken in. */
#define STK_RESUME_SEGMENTS 16
struct stk_resume_segment {
	uint32_t world_size;
	uint32_t reserved;   /* 0 */
	uint64_t batches;    /* on each rank */
};
struct stk_resume {
	uint32_t size;       /* sizeof(struct stk_resume) */
	uint32_t nsegments;  /* 1..STK_RESUME_SEGMENTS; the last one is the current */
	uint64_t fingerprint;
	uint64_t seed;
	uint64_t epoch;
	uint32_t batch_size;
	uint32_t flags;      /* the saver's STK_F_NO_SHUFFLE and STK_F_DROP_LAST */
	uint32_t shuffle_mode; /* enum stk_shuffle */
	uint32_t shuffle_window; /* shard shuffle's window; 0 for global */
	struct stk_resume_segment segments[STK_RESUME_SEGMENTS];
};
/* Fills *out (out->size set by the caller, or 0) with where the loader is:
 * 0, or <0.  Any thread.  The first call hashes the index (about 30 ns a
 * sample). */
STK_API int stk_loader_resume_point(const struct stk_loader *loader, struct stk_resume *out);
/* Restarts at a resume point saved by any number of ranks: the rest of its
 * epoch is split over this loader's world_size (whole shards under shard
 * shuffle), so every sample not yet read is read once across the new ranks,
 * repeated only for the padding equal shares need.  The same world size
 * continues exactly as the uninterrupted run.  0; or -EINVAL (another
 * dataset, seed, batch size or order options), -ERANGE (more batches than the
 * epoch had), -E2BIG (STK_RESUME_SEGMENTS world sizes in one epoch), with the
 * reason in stk_last_error; the loader is then unchanged. */
STK_API int stk_loader_resume(struct stk_loader *loader, const struct stk_resume *point);

/* Detail of the last error: "<path>: <reason>".  Owned by the loader; valid
 * until the next call on it. */
STK_API const char *stk_last_error(const struct stk_loader *loader);

/* Batches per epoch for this rank, and samples per epoch for this rank. */
STK_API int64_t stk_loader_len(const struct stk_loader *loader);
STK_API int64_t stk_loader_rank_samples(const struct stk_loader *loader);
/* The dataset: sample count, and one sample's path, size and label. */
STK_API int64_t stk_loader_num_samples(const struct stk_loader *loader);
STK_API int stk_loader_sample(const struct stk_loader *loader, int64_t index, char *path,
			      size_t pathlen, uint64_t *size, int64_t *label);
/* Where sample `index`'s bytes lie, as the loader reads them: its file (as
 * stk_loader_sample gives it), the offset in that file (a tar shard's member
 * starts past its header; 0 for a sample that is a whole file) and the size.
 * Any out pointer may be NULL.  0, -ERANGE or -ENAMETOOLONG. */
STK_API int stk_loader_sample_extent(const struct stk_loader *loader, int64_t index, char *path,
				     size_t pathlen, uint64_t *offset, uint64_t *size);
/* Number of classes (folder mode) and a class name (static until destroy). */
STK_API int64_t stk_loader_num_classes(const struct stk_loader *loader);
STK_API const char *stk_loader_class_name(const struct stk_loader *loader, int64_t label);
/* The engine in use: "io_uring", "pread" or "null". */
STK_API const char *stk_loader_engine(const struct stk_loader *loader);

/* A snapshot of the loader's counters.  Times in seconds, latencies in ns.
 * samples, bytes, batches and errors count the batches handed out by
 * stk_loader_next: a batch's failed samples are counted with it, so a reset
 * or a restart never loses the errors of a batch the consumer then gets. */
struct stk_stats {
	uint32_t size;         /* set by the caller: sizeof(struct stk_stats) */
	uint64_t samples;      /* delivered to the consumer */
	uint64_t bytes;        /* of those samples */
	uint64_t batches;
	uint64_t errors;       /* samples that failed (skipped or fatal), plus index_errors */
	uint64_t pool_bytes;   /* fixed pool memory: slots × slot size */
	uint32_t pinned;       /* 1 when the pool is registered with CUDA */
	uint32_t inflight_max; /* most reads in flight at once */
	double inflight_mean;  /* time-weighted mean of reads in flight */
	double wall_s;         /* since create, the last stk_loader_start or stats reset */
	double wait_s;         /* consumer time spent waiting in stk_loader_next */
	double stall_ratio;    /* wait_s / wall_s */
	uint64_t wait_p50_ns, wait_p99_ns, wait_max_ns;
	uint64_t read_p50_ns, read_p99_ns, read_max_ns;
	uint32_t decode_threads;  /* image mode */
	double decode_busy_s;     /* time decode threads spent decoding */
	uint64_t decode_p50_ns, decode_p99_ns;
	uint64_t index_errors;    /* files or shards the index left out by the error policy
				     (unreadable when indexed, damaged shards): counted once, at
				     create, and kept by stk_loader_stats_reset */
};
STK_API int stk_loader_stats(const struct stk_loader *loader, struct stk_stats *out);

/* Zeroes the counters and histograms (e.g. after a warm-up pass), except
 * index_errors.  Any time, before or after stk_loader_start: what is counted
 * afterwards is exactly the batches handed out afterwards.  The time base
 * (wall_s, wait_s, the in-flight mean) restarts at every stk_loader_start and
 * at this call. */
STK_API void stk_loader_stats_reset(struct stk_loader *loader);

enum stk_hist_kind {
	STK_HIST_BATCH_WAIT = 0, /* consumer's wait in stk_loader_next ("dataloader time") */
	STK_HIST_READ,           /* submit → completion of each sample's read */
	STK_HIST_DECODE,         /* image mode: one sample's decode and crop */
};
/* Merges the loader's histogram into dst (e.g. a fresh one). */
STK_API int stk_loader_hist(const struct stk_loader *loader, enum stk_hist_kind kind,
			    struct stk_hist *dst);

/* ------------------------------------------------------------------------ */
/* Raw I/O through the loader's own read engines (io_uring, the pread pool,
 * null): what `stoker disk` measures with, so a storage figure is the read
 * path the loader uses.  An engine belongs to one thread, which calls
 * submit and reap; stk_ioengine_wake may be called from any thread.        */

struct stk_ioengine;

enum stk_io_op {
	STK_IO_READ_FILE = 0, /* open path (relative to dir_fd), read len bytes at offset, close */
	STK_IO_READ,          /* read len bytes at offset of fd */
	STK_IO_WRITE,         /* write len bytes at offset of fd */
};

/* One I/O.  The caller owns it and keeps it, its path and its buffer alive
 * until reap hands it back. */
struct stk_io {
	uint32_t op;          /* enum stk_io_op */
	int32_t fd;           /* STK_IO_READ, STK_IO_WRITE: an open descriptor */
	const char *path;     /* STK_IO_READ_FILE */
	void *buf;
	uint64_t len;         /* bytes asked for (O_DIRECT: a multiple of the block size) */
	uint64_t offset;
	int32_t buf_index;    /* the registered buffer (opts.buf_area) holding buf, or -1 */
	uint32_t reserved;
	int64_t res;          /* at completion: bytes transferred (fewer at end of file), or -errno */
	uint64_t user_data;   /* the caller's */
	struct {              /* the engine's bookkeeping: leave alone */
		struct stk_io *next;
		uint64_t t;
		uint32_t file_slot, pending;
	} priv;
};

#define STK_IOENG_DIRECT (1u << 0) /* READ_FILE opens with O_DIRECT; buffers get registered */

struct stk_ioengine_opts {
	uint32_t size;            /* sizeof(struct stk_ioengine_opts); 0 is taken as current */
	uint32_t flags;           /* STK_IOENG_* */
	enum stk_engine engine;   /* AUTO: io_uring, else the pread pool */
	uint32_t queue_depth;     /* I/Os in flight at most; 0 → 32 */
	uint32_t workers;         /* pread: threads; 0 → queue_depth */
	int32_t dir_fd;           /* READ_FILE paths are relative to it; 0 → the working folder */
	void *buf_area;           /* optional: nbufs buffers of buf_bytes each, back to back, */
	uint64_t buf_bytes;       /*   registered with io_uring under STK_IOENG_DIRECT (fewer */
	uint32_t nbufs;           /*   page pins per read); buf_index counts in them */
	uint64_t null_latency_ns; /* STK_ENGINE_NULL: each I/O completes after this long */
};

/* Creates an engine.  0, or <0 with the reason in errbuf.  With engine AUTO
 * and io_uring unavailable it falls back to the pread pool, and errbuf says
 * why (stk_ioengine_name tells which one runs).  errbuf may be NULL. */
STK_API int stk_ioengine_create(struct stk_ioengine **out, const struct stk_ioengine_opts *opts,
				char *errbuf, size_t errlen);
/* Queues n I/Os; the caller keeps the number in flight within queue_depth.
 * They reach the kernel at the latest in the next reap, which submits and
 * collects in one system call (as fio's io_uring engine does).  0 or <0. */
STK_API int stk_ioengine_submit(struct stk_ioengine *e, struct stk_io **ios, unsigned n);
/* Hands finished I/Os back into done (room for max).  With wait != 0 it
 * blocks until one finishes or stk_ioengine_wake is called.  Count or <0. */
STK_API int stk_ioengine_reap(struct stk_ioengine *e, struct stk_io **done, unsigned max,
			      int wait);
/* Makes a blocked (or the next) reap return.  Any thread. */
STK_API void stk_ioengine_wake(struct stk_ioengine *e);
/* "io_uring", "pread" or "null". */
STK_API const char *stk_ioengine_name(const struct stk_ioengine *e);
/* Waits for the I/Os still in flight, then frees the engine. */
STK_API void stk_ioengine_destroy(struct stk_ioengine *e);

/* Per-user cache folder ($XDG_CACHE_HOME/stoker, else ~/.cache/stoker), written
 * to buf; created if missing.  Returns the length or <0. */
STK_API int stk_cache_dir(char *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif
