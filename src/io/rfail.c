/*
 * io/rfail.c — why reads of remote objects failed for good, kept for the
 * loader's messages.  An io hands the loader only a -errno (-ETIME, -EIO);
 * the transport knew more: curl's reason or the HTTP status of the last try,
 * and how many tries were made.  The engine records it here per object (the
 * last failure of a read of that object: the members of one object fail for
 * one cause, a server gone or a timeout); the loader, wording the error of a
 * member whose read failed, asks for its object's.  A pointer per object,
 * made at the first failure; a string per object that failed (freed by
 * the remote's destroy).
 */
#include "io/remote.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void stk__remote_failed(struct stk__remote *r, const struct stk__robj *o, unsigned tries,
			const char *why)
{
	if (!r || !o || o < r->objs || o >= r->objs + r->nobjs)
		return;
	char text[240];
	snprintf(text, sizeof(text), "%s, %u %s", why, tries, tries == 1 ? "try" : "tries");
	pthread_mutex_lock(&r->fail_mu);
	if (!r->fail_why)
		r->fail_why = calloc(r->nobjs, sizeof(*r->fail_why));
	if (r->fail_why) {
		char **slot = &r->fail_why[o - r->objs];
		if (!*slot || strcmp(*slot, text)) {
			char *dup = strdup(text);
			if (dup) {
				free(*slot);
				*slot = dup;
			}
		}
	}
	pthread_mutex_unlock(&r->fail_mu);
}

int stk__remote_failure(struct stk__remote *r, const char *rel, char *out, size_t len)
{
	const struct stk__robj *o = r ? stk__remote_find(r, rel) : NULL;
	if (!o)
		return 0;
	int found = 0;
	pthread_mutex_lock(&r->fail_mu);
	if (r->fail_why && r->fail_why[o - r->objs]) {
		snprintf(out, len, "%s", r->fail_why[o - r->objs]);
		found = 1;
	}
	pthread_mutex_unlock(&r->fail_mu);
	return found;
}
