/*
 * loader/create.c — a loader's birth and death: options checked, the index
 * opened, slots sized (the batch_size largest samples, or a bound from the
 * sizes' mean and spread), the read engine picked (io_uring, else the pread
 * pool, said once), I/O and decode threads started; stop and destroy join
 * them.  The pipeline those threads run is loader/loader.c's.
 */
#include "loader/loader.h"
#include "image/image.h"
#include "io/remote.h"
#include "stoker/sys.h"

#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Room sample i's read takes: a video's largest clip when its clips are
 * read as ranges (the video index), else its file's read. */
static uint64_t entry_room(const struct stk_loader *l, int64_t i)
{
	uint64_t clip = stk__vloader_room(l, i);
	return clip ? clip : stk__loader_read_len(l, l->ds->entries[i].size);
}

/* The most bytes any batch can need: the batch_size largest samples (of
 * those no larger than `limit`). */
static uint64_t worst_batch_bytes(const struct stk_loader *l, uint64_t limit)
{
	uint32_t k = l->o.batch_size;
	/* (video: a batch holds up to batch_size clips of fewer videos) */
	if ((uint64_t)k > (uint64_t)l->ds->n * l->per_file)
		k = (uint32_t)((uint64_t)l->ds->n * l->per_file);
	uint64_t *heap = calloc(k, sizeof(*heap)); /* min-heap of the k largest */
	if (!heap)
		return UINT64_MAX;
	uint32_t len = 0;
	/* video: a batch may hold several clips of one video, each its own read */
	uint32_t reps = l->per_file < k ? l->per_file : k;
	for (int64_t i = 0, rep = 0; i < l->ds->n; rep = rep + 1 < reps ? rep + 1 : 0, i += !rep) {
		uint64_t v = entry_room(l, i);
		if (v > limit)
			continue;
		if (len < k) {
			uint32_t j = len++;
			heap[j] = v;
			while (j && heap[(j - 1) / 2] > heap[j]) {
				uint64_t t = heap[j];
				heap[j] = heap[(j - 1) / 2];
				heap[(j - 1) / 2] = t;
				j = (j - 1) / 2;
			}
		} else if (v > heap[0]) {
			heap[0] = v;
			for (uint32_t j = 0;;) {
				uint32_t c = 2 * j + 1;
				if (c >= len)
					break;
				if (c + 1 < len && heap[c + 1] < heap[c])
					c++;
				if (heap[j] <= heap[c])
					break;
				uint64_t t = heap[j];
				heap[j] = heap[c];
				heap[c] = t;
				j = c;
			}
		}
	}
	uint64_t sum = 0;
	for (uint32_t i = 0; i < len; i++)
		sum += heap[i];
	free(heap);
	return sum;
}

/* The old rule over every sample (no limit). */
static uint64_t slot_bytes_for_all(const struct stk_loader *l)
{
	uint64_t worst = worst_batch_bytes(l, UINT64_MAX);
	double sum = 0, sq = 0, mx = 0;
	for (int64_t i = 0; i < l->ds->n; i++) {
		double v = (double)entry_room(l, i);
		sum += v;
		sq += v * v;
		if (v > mx)
			mx = v;
	}
	return stk__slot_bound(l->o.batch_size, (double)l->ds->n, sum, sq, mx, worst);
}

/* The most a slot's reads may take: the pool (prefetch slots, with their
 * images) within half of the memory (MemTotal, or the cgroup's limit when
 * lower).  A sample above it could only be read into a pool the machine
 * cannot map, or one that pushes the trainer out of memory. */
static uint64_t slot_limit(const struct stk_loader *l)
{
	struct stk_meminfo mi = {.size = sizeof(mi)};
	uint64_t mem = stk_sys_meminfo(NULL, &mi) == 0 && mi.total ? mi.total : UINT64_MAX;
	uint64_t cg = 0;
	if (stk_sys_cgroup_memory(NULL, &cg, NULL) == 1 && cg < mem)
		mem = cg;
	if (mem == UINT64_MAX)
		return UINT64_MAX;
	uint64_t per = mem / 2 / l->o.prefetch;
	uint64_t img = l->image ? (uint64_t)l->o.batch_size * stk__image_bytes(&l->img) + 4096
				: l->video ? stk__vloader_out_bytes(l) + 4096 : 0;
	return per > img ? per - img : 0;
}

