/*
 * dataset_cache.c — the index's cache file, and where it lives.
 *
 * One file: a header, the entries, the name arenas and the folders (with
 * their mtimes; a list's or a shard's size too) whose change makes it stale,
 * each part padded to 8 bytes.  Written to a temporary name and renamed into
 * place, mapped read-only when loaded, and refused whole when its magic,
 * version, key (absolute root, kind, extensions), length or any folder's
 * mtime disagrees.  Beside the data when writable, else in stk_cache_dir().
 */
#include "internal.h"
#include "dataset.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static size_t pad8(size_t x)
{
	return (x + 7) & ~(size_t)7;
}

void stk__index_header(struct idx_header *h, uint32_t kind, uint64_t key, const struct builder *b)
{
	*h = (struct idx_header){.version = IDX_VERSION, .kind = kind, .key = key,
				 .n = (uint64_t)b->n, .ndirs = b->ndirs, .names_len = b->names.len,
				 .class_names_len = b->class_names.len,
				 .dir_names_len = b->dir_names.len};
	memcpy(h->magic, IDX_MAGIC, 8);
	for (uint64_t off = 0; off < b->class_names.len; off += strlen(b->class_names.p + off) + 1)
		h->nclasses++;
	for (int64_t i = 0; i < b->n; i++)
		if (b->e[i].size > h->max_size)
			h->max_size = b->e[i].size;
	h->total_len = pad8(sizeof(*h)) + pad8((size_t)b->n * sizeof(*b->e)) + pad8(b->names.len) +
		       pad8(b->class_names.len) + pad8(b->ndirs * sizeof(*b->dirs)) +
		       pad8(b->dir_names.len);
}

int stk__index_write(const char *path, const struct idx_header *h, const struct builder *b)
{
	char tmp[PATH_MAX];
	if (snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid()) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	FILE *f = fopen(tmp, "we");
	if (!f)
		return -errno;
	static const char zeros[8];
	const struct {
		const void *p;
		size_t l;
	} parts[] = {
		{h, sizeof(*h)},
		{b->e, (size_t)b->n * sizeof(*b->e)},
		{b->names.p, b->names.len},
		{b->class_names.p, b->class_names.len},
		{b->dirs, b->ndirs * sizeof(*b->dirs)},
		{b->dir_names.p, b->dir_names.len},
	};
	int rc = 0;
	for (size_t i = 0; i < STK_ARRAY_SIZE(parts) && !rc; i++) {
		if (parts[i].l && fwrite(parts[i].p, 1, parts[i].l, f) != parts[i].l)
			rc = -EIO;
		size_t pad = pad8(parts[i].l) - parts[i].l;
		if (!rc && pad && fwrite(zeros, 1, pad, f) != pad)
			rc = -EIO;
	}
	if (fclose(f) && !rc)
		rc = -errno;
	if (!rc && rename(tmp, path))
		rc = -errno;
	if (rc) {
		unlink(tmp);
		return rc;
	}
	/* Renaming the cache into a folder changes that folder's mtime: when the
	 * folder is the indexed root (dirs[0]), record its new mtime. */
	struct stat st;
	if (h->kind != KIND_LIST && b->ndirs && !b->dir_names.p[b->dirs[0].name] &&
	    !fstatat(b->root_fd, "", &st, AT_EMPTY_PATH)) {
		uint64_t m = stk__mtime_ns(&st);
		off_t at = (off_t)(pad8(sizeof(*h)) + pad8((size_t)b->n * sizeof(*b->e)) +
				   pad8(b->names.len) + pad8(b->class_names.len));
		int fd = open(path, O_WRONLY | O_CLOEXEC);
		if (fd >= 0) {
			if (pwrite(fd, &m, sizeof(m), at) != (ssize_t)sizeof(m))
				rc = -EIO;
			close(fd);
		}
	}
	return rc;
}

