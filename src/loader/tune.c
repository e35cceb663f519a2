/*
 * loader/tune.c — the settings a user leaves to the loader, chosen from what
 * it sees: O_DIRECT or buffered reads, the queue depth, and for warm data
 * the number of I/O threads (rings) taking new batches.
 *
 * Reads: buffered when the dataset fits in the page cache the process can
 * count on (MemAvailable, capped by the cgroup's limit), so later epochs are
 * served from memory; O_DIRECT when it does not, since then the cache cannot
 * keep an epoch and buffered reads only add page-cache insertion and a copy
 * (2-3x the CPU per sample, measured) and evict the trainer's memory.
 *
 * Queue depth (auto): a probe at the start begins at a quarter of the depth
 * the storage's plan gives (stk_io_plan: 128 for a virtio or unknown disk,
 * 256 for NVMe, 16 for a hard disk; so 32, 64, 8; at least 8), and climbs by
 * doublings (up to what the engines and the batch slots can hold), one
 * window per level (after the level's first reads, 20 ms and 4 x qd reads
 * at least: about five read latencies a level, so a cold epoch is past the
 * probe after three or four levels, the plan's depth reached in two); it
 * stops at the first doubling that gained under 10 % and keeps the depth
 * below it: past the knee latency only grows (Little's law).  It starts
 * below the plan because a level above the knee is the costly one: every
 * read waits behind the queue (a virtio disk whose knee was 32 gave 17-28
 * ms reads at 128 and 256, and a 10,000-file cold epoch spent a third of
 * itself there, at a third of fio's rate), while a level below it is short
 * (4 x qd reads at the lowest latency) and the climb passes it.  When
 * nothing above the starting depth gained, it steps down by halves (to 8
 * at least) while the rate holds within 5 % of the best: page-cache reads and fast devices reach their rate at a lower depth,
 * with less latency (O_DIRECT reads by one halving at most: they go to the
 * device, where too low a depth loses rate).  While loader/meta.c's lookups
 * are behind the reads (a cold epoch's first 50-100 ms: its opens wait on
 * folders' and inodes' blocks, flat whatever the depth) the probe's windows
 * are let pass, a second at most.  It keeps the lowest level within 5 % of the best rate:
 * too low a depth costs far more than one too high, and one window can be
 * off by that much on a shared machine (a step down that lost 5-20 % is
 * measured again over a window twice as long).  A level the loader could
 * not keep full (the consumer or the slots set the pace) is no measure:
 * retried, and after 4 such windows kept.  The loader's very first window
 * (one depth's worth of reads) runs at the plan's depth and is let pass: a
 * cold start waits on the directories' and inodes' first reads, which the
 * plan's depth fetches more of at once.  Then, when the I/O threads were busy over 60 % of the
 * time (reads from the page cache: their copies are the limit) and their
 * number is auto, rings are added one at a time the same way.  Afterwards
 * one-second windows watch the rate; two in a row 30 % away from the settled
 * rate (or a full queue after an inconclusive probe) start a new probe, at
 * most every 10 s.  Everything runs in the I/O threads on completions, under
 * the loader's mutex: nothing blocks, so a stop is never delayed by it.
 */
#include "loader/loader.h"
#include "io/remote.h"

#include "stoker/sys.h"

#include <fcntl.h>
#include <pthread.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { TUNE_OFF, TUNE_QD, TUNE_RINGS, TUNE_WATCH };

#define PROBE_MIN_NS 20000000ull
#define WATCH_NS 1000000000ull
#define REPROBE_NS 10000000000ull
#define GAIN 1.10
#define MIN_QD 8u
#define MAX_AUTO_QD 512u

/* Bytes of page cache this process can count on. */
static uint64_t cache_room(void)
{
	const char *env = getenv("STOKER_PAGE_CACHE_BYTES"); /* where the limit is not visible */
	if (env && *env) {
		char *end;
		unsigned long long v = strtoull(env, &end, 10);
		if (end != env && !*end)
			return v;
	}
	struct stk_meminfo mi = {.size = sizeof(mi)};
	uint64_t room = stk_sys_meminfo(NULL, &mi) == 0 ? mi.available : UINT64_MAX;
	uint64_t limit = 0;
	if (stk_sys_cgroup_memory(NULL, &limit, NULL) == 1 && limit < room)
		room = limit;
	return room;
}