/* The slot size: loader/memory.c's bound over the index's read lengths.  A
 * batch beyond it anyway loses the samples that do not fit (STK_ETOOBIG, by
 * the error policy); opts.slot_bytes overrides.  Samples above slot_limit
 * (a tar header declaring 9 GiB) are left out of the sizing and the slot
 * kept within the limit: each such sample is an error of its own when read
 * (counted, named), not a pool that cannot be mapped; l->oversize counts
 * them, l->oversize_idx is the largest. */
static uint64_t slot_bytes_for(struct stk_loader *l)
{
	if (l->o.slot_bytes)
		return l->o.slot_bytes;
	uint64_t limit = slot_limit(l), big = 0;
	double sum = 0, sq = 0, mx = 0, n = 0;
	for (int64_t i = 0; i < l->ds->n; i++) {
		uint64_t r = entry_room(l, i);
		if (r > limit) {
			if (r > big) {
				big = r;
				l->oversize_idx = i;
			}
			l->oversize++;
			continue;
		}
		double v = (double)r;
		sum += v;
		sq += v * v;
		n++;
		if (v > mx)
			mx = v;
	}
	if (!n) { /* every sample is above it: sized for them, and the pool says why */
		l->oversize = 0;
		return slot_bytes_for_all(l);
	}
	uint64_t slot = stk__slot_bound(l->o.batch_size, n, sum, sq, mx,
					worst_batch_bytes(l, limit));
	return slot < limit ? slot : limit;
}

static char *dup_opt(const char *s, bool *oom)
{
	if (!s)
		return NULL;
	char *d = strdup(s);
	if (!d)
		*oom = true;
	return d;
}

static int pick_engine(struct stk_loader *l, char *err, size_t errlen)
{
	char note[320];
	if (l->ds->remote) { /* s3://, http(s)://: ranged GETs (io/http.c) */
		l->ops = &stk__engine_http;
		stk__remote_plan_window(l->ds->remote, l->o.shuffle_mode == STK_SHUFFLE_SHARD);
		return 0;
	}
	int rc = stk__engine_pick(l->o.engine, &l->ops, note, sizeof(note), err, errlen);
	if (!rc && note[0])
		stk__loader_notice(l, "%s", note);
	return rc;
}

/* Thread attributes: pinned to the rank's share, off the trainer's CPU. */
static pthread_attr_t *thread_attr(struct stk_loader *l, pthread_attr_t *a)
{
	if (!l->pin)
		return NULL;
	pthread_attr_init(a);
	if (pthread_attr_setaffinity_np(a, sizeof(l->cpuset), &l->cpuset)) {
		pthread_attr_destroy(a);
		return NULL;
	}
	return a;
}

