/* image/scratch.h — a decode thread's working memory kept from one image to
 * the next (image/scratch.c), and libjpeg's coefficient buffer placed in it. */
#ifndef STK_SCRATCH_H
#define STK_SCRATCH_H

#include <stddef.h>
#include <stdio.h>

#include <jpeglib.h> /* after stdio.h: it uses FILE */

/* What a decode needs once per image, one buffer each. */
enum stk__scratch_slot {
	STK__SCRATCH_REGION,   /* the decoded region (image/image.c) */
	STK__SCRATCH_RESAMPLE, /* the resampler's vertical pass (image/resample.c) */
	STK__SCRATCH_COEF,     /* a multi-scan JPEG's coefficients (below) */
	STK__SCRATCH_N
};

/* Buffers up to this size are kept by the thread (a 3-megapixel progressive
 * file's coefficients); larger ones are allocated and freed per call. */
#define STK__SCRATCH_KEEP ((size_t)8 << 20)

/* At least n bytes for slot, the calling thread's own buffer when n fits
 * STK__SCRATCH_KEEP (its contents undefined); NULL when out of memory.  One
 * holder per slot and thread at a time: give it back with stk__scratch_put
 * before asking again.  Freed when the thread exits. */
void *stk__scratch_get(enum stk__scratch_slot slot, size_t n);
/* Gives p back: freed unless it is the thread's kept buffer.  NULL: nothing. */
void stk__scratch_put(enum stk__scratch_slot slot, void *p);

/* libjpeg's whole-image coefficient arrays (a progressive file's: every scan
 * adds to every block) in the thread's STK__SCRATCH_COEF buffer instead of
 * fresh allocations that glibc hands back to the kernel after each image and
 * that fault in again, page by page, for the next.  Installed on a
 * decompressor between jpeg_create_decompress and jpeg_start_decompress; it
 * takes ci->client_data.  stk__jpeg_mem_release after the decompressor is
 * destroyed (or aborted), also on the error path; twice is harmless. */
struct jvirt_barray_control;
struct stk__jpeg_mem {
	struct jvirt_barray_control *list; /* requested, not yet placed */
	void *buf;                         /* from stk__scratch_get, or NULL */
	void (*realize)(j_common_ptr);
	void (*free_pool)(j_common_ptr, int);
};
void stk__jpeg_mem_install(j_decompress_ptr ci, struct stk__jpeg_mem *m);
void stk__jpeg_mem_release(struct stk__jpeg_mem *m);

#endif
