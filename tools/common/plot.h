/* common/plot.h — the CLI's SVG (and PNG) charts (common/plot.c). */
#ifndef STK_PLOT_H
#define STK_PLOT_H

#include <stdbool.h>
#include <stddef.h>

/* A line over a swept parameter: point i at (xs[i], ys[i]), its spread
 * ylo[i]..yhi[i] (may be NULL) and its mark (a verdict; may be NULL). */
struct plot {
	const char *file, *title, *xlabel;
	const char *yunit;   /* "samples/s", "MB/s": the axis label gets k or M */
	const char *caption; /* the data and the run, after the machine */
	const double *xs, *ys, *ylo, *yhi;
	const char *const *marks;
	const char *marks_title; /* the legend's heading ["verdict"] */
	int n;
};

/* Grouped bars: ys[g * nseries + s] for group g (a pattern) and series s (a
 * path); ylo/yhi may be NULL. */
struct plot_bars {
	const char *file, *title, *xlabel, *yunit, *caption, *series_title;
	const char *const *groups, *const *series;
	const double *ys, *ylo, *yhi;
	int ngroups, nseries;
};

/* Write the SVG to p->file, and a PNG beside it (FILE.png for FILE.svg)
 * when rsvg-convert is installed: its path into png ("" if none).  0 or
 * -errno. */
int plot_line(const struct plot *p, char *png, size_t pnglen);
int plot_bars(const struct plot_bars *p, char *png, size_t pnglen);

/* A round step (1, 2 or 5 × 10^k) that cuts range into about `want` parts. */
double plot_nice_step(double range, int want);
/* The unit's scale and label for values up to max: "k samples/s" ×1e3... */
void plot_unit(double max, const char *unit, double *scale, char *label, size_t len);
/* Whether xs are powers of two spanning 8× or more: a log2 axis. */
bool plot_log2(const double *xs, int n);

#endif
