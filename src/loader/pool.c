/*
 * loader/pool.c — the batch slots' memory: one mapping, fixed at create, page-aligned,
 * never grown.  When the CUDA runtime can be loaded (dlopen; the build never
 * needs it) the mapping is page-locked with cudaHostRegister so host→GPU
 * copies from it are asynchronous DMA; otherwise it is plain memory.  Why a
 * pool is not pinned (no runtime, no driver or device, registration refused)
 * is kept in pin_why, and stk_sys_pin_probe() answers the same question for any
 * size without a loader: the Python binding says it once when it matters.
 */
#include "base/internal.h"
#include "loader/pool.h"
#include "stoker/sys.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>

typedef int (*cuda_count_fn)(int *);
typedef int (*cuda_register_fn)(void *, size_t, unsigned);
typedef int (*cuda_unregister_fn)(void *);
typedef int (*cuda_last_error_fn)(void);
typedef const char *(*cuda_error_string_fn)(int);

enum { CUDA_ERR_MEMORY = 2 }; /* cudaErrorMemoryAllocation */

/* $STOKER_CUDART (a path) first, then the runtime the process (e.g. PyTorch)
 * already loaded, then the usual names.  NULL with the reason in why. */
static void *load_cudart(char *why, size_t len)
{
	static const char *const names[] = {"libcudart.so", "libcudart.so.13", "libcudart.so.12",
					    "libcudart.so.11.0"};
	const char *env = secure_getenv("STOKER_CUDART");
	if (env && *env) {
		void *h = dlopen(env, RTLD_NOW | RTLD_LOCAL);
		if (!h)
			snprintf(why, len, "STOKER_CUDART=%s does not load: %s", env, dlerror());
		return h;
	}
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
	snprintf(why, len, "no CUDA runtime to load (libcudart.so.12, .so.11.0...; set "
			   "STOKER_CUDART to its path)");
	return NULL;
}

static const char *cuda_error(void *cuda, int e)
{
	cuda_error_string_fn str = (cuda_error_string_fn)dlsym(cuda, "cudaGetErrorString");
	const char *s = str ? str(e) : NULL;
	return s ? s : "unknown error";
}

/* Pins [mem, mem + bytes) through the runtime `cuda`.  0, or -errno with why:
 * -ENODEV when the runtime finds no usable device or driver, -ENOMEM (or
 * -EIO) when the registration is refused.  A failure leaves no error behind
 * in the runtime (cudaGetLastError), where it would surface in the caller's
 * next CUDA check. */
static int pin(void *cuda, void *mem, uint64_t bytes, char *why, size_t len)
{
	cuda_count_fn count = (cuda_count_fn)dlsym(cuda, "cudaGetDeviceCount");
	cuda_register_fn reg = (cuda_register_fn)dlsym(cuda, "cudaHostRegister");
	cuda_last_error_fn last = (cuda_last_error_fn)dlsym(cuda, "cudaGetLastError");
	if (!count || !reg) {
		snprintf(why, len, "the CUDA runtime lacks cudaGetDeviceCount/cudaHostRegister");
		return -ENOSYS;
	}
	int n = 0, e = count(&n);
	if (e || n <= 0) {
		if (e)
			snprintf(why, len, "the CUDA runtime does not start: %s (cudaGetDeviceCount "
					   "error %d)", cuda_error(cuda, e), e);
		else
			snprintf(why, len, "no CUDA device");
		if (last)
			last();
		return -ENODEV;
	}
	if ((e = reg(mem, bytes, 0 /* cudaHostRegisterDefault */)) == 0)
		return 0;
	char lim[96] = "";
	struct rlimit rl;
	if (!getrlimit(RLIMIT_MEMLOCK, &rl) && rl.rlim_cur != RLIM_INFINITY)
		snprintf(lim, sizeof(lim), "; RLIMIT_MEMLOCK is %llu KiB (ulimit -l; stoker doctor)",
			 (unsigned long long)rl.rlim_cur / 1024);
	snprintf(why, len, "cudaHostRegister of %.1f MB refused: %s (error %d)%s", (double)bytes / 1e6,
		 cuda_error(cuda, e), e, lim);
	if (last)
		last();
	return e == CUDA_ERR_MEMORY ? -ENOMEM : -EIO;
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
	if (!try_pin) {
		snprintf(p->pin_why, sizeof(p->pin_why), "pinning not asked for");
		return 0;
	}
	if (!(p->cuda = load_cudart(p->pin_why, sizeof(p->pin_why)))) {
		p->pin_rc = -ENOENT;
		return 0;
	}
	if (!(p->pin_rc = pin(p->cuda, p->mem, p->bytes, p->pin_why, sizeof(p->pin_why)))) {
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

int stk_sys_pin_probe(uint64_t bytes, char *why, size_t len)
{
	char buf[256];
	bytes = STK_ALIGN_UP(bytes ? bytes : 1, 4096);
	int rc = 0;
	void *cuda = load_cudart(buf, sizeof(buf));
	if (!cuda) {
		rc = -ENOENT;
	} else {
		void *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (m == MAP_FAILED) {
			rc = -errno;
			snprintf(buf, sizeof(buf), "cannot map %.1f MB: %s", (double)bytes / 1e6,
				 strerror(-rc));
		} else {
			rc = pin(cuda, m, bytes, buf, sizeof(buf));
			if (!rc) {
				cuda_unregister_fn unreg =
					(cuda_unregister_fn)dlsym(cuda, "cudaHostUnregister");
				if (unreg)
					unreg(m);
				snprintf(buf, sizeof(buf), "cudaHostRegister of %.1f MB works",
					 (double)bytes / 1e6);
			}
			munmap(m, bytes);
		}
		dlclose(cuda);
	}
	if (why && len)
		snprintf(why, len, "%s", buf);
	return rc;
}
