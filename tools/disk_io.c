/* disk_io.c — the job runner of `stoker disk`, fio-style.
 *
 * A job is `threads` threads; each keeps `qd` I/Os in flight and records
 * every I/O's latency (from just before the submit call to the completion,
 * ns: fio's "lat" less fio's own preparation) into its own histogram; the
 * histograms are merged once the threads end.
 * Two engines behind one loop shape (init, submit, reap, exit):
 *   io_uring  one ring per thread, one I/O per io_uring_enter that also
 *             collects completions (see uring_block); small files are read
 *             as linked openat → read → close chains on direct descriptors,
 *             the way the loader reads samples;
 *   psync     pread/pwrite; a synchronous call holds one I/O, so a queue
 *             depth of q runs q workers per thread (a pread thread pool).
 * Sequential threads own equal slices of the file; random ones roam all of it.
 * Time-based jobs wrap around; runtime 0 means one pass.  Completions before
 * the ramp ends are left out, as fio's ramp_time.
 */
#include "disk.h"

#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define ALIGN_UP(x, a) (((x) + (a)-1) / (a) * (a))

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void dk_small_name(char *buf, size_t len, uint32_t i)
{
	snprintf(buf, len, "s%07u", i);
}

struct run;

struct worker {
	struct run *run;
	uint32_t idx, group, qd;
	pthread_t tid;
	struct stk_hist *hist;
	uint64_t bytes, ios;
	uint64_t t_begin, t_end; /* measured window */
	uint64_t ramp_end, deadline;
	int err;
	char errmsg[160];
	_Atomic uint64_t prog; /* bytes done, ramp included: the progress line */
};

struct run {
	const struct dk_job *j;
	enum dk_engine engine;
	uint32_t nw, ngroups;
	struct worker *w;
	_Atomic uint64_t *next; /* per group: blocks handed out */
	uint64_t blocks_per_group;
	bool one_pass;
	_Atomic uint32_t next_file;
	_Atomic int fail;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	uint32_t ready, done;
	bool go;
};

static void fail(struct worker *w, int err, const char *what)
{
	if (w->err)
		return;
	w->err = err;
	snprintf(w->errmsg, sizeof(w->errmsg), "%s: %s", what, stk_strerror(err));
	atomic_store(&w->run->fail, 1);
}

static bool should_stop(struct worker *w, uint64_t now)
{
	return atomic_load_explicit(&dk_stop, memory_order_relaxed) ||
	       atomic_load_explicit(&w->run->fail, memory_order_relaxed) || now >= w->deadline;
}

/* A bijection on [0, n): a Feistel network on the smallest even power of two
 * >= n, walking the cycle until the value falls inside.  Random reads visit
 * every block once per pass, as fio's random map does, so a block is never
 * read twice from the page cache nor skipped. */
static uint64_t permute(uint64_t i, uint64_t n, uint64_t key)
{
	if (n < 2)
		return 0;
	unsigned bits = 64 - (unsigned)__builtin_clzll(n - 1), half = (bits + 1) / 2;
	uint64_t mask = (1ull << half) - 1;
	do {
		uint64_t l = i >> half, r = i & mask;
		for (uint64_t k = 0; k < 4; k++) {
			uint64_t t = l ^ (mix64(r ^ key ^ (k << 60)) & mask);
			l = r;
			r = t;
		}
		i = l << half | r;
	} while (i >= n);
	return i;
}

/* The next block's offset, or false when a one-pass job has handed out all. */
static bool next_offset(struct worker *w, uint64_t *off)
{
	const struct dk_job *j = w->run->j;
	uint64_t bpg = w->run->blocks_per_group;
	uint64_t b = atomic_fetch_add_explicit(&w->run->next[w->group], 1, memory_order_relaxed);
	if (w->run->one_pass && b >= bpg)
		return false;
	uint64_t i = (uint64_t)w->group * bpg + b % bpg;
	if (j->random)
		i = permute(i, bpg * j->threads, mix64(j->seed + b / bpg));
	*off = i * j->bs;
	return true;
}

static bool next_file(struct worker *w, uint32_t *f)
{
	uint32_t i = atomic_fetch_add_explicit(&w->run->next_file, 1, memory_order_relaxed);
	if (i >= w->run->j->nfiles)
		return false;
	*f = w->run->j->order[i];
	return true;
}

/* Records one completion at time t if the ramp is over. */
static void account(struct worker *w, uint64_t t, uint64_t t0, uint64_t n)
{
	atomic_fetch_add_explicit(&w->prog, n, memory_order_relaxed);
	if (t < w->ramp_end)
		return;
	stk_hist_add(w->hist, t - t0);
	w->bytes += n;
	w->ios++;
}

