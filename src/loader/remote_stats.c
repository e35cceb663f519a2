/*
 * loader/remote_stats.c — stk_loader_remote_stats: the object-store
 * transport's and the local cache's counters (io/remote.h), for the bench,
 * the bindings and the exporter.  Reads atomics only: any thread.
 */
#include "loader/loader.h"
#include "io/remote.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

int stk_loader_remote_stats(const struct stk_loader *l, struct stk_remote_stats *out)
{
	memset(out, 0, sizeof(*out));
	out->size = sizeof(*out);
	const struct stk__remote *r = l->ds ? l->ds->remote : NULL;
	if (!r)
		return -ENOENT;
	const struct stk__remote_counters *c = &r->c;
	out->inflight = atomic_load(&c->inflight);
	out->inflight_max = atomic_load(&c->inflight_max);
	out->retrying = atomic_load(&c->retrying);
	out->requests = atomic_load(&c->requests);
	out->retries = atomic_load(&c->retries);
	out->failed = atomic_load(&c->failed);
	out->short_bodies = atomic_load(&c->short_bodies);
	out->bytes = atomic_load(&c->bytes);
	out->latency_p50_ns = stk_hist_percentile(r->h_lat, 50);
	out->latency_p99_ns = stk_hist_percentile(r->h_lat, 99);
	out->latency_max_ns = stk_hist_max(r->h_lat);
	out->cache_on = r->cache != NULL;
	out->window = r->window > UINT32_MAX ? UINT32_MAX : (uint32_t)r->window;
	out->windows = atomic_load(&c->windows);
	out->streamed = atomic_load(&c->streamed);
	out->cache_hits = atomic_load(&c->hits);
	out->cache_misses = atomic_load(&c->misses);
	out->cache_hit_bytes = atomic_load(&c->hit_bytes);
	out->cache_evictions = atomic_load(&c->evictions);
	out->cache_bytes_written = atomic_load(&c->cache_bytes_written);
	stk__rcache_usage(r->cache, &out->cache_bytes, &out->cache_limit);
	/* cut to the struct's fields (a longer URL or source is cut, said whole elsewhere) */
	snprintf(out->root, sizeof(out->root), "%.*s", (int)sizeof(out->root) - 1, r->root);
	snprintf(out->credentials, sizeof(out->credentials), "%.*s",
		 (int)sizeof(out->credentials) - 1, r->cred_source);
	return 0;
}
