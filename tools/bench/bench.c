/*
 * bench/bench.c — `stoker bench [PATH]`: the main job.  Runs the loader over PATH the
 * way a training loop would (optionally holding each batch --compute-ms, an
 * emulated accelerator as in MLPerf Storage and DLIO), and a naive baseline:
 * one thread, open/read/close per file in the same order, which is what
 * DataLoader with num_workers=0 does.  Every figure comes from runs long
 * enough to mean something (--runtime measured after a --ramp, as fio's
 * runtime and ramp_time), repeated (--repeat) with the two sides alternating;
 * the report gives medians and spreads, and the ratio as the median of the
 * runs' paired ratios.  With no PATH it generates a default dataset once in
 * the cache folder.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "stoker/metrics.h"

#include "bench/bench.h"
#include "common/cli.h"
#include "common/mpi.h"
#include "common/plot.h"

static void on_sigint(int sig)
{
	(void)sig;
	bench_interrupted = 1;
}

static void print_human(struct stk_loader *l, const struct bench_opts *o, const struct run *S,
			const struct run *B, int n, const char *cache, double cached, double create_s)
{
	char t1[64], t2[64], t3[64], t4[64];
	struct stk_loader_opts eff = {.size = sizeof(eff)};
	stk_loader_options(l, &eff, NULL);
	const struct run *s = &S[median_run(S, n)];
	/* the depth now, as the chosen: line below says it (the median run's
	 * could be an earlier probe's) */
	struct stk_stats now = {.size = sizeof(now)};
	unsigned qd = stk_loader_stats(l, &now) == 0 ? now.queue_depth : s->st.queue_depth;
	printf("stoker bench: %s\n", o->path);
	char what[96];
	if (o->video) /* the dataset's entries are videos; an epoch's samples, clips */
		snprintf(what, sizeof(what), "%lld videos (%lld clips an epoch)",
			 (long long)stk_loader_num_samples(l), (long long)stk_loader_rank_samples(l));
	else
		snprintf(what, sizeof(what), "%lld samples", (long long)stk_loader_num_samples(l));
	printf("  %s, %lld classes; engine %s, queue depth %u%s, batch %u, prefetch %u%s\n",
	       what, (long long)count_classes(l),
	       stk_loader_engine(l), qd, eff.queue_depth ? "" : " (auto: chosen below)",
	       eff.batch_size, eff.prefetch, s->st.direct ? ", O_DIRECT" : "");
	char cw[160];
	printf("  loader ready in %.3f s (index, pool, threads)\n  page cache: %s;\n  %s\n",
	       create_s, cache, cached_words(cached, cw, sizeof(cw)));
	char tuning[2048];
	stk_loader_tuning(l, tuning, sizeof(tuning));
	for (char *line = tuning, *nl; line; line = nl ? nl + 1 : NULL) {
		if ((nl = strchr(line, '\n')))
			*nl = 0;
		printf("  %s %s\n", line == tuning ? "chosen:" : "       ", line);
	}
	if (o->cache == CACHE_COLD)
		printf("          %s\n", s->st.direct
			 ? "cold: O_DIRECT reads (--cache cold): every epoch read from the device"
			 : "cold: buffered reads, the dataset's pages evicted before every epoch "
			   "(posix_fadvise; the clock stopped meanwhile)");
	double ep[BENCH_MAX_REPEAT], sec[BENCH_MAX_REPEAT];
	for (int i = 0; i < n; i++) {
		ep[i] = S[i].epochs_measured;
		sec[i] = S[i].wall;
	}
	struct spread eps, secs;
	spread_of(ep, n, &eps);
	spread_of(sec, n, &secs);
	char ramp[96] = "";
	if (s->ramp_s > 0)
		snprintf(ramp, sizeof(ramp), " after a %.2f s ramp", s->ramp_s);
	else if (s->rcache_reads)
		snprintf(ramp, sizeof(ramp), ", no ramp (it would fill the local cache the run reads)");
	printf("  %d run%s%s, each %.2f s measured%s (%.2f epochs from an epoch's start; ended "
	       "by %s)\n", n, n == 1 ? "" : "s",
	       B ? (n == 1 ? " of each side" : " of each side, alternating") : "", secs.median, ramp,
	       eps.median, s->ended_by);
	const struct run *bad = NULL;
	for (int i = 0; i < n && !bad; i++)
		bad = S[i].invalid[0] ? &S[i] : NULL;
	if (s->dev.ok && s->wall > 0)
		printf("  device %s read %.1f MB/s while measured (the loader delivered %.0f %% of "
		       "its bytes; other processes' reads count there too)\n", s->dev.disk,
		       s->dev.bytes / s->wall / 1e6,
		       s->dev.bytes > 0 ? 100 * (double)s->bytes / s->dev.bytes : 0);
	if (bad) {
		/* no figure rather than a false one */
		printf("\n  no figures: %s.\n  read %llu samples, %.1f MB in %.3f s\n", bad->invalid,
		       (unsigned long long)s->samples, (double)s->bytes / 1e6, s->wall);
	}
	printf("\n");
	struct spread a, b, r;
	const char *hdr = n > 1 ? "median (min-max)" : "";
	if (bad)
		goto latencies;
	printf("  %-24s %-24s %-24s %s\n", hdr, "stoker", B ? "plain read loop" : "",
	       B ? "stoker / plain loop" : "");
	spread_runs(S, n, sps_of, &a);
	printf("  %-24s %-24s", "samples/s", fmt_spread(t1, sizeof(t1), &a, "%.0f"));
	if (B) {
		spread_runs(B, n, sps_of, &b);
		double ratios[BENCH_MAX_REPEAT];
		for (int i = 0; i < n; i++)
			ratios[i] = sps_of(&B[i]) > 0 ? sps_of(&S[i]) / sps_of(&B[i]) : 0;
		spread_of(ratios, n, &r);
		printf(" %-24s %s", fmt_spread(t2, sizeof(t2), &b, "%.0f"),
		       fmt_spread(t3, sizeof(t3), &r, "%.2fx"));
		if (s->st.decode_threads) /* like with like: the baseline decodes on one thread */
			printf(" (%u decode thread%s vs 1)", s->st.decode_threads,
			       s->st.decode_threads == 1 ? "" : "s");
	}
	spread_runs(S, n, mbps_of, &a);
	printf("\n  %-24s %-24s", "MB/s", fmt_spread(t1, sizeof(t1), &a, "%.1f"));
	if (B) {
		spread_runs(B, n, mbps_of, &b);
		printf(" %-24s", fmt_spread(t2, sizeof(t2), &b, "%.1f"));
	}
	spread_runs(S, n, cpu_of, &a);
	printf("\n  %-24s %-24.3f", "CPU s per 1000 samples", a.median);
	if (B) {
		spread_runs(B, n, cpu_of, &b);
		printf(" %-24.3f", b.median);
	}
	if (o->compute_ms > 0) {
		spread_runs(S, n, au_of, &a);
		printf("\n  %-24s %-24s", "accelerator utilization %",
		       fmt_spread(t1, sizeof(t1), &a, "%.1f"));
		if (B) {
			spread_runs(B, n, au_of, &b);
			printf(" %-24s", fmt_spread(t2, sizeof(t2), &b, "%.1f"));
		}
	}
	printf("\n");
	if (o->video) /* a sample is a clip */
		bench_video_print(l, S, n);
	if (B) /* the reference, named once: a user knows this loop */
		printf("\n  plain read loop: one thread reading each sample in stoker's order (%s)%s,\n"
		       "  what PyTorch's DataLoader with num_workers=0 does\n",
		       plain_loop_reads(l), o->image ? " and decoding it" : "");
	printf("\n");