static void *alloc_bufs(struct worker *w, uint32_t n, uint64_t each)
{
	const struct dk_job *j = w->run->j;
	size_t al = j->align > 4096 ? j->align : 4096;
	void *p = NULL;
	if (posix_memalign(&p, al, (size_t)(n * each))) {
		fail(w, -ENOMEM, "buffers");
		return NULL;
	}
	/* random bytes, so storage that compresses or dedupes sees real data */
	uint64_t s = mix64(j->seed ^ w->idx);
	for (size_t i = 0; i + 8 <= (size_t)(n * each); i += 8) {
		s = mix64(s);
		memcpy((char *)p + i, &s, 8);
	}
	return p;
}

/* --- psync -------------------------------------------------------------------- */

static void psync_block(struct worker *w)
{
	const struct dk_job *j = w->run->j;
	char *buf = alloc_bufs(w, 1, j->bs);
	if (!buf)
		return;
	uint64_t off, t = now_ns();
	while (!should_stop(w, t) && next_offset(w, &off)) {
		uint64_t t0 = now_ns();
		ssize_t n = j->write ? pwrite(j->fd, buf, j->bs, (off_t)off)
				     : pread(j->fd, buf, j->bs, (off_t)off);
		t = now_ns();
		if (n < 0 && errno == EINTR)
			continue;
		if (n != (ssize_t)j->bs) {
			fail(w, n < 0 ? -errno : -EIO, j->write ? "write" : "read");
			break;
		}
		account(w, t, t0, (uint64_t)n);
	}
	free(buf);
}

static int read_whole(const struct dk_job *j, uint32_t f, char *buf, uint64_t *got)
{
	char name[32];
	dk_small_name(name, sizeof(name), f);
	int fd = openat(j->dirfd, name, O_RDONLY | O_CLOEXEC | (j->direct ? O_DIRECT : 0));
	if (fd < 0)
		return -errno;
	uint64_t want = j->sizes[f], len = j->direct ? ALIGN_UP(want, j->align) : want, done = 0;
	while (done < want) {
		ssize_t n = pread(fd, buf + done, (size_t)(len - done), (off_t)done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			int e = n < 0 ? -errno : STK_ESHORT;
			close(fd);
			return e;
		}
		done += (uint64_t)n;
	}
	close(fd);
	*got = done;
	return 0;
}

static void psync_files(struct worker *w)
{
	const struct dk_job *j = w->run->j;
	char *buf = alloc_bufs(w, 1, ALIGN_UP(j->max_size, j->align) + j->align);
	if (!buf)
		return;
	uint32_t f;
	uint64_t t = now_ns();
	while (!should_stop(w, t) && next_file(w, &f)) {
		uint64_t t0 = now_ns(), got = 0;
		int r = read_whole(j, f, buf, &got);
		t = now_ns();
		if (r) {
			fail(w, r, "small file");
			break;
		}
		account(w, t, t0, got);
	}
	free(buf);
}

/* --- io_uring ------------------------------------------------------------------ */

static int ring_init(struct io_uring *ring, unsigned entries)
{
	/* the flags fio and the loader use when the kernel has them; the ring is
	 * created by the thread that drives it, as SINGLE_ISSUER requires */
	static const unsigned try[] = {
		IORING_SETUP_COOP_TASKRUN | IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN,
		IORING_SETUP_COOP_TASKRUN, 0};
	int r = -EINVAL;
	for (size_t i = 0; i < 3 && r == -EINVAL; i++)
		r = io_uring_queue_init(entries, ring, try[i]);
	return r;
}

/* Like fio's io_uring engine with its default iodepth_batch of 1: each new
 * I/O goes in with its own io_uring_enter, which also collects whatever
 * completed; the thread sleeps only when all qd are in flight.  Refilling a
 * whole reaped batch with one submit instead makes the I/Os travel in convoys
 * (all issued together, all completing together) and keeps fewer in flight:
 * 10-20 % fewer IOPS than fio on the same device at qd 32. */
/* A failed submit is counted and stops new I/O, but the loop goes on reaping:
 * buffers must outlive the I/Os still in flight.  True after 1,000 failures,
 * when the loop gives up.  (Interrupted or busy submits are not failures.) */
static bool submit_failed(struct worker *w, int r, bool *stopping, uint32_t *errs)
{
	if (r >= 0 || r == -EINTR || r == -EAGAIN || r == -EBUSY || r == -ETIME)
		return false;
	fail(w, r, "io_uring submit");
	*stopping = true;
	return ++*errs > 1000;
}

