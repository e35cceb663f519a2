/*
 * loader/error.c — a sample that failed: counted and named.  The fail policy
 * reports the batch's first failure when the consumer reaches it; skip drops
 * it from the batch (loader/producer.c compacts); replace reads a stand-in in
 * its place (loader/replace.c).  A short or grown file means the index no
 * longer matches the data: the cache file is removed so the next create
 * indexes again.  Under the loader's mutex.
 */
#include "loader/loader.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

void stk__loader_drop_index(struct stk_loader *l)
{
	/* the index no longer matches the data: the next create must not reuse
	 * it (the folder's or the shard's mtime may not have changed) */
	if (l->index_dropped)
		return;
	l->index_dropped = true;
	if (l->ds->cache_path)
		unlink(l->ds->cache_path);
}

void stk__loader_sample_error(struct stk_loader *l, struct slot *s, struct sio *x, int rc,
			      const char *why)
{
	struct stk_io *io = &x->io;
	const char *root = io->path[0] == '/' ? "" : l->ds->root;
	const char *sep = io->path[0] == '/' ? "" : "/";
	io->res = rc;
	if (s->gen != l->gen)
		return; /* from before a restart: nobody will see it */
	s->nerr++;
	if (rc == STK_ESHORT || rc == STK_EGREW)
		stk__loader_drop_index(l);
	char msg[sizeof(l->detail)];
	if (why)
		snprintf(msg, sizeof(msg), "%s%s%s: %s", root, sep, io->path, why);
	else if (rc == STK_ESHORT)
		snprintf(msg, sizeof(msg), "%s%s%s: short read: indexed %llu bytes, the file has fewer",
			 root, sep, io->path, (unsigned long long)x->size);
	else if (rc == STK_EGREW)
		snprintf(msg, sizeof(msg), "%s%s%s: the file is larger than the %llu bytes indexed "
			 "(changed in place since); the index is built again at the next create",
			 root, sep, io->path, (unsigned long long)x->size);
	else if (rc == STK_ETOOBIG)
		snprintf(msg, sizeof(msg), "%s%s%s: %llu bytes do not fit in what is left of the batch "
			 "slot (%llu bytes); raise slot_bytes", root, sep, io->path,
			 (unsigned long long)x->size, (unsigned long long)l->raw_bytes);
	else
		snprintf(msg, sizeof(msg), "%s%s%s: %s", root, sep, io->path, stk_strerror(rc));
	if (l->o.on_error == STK_ON_ERROR_REPLACE) {
		size_t at = strlen(msg);
		if (at > sizeof(msg) - 32)
			at = sizeof(msg) - 32; /* the note always fits */
		snprintf(msg + at, sizeof(msg) - at, " (replaced by a stand-in)");
	}
	/* Once an error ended the epoch, its reason is what stk_last_error says:
	 * the reads still landing do not write over it. */
	if (!l->fatal)
		memcpy(l->detail, msg, sizeof(msg));
	if (x->idx < s->err_idx) {
		s->err_idx = x->idx;
		snprintf(s->err, sizeof(s->err), "%s", msg);
	}
}

