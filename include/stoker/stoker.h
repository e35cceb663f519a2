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
	X(NOSLOT, -1007, "every batch slot is held by the consumer")           \
	X(GREW, -1008, "the file is larger than when indexed")                 \
	X(CLIP, -1009, "the video is shorter than the clip")

enum stk_err {
#define STK__ERR_ENUM(name, value, msg) STK_E##name = (value),
	STK_ERR_MAP(STK__ERR_ENUM)
#undef STK__ERR_ENUM
};

/* A static message for a code returned by this library (-errno or STK_E*). */
STK_API const char *stk_strerror(int err);
/* The code's symbolic name: "ENOENT", "STK_ESHORT", ...  Static string. */
STK_API const char *stk_err_name(int err);
/* Figures in words, the one formatter every front end prints with; each
 * writes at most len bytes into buf and returns buf.  Any thread.
 * stk_fmt_bytes: measured sizes in decimal units, 3 significant digits
 * ("512 B", "66.7 MB", "1.29 GB"); stk_fmt_rate: the same per second
 * ("1.29 GB/s"); stk_fmt_ibytes: sizes a user types, binary units, exact
 * when whole ("4 KiB", "1 TiB", "1.50 MiB"); stk_fmt_ns: durations
 * ("850 ns", "170.2 us", "2.79 ms", "1.50 s"). */
STK_API const char *stk_fmt_bytes(char *buf, size_t len, double bytes);
STK_API const char *stk_fmt_rate(char *buf, size_t len, double bytes_per_s);
STK_API const char *stk_fmt_ibytes(char *buf, size_t len, double bytes);
STK_API const char *stk_fmt_ns(char *buf, size_t len, double ns);
/* The library's own codes in STK_ERR_MAP order: code i, or 0 past the end
 * (bindings build their constants from it). */
STK_API int stk_err_at(int i);

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
/* The sum of the values (ns): with count, min and max, what a histogram in
 * another process needs to be merged exactly (stk_hist_merge_buckets). */
STK_API uint64_t stk_hist_sum(const struct stk_hist *h);
/* Adds another process's histogram to h: its n non-empty buckets as
 * stk_hist_bucket_next lists them (upper bound, count), and its min, max and
 * sum.  The result is what stk_hist_merge would give with it at hand. */
STK_API void stk_hist_merge_buckets(struct stk_hist *h, const uint64_t *upper,
				    const uint64_t *count, size_t n, uint64_t min, uint64_t max,
				    uint64_t sum);
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
 * may be called from any thread.  A second thread's stk_loader_next, start or
 * resume while one is under way returns -EBUSY and changes nothing.        */

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
	STK_ON_ERROR_REPLACE,  /* a stand-in drawn from (seed, epoch, index) takes its place,
				  so every batch keeps its size; counted and named */
};

/* Flags for stk_loader_opts.flags; zero gives the defaults. */
#define STK_F_NO_SHUFFLE (1u << 0) /* sampler order 0..n-1 */
#define STK_F_DROP_LAST  (1u << 1) /* drop the tail instead of padding/short batch */
#define STK_F_DIRECT     (1u << 2) /* O_DIRECT reads (falls back with a message); neither
					this nor STK_F_BUFFERED: O_DIRECT when the dataset
					is larger than the page cache can hold */
#define STK_F_NO_PIN     (1u << 3) /* never pin slots with the CUDA runtime */
#define STK_F_QUIET      (1u << 4) /* no notices on stderr (engine fallback...) */
#define STK_F_NO_CACHE   (1u << 5) /* do not read or write the index cache */
#define STK_F_BUFFERED   (1u << 6) /* buffered reads, whatever the dataset's size */
#define STK_F_NO_AFFINITY (1u << 7) /* never pin the loader's threads (see stk_cpu_share) */
#define STK_F_NO_REMOTE_CACHE (1u << 8) /* remote data: no local cache of the bytes read */
#define STK_F_INDEX_BESIDE (1u << 12) /* index cache beside the data (ROOT/.stoker-index),
					 not in the user's cache folder */

/* Image mode: each sample is decoded (JPEG, PNG or WebP, told apart by
 * their first bytes, never by the file's name) and cropped into a fixed-size
 * RGB image in the batch: every colour mode becomes RGB as PIL's
 * convert("RGB") makes it (grey, palette, alpha dropped, 16 bits, CMYK;
 * an animation's first frame).  Zero fields take their defaults (the option
 * table below holds every default and range). */