static int start_rings(struct stk_loader *l)
{
	bool uring = l->ops == &stk__engine_uring;
	/* auto: the probe climbs up to what the slots can ever hold in flight */
	uint64_t slots = (uint64_t)l->o.batch_size * (l->split ? l->areas.nslots : l->o.prefetch);
	unsigned cap = l->o.queue_depth ? l->o.queue_depth
					: (unsigned)(slots < STK_AUTO_QD_MAX ? slots : STK_AUTO_QD_MAX);
	/* io_uring: a ring per thread; each copies page-cache hits on its own core.
	 * pread and null: one scheduling thread; pread's workers do the reads. */
	l->nrings = 1;
	if (uring)
		l->nrings = l->o.io_threads ? l->o.io_threads : l->share.io_threads;
	if (l->nrings > cap)
		l->nrings = cap;
	if (!uring && !l->o.io_threads)
		l->o.io_threads = cap < 64 ? cap : 64;
	if (!uring && !l->o.queue_depth && cap > l->o.io_threads && l->ops != &stk__engine_http)
		cap = l->o.io_threads; /* more than the workers would only queue (pread) */
	/* A ring takes only so many reads (its size, the file table under ulimit
	 * -n): the depth is spread over the rings, each up to that, and what
	 * they cannot carry together is cut and said. */
	unsigned ring_cap = cap;
	if (uring) {
		char why[200];
		unsigned m = stk__uring_max_depth(why, sizeof(why));
		if (m < cap) {
			ring_cap = m;
			uint64_t all = (uint64_t)m * l->nrings;
			if (all < cap) {
				if (l->o.queue_depth)
					stk__loader_notice(l, "queue_depth %u: %s; %u I/O thread%s %llu "
							   "reads in flight at most", cap, why, l->nrings,
							   l->nrings > 1 ? "s carry" : " carries",
							   (unsigned long long)all);
				cap = (unsigned)all;
			}
			snprintf(l->tune.cap_why, sizeof(l->tune.cap_why), "queue depth up to %u a ring, "
				 "%u in all (%s)", m, cap, why);
		}
	}
	l->tune.max_qd = cap;
	l->rings = calloc(l->nrings, sizeof(*l->rings));
	if (!l->rings)
		return -ENOMEM;
	uint32_t per_ring_ios = l->o.batch_size * l->pool.nslots * stk__vloader_reads_per_clip(l);
	for (uint32_t i = 0; i < l->nrings; i++) {
		struct io_thread *r = &l->rings[i];
		r->l = l;
		r->id = i;
		r->ops = l->ops;
		/* every ring can carry the whole depth, where a ring can hold it:
		 * the tuner may leave one alone */
		r->cap = ring_cap < cap ? ring_cap : cap;
		r->take = true;
		r->qd = cap / l->nrings + (i < cap % l->nrings);
		r->qcap = per_ring_ios + r->cap;
		r->queue = calloc(r->qcap, sizeof(*r->queue));
		r->done = calloc(r->cap, sizeof(*r->done));
		r->batch = calloc(r->cap, sizeof(*r->batch));
		if (!r->queue || !r->done || !r->batch)
			return -ENOMEM;
	}
	int rc = 0;
	pthread_attr_t attr, *pa = thread_attr(l, &attr);
	pthread_mutex_lock(&l->mu);
	for (uint32_t i = 0; i < l->nrings; i++) {
		if ((rc = -pthread_create(&l->rings[i].tid, pa, stk__loader_io_main, &l->rings[i]))) {
			l->nrings = i;
			break;
		}
		char name[16]; /* what top -H and /proc/PID/task/TID/comm show */
		snprintf(name, sizeof(name), "stk-io%u", i % 1000);
		pthread_setname_np(l->rings[i].tid, name);
	}
	for (uint32_t i = 0; i < l->nrings; i++) {
		while (!l->rings[i].init_done)
			pthread_cond_wait(&l->cv, &l->mu);
		if (l->rings[i].init_rc && !rc) {
			rc = l->rings[i].init_rc;
			stk__loader_detail(l, "%s engine: %s", l->ops->name, stk_strerror(rc));
		}
	}
	if (!rc)
		stk__tune_init(l);
	pthread_mutex_unlock(&l->mu);
	if (pa)
		pthread_attr_destroy(pa);
	return rc;
}

static int start_decoders(struct stk_loader *l)
{
	uint32_t n = l->img.decode_threads ? l->img.decode_threads : l->share.decode_threads;
	if (l->video)
		n = stk__vloader_decode_threads(l);
	l->dq_cap = l->pool.nslots * l->o.batch_size;
	l->dq = calloc(l->dq_cap, sizeof(*l->dq));
	l->dthreads = calloc(n, sizeof(*l->dthreads));
	if (!l->dq || !l->dthreads)
		return -ENOMEM;
	pthread_attr_t attr, *pa = thread_attr(l, &attr);
	int rc = 0;
	for (uint32_t i = 0; i < n && !rc; i++) {
		rc = -pthread_create(&l->dthreads[i], pa, stk__loader_decode_main, l);
		if (!rc) {
			char name[16];
			snprintf(name, sizeof(name), "stk-decode%u", i % 1000);
			pthread_setname_np(l->dthreads[i], name);
			l->ndthreads++;
		}
	}
	if (pa)
		pthread_attr_destroy(pa);
	return rc;
}

