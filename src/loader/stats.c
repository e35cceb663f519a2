/*
 * loader/stats.c — what the loader tells about itself: the last error, the
 * dataset, and the counters and histograms.  Any thread: everything mutable
 * is read under the loader's mutex or atomically.
 */
#include "loader/loader.h"
#include "io/remote.h"

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

int stk_loader_cpu_share(const struct stk_loader *l, struct stk_cpu_share *out)
{
	if (out->size && out->size < offsetof(struct stk_cpu_share, cpulist))
		return -EINVAL;
	size_t n = out->size && out->size < sizeof(l->share) ? out->size : sizeof(l->share);
	memcpy(out, &l->share, n);
	out->size = (uint32_t)n;
	return 0;
}

const char *stk_loader_engine(const struct stk_loader *l)
{
	return l->ops ? l->ops->name : "auto";
}

/* Copies src into a caller's struct of its own size (0: ours), keeping it. */
static void copy_sized(void *dst, const void *src, size_t ours)
{
	uint32_t keep = *(const uint32_t *)dst;
	size_t n = keep && keep < ours ? keep : ours;
	memcpy(dst, src, n);
	*(uint32_t *)dst = keep ? keep : (uint32_t)ours;
}

int stk_loader_options(const struct stk_loader *l, struct stk_loader_opts *out,
		       struct stk_image_opts *img)
{
	struct stk_loader_opts o = l->o;
	o.image = NULL;
	if (l->ops == &stk__engine_uring)
		o.io_threads = l->nrings;
	if (strcmp(l->share.source, "none")) { /* "auto" resolved from the environment */
		o.local_rank = l->share.local_rank;
		o.local_world_size = l->share.local_world_size;
	}
	copy_sized(out, &o, sizeof(o));
	if (img) {
		struct stk_image_opts i = {0};
		if (l->image) {
			i = l->img;
			i.decode_threads = l->ndthreads;
		}
		copy_sized(img, &i, sizeof(i));
	}
	return l->image ? 1 : 0;
}

int stk_loader_stats(const struct stk_loader *cl, struct stk_stats *out)
{
	struct stk_loader *l = (struct stk_loader *)cl;
	if (out->size && out->size < offsetof(struct stk_stats, read_max_ns) + sizeof(uint64_t))
		return -EINVAL;
	struct stk_stats s = {.size = sizeof(s)};
	struct stk__snap now, m;
	pthread_mutex_lock(&l->mu);
	stk__loader_snap(l, &now);
	m = l->mark;
	s.queue_depth = l->tune.qd;
	s.io_threads = l->tune.active;
	s.direct = l->direct;
	s.probes = l->tune.probes;
	pthread_mutex_unlock(&l->mu);
	double wall = (double)(now.t - m.t) / 1e9;
	s.samples = now.samples - m.samples;
	s.bytes = now.bytes - m.bytes;
	s.batches = now.batches - m.batches;
	/* what the index left out is an error of every window: kept by resets */
	s.errors = now.errors - m.errors + l->index_errors;
	s.index_errors = l->index_errors;
	s.wait_s = (double)(now.wait_ns - m.wait_ns) / 1e9;
	s.decode_busy_s = (double)(now.decode_ns - m.decode_ns) / 1e9;
	s.copy_wait_s = (double)(now.copy_ns - m.copy_ns) / 1e9;
	s.pool_bytes = l->pool.bytes;
	s.pinned = l->pool.pinned;
	s.inflight_max = atomic_load(&l->inflight_max);
	s.wall_s = wall;
	s.inflight_mean = wall > 0 ? (now.area - m.area) / 1e9 / wall : 0;
	s.stall_ratio = wall > 0 ? s.wait_s / wall : 0;
	s.samples_per_s = wall > 0 ? (double)s.samples / wall : 0;
	s.mb_per_s = wall > 0 ? (double)s.bytes / wall / 1e6 : 0;
	s.decode_images_per_s_per_core =
		s.decode_busy_s > 0 ? (double)s.samples / s.decode_busy_s : 0;
	uint64_t decoded = now.decoded - m.decoded;
	s.decode_fast_share = decoded ? (double)(now.decoded_fast - m.decoded_fast) / decoded : 0;
	s.decode_entropy_share = decoded ? (now.entropy_sum - m.entropy_sum) / (double)decoded : 0;
	for (int f = 0; f < STK_FORMATS; f++) {
		uint64_t n = now.fmt_decoded[f] - m.fmt_decoded[f];
		s.format_decoded[f] = n;
		s.format_decode_busy_s[f] = (double)(now.fmt_ns[f] - m.fmt_ns[f]) / 1e9;
		s.format_fast_share[f] = n ? (double)(now.fmt_fast[f] - m.fmt_fast[f]) / (double)n : 0;
	}
	s.wait_p50_ns = stk_hist_percentile(l->h_wait, 50);
	s.wait_p99_ns = stk_hist_percentile(l->h_wait, 99);
	s.wait_max_ns = stk_hist_max(l->h_wait);
	s.read_p50_ns = stk_hist_percentile(l->h_read, 50);
	s.read_p99_ns = stk_hist_percentile(l->h_read, 99);
	s.read_max_ns = stk_hist_max(l->h_read);
	s.decode_threads = l->ndthreads;
	s.decode_p50_ns = stk_hist_percentile(l->h_decode, 50);
	s.decode_p99_ns = stk_hist_percentile(l->h_decode, 99);
	s.total_s = (double)(now.t - l->t_create) / 1e9;
	s.total_samples = now.samples;
	s.total_bytes = now.bytes;
	s.total_batches = now.batches;
	s.total_errors = now.errors + l->index_errors;
	s.total_wait_s = (double)now.wait_ns / 1e9;
	s.total_decode_busy_s = (double)now.decode_ns / 1e9;
	s.total_copy_wait_s = (double)now.copy_ns / 1e9;
	s.replaced = now.replaced - m.replaced;
	s.total_replaced = now.replaced;
	stk__vloader_counts(l, &s.total_video_ranged, &s.total_video_whole);
	copy_sized(out, &s, sizeof(s));
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
	else if (kind == STK_HIST_REMOTE && l->ds && l->ds->remote)
		stk_hist_merge(dst, l->ds->remote->h_lat);
	else if (kind == STK_HIST_REMOTE)
		return -ENOENT;
	else
		return -EINVAL;
	return 0;
}