enum stk_image_format { STK_FORMAT_JPEG = 0, STK_FORMAT_PNG, STK_FORMAT_WEBP, STK_FORMATS };
enum stk_crop {
	STK_CROP_RANDOM_RESIZED = 0, /* training: torchvision's RandomResizedCrop */
	STK_CROP_CENTER,             /* validation: resize the short side, centre crop */
};
enum stk_dtype { STK_DTYPE_UINT8 = 0, STK_DTYPE_FLOAT32, STK_DTYPE_FLOAT16 };
#define STK_IMG_NO_FLIP   (1u << 0) /* no random horizontal flip (p = 0.5 otherwise) */
#define STK_IMG_NHWC      (1u << 1) /* channels last (else N x C x H x W) */
#define STK_IMG_NORMALIZE (1u << 2) /* float: (x / 255 - mean) / std (else x / 255) */
#define STK_IMG_KEEP_RAW  (1u << 3) /* a batch keeps its samples' file bytes beside its
				       images (else they are read into a smaller pool of
				       read areas, reused once the batch is decoded) */
#define STK_IMG_JPEG_CACHE (1u << 4) /* folders and lists: each JPEG's lossless rewrite
				       (restart intervals) kept in the cache folder and
				       read instead of the file once made, checked first */

struct stk_image_opts {
	uint32_t size;          /* sizeof(struct stk_image_opts) */
	uint32_t flags;         /* STK_IMG_* */
	uint32_t width, height; /* output */
	enum stk_crop crop;
	enum stk_dtype dtype;
	float scale_min, scale_max; /* random crop: share of the area */
	float ratio_min, ratio_max; /* random crop: aspect ratio */
	float crop_frac;        /* centre crop: output / resized short side */
	float mean[3], std[3];  /* with STK_IMG_NORMALIZE */
	uint32_t decode_threads;
	uint64_t max_pixels;    /* larger images are refused before decoding */
	uint32_t max_scans;     /* progressive JPEGs with more scans are refused */
	uint64_t max_decode_ns; /* a decode past this much CPU time is stopped, refused */
	uint32_t read_areas;    /* without keep_raw: batches of reads ahead of decoding */
	uint64_t jpeg_cache_limit; /* jpeg_cache: the copies' bytes at most [0: auto] */
};

/* Checks image options as create would (defaults applied to a copy, ranges,
 * what spans options).  0, or <0 with "name: reason" in err. */
STK_API int stk_image_opts_check(const struct stk_image_opts *opts, char *err, size_t errlen);
/* Bytes of one output image for these options. */
STK_API size_t stk_image_bytes(const struct stk_image_opts *opts);
/* Decodes and crops one image as the loader would for sample `index` of
 * `epoch` under `seed`, into out (stk_image_bytes).  0, or <0 with the reason
 * in err (STK_ECORRUPT, STK_EFORMAT, STK_ETOOBIG: above max_pixels,
 * max_scans or max_decode_time; -ERANGE for options). */
STK_API int stk_image_decode(const struct stk_image_opts *opts, const void *data, size_t len,
			     uint64_t seed, uint64_t epoch, int64_t index, void *out,
			     char *err, size_t errlen);

/* Rewrites one JPEG losslessly for image mode (libjpeg-turbo's transform
 * path: the same DCT coefficients, so every decoder gets the same pixels)
 * with restart markers whose intervals tile the MCU rows, a few MCUs wide,
 * optimized Huffman tables, and sequential (a progressive file becomes
 * baseline); APPn and COM markers are kept.  Image mode then entropy-decodes
 * only the intervals that cover a crop.  On success *out is a buffer of
 * *outlen bytes that the caller frees with stk_free.  STK_EFORMAT (not a
 * JPEG), STK_ECORRUPT (a libjpeg error or warning: corrupt, truncated,
 * unsupported; libjpeg's message in err), STK_ETOOBIG (a progressive file
 * past max_scans' default, 100 scans), -ENOMEM.  Any thread. */
STK_API int stk_jpeg_transcode(const void *data, size_t len, void **out, size_t *outlen,
			       char *err, size_t errlen);
/* Frees what the library allocated for the caller (stk_jpeg_transcode's output). */
STK_API void stk_free(void *p);
/* 1 when image mode can decode this JPEG by restart intervals (single scan,
 * intervals that tile the MCU rows, every marker in place), with the interval
 * in MCUs and the interval count; 0 when not, with why; -ENOMEM.  The
 * pointers may be NULL. */
STK_API int stk_jpeg_restart_info(const void *data, size_t len, uint32_t *interval,
				  uint32_t *intervals, char *why, size_t whylen);

/* ------------------------------------------------------------------------ */
/* Video: clips decoded with FFmpeg's libraries (libavformat, libavcodec,
 * libswscale), loaded at run time with dlopen: without them every call below
 * returns -ENOSYS with the apt-get line in err.  A sample is a clip of
 * `frames` frames taken at `stride` (or resampled to `fps`) from a video held
 * whole in memory; one crop box and flip for every frame of the clip.  Every
 * call is reentrant: any thread, no shared state but the loaded library.     */
enum stk_video_crop { STK_VCROP_RANDOM = 0, STK_VCROP_CENTER };   /* random: RandomResizedCrop-like box + flip */
enum stk_video_layout { STK_VLAYOUT_THWC = 0, STK_VLAYOUT_TCHW };  /* T×H×W×3, or T×3×H×W */
enum stk_video_short { STK_VSHORT_PAD = 0, STK_VSHORT_REFUSE };   /* clip longer than the video */
#define STK_VID_NO_FLIP (1u << 0) /* no random horizontal flip (p = 0.5 otherwise) */

