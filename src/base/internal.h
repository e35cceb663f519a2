/* internal.h — shared by libstoker's subsystems; never installed. */
#ifndef STK_INTERNAL_H
#define STK_INTERNAL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "stoker/stoker.h"

#include <ctype.h>
#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>

#define STK__XSTR(x) #x
#define STK__STR(x) STK__XSTR(x)
#define STK_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define STK_ALIGN_UP(x, a) (((x) + (a)-1) & ~((uint64_t)(a)-1))
#define STK_DIRECT_ALIGN 4096u

static inline uint64_t stk__now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* splitmix64: seeds and per-sample generators. */
static inline uint64_t stk__mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* xxHash64 with seed 0, fed in pieces (base/hash.c): the checksums a cache
 * is checked with before it is trusted. */
struct stk__xxh64 {
	uint64_t v[4], total;
	uint8_t buf[32];
	size_t nbuf;
};
void stk__xxh64_start(struct stk__xxh64 *h);
void stk__xxh64_feed(struct stk__xxh64 *h, const void *p, size_t len);
uint64_t stk__xxh64_end(const struct stk__xxh64 *h);
uint64_t stk__xxh64(const void *p, size_t len);

/* Removes the white space at both ends of s, in place. */
static inline void stk__trim(char *s)
{
	size_t l = strlen(s);
	while (l && isspace((unsigned char)s[l - 1]))
		s[--l] = 0;
	size_t i = 0;
	while (s[i] && isspace((unsigned char)s[i]))
		i++;
	memmove(s, s + i, l - i + 1);
}

/* --- base/errors.c ----------------------------------------------------------- */

/* Formats the message into err (when err and len are set) and gives back rc:
 * `return stk__errf(err, errlen, -EINVAL, "%s: ...", path);`. */
int stk__errf(char *err, size_t len, int rc, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* --- base/trust.c ----------------------------------------------------------- */

struct stat;
/* Whether the folder or file st describes may be believed: owned by this
 * user, root or `also` ((uid_t)-1: nobody else), writable by no group or
 * other user.  0, or -EPERM with "WHAT PATH belongs to uid N, not to you" or
 * "... is writable by every user (mode 0777)" in why. */
int stk__trust_stat(const struct stat *st, uid_t also, const char *what, const char *path,
		    char *why, size_t whylen);
/* stk__trust_stat of the folder at path (a symlink followed): 0, -EPERM,
 * -ENOTDIR or -errno, the reason in why. */
int stk__trust_dir(const char *path, char *why, size_t whylen);

/* --- base/options.c ---------------------------------------------------------- */

/* Gives each zero field of `opts` (a struct stk_loader_opts or stk_image_opts,
 * as group says) its row's default and checks every option's range.  0, or
 * <0 with "name: reason" in err. */
int stk__opts_apply(enum stk_opt_group group, void *opts, char *err, size_t errlen);

#endif
