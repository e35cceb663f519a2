/* loader/loader.h — the loader's state and the calls between its files
 * (listed below, bottom to top).  Internal. */
#ifndef STK_LOADER_H
#define STK_LOADER_H

#include "base/internal.h"
#include "dataset/index.h"
#include "sampler/sampler.h"
#include "sys/cpushare.h"
#include "io/engine.h"
#include "loader/pool.h"
#include "stoker/sys.h"

#include <limits.h>
#include <pthread.h>

enum slot_state { SLOT_FREE, SLOT_FILLING, SLOT_READY, SLOT_HELD };

/* One sample's read: the engine's I/O and what the loader knows of it. */
struct sio {
	struct stk_io io;     /* first: the engines hand back &sio->io */
	uint64_t size;        /* what a good read returns: the indexed size, or read_bytes */
	bool prefix;          /* read_bytes: a prefix of the sample, no growth probe */
	uint32_t skip;        /* bytes read before the sample's first (O_DIRECT alignment) */
	uint32_t slot, idx;   /* which batch slot, which sample in it */
	uint64_t t_submit;    /* ns */
	uint64_t at;          /* shards: where the member's bytes start in its shard */
	struct sio *rider;    /* shards: the next member the same read brings (merged) */
	bool changed;         /* shards: after the read the shard's size or mtime was not
				 the index's (stk__shards_stat) */
	uint64_t now_size;    /* files: the size a stat found after a read of another
				 length (stk__loader_file_stat; UINT64_MAX: none) */
	bool reread;          /* files: read again at that size already (once a batch) */
	/* the place in the batch (loader/error.c): kept across stand-ins */
	int64_t orig;         /* the dataset index the sampler put here */
	uint64_t place, room; /* where its read went in the slot (NO_PLACE: shared with
				 others), and the room it took there (alone, for shards) */
	uint32_t attempt;     /* replace: candidates drawn so far */
	uint32_t reads;       /* replace: stand-in reads so far */
	/* video clips read as byte ranges (loader/video.c): the sample's first
	 * read (ios[i]) counts its reads down; the others point to it */
	bool ranged;
	struct sio *whole;    /* a further range's read: the sample's first */
	uint32_t nleft;       /* the first's reads not yet landed (0: one read) */
	int64_t pres;         /* their bytes so far (each counted up to its need), or
				 the first error */
	uint64_t need;        /* the bytes this read must bring: its length but what
				 O_DIRECT's rounding adds past the sample's end */
	bool jcopy;           /* jpeg_cache: this read is the sample's copy (loader/jcache.c) */
	int32_t jrc;          /* its read's error (the decode thread reads the file instead) */
};

/* A read record made ready for one new read: the read itself and its sample,
 * the per-read state cleared.  Field by field, so the place's history (orig,
 * place, room, attempt, reads) stays: a whole-struct copy a sample was a
 * third of the loader's own instructions a batch. */
static inline void stk__sio_begin(struct sio *x, struct stk_io io, uint64_t size, bool prefix,
				  uint32_t slot, uint32_t idx, uint64_t at, bool ranged,
				  struct sio *whole)
{
	x->io = io;
	x->size = size;
	x->prefix = prefix;
	x->skip = 0;
	x->now_size = UINT64_MAX;
	x->slot = slot;
	x->idx = idx;
	x->t_submit = 0;
	x->at = at;
	x->rider = NULL;
	x->ranged = ranged;
	x->whole = whole;
	x->nleft = 0;
	x->jcopy = false;
	x->jrc = 0;
}

/* A tar shard, opened once (loader/shard_read.c). */
struct shard {
	int64_t first;        /* its first sample in the index */
	int fd;               /* -1: each read opens it */
	bool stamped;         /* the index recorded its size and mtime: */
	uint64_t size, mtime_ns;
	bool warned;          /* its change was said on stderr (once a loader) */
	uint64_t ra_end;      /* shard shuffle, buffered: bytes read ahead so far this
				 epoch (loader/shard_read.c), in order from 0 */
	uint64_t ra_gen;      /* the loader's gen ra_end is of */
};

/* Shard shuffle over buffered shards: a ring's read-ahead ranges, noted
 * under mu at a claim and asked of the kernel after (loader/shard_read.c). */
#define STK_RA_MAX 8u
struct stk__ra {
	int fd;
	uint64_t off, len;
};

