/* test_trust.c — an index cache is believed only when the data and the file
 * both say so: a folder changed with its mtimes put back (tar x, rsync -a,
 * touch -d) or made again at the same path is indexed again, and said; a
 * cache file or folder another user owns, or others may write, is refused
 * and said, the data read right without it; a cache whose entries leave the
 * dataset (a name outside the root, a sample under another class's folder, a
 * list entry the list does not hold) is refused even with a right checksum;
 * a FIFO at the cache's path never blocks; a large file of garbage costs a
 * header's read, not its size in memory. */
#include "testutil.h"

#include "dataset/build.h"
#include "stoker/stoker.h"

#include <dirent.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>

static size_t fill(uint8_t *buf, int c, int i)
{
	size_t n = 100 + (size_t)c * 10 + (size_t)i;
	for (size_t k = 0; k < n; k++)
		buf[k] = (uint8_t)(c * 37 + i * 5 + (int)k);
	return n;
}

/* Creates a loader over path with its cache in cache_dir (NULL: the user's)
 * and what it said on stderr in said (room for len); the create's code. */
static int open_loader(struct stk_loader **l, const char *path, const char *cache_dir,
		       char *said, size_t len)
{
	char errf[4200];
	snprintf(errf, sizeof(errf), "%s/stderr", tu_dir);
	fflush(stderr);
	int saved = dup(2);
	int fd = open(errf, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0 && saved >= 0);
	dup2(fd, 2);
	close(fd);
	struct stk_loader_opts o = {.size = sizeof(o), .path = path, .batch_size = 4,
				    .cache_dir = cache_dir, .flags = STK_F_NO_SHUFFLE};
	char err[1024] = "";
	alarm(20); /* a create that blocks fails the test, not the run */
	int rc = stk_loader_create(l, &o, err, sizeof(err));
	alarm(0);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	FILE *f = fopen(errf, "r");
	assert_non_null(f);
	size_t n = fread(said, 1, len - 1, f);
	said[n] = 0;
	fclose(f);
	if (rc)
		print_message("create: %s\n", err);
	return rc;
}

/* Every sample of one epoch: its label is the class folder its path names,
 * and its bytes are that file's. */
static void check_epoch(struct stk_loader *l, const char *root)
{
	struct stk_batch *b;
	int64_t got = 0;
	int rc;
	while ((rc = stk_loader_next(l, &b)) == 1) {
		for (uint32_t i = 0; i < b->count; i++, got++) {
			char rel[4096];
			int64_t label;
			uint64_t size;
			assert_int_equal(stk_loader_sample(l, (int64_t)b->indices[i], rel, sizeof(rel),
							   &size, &label), 0);
			assert_int_equal(label, b->labels[i]);
			const char *name = stk_loader_class_name(l, b->labels[i]);
			assert_non_null(name);
			char want[4200];
			snprintf(want, sizeof(want), "%s/%s/", root, name);
			assert_memory_equal(rel, want, strlen(want));
			FILE *f = fopen(rel, "rb");
			assert_non_null(f);
			static uint8_t buf[4096];
			size_t n = fread(buf, 1, sizeof(buf), f);
			fclose(f);
			assert_int_equal(b->sizes[i], n);
			assert_memory_equal(b->data + b->offsets[i], buf, n);
		}
		stk_batch_release(l, b);
	}
	assert_int_equal(rc, 0);
	assert_int_equal(got, stk_loader_num_samples(l));
}

/* The one index-* file in dir, into out. */
static void index_file(const char *dir, char *out, size_t len)
{
	DIR *d = opendir(dir);
	assert_non_null(d);
	struct dirent *e;
	out[0] = 0;
	while ((e = readdir(d)))
		if (!strncmp(e->d_name, "index-", 6) && !strchr(e->d_name, '.'))
			snprintf(out, len, "%s/%s", dir, e->d_name);
	closedir(d);
	assert_true(out[0]);
}

static const char *const classes2[] = {"cat", "dog"};

/* A class folder added with every mtime put back: the old index (2 classes)
 * must not be used; the new class shifts every label after it. */
