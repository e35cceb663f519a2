/* test_engine.c — the public stk_ioengine_* over each engine: whole-file
 * reads by path, reads and writes at offsets of an open descriptor, end of
 * file, a missing file, many I/Os in flight through a small queue, a
 * reap with little room, and destroy with I/Os still in flight. */
#include "testutil.h"

#include "stoker/stoker.h"

#include <errno.h>

static char *dir;
static const enum stk_engine kinds[] = {STK_ENGINE_URING, STK_ENGINE_PREAD};
static const char *const names[] = {"io_uring", "pread"};

static uint8_t pattern_byte(uint64_t i)
{
	return (uint8_t)(i * 2654435761u >> 13);
}

static int setup(void **state)
{
	(void)state;
	dir = tu_mkdtemp();
	uint8_t *buf = malloc(1 << 20);
	assert_non_null(buf);
	for (uint64_t i = 0; i < (1 << 20); i++)
		buf[i] = pattern_byte(i);
	char p[4200];
	for (int f = 0; f < 40; f++) {
		snprintf(p, sizeof(p), "%s/f%02d", dir, f);
		tu_write(p, buf, (size_t)(1000 + f * 777)); /* odd sizes */
	}
	snprintf(p, sizeof(p), "%s/big", dir);
	tu_write(p, buf, 1 << 20);
	free(buf);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	tu_rmrf(dir);
	free(dir);
	return 0;
}

static struct stk_ioengine *make(enum stk_engine k, unsigned qd, int dfd)
{
	struct stk_ioengine *e = NULL;
	char err[300];
	struct stk_ioengine_opts o = {.size = sizeof(o), .engine = k, .queue_depth = qd,
				      .dir_fd = dfd};
	int rc = stk_ioengine_create(&e, &o, err, sizeof(err));
	if (rc == -EOPNOTSUPP)
		return NULL; /* io_uring blocked here: the caller says skipped */
	assert_int_equal(rc, 0);
	return e;
}

/* Reaps until `want` I/Os came back; each must be one of ours, once. */
static void reap_all(struct stk_ioengine *e, unsigned want, unsigned max)
{
	struct stk_io *done[64];
	unsigned got = 0;
	while (got < want) {
		int n = stk_ioengine_reap(e, done, max, 1);
		assert_true(n >= 0 && (unsigned)n <= max);
		for (int i = 0; i < n; i++) {
			assert_int_equal(done[i]->user_data & 0xffff0000u, 0xabcd0000u);
			done[i]->user_data |= 1ull << 40; /* seen */
		}
		got += (unsigned)n;
	}
}

static void test_read_files(void **state)
{
	(void)state;
	int dfd = open(dir, O_RDONLY | O_DIRECTORY);
	assert_true(dfd >= 0);
	for (size_t k = 0; k < 2; k++) {
		struct stk_ioengine *e = make(kinds[k], 8, dfd);
		if (!e) {
			printf("skipped: %s engine unavailable\n", names[k]);
			continue;
		}
		assert_string_equal(stk_ioengine_name(e), names[k]);
		/* 40 files through a queue of 8, each asked 100 bytes more than it has */
		struct stk_io ios[41];
		char path[41][16];
		uint8_t *bufs = calloc(41, 40000);
		assert_non_null(bufs);
		unsigned sent = 0, back = 0;
		while (back < 41) {
			while (sent < 41 && sent - back < 8) {
				struct stk_io *io = &ios[sent];
				if (sent < 40)
					snprintf(path[sent], sizeof(path[sent]), "f%02u", sent);
				else
					snprintf(path[sent], sizeof(path[sent]), "missing");
				*io = (struct stk_io){.op = STK_IO_READ_FILE, .path = path[sent],
						      .buf = bufs + sent * 40000,
						      .len = 1000 + sent * 777 + 100, .buf_index = -1,
						      .user_data = 0xabcd0000u | sent};
				assert_int_equal(stk_ioengine_submit(e, &io, 1), 0);
				sent++;
			}
			struct stk_io *done[8];
			int n = stk_ioengine_reap(e, done, 8, 1);
			assert_true(n >= 0);
			back += (unsigned)n;
		}
		for (unsigned f = 0; f < 40; f++) {
			assert_int_equal(ios[f].res, 1000 + f * 777); /* end of file: fewer */
			for (unsigned i = 0; i < 1000 + f * 777; i++)
				if (bufs[f * 40000 + i] != pattern_byte(i))
					fail_msg("%s: f%02u byte %u differs", names[k], f, i);
		}
		assert_int_equal(ios[40].res, -ENOENT);
		free(bufs);
		stk_ioengine_destroy(e);
	}
	close(dfd);
}

