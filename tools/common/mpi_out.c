/* common/mpi_out.c — what rank 0 makes of the ranks' results: histograms merged
 * exactly (each rank's buckets, min, max and sum: stk_hist_merge_buckets
 * gives what stk_hist_merge would), and spreads with the slowest rank. */
#include <stdlib.h>
#include <string.h>

#include "common/mpi.h"

json_t *mpi_hist_json(const struct stk_hist *h)
{
	json_t *a = json_array();
	uint32_t cur = 0;
	uint64_t upper, count;
	while (stk_hist_bucket_next(h, &cur, &upper, &count))
		json_array_append_new(a, json_pack("[I,I]", (json_int_t)upper, (json_int_t)count));
	return json_pack("{s:I,s:I,s:I,s:o}", "min", (json_int_t)stk_hist_min(h), "max",
			 (json_int_t)stk_hist_max(h), "sum", (json_int_t)stk_hist_sum(h), "buckets", a);
}

int mpi_hist_add_json(struct stk_hist *h, const json_t *j)
{
	const json_t *b = json_object_get(j, "buckets");
	size_t n = json_array_size(b);
	if (!n)
		return 0;
	uint64_t *up = calloc(n, sizeof(*up)), *ct = calloc(n, sizeof(*ct));
	if (!up || !ct) {
		free(up);
		free(ct);
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		const json_t *p = json_array_get(b, i);
		up[i] = (uint64_t)json_integer_value(json_array_get(p, 0));
		ct[i] = (uint64_t)json_integer_value(json_array_get(p, 1));
	}
	stk_hist_merge_buckets(h, up, ct, n, (uint64_t)json_integer_value(json_object_get(j, "min")),
			       (uint64_t)json_integer_value(json_object_get(j, "max")),
			       (uint64_t)json_integer_value(json_object_get(j, "sum")));
	free(up);
	free(ct);
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

void mpi_spread_of(const double *v, int n, struct mpi_spread *s)
{
	memset(s, 0, sizeof(*s));
	if (n <= 0)
		return;
	double *c = malloc((size_t)n * sizeof(*c));
	if (!c)
		return;
	memcpy(c, v, (size_t)n * sizeof(*c));
	qsort(c, (size_t)n, sizeof(*c), cmp_double);
	s->min = c[0];
	s->max = c[n - 1];
	s->median = n % 2 ? c[n / 2] : (c[n / 2 - 1] + c[n / 2]) / 2;
	for (int i = 0; i < n; i++)
		if (v[i] == s->min) {
			s->argmin = i;
			break;
		}
	free(c);
}

json_t *mpi_spread_json(const struct mpi_spread *s)
{
	return json_pack("{s:f,s:f,s:f,s:i}", "min", s->min, "median", s->median, "max", s->max,
			 "slowest_rank", s->argmin);
}