static void test_mtime_put_back(void **state)
{
	(void)state;
	char root[1024], cache[4200], said[8192];
	snprintf(root, sizeof(root), "%s/kept", tu_dir);
	snprintf(cache, sizeof(cache), "%s/cache-kept", tu_dir);
	tu_mkdir(root);
	tu_tree(root, 2, classes2, NULL, 3, "%03d.jpg", 4096, fill);
	struct stk_loader *l;
	assert_int_equal(open_loader(&l, root, cache, said, sizeof(said)), 0);
	assert_int_equal(stk_loader_num_classes(l), 2);
	stk_loader_destroy(l);
	tu_sh("t=$(stat -c %%y '%s'); mkdir '%s/ant' && cp '%s/cat/000.jpg' '%s/ant/' && "
	   "touch -m -d \"$t\" '%s' '%s/ant'", root, root, root, root, root, root);
	assert_int_equal(open_loader(&l, root, cache, said, sizeof(said)), 0);
	assert_int_equal(stk_loader_num_classes(l), 3);
	assert_string_equal(stk_loader_class_name(l, 0), "ant");
	assert_non_null(strstr(said, "out of date"));
	assert_non_null(strstr(said, "ctime"));
	check_epoch(l, root);
	stk_loader_destroy(l);
	/* the same again: the index now written is used, silently */
	assert_int_equal(open_loader(&l, root, cache, said, sizeof(said)), 0);
	assert_string_equal(said, "");
	assert_int_equal(stk_loader_num_classes(l), 3);
	stk_loader_destroy(l);
}

/* A dataset deleted and made again at the same path, other classes, the
 * folders' mtimes set to the old ones (rsync -a, tar x). */
static void test_made_again(void **state)
{
	(void)state;
	char root[1024], cache[4200], said[8192];
	snprintf(root, sizeof(root), "%s/again", tu_dir);
	snprintf(cache, sizeof(cache), "%s/cache-again", tu_dir);
	tu_mkdir(root);
	tu_tree(root, 2, classes2, NULL, 3, "%03d.jpg", 4096, fill);
	struct stk_loader *l;
	assert_int_equal(open_loader(&l, root, cache, said, sizeof(said)), 0);
	stk_loader_destroy(l);
	tu_sh("cd '%s' && t=$(stat -c %%y again) && tc=$(stat -c %%y again/cat) && "
	   "td=$(stat -c %%y again/dog) && rm -r again && mkdir -p again/cat again/dog && "
	   "cp '%s' again/cat/000.jpg && cp '%s' again/dog/000.jpg && "
	   "touch -m -d \"$tc\" again/cat && touch -m -d \"$td\" again/dog && "
	   "touch -m -d \"$t\" again", tu_dir, "/etc/hostname", "/etc/hostname");
	assert_int_equal(open_loader(&l, root, cache, said, sizeof(said)), 0);
	assert_int_equal(stk_loader_num_samples(l), 2);
	assert_non_null(strstr(said, "out of date"));
	check_epoch(l, root);
	stk_loader_destroy(l);
}

/* A cache file another user owns, or others may write, is neither read nor
 * replaced; a cache folder so is not used at all. */
