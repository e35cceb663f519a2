/* common/plot.c — the CLI's charts: SVG written here, and PNG beside it when
 * librsvg's rsvg-convert is on PATH (Debian: librsvg2-bin).  Axes that read
 * at a glance: round ticks (1-2-5 steps) with the unit's prefix (k, M),
 * a log2 x axis for powers-of-two parameters, every point's spread as an
 * error bar, its verdict as the marker's colour (with a legend), and a
 * caption naming the machine and the data.  Two kinds: a line over a swept
 * parameter (`stoker bench --sweep`) and grouped bars (`stoker disk --plot`:
 * one group per pattern, one bar per path). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/plot.h"

extern char **environ;

#define W 720.0
#define H 440.0
#define L 80.0
#define R 170.0 /* room for the legend */
#define T 44.0
#define B 78.0  /* room for the x labels and the caption */

static const char *const palette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
				      "#9467bd", "#8c564b", "#e377c2", "#17becf"};

double plot_nice_step(double range, int want)
{
	if (!(range > 0) || want < 1)
		return 1;
	double raw = range / want, mag = pow(10, floor(log10(raw))), f = raw / mag;
	double nice = f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10;
	return nice * mag;
}

void plot_unit(double max, const char *unit, double *scale, char *label, size_t len)
{
	const char *prefix = "";
	*scale = 1;
	if (max >= 1e6) {
		*scale = 1e6;
		prefix = "M ";
	} else if (max >= 1e4) {
		*scale = 1e3;
		prefix = "k ";
	}
	snprintf(label, len, "%s%s", prefix, unit);
}

bool plot_log2(const double *xs, int n)
{
	if (n < 3)
		return false;
	double lo = xs[0], hi = xs[0];
	for (int i = 0; i < n; i++) {
		if (!(xs[i] > 0) || fabs(log2(xs[i]) - round(log2(xs[i]))) > 1e-9)
			return false;
		lo = fmin(lo, xs[i]);
		hi = fmax(hi, xs[i]);
	}
	return hi / lo >= 8;
}

/* Text safe for XML. */
static void xml(FILE *f, const char *s)
{
	for (; s && *s; s++) {
		if (*s == '<')
			fputs("&lt;", f);
		else if (*s == '>')
			fputs("&gt;", f);
		else if (*s == '&')
			fputs("&amp;", f);
		else if (*s == '"')
			fputs("&quot;", f);
		else
			fputc(*s, f);
	}
}

static void caption_text(char *buf, size_t len, const char *data)
{
	struct utsname u;
	char host[256] = "this machine";
	if (uname(&u) == 0)
		snprintf(host, sizeof(host), "%.64s (Linux %.64s, %ld CPUs)", u.nodename, u.release,
			 sysconf(_SC_NPROCESSORS_ONLN));
	snprintf(buf, len, "%s; %s", host, data ? data : "");
}

static void header(FILE *f, const char *title)
{
	fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
		   "font-family=\"sans-serif\" font-size=\"12\">\n"
		   "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
		   "<text x=\"%.0f\" y=\"26\" text-anchor=\"middle\" font-size=\"15\">",
		W, H, (L + W - R) / 2);
	xml(f, title);
	fputs("</text>\n", f);
}

/* The y axis from 0 to a round top above ymax: grid, tick labels, unit. */
static double y_axis(FILE *f, double ymax, const char *unit)
{
	double scale;
	char label[64];
	plot_unit(ymax, unit, &scale, label, sizeof(label));
	double step = plot_nice_step(ymax > 0 ? ymax : 1, 5);
	double top = ceil((ymax > 0 ? ymax : 1) * 1.05 / step) * step;
	for (double v = 0; v <= top + step / 2; v += step) {
		double y = H - B - (H - B - T) * v / top;
		fprintf(f, "<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" stroke=\"#ddd\"/>"
			   "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\" class=\"ytick\">%g</text>\n",
			L, y, W - R, y, L - 6, y + 4, v / scale);
	}
	fprintf(f, "<text x=\"18\" y=\"%.0f\" text-anchor=\"middle\" transform=\"rotate(-90 18 %.0f)\">",
		(T + H - B) / 2, (T + H - B) / 2);
	xml(f, label);
	fputs("</text>\n", f);
	fprintf(f, "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"black\"/>\n"
		   "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"black\"/>\n",
		L, H - B, W - R, H - B, L, T, L, H - B);
	return top;
}


