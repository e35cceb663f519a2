/* io/engine.h — the read engines behind one small ops table, like fio's
 * ioengines.h: io_uring (default), a pread thread pool, and null (tests).
 * An engine instance belongs to one thread, which calls init, submit, reap
 * and exit; only wake may be called from other threads.  The loader's I/O
 * threads and the public stk_ioengine_* (io/engine.c: `stoker disk`) both run
 * them, so the storage benchmark measures the loader's read path.  The I/O
 * itself is the public struct stk_io. */
#ifndef STK_ENGINE_H
#define STK_ENGINE_H

#include "base/internal.h"

#include <sys/uio.h>

struct stk_engine_cfg {
	int root_fd;              /* READ_FILE paths are relative to it */
	unsigned queue_depth;     /* I/Os in flight at most (this engine) */
	unsigned workers;         /* pread: threads */
	bool direct;              /* READ_FILE opens with O_DIRECT; fixed buffers */
	const struct iovec *bufs; /* buffers to register (may be NULL) */
	unsigned nbufs;
	uint64_t null_latency_ns;
	struct stk__remote *remote; /* http: the objects READ_FILE paths name (io/remote.h) */
};

struct stk_eng;

struct stk_engine_ops {
	const char *name;
	int (*init)(struct stk_eng **out, const struct stk_engine_cfg *cfg);
	/* Queues ios; they go to the kernel (or the workers) at the latest in
	 * the next reap.  The caller keeps the number in flight within
	 * queue_depth.  0 or <0 (engine broken). */
	int (*submit)(struct stk_eng *e, struct stk_io **ios, unsigned n);
	/* Submits what is queued and collects finished ios into done (room for
	 * max).  With wait, blocks until one finishes or wake is called.
	 * Returns how many, or <0. */
	int (*reap)(struct stk_eng *e, struct stk_io **done, unsigned max, bool wait);
	/* Makes a blocked (or the next) reap return.  Any thread. */
	void (*wake)(struct stk_eng *e);
	/* Waits for what is in flight, frees. */
	void (*exit)(struct stk_eng *e);
};

extern const struct stk_engine_ops stk__engine_uring;
extern const struct stk_engine_ops stk__engine_pread;
extern const struct stk_engine_ops stk__engine_null;
extern const struct stk_engine_ops stk__engine_http; /* io/http.c: remote objects */

/* The deepest queue one io_uring engine can take here (the kernel's ring
 * size, the soft RLIMIT_NOFILE for its file table), with why it is that. */
unsigned stk__uring_max_depth(char *why, size_t len);
/* 0 when io_uring can run this engine here, else <0 with the reason in why. */
int stk__uring_probe(char *why, size_t len);

/* The ops for `want`: AUTO takes io_uring where the probe passes (and
 * STOKER_NO_URING is unset), else pread with the reason in note ("" when
 * nothing to say).  An explicit io_uring that cannot run is an error (<0,
 * reason in err). */
int stk__engine_pick(enum stk_engine want, const struct stk_engine_ops **ops, char *note,
		     size_t notelen, char *err, size_t errlen);

/* A FIFO of I/Os through their priv.next (the null and pread engines' queues). */
static inline void stk__io_push(struct stk_io **head, struct stk_io **tail, struct stk_io *io)
{
	io->priv.next = NULL;
	if (*tail)
		(*tail)->priv.next = io;
	else
		*head = io;
	*tail = io;
}

static inline struct stk_io *stk__io_pop(struct stk_io **head, struct stk_io **tail)
{
	struct stk_io *io = *head;
	*head = io->priv.next;
	if (!*head)
		*tail = NULL;
	return io;
}

#endif
