/* common/usage.c — --help from an option table: each entry's flags, help,
 * choices, default and range (the library's rows as the library writes their
 * values), then the notes on short flags, sizes and durations. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "common/opt.h"

#include <stdlib.h>
#include <string.h>

/* A duration row's bound (ns) as the library writes the row's values
 * ("1ms", "3600s"): put in a struct of the row's group and formatted. */
static const char *duration_text(const struct stk_option *r, char *buf, size_t len, double ns)
{
	union {
		struct stk_loader_opts l;
		struct stk_image_opts i;
	} u;
	memset(&u, 0, sizeof(u));
	uint64_t v = (uint64_t)ns;
	memcpy((char *)&u + r->offset, &v, sizeof(v));
	if (stk_option_get(r, &u, buf, len) < 0)
		snprintf(buf, len, "%llu", (unsigned long long)v);
	return buf;
}

/* "4 KiB", "1.50 GiB", "512 B" for --help's ranges of sizes: the library's. */
static const char *size_text(char *buf, size_t len, double v)
{
	return stk_fmt_ibytes(buf, len, v);
}

/* An OPT_LIB entry's help: the row's text, choices, default and range. */
static void lib_usage(FILE *f, const struct opt *o)
{
	const struct stk_option *r = opt_lib_row(o);
	fprintf(f, "%s%s", r->type == STK_OPT_NOFLAG ? "turns off, on by default: " : "", r->help);
	if (r->type == STK_OPT_ENUM || r->type == STK_OPT_BITCHOICE)
		fprintf(f, " {%s}", r->choices);
	if (r->type != STK_OPT_FLAG && r->type != STK_OPT_NOFLAG && r->def[0])
		fprintf(f, " [%s]", r->def);
	if (r->min != r->max && r->type == STK_OPT_DURATION) { /* as the values are written */
		char lo[32], hi[32];
		fprintf(f, " (%s..%s)", duration_text(r, lo, sizeof(lo), r->min),
			duration_text(r, hi, sizeof(hi), r->max));
	} else if (r->min != r->max && r->type == STK_OPT_U64 && (r->bit & STK_OPT_BYTES)) {
		char lo[32], hi[32];
		fprintf(f, " (%s..%s%s%s%s)", size_text(lo, sizeof(lo), r->min),
			size_text(hi, sizeof(hi), r->max), r->choices ? ", or " : "",
			r->choices ? r->choices : "", r->choices ? " (0)" : "");
	} else if (r->min != r->max && r->type != STK_OPT_ENUM) {
		char lo[32], hi[32];
		fprintf(f, " (%s..%s%s%s%s)", opt_num_text(lo, sizeof(lo), r->min),
			opt_num_text(hi, sizeof(hi), r->max), r->choices ? ", or " : "",
			r->choices ? r->choices : "", r->choices ? " (0)" : "");
	}
}

/* --help is read by people on 100-column terminals and by help2man: every
 * line under HELP_WIDTH, help text from HELP_COL, continuation lines there. */
#define HELP_COL 31
#define HELP_WIDTH 99

/* text from column col, wrapped at words before HELP_WIDTH; a continuation
 * (and a '\n' in text) starts a line at column indent. */
static void wrapped(FILE *f, const char *text, size_t col, size_t indent)
{
	for (const char *p = text; *p;) {
		if (*p == '\n') {
			fprintf(f, "\n%*s", (int)indent, "");
			col = indent;
			p++;
			continue;
		}
		size_t sp = strspn(p, " ");
		size_t w = strcspn(p + sp, " \n");
		if (col > indent && col + sp + w > HELP_WIDTH) {
			fprintf(f, "\n%*s", (int)indent, "");
			col = indent;
		} else if (col > indent) {
			fprintf(f, "%.*s", (int)sp, p);
			col += sp;
		}
		fprintf(f, "%.*s", (int)w, p + sp);
		col += w;
		p += sp + w;
	}
	fputc('\n', f);
}

/* An entry's text: its help, choices, default and range. */
static void entry_text(FILE *m, const struct opt *o)
{
	if (o->type == OPT_LIB) {
		lib_usage(m, o);
		return;
	}
	fprintf(m, "%s", o->help);
	if (o->type == OPT_CHOICE)
		fprintf(m, " {%s}", o->choices);
	if (o->def && o->type != OPT_BOOL)
		fprintf(m, " [%s]", o->def);
	char lo[32], hi[32];
	if (o->min != o->max && o->type == OPT_SIZE)
		fprintf(m, " (%s..%s)", size_text(lo, sizeof(lo), o->min),
			size_text(hi, sizeof(hi), o->max));
	else if (o->min != o->max && (o->type == OPT_SECONDS || o->type == OPT_MILLIS))
		fprintf(m, " (%s..%s %s)", opt_num_text(lo, sizeof(lo), o->min),
			opt_num_text(hi, sizeof(hi), o->max), o->type == OPT_SECONDS ? "s" : "ms");
	else if (o->min != o->max && o->type != OPT_CHOICE)
		fprintf(m, " (%s..%s)", opt_num_text(lo, sizeof(lo), o->min),
			opt_num_text(hi, sizeof(hi), o->max));
}

static void entry(FILE *f, const struct opt *o)
{
	char left[64];
	char sh[8] = "    ";
	if (o->short_name)
		snprintf(sh, sizeof(sh), "-%c, ", o->short_name);
	snprintf(left, sizeof(left), "  %s--%s%s%s", sh, o->name, opt_is_bool(o) ? "" : " ",
		 opt_is_bool(o) ? "" : (o->arg ? o->arg : "X"));
	if (strlen(left) >= HELP_COL) /* too wide for the column: the text below it */
		fprintf(f, "%s\n%*s", left, HELP_COL, "");
	else
		fprintf(f, "%-*s", HELP_COL, left);
	char *text = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&text, &len);
	if (!m) {
		fprintf(f, "%s\n", o->help);
		return;
	}
	entry_text(m, o);
	fclose(m);
	wrapped(f, text, HELP_COL, HELP_COL);
	free(text);
}

