/* test_tar.c — the tar member iterator against archives written by GNU tar
 * and Python's tarfile (names, offsets and sizes as they report them, bytes
 * at data_off equal to the files'), hand-made headers for the rarer
 * encodings, a corrupt corpus, and a replay of the fuzz corpus. */
#include "testutil.h"

#include <errno.h>
#include <sys/mman.h>

#include "base/internal.h"
#include "dataset/tar.h"

#define LLVMFuzzerTestOneInput fuzz_tar_types_one
#include "fuzz/fuzz_tar_types.c"
#undef LLVMFuzzerTestOneInput

#define PY "/usr/bin/python3"

/* make FMT OUT SRC: an archive of SRC's entries in Python's format FMT;
 * list ARCH OUT: "header_off data_off size name" per regular file. */
static const char helper_py[] =
	"import os, sys, tarfile\n"
	"if sys.argv[1] == 'make':\n"
	"    fmt = {'pax': tarfile.PAX_FORMAT, 'gnu': tarfile.GNU_FORMAT,\n"
	"           'ustar': tarfile.USTAR_FORMAT}[sys.argv[2]]\n"
	"    kw = {'pax_headers': {'comment': 'stoker'}} if sys.argv[2] == 'pax' else {}\n"
	"    with tarfile.open(sys.argv[3], 'w', format=fmt, **kw) as t:\n"
	"        for n in sorted(os.listdir(sys.argv[4])):\n"
	"            t.add(os.path.join(sys.argv[4], n), arcname=n)\n"
	"else:\n"
	"    with tarfile.open(sys.argv[2]) as t, open(sys.argv[3], 'w') as out:\n"
	"        for m in t:\n"
	"            if m.isreg():\n"
	"                out.write('%d %d %d %s\\n' % (m.offset, m.offset_data, m.size, m.name))\n";

/* 150 characters, split so that plain ustar can store it (prefix + name). */
#define LONG_DIR "dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd/" \
		 "eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee"
#define LONG_PATH LONG_DIR "/ffffffffffffffffffffff.txt"

struct fix {
	char *dir, src[4200], v7src[4200];
};

/* The source tree: files of awkward sizes (0, 1 block + 1), a directory, a
 * symlink, a hard link and a 150-character path. */
static void make_tree(const char *src, bool with_long)
{
	char p[8192];
	unsigned char big[1000];
	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (unsigned char)(i * 7 + 3);
	tu_mkdir(src);
	snprintf(p, sizeof(p), "%s/a.txt", src);
	tu_write(p, "hello\n", 6);
	snprintf(p, sizeof(p), "%s/b.bin", src);
	tu_write(p, big, sizeof(big));
	snprintf(p, sizeof(p), "%s/empty", src);
	tu_write(p, "", 0);
	snprintf(p, sizeof(p), "%s/sub", src);
	tu_mkdir(p);
	snprintf(p, sizeof(p), "%s/sub/c.dat", src);
	tu_write(p, big, 513);
	snprintf(p, sizeof(p), "%s/link", src);
	assert_int_equal(symlink("a.txt", p), 0);
	char a[8192];
	snprintf(a, sizeof(a), "%s/a.txt", src);
	snprintf(p, sizeof(p), "%s/hard", src);
	assert_int_equal(link(a, p), 0);
	if (with_long) {
		snprintf(p, sizeof(p), "%s/%s", src, LONG_DIR);
		tu_sh("mkdir -p '%s'", p);
		snprintf(p, sizeof(p), "%s/%s", src, LONG_PATH);
		tu_write(p, big, 700);
	}
}

static int setup(void **state)
{
	struct fix *f = calloc(1, sizeof(*f));
	assert_non_null(f);
	f->dir = tu_mkdtemp();
	snprintf(f->src, sizeof(f->src), "%s/src", f->dir);
	snprintf(f->v7src, sizeof(f->v7src), "%s/v7src", f->dir);
	make_tree(f->src, true);
	make_tree(f->v7src, false);
	char p[4200];
	snprintf(p, sizeof(p), "%s/helper.py", f->dir);
	tu_write(p, helper_py, strlen(helper_py));
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fix *f = *state;
	tu_rmrf(f->dir);
	free(f->dir);
	free(f);
	return 0;
}

static int open_iter(const char *path, struct stk__tar_iter **it, int *fd)
{
	*fd = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(*fd >= 0);
	struct stat st;
	assert_int_equal(fstat(*fd, &st), 0);
	assert_int_equal(stk__tar_open(it, *fd, (uint64_t)st.st_size), 0);
	return 0;
}

