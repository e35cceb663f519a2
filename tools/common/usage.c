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

/* "4 KiB", "1.5 GiB", "512" for --help's ranges of sizes. */
static const char *size_text(char *buf, size_t len, double v)
{
	static const char *const u[] = {"", " KiB", " MiB", " GiB", " TiB", " PiB"};
	int i = 0;
	while (v >= 1024 && i < 5) {
		v /= 1024;
		i++;
	}
	snprintf(buf, len, "%g%s", v, u[i]);
	return buf;
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
	} else if (r->min != r->max && r->type != STK_OPT_ENUM)
		fprintf(f, " (%.17g..%.17g%s%s%s)", r->min, r->max, r->choices ? ", or " : "",
			r->choices ? r->choices : "", r->choices ? " (0)" : "");
}

void opt_usage(FILE *f, const struct cmd_help *h, const struct opt *opts)
{
	fprintf(f, "usage: stoker %s %s\n\n%s\n\noptions:\n", h->name, h->synopsis, h->summary);
	for (const struct opt *o = opts; o->name; o++) {
		char left[64];
		char sh[8] = "    ";
		if (o->short_name)
			snprintf(sh, sizeof(sh), "-%c, ", o->short_name);
		snprintf(left, sizeof(left), "%s--%s%s%s", sh, o->name, opt_is_bool(o) ? "" : " ",
			 opt_is_bool(o) ? "" : (o->arg ? o->arg : "X"));
		if (o->type == OPT_LIB) {
			fprintf(f, "  %-28s ", left);
			lib_usage(f, o);
			fputc('\n', f);
			continue;
		}
		fprintf(f, "  %-28s %s", left, o->help);
		if (o->type == OPT_CHOICE)
			fprintf(f, " {%s}", o->choices);
		if (o->def && o->type != OPT_BOOL)
			fprintf(f, " [%s]", o->def);
		char lo[32], hi[32];
		if (o->min != o->max && o->type == OPT_SIZE)
			fprintf(f, " (%s..%s)", size_text(lo, sizeof(lo), o->min),
				size_text(hi, sizeof(hi), o->max));
		else if (o->min != o->max && (o->type == OPT_SECONDS || o->type == OPT_MILLIS))
			fprintf(f, " (%g..%g %s)", o->min, o->max, o->type == OPT_SECONDS ? "s" : "ms");
		else if (o->min != o->max && o->type != OPT_CHOICE)
			fprintf(f, " (%g..%g)", o->min, o->max);
		fputc('\n', f);
	}
	fprintf(f, "  %-28s %s\n", "-h, --help", "show this help");
	bool sizes = false, durations = false;
	for (const struct opt *o = opts; o->name; o++) {
		const struct stk_option *r = o->type == OPT_LIB ? opt_lib_row(o) : NULL;
		sizes |= o->type == OPT_SIZE || (r && r->type == STK_OPT_U64 &&
						 (r->bit & STK_OPT_BYTES));
		durations |= o->type == OPT_SECONDS || o->type == OPT_MILLIS ||
			     (r && r->type == STK_OPT_DURATION);
	}
	fprintf(f, "\nShort flags mean one thing in every command: -j --json, -s --seed, -q "
		"--queue-depth,\n-T --threads.");
	for (size_t i = 0; opt_moved_letter(i); i++) {
		const char *now;
		const struct opt *was = opt_moved_from(opts, opt_moved_letter(i), &now);
		if (was)
			fprintf(f, "  Refused here: -%c, which meant --%s before.", opt_moved_letter(i),
				was->name);
	}
	for (const struct opt *o = opts; o->name; o++)
		if (kept_short(h->name, o))
			fprintf(f, "  Still taken here: -%c for --%s.", kept_short(h->name, o), o->name);
	fputc('\n', f);
	if (sizes)
		fprintf(f, "\nSizes take K, M, G, T or KiB, MiB, GiB, TiB (powers of 1024: 64k = 64KiB = "
			"65536)\nand KB, MB, GB, TB (powers of 1000: 64KB = 64000); a bare number is "
			"bytes.\n");
	if (durations)
		fprintf(f, "%sDurations take ns, us, ms, s, m (minutes) or h: 500ms, 30s, 1.5m; a bare "
			"number is\nseconds (milliseconds for a -ms option; ns for the library's "
			"durations).\n", sizes ? "" : "\n");
}

