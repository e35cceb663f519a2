/*
 * dataset/build.c — the index builder every kind of dataset fills: the names
 * buffer, entries and the folders they came from (their mtimes key the cache),
 * sorted directory listings filtered by extension, and the records of what
 * was left out (bad files, folders or shards) with their reasons.  Folders
 * and file lists (dataset.c), tar shards (shards.c) and the cache (cache.c)
 * call it; it calls none of them.  Single-threaded: one builder per build.
 */
#include "dataset/build.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

int stk__buf_add(struct buf *b, const char *s, size_t l, uint64_t *off)
{
	if (b->len + l + 1 > b->cap) {
		uint64_t cap = b->cap ? b->cap * 2 : 65536;
		while (cap < b->len + l + 1)
			cap *= 2;
		char *p = realloc(b->p, cap);
		if (!p)
			return -ENOMEM;
		b->p = p;
		b->cap = cap;
	}
	*off = b->len;
	memcpy(b->p + b->len, s, l);
	b->p[b->len + l] = 0;
	b->len += l + 1;
	return 0;
}

int stk__build_fail(struct builder *b, int rc, const char *fmt, ...)
{
	if (b->err && b->errlen) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(b->err, b->errlen, fmt, ap);
		va_end(ap);
	}
	return rc;
}

uint64_t stk__fnv1a(uint64_t h, const void *p, size_t l)
{
	const unsigned char *c = p;
	for (size_t i = 0; i < l; i++)
		h = (h ^ c[i]) * 0x100000001b3ull;
	return h;
}

int stk__build_add_entry(struct builder *b, uint64_t name, uint64_t size, int64_t label,
			 uint64_t offset, uint64_t tag)
{
	if (b->n == b->cap) {
		int64_t cap = b->cap ? b->cap * 2 : 4096;
		struct stk_entry *e = realloc(b->e, (size_t)cap * sizeof(*e));
		if (!e)
			return stk__build_fail(b, -ENOMEM, "%s: out of memory indexing", b->root);
		b->e = e;
		b->cap = cap;
	}
	b->e[b->n++] = (struct stk_entry){.size = size, .label = label, .name = name, .offset = offset,
					  .tag = tag};
	return 0;
}

int stk__build_add_dir(struct builder *b, const char *rel, const struct stat *st)
{
	if (b->ndirs == b->dirs_cap) {
		uint64_t cap = b->dirs_cap ? b->dirs_cap * 2 : 64;
		struct idx_dir *d = realloc(b->dirs, cap * sizeof(*d));
		if (!d)
			return stk__build_fail(b, -ENOMEM, "%s: out of memory indexing", b->root);
		b->dirs = d;
		b->dirs_cap = cap;
	}
	uint64_t off;
	if (stk__buf_add(&b->dir_names, rel, strlen(rel), &off))
		return stk__build_fail(b, -ENOMEM, "%s: out of memory indexing", b->root);
	b->dirs[b->ndirs++] = (struct idx_dir){
		.mtime_ns = stk__mtime_ns(st), .ctime_ns = stk__ctime_ns(st),
		.size = (uint64_t)st->st_size, .name = off, .ino = (uint64_t)st->st_ino,
		.dev = (uint64_t)st->st_dev};
	return 0;
}

int stk__cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

void stk__listing_free(struct listing *l)
{
	for (size_t i = 0; i < l->ndirs; i++)
		free(l->dirs[i]);
	for (size_t i = 0; i < l->nfiles; i++)
		free(l->files[i]);
	free(l->dirs);
	free(l->files);
	memset(l, 0, sizeof(*l));
}

int stk__str_push(char ***v, size_t *n, size_t *cap, const char *s)
{
	if (*n == *cap) {
		size_t c = *cap ? *cap * 2 : 64;
		char **p = realloc(*v, c * sizeof(*p));
		if (!p)
			return -ENOMEM;
		*v = p;
		*cap = c;
	}
	if (!((*v)[*n] = strdup(s)))
		return -ENOMEM;
	(*n)++;
	return 0;
}

/* Under skip, a subfolder of rel whose path would reach PATH_MAX (nested
 * that deep) is left out of the listing by the policy, as a folder that
 * cannot be opened is: named and counted, not a path no caller can build
 * ending the whole index.  Under fail, listed: the caller's "path too long"
 * ends it.  A folder listed twice (dataset.c's walk lists each folder for
 * its subfolders, then for its files) records it once.  1: left out, 0:
 * listed, <0: an error. */