/* The legend: one coloured square and name per entry. */
static void legend(FILE *f, const char *title, const char *const *names, int n)
{
	double x = W - R + 16, y = T + 6;
	fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" font-weight=\"bold\">", x, y);
	xml(f, title);
	fputs("</text>\n", f);
	for (int i = 0; i < n; i++) {
		y += 18;
		fprintf(f, "<rect x=\"%.0f\" y=\"%.0f\" width=\"10\" height=\"10\" fill=\"%s\"/>"
			   "<text x=\"%.0f\" y=\"%.0f\" class=\"legend\">",
			x, y - 9, palette[i % 8], x + 16, y);
		xml(f, names[i]);
		fputs("</text>\n", f);
	}
}

/* PNG beside the SVG with rsvg-convert, when it is installed. */
static void to_png(const char *svg, char *png, size_t len)
{
	png[0] = 0;
	char out[4096];
	size_t sl = strlen(svg);
	if (sl < 4 || sl + 1 > sizeof(out))
		return;
	snprintf(out, sizeof(out), "%.*s.png", (int)(sl > 4 && !strcmp(svg + sl - 4, ".svg") ? sl - 4
											       : sl),
		 svg);
	char *const argv[] = {"rsvg-convert", "-o", out, (char *)svg, NULL};
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
	pid_t pid;
	int rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (rc)
		return; /* not installed: SVG only */
	int st;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		snprintf(png, len, "%s", out);
}

/* The caption, the end of the SVG, and the PNG beside it: 0 or -errno. */
static int finish(FILE *f, const char *caption, const char *svg, char *png, size_t pnglen)
{
	char cap[1024];
	caption_text(cap, sizeof(cap), caption);
	fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" font-size=\"10\" fill=\"#555\" class=\"caption\">", L,
		H - 10);
	xml(f, cap);
	fputs("</text>\n</svg>\n", f);
	if (fclose(f))
		return -errno;
	to_png(svg, png, pnglen);
	return 0;
}

int plot_line(const struct plot *p, char *png, size_t pnglen)
{
	png[0] = 0;
	if (p->n < 1)
		return -EINVAL;
	FILE *f = fopen(p->file, "w");
	if (!f)
		return -errno;
	bool lg = plot_log2(p->xs, p->n);
	double xmin = p->xs[0], xmax = p->xs[0], ymax = 0;
	for (int i = 0; i < p->n; i++) {
		xmin = fmin(xmin, p->xs[i]);
		xmax = fmax(xmax, p->xs[i]);
		ymax = fmax(ymax, fmax(p->ys[i], p->yhi ? p->yhi[i] : p->ys[i]));
	}
	double ax = lg ? log2(xmin) : xmin, bx = lg ? log2(xmax) : xmax;
	if (bx == ax) {
		ax -= 1;
		bx += 1;
	}
	header(f, p->title);
	double top = y_axis(f, ymax, p->yunit);
#define PX(x) (L + 20 + (W - L - R - 40) * (((lg ? log2(x) : (x)) - ax) / (bx - ax)))
#define PY(y) (H - B - (H - B - T) * (y) / top)
	/* x ticks: every power of two on a log2 axis, else round steps */
	if (lg) {
		for (double v = pow(2, ceil(log2(xmin))); v <= xmax * 1.0001; v *= 2)
			fprintf(f, "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\" class=\"xtick\">%g"
				   "</text>\n", PX(v), H - B + 16, v);
	} else {
		double step = plot_nice_step(xmax - xmin > 0 ? xmax - xmin : 1, 6);
		for (double v = ceil(xmin / step) * step; v <= xmax + step / 1e6; v += step)
			fprintf(f, "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\" class=\"xtick\">%g"
				   "</text>\n", PX(v), H - B + 16, v);
	}
	fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">", (L + W - R) / 2, H - B + 50);
	xml(f, p->xlabel);
	fprintf(f, "%s</text>\n", lg ? " (log2 scale)" : "");
	fprintf(f, "<polyline fill=\"none\" stroke=\"#888\" stroke-width=\"1.5\" points=\"");
	for (int i = 0; i < p->n; i++)
		fprintf(f, "%.1f,%.1f ", PX(p->xs[i]), PY(p->ys[i]));
	fputs("\"/>\n", f);
	/* the verdicts seen, for the colours and the legend */
	const char *kinds[8];
	int nk = 0;
	for (int i = 0; i < p->n; i++) {
		const char *k = p->marks ? p->marks[i] : "";
		int j = 0;
		while (j < nk && strcmp(kinds[j], k))
			j++;
		if (j == nk && nk < 8)
			kinds[nk++] = k;
		const char *colour = palette[j % 8];
		double x = PX(p->xs[i]), y = PY(p->ys[i]);
		if (p->ylo && p->yhi)
			fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
				   "class=\"errbar\"/><line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
				   "stroke=\"%s\"/><line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
				   "stroke=\"%s\"/>\n",
				x, PY(p->ylo[i]), x, PY(p->yhi[i]), colour, x - 4, PY(p->ylo[i]), x + 4,
				PY(p->ylo[i]), colour, x - 4, PY(p->yhi[i]), x + 4, PY(p->yhi[i]), colour);
		fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"5\" fill=\"%s\"><title>%g: %.0f",
			x, y, colour, p->xs[i], p->ys[i]);
		if (k[0]) {
			fputs(", ", f);
			xml(f, k);
		}
		fputs("</title></circle>\n", f);
	}
