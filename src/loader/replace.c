/*
 * loader/replace.c — the replace policy: stand-ins for failed samples.
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
 * data, not on timing.  A candidate is never a sample the batch has found
 * bad (s->bad: the failed places' samples, the place's own among them, and
 * the stand-ins that failed, recorded as each round starts): such a read
 * would fail again and count the same error twice.  Which samples those are
 * depends on the batch's data only, so the draw stays a function of (seed,
 * epoch, the batch's indices, the data) and a resume gets the same
 * stand-ins; and skipping one changes no stand-in (its read would have
 * failed: the next candidate is taken either way) unless the room its
 * failed read took at the slot's end would have kept a later one out.  Samples found bad by other batches are
 * not skipped: which of them failed first depends on timing.  A place with
 * no stand-in after REPLACE_READS reads (or REPLACE_DRAWS draws: a dataset
 * with no other good sample) ends the epoch with the error, as fail would.
 * Everything here runs under the loader's mutex.
 */
#include "loader/loader.h"

#define REPLACE_READS 16   /* stand-in reads per failed place */
#define REPLACE_DRAWS 1024 /* candidates drawn per place (those that do not fit cost nothing) */
#define REPLACE_NEAR 64    /* draws before a stand-in larger than the place may go elsewhere */

#include <stdio.h>
#include <stdlib.h>

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
	if (x->reads)
		snprintf(s->err, sizeof(s->err), "%.*s; on_error replace: no stand-in could be "
			 "loaded for it after %u reads", (int)(sizeof(s->err) - 100), first, x->reads);
	else
		snprintf(s->err, sizeof(s->err), "%.*s; on_error replace: no stand-in for it: none "
			 "of %u candidates drawn was another sample, not already found bad, that "
			 "fits", (int)(sizeof(s->err) - 140), first, x->attempt);
}

/* Whether sample c was found bad in this batch. */
static bool known_bad(const struct slot *s, int64_t c)
{
	for (uint32_t k = 0; k < s->nbad; k++)
		if (s->bad[k] == c)
			return true;
	return false;
}

/* Records the samples of the slot's failed places (an original or a stand-in
 * that failed since the last round).  Memory short: not recorded (its read
 * fails again, counted, as before). */
static void note_bad(struct slot *s)
{
	for (uint32_t i = 0; i < s->nios; i++) {
		int64_t c = s->indices[i];
		if (s->ios[i].io.res >= 0 || known_bad(s, c))
			continue;
		if (s->nbad == s->badcap) {
			uint32_t cap = s->badcap ? 2 * s->badcap : 16;
			int64_t *b = realloc(s->bad, (size_t)cap * sizeof(*b));
			if (!b)
				return;
			s->bad = b;
			s->badcap = cap;
		}
		s->bad[s->nbad++] = c;
	}
}

bool stk__loader_replace_round(struct stk_loader *l, struct slot *s)
{
	struct io_thread *r = &l->rings[s->ring];
	uint32_t queued = 0;
	note_bad(s);
	for (uint32_t i = 0; i < s->nios; i++) {
		struct sio *x = &s->ios[i];
		if (x->io.res >= 0)
			continue;
		bool placed = false;
		while (x->reads < REPLACE_READS && x->attempt < REPLACE_DRAWS) {
			int64_t c = candidate(l, s->epoch, x->orig, x->attempt++);
			if (c == x->orig || known_bad(s, c))
				continue; /* it failed here: its read would fail again */
			uint64_t need = stk__loader_room(l, c), place;
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
			if (l->video) /* a clip's further ranges */
				queued += stk__vloader_queue_parts(l, s, x);
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
