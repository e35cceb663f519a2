/* disk/disk.h — what the files of `stoker disk` share.
 *
 *   disk/disk.c       the command: options, the list of cases, output (table, JSON)
 *   disk/pat.c   the patterns: data files, small files, checkpoint, the cache
 *   disk/io.c    the job runner: threads on the library's engines, latency
 *   disk/safe.c  safety: what a PATH is, files created and their removal, signals
 */
#ifndef STK_DISK_H
#define STK_DISK_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "common/cli.h"
#include "common/spread.h"

/* Every file stoker disk creates starts with this, then the pid. */
#define DK_PREFIX ".stoker-disk-"

enum dk_pattern { DK_SEQREAD, DK_SEQWRITE, DK_RANDREAD, DK_SMALLFILES, DK_CHECKPOINT, DK_NPAT };
enum dk_engine { DK_URING, DK_PSYNC };
enum dk_kind { DK_DIR, DK_FILE, DK_BLOCKDEV };

extern const char *const dk_pattern_name[DK_NPAT];

/* One case of a run: a pattern with its settings resolved. */
struct dk_case {
	enum dk_pattern pat;
	uint64_t bs;      /* block size (smallfiles: unused) */
	uint32_t qd;      /* I/Os in flight per thread */
	uint32_t threads;
	double runtime;   /* seconds after ramp; 0 = one pass over the data */
	double ramp;      /* seconds of warm-up left out of the figures */
};

/* Settings common to every case. */
struct dk_conf {
	enum dk_engine engine;
	int direct;          /* 1 --direct, 0 --buffered, -1 per-pattern default */
	uint64_t size;       /* data file size in a folder */
	bool size_given;     /* --size given: also caps an existing file or device */
	uint64_t files;      /* smallfiles: how many */
	uint64_t file_mean;  /* smallfiles: mean size */
	uint64_t ckpt_size;  /* checkpoint: bytes written */
	bool readonly;       /* only read patterns; never opens for writing */
	bool no_drop;        /* never write /proc/sys/vm/drop_caches */
	uint64_t seed;
};

/* One PATH and what is known about it. */
struct dk_target {
	const char *path;
	enum dk_kind kind;
	bool destructive;  /* --destructive named it: writes to it are allowed */
	int dirfd;         /* DK_DIR: the folder, where our files go; else -1 */
	uint64_t size;     /* DK_FILE / DK_BLOCKDEV: bytes */
	char fs[24];       /* "ext4", "tmpfs", ... */
	char dev[48];      /* "vda", or "-" */
	bool memfs;        /* tmpfs/ramfs: memory, O_DIRECT has nothing to bypass */
	uint32_t dio_align; /* direct-I/O offset/length alignment; 0 unknown */
	bool dio_refused;  /* the filesystem refuses O_DIRECT */
	bool dio_told;     /* the fallback notice was printed */
	/* DK_DIR: the data file the block patterns share, laid out once */
	bool data_ready;
	uint64_t data_size;
	char data_name[64];
};

/* What one case measured. */
struct dk_result {
	struct dk_case c;
	const char *target; /* path */
	bool direct;        /* O_DIRECT used */
	const char *engine; /* "io_uring" or "psync" */
	char cache[96];     /* how the page cache was kept out of it */
	bool ran;           /* false: not reached (interrupted) */
	int err;            /* 0, or -errno / STK_E* */
	char errmsg[256];
	bool skipped;       /* not applicable to this target (errmsg says why) */
	uint64_t bytes, ios;
	double seconds;
	struct stk_hist *hist; /* per-I/O completion latency, ns; owned */
	/* checkpoint */
	double write_s, fsync_s, read_s;
	uint64_t read_bytes;
	/* smallfiles */
	uint64_t nfiles, files_bytes;
	double create_s;
	unsigned passes;    /* epochs over the files, each cold, to reach --runtime */
};

/* --- disk/io.c: the job runner ------------------------------------------ */

enum dk_job_kind { DK_JOB_BLOCK, DK_JOB_FILES };

/* A job: `threads` threads each keep `qd` I/Os in flight through one of the
 * library's engines (psync: the pread pool, qd workers per thread), each
 * recording latency into its own histogram. */
struct dk_job {
	enum dk_job_kind kind;
	const char *label;  /* progress line */
	enum dk_engine engine;
	uint32_t qd, threads;
	double runtime, ramp; /* runtime 0: one pass */
	uint32_t align;     /* buffer alignment (and O_DIRECT length rounding) */
	/* DK_JOB_BLOCK */
	int fd;
	bool write, random;
	bool one_pass;      /* stop after one pass even with a runtime (buffered:
			       a second pass would read the page cache) */
	uint64_t bs, span;  /* offsets in [0, span), multiples of bs */
	uint64_t seed;
	bool direct;        /* O_DIRECT: fd was opened with it; files are opened with it */
	/* DK_JOB_FILES: read whole files dirfd/name(i) in the order given */
	int dirfd;
	uint32_t nfiles;
	const uint32_t *order;
	const uint64_t *sizes;
	uint64_t max_size;
};