/* Iterates arch and checks it against Python's listing, GNU tar's verbose
 * listing (regular files: size and name) and the source files' bytes; the
 * tree's two links come as links to a.txt. */
static void check_archive(struct fix *f, const char *arch, const char *src, int nreg)
{
	char lst[4300], tv[4300];
	snprintf(lst, sizeof(lst), "%s.py", arch);
	snprintf(tv, sizeof(tv), "%s.tv", arch);
	tu_sh(PY " %s/helper.py list '%s' '%s'", f->dir, arch, lst);
	tu_sh("tar -tvf '%s' | awk '/^-/ {print $3, $6}' > '%s'", arch, tv);
	FILE *pl = fopen(lst, "r"), *tl = fopen(tv, "r");
	assert_non_null(pl);
	assert_non_null(tl);

	struct stk__tar_iter *it;
	int fd, r, n = 0;
	open_iter(arch, &it, &fd);
	struct stk__tar_member m;
	char err[256] = "", line[8192], tline[8192];
	int links = 0;
	while ((r = stk__tar_next(it, &m, err, sizeof(err))) == 1) {
		unsigned long long ho, dof, sz, tsz;
		if (m.kind != STK__TAR_FILE) {
			bool hard = !strcmp(m.name, "hard");
			assert_true(hard || !strcmp(m.name, "link"));
			assert_int_equal(m.kind, hard ? STK__TAR_HARDLINK : STK__TAR_SYMLINK);
			assert_string_equal(m.link, "a.txt");
			links++;
			continue;
		}
		char name[8192], tname[8192];
		assert_non_null(fgets(line, sizeof(line), pl));
		assert_int_equal(sscanf(line, "%llu %llu %llu %8191[^\n]", &ho, &dof, &sz, name), 4);
		assert_string_equal(m.name, name);
		assert_int_equal(m.header_off, ho);
		assert_int_equal(m.data_off, dof);
		assert_int_equal(m.size, sz);
		assert_non_null(fgets(tline, sizeof(tline), tl));
		assert_int_equal(sscanf(tline, "%llu %8191s", &tsz, tname), 2);
		assert_string_equal(m.name, tname);
		assert_int_equal(m.size, tsz);

		char p[16384];
		snprintf(p, sizeof(p), "%s/%s", src, m.name);
		int sfd = open(p, O_RDONLY);
		assert_true(sfd >= 0);
		char *want = malloc(m.size + 1), *got = malloc(m.size + 1);
		assert_true(want && got);
		assert_int_equal(read(sfd, want, m.size + 1), (ssize_t)m.size);
		assert_int_equal(pread(fd, got, m.size, (off_t)m.data_off), (ssize_t)m.size);
		assert_memory_equal(want, got, m.size);
		free(want);
		free(got);
		close(sfd);
		n++;
	}
	if (r)
		fail_msg("%s: %d %s", arch, r, err);
	assert_null(fgets(line, sizeof(line), pl));
	assert_int_equal(n, nreg);
	assert_int_equal(links, 2);
	assert_int_equal(stk__tar_next(it, &m, err, sizeof(err)), 0); /* the end stays the end */
	stk__tar_close(it);
	close(fd);
	fclose(pl);
	fclose(tl);
}

static void test_gnu_tar(void **state)
{
	struct fix *f = *state;
	static const char *const fmts[] = {"gnu", "oldgnu", "ustar", "pax", "posix"};
	if (system("tar --version 2>/dev/null | grep -q 'GNU tar'")) {
		print_message("skipped: GNU tar is not installed\n");
		skip();
	}
	char arch[4300];
	for (size_t i = 0; i < STK_ARRAY_SIZE(fmts); i++) {
		snprintf(arch, sizeof(arch), "%s/tar-%s.tar", f->dir, fmts[i]);
		tu_sh("cd '%s' && tar --format=%s -cf '%s' a.txt b.bin empty hard link sub dddd*",
		   f->src, fmts[i], arch);
		check_archive(f, arch, f->src, 5);
	}
	/* v7: no magic, names of 99 bytes at most. */
	snprintf(arch, sizeof(arch), "%s/tar-v7.tar", f->dir);
	tu_sh("cd '%s' && tar --format=v7 -cf '%s' a.txt b.bin empty hard link sub", f->v7src, arch);
	check_archive(f, arch, f->v7src, 4);
}

