/* testutil.h — what the cmocka tests share: temp folders and file helpers. */
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

#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

#endif
