/* common/opt.c — parses argv against a command's option table over
 * getopt_long: defaults first, each value by its type (sizes and durations
 * through the library's readers, a library row through stk_option_set), and
 * a refused word explained: the option it is near, the options an
 * abbreviation stands for, the option an old short letter meant. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "common/opt.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The library's message without its leading "name: ". */
static const char *lib_reason(const struct stk_option *r, const char *msg)
{
	size_t l = strlen(r->name);
	return !strncmp(msg, r->name, l) && msg[l] == ':' && msg[l + 1] == ' ' ? msg + l + 2 : msg;
}

static int set_value(const struct opt *o, const char *val, const char *cmd)
{
	char *end;
	double num = 0;
	switch (o->type) {
	case OPT_SECTION:
		return 0;
	case OPT_LIB: {
		char err[512];
		const struct stk_option *r = opt_lib_row(o);
		if (r->type == STK_OPT_FLAG || r->type == STK_OPT_NOFLAG)
			val = r->type == STK_OPT_FLAG ? "true" : "false"; /* --X or --no-X */
		if (stk_option_set(r, o->dst, val, err, sizeof(err)) < 0) {
			fprintf(stderr, "stoker %s: --%s: %s\n", cmd, o->name, lib_reason(r, err));
			return -1;
		}
		return 0;
	}
	case OPT_BOOL:
		*(bool *)o->dst = !(val && (!strcmp(val, "0") || !strcmp(val, "false")));
		return 0;
	case OPT_STR:
		*(const char **)o->dst = val;
		return 0;
	case OPT_CHOICE: {
		int idx = 0;
		const char *p = o->choices;
		size_t vl = strlen(val);
		while (p && *p) {
			const char *c = strchr(p, ',');
			size_t l = c ? (size_t)(c - p) : strlen(p);
			if (l == vl && !strncmp(p, val, l)) {
				*(int *)o->dst = idx;
				return 0;
			}
			idx++;
			p = c ? c + 1 : NULL;
		}
		fprintf(stderr, "stoker %s: --%s: '%s' is not one of %s\n", cmd, o->name, val,
			o->choices);
		return -1;
	}
	case OPT_INT: {
		errno = 0;
		long long v = strtoll(val, &end, 0);
		if (end == val || *end || errno) {
			fprintf(stderr, "stoker %s: --%s: '%s' is not an integer\n", cmd, o->name,
				val);
			return -1;
		}
		num = (double)v;
		*(int64_t *)o->dst = v;
		break;
	}
	case OPT_DOUBLE:
		errno = 0;
		num = strtod(val, &end);
		if (end == val || *end || errno || !isfinite(num)) {
			fprintf(stderr, "stoker %s: --%s: '%s' is not a number\n", cmd, o->name,
				val);
			return -1;
		}
		*(double *)o->dst = num;
		break;
	case OPT_SIZE: {
		uint64_t v;
		if (stk_parse_size(val, &v)) {
			fprintf(stderr, "stoker %s: --%s: '%s' is not a size (e.g. 4096, 64k, 1GiB, "
				"64MB)\n", cmd, o->name, val);
			return -1;
		}
		num = (double)v;
		*(uint64_t *)o->dst = v;
		break;
	}
	case OPT_SECONDS:
	case OPT_MILLIS: {
		uint64_t ns;
		double unit = o->type == OPT_SECONDS ? 1e9 : 1e6;
		if (stk_parse_duration(val, (uint64_t)unit, &ns)) {
			fprintf(stderr, "stoker %s: --%s: '%s' is not a duration (e.g. %s; a bare "
				"number is %s)\n", cmd, o->name, val,
				o->type == OPT_SECONDS ? "30, 30s, 500ms, 2m" : "20, 20ms, 1.5s, 500us",
				o->type == OPT_SECONDS ? "seconds" : "milliseconds");
			return -1;
		}
		num = (double)ns / unit;
		*(double *)o->dst = num;
		break;
	}
	}
	if (o->min != o->max && (num < o->min || num > o->max)) {
		char lo[32], hi[32]; /* as --help writes the range */
		if (o->type == OPT_SIZE)
			fprintf(stderr, "stoker %s: --%s: %s is out of range %s..%s\n", cmd, o->name,
				val, stk_fmt_ibytes(lo, sizeof(lo), o->min),
				stk_fmt_ibytes(hi, sizeof(hi), o->max));
		else
			fprintf(stderr, "stoker %s: --%s: %s is out of range %s..%s\n", cmd, o->name,
				val, opt_num_text(lo, sizeof(lo), o->min),
				opt_num_text(hi, sizeof(hi), o->max));
		return -1;
	}
	return 0;
}