/* Video options.  Zero fields take their defaults (STK_VIDEO_OPTIONS below). */
struct stk_video_opts {
	uint32_t size;              /* sizeof(struct stk_video_opts); 0 is taken as current */
	uint32_t flags;             /* STK_VID_* */
	uint32_t frames;            /* T per clip */
	uint32_t stride;            /* every stride-th frame (stream frame times) */
	float fps;                  /* > 0: the frame nearest each 1/fps step instead of stride */
	uint32_t out_size;          /* output side: H = W */
	uint32_t crop;              /* enum stk_video_crop */
	float scale_min, scale_max; /* random crop: share of the area */
	float ratio_min, ratio_max; /* random crop: aspect ratio */
	float crop_frac;            /* centre crop: output / resized short side */
	uint32_t clips_per_video;   /* sample index = video × clips_per_video + clip */
	uint32_t layout;            /* enum stk_video_layout */
	uint32_t short_clip;        /* enum stk_video_short */
	uint32_t threads;           /* FFmpeg's threads inside one decoder */
	uint64_t max_pixels;        /* larger frames are refused before decoding */
	uint64_t max_decode_ns;     /* a clip past this much CPU time is stopped, refused */
	uint32_t decode_threads;    /* the loader's decode threads, a clip each (0: auto) */
};

/* What a batch carries per clip. */
struct stk_clip_info {
	uint32_t size;              /* set by the caller: sizeof(struct stk_clip_info) */
	uint32_t clip;              /* which of clips_per_video */
	int64_t start_pts;          /* the first frame's pts, in the stream's time base */
	double start_s;             /* its time in seconds from the stream's start */
	uint32_t frames_decoded;    /* frames decoded for the clip (those before the start too;
				       not the non-reference ones no target takes) */
	uint32_t padded;            /* frames repeated at the end (short video) */
	uint32_t width, height;     /* the video's size (after rotation) */
	double duration_s, fps;     /* the stream's */
};

/* A video's facts, as the container and the stream's header say them. */
struct stk_video_info {
	uint32_t size;              /* set by the caller: sizeof(struct stk_video_info) */
	uint32_t width, height;     /* displayed size: after rotation */
	uint32_t coded_width, coded_height;
	int32_t rotation;           /* degrees clockwise applied for display: 0, 90, 180, 270 */
	double duration_s;          /* the stream's (else the container's) */
	double fps;                 /* average frame rate */
	int64_t frames;             /* the container's count, else duration × fps rounded */
	uint32_t frames_exact;      /* 1: frames is the container's own count */
	uint32_t bit_depth;         /* bits per sample of the pixel format */
	char codec[32];             /* "h264", "vp9", ... */
	char pix_fmt[32];           /* "yuv420p", "yuv420p10le", ... */
	char container[32];         /* libavformat's short name: "mov,mp4,...", "matroska,webm" */
};

/* What stk_video_make writes.  Zero fields take the defaults in brackets. */
struct stk_video_make_opts {
	uint32_t size;              /* sizeof(struct stk_video_make_opts) */
	uint32_t width, height;     /* [320 × 240]; even */
	uint32_t frames;            /* [50] */
	double fps;                 /* [25] */
	uint32_t gop;               /* keyframe every gop frames [12] */
	const char *codec;          /* "h264" (libx264, else mpeg4), "mpeg4", "vp9", "hevc"
				       [NULL: vp9 for .webm, else h264] */
	const char *pix_fmt;        /* "yuv420p10le", "yuv444p", ... [NULL: yuv420p] */
	int32_t rotation;           /* display matrix: 90, 180, 270 [0] */
	uint32_t audio_only;        /* 1: one second of a tone, no video stream (tests) */
	uint64_t seed;              /* varies the moving content */
};

/* Checks video options as create would (defaults applied to a copy, ranges,
 * what spans options).  0, or <0 with "name: reason" in err. */
STK_API int stk_video_opts_check(const struct stk_video_opts *opts, char *err, size_t errlen);
/* Bytes of one clip's output: frames × out_size² × 3; 0 for bad options. */
STK_API size_t stk_video_clip_bytes(const struct stk_video_opts *opts);
/* Decodes clip `clip` (0 .. clips_per_video-1) of the video in data/len (the
 * whole file, in memory) as the loader would for sample `index` of `epoch`
 * under `seed`, into out (stk_video_clip_bytes); info (may be NULL) says
 * which frames.  0, or <0 with the reason in err: STK_EFORMAT (no video
 * stream, or no decoder for it), STK_ECORRUPT (unreadable container, no
 * moov, truncated, no frame decoded), STK_ECLIP (the video is shorter than
 * the clip and short_clip is refuse), STK_ETOOBIG (a frame above max_pixels,
 * or a decode past max_decode_time), -ERANGE/-EINVAL for options, -ENOSYS
 * without FFmpeg.  The caller names the file. */
