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
 * here, off the reads' path, and the ring's open finds them cached.  What the
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

static int64_t ahead_batches(const struct stk_loader *l)
{
	uint32_t bs = l->o.batch_size ? l->o.batch_size : 1;
	uint32_t n = (AHEAD_FILES + bs - 1) / bs;
	return n < 2 ? 2 : n;
}

static void *meta_main(void *arg)
{
	struct stk_loader *l = arg;
	int64_t *idx = malloc((size_t)(l->o.batch_size ? l->o.batch_size : 1) * sizeof(*idx));
	uint64_t gen = UINT64_MAX;
	int64_t b = 0;
	pthread_mutex_lock(&l->mu);
	while (idx && !l->meta_quit) {
		/* the batch being sent (claimed last) and the ones after it */
		int64_t from = l->next_start - 1 > l->sampler.first ? l->next_start - 1
								     : l->sampler.first;
		if (gen != l->gen || b < from) {
			gen = l->gen;
			b = from;
		}
		if (l->draining || b >= l->sampler.batches || b >= l->next_start + ahead_batches(l)) {
			pthread_cond_wait(&l->meta_cv, &l->mu);
			continue;
		}
		uint32_t n = stk__sampler_batch(&l->sampler, b++, idx);
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
	free(idx);
	return NULL;
}

void stk__meta_start(struct stk_loader *l)
{
	const char *off = getenv("STOKER_NO_META_AHEAD");
	if (!l->direct || l->ops == &stk__engine_null || l->ds->shards || l->ds->remote ||
	    l->video || (off && *off && strcmp(off, "0") != 0))
		return;
	if (pthread_cond_init(&l->meta_cv, NULL))
		return;
	l->meta_quit = false;
	if (pthread_create(&l->meta_tid, NULL, meta_main, l)) {
		pthread_cond_destroy(&l->meta_cv);
		return;
	}
	pthread_setname_np(l->meta_tid, "stk-meta");
	if (l->pin) /* on the loader's CPUs, as its other threads */
		pthread_setaffinity_np(l->meta_tid, sizeof(l->cpuset), &l->cpuset);
	pthread_mutex_lock(&l->mu);
	l->meta_on = true; /* claims kick it from now on */
	pthread_mutex_unlock(&l->mu);
}

void stk__meta_kick(struct stk_loader *l)
{
	if (l->meta_on)
		pthread_cond_signal(&l->meta_cv);
}

void stk__meta_stop(struct stk_loader *l)
{
	if (!l->meta_on)
		return;
	pthread_mutex_lock(&l->mu);
	l->meta_quit = true;
	pthread_cond_signal(&l->meta_cv);
	pthread_mutex_unlock(&l->mu);
	pthread_join(l->meta_tid, NULL);
	pthread_cond_destroy(&l->meta_cv);
	l->meta_on = false;
}
