/*
 * stoker/options.h — the option table: every option of struct
 * stk_loader_opts, struct stk_image_opts and struct stk_video_opts with its
 * default, range and one line of help, and the parsers of sizes and
 * durations that read them.  One owner: the CLI's flags, Python's keyword
 * arguments and docs/options.md read these rows.  Included by
 * stoker/stoker.h, which a program includes.
 *
 * Conventions: those of stoker/stoker.h.
 */
#ifndef STOKER_OPTIONS_H
#define STOKER_OPTIONS_H

#include <stddef.h>
#include <stdint.h>

#include "stoker/stoker.h"

#ifdef __cplusplus
extern "C" {
#endif
/* The option table: every option of struct stk_loader_opts and struct
 * stk_image_opts with its default, range and one line of help.  The library
 * applies the defaults (a zero field takes its option's default) and checks
 * the ranges at create; the CLI's flags and --help, the Python keyword
 * arguments and docs/options.md are generated from it (stk_option_at), so no
 * front end keeps a default or a range of its own.  Static; any thread.
 *
 * X(group, name, alias, type, field, bit, def, min, max, choices, help)
 *   group    LOADER (struct stk_loader_opts) or IMAGE (struct stk_image_opts)
 *   name     Python's keyword; the CLI's --long-name with '-' for '_' (an
 *            option on by default, FLAG or NOFLAG, is --no-NAME there)
 *   alias    NULL, or other names, comma-separated: a letter is the CLI's
 *            short flag (-q); a word is taken for the name by stk_option_find,
 *            Python's keywords and `stoker bench --sweep` (qd, threads)
 *   type     U32, U64 (with bit STK_OPT_BYTES: a size in bytes, which takes
 *            units: "64MiB", "1.5G", as stk_parse_size reads them), FLOAT,
 *            FLOAT3 ("a,b,c"), DURATION (a field in ns: "5ms", "200us", "2s",
 *            "1m", or a bare count of ns; stk_parse_duration), STR, ENUM (index of
 *            one of `choices`; a unique prefix is accepted), FLAG (`bit` of
 *            the flags field set = on), NOFLAG (bit set = off), BITCHOICE
 *            (`choices` "a,b": b sets `bit`, a clears it)
 *   def      the default as text; a zero field means it
 *   min, max the inclusive range of a numeric option; min == max: no range
 *   choices  ENUM/BITCHOICE: the names; numeric: the name of the value 0,
 *            which then means "chosen by the library" (e.g. "auto"); 0
 *            itself is that value in every front end (CLI, Python, C)     */
#define STK_LOADER_OPTIONS(X)                                                                    \
	X(LOADER, batch_size, "batch,b", U32, batch_size, 0, "256", 1, 1048576, NULL,            \
	  "samples per batch")                                                                   \
	X(LOADER, prefetch, "p", U32, prefetch, 0, "4", 1, 1024, NULL,                           \
	  "batch slots: batches being read, ready, or held by the consumer")                     \
	X(LOADER, queue_depth, "qd,q", U32, queue_depth, 0, "auto", 1, 32768, "auto",            \
	  "reads in flight, all I/O threads together (auto: probed at the start and when the "   \
	  "rate changes for where throughput stops rising; stk_loader_tuning says why); an "     \
	  "io_uring ring holds 10920 and at most ulimit -n: a deeper queue is cut, and said")   \
	X(LOADER, io_threads, "threads,t", U32, io_threads, 0, "auto", 1, 256, "auto",           \
	  "I/O threads (auto: 2 io_uring rings, 1 when the rank's CPU share is below 4; or 64 "  \
	  "pread workers)")                                                                      \
	X(LOADER, engine, "e", ENUM, engine, 0, "auto", 0, 0, "auto,io_uring,pread,null",        \
	  "read engine (auto: io_uring, else the pread pool, said once; null: no I/O, tests)")   \
	X(LOADER, seed, NULL, U64, seed, 0, "0", 0, 0, NULL, "shuffle and augmentation seed")    \
	X(LOADER, rank, NULL, U32, rank, 0, "0", 0, 1048575, NULL,                               \
	  "this process's rank (0 with world_size auto: the launcher's $RANK, if any)")          \
	X(LOADER, world_size, NULL, U32, world_size, 0, "auto", 1, 1048576, "auto",              \
	  "number of ranks sharing each epoch (auto: $WORLD_SIZE from torchrun, else Open "      \
	  "MPI's $OMPI_COMM_WORLD_SIZE, else 1)")                                                \
	X(LOADER, shuffle, NULL, NOFLAG, flags, STK_F_NO_SHUFFLE, "true", 0, 0, NULL,            \
	  "a seeded permutation per epoch (off: index order)")                                   \
	X(LOADER, shuffle_mode, NULL, ENUM, shuffle_mode, 0, "global", 0, 0, "global,shard",     \
	  "tar shards: any sample after any other, or shards in random order with samples "      \
	  "shuffled in a window (near-sequential reads)")                                        \
	X(LOADER, shuffle_window, NULL, U32, shuffle_window, 0, "1000", 1, 16777216, NULL,       \
	  "shuffle_mode shard: the window, in samples")                                          \
	X(LOADER, drop_last, NULL, FLAG, flags, STK_F_DROP_LAST, "false", 0, 0, NULL,            \
	  "drop the tail that does not fill a batch (else the last batch is short)")             \
	X(LOADER, on_error, NULL, ENUM, on_error, 0, "skip", 0, 0, "skip,fail,replace",          \
	  "a missing, unreadable, short or corrupt sample is skipped (the batch is shorter), "   \
	  "ends the epoch, or is replaced by another sample drawn from (seed, epoch, index) "    \
	  "(every batch full); always counted and named")                                        \
	X(LOADER, direct, NULL, FLAG, flags, STK_F_DIRECT, "false", 0, 0, NULL,                  \
	  "O_DIRECT reads (a filesystem that refuses them gets buffered reads, said once); "     \
	  "neither direct nor buffered: O_DIRECT when the dataset is larger than the page cache") \
	X(LOADER, buffered, NULL, FLAG, flags, STK_F_BUFFERED, "false", 0, 0, NULL,              \
	  "buffered reads whatever the dataset's size")                                          \
	X(LOADER, pin, NULL, NOFLAG, flags, STK_F_NO_PIN, "true", 0, 0, NULL,                    \
	  "pin the pool with the CUDA runtime when it is present")                               \
	X(LOADER, quiet, NULL, FLAG, flags, STK_F_QUIET, "false", 0, 0, NULL,                    \
	  "no notices on stderr (engine fallback, index rebuilt, ...)")                          \
	X(LOADER, index_cache, NULL, NOFLAG, flags, STK_F_NO_CACHE, "true", 0, 0, NULL,          \
	  "read and write the index cache")                                                      \
	X(LOADER, index_beside, NULL, FLAG, flags, STK_F_INDEX_BESIDE, "false", 0, 0, NULL,      \
	  "write the index cache beside the data (ROOT/.stoker-index) instead of cache_dir")     \
	X(LOADER, extensions, NULL, STR, extensions, 0, "", 0, 0, NULL,                          \
	  "folder mode: extensions to index, \".jpg,.png\" or \"*\" (default: ImageFolder's; "    \
	  "in video mode .mp4,.m4v,.mov,.mkv,.webm)")                                           \
	X(LOADER, cache_dir, NULL, STR, cache_dir, 0, "", 0, 0, NULL,                            \
	  "where index caches go (default: ~/.cache/stoker), unless index_beside")               \
	X(LOADER, slot_bytes, NULL, U64, slot_bytes, STK_OPT_BYTES, "auto", 1, 1099511627776.0,  \
	  "auto",                                                                                \
	  "bytes per batch slot (auto: from the dataset's sample sizes, the pool within half "   \
	  "of the memory; a sample larger than that is an error of its own, named)")             \
	X(LOADER, read_bytes, NULL, U64, read_bytes, STK_OPT_BYTES, "0", 0, 1099511627776.0,     \
	  NULL,                                                                                  \
	  "raw mode: read only the first N bytes of each sample (0: whole samples), as a "       \
	  "storage test that reads 1 KiB of each file does")                                     \
	X(LOADER, null_latency, "null_latency_ns", DURATION, null_latency_ns, 0, "0", 0, 3.6e12, NULL, \
	  "engine null: each read completes after this long (tests, pipeline overhead)")         \
	X(LOADER, local_rank, NULL, U32, local_rank, 0, "0", 0, 1048575, NULL,                   \
	  "this process's place among the ranks on this host (with local_world_size)")           \
	X(LOADER, local_world_size, NULL, U32, local_world_size, 0, "auto", 1, 1048576, "auto",  \
	  "ranks sharing this host's CPUs (auto: $LOCAL_WORLD_SIZE from torchrun, else Open "    \
	  "MPI's $OMPI_COMM_WORLD_LOCAL_SIZE, else none: nothing pinned)")                       \
	X(LOADER, affinity, NULL, NOFLAG, flags, STK_F_NO_AFFINITY, "true", 0, 0, NULL,          \
	  "with ranks sharing the host: pin the loader's threads to this rank's CPU share, off " \
	  "the training thread's CPU")                                                           \
	X(LOADER, remote_cache, NULL, NOFLAG, flags, STK_F_NO_REMOTE_CACHE, "true", 0, 0, NULL,  \
	  "s3:// and http(s):// data: keep the bytes read in a local cache (cache_dir/remote), " \
	  "shared by the host's processes, so later epochs read from local disk")               \
	X(LOADER, cache_limit, NULL, U64, cache_limit, STK_OPT_BYTES, "auto", 1,                 \
	  1125899906842624.0, "auto",                                                            \
	  "remote data: the local cache's size bound, least recently used out first (auto: a " \
	  "quarter of the free space where it lives, at most 100 GiB)")                          \
	X(LOADER, remote_timeout, "remote_timeout_ns", DURATION, remote_timeout_ns, 0, "30s", 1e6, \
	  3.6e12, NULL, "remote data: a request's whole time-out, then it is tried again "       \
	  "(STOKER_REMOTE_TIMEOUT_MS, when set, overrides it)")                                  \
	X(LOADER, remote_connect_timeout, "remote_connect_timeout_ns", DURATION,                 \
	  remote_connect_timeout_ns, 0, "5s", 1e6, 6e11, NULL,                                   \
	  "remote data: a connection's time-out (STOKER_REMOTE_CONNECT_TIMEOUT_MS overrides it)") \
	X(LOADER, remote_tries, NULL, U32, remote_tries, 0, "auto", 1, 100, "auto",              \
	  "remote data: tries of a request at most, the first included (auto: as many as "      \
	  "remote_retry_time allows; STOKER_REMOTE_TRIES overrides it)")                         \
	X(LOADER, remote_retry_time, "remote_retry_time_ns", DURATION, remote_retry_time_ns, 0,  \
	  "60s", 1e6, 3.6e12, NULL, "remote data: how long a request that fails for a passing "  \
	  "cause (5xx, SlowDown, reset, time-out, short body) is tried again, with capped "     \
	  "exponential backoff and jitter between tries and the server's Retry-After honoured; " \
	  "then on_error decides (STOKER_REMOTE_RETRY_MS overrides it)")

#define STK_IMAGE_OPTIONS(X)                                                                     \
	X(IMAGE, width, NULL, U32, width, 0, "224", 1, 8192, NULL, "output width in pixels")     \
	X(IMAGE, height, NULL, U32, height, 0, "224", 1, 8192, NULL,                             \
	  "output height in pixels (not given: the width)")                                      \
	X(IMAGE, crop, NULL, ENUM, crop, 0, "random_resized", 0, 0, "random_resized,center",     \
	  "training's RandomResizedCrop, or validation's resize + centre crop")                  \
	X(IMAGE, flip, NULL, NOFLAG, flags, STK_IMG_NO_FLIP, "true", 0, 0, NULL,                 \
	  "random horizontal flip, p = 0.5 (crop random_resized)")                               \
	X(IMAGE, layout, NULL, BITCHOICE, flags, STK_IMG_NHWC, "nchw", 0, 0, "nchw,nhwc",        \
	  "N x C x H x W, or channels last")                                                     \
	X(IMAGE, dtype, NULL, ENUM, dtype, 0, "uint8", 0, 0, "uint8,float32,float16",            \
	  "element type: 0..255, or x / 255 (normalized with normalize)")                        \
	X(IMAGE, normalize, NULL, FLAG, flags, STK_IMG_NORMALIZE, "false", 0, 0, NULL,           \
	  "float output is (x / 255 - mean) / std")                                              \
	X(IMAGE, keep_raw, NULL, FLAG, flags, STK_IMG_KEEP_RAW, "false", 0, 0, NULL,             \
	  "each batch keeps its samples' file bytes beside the images (stk_batch.data; "         \
	  "Python: ImageBatch.raw); else they are read into a separate pool of read areas "     \
	  "(read_areas), reused as soon as their batch is decoded, and a slot holds only "      \
	  "images")                                                                              \
	X(IMAGE, jpeg_cache, NULL, FLAG, flags, STK_IMG_JPEG_CACHE, "false", 0, 0, NULL,         \
	  "folders and file lists: each JPEG, the first time it is read, is rewritten "         \
	  "losslessly (stk_jpeg_transcode: the same pixels, restart intervals) into "            \
	  "cache_dir/jpeg/, and read from there from then on, checked against its file first; " \
	  "about the images' size again on disk; the epoch that writes them 2-4x the CPU")     \
	X(IMAGE, jpeg_cache_limit, NULL, U64, jpeg_cache_limit, STK_OPT_BYTES, "auto", 1,       \
	  1125899906842624.0, "auto",                                                            \
	  "jpeg_cache: the bound on the copies of every dataset in the cache folder (auto: a "   \
	  "quarter of the free space where they live plus what they take, at most 100 GiB); "    \
	  "once reached no more are made in the run; at create the dataset's copies above it, " \
	  "those of files no longer in the dataset, and those of datasets gone are removed")    \
	X(IMAGE, mean, NULL, FLOAT3, mean, 0, "0.485,0.456,0.406", 0, 0, NULL,                   \
	  "normalize: per-channel mean (ImageNet's; all-zero mean and std take these)")          \
	X(IMAGE, std, NULL, FLOAT3, std, 0, "0.229,0.224,0.225", 0, 0, NULL,                     \
	  "normalize: per-channel standard deviation, each > 0 (ImageNet's)")                    \
	X(IMAGE, scale_min, NULL, FLOAT, scale_min, 0, "0.08", 0, 1, NULL,                       \
	  "random_resized: smallest share of the area, in (0, scale_max]")                       \
	X(IMAGE, scale_max, NULL, FLOAT, scale_max, 0, "1", 0, 1, NULL,                          \
	  "random_resized: largest share of the area, in [scale_min, 1]")                        \
	X(IMAGE, ratio_min, NULL, FLOAT, ratio_min, 0, "0.75", 0, 1000, NULL,                    \
	  "random_resized: smallest aspect ratio, in (0, ratio_max]")                            \
	X(IMAGE, ratio_max, NULL, FLOAT, ratio_max, 0, "1.3333334", 0, 1000, NULL,               \
	  "random_resized: largest aspect ratio")                                                \
	X(IMAGE, crop_frac, NULL, FLOAT, crop_frac, 0, "0.875", 0, 1, NULL,                      \
	  "center: output / resized short side (224 of 256)")                                    \
	X(IMAGE, decode_threads, NULL, U32, decode_threads, 0, "auto", 1, 1024, "auto",          \
	  "decode threads (auto: the rank's CPU share less one, at least 1; one process: usable " \
	  "CPUs - 1)")                                                                           \
	X(IMAGE, max_pixels, NULL, U64, max_pixels, 0, "100000000", 1, 1099511627776.0, NULL,    \
	  "larger images are refused before any allocation")                                     \
	X(IMAGE, max_scans, NULL, U32, max_scans, 0, "100", 1, 65535, NULL,                       \
	  "a progressive JPEG with more scans is refused when the decoder reaches the next "     \
	  "(a scan bomb; ordinary encoders write at most a few dozen)")                          \
	X(IMAGE, max_decode_time, NULL, DURATION, max_decode_ns, 0, "5s", 1000000, 3.6e12, NULL, \
	  "a decode that takes more CPU time than this (the decode thread's own) is stopped "    \
	  "and the sample refused")                                                              \
	X(IMAGE, read_areas, NULL, U32, read_areas, 0, "auto", 1, 64, "auto",                    \
	  "without keep_raw: read areas, a batch's reads each, given back once the batch is "    \
	  "decoded (auto: enough for 256 reads in flight, one at batch 256; two for remote "     \
	  "data; never more than prefetch)")

/* The video options (struct stk_video_opts), the same columns.  Their rows
 * are a list of their own (stk_video_option_at, stk_video_option_find): some
 * names repeat the image rows' (crop, flip, layout, scale_min, ...), and the
 * front ends that read stk_option_at know two structs. */
#define STK_VIDEO_OPTIONS(X)                                                                     \
	X(VIDEO, frames, NULL, U32, frames, 0, "16", 1, 1024, NULL, "frames per clip (T)")       \
	X(VIDEO, stride, NULL, U32, stride, 0, "1", 1, 1000, NULL,                               \
	  "take every stride-th frame of the video (by the stream's frame times)")               \
	X(VIDEO, fps, NULL, FLOAT, fps, 0, "0", 0, 1000, NULL,                                   \
	  "> 0: the frame nearest each 1/fps step instead of stride (0: stride)")                \
	X(VIDEO, size, NULL, U32, out_size, 0, "224", 8, 4096, NULL,                             \
	  "output side in pixels (square frames)")                                               \
	X(VIDEO, crop, NULL, ENUM, crop, 0, "random", 0, 0, "random,center",                     \
	  "one RandomResizedCrop box (and flip) for the whole clip, or resize + centre crop; "   \
	  "and the clip's start: random, or the clips spread evenly over the video")             \
	X(VIDEO, flip, NULL, NOFLAG, flags, STK_VID_NO_FLIP, "true", 0, 0, NULL,                 \
	  "random horizontal flip of the whole clip, p = 0.5 (crop random)")                     \
	X(VIDEO, scale_min, NULL, FLOAT, scale_min, 0, "0.08", 0, 1, NULL,                       \
	  "random crop: smallest share of the area, in (0, scale_max]")                          \
	X(VIDEO, scale_max, NULL, FLOAT, scale_max, 0, "1", 0, 1, NULL,                          \
	  "random crop: largest share of the area, in [scale_min, 1]")                           \
	X(VIDEO, ratio_min, NULL, FLOAT, ratio_min, 0, "0.75", 0, 1000, NULL,                    \
	  "random crop: smallest aspect ratio, in (0, ratio_max]")                               \
	X(VIDEO, ratio_max, NULL, FLOAT, ratio_max, 0, "1.3333334", 0, 1000, NULL,               \
	  "random crop: largest aspect ratio")                                                   \
	X(VIDEO, crop_frac, NULL, FLOAT, crop_frac, 0, "0.875", 0, 1, NULL,                      \
	  "center: output / resized short side (224 of 256)")                                    \
	X(VIDEO, clips_per_video, NULL, U32, clips_per_video, 0, "1", 1, 1024, NULL,             \
	  "clips per video file: sample index = video x clips_per_video + clip")                 \
	X(VIDEO, layout, NULL, ENUM, layout, 0, "THWC", 0, 0, "THWC,TCHW",                       \
	  "a clip is T x H x W x 3, or T x 3 x H x W")                                           \
	X(VIDEO, short_clip, NULL, ENUM, short_clip, 0, "pad", 0, 0, "pad,refuse",               \
	  "a video shorter than the clip: repeat its last frame, or refuse the sample")          \
	X(VIDEO, codec_threads, NULL, U32, threads, 0, "1", 1, 64, NULL,                         \
	  "FFmpeg's frame threads inside one decoder (more only when clips are fewer than "      \
	  "decode threads)")                                                                     \
	X(VIDEO, max_pixels, NULL, U64, max_pixels, 0, "100000000", 1, 1099511627776.0, NULL,    \
	  "videos with larger frames are refused before decoding")                               \
	X(VIDEO, max_decode_time, NULL, DURATION, max_decode_ns, 0, "5s", 1000000, 3.6e12, NULL, \
	  "a clip that takes more CPU time than this (the decode thread's own, checked between " \
	  "frames; with codec_threads > 1 its wall-clock time) is stopped and the sample "       \
	  "refused")                                                                             \
	X(VIDEO, decode_threads, NULL, U32, decode_threads, 0, "auto", 1, 1024, "auto",          \
	  "the loader's decode threads, one clip each (auto: the CPU share less the trainer's "  \
	  "core, as image mode's)")

enum stk_opt_group { STK_OPT_LOADER = 0, STK_OPT_IMAGE, STK_OPT_VIDEO };
/* In the bit column of a U64 row: the value is a size in bytes (takes units). */
#define STK_OPT_BYTES 1u
enum stk_opt_type {
	STK_OPT_U32 = 0, STK_OPT_U64, STK_OPT_FLOAT, STK_OPT_FLOAT3, STK_OPT_DURATION,
	STK_OPT_STR, STK_OPT_ENUM, STK_OPT_FLAG, STK_OPT_NOFLAG, STK_OPT_BITCHOICE,
};

/* One row of the table, as front ends read it. */
struct stk_option {
	const char *name;
	enum stk_opt_group group;
	enum stk_opt_type type;
	uint32_t offset;     /* of the field in its struct */
	uint32_t bit;        /* FLAG, NOFLAG, BITCHOICE */
	const char *def;     /* the default, as text */
	double min, max;     /* numeric range (min == max: none) */
	const char *choices; /* see above; NULL for none */
	const char *help;
	const char *alias;   /* see above; NULL for none */
};

/* Row i of the table (loader options first, then image options), or NULL
 * past the end: for (i = 0; (o = stk_option_at(i)); i++). */
STK_API const struct stk_option *stk_option_at(int i);
/* The row named `name` ("queue_depth"; '-' is taken for '_') or by one of its
 * aliases of more than one letter ("qd"), or NULL. */
STK_API const struct stk_option *stk_option_find(const char *name);
/* The video rows (group STK_OPT_VIDEO): row i, or NULL past the end; by
 * name (no aliases).  stk_option_set and stk_option_get take them with a
 * struct stk_video_opts. */
STK_API const struct stk_option *stk_video_option_at(int i);
STK_API const struct stk_option *stk_video_option_find(const char *name);
/* Parses `value` (text, as the CLI gets it; NULL: the default) into the
 * option's field of `opts` (a struct stk_loader_opts or stk_image_opts as
 * the row's group says).  0, or -EINVAL / -ERANGE with "name: reason (the
 * range or the choices)" in err. */
STK_API int stk_option_set(const struct stk_option *opt, void *opts, const char *value,
			   char *err, size_t errlen);
/* The field's value in `opts` as text, the form stk_option_set reads.
 * Returns the length (snprintf's rule) or <0. */
STK_API int stk_option_get(const struct stk_option *opt, const void *opts, char *buf,
			   size_t len);
/* The one reader of sizes for every front end: a count of bytes with an
 * optional unit, case ignored: K, M, G, T and KiB, MiB, GiB, TiB are powers of
 * 1024 ("64k" = "64KiB" = 65536); KB, MB, GB, TB powers of 1000 ("64KB" =
 * 64000); B or none, bytes.  "1.5GiB" and "64 MiB" read too.  0, or -EINVAL
 * (not a size), -ERANGE (2^64 or more); *bytes is set only on success. */
STK_API int stk_parse_size(const char *text, uint64_t *bytes);
/* The one reader of durations: a number with a unit, ns, us (or µs), ms, s,
 * m or min, h ("30s", "1.5m", "200us"); a bare number counts `unit_ns`
 * nanoseconds (1: the option table's bare ns; 1000000000: the CLI's seconds).
 * 0, or -EINVAL / -ERANGE; *ns is set only on success. */
STK_API int stk_parse_duration(const char *text, uint64_t unit_ns, uint64_t *ns);

#ifdef __cplusplus
}
#endif
#endif
