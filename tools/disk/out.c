/* disk/out.c — how `stoker disk` shows its results: a table for people (one
 * column per PATH, each later column with its ratio to the first) and JSON
 * for machines (jansson; "schema_version" says which shape, see
 * tests/disk.schema.json).  Rates are SI (MB/s = 10^6 bytes/s, as fio's). */
#include "disk/disk.h"
#include "common/plot.h"

#include <errno.h>
#include <math.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#define SCHEMA_VERSION 1

static const char *kind_name[] = {"folder", "file", "block device"};

/* The library's formatter for typed sizes (one for every command). */
const char *dk_fmt_iec(char *buf, size_t len, uint64_t b)
{
	return stk_fmt_ibytes(buf, len, (double)b);
}

static double mbps(const struct dk_result *r)
{
	return r->seconds > 0 ? (double)r->bytes / r->seconds / 1e6 : 0;
}

static double iops(const struct dk_result *r)
{
	return r->seconds > 0 ? (double)r->ios / r->seconds : 0;
}

static bool usable(const struct dk_result *r)
{
	return r->ran && !r->skipped && !r->err && r->ios;
}

static void case_title(char *buf, size_t len, const struct dk_case *c)
{
	char bs[24];
	if (c->pat == DK_SMALLFILES)
		snprintf(buf, len, "%s  whole files, qd %u, %u thread%s", dk_pattern_name[c->pat],
			 c->qd, c->threads, c->threads > 1 ? "s" : "");
	else
		snprintf(buf, len, "%s  %s blocks, qd %u, %u thread%s", dk_pattern_name[c->pat],
			 dk_fmt_iec(bs, sizeof(bs), c->bs), c->qd, c->threads,
			 c->threads > 1 ? "s" : "");
}

/* --- the table ----------------------------------------------------------------- */

enum row {
	R_MBPS, R_IOPS, R_MIN, R_MEAN, R_P50, R_P90, R_P99, R_P999, R_MAX,
	R_DURABLE, R_WRITE, R_FSYNC, R_READBACK, R_FILES, R_CREATE, R_CACHE, R_ENGINE, R_NROWS
};

static const char *row_name(enum row k, enum dk_pattern p)
{
	static const char *names[R_NROWS] = {
		"MB/s", "IOPS", "lat min", "lat mean", "lat p50", "lat p90", "lat p99",
		"lat p99.9", "lat max", "s to durable", "  writes s", "  fsync s",
		"read back MB/s", "files", "create s", "cache", "engine"};
	if (p == DK_SMALLFILES && k == R_IOPS)
		return "files/s";
	if (p == DK_CHECKPOINT && k == R_MBPS)
		return "MB/s durable";
	return names[k];
}

static bool row_applies(enum row k, enum dk_pattern p)
{
	if (k >= R_DURABLE && k <= R_READBACK)
		return p == DK_CHECKPOINT;
	if (k == R_FILES || k == R_CREATE)
		return p == DK_SMALLFILES;
	return true;
}

/* The row's value for r, as a number (for the ratio); false if none. */
static bool row_value(enum row k, const struct dk_result *r, double *v)
{
	static const double pct[] = {50, 90, 99, 99.9};
	switch (k) {
	case R_MBPS: *v = mbps(r); return true;
	case R_IOPS: *v = iops(r); return true;
	case R_MIN: *v = (double)stk_hist_min(r->hist); return true;
	case R_MEAN: *v = stk_hist_mean(r->hist); return true;
	case R_P50: case R_P90: case R_P99: case R_P999:
		*v = (double)stk_hist_percentile(r->hist, pct[k - R_P50]);
		return true;
	case R_MAX: *v = (double)stk_hist_max(r->hist); return true;
	case R_DURABLE: *v = r->seconds; return true;
	case R_WRITE: *v = r->write_s; return true;
	case R_FSYNC: *v = r->fsync_s; return true;
	case R_READBACK:
		*v = r->read_s > 0 ? (double)r->read_bytes / r->read_s / 1e6 : 0;
		return true;
	case R_FILES: *v = (double)r->nfiles; return true;
	case R_CREATE: *v = r->create_s; return true;
	default: return false;
	}
}

/* The rounds' spread of a rate row (MB/s, IOPS) of (t, c); false if fewer
 * than two usable rounds. */