static void uring_block(struct worker *w)
{
	const struct dk_job *j = w->run->j;
	struct io_uring ring;
	int r = ring_init(&ring, w->qd);
	if (r) {
		fail(w, r, "io_uring setup");
		return;
	}
	char *bufs = alloc_bufs(w, w->qd, j->bs);
	uint64_t *t0 = calloc(w->qd, sizeof(*t0));
	uint32_t *freel = calloc(w->qd, sizeof(*freel));
	if (!bufs || !t0 || !freel) {
		fail(w, -ENOMEM, "buffers");
		goto out;
	}
	uint32_t nfree = w->qd, inflight = 0;
	for (uint32_t i = 0; i < w->qd; i++)
		freel[i] = i;
	bool stopping = false;
	uint32_t errs = 0;
	uint64_t t = now_ns(), off;
	for (;;) {
		if (!stopping && should_stop(w, t))
			stopping = true;
		if (!stopping && nfree && !next_offset(w, &off))
			stopping = true;
		if (!stopping && nfree) {
			uint32_t s = freel[--nfree];
			struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
			if (j->write)
				io_uring_prep_write(sqe, j->fd, bufs + (size_t)s * j->bs,
						    (unsigned)j->bs, off);
			else
				io_uring_prep_read(sqe, j->fd, bufs + (size_t)s * j->bs,
						   (unsigned)j->bs, off);
			io_uring_sqe_set_data64(sqe, s);
			inflight++;
			t0[s] = now_ns(); /* issue time, as fio's */
			r = io_uring_submit_and_get_events(&ring);
		} else if (inflight) {
			r = io_uring_submit_and_wait(&ring, 1);
		} else {
			break;
		}
		if (submit_failed(w, r, &stopping, &errs))
			break;
		struct io_uring_cqe *cqe;
		unsigned head, n = 0;
		t = now_ns();
		io_uring_for_each_cqe(&ring, head, cqe) {
			uint32_t s = (uint32_t)cqe->user_data;
			if (cqe->res != (int)j->bs)
				fail(w, cqe->res < 0 ? cqe->res : -EIO, j->write ? "write" : "read");
			else
				account(w, t, t0[s], j->bs);
			freel[nfree++] = s;
			inflight--;
			n++;
		}
		io_uring_cq_advance(&ring, n);
	}
out:
	io_uring_queue_exit(&ring);
	free(bufs);
	free(t0);
	free(freel);
}

/* Small files: per file an openat → read → close chain on the direct
 * descriptor `slot`; the read is hard-linked to the close so that a short
 * read (O_DIRECT reads a rounded-up length) still closes the file. */
struct fslot {
	uint64_t t0;
	uint32_t file, pending;
	int err;
	uint64_t got;
	char name[32];
};