STK_API int stk_video_decode(const struct stk_video_opts *opts, const void *data, size_t len,
			     uint64_t seed, uint64_t epoch, uint64_t index, uint32_t clip,
			     void *out, struct stk_clip_info *info, char *err, size_t errlen);
/* The stream's facts without decoding (the first frame is decoded only
 * where the container leaves the pixel format unknown).  0, or <0 as above. */
STK_API int stk_video_probe(const void *data, size_t len, struct stk_video_info *info,
			    char *err, size_t errlen);
/* Writes a synthetic video to path: moving gradients, and each frame's index
 * drawn in pixels (stk_video_frame_number reads it back) so tests and
 * benchmarks can tell which frame they got.  The container from the
 * extension (.mp4 .m4v .mov .mkv .webm).  Bit-exact muxers and encoders:
 * the same options (seed included) give the same bytes with the same FFmpeg
 * build, except libx264's, which vary with memory it reads.  0, or
 * <0 with the reason in err
 * (STK_EFORMAT: no such encoder in the installed FFmpeg). */
STK_API int stk_video_make(const char *path, const struct stk_video_make_opts *o,
			   char *err, size_t errlen);
/* The frame index stk_video_make drew into one decoded frame, read from RGB
 * pixels (3 bytes a pixel, `pitch` bytes a row) of a w×h frame that shows the
 * whole picture (no crop, any scale, flip undone by the caller); -1 when the
 * marks do not read as a number. */
STK_API int64_t stk_video_frame_number(const uint8_t *rgb, uint32_t w, uint32_t h, size_t pitch);
/* The decoders the installed FFmpeg has among h264, hevc, vp9, av1, mpeg4,
 * as "h264 vp9 ..." in out: their count, or -ENOSYS (no FFmpeg: its reason
 * in out). */
STK_API int stk_video_codecs(char *out, size_t len);

/* The loader's options.  Zero fields take their defaults; every default and
 * range is in the option table below. */
struct stk_loader_opts {
	uint32_t size;        /* sizeof(struct stk_loader_opts); 0 is taken as current */
	uint32_t flags;       /* STK_F_* */
	const char *path;     /* folder (ImageFolder layout or flat), file list, or tar shards */
	uint32_t batch_size;
	uint32_t prefetch;    /* batch slots */
	uint32_t queue_depth; /* reads in flight, all I/O threads together */
	uint32_t io_threads;  /* io_uring: one ring each; pread: workers */
	uint64_t seed;
	uint64_t epoch;       /* where to start (resume) */
	uint64_t start_batch; /* resume: batches of this epoch already consumed */
	uint32_t rank;
	uint32_t world_size;
	enum stk_engine engine;
	enum stk_on_error on_error;
	const char *extensions; /* folder mode: comma list ".jpg,.png"; "*" → all */
	const char *cache_dir;
	uint64_t null_latency_ns; /* STK_ENGINE_NULL: each read completes after this long */
	uint64_t slot_bytes;
	const struct stk_image_opts *image; /* non-NULL: image mode (copied at create) */
	enum stk_shuffle {
		STK_SHUFFLE_GLOBAL = 0, /* any sample after any other */
		STK_SHUFFLE_SHARD,      /* tar shards in random order, samples shuffled
					   within a window: near-sequential reads */
	} shuffle_mode;
	uint32_t shuffle_window; /* STK_SHUFFLE_SHARD: window in samples */
	/* Ranks sharing this host (see stk_cpu_share): local_world_size 0 reads
	 * LOCAL_RANK / LOCAL_WORLD_SIZE (torchrun), else
	 * OMPI_COMM_WORLD_LOCAL_RANK / _SIZE (Open MPI), else none. */
	uint32_t local_rank;
	uint32_t local_world_size;
	uint64_t read_bytes;     /* raw mode: read only each sample's first bytes (0: all) */
	uint64_t cache_limit;    /* remote data: bytes the local cache may hold (0: auto) */
	uint64_t remote_timeout_ns;         /* remote data: a request's whole time-out */
	uint64_t remote_connect_timeout_ns; /* remote data: its connect time-out */
	uint32_t remote_tries;              /* remote data: tries of a request at most (0: no cap) */
	uint64_t remote_retry_time_ns;      /* remote data: how long a request is tried again */
	/* non-NULL: video mode (copied at create; not with image): each sample
	 * is a clip, clips_per_video of them a video file (.mp4 .m4v .mov .mkv
	 * .webm in folders, unless extensions says otherwise), the whole file
	 * read into the slot and decoded by the decode threads into the batch */
	const struct stk_video_opts *video;
};

/* The option table: include/stoker/options.h (included at the end).  */


