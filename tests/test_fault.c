/* test_fault.c — the fault suite: each way a dataset goes bad under a
 * training job (issue 11's classes) gives the right samples or a counted,
 * named error, never a wrong sample nor a lost count.  One test per class;
 * tests/cli_fault.sh covers the command line, tests/python/test_fault.py
 * the binding. */
#include "testutil.h"

#include "dataset/build.h"
#include "stoker/stoker.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <sys/mman.h>
#include <time.h>

#define NCLASS 3
#define PER_CLASS 20
#define N (NCLASS * PER_CLASS)
#define MAXLEN 9000

/* Deterministic content of file (c, i): its length and bytes. */
static size_t fill(uint8_t *buf, int c, int i)
{
	size_t len = 100 + (size_t)((c * 7919 + i * 104729) % (MAXLEN - 100));
	for (size_t k = 0; k < len; k++)
		buf[k] = (uint8_t)(k * 131 + (size_t)c * 17 + (size_t)i * 3);
	return len;
}

/* A fresh ImageFolder dataset: NCLASS classes of PER_CLASS files. */
static char *make_dataset(void)
{
	char *d = tu_mkdtemp();
	tu_tree(d, NCLASS, NULL, "c%d", PER_CLASS, "%03d.jpg", MAXLEN, fill);
	return d;
}

static void drop_dataset(char *d)
{
	tu_rmrf(d);
	free(d);
}

static int try_make(struct stk_loader **l, struct stk_loader_opts o, char *err, size_t errlen)
{
	o.size = sizeof(o);
	o.flags |= STK_F_QUIET;
	return stk_loader_create(l, &o, err, errlen);
}

static struct stk_loader *make(struct stk_loader_opts o)
{
	struct stk_loader *l = NULL;
	char err[PATH_MAX + 256];
	int rc = try_make(&l, o, err, sizeof(err));
	if (rc)
		fail_msg("create %s: %s (%s)", o.path, err, stk_err_name(rc));
	return l;
}

/* What one epoch delivered. */
struct epoch {
	int64_t samples, batches, wrong;
	int rc;
	uint64_t errors;
};

/* Runs the loader's current epoch to its end, checking every sample's bytes
 * and label against the file on disk now (a mismatch is a wrong sample). */
static struct epoch run_epoch(struct stk_loader *l)
{
	struct epoch e = {0};
	struct stk_batch *b;
	uint8_t *want = malloc(4 * MAXLEN + 1); /* files rewritten larger, and one past them */
	assert_non_null(want);
	while ((e.rc = stk_loader_next(l, &b)) == 1) {
		e.batches++;
		for (uint32_t i = 0; i < b->count; i++) {
			char path[PATH_MAX];
			uint64_t size;
			int64_t label;
			e.samples++;
			assert_int_equal(stk_loader_sample(l, b->indices[i], path, sizeof(path), &size,
							   &label), 0);
			FILE *f = fopen(path, "rb");
			size_t got = f ? fread(want, 1, 4 * MAXLEN + 1, f) : 0;
			if (f)
				fclose(f);
			char cls[16];
			snprintf(cls, sizeof(cls), "/c%lld/", (long long)b->labels[i]);
			if (!f || got != b->sizes[i] || memcmp(b->data + b->offsets[i], want, got) ||
			    !strstr(path, cls))
				e.wrong++;
		}
		stk_batch_release(l, b);
	}
	free(want);
	struct stk_stats st = {.size = sizeof(st)};
	assert_int_equal(stk_loader_stats(l, &st), 0);
	e.errors = st.errors;
	return e;
}

static void sample_path(struct stk_loader *l, int64_t i, char *path, size_t len)
{
	assert_int_equal(stk_loader_sample(l, i, path, len, NULL, NULL), 0);
}


/* stk_loader_create with the notices on (not STK_F_QUIET) and stderr caught:
 * returns what it printed (free it). */
static char *create_said(struct stk_loader **l, struct stk_loader_opts o, int *rc, char *err,
			 size_t errlen)
{
	o.size = sizeof(o);
	FILE *tmp = tmpfile();
	assert_non_null(tmp);
	fflush(stderr);
	int saved = dup(2);
	assert_true(saved >= 0);
	assert_true(dup2(fileno(tmp), 2) >= 0);
	*rc = stk_loader_create(l, &o, err, errlen);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	long n = ftell(tmp) >= 0 ? (long)lseek(fileno(tmp), 0, SEEK_END) : 0;
	char *text = calloc(1, (size_t)n + 1);
	assert_non_null(text);
	assert_int_equal(pread(fileno(tmp), text, (size_t)n, 0), n);
	fclose(tmp);
	return text;
}

static int count_of(const char *hay, const char *needle)
{
	int k = 0;
	for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
		k++;
	return k;
}

static uint64_t index_errors(struct stk_loader *l)
{
	struct stk_stats st = {.size = sizeof(st)};
	assert_int_equal(stk_loader_stats(l, &st), 0);
	return st.index_errors;
}

/* Maps the cache file beside dataset d for writing (length in *len). */
static uint8_t *map_cache(const char *d, size_t *len)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/.stoker-index", d);
	int fd = open(p, O_RDWR);
	assert_true(fd >= 0);
	struct stat st;
	assert_int_equal(fstat(fd, &st), 0);
	*len = (size_t)st.st_size;
	void *m = mmap(NULL, *len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	assert_true(m != MAP_FAILED);
	return m;
}

/* Class 1: a cache with one entry's size or label changed (header intact) is
 * not trusted: the checksum refuses it, it is rebuilt and that is said once;
 * every sample is then right.  One with a valid checksum but an entry out of
 * range for its header is refused too. */
