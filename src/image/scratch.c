/*
 * image/scratch.c — a decode thread's working memory, kept from one image to
 * the next.
 *
 * Each image needs a few buffers of a few hundred KB: the decoded region,
 * the resampler's vertical pass, a progressive JPEG's coefficients.  Freed
 * after every image, glibc gives them back to the kernel (they are above its
 * trim threshold) and the next image faults them in again, a zeroed page at
 * a time: 160 faults an image for a 486x388 progressive file, 13 % of its
 * decode (docs/BENCHMARKS.md, "Val from a plain folder: where the time
 * goes").  So each thread keeps one buffer per slot, grown to the largest
 * asked for up to STK__SCRATCH_KEEP, and frees them when it exits (a
 * pthread key's destructor).  Larger requests are plain allocations, freed
 * when put back.
 *
 * libjpeg's coefficient arrays go there too, through the decompressor's
 * memory manager methods (struct jpeg_memory_mgr, which jpeglib.h lets an
 * application replace): the virtual block arrays are requested, realized and
 * accessed here, all in memory as libjpeg's own are when nothing limits it,
 * and every other allocation is still libjpeg's.
 */
#include "base/internal.h"
#include "image/scratch.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <jerror.h>

struct kept {
	void *p[STK__SCRATCH_N];
	size_t cap[STK__SCRATCH_N];
};

static pthread_key_t key;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static int key_rc = -1;

static void drop(void *v)
{
	struct kept *k = v;
	for (int i = 0; i < STK__SCRATCH_N; i++)
		free(k->p[i]);
	free(k);
}

static void make_key(void)
{
	key_rc = pthread_key_create(&key, drop);
}

static struct kept *mine(void)
{
	pthread_once(&once, make_key);
	if (key_rc)
		return NULL;
	struct kept *k = pthread_getspecific(key);
	if (!k && (k = calloc(1, sizeof(*k))) && pthread_setspecific(key, k)) {
		free(k);
		k = NULL;
	}
	return k;
}

void *stk__scratch_get(enum stk__scratch_slot slot, size_t n)
{
	n = n ? n : 1;
	struct kept *k = n <= STK__SCRATCH_KEEP ? mine() : NULL;
	if (!k)
		return malloc(n);
	if (k->cap[slot] < n) {
		/* 64 KiB steps: a few sizes, not one per image */
		size_t cap = (n + 0xffff) & ~(size_t)0xffff;
		free(k->p[slot]);
		k->cap[slot] = 0;
		if (!(k->p[slot] = malloc(cap)))
			return NULL;
		k->cap[slot] = cap;
	}
	return k->p[slot];
}

void stk__scratch_put(enum stk__scratch_slot slot, void *p)
{
	if (!p)
		return;
	pthread_once(&once, make_key);
	struct kept *k = key_rc ? NULL : pthread_getspecific(key);
	if (!k || k->p[slot] != p)
		free(p);
}

/* --- libjpeg's virtual block arrays ----------------------------------------- */

/* The type jpeglib.h leaves opaque; libjpeg's modules only hand it back to
 * the methods below. */
struct jvirt_barray_control {
	JBLOCKARRAY rows; /* NULL until realized */
	JDIMENSION nrows, per_row, maxaccess;
	boolean pre_zero;
	struct jvirt_barray_control *next;
};

static jvirt_barray_ptr request_barray(j_common_ptr c, int pool, boolean pre_zero,
				       JDIMENSION per_row, JDIMENSION nrows, JDIMENSION maxaccess)
{
	struct stk__jpeg_mem *m = c->client_data;
	if (pool != JPOOL_IMAGE) /* libjpeg's rule too */
		ERREXIT1(c, JERR_BAD_POOL_ID, pool);
	struct jvirt_barray_control *b = (*c->mem->alloc_small)(c, pool, sizeof(*b));
	*b = (struct jvirt_barray_control){.nrows = nrows, .per_row = per_row,
					   .maxaccess = maxaccess, .pre_zero = pre_zero,
					   .next = m->list};
	m->list = b;
	return b;
}

static void realize(j_common_ptr c)
{
	struct stk__jpeg_mem *m = c->client_data;
	m->realize(c); /* its own (sample arrays) */
	size_t total = 0;
	for (struct jvirt_barray_control *b = m->list; b; b = b->next)
		total += (size_t)b->nrows * b->per_row * sizeof(JBLOCK);
	if (!total || m->buf)
		return;
	if (!(m->buf = stk__scratch_get(STK__SCRATCH_COEF, total)))
		ERREXIT1(c, JERR_OUT_OF_MEMORY, 10);
	JBLOCKROW p = m->buf;
	for (struct jvirt_barray_control *b = m->list; b; b = b->next) {
		b->rows = (*c->mem->alloc_small)(c, JPOOL_IMAGE, sizeof(JBLOCKROW) * (b->nrows ? b->nrows : 1));
		for (JDIMENSION r = 0; r < b->nrows; r++, p += b->per_row)
			b->rows[r] = p;
		if (b->pre_zero && b->nrows)
			memset(b->rows[0], 0, (size_t)b->nrows * b->per_row * sizeof(JBLOCK));
	}
	m->list = NULL; /* placed: libjpeg asks no more */
}

static JBLOCKARRAY access_barray(j_common_ptr c, jvirt_barray_ptr b, JDIMENSION start,
				 JDIMENSION n, boolean writable)
{
	(void)writable;
	if (!b->rows || start > b->nrows || n > b->nrows - start || n > b->maxaccess)
		ERREXIT(c, JERR_BAD_VIRTUAL_ACCESS);
	return b->rows + start;
}

static void free_pool(j_common_ptr c, int pool)
{
	struct stk__jpeg_mem *m = c->client_data;
	m->free_pool(c, pool);
	if (pool == JPOOL_IMAGE) { /* the arrays' headers were in it */
		m->list = NULL;
		stk__scratch_put(STK__SCRATCH_COEF, m->buf);
		m->buf = NULL;
	}
}

void stk__jpeg_mem_install(j_decompress_ptr ci, struct stk__jpeg_mem *m)
{
	*m = (struct stk__jpeg_mem){.realize = ci->mem->realize_virt_arrays,
				    .free_pool = ci->mem->free_pool};
	ci->client_data = m;
	ci->mem->request_virt_barray = request_barray;
	ci->mem->realize_virt_arrays = realize;
	ci->mem->access_virt_barray = access_barray;
	ci->mem->free_pool = free_pool;
}

void stk__jpeg_mem_release(struct stk__jpeg_mem *m)
{
	stk__scratch_put(STK__SCRATCH_COEF, m->buf);
	m->buf = NULL;
	m->list = NULL;
}