/* A rank's share of its host's CPUs.  The ranks on a host divide the CPUs
 * of its cgroup's cpuset (else the online ones) that this process's affinity
 * allows, no more than the cgroup's cpu.max quota: rank r gets the r-th
 * slice, or its own affinity mask when the launcher already bound it to a
 * part of the host.  One CPU of the share is left to the training thread; the
 * loader's I/O and decode threads are pinned to the rest (unless
 * STK_F_NO_AFFINITY).  Without a launcher (local_world_size 0 and nothing in
 * the environment) nothing is pinned and the defaults use every usable CPU. */
struct stk_cpu_share {
	uint32_t size;            /* set by the caller: sizeof(struct stk_cpu_share) */
	uint32_t local_rank, local_world_size;
	char source[40];          /* where they came from: "LOCAL_WORLD_SIZE",
				     "OMPI_COMM_WORLD_LOCAL_SIZE", "options" or "none" */
	uint32_t host_cpus;       /* the CPUs the host's ranks divide */
	uint32_t allowed;         /* in this process's affinity mask */
	double quota;             /* the cgroup's cpu.max in CPUs; 0: none */
	uint32_t bound;           /* 1: the launcher bound this rank to CPUs of its own */
	uint32_t cpus;            /* this rank's share */
	uint32_t io_threads;      /* default I/O threads (io_uring rings) in the share */
	uint32_t decode_threads;  /* default decode threads: the share less the trainer's CPU */
	int32_t trainer_cpu;      /* the CPU left to the training thread; -1: none (share of 1) */
	uint32_t oversubscribed;  /* 1: more ranks than usable CPUs: they share cores */
	char cpulist[256];        /* where the loader's threads run: "2-7"; "" unpinned */
};
/* The share for (local_rank, local_world_size); 0/0 reads the environment as
 * stk_loader_opts does.  0, or -EINVAL (rank not below size, or a malformed
 * environment variable) with the reason in errbuf (may be NULL).  Any thread. */
STK_API int stk_cpu_share(uint32_t local_rank, uint32_t local_world_size,
			  struct stk_cpu_share *out, char *errbuf, size_t errlen);
struct stk_cpus;
/* The same rule applied to a reading of the CPUs (stk_sys_cpus, of this
 * machine or of a --root tree): the share each of local_world_size ranks
 * is given (0: no launcher), as if the launcher did not bind ranks to CPUs.  What
 * `stoker doctor` prints.  0 or -EINVAL. */
STK_API int stk_cpu_share_for(const struct stk_cpus *cpus, uint32_t local_world_size,
			      struct stk_cpu_share *out);

/* A batch: a read-only view owned by the loader, valid until stk_batch_release.
 * Sample i's bytes are data[offsets[i] .. offsets[i] + sizes[i]). */
struct stk_batch {
	uint64_t epoch;
	uint64_t number;        /* position in the epoch, from 0 */
	uint32_t count;         /* samples (fewer than batch_size when some were skipped) */
	uint32_t slot;          /* pool slot (for bindings that track memory) */
	uint8_t *data;          /* page-aligned; NULL in image mode without keep_raw
				   (the reads are not kept: data_bytes 0) */
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
	uint32_t replaced;      /* on_error replace: samples that stand in for bad ones
				   (their indices and labels are the stand-ins') */
	/* video mode (else NULL and 0): count clips of clip_bytes each, back to
	 * back, uint8 RGB: frames x height x width x 3 (tchw 0) or frames x 3 x
	 * height x width (tchw 1).  indices[i] is clip i's video (a dataset
	 * index, as stk_loader_sample takes); clip_info[i] says which of the
	 * video's clips_per_video it is (its sample number is indices[i] x
	 * clips_per_video + clip), where it starts and what its decode took.
	 * Owned by the loader: valid until stk_batch_release. */
	void *clips;
	size_t clip_bytes;
	uint32_t frames, tchw;
	const struct stk_clip_info *clip_info;
};

/* Checks options as create would, without touching the data: the defaults
 * applied to a copy, every range, the image options, and what spans options
 * (rank below world_size).  0, or <0 with "name: reason" in errbuf.  For
 * front ends that tell bad usage from a failure. */
STK_API int stk_loader_opts_check(const struct stk_loader_opts *opts, char *errbuf, size_t errlen);

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
/* The CPU share the loader's thread defaults and affinity came from. */
STK_API int stk_loader_cpu_share(const struct stk_loader *loader, struct stk_cpu_share *out);
/* The engine in use: "io_uring", "pread" or "null". */
STK_API const char *stk_loader_engine(const struct stk_loader *loader);
/* The options in effect: the caller's, with every default applied and every
 * "auto" resolved to what the loader chose (io_threads, decode_threads...).
 * Strings point into the loader (valid until destroy); out->image and
 * out->video are NULL (stk_loader_video_options gives the video options).
 * img (may be NULL) receives the image options.  Returns 1 in image mode,
 * else 0 (img then zeroed). */
STK_API int stk_loader_options(const struct stk_loader *loader, struct stk_loader_opts *out,
			       struct stk_image_opts *img);
