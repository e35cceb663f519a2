/* loader/pool.h — batch slot memory (loader/pool.c). */
#ifndef STK_POOL_H
#define STK_POOL_H

#include "base/internal.h"

struct stk_pool {
	uint8_t *mem;
	uint64_t bytes;
	uint64_t slot_bytes; /* page-aligned */
	uint32_t nslots;
	bool pinned;
	void *cuda; /* dlopen handle of the CUDA runtime when pinned */
	int pin_rc; /* why not pinned: 0 (pinned or not asked), -ENOENT no runtime,
		       -ENODEV no device or driver, -ENOMEM/-EIO registration refused */
	char pin_why[256]; /* the same in words, for a notice */
};

/* Maps nslots × slot_bytes (rounded up to pages); pins it when asked and the
 * CUDA runtime loads.  0 or -errno. */
int stk__pool_init(struct stk_pool *p, uint32_t nslots, uint64_t slot_bytes, bool try_pin);
void stk__pool_free(struct stk_pool *p);
static inline uint8_t *stk__pool_slot(const struct stk_pool *p, uint32_t i)
{
	return p->mem + (uint64_t)i * p->slot_bytes;
}

#endif
