/*
 * base/options.c — the option table of stoker.h made into rows, and the one
 * parser, formatter, defaulter and range check every front end goes through.
 *
 * Text is the common currency: the CLI hands stk_option_set its argv words,
 * Python its keyword values turned into text, and --help, docs/options.md and
 * the Python signature read the rows.  At create, stk__opts_apply gives each
 * zero field its row's default (parsed from the same text) and checks every
 * range, so a value out of range is refused with the option's name and range
 * whichever front end it came through.
 */
#include "base/internal.h"

#include <ctype.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define ROW(group, name, alias, type, field, bit, def, min, max, choices, help)                 \
	{#name,                                                                                  \
	 STK_OPT_##group,                                                                         \
	 STK_OPT_##type,                                                                          \
	 (uint32_t)offsetof(struct stk_##group##_opts_t, field),                                  \
	 (uint32_t)(bit),                                                                         \
	 def,                                                                                     \
	 (double)(min),                                                                           \
	 (double)(max),                                                                           \
	 choices,                                                                                 \
	 help,                                                                                    \
	 alias},
/* offsetof needs a type name per group */
#define stk_LOADER_opts_t stk_loader_opts
#define stk_IMAGE_opts_t stk_image_opts
#define stk_VIDEO_opts_t stk_video_opts

static const struct stk_option rows[] = {
	STK_LOADER_OPTIONS(ROW) STK_IMAGE_OPTIONS(ROW)
};
#define NROWS ((int)(sizeof(rows) / sizeof(rows[0])))
/* The video rows: a list of their own (stoker.h says why). */
static const struct stk_option vrows[] = {STK_VIDEO_OPTIONS(ROW)};
#define NVROWS ((int)(sizeof(vrows) / sizeof(vrows[0])))

const struct stk_option *stk_option_at(int i)
{
	return i >= 0 && i < NROWS ? &rows[i] : NULL;
}

/* Whether `want` is `name`, '-' taken for '_'; or, with len, its first len
 * characters. */
static bool same_name(const char *name, size_t len, const char *want)
{
	size_t i = 0;
	for (; i < len && name[i]; i++)
		if (name[i] != want[i] && !(name[i] == '_' && want[i] == '-'))
			return false;
	return (i == len || !name[i]) && !want[i];
}

const struct stk_option *stk_video_option_at(int i)
{
	return i >= 0 && i < NVROWS ? &vrows[i] : NULL;
}

const struct stk_option *stk_video_option_find(const char *name)
{
	for (int i = 0; name && i < NVROWS; i++)
		if (same_name(vrows[i].name, SIZE_MAX, name))
			return &vrows[i];
	return NULL;
}

const struct stk_option *stk_option_find(const char *name)
{
	if (!name)
		return NULL;
	for (int i = 0; i < NROWS; i++)
		if (same_name(rows[i].name, SIZE_MAX, name))
			return &rows[i];
	for (int i = 0; i < NROWS; i++) /* then the aliases of more than one letter */
		for (const char *a = rows[i].alias; a && *a;) {
			size_t n = strcspn(a, ",");
			if (n > 1 && same_name(a, n, name))
				return &rows[i];
			a += n + (a[n] == ',');
		}
	return NULL;
}

/* --- reading one value ---------------------------------------------------- */

/* The index of `v` among the comma-separated choices: exact, or a unique
 * prefix.  -1 if none, -2 if ambiguous. */
static int choice_index(const char *choices, const char *v)
{
	size_t vl = strlen(v);
	int idx = 0, prefix = -1, nprefix = 0;
	for (const char *p = choices; p && *p; idx++) {
		const char *c = strchr(p, ',');
		size_t l = c ? (size_t)(c - p) : strlen(p);
		if (l == vl && !strncmp(p, v, l))
			return idx;
		if (vl && vl < l && !strncmp(p, v, vl)) {
			prefix = idx;
			nprefix++;
		}
		p = c ? c + 1 : NULL;
	}
	if (nprefix > 1)
		return -2;
	return nprefix ? prefix : -1;
}

/* The choices with ", " between them, for messages. */
static const char *choice_list(const char *choices, char *buf, size_t len)
{
	size_t o = 0;
	for (const char *p = choices; p && *p && o + 3 < len; p++) {
		if (*p == ',') {
			buf[o++] = ',';
			buf[o++] = ' ';
		} else {
			buf[o++] = *p;
		}
	}
	buf[o < len ? o : len - 1] = 0;
	return buf;
}

static int parse_bool(const char *v, bool *out)
{
	static const char *const yes[] = {"1", "true", "yes", "on"}, *const no[] = {"0", "false",
										 "no", "off"};
	for (size_t i = 0; i < 4; i++) {
		if (!strcasecmp(v, yes[i])) {
			*out = true;
			return 0;
		}
		if (!strcasecmp(v, no[i])) {
			*out = false;
			return 0;
		}
	}
	return -EINVAL;
}

static int parse_u64(const char *v, uint64_t *out)
{
	char *end;
	while (isspace((unsigned char)*v))
		v++;
	if (*v == '-' || !*v)
		return -EINVAL;
	int saved = errno; /* the library never changes the caller's errno */
	errno = 0;
	unsigned long long x = strtoull(v, &end, 0);
	int e = errno;
	errno = saved;
	if (e || end == v || *end)
		return e == ERANGE ? -ERANGE : -EINVAL;
	*out = x;
	return 0;
}

static int parse_float(const char *v, double *out)
{
	char *end;
	int saved = errno;
	errno = 0;
	double x = strtod(v, &end);
	int e = errno;
	errno = saved;
	if (e || end == v || *end || !isfinite(x))
		return -EINVAL;
	*out = x;
	return 0;
}

/* A number and what follows it (spaces skipped), or -EINVAL; the caller's
 * errno kept. */
static int number_unit(const char *v, double *x, const char **unit)
{
	char *end;
	int saved = errno;
	errno = 0;
	*x = strtod(v, &end);
	int e = errno;
	errno = saved;
	if (!v[0] || e || end == v || !isfinite(*x) || *x < 0 || signbit(*x))
		return -EINVAL;
	while (*end == ' ')
		end++;
	*unit = end;
	return 0;
}

int stk_parse_size(const char *text, uint64_t *bytes)
{
	static const struct {
		const char *unit;
		double mul;
	} units[] = {
		{"", 1},	 {"b", 1},	   {"k", 1024.0},	  {"kib", 1024.0},
		{"kb", 1e3},	 {"m", 1048576.0}, {"mib", 1048576.0},	  {"mb", 1e6},
		{"g", 1073741824.0}, {"gib", 1073741824.0}, {"gb", 1e9}, {"t", 1099511627776.0},
		{"tib", 1099511627776.0}, {"tb", 1e12},
	};
	double x;
	const char *unit;
	if (!text || !bytes || number_unit(text, &x, &unit) < 0)
		return -EINVAL;
	for (size_t i = 0; i < STK_ARRAY_SIZE(units); i++)
		if (!strcasecmp(unit, units[i].unit)) {
			double r = x * units[i].mul;
			if (r >= 18446744073709551616.0)
				return -ERANGE;
			*bytes = (uint64_t)r;
			return 0;
		}
	return -EINVAL;
}

int stk_parse_duration(const char *text, uint64_t unit_ns, uint64_t *ns)
{
	static const struct {
		const char *unit;
		double ns;
	} units[] = {{"ns", 1},	   {"us", 1e3},	 {"\xc2\xb5s", 1e3}, {"ms", 1e6},
		     {"s", 1e9},   {"m", 60e9},	 {"min", 60e9},	     {"h", 3600e9}};
	double x;
	const char *unit;
	if (!text || !ns || !unit_ns || number_unit(text, &x, &unit) < 0)
		return -EINVAL;
	double mul = unit[0] ? 0 : (double)unit_ns;
	for (size_t i = 0; !mul && i < STK_ARRAY_SIZE(units); i++)
		if (!strcmp(unit, units[i].unit))
			mul = units[i].ns;
	if (!mul)
		return -EINVAL;
	double r = x * mul;
	if (r >= 18446744073709551616.0)
		return -ERANGE;
	*ns = (uint64_t)llround(r);
	return 0;
}

static void *field(const struct stk_option *o, void *opts)
{
	return (char *)opts + o->offset;
}

static bool has_range(const struct stk_option *o)
{
	return o->min != o->max;
}

/* ns as the largest unit that divides it: "30s", "5ms", "200us", "7" (what
 * stk_parse_duration reads back). */
static int fmt_duration(uint64_t v, char *buf, size_t len)
{
	static const struct {
		uint64_t ns;
		const char *unit;
	} u[] = {{1000000000ull, "s"}, {1000000ull, "ms"}, {1000ull, "us"}};
	for (size_t i = 0; v && i < STK_ARRAY_SIZE(u); i++)
		if (v % u[i].ns == 0)
			return snprintf(buf, len, "%llu%s", (unsigned long long)(v / u[i].ns), u[i].unit);
	return snprintf(buf, len, "%llu", (unsigned long long)v);
}

static int range_error(const struct stk_option *o, const char *value, char *err, size_t errlen)
{
	if (o->type == STK_OPT_DURATION) {
		char lo[32], hi[32];
		fmt_duration((uint64_t)o->min, lo, sizeof(lo));
		fmt_duration((uint64_t)o->max, hi, sizeof(hi));
		snprintf(err, errlen, "%s: %s is out of range %s..%s", o->name, value, lo, hi);
	} else if (o->choices)
		snprintf(err, errlen, "%s: %s is out of range %.17g..%.17g (or %s, 0)", o->name, value,
			 o->min, o->max, o->choices);
	else
		snprintf(err, errlen, "%s: %s is out of range %.17g..%.17g", o->name, value, o->min,
			 o->max);
	return -ERANGE;
}

/* A numeric value against the row's range; 0 passes where the row names it.
 * A row whose default is not 0 cannot take 0 either: in C a zero field asks
 * for the default, so an explicit 0 would silently become it. */
static int check_range(const struct stk_option *o, double v, const char *text, char *err,
		       size_t errlen)
{
	if (v == 0 && o->choices)
		return 0;
	if (v == 0 && o->min <= 0 && o->type != STK_OPT_FLOAT3 && strtod(o->def, NULL) != 0) {
		snprintf(err, errlen, "%s: %s is out of range: above 0, up to %.17g", o->name, text,
			 o->max);
		return -ERANGE;
	}
	if (has_range(o) && (v < o->min || v > o->max))
		return range_error(o, text, err, errlen);
	return 0;
}

static const char *type_word(enum stk_opt_type t)
{
	switch (t) {
	case STK_OPT_U32:
	case STK_OPT_U64:
		return "a non-negative integer";
	case STK_OPT_FLOAT:
		return "a number";
	case STK_OPT_FLOAT3:
		return "one number or three (\"a,b,c\")";
	case STK_OPT_DURATION:
		return "a duration (\"5ms\", \"200us\", \"2s\", \"1m\", or ns)";
	case STK_OPT_FLAG:
	case STK_OPT_NOFLAG:
		return "true or false";
	default:
		return "text";
	}
}

int stk_option_set(const struct stk_option *o, void *opts, const char *value, char *err,
		   size_t errlen)
{
	char scratch[8];
	if (!err || !errlen) {
		err = scratch;
		errlen = sizeof(scratch);
	}
	err[0] = 0;
	if (!o || !opts)
		return -EINVAL;
	if (!value)
		value = o->def;
	void *f = field(o, opts);
	uint64_t u = 0;
	double d = 0;
	bool b = false;
	int rc = 0;
	switch (o->type) {
	case STK_OPT_U32:
	case STK_OPT_U64:
		if (o->choices && choice_index(o->choices, value) == 0) {
			u = 0; /* "auto" */
		} else if ((rc = (o->bit & STK_OPT_BYTES) ? stk_parse_size(value, &u)
							  : parse_u64(value, &u)) < 0) {
			if (rc == -ERANGE)
				return range_error(o, value, err, errlen);
			snprintf(err, errlen, "%s: '%s' is not %s%s%s", o->name, value,
				 o->bit & STK_OPT_BYTES ? "a size (\"64MiB\", \"1.5G\", \"64KB\", "
							  "or bytes)"
							: type_word(o->type),
				 o->choices ? " or " : "",
				 o->choices ? o->choices : "");
			return -EINVAL;
		}
		if ((rc = check_range(o, (double)u, value, err, errlen)) < 0)
			return rc;
		if (o->type == STK_OPT_U32) {
			if (u > UINT32_MAX)
				return range_error(o, value, err, errlen);
			*(uint32_t *)f = (uint32_t)u;
		} else {
			*(uint64_t *)f = u;
		}
		return 0;
	case STK_OPT_DURATION:
		if ((rc = stk_parse_duration(value, 1, &u)) < 0) {
			if (rc == -ERANGE)
				return range_error(o, value, err, errlen);
			snprintf(err, errlen, "%s: '%s' is not %s", o->name, value, type_word(o->type));
			return rc;
		}
		if ((rc = check_range(o, (double)u, value, err, errlen)) < 0)
			return rc;
		*(uint64_t *)f = u;
		return 0;
	case STK_OPT_FLOAT:
		if (parse_float(value, &d) < 0) {
			snprintf(err, errlen, "%s: '%s' is not %s", o->name, value, type_word(o->type));
			return -EINVAL;
		}
		if ((rc = check_range(o, d, value, err, errlen)) < 0)
			return rc;
		*(float *)f = (float)d;
		return 0;
	case STK_OPT_FLOAT3: {
		float v3[3];
		const char *p = value;
		int n = 0;
		for (; n < 3; n++) {
			char num[64];
			const char *c = strchr(p, ',');
			size_t l = c ? (size_t)(c - p) : strlen(p);
			if (l >= sizeof(num))
				break;
			memcpy(num, p, l);
			num[l] = 0;
			if (parse_float(num, &d) < 0 || check_range(o, d, num, err, errlen) < 0)
				break;
			v3[n] = (float)d;
			if (!c) {
				n++;
				break;
			}
			p = c + 1;
		}
		if ((n != 1 && n != 3) || strchr(p, ',')) {
			if (!err[0])
				snprintf(err, errlen, "%s: '%s' is not %s", o->name, value,
					 type_word(o->type));
			return err[0] && strstr(err, "out of range") ? -ERANGE : -EINVAL;
		}
		for (int i = 0; i < 3; i++)
			((float *)f)[i] = v3[n == 1 ? 0 : i];
		return 0;
	}
	case STK_OPT_STR:
		*(const char **)f = value[0] ? value : NULL;
		return 0;
	case STK_OPT_ENUM:
	case STK_OPT_BITCHOICE: {
		int idx = choice_index(o->choices, value);
		if (idx < 0) {
			char list[256];
			snprintf(err, errlen, "%s: '%s' is %s one of %s", o->name, value,
				 idx == -2 ? "more than" : "not",
				 choice_list(o->choices, list, sizeof(list)));
			return -EINVAL;
		}
		if (o->type == STK_OPT_ENUM)
			*(int *)f = idx;
		else if (idx)
			*(uint32_t *)f |= o->bit;
		else
			*(uint32_t *)f &= ~o->bit;
		return 0;
	}
	case STK_OPT_FLAG:
	case STK_OPT_NOFLAG:
		if (parse_bool(value, &b) < 0) {
			snprintf(err, errlen, "%s: '%s' is not %s", o->name, value, type_word(o->type));
			return -EINVAL;
		}
		if (b == (o->type == STK_OPT_FLAG))
			*(uint32_t *)f |= o->bit;
		else
			*(uint32_t *)f &= ~o->bit;
		return 0;
	}
	return -EINVAL;
}

/* The nth comma-separated choice into buf. */
static const char *nth_choice(const char *choices, int n, char *buf, size_t len)
{
	const char *p = choices;
	for (int i = 0; p && i < n; i++) {
		p = strchr(p, ',');
		p = p ? p + 1 : NULL;
	}
	if (!p)
		return NULL;
	const char *c = strchr(p, ',');
	size_t l = c ? (size_t)(c - p) : strlen(p);
	snprintf(buf, len, "%.*s", (int)l, p);
	return buf;
}

int stk_option_get(const struct stk_option *o, const void *opts, char *buf, size_t len)
{
	if (!o || !opts || (!buf && len))
		return -EINVAL;
	const void *f = (const char *)opts + o->offset;
	char c[64];
	switch (o->type) {
	case STK_OPT_U32:
	case STK_OPT_U64: {
		uint64_t v = o->type == STK_OPT_U32 ? *(const uint32_t *)f : *(const uint64_t *)f;
		if (!v && o->choices)
			return snprintf(buf, len, "%s", nth_choice(o->choices, 0, c, sizeof(c)));
		return snprintf(buf, len, "%llu", (unsigned long long)v);
	}
	case STK_OPT_DURATION:
		return fmt_duration(*(const uint64_t *)f, buf, len);
	case STK_OPT_FLOAT:
		return snprintf(buf, len, "%.9g", (double)*(const float *)f);
	case STK_OPT_FLOAT3: {
		const float *v = f;
		return snprintf(buf, len, "%.9g,%.9g,%.9g", (double)v[0], (double)v[1], (double)v[2]);
	}
	case STK_OPT_STR: {
		const char *s = *(const char *const *)f;
		return snprintf(buf, len, "%s", s ? s : "");
	}
	case STK_OPT_ENUM: {
		const char *s = nth_choice(o->choices, *(const int *)f, c, sizeof(c));
		return s ? snprintf(buf, len, "%s", s) : -EINVAL;
	}
	case STK_OPT_BITCHOICE:
		return snprintf(buf, len, "%s",
				nth_choice(o->choices, (*(const uint32_t *)f & o->bit) ? 1 : 0, c,
					   sizeof(c)));
	case STK_OPT_FLAG:
	case STK_OPT_NOFLAG: {
		bool on = !!(*(const uint32_t *)f & o->bit) == (o->type == STK_OPT_FLAG);
		return snprintf(buf, len, "%s", on ? "true" : "false");
	}
	}
	return -EINVAL;
}

/* --- defaults and ranges at create ----------------------------------------- */

static bool is_zero(const struct stk_option *o, const void *opts)
{
	const void *f = (const char *)opts + o->offset;
	switch (o->type) {
	case STK_OPT_U32:
		return !*(const uint32_t *)f;
	case STK_OPT_U64:
	case STK_OPT_DURATION:
		return !*(const uint64_t *)f;
	case STK_OPT_FLOAT:
		return *(const float *)f == 0;
	case STK_OPT_FLOAT3: {
		const float *v = f;
		return v[0] == 0 && v[1] == 0 && v[2] == 0;
	}
	default:
		return false; /* zero is their default by construction */
	}
}

int stk__opts_apply(enum stk_opt_group group, void *opts, char *err, size_t errlen)
{
	const struct stk_option *tab = group == STK_OPT_VIDEO ? vrows : rows;
	int ntab = group == STK_OPT_VIDEO ? NVROWS : NROWS;
	/* vectors (mean, std) take their defaults together, or not at all: a
	 * zero mean beside a given std is a zero mean */
	bool vec_set = false;
	for (int i = 0; i < ntab; i++)
		if (tab[i].group == group && tab[i].type == STK_OPT_FLOAT3 &&
		    !is_zero(&tab[i], opts))
			vec_set = true;
	for (int i = 0; i < ntab; i++) {
		const struct stk_option *o = &tab[i];
		if (o->group != group)
			continue;
		if (is_zero(o, opts) && !(o->type == STK_OPT_FLOAT3 && vec_set)) {
			if (o->choices && (o->type == STK_OPT_U32 || o->type == STK_OPT_U64))
				continue; /* 0 is "auto": the library chooses */
			int rc = stk_option_set(o, opts, NULL, err, errlen);
			if (rc < 0)
				return rc; /* a bad default: a bug the tests catch */
			continue;
		}
		/* a value the caller set: in range? */
		const void *f = (const char *)opts + o->offset;
		double v;
		switch (o->type) {
		case STK_OPT_U32:
			v = *(const uint32_t *)f;
			break;
		case STK_OPT_U64:
		case STK_OPT_DURATION:
			v = (double)*(const uint64_t *)f;
			break;
		case STK_OPT_FLOAT:
			v = *(const float *)f;
			if (isnan(v)) {
				snprintf(err, errlen, "%s: NaN is not a number", o->name);
				return -ERANGE;
			}
			break;
		case STK_OPT_FLOAT3:
			for (int k = 0; k < 3; k++) {
				v = ((const float *)f)[k];
				if (!isfinite(v) || (has_range(o) && (v < o->min || v > o->max))) {
					char t[64];
					snprintf(t, sizeof(t), "%g", v);
					return range_error(o, t, err, errlen);
				}
			}
			continue;
		case STK_OPT_ENUM: {
			int n = 1, e = *(const int *)f;
			for (const char *p = o->choices; (p = strchr(p, ',')); p++)
				n++;
			if (e < 0 || e >= n) {
				char list[256];
				snprintf(err, errlen, "%s: %d is not one of 0..%d (%s)", o->name, e, n - 1,
					 choice_list(o->choices, list, sizeof(list)));
				return -EINVAL;
			}
			continue;
		}
		default:
			continue;
		}
		char t[64];
		if (o->type == STK_OPT_FLOAT)
			snprintf(t, sizeof(t), "%.9g", v);
		else
			snprintf(t, sizeof(t), "%.0f", v);
		int rc = check_range(o, v, t, err, errlen);
		if (rc < 0)
			return rc;
	}
	return 0;
}

size_t stk_struct_size(const char *name)
{
	static const struct {
		const char *name;
		size_t size;
	} sizes[] = {
#define S(t) {#t, sizeof(struct t)}
		S(stk_loader_opts), S(stk_image_opts), S(stk_video_opts), S(stk_clip_info),
		S(stk_video_info), S(stk_video_make_opts), S(stk_batch),	 S(stk_stats),
		S(stk_loader_state), S(stk_verdict),	  S(stk_option),
		S(stk_resume),	     S(stk_resume_segment), S(stk_cpu_share),
		S(stk_memory),
		S(stk_remote_stats),
#undef S
	};
	for (size_t i = 0; name && i < STK_ARRAY_SIZE(sizes); i++)
		if (!strcmp(name, sizes[i].name))
			return sizes[i].size;
	return 0;
}