static void uring_files(struct worker *w)
{
	const struct dk_job *j = w->run->j;
	struct io_uring ring;
	int r = ring_init(&ring, w->qd * 4);
	if (r) {
		fail(w, r, "io_uring setup");
		return;
	}
	uint64_t each = ALIGN_UP(j->max_size, j->align) + j->align;
	char *bufs = NULL;
	struct fslot *sl = calloc(w->qd, sizeof(*sl));
	uint32_t *freel = calloc(w->qd, sizeof(*freel)), *queued = calloc(w->qd, sizeof(*queued));
	if (!sl || !freel || !queued) {
		fail(w, -ENOMEM, "buffers");
		goto out;
	}
	if ((r = io_uring_register_files_sparse(&ring, w->qd)) < 0) {
		fail(w, r, "io_uring file table");
		goto out;
	}
	if (!(bufs = alloc_bufs(w, w->qd, each)))
		goto out;
	uint32_t nfree = w->qd, inflight = 0;
	for (uint32_t i = 0; i < w->qd; i++)
		freel[i] = i;
	bool stopping = false;
	uint32_t errs = 0;
	uint64_t t = now_ns();
	/* no O_CLOEXEC: a direct descriptor has no fd to inherit, and io_uring
	 * refuses the flag for one */
	int oflags = O_RDONLY | (j->direct ? O_DIRECT : 0);
	for (;;) {
		if (!stopping && should_stop(w, t))
			stopping = true;
		uint32_t nq = 0, f = 0;
		/* one file per io_uring_enter, as uring_block does, for the same reason */
		bool more = !stopping && nfree && io_uring_sq_space_left(&ring) >= 3;
		if (more && !next_file(w, &f)) {
			stopping = true;
			more = false;
		}
		if (more) {
			uint32_t s = freel[--nfree];
			struct fslot *x = &sl[s];
			x->file = f;
			x->pending = 3;
			x->err = 0;
			x->got = 0;
			dk_small_name(x->name, sizeof(x->name), f);
			uint64_t len = j->direct ? ALIGN_UP(j->sizes[f], j->align) : j->sizes[f];
			struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
			io_uring_prep_openat_direct(sqe, j->dirfd, x->name, oflags, 0, s);
			io_uring_sqe_set_flags(sqe, IOSQE_IO_LINK);
			io_uring_sqe_set_data64(sqe, (uint64_t)s << 2);
			sqe = io_uring_get_sqe(&ring);
			io_uring_prep_read(sqe, (int)s, bufs + (size_t)s * each, (unsigned)len, 0);
			io_uring_sqe_set_flags(sqe, IOSQE_FIXED_FILE | IOSQE_IO_HARDLINK);
			io_uring_sqe_set_data64(sqe, (uint64_t)s << 2 | 1);
			sqe = io_uring_get_sqe(&ring);
			io_uring_prep_close_direct(sqe, s);
			io_uring_sqe_set_data64(sqe, (uint64_t)s << 2 | 2);
			queued[nq++] = s;
			inflight++;
		}
		if (!inflight)
			break;
		uint64_t ti = now_ns();
		for (uint32_t i = 0; i < nq; i++)
			sl[queued[i]].t0 = ti;
		r = nq ? io_uring_submit_and_get_events(&ring) : io_uring_submit_and_wait(&ring, 1);
		if (submit_failed(w, r, &stopping, &errs))
			break;
		struct io_uring_cqe *cqe;
		unsigned head, n = 0;
		t = now_ns();
		io_uring_for_each_cqe(&ring, head, cqe) {
			uint32_t s = (uint32_t)(cqe->user_data >> 2), op = cqe->user_data & 3;
			struct fslot *x = &sl[s];
			if (op == 0 && cqe->res < 0)
				x->err = cqe->res;
			else if (op == 1 && !x->err && cqe->res < 0)
				x->err = cqe->res;
			else if (op == 1 && !x->err)
				x->got = (uint64_t)cqe->res;
			n++;
			if (--x->pending)
				continue;
			if (!x->err && x->got != j->sizes[x->file])
				x->err = STK_ESHORT;
			if (x->err)
				fail(w, x->err, "small file");
			else
				account(w, t, x->t0, x->got);
			freel[nfree++] = s;
			inflight--;
		}
		io_uring_cq_advance(&ring, n);
	}
out:
	io_uring_queue_exit(&ring);
	free(bufs);
	free(sl);
	free(freel);
	free(queued);
}

/* --- the threads ------------------------------------------------------------------ */

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct run *run = w->run;
	const struct dk_job *j = run->j;
	pthread_mutex_lock(&run->mu);
	run->ready++;
	pthread_cond_broadcast(&run->cv);
	while (!run->go)
		pthread_cond_wait(&run->cv, &run->mu);
	pthread_mutex_unlock(&run->mu);
	if (!atomic_load(&run->fail)) {
		uint64_t start = now_ns();
		/* a ramp belongs to time-based jobs: one pass has nothing to spare */
		w->ramp_end = start + (run->one_pass ? 0 : (uint64_t)(j->ramp * 1e9));
		w->deadline = j->runtime > 0 ? w->ramp_end + (uint64_t)(j->runtime * 1e9) : UINT64_MAX;
		if (j->kind == DK_JOB_FILES)
			run->engine == DK_URING ? uring_files(w) : psync_files(w);
		else
			run->engine == DK_URING ? uring_block(w) : psync_block(w);
		w->t_begin = w->ramp_end;
		w->t_end = now_ns();
	}
	pthread_mutex_lock(&run->mu);
	run->done++;
	pthread_cond_broadcast(&run->cv);
	pthread_mutex_unlock(&run->mu);
	return NULL;
}

/* io_uring may be compiled out of the kernel or blocked by seccomp: then
 * psync, said once. */
static enum dk_engine pick_engine(enum dk_engine want)
{
	static int uring_ok = -1;
	if (want != DK_URING)
		return want;
	if (uring_ok < 0) {
		struct io_uring ring;
		int r = io_uring_queue_init(2, &ring, 0);
		uring_ok = r == 0;
		if (r == 0)
			io_uring_queue_exit(&ring);
		else
			fprintf(stderr, "stoker disk: io_uring is unavailable (%s): using psync\n",
				stk_strerror(r));
	}
	return uring_ok ? DK_URING : DK_PSYNC;
}