/* The heading of a group of options (help2man makes each a section). */
static const char *group_title(const char *g)
{
	static const char *const titles[][2] = {
		{"data", "data (what is read, in which order)"},
		{"reading", "reading (how: engine, threads, queue, memory)"},
		{"image", "image (with --image: decode, crop, resize)"},
		{"remote", "remote (s3:// and http(s):// data)"},
	};
	for (size_t i = 0; i < sizeof(titles) / sizeof(titles[0]); i++)
		if (!strcmp(g, titles[i][0]))
			return titles[i][1];
	return g;
}

static int group_rank(const char *g)
{
	static const char *const order[] = {"data", "reading", "image", "remote", "output",
					    "testing"};
	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++)
		if (!strcmp(g, order[i]))
			return (int)i + 1;
	return 0;
}

/* Each entry's group: a library row's own (opt_lib_group), else the last
 * OPT_GROUP above it, else "options". */
static const char *group_at(const struct opt *opts, const struct opt *o)
{
	if (o->type == OPT_LIB)
		return opt_lib_group(opt_lib_row(o));
	for (const struct opt *p = o; p >= opts; p--)
		if (p->type == OPT_SECTION)
			return p->name;
	return "options";
}

void opt_usage(FILE *f, const struct cmd_help *h, const struct opt *opts)
{
	fprintf(f, "usage: stoker %s %s\n\n", h->name, h->synopsis);
	wrapped(f, h->summary, 0, 0);
	const char *groups[24];
	size_t ng = 0;
	bool has_output = false;
	for (const struct opt *o = opts; o->name; o++) {
		if (o->type == OPT_SECTION)
			continue;
		const char *g = group_at(opts, o);
		size_t k = 0;
		while (k < ng && strcmp(groups[k], g))
			k++;
		if (k == ng && ng < sizeof(groups) / sizeof(groups[0]))
			groups[ng++] = g;
		has_output |= !strcmp(g, "output");
	}
	if (!ng)
		groups[ng++] = "options";
	/* the command's own groups first, then the library's in a fixed order,
	 * output last */
	for (size_t i = 1; i < ng; i++)
		for (size_t j = i; j > 0 && group_rank(groups[j]) < group_rank(groups[j - 1]); j--) {
			const char *t = groups[j];
			groups[j] = groups[j - 1];
			groups[j - 1] = t;
		}
	for (size_t k = 0; k < ng; k++) {
		fprintf(f, "\n%s:\n", group_title(groups[k]));
		for (const struct opt *o = opts; o->name; o++)
			if (o->type != OPT_SECTION && !strcmp(group_at(opts, o), groups[k]))
				entry(f, o);
		if (has_output ? !strcmp(groups[k], "output") : k == 0)
			fprintf(f, "  %-*s%s\n", HELP_COL - 2, "-h, --help", "show this help");
	}
	bool sizes = false, durations = false;
	for (const struct opt *o = opts; o->name; o++) {
		const struct stk_option *r = o->type == OPT_LIB ? opt_lib_row(o) : NULL;
		sizes |= o->type == OPT_SIZE || (r && r->type == STK_OPT_U64 &&
						 (r->bit & STK_OPT_BYTES));
		durations |= o->type == OPT_SECONDS || o->type == OPT_MILLIS ||
			     (r && r->type == STK_OPT_DURATION);
	}
	char note[1024];
	int n = snprintf(note, sizeof(note), "Short flags mean one thing in every command: -j --json, "
			 "-s --seed, -q --queue-depth, -T --threads.");
	for (size_t i = 0; opt_moved_letter(i) && n > 0 && (size_t)n < sizeof(note); i++) {
		const char *now;
		const struct opt *was = opt_moved_from(opts, opt_moved_letter(i), &now);
		if (was)
			n += snprintf(note + n, sizeof(note) - (size_t)n, "  Refused here: -%c, which "
				      "meant --%s before.", opt_moved_letter(i), was->name);
	}
	for (const struct opt *o = opts; o->name && n > 0 && (size_t)n < sizeof(note); o++)
		if (o->type != OPT_SECTION && kept_short(h->name, o))
			n += snprintf(note + n, sizeof(note) - (size_t)n, "  Still taken here: -%c for "
				      "--%s.", kept_short(h->name, o), o->name);
	fputc('\n', f);
	wrapped(f, note, 0, 0);
	if (sizes)
		wrapped(f, "Sizes take K, M, G, T or KiB, MiB, GiB, TiB (powers of 1024: 64k = 64KiB = "
			"65536) and KB, MB, GB, TB (powers of 1000: 64KB = 64000); a bare number is "
			"bytes.", 0, 0);
	if (durations)
		wrapped(f, "Durations take ns, us, ms, s, m (minutes) or h: 500ms, 30s, 1.5m; a bare "
			"number is seconds (milliseconds for a -ms option; ns for the library's "
			"durations).", 0, 0);
	if (h->examples) {
		fprintf(f, "\nExamples:\n"); /* help2man's EXAMPLES, "$ " lines verbatim */
		for (const char *p = h->examples; *p;) {
			size_t l = strcspn(p, "\n");
			fprintf(f, "  $ %.*s\n", (int)l, p);
			p += l + (p[l] == '\n');
		}
	}
}
