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

int parse_size(const char *s, uint64_t *out)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (end == s || errno || v < 0 || !isfinite(v))
		return -EINVAL;
	while (*end == ' ')
		end++;
	static const struct {
		const char *suffix;
		double mul;
	} units[] = {
		{"", 1},
		{"b", 1},
		{"k", 1024.0},
		{"kib", 1024.0},
		{"kb", 1e3},
		{"m", 1048576.0},
		{"mib", 1048576.0},
		{"mb", 1e6},
		{"g", 1073741824.0},
		{"gib", 1073741824.0},
		{"gb", 1e9},
		{"t", 1099511627776.0},
		{"tib", 1099511627776.0},
		{"tb", 1e12},
	};
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (!strcasecmp(end, units[i].suffix)) {
			double r = v * units[i].mul;
			if (r >= 18446744073709551615.0)
				return -EINVAL;
			*out = (uint64_t)r;
			return 0;
		}
	}
	return -EINVAL;
}

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

/* A range's end as a user types it: whole numbers in full ("1000000", not
 * "1e+06"), others as %g. */
static const char *num_text(char *buf, size_t len, double v)
{
	if (v == (double)(long long)v && v < 9.2e18 && v > -9.2e18)
		snprintf(buf, len, "%lld", (long long)v);
	else
		snprintf(buf, len, "%g", v);
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
		if (parse_size(val, &v)) {
			fprintf(stderr, "stoker %s: --%s: '%s' is not a size (e.g. 4096, 64k, 1GiB)\n",
				cmd, o->name, val);
			return -1;
		}
		num = (double)v;
		*(uint64_t *)o->dst = v;
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
				val, num_text(lo, sizeof(lo), o->min), num_text(hi, sizeof(hi), o->max));
		return -1;
	}
	return 0;
}

/* "4 KiB", "1.50 GiB", "512 B" for --help's ranges of sizes: the library's. */
static const char *size_text(char *buf, size_t len, double v)
{
	return stk_fmt_ibytes(buf, len, v);
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
		else if (o->min != o->max && o->type != OPT_CHOICE)
			fprintf(f, " (%s..%s)", num_text(lo, sizeof(lo), o->min),
				num_text(hi, sizeof(hi), o->max));
		fputc('\n', f);
	}
	fprintf(f, "  %-28s %s\n", "-h, --help", "show this help");
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
		if (o->short_name && sl + 2 < sizeof(shorts) - 1) {
			shorts[sl++] = (char)o->short_name;
			if (!is_bool(o))
				shorts[sl++] = ':';
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
			if (optopt && optopt < 256)
				fprintf(stderr, "stoker %s: bad or incomplete option '-%c'\n", h->name,
					optopt);
			else
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
				if (opts[i].short_name == c)
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

/* The library's formatter: one for every command. */
const char *fmt_bytes(char *buf, size_t len, double b)
{
	return stk_fmt_bytes(buf, len, b);
}

const char *fmt_ns(char *buf, size_t len, double ns)
{
	return stk_fmt_ns(buf, len, ns);
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