/* Shard shuffle: the groups are the shards, whose samples are contiguous in
 * the index. */
static int shard_mode(struct stk_loader *l, char *err, size_t errlen)
{
	if (!l->ds->shards || (l->o.flags & STK_F_NO_SHUFFLE)) {
		snprintf(err, errlen, "%s: shuffle_mode shard needs a tar shard set and shuffling",
			 l->path);
		return -EINVAL;
	}
	int64_t n = l->ds->n;
	uint32_t g = 0;
	l->group_end = malloc((size_t)n * sizeof(*l->group_end));
	if (!l->group_end)
		return -ENOMEM;
	for (int64_t i = 1; i <= n; i++)
		if (i == n || l->ds->entries[i].name != l->ds->entries[i - 1].name)
			l->group_end[g++] = (uint32_t)(i * l->per_file); /* in samples */
	if (g < l->o.world_size) {
		snprintf(err, errlen, "%s: %u shard%s for %u ranks: shuffle_mode shard gives every "
			 "rank whole shards; pack into at least %u shards, or use shuffle_mode global",
			 l->path, g, g == 1 ? "" : "s", l->o.world_size, l->o.world_size);
		return -EINVAL;
	}
	return stk__sampler_shard_mode(&l->sampler, l->group_end, g,
				       l->o.shuffle_window);
}

/* What the option table cannot say: the caller's struct size and the ranks
 * below their world sizes.  Defaults and ranges are stk__opts_apply's. */
static int validate(const struct stk_loader_opts *o, uint32_t caller_size, char *err,
		    size_t errlen)
{
	if (caller_size && caller_size < offsetof(struct stk_loader_opts, null_latency_ns)) {
		snprintf(err, errlen, "options struct too small (%u bytes)", caller_size);
		return -EINVAL;
	}
	if (o->rank >= o->world_size) {
		snprintf(err, errlen, "rank: %u must be below world_size %u", o->rank, o->world_size);
		return -EINVAL;
	}
	if (o->local_world_size && o->local_rank >= o->local_world_size) {
		snprintf(err, errlen, "local_rank: %u must be below local_world_size %u", o->local_rank,
			 o->local_world_size);
		return -EINVAL;
	}
	bool has_video = !caller_size || caller_size >= offsetof(struct stk_loader_opts, video) +
								sizeof(void *);
	if (has_video && o->video && o->image) {
		snprintf(err, errlen, "video: image and video options together: a loader is in one "
				      "mode (image=... for pictures, video=... for clips)");
		return -EINVAL;
	}
	if (has_video && o->video && o->read_bytes) {
		snprintf(err, errlen, "read_bytes: video mode reads whole files; read_bytes is for "
				      "raw mode");
		return -EINVAL;
	}
	if (o->read_bytes && o->image &&
	    (!caller_size || caller_size >= offsetof(struct stk_loader_opts, image) + sizeof(void *))) {
		snprintf(err, errlen, "read_bytes: image mode decodes whole files; read_bytes is for "
				      "raw mode");
		return -EINVAL;
	}
	return 0;
}

/* The caller's options into ours (of any older, smaller size), defaults
 * applied and checked. */
static int take_opts(struct stk_loader_opts *dst, const struct stk_loader_opts *src, char *err,
		     size_t errlen)
{
	memset(dst, 0, sizeof(*dst));
	size_t osz = src->size && src->size < sizeof(*dst) ? src->size : sizeof(*dst);
	memcpy(dst, src, osz);
	dst->size = sizeof(*dst);
	if (!dst->world_size) { /* auto: the launcher's, as LOCAL_* for the CPU share */
		uint32_t rank = 0, world = 1;
		char source[40];
		int rc = stk__rank_env(&rank, &world, source, sizeof(source), err, errlen);
		if (rc < 0)
			return rc;
		dst->world_size = world;
		if (!dst->rank)
			dst->rank = rank;
	}
	int rc = stk__opts_apply(STK_OPT_LOADER, dst, err, errlen);
	return rc < 0 ? rc : validate(dst, src->size, err, errlen);
}

