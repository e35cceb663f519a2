/*
 * loader/meta.c — files' metadata looked up ahead of the ring's opens.
 *
 * An io_uring OPENAT whose dentry is cached runs inline at submit; one that
 * misses (a cold epoch: the page cache dropped, or a dataset larger than
 * memory) goes to an io-wq worker, which looks the name up in its folder,
 * reads the inode, and only then lets the linked read go out: 10,000 cold
 * opens an epoch of 10,000 files, each holding a place of the queue depth
 * while it waits on a folder's or an inode table's block behind the data
 * reads, and each a hand-off between threads on the loader's CPUs.  With the
 * metadata cached first a 10,000-file epoch read 15-40 % faster at the same
 * depth (O_DIRECT, docs/BENCHMARKS.md).  So for O_DIRECT reads of files (a
 * folder or a file list) a thread of the loader's walks the batches the I/O
 * threads will claim next, in the sampler's order, a few batches ahead of the
 * claims, and fstatat()s each file: the lookup and the inode read happen
 * here, off the reads' path, and the ring's open finds them cached.  Eight
 * such threads take the files a few at a time, in order: a cold start waits
 * on ~300 blocks of folders and inode tables for 10,000 files, each behind
 * the data reads queued at the device, and one thread waiting on them in
 * turn spent the first 150-220 ms of a 0.6 s epoch there.  What the
 * walk finds is not used (a missing file is the read's error, as before); a
 * walk that falls behind the claims jumps to them.  Buffered reads go
 * without it: their later epochs come from the page cache, whose opens are
 * warm.  STOKER_NO_META_AHEAD=1 turns it off (for measuring).  Its state is
 * under the loader's mutex; the lookups run without it.
 */
#include "loader/loader.h"
#include "io/engine.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* How far ahead of the claims the walk goes: at least this many files, and
 * two batches (a claim comes when the batch before it is nearly sent). */
#define AHEAD_FILES 1024u
/* Files a thread takes at once: small, so a cold start's lookups spread
 * over the threads. */
#define CHUNK 4u

static int64_t ahead_batches(const struct stk_loader *l)
{
	uint32_t bs = l->o.batch_size ? l->o.batch_size : 1;
	uint32_t n = (AHEAD_FILES + bs - 1) / bs;
	return n < 2 ? 2 : n;
}

/* Up to CHUNK files of the walk into idx; 0: wait.  Under mu. */
static uint32_t take(struct stk_loader *l, int64_t *idx)
{
	struct stk__meta *m = &l->meta;
	/* the batch being sent (claimed last) and the ones after it */
	int64_t from = l->next_start - 1 > l->sampler.first ? l->next_start - 1 : l->sampler.first;
	if (m->gen != l->gen) { /* a restart: perhaps after a drop of the caches */
		m->gen = l->gen;
		l->meta_warm = false;
		m->next = from;
		m->i = m->n = 0;
	}
	if (l->draining)
		return 0;
	if (m->i < m->n && m->batch < from)
		m->i = m->n; /* the claims passed it */
	if (m->i >= m->n) {
		if (m->next < from)
			m->next = from;
		if (m->next >= l->sampler.batches || m->next >= l->next_start + ahead_batches(l)) {
			l->meta_warm = true; /* ahead: the opens find what they need */
			return 0;
		}
		m->batch = m->next++;
		m->n = stk__sampler_batch(&l->sampler, m->batch, m->idx);
		m->i = 0;
	}
	uint32_t k = m->n - m->i < CHUNK ? m->n - m->i : CHUNK;
	memcpy(idx, m->idx + m->i, k * sizeof(*idx));
	m->i += k;
	return k;
}

static void *meta_main(void *arg)
{
	struct stk_loader *l = arg;
	int64_t idx[CHUNK];
	pthread_mutex_lock(&l->mu);
	while (!l->meta.quit) {
		uint32_t n = take(l, idx);
		if (!n) {
			pthread_cond_wait(&l->meta.cv, &l->mu);
			continue;
		}
		pthread_mutex_unlock(&l->mu);
		uint64_t t0 = stk__now_ns();
		struct stat st;
		for (uint32_t i = 0; i < n; i++)
			(void)fstatat(l->ds->root_fd, stk__entry_path(l->ds, idx[i]), &st, 0);
		uint64_t dt = stk__now_ns() - t0;
		pthread_mutex_lock(&l->mu);
		l->meta_files += n;
		l->meta_ns += dt;
	}
	pthread_mutex_unlock(&l->mu);
	return NULL;
}

void stk__meta_start(struct stk_loader *l)
{
	struct stk__meta *m = &l->meta;
	const char *off = getenv("STOKER_NO_META_AHEAD");
	if (!l->direct || l->ops == &stk__engine_null || l->ds->shards || l->ds->remote ||
	    l->video || (off && *off && strcmp(off, "0") != 0))
		return;
	m->idx = malloc((size_t)(l->o.batch_size ? l->o.batch_size : 1) * sizeof(*m->idx));
	if (!m->idx || pthread_cond_init(&m->cv, NULL)) {
		free(m->idx);
		m->idx = NULL;
		return;
	}
	m->quit = false;
	m->gen = UINT64_MAX;
	pthread_attr_t attr;
	bool small = pthread_attr_init(&attr) == 0;
	if (small) /* a lookup needs little stack */
		pthread_attr_setstacksize(&attr, 128 * 1024);
	for (unsigned i = 0; i < STK__META_THREADS; i++) {
		if (pthread_create(&m->tids[i], small ? &attr : NULL, meta_main, l))
			break;
		char name[16];
		snprintf(name, sizeof(name), "stk-meta%u", i);
		pthread_setname_np(m->tids[i], name);
		if (l->pin) /* on the loader's CPUs, as its other threads */
			pthread_setaffinity_np(m->tids[i], sizeof(l->cpuset), &l->cpuset);
		m->nthreads++;
	}
	if (small)
		pthread_attr_destroy(&attr);
	pthread_mutex_lock(&l->mu);
	l->meta_on = m->nthreads > 0; /* claims kick it from now on */
	pthread_mutex_unlock(&l->mu);
	if (!m->nthreads) {
		pthread_cond_destroy(&m->cv);
		free(m->idx);
		m->idx = NULL;
	}
}

void stk__meta_kick(struct stk_loader *l)
{
	if (l->meta_on)
		pthread_cond_broadcast(&l->meta.cv);
}

void stk__meta_stop(struct stk_loader *l)
{
	struct stk__meta *m = &l->meta;
	if (!m->nthreads)
		return;
	pthread_mutex_lock(&l->mu);
	m->quit = true;
	l->meta_on = false;
	pthread_cond_broadcast(&m->cv);
	pthread_mutex_unlock(&l->mu);
	for (unsigned i = 0; i < m->nthreads; i++)
		pthread_join(m->tids[i], NULL);
	m->nthreads = 0;
	pthread_cond_destroy(&m->cv);
	free(m->idx);
	m->idx = NULL;
}
