/*
 * bench/remote.c — what `stoker bench s3://...` (or http(s)://) adds: the
 * transport's requests in flight, per-request latency, retries and failures,
 * throughput per connection, and the local cache's hit ratio
 * (stk_loader_remote_stats).  Local data: nothing.
 */
#include "bench/bench.h"

#include <stdio.h>

static const char *ns(char *b, size_t len, uint64_t v)
{
	if (v >= 1000000000ull)
		snprintf(b, len, "%.2f s", (double)v / 1e9);
	else
		snprintf(b, len, "%.2f ms", (double)v / 1e6);
	return b;
}

void bench_remote_print(struct stk_loader *l, double wall_s)
{
	struct stk_remote_stats r = {.size = sizeof(r)};
	if (stk_loader_remote_stats(l, &r) < 0)
		return;
	char a[32], b[32], c[32];
	printf("  remote                     %s (credentials: %s)\n", r.root, r.credentials);
	printf("  requests                   %llu, in flight at most %u; latency p50/p99/max "
	       "%s / %s / %s\n", (unsigned long long)r.requests, r.inflight_max,
	       ns(a, sizeof(a), r.latency_p50_ns), ns(b, sizeof(b), r.latency_p99_ns),
	       ns(c, sizeof(c), r.latency_max_ns));
	printf("  retries                    %llu (short bodies %llu), failed for good %llu\n",
	       (unsigned long long)r.retries, (unsigned long long)r.short_bodies,
	       (unsigned long long)r.failed);
	if (wall_s > 0 && r.inflight_max)
		printf("  network                    %.1f MB received, %.1f MB/s per request in "
		       "flight (at most)\n", (double)r.bytes / 1e6,
		       (double)r.bytes / 1e6 / wall_s / r.inflight_max);
	uint64_t looks = r.cache_hits + r.cache_misses;
	if (r.cache_on)
		printf("  local cache                hit ratio %.1f %% (%llu of %llu reads), %llu "
		       "evictions; holds %.1f MB of %.1f MB\n",
		       looks ? 100.0 * (double)r.cache_hits / (double)looks : 0.0,
		       (unsigned long long)r.cache_hits, (unsigned long long)looks,
		       (unsigned long long)r.cache_evictions, (double)r.cache_bytes / 1e6,
		       (double)r.cache_limit / 1e6);
	else
		printf("  local cache                off\n");
}

bool bench_remote_cache(struct stk_loader *l, uint64_t *hits, uint64_t *reads)
{
	struct stk_remote_stats r = {.size = sizeof(r)};
	*hits = *reads = 0;
	if (stk_loader_remote_stats(l, &r) < 0 || !r.cache_on)
		return false;
	*hits = r.cache_hits;
	*reads = r.cache_hits + r.cache_misses;
	return true;
}

void bench_remote_runs(const struct run *runs, int n)
{
	bool any = false;
	for (int i = 0; i < n; i++)
		any |= runs[i].rcache_reads > 0;
	if (!any)
		return;
	printf("  runs, from the store/cache ");
	for (int i = 0; i < n; i++)
		printf("%s%d: %.0f samples/s, %.0f %% from the local cache", i ? "; " : "", i + 1,
		       sps_of(&runs[i]),
		       runs[i].rcache_reads ? 100.0 * (double)runs[i].rcache_hits /
						      (double)runs[i].rcache_reads
					    : 0.0);
	printf("\n                             (a run the cache served reads at epoch 2's "
	       "speed, not the store's)\n");
}

json_t *bench_remote_json(struct stk_loader *l)
{
	struct stk_remote_stats r = {.size = sizeof(r)};
	if (stk_loader_remote_stats(l, &r) < 0)
		return NULL;
	json_t *j = json_pack("{s:s,s:s,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I}", "root", r.root,
			      "credentials", r.credentials, "requests", (json_int_t)r.requests,
			      "retries", (json_int_t)r.retries, "failed", (json_int_t)r.failed,
			      "short_bodies", (json_int_t)r.short_bodies, "bytes",
			      (json_int_t)r.bytes, "inflight_max", (json_int_t)r.inflight_max,
			      "latency_p50_ns", (json_int_t)r.latency_p50_ns, "latency_p99_ns",
			      (json_int_t)r.latency_p99_ns, "latency_max_ns",
			      (json_int_t)r.latency_max_ns);
	json_object_set_new(j, "cache", json_pack("{s:b,s:I,s:I,s:I,s:I,s:I}", "on", r.cache_on,
						  "hits", (json_int_t)r.cache_hits, "misses",
						  (json_int_t)r.cache_misses, "evictions",
						  (json_int_t)r.cache_evictions, "bytes",
						  (json_int_t)r.cache_bytes, "limit",
						  (json_int_t)r.cache_limit));
	return j;
}