static void test_untrusted(void **state)
{
	(void)state;
	if (geteuid() != 0) {
		print_message("skipped: giving a file to another user needs root\n");
		skip();
	}
	char root[1024], cache[4200], idx[4400], said[8192];
	snprintf(root, sizeof(root), "%s/owned", tu_dir);
	snprintf(cache, sizeof(cache), "%s/cache-owned", tu_dir);
	tu_mkdir(root);
	tu_tree(root, 2, classes2, NULL, 3, "%03d.jpg", 4096, fill);
	struct stk_loader *l;
	assert_int_equal(open_loader(&l, root, cache, said, sizeof(said)), 0);
	stk_loader_destroy(l);
	index_file(cache, idx, sizeof(idx));
	struct stat st;
	/* another user's file */
	assert_int_equal(chown(idx, 12345, 12345), 0);
	assert_int_equal(open_loader(&l, root, cache, said, sizeof(said)), 0);
	assert_non_null(strstr(said, "belongs to uid 12345, not to you"));
	assert_non_null(strstr(said, idx));
	check_epoch(l, root);
	stk_loader_destroy(l);
	assert_int_equal(stat(idx, &st), 0);
	assert_int_equal(st.st_uid, 12345); /* not replaced */
	/* a file others may write */
	assert_int_equal(chown(idx, 0, 0), 0);
	assert_int_equal(chmod(idx, 0666), 0);
	assert_int_equal(open_loader(&l, root, cache, said, sizeof(said)), 0);
	assert_non_null(strstr(said, "writable by every user"));
	stk_loader_destroy(l);
	/* a symlink in its place */
	unlink(idx);
	assert_int_equal(symlink("/etc/hostname", idx), 0);
	assert_int_equal(open_loader(&l, root, cache, said, sizeof(said)), 0);
	assert_non_null(strstr(said, "symbolic link"));
	stk_loader_destroy(l);
	unlink(idx);
	/* the folder: another user's, then writable by all */
	assert_int_equal(chown(cache, 12345, 12345), 0);
	assert_int_equal(open_loader(&l, root, cache, said, sizeof(said)), 0);
	assert_non_null(strstr(said, "cache folder"));
	assert_non_null(strstr(said, "belongs to uid 12345"));
	check_epoch(l, root);
	stk_loader_destroy(l);
	assert_int_not_equal(access(idx, F_OK), 0); /* nothing written there */
	assert_int_equal(chown(cache, 0, 0), 0);
	assert_int_equal(chmod(cache, 0777), 0);
	assert_int_equal(open_loader(&l, root, cache, said, sizeof(said)), 0);
	assert_non_null(strstr(said, "writable by every user"));
	stk_loader_destroy(l);
	assert_int_not_equal(access(idx, F_OK), 0);
	/* $XDG_CACHE_HOME/stoker a symlink to another user's folder */
	char xdg[4200], link[4300], other[4200];
	snprintf(xdg, sizeof(xdg), "%s/xdg", tu_dir);
	snprintf(other, sizeof(other), "%s/other", tu_dir);
	snprintf(link, sizeof(link), "%s/stoker", xdg);
	tu_mkdir(xdg);
	assert_int_equal(mkdir(other, 0700), 0);
	assert_int_equal(chown(other, 12345, 12345), 0);
	assert_int_equal(symlink(other, link), 0);
	char *old = getenv("XDG_CACHE_HOME") ? strdup(getenv("XDG_CACHE_HOME")) : NULL;
	setenv("XDG_CACHE_HOME", xdg, 1);
	char buf[4200];
	assert_int_equal(stk_cache_dir(buf, sizeof(buf)), -EPERM);
	assert_int_equal(open_loader(&l, root, NULL, said, sizeof(said)), 0);
	assert_non_null(strstr(said, "belongs to uid 12345"));
	check_epoch(l, root);
	stk_loader_destroy(l);
	/* a folder the library makes is private */
	snprintf(xdg, sizeof(xdg), "%s/xdg2", tu_dir);
	setenv("XDG_CACHE_HOME", xdg, 1);
	assert_true(stk_cache_dir(buf, sizeof(buf)) > 0);
	assert_int_equal(stat(buf, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0700);
	if (old)
		setenv("XDG_CACHE_HOME", old, 1);
	else
		unsetenv("XDG_CACHE_HOME");
	free(old);
}

/* The cache file at path with fix(p, header) applied and the checksum made
 * right again: what only a forger who knows the format would write. */
static void forge(const char *path, void (*fix)(char *p, const struct idx_header *h))
{
	int fd = open(path, O_RDWR);
	assert_true(fd >= 0);
	struct stat st;
	assert_int_equal(fstat(fd, &st), 0);
	char *p = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	assert_true(p != MAP_FAILED);
	struct idx_header *h = (struct idx_header *)p;
	fix(p, h);
	h->checksum = stk__index_file_checksum(p, (size_t)st.st_size);
	munmap(p, (size_t)st.st_size);
	close(fd);
}

static size_t pad8(size_t x)
{
	return (x + 7) & ~(size_t)7;
}

static char *names_of(char *p, const struct idx_header *h)
{
	return p + pad8(sizeof(*h)) + pad8(h->n * sizeof(struct stk_entry));
}

static struct stk_entry *entries_of(char *p, const struct idx_header *h)
{
	return (struct stk_entry *)(p + pad8(sizeof(*h)));
}

/* "cat/000.jpg" -> "../t/000.jpg": the same length, outside the root */
static void outside(char *p, const struct idx_header *h)
{
	memcpy(names_of(p, h) + entries_of(p, h)[0].name, "../t", 4);
}

/* the first dog sample labelled cat */
static void relabel(char *p, const struct idx_header *h)
{
	struct stk_entry *e = entries_of(p, h);
	for (uint64_t i = 0; i < h->n; i++)
		if (e[i].label == 1) {
			e[i].label = 0;
			return;
		}
}

/* a list's entry "b.bin" -> "c.bin": a file of the folder, not on the list */
static void unlisted(char *p, const struct idx_header *h)
{
	names_of(p, h)[entries_of(p, h)[1].name] = 'c';
}

static void refused_forged(const char *root, const char *path, const char *cache,
			   void (*fix)(char *, const struct idx_header *), const char *reason)
{
	char idx[4400], said[8192];
	struct stk_loader *l;
	assert_int_equal(open_loader(&l, path, cache, said, sizeof(said)), 0);
	stk_loader_destroy(l);
	index_file(cache, idx, sizeof(idx));
	forge(idx, fix);
	assert_int_equal(open_loader(&l, path, cache, said, sizeof(said)), 0);
	if (!strstr(said, reason))
		fail_msg("'%s' not said: %s", reason, said);
	assert_non_null(strstr(said, "damaged"));
	if (root)
		check_epoch(l, root);
	stk_loader_destroy(l);
}

static void test_forged_entries(void **state)
{
	(void)state;
	char root[1024], cache[4200];
	snprintf(root, sizeof(root), "%s/forged", tu_dir);
	tu_mkdir(root);
	tu_tree(root, 2, classes2, NULL, 3, "%03d.jpg", 4096, fill);
	snprintf(cache, sizeof(cache), "%s/cache-f1", tu_dir);
	refused_forged(root, root, cache, outside, "outside the dataset's folder");
	snprintf(cache, sizeof(cache), "%s/cache-f2", tu_dir);
	refused_forged(root, root, cache, relabel, "not in class folder cat");
	/* a list: its entries are its lines */
	char list[4300];
	snprintf(list, sizeof(list), "%s/list.txt", tu_dir);
	tu_sh("cd '%s' && printf x > a.bin && printf y > b.bin && printf z > c.bin && "
	   "printf 'a.bin\\t0\\nb.bin\\t1\\n' > list.txt", tu_dir);
	snprintf(cache, sizeof(cache), "%s/cache-f3", tu_dir);
	refused_forged(NULL, list, cache, unlisted, "not on the list's lines");
}

/* A small dataset tu_dir/name indexed once with its cache in
 * tu_dir/cache-name; the index file's path into idx. */
static void indexed(const char *name, char *root, size_t rlen, char *cache, size_t clen,
		    char *idx, size_t ilen)
{
	char said[8192];
	snprintf(root, rlen, "%s/%s", tu_dir, name);
	snprintf(cache, clen, "%s/cache-%s", tu_dir, name);
	tu_mkdir(root);
	tu_tree(root, 2, classes2, NULL, 2, "%03d.jpg", 4096, fill);
	struct stk_loader *l;
	assert_int_equal(open_loader(&l, root, cache, said, sizeof(said)), 0);
	stk_loader_destroy(l);
	index_file(cache, idx, ilen);
}

/* A FIFO where the cache is: create goes on (said), it does not wait for a
 * writer. */
static void test_fifo(void **state)
{
	(void)state;
	char root[1024], cache[4200], idx[4400], said[8192];
	indexed("fifo", root, sizeof(root), cache, sizeof(cache), idx, sizeof(idx));
	struct stk_loader *l;
	unlink(idx);
	assert_int_equal(mkfifo(idx, 0600), 0);
	assert_int_equal(open_loader(&l, root, cache, said, sizeof(said)), 0);
	assert_non_null(strstr(said, "not a regular file"));
	check_epoch(l, root);
	stk_loader_destroy(l);
}

/* A 1 GiB file (sparse) of zeros at the cache's path: refused after reading
 * its header, never mapped whole. */
static void test_large_garbage(void **state)
{
	(void)state;
	char root[1024], cache[4200], idx[4400], said[8192];
	indexed("big", root, sizeof(root), cache, sizeof(cache), idx, sizeof(idx));
	struct stk_loader *l;
	/* the real header, then a gigabyte: only total_len tells */
	assert_int_equal(truncate(idx, 1ll << 30), 0);
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	long before = ru.ru_maxrss;
	assert_int_equal(open_loader(&l, root, cache, said, sizeof(said)), 0);
	getrusage(RUSAGE_SELF, &ru);
	assert_true(ru.ru_maxrss - before < 128 * 1024); /* KiB */
	assert_non_null(strstr(said, "damaged"));
	check_epoch(l, root);
	stk_loader_destroy(l);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_mtime_put_back),
		cmocka_unit_test(test_made_again),
		cmocka_unit_test(test_untrusted),
		cmocka_unit_test(test_forged_entries),
		cmocka_unit_test(test_fifo),
		cmocka_unit_test(test_large_garbage),
	};
	return cmocka_run_group_tests(tests, tu_dir_setup, tu_dir_teardown);
}
