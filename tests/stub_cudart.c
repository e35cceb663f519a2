/* stub_cudart.c — a stand-in CUDA runtime (libcudart.so.12) for the pinning
 * tests: the calls libstoker's pool makes, failing as the real one fails,
 * chosen by $FAKE_CUDA at each call:
 *   ok (default)  one device; cudaHostRegister works
 *   nodriver      cudaGetDeviceCount: 35, "CUDA driver version is insufficient..."
 *   nodevice      cudaGetDeviceCount: 100, "no CUDA-capable device is detected"
 *   initfail      cudaGetDeviceCount: 3, "initialization error"
 *   refuse        cudaHostRegister: 2, "out of memory"
 *   memlock       cudaHostRegister: 2 when the size is over RLIMIT_MEMLOCK
 * Like the real runtime, a failure is remembered until cudaGetLastError.
 * Built by the Makefile (build/tests/stub/) and by tests/python/test_gpu.py. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

static int last_error;
static int registered; /* regions registered and not yet unregistered */

static int mode(const char *m)
{
	const char *e = getenv("FAKE_CUDA");
	return e && !strcmp(e, m);
}

static int fail(int e)
{
	last_error = e;
	return e;
}

int cudaGetDeviceCount(int *n)
{
	*n = 0;
	if (mode("nodriver"))
		return fail(35);
	if (mode("nodevice"))
		return fail(100);
	if (mode("initfail"))
		return fail(3);
	*n = 1;
	return 0;
}

int cudaHostRegister(void *p, size_t size, unsigned flags)
{
	(void)p;
	(void)flags;
	struct rlimit rl;
	if (mode("refuse"))
		return fail(2);
	if (mode("memlock") && !getrlimit(RLIMIT_MEMLOCK, &rl) && rl.rlim_cur != RLIM_INFINITY &&
	    size > rl.rlim_cur)
		return fail(2);
	registered++;
	return 0;
}

int cudaHostUnregister(void *p)
{
	(void)p;
	registered--;
	return 0;
}

/* 0 for memory registered here (the real one checks the address). */
int cudaHostGetFlags(unsigned *flags, void *p)
{
	(void)p;
	*flags = 0;
	return registered > 0 ? 0 : fail(1);
}

int cudaGetLastError(void)
{
	int e = last_error;
	last_error = 0;
	return e;
}

int cudaPeekAtLastError(void)
{
	return last_error;
}

const char *cudaGetErrorString(int e)
{
	switch (e) {
	case 0: return "no error";
	case 1: return "invalid argument";
	case 2: return "out of memory";
	case 3: return "initialization error";
	case 35: return "CUDA driver version is insufficient for CUDA runtime version";
	case 100: return "no CUDA-capable device is detected";
	default: return "unrecognized error code";
	}
}

/* For the tests: how many regions are registered now. */
int stub_registered(void)
{
	return registered;
}