/* Video mode: the video options in effect (defaults applied) into out
 * (out->size says how much it takes; 0: all), and 1; 0 in other modes (out
 * then zeroed). */
STK_API int stk_loader_video_options(const struct stk_loader *loader,
				     struct stk_video_opts *out);

/* A snapshot of the loader's counters.  Times in seconds, latencies in ns.
 * One time base: the window runs from create or the last reset (the last
 * stk_loader_stats_reset, or stk_loader_restart with STK_START_RESET_STATS)
 * to now, and every figure above `total_s` is over that window, histogram
 * percentiles included; the total_* figures run from create and are never
 * reset (what a Prometheus counter wants).  samples, bytes, batches and
 * errors count the batches handed out by stk_loader_next: a batch's failed
 * samples are counted with it, so a reset or a restart never loses the
 * errors of a batch the consumer then gets. */
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
	double wall_s;         /* the window's length */
	double wait_s;         /* consumer time spent waiting in stk_loader_next */
	double stall_ratio;    /* wait_s / wall_s: the trainer's "data stall" */
	uint64_t wait_p50_ns, wait_p99_ns, wait_max_ns;
	uint64_t read_p50_ns, read_p99_ns, read_max_ns;
	uint32_t decode_threads;  /* image mode */
	double decode_busy_s;     /* time decode threads spent decoding */
	uint64_t decode_p50_ns, decode_p99_ns;
	uint64_t index_errors;    /* files or shards the index left out by the error policy
				     (unreadable when indexed, damaged shards): counted once, at
				     create, and kept by stk_loader_stats_reset */
	double samples_per_s;     /* samples / wall_s */
	double mb_per_s;          /* bytes / wall_s / 1e6 */
	double decode_images_per_s_per_core; /* samples / decode_busy_s (0 before any) */
	double copy_wait_s;       /* the consumer waiting on device copies (stk_loader_add_time) */
	double total_s;           /* since create */
	uint64_t total_samples, total_bytes, total_batches, total_errors;
	double total_wait_s;
	/* image mode, over the samples decoded: the share decoded by their
	 * format's crop-only path (JPEGs from stk_jpeg_transcode: only the
	 * restart intervals their crop covers; PNG and WebP: format_fast_share),
	 * and the mean share of each file's entropy-coded data decoded (1 would
	 * be every byte; the ordinary path stops below the crop's last row) */
	double decode_fast_share;
	double decode_entropy_share;
	/* what the loader chose (stk_loader_tuning: why) */
	uint32_t queue_depth;     /* reads in flight at most now */
	uint32_t io_threads;      /* io_uring rings taking new batches now (pread: 1) */
	uint32_t direct;          /* 1: O_DIRECT reads */
	uint32_t probes;          /* queue-depth probes run so far (auto) */
	double total_decode_busy_s; /* decode threads' busy time since create */
	double total_copy_wait_s;   /* the consumer's wait on device copies since create */
	uint64_t replaced;        /* on_error replace: stand-ins handed out (each bad sample
				     they replace is in errors) */
	uint64_t total_replaced;
	/* image mode, per enum stk_image_format over the window: samples
	 * decoded, the decode threads' time on them, and the share that took
	 * the format's crop-only path (JPEG: restart intervals; WebP: libwebp's
	 * own crop and scaling; PNG: none, 0: every row is decoded so that the
	 * zlib stream is checked to its end) */
	uint64_t format_decoded[STK_FORMATS];
	double format_decode_busy_s[STK_FORMATS];
	double format_fast_share[STK_FORMATS];
	/* video mode, since create: clips decoded from byte ranges the video
	 * index planned (header + keyframe to last packet), and clips decoded
	 * from their whole file (no index: not an MP4, tar shards, remote data,
	 * O_DIRECT; stderr said why at create).  total_bytes / total_samples
	 * is then the bytes read a clip. */
	uint64_t total_video_ranged;
	uint64_t total_video_whole;
};
STK_API int stk_loader_stats(const struct stk_loader *loader, struct stk_stats *out);

/* The memory a loader takes, by the library's own sizing rule: its slots (the
 * pool, mapped at create and locked when pinned: what RLIMIT_MEMLOCK must
 * hold), the index, the per-slot records, and in image mode the decode
 * threads' working memory.  `stoker doctor` and `stoker bench` print it. */
