/*
 * loader_stats.c — what the loader tells about itself: the last error, the
 * dataset, and the counters and histograms.  Any thread: everything mutable
 * is read under the loader's mutex or atomically.
 */
#include "loader.h"

#include <stdio.h>
#include <string.h>

const char *stk_last_error(const struct stk_loader *cl)
{
	struct stk_loader *l = (struct stk_loader *)cl;
	pthread_mutex_lock(&l->mu);
	snprintf(l->last_error, sizeof(l->last_error), "%s", l->detail);
	pthread_mutex_unlock(&l->mu);
	return l->last_error;
}

int64_t stk_loader_len(const struct stk_loader *l)
{
	return l->sampler.batches;
}

int64_t stk_loader_rank_samples(const struct stk_loader *l)
{
	return l->sampler.per_rank;
}

int64_t stk_loader_num_samples(const struct stk_loader *l)
{
	return l->ds->n;
}

int stk_loader_sample(const struct stk_loader *l, int64_t i, char *path, size_t pathlen,
		      uint64_t *size, int64_t *label)
{
	if (i < 0 || i >= l->ds->n)
		return -ERANGE;
	if (path && pathlen) {
		const char *p = stk__entry_path(l->ds, i);
		int n = p[0] == '/' ? snprintf(path, pathlen, "%s", p)
				    : snprintf(path, pathlen, "%s/%s", l->ds->root, p);
		if (n < 0 || (size_t)n >= pathlen)
			return -ENAMETOOLONG;
	}
	if (size)
		*size = l->ds->entries[i].size;
	if (label)
		*label = l->ds->entries[i].label;
	return 0;
}

int stk_loader_sample_extent(const struct stk_loader *l, int64_t i, char *path, size_t pathlen,
			     uint64_t *offset, uint64_t *size)
{
	int rc = stk_loader_sample(l, i, path, pathlen, size, NULL);
	if (rc == 0 && offset)
		*offset = l->ds->entries[i].offset;
	return rc;
}

int64_t stk_loader_num_classes(const struct stk_loader *l)
{
	return l->ds->nclasses;
}

const char *stk_loader_class_name(const struct stk_loader *l, int64_t label)
{
	return label >= 0 && label < l->ds->nclasses ? l->ds->classes[label] : NULL;
}

const char *stk_loader_engine(const struct stk_loader *l)
{
	return l->ops ? l->ops->name : "auto";
}

int stk_loader_stats(const struct stk_loader *cl, struct stk_stats *out)
{
	struct stk_loader *l = (struct stk_loader *)cl;
	if (out->size && out->size < offsetof(struct stk_stats, read_max_ns) + sizeof(uint64_t))
		return -EINVAL;
	struct stk_stats s = {.size = sizeof(s)};
	pthread_mutex_lock(&l->mu);
	uint64_t now = stk__now_ns();
	double wall = (double)(now - l->t_start) / 1e9;
	double area = 0;
	for (uint32_t i = 0; i < l->nrings; i++) {
		struct ring *r = &l->rings[i];
		area += r->area + (double)r->inflight * (double)(now - r->area_t);
	}
	s.wait_s = (double)l->wait_ns / 1e9;
	s.decode_busy_s = (double)l->decode_ns / 1e9;
	pthread_mutex_unlock(&l->mu);
	s.samples = atomic_load(&l->samples);
	s.bytes = atomic_load(&l->bytes);
	s.batches = atomic_load(&l->batches);
	s.errors = atomic_load(&l->errors) + l->index_errors;
	s.index_errors = l->index_errors;
	s.pool_bytes = l->pool.bytes;
	s.pinned = l->pool.pinned;
	s.inflight_max = atomic_load(&l->inflight_max);
	s.wall_s = wall;
	s.inflight_mean = wall > 0 ? area / 1e9 / wall : 0;
	s.stall_ratio = wall > 0 ? s.wait_s / wall : 0;
	s.wait_p50_ns = stk_hist_percentile(l->h_wait, 50);
	s.wait_p99_ns = stk_hist_percentile(l->h_wait, 99);
	s.wait_max_ns = stk_hist_max(l->h_wait);
	s.read_p50_ns = stk_hist_percentile(l->h_read, 50);
	s.read_p99_ns = stk_hist_percentile(l->h_read, 99);
	s.read_max_ns = stk_hist_max(l->h_read);
	s.decode_threads = l->ndthreads;
	s.decode_p50_ns = stk_hist_percentile(l->h_decode, 50);
	s.decode_p99_ns = stk_hist_percentile(l->h_decode, 99);
	size_t n = out->size && out->size < sizeof(s) ? out->size : sizeof(s);
	uint32_t keep = out->size;
	memcpy(out, &s, n);
	out->size = keep ? keep : (uint32_t)sizeof(s);
	return 0;
}

int stk_loader_hist(const struct stk_loader *l, enum stk_hist_kind kind, struct stk_hist *dst)
{
	if (kind == STK_HIST_BATCH_WAIT)
		stk_hist_merge(dst, l->h_wait);
	else if (kind == STK_HIST_READ)
		stk_hist_merge(dst, l->h_read);
	else if (kind == STK_HIST_DECODE)
		stk_hist_merge(dst, l->h_decode);
	else
		return -EINVAL;
	return 0;
}