static bool rounds_spread(const struct dk_report *rp, uint32_t t, uint32_t c, enum row k,
			  struct spread *s)
{
	double v[SPREAD_MAX];
	int n = 0;
	if (rp->repeat < 2 || (k != R_MBPS && k != R_IOPS))
		return false;
	for (uint32_t r = 0; r < rp->repeat && n < SPREAD_MAX; r++) {
		const struct dk_result *x = &rp->all[((size_t)r * rp->ntargets + t) * rp->ncases + c];
		if (usable(x))
			v[n++] = k == R_MBPS ? mbps(x) : iops(x);
	}
	spread_of(v, n, s);
	return n >= 2;
}

const struct dk_result *dk_median_round(const struct dk_report *rp, uint32_t t, uint32_t c)
{
	const struct dk_result *first = &rp->all[(size_t)t * rp->ncases + c], *best = first;
	struct spread s;
	if (!rounds_spread(rp, t, c, R_MBPS, &s))
		return first;
	for (uint32_t r = 0; r < rp->repeat; r++) {
		const struct dk_result *x = &rp->all[((size_t)r * rp->ntargets + t) * rp->ncases + c];
		if (usable(x) && (!usable(best) || fabs(mbps(x) - s.median) < fabs(mbps(best) - s.median)))
			best = x;
	}
	return best;
}

static void cell(char *buf, size_t len, enum row k, const struct dk_report *rp, uint32_t ti,
		 uint32_t ci)
{
	const struct dk_result *r = &rp->res[(size_t)ti * rp->ncases + ci], *first = &rp->res[ci];
	if (!r->ran) {
		snprintf(buf, len, "-");
		return;
	}
	if (r->skipped || r->err) {
		snprintf(buf, len, "%s", k != R_MBPS ? "" : r->skipped ? "skipped" : "failed");
		return;
	}
	if (k == R_CACHE || k == R_ENGINE) {
		snprintf(buf, len, "%s", k == R_CACHE ? r->cache : r->engine ? r->engine : "");
		return;
	}
	double v = 0, f = 0;
	row_value(k, r, &v);
	struct spread sp;
	bool spread = rounds_spread(rp, ti, ci, k, &sp);
	if (spread)
		v = sp.median;
	if (k >= R_MIN && k <= R_MAX)
		fmt_ns(buf, len, v);
	else if (k == R_MBPS || k == R_READBACK)
		snprintf(buf, len, "%.1f", v);
	else if (k == R_IOPS || k == R_FILES)
		snprintf(buf, len, "%.0f", v);
	else
		snprintf(buf, len, "%.2f", v);
	if (spread) {
		size_t n = strlen(buf);
		snprintf(buf + n, len - n, k == R_MBPS ? " (%.1f-%.1f)" : " (%.0f-%.0f)", sp.min, sp.max);
	}
	struct spread fs;
	if (first && first != r && usable(first) && row_value(k, first, &f) && f > 0) {
		if (rounds_spread(rp, 0, ci, k, &fs))
			f = fs.median;
		size_t n = strlen(buf);
		snprintf(buf + n, len - n, "  %.2fx", v / f);
	}
}

/* The engine the cases ran on ("io_uring", "psync", or both where they
 * differ), and a note when that is not the one asked for. */
static const char *engine_ran(const struct dk_report *rp, char *note, size_t len)
{
	const char *asked = rp->cf->engine == DK_URING ? "io_uring" : "psync", *ran = NULL;
	bool mixed = false;
	for (uint32_t i = 0; i < rp->ntargets * rp->ncases; i++) {
		const struct dk_result *r = &rp->res[i];
		if (!r->ran || !r->engine)
			continue;
		mixed |= ran && strcmp(ran, r->engine);
		ran = ran ? ran : r->engine;
	}
	if (!ran)
		ran = dk_engine_ran(rp->cf->engine) == DK_URING ? "io_uring" : "psync";
	if (mixed)
		ran = "io_uring and psync";
	snprintf(note, len, "%s", strcmp(ran, asked) ? " (io_uring asked: unavailable here)" : "");
	return ran;
}

/* A column's head: its PATH, and for the later ones what their "1.23x"
 * figures compare with. */
static void col_head(char *buf, size_t len, const struct dk_report *rp, uint32_t ti)
{
	snprintf(buf, len, "[%u] %s%s", ti + 1, rp->targets[ti].path, ti ? " (and its ratio to [1])" : "");
}

