/*
 * io/uring.c — reads and writes through io_uring (liburing).
 *
 * A whole-file read (STK_IO_READ_FILE, a sample) is one linked chain of three
 * requests on a direct descriptor: openat (into a file-table slot we own) →
 * read → close.  Open posts a CQE only on failure (CQE_SKIP_SUCCESS), and
 * then the kernel posts nothing for the read and close it cancels; otherwise
 * read and close post one each, and the read is hard-linked to the close so
 * a failed read still frees its slot.  The slot is reused only after its
 * close completes.  A read or write on an open descriptor is one request.
 * Under O_DIRECT the caller's buffers are registered, so reads skip the page
 * pinning.  submit only fills SQEs; reap submits them and collects in one
 * io_uring_enter, as fio's engine does per I/O.  A poll on an eventfd kept
 * armed in the ring lets other threads wake a reap (a poll, not a read, so
 * the kernel never writes into engine memory).
 */
#include "io/engine.h"

#include <liburing.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/resource.h>

enum { TAG_OPEN = 1, TAG_READ = 2, TAG_CLOSE = 3 };
#define TAG_MASK 3ull
#define WAKE_DATA 0ull

struct stk_eng {
	struct io_uring ring;
	int root_fd;
	int efd;
	bool efd_armed;
	bool fixed_bufs;
	bool direct;
	unsigned qd;
	unsigned inflight;    /* ios submitted and not yet handed back */
	uint32_t *free_slots; /* file-table slots not in use */
	unsigned nfree;
};

int stk__uring_probe(char *why, size_t len)
{
	struct io_uring ring;
	int rc = io_uring_queue_init(8, &ring, 0);
	if (rc < 0) {
		snprintf(why, len, "io_uring_setup: %s%s", strerror(-rc),
			 rc == -EPERM || rc == -ENOSYS ? " (seccomp or kernel.io_uring_disabled)" : "");
		return rc;
	}
	struct io_uring_probe *p = io_uring_get_probe_ring(&ring);
	if (!p || !io_uring_opcode_supported(p, IORING_OP_OPENAT) ||
	    !io_uring_opcode_supported(p, IORING_OP_READ) ||
	    !io_uring_opcode_supported(p, IORING_OP_WRITE) ||
	    !io_uring_opcode_supported(p, IORING_OP_CLOSE)) {
		snprintf(why, len, "io_uring lacks openat/read/write/close (kernel too old)");
		rc = -EOPNOTSUPP;
	} else if ((rc = io_uring_register_files_sparse(&ring, 4)) < 0) {
		snprintf(why, len, "io_uring cannot register a sparse file table: %s", strerror(-rc));
	}
	if (p)
		io_uring_free_probe(p);
	io_uring_queue_exit(&ring);
	return rc < 0 ? rc : 0;
}

/* Each read is three requests (openat, read, close) and the wake poll takes
 * a few: a ring of `entries` = 3 x depth + 8 SQEs, which the kernel caps at
 * IORING_MAX_ENTRIES (32768), and a file table of depth slots, which it
 * refuses (EMFILE) above the soft RLIMIT_NOFILE. */
#define RING_ENTRIES(qd) ((qd) * 3u + 8u)
#define KERNEL_MAX_ENTRIES 32768u

unsigned stk__uring_max_depth(char *why, size_t len)
{
	unsigned m = (KERNEL_MAX_ENTRIES - 8u) / 3u;
	snprintf(why, len, "an io_uring ring holds %u reads at most: 3 requests each, %u entries "
		 "a ring", m, KERNEL_MAX_ENTRIES);
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < m) {
		m = rl.rlim_cur ? (unsigned)rl.rlim_cur : 1;
		snprintf(why, len, "ulimit -n is %u: each io_uring ring's file table holds %u "
			 "descriptors at most; raise it for a deeper queue", m, m);
	}
	return m;
}

static int ring_init(struct io_uring *ring, unsigned entries)
{
	struct io_uring_params p;
	/* The ring is created, submitted to and reaped by one thread: let the
	 * kernel run completions only when we ask (fewer interrupts). */
	static const unsigned flag_sets[] = {
		IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN,
		IORING_SETUP_COOP_TASKRUN,
		0,
	};
	int rc = -EINVAL;
	for (size_t i = 0; i < STK_ARRAY_SIZE(flag_sets); i++) {
		memset(&p, 0, sizeof(p));
		p.flags = flag_sets[i];
		rc = io_uring_queue_init_params(entries, ring, &p);
		if (rc != -EINVAL)
			break;
	}
	return rc;
}