static void test_python_tarfile(void **state)
{
	struct fix *f = *state;
	static const char *const fmts[] = {"pax", "gnu", "ustar"};
	if (access(PY, X_OK)) {
		print_message("skipped: no " PY "\n");
		skip();
	}
	char arch[4300];
	for (size_t i = 0; i < STK_ARRAY_SIZE(fmts); i++) {
		snprintf(arch, sizeof(arch), "%s/py-%s.tar", f->dir, fmts[i]);
		tu_sh(PY " %s/helper.py make %s '%s' '%s'", f->dir, fmts[i], arch, f->src);
		check_archive(f, arch, f->src, 5);
	}
}

/* --- hand-made archives ------------------------------------------------- */

struct buf {
	unsigned char *p;
	size_t len;
};

static void put(struct buf *b, const void *data, size_t len)
{
	b->p = realloc(b->p, b->len + len + 512);
	assert_non_null(b->p);
	memcpy(b->p + b->len, data, len);
	b->len += len;
	size_t pad = (512 - b->len % 512) % 512;
	memset(b->p + b->len, 0, pad);
	b->len += pad;
}

/* A header; gnu selects the GNU magic; sum_signed writes the signed sum. */
static void hdr(struct buf *b, const char *name, char type, uint64_t size, bool gnu,
		bool sum_signed)
{
	unsigned char h[512] = {0};
	memcpy(h, name, strnlen(name, 100));
	memcpy(h + 100, "0000644", 8);
	memcpy(h + 108, "0000000", 8);
	memcpy(h + 116, "0000000", 8);
	char sz[32];
	snprintf(sz, sizeof(sz), "%011llo", (unsigned long long)(size & 077777777777ull));
	memcpy(h + 124, sz, 12);
	memcpy(h + 136, "00000000000", 12);
	h[156] = (unsigned char)type;
	memcpy(h + 257, gnu ? "ustar  " : "ustar\00000", 8);
	memset(h + 148, ' ', 8);
	int sum = 0;
	for (int i = 0; i < 512; i++)
		sum += sum_signed ? (signed char)h[i] : h[i];
	snprintf((char *)h + 148, 8, "%06o", sum);
	put(b, h, 512);
}

static void fix_sum(unsigned char *h)
{
	memset(h + 148, ' ', 8);
	unsigned sum = 0;
	for (int i = 0; i < 512; i++)
		sum += h[i];
	snprintf((char *)h + 148, 8, "%06o", sum);
}

/* Iterates b: the members' count in *n, the last return; err filled. */
static int run_buf(const struct buf *b, int *n, char *err, size_t errlen, const char *first)
{
	int fd = memfd_create("tar", MFD_CLOEXEC);
	assert_true(fd >= 0);
	if (b->len)
		assert_int_equal(write(fd, b->p, b->len), (ssize_t)b->len);
	struct stk__tar_iter *it;
	assert_int_equal(stk__tar_open(&it, fd, b->len), 0);
	struct stk__tar_member m;
	int r;
	*n = 0;
	err[0] = 0;
	while ((r = stk__tar_next(it, &m, err, errlen)) == 1) {
		assert_true(m.data_off + m.size <= b->len);
		if (first && !*n)
			assert_string_equal(m.name, first);
		(*n)++;
	}
	stk__tar_close(it);
	close(fd);
	return r;
}

static void expect(const struct buf *b, int rc, int members, const char *msg)
{
	int n;
	char err[256];
	assert_int_equal(run_buf(b, &n, err, sizeof(err), NULL), rc);
	assert_int_equal(n, members);
	if (msg && !strstr(err, msg))
		fail_msg("error '%s' lacks '%s'", err, msg);
}

