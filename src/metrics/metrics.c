/*
 * metrics/metrics.c — Prometheus text exposition (format 0.0.4) of a loader's
 * counters and histograms, of /proc/diskstats and of NVML's GPU figures.
 * Publishing and serving live in metrics/serve.c.
 *
 * Everything is rendered from the public API (stk_loader_stats,
 * stk_loader_hist, stk_sys_diskstats, stk_sys_gpus) into the caller's
 * buffer with snprintf's contract, so a binding can size its buffer with one
 * call and nothing here keeps state.  Names follow Prometheus' conventions:
 * the stoker_ prefix, base units (seconds, bytes), _total for counters;
 * the disk names mirror node_exporter's node_disk_* so dashboards carry over.
 * A family whose figure is unknown (a kernel without discard counters, a GPU
 * that does not report utilization) keeps its HELP/TYPE lines and drops the
 * sample: a missing series is honest, a zero would not be.
 */
#include "base/internal.h"
#include "metrics/metrics_int.h"
#include "stoker/metrics.h"
#include "stoker/sys.h"

#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* snprintf into buf at pos, counting what does not fit. */
struct out {
	char *buf;
	size_t len, pos;
};

static void put(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct out *o, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = o->pos < o->len ? vsnprintf(o->buf + o->pos, o->len - o->pos, fmt, ap)
				: vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n > 0)
		o->pos += (size_t)n;
}

static int finish(struct out *o)
{
	if (o->len && o->pos == 0)
		o->buf[0] = 0;
	return o->pos > INT_MAX ? -EOVERFLOW : (int)o->pos;
}