/* Shards: members of a batch at most MERGE_GAP apart (their tar headers)
 * are read together, up to MERGE_MAX bytes a read; every member's room in a
 * slot counts MERGE_GAP more, so a merged run always fits.  8 KiB: a label
 * member and the headers, or the padding of a pack --align 4096. */
#define MERGE_GAP 8192u
#define MERGE_MAX (4u << 20)

/* The loader's counters at one moment (all since create), and the device
 * behind the data then: two of them make a window (stats, diagnosis). */
struct stk__snap {
	uint64_t t;
	uint64_t samples, bytes, batches, errors, replaced;
	uint64_t wait_ns, decode_ns, copy_ns;
	uint64_t decoded, decoded_fast; /* image mode: samples decoded, by restart intervals */
	double entropy_sum;       /* their shares of entropy-coded data decoded, summed */
	uint64_t fmt_decoded[STK_FORMATS], fmt_fast[STK_FORMATS], fmt_ns[STK_FORMATS]; /* per format */
	double area;              /* in-flight reads × ns */
	uint64_t rreq, rretries, rbytes, rhits, rmisses; /* remote data's transport and cache */
	bool disk_ok;
	struct stk_diskstat disk;
};
#define STK__SNAPS 64             /* one a second: a minute of history */

struct slot {
	struct stk_batch batch; /* first: the public view's address is the slot's */
	_Atomic(enum slot_state) state; /* changed under mu, but READY -> HELD by the
				   consumer's lock-free hand-out (ready_no) */
	_Atomic int64_t ready_no; /* number while READY, else -1 (a restart's drain
				   clears an old generation's): what stk_loader_next
				   looks at without mu */
	_Atomic bool returned;  /* stk_batch_release's mark, without mu: a held slot
				   is free once free_slot (under mu) sees it */
	uint64_t gen;           /* the start() generation it was filled for */
	int64_t number;
	uint32_t nios, pending, unsent, decoding;
	uint64_t epoch;
	uint32_t err_idx;       /* the first failed sample, for the fail policy's message */
	uint32_t nerr;          /* failed samples: counted when the batch is handed out */
	uint64_t used;          /* bytes of the slot's read area laid out (stand-ins go after) */
	uint32_t replaced;      /* places holding a stand-in (on_error replace) */
	bool gave_up;           /* replace: a place got no stand-in; the batch fails */
	int gave_up_rc;
	int64_t *bad;           /* replace: the samples found bad in this batch, never a
				   stand-in (grown as they fail; freed at destroy) */
	uint32_t nbad, badcap;
	char err[PATH_MAX + 256];
	uint64_t *offsets, *sizes; /* one block of 4 x batch_size + 1: offsets[batch_size + 1], */
	int64_t *labels, *indices; /* then sizes, labels, indices (loader/create.c) */
	struct sio *ios;
	uint32_t ring;
	uint32_t area;          /* split: its read area while filling, else NO_AREA */
};
#define NO_AREA UINT32_MAX

/* A ring's memo of the shards it stat'ed after one reap: every read that
 * reap returned had landed before the stat, so one stat serves them all. */
#define STAT_MEMO 64u
struct stat_memo {
	uint64_t round;        /* the reap it was taken after (0: none) */
	uint32_t shard;
	bool changed;
};

/* An I/O thread over one engine (an io_uring ring, the pread pool, null): it
 * claims batches, keeps their reads in flight and reaps them.  The loader's
 * `rings` and `nrings`, the tuner's "rings" and a slot's `ring` are these. */
struct io_thread {
	struct stk_loader *l;
	pthread_t tid;
	int os_tid;             /* gettid(), for its schedstat */
	uint32_t id;
	const struct stk_engine_ops *ops;
	struct stk_eng *eng;
	unsigned qd;            /* reads in flight at most now (loader/tune.c sets it; under mu) */
	unsigned cap;           /* what the engine was sized for */
	bool take;              /* takes new batches (loader/tune.c; under mu) */
	_Atomic bool want;      /* waits for a slot or the window to move: the
				   consumer's next release or batch wakes it */
	unsigned inflight;
	struct sio **queue;    /* claimed, not yet submitted (FIFO) */
	uint32_t qhead, qlen, qcap;
	struct stk_io **done;
	struct stk_io **batch; /* scratch for one submit call */
	int init_rc;
	bool init_done;
	uint64_t area_t;        /* for the time-weighted in-flight mean */
	double area;            /* since the last restart of the clock */
	double tarea;           /* since create (loader/tune.c's windows) */
	uint64_t stat_round;    /* reaps so far, for stat_memo */
	struct stat_memo stat_memo[STAT_MEMO];
	struct stk__ra ra[STK_RA_MAX]; /* read-ahead to ask for, outside mu */
	unsigned nra;
};

