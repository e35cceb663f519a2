/* bench_verdict.c — the last line of `stoker bench`: which part of the input
 * pipeline holds the run back (the consumer, storage, decode, the I/O threads
 * or the settings), with the evidence and the change to try; plus the device
 * behind PATH sampled around the run, and the sweep's SVG chart. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "bench.h"
#include "cli.h"

static int read_disk(const char *name, struct stk_diskstat *out)
{
	struct stk_diskstat all[256];
	all[0].size = sizeof(all[0]);
	int n = stk_sys_diskstats("", all, 256);
	for (int i = 0; i < n && i < 256; i++)
		if (!strcmp(all[i].name, name)) {
			*out = all[i];
			return 0;
		}
	return -ENODEV;
}

void disk_probe_start(struct disk_probe *d, const char *path)
{
	struct stk_blockdev bd = {.size = sizeof(bd)};
	memset(d, 0, sizeof(*d));
	if (stk_sys_blockdev_for_path("", path, &bd) == 0 && read_disk(bd.disk, &d->before) == 0) {
		snprintf(d->name, sizeof(d->name), "%s", bd.disk);
		d->t0 = now_s();
		d->ok = true;
	}
}

void disk_probe_stop(struct disk_probe *d)
{
	if (!d->ok)
		return;
	d->t1 = now_s();
	d->rates.size = sizeof(d->rates);
	if (read_disk(d->name, &d->after) ||
	    stk_sys_disk_rates(&d->before, &d->after, (d->t1 - d->t0) * 1000, &d->rates))
		d->ok = false;
}

void bench_verdict(const struct bench_opts *o, const struct run *r, const struct disk_probe *d,
		   struct verdict *v)
{
	const struct stk_stats *st = &r->st;
	double stall = st->stall_ratio, inflight = st->inflight_mean, qd = (double)o->qd;
	double decode_busy = st->decode_threads && r->wall > 0
				     ? st->decode_busy_s / (r->wall * st->decode_threads)
				     : 0;
	bool null_engine = o->engine == STK_ENGINE_NULL;
	bool sampled = d->ok && !null_engine;
	/* the device is ours to blame only when our reads reached it: page-cache
	 * hits never do, and others may be keeping it busy */
	double ours = r->wall > 0 ? (double)r->bytes / r->wall : 0;
	bool from_disk = sampled && ours > 0 && d->rates.rkb_s * 1024 >= 0.5 * ours;
	bool disk_busy = from_disk && d->rates.util >= 80;
	memset(v, 0, sizeof(*v));
	if (stall < 0.05) {
		v->kind = "consumer-bound";
		snprintf(v->evidence, sizeof(v->evidence),
			 "the consumer waited %.1f %% of the time: batches were ready when asked for",
			 stall * 100);
		snprintf(v->advice, sizeof(v->advice),
			 "nothing in the input pipeline: the training step (or --compute-ms) sets the pace");
	} else if (decode_busy >= 0.8) {
		v->kind = "decode-bound";
		snprintf(v->evidence, sizeof(v->evidence),
			 "%u decode threads busy %.0f %% of the time; %.1f of %.0f reads in flight",
			 st->decode_threads, decode_busy * 100, inflight, qd);
		snprintf(v->advice, sizeof(v->advice),
			 "more --decode-threads (cores), a smaller --size, or data stored smaller");
	} else if (disk_busy) {
		v->kind = "storage-bound";
		snprintf(v->evidence, sizeof(v->evidence),
			 "%s %%util %.0f, aqu-sz %.1f, r_await %.2f ms, %.0f MB/s; %.1f of %.0f reads "
			 "in flight",
			 d->name, d->rates.util, d->rates.aqu_sz, d->rates.r_await,
			 d->rates.rkb_s * 1.024 / 1000, inflight, qd);
		snprintf(v->advice, sizeof(v->advice),
			 "faster storage, samples packed into shards, or memory for the page cache; "
			 "`stoker disk PATH` measures the device");
	} else if (o->qd <= 4 || o->prefetch <= 1) {
		v->kind = "configuration";
		snprintf(v->evidence, sizeof(v->evidence),
			 "queue depth %lld and prefetch %lld leave %.1f reads in flight while the "
			 "consumer waits %.0f %% of the time",
			 (long long)o->qd, (long long)o->prefetch, inflight, stall * 100);
		snprintf(v->advice, sizeof(v->advice), "raise --queue-depth (64-256) and --prefetch (4)");
	} else if (inflight >= 0.8 * qd && (!sampled || from_disk)) {
		v->kind = "storage-bound";
		snprintf(v->evidence, sizeof(v->evidence),
			 "%.1f of %.0f reads in flight: every read waits on storage (%s)", inflight, qd,
			 null_engine ? "the null engine's simulated latency"
			 : !sampled  ? "no block device to sample: a network or virtual filesystem"
				     : "the device reports under 80 % busy: latency, not bandwidth");
		snprintf(v->advice, sizeof(v->advice),
			 "a deeper --queue-depth while the device has headroom, else faster storage");
	} else {
		v->kind = "io-thread-bound";
		snprintf(v->evidence, sizeof(v->evidence),
			 "the consumer waited %.0f %% of the time while the reads came from the page "
			 "cache (%.1f of %.0f in flight): the I/O threads' copies are the limit",
			 stall * 100, inflight, qd);
		snprintf(v->advice, sizeof(v->advice), "more --io-threads (one per free core)");
	}
}

json_t *verdict_json(const struct verdict *v, const struct disk_probe *d)
{
	json_t *j = json_pack("{s:s,s:s,s:s}", "kind", v->kind, "evidence", v->evidence, "try",
			      v->advice);
	if (d->ok)
		json_object_set_new(j, "device",
				    json_pack("{s:s,s:f,s:f,s:f,s:f,s:f}", "name", d->name, "r_s",
					      d->rates.r_s, "rkb_s", d->rates.rkb_s, "r_await",
					      d->rates.r_await, "aqu_sz", d->rates.aqu_sz, "util",
					      d->rates.util));
	return j;
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
