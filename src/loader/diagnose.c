/*
 * loader/diagnose.c — what holds the input pipeline back, said by the library so
 * that `stoker bench`, a Python training loop and the exporter say the same.
 *
 * The loader keeps a snapshot of its counters (all since create) and of the
 * block device behind the data about once a second, taken on the consumer's
 * side after a batch (stk__loader_tick: a clock read per batch, a snapshot a
 * second).  A verdict compares now with the snapshot window_s ago (or the
 * stats window's mark): the consumer's data stall, its wait on device copies,
 * the decode threads' busy share, the reads in flight against the queue
 * depth, and the device's iostat -x figures; then the rules below, in order.
 * Remote data has no device behind it: its requests (in flight against the
 * cap, latency, retries, the cache's share) say whether the object store or
 * HTTP server is the limit (network-bound).
 */
#include "loader/loader.h"
#include "io/remote.h"

#include <stdio.h>
#include <string.h>

static const char *const bound_names[] = {
#define STK__BOUND_NAME(kind, name, meaning) name,
	STK_BOUND_MAP(STK__BOUND_NAME)
#undef STK__BOUND_NAME
};

const char *stk_bound_name(int kind)
{
	return kind >= 0 && kind < STK_BOUND_COUNT ? bound_names[kind] : NULL;
}

void stk_loader_add_time(struct stk_loader *l, enum stk_time_kind kind, uint64_t ns)
{
	if (kind == STK_TIME_COPY_WAIT)
		atomic_fetch_add(&l->copy_ns, ns);
}

void stk__loader_snap(struct stk_loader *l, struct stk__snap *out)
{
	uint64_t now = stk__now_ns();
	double area = 0;
	for (uint32_t i = 0; i < l->nrings; i++) {
		struct io_thread *r = &l->rings[i];
		area += r->area + (double)r->inflight * (double)(now - r->area_t);
	}
	out->t = now;
	out->samples = atomic_load(&l->samples);
	out->bytes = atomic_load(&l->bytes);
	out->batches = atomic_load(&l->batches);
	out->errors = atomic_load(&l->errors);
	out->replaced = atomic_load(&l->replaced);
	out->wait_ns = l->wait_ns;
	out->decode_ns = l->decode_ns;
	out->copy_ns = atomic_load(&l->copy_ns);
	out->decoded = l->decoded;
	out->decoded_fast = l->decoded_fast;
	out->entropy_sum = l->entropy_sum;
	memcpy(out->fmt_decoded, l->fmt_decoded, sizeof(out->fmt_decoded));
	memcpy(out->fmt_fast, l->fmt_fast, sizeof(out->fmt_fast));
	memcpy(out->fmt_ns, l->fmt_ns, sizeof(out->fmt_ns));
	out->area = area;
	const struct stk__remote *rm = l->ds ? l->ds->remote : NULL;
	if (rm) {
		out->rreq = atomic_load(&rm->c.requests);
		out->rretries = atomic_load(&rm->c.retries);
		out->rbytes = atomic_load(&rm->c.bytes);
		out->rhits = atomic_load(&rm->c.hits);
		out->rmisses = atomic_load(&rm->c.misses);
	}
}

void stk__loader_find_disk(struct stk_loader *l)
{
	struct stk_blockdev bd = {.size = sizeof(bd)};
	l->disk_name[0] = 0;
	/* remote data: the device its local cache is on (none without a cache) */
	const char *where = l->ds->remote ? stk__rcache_dir(l->ds->remote->cache) : l->ds->root;
	if (where && l->o.engine != STK_ENGINE_NULL && stk_sys_blockdev_for_path("", where, &bd) == 0)
		snprintf(l->disk_name, sizeof(l->disk_name), "%s", bd.disk);
}