/* The most reads in flight the auto queue depth probes (also bounded by
 * batch_size x prefetch, what the slots can hold). */
#define STK_AUTO_QD_MAX 512u

/* loader/tune.c's state: the choices left to the loader (queue depth, I/O
 * threads that take new batches).  Under mu. */
struct tune_point {
	unsigned qd, rings;
	double rate, lat_ns, fill; /* bytes/s, mean read latency, mean in flight / qd */
	double busy;               /* I/O threads' CPU time / wall time, per active ring */
};

/* The I/O threads busy over this share of the time (CPU and run-queue wait,
 * per active ring) are limited by their own copies: the tuner adds rings
 * past it, and the verdict says so only past it. */
#define STK__COPY_BUSY 0.6
/* What the tuner found about more I/O threads: the verdict's advice follows it. */
enum stk__rings_found {
	STK__RINGS_UNTRIED,   /* not probed (yet, asked, one ring, or an unsure depth probe) */
	STK__RINGS_NOT_BUSY,  /* not probed: below STK__COPY_BUSY at the chosen depth */
	STK__RINGS_NO_GAIN,   /* probed: more rings gained under 10 % */
	STK__RINGS_RISING,    /* probed: still rising with every ring there is */
	STK__RINGS_CONSUMER,  /* probed: the consumer set the pace */
};

struct tune {
	bool auto_qd, auto_rings;
	int rings_found;        /* enum stk__rings_found */
	double busy;            /* the I/O threads' busy share per active ring over the last
				   window closed (probe or watch); -1: none yet */
	unsigned qd;            /* reads in flight at most, all rings together */
	unsigned active;        /* rings that take new batches */
	unsigned max_qd;        /* the most the engines can hold */
	unsigned plan_qd;       /* stk_io_plan's depth for this storage (an unsure probe's pick) */
	int phase;              /* TUNE_* (loader/tune.c) */
	unsigned skip;          /* completions to let pass before the window opens */
	/* A window is a sum of segments: one per stretch of an epoch (the gap
	 * between an epoch's end and the next start is left out). */
	uint64_t t0;            /* the open segment's start, 0 while none is open */
	uint64_t reads0, bytes0;
	double lat0, area0, cpu0;
	double w_ns, w_lat, w_area, w_cpu; /* closed segments of this window */
	uint64_t w_reads, w_bytes;
	struct tune_point pts[16];
	unsigned npts;
	double settled_rate;    /* bytes/s when the last probe settled */
	unsigned off;           /* consecutive watch windows away from it */
	unsigned lowfill;       /* consecutive probe windows the loader could not fill */
	uint64_t probe_t;       /* when the last probe started */
	unsigned probes;
	bool unsure;            /* the last probe could not fill its levels */
	bool down;              /* the probe steps below its start (nothing above it gained) */
	bool floor_start;       /* O_DIRECT reads: below the start only once the opens
				   are warm, and by one halving (tune.c's lowest_qd) */
	uint64_t cold_ns;       /* probe windows let pass while the opens were cold */
	bool extend;            /* this level's window goes on: its first part was marginal */
	bool warmed;            /* the first probe's first window was let pass (a cold
				   start: the directories' and inodes' first reads) */
	char why[800];
	char direct_why[200];
	char cap_why[400];      /* the engines hold less than asked: why (else empty) */
};

/* loader/meta.c's walk: its threads take the files of the batches about to
 * be claimed a few at a time from idx (batch `batch`, files [i, n)).  Under mu. */
#define STK__META_THREADS 8u
struct stk__meta {
	pthread_t tids[STK__META_THREADS];
	unsigned nthreads;
	pthread_cond_t cv;      /* a claim, or the end */
	bool quit;
	uint64_t gen;           /* the loader's generation the walk is of */
	int64_t next, batch;    /* the next batch to walk, the one in idx */
	int64_t *idx;           /* batch_size entries */
	uint32_t i, n;
};