static void test_read_write_fd(void **state)
{
	(void)state;
	char p[4200];
	snprintf(p, sizeof(p), "%s/big", dir);
	for (size_t k = 0; k < 2; k++) {
		struct stk_ioengine *e = make(kinds[k], 4, 0);
		if (!e)
			continue;
		int fd = open(p, O_RDWR);
		assert_true(fd >= 0);
		uint8_t a[4096], b[4096];
		memset(a, 0x5a + (int)k, sizeof(a));
		struct stk_io w = {.op = STK_IO_WRITE, .fd = fd, .buf = a, .len = 4096,
				   .offset = 8192, .buf_index = -1, .user_data = 0xabcd0001u};
		struct stk_io *io = &w;
		assert_int_equal(stk_ioengine_submit(e, &io, 1), 0);
		reap_all(e, 1, 1);
		assert_int_equal(w.res, 4096);
		struct stk_io r = {.op = STK_IO_READ, .fd = fd, .buf = b, .len = 4096,
				   .offset = 8192, .buf_index = -1, .user_data = 0xabcd0002u};
		struct stk_io tail = {.op = STK_IO_READ, .fd = fd, .buf = b, .len = 4096,
				      .offset = (1 << 20) - 100, .buf_index = -1,
				      .user_data = 0xabcd0003u};
		struct stk_io *two[2] = {&r, &tail};
		assert_int_equal(stk_ioengine_submit(e, two, 1), 0);
		reap_all(e, 1, 1);
		assert_int_equal(r.res, 4096);
		assert_memory_equal(a, b, 4096);
		assert_int_equal(stk_ioengine_submit(e, two + 1, 1), 0);
		reap_all(e, 1, 1);
		assert_int_equal(tail.res, 100);
		/* a descriptor that is not open */
		struct stk_io bad = {.op = STK_IO_READ, .fd = 1000000, .buf = b, .len = 16,
				     .buf_index = -1, .user_data = 0xabcd0004u};
		io = &bad;
		assert_int_equal(stk_ioengine_submit(e, &io, 1), 0);
		reap_all(e, 1, 1);
		assert_int_equal(bad.res, -EBADF);
		/* put the pattern back for the other engine */
		for (unsigned i = 0; i < 4096; i++)
			a[i] = pattern_byte(8192 + i);
		io = &w;
		assert_int_equal(stk_ioengine_submit(e, &io, 1), 0);
		reap_all(e, 1, 1);
		close(fd);
		stk_ioengine_destroy(e);
	}
}

/* A reap with room for 1 hands back one at a time, losing none; destroy
 * with I/Os in flight waits for them (ASan/TSan would see a late write). */
static void test_small_reap_and_destroy(void **state)
{
	(void)state;
	char p[4200];
	snprintf(p, sizeof(p), "%s/big", dir);
	int fd = open(p, O_RDONLY);
	assert_true(fd >= 0);
	for (size_t k = 0; k < 2; k++) {
		struct stk_ioengine *e = make(kinds[k], 16, 0);
		if (!e)
			continue;
		struct stk_io ios[16];
		struct stk_io *ptr[16];
		uint8_t *buf = malloc(16 * 65536);
		assert_non_null(buf);
		for (unsigned i = 0; i < 16; i++) {
			ios[i] = (struct stk_io){.op = STK_IO_READ, .fd = fd, .buf = buf + i * 65536,
						 .len = 65536, .offset = i * 65536ull, .buf_index = -1,
						 .user_data = 0xabcd0000u | i};
			ptr[i] = &ios[i];
		}
		assert_int_equal(stk_ioengine_submit(e, ptr, 16), 0);
		reap_all(e, 16, 1);
		for (unsigned i = 0; i < 16; i++) {
			assert_int_equal(ios[i].res, 65536);
			assert_true(ios[i].user_data >> 40);
		}
		/* again, and destroy without reaping */
		assert_int_equal(stk_ioengine_submit(e, ptr, 16), 0);
		struct stk_io *d[1];
		stk_ioengine_reap(e, d, 0, 0); /* sends them */
		stk_ioengine_destroy(e);
		free(buf);
	}
	close(fd);
}

static void test_null_and_bad_opts(void **state)
{
	(void)state;
	struct stk_ioengine *e = NULL;
	char err[300];
	struct stk_ioengine_opts o = {.size = sizeof(o), .engine = STK_ENGINE_NULL,
				      .queue_depth = 40000};
	assert_int_equal(stk_ioengine_create(&e, &o, err, sizeof(err)), -ERANGE);
	assert_null(e);
	assert_non_null(strstr(err, "queue_depth"));
	o.size = 4;
	assert_int_equal(stk_ioengine_create(&e, &o, err, sizeof(err)), -EINVAL);
	o = (struct stk_ioengine_opts){.engine = STK_ENGINE_NULL, .null_latency_ns = 200000000};
	assert_int_equal(stk_ioengine_create(&e, &o, NULL, 0), 0);
	assert_string_equal(stk_ioengine_name(e), "null");
	struct stk_io io = {.op = STK_IO_READ, .len = 123, .user_data = 0xabcd0000u}, *p = &io;
	assert_int_equal(stk_ioengine_submit(e, &p, 1), 0);
	struct stk_io *d[1];
	assert_int_equal(stk_ioengine_reap(e, d, 1, 0), 0); /* not yet: 200 ms latency */
	reap_all(e, 1, 1);
	assert_int_equal(io.res, 123);
	stk_ioengine_destroy(e);
	stk_ioengine_destroy(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_read_files),
		cmocka_unit_test(test_read_write_fd),
		cmocka_unit_test(test_small_reap_and_destroy),
		cmocka_unit_test(test_null_and_bad_opts),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