int stk_loader_opts_check(const struct stk_loader_opts *opts, char *errbuf, size_t errlen)
{
	char scratch[8];
	if (!errbuf || !errlen) {
		errbuf = scratch;
		errlen = sizeof(scratch);
	}
	errbuf[0] = 0;
	struct stk_loader_opts zero = {0}, o;
	if (!opts)
		opts = &zero;
	int rc = take_opts(&o, opts, errbuf, errlen);
	if (rc < 0)
		return rc;
	struct stk_image_opts img;
	if ((!opts->size || opts->size >= offsetof(struct stk_loader_opts, image) + sizeof(void *)) &&
	    opts->image)
		return stk__image_opts(&img, opts->image, errbuf, errlen);
	if (o.video)
		return stk__vloader_check(o.video, errbuf, errlen);
	return 0;
}

/* Options the index shows cannot work are refused here rather than giving an
 * epoch of errors: a slot smaller than the largest sample could never hold
 * it.  0 or -ERANGE naming the sample. */
static int check_fits(struct stk_loader *l, char *err, size_t errlen)
{
	uint64_t need = stk__loader_read_len(l, l->ds->max_size);
	if (l->video) /* a clip's ranges, or its whole file */
		for (int64_t i = need = 0; i < l->ds->n; i++)
			need = entry_room(l, i) > need ? entry_room(l, i) : need;
	if (need <= l->raw_bytes)
		return 0;
	if (l->oversize) { /* auto: left out of the sizing, each an error when read */
		const struct stk_entry *e = &l->ds->entries[l->oversize_idx];
		const char *p = stk__entry_path(l->ds, l->oversize_idx);
		char member[300] = "", name[260];
		if (l->ds->shards) {
			stk__loader_member_name(l, p, e->offset, name, sizeof(name));
			snprintf(member, sizeof(member), ": member %s%sat offset %llu", name,
				 name[0] ? " " : "", (unsigned long long)e->offset);
		}
		stk__loader_notice(l, "%s: %llu sample%s larger than a batch slot can be here "
				   "(%llu bytes: the pool of %u slots may take half of the memory), "
				   "the largest %s%s%s%s (%llu bytes); each is an error of its sample "
				   "(on_error %s) when read; slot_bytes sets the slot", l->path,
				   (unsigned long long)l->oversize, l->oversize > 1 ? "s" : "",
				   (unsigned long long)l->raw_bytes, l->o.prefetch,
				   p[0] == '/' ? "" : l->ds->root, p[0] == '/' ? "" : "/", p, member,
				   (unsigned long long)e->size,
				   l->o.on_error == STK_ON_ERROR_SKIP ? "skip"
				   : l->o.on_error == STK_ON_ERROR_FAIL ? "fail" : "replace");
		return 0;
	}
	int64_t big = 0;
	for (int64_t i = 0; i < l->ds->n; i++)
		if (l->ds->entries[i].size == l->ds->max_size) {
			big = i;
			break;
		}
	const char *p = stk__entry_path(l->ds, big);
	snprintf(err, errlen, "slot_bytes %llu is smaller than the largest sample, %s%s%s (%llu bytes "
		 "to read): it could never be loaded; raise slot_bytes to at least %llu, or 0 to "
		 "size slots from the data", (unsigned long long)l->raw_bytes,
		 p[0] == '/' ? "" : l->ds->root, p[0] == '/' ? "" : "/", p,
		 (unsigned long long)need, (unsigned long long)need);
	return -ERANGE;
}