struct stk_loader {
	struct stk_loader_opts o;
	char *path, *extensions, *cache_dir;
	struct stk_dataset *ds;
	struct stk_sampler sampler;
	struct stk_pool pool;
	struct slot *slots;
	/* split (image mode without keep_raw): a batch's reads land in one of
	 * `areas`' read areas, given back once its last sample is decoded, and
	 * a slot holds only images (img_off 0) */
	bool split;
	struct stk_pool areas;  /* not pinned: never copied to a device */
	uint64_t areas_used;    /* a bit per read area in use (at most 64) */
	struct io_thread *rings;
	uint32_t nrings;
	const struct stk_engine_ops *ops;
	bool direct;
	int64_t *scratch_idx;   /* batch_size indices, claim-time scratch */
	struct sio **sort_scratch; /* batch_size pointers, claim-time scratch */
	uint32_t *group_end;    /* shard shuffle: where each shard's samples end */
	struct stk_cpu_share share; /* default thread counts and where threads run */
	cpu_set_t cpuset;       /* the loader's threads' CPUs, when pin */
	bool pin;
	struct stk_image_opts img;
	bool image;
	struct stk__vloader *video; /* video mode (loader/video.c), else NULL */
	struct stk__jcache *jc; /* jpeg_cache: the copies (loader/jcache.c), else NULL */
	char *jpaths;           /* their paths, one a slot's sample (jc->plen bytes each) */
	uint32_t per_file;      /* samples a dataset entry gives: clips_per_video, else 1 */
	uint64_t raw_bytes;     /* a batch's reads at most: a slot's first part (raw mode,
				   keep_raw; the images follow), else a read area */
	uint64_t oversize;      /* samples above what a slot may take (loader/create.c) */
	int64_t oversize_idx;   /* the largest of them */
	uint64_t img_off;       /* where the images start in a slot: page-aligned */
	pthread_t *dthreads;
	uint32_t ndthreads;
	pthread_cond_t dcv;     /* decode queue not empty, or stop */
	struct sio **dq;        /* decode queue (FIFO) */
	uint32_t dq_head, dq_len, dq_cap;
	struct stk_hist *h_decode;
	uint64_t decode_ns;
	uint64_t decoded, decoded_fast; /* samples decoded, and of those by restart intervals */
	double entropy_sum;     /* their shares of entropy-coded data decoded, summed */
	uint64_t fmt_decoded[STK_FORMATS], fmt_fast[STK_FORMATS], fmt_ns[STK_FORMATS]; /* per
				   enum stk_image_format: decoded, by its fast path, decode time */

	pthread_mutex_t mu;
	pthread_cond_t cv;
	/* The consumer's wait for a batch, apart from mu (which a ring holds
	 * while it lays out or completes a batch: a consumer woken for a batch
	 * would sleep again on the lock): stk__loader_signal wakes it. */
	pthread_mutex_t wmu;
	pthread_cond_t wcv;
	_Atomic bool waiting;
	_Atomic bool stop;      /* written under mu; the hand-out reads it without */
	_Atomic bool consuming; /* a thread is in stk_loader_next or a restart: one at a time */
	bool draining;
	bool joined;            /* stk_loader_stop has joined the threads */
	uint64_t gen, epoch;
	struct stk__segment prev[STK_RESUME_SEGMENTS]; /* the epoch's segments before this one */
	uint32_t nprev;
	_Atomic uint64_t fingerprint; /* of the index, 0 until first asked for */
	_Atomic int64_t next_start; /* the next batch to claim (rings, under mu) */
	_Atomic int64_t next_out; /* the next to hand out (the consumer's, without mu) */
	_Atomic int fatal;      /* written under mu; the hand-out reads it without */
	char detail[PATH_MAX + 256];   /* written under mu */
	char last_error[PATH_MAX + 256]; /* the consumer's copy */

