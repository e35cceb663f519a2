/*
 * loader/read.c — a batch's reads laid out in its slot.  Folders and file
 * lists: one read a file, in sample order, each asking for one byte past the
 * indexed size (loader/common.c's stk__loader_read_len) so a file that grew
 * shows; video clips with a byte index: their ranges, one read each
 * (loader/video.c); tar shards: members merged into runs by loader/shard_read.c.  Each
 * read lands in place: no copy.  A sample that cannot fit is an error of
 * that sample (loader/error.c).  A file whose read says it changed size
 * since it was indexed (rewritten in place: its folder's mtime, and so the
 * cached index, unchanged) is stat'ed by the ring after the reap and read
 * again at its size now, once, in its place or after the slot's reads: the
 * sample is the file as it is, every epoch of a long run, not an error the
 * skip policy would drop from each of them.  With jpeg_cache a JPEG that
 * has a copy is read from it (loader/jcache.c), when it fits in what is
 * left of the read area, else from its file.  Under the loader's mutex,
 * stk__loader_file_stat excepted.
 */
#include "loader/loader.h"

#include <stdio.h>
#include <sys/stat.h>

/* Folders and lists: what a good read of a file of `size` bytes returns,
 * its size or under read_bytes only its first bytes (a prefix: no growth
 * probe). */
static uint64_t want_of(const struct stk_loader *l, uint64_t size, bool *prefix)
{
	*prefix = l->o.read_bytes && l->o.read_bytes < size;
	return *prefix ? l->o.read_bytes : size;
}

/* Room the read of dataset sample idx takes in a slot, read alone. */
uint64_t stk__loader_room(const struct stk_loader *l, int64_t idx)
{
	if (l->ds->shards) /* (a video clip's ranges too) */
		return stk__shards_room(l, idx);
	uint64_t clip = stk__vloader_room(l, idx);
	if (clip)
		return clip;
	bool prefix;
	uint64_t want = want_of(l, l->ds->entries[idx].size, &prefix);
	return prefix && !l->direct ? want : stk__loader_read_len(l, want);
}

/* The read of file idx, taken as `size` bytes, as sample i of slot s at
 * byte `place`; returns the room it takes. */
static uint64_t setup_file(struct stk_loader *l, struct slot *s, uint32_t i, int64_t idx,
			   uint64_t place, uint64_t size, const char *copy)
{
	uint32_t si = (uint32_t)(s - l->slots);
	const struct stk_entry *e = &l->ds->entries[idx];
	struct sio *x = &s->ios[i];
	bool prefix;
	uint64_t want = want_of(l, size, &prefix);
	s->indices[i] = idx;
	s->labels[i] = e->label;
	s->sizes[i] = want;
	stk__sio_begin(x,
		       (struct stk_io){.op = STK_IO_READ_FILE,
				       .path = copy ? copy : stk__entry_path(l->ds, idx),
				       .len = prefix && !l->direct ? want : stk__loader_read_len(l, want),
				       .offset = e->offset, .buf_index = stk__loader_read_buf(l, s),
				       .buf = stk__loader_read_base(l, s) + place},
		       want, prefix, si, i, e->offset, false, NULL);
	x->jcopy = copy != NULL;
	s->offsets[i] = place;
	return x->io.len;
}

uint64_t stk__loader_setup_read(struct stk_loader *l, struct slot *s, uint32_t i, int64_t idx,
				uint64_t place)
{
	if (l->ds->shards) /* (a video clip's ranges too) */
		return stk__shards_setup_one(l, s, i, idx, place);
	uint64_t room = l->video ? stk__vloader_setup(l, s, i, idx, place, -1) : 0;
	if (room)
		return room;
	return setup_file(l, s, i, idx, place, l->ds->entries[idx].size, NULL);
}

void stk__loader_file_stat(const struct stk_loader *l, struct sio *x)
{
	x->now_size = UINT64_MAX;
	int64_t res = x->io.res;
	if (res < 0 || ((uint64_t)res >= x->skip + x->size && ((uint64_t)res <= x->size || x->prefix)))
		return; /* an error of its own, or the length indexed */
	struct stat st;
	if (!fstatat(l->ds->root_fd, x->io.path, &st, 0) && S_ISREG(st.st_mode))
		x->now_size = (uint64_t)st.st_size;
}

bool stk__loader_reread(struct stk_loader *l, struct slot *s, struct sio *x)
{
	if (l->ds->shards || l->ds->remote || x->ranged || x->reread || x->now_size == UINT64_MAX ||
	    s->gen != l->gen || l->draining || l->stop)
		return false;
	stk__loader_drop_index(l); /* the next create indexes it again */
	bool prefix;
	uint64_t want = want_of(l, x->now_size, &prefix);
	uint64_t need = prefix && !l->direct ? want : stk__loader_read_len(l, want), place;
	if (need <= x->room) {
		place = x->place;
	} else if (need <= l->raw_bytes - s->used) {
		place = x->place = s->used; /* (a stand-in for it would go there too) */
		x->room = need;
		s->used += need;
		s->offsets[s->nios] = s->used; /* data_bytes covers it */
	} else {
		if (!l->warned_resize) {
			l->warned_resize = true;
			bool abs = x->io.path[0] == '/';
			stk__loader_notice(l, "%s%s%s changed size since it was indexed (%llu bytes, now "
					   "%llu) and does not fit in what is left of its batch slot: "
					   "an error (on_error) each epoch until the next create "
					   "indexes it again", abs ? "" : l->ds->root, abs ? "" : "/",
					   x->io.path,
					   (unsigned long long)x->size, (unsigned long long)x->now_size);
		}
		return false;
	}
	setup_file(l, s, x->idx, s->indices[x->idx], place, x->now_size, NULL);
	x->reread = true;
	struct io_thread *r = &l->rings[s->ring];
	r->queue[(r->qhead + r->qlen++) % r->qcap] = x;
	s->pending++;
	s->unsent++;
	return true;
}

/* Folders and file lists: one read a file, laid out in sample order. */
static uint32_t lay_out_files(struct stk_loader *l, struct io_thread *r, struct slot *s, uint32_t n)
{
	uint64_t off = 0;
	uint32_t queued = 0;
	for (uint32_t i = 0; i < n; i++) {
		struct sio *x = &s->ios[i];
		const char *copy;
		uint64_t csize, len;
		int64_t idx = l->scratch_idx[i];
		if (l->jc && stk__loader_jcopy(l, s, i, idx, &copy, &csize) &&
		    stk__loader_read_len(l, csize) <= l->raw_bytes - off)
			len = setup_file(l, s, i, idx, off, csize, copy); /* jpeg_cache */
		else
			len = stk__loader_setup_read(l, s, i, idx, off);
		x->place = off;
		x->room = len;
		x->reread = false;
		if (len > l->raw_bytes - off) {
			/* a batch far above the size bound (see slot_bytes_for) */
			x->room = 0;
			stk__loader_sample_error(l, s, x, STK_ETOOBIG, NULL);
			continue;
		}
		off += len;
		r->queue[(r->qhead + r->qlen++) % r->qcap] = x;
		queued++;
		if (l->video) /* a clip's further ranges */
			queued += stk__vloader_queue_parts(l, s, x);
	}
	s->offsets[n] = off;
	return queued;
}

uint32_t stk__loader_lay_out(struct stk_loader *l, struct io_thread *r, struct slot *s, uint32_t n)
{
	return l->ds->shards ? stk__shards_lay_out(l, r, s, n) : lay_out_files(l, r, s, n);
}