/* One line per case and PATH before the details, as fio's group report:
 * the pattern, MB/s, IOPS (files/s for smallfiles), p50 and p99 latency. */
static void print_summary(FILE *f, const struct dk_report *rp)
{
	char t[64], a[24], b[24], p99[24], m[32], io[32];
	fprintf(f, "\n  %-30s %-5s %12s %12s %11s %11s\n", "pattern", "PATH", "MB/s", "IOPS",
		"lat p50", "lat p99");
	for (uint32_t ci = 0; ci < rp->ncases; ci++) {
		const struct dk_case *cs = &rp->cases[ci];
		int k = snprintf(t, sizeof(t), "%s", dk_pattern_name[cs->pat]);
		if (cs->pat != DK_SMALLFILES)
			k += snprintf(t + k, sizeof(t) - (size_t)k, " %s",
				      dk_fmt_iec(a, sizeof(a), cs->bs));
		k += snprintf(t + k, sizeof(t) - (size_t)k, " qd%u", cs->qd);
		if (cs->threads > 1)
			snprintf(t + k, sizeof(t) - (size_t)k, " %u threads", cs->threads);
		for (uint32_t ti = 0; ti < rp->ntargets; ti++) {
			const struct dk_result *r = &rp->res[(size_t)ti * rp->ncases + ci];
			if (!r->ran)
				continue;
			snprintf(a, sizeof(a), "[%u]", ti + 1);
			if (!usable(r)) {
				fprintf(f, "  %-30s %-5s %s\n", ti ? "" : t, a,
					r->skipped ? "skipped (below)" : "failed (below)");
				continue;
			}
			cell(m, sizeof(m), R_MBPS, rp, ti, ci);
			cell(io, sizeof(io), R_IOPS, rp, ti, ci);
			m[strcspn(m, " ")] = 0; /* the median alone: spreads and ratios below */
			io[strcspn(io, " ")] = 0;
			fprintf(f, "  %-30s %-5s %12s %12s %11s %11s\n", ti ? "" : t, a, m, io,
				fmt_ns(b, sizeof(b), (double)stk_hist_percentile(r->hist, 50)),
				fmt_ns(p99, sizeof(p99), (double)stk_hist_percentile(r->hist, 99)));
		}
	}
	bool sf = false, ck = false;
	for (uint32_t ci = 0; ci < rp->ncases; ci++) {
		sf |= rp->cases[ci].pat == DK_SMALLFILES;
		ck |= rp->cases[ci].pat == DK_CHECKPOINT;
	}
	if (sf || ck)
		fprintf(f, "  (%s%s%s)\n", sf ? "smallfiles: IOPS are files/s" : "", sf && ck ? "; " : "",
			ck ? "checkpoint: MB/s to durable, fsync included" : "");
}