static void test_index_cache_integrity(void **state)
{
	(void)state;
	char *d = make_dataset();
	struct stk_loader_opts o = {.path = d, .batch_size = 8,
				    .flags = STK_F_NO_SHUFFLE | STK_F_INDEX_BESIDE};
	stk_loader_destroy(make(o)); /* indexes and caches */
	char err[PATH_MAX + 256];
	for (int what = 0; what < 4; what++) {
		size_t len;
		uint8_t *m = map_cache(d, &len);
		struct idx_header *h = (void *)m;
		struct stk_entry *e = (void *)(m + STK_ALIGN_UP(sizeof(*h), 8));
		assert_true(h->n == N);
		if (what == 0)
			e[7].size -= 100; /* 100 bytes short, header intact */
		else if (what == 1)
			e[7].label = (e[7].label + 1) % NCLASS; /* another class */
		else if (what == 2)
			m[len - 3] ^= 0x55; /* a byte of the last part */
		else { /* checksum made right: the entry check refuses the label */
			e[7].label = NCLASS + 4;
			h->checksum = stk__index_file_checksum(m, len);
		}
		munmap(m, len);
		struct stk_loader *l;
		int rc;
		char *said = create_said(&l, o, &rc, err, sizeof(err));
		assert_int_equal(rc, 0);
		if (count_of(said, "is damaged") != 1)
			fail_msg("case %d: the rebuild is not said once: '%s'", what, said);
		assert_non_null(strstr(said, ".stoker-index"));
		free(said);
		struct epoch ep = run_epoch(l);
		assert_int_equal(ep.wrong, 0);
		assert_int_equal(ep.samples, N);
		assert_int_equal(ep.errors, 0);
		stk_loader_destroy(l);
		/* the cache was written again, whole: nothing more to say */
		said = create_said(&l, o, &rc, err, sizeof(err));
		assert_int_equal(rc, 0);
		assert_string_equal(said, "");
		free(said);
		stk_loader_destroy(l);
	}
	drop_dataset(d);
}

/* Class 3: a dangling symlink (or a file that cannot be stat'ed) in a class
 * folder follows the error policy like a file that disappears later: skip
 * leaves it out, named and counted; fail refuses, naming it.  The cache
 * remembers it; restoring the target makes the cache stale. */
static void test_dangling_symlink(void **state)
{
	(void)state;
	char *d = make_dataset();
	char link[PATH_MAX], target[PATH_MAX], err[PATH_MAX + 256];
	snprintf(link, sizeof(link), "%s/c1/050.jpg", d);
	snprintf(target, sizeof(target), "%s/elsewhere.bin", d); /* not a sample: no extension */
	assert_int_equal(symlink(target, link), 0);
	for (int round = 0; round < 2; round++) { /* built, then from the cache */
		struct stk_loader *l;
		int rc;
		char *said = create_said(&l, (struct stk_loader_opts){.path = d}, &rc, err, sizeof(err));
		assert_int_equal(rc, 0);
		assert_int_equal(count_of(said, "c1/050.jpg"), 1);
		free(said);
		assert_int_equal(stk_loader_num_samples(l), N);
		assert_int_equal(index_errors(l), 1);
		assert_non_null(strstr(stk_last_error(l), "c1/050.jpg"));
		struct epoch e = run_epoch(l);
		assert_int_equal(e.wrong, 0);
		assert_int_equal(e.samples, N);
		assert_int_equal(e.errors, 1); /* the index's, kept with the epoch's */
		stk_loader_stats_reset(l);
		assert_int_equal(index_errors(l), 1);
		stk_loader_destroy(l);
		/* fail: refused, naming it, built or from the skip run's cache */
		assert_int_equal(try_make(&l, (struct stk_loader_opts){
					      .path = d, .on_error = STK_ON_ERROR_FAIL}, err, sizeof(err)),
				 -ENOENT);
		assert_null(l);
		assert_non_null(strstr(err, "c1/050.jpg"));
	}
	/* the target appears: the sample is indexed (the folder's mtime did not
	 * change, the remembered record says it is stale) */
	uint8_t buf[MAXLEN];
	tu_write(target, buf, fill(buf, 1, 50));
	struct stk_loader *l = make((struct stk_loader_opts){.path = d, .on_error = STK_ON_ERROR_FAIL});
	assert_int_equal(stk_loader_num_samples(l), N + 1);
	assert_int_equal(index_errors(l), 0);
	stk_loader_destroy(l);
	drop_dataset(d);
}

/* Removes folder `name` under dirfd and all below it, by descriptors: a
 * tree deeper than PATH_MAX has paths nftw cannot build. */
