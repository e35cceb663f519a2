/*
 * bench/bench_mpi.c — `mpirun -np N stoker bench [PATH]`: every rank's loader reads
 * its share of each epoch (rank r of N, as under torchrun), from the same
 * PATH on shared storage or a copy on each host.  The ranks check that they
 * run the same options, create their loaders, put the page cache as asked
 * (one rank per host), meet, and run; each sends its figures and histograms
 * to rank 0, which prints the aggregate (total samples/s and MB/s, the
 * accelerator utilization of each emulated accelerator with --compute-ms,
 * batch-wait, read and decode latency merged over the ranks) and the spread
 * over the ranks with the slowest one named, as IOR and DLIO do; --json has
 * the aggregate and every rank.  No baseline: it is one thread's, per
 * process.  A rank that fails says why and every rank stops (common/mpi.c).
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "common/cli.h"
#include "common/mpi.h"

static void on_signal(int sig)
{
	(void)sig;
	bench_interrupted = 1;
}

/* What every rank must agree on, one "name=value" line each: the loader's
 * and image options as the table prints them, bench's own, and PATH. */
static char *options_text(const struct bench_opts *o, const char *path)
{
	size_t cap = 16384, k = 0;
	char *t = malloc(cap);
	if (!t)
		return NULL;
	t[0] = 0;
	const struct stk_option *row;
	for (int i = 0; (row = stk_option_at(i)); i++) {
		if (!strcmp(row->name, "rank") || !strcmp(row->name, "local_rank"))
			continue; /* the one thing that differs */
		char v[512];
		const void *base = row->group == STK_OPT_LOADER ? (const void *)&o->lo : &o->img;
		if (row->group == STK_OPT_IMAGE && !o->image)
			continue;
		if (stk_option_get(row, base, v, sizeof(v)) < 0)
			snprintf(v, sizeof(v), "?");
		k += (size_t)snprintf(t + k, cap - k, "%s=%s\n", row->name, v);
	}
	snprintf(t + k, cap - k,
		 "path=%s\nimage=%d\nruntime=%g\nramp=%g\nrepeat=%lld\nepochs=%lld\nseconds=%g\n"
		 "max_samples=%lld\ncompute_ms=%g\ncache=%d\n",
		 path ? path : "(default dataset)", o->image, o->runtime, o->ramp,
		 (long long)o->repeat, (long long)o->epochs, o->seconds, (long long)o->max_samples,
		 o->compute_ms, o->cold ? CACHE_COLD : o->cache);
	return t;
}

static json_t *lat_json(uint64_t p50, uint64_t p99, uint64_t max)
{
	return json_pack("{s:I,s:I,s:I}", "p50", (json_int_t)p50, "p99", (json_int_t)p99, "max",
			 (json_int_t)max);
}

/* One rank's run as it travels to rank 0. */
static char *rank_result(struct mpi *m, struct stk_loader *l, const struct run *r, int rc,
			 const char *cache)
{
	json_t *j = json_pack("{s:i,s:s,s:I,s:I,s:I,s:f,s:f,s:f,s:I,s:s,s:i}", "rank", m->rank,
			      "host", m->host, "samples", (json_int_t)r->samples, "bytes",
			      (json_int_t)r->bytes, "batches", (json_int_t)r->batches, "seconds",
			      r->wall, "cpu_s", r->cpu, "compute_s", r->compute, "errors",
			      (json_int_t)r->errors, "cache", cache, "decode_threads",
			      (int)r->st.decode_threads);
	if (rc < 0)
		json_object_set_new(j, "error", json_pack("{s:s,s:s}", "reason", stk_last_error(l),
							 "code", stk_err_name(rc)));
	static const struct {
		const char *name;
		enum stk_hist_kind kind;
	} hists[] = {{"batch_wait", STK_HIST_BATCH_WAIT},
		     {"read", STK_HIST_READ},
		     {"decode", STK_HIST_DECODE}};
	for (size_t i = 0; i < sizeof(hists) / sizeof(hists[0]); i++) {
		struct stk_hist *h;
		if (stk_hist_create(&h))
			continue;
		stk_loader_hist(l, hists[i].kind, h);
		json_object_set_new(j, hists[i].name, mpi_hist_json(h));
		stk_hist_destroy(h);
	}
	struct stk_verdict v = {.size = sizeof(v)};
	if (stk_loader_diagnose(l, 0, &v) >= 0)
		json_object_set_new(j, "verdict", json_string(v.name ? v.name : "?"));
	char *text = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	return text;
}