	struct stk_hist *h_wait, *h_read;  /* over the window (since the last reset) */
	/* counters since create, never reset (a window is the difference from a
	 * mark, stk__snap); counted when a batch is handed out, errors too, so a
	 * reset or a restart never drops the count of a batch the consumer gets */
	_Atomic uint64_t samples, bytes, batches, errors;
	_Atomic uint64_t replaced; /* stand-ins handed out (replace), since create */
	uint64_t index_errors;  /* left out of the index by the error policy: kept by resets */
	bool index_dropped;     /* a file changed size: its cache file was removed */
	bool warned_resize;     /* a file that changed size could not be read again: said */
	_Atomic uint32_t inflight, inflight_max;
	_Atomic uint32_t returned; /* slots released, not yet taken back (free_slot) */
	uint64_t t_create;
	_Atomic uint64_t wait_ns; /* the consumer's time in stk_loader_next */
	_Atomic uint64_t copy_ns; /* the consumer waiting on device copies (bindings) */
	uint64_t rd_reads, rd_bytes; /* reads completed since create (under mu) */
	uint64_t rd_members;    /* shards: members those reads brought (merged runs count all) */
	uint64_t ra_bytes;      /* shards: bytes read ahead in order (shard shuffle, buffered) */
	bool stream_ra;         /* shards: each shard's span read ahead in order */
	uint64_t ra_chunk;      /* bytes a read-ahead call (the kernel's cap a call) */
	struct shard *shards;   /* shards, in index order */
	uint32_t nshards;
	char shard_why[200];
	double rd_lat;          /* and their latencies' sum, ns */
	struct tune tune;
	uint64_t poll_t0;       /* start of a wait spread over timed-out polls */
	struct stk__snap mark;  /* the window's start: create or the last reset */
	/* diagnosis: a snapshot a second, taken on the consumer's side */
	char disk_name[64];     /* the block device behind the data, "" if none */
	struct stk__snap snaps[STK__SNAPS];
	uint32_t nsnaps, snap_head;
	uint64_t snap_next;     /* when the next one is due */
	/* loader/meta.c: files looked up ahead of the ring's opens (O_DIRECT) */
	struct stk__meta meta;
	bool meta_on;           /* its threads run: a claim wakes them */
	bool meta_warm;         /* the lookups are ahead of the reads in this generation */
	uint64_t meta_files, meta_ns; /* looked up ahead since create, and their time */
};

/* The loader's files, bottom to top: each calls only those above it in this
 * list (tests/cli_layers.sh checks).
 *   common.c     messages, read lengths, free slots, the wakes
 *   video_index.c video mode's index: made, cached, learnt (loader/vloader.h)
 *   video.c      video mode: clips of videos, their reads, decode and facts
 *   error.c      a failed sample counted and named
 *   jcache.c     jpeg_cache: a copy read instead of the file, checked; made after a read
 *   shard_read.c tar members: descriptors, merged runs, each member's check
 *   read.c       a batch's reads laid out in its slot
 *   replace.c    on_error replace: stand-ins
 *   diagnose.c   snapshots and the verdict
 *   tune.c       O_DIRECT or buffered, the queue depth and active I/O threads
 *   meta.c       files' metadata looked up ahead of the ring's opens
 *   producer.c   the I/O and decode threads
 *   consumer.c   start, next, release
 *   memory.c     the memory a loader takes (the slot bound)
 *   state.c, stats.c, create.c   resume, queries, create/stop/destroy */