void dk_print_table(FILE *f, const struct dk_report *rp)
{
	char b[64];
	char note[64];
	const char *eng = engine_ran(rp, note, sizeof(note));
	fprintf(f, "stoker disk %s: %s set, %s engine%s%s\n", stk_version(), rp->set, eng, note,
		rp->interrupted ? " (INTERRUPTED: partial results)" : "");
	if (rp->repeat > 1)
		fprintf(f, "  %u rounds, the PATHs alternating: MB/s and IOPS are the median (min-max), "
			   "latencies the median round's\n", rp->repeat);
	for (uint32_t i = 0; i < rp->ntargets; i++) {
		const struct dk_target *t = &rp->targets[i];
		fprintf(f, "  [%u] %s: %s on %s (%s)", i + 1, t->path, kind_name[t->kind], t->fs,
			t->dev);
		if (t->kind != DK_DIR)
			fprintf(f, ", %s, %s", fmt_bytes(b, sizeof(b), (double)t->size),
				t->destructive ? "writes allowed (--destructive)" : "reads only");
		fputc('\n', f);
	}
	print_summary(f, rp);
	/* widths from the widest cell of each column */
	size_t w0 = 16, w[64] = {0};
	uint32_t nt = rp->ntargets < 64 ? rp->ntargets : 64;
	char c[200];
	for (uint32_t ti = 0; ti < nt; ti++) {
		col_head(c, sizeof(c), rp, ti);
		w[ti] = strlen(c);
		for (uint32_t ci = 0; ci < rp->ncases; ci++)
			for (int k = 0; k < R_NROWS; k++) {
				cell(c, sizeof(c), (enum row)k, rp, ti, ci);
				if (strlen(c) > w[ti])
					w[ti] = strlen(c);
			}
	}
	fprintf(f, "\n%-*s", (int)w0, "");
	for (uint32_t ti = 0; ti < nt; ti++) {
		col_head(c, sizeof(c), rp, ti);
		fprintf(f, "  %-*s", ti + 1 < nt ? (int)w[ti] : 0, c);
	}
	fputc('\n', f);
	for (uint32_t ci = 0; ci < rp->ncases; ci++) {
		const struct dk_case *cs = &rp->cases[ci];
		case_title(c, sizeof(c), cs);
		fprintf(f, "%s\n", c);
		bool any = false;
		for (uint32_t ti = 0; ti < nt; ti++)
			any = any || usable(&rp->res[(size_t)ti * rp->ncases + ci]);
		for (int k = 0; k < R_NROWS; k++) {
			/* a case no PATH could run shows one row and the reasons */
			if (!row_applies((enum row)k, cs->pat) || (!any && k != R_MBPS))
				continue;
			fprintf(f, "  %-*s", (int)w0 - 2, row_name((enum row)k, cs->pat));
			for (uint32_t ti = 0; ti < nt; ti++) {
				cell(c, sizeof(c), (enum row)k, rp, ti, ci);
				/* the last column is not padded: no trailing blanks */
				fprintf(f, "  %-*s", ti + 1 < nt ? (int)w[ti] : 0, c);
			}
			fputc('\n', f);
		}
		for (uint32_t ti = 0; ti < nt; ti++) {
			const struct dk_result *r = &rp->res[(size_t)ti * rp->ncases + ci];
			if (r->ran && (r->skipped || r->err))
				fprintf(f, "  ! [%u] %s%s\n", ti + 1, r->skipped ? "skipped: " : "",
					r->errmsg);
		}
	}
	if (rp->warning && rp->warning[0])
		fprintf(f, "\nwarning: %s\n", rp->warning);
	fflush(f);
}

/* --- JSON ------------------------------------------------------------------------ */

static json_t *lat_json(const struct stk_hist *h)
{
	json_t *o = json_object();
	if (!o)
		return NULL;
	json_object_set_new(o, "min", json_integer((json_int_t)stk_hist_min(h)));
	json_object_set_new(o, "mean", json_real(stk_hist_mean(h)));
	json_object_set_new(o, "p50", json_integer((json_int_t)stk_hist_percentile(h, 50)));
	json_object_set_new(o, "p90", json_integer((json_int_t)stk_hist_percentile(h, 90)));
	json_object_set_new(o, "p99", json_integer((json_int_t)stk_hist_percentile(h, 99)));
	json_object_set_new(o, "p99_9", json_integer((json_int_t)stk_hist_percentile(h, 99.9)));
	json_object_set_new(o, "max", json_integer((json_int_t)stk_hist_max(h)));
	return o;
}

