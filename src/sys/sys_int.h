/* sys/sys_int.h — what the files of src/sys/ share (sys/read.c owns them): root-relative paths and small-file
 * readers.  Never installed. */
#ifndef STK_SYS_INT_H
#define STK_SYS_INT_H

#include "base/internal.h"
#include "stoker/sys.h"

#include <limits.h>
#include <string.h>

/* root + rel into buf ("" root gives rel itself).  0 or -ENAMETOOLONG. */
int stk__sys_path(char *buf, size_t len, const char *root, const char *rel);
/* Reads a small file (up to len-1 bytes, NUL-terminated, trailing newline
 * removed).  Returns the length or -errno.  rel is printf-style. */
int stk__sys_read(const char *root, char *buf, size_t len, const char *rel, ...)
	__attribute__((format(printf, 4, 5)));
/* Reads the file at path whole into buf (len-1 bytes at most, NUL-terminated,
 * trailing newline removed): its length or -errno. */
int stk__sys_read_whole(const char *path, char *buf, size_t len);
/* A file too big for the stack, read whole into *out (malloc'd): its length
 * or -errno (-EFBIG past 64 MiB). */
int stk__sys_read_big(const char *root, const char *rel, char **out);
/* The integer at the start of s: 0 or -EINVAL. */
int stk__sys_parse_i64(const char *s, int64_t *out);
/* The first integer in a small file, or -errno. */
int stk__sys_read_i64(const char *root, int64_t *out, const char *rel, ...)
	__attribute__((format(printf, 3, 4)));

/* Copies the filled struct `src` (sizeof srclen) to the caller's `dst`, whose
 * first field holds the size the caller knows (0: current); never writes past
 * it, and records the bytes written in dst's size field. */
static inline void stk__sys_out(void *dst, void *src, size_t srclen)
{
	uint32_t want;
	memcpy(&want, dst, sizeof(want));
	size_t n = want && want < srclen ? want : srclen;
	uint32_t n32 = (uint32_t)n;
	memcpy(src, &n32, sizeof(n32));
	memcpy(dst, src, n);
}

/* The stride of a caller's array of versioned structs (each starting with its
 * uint32_t size): out[0]'s size, 0 meaning ours; at least `least` bytes.
 * -EINVAL for a missing array or a size below that.  No array needed when
 * max is 0. */
static inline long stk__sys_stride(const void *out, size_t max, size_t ours, size_t least)
{
	uint32_t want = 0;
	if (!max)
		return (long)ours;
	if (!out)
		return -EINVAL;
	memcpy(&want, out, sizeof(want));
	size_t stride = want ? want : ours;
	return stride < least ? -EINVAL : (long)stride;
}

/* Copies the filled struct `src` (srclen bytes) into element i of the
 * caller's array, no more than its stride, recording the bytes written in
 * the element's size field. */
static inline void stk__sys_out_at(void *out, size_t stride, size_t i, void *src, size_t srclen)
{
	size_t n = stride < srclen ? stride : srclen;
	uint32_t n32 = (uint32_t)n;
	memcpy(src, &n32, sizeof(n32));
	memcpy((char *)out + i * stride, src, n);
}

/* Parses a /proc/mounts field in place, undoing the kernel's octal escapes
 * (\040 space, \011 tab, \012 newline, \134 backslash). */
void stk__sys_unescape(char *s);

/* The folder of this process's cgroup for `controller` ("memory", "cpu"),
 * under root: v2 (returns 2) or v1 (returns 1); mnt gets the hierarchy's
 * mount point (the top of the walk up).  -ENOENT when there is none. */
int stk__sys_cgroup_dir(const char *root, const char *controller, char *dir, size_t len,
			char *mnt, size_t mntlen);

/* When process pid started, in seconds since the epoch (its stat's starttime
 * and /proc/stat's btime); 0 when unknown. */
double stk__sys_process_start(const char *root, long pid);

#endif
