/*
 * metrics/remote.c — the Prometheus families of a loader's remote data
 * (s3://, http(s)://): the transport's requests, retries, failures, short
 * bodies and bytes, and the local cache's hits, misses, evictions and bytes,
 * all counted since create (stk_loader_remote_stats).  metrics/metrics.c
 * writes them after the loader's own families, with the per-request latency
 * histogram (stoker_remote_request_seconds) and stoker_remote_info.  Local
 * data: none.
 *
 * Nothing secret is exported: no key, token or credential source, and the
 * data's URL (the stoker_remote_info label) without any user:password@ part
 * (io/remote.c never keeps one in the root).
 */
#include "base/internal.h"
#include "metrics/metrics_int.h"

#include <stddef.h>
#include <string.h>

size_t stk__remote_families(const struct stk_loader *l, struct stk__family *out, size_t max,
			    struct stk_remote_stats *r)
{
	*r = (struct stk_remote_stats){.size = sizeof(*r)};
	if (stk_loader_remote_stats(l, r) < 0)
		return 0;
	static const struct {
		const char *name, *type, *help;
		size_t off;
		bool u32;
	} f[] = {
#define F(n, t, h, field, u) {n, t, h, offsetof(struct stk_remote_stats, field), u}
		F("stoker_remote_requests_total", "counter",
		  "Requests to the object store or HTTP server that finished, retries included.",
		  requests, false),
		F("stoker_remote_requests_in_flight", "gauge", "Requests in flight now.", inflight,
		  true),
		F("stoker_remote_requests_in_flight_max", "gauge", "Most requests in flight at once.",
		  inflight_max, true),
		F("stoker_remote_requests_retrying", "gauge",
		  "Requests waiting now to be tried again (an outage's reads).", retrying, true),
		F("stoker_remote_retries_total", "counter",
		  "Requests tried again (5xx, SlowDown, resets, time-outs, short bodies).", retries,
		  false),
		F("stoker_remote_failed_requests_total", "counter",
		  "Requests that failed for good, after their tries (on_error decides).", failed,
		  false),
		F("stoker_remote_short_bodies_total", "counter",
		  "Bodies shorter than their Content-Length or Content-Range (never delivered).",
		  short_bodies, false),
		F("stoker_remote_received_bytes_total", "counter", "Body bytes received.", bytes,
		  false),
		F("stoker_remote_cache_hits_total", "counter",
		  "Reads served by the local cache of remote data.", cache_hits, false),
		F("stoker_remote_cache_misses_total", "counter",
		  "Reads the local cache could not serve (then asked of the server).", cache_misses,
		  false),
		F("stoker_remote_cache_hit_bytes_total", "counter",
		  "Bytes served by the local cache.", cache_hit_bytes, false),
		F("stoker_remote_cache_evictions_total", "counter",
		  "Object versions the local cache evicted to stay within its limit.",
		  cache_evictions, false),
		F("stoker_remote_cache_written_bytes_total", "counter",
		  "Bytes written into the local cache.", cache_bytes_written, false),
		F("stoker_remote_cache_bytes", "gauge",
		  "Bytes the local cache folder holds now (every process on the host).", cache_bytes,
		  false),
		F("stoker_remote_cache_limit_bytes", "gauge", "The local cache's size bound.",
		  cache_limit, false),
#undef F
	};
	size_t n = 0;
	for (size_t i = 0; i < STK_ARRAY_SIZE(f) && n < max; i++, n++) {
		uint64_t v = 0;
		if (f[i].u32) {
			uint32_t w;
			memcpy(&w, (const char *)r + f[i].off, sizeof(w));
			v = w;
		} else {
			memcpy(&v, (const char *)r + f[i].off, sizeof(v));
		}
		/* no cache: its families without a sample (a zero would say it is empty) */
		out[n] = (struct stk__family){f[i].name, f[i].type, f[i].help, v,
					      r->cache_on || strncmp(f[i].name, "stoker_remote_cache_", 20)};
	}
	return n;
}
