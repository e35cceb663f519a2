/* testutil.h — what the cmocka tests share: temp folders, file helpers and
 * ImageFolder trees (JPEG pictures: testjpeg.h). */
#ifndef STK_TESTUTIL_H
#define STK_TESTUTIL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Skips the test unless cond holds (a library or an encoder this machine
 * lacks: FFmpeg's, in the video tests). */
#define TU_NEED(cond)                                                                            \
	do {                                                                                     \
		if (!(cond))                                                                     \
			skip();                                                                  \
	} while (0)

/* The tests' reproducible random numbers: Marsaglia's xorshift64 over *s
 * (never 0), the next value. */
static inline uint64_t tu_xorshift64(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* A fresh folder under $TMPDIR (or /tmp); free() the result after tu_rmrf. */
static inline char *tu_mkdtemp(void)
{
	const char *t = getenv("TMPDIR");
	char tmpl[4096];
	snprintf(tmpl, sizeof(tmpl), "%s/stoker-test-XXXXXX", t && *t ? t : "/tmp");
	char *d = mkdtemp(tmpl);
	assert_non_null(d);
	return strdup(d);
}

static inline int tu_rm_cb(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(p);
}

static inline void tu_rmrf(const char *dir)
{
	nftw(dir, tu_rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

/* A test program's one temp folder: made by the group's setup, removed by its
 * teardown (cmocka_run_group_tests(tests, tu_dir_setup, tu_dir_teardown)). */
static char *tu_dir __attribute__((unused));

static inline int tu_dir_setup(void **state)
{
	(void)state;
	tu_dir = tu_mkdtemp();
	return tu_dir ? 0 : -1;
}

static inline int tu_dir_teardown(void **state)
{
	(void)state;
	tu_rmrf(tu_dir);
	free(tu_dir);
	tu_dir = NULL;
	return 0;
}

/* NAME in tu_dir: one of 8 buffers in turn, so a call may hold a few. */
static inline char *tu_path(const char *name)
{
	static char p[8][4200];
	static int k;
	char *s = p[k++ % 8];
	snprintf(s, sizeof(p[0]), "%s/%s", tu_dir, name);
	return s;
}

/* Runs a shell command (the fmt's), failing the test when it exits non-zero. */
static inline void tu_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline void tu_sh(const char *fmt, ...)
{
	char cmd[16384];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	int rc = system(cmd);
	if (rc)
		fail_msg("'%s' exited %d", cmd, rc);
}

static inline void tu_write(const char *path, const void *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, len), (ssize_t)len);
	close(fd);
}

static inline void tu_mkdir(const char *path)
{
	assert_int_equal(mkdir(path, 0755), 0);
}

/* The bytes of file i of class c: written into buf (room for maxlen), their
 * length returned. */
typedef size_t (*tu_fill_fn)(uint8_t *buf, int c, int i);

/* An ImageFolder tree under root: nclass class folders, named by names[c]
 * (in that order of creation, sorted or not) or, names NULL, by class_fmt
 * ("c%d"); in each, per_class files named by file_fmt ("%03d.jpg") from i,
 * with fill's bytes. */
static inline void tu_tree(const char *root, int nclass, const char *const *names,
			   const char *class_fmt, int per_class, const char *file_fmt, size_t maxlen,
			   tu_fill_fn fill)
{
	char p[4096], cls[256], file[256];
	uint8_t *buf = malloc(maxlen ? maxlen : 1);
	assert_non_null(buf);
	for (int c = 0; c < nclass; c++) {
		if (names)
			snprintf(cls, sizeof(cls), "%s", names[c]);
		else
			snprintf(cls, sizeof(cls), class_fmt, c);
		snprintf(p, sizeof(p), "%s/%s", root, cls);
		tu_mkdir(p);
		for (int i = 0; i < per_class; i++) {
			size_t len = fill(buf, c, i);
			assert_true(len <= maxlen);
			snprintf(file, sizeof(file), file_fmt, i);
			snprintf(p, sizeof(p), "%s/%s/%s", root, cls, file);
			tu_write(p, buf, len);
		}
	}
	free(buf);
}

/* Each file of a fuzz corpus, read whole, to fn(path, bytes, length, arg),
 * dot files left out: the number of files, or -1 when the folder is missing
 * (a test run from another folder than the repository's: skip()). */
static inline int tu_replay(const char *dir,
			    void (*fn)(const char *path, const uint8_t *buf, size_t n, void *arg),
			    void *arg)
{
	DIR *d = opendir(dir);
	if (!d)
		return -1;
	struct dirent *e;
	int files = 0;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		char p[4200];
		snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
		FILE *f = fopen(p, "rb");
		assert_non_null(f);
		struct stat st;
		assert_int_equal(fstat(fileno(f), &st), 0);
		uint8_t *buf = malloc((size_t)st.st_size + 1);
		assert_non_null(buf);
		assert_int_equal(fread(buf, 1, (size_t)st.st_size, f), (size_t)st.st_size);
		fclose(f);
		fn(p, buf, (size_t)st.st_size, arg);
		free(buf);
		files++;
	}
	closedir(d);
	return files;
}

/* tu_replay's fn for a fuzz target's entry point (arg: a struct tu_target). */
struct tu_target {
	int (*one)(const uint8_t *buf, size_t n);
};
static inline void tu_target_one(const char *path, const uint8_t *buf, size_t n, void *arg)
{
	(void)path;
	((const struct tu_target *)arg)->one(buf, n);
}

#endif