static double rate(const json_t *rk, const char *what)
{
	double s = json_real_value(json_object_get(rk, "seconds"));
	double v = (double)json_integer_value(json_object_get(rk, what));
	return s > 0 ? v / s : 0;
}

static double au(const json_t *rk)
{
	double s = json_real_value(json_object_get(rk, "seconds"));
	return s > 0 ? 100 * json_real_value(json_object_get(rk, "compute_s")) / s : 0;
}

/* Rank 0: the ranks' results into one run's aggregate (and the ranks). */
static json_t *aggregate(struct mpi *m, char **all, const struct bench_opts *o, bool *failed)
{
	json_t *ranks = json_array();
	int n = m->size;
	double *sps = calloc((size_t)n, sizeof(double)), *mbs = calloc((size_t)n, sizeof(double));
	double *aus = calloc((size_t)n, sizeof(double));
	struct stk_hist *h[3] = {NULL, NULL, NULL};
	static const char *const hn[3] = {"batch_wait", "read", "decode"};
	for (int i = 0; i < 3; i++)
		stk_hist_create(&h[i]);
	uint64_t samples = 0, bytes = 0, errors = 0;
	double wall = 0, cpu = 0;
	json_t *hosts = json_object();
	for (int r = 0; r < n; r++) {
		json_error_t je;
		json_t *rk = json_loads(all[r], 0, &je);
		if (!rk) {
			fprintf(stderr, "stoker bench: rank %d sent unreadable results\n", r);
			*failed = true;
			continue;
		}
		const json_t *err = json_object_get(rk, "error");
		if (err) {
			fprintf(stderr, "stoker bench: rank %d (%s): %s (%s)\n", r,
				json_string_value(json_object_get(rk, "host")),
				json_string_value(json_object_get(err, "reason")),
				json_string_value(json_object_get(err, "code")));
			*failed = true;
		}
		json_object_set_new(hosts, json_string_value(json_object_get(rk, "host")),
				    json_true());
		samples += (uint64_t)json_integer_value(json_object_get(rk, "samples"));
		bytes += (uint64_t)json_integer_value(json_object_get(rk, "bytes"));
		errors += (uint64_t)json_integer_value(json_object_get(rk, "errors"));
		cpu += json_real_value(json_object_get(rk, "cpu_s"));
		double s = json_real_value(json_object_get(rk, "seconds"));
		wall = s > wall ? s : wall;
		sps[r] = rate(rk, "samples");
		mbs[r] = rate(rk, "bytes") / 1e6;
		aus[r] = au(rk);
		for (int i = 0; i < 3; i++) {
			if (h[i])
				mpi_hist_add_json(h[i], json_object_get(rk, hn[i]));
			json_object_del(rk, hn[i]); /* the merged ones are in the aggregate */
		}
		json_object_set_new(rk, "samples_per_s", json_real(sps[r]));
		json_object_set_new(rk, "mb_per_s", json_real(mbs[r]));
		if (o->compute_ms > 0)
			json_object_set_new(rk, "au_percent", json_real(aus[r]));
		json_array_append_new(ranks, rk);
	}
	struct mpi_spread ss, ms, as;
	mpi_spread_of(sps, n, &ss);
	mpi_spread_of(mbs, n, &ms);
	mpi_spread_of(aus, n, &as);
	double mean_au = 0;
	for (int r = 0; r < n; r++)
		mean_au += aus[r] / n;
	json_t *agg = json_pack("{s:I,s:I,s:I,s:f,s:f,s:f,s:f}", "samples", (json_int_t)samples,
				"bytes", (json_int_t)bytes, "errors", (json_int_t)errors, "seconds",
				wall, "samples_per_s", wall > 0 ? (double)samples / wall : 0,
				"mb_per_s", wall > 0 ? (double)bytes / wall / 1e6 : 0,
				"cpu_s_per_1000", samples ? cpu / (double)samples * 1000 : 0);
	if (o->compute_ms > 0) {
		json_object_set_new(agg, "au_percent", json_real(mean_au));
		json_object_set_new(agg, "au_percent_min_rank", json_integer(as.argmin));
	}
	for (int i = 0; i < 3; i++) {
		if (h[i] && stk_hist_count(h[i]))
			json_object_set_new(agg, i == 0 ? "batch_wait_ns" : i == 1 ? "read_latency_ns"
										      : "decode_ns",
					    lat_json(stk_hist_percentile(h[i], 50),
						     stk_hist_percentile(h[i], 99), stk_hist_max(h[i])));
		stk_hist_destroy(h[i]);
	}
	json_t *slow = json_array_get(ranks, (size_t)ss.argmin);
	json_t *run = json_pack(
		"{s:o,s:{s:o,s:o,s:o},s:{s:i,s:s,s:f},s:o,s:i}", "aggregate", agg, "spread",
		"samples_per_s", mpi_spread_json(&ss), "mb_per_s", mpi_spread_json(&ms), "au_percent",
		mpi_spread_json(&as), "slowest", "rank", ss.argmin, "host",
		slow ? json_string_value(json_object_get(slow, "host")) : "?", "samples_per_s",
		ss.min, "ranks", ranks, "hosts", (int)json_object_size(hosts));
	json_decref(hosts);
	free(sps);
	free(mbs);
	free(aus);
	return run;
}

