/* common/optrows.c — what the option code shares: the CLI's entries for rows
 * of the library's option table (opt_add_library) and the rows behind them,
 * options by name, and the short letters' history (one meaning in every
 * command; the old ones refused or still taken).  The parser (opt.c) and
 * --help (usage.c) call down into it. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "common/opt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* OPT_LIB entries: their CLI names live here, beside the rows they stand
 * for, for the process's life (an entry's name says which row it is). */
static char lib_names[96][40];
static const struct stk_option *lib_rows[96];
static size_t lib_used;

const char *opt_num_text(char *buf, size_t len, double v)
{
	if (v <= 9.2e18 && v >= -9.2e18 && v == (double)(long long)v) /* LLONG_MAX is 9.22e18 */
		snprintf(buf, len, "%lld", (long long)v);
	else
		snprintf(buf, len, "%g", v);
	return buf;
}

const struct stk_option *opt_lib_row(const struct opt *o)
{
	for (size_t k = 0; k < lib_used; k++)
		if (o->name == lib_names[k])
			return lib_rows[k];
	return NULL;
}

bool opt_is_bool(const struct opt *o)
{
	const struct stk_option *r = o->type == OPT_LIB ? opt_lib_row(o) : NULL;
	return o->type == OPT_BOOL || (r && (r->type == STK_OPT_FLAG || r->type == STK_OPT_NOFLAG));
}

const struct opt *opt_named(const struct opt *opts, const char *name)
{
	for (const struct opt *o = opts; o->name; o++)
		if (o->type != OPT_SECTION && !strcmp(o->name, name))
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
const struct opt *opt_moved_from(const struct opt *opts, int c, const char **now)
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

const char *opt_lib_group(const struct stk_option *r)
{
	static const char *const data[] = {"batch_size", "seed", "rank", "world_size", "shuffle",
					   "shuffle_mode", "shuffle_window", "drop_last",
					   "on_error", "extensions", "cache_dir", "index_cache",
					   "index_beside"};
	if (!r)
		return "options";
	if (r->group == STK_OPT_IMAGE)
		return "image";
	if (r->group == STK_OPT_VIDEO)
		return "video";
	if (!strncmp(r->name, "remote", 6) || !strcmp(r->name, "cache_limit"))
		return "remote";
	if (!strcmp(r->name, "quiet"))
		return "output";
	for (size_t i = 0; i < sizeof(data) / sizeof(data[0]); i++)
		if (!strcmp(r->name, data[i]))
			return "data";
	return "reading";
}

int opt_moved_letter(size_t nth)
{
	return nth < sizeof(moved) / sizeof(moved[0]) ? moved[nth].c : 0;
}

int kept_short(const char *cmd, const struct opt *o)
{
	for (size_t i = 0; i < sizeof(kept) / sizeof(kept[0]); i++)
		if (!strcmp(kept[i].cmd, cmd) && !strcmp(kept[i].name, o->name))
			return kept[i].c;
	return 0;
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
	/* the video rows are a list of their own (stoker.h says why) */
	for (int i = 0; (r = group == STK_OPT_VIDEO ? stk_video_option_at(i) : stk_option_at(i)) &&
			n + 1 < cap; i++) {
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