int stk__index_load(const char *path, uint64_t key, int root_fd, struct stk_dataset *ds)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	struct stat st;
	if (fstat(fd, &st) || (size_t)st.st_size < sizeof(struct idx_header)) {
		close(fd);
		return STK_EINDEX;
	}
	size_t len = (size_t)st.st_size;
	void *map = mmap(NULL, len, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
	close(fd);
	if (map == MAP_FAILED)
		return -errno;
	const struct idx_header *h = map;
	const char *p = map;
	int rc = STK_EINDEX;
	if (memcmp(h->magic, IDX_MAGIC, 8) || h->version != IDX_VERSION || h->key != key ||
	    h->total_len != len || h->n > len / sizeof(struct stk_entry) ||
	    h->ndirs > len / sizeof(struct idx_dir))
		goto bad;
	size_t off = pad8(sizeof(*h));
	size_t o_entries = off;
	off += pad8(h->n * sizeof(struct stk_entry));
	size_t o_names = off;
	off += pad8(h->names_len);
	size_t o_cnames = off;
	off += pad8(h->class_names_len);
	size_t o_dirs = off;
	off += pad8(h->ndirs * sizeof(struct idx_dir));
	size_t o_dnames = off;
	off += pad8(h->dir_names_len);
	if (off != len || h->names_len == 0 || p[o_names + h->names_len - 1] ||
	    (h->class_names_len && p[o_cnames + h->class_names_len - 1]) ||
	    (h->dir_names_len && p[o_dnames + h->dir_names_len - 1]))
		goto bad;
	const struct idx_dir *dirs = (const void *)(p + o_dirs);
	for (uint64_t i = 0; i < h->ndirs; i++) {
		if (dirs[i].name >= h->dir_names_len)
			goto bad;
		const char *rel = p + o_dnames + dirs[i].name;
		struct stat ds_st;
		if (fstatat(root_fd, rel, &ds_st, *rel ? 0 : AT_EMPTY_PATH) ||
		    stk__mtime_ns(&ds_st) != dirs[i].mtime_ns ||
		    ((h->kind == KIND_LIST || (h->kind == KIND_SHARDS && *rel)) &&
		     (uint64_t)ds_st.st_size != dirs[i].size)) {
			rc = -ESTALE;
			goto bad;
		}
	}
	const struct stk_entry *e = (const void *)(p + o_entries);
	for (uint64_t i = 0; i < h->n; i++)
		if (e[i].name >= h->names_len)
			goto bad;
	ds->map = map;
	ds->map_len = len;
	ds->n = (int64_t)h->n;
	ds->entries = (struct stk_entry *)e;
	ds->names = (char *)p + o_names;
	ds->names_len = h->names_len;
	ds->max_size = h->max_size;
	ds->nclasses = (int64_t)h->nclasses;
	ds->class_names = (char *)p + o_cnames;
	return 0;
bad:
	munmap(map, len);
	return rc;
}

int stk_cache_dir(char *buf, size_t len)
{
	const char *x = getenv("XDG_CACHE_HOME");
	const char *home = getenv("HOME");
	int n;
	if (x && *x == '/')
		n = snprintf(buf, len, "%s/stoker", x);
	else if (home && *home)
		n = snprintf(buf, len, "%s/.cache/stoker", home);
	else
		n = snprintf(buf, len, "/tmp/stoker-cache-%d", (int)getuid());
	if (n < 0 || (size_t)n >= len)
		return -ENAMETOOLONG;
	/* mkdir -p */
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		if (mkdir(buf, 0755) && errno != EEXIST) {
			int e = errno;
			*p = '/';
			return -e;
		}
		*p = '/';
	}
	if (mkdir(buf, 0755) && errno != EEXIST)
		return -errno;
	return n;
}

void stk__index_paths(const struct stk__index_opts *o, const char *abs, bool is_list,
			uint64_t key, char *beside, char *user, size_t len)
{
	if (is_list)
		snprintf(beside, len, "%s%s", abs, IDX_NAME);
	else
		snprintf(beside, len, "%s/%s", abs, IDX_NAME);
	char dir[PATH_MAX];
	user[0] = 0;
	if (o->cache_dir)
		snprintf(dir, sizeof(dir), "%s", o->cache_dir);
	else if (stk_cache_dir(dir, sizeof(dir)) < 0)
		return;
	mkdir(dir, 0755);
	snprintf(user, len, "%s/index-%016llx", dir, (unsigned long long)key);
}
