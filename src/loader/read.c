/*
 * loader/read.c — a batch's reads laid out in its slot.  Folders and file
 * lists: one read a file, in sample order, each asking for one byte past the
 * indexed size (loader/common.c's stk__loader_read_len) so a file that grew
 * shows; tar shards: members merged into runs by loader/shard_read.c.  Each
 * read lands in place: no copy.  A sample that cannot fit is an error of
 * that sample (loader/error.c).  Under the loader's mutex.
 */
#include "loader/loader.h"

/* Folders and lists: what a good read of entry e returns, its size or under
 * read_bytes only its first bytes (a prefix: no growth probe). */
static uint64_t want_of(const struct stk_loader *l, const struct stk_entry *e, bool *prefix)
{
	*prefix = l->o.read_bytes && l->o.read_bytes < e->size;
	return *prefix ? l->o.read_bytes : e->size;
}

/* Room the read of dataset sample idx takes in a slot, read alone. */
uint64_t stk__loader_room(const struct stk_loader *l, int64_t idx)
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

/* Folders and file lists: one read a file, laid out in sample order. */
static uint32_t lay_out_files(struct stk_loader *l, struct io_thread *r, struct slot *s, uint32_t n)
{
	uint64_t off = 0;
	uint32_t queued = 0;
	for (uint32_t i = 0; i < n; i++) {
		struct sio *x = &s->ios[i];
		uint64_t len = stk__loader_setup_read(l, s, i, l->scratch_idx[i], off);
		x->place = off;
		x->room = len;
		if (len > l->raw_bytes - off) {
			/* a batch far above the size bound (see slot_bytes_for) */
			x->room = 0;
			stk__loader_sample_error(l, s, x, STK_ETOOBIG, NULL);
			continue;
		}
		off += len;
		r->queue[(r->qhead + r->qlen++) % r->qcap] = x;
		queued++;
	}
	s->offsets[n] = off;
	return queued;
}

uint32_t stk__loader_lay_out(struct stk_loader *l, struct io_thread *r, struct slot *s, uint32_t n)
{
	return l->ds->shards ? stk__shards_lay_out(l, r, s, n) : lay_out_files(l, r, s, n);
}
