/* test_integrity.c — data is never silently wrong: a shard rewritten in place
 * with members of the same sizes (by GNU tar and by Python's tarfile, with
 * the mtime put back or not) gives errors naming the shard and the offset,
 * never another member's bytes; every tar member type is read (links to a
 * member before them) or refused by name and counted, never dropped or
 * served raw; a second consumer thread is refused. */
#include "testutil.h"

#include "stoker/stoker.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>

#define N 20
#define LEN 1000

static bool have_gnu_tar(void)
{
	return !system("tar --version 2>/dev/null | grep -q 'GNU tar'");
}

static void content(uint8_t *buf, int seed, int i)
{
	for (size_t k = 0; k < LEN; k++)
		buf[k] = (uint8_t)(k * 31 + (size_t)i * 7 + (size_t)seed * 101);
}

static struct stk_loader *make(const char *path, int on_error, char *err, size_t errlen, int *rc)
{
	struct stk_loader_opts o = {.size = sizeof(o), .path = path, .batch_size = 8,
				    .on_error = (uint32_t)on_error,
				    .flags = STK_F_QUIET | STK_F_NO_SHUFFLE | STK_F_BUFFERED};
	struct stk_loader *l = NULL;
	*rc = stk_loader_create(&l, &o, err, errlen);
	return l;
}

/* One epoch: every delivered sample's bytes and label must be (seed, label
 * shift)'s for its index; returns the count delivered, *errors the stats'. */
static int64_t epoch(struct stk_loader *l, int seed, int shift, uint64_t *errors, int *last)
{
	struct stk_batch *b;
	int rc;
	int64_t got = 0;
	uint8_t want[LEN];
	while ((rc = stk_loader_next(l, &b)) == 1) {
		for (uint32_t i = 0; i < b->count; i++, got++) {
			int idx = (int)b->indices[i];
			content(want, seed, idx);
			assert_int_equal(b->sizes[i], LEN);
			assert_memory_equal(b->data + b->offsets[i], want, LEN);
			assert_int_equal(b->labels[i], (idx + shift) % 5);
		}
		stk_batch_release(l, b);
	}
	*last = rc;
	struct stk_stats st = {.size = sizeof(st)};
	stk_loader_stats(l, &st);
	*errors = st.errors;
	return got;
}

/* A folder of N samples (prefix, content seed, label shift) in dir/name. */
static void write_src(const char *dir, const char *prefix, int seed, int shift)
{
	char p[PATH_MAX];
	uint8_t buf[LEN];
	tu_mkdir(dir);
	for (int i = 0; i < N; i++) {
		content(buf, seed, i);
		snprintf(p, sizeof(p), "%s/%s%03d.bin", dir, prefix, i);
		tu_write(p, buf, LEN);
		char cls[8];
		snprintf(p, sizeof(p), "%s/%s%03d.cls", dir, prefix, i);
		snprintf(cls, sizeof(cls), "%d\n", (i + shift) % 5);
		tu_write(p, cls, strlen(cls));
	}
}

/* The same samples by Python's tarfile as `stoker pack` writes them: names
 * by position, mtime 0, fixed owner: a re-pack's headers are byte-identical. */
static void py_pack(const char *src, const char *out)
{
	tu_sh("/usr/bin/python3 -c '\n"
	   "import io, os, sys, tarfile\n"
	   "with tarfile.open(sys.argv[2], \"w\", format=tarfile.GNU_FORMAT) as t:\n"
	   "  for n in sorted(os.listdir(sys.argv[1])):\n"
	   "    b = open(os.path.join(sys.argv[1], n), \"rb\").read()\n"
	   "    ti = tarfile.TarInfo(n); ti.size = len(b); t.addfile(ti, io.BytesIO(b))\n"
	   "' '%s' '%s'", src, out);
}

/* Waits until a file written now gets an mtime after `than` (the kernel
 * stamps files with a coarse clock): a rewrite is then seen by its mtime. */
static void wait_past(const struct timespec *than)
{
	struct timespec now;
	do {
		clock_gettime(CLOCK_REALTIME_COARSE, &now);
		if (now.tv_sec > than->tv_sec ||
		    (now.tv_sec == than->tv_sec && now.tv_nsec > than->tv_nsec))
			return;
		usleep(1000);
	} while (1);
}

/* Shard rewritten in place (cp: the same inode) while loaders hold it
 * open, with members of the same sizes.  gnu: GNU tar, other names, the
 * shard's mtime put back (only the headers tell); else Python's tarfile
 * with identical headers and another content (only the mtime tells). */
