/* bench/paths.c — `stoker bench PATH1 PATH2 ...`: the same loader options on
 * each path in turn, the same sample order (one seed, one epoch per round),
 * each path's page cache put in the same state before its run, --repeat
 * rounds alternating the paths; one column per path with its samples/s,
 * MB/s, batch wait and read latency, the device behind it and its kind
 * (NVMe, SATA, virtio, network, rotational), its verdict, and its ratio to
 * the first path.  A path that cannot run (missing, empty, another dataset
 * than the first) says why in its column; the others still run.  Paths on
 * one device are said to be: that comparison measures nothing about storage. */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "common/cli.h"
#include "stoker/sys.h"

struct path_run {
	const char *path;
	struct stk_loader *l;
	char why[PATH_MAX + 320];  /* not run: the reason */
	char note[PATH_MAX + 160]; /* run, but: e.g. the same device as another */
	struct stk_io_plan plan;
	const char *cache;
	double cached;
	struct run S[BENCH_MAX_REPEAT];
	struct stk_verdict V[BENCH_MAX_REPEAT];
	int nruns;
};

static bool runnable(const struct path_run *p)
{
	return p->l && !p->why[0];
}

static void open_paths(struct bench_opts *o, struct path_run *P, int n)
{
	const struct path_run *first = NULL;
	for (int i = 0; i < n; i++) {
		struct path_run *p = &P[i];
		struct stk_loader_opts lo;
		struct stk_image_opts img;
		o->path = p->path;
		loader_opts(o, &lo, &img);
		char err[PATH_MAX + 256];
		int rc = stk_loader_create(&p->l, &lo, err, sizeof(err));
		if (rc < 0) {
			snprintf(p->why, sizeof(p->why), "%s (%s)", err, stk_err_name(rc));
			p->l = NULL;
			continue;
		}
		p->plan.size = sizeof(p->plan);
		if (stk_io_plan("", p->path, &p->plan) < 0)
			p->plan.kind = -1;
		if (!first) {
			first = p;
			continue;
		}
		int64_t a = stk_loader_num_samples(first->l), b = stk_loader_num_samples(p->l);
		if (a != b) {
			snprintf(p->why, sizeof(p->why),
				 "another dataset than %s: %lld samples, not %lld (the same order and "
				 "sizes on each path are what makes the columns comparable)",
				 first->path, (long long)b, (long long)a);
			continue;
		}
		for (int k = 0; k < i; k++)
			if (runnable(&P[k]) && P[k].plan.disk[0] &&
			    !strcmp(P[k].plan.disk, p->plan.disk)) {
				snprintf(p->note, sizeof(p->note),
					 "on the same device as %s (%s): the two columns measure nothing "
					 "about storage, only the page cache and the files' layout",
					 P[k].path, p->plan.disk);
				break;
			}
	}
}

static const char *kind_of(const struct path_run *p, char *buf, size_t len)
{
	const char *k = p->plan.kind >= 0 ? stk_sys_dev_kind_name(p->plan.kind) : NULL;
	if (p->plan.disk[0] && k)
		snprintf(buf, len, "%s (%s)", p->plan.disk, k);
	else
		snprintf(buf, len, "%s", p->plan.disk[0] ? p->plan.disk : k ? k : "unknown");
	return buf;
}

static double path_sps(const struct path_run *p)
{
	struct spread s;
	spread_runs(p->S, p->nruns, sps_of, &s);
	return s.median;
}

/* Why a path's cold figures mean nothing (bench/cold.c), or NULL. */
static const char *invalid_of(const struct path_run *p)
{
	for (int r = 0; r < p->nruns; r++)
		if (p->S[r].invalid[0])
			return p->S[r].invalid;
	return NULL;
}