static int arm_wake(struct stk_eng *e)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&e->ring);
	if (!sqe)
		return -EBUSY;
	io_uring_prep_poll_add(sqe, e->efd, POLLIN);
	io_uring_sqe_set_data64(sqe, WAKE_DATA);
	e->efd_armed = true;
	return 0;
}

static void uring_exit(struct stk_eng *e);

static int uring_init(struct stk_eng **out, const struct stk_engine_cfg *cfg)
{
	struct stk_eng *e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->root_fd = cfg->root_fd;
	e->qd = cfg->queue_depth ? cfg->queue_depth : 1;
	e->direct = cfg->direct;
	e->efd = -1;
	int rc = ring_init(&e->ring, RING_ENTRIES(e->qd));
	if (rc < 0) {
		free(e);
		return rc;
	}
	e->free_slots = malloc(e->qd * sizeof(*e->free_slots));
	e->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (!e->free_slots || e->efd < 0) {
		rc = e->free_slots ? -errno : -ENOMEM;
		goto fail;
	}
	if ((rc = io_uring_register_files_sparse(&e->ring, e->qd)) < 0)
		goto fail;
	for (unsigned i = 0; i < e->qd; i++)
		e->free_slots[i] = e->qd - 1 - i;
	e->nfree = e->qd;
	/* Fixed buffers spare O_DIRECT the page pinning of every read; buffered
	 * reads copy from the page cache faster into a plain user address
	 * (copy_to_user) than through the registered pages (measured: 8-10 %
	 * less CPU per sample on warm data), so they go without. */
	if (cfg->bufs && cfg->nbufs && cfg->direct)
		e->fixed_bufs = io_uring_register_buffers(&e->ring, cfg->bufs, cfg->nbufs) == 0;
	/* Opens that miss the dentry cache go to io-wq workers: allow enough of them
	 * to keep the queue depth busy on cold metadata. */
	unsigned workers[2] = {e->qd, e->qd};
	io_uring_register_iowq_max_workers(&e->ring, workers);
	io_uring_register_ring_fd(&e->ring);
	if ((rc = arm_wake(e)) < 0)
		goto fail;
	*out = e;
	return 0;
fail:
	uring_exit(e);
	return rc;
}

static void prep_rw(struct stk_eng *e, struct io_uring_sqe *sqe, struct stk_io *io, int fd,
		    bool fixed_file)
{
	bool fixed_buf = e->fixed_bufs && io->buf_index >= 0;
	if (io->op == STK_IO_WRITE) {
		if (fixed_buf)
			io_uring_prep_write_fixed(sqe, fd, io->buf, (unsigned)io->len, io->offset,
						  io->buf_index);
		else
			io_uring_prep_write(sqe, fd, io->buf, (unsigned)io->len, io->offset);
	} else if (fixed_buf) {
		io_uring_prep_read_fixed(sqe, fd, io->buf, (unsigned)io->len, io->offset,
					 io->buf_index);
	} else {
		io_uring_prep_read(sqe, fd, io->buf, (unsigned)io->len, io->offset);
	}
	if (fixed_file)
		sqe->flags |= IOSQE_FIXED_FILE;
}

static int uring_submit(struct stk_eng *e, struct stk_io **ios, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		struct stk_io *io = ios[i];
		uintptr_t p = (uintptr_t)io;
		io->res = 0;
		if (io->op != STK_IO_READ_FILE) {
			struct io_uring_sqe *sqe = io_uring_get_sqe(&e->ring);
			if (!sqe)
				return -EBUSY; /* the caller keeps within queue_depth: a bug */
			prep_rw(e, sqe, io, io->fd, false);
			io_uring_sqe_set_data64(sqe, p | TAG_READ);
			io->priv.pending = 1;
			e->inflight++;
			continue;
		}
		if (!e->nfree || io_uring_sq_space_left(&e->ring) < 3)
			return -EBUSY;
		uint32_t fs = e->free_slots[--e->nfree];
		io->priv.file_slot = fs;
		io->priv.pending = 2; /* read + close */
		e->inflight++;

		/* no O_CLOEXEC: a direct descriptor has no fd to inherit, and
		 * io_uring refuses the flag for one */
		struct io_uring_sqe *sqe = io_uring_get_sqe(&e->ring);
		io_uring_prep_openat_direct(sqe, e->root_fd, io->path,
					    O_RDONLY | (e->direct ? O_DIRECT : 0), 0, fs);
		sqe->flags |= IOSQE_IO_LINK | IOSQE_CQE_SKIP_SUCCESS;
		io_uring_sqe_set_data64(sqe, p | TAG_OPEN);

		sqe = io_uring_get_sqe(&e->ring);
		prep_rw(e, sqe, io, (int)fs, true);
		sqe->flags |= IOSQE_IO_HARDLINK;
		io_uring_sqe_set_data64(sqe, p | TAG_READ);

		sqe = io_uring_get_sqe(&e->ring);
		io_uring_prep_close_direct(sqe, fs);
		io_uring_sqe_set_data64(sqe, p | TAG_CLOSE);
	}
	return 0;
}

