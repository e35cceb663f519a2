/*
 * sys/read.c — what every reader of sys/ stands on: root-relative paths,
 * small files read whole with one read(2) (a consistent snapshot of a /proc
 * file), big ones grown until they fit, and the parsing of /proc/mounts'
 * fields (octal escapes, mount options).  No state; safe from any thread.
 */
#include "sys/sys_int.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int stk__sys_path(char *buf, size_t len, const char *root, const char *rel)
{
	int n = snprintf(buf, len, "%s%s", root ? root : "", rel);
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

int stk__sys_read_whole(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	size_t got = 0;
	/* Loop: /proc files larger than a page come in several reads. */
	while (got + 1 < len) {
		ssize_t r = read(fd, buf + got, len - 1 - got);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			int e = -errno;
			close(fd);
			return e;
		}
		if (r == 0)
			break;
		got += (size_t)r;
	}
	close(fd);
	buf[got] = 0;
	while (got && (buf[got - 1] == '\n' || buf[got - 1] == ' '))
		buf[--got] = 0;
	return (int)got;
}

static int vpath(char *path, size_t len, const char *root, const char *fmt, va_list ap)
{
	char rel[PATH_MAX];
	int n = vsnprintf(rel, sizeof(rel), fmt, ap);
	if (n < 0 || (size_t)n >= sizeof(rel))
		return -ENAMETOOLONG;
	return stk__sys_path(path, len, root, rel);
}

int stk__sys_read(const char *root, char *buf, size_t len, const char *rel, ...)
{
	char path[PATH_MAX];
	va_list ap;
	va_start(ap, rel);
	int rc = vpath(path, sizeof(path), root, rel, ap);
	va_end(ap);
	return rc < 0 ? rc : stk__sys_read_whole(path, buf, len);
}

int stk__sys_parse_i64(const char *s, int64_t *out)
{
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (end == s || errno)
		return -EINVAL;
	*out = v;
	return 0;
}

int stk__sys_read_i64(const char *root, int64_t *out, const char *rel, ...)
{
	char path[PATH_MAX], buf[64];
	va_list ap;
	va_start(ap, rel);
	int rc = vpath(path, sizeof(path), root, rel, ap);
	va_end(ap);
	if (rc < 0 || (rc = stk__sys_read_whole(path, buf, sizeof(buf))) < 0)
		return rc;
	return stk__sys_parse_i64(buf, out);
}

/* A /proc file too big for the stack (diskstats on a host with thousands of
 * devices, mounts in a busy container): grows until the whole file fits. */
int stk__sys_read_big(const char *root, const char *rel, char **out)
{
	char path[PATH_MAX];
	int rc = stk__sys_path(path, sizeof(path), root, rel);
	if (rc < 0)
		return rc;
	for (size_t cap = 64 * 1024; cap <= 64 * 1024 * 1024; cap *= 4) {
		char *buf = malloc(cap);
		if (!buf)
			return -ENOMEM;
		rc = stk__sys_read_whole(path, buf, cap);
		if (rc < 0 || (size_t)rc + 2 < cap) {
			if (rc < 0)
				free(buf);
			else
				*out = buf;
			return rc;
		}
		free(buf);
	}
	return -EFBIG;
}

void stk__sys_unescape(char *s)
{
	char *w = s;
	for (const char *r = s; *r;) {
		if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' && r[2] >= '0' && r[2] <= '7' &&
		    r[3] >= '0' && r[3] <= '7') {
			*w++ = (char)((r[1] - '0') << 6 | (r[2] - '0') << 3 | (r[3] - '0'));
			r += 4;
		} else {
			*w++ = *r++;
		}
	}
	*w = 0;
}

int stk_sys_mount_opt(const char *options, const char *opt, char *val, size_t len)
{
	if (!options || !opt || !*opt)
		return 0;
	size_t ol = strlen(opt);
	for (const char *p = options; p && *p;) {
		const char *c = strchr(p, ',');
		size_t l = c ? (size_t)(c - p) : strlen(p);
		if (l >= ol && !strncmp(p, opt, ol) && (l == ol || p[ol] == '=')) {
			if (val && len) {
				size_t vl = l > ol ? l - ol - 1 : 0;
				snprintf(val, len, "%.*s", (int)vl, l > ol ? p + ol + 1 : "");
			}
			return 1;
		}
		p = c ? c + 1 : NULL;
	}
	return 0;
}