struct stk_memory {
	uint32_t size;            /* set by the caller: sizeof(struct stk_memory) */
	uint32_t nslots;          /* prefetch */
	uint64_t slot_bytes;      /* one slot: the batch's reads (raw mode, keep_raw), then
				     (image mode) its images */
	uint64_t pool_bytes;      /* nslots x slot_bytes */
	uint64_t index_bytes;     /* the dataset's index: entries and names */
	uint64_t meta_bytes;      /* each slot's offsets, sizes, labels, indices, read records;
				     jpeg_cache: a state a sample and a copy's path a place */
	uint32_t decode_threads;  /* image and video mode; 0 in raw mode */
	uint64_t decode_bytes;    /* their working memory, estimated: the buffers a thread keeps
				     from one image to the next (image/scratch.c: the decoded
				     region and the resampler's), an image of the mean sample
				     size twice, per thread; video:
				     a decoder's reference frames at the largest video's
				     frame size from the video index (made at create),
				     else the largest decoded so far (720p before the first) */
	uint64_t total;           /* all of the above */
	/* image mode without keep_raw: the reads go to read areas, not slots */
	uint32_t read_areas;      /* 0 when the reads are in the slots */
	uint64_t read_area_bytes; /* one: a batch's reads */
	uint64_t read_pool_bytes; /* read_areas x read_area_bytes (in total) */
};
/* What this loader takes.  0 or -EINVAL. */
STK_API int stk_loader_memory(const struct stk_loader *loader, struct stk_memory *out);
/* What a loader with these options (NULL: the defaults) would take over
 * `nsamples` samples of `sample_bytes` each (the mean; their spread unknown),
 * before any dataset is read: the slot is the same bound create applies.  0,
 * or <0 with the reason in errbuf (an option out of range). */
STK_API int stk_memory_estimate(const struct stk_loader_opts *opts, uint64_t nsamples,
				uint64_t sample_bytes, struct stk_memory *out, char *errbuf,
				size_t errlen);
/* Remote data (s3://, http(s)://): the transport's and the local cache's
 * counters since create (all threads together).  Secrets are never in it. */
struct stk_remote_stats {
	uint32_t size;            /* sizeof(struct stk_remote_stats) */
	uint32_t inflight;        /* requests in flight now */
	uint32_t inflight_max;
	uint32_t cache_on;        /* 1: the local cache is in use */
	uint64_t requests;        /* finished requests, retries included */
	uint64_t retries;         /* 5xx, SlowDown, resets, timeouts, short bodies tried again */
	uint64_t failed;          /* requests that failed for good (after their retries) */
	uint64_t short_bodies;    /* bodies shorter than Content-Length/Range (never delivered) */
	uint64_t bytes;           /* body bytes received */
	uint64_t latency_p50_ns, latency_p99_ns, latency_max_ns; /* per request */
	uint64_t cache_hits, cache_misses, cache_hit_bytes, cache_evictions;
	uint64_t cache_bytes_written;
	uint64_t cache_bytes;     /* what the cache folder holds now (all processes, estimate) */
	uint64_t cache_limit;
	char root[256];           /* the data's URL (no credentials) */
	char credentials[256];    /* where they came from: "environment (...)", "profile ...",
				     "anonymous (...)" (the key id masked, never the secret) */
	uint32_t retrying;        /* requests waiting now to be tried again (an outage's reads) */
	uint32_t window;          /* bytes a cache miss fetches around it (0: the member alone) */
	uint64_t windows;         /* windows fetched (requests of `window` bytes, retries apart) */
	uint64_t streamed;        /* misses filled from their window's stream as it came */
};
/* 0 and *out filled, or -ENOENT when the loader reads local data.  Any thread. */
STK_API int stk_loader_remote_stats(const struct stk_loader *loader, struct stk_remote_stats *out);

/* What the loader chose for the settings left to it, and why: the read mode
 * (O_DIRECT or buffered), the queue depth (with the probe's figures) and the
 * I/O threads, one line each, into buf (NUL-terminated, cut to len).
 * Returns the length it needed, or <0.  Any thread. */
STK_API int stk_loader_tuning(const struct stk_loader *loader, char *buf, size_t len);

/* Starts a new window: the window's counters, histograms and clock restart
 * now (e.g. after a warm-up pass); the total_* figures and index_errors go
 * on.  Any time, before or after stk_loader_start: what the window counts is
 * exactly the batches handed out in it.  Any thread. */
STK_API void stk_loader_stats_reset(struct stk_loader *loader);

/* stk_loader_start with flags.  STK_START_RESET_STATS starts the new window
 * in the same step, after the old epoch's reads are drained and before the
 * new one's begin: nothing the new epoch counts is lost (unlike a reset
 * after the start, when the first reads may already have counted). */
#define STK_START_RESET_STATS (1u << 0)
STK_API int stk_loader_restart(struct stk_loader *loader, uint64_t epoch, uint64_t start_batch,
			       uint32_t flags);

/* Time the consumer spent on the loader's data outside stk_loader_next, which
 * the library cannot see by itself: a binding's wait for host-to-device copies
 * (STK_TIME_COPY_WAIT).  Counted into the stats and the diagnosis. */
enum stk_time_kind { STK_TIME_COPY_WAIT = 0 };
STK_API void stk_loader_add_time(struct stk_loader *loader, enum stk_time_kind kind,
				 uint64_t ns);

/* ------------------------------------------------------------------------ */
/* Diagnosis: what holds the input pipeline back, from the loader's counters
 * over a window and the block device behind the data sampled at both ends.
 * The loader keeps a snapshot a second (taken in stk_loader_next, about a
 * microsecond's work, and a /proc/diskstats read), so any front end asks
 * for the last N seconds without keeping state.  Any thread.
 * X(kind, name, meaning) */
