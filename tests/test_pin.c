/* test_pin.c — the batch slots pinned for GPU copies.
 *
 * With a real CUDA runtime and a GPU (bench/gpu_check.sh runs this there): a
 * loader's pool is pinned (stats, cudaHostGetFlags on a slot) and a batch
 * copied to the GPU and back is the files' bytes.  Without one it says
 * "skipped" with the reason.  Always: the stand-in runtime built beside this
 * test (build/tests/stub/libcudart.so.12, loaded through $STOKER_CUDART)
 * gives each failure of the real one — no driver, no device, a runtime that
 * does not start, registration refused, RLIMIT_MEMLOCK too low — and the pool
 * must come out unpinned with that reason, the probe must say the same, and
 * no error may be left pending in the runtime. */
#include "testutil.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <sys/resource.h>

#include "loader/pool.h"
#include "stoker/stoker.h"
#include "stoker/sys.h"

#define NFILES 24

static char *root;

/* NFILES files of 4000.. bytes, each its own pattern. */
static size_t fill(uint8_t *buf, int c, int i)
{
	(void)c;
	size_t n = 4000 + (size_t)i * 200;
	for (size_t k = 0; k < n; k++)
		buf[k] = (uint8_t)(k * 7 + (size_t)i * 13);
	return n;
}

static int setup(void **state)
{
	(void)state;
	root = tu_mkdtemp();
	tu_tree(root, 1, NULL, "c%d", NFILES, "%02d.bin", 9000, fill);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	tu_rmrf(root);
	free(root);
	unsetenv("STOKER_CUDART");
	unsetenv("FAKE_CUDA");
	return 0;
}

static struct stk_loader *make(void)
{
	struct stk_loader_opts o = {.size = sizeof(o), .path = root, .batch_size = 8,
				    .flags = STK_F_QUIET | STK_F_NO_SHUFFLE | STK_F_NO_CACHE,
				    .extensions = "*"};
	struct stk_loader *l = NULL;
	char err[512];
	int rc = stk_loader_create(&l, &o, err, sizeof(err));
	if (rc)
		fail_msg("create: %s (%s)", err, stk_err_name(rc));
	return l;
}

/* --- a real runtime and GPU ------------------------------------------------- */

typedef int (*malloc_fn)(void **, size_t);
typedef int (*free_fn)(void *);
typedef int (*memcpy_fn)(void *, const void *, size_t, int);
typedef int (*flags_fn)(unsigned *, void *);

static void real_gpu(void **state)
{
	(void)state;
	char why[256];
	int rc = stk_sys_pin_probe(1 << 20, why, sizeof(why));
	if (rc) {
		print_message("skipped: no GPU to pin for: %s\n", why);
		skip();
	}
	struct stk_loader *l = make();
	struct stk_stats st = {.size = sizeof(st)};
	assert_int_equal(stk_loader_stats(l, &st), 0);
	assert_int_equal(st.pinned, 1);
	struct stk_batch *b;
	assert_int_equal(stk_loader_next(l, &b), 1);
	/* The runtime the pool loaded, by the names it tries. */
	void *cuda = NULL;
	const char *names[] = {"libcudart.so", "libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0"};
	for (size_t i = 0; !cuda && i < 4; i++)
		cuda = dlopen(names[i], RTLD_NOW | RTLD_NOLOAD);
	assert_non_null(cuda);
	flags_fn hflags = (flags_fn)dlsym(cuda, "cudaHostGetFlags");
	malloc_fn dmalloc = (malloc_fn)dlsym(cuda, "cudaMalloc");
	free_fn dfree = (free_fn)dlsym(cuda, "cudaFree");
	memcpy_fn cpy = (memcpy_fn)dlsym(cuda, "cudaMemcpy");
	assert_true(hflags && dmalloc && dfree && cpy);
	unsigned fl = 0;
	assert_int_equal(hflags(&fl, b->data), 0); /* registered memory */
	void *dev = NULL;
	assert_int_equal(dmalloc(&dev, b->data_bytes), 0);
	assert_int_equal(cpy(dev, b->data, b->data_bytes, 1 /* host to device */), 0);
	uint8_t *back = malloc(b->data_bytes);
	assert_non_null(back);
	assert_int_equal(cpy(back, dev, b->data_bytes, 2 /* device to host */), 0);
	assert_memory_equal(back, b->data, b->data_bytes);
	free(back);
	dfree(dev);
	stk_batch_release(l, b);
	stk_loader_destroy(l);
	dlclose(cuda);
}

/* --- the stand-in runtime: each failure of the real one ---------------------- */

static char stub[PATH_MAX + 32];

static void use_stub(const char *mode)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	assert_true(n > 0);
	exe[n] = 0;
	char *slash = strrchr(exe, '/');
	assert_non_null(slash);
	*slash = 0;
	snprintf(stub, sizeof(stub), "%s/stub/libcudart.so.12", exe);
	assert_int_equal(access(stub, R_OK), 0);
	setenv("STOKER_CUDART", stub, 1);
	setenv("FAKE_CUDA", mode, 1);
}