/* Optimal string alignment distance (a swap of two neighbours is one edit),
 * '_' taken for '-'; words past 63 characters are far from everything. */
static size_t edit_distance(const char *a, size_t la, const char *b)
{
	size_t lb = strlen(b);
	if (la > 63 || lb > 63)
		return SIZE_MAX;
	size_t d[64][64];
	for (size_t i = 0; i <= la; i++)
		d[i][0] = i;
	for (size_t j = 0; j <= lb; j++)
		d[0][j] = j;
	for (size_t i = 1; i <= la; i++)
		for (size_t j = 1; j <= lb; j++) {
			char x = a[i - 1] == '_' ? '-' : a[i - 1], y = b[j - 1];
			size_t v = d[i - 1][j - 1] + (x != y);
			if (d[i - 1][j] + 1 < v)
				v = d[i - 1][j] + 1;
			if (d[i][j - 1] + 1 < v)
				v = d[i][j - 1] + 1;
			if (i > 1 && j > 1 && x == b[j - 2] && a[i - 2] == y && d[i - 2][j - 2] + 1 < v)
				v = d[i - 2][j - 2] + 1;
			d[i][j] = v;
		}
	return d[la][lb];
}

const char *did_you_mean(const char *word, size_t len, const char *const *names, size_t n)
{
	const char *best = NULL;
	size_t bd = SIZE_MAX;
	for (size_t i = 0; i < n; i++) {
		size_t dd = edit_distance(word, len, names[i]);
		if (dd < bd) {
			bd = dd;
			best = names[i];
		}
	}
	/* one edit in a short word, a third of a long one ("bnech", "--batchsize") */
	return best && bd <= (len / 3 > 1 ? len / 3 : 1) ? best : NULL;
}

/* Why --NAME (argv's word) was refused: a value missing, an abbreviation of
 * several options, or a misspelling of one. */
static void long_refused(const struct cmd_help *h, const struct opt *opts, const char *word)
{
	const char *name = word + 2;
	size_t len = strcspn(name, "=");
	const char *names[160];
	size_t n = 0, nprefix = 0;
	for (const struct opt *o = opts; o->name && n + 1 < sizeof(names) / sizeof(names[0]); o++)
		if (o->type != OPT_SECTION)
			names[n++] = o->name;
	names[n++] = "help";
	for (size_t i = 0; i < n; i++) {
		if (strlen(names[i]) == len && !strncmp(names[i], name, len)) {
			fprintf(stderr, "stoker %s: --%s %s\n", h->name, names[i],
				name[len] == '=' ? "takes no value" : "needs a value");
			return;
		}
		nprefix += !strncmp(names[i], name, len);
	}
	if (nprefix > 1) {
		fprintf(stderr, "stoker %s: '--%.*s' is short for more than one option:", h->name,
			(int)len, name);
		for (size_t i = 0; i < n; i++)
			if (!strncmp(names[i], name, len))
				fprintf(stderr, " --%s", names[i]);
		fputc('\n', stderr);
		return;
	}
	const char *near = did_you_mean(name, len, names, n);
	fprintf(stderr, "stoker %s: unknown option '--%.*s'", h->name, (int)len, name);
	if (near)
		fprintf(stderr, "; did you mean --%s?", near);
	fputc('\n', stderr);
}