#define STK_BOUND_MAP(X)                                                                    \
	X(UNKNOWN, "unknown", "too little data in the window to judge")                      \
	X(CONSUMER, "consumer-bound", "batches were ready: the training step sets the pace") \
	X(GPU_COPY, "gpu-copy-bound", "the consumer waits on host-to-device copies")         \
	X(DECODE, "decode-bound", "the decode threads are busy all the time")                \
	X(STORAGE, "storage-bound", "reads wait on the device, or it is busy")               \
	X(CONFIG, "configuration", "queue depth or prefetch too small to keep reads going")  \
	X(IO_THREAD, "io-thread-bound", "reads come from the page cache; the I/O threads' copies are the limit") \
	X(NETWORK, "network-bound", "remote data: every request waits on the object store or HTTP server")

enum stk_bound {
#define STK__BOUND_ENUM(kind, name, meaning) STK_BOUND_##kind,
	STK_BOUND_MAP(STK__BOUND_ENUM)
#undef STK__BOUND_ENUM
	STK_BOUND_COUNT
};
/* "consumer-bound", ...; NULL for a kind out of range. */
STK_API const char *stk_bound_name(int kind);

struct stk_verdict {
	uint32_t size;          /* set by the caller: sizeof(struct stk_verdict) */
	int kind;               /* enum stk_bound */
	const char *name;       /* stk_bound_name(kind) */
	char evidence[320];     /* the figures behind it, one sentence */
	char advice[256];       /* what to try */
	/* the evidence, as figures (over the window) */
	double window_s;
	double samples_per_s, mb_per_s;
	double stall_ratio;     /* consumer waiting on the loader / wall */
	double copy_wait_ratio; /* consumer waiting on device copies / wall */
	double decode_busy;     /* decode threads' busy share, 0..1 */
	double inflight_mean;   /* reads in flight */
	uint32_t queue_depth, prefetch, decode_threads, io_threads;
	uint32_t device_sampled; /* 1: the figures below are the device's (iostat -x) */
	char device[64];
	double dev_r_s, dev_read_mb_s, dev_r_await_ms, dev_aqu_sz, dev_util;
	double dev_share;       /* the device's read bytes / ours: ~1 cold, ~0 page cache */
	/* remote data (remote = 1): its transport over the window, the latency
	 * over every request since create */
	uint32_t remote;
	double req_per_s;       /* requests finished per second, retries included */
	double req_p50_ms, req_p99_ms, req_min_ms; /* min: the fastest, the server unloaded */
	double req_mb_per_s_each; /* MB/s received per request in flight */
	double retries_per_s;
	double cache_hit_ratio; /* reads the local cache served / all reads */
	uint32_t remote_retrying; /* requests waiting to be tried again, at the window's end */
};

/* The verdict over the last window_s seconds (the history kept is a minute);
 * window_s <= 0: over the stats window (since create or the last reset).
 * 0, or <0. */
STK_API int stk_loader_diagnose(const struct stk_loader *loader, double window_s,
				struct stk_verdict *out);

enum stk_hist_kind {
	STK_HIST_BATCH_WAIT = 0, /* consumer's wait in stk_loader_next ("dataloader time") */
	STK_HIST_READ,           /* submit → completion of each sample's read */
	STK_HIST_DECODE,         /* image mode: one sample's decode and crop */
	STK_HIST_REMOTE,         /* remote data: each request, retries each their own, since
				    create (-ENOENT for local data) */
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

/* The queue depth of an engine created with queue_depth 0 (fio's and the
 * disk benchmark's usual random-read depth).  The loader's own default is its
 * option table's (auto: probed). */
#define STK_IOENGINE_QD_DEFAULT 32

struct stk_ioengine_opts {
	uint32_t size;            /* sizeof(struct stk_ioengine_opts); 0 is taken as current */
	uint32_t flags;           /* STK_IOENG_* */
	enum stk_engine engine;   /* AUTO: io_uring, else the pread pool */
	uint32_t queue_depth;     /* I/Os in flight at most; 0 → STK_IOENGINE_QD_DEFAULT */
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

/* sizeof the public struct named `name` ("stk_stats", "stk_loader_opts", ...)
 * as this library was built, or 0: bindings that mirror the structs check
 * their layout against it at load. */
STK_API size_t stk_struct_size(const char *name);

/* Per-user cache folder ($XDG_CACHE_HOME/stoker, else ~/.cache/stoker, else
 * /tmp/stoker-cache-UID), written to buf; created if missing (private, 0700).
 * Returns the length, or <0: -EPERM when the folder belongs to another user
 * or others may write it (it is not to be used). */
STK_API int stk_cache_dir(char *buf, size_t len);

#include "stoker/options.h"

#ifdef __cplusplus
}
#endif
#endif