static json_t *result_json(const struct dk_report *rp, uint32_t ti, uint32_t ci)
{
	const struct dk_result *r = &rp->res[(size_t)ti * rp->ncases + ci], *first = &rp->res[ci];
	json_t *o = json_object();
	if (!o)
		return NULL;
	const struct dk_case *c = &r->c;
	json_object_set_new(o, "path", json_string(r->target));
	json_object_set_new(o, "pattern", json_string(dk_pattern_name[c->pat]));
	json_object_set_new(o, "status", json_string(!r->ran ? "not_run" : r->skipped ? "skipped"
						      : r->err ? "error" : "ok"));
	json_object_set_new(o, "error", r->skipped || r->err ? json_string(r->errmsg) : json_null());
	json_object_set_new(o, "block_size", json_integer((json_int_t)c->bs));
	json_object_set_new(o, "queue_depth", json_integer(c->qd));
	json_object_set_new(o, "threads", json_integer(c->threads));
	json_object_set_new(o, "runtime_s", json_real(c->runtime));
	json_object_set_new(o, "ramp_s", json_real(c->ramp));
	json_object_set_new(o, "engine", json_string(r->engine ? r->engine : ""));
	json_object_set_new(o, "direct", json_boolean(r->direct));
	json_object_set_new(o, "cache", json_string(r->cache));
	json_object_set_new(o, "bytes", json_integer((json_int_t)r->bytes));
	json_object_set_new(o, "ios", json_integer((json_int_t)r->ios));
	json_object_set_new(o, "seconds", json_real(r->seconds));
	json_object_set_new(o, "mb_per_s", json_real(mbps(r)));
	json_object_set_new(o, "iops", json_real(iops(r)));
	json_object_set_new(o, "latency_ns", lat_json(r->hist));
	struct spread sp;
	if (rounds_spread(rp, ti, ci, R_MBPS, &sp)) {
		json_t *runs = json_array();
		for (uint32_t k = 0; k < rp->repeat; k++) {
			const struct dk_result *x =
				&rp->all[((size_t)k * rp->ntargets + ti) * rp->ncases + ci];
			json_array_append_new(runs, json_pack("{s:f,s:f,s:f}", "seconds", x->seconds,
							      "mb_per_s", mbps(x), "iops", iops(x)));
		}
		json_object_set_new(o, "runs", runs);
		json_object_set_new(o, "mb_per_s_spread", spread_json(&sp));
		rounds_spread(rp, ti, ci, R_IOPS, &sp);
		json_object_set_new(o, "iops_spread", spread_json(&sp));
	}
	if (first != r && usable(first) && usable(r) && mbps(first) > 0 && iops(first) > 0) {
		json_t *q = json_object();
		double p = (double)stk_hist_percentile(first->hist, 99);
		json_object_set_new(q, "mb_per_s", json_real(mbps(r) / mbps(first)));
		json_object_set_new(q, "iops", json_real(iops(r) / iops(first)));
		json_object_set_new(q, "p99", json_real(p > 0 ? (double)stk_hist_percentile(r->hist, 99) / p : 0));
		json_object_set_new(o, "ratio_to_first", q);
	} else {
		json_object_set_new(o, "ratio_to_first", json_null());
	}
	if (c->pat == DK_CHECKPOINT) {
		json_t *k = json_object();
		json_object_set_new(k, "write_s", json_real(r->write_s));
		json_object_set_new(k, "fsync_s", json_real(r->fsync_s));
		json_object_set_new(k, "durable_s", json_real(r->seconds));
		json_object_set_new(k, "read_bytes", json_integer((json_int_t)r->read_bytes));
		json_object_set_new(k, "read_s", json_real(r->read_s));
		json_object_set_new(k, "read_mb_per_s", json_real(r->read_s > 0 ? (double)r->read_bytes / r->read_s / 1e6 : 0));
		json_object_set_new(o, "checkpoint", k);
	}
	if (c->pat == DK_SMALLFILES) {
		json_t *k = json_object();
		json_object_set_new(k, "files", json_integer((json_int_t)r->nfiles));
		json_object_set_new(k, "bytes", json_integer((json_int_t)r->files_bytes));
		json_object_set_new(k, "create_s", json_real(r->create_s));
		json_object_set_new(o, "smallfiles", k);
	}
	return o;
}

