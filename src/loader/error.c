/*
 * loader/error.c — a sample's read laid out in its slot, and what happens
 * when it fails: counted and named (the fail policy reports the batch's first
 * failure when the consumer reaches it), dropped from the batch (skip,
 * loader/loader.c compacts), or replaced by a stand-in (replace).
 *
 * Replace keeps every batch at its full size.  When a slot's reads and
 * decodes are all in and some failed, each failed place (in batch order)
 * gets the next candidate of its own sequence, drawn from (seed, epoch, the
 * dataset index first at that place, k = 0, 1, ...) over the whole dataset:
 * the first no larger than the failed sample's room is read there (and
 * decoded in image mode).  That depends on the index only, so the stand-ins
 * are the same whatever the batch size, slot size, engine or timing.  Only
 * when REPLACE_NEAR draws find none that small (the bad sample is among the
 * dataset's smallest) may a larger one go after the slot's last read, if it
 * fits.  A tar member shares its read with its neighbours (merged runs): its
 * stand-in, no larger than it read alone, always goes after the slot's last
 * read, so for shards the choice also depends on the room left in the slot
 * when it is short.  A stand-in that fails too is counted and named like any bad
 * sample, and the next candidate goes in the next round: rounds start when
 * the slot's work is done, so which candidate lands where depends on the
 * data, not on timing.  A place with no stand-in after REPLACE_READS reads
 * (or REPLACE_DRAWS draws) ends the epoch with the error, as fail would.
 * Everything here runs under the loader's mutex.
 */
#include "loader/loader.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define REPLACE_READS 16   /* stand-in reads per failed place */
#define REPLACE_DRAWS 1024 /* candidates drawn per place (those that do not fit cost nothing) */
#define REPLACE_NEAR 64    /* draws before a stand-in larger than the place may go elsewhere */

/* Folders and lists: what a good read of entry e returns, its size or under
 * read_bytes only its first bytes (a prefix: no growth probe). */
static uint64_t want_of(const struct stk_loader *l, const struct stk_entry *e, bool *prefix)
{
	*prefix = l->o.read_bytes && l->o.read_bytes < e->size;
	return *prefix ? l->o.read_bytes : e->size;
}

/* Room the read of dataset sample idx takes in a slot, read alone. */
static uint64_t room_for(const struct stk_loader *l, int64_t idx)
{
	if (l->ds->shards)
		return stk__shards_room(l, idx);
	bool prefix;
	uint64_t want = want_of(l, &l->ds->entries[idx], &prefix);
	return prefix && !l->direct ? want : stk__loader_read_len(l, want);
}

uint64_t stk__loader_setup_read(struct stk_loader *l, struct slot *s, uint32_t i, int64_t idx,
				uint64_t place)
{
	if (l->ds->shards)
		return stk__shards_setup_one(l, s, i, idx, place);
	uint32_t si = (uint32_t)(s - l->slots);
	const struct stk_entry *e = &l->ds->entries[idx];
	struct sio *x = &s->ios[i];
	bool prefix;
	uint64_t want = want_of(l, e, &prefix);
	s->indices[i] = idx;
	s->labels[i] = e->label;
	s->sizes[i] = want;
	/* field by field: the place's history (orig, place, room, attempt,
	 * reads) stays, and a whole-struct copy a sample was a third of the
	 * loader's own instructions a batch */
	x->io = (struct stk_io){.op = STK_IO_READ_FILE, .path = stk__entry_path(l->ds, idx),
				.len = prefix && !l->direct ? want : stk__loader_read_len(l, want),
				.offset = e->offset, .buf_index = (int)si,
				.buf = stk__pool_slot(&l->pool, si) + place};
	x->size = want;
	x->prefix = prefix;
	x->skip = 0;
	x->slot = si;
	x->idx = i;
	x->t_submit = 0;
	x->at = e->offset;
	x->rider = NULL;
	s->offsets[i] = place;
	return x->io.len;
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
	if ((rc == STK_ESHORT || rc == STK_EGREW) && !l->index_dropped) {
		/* the index no longer matches the data: the next create must not
		 * reuse it (the folder's mtime did not change) */
		l->index_dropped = true;
		if (l->ds->cache_path)
			unlink(l->ds->cache_path);
	}
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

/* Candidate k for the place whose first sample was orig. */
static int64_t candidate(const struct stk_loader *l, uint64_t epoch, int64_t orig, uint32_t k)
{
	uint64_t h = stk__mix64(k ^ 0x5851f42d4c957f2dull);
	h = stk__mix64(h ^ (uint64_t)orig);
	h = stk__mix64(h ^ epoch);
	h = stk__mix64(h ^ l->o.seed);
	return (int64_t)(h % (uint64_t)l->ds->n);
}

static void give_up(struct stk_loader *l, struct slot *s, struct sio *x)
{
	if (s->gave_up)
		return;
	s->gave_up = true;
	s->gave_up_rc = (int)x->io.res;
	char first[sizeof(s->err)];
	snprintf(first, sizeof(first), "%s", s->err);
	snprintf(s->err, sizeof(s->err), "%.*s; on_error replace: no stand-in could be loaded for "
		 "it after %u reads", (int)(sizeof(s->err) - 80), first, x->reads);
}

bool stk__loader_replace_round(struct stk_loader *l, struct slot *s)
{
	struct ring *r = &l->rings[s->ring];
	uint32_t queued = 0;
	for (uint32_t i = 0; i < s->nios; i++) {
		struct sio *x = &s->ios[i];
		if (x->io.res >= 0)
			continue;
		bool placed = false;
		while (x->reads < REPLACE_READS && x->attempt < REPLACE_DRAWS) {
			int64_t c = candidate(l, s->epoch, x->orig, x->attempt++);
			uint64_t need = room_for(l, c), place;
			if (x->place != NO_PLACE && need <= x->room) {
				place = x->place;
			} else if ((need <= x->room || x->attempt > REPLACE_NEAR) &&
				   need <= l->raw_bytes - s->used) {
				place = s->used;
				s->used += need;
			} else {
				continue; /* does not fit here: the next candidate, no read */
			}
			stk__loader_setup_read(l, s, i, c, place);
			x->reads++;
			r->queue[(r->qhead + r->qlen++) % r->qcap] = x;
			queued++;
			placed = true;
			break;
		}
		if (!placed)
			give_up(l, s, x);
	}
	s->offsets[s->nios] = s->used; /* data_bytes covers the stand-ins after the reads */
	if (!queued)
		return false;
	s->pending += queued;
	s->unsent += queued;
	if (r->eng)
		r->ops->wake(r->eng); /* the caller may be a decode thread */
	return true;
}
