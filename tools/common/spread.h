/* common/spread.h — the median, min-max and 95 % interval of repeated runs (common/spread.c). */
#ifndef STK_SPREAD_H
#define STK_SPREAD_H

#include <jansson.h>
#include <stdbool.h>

#define SPREAD_MAX 64 /* runs at most */
/* The shortest measured run whose figure means something on a shared
 * machine: `--runtime`'s default in bench, and the line under which a run of
 * bench or disk is said to be too short. */
#define MIN_RUNTIME_S 2.0
#define MIN_RUNTIME "2"

struct spread {
	int n;
	double median, min, max, mean, lo95, hi95;
	bool has_ci;
};
/* The spread of v[0..n) (n at most SPREAD_MAX). */
void spread_of(const double *v, int n, struct spread *s);
/* (max - min) / median: 0.2 is a 20 % spread. */
double spread_rel(const struct spread *s);
json_t *spread_json(const struct spread *s);

#endif