static void family(struct out *o, const char *name, const char *type, const char *help)
{
	put(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A value as Prometheus' clients print one: shortest round trip is not
 * needed, 15 significant digits are, and the format's spellings of the
 * special values. */
static void put_double(struct out *o, double v)
{
	if (isnan(v))
		put(o, "NaN\n");
	else if (isinf(v))
		put(o, v > 0 ? "+Inf\n" : "-Inf\n");
	else
		put(o, "%.15g\n", v);
}

/* ---- the loader ---------------------------------------------------------- */

static int escape_label(char *dst, size_t len, const char *s);

static void gauge(struct out *o, const char *name, const char *help, const char *labels, double v)
{
	family(o, name, "gauge", help);
	put(o, "%s{%s} ", name, labels);
	put_double(o, v);
}

static void counter_s(struct out *o, const char *name, const char *help, const char *labels,
		      double v)
{
	family(o, name, "counter", help);
	put(o, "%s{%s} ", name, labels);
	put_double(o, v);
}

/* The window the exported verdict covers: several of the loader's
 * snapshots (one a second), short enough to follow a change of phase
 * between two scrapes. */
#define DIAG_WINDOW_S 10.0

/* The library's verdict (stk_loader_diagnose over the last DIAG_WINDOW_S)
 * as a state set, one series per kind, and its evidence as gauges; the
 * device's figures only when the verdict sampled one (no false zeros). */
static void diagnosis(struct out *o, const struct stk_loader *l, const char *labels)
{
	struct stk_verdict v = {.size = sizeof(v)};
	if (stk_loader_diagnose(l, DIAG_WINDOW_S, &v) < 0)
		v.kind = -1; /* cannot happen with a valid loader: every kind reads 0 */
	family(o, "stoker_loader_bottleneck", "gauge",
	       "The library's verdict over the diagnosis window: 1 for the kind that holds the "
	       "input pipeline back, 0 for the others.");
	for (int k = 0; k < STK_BOUND_COUNT; k++)
		put(o, "stoker_loader_bottleneck{%s,kind=\"%s\"} %d\n", labels, stk_bound_name(k),
		    k == v.kind);
	gauge(o, "stoker_loader_diagnosis_window_seconds",
	      "The window the verdict and its evidence cover (shorter while the loader is young).",
	      labels, v.window_s);
	gauge(o, "stoker_loader_diagnosis_data_stall_ratio",
	      "Share of the diagnosis window the consumer waited for batches.", labels,
	      v.stall_ratio);
	gauge(o, "stoker_loader_diagnosis_copy_wait_ratio",
	      "Share of the diagnosis window the consumer waited on host-to-device copies.", labels,
	      v.copy_wait_ratio);
	gauge(o, "stoker_loader_diagnosis_decode_busy_ratio",
	      "Decode threads' busy share over the diagnosis window (image mode).", labels,
	      v.decode_busy);
	gauge(o, "stoker_loader_diagnosis_reads_in_flight",
	      "Mean reads in flight over the diagnosis window.", labels, v.inflight_mean);
	family(o, "stoker_loader_diagnosis_prefetch_batches", "gauge",
	       "Batches the loader keeps in flight (prefetch), as the verdict saw it.");
	put(o, "stoker_loader_diagnosis_prefetch_batches{%s} %" PRIu32 "\n", labels, v.prefetch);

	static const struct {
		const char *name, *help;
	} dev[] = {
		{"stoker_loader_diagnosis_device_utilization_ratio",
		 "The data's block device: share of the window with I/O in flight (iostat %util / 100)."},
		{"stoker_loader_diagnosis_device_read_await_seconds",
		 "The data's block device: mean time a read took, queue included (iostat r_await)."},
		{"stoker_loader_diagnosis_device_queue_size",
		 "The data's block device: mean I/Os in flight (iostat aqu-sz)."},
		{"stoker_loader_diagnosis_device_read_bytes_per_second",
		 "The data's block device: bytes read per second, by every reader."},
		{"stoker_loader_diagnosis_device_read_share",
		 "The device's read bytes per byte the loader delivered: ~1 read from the device, "
		 "~0 from the page cache."},
	};
	double val[] = {v.dev_util / 100, v.dev_r_await_ms / 1000, v.dev_aqu_sz,
			v.dev_read_mb_s * 1e6, v.dev_share};
	char dl[2 * sizeof(v.device) + 16] = "";
	if (v.device_sampled) {
		char esc[2 * sizeof(v.device) + 1];
		if (escape_label(esc, sizeof(esc), v.device) == 0)
			snprintf(dl, sizeof(dl), ",device=\"%s\"", esc);
	}
	for (size_t i = 0; i < STK_ARRAY_SIZE(dev); i++) {
		family(o, dev[i].name, "gauge", dev[i].help);
		if (dl[0]) {
			put(o, "%s{%s%s} ", dev[i].name, labels, dl);
			put_double(o, val[i]);
		}
	}
}

/* The `le` bounds of the exported histograms: 1 µs to 10 s in 1-2.5-5 steps,
 * spelled as Go's and Python's clients spell them (so the same bound is the
 * same label value across exporters). */
static const struct {
	uint64_t ns;
	const char *le;
} les[] = {
	{1000, "1e-06"},	  {2500, "2.5e-06"},	 {5000, "5e-06"},     {10000, "1e-05"},
	{25000, "2.5e-05"},	  {50000, "5e-05"},	 {100000, "0.0001"},   {250000, "0.00025"},
	{500000, "0.0005"},	  {1000000, "0.001"},	 {2500000, "0.0025"},  {5000000, "0.005"},
	{10000000, "0.01"},	  {25000000, "0.025"},	 {50000000, "0.05"},   {100000000, "0.1"},
	{250000000, "0.25"},	  {500000000, "0.5"},	 {1000000000, "1"},    {2500000000, "2.5"},
	{5000000000, "5"},	  {10000000000, "10"},
};
#define NLE STK_ARRAY_SIZE(les)

/* Re-buckets one of the loader's log-linear histograms into the `le` bounds.
 * A log-linear bucket counts toward the first bound at or above its
 * (inclusive) upper end.  A bucket that straddles a bound therefore lands
 * one bound up: the cumulative count at a bound may miss values within one
 * bucket width (< 0.8 %) below it, but never includes a value above it. */
static void histogram(struct out *o, const struct stk_loader *l, struct stk_hist *h,
		      enum stk_hist_kind kind, const char *name, const char *help,
		      const char *labels)
{
	uint64_t cum[NLE] = {0}, total = 0;
	stk_hist_reset(h);
	stk_loader_hist(l, kind, h);
	uint32_t cur = 0;
	uint64_t upper, count;
	size_t i = 0;
	while (stk_hist_bucket_next(h, &cur, &upper, &count)) {
		while (i < NLE && upper > les[i].ns)
			i++; /* upper bounds come in increasing order */
		if (i < NLE)
			cum[i] += count;
		total += count;
	}
	family(o, name, "histogram", help);
	uint64_t run = 0;
	for (i = 0; i < NLE; i++) {
		run += cum[i];
		put(o, "%s_bucket{%s,le=\"%s\"} %" PRIu64 "\n", name, labels, les[i].le, run);
	}
	/* +Inf and _count from the same bucket walk, so they agree even while
	 * the loader's threads keep adding (the histogram's own count and sum
	 * are read separately from its buckets). */
	put(o, "%s_bucket{%s,le=\"+Inf\"} %" PRIu64 "\n", name, labels, total);
	put(o, "%s_sum{%s} ", name, labels);
	put_double(o, stk_hist_mean(h) * (double)total / 1e9);
	put(o, "%s_count{%s} %" PRIu64 "\n", name, labels, total);
}

/* Label values escape backslash, double quote and newline. */
static int escape_label(char *dst, size_t len, const char *s)
{
	size_t k = 0;
	for (; *s; s++) {
		const char *rep = *s == '\\' ? "\\\\" : *s == '"' ? "\\\"" : *s == '\n' ? "\\n" : NULL;
		size_t n = rep ? 2 : 1;
		if (k + n >= len)
			return -EINVAL;
		if (rep)
			memcpy(dst + k, rep, 2);
		else
			dst[k] = *s;
		k += n;
	}
	dst[k] = 0;
	return 0;
}

/* Remote data's families (metrics/remote.c), its latency histogram and
 * stoker_remote_info (the URL, never credentials); local data: nothing. */
static void remote(struct out *o, const struct stk_loader *l, struct stk_hist *h,
		   const char *labels)
{
	struct stk__family f[16];
	struct stk_remote_stats r;
	size_t n = stk__remote_families(l, f, STK_ARRAY_SIZE(f), &r);
	if (!n)
		return;
	for (size_t i = 0; i < n; i++) {
		family(o, f[i].name, f[i].type, f[i].help);
		if (f[i].has)
			put(o, "%s{%s} %" PRIu64 "\n", f[i].name, labels, f[i].value);
	}
	histogram(o, l, h, STK_HIST_REMOTE, "stoker_remote_request_seconds",
		  "Each request to the object store or HTTP server, retries each their own.",
		  labels);
	char root[2 * sizeof(r.root) + 1];
	family(o, "stoker_remote_info", "gauge",
	       "The remote data's URL (never credentials) and whether the local cache is on.");
	if (escape_label(root, sizeof(root), r.root) == 0)
		put(o, "stoker_remote_info{%s,root=\"%s\",cache=\"%s\"} 1\n", labels, root,
		    r.cache_on ? "on" : "off");
}

int stk_loader_metrics_text(const struct stk_loader *l, const char *name, char *buf, size_t len)
{
	if (!l || (!buf && len))
		return -EINVAL;
	if (!name)
		name = "default";
	char esc[2 * 128 + 1], labels[sizeof(esc) + 64];
	if (strlen(name) > 128 || escape_label(esc, sizeof(esc), name))
		return -EINVAL;
	snprintf(labels, sizeof(labels), "loader=\"%s\",pid=\"%d\"", esc, (int)getpid());

	struct stk_stats s = {.size = sizeof(s)};
	int rc = stk_loader_stats(l, &s);
	if (rc < 0)
		return rc;
	struct stk_hist *h;
	if ((rc = stk_hist_create(&h)) < 0)
		return rc;
	struct out o = {buf, len, 0};
	/* Counters from the figures since create, never reset: a counter that
	 * went back at stk_loader_stats_reset would read as a restart. */
	static const struct {
		const char *name, *help;
		size_t off;
	} counters[] = {
		{"stoker_loader_samples_total", "Samples delivered to the consumer.",
		 offsetof(struct stk_stats, total_samples)},
		{"stoker_loader_bytes_total", "Bytes of the samples delivered to the consumer.",
		 offsetof(struct stk_stats, total_bytes)},
		{"stoker_loader_batches_total", "Batches delivered to the consumer.",
		 offsetof(struct stk_stats, total_batches)},
		{"stoker_loader_errors_total",
		 "Samples that failed to load (skipped or fatal), and files the index left out.",
		 offsetof(struct stk_stats, total_errors)},
	};
	for (size_t i = 0; i < STK_ARRAY_SIZE(counters); i++) {
		uint64_t v;
		memcpy(&v, (const char *)&s + counters[i].off, sizeof(v));
		family(&o, counters[i].name, "counter", counters[i].help);
		put(&o, "%s{%s} %" PRIu64 "\n", counters[i].name, labels, v);
	}
	counter_s(&o, "stoker_loader_data_stall_seconds_total",
		  "Time the consumer waited for batches (rate: the data stall ratio).", labels,
		  s.total_wait_s);
	counter_s(&o, "stoker_loader_copy_wait_seconds_total",
		  "Time the consumer waited on host-to-device copies (bindings that copy).", labels,
		  s.total_copy_wait_s);
	counter_s(&o, "stoker_loader_decode_busy_seconds_total",
		  "Time the decode threads spent decoding, all together (image mode).", labels,
		  s.total_decode_busy_s);

	gauge(&o, "stoker_loader_reads_in_flight",
	      "Time-weighted mean of reads in flight over the stats window (create or last reset).",
	      labels, s.inflight_mean);
	family(&o, "stoker_loader_reads_in_flight_max", "gauge", "Most reads in flight at once.");
	put(&o, "stoker_loader_reads_in_flight_max{%s} %" PRIu32 "\n", labels, s.inflight_max);
	gauge(&o, "stoker_loader_data_stall_ratio",
	      "Share of wall time the consumer waited for batches over the stats window.", labels,
	      s.stall_ratio);
	family(&o, "stoker_loader_pool_bytes", "gauge", "Fixed batch-slot memory of the loader.");
	put(&o, "stoker_loader_pool_bytes{%s} %" PRIu64 "\n", labels, s.pool_bytes);
	family(&o, "stoker_loader_decode_threads", "gauge", "Decode threads (image mode).");
	put(&o, "stoker_loader_decode_threads{%s} %" PRIu32 "\n", labels, s.decode_threads);
	family(&o, "stoker_loader_queue_depth", "gauge",
	       "Reads in flight at most, as the loader chose (tuned at run time unless fixed).");
	put(&o, "stoker_loader_queue_depth{%s} %" PRIu32 "\n", labels, s.queue_depth);
	family(&o, "stoker_loader_io_threads", "gauge", "I/O threads taking new batches.");
	put(&o, "stoker_loader_io_threads{%s} %" PRIu32 "\n", labels, s.io_threads);

	diagnosis(&o, l, labels);

	histogram(&o, l, h, STK_HIST_BATCH_WAIT, "stoker_loader_batch_wait_seconds",
		  "Consumer's wait for each batch (the trainer's dataloader time).", labels);
	histogram(&o, l, h, STK_HIST_READ, "stoker_loader_read_latency_seconds",
		  "Submit to completion of each sample's read.", labels);
	histogram(&o, l, h, STK_HIST_DECODE, "stoker_loader_decode_seconds",
		  "Decode and crop of one sample (image mode).", labels);
	remote(&o, l, h, labels);
	stk_hist_destroy(h);
	return finish(&o);
}

/* ---- disks ---------------------------------------------------------------- */

enum dfield {
	RD_IOS, RD_MERGES, RD_BYTES, RD_TIME, WR_IOS, WR_MERGES, WR_BYTES, WR_TIME,
	IO_NOW, IO_TIME, IO_WEIGHTED, DC_IOS, DC_MERGES, DC_BYTES, DC_TIME, FL_IOS, FL_TIME,
};

static const struct {
	const char *name, *type, *help;
	enum dfield field;
	uint32_t nfields; /* the diskstats format that has it */
} dfams[] = {
	{"stoker_disk_reads_completed_total", "counter", "Reads completed.", RD_IOS, 11},
	{"stoker_disk_reads_merged_total", "counter", "Reads merged with an adjacent one.",
	 RD_MERGES, 11},
	{"stoker_disk_read_bytes_total", "counter", "Bytes read.", RD_BYTES, 11},
	{"stoker_disk_read_time_seconds_total", "counter", "Time spent by all reads.", RD_TIME, 11},
	{"stoker_disk_writes_completed_total", "counter", "Writes completed.", WR_IOS, 11},
	{"stoker_disk_writes_merged_total", "counter", "Writes merged with an adjacent one.",
	 WR_MERGES, 11},
	{"stoker_disk_written_bytes_total", "counter", "Bytes written.", WR_BYTES, 11},
	{"stoker_disk_write_time_seconds_total", "counter", "Time spent by all writes.", WR_TIME,
	 11},
	{"stoker_disk_io_now", "gauge", "I/Os in progress.", IO_NOW, 11},
	{"stoker_disk_io_time_seconds_total", "counter",
	 "Time the device had I/O in flight (rate: iostat's %util / 100).", IO_TIME, 11},
	{"stoker_disk_io_time_weighted_seconds_total", "counter",
	 "I/Os in flight times time (rate: iostat's aqu-sz).", IO_WEIGHTED, 11},
	{"stoker_disk_discards_completed_total", "counter", "Discards completed.", DC_IOS, 15},
	{"stoker_disk_discards_merged_total", "counter", "Discards merged with an adjacent one.",
	 DC_MERGES, 15},
	{"stoker_disk_discarded_bytes_total", "counter", "Bytes discarded.", DC_BYTES, 15},
	{"stoker_disk_discard_time_seconds_total", "counter", "Time spent by all discards.",
	 DC_TIME, 15},
	{"stoker_disk_flush_requests_total", "counter", "Flush requests completed.", FL_IOS, 17},
	{"stoker_disk_flush_requests_time_seconds_total", "counter",
	 "Time spent by all flush requests.", FL_TIME, 17},
};

/* Whether a field counts milliseconds (printed as seconds) or units. */
static uint64_t dvalue(const struct stk_diskstat *d, enum dfield f, bool *ms)
{
	*ms = f == RD_TIME || f == WR_TIME || f == IO_TIME || f == IO_WEIGHTED || f == DC_TIME ||
	      f == FL_TIME;
	switch (f) {
	case RD_IOS: return d->rd_ios;
	case RD_MERGES: return d->rd_merges;
	case RD_BYTES: return d->rd_sectors * 512; /* diskstats' sectors are 512 B, always */
	case RD_TIME: return d->rd_ticks;
	case WR_IOS: return d->wr_ios;
	case WR_MERGES: return d->wr_merges;
	case WR_BYTES: return d->wr_sectors * 512;
	case WR_TIME: return d->wr_ticks;
	case IO_NOW: return d->in_flight;
	case IO_TIME: return d->io_ticks;
	case IO_WEIGHTED: return d->time_in_queue;
	case DC_IOS: return d->dc_ios;
	case DC_MERGES: return d->dc_merges;
	case DC_BYTES: return d->dc_sectors * 512;
	case DC_TIME: return d->dc_ticks;
	case FL_IOS: return d->fl_ios;
	case FL_TIME: return d->fl_ticks;
	}
	return 0;
}

/* iostat's default set: whole disks, no loop, ram or floppy devices (node
 * exporter leaves out the same).  Idle disks stay: a series that comes and
 * goes with activity breaks rate(). */
static bool whole_disk(const char *root, const char *name)
{
	if (!strncmp(name, "loop", 4) ||
	    (!strncmp(name, "ram", 3) && name[3] >= '0' && name[3] <= '9') ||
	    (!strncmp(name, "fd", 2) && name[2] >= '0' && name[2] <= '9'))
		return false;
	return stk_sys_disk_is_whole(root, name) == 1;
}

int stk_disk_metrics_text(const char *root, char *buf, size_t len)
{
	if (!buf && len)
		return -EINVAL;
	struct stk_diskstat *d = NULL;
	int n = 0;
	/* Grow until every device fits: stk_sys_diskstats reports how many there are. */
	for (int cap = 32;;) {
		struct stk_diskstat *p = realloc(d, (size_t)cap * sizeof(*d));
		if (!p) {
			free(d);
			return -ENOMEM;
		}
		d = p;
		d[0].size = sizeof(*d);
		n = stk_sys_diskstats(root, d, (size_t)cap);
		if (n < 0) {
			free(d);
			return n;
		}
		if (n <= cap)
			break;
		cap = n + 16;
	}
	int keep = 0;
	for (int i = 0; i < n; i++)
		if (whole_disk(root, d[i].name) && d[i].nfields >= 11)
			d[keep++] = d[i];
	struct out o = {buf, len, 0};
	char esc[2 * sizeof(d->name) + 1];
	for (size_t f = 0; f < STK_ARRAY_SIZE(dfams); f++) {
		family(&o, dfams[f].name, dfams[f].type, dfams[f].help);
		for (int i = 0; i < keep; i++) {
			if (d[i].nfields < dfams[f].nfields)
				continue; /* this kernel does not count it */
			bool ms;
			uint64_t v = dvalue(&d[i], dfams[f].field, &ms);
			escape_label(esc, sizeof(esc), d[i].name);
			if (ms) /* exact: milliseconds have three decimals in seconds */
				put(&o, "%s{device=\"%s\"} %" PRIu64 ".%03u\n", dfams[f].name, esc,
				    v / 1000, (unsigned)(v % 1000));
			else
				put(&o, "%s{device=\"%s\"} %" PRIu64 "\n", dfams[f].name, esc, v);
		}
	}
	free(d);
	return finish(&o);
}

/* ---- GPUs ----------------------------------------------------------------- */

#define MAX_GPUS 64

int stk_gpu_metrics_text(char *buf, size_t len)
{
	if (!buf && len)
		return -EINVAL;
	struct stk_gpu *g = calloc(MAX_GPUS, sizeof(*g));
	if (!g)
		return -ENOMEM;
	g[0].size = sizeof(*g);
	int n = stk_sys_gpus(g, MAX_GPUS, NULL, 0);
	if (n < 0)
		n = 0; /* no driver, or NVML does not start: no GPU to report */
	if (n > MAX_GPUS)
		n = MAX_GPUS;
	struct out o = {buf, len, 0};
	family(&o, "stoker_gpu_devices", "gauge", "NVIDIA GPUs visible through NVML (0 without a driver).");
	put(&o, "stoker_gpu_devices %d\n", n);
	if (n) {
		family(&o, "stoker_gpu_utilization_ratio", "gauge",
		       "Share of the last sample period with a kernel running (NVML).");
		for (int i = 0; i < n; i++)
			if (g[i].util_gpu >= 0)
				put(&o, "stoker_gpu_utilization_ratio{gpu=\"%" PRIu32 "\"} %g\n",
				    g[i].index, g[i].util_gpu / 100.0);
		family(&o, "stoker_gpu_memory_used_bytes", "gauge", "GPU memory in use.");
		for (int i = 0; i < n; i++)
			if (g[i].mem_total)
				put(&o, "stoker_gpu_memory_used_bytes{gpu=\"%" PRIu32 "\"} %" PRIu64 "\n",
				    g[i].index, g[i].mem_used);
		family(&o, "stoker_gpu_memory_total_bytes", "gauge", "GPU memory in all.");
		for (int i = 0; i < n; i++)
			if (g[i].mem_total)
				put(&o, "stoker_gpu_memory_total_bytes{gpu=\"%" PRIu32 "\"} %" PRIu64 "\n",
				    g[i].index, g[i].mem_total);
	}
	free(g);
	return finish(&o);
}