/* 0 if the filesystem takes O_DIRECT opens (tried on the first sample). */
static int direct_ok(struct stk_loader *l)
{
	int fd = openat(l->ds->root_fd, stk__entry_path(l->ds, 0), O_RDONLY | O_DIRECT | O_CLOEXEC);
	if (fd >= 0) {
		close(fd);
		return 0;
	}
	return errno == EINVAL ? -EINVAL : 0; /* other errors belong to the read */
}

void stk__tune_direct(struct stk_loader *l)
{
	struct tune *t = &l->tune;
	l->direct = false;
	if (l->ops == &stk__engine_null) {
		snprintf(t->direct_why, sizeof(t->direct_why), "reads: none (null engine)");
		return;
	}
	if (l->o.flags & STK_F_DIRECT) {
		if (direct_ok(l) == 0) {
			l->direct = true;
			snprintf(t->direct_why, sizeof(t->direct_why), "reads: O_DIRECT (asked)");
		} else {
			stk__loader_notice(l, "%s: the filesystem refuses O_DIRECT; using buffered reads",
					   l->ds->root);
			snprintf(t->direct_why, sizeof(t->direct_why),
				 "reads: buffered (O_DIRECT asked, the filesystem refuses it)");
		}
		return;
	}
	if (l->o.flags & STK_F_BUFFERED) {
		snprintf(t->direct_why, sizeof(t->direct_why), "reads: buffered (asked)");
		return;
	}
	uint64_t total = 0;
	for (int64_t i = 0; i < l->ds->n; i++)
		total += l->ds->entries[i].size;
	uint64_t room = cache_room();
	char a[32], b[32];
	stk_fmt_bytes(a, sizeof(a), (double)total);
	stk_fmt_bytes(b, sizeof(b), (double)room);
	if (total <= room) {
		snprintf(t->direct_why, sizeof(t->direct_why),
			 "reads: buffered (auto: the dataset, %s, fits in the page cache, %s: later "
			 "epochs read from memory)", a, b);
	} else if (direct_ok(l) < 0) {
		snprintf(t->direct_why, sizeof(t->direct_why),
			 "reads: buffered (auto: the dataset, %s, is larger than the page cache, %s, "
			 "but the filesystem refuses O_DIRECT)", a, b);
	} else {
		l->direct = true;
		snprintf(t->direct_why, sizeof(t->direct_why),
			 "reads: O_DIRECT (auto: the dataset, %s, is larger than the page cache, %s: "
			 "cached copies would be evicted before their next epoch)", a, b);
	}
}

static void clear_window(struct tune *t)
{
	t->w_ns = t->w_lat = t->w_area = t->w_cpu = 0;
	t->w_reads = t->w_bytes = 0;
}

/* Spreads the queue depth over the active rings.  Under mu. */
static void apply(struct stk_loader *l)
{
	struct tune *t = &l->tune;
	/* pread and null: one thread (active 1), capped like a ring */
	for (uint32_t i = 0; i < l->nrings; i++) {
		/* a ring left out takes no new batch but still sends what it
		 * claimed, at an active ring's pace */
		struct io_thread *r = &l->rings[i];
		unsigned q = t->qd / t->active + (i < t->active && i < t->qd % t->active);
		r->qd = q > r->cap ? r->cap : q ? q : 1;
		r->take = i < t->active;
	}
	t->t0 = 0;
	clear_window(t);
	t->skip = t->qd; /* let the old level's reads drain out of the window */
	stk__loader_wake_rings(l);
}

/* Where a probe starts: a quarter of the storage's planned depth (two
 * doublings below it), between MIN_QD and what the engines hold. */
static unsigned start_qd(const struct tune *t)
{
	unsigned q = t->plan_qd / 4 > MIN_QD ? t->plan_qd / 4 : MIN_QD;
	return q < t->max_qd ? q : t->max_qd;
}