static int too_deep(struct builder *b, const char *rel, const char *name)
{
	size_t rl = strlen(rel), nl = strlen(name), len = rl + (rl ? 1 : 0) + nl;
	if (len < PATH_MAX || !b->o->skip_bad)
		return 0;
	char *path = malloc(len + 1);
	if (!path)
		return stk__build_fail(b, -ENOMEM, "%s: out of memory listing", b->root);
	snprintf(path, len + 1, "%s%s%s", rel, rl ? "/" : "", name);
	bool seen = false; /* records: "<kind><code>", path, message */
	for (uint64_t off = 0, k = 0; off < b->bad.len && !seen; k++) {
		const char *s = b->bad.p + off;
		seen = k % 3 == 1 && !strcmp(s, path);
		off += strlen(s) + 1;
	}
	int rc = seen ? 0 : stk__build_bad(b, BAD_OPEN, path, -ENAMETOOLONG,
					   "%s/%s: path too long (%zu bytes, PATH_MAX %d): left out",
					   b->root, path, len, PATH_MAX);
	free(path);
	return rc ? rc : 1;
}

/* Lists rel (relative to root); sizes of regular files go to *sizes if wanted. */
int stk__build_list_dir(struct builder *b, const char *rel, struct listing *l, struct stat *dst)
{
	memset(l, 0, sizeof(*l));
	int fd = openat(b->root_fd, *rel ? rel : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return stk__build_fail(b, -errno, "%s/%s: cannot open folder: %s", b->root, rel, strerror(errno));
	if (fstat(fd, dst)) {
		int e = errno;
		close(fd);
		return stk__build_fail(b, -e, "%s/%s: %s", b->root, rel, strerror(e));
	}
	DIR *d = fdopendir(fd);
	if (!d) {
		int e = errno;
		close(fd);
		return stk__build_fail(b, -e, "%s/%s: %s", b->root, rel, strerror(e));
	}
	size_t dcap = 0, fcap = 0;
	struct dirent *de;
	int rc = 0;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		bool isdir = de->d_type == DT_DIR, isreg = de->d_type == DT_REG;
		if (de->d_type == DT_UNKNOWN || de->d_type == DT_LNK) {
			struct stat st;
			if (fstatat(dirfd(d), de->d_name, &st, 0)) {
				/* a dangling symlink, or gone since readdir: listed as a
				 * file, whose stat then fails by the error policy */
				isreg = true;
			} else {
				isdir = S_ISDIR(st.st_mode);
				isreg = S_ISREG(st.st_mode);
			}
		}
		if (isdir && (rc = too_deep(b, rel, de->d_name))) {
			if (rc > 0) {
				rc = 0;
				continue;
			}
			break;
		}
		if (isdir)
			rc = stk__str_push(&l->dirs, &l->ndirs, &dcap, de->d_name);
		else if (isreg)
			rc = stk__str_push(&l->files, &l->nfiles, &fcap, de->d_name);
		if (rc)
			break;
	}
	closedir(d);
	if (rc) {
		stk__listing_free(l);
		return stk__build_fail(b, rc, "%s/%s: out of memory listing", b->root, rel);
	}
	if (l->ndirs)
		qsort(l->dirs, l->ndirs, sizeof(char *), stk__cmp_str);
	if (l->nfiles)
		qsort(l->files, l->nfiles, sizeof(char *), stk__cmp_str);
	return 0;
}

/* --- bad records ----------------------------------------------------------- */

int stk__build_bad(struct builder *b, char kind, const char *rel, int rc, const char *fmt, ...)
{
	char msg[PATH_MAX + 512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (!b->o->skip_bad)
		return stk__build_fail(b, rc, "%s", msg);
	char head[16];
	uint64_t off;
	snprintf(head, sizeof(head), "%c%d", kind, rc);
	if (stk__buf_add(&b->bad, head, strlen(head), &off) ||
	    stk__buf_add(&b->bad, rel, strlen(rel), &off) ||
	    stk__buf_add(&b->bad, msg, strlen(msg), &off))
		return stk__build_fail(b, -ENOMEM, "%s: out of memory indexing", b->root);
	b->nbad++;
	return 0;
}

/* Whether a bad record still holds: the check that failed fails again.  An
 * open is checked by permission, not by opening: a record names whatever
 * path the file says, and opening a device can act. */
