/* bench/stats.c — what `stoker bench`'s repeated runs say together: each
 * figure's spread over the runs (common/spread.c), the median run, the verdict the
 * runs agree on, and the warning for runs too short to mean something.  One
 * run says little on a shared machine: the tables print medians and spreads,
 * never a single run's figure as the result. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <stdio.h>

#include "bench/bench.h"


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
int pick_verdict(const struct stk_verdict *v, const struct run *runs, const struct run *base,
		 int n, bool terse, char *note, size_t len)
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
	/* the paired ratios on both sides of 1.0: the runs disagree on which is faster */
	struct spread r = {0};
	double ratios[BENCH_MAX_REPEAT];
	for (int i = 0; base && i < n; i++)
		ratios[i] = sps_of(&base[i]) > 0 ? sps_of(&runs[i]) / sps_of(&base[i]) : 0;
	if (base && n > 1)
		spread_of(ratios, n, &r);
	bool crosses = r.n > 1 && r.min < 1 && r.max > 1;
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
	}
	if (crosses) {
		size_t k = strlen(note);
		snprintf(note + k, len - k, "the runs disagree on which side is faster: stoker / "
			 "plain loop %.2f-%.2fx; ", r.min, r.max);
	} else if (n > 1 && count[top] == n && spread_rel(&s) <= WIDE_SPREAD) {
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
			 shortest, why, MIN_RUNTIME_S, o->cache == CACHE_COLD && o->runtime <= 0 ?
			 "; cold runs repeat cold epochs up to --runtime" : "");
}


static const char *const format_names[STK_FORMATS] = {"JPEG", "PNG", "WebP"};
static const char *const format_keys[STK_FORMATS] = {"jpeg", "png", "webp"};
/* what each format's fast path is (stk_stats.format_fast_share) */
static const char *const fast_names[STK_FORMATS] = {"restart intervals", "fast path (none: every row checked)",
						    "libwebp's crop/scale"};

int print_formats(const struct stk_stats *st)
{
	uint64_t all = 0;
	int seen = 0;
	for (int f = 0; f < STK_FORMATS; f++) {
		all += st->format_decoded[f];
		seen += st->format_decoded[f] > 0;
	}
	if (!all || (seen == 1 && st->format_decoded[STK_FORMAT_JPEG]))
		return 0;
	for (int f = 0, first = 1; f < STK_FORMATS; f++) {
		uint64_t n = st->format_decoded[f];
		if (!n)
			continue;
		double busy = st->format_decode_busy_s[f];
		printf("  %-27s%-4s %5.1f %% of samples, %.0f images/s per core, %.1f %% %s\n",
		       first ? "formats" : "", format_names[f], 100.0 * (double)n / (double)all,
		       busy > 0 ? (double)n / busy : 0.0, 100 * st->format_fast_share[f],
		       fast_names[f]);
		first = 0;
	}
	printf("  %-27s%.1f %% of the coded data decoded per sample\n", "", 100 *
	       st->decode_entropy_share);
	return 1;
}

json_t *formats_json(const struct stk_stats *st)
{
	json_t *j = json_object();
	for (int f = 0; f < STK_FORMATS; f++) {
		uint64_t n = st->format_decoded[f];
		double busy = st->format_decode_busy_s[f];
		if (n)
			json_object_set_new(j, format_keys[f],
					    json_pack("{s:I,s:f,s:f,s:f}", "decoded", (json_int_t)n,
						      "decode_busy_s", busy, "images_per_s_per_core",
						      busy > 0 ? (double)n / busy : 0.0, "fast_share",
						      st->format_fast_share[f]));
	}
	return j;
}