static void test_crafted(void **state)
{
	(void)state;
	unsigned char zero[1024] = {0};
	struct buf b = {0};
	int n;
	char err[256];

	/* GNU base-256 size, signed checksum, a single zero block as the end. */
	hdr(&b, "x.bin", '0', 5, true, false);
	b.p[124] = 0x80;
	memset(b.p + 125, 0, 10);
	b.p[135] = 5;
	fix_sum(b.p);
	put(&b, "12345", 5);
	hdr(&b, "caf\xe9.txt", '0', 3, false, true);
	put(&b, "abc", 3);
	put(&b, zero, 512);
	assert_int_equal(run_buf(&b, &n, err, sizeof(err), "x.bin"), 0);
	assert_int_equal(n, 2);

	/* Clean EOF at a block boundary; v7 directory (trailing slash); 'g',
	 * 'K' and 'L' headers; PAX size and path overriding the header's. */
	b.len = 0;
	hdr(&b, "dir/", 0, 0, false, false);
	static const char g[] = "15 comment=abc\n";
	hdr(&b, "pax_global_header", 'g', strlen(g), false, false);
	put(&b, g, strlen(g));
	hdr(&b, "././@LongLink", 'K', 10, true, false);
	put(&b, "target123", 10);
	hdr(&b, "././@LongLink", 'L', 9, true, false);
	put(&b, "long/name", 9);
	hdr(&b, "short", '0', 2, true, false);
	put(&b, "hi", 2);
	static const char x[] = "16 path=p/q.bin\n10 size=4\n";
	hdr(&b, "PaxHeader", 'x', strlen(x), false, false);
	put(&b, x, strlen(x));
	hdr(&b, "ignored", '0', 0, false, false);
	put(&b, "data", 4);
	assert_int_equal(run_buf(&b, &n, err, sizeof(err), "long/name"), 0);
	assert_int_equal(n, 2);

	/* The offsets it reports, on a small known archive. */
	int fd = memfd_create("tar", MFD_CLOEXEC);
	assert_int_equal(write(fd, b.p, b.len), (ssize_t)b.len);
	struct stk__tar_iter *it;
	struct stk__tar_member m;
	assert_int_equal(stk__tar_open(&it, fd, b.len), 0);
	assert_int_equal(stk__tar_next(it, &m, err, sizeof(err)), 1);
	assert_int_equal(m.header_off, 1536); /* the 'K' block, after dir/ and 'g' */
	assert_int_equal(m.data_off, 4096);
	assert_int_equal(stk__tar_next(it, &m, err, sizeof(err)), 1);
	assert_string_equal(m.name, "p/q.bin");
	assert_int_equal(m.header_off, 4608);
	assert_int_equal(m.size, 4);
	assert_int_equal(stk__tar_next(it, &m, err, sizeof(err)), 0);
	stk__tar_close(it);
	close(fd);
	free(b.p);
}

static void test_corrupt(void **state)
{
	(void)state;
	struct buf b = {0};
	unsigned char zero[1024] = {0};

	expect(&b, 0, 0, NULL); /* an empty file is an empty archive */

	hdr(&b, "a", '0', 600, false, false);
	put(&b, zero, 600);
	hdr(&b, "b", '0', 10, false, false);
	put(&b, "0123456789", 10);
	put(&b, zero, 1024);
	expect(&b, 0, 2, NULL);
	/* Flipped checksum in the second header. */
	b.p[1536] ^= 1;
	expect(&b, STK_ECORRUPT, 1, "offset 1536: header checksum mismatch");
	b.p[1536] ^= 1;
	/* Truncated: mid-header, mid-data, inside padding, in the first header. */
	size_t full = b.len;
	b.len = 1536 + 100;
	expect(&b, STK_ECORRUPT, 1, "offset 1536: truncated header (100 bytes left)");
	b.len = 1536 + 512 + 5;
	expect(&b, STK_ECORRUPT, 1, "offset 1536: member data runs past the end of the file "
				    "(size 10, file 2053 bytes)");
	b.len = 1024 + 100;
	expect(&b, STK_ECORRUPT, 1, "offset 1124: archive truncated inside a member's padding");
	b.len = 100;
	expect(&b, STK_ECORRUPT, 0, "offset 0: not a tar file");
	b.len = full;

	/* Size field past EOF; size not a number. */
	b.len = 0;
	hdr(&b, "big", '0', 4096, false, false);
	put(&b, "x", 1);
	expect(&b, STK_ECORRUPT, 0,
	       "offset 0: member data runs past the end of the file (size 4096, file 1024 bytes)");
	memcpy(b.p + 124, "00000x00000", 11);
	fix_sum(b.p);
	expect(&b, STK_ECORRUPT, 0, "offset 0: bad size field");

	/* Random bytes; something shaped like a JPEG. */
	b.len = 0;
	unsigned char junk[4096];
	uint64_t s = 42;
	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = (unsigned char)(stk__mix64(s++) >> 56);
	put(&b, junk, sizeof(junk));
	expect(&b, STK_ECORRUPT, 0, "offset 0: not a tar file");
	memcpy(b.p, "\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00", 20);
	expect(&b, STK_ECORRUPT, 0, "offset 0: not a tar file");

	/* PAX records that lie about their length, or are not numbers. */
	static const char *const bad_pax[] = {"99 path=a\n", "5 path=abc\n", "x path=a\n",
					      "10 patha\n\n", "11 size=-1\n", "9 path=\n\0x"};
	for (size_t i = 0; i < STK_ARRAY_SIZE(bad_pax); i++) {
		b.len = 0;
		size_t l = strlen(bad_pax[i]) + (i == 5 ? 2 : 0);
		hdr(&b, "PaxHeader", 'x', l, false, false);
		put(&b, bad_pax[i], l);
		hdr(&b, "a", '0', 0, false, false);
		put(&b, zero, 1024);
		expect(&b, STK_ECORRUPT, 0, "offset 512: ");
	}
	/* An extended header and then the end. */
	b.len = 0;
	hdr(&b, "././@LongLink", 'L', 2, true, false);
	put(&b, "a", 2);
	expect(&b, STK_ECORRUPT, 0, "offset 1024: archive ends after an extended header");

	/* A 10 MiB long name: refused whether or not the file holds it. */
	b.len = 0;
	hdr(&b, "././@LongLink", 'L', 10u << 20, true, false);
	expect(&b, STK_ECORRUPT, 0, "offset 0: member data runs past");
	int fd = memfd_create("tar", MFD_CLOEXEC);
	assert_int_equal(write(fd, b.p, 512), 512);
	assert_int_equal(ftruncate(fd, 512 + (10 << 20) + 1024), 0);
	struct stk__tar_iter *it;
	struct stk__tar_member m;
	char err[256];
	assert_int_equal(stk__tar_open(&it, fd, 512 + (10 << 20) + 1024), 0);
	assert_int_equal(stk__tar_next(it, &m, err, sizeof(err)), STK_ECORRUPT);
	assert_string_equal(err, "offset 0: long name header of 10485760 bytes (more than 65536)");
	assert_int_equal(stk__tar_next(it, &m, err, sizeof(err)), STK_ECORRUPT); /* stays failed */
	stk__tar_close(it);
	close(fd);
	free(b.p);
}