struct dk_job_out {
	struct stk_hist *hist; /* merged; the caller's, added to */
	uint64_t bytes, ios;
	double seconds;        /* measured window (after ramp) */
	int err;               /* first error, -errno */
	char errmsg[200];
	enum dk_engine engine; /* the one used (io_uring may fall back) */
};

int dk_run(const struct dk_job *j, struct dk_job_out *out);
/* The engine that runs when `want` is asked: io_uring where it works here,
 * else psync (said once on stderr). */
enum dk_engine dk_engine_ran(enum dk_engine want);

/* --- disk/common.c: names and the stop flag -------------------------------- */

/* "s0000123" style name of small file i, into buf. */
void dk_small_name(char *buf, size_t len, uint32_t i);
/* Set by SIGINT/SIGTERM/SIGHUP (disk/safe.c's handlers); every loop checks it. */
extern atomic_int dk_stop;

/* --- disk/pat.c: the patterns -------------------------------------------- */

/* Runs case c on target t into r (r->hist already created). 0, or <0 when
 * the case failed (r->err/errmsg say why); skipped cases return 0. */
int dk_run_case(struct dk_target *t, const struct dk_case *c, const struct dk_conf *cf,
		struct dk_result *r);
/* Lays out the target's data file now, as the first block pattern would
 * (mpirun: before the ranks meet to start timing).  0 or <0 (r says). */
int dk_prepare(struct dk_target *t, const struct dk_conf *cf, struct dk_result *r);
/* Removes the target's data file, if we made one. */
void dk_target_done(struct dk_target *t);

/* --- disk/safe.c: safety --------------------------------------------------- */

void dk_signals_install(void);
void dk_signals_restore(void);

/* Classifies path into t; refuses what stoker must not touch.  0; DK_REFUSED
 * (exit 2: the command line must change); or -errno (exit 1); why says it. */
#define DK_REFUSED 1
int dk_target_open(struct dk_target *t, const char *path, const char *destructive,
		   bool readonly, char *why, size_t len);
void dk_target_close(struct dk_target *t);
/* Reads the direct-I/O alignment of dirfd/path (a file) into t, where the
 * kernel tells it (STATX_DIOALIGN); 0 there means O_DIRECT is refused. */
void dk_dio_probe(struct dk_target *t, int dirfd, const char *path);

/* Creates dirfd/name with O_CREAT|O_EXCL (so it is surely ours) and records
 * it for removal.  Returns the fd or -errno. */
int dk_create(int dirfd, const char *name, int flags);
/* Creates the folder dirfd/name for small files; records it. 0 or -errno. */
int dk_mkdir(int dirfd, const char *name);
/* Records that small files 0..n-1 exist inside a folder made by dk_mkdir. */
void dk_note_small(int dirfd, const char *dir, uint32_t n);
/* Removes one recorded file or folder (with its small files) now. */
void dk_remove(int dirfd, const char *name);
/* Removes everything recorded; returns how many entries were removed. */
uint32_t dk_cleanup(void);

/* Fraction (0..1) of [0, size) of fd in the page cache; <0 if unknown. */
double dk_resident(int fd, uint64_t size);

/* --- disk/out.c: the table and the JSON ------------------------------------- */

/* Everything a run produced: results[target * ncases + case]. */
struct dk_report {
	const struct dk_conf *cf;
	const char *set; /* "quick", "all" or "custom" */
	const struct dk_target *targets;
	uint32_t ntargets;
	const struct dk_case *cases;
	uint32_t ncases;
	const struct dk_result *res;  /* each (target, case): its median round's result */
	bool interrupted;
	uint32_t repeat;              /* rounds, the targets alternating in each */
	const struct dk_result *all;  /* every round: all[(round * ntargets + t) * ncases + c] */
	const char *warning;          /* "" or: a figure comes from a run too short to trust */
};

void dk_print_table(FILE *f, const struct dk_report *rp);
/* 0, or -ENOMEM / -EIO. */
int dk_print_json(FILE *f, const struct dk_report *rp);
/* --plot: MB/s of every case (groups) and PATH (bars), median and min-max,
 * as SVG (and PNG with rsvg-convert).  0 or -errno; png gets its path. */
int dk_plot(const struct dk_report *rp, const char *file, char *png, size_t pnglen);
/* The round whose MB/s is the median of the usable rounds of (t, c). */
const struct dk_result *dk_median_round(const struct dk_report *rp, uint32_t t, uint32_t c);
/* "4 KiB", "1 MiB" into buf. */
const char *dk_fmt_iec(char *buf, size_t len, uint64_t bytes);

#endif