/* Says why -c is refused here and returns true, or false when it never
 * meant anything here. */
static bool moved_short(const struct cmd_help *h, const struct opt *opts, int c)
{
	const char *now;
	const struct opt *was = opt_moved_from(opts, c, &now);
	if (!was)
		return false;
	bool has_now = opt_named(opts, now) != NULL;
	char alt[8] = "";
	if (was->short_name)
		snprintf(alt, sizeof(alt), " (-%c)", was->short_name);
	fprintf(stderr,
		"stoker %s: -%c is refused here: it meant --%s, and -%c now means --%s in every "
		"command; write --%s%s%s%s\n",
		h->name, c, was->name, c, now, was->name, alt, has_now ? " or --" : "",
		has_now ? now : "");
	return true;
}

int opt_parse(const struct cmd_help *h, const struct opt *opts, int argc, char **argv)
{
	size_t n = 0;
	while (opts[n].name)
		n++;
	struct option *lo = calloc(n + 2, sizeof(*lo));
	char shorts[2 * 64 + 4] = "h";
	size_t sl = 1;
	if (!lo) {
		fprintf(stderr, "stoker %s: out of memory\n", h->name);
		return -EXIT_FAIL;
	}
	size_t nlo = 0;
	for (size_t i = 0; i < n; i++) {
		const struct opt *o = &opts[i];
		if (o->type == OPT_SECTION)
			continue;
		if (o->def && set_value(o, o->def, h->name)) {
			free(lo);
			return -EXIT_FAIL; /* a bad default is a bug */
		}
		lo[nlo].name = o->name;
		lo[nlo].has_arg = opt_is_bool(o) ? no_argument : required_argument;
		lo[nlo++].val = 256 + (int)i;
		for (int k = 0; k < 2; k++) {
			int c = k ? kept_short(h->name, o) : o->short_name;
			if (c && sl + 2 < sizeof(shorts) - 1) {
				shorts[sl++] = (char)c;
				if (!opt_is_bool(o))
					shorts[sl++] = ':';
			}
		}
	}
	shorts[sl] = 0;
	lo[nlo].name = "help";
	lo[nlo].val = 'h';
	optind = 1;
	opterr = 0;
	int c, ret = 0;
	while ((c = getopt_long(argc, argv, shorts, lo, NULL)) != -1) {
		const struct opt *o = NULL;
		if (c == 'h') {
			/* --help ends the command successfully, whatever else was given */
			opt_usage(stdout, h, opts);
			free(lo);
			exit(EXIT_OK);
		}
		if (c == '?' || c == ':') {
			if (optopt && optopt < 256 && !moved_short(h, opts, optopt))
				fprintf(stderr, "stoker %s: bad or incomplete option '-%c'\n", h->name,
					optopt);
			else if (!(optopt && optopt < 256) && !strncmp(argv[optind - 1], "--", 2))
				long_refused(h, opts, argv[optind - 1]);
			else if (!(optopt && optopt < 256))
				fprintf(stderr, "stoker %s: bad or incomplete option '%s'\n", h->name,
					argv[optind - 1]);
			fprintf(stderr, "try 'stoker %s --help'\n", h->name);
			ret = -EXIT_USAGE;
			break;
		}
		if (c >= 256)
			o = &opts[c - 256];
		else
			for (size_t i = 0; i < n; i++)
				if (opts[i].type != OPT_SECTION &&
				    (opts[i].short_name == c || kept_short(h->name, &opts[i]) == c))
					o = &opts[i];
		if (!o || set_value(o, opt_is_bool(o) ? NULL : optarg, h->name)) {
			ret = -EXIT_USAGE;
			break;
		}
	}
	free(lo);
	return ret ? ret : optind;
}

