/*
 * doctor/report.c — the doctor's report as its checks fill it: a row added
 * per check (ok / warn / fail), its fields written, and the library's
 * defaults the advice quotes (read from the option table, never restated).
 * doctor/doctor.c, doctor/path.c and doctor/share.c call it.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "doctor/doctor.h"

struct check *doc_add(struct doctor *d, const char *name, int status)
{
	struct check *c = &d->checks[d->n < DOCTOR_MAX_CHECKS ? d->n++ : DOCTOR_MAX_CHECKS - 1];
	memset(c, 0, sizeof(*c));
	snprintf(c->name, sizeof(c->name), "%s", name);
	c->status = status;
	return c;
}

const char *doc_default(const char *name)
{
	const struct stk_option *o = stk_option_find(name);
	return o && o->def ? o->def : "?";
}

void doc_set(char *field, size_t len, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(field, len, fmt, ap);
	va_end(ap);
}