/* --- loader/common.c ------------------------------------------------------ */
/* The detail stk_last_error gives. */
void stk__loader_detail(struct stk_loader *l, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* A one-line note on stderr, unless STK_F_QUIET. */
void stk__loader_notice(const struct stk_loader *l, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Room a sample of `size` bytes takes in a slot (O_DIRECT rounds it). */
uint64_t stk__loader_read_len(const struct stk_loader *l, uint64_t size);
/* How many free slots wake an I/O thread waiting for one. */
uint32_t stk__loader_wake_at(const struct stk_loader *l);
/* A free slot once the released ones are taken back, or NULL (split: also
 * when no read area is free).  Under mu. */
struct slot *stk__loader_free_slot(struct stk_loader *l);
/* Where slot s's reads go, and the fixed-buffer index of that memory. */
uint8_t *stk__loader_read_base(const struct stk_loader *l, const struct slot *s);
int stk__loader_read_buf(const struct stk_loader *l, const struct slot *s);
/* split: s's reads are done with (decoded, or dropped): its read area is
 * free again, and a ring waiting for one is woken.  Under mu. */
void stk__loader_area_done(struct stk_loader *l, struct slot *s);
/* Free slots (under mu after a take-back; without it, the released ones not
 * yet taken back are l->returned). */
uint32_t stk__loader_free_slots(const struct stk_loader *l);
/* Wakes the I/O threads that wait for a slot or the window. */
void stk__loader_wake_wanting(struct stk_loader *l);
/* Wakes every I/O thread (a slot freed, a stop). */
void stk__loader_wake_rings(struct stk_loader *l);
/* Wakes whoever waits for the loader: a start or a create (cv, under mu)
 * and a consumer waiting for its batch (wcv).  After the change it is for. */
void stk__loader_signal(struct stk_loader *l);

/* --- loader/video.c ------------------------------------------------------- */
/* Video mode: a sample is clip k of video v (sample v x per_file + k).  The
 * sampler counts clips; a claimed batch's samples become their videos (the
 * reads, labels, indices and stand-ins are per file, as in the other modes)
 * and each place keeps its k; the decode threads decode the clip into the
 * slot's clip area (after the reads, page-aligned at img_off). */
#define STK__VIDEO_EXTS ".mp4,.m4v,.mov,.mkv,.webm"
/* The options checked as create would (stk_loader_opts_check). */
int stk__vloader_check(const struct stk_video_opts *o, char *err, size_t errlen);
/* At create, before the index: the options checked and copied, per_file set. */
int stk__vloader_init(struct stk_loader *l, const struct stk_video_opts *o, char *err,
		      size_t errlen);
/* After the pool: each slot's clip arrays. */
int stk__vloader_slots(struct stk_loader *l);
void stk__vloader_free(struct stk_loader *l);
/* The consumer reached the epoch's end (every decode done): what was learnt
 * since the last write (remote data's video index) is written now, so a run
 * killed later keeps it.  Under mu. */
void stk__vloader_epoch_end(struct stk_loader *l);
/* The decode threads asked for, else the CPU share's. */
uint32_t stk__vloader_decode_threads(const struct stk_loader *l);
/* Bytes of a batch's clips (0 when not video mode). */
uint64_t stk__vloader_out_bytes(const struct stk_loader *l);
/* A claimed batch's n samples (clip numbers in idx) become their videos;
 * slot keeps each place's clip.  Under mu. */
void stk__vloader_claim(struct stk_loader *l, uint32_t slot, int64_t *idx, uint32_t n);
/* Decodes place i of slot (video v = its index now, a stand-in's too) from
 * data/len into the slot's clip area: 0 or <0 with the reason in why.  A
 * decode thread, without mu. */
int stk__vloader_decode(struct stk_loader *l, uint32_t slot, uint32_t i, int64_t video,
			uint64_t epoch, const void *data, size_t len, char *why, size_t whylen);
/* Skip's compaction: place `from` moves to `to`.  Under mu. */
void stk__vloader_move(struct stk_loader *l, uint32_t slot, uint32_t to, uint32_t from);
/* The batch's video fields. */
void stk__vloader_batch(const struct stk_loader *l, uint32_t slot, struct stk_batch *b);
/* loader/video_index.c: the video index (issue 38): loaded from the index
 * cache or made (at create, after the engine is picked, before the slots
 * are sized; remote data: learnt from each video's first whole read), so
 * each clip reads only its byte ranges; videos without one are read whole.
 * 0 or <0 (out of memory) with the reason in err. */
int stk__vloader_index(struct stk_loader *l, char *err, size_t errlen);
/* The most a clip of video idx takes in a slot's read area; 0 when its
 * clips are read whole (the caller sizes it as a file). */
uint64_t stk__vloader_room(const struct stk_loader *l, int64_t idx);
/* Reads of each clip at most (1 unless ranged): the rings' queues hold them. */
uint32_t stk__vloader_reads_per_clip(const struct stk_loader *l);
/* Lays out the ranged reads of clip place i of slot s (video idx) at byte
 * `place`: the first in s->ios[i] (the caller queues it, then
 * stk__vloader_queue_parts the others; its nleft counts all), on fd (a tar
 * shard's descriptor) or, fd -1, by the entry's path; O_DIRECT: each read
 * rounded out to the block size, a shard's buffered first read from the
 * member's tar header (its tag is checked).  Returns the room taken, or 0
 * when the video is read whole (the caller lays that out).  Under mu. */
uint64_t stk__vloader_setup(struct stk_loader *l, struct slot *s, uint32_t i, int64_t idx,
			    uint64_t place, int fd);
/* After x (a sample's first read) was queued: its further ranges' reads
 * queued on the slot's ring; returns how many.  Under mu. */
uint32_t stk__vloader_queue_parts(struct stk_loader *l, struct slot *s, struct sio *x);
/* Tests: every clip read whole (its file), as before the video index. */
extern bool stk__video_whole_files;
/* Counters for stk_loader_stats: clips read as ranges, and whole. */
void stk__vloader_counts(const struct stk_loader *l, uint64_t *ranged, uint64_t *whole);
/* Per-slot arrays and the decoders' working memory, for stk_loader_memory. */
uint64_t stk__vloader_meta_bytes(const struct stk_loader *l);
uint64_t stk__vloader_decode_bytes(const struct stk_loader *l, uint32_t threads);
/* The same rule for `threads` decoders of frames of px pixels (0: 720p). */
uint64_t stk__video_decoder_bytes(uint32_t threads, uint32_t codec_threads, uint64_t px);

/* --- loader/error.c ------------------------------------------------------- */
/* Unlinks the index cache (once): the data no longer matches it.  Under mu. */
void stk__loader_drop_index(struct stk_loader *l);
/* A tar member's name, read from its header before data_off in shard (a
 * path under the dataset's root), for messages; "" when unreadable. */
void stk__loader_member_name(const struct stk_loader *l, const char *shard, uint64_t data_off,
			     char *buf, size_t len);
/* A failed sample: counted with its batch, named as the loader's detail (and
 * the slot's, if it is the first).  why may be NULL.  Under mu. */
void stk__loader_sample_error(struct stk_loader *l, struct slot *s, struct sio *x, int rc,
			      const char *why);
#define NO_PLACE UINT64_MAX

/* --- loader/shard_read.c -------------------------------------------------- */
/* The shards' descriptors (at create; closed at destroy), a batch's reads
 * laid out in place order with neighbours merged (returns the reads queued
 * on r), and a landed member's check (0, or the error with the reason naming
 * its offset in why). */
int stk__shards_open(struct stk_loader *l, char *err, size_t errlen);
void stk__shards_close(struct stk_loader *l);
uint32_t stk__shards_lay_out(struct stk_loader *l, struct io_thread *r, struct slot *s, uint32_t n);
/* Asks the kernel for the read-ahead ring r noted at its claims (without mu,
 * before its reads are submitted). */
void stk__shards_read_ahead(struct io_thread *r);
int stk__shards_check(struct stk_loader *l, struct sio *x, char *why, size_t len);
/* After a read of a shard landed, before its check (ring r's thread,
 * without mu; r->stat_round counts the reap that returned it): sets
 * x->changed when the shard's size or mtime now differs from the index's,
 * so that bytes read from a shard rewritten in place are never taken for
 * the indexed members'.  One stat a shard a reap. */
void stk__shards_stat(const struct stk_loader *l, struct io_thread *r, struct sio *x);
/* The room a read of member idx alone takes, and that read laid out for
 * sample i of slot s at byte `place` (replace's stand-ins).  Under mu. */
uint64_t stk__shards_room(const struct stk_loader *l, int64_t idx);
uint64_t stk__shards_setup_one(struct stk_loader *l, struct slot *s, uint32_t i, int64_t idx,
			       uint64_t place);

/* --- loader/read.c -------------------------------------------------------- */
/* Lays out the read of dataset sample idx as sample i of slot s at byte
 * `place` of its read area; returns the room it takes. */
uint64_t stk__loader_setup_read(struct stk_loader *l, struct slot *s, uint32_t i, int64_t idx,
				uint64_t place);
/* The room the read of dataset sample idx alone takes in a slot. */
uint64_t stk__loader_room(const struct stk_loader *l, int64_t idx);
/* Folders and lists, after a read landed (ring thread, without mu): a read
 * whose length says the file changed size stats it, x->now_size its size
 * now (else UINT64_MAX). */
void stk__loader_file_stat(const struct stk_loader *l, struct sio *x);
/* A file that changed size since it was indexed (x->now_size): its read is
 * queued again at that size, in its place or after the slot's reads, so the
 * sample is its bytes now (true); false when it cannot be (read again
 * already this batch, no room, no stat): the caller counts the error.
 * Under mu. */
bool stk__loader_reread(struct stk_loader *l, struct slot *s, struct sio *x);
/* Lays out a claimed batch of n samples (l->scratch_idx) in slot s and
 * queues its reads on r; returns how many were queued.  Under mu. */
uint32_t stk__loader_lay_out(struct stk_loader *l, struct io_thread *r, struct slot *s, uint32_t n);

/* --- loader/replace.c ----------------------------------------------------- */
/* on_error replace: stand-ins queued for the slot's failed samples (true),
 * or none left to try (false: the slot finishes).  Under mu. */
bool stk__loader_replace_round(struct stk_loader *l, struct slot *s);

/* --- loader/diagnose.c ---------------------------------------------------- */
/* The counters now (under mu), the device's after unlocking. */
/* The tuner's findings on the I/O threads (loader/tune.c), which the
 * verdict's I/O-thread advice follows: never more of what it measured as no
 * gain, never a core that is not free. */
struct stk__rings_facts {
	int found;          /* enum stk__rings_found */
	double busy;        /* their busy share over the tuner's last window; -1: none */
	bool auto_rings, uring;
	uint32_t active, nrings, decode_threads, free_cpus, cpus;
};
/* What to try when the I/O threads are the limit, from f, into b. */
void stk__rings_advice(const struct stk__rings_facts *f, char *b, size_t n);
void stk__loader_snap(struct stk_loader *l, struct stk__snap *out);
void stk__loader_snap_disk(struct stk_loader *l, struct stk__snap *out);
/* Finds the device behind the data (at create). */
void stk__loader_find_disk(struct stk_loader *l);
/* The consumer's side, after a batch: takes the second's snapshot when due. */
void stk__loader_tick(struct stk_loader *l, uint64_t now);

/* --- loader/tune.c -------------------------------------------------------- */
/* O_DIRECT or buffered (at create, before the slots are sized); the queue
 * depth and active I/O threads (after they exist, then on every completed
 * read, under mu). */
void stk__tune_direct(struct stk_loader *l);
void stk__tune_init(struct stk_loader *l);
void stk__tune_tick(struct stk_loader *l, uint64_t now);
void stk__tune_restart(struct stk_loader *l);

/* --- loader/meta.c -------------------------------------------------------- */
/* O_DIRECT reads of files: a thread that looks up the files of the batches
 * about to be claimed, so the ring's opens find them cached.  Start and stop
 * from ring 0's thread (after its engine is up, before it returns); a claim
 * kicks it (under mu). */
void stk__meta_start(struct stk_loader *l);
void stk__meta_kick(struct stk_loader *l);
void stk__meta_stop(struct stk_loader *l);

/* --- loader/producer.c ---------------------------------------------------- */
/* The threads' bodies (started by loader/create.c). */
void *stk__loader_io_main(void *ring);
void *stk__loader_decode_main(void *loader);
/* A slot whose reads and decodes are all in.  Under mu. */
void stk__loader_finish_slot(struct stk_loader *l, struct slot *s);

/* --- loader/memory.c ------------------------------------------------------ */
/* The slot bound over n read lengths (their sum, sum of squares and largest),
 * no more than the worst batch. */
uint64_t stk__slot_bound(uint32_t batch, double n, double sum, double sq, double mx,
			 uint64_t worst);
/* Image mode without keep_raw: how many read areas (a batch's reads each),
 * for local data or remote (s3://, http(s)://). */
uint32_t stk__read_areas(const struct stk_loader_opts *o, const struct stk_image_opts *img,
			 bool remote);

/* --- loader/jcache.c ------------------------------------------------------ */
/* At create, image option jpeg_cache: the copies' folder opened (l->jc), or
 * a notice saying why not (the loader goes on without); 0 or -ENOMEM. */
int stk__loader_jcache_open(struct stk_loader *l);
void stk__loader_jcache_close(struct stk_loader *l);
/* Whether sample idx (sample i of slot s) is read from its copy: then its
 * path and length.  Under mu (the first time: one lstat). */
bool stk__loader_jcopy(struct stk_loader *l, struct slot *s, uint32_t i, int64_t idx,
		       const char **path, uint64_t *size);
struct stk__decode_info;
/* A decode thread's decode of x (sample idx) with l->jc: a copy checked
 * before it is decoded (refused: named, the file read and decoded instead),
 * a file decoded and then copied.  Without mu. */
int stk__loader_jcache_decode(struct stk_loader *l, struct sio *x, int64_t idx, uint64_t seed,
			      void *out, char *why, size_t whylen, struct stk__decode_info *info);

/* --- loader/consumer.c ---------------------------------------------------- */
/* stk_loader_start's body: `epoch` after the segments prev[0..nprev) (checked
 * with stk__sampler_check), skipping `skip` batches of this rank's share. */
int stk__loader_restart(struct stk_loader *l, uint64_t epoch, const struct stk__segment *prev,
			uint32_t nprev, uint64_t skip, uint32_t flags);

#endif