/* The stub's own state: nothing pending, and how many regions are registered. */
static void stub_state(int *pending, int *registered)
{
	void *h = dlopen(stub, RTLD_NOW | RTLD_LOCAL);
	assert_non_null(h);
	int (*peek)(void) = (int (*)(void))dlsym(h, "cudaPeekAtLastError");
	int (*reg)(void) = (int (*)(void))dlsym(h, "stub_registered");
	assert_true(peek && reg);
	*pending = peek();
	*registered = reg();
	dlclose(h);
}

/* mode, the probe's return, a word its reason must hold */
static const struct {
	const char *mode;
	int rc;
	const char *why;
} cases[] = {
	{"ok", 0, "works"},
	{"nodriver", -ENODEV, "driver version is insufficient"},
	{"nodevice", -ENODEV, "no CUDA-capable device"},
	{"initfail", -ENODEV, "initialization error"},
	{"refuse", -ENOMEM, "cudaHostRegister of"},
};

static void stub_failures(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		use_stub(cases[i].mode);
		char why[256] = "";
		int rc = stk_sys_pin_probe(1 << 20, why, sizeof(why));
		if (rc != cases[i].rc || !strstr(why, cases[i].why))
			fail_msg("%s: probe %d (%s), want %d and '%s'", cases[i].mode, rc, why,
				 cases[i].rc, cases[i].why);
		struct stk_pool p;
		assert_int_equal(stk__pool_init(&p, 2, 100000, true), 0);
		assert_int_equal(p.pinned, cases[i].rc == 0);
		assert_int_equal(p.pin_rc, cases[i].rc);
		if (cases[i].rc && !strstr(p.pin_why, cases[i].why))
			fail_msg("%s: pool says '%s'", cases[i].mode, p.pin_why);
		int pending, registered;
		stub_state(&pending, &registered);
		assert_int_equal(pending, 0);
		assert_int_equal(registered, cases[i].rc == 0); /* the probe's was undone */
		stk__pool_free(&p);
		stub_state(&pending, &registered);
		assert_int_equal(registered, 0);
		/* a loader over it: the same, in stats */
		struct stk_loader *l = make();
		struct stk_stats st = {.size = sizeof(st)};
		assert_int_equal(stk_loader_stats(l, &st), 0);
		assert_int_equal(st.pinned, cases[i].rc == 0);
		stk_loader_destroy(l);
	}
}

static void stub_memlock(void **state)
{
	(void)state;
	struct rlimit old, low;
	assert_int_equal(getrlimit(RLIMIT_MEMLOCK, &old), 0);
	low = old;
	low.rlim_cur = 64 * 1024;
	if (old.rlim_max != RLIM_INFINITY && old.rlim_max < low.rlim_cur)
		low.rlim_cur = old.rlim_max;
	assert_int_equal(setrlimit(RLIMIT_MEMLOCK, &low), 0);
	use_stub("memlock");
	char why[256];
	assert_int_equal(stk_sys_pin_probe(32 * 1024, why, sizeof(why)), 0); /* fits */
	int rc = stk_sys_pin_probe(8 << 20, why, sizeof(why));
	assert_int_equal(rc, -ENOMEM);
	if (!strstr(why, "RLIMIT_MEMLOCK is 64 KiB") || !strstr(why, "8.4 MB"))
		fail_msg("memlock: '%s'", why);
	struct stk_pool p;
	assert_int_equal(stk__pool_init(&p, 4, 1 << 20, true), 0);
	assert_false(p.pinned);
	assert_non_null(strstr(p.pin_why, "RLIMIT_MEMLOCK"));
	stk__pool_free(&p);
	assert_int_equal(setrlimit(RLIMIT_MEMLOCK, &old), 0);
}

static void no_runtime(void **state)
{
	(void)state;
	setenv("STOKER_CUDART", "/nonexistent/libcudart.so.12", 1);
	char why[256];
	assert_int_equal(stk_sys_pin_probe(4096, why, sizeof(why)), -ENOENT);
	assert_non_null(strstr(why, "STOKER_CUDART=/nonexistent/libcudart.so.12 does not load"));
	struct stk_pool p;
	assert_int_equal(stk__pool_init(&p, 1, 4096, true), 0);
	assert_false(p.pinned);
	assert_int_equal(p.pin_rc, -ENOENT);
	stk__pool_free(&p);
	/* not asked: no runtime loaded at all */
	assert_int_equal(stk__pool_init(&p, 1, 4096, false), 0);
	assert_false(p.pinned);
	assert_null(p.cuda);
	stk__pool_free(&p);
	unsetenv("STOKER_CUDART");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(real_gpu), /* first: before any stand-in is loaded */
		cmocka_unit_test(stub_failures),
		cmocka_unit_test(stub_memlock),
		cmocka_unit_test(no_runtime),
	};
	return cmocka_run_group_tests_name("pin", tests, setup, teardown);
}