static void rewritten(bool gnu)
{
	char *d = tu_mkdtemp();
	char a[PATH_MAX], bsrc[PATH_MAX], shard[PATH_MAX], other[PATH_MAX], err[1024];
	snprintf(a, sizeof(a), "%s/a", d);
	snprintf(bsrc, sizeof(bsrc), "%s/b", d);
	snprintf(shard, sizeof(shard), "%s/shards", d);
	tu_mkdir(shard);
	snprintf(shard, sizeof(shard), "%s/shards/s-000.tar", d);
	snprintf(other, sizeof(other), "%s/other.tar", d);
	write_src(a, "k", 1, 0);
	write_src(bsrc, gnu ? "x" : "k", 2, 1);
	if (gnu) {
		tu_sh("cd '%s' && tar --format=gnu -cf '%s' $(ls | sort)", a, shard);
		tu_sh("cd '%s' && tar --format=gnu -cf '%s' $(ls | sort)", bsrc, other);
	} else {
		py_pack(a, shard);
		py_pack(bsrc, other);
	}
	struct stat st_a, st_b;
	assert_int_equal(stat(shard, &st_a), 0);
	assert_int_equal(stat(other, &st_b), 0);
	assert_int_equal(st_a.st_size, st_b.st_size); /* same layout, same sizes */
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s/shards", d);
	int rc;
	uint64_t errors;
	int last;
	struct stk_loader *skip = make(dir, STK_ON_ERROR_SKIP, err, sizeof(err), &rc);
	assert_int_equal(rc, 0);
	struct stk_loader *fail = make(dir, STK_ON_ERROR_FAIL, err, sizeof(err), &rc);
	assert_int_equal(rc, 0);
	assert_int_equal(epoch(skip, 1, 0, &errors, &last), N); /* as indexed */
	assert_int_equal(errors, 0);

	if (!gnu)
		wait_past(&st_a.st_mtim);
	tu_sh("cp '%s' '%s'", other, shard); /* in place: cp keeps the inode */
	if (gnu) {
		struct timespec t[2] = {st_a.st_atim, st_a.st_mtim};
		assert_int_equal(utimensat(AT_FDCWD, shard, t, 0), 0);
	}
	assert_int_equal(stk_loader_start(skip, 1, 0), 0);
	stk_loader_stats_reset(skip);
	/* no sample is another's: each comes with the bytes indexed, or not at all */
	assert_int_equal(epoch(skip, 1, 0, &errors, &last), 0);
	assert_int_equal(last, 0);
	assert_int_equal(errors, N);
	const char *e = stk_last_error(skip);
	assert_non_null(strstr(e, "s-000.tar"));
	assert_non_null(strstr(e, "offset"));
	assert_non_null(strstr(e, gnu ? "the header of 'x0" : "changed since it was indexed"));

	assert_int_equal(stk_loader_start(fail, 1, 0), 0);
	assert_int_equal(epoch(fail, 1, 0, &errors, &last), 0);
	assert_int_equal(last, STK_ECORRUPT);
	assert_non_null(strstr(stk_last_error(fail), "s-000.tar: member at offset 512"));
	stk_loader_destroy(skip);
	stk_loader_destroy(fail);

	/* a new loader indexes the shard as it is now (the error dropped the
	 * cache, whose recorded mtime may be the shard's again) */
	struct stk_loader *l = make(dir, STK_ON_ERROR_FAIL, err, sizeof(err), &rc);
	assert_int_equal(rc, 0);
	assert_int_equal(epoch(l, 2, 1, &errors, &last), N);
	assert_int_equal(last, 0);
	stk_loader_destroy(l);
	tu_rmrf(d);
	free(d);
}

static void test_rewritten_gnu_tar(void **state)
{
	(void)state;
	if (!have_gnu_tar()) {
		print_message("skipped: GNU tar is not installed\n");
		skip();
	}
	rewritten(true);
}

static void test_rewritten_same_headers(void **state)
{
	(void)state;
	rewritten(false);
}

/* Indexes the shard at path under skip: samples, what was left out; reads
 * them (a sample labelled k holds the bytes of src/<k>.bin); then under fail
 * the first refused member must be named. */