latencies:
	printf("  batch wait p50/p99/max     %s / %s / %s   (stall %.1f %% of wall time)\n",
	       fmt_ns(t1, sizeof(t1), (double)s->st.wait_p50_ns),
	       fmt_ns(t2, sizeof(t2), (double)s->st.wait_p99_ns),
	       fmt_ns(t3, sizeof(t3), (double)s->st.wait_max_ns), s->st.stall_ratio * 100);
	if (o->compute_ms <= 0 && s->st.stall_ratio >= 0.9) /* said once, here */
		printf("  %-26s (a stall near 100 %% is what a loop without compute looks like: it\n"
		       "  %-26s asks for the next batch at once; --compute-ms N holds each batch\n"
		       "  %-26s N ms, as a training step would)\n", "", "", "");
	printf("  read latency p50/p99/max   %s / %s / %s\n",
	       fmt_ns(t1, sizeof(t1), (double)s->st.read_p50_ns),
	       fmt_ns(t2, sizeof(t2), (double)s->st.read_p99_ns),
	       fmt_ns(t3, sizeof(t3), (double)s->st.read_max_ns));
	printf("  reads in flight            mean %.1f, max %u%s\n", s->st.inflight_mean,
	       s->st.inflight_max, s->st.inflight_max > qd
		? " (above the depth chosen: while the tuner probed deeper)" : "");
	double walls = 0; /* the remote counters run from create: over every run */
	for (int i = 0; i < n; i++)
		walls += S[i].wall + (B ? B[i].wall : 0);
	bench_remote_print(l, walls);
	bench_remote_runs(S, n);
	if (s->st.decode_threads && o->video) {
		bench_video_decode_print(l, &s->st);
	} else if (s->st.decode_threads) {
		const struct run *bm = B ? &B[median_run(B, n)] : NULL;
		printf("  decode                     %u thread%s, %.0f images/s per core, p50/p99 %s / %s",
		       s->st.decode_threads, s->st.decode_threads == 1 ? "" : "s",
		       s->st.decode_images_per_s_per_core,
		       fmt_ns(t1, sizeof(t1), (double)s->st.decode_p50_ns),
		       fmt_ns(t2, sizeof(t2), (double)s->st.decode_p99_ns));
		if (bm && bm->decode_s > 0)
			printf(" (plain loop %.0f/s)", (double)bm->samples / bm->decode_s);
		printf("\n");
		if (!print_formats(&s->st)) /* JPEG only */
			printf("  restart intervals          %.1f %% of samples decoded from their crop's "
			       "intervals only;\n                             %.1f %% of the entropy-coded "
			       "data decoded per sample\n", 100 * s->st.decode_fast_share,
			       100 * s->st.decode_entropy_share);
	}
	struct stk_memory mem = {.size = sizeof(mem)};
	stk_loader_memory(l, &mem); /* the library's sizing: what doctor counts with */
	char t5[64]; /* every part of the total: the figures add up */
	char t6[64] = "", t7[64];
	if (mem.read_areas) /* image mode: the reads apart from the slots */
		snprintf(t6, sizeof(t6), ", %u read area%s %s", mem.read_areas,
			 mem.read_areas == 1 ? "" : "s",
			 fmt_bytes(t7, sizeof(t7), (double)mem.read_pool_bytes));
	printf("  memory                     %s: pool %s%s%s, slot records %s, index %s, decode %s; "
	       "RSS %.0f MB after epoch 1, %.0f MB at the end\n",
	       fmt_bytes(t3, sizeof(t3), (double)mem.total),
	       fmt_bytes(t1, sizeof(t1), (double)mem.pool_bytes), s->st.pinned ? " (pinned)" : "", t6,
	       fmt_bytes(t5, sizeof(t5), (double)mem.meta_bytes),
	       fmt_bytes(t2, sizeof(t2), (double)mem.index_bytes),
	       fmt_bytes(t4, sizeof(t4), (double)mem.decode_bytes), S[0].rss_first_mb,
	       S[n - 1].rss_last_mb);
	uint64_t errors = 0, ramp_errors = 0;
	for (int i = 0; i < n; i++) {
		errors += S[i].errors;
		ramp_errors += S[i].ramp_errors;
	}
	printf("  errors                     %llu", (unsigned long long)errors);
	if (ramp_errors)
		printf(" (%llu in the ramp%s)", (unsigned long long)ramp_errors, n > 1 ? "s" : "");
	if (errors)
		printf(" (last: %s)", stk_last_error(l));
	printf("\n");
}

