/* common/cli.c — the option table parser (over getopt_long), --help, the progress
 * line and formatting helpers shared by the subcommands. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "common/cli.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* OPT_LIB entries: their CLI names live here, beside the rows they stand
 * for, for the process's life (an entry's name says which row it is). */
static char lib_names[64][40];
static const struct stk_option *lib_rows[64];
static size_t lib_used;

static const struct stk_option *lib_row(const struct opt *o)
{
	for (size_t k = 0; k < lib_used; k++)
		if (o->name == lib_names[k])
			return lib_rows[k];
	return NULL;
}

/* The library's message without its leading "name: ". */
static const char *lib_reason(const struct stk_option *r, const char *msg)
{
	size_t l = strlen(r->name);
	return !strncmp(msg, r->name, l) && msg[l] == ':' && msg[l + 1] == ' ' ? msg + l + 2 : msg;
}

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

static int set_value(const struct opt *o, const char *val, const char *cmd)
{
	char *end;
	double num = 0;
	switch (o->type) {
	case OPT_LIB: {
		char err[512];
		const struct stk_option *r = lib_row(o);
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
		fprintf(stderr, "stoker %s: --%s: %s is out of range [%g, %g]\n", cmd, o->name, val,
			o->min, o->max);
		return -1;
	}
	return 0;
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

static bool is_bool(const struct opt *o)
{
	const struct stk_option *r = o->type == OPT_LIB ? lib_row(o) : NULL;
	return o->type == OPT_BOOL || (r && (r->type == STK_OPT_FLAG || r->type == STK_OPT_NOFLAG));
}

/* An OPT_LIB entry's help: the row's text, choices, default and range. */
static void lib_usage(FILE *f, const struct opt *o)
{
	const struct stk_option *r = lib_row(o);
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
		names[n++] = o->name;
	names[n++] = "help";
	for (size_t i = 0; i < n; i++) {
		if (strlen(names[i]) == len && !strncmp(names[i], name, len)) {
			fprintf(stderr, "stoker %s: --%s needs a value\n", h->name, names[i]);
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

static const struct opt *opt_named(const struct opt *opts, const char *name)
{
	for (const struct opt *o = opts; o->name; o++)
		if (!strcmp(o->name, name))
			return o;
	return NULL;
}

/* Short flags have one meaning in every command (-j --json, -s --seed, -q
 * --queue-depth, -T --threads).  A letter that meant another option in some
 * command before is refused there, naming both, rather than silently taken
 * for the other (bench -s 30 was 30 seconds); one that clashes with nothing
 * there is still taken (gen -q, --quality, as gen has no queue depth). */
static const struct {
	int c;
	const char *now, *before[2];
} moved[] = {
	{'j', "json", {"threads", NULL}},
	{'s', "seed", {"seconds", "size"}},
	{'q', "queue-depth", {"quality", NULL}},
};
static const struct {
	const char *cmd;
	int c;
	const char *name;
} kept[] = {{"gen", 'q', "quality"}};

/* The option letter c meant in this command before, when it is refused now. */
static const struct opt *moved_from(const struct opt *opts, int c, const char **now)
{
	for (const struct opt *o = opts; o->name; o++)
		if (o->short_name == c)
			return NULL;
	for (size_t i = 0; i < sizeof(moved) / sizeof(moved[0]); i++)
		for (int k = 0; k < 2 && moved[i].c == c && moved[i].before[k]; k++) {
			const struct opt *was = opt_named(opts, moved[i].before[k]);
			if (was) {
				*now = moved[i].now;
				return was;
			}
		}
	return NULL;
}

/* Says why -c is refused here and returns true, or false when it never
 * meant anything here. */
static bool moved_short(const struct cmd_help *h, const struct opt *opts, int c)
{
	const char *now;
	const struct opt *was = moved_from(opts, c, &now);
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

int kept_short(const char *cmd, const struct opt *o)
{
	for (size_t i = 0; i < sizeof(kept) / sizeof(kept[0]); i++)
		if (!strcmp(kept[i].cmd, cmd) && !strcmp(kept[i].name, o->name))
			return kept[i].c;
	return 0;
}

void opt_usage(FILE *f, const struct cmd_help *h, const struct opt *opts)
{
	fprintf(f, "usage: stoker %s %s\n\n%s\n\noptions:\n", h->name, h->synopsis, h->summary);
	for (const struct opt *o = opts; o->name; o++) {
		char left[64];
		char sh[8] = "    ";
		if (o->short_name)
			snprintf(sh, sizeof(sh), "-%c, ", o->short_name);
		snprintf(left, sizeof(left), "%s--%s%s%s", sh, o->name, is_bool(o) ? "" : " ",
			 is_bool(o) ? "" : (o->arg ? o->arg : "X"));
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
		const struct stk_option *r = o->type == OPT_LIB ? lib_row(o) : NULL;
		sizes |= o->type == OPT_SIZE || (r && r->type == STK_OPT_U64 &&
						 (r->bit & STK_OPT_BYTES));
		durations |= o->type == OPT_SECONDS || o->type == OPT_MILLIS ||
			     (r && r->type == STK_OPT_DURATION);
	}
	fprintf(f, "\nShort flags mean one thing in every command: -j --json, -s --seed, -q "
		"--queue-depth,\n-T --threads.");
	for (size_t i = 0; i < sizeof(moved) / sizeof(moved[0]); i++) {
		const char *now;
		const struct opt *was = moved_from(opts, moved[i].c, &now);
		if (was)
			fprintf(f, "  Refused here: -%c, which meant --%s before.", moved[i].c, was->name);
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
	for (size_t i = 0; i < n; i++) {
		const struct opt *o = &opts[i];
		if (o->def && set_value(o, o->def, h->name)) {
			free(lo);
			return -EXIT_FAIL; /* a bad default is a bug */
		}
		lo[i].name = o->name;
		lo[i].has_arg = is_bool(o) ? no_argument : required_argument;
		lo[i].val = 256 + (int)i;
		for (int k = 0; k < 2; k++) {
			int c = k ? kept_short(h->name, o) : o->short_name;
			if (c && sl + 2 < sizeof(shorts) - 1) {
				shorts[sl++] = (char)c;
				if (!is_bool(o))
					shorts[sl++] = ':';
			}
		}
	}
	shorts[sl] = 0;
	lo[n].name = "help";
	lo[n].val = 'h';
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
				if (opts[i].short_name == c || kept_short(h->name, &opts[i]) == c)
					o = &opts[i];
		if (!o || set_value(o, is_bool(o) ? NULL : optarg, h->name)) {
			ret = -EXIT_USAGE;
			break;
		}
	}
	free(lo);
	return ret ? ret : optind;
}

uint64_t opt_lib_u64(const void *base, const char *name)
{
	const struct stk_option *r = stk_option_find(name);
	union {
		struct stk_loader_opts lo;
		struct stk_image_opts img;
	} scratch;
	if (!r)
		return 0;
	memcpy(&scratch, base, r->group == STK_OPT_IMAGE ? sizeof(scratch.img) : sizeof(scratch.lo));
	char v[64];
	if (stk_option_get(r, &scratch, v, sizeof(v)) >= 0 && !strcmp(v, "0"))
		stk_option_set(r, &scratch, NULL, NULL, 0);
	if (stk_option_get(r, &scratch, v, sizeof(v)) < 0)
		return 0;
	return strtoull(v, NULL, 10);
}

size_t opt_add_library(struct opt *opts, size_t n, size_t cap, enum stk_opt_group group,
		       void *base, const char *const *only)
{
	const struct stk_option *r;
	for (int i = 0; (r = stk_option_at(i)) && n + 1 < cap; i++) {
		if (r->group != group || lib_used == sizeof(lib_names) / sizeof(lib_names[0]))
			continue;
		bool wanted = !only;
		for (const char *const *w = only; w && *w; w++)
			wanted |= !strcmp(*w, r->name);
		if (!wanted)
			continue;
		char *nm = lib_names[lib_used];
		lib_rows[lib_used++] = r;
		snprintf(nm, sizeof(lib_names[0]), "%s%s", r->type == STK_OPT_NOFLAG ? "no-" : "",
			 r->name);
		for (char *c = nm; *c; c++)
			if (*c == '_')
				*c = '-';
		struct opt o = {.name = nm, .type = OPT_LIB, .dst = base, .help = r->help};
		for (const char *a = r->alias; a && *a;) { /* a one-letter alias: -X */
			size_t l = strcspn(a, ",");
			if (l == 1)
				o.short_name = (unsigned char)a[0];
			a += l + (a[l] == ',');
		}
		o.arg = r->type == STK_OPT_ENUM || r->type == STK_OPT_BITCHOICE ? "X"
			: r->type == STK_OPT_STR				 ? "S"
			: r->type == STK_OPT_DURATION				 ? "T"
			: r->type == STK_OPT_U64 && (r->bit & STK_OPT_BYTES) ? "SIZE"
			: r->type == STK_OPT_FLOAT3				 ? "A,B,C"
										 : "N";
		opts[n++] = o;
	}
	opts[n] = (struct opt){0};
	return n;
}

/* A library message in the CLI's words: each option the table names in it
 * ("rank: 3 must be below world_size 2") becomes the flag that sets it
 * ("--rank: 3 must be below --world-size 2").  Names with '_' are rewritten
 * wherever they stand as a word; plain ones ("rank", "seed") only where the
 * message starts with "name:", since as words they are also prose. */
const char *cli_flag_words(const char *msg, char *buf, size_t len)
{
	size_t o = 0;
	if (!len)
		return msg;
	for (const char *p = msg; *p && o + 1 < len;) {
		bool word_start = p == msg || !(isalnum((unsigned char)p[-1]) || p[-1] == '_' ||
						p[-1] == '-');
		const struct stk_option *r, *hit = NULL;
		size_t hl = 0;
		for (int i = 0; word_start && (r = stk_option_at(i)); i++) {
			size_t l = strlen(r->name);
			if (strncmp(p, r->name, l) || isalnum((unsigned char)p[l]) || p[l] == '_')
				continue;
			if (!strchr(r->name, '_') && !(p == msg && p[l] == ':'))
				continue;
			if (l > hl) {
				hit = r;
				hl = l;
			}
		}
		if (!hit) {
			buf[o++] = *p++;
			continue;
		}
		int n = snprintf(buf + o, len - o, "--%s", hit->type == STK_OPT_NOFLAG ? "no-" : "");
		o += n > 0 && (size_t)n < len - o ? (size_t)n : 0;
		for (size_t k = 0; k < hl && o + 1 < len; k++)
			buf[o++] = hit->name[k] == '_' ? '-' : hit->name[k];
		p += hl;
	}
	buf[o] = 0;
	return buf;
}

bool progress_enabled(void)
{
	static int tty = -1;
	if (tty < 0)
		tty = isatty(STDERR_FILENO) && !getenv("STOKER_NO_PROGRESS");
	return tty;
}

static bool progress_shown;

void progress(const char *fmt, ...)
{
	if (!progress_enabled())
		return;
	char line[160];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	fprintf(stderr, "\r\033[K%s", line);
	fflush(stderr);
	progress_shown = true;
}

void progress_done(void)
{
	if (progress_shown) {
		fprintf(stderr, "\r\033[K");
		fflush(stderr);
		progress_shown = false;
	}
}

const char *fmt_bytes(char *buf, size_t len, double b)
{
	static const char *u[] = {"B", "kB", "MB", "GB", "TB"};
	int i = 0;
	while (b >= 1000 && i < 4) {
		b /= 1000;
		i++;
	}
	snprintf(buf, len, i ? "%.2f %s" : "%.0f %s", b, u[i]);
	return buf;
}

const char *fmt_ns(char *buf, size_t len, double ns)
{
	if (ns < 1e3)
		snprintf(buf, len, "%.0f ns", ns);
	else if (ns < 1e6)
		snprintf(buf, len, "%.1f us", ns / 1e3);
	else if (ns < 1e9)
		snprintf(buf, len, "%.2f ms", ns / 1e6);
	else
		snprintf(buf, len, "%.2f s", ns / 1e9);
	return buf;
}

double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

double process_cpu_s(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
	       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

int drop_caches(char *why, size_t len)
{
	sync();
	int fd = open("/proc/sys/vm/drop_caches", O_WRONLY | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		snprintf(why, len, "cannot open /proc/sys/vm/drop_caches: %s%s", strerror(e),
			 e == EACCES || e == EPERM ? " (needs root)" : "");
		return -e;
	}
	ssize_t w = write(fd, "3\n", 2);
	int e = errno;
	close(fd);
	if (w != 2) {
		snprintf(why, len, "cannot write /proc/sys/vm/drop_caches: %s%s", strerror(e),
			 e == EACCES || e == EPERM || e == EROFS ? " (needs root outside a container)" : "");
		return -e;
	}
	return 0;
}

int mkdirs(const char *dir, char *failed, size_t len)
{
	char p[4096];
	int n = snprintf(p, sizeof(p), "%s", dir);
	if (n < 0 || (size_t)n >= sizeof(p))
		return -ENAMETOOLONG;
	int e = 0;
	for (char *s = p + 1;; s++) {
		if (*s != '/' && *s)
			continue;
		char c = *s;
		*s = 0;
		if (mkdir(p, 0755) && errno != EEXIST) {
			e = -errno;
			break;
		}
		*s = c;
		if (!c)
			break;
	}
	struct stat st;
	if (!e && stat(p, &st))
		e = -errno;
	else if (!e && !S_ISDIR(st.st_mode))
		e = -ENOTDIR;
	if (e && failed && len)
		snprintf(failed, len, "%s", p);
	return e;
}

void on_stop_signals(void (*handler)(int))
{
	struct sigaction sa = {.sa_handler = handler};
	sigemptyset(&sa.sa_mask);
	static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaddset(&sa.sa_mask, sigs[i]);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
		struct sigaction old;
		/* a signal the caller ignores (nohup, a script's background job) stays so */
		if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler != SIG_IGN)
			sigaction(sigs[i], &sa, NULL);
	}
}