static void index_one(const char *path, const char *src, int64_t want_n, uint64_t want_bad,
		      const char *first_bad)
{
	char err[1024];
	int rc;
	struct stk_loader *l = make(path, STK_ON_ERROR_SKIP, err, sizeof(err), &rc);
	if (rc)
		fail_msg("%s: %s", path, err);
	assert_int_equal(stk_loader_num_samples(l), want_n);
	struct stk_stats st = {.size = sizeof(st)};
	stk_loader_stats(l, &st);
	assert_int_equal(st.index_errors, want_bad);
	struct stk_batch *b;
	int64_t got = 0;
	while ((rc = stk_loader_next(l, &b)) == 1) {
		for (uint32_t i = 0; i < b->count; i++, got++) {
			char name[PATH_MAX];
			snprintf(name, sizeof(name), "%s/%04d.bin", src, (int)b->labels[i]);
			uint8_t want[LEN];
			int fd = open(name, O_RDONLY);
			assert_true(fd >= 0);
			ssize_t n = read(fd, want, sizeof(want));
			close(fd);
			assert_int_equal(b->sizes[i], n);
			assert_memory_equal(b->data + b->offsets[i], want, (size_t)n);
		}
		stk_batch_release(l, b);
	}
	assert_int_equal(rc, 0);
	assert_int_equal(got, want_n);
	stk_loader_stats(l, &st);
	assert_int_equal(st.errors, want_bad); /* counted in the stats */
	stk_loader_destroy(l);
	l = make(path, STK_ON_ERROR_FAIL, err, sizeof(err), &rc);
	if (!want_bad) {
		assert_int_equal(rc, 0);
		stk_loader_destroy(l);
		return;
	}
	assert_null(l);
	assert_int_equal(rc, STK_EFORMAT);
	if (!strstr(err, first_bad) || !strstr(err, "shard.tar: offset "))
		fail_msg("'%s' does not name '%s'", err, first_bad);
}

static void src_file(const char *src, int key, int len)
{
	char p[PATH_MAX];
	uint8_t buf[LEN];
	content(buf, 3, key);
	snprintf(p, sizeof(p), "%s/%04d.bin", src, key);
	tu_write(p, buf, (size_t)len);
}

/* GNU tar: a hard link and a symbolic link to a member before them are read
 * as it; a symbolic link out of the shard and a sparse file (GNU 'S', PAX
 * sparse 1.0 and 0.1) are refused by name and counted. */
static void test_member_types_gnu_tar(void **state)
{
	(void)state;
	if (!have_gnu_tar()) {
		print_message("skipped: GNU tar is not installed\n");
		skip();
	}
	static const char *const fmts[] = {"--format=gnu", "--format=posix",
					   "--format=posix --sparse-version=0.1"};
	for (size_t f = 0; f < sizeof(fmts) / sizeof(fmts[0]); f++) {
		char *d = tu_mkdtemp();
		char src[1024], p[PATH_MAX], q[PATH_MAX], shard[1024];
		snprintf(src, sizeof(src), "%s/src", d);
		snprintf(shard, sizeof(shard), "%s/shard.tar", d);
		tu_mkdir(src);
		src_file(src, 1, 700);
		src_file(src, 6, 300);
		snprintf(p, sizeof(p), "%s/0001.bin", src);
		snprintf(q, sizeof(q), "%s/0002.bin", src);
		assert_int_equal(link(p, q), 0);
		snprintf(q, sizeof(q), "%s/0003.bin", src);
		assert_int_equal(symlink("./0001.bin", q), 0);
		snprintf(q, sizeof(q), "%s/0004.bin", src);
		assert_int_equal(symlink("../elsewhere.bin", q), 0);
		snprintf(q, sizeof(q), "%s/0005.bin", src);
		tu_sh("truncate -s 1M '%s' && printf hello | dd of='%s' bs=1 seek=500000 conv=notrunc "
		   "2>/dev/null", q, q);
		/* the label of a sample: the key of the file whose bytes it has */
		static const char *const labels[] = {"1", "1", "1", "9", "9", "6"};
		for (int k = 0; k < 6; k++) {
			snprintf(q, sizeof(q), "%s/%04d.cls", src, k + 1);
			tu_write(q, labels[k], 1);
		}
		tu_sh("cd '%s' && tar %s -S -cf '%s' $(ls | sort)", src, fmts[f], shard);
		snprintf(p, sizeof(p), "/usr/bin/python3 -c 'import sys, tarfile; sys.exit(not any("
			 "m.issparse() for m in tarfile.open(sys.argv[1])))' '%s'", shard);
		bool sparse = !system(p);
		if (!sparse) /* a file system without holes: stored plain, read plain */
			print_message("%s: the file system made no hole: 0005 stored plain\n", fmts[f]);
		index_one(shard, src, sparse ? 4 : 5, sparse ? 2 : 1, "member '0004.bin' is a "
			  "symbolic link to '../elsewhere.bin', which is not a member before it");
		if (sparse) { /* the sparse one alone: named with its own name */
			tu_sh("cd '%s' && rm '%s' && tar %s -S -cf '%s' 0001.bin 0001.cls 0005.bin 0005.cls",
			   src, shard, fmts[f], shard);
			index_one(shard, src, 1, 1, "member '0005.bin' is a sparse file");
		}
		tu_rmrf(d);
		free(d);
	}
}

/* Python's tarfile: hard links (to a member before, and to one after),
 * a symbolic link, a fifo, a character device, a directory. */