/* --sweep's knob: a numeric row of the option table, by its name or an alias
 * of the table's (threads, qd, batch), and the struct it lives in. */
static const struct stk_option *sweep_knob(struct bench_opts *o, const char *name, void **base)
{
	const struct stk_option *r = stk_option_find(name);
	if (!r || (r->type != STK_OPT_U32 && r->type != STK_OPT_U64))
		return NULL;
	*base = r->group == STK_OPT_IMAGE ? (void *)&o->img : (void *)&o->lo;
	return r;
}

/* Caption for charts: the data and the run's shape. */
static void caption(const struct bench_opts *o, struct stk_loader *l, int runs, char *buf,
		    size_t len)
{
	struct stk_loader_opts eff = {.size = sizeof(eff)};
	stk_loader_options(l, &eff, NULL);
	snprintf(buf, len, "%s: %lld samples, batch %u; %d run%s a point of %.1f s, median and "
		 "min-max", o->path, (long long)stk_loader_num_samples(l), eff.batch_size, runs,
		 runs == 1 ? "" : "s", o->runtime);
}

/* --repeat runs of the loader (and the baseline, alternating) on one loader:
 * S[0..n), B[0..n) (B NULL: no baseline), the verdict of each loader run. */
static int run_repeats(struct stk_loader *l, struct bench_opts *o, struct run *S, struct run *B,
		       struct stk_verdict *V, const struct stk_image_opts *img, const char **cache,
		       double *cached, int64_t **last_order, uint64_t *last_n)
{
	int rc = 0;
	uint64_t epoch = 0;
	for (int i = 0; i < o->repeat && !rc && !bench_interrupted; i++) {
		o->run_index = i;
		if (o->cache == CACHE_COLD || (i == 0 && o->cache == CACHE_WARM))
			set_cache(l, o, NULL, 0, cache);
		if (i == 0 && cached)
			*cached = resident_at_start(l, o);
		if (bench_interrupted)
			break; /* a Ctrl-C in the warm-up: no restart to wait for */
		/* the first batches may already be in flight: start over, in a new stats
		 * window, once the cache is as asked */
		if ((rc = stk_loader_restart(l, epoch, 0, STK_START_RESET_STATS)) < 0)
			break;
		int64_t *order = NULL;
		uint64_t norder = 0;
		rc = run_loader(l, o, epoch, &S[i], &order, &norder);
		epoch = S[i].next_epoch;
		V[i].size = sizeof(V[i]);
		stk_loader_diagnose(l, 0, &V[i]);
		if (!rc && B && !bench_interrupted) {
			if (o->cache == CACHE_COLD)
				set_cache(l, o, order, norder, cache);
			rc = run_baseline(l, o, order, norder, &B[i], img);
		}
		free(*last_order);
		*last_order = order;
		*last_n = norder;
	}
	return rc;
}

/* --sweep knob=v1,v2,...: --repeat runs per value (no baseline), a table of
 * medians and spreads, and a chart of samples/s against the knob. */