void stk__loader_snap_disk(struct stk_loader *l, struct stk__snap *out)
{
	out->disk_ok = false;
	if (!l->disk_name[0])
		return;
	struct stk_diskstat all[64];
	all[0].size = sizeof(all[0]);
	int n = stk_sys_diskstats("", all, STK_ARRAY_SIZE(all));
	for (int i = 0; i < n && i < (int)STK_ARRAY_SIZE(all); i++)
		if (!strcmp(all[i].name, l->disk_name)) {
			out->disk = all[i];
			out->disk_ok = true;
			return;
		}
}

void stk__loader_tick(struct stk_loader *l, uint64_t now)
{
	if (now < l->snap_next) /* the consumer's own field: no lock for the check */
		return;
	struct stk__snap s;
	stk__loader_snap_disk(l, &s);
	pthread_mutex_lock(&l->mu);
	bool disk_ok = s.disk_ok;
	struct stk_diskstat disk = s.disk;
	stk__loader_snap(l, &s);
	s.disk_ok = disk_ok;
	s.disk = disk;
	l->snaps[l->snap_head] = s;
	l->snap_head = (l->snap_head + 1) % STK__SNAPS;
	if (l->nsnaps < STK__SNAPS)
		l->nsnaps++;
	l->snap_next = now + 1000000000ull;
	pthread_mutex_unlock(&l->mu);
}

/* The snapshot the window starts at: the newest at least window_s old, else
 * the oldest kept (a loader younger than the window), else the mark.  Under mu. */
static struct stk__snap window_start(const struct stk_loader *l, uint64_t now, double window_s)
{
	if (window_s <= 0)
		return l->mark;
	uint64_t want = (uint64_t)(window_s * 1e9);
	uint64_t edge = now > want ? now - want : 0;
	struct stk__snap best = l->mark;
	bool found = false;
	for (uint32_t k = 0; k < l->nsnaps; k++) {
		const struct stk__snap *s = &l->snaps[(l->snap_head + STK__SNAPS - 1 - k) % STK__SNAPS];
		if (s->t <= edge) {
			best = *s;
			found = true;
			break;
		}
		best = *s; /* older and older: the oldest if none is old enough */
	}
	if (!found && l->mark.t > best.t)
		best = l->mark;
	return best;
}

void stk__rings_advice(const struct stk__rings_facts *f, char *b, size_t n)
{
	if (!f->uring) /* pread workers block on reads: a CPU each is not the question */
		snprintf(b, n, "more io_threads (pread workers, %u now), or io_uring where the "
			 "kernel allows it (`stoker doctor` says why not)", f->nrings);
	else if (f->found == STK__RINGS_NO_GAIN)
		snprintf(b, n, "not more io_threads: the tuner measured no gain past %u (its I/O "
			 "threads line); fewer bytes per sample (smaller images, tar shards), or "
			 "fewer other processes on these cores", f->active);
	else if (f->free_cpus)
		snprintf(b, n, "more io_threads (--io-threads %u: %u CPU%s free of %u)%s",
			 f->nrings + 1, f->free_cpus, f->free_cpus == 1 ? "" : "s", f->cpus,
			 f->found == STK__RINGS_RISING ? "; the tuner gained with every I/O thread" : "");
	else {
		char dec[48] = "";
		if (f->decode_threads)
			snprintf(dec, sizeof(dec), ", %u decode thread%s", f->decode_threads,
				 f->decode_threads == 1 ? "" : "s");
		snprintf(b, n, "more CPUs for the loader: none is free (%u CPU%s: the trainer's, %u I/O "
			 "thread%s%s)%s; fewer other processes on these cores", f->cpus,
			 f->cpus == 1 ? "" : "s", f->nrings, f->nrings == 1 ? "" : "s", dec,
			 f->found == STK__RINGS_RISING ? "; the tuner gained with every I/O thread "
							 "it added" : "");
	}
}

