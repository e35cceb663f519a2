/*
 * pool.c — the batch slots' memory: one mapping, fixed at create, page-aligned,
 * never grown.  When the CUDA runtime can be loaded (dlopen; the build never
 * needs it) the mapping is page-locked with cudaHostRegister so host→GPU
 * copies from it are asynchronous DMA; otherwise it is plain memory.
 */
#include "internal.h"
#include "pool.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <sys/mman.h>

typedef int (*cuda_register_fn)(void *, size_t, unsigned);
typedef int (*cuda_unregister_fn)(void *);

static void *load_cudart(void)
{
	static const char *const names[] = {"libcudart.so", "libcudart.so.13", "libcudart.so.12",
					    "libcudart.so.11.0"};
	/* Prefer the runtime the process (e.g. PyTorch) already loaded. */
	for (size_t i = 0; i < STK_ARRAY_SIZE(names); i++) {
		void *h = dlopen(names[i], RTLD_NOW | RTLD_NOLOAD);
		if (h)
			return h;
	}
	for (size_t i = 0; i < STK_ARRAY_SIZE(names); i++) {
		void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
		if (h)
			return h;
	}
	return NULL;
}

int stk__pool_init(struct stk_pool *p, uint32_t nslots, uint64_t slot_bytes, bool try_pin)
{
	*p = (struct stk_pool){.nslots = nslots};
	p->slot_bytes = STK_ALIGN_UP(slot_bytes ? slot_bytes : 1, 4096);
	p->bytes = p->slot_bytes * nslots;
	void *m = mmap(NULL, p->bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return -errno;
	p->mem = m;
	if (!try_pin || !(p->cuda = load_cudart()))
		return 0;
	cuda_register_fn reg = (cuda_register_fn)dlsym(p->cuda, "cudaHostRegister");
	if (reg && reg(p->mem, p->bytes, 0 /* cudaHostRegisterDefault */) == 0) {
		p->pinned = true;
	} else {
		dlclose(p->cuda);
		p->cuda = NULL;
	}
	return 0;
}

void stk__pool_free(struct stk_pool *p)
{
	if (p->pinned) {
		cuda_unregister_fn unreg = (cuda_unregister_fn)dlsym(p->cuda, "cudaHostUnregister");
		if (unreg)
			unreg(p->mem);
	}
	if (p->cuda)
		dlclose(p->cuda);
	if (p->mem)
		munmap(p->mem, p->bytes);
	*p = (struct stk_pool){0};
}