static void print_run(const struct bench_opts *o, struct mpi *m, const json_t *run,
		      const char *path, const char *cache, int64_t dataset, int64_t share)
{
	const json_t *agg = json_object_get(run, "aggregate"), *sp = json_object_get(run, "spread");
	const json_t *ss = json_object_get(sp, "samples_per_s"), *ms = json_object_get(sp, "mb_per_s");
	const json_t *as = json_object_get(sp, "au_percent"), *slow = json_object_get(run, "slowest");
	int hosts = (int)json_integer_value(json_object_get(run, "hosts"));
#define NUM(o, k) json_number_value(json_object_get((o), (k)))
	printf("stoker bench: %s  (mpirun: %d ranks on %d host%s)\n", path, m->size, hosts,
	       hosts == 1 ? "" : "s");
	printf("  %lld samples; each rank reads its share, %lld per epoch; page cache: %s\n\n",
	       (long long)dataset, (long long)share, cache);
	printf("  %-24s %12s %12s %12s %12s\n", "", "aggregate", "rank min", "rank median",
	       "rank max");
	printf("  %-24s %12.0f %12.0f %12.0f %12.0f\n", "samples/s", NUM(agg, "samples_per_s"),
	       NUM(ss, "min"), NUM(ss, "median"), NUM(ss, "max"));
	printf("  %-24s %12.1f %12.1f %12.1f %12.1f\n", "MB/s", NUM(agg, "mb_per_s"), NUM(ms, "min"),
	       NUM(ms, "median"), NUM(ms, "max"));
	if (o->compute_ms > 0)
		printf("  %-24s %11.1f%% %11.1f%% %11.1f%% %11.1f%%   (per emulated accelerator; "
		       "lowest: rank %lld)\n",
		       "accelerator utilization", NUM(agg, "au_percent"), NUM(as, "min"),
		       NUM(as, "median"), NUM(as, "max"),
		       (long long)json_integer_value(json_object_get(agg, "au_percent_min_rank")));
	printf("  %-24s %12.2f   (the slowest rank's; they start together)\n", "seconds",
	       NUM(agg, "seconds"));
	printf("  %-24s %12.3f\n\n", "CPU s per 1000 samples", NUM(agg, "cpu_s_per_1000"));
	static const struct {
		const char *key, *label;
	} lat[] = {{"batch_wait_ns", "batch wait p50/p99/max"},
		   {"read_latency_ns", "read latency p50/p99/max"},
		   {"decode_ns", "decode p50/p99/max"}};
	for (size_t i = 0; i < sizeof(lat) / sizeof(lat[0]); i++) {
		const json_t *l = json_object_get(agg, lat[i].key);
		char a[32], b[32], c[32];
		if (l)
			printf("  %-26s %s / %s / %s   (merged over the ranks)\n", lat[i].label,
			       fmt_ns(a, sizeof(a), NUM(l, "p50")), fmt_ns(b, sizeof(b), NUM(l, "p99")),
			       fmt_ns(c, sizeof(c), NUM(l, "max")));
	}
	double med = NUM(ss, "median"), lo = NUM(slow, "samples_per_s");
	printf("  %-26s rank %lld (%s): %.0f samples/s, %.1f %% below the median\n", "slowest",
	       (long long)json_integer_value(json_object_get(slow, "rank")),
	       json_string_value(json_object_get(slow, "host")), lo,
	       med > 0 ? 100 * (med - lo) / med : 0);
	printf("  %-26s %llu\n", "errors",
	       (unsigned long long)json_integer_value(json_object_get(agg, "errors")));
#undef NUM
}