#undef PX
#undef PY
	if (p->marks)
		legend(f, p->marks_title ? p->marks_title : "verdict", kinds, nk);
	return finish(f, p->caption, p->file, png, pnglen);
}

int plot_bars(const struct plot_bars *p, char *png, size_t pnglen)
{
	png[0] = 0;
	if (p->ngroups < 1 || p->nseries < 1)
		return -EINVAL;
	FILE *f = fopen(p->file, "w");
	if (!f)
		return -errno;
	double ymax = 0;
	for (int i = 0; i < p->ngroups * p->nseries; i++)
		ymax = fmax(ymax, fmax(p->ys[i], p->yhi ? p->yhi[i] : 0));
	header(f, p->title);
	double top = y_axis(f, ymax, p->yunit);
	double gw = (W - L - R - 20) / p->ngroups, bw = gw * 0.8 / p->nseries;
	/* "randread 4 KiB qd32": the first word on one line and the rest under
	 * it; where even that is wider than a group (about 7 px a character),
	 * every other label goes lower, in a smaller font, so that neighbours'
	 * labels never run into each other */
	size_t widest = 0;
	for (int g = 0; g < p->ngroups; g++) {
		const char *lab = p->groups[g], *sp = strchr(lab, ' ');
		size_t a = sp ? (size_t)(sp - lab) : strlen(lab), b = sp ? strlen(sp + 1) : 0;
		widest = a > widest ? a : b > widest ? b : widest;
	}
	bool stagger = (double)widest * 7 > gw * 0.95;
	for (int g = 0; g < p->ngroups; g++) {
		double gx = L + 10 + g * gw;
		const char *lab = p->groups[g], *sp = strchr(lab, ' ');
		char first[64];
		snprintf(first, sizeof(first), "%.*s", sp ? (int)(sp - lab) : (int)strlen(lab), lab);
		fprintf(f, "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\" class=\"xtick\"%s>",
			gx + gw / 2, H - B + 16 + (stagger && g % 2 ? 26 : 0),
			stagger ? " font-size=\"10\"" : "");
		xml(f, first);
		if (sp) {
			fprintf(f, "<tspan x=\"%.1f\" dy=\"1.2em\">", gx + gw / 2);
			xml(f, sp + 1);
			fputs("</tspan>", f);
		}
		fputs("</text>\n", f);
		for (int s = 0; s < p->nseries; s++) {
			int i = g * p->nseries + s;
			double x = gx + gw * 0.1 + s * bw, y = H - B - (H - B - T) * p->ys[i] / top;
			fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
				   "fill=\"%s\"><title>", x, y, bw * 0.9, H - B - y, palette[s % 8]);
			xml(f, p->series[s]);
			fprintf(f, " %s: %.0f</title></rect>\n", p->groups[g], p->ys[i]);
			if (p->ylo && p->yhi && p->yhi[i] > p->ylo[i]) {
				double cx = x + bw * 0.45;
				fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
					   "stroke=\"black\" class=\"errbar\"/>\n",
					cx, H - B - (H - B - T) * p->ylo[i] / top, cx,
					H - B - (H - B - T) * p->yhi[i] / top);
			}
		}
	}
	if (!stagger) { /* staggered labels take its room; they name themselves */
		fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">", (L + W - R) / 2,
			H - B + 50);
		xml(f, p->xlabel);
		fputs("</text>\n", f);
	}
	legend(f, p->series_title, p->series, p->nseries);
	return finish(f, p->caption, p->file, png, pnglen);
}