static void test_member_types_tarfile(void **state)
{
	(void)state;
	char *d = tu_mkdtemp();
	char src[1024], shard[1024];
	snprintf(src, sizeof(src), "%s/src", d);
	snprintf(shard, sizeof(shard), "%s/shard.tar", d);
	tu_mkdir(src);
	src_file(src, 1, 900);
	src_file(src, 7, 100);
	tu_sh("/usr/bin/python3 -c '\n"
	   "import io, sys, tarfile\n"
	   "src, out = sys.argv[1], sys.argv[2]\n"
	   "def add(t, name, typ=tarfile.REGTYPE, data=b\"\", link=\"\"):\n"
	   "    ti = tarfile.TarInfo(name); ti.type = typ; ti.linkname = link\n"
	   "    ti.size = len(data); t.addfile(ti, io.BytesIO(data) if data else None)\n"
	   "with tarfile.open(out, \"w\", format=tarfile.PAX_FORMAT) as t:\n"
	   "    add(t, \"d\", tarfile.DIRTYPE)\n"
	   "    add(t, \"d/0001.bin\", data=open(src + \"/0001.bin\", \"rb\").read())\n"
	   "    add(t, \"d/0001.cls\", data=b\"1\")\n"
	   "    add(t, \"d/0002.bin\", tarfile.LNKTYPE, link=\"d/0001.bin\")\n"
	   "    add(t, \"d/0002.cls\", data=b\"1\")\n"
	   "    add(t, \"d/0003.bin\", tarfile.SYMTYPE, link=\"../d/./0001.bin\")\n"
	   "    add(t, \"d/0003.cls\", data=b\"1\")\n"
	   "    add(t, \"d/0004.bin\", tarfile.FIFOTYPE)\n"
	   "    add(t, \"d/0004.cls\", data=b\"4\")\n"
	   "    add(t, \"d/0005.bin\", tarfile.CHRTYPE)\n"
	   "    add(t, \"d/0006.bin\", tarfile.LNKTYPE, link=\"d/0007.bin\")\n"
	   "    add(t, \"d/0007.bin\", data=open(src + \"/0007.bin\", \"rb\").read())\n"
	   "    add(t, \"d/0007.cls\", data=b\"7\")\n"
	   "' '%s' '%s'", src, shard);
	index_one(shard, src, 4, 3, "member 'd/0004.bin' is of type '6' (fifo)");
	tu_rmrf(d);
	free(d);
}

/* Two threads in stk_loader_next at once: the second is refused (-EBUSY,
 * named), never handed a batch the first was taking. */
struct consumer {
	struct stk_loader *l;
	atomic_bool done;
	int last;
	int64_t got;
};

static void *consume(void *arg)
{
	struct consumer *c = arg;
	struct stk_batch *b;
	int rc;
	while ((rc = stk_loader_next(c->l, &b)) == 1 || rc == -EBUSY)
		if (rc == 1) {
			c->got += b->count;
			stk_batch_release(c->l, b);
		}
	c->last = rc;
	atomic_store(&c->done, true);
	return NULL;
}

static void test_two_consumers(void **state)
{
	(void)state;
	char *d = tu_mkdtemp();
	char p[PATH_MAX];
	for (int i = 0; i < 64; i++) {
		snprintf(p, sizeof(p), "%s/%03d.jpg", d, i);
		tu_write(p, "abcd", 4);
	}
	struct stk_loader_opts o = {.size = sizeof(o), .path = d, .batch_size = 4,
				    .engine = STK_ENGINE_NULL, .null_latency_ns = 20000000,
				    .flags = STK_F_QUIET | STK_F_NO_CACHE};
	char err[512];
	struct consumer c = {0};
	assert_int_equal(stk_loader_create(&c.l, &o, err, sizeof(err)), 0);
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, consume, &c), 0);
	/* the first thread waits in stk_loader_next most of the time */
	bool busy = false;
	int64_t mine = 0;
	while (!busy && !atomic_load(&c.done)) {
		struct stk_batch *b;
		int rc = stk_loader_next_timeout(c.l, &b, 0);
		if (rc == 1) {
			mine += b->count;
			stk_batch_release(c.l, b);
		}
		busy = rc == -EBUSY;
		if (busy)
			assert_non_null(strstr(stk_last_error(c.l), "one consumer thread"));
		usleep(100);
	}
	assert_true(busy);
	pthread_join(t, NULL);
	assert_int_equal(c.last, 0);
	assert_int_equal(c.got + mine, 64); /* every sample once, between the two */
	stk_loader_destroy(c.l);
	tu_rmrf(d);
	free(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rewritten_gnu_tar),
		cmocka_unit_test(test_rewritten_same_headers),
		cmocka_unit_test(test_member_types_gnu_tar),
		cmocka_unit_test(test_member_types_tarfile),
		cmocka_unit_test(test_two_consumers),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