static void print_paths(const struct bench_opts *o, struct path_run *P, int n)
{
	char t[96];
	double walls[SPREAD_MAX]; /* what was measured, not what --runtime asked */
	int nw = 0;
	for (int i = 0; i < n; i++)
		for (int r = 0; runnable(&P[i]) && r < P[i].nruns && nw < SPREAD_MAX; r++)
			walls[nw++] = P[i].S[r].wall;
	struct spread ws = {0};
	if (nw)
		spread_of(walls, nw, &ws);
	printf("stoker bench: %d paths, the same options on each in turn (%lld round%s, each run "
	       "%.2f s measured%s; no baseline: the paths are the comparison)\n\n",
	       n, (long long)o->repeat, o->repeat == 1 ? "" : "s", ws.median,
	       nw > 1 ? " (median)" : "");
	printf("  %-26s", "");
	for (int i = 0; i < n; i++)
		printf(" %-26.26s", P[i].path);
	printf("\n  %-26s", "device");
	for (int i = 0; i < n; i++)
		printf(" %-26s", runnable(&P[i]) ? kind_of(&P[i], t, sizeof(t)) : "-");
	const struct path_run *first = NULL;
	for (int i = 0; i < n && !first; i++)
		if (runnable(&P[i]))
			first = &P[i];
	static const struct {
		const char *name;
		double (*f)(const struct run *);
		const char *fmt;
	} rows[] = {{"samples/s", sps_of, "%.0f"}, {"MB/s", mbps_of, "%.1f"}};
	for (size_t r = 0; r < sizeof(rows) / sizeof(rows[0]); r++) {
		printf("\n  %-26s", rows[r].name);
		for (int i = 0; i < n; i++) {
			struct spread s;
			if (runnable(&P[i]))
				spread_runs(P[i].S, P[i].nruns, rows[r].f, &s);
			printf(" %-26s", !runnable(&P[i])   ? "not run"
					 : invalid_of(&P[i]) ? "no figure (see below)"
							     : fmt_spread(t, sizeof(t), &s, rows[r].fmt));
		}
	}
	char lab[PATH_MAX + 16];
	snprintf(lab, sizeof(lab), "ratio to %s", first ? first->path : "the first");
	printf("\n  %-26.26s", lab);
	for (int i = 0; i < n; i++) {
		if (runnable(&P[i]) && first && path_sps(first) > 0 && !invalid_of(&P[i]) &&
		    !invalid_of(first))
			snprintf(t, sizeof(t), "%.2fx", path_sps(&P[i]) / path_sps(first));
		else
			snprintf(t, sizeof(t), "-");
		printf(" %-26s", t);
	}
	printf("\n  %-26s", "batch wait p50 / p99");
	for (int i = 0; i < n; i++) {
		char a[24], b[24];
		const struct run *m = runnable(&P[i]) ? &P[i].S[median_run(P[i].S, P[i].nruns)] : NULL;
		if (m)
			snprintf(t, sizeof(t), "%s / %s", fmt_ns(a, sizeof(a), (double)m->st.wait_p50_ns),
				 fmt_ns(b, sizeof(b), (double)m->st.wait_p99_ns));
		printf(" %-26s", m ? t : "-");
	}
	printf("\n  %-26s", "read latency p50 / p99");
	for (int i = 0; i < n; i++) {
		char a[24], b[24];
		const struct run *m = runnable(&P[i]) ? &P[i].S[median_run(P[i].S, P[i].nruns)] : NULL;
		if (m)
			snprintf(t, sizeof(t), "%s / %s", fmt_ns(a, sizeof(a), (double)m->st.read_p50_ns),
				 fmt_ns(b, sizeof(b), (double)m->st.read_p99_ns));
		printf(" %-26s", m ? t : "-");
	}
	printf("\n  %-26s", "page cache at the start");
	for (int i = 0; i < n; i++) {
		if (runnable(&P[i]))
			snprintf(t, sizeof(t), P[i].cached < 0 ? "unknown (not your files)"
				 : "%.0f %% resident", 100 * P[i].cached);
		printf(" %-26s", runnable(&P[i]) ? t : "-");
	}
	printf("\n  %-26s", "verdict");
	for (int i = 0; i < n; i++) {
		char note[256];
		int k = runnable(&P[i]) ? pick_verdict(P[i].V, P[i].S, NULL, P[i].nruns, true, note,
						      sizeof(note))
					: -1;
		printf(" %-26s", k >= 0 ? P[i].V[k].name : "-");
	}
	printf("\n\n");
	for (int i = 0; i < n; i++) {
		if (!runnable(&P[i])) {
			printf("  %s: not run: %s\n", P[i].path, P[i].why);
			continue;
		}
		char note[256];
		int k = pick_verdict(P[i].V, P[i].S, NULL, P[i].nruns, false, note, sizeof(note));
		printf("  %s: %s: %s%s%s%s\n", P[i].path, P[i].V[k].name, P[i].V[k].evidence,
		       note[0] ? " (" : "", note, note[0] ? ")" : "");
		if (P[i].note[0])
			printf("  %s: %s\n", P[i].path, P[i].note);
		char warn[512];
		short_warning(o, P[i].S, NULL, P[i].nruns, warn, sizeof(warn));
		if (warn[0])
			printf("  %s: warning: %s\n", P[i].path, warn);
		if (runnable(&P[i]) && invalid_of(&P[i]))
			printf("  %s: no figures: %s\n", P[i].path, invalid_of(&P[i]));
	}
}