void stk__tune_init(struct stk_loader *l)
{
	struct tune *t = &l->tune;
	bool uring = l->ops == &stk__engine_uring;
	/* remote data: no probe.  A request in flight costs the server nothing
	 * until it answers, and the rate of windows (io/http.c) comes in bursts
	 * a probe would misread: every read the slots hold is in flight */
	bool remote = l->ds->remote != NULL;
	t->auto_qd = l->o.queue_depth == 0 && !remote;
	t->auto_rings = uring && l->o.io_threads == 0 && l->nrings > 1;
	t->active = uring ? l->nrings : 1;
	t->busy = -1;
	t->rings_found = STK__RINGS_UNTRIED;
	t->floor_start = l->direct;
	/* start_rings set max_qd: all rings together, each up to its cap */
	struct stk_io_plan plan = {.size = sizeof(plan)};
	t->plan_qd = stk_io_plan(NULL, l->ds->root, &plan) == 0 && plan.queue_depth ? plan.queue_depth
										     : 128;
	if (t->plan_qd > t->max_qd)
		t->plan_qd = t->max_qd;
	/* auto: the loader's first window runs at the plan's depth (see tick;
	 * plan_qd is at most max_qd already) */
	t->qd = t->auto_qd ? t->plan_qd : remote && !l->o.queue_depth ? t->max_qd
			   : l->o.queue_depth < t->max_qd ? l->o.queue_depth : t->max_qd;
	t->phase = t->auto_qd || t->auto_rings ? TUNE_QD : TUNE_OFF;
	t->probes = t->auto_qd;
	t->probe_t = stk__now_ns();
	if (t->auto_qd)
		snprintf(t->why, sizeof(t->why), "queue depth %u (auto: probing)", t->qd);
	else if (remote && !l->o.queue_depth)
		snprintf(t->why, sizeof(t->why), "queue depth %u (auto: remote data, every read the "
			 "slots hold in flight%s)", t->qd, l->ds->remote->window ? "; a cache miss "
			 "fetches the window around it, 16 windows at most at once" : "");
	else if (t->qd < l->o.queue_depth)
		snprintf(t->why, sizeof(t->why), "queue depth %u (asked %u: the I/O threads carry "
			 "%u at most)", t->qd, l->o.queue_depth, t->max_qd);
	else
		snprintf(t->why, sizeof(t->why), "queue depth %u (asked)", t->qd);
	apply(l);
}

static double ring_area(const struct stk_loader *l, uint64_t now)
{
	double a = 0;
	for (uint32_t i = 0; i < l->nrings; i++) {
		/* a ring's last change may be later than `now` (its reap took the
		 * time before it handed its reads back): nothing to add then */
		const struct io_thread *r = &l->rings[i];
		a += r->tarea + (now > r->area_t ? (double)r->inflight * (double)(now - r->area_t) : 0);
	}
	return a;
}

/* Time the I/O threads ran or waited to run, ns: warm reads are copies on
 * them, and on a crowded machine the wait for a CPU is part of their cost
 * (schedstat: run time, then run-queue wait; the thread's CPU clock where
 * that file is missing). */