static int uring_reap(struct stk_eng *e, struct stk_io **done, unsigned max, bool wait)
{
	int rc;
	if (!e->efd_armed && (rc = arm_wake(e)) < 0)
		return rc;
	if (wait && !io_uring_cq_ready(&e->ring))
		rc = io_uring_submit_and_wait(&e->ring, 1);
	else
		rc = io_uring_submit_and_get_events(&e->ring);
	if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY && rc != -ETIME)
		return rc;
	unsigned n = 0, seen = 0, head;
	struct io_uring_cqe *cqe;
	io_uring_for_each_cqe(&e->ring, head, cqe)
	{
		if (n == max)
			break; /* the rest waits for the next reap */
		seen++;
		uint64_t ud = io_uring_cqe_get_data64(cqe);
		if (ud == WAKE_DATA) {
			uint64_t v;
			ssize_t r = read(e->efd, &v, sizeof(v)); /* reset the counter */
			(void)r;
			e->efd_armed = false;
			continue;
		}
		struct stk_io *io = (struct stk_io *)(uintptr_t)(ud & ~TAG_MASK);
		switch (ud & TAG_MASK) {
		case TAG_OPEN:
			/* Only a failed open posts, and then the kernel posts nothing for
			 * the read and close it cancels (the head skipped success): the
			 * io is done and its file slot was never filled. */
			io->res = cqe->res;
			io->priv.pending = 1;
			e->free_slots[e->nfree++] = io->priv.file_slot;
			break;
		case TAG_READ:
			io->res = cqe->res;
			break;
		case TAG_CLOSE:
			e->free_slots[e->nfree++] = io->priv.file_slot;
			break;
		}
		if (--io->priv.pending == 0) {
			done[n++] = io;
			e->inflight--;
		}
	}
	io_uring_cq_advance(&e->ring, seen);
	return (int)n;
}

static void uring_wake(struct stk_eng *e)
{
	uint64_t one = 1;
	ssize_t w = write(e->efd, &one, sizeof(one));
	(void)w; /* a full counter already means "wake" */
}

/* The kernel may still write into the caller's buffers until every request
 * has completed: cancel what is in flight and reap it before the ring goes. */
static void uring_exit(struct stk_eng *e)
{
	if (!e)
		return;
	if (e->inflight) {
		struct io_uring_sqe *sqe = io_uring_get_sqe(&e->ring);
		if (sqe) {
			io_uring_prep_cancel64(sqe, 0, IORING_ASYNC_CANCEL_ANY);
			io_uring_sqe_set_data64(sqe, WAKE_DATA);
		}
		for (unsigned tries = 0; e->inflight && tries < 100000; tries++) {
			int rc = io_uring_submit_and_wait(&e->ring, 1);
			if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY && rc != -ETIME)
				break;
			unsigned head, seen = 0;
			struct io_uring_cqe *cqe;
			io_uring_for_each_cqe(&e->ring, head, cqe)
			{
				seen++;
				uint64_t ud = io_uring_cqe_get_data64(cqe);
				struct stk_io *io = (struct stk_io *)(uintptr_t)(ud & ~TAG_MASK);
				if (!io)
					continue; /* the wake poll, the cancel */
				if ((ud & TAG_MASK) == TAG_OPEN)
					io->priv.pending = 1;
				if (--io->priv.pending == 0)
					e->inflight--;
			}
			io_uring_cq_advance(&e->ring, seen);
		}
	}
	io_uring_queue_exit(&e->ring);
	if (e->efd >= 0)
		close(e->efd);
	free(e->free_slots);
	free(e);
}

const struct stk_engine_ops stk__engine_uring = {
	.name = "io_uring",
	.init = uring_init,
	.submit = uring_submit,
	.reap = uring_reap,
	.wake = uring_wake,
	.exit = uring_exit,
};