int stk_loader_create(struct stk_loader **out, const struct stk_loader_opts *opts, char *errbuf,
		      size_t errlen)
{
	char scratch[8];
	if (!errbuf || !errlen) {
		errbuf = scratch;
		errlen = sizeof(scratch);
	}
	errbuf[0] = 0;
	*out = NULL;
	struct stk_loader_opts zero = {0};
	if (!opts)
		opts = &zero;
	struct stk_loader *l = calloc(1, sizeof(*l));
	if (!l) {
		snprintf(errbuf, errlen, "out of memory");
		return -ENOMEM;
	}
	pthread_mutex_init(&l->mu, NULL);
	pthread_condattr_t ca; /* stk_loader_next_timeout's deadline is CLOCK_MONOTONIC */
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&l->cv, &ca);
	pthread_mutex_init(&l->wmu, NULL);
	pthread_cond_init(&l->wcv, &ca);
	pthread_condattr_destroy(&ca);
	pthread_cond_init(&l->dcv, NULL);
	int rc;
	if ((rc = take_opts(&l->o, opts, errbuf, errlen)) < 0) {
		pthread_mutex_destroy(&l->mu);
		pthread_cond_destroy(&l->cv);
		pthread_mutex_destroy(&l->wmu);
		pthread_cond_destroy(&l->wcv);
		pthread_cond_destroy(&l->dcv);
		free(l);
		return rc;
	}
	bool oom = false;
	l->path = dup_opt(opts->path, &oom);
	l->extensions = dup_opt(opts->extensions, &oom);
	l->cache_dir = dup_opt(opts->cache_dir, &oom);
	l->o.path = l->path;
	l->o.extensions = l->extensions;
	l->o.cache_dir = l->cache_dir;
	if ((!opts->size || opts->size >= offsetof(struct stk_loader_opts, image) + sizeof(void *)) &&
	    opts->image) {
		if ((rc = stk__image_opts(&l->img, opts->image, errbuf, errlen)))
			goto fail;
		l->image = true;
	}
	l->o.image = NULL;
	l->per_file = 1;
	if (l->o.video) { /* (take_opts read it only from a struct that has it) */
		if ((rc = stk__vloader_init(l, l->o.video, errbuf, errlen)))
			goto fail;
		if (!l->extensions) /* folders: the video files */
			l->o.extensions = l->extensions = dup_opt(STK__VIDEO_EXTS, &oom);
	}
	l->o.video = NULL;
	if (oom || stk_hist_create(&l->h_wait) || stk_hist_create(&l->h_read) ||
	    stk_hist_create(&l->h_decode)) {
		snprintf(errbuf, errlen, "out of memory");
		rc = -ENOMEM;
		goto fail;
	}
	char warning[PATH_MAX + 600] = "", notice[3 * PATH_MAX + 600] = "";
	struct stk__index_opts io = {.path = l->path, .extensions = l->extensions,
				     .cache_dir = l->cache_dir,
				     .no_cache = l->o.flags & STK_F_NO_CACHE,
				     .beside = l->o.flags & STK_F_INDEX_BESIDE,
				     .skip_bad = l->o.on_error != STK_ON_ERROR_FAIL,
				     .warning = warning, .warnlen = sizeof(warning),
				     .notice = notice, .noticelen = sizeof(notice),
				     .cache_limit = l->o.cache_limit,
				     .no_remote_cache = l->o.flags & STK_F_NO_REMOTE_CACHE,
				     .remote_timeout_ns = l->o.remote_timeout_ns,
				     .remote_connect_timeout_ns = l->o.remote_connect_timeout_ns,
				     .remote_tries = l->o.remote_tries,
				     .remote_retry_ns = l->o.remote_retry_time_ns,
				     .quiet = l->o.flags & STK_F_QUIET};
	rc = stk__dataset_open_any(&l->ds, &io, errbuf, errlen);
	if (notice[0])
		stk__loader_notice(l, "%s", notice);
	if (rc)
		goto fail;
	if (l->ds->nbad) { /* left out of the index: named once, counted in every stats */
		stk__loader_notice(l, "%s; left out of the index (on_error %s)", warning,
				   l->o.on_error == STK_ON_ERROR_SKIP ? "skip" : "replace");
		l->index_errors = l->ds->nbad;
		snprintf(l->detail, sizeof(l->detail), "%s", warning);
	}
	rc = stk__sampler_init(&l->sampler, l->ds->n * l->per_file, l->o.rank, l->o.world_size, l->o.batch_size,
			       !(l->o.flags & STK_F_NO_SHUFFLE), l->o.flags & STK_F_DROP_LAST,
			       l->o.seed);
	if (!rc && l->o.shuffle_mode == STK_SHUFFLE_SHARD)
		rc = shard_mode(l, errbuf, errlen);
	if (rc) {
		if (!errbuf[0])
			snprintf(errbuf, errlen, "%s: cannot set up the sampler: %s", l->path,
				 stk_strerror(rc));
		goto fail;
	}
	if ((rc = stk__cpu_share(l->o.local_rank, l->o.local_world_size, &l->share, &l->cpuset,
				 &l->pin, errbuf, errlen)))
		goto fail;
	l->pin &= !(l->o.flags & STK_F_NO_AFFINITY);
	if ((rc = pick_engine(l, errbuf, errlen)))
		goto fail;
	stk__tune_direct(l);
	if (l->ds->shards && (rc = stk__shards_open(l, errbuf, errlen)))
		goto fail;
	if (l->video && (rc = stk__vloader_index(l, errbuf, errlen)))
		goto fail;
	l->raw_bytes = slot_bytes_for(l);
	if ((rc = check_fits(l, errbuf, errlen)))
		goto fail;
	uint64_t slot_bytes = l->raw_bytes;
	/* split: a slot holds the images, the reads go to read areas (memory.c) */
	/* video: likewise, the clips in the slots, their ranges in read areas */
	l->split = (l->image && !(l->img.flags & STK_IMG_KEEP_RAW)) || l->video;
	l->img_off = l->split ? 0 : STK_ALIGN_UP(l->raw_bytes, 4096);
	if (l->image) /* the images, after the reads when they are kept, page-aligned */
		slot_bytes = l->img_off + (uint64_t)l->o.batch_size * stk__image_bytes(&l->img);
	else if (l->video) /* the clips likewise */
		slot_bytes = l->img_off + stk__vloader_out_bytes(l);
	uint32_t nslots = l->o.prefetch;
	uint32_t nareas = stk__read_areas(&l->o, l->video ? NULL : &l->img, l->ds->remote != NULL);
	if (l->split && (rc = stk__pool_init(&l->areas, nareas, l->raw_bytes, false))) {
		snprintf(errbuf, errlen, "cannot map the read areas (%llu bytes each): %s",
			 (unsigned long long)l->raw_bytes, stk_strerror(rc));
		goto fail;
	}
	uint64_t meta = (uint64_t)l->o.batch_size;
	l->slots = calloc(nslots, sizeof(*l->slots));
	l->scratch_idx = calloc(meta, sizeof(int64_t));
	l->sort_scratch = calloc(meta, sizeof(*l->sort_scratch));
	if (!l->slots || !l->scratch_idx || !l->sort_scratch || slot_bytes == UINT64_MAX) {
		snprintf(errbuf, errlen, "out of memory");
		rc = -ENOMEM;
		goto fail;
	}
	if ((rc = stk__pool_init(&l->pool, nslots, slot_bytes, !(l->o.flags & STK_F_NO_PIN)))) {
		snprintf(errbuf, errlen, "cannot map the batch pool (%u slots of %llu bytes): %s",
			 nslots, (unsigned long long)slot_bytes, stk_strerror(rc));
		goto fail;
	}
	for (uint32_t i = 0; i < nslots; i++) {
		struct slot *s = &l->slots[i];
		/* one block, offsets | sizes | labels | indices: a full batch's
		 * four arrays are copied in one go (the Python binding does) */
		s->offsets = calloc(4 * meta + 1, sizeof(uint64_t));
		s->ios = calloc(meta, sizeof(struct sio));
		s->ready_no = -1;
		s->area = NO_AREA;
		if (!s->offsets || !s->ios) {
			snprintf(errbuf, errlen, "out of memory");
			rc = -ENOMEM;
			goto fail;
		}
		s->sizes = s->offsets + meta + 1;
		s->labels = (int64_t *)(s->sizes + meta);
		s->indices = s->labels + meta;
	}
	if (l->video && stk__vloader_slots(l)) {
		snprintf(errbuf, errlen, "out of memory");
		rc = -ENOMEM;
		goto fail;
	}
	if ((rc = stk__loader_jcache_open(l))) {
		snprintf(errbuf, errlen, "out of memory");
		goto fail;
	}
	if ((l->image || l->video) && (rc = start_decoders(l))) {
		snprintf(errbuf, errlen, "cannot start the decode threads: %s", stk_strerror(rc));
		goto fail;
	}
	l->epoch = l->o.epoch;
	if ((rc = stk__sampler_start(&l->sampler, l->epoch, NULL, 0))) {
		snprintf(errbuf, errlen, "%s: cannot lay out epoch %llu: %s", l->path,
			 (unsigned long long)l->epoch, stk_strerror(rc));
		goto fail;
	}
	l->next_start = l->next_out = (int64_t)l->o.start_batch;
	l->t_create = stk__now_ns();
	stk__loader_find_disk(l);
	stk__loader_snap_disk(l, &l->mark);
	l->mark.t = l->t_create;
	l->snap_next = l->t_create + 1000000000ull;
	l->draining = true; /* rings wait until stk_loader_start below */
	if ((rc = start_rings(l))) {
		snprintf(errbuf, errlen, "%s", l->detail);
		goto fail;
	}
	if ((rc = stk_loader_start(l, l->o.epoch, l->o.start_batch))) {
		snprintf(errbuf, errlen, "%s", l->last_error);
		goto fail;
	}
	*out = l;
	return 0;