static int run_sweep(struct bench_opts o)
{
	char knob[32] = "";
	const char *eq = strchr(o.sweep, '=');
	void *base = NULL;
	const struct stk_option *row = NULL;
	if (eq && (size_t)(eq - o.sweep) < sizeof(knob)) {
		memcpy(knob, o.sweep, (size_t)(eq - o.sweep));
		knob[eq - o.sweep] = 0;
		row = sweep_knob(&o, knob, &base);
	}
	char vals[64][24], why[512] = "";
	double xs[64], ys[64], ylo[64], yhi[64];
	const char *marks[64];
	int n = 0;
	for (const char *p = eq ? eq + 1 : ""; row && *p && n < 64;) {
		const char *c = strchr(p, ',');
		size_t l = c ? (size_t)(c - p) : strlen(p);
		if (l >= sizeof(vals[0]) || !l) {
			n = 0;
			break;
		}
		memcpy(vals[n], p, l);
		vals[n][l] = 0;
		/* the table's parser and range, checked before any run */
		struct bench_opts probe = o;
		void *pb = (char *)&probe + ((char *)base - (char *)&o);
		char *end;
		uint64_t bytes;
		xs[n] = strtod(vals[n], &end);
		if (row->type == STK_OPT_U64 && (row->bit & STK_OPT_BYTES) &&
		    !stk_parse_size(vals[n], &bytes)) {
			xs[n] = (double)bytes; /* slot_bytes=32MiB,64MiB */
			end = vals[n] + l;
		}
		if (stk_option_set(row, pb, vals[n], why, sizeof(why)) < 0 || *end) {
			if (!why[0])
				snprintf(why, sizeof(why), "'%.23s' is not a number", vals[n]);
			n = 0;
			break;
		}
		n++;
		p = c ? c + 1 : p + l;
	}
	if (!row || n == 0) {
		fprintf(stderr, "stoker bench: --sweep '%s': %s%swant KNOB=V1,V2,... with KNOB a "
				"numeric loader option (threads, qd, prefetch, batch, decode-threads, ...)\n",
			o.sweep, why, why[0] ? "; " : "");
		return EXIT_USAGE;
	}
	char plot[256];
	snprintf(plot, sizeof(plot), "%s", o.plot ? o.plot : "");
	if (!o.plot)
		snprintf(plot, sizeof(plot), "stoker-sweep-%s.svg", knob);
	json_t *rows = json_array();
	if (!o.json)
		printf("stoker bench --sweep %s: %s (%lld run%s a point, each %.1f s measured)\n\n"
		       "  %14s %24s %10s %8s %10s  %s\n",
		       knob, o.path, (long long)o.repeat, o.repeat == 1 ? "" : "s", o.runtime, knob,
		       o.repeat > 1 ? "samples/s median (min-max)" : "samples/s", "MB/s", "stall",
		       "in flight", "verdict");
	int rc = 0;
	struct stk_loader *last = NULL;
	char warn[512] = "", cap[1024] = "";
	static struct run S[BENCH_MAX_REPEAT];
	static struct stk_verdict V[BENCH_MAX_REPEAT];
	for (int i = 0; i < n && !bench_interrupted; i++) {
		stk_option_set(row, base, vals[i], NULL, 0);
		struct stk_loader_opts lo;
		struct stk_image_opts img;
		loader_opts(&o, &lo, &img);
		struct stk_loader *l;
		char err[PATH_MAX + 256];
		if ((rc = stk_loader_create(&l, &lo, err, sizeof(err))) < 0) {
			fprintf(stderr, "stoker bench: %s=%s: %s\n", knob, vals[i], err);
			break;
		}
		const char *cache = "as found";
		memset(S, 0, sizeof(S));
		memset(V, 0, sizeof(V));
		int64_t *order = NULL;
		uint64_t norder = 0;
		rc = run_repeats(l, &o, S, NULL, V, NULL, &cache, NULL, &order, &norder);
		free(order);
		if (rc < 0) {
			stk_loader_destroy(l);
			break;
		}
		int nr = o.repeat;
		struct spread sp, mb;
		spread_runs(S, nr, sps_of, &sp);
		spread_runs(S, nr, mbps_of, &mb);
		char note[256];
		int pick = pick_verdict(V, S, NULL, nr, true, note, sizeof(note));
		bool bad = false;
		for (int k = 0; k < nr && !bad; k++)
			if ((bad = S[k].invalid[0])) /* a cold figure that means nothing: said */
				snprintf(note, sizeof(note), "no figure: %.200s", S[k].invalid);
		ys[i] = sp.median;
		ylo[i] = sp.min;
		yhi[i] = sp.max;
		marks[i] = V[pick].name;
		char w1[400];
		short_warning(&o, S, NULL, nr, w1, sizeof(w1));
		if (w1[0] && !warn[0])
			snprintf(warn, sizeof(warn), "%s=%s: %s", knob, vals[i], w1);
		const struct run *m = &S[median_run(S, nr)];
		if (o.json) {
			json_t *runs = json_array();
			for (int k = 0; k < nr; k++)
				json_array_append_new(runs, json_pack("{s:o,s:o}", "run", stats_json(&S[k]),
								       "verdict", verdict_json(&V[k])));
			json_array_append_new(rows, json_pack("{s:f,s:o,s:o,s:o,s:o,s:s}", "value", xs[i],
							      "samples_per_s", spread_json(&sp),
							      "mb_per_s", spread_json(&mb), "runs", runs,
							      "verdict", verdict_json(&V[pick]),
							      "verdict_note", note));
		} else {
			char t[64];
			printf("  %14s %24s %10.1f %7.1f%% %10.1f  %s%s%s%s\n", vals[i],
			       bad ? "-" : fmt_spread(t, sizeof(t), &sp, "%.0f"), bad ? 0.0 : mb.median,
			       m->st.stall_ratio * 100, m->st.inflight_mean, V[pick].name,
			       note[0] ? " (" : "", note, note[0] ? ")" : "");
		}
		for (int k = 0; k < nr; k++)
			run_release(&S[k]);
		if (last)
			stk_loader_destroy(last);
		last = l;
	}
	if (rc == 0 && !bench_interrupted && last) {
		char title[128], png[4096];
		snprintf(title, sizeof(title), "stoker bench: samples/s against %s", knob);
		caption(&o, last, (int)o.repeat, cap, sizeof(cap));
		struct plot p = {.file = plot, .title = title, .xlabel = knob, .yunit = "samples/s",
				 .caption = cap, .xs = xs, .ys = ys, .ylo = ylo, .yhi = yhi,
				 .marks = marks, .n = n};
		int w = plot_line(&p, png, sizeof(png));
		if (w < 0)
			fprintf(stderr, "stoker bench: %s: %s\n", plot, strerror(-w));
		else if (!o.json)
			printf("\n  plot: %s%s%s\n", plot, png[0] ? ", " : "", png);
		if (!o.json && warn[0])
			printf("\n  warning: %s\n", warn);
		if (o.json) {
			json_t *j = json_pack("{s:s,s:s,s:I,s:f,s:o,s:s,s:s}", "path", o.path, "knob", knob,
					      "repeat", (json_int_t)o.repeat, "runtime_s", o.runtime,
					      "runs", rows, "plot", plot, "png", png);
			if (warn[0])
				json_object_set_new(j, "warnings", json_pack("[s]", warn));
			json_dumpf(j, stdout, JSON_INDENT(2));
			putchar('\n');
			json_decref(j);
			rows = NULL;
		}
	}
	if (last)
		stk_loader_destroy(last);
	json_decref(rows);
	return rc < 0 || bench_interrupted ? EXIT_FAIL : EXIT_OK;
}

