/* common/spread.c — what repeated measurements say together, for every subcommand
 * that repeats (bench --repeat, disk --repeat): the median, the spread
 * (min-max) and a 95 % interval (Student's t over the mean, from three runs
 * on). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/spread.h"

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
	double sorted[SPREAD_MAX], sum = 0;
	int k = n < SPREAD_MAX ? n : SPREAD_MAX;
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
