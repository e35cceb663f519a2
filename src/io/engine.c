/*
 * io/engine.c — picking a read engine, and the public stk_ioengine_* over the
 * same ops the loader's I/O threads run (io/engine.h): `stoker disk` measures
 * storage through these, so its figures are the loader's read path.
 */
#include "io/engine.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int stk__engine_pick(enum stk_engine want, const struct stk_engine_ops **ops, char *note,
		     size_t notelen, char *err, size_t errlen)
{
	char why[256];
	note[0] = 0;
	switch (want) {
	case STK_ENGINE_NULL:
		*ops = &stk__engine_null;
		return 0;
	case STK_ENGINE_PREAD:
		*ops = &stk__engine_pread;
		return 0;
	case STK_ENGINE_URING:
		if (stk__uring_probe(why, sizeof(why)) < 0) {
			snprintf(err, errlen, "engine io_uring: %s", why);
			return -EOPNOTSUPP;
		}
		*ops = &stk__engine_uring;
		return 0;
	case STK_ENGINE_AUTO:
		if (getenv("STOKER_NO_URING")) {
			snprintf(why, sizeof(why), "STOKER_NO_URING is set");
		} else if (stk__uring_probe(why, sizeof(why)) == 0) {
			*ops = &stk__engine_uring;
			return 0;
		}
		snprintf(note, notelen, "io_uring is unavailable (%s); using the pread thread pool",
			 why);
		*ops = &stk__engine_pread;
		return 0;
	}
	snprintf(err, errlen, "engine %d is not one of auto, io_uring, pread, null", (int)want);
	return -EINVAL;
}

struct stk_ioengine {
	const struct stk_engine_ops *ops;
	struct stk_eng *eng;
};

int stk_ioengine_create(struct stk_ioengine **out, const struct stk_ioengine_opts *opts,
			char *errbuf, size_t errlen)
{
	char scratch[8];
	if (!errbuf || !errlen) {
		errbuf = scratch;
		errlen = sizeof(scratch);
	}
	errbuf[0] = 0;
	*out = NULL;
	struct stk_ioengine_opts o = {0};
	if (opts) {
		if (opts->size && opts->size < offsetof(struct stk_ioengine_opts, buf_area)) {
			snprintf(errbuf, errlen, "options struct too small (%u bytes)", opts->size);
			return -EINVAL;
		}
		size_t n = opts->size && opts->size < sizeof(o) ? opts->size : sizeof(o);
		memcpy(&o, opts, n);
	}
	/* the loader's bound on reads in flight, from the option table */
	double qd_max = stk_option_find("queue_depth")->max;
	if (o.queue_depth > qd_max || o.workers > 4096) {
		snprintf(errbuf, errlen, "option out of range: queue_depth <= %.0f, workers <= 4096",
			 qd_max);
		return -ERANGE;
	}
	if (!o.queue_depth)
		o.queue_depth = STK_IOENGINE_QD_DEFAULT;
	struct stk_ioengine *e = calloc(1, sizeof(*e));
	if (!e) {
		snprintf(errbuf, errlen, "out of memory");
		return -ENOMEM;
	}
	char note[320];
	int rc = stk__engine_pick(o.engine, &e->ops, note, sizeof(note), errbuf, errlen);
	if (rc) {
		free(e);
		return rc;
	}
	char why[200];
	if (e->ops == &stk__engine_uring && o.queue_depth > stk__uring_max_depth(why, sizeof(why))) {
		snprintf(errbuf, errlen, "queue_depth %u: %s", o.queue_depth, why);
		free(e);
		return -ERANGE;
	}
	struct iovec *iov = NULL;
	if (o.buf_area && o.nbufs && o.buf_bytes) {
		iov = calloc(o.nbufs, sizeof(*iov));
		for (uint32_t i = 0; iov && i < o.nbufs; i++)
			iov[i] = (struct iovec){(uint8_t *)o.buf_area + (uint64_t)i * o.buf_bytes,
						o.buf_bytes};
	}
	struct stk_engine_cfg cfg = {.root_fd = o.dir_fd ? o.dir_fd : AT_FDCWD,
				     .queue_depth = o.queue_depth,
				     .workers = o.workers ? o.workers : o.queue_depth,
				     .direct = o.flags & STK_IOENG_DIRECT, .bufs = iov,
				     .nbufs = iov ? o.nbufs : 0, .null_latency_ns = o.null_latency_ns};
	rc = e->ops->init(&e->eng, &cfg);
	free(iov);
	if (rc) {
		snprintf(errbuf, errlen, "%s engine: %s", e->ops->name, stk_strerror(rc));
		free(e);
		return rc;
	}
	snprintf(errbuf, errlen, "%s", note);
	*out = e;
	return 0;
}

int stk_ioengine_submit(struct stk_ioengine *e, struct stk_io **ios, unsigned n)
{
	return n ? e->ops->submit(e->eng, ios, n) : 0;
}

int stk_ioengine_reap(struct stk_ioengine *e, struct stk_io **done, unsigned max, int wait)
{
	return e->ops->reap(e->eng, done, max, wait != 0);
}

void stk_ioengine_wake(struct stk_ioengine *e)
{
	e->ops->wake(e->eng);
}

const char *stk_ioengine_name(const struct stk_ioengine *e)
{
	return e->ops->name;
}

void stk_ioengine_destroy(struct stk_ioengine *e)
{
	if (!e)
		return;
	e->ops->exit(e->eng);
	free(e);
}