int cmd_bench(int argc, char **argv)
{
	struct bench_opts o = {0};
	static const struct cmd_help help = {
		"bench", "[options] [PATH...]",
		"Runs the loader over PATH (a folder in ImageFolder layout, a flat folder, a file\n"
		"list or tar shards) and a naive synchronous baseline in the same run, and prints\n"
		"how fast this machine can feed a GPU and what holds it back.  Every figure comes\n"
		"from runs of at least --runtime seconds measured after a --ramp, repeated\n"
		"(--repeat, the two sides alternating): medians and spreads.  With several PATHs,\n"
		"the same options on each in turn, side by side (no baseline).  Without PATH, a\n"
		"default dataset is generated once in the cache folder (~/.cache/stoker).  The\n"
		"loader's options, their defaults and ranges are the library's (docs/options.md).",
		"stoker bench /data/imagenet/train          # the loader against the baseline\n"
		"stoker bench --image -b 128 /data/train    # decode and crop too, as training does\n"
		"stoker bench --video --frames 16 --stride 2 -b 8 /data/videos  # random clips"};
	struct opt opts[128] = {
		OPT_GROUP("run"),
		{"runtime", 0, OPT_SECONDS, &o.runtime, MIN_RUNTIME, 0, 1e6, NULL, "S",
		 "measure each run at least S seconds: epochs repeat (or the run stops at the time "
		 "mid-epoch, without --epochs) until then; 0: exactly --epochs (1 by default)"},
		{"ramp", 0, OPT_SECONDS, &o.ramp, "0.25", 0, 1e6, NULL, "S",
		 "a warm-up of S seconds before each run's measured part, which then starts at its "
		 "epoch's first batch (queues filled, the queue depth probed; its errors reported)"},
		{"repeat", 'r', OPT_INT, &o.repeat, "0", 0, BENCH_MAX_REPEAT, NULL, "N",
		 "runs of each side, alternating; the tables give medians and spreads (0: 3 with the "
		 "baseline or --sweep, else 1)"},
		{"epochs", 'E', OPT_INT, &o.epochs, "0", 0, 1000000, NULL, "N",
		 "whole epochs a run reads at least (0: as many as --runtime takes, ending mid-epoch)"},
		{"seconds", 0, OPT_SECONDS, &o.seconds, "0", 0, 1e9, NULL, "S",
		 "stop a run after S seconds (0 = no limit)"},
		{"max-samples", 0, OPT_INT, &o.max_samples, "0", 0, 1e15, NULL, "N",
		 "stop a run after N samples (0 = no limit)"},
		{"max-batches", 0, OPT_INT, &o.max_batches, "0", 0, 1e15, NULL, "N",
		 "stop a run after N batches (0 = no limit)"},
		{"compute-ms", 'c', OPT_MILLIS, &o.compute_ms, "0", 0, 1e6, NULL, "MS",
		 "hold each batch MS ms (an emulated accelerator); prints AU %"},
		{"cache", 0, OPT_CHOICE, &o.cache, "warm", 0, 0, "warm,cold,as-is", "C",
		 "page cache before each run: warmed by one untimed pass, cold (dropped, root; every "
		 "epoch read O_DIRECT, or with --buffered the dataset's pages evicted before each), "
		 "or as found"},
		{"cold", 0, OPT_BOOL, &o.cold, NULL, 0, 0, NULL, NULL, "same as --cache cold"},
		{"no-baseline", 0, OPT_BOOL, &o.no_baseline, NULL, 0, 0, NULL, NULL,
		 "skip the synchronous baseline"},
		OPT_GROUP("image"),
		{"image", 'i', OPT_BOOL, &o.image, NULL, 0, 0, NULL, NULL,
		 "decode and crop every sample (JPEG, PNG, WebP) into the batch, as training does"},
		{"size", 0, OPT_STR, &o.size, NULL, 0, 0, NULL, "N",
		 "--image, --video: output N x N pixels (sets --width and --height)"},
		OPT_GROUP("video"),
		{"video", 0, OPT_BOOL, &o.video, NULL, 0, 0, NULL, NULL,
		 "each sample a clip of a video file (.mp4 .m4v .mov .mkv .webm), decoded, cropped "
		 "(--crop, --no-flip, --scale-min ... as --image's) and resized into the batch: "
		 "clips/s and frames/s"},
		OPT_GROUP("run"),
		{"sweep", 0, OPT_STR, &o.sweep, NULL, 0, 0, NULL, "K=V,..",
		 "--repeat runs per value of a numeric option (threads, qd, prefetch, batch, "
		 "decode-threads, ...); a table and a chart"},
		OPT_GROUP("output"),
		{"plot", 0, OPT_STR, &o.plot, NULL, 0, 0, NULL, "FILE",
		 "--sweep: SVG chart file, and FILE.png beside it with rsvg-convert "
		 "[stoker-sweep-KNOB.svg]"},
		OPT_GROUP("run"),
		{"vs", 0, OPT_STR, &o.vs, NULL, 0, 0, NULL, "PEER,..",
		 "also the peers on the same samples, and stoker's ratio to each: torch (Debian's "
		 "DataLoader, python3 -m stoker.vs_torch); dali, dali-wds, spdl, ffcv, streaming, litdata, wds, "
		 "torch-pil or all (the venv of `make peers`, python3 -m stoker.vs_peers); with "
		 "--video: pyav, torchcodec, decord, dali, ceiling, ceiling-sws or all "
		 "(python3 -m stoker.vs_video)"},
		OPT_GROUP("output"),
		{"json", 'j', OPT_BOOL, &o.json, NULL, 0, 0, NULL, NULL, "print JSON"},
		OPT_END,
	};
	size_t nopts = 0;
	while (opts[nopts].name)
		nopts++;
	nopts = opt_add_library(opts, nopts, sizeof(opts) / sizeof(opts[0]), STK_OPT_LOADER, &o.lo,
				 NULL);
	nopts = opt_add_library(opts, nopts, sizeof(opts) / sizeof(opts[0]), STK_OPT_IMAGE, &o.img,
				NULL);
	opt_add_library(opts, nopts, sizeof(opts) / sizeof(opts[0]), STK_OPT_VIDEO, &o.vid,
			bench_video_rows);
	int first = opt_parse(&help, opts, argc, argv);
	if (first < 0)
		return -first;
	if (o.cold)
		o.cache = CACHE_COLD;
	/* cold for every epoch: O_DIRECT unless buffered reads are asked (then the
	 * dataset's pages are evicted before each epoch) */
	if (o.cache == CACHE_COLD && !(o.lo.flags & (STK_F_DIRECT | STK_F_BUFFERED)))
		o.lo.flags |= STK_F_DIRECT;
	if (o.plot && !o.sweep) { /* refused before a run whose chart nothing would write */
		fprintf(stderr, "stoker bench: --plot %s: nothing would be written: the chart is "
				"--sweep's (a figure per value of one option); add --sweep KNOB=V1,V2,...\n",
			o.plot);
		return EXIT_USAGE;
	}
	if (argc - first > 1 && (o.sweep || o.vs)) {
		fprintf(stderr, "stoker bench: --%s takes one PATH (got %d); several PATHs are "
				"compared with each other\n", o.sweep ? "sweep" : "vs", argc - first);
		return EXIT_USAGE;
	}
	if (o.size) {
		char why[256];
		if (stk_option_set(stk_option_find("width"), &o.img, o.size, why, sizeof(why)) < 0 ||
		    stk_option_set(stk_option_find("height"), &o.img, o.size, why, sizeof(why)) < 0) {
			fprintf(stderr, "stoker bench: --size: %s\n", why);
			return EXIT_USAGE;
		}
	}
	if (bench_video_setup(&o))
		return EXIT_USAGE;
	char vs_bad[256];
	if (o.vs && !o.video && bench_vs_check(o.vs, vs_bad, sizeof(vs_bad))) {
		fprintf(stderr, "stoker bench: %s\n", vs_bad);
		return EXIT_USAGE;
	}
	struct stk_loader_opts lo;
	struct stk_image_opts img;
	loader_opts(&o, &lo, &img);
	char err[PATH_MAX + 256];
	if (stk_loader_opts_check(&lo, err, sizeof(err)) < 0) {
		char said[sizeof(err) + 64];
		fprintf(stderr, "stoker bench: %s\n", cli_flag_words(err, said, sizeof(said)));
		return EXIT_USAGE;
	}
	if (mpi_wanted()) /* started by mpirun: every rank its share, rank 0 the report */
		return bench_mpi(&o, first < argc ? argv[first] : NULL);
	char defpath[PATH_MAX];
	if (first < argc) {
		o.path = argv[first];
	} else {
		if (bench_default_dataset(defpath, sizeof(defpath)))
			return EXIT_FAIL;
		o.path = defpath;
	}
	loader_opts(&o, &lo, &img);
	struct sigaction sa = {.sa_handler = on_sigint};
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	if (o.cold)
		o.cache = CACHE_COLD;
	if (o.runtime <= 0 && !o.epochs && !o.max_batches && !o.max_samples && !o.seconds)
		o.epochs = 1; /* no minimum time and no limit: one epoch */
	if (!o.repeat)
		o.repeat = o.sweep || !o.no_baseline ? 3 : 1;
	if (o.sweep)
		return run_sweep(o);
	if (argc - first > 1)
		return bench_paths(&o, argv + first, argc - first);

	const char *cache = "as found";
	struct stk_loader *l;
	double tc = now_s();
	int rc = stk_loader_create(&l, &lo, err, sizeof(err));
	double create_s = now_s() - tc;
	if (rc < 0) {
		char said[sizeof(err) + 64];
		fprintf(stderr, "stoker bench: %s (%s)\n", cli_flag_words(err, said, sizeof(said)),
			stk_err_name(rc));
		if (rc == STK_EEMPTY && strstr(err, "extension"))
			fprintf(stderr, "try: --extensions '*' for every file, or --extensions "
					".EXT,... for some\n");
		return EXIT_FAIL;
	}
	struct stk_loader_opts eff = {.size = sizeof(eff)};
	struct stk_image_opts effimg = {.size = sizeof(effimg)};
	stk_loader_options(l, &eff, &effimg);
	double cached = 0;
	static struct run S[BENCH_MAX_REPEAT], B[BENCH_MAX_REPEAT];
	static struct stk_verdict V[BENCH_MAX_REPEAT];
	/* remote data: the baseline reads local files; none to compare */
	bool base = !o.no_baseline && stk_loader_remote_stats(l, &(struct stk_remote_stats){
							      .size = sizeof(struct stk_remote_stats)}) < 0;
	int64_t *order = NULL;
	uint64_t norder = 0;
	/* `stoker exporter` shows the running bench (loader="bench"); where no
	 * metrics folder can be written, nothing to show and nothing said */
	struct stk_publisher *pub = NULL;
	if (stk_loader_publish(&pub, l, NULL, "bench", 0) < 0)
		pub = NULL;
	rc = run_repeats(l, &o, S, base ? B : NULL, V, o.image ? &effimg : NULL, &cache, &cached,
			 &order, &norder);
	stk_publisher_destroy(pub); /* before the loader it reads */
	int n = (int)o.repeat;
	while (n > 1 && !S[n - 1].wall) /* interrupted: the runs that ran */
		n--;
	char note[256];
	int pick = pick_verdict(V, S, base ? B : NULL, n, false, note, sizeof(note));
	char warn[512];
	short_warning(&o, S, base ? B : NULL, n, warn, sizeof(warn));
	struct spread ss;
	spread_runs(S, n, sps_of, &ss);
	char tuning[2048];
	stk_loader_tuning(l, tuning, sizeof(tuning));
	json_t *vt = NULL, *vp = NULL;
	char vt_why[1024] = "";
	if (o.vs && rc == 0 && !bench_interrupted) {
		if (o.cache == CACHE_WARM)
			set_cache(l, &o, order, norder, &cache);
		if (o.video) {
			struct stk_video_opts ev = {.size = sizeof(ev)};
			stk_loader_video_options(l, &ev);
			vp = bench_vs_video(&o, &eff, &ev, S[median_run(S, n)].st.decode_threads,
					    vt_why, sizeof(vt_why));
		} else if (bench_vs_torch_only(o.vs))
			vt = bench_vs_torch(&o, &eff, &effimg, 0, vt_why, sizeof(vt_why));
		else
			vp = bench_vs_peers(&o, &eff, &effimg, vt_why, sizeof(vt_why));
	}
	if (o.json) {
		int med = median_run(S, n);
		json_t *j = json_pack(
			"{s:s,s:s,s:s,s:I,s:I,s:I,s:I,s:I,s:f,s:f,s:b,s:o}", "path", o.path, "engine",
			stk_loader_engine(l), "cache", cache, "dataset_samples",
			(json_int_t)stk_loader_num_samples(l), "batch_size", (json_int_t)eff.batch_size,
			"queue_depth", (json_int_t)S[med].st.queue_depth, "prefetch", (json_int_t)eff.prefetch,
			"epochs", (json_int_t)o.epochs, "compute_ms", o.compute_ms, "cached_fraction",
			cached, "direct", S[med].st.direct != 0, "stoker", stats_json(&S[med]));
		json_object_set_new(j, "options", options_json(&eff, o.image ? &effimg : NULL));
		if (cached < 0) /* not known as this user */
			json_object_set_new(j, "cached_fraction", json_null());
		json_object_set_new(j, "cache_evicted_files", json_integer((json_int_t)bench_evicted_files));
		json_object_set_new(j, "create_s", json_real(create_s));
		json_object_set_new(j, "runtime_s", json_real(o.runtime));
		json_object_set_new(j, "ramp_s", json_real(o.ramp));
		json_object_set_new(j, "repeat", json_integer(n));
		json_object_set_new(j, "verdict", verdict_json(&V[pick]));
		json_object_set_new(j, "verdict_note", json_string(note));
		const char *bad = NULL;
		for (int i = 0; i < n && !bad; i++)
			bad = S[i].invalid[0] ? S[i].invalid : NULL;
		json_object_set_new(j, "samples_per_s", bad ? json_null() : spread_json(&ss));
		if (bad)
			json_object_set_new(j, "invalid", json_string(bad));
		json_t *st = json_object_get(j, "stoker");
		json_object_set_new(st, "epochs", S[med].epochs ? json_incref(S[med].epochs)
								: json_array());
		json_t *tl = json_array(); /* one line each: reads, queue depth, I/O threads */
		for (char *line = tuning, *nl; line && *line; line = nl ? nl + 1 : NULL) {
			if ((nl = strchr(line, '\n')))
				*nl = 0;
			json_array_append_new(tl, json_string(line));
		}
		json_object_set_new(j, "tuning", tl);
		json_t *rj = bench_remote_json(l);
		if (rj)
			json_object_set_new(j, "remote", rj);
		struct stk_memory mem = {.size = sizeof(mem)};
		if (stk_loader_memory(l, &mem) == 0) /* the library's sizing, as the text's line */
			json_object_set_new(j, "memory", json_pack("{s:I,s:I,s:I,s:I,s:I,s:I}",
								   "pool_bytes",
								   (json_int_t)mem.pool_bytes,
								   "read_pool_bytes",
								   (json_int_t)mem.read_pool_bytes,
								   "index_bytes",
								   (json_int_t)mem.index_bytes,
								   "meta_bytes",
								   (json_int_t)mem.meta_bytes,
								   "decode_bytes",
								   (json_int_t)mem.decode_bytes,
								   "total", (json_int_t)mem.total));
		json_t *vj = o.video ? bench_video_json(l, S, n, &S[med].st) : NULL;
		if (vj)
			json_object_set_new(j, "video", vj);
		if (o.image)
			json_object_set_new(j, "image", json_pack("{s:I,s:I,s:s,s:I}", "width",
								  (json_int_t)effimg.width, "height",
								  (json_int_t)effimg.height, "crop",
								  effimg.crop ? "center" : "random_resized",
								  "decode_threads",
								  (json_int_t)S[med].st.decode_threads));
		json_t *runs = json_array();
		double ratios[BENCH_MAX_REPEAT];
		for (int i = 0; i < n; i++) {
			json_t *one = json_pack("{s:o,s:o}", "stoker", stats_json(&S[i]), "verdict",
						verdict_json(&V[i]));
			if (base) {
				json_object_set_new(one, "baseline", run_json(&B[i]));
				ratios[i] = sps_of(&B[i]) > 0 ? sps_of(&S[i]) / sps_of(&B[i]) : 0;
				json_object_set_new(one, "ratio", S[i].invalid[0] ? json_null()
									   : json_real(ratios[i]));
			}
			json_array_append_new(runs, one);
		}
		json_object_set_new(j, "runs", runs);
		if (base) {
			struct spread rs, bs;
			spread_of(ratios, n, &rs);
			spread_runs(B, n, sps_of, &bs);
			json_object_set_new(j, "baseline", run_json(&B[median_run(B, n)]));
			json_object_set_new(j, "baseline_samples_per_s", spread_json(&bs));
			json_object_set_new(j, "ratio", bad ? json_null() : json_real(rs.median));
			json_object_set_new(j, "ratio_spread", bad ? json_null() : spread_json(&rs));
		}
		if (vt) { /* its ratio: the steady rates of both sides, timed alike */
			json_object_set_new(j, "vs_torch", vt);
			vt = NULL;
		} else if (vp) {
			json_object_set_new(j, "vs_peers", vp);
			vp = NULL;
		} else if (o.vs) {
			json_object_set_new(j, bench_vs_torch_only(o.vs) ? "vs_torch" : "vs_peers",
					    json_pack("{s:s}", "error", vt_why));
		}
		if (warn[0])
			json_object_set_new(j, "warnings", json_pack("[s]", warn));
		json_dumpf(j, stdout, JSON_INDENT(2));
		putchar('\n');
		json_decref(j);
	} else if (S[0].batches || rc == 0) {
		print_human(l, &o, S, base ? B : NULL, n, cache, cached, create_s);
		device_print(&V[pick]);
		if (vt)
			vs_torch_print(vt);
		else if (vp)
			vs_peers_print(vp);
		else if (o.vs)
			printf("\n  vs %s: not run: %s\n",
			       bench_vs_torch_only(o.vs) ? "PyTorch's DataLoader" : "the peers", vt_why);
		verdict_print(&V[pick]);
		if (note[0])
			printf("  (%s)\n", note);
		if (warn[0])
			printf("\n  warning: %s.\n", warn);
	}
	for (int i = 0; i < (int)o.repeat; i++)
		run_release(&S[i]);
	json_decref(vt);
	json_decref(vp);
	free(order);
	stk_loader_destroy(l);
	if (bench_interrupted) {
		fprintf(stderr, "stoker bench: interrupted\n");
		return EXIT_FAIL;
	}
	return rc < 0 ? EXIT_FAIL : EXIT_OK;
}
