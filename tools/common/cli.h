/* common/cli.h — what the `stoker` subcommands share: the option table, progress
 * line and small formatting helpers.  Subcommands use only the public API. */
#ifndef STK_CLI_H
#define STK_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "stoker/stoker.h"

/* Exit codes, as every subcommand uses them. */
enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_USAGE = 2 };

enum opt_type {
	OPT_BOOL,   /* bool; takes no argument */
	OPT_INT,    /* int64_t */
	OPT_DOUBLE, /* double */
	OPT_SIZE,   /* uint64_t bytes, as stk_parse_size reads them: K/M/G/T and KiB/MiB/GiB/TiB
		       (×1024), KB/MB/GB/TB (×1000) */
	OPT_SECONDS, /* double seconds, as stk_parse_duration reads them ("2s", "500ms", "1m");
			a bare number is seconds; min and max in seconds */
	OPT_MILLIS, /* the same in milliseconds: a bare number is ms */
	OPT_STR,    /* const char * */
	OPT_CHOICE, /* int: index into the comma-separated `choices` */
	OPT_SECTION, /* not an option: the entries below it, to the next, are this group in
			--help (OPT_GROUP) */
	OPT_LIB,    /* a row of the library's option table (opt_add_library), writing into the
		       struct at dst; its default, range and help are the row's */
};

/* One declarative entry: name, type, default, range, help.  The same table
 * feeds the parser (getopt_long), --help and the doctor. */
struct opt {
	const char *name;    /* long name, without "--" */
	int short_name;      /* 0 for none */
	enum opt_type type;
	void *dst;
	const char *def;     /* default, parsed before argv; NULL for none */
	double min, max;     /* numeric range, inclusive; min == max means unchecked */
	const char *choices; /* OPT_CHOICE: "io_uring,pread,null" */
	const char *arg;     /* metavar in --help, e.g. "N" */
	const char *help;
};
#define OPT_END {0}
/* A heading in --help: "data", "reading", "image", "output", "remote" (the
 * groups the library's rows fall in, opt_lib_group) or a command's own. */
#define OPT_GROUP(title) {(title), 0, OPT_SECTION, NULL, NULL, 0, 0, NULL, NULL, NULL}
/* --seed of a command's own table (gen, pack, disk; bench's is the library's
 * row): one range for all, so that a negative seed is refused everywhere
 * rather than taken as 2^64 - 1 by some. */
#define OPT_SEED(short_name, dst, def, help)                                       \
	{"seed", (short_name), OPT_INT, (dst), (def), 0, 9.2e18, NULL, "S", (help)}

struct cmd_help {
	const char *name;     /* "bench" */
	const char *synopsis; /* "[options] [PATH]" */
	const char *summary;  /* one paragraph */
	const char *examples; /* lines "stoker CMD ...  # what it does", under 96 columns
				 (--help puts "  $ " before each: help2man keeps them verbatim) */
};

/* Appends an OPT_LIB entry for every row of the library's option table in
 * `group`, writing into `base` (a struct stk_loader_opts, stk_image_opts or
 * stk_video_opts),
 * after the n entries of opts (room for cap); returns the new count.  Long
 * names are the rows' with '-' for '_' (--no-NAME for an option on by
 * default); a few have the short letters users know (-b, -p, -q, -t, -e).
 * only: NULL for every row, else a NULL-terminated list of row names. */
size_t opt_add_library(struct opt *opts, size_t n, size_t cap, enum stk_opt_group group,
		       void *base, const char *const *only);
/* A numeric option's value in base, or its default when the field is zero
 * (what the library would use), e.g. for a figure derived before create. */
uint64_t opt_lib_u64(const void *base, const char *name);
/* Parses argv against opts (defaults first).  Returns the index of the first
 * operand, or -EXIT_USAGE after printing the reason on stderr.  --help prints
 * the usage and exits 0. */
int opt_parse(const struct cmd_help *h, const struct opt *opts, int argc, char **argv);
void opt_usage(FILE *f, const struct cmd_help *h, const struct opt *opts);
/* The one of names[0..n) nearest to the len characters at word, when it is
 * near enough to be what was meant ("bnech": "bench"), else NULL. */
const char *did_you_mean(const char *word, size_t len, const char *const *names, size_t n);
/* The letter option o of command cmd had before short flags got one meaning
 * in every command, still taken there (gen -q for --quality), or 0. */
int kept_short(const char *cmd, const struct opt *o);
/* msg with the option names it holds as the CLI's flags (--world-size for
 * world_size), into buf; returns buf. */
const char *cli_flag_words(const char *msg, char *buf, size_t len);

/* A progress line on stderr, redrawn in place, only when stderr is a terminal. */
bool progress_enabled(void);
void progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void progress_done(void);

/* "1.23 GB", "456 MB"... and "850 ns", "1.2 us", "3.40 s": the library's
 * stk_fmt_bytes and stk_fmt_ns under the names the tools use (one formatter
 * for every command; rates: stk_fmt_rate, typed sizes: stk_fmt_ibytes). */
const char *fmt_bytes(char *buf, size_t len, double bytes);
const char *fmt_ns(char *buf, size_t len, double ns);
double now_s(void);
/* CPU seconds (user + system) this process has used, all threads. */
double process_cpu_s(void);

/* splitmix64's output function: a well-mixed 64-bit value from x (stoker
 * gen's pictures, stoker disk's offset permutation). */
static inline uint64_t mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* Drops the page cache (sync; echo 3 > /proc/sys/vm/drop_caches).  0, or <0
 * with the reason in why. */
int drop_caches(char *why, size_t len);

/* mkdir -p DIR (0755): 0 when DIR is a directory at the end, else -errno
 * with the path up to the component that failed in `failed` (may be NULL). */
int mkdirs(const char *dir, char *failed, size_t len);

/* SIGINT, SIGTERM and SIGHUP go to handler (each blocked while it runs),
 * except those the caller ignores (nohup, a background job). */
void on_stop_signals(void (*handler)(int));

/* Subcommands. */
int cmd_bench(int argc, char **argv);
int cmd_gen(int argc, char **argv);
int cmd_disk(int argc, char **argv);
int cmd_doctor(int argc, char **argv);
int cmd_iostat(int argc, char **argv);
int cmd_exporter(int argc, char **argv);
int cmd_pack(int argc, char **argv);
int cmd_transcode(int argc, char **argv);

/* Reads the file at path (of size bytes; 0: whatever it has), or the size
 * bytes at offset in it (a tar shard's member), and rewrites them with
 * stk_jpeg_transcode.  0: *out (malloc'ed, *outlen bytes) is the new
 * file; 1: the file is kept as it was (*out holds its bytes) and why says
 * why (not a JPEG, corrupt, unsupported); -1: it could not be read (why). */
int transcode_file(const char *path, uint64_t offset, uint64_t size, void **out, size_t *outlen,
		   char *why, size_t whylen);

#endif
