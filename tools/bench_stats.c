/* bench_stats.c — what repeated runs say together: the median, the spread
 * (min–max) and a 95 % interval (Student's t over the runs' mean, from three
 * runs on), and the medians of paired ratios, for `stoker bench` (--repeat)
 * and its sweep.  One run says little on a shared machine: the tables print
 * medians and spreads, never a single run's figure as the result. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <stdio.h>

#include "bench.h"

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* Student's t, two-sided 95 %, for df = 1..30 (then the normal's 1.96). */
static double t95(int df)
{
	static const double t[] = {12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306,
				   2.262,  2.228, 2.201, 2.179, 2.160, 2.145, 2.131, 2.120,
				   2.110,  2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
				   2.060,  2.056, 2.052, 2.048, 2.045, 2.042};
	return df < 1 ? 0 : df <= 30 ? t[df - 1] : 1.96;
}

void spread_of(const double *v, int n, struct spread *s)
{
	memset(s, 0, sizeof(*s));
	s->n = n;
	if (n <= 0)
		return;
	double sorted[BENCH_MAX_REPEAT], sum = 0;
	int k = n < BENCH_MAX_REPEAT ? n : BENCH_MAX_REPEAT;
	memcpy(sorted, v, (size_t)k * sizeof(*v));
	qsort(sorted, (size_t)k, sizeof(*sorted), cmp_double);
	s->min = sorted[0];
	s->max = sorted[k - 1];
	s->median = k % 2 ? sorted[k / 2] : (sorted[k / 2 - 1] + sorted[k / 2]) / 2;
	for (int i = 0; i < k; i++)
		sum += sorted[i];
	s->mean = sum / k;
	if (k >= 3) {
		double ss = 0;
		for (int i = 0; i < k; i++)
			ss += (sorted[i] - s->mean) * (sorted[i] - s->mean);
		double half = t95(k - 1) * sqrt(ss / (k - 1)) / sqrt((double)k);
		s->lo95 = s->mean - half;
		s->hi95 = s->mean + half;
		s->has_ci = true;
	}
}

double spread_rel(const struct spread *s)
{
	return s->median > 0 ? (s->max - s->min) / s->median : 0;
}

json_t *spread_json(const struct spread *s)
{
	json_t *j = json_pack("{s:i,s:f,s:f,s:f,s:f}", "runs", s->n, "median", s->median, "min",
			      s->min, "max", s->max, "mean", s->mean);
	if (s->has_ci)
		json_object_set_new(j, "ci95", json_pack("[f,f]", s->lo95, s->hi95));
	return j;
}

double sps_of(const struct run *r)
{
	return r->wall > 0 ? (double)r->samples / r->wall : 0;
}

double mbps_of(const struct run *r)
{
	return r->wall > 0 ? (double)r->bytes / r->wall / 1e6 : 0;
}

double cpu_of(const struct run *r)
{
	return r->samples ? r->cpu / (double)r->samples * 1000 : 0;
}

double au_of(const struct run *r)
{
	return r->wall > 0 && r->compute > 0 ? 100 * r->compute / r->wall : 0;
}

/* One figure of n runs into a spread. */
void spread_runs(const struct run *runs, int n, double (*f)(const struct run *),
			struct spread *s)
{
	double v[BENCH_MAX_REPEAT] = {0};
	for (int i = 0; i < n && i < BENCH_MAX_REPEAT; i++)
		v[i] = f(&runs[i]);
	spread_of(v, n, s);
}

/* The run whose samples/s is the median's (its latencies speak for all). */
int median_run(const struct run *runs, int n)
{
	struct spread s;
	spread_runs(runs, n, sps_of, &s);
	int best = 0;
	for (int i = 1; i < n; i++)
		if (fabs(sps_of(&runs[i]) - s.median) < fabs(sps_of(&runs[best]) - s.median))
			best = i;
	return best;
}

/* "63328", or with runs: "63328 (61.2k-65.0k)". */
const char *fmt_spread(char *buf, size_t len, const struct spread *s, const char *fmt)
{
	char lo[24], hi[24];
	int n = snprintf(buf, len, fmt, s->median);
	if (s->n > 1 && n > 0 && (size_t)n < len) {
		double k = s->max >= 1e4 ? 1e3 : 1;
		const char *u = k > 1 ? "k" : "";
		int d = k > 1 || (s->max >= 10 && s->max < 100) ? 1 : s->max < 10 ? 2 : 0;
		snprintf(lo, sizeof(lo), "%.*f%s", d, s->min / k, u);
		snprintf(hi, sizeof(hi), "%.*f%s", d, s->max / k, u);
		snprintf(buf + n, len - (size_t)n, " (%s-%s)", lo, hi);
	}
	return buf;
}

/* The verdict the runs agree on, and how sure: the kind most runs gave (the
 * median run's evidence when it is that kind), "unsure" when they disagree
 * or their samples/s spread wide. */
int pick_verdict(const struct stk_verdict *v, const struct run *runs, int n, bool terse,
			char *note, size_t len)
{
	int count[STK_BOUND_COUNT] = {0}, top = 0;
	for (int i = 0; i < n; i++)
		if (v[i].kind >= 0 && v[i].kind < STK_BOUND_COUNT && ++count[v[i].kind] > count[top])
			top = v[i].kind;
	int med = median_run(runs, n), pick = med;
	if (v[med].kind != top)
		for (int i = 0; i < n; i++)
			if (v[i].kind == top) {
				pick = i;
				break;
			}
	struct spread s;
	spread_runs(runs, n, sps_of, &s);
	note[0] = 0;
	if (terse) { /* a table row's: only when unsure */
		if (count[top] < n || (n > 1 && spread_rel(&s) > WIDE_SPREAD))
			snprintf(note, len, "unsure: %d of %d runs, spread %.0f %%", count[top], n,
				 100 * spread_rel(&s));
		return pick;
	}
	if (count[top] < n)
		snprintf(note, len, "%d of %d runs say so, %s; ", count[top], n,
			 "the others another kind: not sure");
	if (n > 1 && spread_rel(&s) > WIDE_SPREAD) {
		size_t k = strlen(note);
		snprintf(note + k, len - k, "the runs' samples/s spread %.0f %% (%.0f-%.0f): the "
			 "machine was noisy, take this with care; ",
			 100 * spread_rel(&s), s.min, s.max);
	} else if (n > 1 && count[top] == n) {
		snprintf(note, len, "all %d runs agree (samples/s spread %.0f %%); ", n,
			 100 * spread_rel(&s));
	}
	size_t k = strlen(note);
	if (k >= 2)
		note[k - 2] = 0;
	return pick;
}

/* Runs measured for less than the minimum: a warning for the report and
 * JSON ("" when every run was long enough). */
void short_warning(const struct bench_opts *o, const struct run *S, const struct run *B,
			  int n, char *out, size_t len)
{
	double shortest = 1e300;
	const char *why = "";
	for (int i = 0; i < n; i++) {
		if (S[i].wall < shortest) {
			shortest = S[i].wall;
			why = S[i].ended_by;
		}
		if (B && B[i].wall < shortest) {
			shortest = B[i].wall;
			why = B[i].ended_by;
		}
	}
	out[0] = 0;
	if (shortest < MIN_RUNTIME_S)
		snprintf(out, len, "a run measured only %.2f s (ended by %s; the minimum that means "
			 "something here is %.0f s, --runtime): its figures are mostly noise%s",
			 shortest, why, MIN_RUNTIME_S,
			 o->cache == CACHE_COLD ? "; a cold run cannot be longer than one epoch: "
						  "use more data" : "");
}