static json_t *paths_json(const struct bench_opts *o, struct path_run *P, int n)
{
	json_t *arr = json_array();
	double first = 0;
	for (int i = 0; i < n; i++) {
		struct path_run *p = &P[i];
		json_t *j = json_pack("{s:s}", "path", p->path);
		if (!runnable(p)) {
			json_object_set_new(j, "error", json_string(p->why));
			json_array_append_new(arr, j);
			continue;
		}
		json_object_set_new(j, "device",
				    json_pack("{s:s,s:s}", "name", p->plan.disk, "kind",
					      p->plan.kind >= 0 ? stk_sys_dev_kind_name(p->plan.kind)
								: "unknown"));
		struct spread s, m;
		spread_runs(p->S, p->nruns, sps_of, &s);
		spread_runs(p->S, p->nruns, mbps_of, &m);
		if (!first)
			first = s.median;
		json_object_set_new(j, "samples_per_s", spread_json(&s));
		json_object_set_new(j, "mb_per_s", spread_json(&m));
		json_object_set_new(j, "ratio", json_real(first > 0 ? s.median / first : 0));
		json_object_set_new(j, "cached_fraction", p->cached < 0 ? json_null()
								 : json_real(p->cached));
		json_object_set_new(j, "cache", json_string(p->cache ? p->cache : "as found"));
		char note[256];
		int k = pick_verdict(p->V, p->S, NULL, p->nruns, false, note, sizeof(note));
		json_object_set_new(j, "verdict", verdict_json(&p->V[k]));
		json_object_set_new(j, "verdict_note", json_string(note));
		if (p->note[0])
			json_object_set_new(j, "note", json_string(p->note));
		json_t *runs = json_array();
		for (int r = 0; r < p->nruns; r++)
			json_array_append_new(runs, json_pack("{s:o,s:o}", "stoker", stats_json(&p->S[r]),
							      "verdict", verdict_json(&p->V[r])));
		json_object_set_new(j, "runs", runs);
		char warn[512];
		short_warning(o, p->S, NULL, p->nruns, warn, sizeof(warn));
		if (warn[0])
			json_object_set_new(j, "warnings", json_pack("[s]", warn));
		json_array_append_new(arr, j);
	}
	return arr;
}

int bench_paths(struct bench_opts *o, char **paths, int n)
{
	struct path_run *P = calloc((size_t)n, sizeof(*P));
	if (!P) {
		fprintf(stderr, "stoker bench: out of memory\n");
		return EXIT_FAIL;
	}
	for (int i = 0; i < n; i++)
		P[i].path = paths[i];
	open_paths(o, P, n);
	int ran = 0;
	for (int r = 0; r < o->repeat && !bench_interrupted; r++) {
		o->run_index = r;
		for (int i = 0; i < n && !bench_interrupted; i++) {
			struct path_run *p = &P[i];
			if (!runnable(p))
				continue;
			o->path = p->path;
			/* each path's cache in the same state before its run; warm: its
			 * own files once, cold: dropped before every run */
			if (o->cache == CACHE_COLD || (r == 0 && o->cache == CACHE_WARM))
				set_cache(p->l, o, NULL, 0, &p->cache);
			if (r == 0)
				p->cached = resident_at_start(p->l, o);
			/* round r reads epoch r on every path: the same sample order */
			int e = stk_loader_restart(p->l, (uint64_t)r, 0, STK_START_RESET_STATS);
			int64_t *order = NULL;
			uint64_t norder = 0;
			if (e == 0)
				e = run_loader(p->l, o, (uint64_t)r, &p->S[r], &order, &norder);
			free(order);
			p->V[r].size = sizeof(p->V[r]);
			stk_loader_diagnose(p->l, 0, &p->V[r]);
			if (e < 0) {
				snprintf(p->why, sizeof(p->why), "%s (%s)", stk_last_error(p->l),
					 stk_err_name(e));
				continue;
			}
			p->nruns = r + 1;
			ran++;
		}
	}
	if (o->json) {
		struct stk_loader_opts eff = {.size = sizeof(eff)};
		struct stk_image_opts img = {.size = sizeof(img)};
		json_t *opts = NULL;
		for (int i = 0; i < n && !opts; i++)
			if (runnable(&P[i])) {
				stk_loader_options(P[i].l, &eff, &img);
				opts = options_json(&eff, o->image ? &img : NULL);
			}
		json_t *j = json_pack("{s:o,s:I,s:f,s:f}", "paths", paths_json(o, P, n), "repeat",
				      (json_int_t)o->repeat, "runtime_s", o->runtime, "ramp_s", o->ramp);
		if (opts)
			json_object_set_new(j, "options", opts);
		json_dumpf(j, stdout, JSON_INDENT(2));
		putchar('\n');
		json_decref(j);
	} else {
		print_paths(o, P, n);
	}
	for (int i = 0; i < n; i++) {
		for (int r = 0; r < o->repeat; r++)
			run_release(&P[i].S[r]);
		stk_loader_destroy(P[i].l);
	}
	free(P);
	if (bench_interrupted) {
		fprintf(stderr, "stoker bench: interrupted\n");
		return EXIT_FAIL;
	}
	return ran ? EXIT_OK : EXIT_FAIL;
}