fail:
	stk_loader_destroy(l);
	return rc;
}

void stk_loader_stop(struct stk_loader *l)
{
	pthread_mutex_lock(&l->mu);
	bool joined = l->joined;
	l->stop = l->joined = true;
	pthread_cond_broadcast(&l->dcv);
	stk__loader_signal(l);
	pthread_mutex_unlock(&l->mu);
	if (joined)
		return;
	stk__loader_wake_rings(l);
	for (uint32_t i = 0; i < l->nrings; i++) {
		struct io_thread *r = &l->rings[i];
		pthread_join(r->tid, NULL);
		atomic_store(&r->want, false); /* a later release wakes nothing */
		if (r->eng)
			r->ops->exit(r->eng); /* waits for the reads still in flight */
		r->eng = NULL;
	}
	for (uint32_t i = 0; i < l->ndthreads; i++)
		pthread_join(l->dthreads[i], NULL);
}

void stk_loader_destroy(struct stk_loader *l)
{
	if (!l)
		return;
	stk_loader_stop(l);
	free(l->dthreads);
	free(l->dq);
	stk_hist_destroy(l->h_decode);
	for (uint32_t i = 0; l->rings && i < l->nrings; i++) {
		free(l->rings[i].queue);
		free(l->rings[i].done);
		free(l->rings[i].batch);
	}
	free(l->rings);
	for (uint32_t i = 0; l->slots && i < l->o.prefetch; i++) {
		free(l->slots[i].offsets); /* sizes, labels and indices are in its block */
		free(l->slots[i].ios);
		free(l->slots[i].bad);
	}
	free(l->slots);
	stk__pool_free(&l->pool);
	stk__pool_free(&l->areas);
	stk__sampler_free(&l->sampler);
	stk__dataset_close_any(l->ds);
	stk_hist_destroy(l->h_wait);
	stk_hist_destroy(l->h_read);
	free(l->scratch_idx);
	free(l->sort_scratch);
	free(l->group_end);
	stk__shards_close(l);
	free(l->path);
	free(l->extensions);
	free(l->cache_dir);
	stk__vloader_free(l);
	stk__loader_jcache_close(l);
	pthread_mutex_destroy(&l->mu);
	pthread_cond_destroy(&l->cv);
	pthread_mutex_destroy(&l->wmu);
	pthread_cond_destroy(&l->wcv);
	pthread_cond_destroy(&l->dcv);
	free(l);
}