int dk_print_json(FILE *f, const struct dk_report *rp)
{
	const struct dk_conf *cf = rp->cf;
	json_t *root = json_object(), *set = json_object(), *tg = json_array(), *rs = json_array();
	if (!root || !set || !tg || !rs) {
		json_decref(root);
		json_decref(set);
		json_decref(tg);
		json_decref(rs);
		return -ENOMEM;
	}
	/* set_new takes the reference, and with a NULL value (no memory) it
	 * just fails: the shape stays valid, the dump below reports trouble */
	json_object_set_new(root, "schema_version", json_integer(SCHEMA_VERSION));
	json_object_set_new(root, "tool", json_string("stoker disk"));
	json_object_set_new(root, "version", json_string(stk_version()));
	json_object_set_new(root, "interrupted", json_boolean(rp->interrupted));
	json_object_set_new(set, "set", json_string(rp->set));
	char note[64];
	/* what ran (each result says its own); what was asked beside it */
	json_object_set_new(set, "engine", json_string(engine_ran(rp, note, sizeof(note))));
	json_object_set_new(set, "engine_asked",
			    json_string(cf->engine == DK_URING ? "io_uring" : "psync"));
	json_object_set_new(set, "direct", json_string(cf->direct < 0 ? "auto" : cf->direct ? "direct" : "buffered"));
	json_object_set_new(set, "size", json_integer((json_int_t)cf->size));
	json_object_set_new(set, "files", json_integer((json_int_t)cf->files));
	json_object_set_new(set, "file_mean", json_integer((json_int_t)cf->file_mean));
	json_object_set_new(set, "checkpoint_size", json_integer((json_int_t)cf->ckpt_size));
	json_object_set_new(set, "seed", json_integer((json_int_t)cf->seed));
	json_object_set_new(root, "settings", set);
	for (uint32_t i = 0; i < rp->ntargets; i++) {
		const struct dk_target *t = &rp->targets[i];
		json_t *o = json_object();
		json_object_set_new(o, "path", json_string(t->path));
		json_object_set_new(o, "kind", json_string(kind_name[t->kind]));
		json_object_set_new(o, "fs", json_string(t->fs));
		json_object_set_new(o, "device", json_string(t->dev));
		json_object_set_new(o, "dio_align", json_integer(t->dio_align));
		json_object_set_new(o, "direct_supported", json_boolean(!t->dio_refused));
		json_array_append_new(tg, o);
	}
	json_object_set_new(root, "targets", tg);
	for (uint32_t ti = 0; ti < rp->ntargets; ti++)
		for (uint32_t ci = 0; ci < rp->ncases; ci++)
			json_array_append_new(rs, result_json(rp, ti, ci));
	json_object_set_new(root, "results", rs);
	json_object_set_new(root, "repeat", json_integer(rp->repeat ? rp->repeat : 1));
	if (rp->warning && rp->warning[0])
		json_object_set_new(root, "warnings", json_pack("[s]", rp->warning));
	int r = json_dumpf(root, f, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
	fputc('\n', f);
	json_decref(root);
	return r || fflush(f) ? -EIO : 0;
}

int dk_plot(const struct dk_report *rp, const char *file, char *png, size_t pnglen)
{
	uint32_t ng = rp->ncases, ns = rp->ntargets;
	char(*titles)[48] = calloc(ng, sizeof(*titles));
	const char **groups = calloc(ng, sizeof(*groups)), **series = calloc(ns, sizeof(*series));
	double *ys = calloc((size_t)ng * ns, sizeof(*ys)), *lo = calloc((size_t)ng * ns, sizeof(*lo));
	double *hi = calloc((size_t)ng * ns, sizeof(*hi));
	int rc = -ENOMEM;
	if (titles && groups && series && ys && lo && hi) {
		for (uint32_t c = 0; c < ng; c++) {
			const struct dk_case *k = &rp->cases[c];
			char bs[24];
			char thr[16] = ""; /* two cases may differ only in it */
			if (k->threads > 1)
				snprintf(thr, sizeof(thr), " %uthr", k->threads);
			if (k->pat == DK_SMALLFILES)
				snprintf(titles[c], sizeof(titles[c]), "%s qd%u%s", dk_pattern_name[k->pat],
					 k->qd, thr);
			else
				snprintf(titles[c], sizeof(titles[c]), "%s %s qd%u%s",
					 dk_pattern_name[k->pat], dk_fmt_iec(bs, sizeof(bs), k->bs), k->qd,
					 thr);
			groups[c] = titles[c];
			for (uint32_t t = 0; t < ns; t++) {
				size_t i = (size_t)c * ns + t;
				const struct dk_result *r = &rp->res[(size_t)t * ng + c];
				struct spread sp;
				ys[i] = lo[i] = hi[i] = usable(r) ? mbps(r) : 0;
				if (rounds_spread(rp, t, c, R_MBPS, &sp)) {
					ys[i] = sp.median;
					lo[i] = sp.min;
					hi[i] = sp.max;
				}
			}
		}
		for (uint32_t t = 0; t < ns; t++)
			series[t] = rp->targets[t].path;
		char cap[256], note[64];
		snprintf(cap, sizeof(cap), "stoker disk, %s set, %s engine; %u round%s, median and "
			 "min-max", rp->set, engine_ran(rp, note, sizeof(note)),
			 rp->repeat ? rp->repeat : 1, rp->repeat > 1 ? "s" : "");
		struct plot_bars p = {.file = file, .title = "stoker disk: MB/s by pattern and PATH",
				      .xlabel = "pattern", .yunit = "MB/s", .caption = cap,
				      .series_title = "PATH", .groups = groups, .series = series,
				      .ys = ys, .ylo = lo, .yhi = hi, .ngroups = (int)ng,
				      .nseries = (int)ns};
		rc = plot_bars(&p, png, pnglen);
	}
	free(titles);
	free(groups);
	free(series);
	free(ys);
	free(lo);
	free(hi);
	return rc;
}