static void rm_tree_at(int at, const char *name)
{
	int fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	assert_true(fd >= 0);
	DIR *dh = fdopendir(fd);
	assert_non_null(dh);
	struct dirent *de;
	while ((de = readdir(dh)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) {
			if (de->d_type == DT_DIR)
				rm_tree_at(dirfd(dh), de->d_name);
			else
				assert_int_equal(unlinkat(dirfd(dh), de->d_name, 0), 0);
		}
	closedir(dh);
	assert_int_equal(unlinkat(at, name, AT_REMOVEDIR), 0);
}

/* Class 13: what lies deeper than PATH_MAX is left out by skip like a folder
 * that cannot be opened: named once, counted in index_errors, the rest
 * indexed (built, then from the cache); fail refuses it.  Under c1, `levels`
 * folders of 200-byte names, and at the bottom the file `file`. */
static void deep_tree_left_out(int levels, const char *file)
{
	char *d = make_dataset();
	char p[PATH_MAX], err[PATH_MAX + 256], name[201];
	memset(name, 'n', 200);
	name[200] = 0;
	snprintf(p, sizeof(p), "%s/c1", d);
	int fd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(fd >= 0);
	for (int k = 0; k < levels; k++) {
		assert_int_equal(mkdirat(fd, name, 0755), 0);
		int next = openat(fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		assert_true(next >= 0);
		close(fd);
		fd = next;
	}
	int f = openat(fd, file, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	assert_true(f >= 0);
	assert_int_equal(write(f, "deep", 4), 4);
	close(f);
	close(fd);
	for (int round = 0; round < 2; round++) { /* built, then from the cache */
		struct stk_loader *l;
		int rc;
		char *said = create_said(&l, (struct stk_loader_opts){.path = d}, &rc, err, sizeof(err));
		if (rc)
			fail_msg("round %d: create under skip: %s", round, err);
		if (count_of(said, "path too long") != 1)
			fail_msg("round %d: not named once: '%s'", round, said);
		free(said);
		assert_int_equal(stk_loader_num_samples(l), N);
		assert_int_equal(index_errors(l), 1);
		struct epoch e = run_epoch(l);
		assert_int_equal(e.wrong, 0);
		assert_int_equal(e.samples, N);
		stk_loader_destroy(l);
		assert_int_equal(try_make(&l, (struct stk_loader_opts){
					      .path = d, .on_error = STK_ON_ERROR_FAIL}, err, sizeof(err)),
				 -ENAMETOOLONG);
		assert_null(l);
		assert_non_null(strstr(err, "path too long"));
	}
	int cfd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(cfd >= 0);
	rm_tree_at(cfd, name);
	close(cfd);
	drop_dataset(d);
}

/* A folder nested deeper than PATH_MAX (25 levels), a sample at its bottom. */
static void test_folder_deeper_than_path_max(void **state)
{
	(void)state;
	deep_tree_left_out(25, "deep.jpg");
}

/* A file whose own path reaches PATH_MAX, its folder's (20 levels) not. */
static void test_file_path_past_path_max(void **state)
{
	(void)state;
	char file[210];
	memset(file, 'f', 196);
	snprintf(file + 196, sizeof(file) - 196, ".jpg");
	deep_tree_left_out(20, file);
}

/* Class 2: files rewritten in place with another size while a loader runs
 * (their folder's mtime unchanged, so the cached index is used): one
 * larger, one smaller, each delivered with its new bytes in the next epoch
 * and every epoch after, never as a prefix or an error the skip policy
 * would drop from each epoch of a long run; the cache file is dropped, so
 * the next create indexes them again.  A file grown past what its batch
 * slot can take is an error by the policy, named. */
static void test_file_resized(void **state)
{
	(void)state;
	static const struct {
		enum stk_engine engine;
		uint32_t flags;
	} cases[] = {{STK_ENGINE_AUTO, 0}, {STK_ENGINE_PREAD, 0}, {STK_ENGINE_AUTO, STK_F_DIRECT},
		     {STK_ENGINE_PREAD, STK_F_DIRECT}};
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		for (int policy = STK_ON_ERROR_SKIP; policy <= STK_ON_ERROR_FAIL; policy++) {
			char *d = make_dataset();
			struct stk_loader_opts o = {.path = d, .batch_size = 8, .on_error = policy,
						    .engine = cases[c].engine,
						    .flags = cases[c].flags | STK_F_INDEX_BESIDE};
			stk_loader_destroy(make(o)); /* indexed and cached */
			struct stk_loader *l = make(o); /* from the cache */
			struct epoch e = run_epoch(l);
			assert_int_equal(e.samples, N);
			char big[PATH_MAX], small[PATH_MAX], cache[PATH_MAX];
			snprintf(big, sizeof(big), "%s/c2/007.jpg", d);
			snprintf(small, sizeof(small), "%s/c0/011.jpg", d);
			snprintf(cache, sizeof(cache), "%s/.stoker-index", d);
			uint8_t buf[2 * MAXLEN + 4096];
			size_t len = fill(buf, 2, 7);
			size_t more = c % 2 ? 1 : 4096 - len % 4096; /* one byte; up to a block edge */
			if (policy == STK_ON_ERROR_FAIL)
				more += MAXLEN; /* past every other file: after the slot's reads */
			memset(buf + len, 0xab, more);
			tu_write(big, buf, len + more);
			len = fill(buf, 0, 11);
			buf[0] ^= 0xff;
			tu_write(small, buf, len / 3);
			for (uint64_t epoch = 1; epoch < 3; epoch++) {
				assert_int_equal(stk_loader_start(l, epoch, 0), 0);
				e = run_epoch(l);
				if (e.rc || e.errors || e.wrong || e.samples != N)
					fail_msg("engine %d flags %u policy %d epoch %llu: rc %d, %llu "
						 "errors, %lld wrong, %lld samples: %s",
						 (int)cases[c].engine, cases[c].flags, policy,
						 (unsigned long long)epoch, e.rc,
						 (unsigned long long)e.errors, (long long)e.wrong,
						 (long long)e.samples, stk_last_error(l));
			}
			struct stat st;
			assert_int_equal(stat(cache, &st), -1); /* dropped: not trusted again */
			/* grown past the slot: named, counted, the rest delivered */
			if (policy == STK_ON_ERROR_SKIP) {
				uint8_t *huge = calloc(1, 4 << 20);
				assert_non_null(huge);
				tu_write(big, huge, 4 << 20);
				free(huge);
				assert_int_equal(stk_loader_start(l, 3, 0), 0);
				e = run_epoch(l);
				assert_int_equal(e.rc, 0);
				assert_int_equal(e.wrong, 0);
				assert_int_equal(e.samples, N - 1);
				assert_int_equal(e.errors, 1);
				assert_non_null(strstr(stk_last_error(l), "c2/007.jpg"));
				assert_non_null(strstr(stk_last_error(l), "larger"));
				len = fill(buf, 2, 7);
				tu_write(big, buf, len);
			}
			stk_loader_destroy(l);
			l = make(o); /* indexed again: every size the file's */
			e = run_epoch(l);
			assert_int_equal(e.rc, 0);
			assert_int_equal(e.wrong, 0);
			assert_int_equal(e.samples, N);
			assert_int_equal(e.errors, 0);
			stk_loader_destroy(l);
			drop_dataset(d);
		}
	}
}

/* Tar shards of dataset d's files (key c<c>_<i>, label c), `per` samples
 * each, written with Python's tarfile; returns the folder (free it). */
static char *make_shards(const char *d, int per)
{
	char *out = tu_mkdtemp();
	char cmd[3 * PATH_MAX];
	snprintf(cmd, sizeof(cmd),
		 "/usr/bin/python3 -c '\n"
		 "import io, os, sys, tarfile\n"
		 "d, out, per = sys.argv[1], sys.argv[2], int(sys.argv[3])\n"
		 "files = [(c, f) for c in sorted(os.listdir(d)) for f in sorted(os.listdir(d + \"/\" + c))]\n"
		 "for s in range(0, len(files), per):\n"
		 "  with tarfile.open(\"%%s/train-%%06d.tar\" %% (out, s // per), \"w\", format=tarfile.USTAR_FORMAT) as t:\n"
		 "    for c, f in files[s:s + per]:\n"
		 "      key = \"%%s_%%s\" %% (c, f.split(\".\")[0])\n"
		 "      for name, b in ((key + \".jpg\", open(d + \"/\" + c + \"/\" + f, \"rb\").read()),\n"
		 "                      (key + \".cls\", c[1:].encode())):\n"
		 "        ti = tarfile.TarInfo(name); ti.size = len(b); t.addfile(ti, io.BytesIO(b))\n"
		 "' '%s' '%s' %d",
		 d, out, per);
	assert_int_equal(system(cmd), 0);
	return out;
}

/* run_epoch over tar shards: every sample's bytes against its extent in
 * its shard now. */
static struct epoch run_shard_epoch(struct stk_loader *l)
{
	struct epoch e = {0};
	struct stk_batch *b;
	uint8_t want[MAXLEN];
	while ((e.rc = stk_loader_next(l, &b)) == 1) {
		e.batches++;
		for (uint32_t i = 0; i < b->count; i++) {
			char path[PATH_MAX];
			uint64_t at, n;
			e.samples++;
			assert_int_equal(stk_loader_sample_extent(l, b->indices[i], path, sizeof(path),
								  &at, &n), 0);
			int fd = open(path, O_RDONLY);
			if (n > sizeof(want) || b->sizes[i] != n ||
			    pread(fd, want, n, (off_t)at) != (ssize_t)n ||
			    memcmp(b->data + b->offsets[i], want, n))
				e.wrong++;
			close(fd);
		}
		stk_batch_release(l, b);
	}
	struct stk_stats st = {.size = sizeof(st)};
	assert_int_equal(stk_loader_stats(l, &st), 0);
	e.errors = st.errors;
	return e;
}

/* Skip's compaction of a batch where a file read again at a larger size went
 * after the slot's reads, with a failed sample before it: every other
 * sample's bytes still right, the one error counted. */
static void test_resized_and_skipped(void **state)
{
	(void)state;
	char *d = make_dataset();
	struct stk_loader_opts o = {.path = d, .batch_size = N, .slot_bytes = 4 << 20,
				    .flags = STK_F_NO_SHUFFLE | STK_F_NO_CACHE};
	struct stk_loader *l = make(o);
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/c0/000.jpg", d);
	assert_int_equal(unlink(p), 0);
	snprintf(p, sizeof(p), "%s/c0/001.jpg", d);
	uint8_t buf[2 * MAXLEN];
	size_t len = fill(buf, 0, 1);
	memset(buf + len, 0x5a, MAXLEN);
	tu_write(p, buf, len + MAXLEN);
	assert_int_equal(stk_loader_start(l, 1, 0), 0);
	struct epoch e = run_epoch(l);
	assert_int_equal(e.rc, 0);
	assert_int_equal(e.wrong, 0);
	assert_int_equal(e.samples, N - 1);
	assert_int_equal(e.errors, 1);
	stk_loader_destroy(l);
	drop_dataset(d);
}

/* Runs l's epoch `epoch` (over shards: run_shard_epoch) with stderr caught:
 * returns what it printed (free it). */
static char *epoch_said(struct stk_loader *l, uint64_t epoch, bool shards, struct epoch *e)
{
	FILE *tmp = tmpfile();
	assert_non_null(tmp);
	fflush(stderr);
	int saved = dup(2);
	assert_true(saved >= 0);
	assert_true(dup2(fileno(tmp), 2) >= 0);
	assert_int_equal(stk_loader_start(l, epoch, 0), 0);
	stk_loader_stats_reset(l);
	*e = shards ? run_shard_epoch(l) : run_epoch(l);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	off_t n = lseek(fileno(tmp), 0, SEEK_END);
	char *text = calloc(1, (size_t)n + 1);
	assert_non_null(text);
	assert_int_equal(pread(fileno(tmp), text, (size_t)n, 0), n);
	fclose(tmp);
	return text;
}

/* Class 2, shards: a shard rewritten in place with another size while a
 * loader runs cannot be read again (its members' offsets are the old
 * shard's): each member is an error by the policy, and the shard is named
 * once on stderr, not only counted, epoch after epoch. */
static void test_shard_resized_said(void **state)
{
	(void)state;
	char *d = make_dataset();
	char *sh = make_shards(d, 20);
	struct stk_loader *l;
	char err[PATH_MAX + 256], tar[PATH_MAX];
	struct stk_loader_opts o = {.size = sizeof(o), .path = sh, .batch_size = 8,
				    .flags = STK_F_NO_CACHE};
	assert_int_equal(stk_loader_create(&l, &o, err, sizeof(err)), 0);
	struct epoch e = run_shard_epoch(l);
	assert_int_equal(e.errors, 0);
	assert_int_equal(e.wrong, 0);
	assert_int_equal(e.samples, N);
	snprintf(tar, sizeof(tar), "%s/train-000001.tar", sh);
	int fd = open(tar, O_WRONLY | O_APPEND);
	assert_true(fd >= 0);
	uint8_t zero[10240] = {0};
	assert_int_equal(write(fd, zero, sizeof(zero)), (ssize_t)sizeof(zero));
	close(fd);
	for (uint64_t epoch = 1; epoch < 3; epoch++) {
		char *said = epoch_said(l, epoch, true, &e);
		assert_int_equal(e.rc, 0);
		assert_int_equal(e.wrong, 0);
		assert_int_equal(e.samples, N - 20);
		assert_int_equal(e.errors, 20);
		if (count_of(said, "train-000001.tar") != (epoch == 1))
			fail_msg("epoch %llu: the shard is not named once: '%s'",
				 (unsigned long long)epoch, said);
		if (epoch == 1 && !strstr(said, "changed since it was indexed"))
			fail_msg("the notice does not say why: '%s'", said);
		free(said);
	}
	stk_loader_destroy(l);
	tu_rmrf(sh);
	free(sh);
	drop_dataset(d);
}

/* Class 4: a damaged shard indexed under skip is remembered by the cache: a
 * later fail run still fails on it, naming the shard; skip runs count it. */
static void test_damaged_shard_remembered(void **state)
{
	(void)state;
	char *d = make_dataset();
	char *sh = make_shards(d, 20);
	char p[PATH_MAX], err[PATH_MAX + 256];
	snprintf(p, sizeof(p), "%s/train-000001.tar", sh);
	/* the 5th sample's header: its checksum no longer matches */
	int fd = open(p, O_RDWR);
	assert_true(fd >= 0);
	struct stat st;
	assert_int_equal(fstat(fd, &st), 0);
	off_t at = 0;
	for (int k = 0; k < 8; k++) { /* members: header + data padded to 512 */
		char h[512];
		assert_int_equal(pread(fd, h, 512, at), 512);
		unsigned long size = strtoul(h + 124, NULL, 8);
		at += 512 + (off_t)((size + 511) / 512 * 512);
	}
	assert_int_equal(pwrite(fd, "Z", 1, at + 10), 1);
	close(fd);
	struct stk_loader *l;
	for (int round = 0; round < 2; round++) {
		int rc;
		char *said = create_said(&l, (struct stk_loader_opts){.path = sh}, &rc, err,
					 sizeof(err));
		assert_int_equal(rc, 0);
		assert_int_equal(count_of(said, "train-000001.tar"), 1);
		free(said);
		assert_int_equal(stk_loader_num_samples(l), 20 + 4 + 20);
		assert_int_equal(index_errors(l), 1);
		stk_loader_destroy(l);
		assert_int_equal(try_make(&l, (struct stk_loader_opts){
					      .path = sh, .on_error = STK_ON_ERROR_FAIL}, err, sizeof(err)),
				 STK_ECORRUPT);
		assert_non_null(strstr(err, "train-000001.tar"));
		assert_non_null(strstr(err, "offset"));
	}
	/* the shard repaired (rewritten: new mtime): whole again, for both */
	tu_rmrf(sh);
	free(sh);
	sh = make_shards(d, 20);
	l = make((struct stk_loader_opts){.path = sh, .on_error = STK_ON_ERROR_FAIL});
	assert_int_equal(stk_loader_num_samples(l), N);
	stk_loader_destroy(l);
	tu_rmrf(sh);
	free(sh);
	drop_dataset(d);
}

/* Class 5: a reset of the counters next to a (re)start never loses an error.
 * The bad file is the first read of every epoch, so its error lands while the
 * caller is between start and reset; any order, any delay, many times. */
static void test_reset_keeps_errors(void **state)
{
	(void)state;
	char *d = make_dataset();
	for (int engine = STK_ENGINE_AUTO; engine <= STK_ENGINE_PREAD; engine++) {
		struct stk_loader *l = make((struct stk_loader_opts){
			.path = d, .batch_size = 4, .prefetch = 4, .queue_depth = 8,
			.flags = STK_F_NO_SHUFFLE, .engine = engine});
		char victim[PATH_MAX];
		sample_path(l, 0, victim, sizeof(victim));
		assert_int_equal(unlink(victim), 0); /* a failed read every epoch */
		for (int iter = 0; iter < 150; iter++) {
			struct timespec ts = {0, (iter % 7) * 20000L};
			if (iter % 2) {
				assert_int_equal(stk_loader_start(l, (uint64_t)iter, 0), 0);
				nanosleep(&ts, NULL);
				stk_loader_stats_reset(l);
			} else {
				stk_loader_stats_reset(l);
				nanosleep(&ts, NULL);
				assert_int_equal(stk_loader_start(l, (uint64_t)iter, 0), 0);
			}
			struct epoch e = run_epoch(l);
			assert_int_equal(e.rc, 0);
			assert_int_equal(e.wrong, 0);
			assert_int_equal(e.samples, N - 1);
			if (e.errors != 1)
				fail_msg("iteration %d (engine %d): %llu errors counted, 1 happened", iter,
					 engine, (unsigned long long)e.errors);
		}
		stk_loader_destroy(l);
		/* the next run indexes afresh: the file is whole again */
		uint8_t buf[MAXLEN];
		tu_write(victim, buf, fill(buf, 0, 0));
	}
	drop_dataset(d);
}

/* Class 8: options the index shows cannot work are refused at create, and an
 * option out of range is named. */
static void test_refused_options(void **state)
{
	(void)state;
	char *d = make_dataset();
	struct stk_loader *l = NULL;
	char err[PATH_MAX + 256];
	/* the largest file: c?/0??.jpg of MAXLEN - 1 bytes at most */
	uint64_t biggest = 0;
	int bc = 0, bi = 0;
	uint8_t buf[MAXLEN];
	for (int c = 0; c < NCLASS; c++)
		for (int i = 0; i < PER_CLASS; i++)
			if (fill(buf, c, i) > biggest) {
				biggest = fill(buf, c, i);
				bc = c;
				bi = i;
			}
	char want[64];
	snprintf(want, sizeof(want), "c%d/%03d.jpg", bc, bi);
	/* a whole file's read asks for one byte more (the growth probe) */
	assert_int_equal(try_make(&l, (struct stk_loader_opts){.path = d, .slot_bytes = biggest},
				  err, sizeof(err)), -ERANGE);
	assert_null(l);
	assert_non_null(strstr(err, "slot_bytes"));
	assert_non_null(strstr(err, want));
	l = make((struct stk_loader_opts){.path = d, .slot_bytes = biggest + 1});
	stk_loader_destroy(l);
	static const struct {
		struct stk_loader_opts o;
		const char *name;
	} bad[] = {
		{{.queue_depth = 1000000000}, "queue_depth"},
		{{.batch_size = 1u << 21}, "batch_size"},
		{{.prefetch = 5000}, "prefetch"},
		{{.io_threads = 1000}, "io_threads"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct stk_loader_opts o = bad[i].o;
		o.path = d;
		assert_int_equal(try_make(&l, o, err, sizeof(err)), -ERANGE);
		assert_non_null(strstr(err, bad[i].name));
	}
	drop_dataset(d);
}

/* One epoch under on_error replace: the indices in delivery order (room for
 * N + 8), the count; every batch full (batch_size, the last one the rest). */
static int64_t replaced_epoch(struct stk_loader *l, uint32_t bs, int64_t *got, uint64_t *repl)
{
	struct stk_batch *b;
	int64_t k = 0, batches = stk_loader_len(l);
	int rc;
	*repl = 0;
	uint8_t want[MAXLEN + 1];
	while ((rc = stk_loader_next(l, &b)) == 1) {
		uint32_t full = (int64_t)b->number + 1 < batches ? bs : (uint32_t)(N - (batches - 1) * bs);
		if (b->count != full)
			fail_msg("batch %llu has %u samples, not %u", (unsigned long long)b->number,
				 b->count, full);
		for (uint32_t i = 0; i < b->count; i++) {
			char path[PATH_MAX];
			uint64_t size;
			int64_t label;
			assert_int_equal(stk_loader_sample(l, b->indices[i], path, sizeof(path), &size,
							   &label), 0);
			assert_int_equal(b->labels[i], label);
			assert_int_equal(b->sizes[i], size);
			FILE *f = fopen(path, "rb");
			assert_non_null(f);
			size_t n = fread(want, 1, sizeof(want), f);
			fclose(f);
			assert_int_equal(n, size); /* a stand-in is a good sample */
			assert_memory_equal(b->data + b->offsets[i], want, n);
			got[k++] = b->indices[i];
		}
		*repl += b->replaced;
		stk_batch_release(l, b);
	}
	assert_int_equal(rc, 0);
	return k;
}

/* on_error replace: a bad sample's place gets a good stand-in drawn from
 * (seed, epoch, index): every batch full, the bad ones counted and named,
 * the same stand-ins whatever the engine, queue depth, prefetch or timing. */
static void test_replace(void **state)
{
	(void)state;
	char *d = make_dataset();
	static const struct {
		enum stk_engine engine;
		uint32_t qd, prefetch, bs;
	} shapes[] = {{STK_ENGINE_AUTO, 64, 4, 8}, {STK_ENGINE_PREAD, 3, 1, 8},
		      {STK_ENGINE_AUTO, 1, 2, 8}, {STK_ENGINE_AUTO, 16, 3, 1}};
	struct stk_loader *l[4];
	for (int k = 0; k < 4; k++)
		l[k] = make((struct stk_loader_opts){
			.path = d, .batch_size = shapes[k].bs, .prefetch = shapes[k].prefetch,
			.queue_depth = shapes[k].qd, .engine = shapes[k].engine, .seed = 5,
			.on_error = STK_ON_ERROR_REPLACE, .flags = STK_F_NO_CACHE});
	/* bad after indexing: three files gone (no folder re-read; a file of
	 * another size would be read at its size now) */
	char p[PATH_MAX];
	static const int bad[][2] = {{0, 3}, {1, 17}, {2, 9}};
	for (int k = 0; k < 3; k++) {
		snprintf(p, sizeof(p), "%s/c%d/%03d.jpg", d, bad[k][0], bad[k][1]);
		assert_int_equal(unlink(p), 0);
	}
	int64_t first[2][N + 8];
	for (int epoch = 0; epoch < 2; epoch++) {
		for (int k = 0; k < 4; k++) {
			int64_t got[N + 8];
			uint64_t repl;
			assert_int_equal(stk_loader_start(l[k], (uint64_t)epoch, 0), 0);
			stk_loader_stats_reset(l[k]);
			assert_int_equal(replaced_epoch(l[k], shapes[k].bs, got, &repl), N);
			struct stk_stats st = {.size = sizeof(st)};
			stk_loader_stats(l[k], &st);
			assert_true(st.errors >= 3); /* a stand-in may be a bad one too: counted */
			assert_int_equal(st.replaced, 3);
			assert_int_equal(repl, 3);
			assert_int_equal(st.samples, N);
			assert_non_null(strstr(stk_last_error(l[k]), "stand-in"));
			if (k == 0)
				memcpy(first[epoch], got, sizeof(got));
			else if (memcmp(first[epoch], got, N * sizeof(int64_t)))
				fail_msg("epoch %d: shape %d chose other stand-ins than shape 0", epoch, k);
		}
	}
	assert_true(memcmp(first[0], first[1], N * sizeof(int64_t))); /* epochs differ */
	for (int k = 0; k < 4; k++)
		stk_loader_destroy(l[k]);

	/* tar shards: a member whose header no longer matches (the shard changed
	 * since indexing) gets a stand-in too, read alone after the batch.  The
	 * shard's mtime is put back: its header alone tells (a changed mtime
	 * would refuse every member of the shard) */
	drop_dataset(d);
	d = make_dataset();
	char *sh = make_shards(d, 20);
	struct stk_loader *t = make((struct stk_loader_opts){
		.path = sh, .batch_size = 8, .seed = 5, .on_error = STK_ON_ERROR_REPLACE,
		.flags = STK_F_NO_CACHE});
	char tar[PATH_MAX];
	uint64_t at, size;
	assert_int_equal(stk_loader_sample_extent(t, 25, tar, sizeof(tar), &at, &size), 0);
	int fd = open(tar, O_RDWR);
	assert_true(fd >= 0);
	struct stat was;
	assert_int_equal(fstat(fd, &was), 0);
	assert_int_equal(pwrite(fd, "Q", 1, (off_t)at - 512), 1); /* its header's name */
	assert_int_equal(futimens(fd, (struct timespec[2]){was.st_atim, was.st_mtim}), 0);
	close(fd);
	for (int epoch = 0; epoch < 2; epoch++) {
		assert_int_equal(stk_loader_start(t, (uint64_t)epoch, 0), 0);
		stk_loader_stats_reset(t);
		struct stk_batch *b;
		int rc;
		int64_t k = 0;
		uint8_t want[MAXLEN];
		while ((rc = stk_loader_next(t, &b)) == 1) {
			assert_int_equal(b->count, (int64_t)b->number + 1 < stk_loader_len(t) ? 8 : N % 8);
			for (uint32_t i = 0; i < b->count; i++, k++) {
				assert_true(b->indices[i] != 25);
				char path[PATH_MAX];
				uint64_t o, n;
				assert_int_equal(stk_loader_sample_extent(t, b->indices[i], path, sizeof(path),
									  &o, &n), 0);
				assert_int_equal(b->sizes[i], n);
				int f = open(path, O_RDONLY);
				assert_int_equal(pread(f, want, n, (off_t)o), (ssize_t)n);
				close(f);
				assert_memory_equal(b->data + b->offsets[i], want, n);
			}
			stk_batch_release(t, b);
		}
		assert_int_equal(rc, 0);
		assert_int_equal(k, N);
		struct stk_stats st = {.size = sizeof(st)};
		stk_loader_stats(t, &st);
		assert_int_equal(st.replaced, 1);
		assert_true(st.errors >= 1);
	}
	stk_loader_destroy(t);
	tu_rmrf(sh);
	free(sh);
	drop_dataset(d);

	/* nothing good to stand in: the epoch ends with the error, named */
	d = make_dataset();
	struct stk_loader *all = make((struct stk_loader_opts){
		.path = d, .batch_size = 4, .on_error = STK_ON_ERROR_REPLACE, .flags = STK_F_NO_CACHE});
	for (int c = 0; c < NCLASS; c++)
		for (int i = 0; i < PER_CLASS; i++) {
			snprintf(p, sizeof(p), "%s/c%d/%03d.jpg", d, c, i);
			assert_int_equal(unlink(p), 0);
		}
	/* the first batches were read at create: start over on the missing files */
	assert_int_equal(stk_loader_start(all, 0, 0), 0);
	struct stk_batch *b;
	assert_int_equal(stk_loader_next(all, &b), -ENOENT);
	if (!strstr(stk_last_error(all), "no stand-in"))
		fail_msg("the error does not say no stand-in was found: %s", stk_last_error(all));
	stk_loader_destroy(all);
	drop_dataset(d);
}

/* A dataset of n files (class c0) under a new folder; the files `gone`
 * (a bit mask) removed after create, the loader started over on them. */
static struct stk_loader *small_set(char **d, int n, unsigned gone, uint32_t bs, uint64_t seed)
{
	char p[PATH_MAX];
	*d = tu_mkdtemp();
	tu_tree(*d, 1, NULL, "c%d", n, "%03d.jpg", MAXLEN, fill);
	struct stk_loader *l = make((struct stk_loader_opts){
		.path = *d, .batch_size = bs, .seed = seed, .on_error = STK_ON_ERROR_REPLACE,
		.flags = STK_F_NO_CACHE | STK_F_NO_SHUFFLE});
	for (int i = 0; i < n; i++)
		if (i < 32 && (gone >> i & 1)) {
			snprintf(p, sizeof(p), "%s/c0/%03d.jpg", *d, i);
			assert_int_equal(unlink(p), 0);
		}
	assert_int_equal(stk_loader_start(l, 0, 0), 0); /* (create read the first batches) */
	stk_loader_stats_reset(l);
	return l;
}

/* A stand-in is never the failed sample itself, nor a sample its batch has
 * already found bad: each bad sample is read (and counted) once, and where
 * no other sample is left the epoch ends with the error at once, never
 * reading the same bad file again (before, a place drew its own sample with
 * probability 1/n a draw, read it, failed again, up to 16 times). */
static void test_replace_not_itself(void **state)
{
	(void)state;
	char *d;
	struct stk_batch *b;
	for (uint64_t seed = 0; seed < 16; seed++) { /* two samples, one gone */
		struct stk_loader *l = small_set(&d, 2, 1u << 1, 2, seed);
		assert_int_equal(stk_loader_next(l, &b), 1);
		assert_int_equal(b->count, 2);
		assert_int_equal(b->indices[0], 0);
		assert_int_equal(b->indices[1], 0); /* the only other sample stands in */
		assert_int_equal(b->replaced, 1);
		stk_batch_release(l, b);
		assert_int_equal(stk_loader_next(l, &b), 0);
		struct stk_stats st = {.size = sizeof(st)};
		stk_loader_stats(l, &st);
		if (st.errors != 1)
			fail_msg("seed %llu: %llu errors for one bad file (its stand-in was itself)",
				 (unsigned long long)seed, (unsigned long long)st.errors);
		stk_loader_destroy(l);
		drop_dataset(d);
	}
	static const struct {
		int n;
		unsigned gone;
		uint32_t bs;
		uint64_t errors;
	} none[] = {{1, 1, 1, 1}, {2, 3, 2, 2}, {3, 7, 3, 3}};
	for (int k = 0; k < 3; k++) { /* nothing else to stand in: the error, at once */
		struct stk_loader *l = small_set(&d, none[k].n, none[k].gone, none[k].bs, 7);
		assert_int_equal(stk_loader_next(l, &b), -ENOENT);
		const char *e = stk_last_error(l);
		if (!strstr(e, "no stand-in") || !strstr(e, "000.jpg"))
			fail_msg("the error does not name the file and say no stand-in: %s", e);
		struct stk_stats st = {.size = sizeof(st)};
		stk_loader_stats(l, &st);
		if (st.errors != none[k].errors)
			fail_msg("%d bad of %d: %llu errors (bad files read again)", none[k].n,
				 none[k].n, (unsigned long long)st.errors);
		stk_loader_destroy(l);
		drop_dataset(d);
	}
	/* the same seed, the same stand-ins: a resume at batch 3 gets the
	 * full epoch's batches from there */
	struct stk_loader *l = small_set(&d, 40, 1u << 13 | 1u << 14 | 1u << 29, 4, 3);
	int64_t all[40], k = 0;
	int rc;
	while ((rc = stk_loader_next(l, &b)) == 1) {
		for (uint32_t i = 0; i < b->count; i++)
			all[k++] = b->indices[i];
		stk_batch_release(l, b);
	}
	assert_int_equal(rc, 0);
	assert_int_equal(k, 40);
	for (int i = 0; i < 40; i++)
		assert_true(all[i] != 13 && all[i] != 14 && all[i] != 29);
	assert_int_equal(stk_loader_start(l, 0, 3), 0);
	for (k = 12; (rc = stk_loader_next(l, &b)) == 1; stk_batch_release(l, b))
		for (uint32_t i = 0; i < b->count; i++)
			assert_int_equal(b->indices[i], all[k++]);
	assert_int_equal(rc, 0);
	assert_int_equal(k, 40);
	stk_loader_destroy(l);
	drop_dataset(d);
}

/* The error that ended the epoch is what stk_last_error names afterwards,
 * not a later batch's sample whose read landed after it (under replace the
 * other batches' stand-in reads keep landing, and failing, after it). */
static void test_error_stays(void **state)
{
	(void)state;
	const enum stk_on_error policies[] = {STK_ON_ERROR_FAIL, STK_ON_ERROR_REPLACE};
	for (int k = 0; k < 2; k++) {
		char *d = make_dataset();
		struct stk_loader *l = make((struct stk_loader_opts){
			.path = d, .batch_size = 2, .prefetch = 8, .on_error = policies[k],
			.flags = STK_F_NO_CACHE | STK_F_NO_SHUFFLE});
		char first[PATH_MAX] = "";
		int64_t n = stk_loader_num_samples(l);
		for (int64_t i = 0; i < n; i++) {
			char p[PATH_MAX];
			uint64_t size;
			int64_t label;
			assert_int_equal(stk_loader_sample(l, i, p, sizeof(p), &size, &label), 0);
			if (size == 0)
				continue;
			if (!first[0] && i < 2)
				snprintf(first, sizeof(first), "%s", p); /* batch 0's first damaged sample */
			assert_int_equal(unlink(p), 0);
		}
		assert_true(first[0]);
		assert_int_equal(stk_loader_start(l, 0, 0), 0); /* read again, gone */
		struct stk_batch *b;
		assert_int_equal(stk_loader_next(l, &b), -ENOENT);
		struct timespec pause = {0, 100000000}; /* the other batches' reads land meanwhile */
		nanosleep(&pause, NULL);
		const char *e = stk_last_error(l);
		if (!strstr(e, first) ||
		    (policies[k] == STK_ON_ERROR_REPLACE && !strstr(e, "no stand-in")))
			fail_msg("stk_last_error says \"%s\", not batch 0's %s", e, first);
		stk_loader_destroy(l);
		drop_dataset(d);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_index_cache_integrity),
		cmocka_unit_test(test_dangling_symlink),
		cmocka_unit_test(test_file_resized),
		cmocka_unit_test(test_shard_resized_said),
		cmocka_unit_test(test_resized_and_skipped),
		cmocka_unit_test(test_folder_deeper_than_path_max),
		cmocka_unit_test(test_file_path_past_path_max),
		cmocka_unit_test(test_damaged_shard_remembered),
		cmocka_unit_test(test_reset_keeps_errors),
		cmocka_unit_test(test_replace),
		cmocka_unit_test(test_replace_not_itself),
		cmocka_unit_test(test_error_stays),
		cmocka_unit_test(test_refused_options),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
