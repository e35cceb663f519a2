/*
 * io/pread.c — the fallback where io_uring is unavailable (seccomp,
 * kernel.io_uring_disabled): a pool of threads doing open/pread/close (or
 * pread/pwrite on an open descriptor).  The null engine is io/null.c.
 *
 * Submitted ios go on one queue that the workers take from; finished ones on
 * a done list the I/O thread reaps.  The queue depth is the number of workers
 * busy at once.
 */
#include "io/engine.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct stk_eng {
	pthread_mutex_t mu;
	pthread_cond_t work_cv, done_cv;
	struct stk_io *todo_head, *todo_tail;
	struct stk_io *done_head, *done_tail;
	bool woken, stop;
	int root_fd;
	bool direct;
	pthread_t *threads;
	unsigned nthreads;
};

/* pread/pwrite until len bytes, end of file, or (O_DIRECT) a short block. */
static int64_t transfer(int fd, struct stk_io *io)
{
	uint64_t got = 0;
	uint8_t *buf = io->buf;
	while (got < io->len) {
		ssize_t r = io->op == STK_IO_WRITE
				    ? pwrite(fd, buf + got, io->len - got, (off_t)(io->offset + got))
				    : pread(fd, buf + got, io->len - got, (off_t)(io->offset + got));
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (r == 0)
			break;
		got += (uint64_t)r;
		if (got % STK_DIRECT_ALIGN && got < io->len)
			break; /* short and off a block boundary: end of file (O_DIRECT
				* could not go on from there) */
	}
	return (int64_t)got;
}

static int64_t do_io(int root_fd, struct stk_io *io, bool direct)
{
	if (io->op != STK_IO_READ_FILE)
		return transfer(io->fd, io);
	int fd = openat(root_fd, io->path, O_RDONLY | O_CLOEXEC | (direct ? O_DIRECT : 0));
	if (fd < 0)
		return -errno;
	int64_t res = transfer(fd, io);
	close(fd);
	return res;
}

static void *worker(void *arg)
{
	struct stk_eng *e = arg;
	pthread_mutex_lock(&e->mu);
	for (;;) {
		while (!e->todo_head && !e->stop)
			pthread_cond_wait(&e->work_cv, &e->mu);
		if (e->stop)
			break;
		struct stk_io *io = stk__io_pop(&e->todo_head, &e->todo_tail);
		pthread_mutex_unlock(&e->mu);
		int64_t res = do_io(e->root_fd, io, e->direct);
		pthread_mutex_lock(&e->mu);
		io->res = res;
		stk__io_push(&e->done_head, &e->done_tail, io);
		pthread_cond_signal(&e->done_cv);
	}
	pthread_mutex_unlock(&e->mu);
	return NULL;
}

static void pool_exit(struct stk_eng *e)
{
	if (!e)
		return;
	pthread_mutex_lock(&e->mu);
	e->stop = true;
	pthread_cond_broadcast(&e->work_cv);
	pthread_mutex_unlock(&e->mu);
	for (unsigned i = 0; i < e->nthreads; i++)
		pthread_join(e->threads[i], NULL);
	pthread_mutex_destroy(&e->mu);
	pthread_cond_destroy(&e->work_cv);
	pthread_cond_destroy(&e->done_cv);
	free(e->threads);
	free(e);
}

static int common_init(struct stk_eng **out, const struct stk_engine_cfg *cfg)
{
	struct stk_eng *e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	pthread_mutex_init(&e->mu, NULL);
	pthread_cond_init(&e->work_cv, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&e->done_cv, &ca);
	pthread_condattr_destroy(&ca);
	e->root_fd = cfg->root_fd;
	e->direct = cfg->direct;
	*out = e;
	return 0;
}

static int pool_init(struct stk_eng **out, const struct stk_engine_cfg *cfg)
{
	int rc = common_init(out, cfg);
	if (rc)
		return rc;
	struct stk_eng *e = *out;
	unsigned n = cfg->workers ? cfg->workers : cfg->queue_depth;
	e->threads = calloc(n, sizeof(*e->threads));
	if (!e->threads) {
		pool_exit(e);
		return -ENOMEM;
	}
	for (unsigned i = 0; i < n; i++) {
		if ((rc = -pthread_create(&e->threads[i], NULL, worker, e))) {
			pool_exit(e);
			return rc;
		}
		e->nthreads++;
	}
	return 0;
}

static int pool_submit(struct stk_eng *e, struct stk_io **ios, unsigned n)
{
	pthread_mutex_lock(&e->mu);
	for (unsigned i = 0; i < n; i++)
		stk__io_push(&e->todo_head, &e->todo_tail, ios[i]);
	pthread_cond_broadcast(&e->work_cv);
	pthread_mutex_unlock(&e->mu);
	return 0;
}

static int take_done(struct stk_eng *e, struct stk_io **done, unsigned max)
{
	unsigned n = 0;
	while (e->done_head && n < max)
		done[n++] = stk__io_pop(&e->done_head, &e->done_tail);
	return (int)n;
}

static int pool_reap(struct stk_eng *e, struct stk_io **done, unsigned max, bool wait)
{
	pthread_mutex_lock(&e->mu);
	while (wait && !e->done_head && !e->woken)
		pthread_cond_wait(&e->done_cv, &e->mu);
	e->woken = false;
	int n = take_done(e, done, max);
	pthread_mutex_unlock(&e->mu);
	return n;
}

static void pool_wake(struct stk_eng *e)
{
	pthread_mutex_lock(&e->mu);
	e->woken = true;
	pthread_cond_signal(&e->done_cv);
	pthread_mutex_unlock(&e->mu);
}

const struct stk_engine_ops stk__engine_pread = {
	.name = "pread",
	.init = pool_init,
	.submit = pool_submit,
	.reap = pool_reap,
	.wake = pool_wake,
	.exit = pool_exit,
};
