/* disk/io.c — the job runner of `stoker disk`, fio-style, on the loader's
 * own read engines (stk_ioengine_*: one io_uring stack in the project).
 *
 * A job is `threads` threads; each drives one engine with `qd` I/Os in
 * flight and records every I/O's latency (from just before the submit call
 * to the completion, ns: fio's "lat" less fio's own preparation) into its
 * own histogram; the histograms are merged once the threads end.
 *   io_uring  one ring per thread.  Each new I/O goes in with the reap that
 *             also collects completions: one io_uring_enter per I/O, as fio's
 *             engine with its default iodepth_batch of 1 (see run_loop);
 *             small files are the loader's linked openat → read → close
 *             chains on direct descriptors;
 *   psync     the loader's pread pool: a synchronous call holds one I/O, so
 *             a queue depth of q runs q workers per thread.
 * Sequential threads own equal slices of the file; random ones roam all of it.
 * Time-based jobs wrap around; runtime 0 means one pass.  Completions before
 * the ramp ends are left out, as fio's ramp_time.
 */
#include "disk/disk.h"

#include <errno.h>
#include <fcntl.h>
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

/* --- the loop: one engine per thread ------------------------------------------ */

/* Fills io with the next I/O for buffer b (bufs + b * each); false when the
 * job has handed out all it has. */
static bool next_io(struct worker *w, struct stk_io *io, uint8_t *buf, char *name, size_t nlen)
{
	const struct dk_job *j = w->run->j;
	*io = (struct stk_io){.buf = buf, .buf_index = io->buf_index};
	if (j->kind == DK_JOB_FILES) {
		uint32_t f;
		if (!next_file(w, &f))
			return false;
		dk_small_name(name, nlen, f);
		io->op = STK_IO_READ_FILE;
		io->path = name;
		io->len = j->direct ? ALIGN_UP(j->sizes[f], j->align) : j->sizes[f];
		io->user_data = f;
		return true;
	}
	uint64_t off;
	if (!next_offset(w, &off))
		return false;
	io->op = j->write ? STK_IO_WRITE : STK_IO_READ;
	io->fd = j->fd;
	io->len = j->bs;
	io->offset = off;
	return true;
}

/* What a good I/O returns: the whole block, or the small file's size. */
static uint64_t want_bytes(const struct dk_job *j, const struct stk_io *io)
{
	return j->kind == DK_JOB_FILES ? j->sizes[io->user_data] : j->bs;
}

/* Each new I/O is submitted and then reaped without waiting: the engine
 * sends it in the io_uring_enter that also collects whatever completed, and
 * the thread sleeps only when all qd are in flight.  Refilling a whole
 * reaped batch with one submit instead makes the I/Os travel in convoys (all
 * issued together, all completing together) and keeps fewer in flight:
 * 10-20 % fewer IOPS than fio on the same device at qd 32.  A failed reap
 * stops new I/O; the engine's destroy waits for what is still in flight
 * before the buffers go. */