/* Cut a real archive everywhere: each cut gives the end or STK_ECORRUPT
 * naming an offset, never a member past the cut (run_buf checks). */
static void test_truncations(void **state)
{
	struct fix *f = *state;
	char arch[4300];
	if (system("tar --version 2>/dev/null | grep -q 'GNU tar'"))
		skip();
	snprintf(arch, sizeof(arch), "%s/cut.tar", f->dir);
	tu_sh("cd '%s' && tar --format=pax -cf '%s' a.txt b.bin empty hard link sub dddd*", f->src,
	   arch);
	int fd = open(arch, O_RDONLY);
	assert_true(fd >= 0);
	struct stat st;
	assert_int_equal(fstat(fd, &st), 0);
	struct buf b = {malloc((size_t)st.st_size), (size_t)st.st_size};
	assert_non_null(b.p);
	assert_int_equal(read(fd, b.p, b.len), (ssize_t)b.len);
	close(fd);
	size_t full = b.len;
	for (size_t cut = 0; cut < full; cut += cut < 8192 ? 37 : 512) {
		int n;
		char err[256];
		b.len = cut;
		int r = run_buf(&b, &n, err, sizeof(err), NULL);
		assert_true(r == 0 || r == STK_ECORRUPT);
		if (r && strncmp(err, "offset ", 7))
			fail_msg("cut %zu: '%s'", cut, err);
		assert_true(n <= 7); /* 5 files, 2 links */
	}
	free(b.p);
}

/* Replays tests/fuzz/tar_corpus: defined returns, no crash (ASan builds). */
static void corpus_one(const char *path, const uint8_t *buf, size_t n, void *arg)
{
	(void)buf;
	(void)n;
	(void)arg;
	struct stk__tar_iter *it;
	int fd;
	open_iter(path, &it, &fd);
	struct stk__tar_member m;
	char err[256];
	int r;
	while ((r = stk__tar_next(it, &m, err, sizeof(err))) == 1)
		;
	if (r != 0 && r != STK_ECORRUPT)
		fail_msg("%s: returned %d", path, r);
	stk__tar_close(it);
	close(fd);
}

static void test_corpus(void **state)
{
	(void)state;
	int files = tu_replay("tests/fuzz/tar_corpus", corpus_one, NULL);
	if (files < 0)
		skip(); /* run from another folder than the repository's */
	assert_true(files >= 10);
}

/* Replays tests/fuzz/tar_types_corpus through fuzz_tar_types' harness: the
 * member types through the shard index (it aborts on a broken contract). */
static void test_types_corpus(void **state)
{
	(void)state;
	struct tu_target t = {fuzz_tar_types_one};
	int files = tu_replay("tests/fuzz/tar_types_corpus", tu_target_one, &t);
	if (files < 0)
		skip(); /* run from another folder than the repository's */
	assert_true(files >= 8);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_gnu_tar),
		cmocka_unit_test(test_python_tarfile),
		cmocka_unit_test(test_crafted),
		cmocka_unit_test(test_corrupt),
		cmocka_unit_test(test_truncations),
		cmocka_unit_test(test_corpus),
		cmocka_unit_test(test_types_corpus),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