int stk_loader_diagnose(const struct stk_loader *cl, double window_s, struct stk_verdict *out)
{
	struct stk_loader *l = (struct stk_loader *)cl;
	if (!out || (out->size && out->size < offsetof(struct stk_verdict, window_s)))
		return -EINVAL;
	struct stk__snap now, b;
	stk__loader_snap_disk(l, &now);
	bool disk_ok = now.disk_ok;
	struct stk_diskstat disk = now.disk;
	pthread_mutex_lock(&l->mu);
	stk__loader_snap(l, &now);
	b = window_start(l, now.t, window_s);
	/* the depth and rings in use now (auto: what the tuner chose) */
	uint32_t qd = l->tune.qd, prefetch = l->o.prefetch, dthreads = l->ndthreads;
	uint32_t iot = l->ops == &stk__engine_uring ? l->tune.active : l->o.io_threads;
	struct stk__rings_facts rf = {.found = l->tune.rings_found, .busy = l->tune.busy,
				 .auto_rings = l->tune.auto_rings, .uring = l->ops == &stk__engine_uring,
				 .active = iot,
				 .nrings = l->ops == &stk__engine_uring ? l->nrings : l->o.io_threads};
	uint32_t taken = 1 + l->nrings + dthreads; /* the trainer's CPU, the loader's threads */
	rf.free_cpus = l->share.cpus > taken ? l->share.cpus - taken : 0;
	rf.cpus = l->share.cpus;
	rf.decode_threads = dthreads;
	pthread_mutex_unlock(&l->mu);
	now.disk_ok = disk_ok;
	now.disk = disk;

	struct stk_verdict v = {.size = sizeof(v)};
	double dt = (double)(now.t - b.t) / 1e9;
	v.window_s = dt;
	v.queue_depth = qd;
	v.prefetch = prefetch;
	v.decode_threads = dthreads;
	v.io_threads = iot;
	if (dt > 0) {
		v.samples_per_s = (double)(now.samples - b.samples) / dt;
		v.mb_per_s = (double)(now.bytes - b.bytes) / dt / 1e6;
		v.stall_ratio = (double)(now.wait_ns - b.wait_ns) / 1e9 / dt;
		v.copy_wait_ratio = (double)(now.copy_ns - b.copy_ns) / 1e9 / dt;
		v.inflight_mean = (now.area - b.area) / 1e9 / dt;
		if (dthreads)
			v.decode_busy = (double)(now.decode_ns - b.decode_ns) / 1e9 / (dt * dthreads);
	}
	struct stk_disk_rates rates = {.size = sizeof(rates)};
	if (now.disk_ok && b.disk_ok && dt > 0 &&
	    stk_sys_disk_rates(&b.disk, &now.disk, dt * 1000, &rates) == 0) {
		v.device_sampled = 1;
		snprintf(v.device, sizeof(v.device), "%s", l->disk_name);
		v.dev_r_s = rates.r_s;
		v.dev_read_mb_s = rates.rkb_s * 1.024 / 1000;
		v.dev_r_await_ms = rates.r_await;
		v.dev_aqu_sz = rates.aqu_sz;
		v.dev_util = rates.util;
		v.dev_share = v.mb_per_s > 0 ? v.dev_read_mb_s / v.mb_per_s : 0;
	}

	const struct stk__remote *rm = l->ds->remote;
	uint64_t reads = (now.rhits - b.rhits) + (now.rmisses - b.rmisses);
	if (rm) {
		v.remote = 1;
		v.req_p50_ms = (double)stk_hist_percentile(rm->h_lat, 50) / 1e6;
		v.req_p99_ms = (double)stk_hist_percentile(rm->h_lat, 99) / 1e6;
		v.req_min_ms = (double)stk_hist_min(rm->h_lat) / 1e6;
		v.cache_hit_ratio = reads ? (double)(now.rhits - b.rhits) / (double)reads : 0;
		v.remote_retrying = atomic_load(&rm->c.retrying);
		if (dt > 0) {
			v.req_per_s = (double)(now.rreq - b.rreq) / dt;
			v.retries_per_s = (double)(now.rretries - b.rretries) / dt;
			if (v.inflight_mean > 0)
				v.req_mb_per_s_each = (double)(now.rbytes - b.rbytes) / dt / 1e6 /
						      v.inflight_mean;
		}
	}
	/* the reads went to the server (a cache serving most of them is local
	 * disk), or the bytes did: windows make most reads hits of what a
	 * window just brought, the network's time all the same */
	double delivered = (double)(now.bytes - b.bytes),
	       fetched = rm ? (double)(now.rbytes - b.rbytes) : 0;
	bool net_bytes = delivered > 0 && fetched >= 0.5 * delivered;
	bool from_net = rm && l->o.engine != STK_ENGINE_NULL &&
			(reads == 0 || v.cache_hit_ratio < 0.5 || net_bytes);
	double stall = v.stall_ratio, inflight = v.inflight_mean;
	/* "12.3 of 16"; over a window that held a probe's deeper levels the mean
	 * can pass today's depth: said so, not "148.5 of 16" */
	char fl[64];
	if (inflight <= qd + 0.05)
		snprintf(fl, sizeof(fl), "%.1f of %u", inflight, qd);
	else
		snprintf(fl, sizeof(fl), "%.1f (depth %u now, deeper while probed)", inflight, qd);
	bool null_engine = l->o.engine == STK_ENGINE_NULL;
	bool sampled = v.device_sampled && !null_engine;
	/* the device is ours to blame only when our reads reached it: page-cache
	 * hits never do, and others may be keeping it busy */
	bool from_disk = sampled && v.mb_per_s > 0 && v.dev_share >= 0.5;
	/* (not when the bytes came over the network: a busy device is others') */
	bool disk_busy = from_disk && v.dev_util >= 80 && !(rm && net_bytes);
	if (dt < 0.01 || (now.batches == b.batches && now.wait_ns == b.wait_ns)) {
		v.kind = STK_BOUND_UNKNOWN;
		snprintf(v.evidence, sizeof(v.evidence),
			 "%.3f s of window with no batch asked for or delivered", dt);
		snprintf(v.advice, sizeof(v.advice), "ask again after some batches");
	} else if (v.copy_wait_ratio >= 0.3 && stall < 0.3) {
		v.kind = STK_BOUND_GPU_COPY;
		snprintf(v.evidence, sizeof(v.evidence),
			 "the consumer waited on host-to-device copies %.0f %% of the time and on "
			 "the loader %.0f %%",
			 v.copy_wait_ratio * 100, stall * 100);
		snprintf(v.advice, sizeof(v.advice),
			 "pinned slots (pin=True, RLIMIT_MEMLOCK: `stoker doctor`), fewer bytes per "
			 "sample (uint8 images, normalize on the GPU), the GPU's PCIe link");
	} else if (stall < 0.05) {
		v.kind = STK_BOUND_CONSUMER;
		snprintf(v.evidence, sizeof(v.evidence),
			 "the consumer waited %.1f %% of the time: batches were ready when asked for",
			 stall * 100);
		snprintf(v.advice, sizeof(v.advice),
			 "nothing in the input pipeline: the training step sets the pace");
	} else if (v.decode_busy >= 0.8) {
		v.kind = STK_BOUND_DECODE;
		snprintf(v.evidence, sizeof(v.evidence),
			 "%u decode thread%s busy %.0f %% of the time; %s reads in flight",
			 dthreads, dthreads == 1 ? "" : "s", v.decode_busy * 100, fl);
		snprintf(v.advice, sizeof(v.advice), "%s", l->video
			 ? "more decode_threads (cores), fewer frames or a smaller size a clip, or "
			   "videos stored at a lower resolution or with keyframes closer together"
			 : "more decode_threads (cores), a smaller image size, or data stored smaller");
	} else if (disk_busy) {
		v.kind = STK_BOUND_STORAGE;
		char r[32];
		snprintf(v.evidence, sizeof(v.evidence),
			 "%s %%util %.0f, aqu-sz %.1f, r_await %.2f ms, %s; %s reads in flight",
			 v.device, v.dev_util, v.dev_aqu_sz, v.dev_r_await_ms,
			 stk_fmt_rate(r, sizeof(r), v.dev_read_mb_s * 1e6), fl);
		snprintf(v.advice, sizeof(v.advice),
			 "faster storage, samples packed into shards, or memory for the page cache; "
			 "`stoker disk PATH` measures the device");
	} else if (qd <= 4 || prefetch <= 1) {
		v.kind = STK_BOUND_CONFIG;
		snprintf(v.evidence, sizeof(v.evidence),
			 "queue depth %u and prefetch %u leave %.1f reads in flight while the "
			 "consumer waits %.0f %% of the time",
			 qd, prefetch, inflight, stall * 100);
		snprintf(v.advice, sizeof(v.advice), "raise queue_depth (64-256) and prefetch (4)");
	} else if (from_net && (inflight >= 0.8 * qd || (rm->window && net_bytes))) {
		/* (windows: the reads wait on them, whatever the queue's depth) */
		v.kind = STK_BOUND_NETWORK;
		/* an outage: the reads waiting to be tried again are counted */
		char waiting[64] = "", each[16], all[16];
		if (v.remote_retrying)
			snprintf(waiting, sizeof(waiting), " (%u waiting to be tried again)",
				 v.remote_retrying);
		stk_fmt_rate(each, sizeof(each), v.req_mb_per_s_each * 1e6);
		stk_fmt_rate(all, sizeof(all), v.mb_per_s * 1e6);
		uint64_t nreq = atomic_load(&rm->c.requests), nwin = atomic_load(&rm->c.windows);
		uint64_t miss = atomic_load(&rm->c.misses);
		if (rm->window && nwin) /* the reads wait on windows: what those cost */
			snprintf(v.evidence, sizeof(v.evidence),
				 "%llu requests, %.1f MB each (%llu windows, %u of %u at once at most), "
				 "%.1f ms p50, %.1f ms p99 (the fastest %.1f ms); %s in all; %.1f "
				 "retries/s%s; %.0f %% of the misses filled from the stream, %.0f %% "
				 "from the local cache: the reads wait on %s",
				 (unsigned long long)nreq, (double)atomic_load(&rm->c.bytes) / 1e6 /
				 (double)(nreq ? nreq : 1), (unsigned long long)nwin,
				 atomic_load(&rm->c.win_inflight_max), STK__WIN_INFLIGHT, v.req_p50_ms,
				 v.req_p99_ms, v.req_min_ms, all, v.retries_per_s, waiting,
				 miss ? 100.0 * (double)atomic_load(&rm->c.streamed) / (double)miss : 0,
				 v.cache_hit_ratio * 100, rm->s3 ? "the object store" : "the HTTP server");
		else
			snprintf(v.evidence, sizeof(v.evidence),
				 "%s requests in flight (the cap: queue_depth), each %.1f ms p50, %.1f "
				 "ms p99 (the fastest %.1f ms); %s per request in flight, %s in all; "
				 "%.1f retries/s%s; %.0f %% from the local cache: every read waits on %s",
				 fl, v.req_p50_ms, v.req_p99_ms, v.req_min_ms, each, all,
				 v.retries_per_s, waiting, v.cache_hit_ratio * 100,
				 rm->s3 ? "the object store" : "the HTTP server");
		/* a request taking twice the fastest's time: the server queues them
		 * (its throughput fixed, a deeper queue waits longer: Little's law) */
		bool saturated = v.req_min_ms > 0 && v.req_p50_ms >= 2 * v.req_min_ms;
		const char *cache = rm->cache ? "" : ", the local cache (remote_cache) for later "
						     "epochs";
		if (rm->window && nwin)
			snprintf(v.advice, sizeof(v.advice),
				 "%s; the windows already ask for %.1f MiB a request (STOKER_REMOTE_WINDOW)%s",
				 saturated ? "not more requests: the server is saturated (a request "
					     "waits twice the fastest's time), a faster server or more "
					     "of them"
					   : "a server nearer or faster",
				 (double)rm->window / 1048576.0,
				 v.retries_per_s > 0 ? "; retries: the server throttles or fails" : "");
		else if (saturated)
			snprintf(v.advice, sizeof(v.advice),
				 "not more requests: the server is saturated (p50 %.1fx the fastest "
				 "request), a deeper queue only waits longer; larger ranged reads "
				 "(shuffle_mode shard streams whole shards)%s, a faster server or more "
				 "of them", v.req_p50_ms / v.req_min_ms, cache);
		else
			snprintf(v.advice, sizeof(v.advice),
				 "more requests in flight (queue_depth above %u), larger ranged reads "
				 "(shuffle_mode shard streams whole shards)%s; %s",
				 qd, cache, v.retries_per_s > 0
						    ? "retries: the server throttles or fails, ask less of it"
						    : "a server nearer, or more of them");
	} else if (inflight >= 0.8 * qd && (!sampled || from_disk)) {
		v.kind = STK_BOUND_STORAGE;
		snprintf(v.evidence, sizeof(v.evidence),
			 "%s reads in flight: every read waits on storage (%s)", fl,
			 null_engine ? "the null engine's simulated latency"
			 : !sampled  ? "no block device to sample: a network or virtual filesystem"
				     : "the device reports under 80 % busy: latency, not bandwidth");
		snprintf(v.advice, sizeof(v.advice),
			 "a deeper queue_depth while the device has headroom, else faster storage");
	} else if (sampled && !from_disk && rf.uring && rf.busy >= 0 && rf.busy < STK__COPY_BUSY) {
		/* the tuner's own measure says the threads were not busy: not their copies */
		v.kind = STK_BOUND_IO_THREAD;
		snprintf(v.evidence, sizeof(v.evidence),
			 "the consumer waited %.0f %% of the time while the reads came from the page "
			 "cache, %s in flight, the I/O threads busy %.0f %% (the tuner's last "
			 "window): the reads wait in the kernel, not on the threads' copies",
			 stall * 100, fl, rf.busy * 100);
		snprintf(v.advice, sizeof(v.advice),
			 "not more io_threads: they were idle; %s--engine pread to compare, fewer "
			 "other processes on these cores", l->ds->shards ? "" :
			 "tar shards (`stoker pack`: one open per shard, not per file), ");
	} else if (sampled && !from_disk) {
		v.kind = STK_BOUND_IO_THREAD;
		char busy[64] = "";
		if (rf.busy >= 0)
			snprintf(busy, sizeof(busy), ", busy %.0f %% (the tuner's last window)",
				 rf.busy * 100);
		snprintf(v.evidence, sizeof(v.evidence),
			 "the consumer waited %.0f %% of the time while the reads came from the page "
			 "cache, %s in flight: the I/O threads' copies are the limit%s",
			 stall * 100, fl, busy);
		stk__rings_advice(&rf, v.advice, sizeof(v.advice));
	} else {
		/* the reads reached the device (or no device could be sampled): never
		 * "page cache" for them, only that the queue was not kept full */
		v.kind = STK_BOUND_IO_THREAD;
		snprintf(v.evidence, sizeof(v.evidence),
			 "the consumer waited %.0f %% of the time with %s reads in flight, while %s: "
			 "the I/O threads did not keep the queue full",
			 stall * 100, fl,
			 from_disk ? "the reads came from the device, under 80 % busy"
				   : "no block device could be sampled");
		stk__rings_advice(&rf, v.advice, sizeof(v.advice));
	}
	v.name = stk_bound_name(v.kind);
	uint32_t keep = out->size;
	size_t n = keep && keep < sizeof(v) ? keep : sizeof(v);
	memcpy(out, &v, n);
	out->size = keep ? keep : (uint32_t)sizeof(v);
	return 0;
}
