/*
 * loader/common.c — what the loader's producer side (the I/O and decode
 * threads, loader/producer.c) and its consumer side (loader/consumer.c)
 * share: messages (the last error's detail, notices on stderr), the length a
 * sample's read asks for, the slots' free count, and the wakes between them:
 * a ready batch or a stop signalled to the consumer, released slots waking
 * the I/O threads that wait for them.
 */
#include "loader/loader.h"

#include <stdarg.h>
#include <stdio.h>

void stk__loader_detail(struct stk_loader *l, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(l->detail, sizeof(l->detail), fmt, ap);
	va_end(ap);
}

void stk__loader_notice(const struct stk_loader *l, const char *fmt, ...)
{
	if (l->o.flags & STK_F_QUIET)
		return;
	va_list ap;
	va_start(ap, fmt);
	fputs("stoker: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

/* Room a sample takes in a slot, which is what its read asks for.  A sample
 * that is a whole file asks for one byte past its indexed size: a file that
 * grew since indexing (rewritten in place, its folder's mtime unchanged)
 * shows as a read longer than the index says, not as a silent prefix.
 * Under O_DIRECT the read is rounded to the block size at both ends (a tar
 * member may start anywhere in a block).  A tar member's room counts the
 * gap to the next one too (its header), which a merged read brings along
 * (loader/shard_read.c). */
uint64_t stk__loader_read_len(const struct stk_loader *l, uint64_t size)
{
	if (l->ds->shards)
		return l->direct ? STK_ALIGN_UP(size + STK_DIRECT_ALIGN - 1 + MERGE_GAP, STK_DIRECT_ALIGN)
				 : size + MERGE_GAP;
	if (!l->direct)
		return size + 1;
	return STK_ALIGN_UP(size + 1, STK_DIRECT_ALIGN);
}

/* How many free slots a waiting ring is woken for: half the pool, so that a
 * consumer slower than the reads wakes it every other batch, not every batch
 * (a consumer about to wait for a batch wakes it at once: stk_loader_next). */
uint32_t stk__loader_wake_at(const struct stk_loader *l)
{
	return l->pool.nslots / 2 ? l->pool.nslots / 2 : 1;
}

/* Released slots (stk_batch_release's marks) become free.  Under mu. */
static void take_back(struct stk_loader *l)
{
	for (uint32_t i = 0; i < l->pool.nslots; i++) {
		struct slot *s = &l->slots[i];
		if (s->state == SLOT_HELD && atomic_load(&s->returned) &&
		    atomic_exchange(&s->returned, false)) {
			s->state = SLOT_FREE;
			atomic_fetch_sub(&l->returned, 1);
		}
	}
}

/* A free slot, once the released ones are taken back; split, with a read
 * area free for it (claim takes it).  Under mu. */
struct slot *stk__loader_free_slot(struct stk_loader *l)
{
	if (l->split && l->areas_used == (l->areas.nslots < 64 ? (1ull << l->areas.nslots) - 1
							       : UINT64_MAX))
		return NULL;
	take_back(l);
	for (uint32_t i = 0; i < l->pool.nslots; i++)
		if (l->slots[i].state == SLOT_FREE)
			return &l->slots[i];
	return NULL;
}

uint8_t *stk__loader_read_base(const struct stk_loader *l, const struct slot *s)
{
	return l->split ? stk__pool_slot(&l->areas, s->area)
			: stk__pool_slot(&l->pool, (uint32_t)(s - l->slots));
}

int stk__loader_read_buf(const struct stk_loader *l, const struct slot *s)
{
	return (int)(l->split ? s->area : (uint32_t)(s - l->slots));
}

void stk__loader_area_done(struct stk_loader *l, struct slot *s)
{
	if (!l->split || s->area == NO_AREA)
		return;
	l->areas_used &= ~(1ull << s->area);
	s->area = NO_AREA;
	stk__loader_wake_wanting(l);
}

/* Wakes the rings that wait for a slot or the window (ring_main's want),
 * not the ones with reads in flight: those look again when a read lands. */
void stk__loader_wake_wanting(struct stk_loader *l)
{
	for (uint32_t i = 0; i < l->nrings; i++) {
		struct io_thread *r = &l->rings[i];
		if (atomic_load(&r->want) && atomic_exchange(&r->want, false) && r->eng)
			r->ops->wake(r->eng);
	}
}

/* Free slots (after take_back, under mu; or, without mu, with the
 * released ones not yet taken back: l->returned). */
uint32_t stk__loader_free_slots(const struct stk_loader *l)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < l->pool.nslots; i++)
		n += l->slots[i].state == SLOT_FREE;
	return n;
}

void stk__loader_signal(struct stk_loader *l)
{
	pthread_cond_broadcast(&l->cv);
	/* the consumer raises `waiting`, then looks (ready_now, fatal, stop):
	 * the change came first, or this sees the flag */
	if (atomic_load(&l->waiting)) {
		/* the lock waits until the consumer sleeps (or looked again);
		 * the broadcast after it, so the woken one does not wait for wmu */
		pthread_mutex_lock(&l->wmu);
		pthread_mutex_unlock(&l->wmu);
		pthread_cond_broadcast(&l->wcv);
	}
}

void stk__loader_wake_rings(struct stk_loader *l)
{
	for (uint32_t i = 0; i < l->nrings; i++)
		if (l->rings[i].eng)
			l->rings[i].ops->wake(l->rings[i].eng);
}