static void run_loop(struct worker *w)
{
	const struct dk_job *j = w->run->j;
	uint64_t each = j->kind == DK_JOB_FILES ? ALIGN_UP(j->max_size, j->align) + j->align : j->bs;
	uint8_t *bufs = alloc_bufs(w, w->qd, each);
	struct stk_io *ios = calloc(w->qd, sizeof(*ios));
	struct stk_io **freel = calloc(w->qd, sizeof(*freel)), **done = calloc(w->qd, sizeof(*done));
	uint64_t *t0 = calloc(w->qd, sizeof(*t0));
	char (*names)[32] = calloc(w->qd, sizeof(*names));
	struct stk_ioengine *e = NULL;
	if (!bufs || !ios || !freel || !done || !t0 || !names) {
		fail(w, -ENOMEM, "buffers");
		goto out;
	}
	struct stk_ioengine_opts eo = {
		.size = sizeof(eo), .engine = w->run->engine == DK_PSYNC ? STK_ENGINE_PREAD
									  : STK_ENGINE_URING,
		.flags = j->direct ? STK_IOENG_DIRECT : 0, .queue_depth = w->qd,
		.dir_fd = j->kind == DK_JOB_FILES ? j->dirfd : 0,
		.buf_area = bufs, .buf_bytes = each, .nbufs = w->qd};
	char why[sizeof(w->errmsg)];
	int r = stk_ioengine_create(&e, &eo, why, sizeof(why));
	if (r) {
		if (!w->err) {
			w->err = r;
			snprintf(w->errmsg, sizeof(w->errmsg), "%s", why);
			atomic_store(&w->run->fail, 1);
		}
		goto out;
	}
	uint32_t nfree = w->qd, inflight = 0;
	for (uint32_t i = 0; i < w->qd; i++) {
		ios[i].buf_index = (int32_t)i;
		freel[i] = &ios[i];
	}
	bool stopping = false;
	uint64_t t = now_ns();
	const char *what = j->kind == DK_JOB_FILES ? "small file" : j->write ? "write" : "read";
	for (;;) {
		if (!stopping && should_stop(w, t))
			stopping = true;
		int got;
		if (!stopping && nfree) {
			struct stk_io *io = freel[--nfree];
			size_t b = (size_t)(io - ios);
			if (!next_io(w, io, bufs + b * each, names[b], sizeof(names[b]))) {
				freel[nfree++] = io;
				stopping = true;
				continue;
			}
			t0[b] = now_ns(); /* issue time, as fio's */
			if ((r = stk_ioengine_submit(e, &io, 1)) < 0) {
				fail(w, r, "submit");
				freel[nfree++] = io;
				stopping = true;
				continue;
			}
			inflight++;
			got = stk_ioengine_reap(e, done, w->qd, 0);
		} else if (inflight) {
			got = stk_ioengine_reap(e, done, w->qd, 1);
		} else {
			break;
		}
		t = now_ns();
		if (got < 0) {
			fail(w, got, "reap");
			break;
		}
		for (int i = 0; i < got; i++) {
			struct stk_io *io = done[i];
			uint64_t want = want_bytes(j, io);
			if (io->res < 0 || (uint64_t)io->res != want)
				fail(w, io->res < 0 ? (int)io->res : j->kind == DK_JOB_FILES ? STK_ESHORT : -EIO,
				     what);
			else
				account(w, t, t0[io - ios], want);
			freel[nfree++] = io;
			inflight--;
		}
	}
out:
	stk_ioengine_destroy(e); /* waits for what is in flight: then the buffers may go */
	free(bufs);
	free(ios);
	free(freel);
	free(done);
	free(t0);
	free(names);
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
		run_loop(w);
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
 * psync (the pread pool), said once. */
enum dk_engine dk_engine_ran(enum dk_engine want)
{
	static int uring_ok = -1;
	if (want != DK_URING)
		return want;
	if (uring_ok < 0) {
		struct stk_ioengine *e;
		char why[300];
		struct stk_ioengine_opts o = {.size = sizeof(o), .engine = STK_ENGINE_AUTO,
					      .queue_depth = 2};
		int r = stk_ioengine_create(&e, &o, why, sizeof(why));
		uring_ok = r == 0 && !strcmp(stk_ioengine_name(e), "io_uring");
		if (r == 0)
			stk_ioengine_destroy(e);
		if (!uring_ok)
			fprintf(stderr, "stoker disk: %s: every pattern runs on the psync engine\n",
				why[0] ? why : "io_uring is unavailable");
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
	run.engine = dk_engine_ran(j->engine);
	out->engine = run.engine;
	run.ngroups = j->threads;
	run.nw = j->threads;
	if (run.engine == DK_PSYNC && (uint64_t)j->threads * j->qd > 4096) {
		snprintf(out->errmsg, sizeof(out->errmsg),
			 "psync needs a thread per I/O in flight: threads x qd = %llu is too many",
			 (unsigned long long)j->threads * j->qd);
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
		w->group = i;
		w->qd = j->qd;
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
