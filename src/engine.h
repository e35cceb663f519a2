/* engine.h — the read engines behind one small ops table, like fio's
 * ioengines.h: io_uring (default), a pread thread pool, and null (tests).
 * An engine instance belongs to one I/O thread, which calls init, submit and
 * reap; only wake may be called from other threads. */
#ifndef STK_ENGINE_H
#define STK_ENGINE_H

#include "internal.h"

#include <sys/uio.h>

/* One sample's read: open `path` (relative to the root descriptor), read
 * `read_len` bytes from `offset` (0 for a whole file) into buf, close. */
struct stk_io {
	struct stk_io *next;  /* engine-private queue link */
	const char *path;
	uint8_t *buf;
	uint64_t len;         /* the file's indexed size: what a good read returns */
	uint64_t read_len;    /* bytes asked for (len rounded up under O_DIRECT) */
	uint64_t offset;      /* where to read from (a tar member's place; aligned under O_DIRECT) */
	uint32_t skip;        /* bytes read before the sample's first (O_DIRECT alignment) */
	int64_t res;          /* set by the engine: bytes read, or -errno */
	uint64_t t_submit;    /* ns, set by the loader */
	uint32_t slot, idx;   /* which batch slot, which sample in it */
	int buf_index;        /* registered buffer holding buf, or -1 */
	/* io_uring engine's bookkeeping */
	uint32_t file_slot;
	uint8_t cqes;
};

struct stk_engine_cfg {
	int root_fd;
	unsigned queue_depth;     /* reads in flight at most (this engine) */
	unsigned workers;         /* pread: threads */
	bool direct;
	const struct iovec *bufs; /* pool slots, for fixed buffers (may be NULL) */
	unsigned nbufs;
	uint64_t null_latency_ns;
};

struct stk_eng;

struct stk_engine_ops {
	const char *name;
	int (*init)(struct stk_eng **out, const struct stk_engine_cfg *cfg);
	/* Queues ios and hands them to the kernel/workers; the caller keeps the
	 * number in flight within queue_depth.  0 or <0 (engine broken). */
	int (*submit)(struct stk_eng *e, struct stk_io **ios, unsigned n);
	/* Collects finished ios into done (room for queue_depth).  With wait, blocks
	 * until one finishes or wake is called.  Returns how many, or <0. */
	int (*reap)(struct stk_eng *e, struct stk_io **done, unsigned max, bool wait);
	/* Makes a blocked (or the next) reap return.  Any thread. */
	void (*wake)(struct stk_eng *e);
	void (*exit)(struct stk_eng *e);
};

extern const struct stk_engine_ops stk__engine_uring;
extern const struct stk_engine_ops stk__engine_pread;
extern const struct stk_engine_ops stk__engine_null;

/* 0 when io_uring can run this engine here, else <0 with the reason in why. */
int stk__uring_probe(char *why, size_t len);

#endif