static void show_progress(const struct run *run, double t0)
{
	uint64_t b = 0;
	for (uint32_t i = 0; i < run->nw; i++)
		b += atomic_load_explicit(&run->w[i].prog, memory_order_relaxed);
	double el = now_s() - t0, total = run->j->runtime + run->j->ramp;
	char rate[32];
	fmt_bytes(rate, sizeof(rate), el > 0 ? (double)b / el : 0);
	if (total > 0)
		progress("%s: %s/s  %.0f/%.0f s", run->j->label, rate, el, total);
	else
		progress("%s: %s/s  %.0f s", run->j->label, rate, el);
}

int dk_run(const struct dk_job *j, struct dk_job_out *out)
{
	struct run run;
	memset(&run, 0, sizeof(run));
	run.j = j;
	run.one_pass = j->one_pass || j->runtime <= 0;
	run.engine = pick_engine(j->engine);
	out->engine = run.engine;
	uint32_t per = run.engine == DK_PSYNC ? j->qd : 1; /* workers per thread */
	run.ngroups = j->threads;
	run.nw = j->threads * per;
	if (run.nw > 4096) {
		snprintf(out->errmsg, sizeof(out->errmsg),
			 "psync needs a thread per I/O in flight: threads x qd = %u is too many",
			 run.nw);
		return out->err = -EINVAL;
	}
	if (j->kind == DK_JOB_BLOCK) {
		run.blocks_per_group = j->span / j->bs / j->threads;
		if (!run.blocks_per_group) {
			snprintf(out->errmsg, sizeof(out->errmsg), "the file is smaller than one block per thread");
			return out->err = -EINVAL;
		}
	}
	run.w = calloc(run.nw, sizeof(*run.w));
	run.next = calloc(run.ngroups, sizeof(*run.next));
	if (!run.w || !run.next) {
		free(run.w);
		free(run.next);
		snprintf(out->errmsg, sizeof(out->errmsg), "out of memory");
		return out->err = -ENOMEM;
	}
	pthread_mutex_init(&run.mu, NULL);
	pthread_cond_init(&run.cv, NULL);
	uint32_t started = 0;
	int err = 0;
	for (uint32_t i = 0; i < run.nw; i++) {
		struct worker *w = &run.w[i];
		w->run = &run;
		w->idx = i;
		w->group = i / per;
		w->qd = run.engine == DK_PSYNC ? 1 : j->qd;
		if ((err = stk_hist_create(&w->hist)))
			break;
		if ((err = -pthread_create(&w->tid, NULL, worker_main, w))) {
			stk_hist_destroy(w->hist);
			w->hist = NULL;
			break;
		}
		started++;
	}
	double t0 = now_s();
	pthread_mutex_lock(&run.mu);
	if (err)
		atomic_store(&run.fail, 1);
	while (run.ready < started)
		pthread_cond_wait(&run.cv, &run.mu);
	run.go = true;
	pthread_cond_broadcast(&run.cv);
	while (run.done < started) {
		/* the progress line, redrawn a few times a second */
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 250000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&run.cv, &run.mu, &ts);
		if (run.done < started) {
			pthread_mutex_unlock(&run.mu);
			show_progress(&run, t0);
			pthread_mutex_lock(&run.mu);
		}
	}
	pthread_mutex_unlock(&run.mu);
	progress_done();
	uint64_t tb = UINT64_MAX, te = 0;
	for (uint32_t i = 0; i < started; i++) {
		struct worker *w = &run.w[i];
		pthread_join(w->tid, NULL);
		stk_hist_merge(out->hist, w->hist);
		stk_hist_destroy(w->hist);
		out->bytes += w->bytes;
		out->ios += w->ios;
		if (w->t_end) {
			tb = w->t_begin < tb ? w->t_begin : tb;
			te = w->t_end > te ? w->t_end : te;
		}
		if (w->err && !out->err) {
			out->err = w->err;
			snprintf(out->errmsg, sizeof(out->errmsg), "%s", w->errmsg);
		}
	}
	if (err && !out->err) {
		out->err = err;
		snprintf(out->errmsg, sizeof(out->errmsg), "cannot start threads: %s", stk_strerror(err));
	}
	out->seconds = te > tb ? (double)(te - tb) / 1e9 : 0;
	pthread_cond_destroy(&run.cv);
	pthread_mutex_destroy(&run.mu);
	free(run.w);
	free(run.next);
	return out->err;
}
