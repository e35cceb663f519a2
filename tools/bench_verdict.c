/* bench_verdict.c — the last lines of `stoker bench`: the library's verdict
 * (stk_loader_diagnose: which part of the input pipeline holds the run back,
 * the evidence, the change to try, the device behind PATH) as text and JSON;
 * and the sweep's SVG chart. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "bench.h"
#include "cli.h"

json_t *verdict_json(const struct stk_verdict *v)
{
	json_t *j = json_pack("{s:s,s:s,s:s,s:f,s:f,s:f,s:f}", "kind", v->name, "evidence",
			      v->evidence, "try", v->advice, "window_s", v->window_s, "stall_ratio",
			      v->stall_ratio, "decode_busy", v->decode_busy, "inflight_mean",
			      v->inflight_mean);
	if (v->device_sampled)
		json_object_set_new(j, "device",
				    json_pack("{s:s,s:f,s:f,s:f,s:f,s:f,s:f}", "name", v->device,
					      "r_s", v->dev_r_s, "read_mb_s", v->dev_read_mb_s,
					      "r_await_ms", v->dev_r_await_ms, "aqu_sz",
					      v->dev_aqu_sz, "util", v->dev_util, "share",
					      v->dev_share));
	return j;
}

void verdict_print(const struct stk_verdict *v)
{
	if (v->device_sampled)
		printf("  device %-19s r/s %.0f, %.1f MB/s, r_await %.2f ms, aqu-sz %.1f, %%util %.0f\n",
		       v->device, v->dev_r_s, v->dev_read_mb_s, v->dev_r_await_ms, v->dev_aqu_sz,
		       v->dev_util);
	printf("\n  verdict: %s: %s.\n  try: %s.\n", v->name, v->evidence, v->advice);
}

int write_svg(const char *file, const char *title, const char *xlabel, const char *ylabel,
	      const double *xs, const double *ys, int n)
{
	FILE *f = fopen(file, "w");
	if (!f)
		return -errno;
	const double W = 640, H = 400, L = 70, R = 20, T = 40, B = 50;
	double xmin = xs[0], xmax = xs[0], ymax = 0;
	for (int i = 0; i < n; i++) {
		xmin = xs[i] < xmin ? xs[i] : xmin;
		xmax = xs[i] > xmax ? xs[i] : xmax;
		ymax = ys[i] > ymax ? ys[i] : ymax;
	}
	if (xmax == xmin)
		xmax = xmin + 1;
	if (ymax <= 0)
		ymax = 1;
	ymax *= 1.1;
	fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
		   "font-family=\"sans-serif\" font-size=\"12\">\n", W, H);
	fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
	fprintf(f, "<text x=\"%.0f\" y=\"24\" text-anchor=\"middle\" font-size=\"15\">%s</text>\n",
		W / 2, title);
	fprintf(f, "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"black\"/>\n", L,
		H - B, W - R, H - B);
	fprintf(f, "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"black\"/>\n", L, T,
		L, H - B);
	fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">%s</text>\n", (L + W - R) / 2,
		H - 10, xlabel);
	fprintf(f, "<text x=\"16\" y=\"%.0f\" text-anchor=\"middle\" transform=\"rotate(-90 16 %.0f)\">"
		   "%s</text>\n", (T + H - B) / 2, (T + H - B) / 2, ylabel);
	for (int k = 0; k <= 4; k++) { /* y grid */
		double yv = ymax * k / 4, y = H - B - (H - B - T) * k / 4;
		fprintf(f, "<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" stroke=\"#ddd\"/>"
			   "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">%.0f</text>\n",
			L, y, W - R, y, L - 6, y + 4, yv);
	}
	fprintf(f, "<polyline fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"2\" points=\"");
	for (int i = 0; i < n; i++)
		fprintf(f, "%.1f,%.1f ", L + (W - L - R) * (xs[i] - xmin) / (xmax - xmin),
			H - B - (H - B - T) * ys[i] / ymax);
	fprintf(f, "\"/>\n");
	for (int i = 0; i < n; i++) {
		double x = L + (W - L - R) * (xs[i] - xmin) / (xmax - xmin);
		double y = H - B - (H - B - T) * ys[i] / ymax;
		fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"#1f77b4\"/>"
			   "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%g</text>\n",
			x, y, x, H - B + 16, xs[i]);
	}
	fprintf(f, "</svg>\n");
	return fclose(f) ? -errno : 0;
}
