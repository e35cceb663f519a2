/*
 * loader/error.c — a sample that failed: counted and named.  The fail policy
 * reports the batch's first failure when the consumer reaches it; skip drops
 * it from the batch (loader/producer.c compacts); replace reads a stand-in in
 * its place (loader/replace.c).  A short or grown file means the index no
 * longer matches the data: the cache file is removed so the next create
 * indexes again (a file is first read again at its size now, loader/read.c:
 * what comes here is one that could not be).  Under the loader's mutex.
 */
#include "loader/loader.h"

#include <fcntl.h>
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

/* A shard member's name for a message: from its own tar header, just
 * before its data (ustar name and prefix), read only when an error names
 * it.  "" when it cannot be read. */
void stk__loader_member_name(const struct stk_loader *l, const char *shard, uint64_t data_off,
			     char *buf, size_t len)
{
	unsigned char h[512];
	buf[0] = 0;
	int fd = data_off >= sizeof(h) ? openat(l->ds->root_fd, shard, O_RDONLY | O_CLOEXEC) : -1;
	if (fd < 0)
		return;
	ssize_t n = pread(fd, h, sizeof(h), (off_t)(data_off - sizeof(h)));
	close(fd);
	if (n != (ssize_t)sizeof(h))
		return;
	int nl = (int)strnlen((const char *)h, 100), pl = 0;
	if (!memcmp(h + 257, "ustar", 5))
		pl = (int)strnlen((const char *)h + 345, 155);
	snprintf(buf, len, "%.*s%s%.*s", pl, (const char *)h + 345, pl ? "/" : "", nl,
		 (const char *)h);
	for (char *c = buf; *c; c++)
		if ((unsigned char)*c < 0x20)
			*c = '?';
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
	else if (rc == STK_ETOOBIG) {
		char member[300] = "";
		if (l->ds->shards) { /* the shard alone does not say which sample */
			char name[260];
			stk__loader_member_name(l, io->path, x->at, name, sizeof(name));
			snprintf(member, sizeof(member), ": member %s%sat offset %llu", name,
				 name[0] ? " " : "", (unsigned long long)x->at);
		}
		if (l->oversize && stk__loader_read_len(l, x->size) > l->raw_bytes)
			snprintf(msg, sizeof(msg), "%s%s%s%s: %llu bytes, larger than a batch slot can "
				 "be here (%llu bytes: the pool may take half of the memory); "
				 "slot_bytes sets the slot", root, sep, io->path, member,
				 (unsigned long long)x->size, (unsigned long long)l->raw_bytes);
		else
			snprintf(msg, sizeof(msg), "%s%s%s%s: %llu bytes do not fit in what is left of "
				 "the batch slot (%llu bytes); raise slot_bytes", root, sep, io->path,
				 member, (unsigned long long)x->size,
				 (unsigned long long)l->raw_bytes);
	}
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