static double ring_cpu(const struct stk_loader *l)
{
	double ns = 0;
	for (uint32_t i = 0; i < l->nrings; i++) {
		char path[64], line[128];
		snprintf(path, sizeof(path), "/proc/self/task/%d/schedstat", (int)l->rings[i].os_tid);
		FILE *f = l->rings[i].os_tid ? fopen(path, "re") : NULL;
		unsigned long long run = 0, wait = 0;
		bool ok = f && fgets(line, sizeof(line), f) && sscanf(line, "%llu %llu", &run, &wait) == 2;
		if (f)
			fclose(f);
		if (ok) {
			ns += (double)run + (double)wait;
			continue;
		}
		clockid_t c;
		struct timespec ts;
		if (pthread_getcpuclockid(l->rings[i].tid, &c) == 0 && clock_gettime(c, &ts) == 0)
			ns += (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
	}
	return ns;
}

static void open_segment(struct stk_loader *l, uint64_t now)
{
	struct tune *t = &l->tune;
	t->t0 = now;
	t->cpu0 = ring_cpu(l);
	t->reads0 = l->rd_reads;
	t->bytes0 = l->rd_bytes;
	t->lat0 = l->rd_lat;
	t->area0 = ring_area(l, now);
}

static void close_segment(struct stk_loader *l, uint64_t now)
{
	struct tune *t = &l->tune;
	if (!t->t0)
		return;
	t->w_ns += (double)(now - t->t0);
	t->w_reads += l->rd_reads - t->reads0;
	t->w_bytes += l->rd_bytes - t->bytes0;
	t->w_lat += l->rd_lat - t->lat0;
	t->w_area += ring_area(l, now) - t->area0;
	t->w_cpu += ring_cpu(l) - t->cpu0;
	t->t0 = 0;
}

/* "8: 410 MB/s 2.0 ms, 16: ..." of the probe's points, into b. */
/* A (re)start: the window goes on in a new segment, the gap left out. */
void stk__tune_restart(struct stk_loader *l)
{
	uint64_t now = stk__now_ns();
	close_segment(l, now);
	l->tune.cold_ns = 0; /* the opens may be cold again (a drop before a cold epoch) */
	l->meta_warm = false; /* until loader/meta.c's lookups are ahead again */
	if (!l->tune.skip)
		open_segment(l, now);
}

static void points(const struct tune *t, bool rings, char *b, size_t n)
{
	size_t k = 0;
	b[0] = 0;
	for (unsigned i = 0; i < t->npts && k < n; i++) {
		const struct tune_point *p = &t->pts[i];
		char r[32], lat[32];
		stk_fmt_rate(r, sizeof(r), p->rate);
		int w = rings ? snprintf(b + k, n - k, "%s%u: %s, busy %.0f %%", i ? ", " : "",
					 p->rings, r, p->busy * 100)
			      : snprintf(b + k, n - k, "%s%u: %s %s", i ? ", " : "", p->qd, r,
					 stk_fmt_ns(lat, sizeof(lat), p->lat_ns));
		if (w < 0)
			break;
		k += (size_t)w;
	}
}

/* The end of the queue depth's line in why, a former I/O threads line cut
 * off (a re-probe of the user's depth leaves the line in place). */
static size_t why_rings_at(struct tune *t)
{
	char *old = strstr(t->why, "\nI/O threads");
	if (old)
		*old = 0;
	return strlen(t->why);
}

static void settle_qd(struct stk_loader *l, unsigned pick, const char *reason)
{
	struct tune *t = &l->tune;
	char pts[256];
	points(t, false, pts, sizeof(pts));
	t->qd = t->pts[pick].qd;
	t->settled_rate = t->pts[pick].rate;
	if (t->auto_qd)
		snprintf(t->why, sizeof(t->why), "queue depth %u (auto, probe %u: %s; %s)", t->qd,
			 t->probes, pts, reason);
	/* the I/O threads busy most of the time: page-cache copies are the limit */
	bool copies = t->pts[pick].busy > STK__COPY_BUSY;
	t->rings_found = t->auto_rings && !copies && !t->unsure ? STK__RINGS_NOT_BUSY
								: STK__RINGS_UNTRIED;
	size_t k = why_rings_at(t);
	if (t->rings_found == STK__RINGS_NOT_BUSY)
		snprintf(t->why + k, sizeof(t->why) - k, "\nI/O threads %u of %u (auto: busy %.0f %% "
			 "at this depth, under %.0f %%: their copies are not the limit; all take "
			 "batches)", t->active, l->nrings, t->pts[pick].busy * 100,
			 STK__COPY_BUSY * 100);
	if (t->auto_rings && copies && !t->unsure) {
		t->phase = TUNE_RINGS;
		t->npts = 0;
		t->active = 1;
	} else {
		t->phase = TUNE_WATCH;
	}
	apply(l);
}

static void settle_rings(struct stk_loader *l, unsigned pick, const char *reason, int found)
{
	struct tune *t = &l->tune;
	t->rings_found = found;
	char pts[256];
	points(t, true, pts, sizeof(pts));
	t->active = t->pts[pick].rings;
	t->settled_rate = t->pts[pick].rate;
	size_t k = why_rings_at(t);
	snprintf(t->why + k, sizeof(t->why) - k, "\nI/O threads %u (auto, they were busy: %s; %s)",
		 t->active, pts, reason);
	t->phase = TUNE_WATCH;
	apply(l);
}

static double best_rate(const struct tune *t)
{
	double best = 0;
	for (unsigned i = 0; i < t->npts; i++)
		best = t->pts[i].rate > best ? t->pts[i].rate : best;
	return best;
}

/* The probe's pick: the lowest level (depth, or ring count) within 5 % of
 * the best rate seen (a lower depth that moves as much has the lower
 * latency).  The points are in the order probed: up, then maybe down. */
static unsigned pick(const struct tune *t, bool rings)
{
	double best = best_rate(t);
	unsigned k = t->npts - 1;
	for (unsigned i = 0; i < t->npts; i++) {
		unsigned a = rings ? t->pts[i].rings : t->pts[i].qd;
		unsigned b = rings ? t->pts[k].rings : t->pts[k].qd;
		if (t->pts[i].rate >= 0.95 * best && (t->pts[k].rate < 0.95 * best || a < b))
			k = i;
	}
	return k;
}

/* Levels since the best rate last rose by GAIN: the climb stops after two,
 * so one noisy window (other work on the machine) cannot end it early. */
static unsigned flat(const struct tune *t)
{
	double best = t->pts[0].rate;
	unsigned since = 0;
	for (unsigned i = 1; i < t->npts; i++) {
		if (t->pts[i].rate >= GAIN * best) {
			best = t->pts[i].rate;
			since = 0;
		} else {
			since++;
			best = t->pts[i].rate > best ? t->pts[i].rate : best;
		}
	}
	return since;
}

static void why_flat(const struct tune *t, bool rings, char *b, size_t n)
{
	char r[32];
	snprintf(b, n, "%s: the lowest %s within 5 %% of the best rate (%s)",
		 rings ? "no gain from more" : "throughput stopped rising", rings ? "count" : "depth",
		 stk_fmt_rate(r, sizeof(r), best_rate(t)));
}

/* The probe's next level, its "so far" said in the reasons. */
static void next_qd(struct stk_loader *l, unsigned qd)
{
	struct tune *t = &l->tune;
	char pts[256];
	t->qd = qd;
	points(t, false, pts, sizeof(pts));
	snprintf(t->why, sizeof(t->why), "queue depth %u (auto: probing, so far %s)", t->qd, pts);
	apply(l);
}

/* The lowest depth a step down may reach.  Buffered reads: MIN_QD.  O_DIRECT
 * ones go to the device, where a depth under its knee loses rate that a
 * deeper queue only pays for in latency (a virtio disk: the climb stepped
 * down to 8 and read the rest of the epoch at 1.1 GB/s, against 1.5-1.7 at
 * 16-128 in the same rounds): one halving below the start at most (that
 * disk read best at 16 with fio, the start being 32), and none while the
 * opens are cold (their folders' and inodes' reads make every level read
 * flat: loader/meta.c says when its lookups are ahead of the reads). */
static unsigned lowest_qd(const struct stk_loader *l)
{
	const struct tune *t = &l->tune;
	unsigned start = t->pts[0].qd;
	if (!t->floor_start)
		return MIN_QD;
	if (!l->meta_warm)
		return start;
	return start / 2 > MIN_QD ? start / 2 : MIN_QD;
}

/* The climb is over: below the start if nothing above it gained, else the pick. */
static void climbed(struct stk_loader *l, const char *why)
{
	struct tune *t = &l->tune;
	unsigned k = pick(t, false);
	if (t->pts[k].qd == t->pts[0].qd && t->pts[0].qd / 2 >= lowest_qd(l) &&
	    t->npts < STK_ARRAY_SIZE(t->pts)) {
		t->down = true;
		next_qd(l, t->pts[0].qd / 2);
		return;
	}
	settle_qd(l, k, why);
}

/* One probe window closed with point p. */
static void step_qd(struct stk_loader *l, const struct tune_point *p)
{
	struct tune *t = &l->tune;
	char why[96];
	t->pts[t->npts++] = *p;
	if (!t->auto_qd) { /* the user's depth: one look, to see whether reads are copies */
		settle_qd(l, 0, "");
		return;
	}
	if (t->down) { /* below the start: on while the rate holds */
		if (p->rate >= 0.95 * best_rate(t) && p->qd / 2 >= lowest_qd(l) &&
		    t->npts < STK_ARRAY_SIZE(t->pts)) {
			next_qd(l, p->qd / 2);
			return;
		}
		why_flat(t, false, why, sizeof(why));
		settle_qd(l, pick(t, false), why);
		return;
	}
	if (t->npts >= 2 && flat(t) >= 1) {
		why_flat(t, false, why, sizeof(why));
		climbed(l, why);
		return;
	}
	if (p->qd * 2 > t->max_qd || t->npts == STK_ARRAY_SIZE(t->pts)) {
		snprintf(why, sizeof(why), "%s at the most the slots and engines hold (%u)",
			 flat(t) ? "flat" : "still rising", t->max_qd);
		climbed(l, why);
		return;
	}
	next_qd(l, p->qd * 2);
}

static void step_rings(struct stk_loader *l, const struct tune_point *p)
{
	struct tune *t = &l->tune;
	char why[96];
	t->pts[t->npts++] = *p;
	if (t->npts >= 2 && (flat(t) >= 1 || t->active >= l->nrings)) {
		unsigned k = pick(t, true);
		if (flat(t))
			why_flat(t, true, why, sizeof(why));
		else
			snprintf(why, sizeof(why), "still rising with every ring");
		settle_rings(l, k, why, flat(t) ? STK__RINGS_NO_GAIN : STK__RINGS_RISING);
		return;
	}
	if (t->active >= l->nrings) {
		settle_rings(l, t->npts - 1, "one ring", STK__RINGS_UNTRIED);
		return;
	}
	t->active++;
	apply(l);
}

static void start_probe(struct stk_loader *l, uint64_t now)
{
	struct tune *t = &l->tune;
	t->npts = 0;
	t->off = 0;
	t->unsure = false;
	t->probe_t = now;
	t->phase = TUNE_QD;
	t->down = false;
	t->rings_found = STK__RINGS_UNTRIED;
	if (t->auto_rings)
		t->active = l->nrings;
	if (t->auto_qd) {
		t->probes++;
		t->qd = start_qd(t);
		size_t k = strlen(t->why);
		snprintf(t->why + k, sizeof(t->why) - k, " (re-probing: the rate changed)");
	}
	apply(l);
}

void stk__tune_tick(struct stk_loader *l, uint64_t now)
{
	struct tune *t = &l->tune;
	if (t->phase == TUNE_OFF)
		return;
	if (!t->t0) {
		if (!t->skip) /* complete() counts these down */
			open_segment(l, now);
		return;
	}
	uint64_t span = t->phase == TUNE_WATCH ? WATCH_NS : PROBE_MIN_NS;
	uint64_t reads = t->w_reads + (l->rd_reads - t->reads0);
	double dt = t->w_ns + (double)(now - t->t0);
	/* a probe's level: four depths' worth of reads (four read latencies:
	 * a window's ends fall between completions, so fewer is noise) and 20 ms,
	 * so it settles early in a cold epoch */
	bool warmup = t->phase == TUNE_QD && t->auto_qd && !t->warmed;
	if (dt < (double)span || reads < (warmup ? 1ull : t->extend ? 8ull : 4ull) * t->qd ||
	    reads < 64)
		return;
	if (t->phase == TUNE_QD && l->meta_on && !l->meta_warm && t->cold_ns < WATCH_NS) {
		/* O_DIRECT opens still cold (loader/meta.c's lookups not ahead of
		 * the reads yet): their folders' and inodes' reads set the rate,
		 * not the depth; the window starts again, for a second at most */
		t->cold_ns += (uint64_t)dt;
		clear_window(t);
		open_segment(l, now);
		return;
	}
	close_segment(l, now);
	struct tune_point p = {.qd = t->qd, .rings = t->active,
			       .rate = (double)t->w_bytes / (dt / 1e9),
			       .lat_ns = t->w_lat / (double)reads,
			       .fill = t->w_area / dt / t->qd,
			       .busy = t->w_cpu / dt / t->active};
	if (t->phase == TUNE_QD && t->down && !t->extend && p.fill >= 0.7 &&
	    p.rate >= 0.8 * best_rate(t) && p.rate < 0.95 * best_rate(t)) {
		/* a step down that lost a little: a short window on a busy machine
		 * can be off by that much, so this one goes on twice as long */
		t->extend = true;
		open_segment(l, now);
		return;
	}
	t->extend = false;
	t->busy = p.busy;
	clear_window(t);
	open_segment(l, now);
	if (warmup) {
		/* the loader's first window: on cold data it waits on the
		 * directories' and inodes' first reads (a 32-deep start read at
		 * 18 ms a read, a sixth of its rate a window later), so it is no
		 * measure of the depth; it runs at the plan's depth, whose opens
		 * fetch that metadata four times as many at once, for one depth's
		 * worth of reads, and the climb starts below it once its reads
		 * have drained */
		unsigned was = t->qd;
		t->warmed = true;
		t->qd = start_qd(t);
		snprintf(t->why, sizeof(t->why), "queue depth %u (auto: probing)", t->qd);
		apply(l);
		t->skip = was > t->qd ? was : t->qd;
		return;
	}
	if (t->phase != TUNE_WATCH && p.fill < 0.7) {
		/* The level was not kept in flight (the consumer or the slots set the
		 * pace, or an epoch's tail): not a measure of the storage.  Retry;
		 * after 4 such windows the consumer is the limit: keep this level. */
		if (++t->lowfill < 4)
			return;
		t->lowfill = 0;
		t->unsure = true;
		t->pts[t->npts++] = p;
		if (t->phase == TUNE_QD && t->auto_qd) {
			/* the storage's plan (sys/plan.c), ready for when the consumer speeds up */
			t->pts[t->npts - 1].qd = t->plan_qd > p.qd ? t->plan_qd : p.qd;
			settle_qd(l, t->npts - 1, "the loader could not keep the probe's levels in "
				  "flight (the consumer sets the pace): the storage's planned depth");
		} else if (t->phase == TUNE_QD)
			settle_qd(l, t->npts - 1, "");
		else
			settle_rings(l, t->npts - 1, "the consumer sets the pace",
				     STK__RINGS_CONSUMER);
		return;
	}
	t->lowfill = 0;
	switch (t->phase) {
	case TUNE_QD:
		step_qd(l, &p);
		break;
	case TUNE_RINGS:
		step_rings(l, &p);
		break;
	case TUNE_WATCH: {
		double r = t->settled_rate > 0 ? p.rate / t->settled_rate : 1;
		bool moved = (r > 1.3 || r < 0.77) && p.fill > 0.7;
		bool full_now = t->unsure && p.fill > 0.9;
		t->off = moved || full_now ? t->off + 1 : 0;
		if (t->off >= 2 && now - t->probe_t >= REPROBE_NS && (t->auto_qd || t->auto_rings))
			start_probe(l, now);
		break;
	}
	}
}

int stk_loader_tuning(const struct stk_loader *cl, char *buf, size_t len)
{
	struct stk_loader *l = (struct stk_loader *)cl;
	char threads[200] = "", shards[320] = "";
	pthread_mutex_lock(&l->mu);
	const struct tune *t = &l->tune;
	if (l->ops == &stk__engine_uring && !t->auto_rings) {
		char why[64] = "asked";
		if (!l->o.io_threads) /* sys/cpushare.c's rule */
			snprintf(why, sizeof(why), "auto: %s, the share here %u CPU%s",
				 l->nrings > 1 ? "2 from 4 CPUs up" : "1 below 4 CPUs", l->share.cpus,
				 l->share.cpus == 1 ? "" : "s");
		snprintf(threads, sizeof(threads), "\nI/O threads %u (%s)", l->nrings, why);
	} else if (l->ops == &stk__engine_uring && !strstr(t->why, "I/O threads"))
		snprintf(threads, sizeof(threads), "\nI/O threads %u of %u (auto: %s)", t->active,
			 l->nrings, t->phase == TUNE_RINGS ? "probing"
				    : t->phase == TUNE_QD ? "all take batches while the depth is probed"
				    : "all take batches: the consumer set the pace while the "
				      "depth was probed, so their copies were not measured");
	char meta[160] = "", lat[32];
	if (l->meta_files) /* loader/meta.c */
		snprintf(meta, sizeof(meta), "\nfile metadata: %llu files looked up ahead of the "
			 "reads' opens (%s a file; the probe let %.0f ms of cold opens pass)",
			 (unsigned long long)l->meta_files,
			 stk_fmt_ns(lat, sizeof(lat), (double)l->meta_ns / (double)l->meta_files),
			 (double)t->cold_ns / 1e6);
	char ra[48] = "", rab[24];
	if (l->stream_ra)
		snprintf(ra, sizeof(ra), "; %s read ahead",
			 stk_fmt_bytes(rab, sizeof(rab), (double)l->ra_bytes));
	if (l->ds->shards)
		snprintf(shards, sizeof(shards), "\n%s (%.2f members a read so far%s)", l->shard_why,
			 l->rd_reads ? (double)l->rd_members / (double)l->rd_reads : 0.0, ra);
	int n = snprintf(buf, len, "%s\n%s%s%s%s%s%s", t->direct_why, t->why, threads, shards, meta,
			 t->cap_why[0] ? "\n" : "", t->cap_why);
	pthread_mutex_unlock(&l->mu);
	return n;
}
