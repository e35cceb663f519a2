/*
 * metrics/remote.c — the Prometheus families of a loader's remote data
 * (s3://, http(s)://): the transport's requests, retries, failures, short
 * bodies and bytes, and the local cache's hits, misses, evictions and bytes,
 * all counted since create (stk_loader_remote_stats), appended by
 * metrics/metrics.c to the loader's own families (which also carries the
 * per-request latency histogram, stoker_remote_request_seconds).  Local data:
 * nothing.
 *
 * Nothing secret is exported: no key, token or credential source, and the
 * data's URL (the stoker_remote_info label) without any user:password@ part
 * (io/remote.c never keeps one in the root).
 */
#include "base/internal.h"
#include "metrics/metrics_int.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

struct rout {
	char *buf;
	size_t len, pos;
};

static void put(struct rout *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct rout *o, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = o->pos < o->len ? vsnprintf(o->buf + o->pos, o->len - o->pos, fmt, ap)
				: vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n > 0)
		o->pos += (size_t)n;
}

/* Label values escape backslash, double quote and newline. */
static void escape(char *dst, size_t len, const char *s)
{
	size_t k = 0;
	for (; *s && k + 3 < len; s++) {
		if (*s == '\\' || *s == '"' || *s == '\n') {
			dst[k++] = '\\';
			dst[k++] = *s == '\n' ? 'n' : *s;
		} else {
			dst[k++] = *s;
		}
	}
	dst[k] = 0;
}

size_t stk__remote_metrics_text(const struct stk_loader *l, const char *labels, char *buf,
				size_t len)
{
	struct stk_remote_stats r = {.size = sizeof(r)};
	struct rout o = {buf, len, 0};
	if (stk_loader_remote_stats(l, &r) < 0)
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
	for (size_t i = 0; i < STK_ARRAY_SIZE(f); i++) {
		uint64_t v = 0;
		if (f[i].u32) {
			uint32_t w;
			memcpy(&w, (const char *)&r + f[i].off, sizeof(w));
			v = w;
		} else {
			memcpy(&v, (const char *)&r + f[i].off, sizeof(v));
		}
		put(&o, "# HELP %s %s\n# TYPE %s %s\n", f[i].name, f[i].help, f[i].name, f[i].type);
		/* no cache: its families without a sample (a zero would say it is empty) */
		if (r.cache_on || strncmp(f[i].name, "stoker_remote_cache_", 20))
			put(&o, "%s{%s} %" PRIu64 "\n", f[i].name, labels, v);
	}
	char root[2 * sizeof(r.root) + 1];
	escape(root, sizeof(root), r.root);
	put(&o, "# HELP stoker_remote_info The remote data's URL (never credentials) and whether "
		"the local cache is on.\n# TYPE stoker_remote_info gauge\n"
		"stoker_remote_info{%s,root=\"%s\",cache=\"%s\"} 1\n", labels, root,
	    r.cache_on ? "on" : "off");
	return o.pos;
}