static double env_timeout(void)
{
	const char *v = getenv("STOKER_MPI_TIMEOUT");
	char *end;
	double t = v ? strtod(v, &end) : 0;
	return v && *v && !*end && t > 0 ? t : 300;
}

int bench_mpi(struct bench_opts *o, const char *path)
{
	struct mpi m;
	char why[1024];
	if (mpi_start(&m, env_timeout(), why, sizeof(why))) {
		fprintf(stderr, "stoker bench: %s\n", why);
		return EXIT_FAIL;
	}
	int code = EXIT_FAIL;
	struct stk_loader *l = NULL;
	json_t *runs = json_array();
	char *text = options_text(o, path);
	if (!text || !mpi_same_options(&m, "bench", text)) {
		code = EXIT_USAGE;
		goto out;
	}
	/* the same on every rank, so every rank leaves here together */
	const char *usage = o->sweep ? "--sweep is not run under mpirun (run it in one process)"
			    : o->vs  ? "--vs torch is not run under mpirun (run it in one process)"
			    : o->lo.world_size > 1 && o->lo.world_size != (uint32_t)m.size
				    ? "--world-size differs from mpirun's number of ranks"
				    : NULL;
	if (usage) {
		if (m.rank == 0)
			fprintf(stderr, "stoker bench: %s\n", usage);
		code = EXIT_USAGE;
		goto out;
	}
	char defpath[PATH_MAX];
	if (!path) { /* one rank per host makes the default dataset; the others wait */
		bool failed = m.local_rank == 0 && bench_default_dataset(defpath, sizeof(defpath));
		if (!mpi_check(&m, "bench", "default dataset", failed ? "cannot make the default dataset"
								      : NULL))
			goto out;
		failed = m.local_rank && bench_default_dataset(defpath, sizeof(defpath));
		if (!mpi_check(&m, "bench", "default dataset found", failed ? "no default dataset"
									   : NULL))
			goto out;
		path = defpath;
	}
	struct sigaction sa = {.sa_handler = on_signal};
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	if (o->cold)
		o->cache = CACHE_COLD;
	if (o->runtime <= 0 && !o->epochs)
		o->epochs = 1;
	if (!o->repeat)
		o->repeat = 1;
	o->path = path;
	struct stk_loader_opts lo = o->lo;
	struct stk_image_opts img = o->img;
	lo.size = sizeof(lo);
	img.size = sizeof(img);
	lo.path = path;
	lo.image = o->image ? &img : NULL;
	lo.rank = (uint32_t)m.rank;
	lo.world_size = (uint32_t)m.size;
	char err[PATH_MAX + 256];
	int rc = stk_loader_create(&l, &lo, err, sizeof(err));
	if (!mpi_check(&m, "bench", "create", rc < 0 ? err : NULL))
		goto out;
	const char *cache = "as found";
	uint64_t epoch = 0;
	bool failed = false;
	for (int i = 0; i < o->repeat && !failed; i++) {
		o->run_index = i;
		/* the page cache is the host's: one rank per host sets it */
		if (m.local_rank == 0 && (o->cache == CACHE_COLD || (i == 0 && o->cache == CACHE_WARM)))
			set_cache(l, o, NULL, 0, &cache);
		else if (o->cache == CACHE_COLD)
			cache = "cold (dropped before each run, file metadata too)";
		else if (o->cache == CACHE_WARM)
			cache = "warm (files read once before each run)";
		/* every rank ready: they start together */
		if (!mpi_check(&m, "bench", "start", NULL))
			goto out;
		struct run r = {0};
		int64_t *order = NULL;
		uint64_t norder = 0;
		rc = stk_loader_restart(l, epoch, 0, STK_START_RESET_STATS);
		if (rc == 0)
			rc = run_loader(l, o, epoch, &r, &order, &norder);
		epoch = r.next_epoch;
		free(order);
		run_release(&r);
		char *mine = rank_result(&m, l, &r, rc, cache);
		char **all = NULL;
		mpi_gather(&m, "results", mine ? mine : "{}", &all);
		free(mine);
		char verdict[8] = "ok";
		if (m.rank == 0) {
			json_array_append_new(runs, aggregate(&m, all, o, &failed));
			mpi_free_all(&m, all);
			if (failed)
				snprintf(verdict, sizeof(verdict), "stop");
		}
		char *reply = NULL;
		mpi_reply(&m, "results", verdict, &reply);
		failed = !reply || strcmp(reply, "ok");
		free(reply);
		if (bench_interrupted)
			failed = true;
	}
	code = failed ? EXIT_FAIL : EXIT_OK;
	if (m.rank == 0 && json_array_size(runs) && !failed) {
		/* the run whose aggregate is the median */
		size_t n = json_array_size(runs), pick = 0;
		double *v = calloc(n, sizeof(double));
		for (size_t i = 0; v && i < n; i++)
			v[i] = json_number_value(json_object_get(
				json_object_get(json_array_get(runs, i), "aggregate"), "samples_per_s"));
		for (size_t i = 0, below; v && i < n; i++) {
			below = 0;
			for (size_t k = 0; k < n; k++)
				below += v[k] < v[i];
			if (below == (n - 1) / 2)
				pick = i;
		}
		free(v);
		json_t *run = json_array_get(runs, pick);
		if (o->json) {
			json_t *j = json_pack("{s:s,s:s,s:{s:i,s:O},s:I,s:I,s:s,s:f,s:i,s:O,s:O,s:O,s:O,"
					      "s:O}",
					      "path", path, "engine", stk_loader_engine(l), "mpi",
					      "world_size", m.size, "hosts", json_object_get(run, "hosts"),
					      "dataset_samples", (json_int_t)stk_loader_num_samples(l),
					      "rank_samples", (json_int_t)stk_loader_rank_samples(l),
					      "cache", cache, "compute_ms", o->compute_ms, "repeat",
					      (int)n, "aggregate", json_object_get(run, "aggregate"),
					      "spread", json_object_get(run, "spread"), "slowest",
					      json_object_get(run, "slowest"), "ranks",
					      json_object_get(run, "ranks"), "runs", runs);
			json_dumpf(j, stdout, JSON_INDENT(2));
			putchar('\n');
			json_decref(j);
		} else {
			print_run(o, &m, run, path, cache, stk_loader_num_samples(l),
				  stk_loader_rank_samples(l));
			if (n > 1)
				printf("  (the median of %zu runs by aggregate samples/s)\n", n);
		}
		fflush(stdout);
	}
	/* rank 0 has printed: leave together */
	mpi_check(&m, "bench", "end", NULL);
out:
	free(text);
	json_decref(runs);
	stk_loader_destroy(l);
	mpi_end(&m);
	return code;
}
