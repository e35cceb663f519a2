/*
 * dataset/cache.c — the index's cache file, and where it lives.
 *
 * One file: a header, the entries, the name arenas, the folders (with their
 * mtimes; a list's or a shard's size too) whose change makes it stale, and
 * the bad records (what the skip policy left out), each part padded to 8
 * bytes.  Written to a temporary name and renamed into place, mapped
 * read-only when loaded.  Never trusted blindly: a checksum over the whole
 * file, every entry checked against the header and the folders (labels in
 * range, names at a name's start, a member inside its shard), and the whole
 * refused when its magic, version, key (absolute root, kind, extensions),
 * length or any folder's mtime disagrees.  A damaged cache is rebuilt and
 * the caller says so once; another version's, silently.  In the user's cache
 * folder (cache_dir, else stk_cache_dir()) under a name keyed by the dataset
 * (absolute path, kind, extensions), out of the data's folders, which scripts
 * list; beside the data (ROOT/.stoker-index) only with index_beside, falling
 * back to the user's folder when the data's is read-only.
 */
#include "base/internal.h"
#include "dataset/build.h"

#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
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

/* --- the checksum: a 64-bit hash in four lanes (xxHash64's rounds), fed as
 * a stream.  It finds damage, not forgery: what keeps another user's file out
 * is its owner and mode (base/trust.c).  It skips two fields, read as zeros:
 * the checksum itself, and the first folder's mtime and ctime, which
 * stk__index_write patches after a rename into that folder (they are only
 * ever compared with the folder's live ones, so damaged ones can only make
 * the cache stale). */

struct hasher {
	struct stk__xxh64 x;
	uint64_t pos;                    /* file offset of the next byte fed */
	uint64_t skip_at[2], skip_len[2]; /* fields read as zeros */
};

/* Feeds len bytes that sit at the stream's current offset. */
static void hash_feed(struct hasher *h, const void *data, size_t len)
{
	static const uint8_t zeros[16]; /* the longest skipped field */
	const uint8_t *p = data;
	while (len) {
		size_t run = len;
		for (int k = 0; k < 2; k++) {
			uint64_t a = h->skip_at[k], z = a + h->skip_len[k];
			if (h->pos >= a && h->pos < z) { /* inside a skipped field */
				size_t n = (size_t)(z - h->pos) < len ? (size_t)(z - h->pos) : len;
				stk__xxh64_feed(&h->x, zeros, n);
				h->pos += n;
				p += n;
				len -= n;
				run = 0;
				break;
			}
			if (a > h->pos && a - h->pos < run)
				run = (size_t)(a - h->pos);
		}
		if (run) {
			stk__xxh64_feed(&h->x, p, run);
			h->pos += run;
			p += run;
			len -= run;
		}
	}
}

/* Where the parts of an index with header h start. */
struct layout {
	size_t entries, names, cnames, dirs, dnames, bad, end;
};

static struct layout layout_of(const struct idx_header *h)
{
	struct layout y;
	y.entries = pad8(sizeof(*h));
	y.names = y.entries + pad8(h->n * sizeof(struct stk_entry));
	y.cnames = y.names + pad8(h->names_len);
	y.dirs = y.cnames + pad8(h->class_names_len);
	y.dnames = y.dirs + pad8(h->ndirs * sizeof(struct idx_dir));
	y.bad = y.dnames + pad8(h->dir_names_len);
	y.end = y.bad + pad8(h->bad_len);
	return y;
}

static void hash_start(struct hasher *h, const struct layout *y, bool has_dirs)
{
	*h = (struct hasher){0};
	stk__xxh64_start(&h->x);
	h->skip_at[0] = offsetof(struct idx_header, checksum);
	h->skip_len[0] = 8;
	h->skip_at[1] = y->dirs + offsetof(struct idx_dir, mtime_ns);
	h->skip_len[1] = has_dirs ? 16 : 0; /* mtime_ns and ctime_ns */
}

/* The parts of the file b writes with header h, padding included. */
struct part {
	const void *p;
	size_t l;
};

static size_t index_parts(const struct idx_header *h, const struct builder *b, struct part *v)
{
	size_t n = 0;
	v[n++] = (struct part){h, sizeof(*h)};
	v[n++] = (struct part){b->e, (size_t)b->n * sizeof(*b->e)};
	v[n++] = (struct part){b->names.p, b->names.len};
	v[n++] = (struct part){b->class_names.p, b->class_names.len};
	v[n++] = (struct part){b->dirs, b->ndirs * sizeof(*b->dirs)};
	v[n++] = (struct part){b->dir_names.p, b->dir_names.len};
	v[n++] = (struct part){b->bad.p, b->bad.len};
	return n;
}

static uint64_t builder_checksum(const struct idx_header *h, const struct builder *b)
{
	static const char zeros[8];
	struct part v[8];
	size_t n = index_parts(h, b, v);
	struct layout y = layout_of(h);
	struct hasher hs;
	hash_start(&hs, &y, b->ndirs > 0);
	for (size_t i = 0; i < n; i++) {
		if (v[i].l)
			hash_feed(&hs, v[i].p, v[i].l);
		hash_feed(&hs, zeros, pad8(v[i].l) - v[i].l);
	}
	return stk__xxh64_end(&hs.x);
}

uint64_t stk__index_file_checksum(const void *p, size_t len)
{
	const struct idx_header *h = p;
	if (len < sizeof(*h))
		return 0;
	struct layout y = layout_of(h);
	struct hasher hs;
	hash_start(&hs, &y, h->ndirs > 0);
	hash_feed(&hs, p, len);
	return stk__xxh64_end(&hs.x);
}

void stk__index_header(struct idx_header *h, uint32_t kind, uint64_t key, const struct builder *b)
{
	*h = (struct idx_header){.version = IDX_VERSION, .kind = kind, .key = key,
				 .n = (uint64_t)b->n, .ndirs = b->ndirs, .names_len = b->names.len,
				 .class_names_len = b->class_names.len,
				 .dir_names_len = b->dir_names.len, .nbad = b->nbad,
				 .bad_len = b->bad.len};
	memcpy(h->magic, IDX_MAGIC, 8);
	for (uint64_t off = 0; off < b->class_names.len; off += strlen(b->class_names.p + off) + 1)
		h->nclasses++;
	for (int64_t i = 0; i < b->n; i++)
		if (b->e[i].size > h->max_size)
			h->max_size = b->e[i].size;
	h->total_len = layout_of(h).end;
	h->checksum = builder_checksum(h, b);
}

int stk__index_write(const char *path, bool in_root, const struct idx_header *h,
		      const struct builder *b)
{
	char tmp[PATH_MAX];
	if (snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid()) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	/* private until renamed; then readable, never writable, by others */
	int tfd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	FILE *f = tfd >= 0 ? fdopen(tfd, "w") : NULL;
	if (!f) {
		int e = errno;
		if (tfd >= 0)
			close(tfd);
		return -e;
	}
	errno = 0;
	static const char zeros[8];
	struct part parts[8];
	size_t np = index_parts(h, b, parts);
	int rc = 0;
	for (size_t i = 0; i < np && !rc; i++) {
		/* a full disk is ENOSPC here or at fclose: the reason is said */
		if (parts[i].l && fwrite(parts[i].p, 1, parts[i].l, f) != parts[i].l)
			rc = errno ? -errno : -EIO;
		size_t pad = pad8(parts[i].l) - parts[i].l;
		if (!rc && pad && fwrite(zeros, 1, pad, f) != pad)
			rc = errno ? -errno : -EIO;
	}
	if (!rc && fchmod(fileno(f), 0644))
		rc = -errno;
	if (fclose(f) && !rc)
		rc = -errno;
	if (!rc && rename(tmp, path))
		rc = -errno;
	if (rc) {
		unlink(tmp);
		return rc;
	}
	/* Renaming the cache into the indexed root (beside the data) changes
	 * that folder's mtime and ctime: record its new ones (fields the
	 * checksum skips).  Nowhere else: there it would hide a change made
	 * since the walk. */
	struct stat st;
	if (in_root && h->kind != KIND_LIST && b->ndirs && !b->dir_names.p[b->dirs[0].name] &&
	    !fstatat(b->root_fd, "", &st, AT_EMPTY_PATH)) {
		uint64_t m[2] = {stk__mtime_ns(&st), stk__ctime_ns(&st)};
		off_t at = (off_t)(layout_of(h).dirs + offsetof(struct idx_dir, mtime_ns));
		int fd = open(path, O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
		if (fd >= 0) {
			if (pwrite(fd, m, sizeof(m), at) != (ssize_t)sizeof(m))
				rc = -EIO;
			close(fd);
		}
	}
	return rc;
}

/* --- bad records ----------------------------------------------------------- */

static bool still_bad(int data_fd, char kind, const char *rel)
{
	struct stat st;
	if (kind == BAD_STAT)
		return fstatat(data_fd, rel, &st, 0) || !S_ISREG(st.st_mode);
	if (kind == BAD_OPEN)
		return fstatat(data_fd, rel, &st, 0) ||
		       faccessat(data_fd, rel, S_ISDIR(st.st_mode) ? R_OK | X_OK : R_OK, 0);
	return true; /* BAD_DAMAGE: the shard's size and mtime say */
}

/* Checks n bad records in p[0..len): well formed; -ESTALE when one no longer
 * holds, STK_EINDEX when malformed. */
static int check_bad(const char *p, uint64_t len, uint64_t n, int data_fd)
{
	uint64_t off = 0;
	for (uint64_t i = 0; i < n; i++) {
		const char *f[3];
		for (int k = 0; k < 3; k++) {
			if (off >= len)
				return STK_EINDEX;
			f[k] = p + off;
			off += strlen(f[k]) + 1; /* the part ends in a NUL: checked by the caller */
		}
		char kind = f[0][0];
		char *end;
		long code = strtol(f[0] + 1, &end, 10);
		if ((kind != BAD_STAT && kind != BAD_OPEN && kind != BAD_DAMAGE) || end == f[0] + 1 ||
		    *end || code >= 0 || code < -100000)
			return STK_EINDEX;
		if (!still_bad(data_fd, kind, f[1]))
			return -ESTALE;
	}
	return off == len ? 0 : STK_EINDEX;
}

int stk__index_bad_report(const struct stk_dataset *ds, const struct stk__index_opts *o,
			  const char *cache, char *err, size_t errlen)
{
	if (!ds->nbad)
		return 0;
	const char *head = ds->bad, *msg = head + strlen(head) + 1;
	msg += strlen(msg) + 1;
	int code = (int)strtol(head + 1, NULL, 10);
	if (!o->skip_bad) { /* only a cache remembers them under fail */
		snprintf(err, errlen, "%s (remembered by the index cache %s, which a run under "
			 "on_error skip wrote)", msg, cache ? cache : "");
		return code;
	}
	if (o->warning && o->warnlen) {
		if (ds->nbad == 1)
			snprintf(o->warning, o->warnlen, "%s", msg);
		else
			snprintf(o->warning, o->warnlen, "%s (and %llu more)", msg,
				 (unsigned long long)ds->nbad - 1);
	}
	return 0;
}

/* --- loading --------------------------------------------------------------- */

static int damaged(char *why, size_t whylen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int damaged(char *why, size_t whylen, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	if (why && whylen)
		vsnprintf(why, whylen, fmt, ap);
	va_end(ap);
	return STK_EINDEX;
}

/* Whether a name stays inside the folder it is relative to: not absolute,
 * and no empty, "." or ".." part. */
static bool inside(const char *name)
{
	if (!*name || *name == '/')
		return false;
	for (const char *c = name;;) {
		size_t l = strcspn(c, "/");
		if (!l || (l == 1 && c[0] == '.') || (l == 2 && c[0] == '.' && c[1] == '.'))
			return false;
		if (!c[l])
			return true;
		c += l + 1;
	}
}

/* Every entry against the header and the folders: names at a name's start,
 * inside the root (a folder's and shards' entries: never a file the dataset
 * does not name), under the class folder its label names (the folder
 * kind), labels in range for the kind, offsets 0 outside shards and members
 * inside their shard (whose size the folders record), the largest size. */
static int check_entries(const struct idx_header *h, const char *p, const struct layout *y,
			 char *why, size_t whylen)
{
	const struct stk_entry *e = (const void *)(p + y->entries);
	const char *names = p + y->names, *dnames = p + y->dnames;
	const struct idx_dir *dirs = (const void *)(p + y->dirs);
	uint64_t max = 0, d = 0;
	uint64_t nc = 0;
	for (uint64_t off = 0; off < h->class_names_len; off += strlen(p + y->cnames + off) + 1)
		nc++;
	if (nc != h->nclasses)
		return damaged(why, whylen, "%llu class names, header says %llu",
			       (unsigned long long)nc, (unsigned long long)h->nclasses);
	uint64_t *cls = NULL; /* the folder kind: where each class's name starts */
	if (h->kind == KIND_FOLDER && nc) {
		if (!(cls = malloc(nc * sizeof(*cls))))
			return -ENOMEM;
		for (uint64_t k = 0, off = 0; k < nc; off += strlen(p + y->cnames + off) + 1)
			cls[k++] = off;
	}
	int rc = 0;
	for (uint64_t i = 0; i < h->n && !rc; i++) {
		const struct stk_entry *x = &e[i];
		if (x->name >= h->names_len || (x->name && names[x->name - 1])) {
			rc = damaged(why, whylen, "entry %llu: bad name", (unsigned long long)i);
			break;
		}
		const char *nm = names + x->name;
		bool label_ok = h->kind == KIND_FOLDER ? x->label >= 0 && (uint64_t)x->label < h->nclasses
				: h->kind == KIND_FLAT ? x->label == -1 : x->label >= -1;
		if (!label_ok) {
			rc = damaged(why, whylen, "entry %llu: label %lld out of range",
				     (unsigned long long)i, (long long)x->label);
			break;
		}
		if (h->kind != KIND_LIST && (!inside(nm) || (h->kind == KIND_FLAT && strchr(nm, '/')))) {
			rc = damaged(why, whylen, "entry %llu: %s is outside the dataset's folder",
				     (unsigned long long)i, nm);
			break;
		}
		if (h->kind == KIND_FOLDER) {
			const char *c = p + y->cnames + cls[x->label];
			size_t cl = strlen(c);
			if (strncmp(nm, c, cl) || nm[cl] != '/') {
				rc = damaged(why, whylen, "entry %llu: %s is not in class folder %s "
					     "of its label %lld", (unsigned long long)i, nm, c,
					     (long long)x->label);
				break;
			}
		}
		if (x->size > max)
			max = x->size;
		if (h->kind != KIND_SHARDS) {
			if (x->offset || x->tag)
				rc = damaged(why, whylen, "entry %llu: offset in a whole file",
					     (unsigned long long)i);
			continue;
		}
		if (!x->tag) {
			rc = damaged(why, whylen, "entry %llu: no header tag", (unsigned long long)i);
			break;
		}
		/* the shards are recorded in the order their samples come */
		while (d < h->ndirs && strcmp(dnames + dirs[d].name, nm))
			d++;
		if (d == h->ndirs || x->offset < 512 || x->offset > dirs[d].size ||
		    x->size > dirs[d].size - x->offset)
			rc = damaged(why, whylen, "entry %llu: not inside its shard",
				     (unsigned long long)i);
	}
	free(cls);
	if (!rc && max != h->max_size)
		rc = damaged(why, whylen, "largest size %llu, header says %llu",
			     (unsigned long long)max, (unsigned long long)h->max_size);
	return rc;
}

/* A list's entries are its lines, in order (those left out aside): a name
 * and label the list does not hold is refused.  One read of the list. */
static int check_list(const struct idx_header *h, const char *p, const struct layout *y,
		      const char *list, char *why, size_t whylen)
{
	FILE *f = fopen(list, "re");
	if (!f)
		return -errno;
	const struct stk_entry *e = (const void *)(p + y->entries);
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	uint64_t i = 0;
	while (i < h->n && (len = getline(&line, &cap, f)) >= 0) {
		while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
			line[--len] = 0;
		if (!len || line[0] == '#')
			continue;
		char *tab = strchr(line, '\t');
		if (tab)
			*tab = 0;
		long long label = tab ? strtoll(tab + 1, NULL, 10) : -1;
		if (!strcmp(line, p + y->names + e[i].name) && label == e[i].label)
			i++;
	}
	free(line);
	fclose(f);
	if (i < h->n)
		return damaged(why, whylen, "entry %llu: %s (label %lld) is not on the list's lines",
			       (unsigned long long)i, p + y->names + e[i].name, (long long)e[i].label);
	return 0;
}

/* Whether the folder, list or shard d still is what was indexed: -ESTALE with
 * what changed in why. */
static int check_dir(const struct idx_dir *d, const char *rel, const struct stat *st,
		     bool sized, char *why, size_t whylen)
{
	const char *what = (uint64_t)st->st_ino != d->ino || (uint64_t)st->st_dev != d->dev
				   ? "another file or folder now (inode)"
			   : stk__mtime_ns(st) != d->mtime_ns ? "modified (mtime)"
			   : sized && (uint64_t)st->st_size != d->size ? "another size"
			   : stk__ctime_ns(st) != d->ctime_ns ? "changed (ctime; its mtime was kept)"
							       : NULL;
	if (!what)
		return 0;
	stk__errf(why, whylen, 0, "%s: %s since it was indexed", *rel ? rel : "the dataset's root",
		  what);
	return -ESTALE;
}

int stk__index_load(const char *path, const struct stk__index_check *c, struct stk_dataset *ds,
		    char *why, size_t whylen)
{
	uint64_t key = c->key;
	/* never a FIFO's or a device's open that blocks, never a symlink's target */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0 && errno == ELOOP) {
		stk__errf(why, whylen, 0, "index cache %s is a symbolic link", path);
		return 2;
	}
	if (fd < 0)
		return -errno;
	struct stat st;
	if (fstat(fd, &st)) {
		int e = errno;
		close(fd);
		return -e;
	}
	if (!S_ISREG(st.st_mode) ||
	    stk__trust_stat(&st, c->also, "index cache", path, why, whylen)) {
		if (!S_ISREG(st.st_mode))
			stk__errf(why, whylen, 0, "index cache %s is not a regular file", path);
		close(fd);
		return 2;
	}
	if ((size_t)st.st_size < sizeof(struct idx_header)) {
		char head[12];
		bool ours = pread(fd, head, sizeof(head), 0) == (ssize_t)sizeof(head) &&
			    !memcmp(head, IDX_MAGIC, 8) && !memcmp(head + 8, &(uint32_t){IDX_VERSION}, 4);
		close(fd);
		if (!ours && st.st_size >= 12)
			return 1; /* another version's */
		return damaged(why, whylen, "%lld bytes, shorter than its header",
			       (long long)st.st_size);
	}
	/* the header before anything is mapped: a large file of another kind
	 * costs one read, not its size in memory */
	struct idx_header head;
	if (pread(fd, &head, sizeof(head), 0) != (ssize_t)sizeof(head)) {
		int e = errno ? errno : EIO;
		close(fd);
		return -e;
	}
	if (memcmp(head.magic, IDX_MAGIC, 8) || head.version != IDX_VERSION || head.key != key) {
		close(fd);
		return 1; /* another version's or another dataset's: not damage */
	}
	if (head.total_len != (uint64_t)st.st_size) {
		close(fd);
		return damaged(why, whylen, "%lld bytes, the header says %llu",
			       (long long)st.st_size, (unsigned long long)head.total_len);
	}
	size_t len = (size_t)st.st_size;
	void *map = mmap(NULL, len, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
	close(fd);
	if (map == MAP_FAILED)
		return -errno;
	const struct idx_header *h = map;
	const char *p = map;
	int rc;
	if (memcmp(h->magic, IDX_MAGIC, 8) || h->version != IDX_VERSION || h->key != key) {
		rc = 1; /* another version's or another dataset's: not damage */
		goto bad;
	}
	rc = STK_EINDEX;
	if (h->total_len != len || h->n > len / sizeof(struct stk_entry) ||
	    h->ndirs > len / sizeof(struct idx_dir) || h->names_len > len ||
	    h->class_names_len > len || h->dir_names_len > len || h->bad_len > len ||
	    h->nbad > len) {
		damaged(why, whylen, "%zu bytes, the header says otherwise", len);
		goto bad;
	}
	struct layout y = layout_of(h);
	if (y.end != len) {
		damaged(why, whylen, "%zu bytes, its parts add up to %zu", len, y.end);
		goto bad;
	}
	if (stk__index_file_checksum(p, len) != h->checksum) {
		damaged(why, whylen, "checksum mismatch");
		goto bad;
	}
	/* the checksum says the bytes are the writer's; the rest says the writer
	 * was sane */
	if (h->names_len == 0 || p[y.names + h->names_len - 1] ||
	    (h->class_names_len && p[y.cnames + h->class_names_len - 1]) ||
	    (h->dir_names_len && p[y.dnames + h->dir_names_len - 1]) ||
	    (h->bad_len && p[y.bad + h->bad_len - 1]) || (h->nbad && !h->bad_len)) {
		damaged(why, whylen, "a name arena is not NUL-terminated");
		goto bad;
	}
	const struct idx_dir *dirs = (const void *)(p + y.dirs);
	for (uint64_t i = 0; i < h->ndirs; i++)
		if (dirs[i].name >= h->dir_names_len ||
		    (dirs[i].name && p[y.dnames + dirs[i].name - 1])) {
			damaged(why, whylen, "folder %llu: bad name", (unsigned long long)i);
			goto bad;
		}
	if ((rc = check_entries(h, p, &y, why, whylen)))
		goto bad;
	for (uint64_t i = 0; i < h->ndirs; i++) {
		const char *rel = p + y.dnames + dirs[i].name;
		struct stat ds_st;
		if (fstatat(c->vfd, rel, &ds_st, *rel ? 0 : AT_EMPTY_PATH)) {
			stk__errf(why, whylen, 0, "%s: %s", *rel ? rel : "the dataset's root",
				  strerror(errno));
			rc = -ESTALE;
			goto bad;
		}
		bool sized = h->kind == KIND_LIST || (h->kind == KIND_SHARDS && *rel);
		if ((rc = check_dir(&dirs[i], rel, &ds_st, sized, why, whylen)))
			goto bad;
	}
	if (h->kind == KIND_LIST && c->list && (rc = check_list(h, p, &y, c->list, why, whylen)))
		goto bad;
	if ((rc = check_bad(p + y.bad, h->bad_len, h->nbad, c->data_fd))) {
		if (rc == STK_EINDEX)
			damaged(why, whylen, "malformed records of what was left out");
		else if (rc == -ESTALE)
			stk__errf(why, whylen, 0, "a file or folder left out of it can be read now");
		goto bad;
	}
	ds->map = map;
	ds->map_len = len;
	ds->n = (int64_t)h->n;
	ds->entries = (struct stk_entry *)(p + y.entries);
	ds->names = (char *)p + y.names;
	ds->names_len = h->names_len;
	ds->max_size = h->max_size;
	ds->nclasses = (int64_t)h->nclasses;
	ds->class_names = (char *)p + y.cnames;
	ds->nbad = h->nbad;
	ds->bad = p + y.bad;
	ds->bad_len = h->bad_len;
	ds->dirs = dirs;
	ds->ndirs = h->ndirs;
	ds->dir_names = p + y.dnames;
	return 0;
bad:
	munmap(map, len);
	return rc;
}

/* A cache folder: its parents as mkdir -p makes them, the folder itself
 * private (the default one and a --cache-dir alike). */
static int mkdir_private(char *path)
{
	char *slash = strrchr(path, '/');
	if (slash && slash != path) {
		*slash = 0;
		int rc = stk__mkdir_p(path);
		*slash = '/';
		if (rc < 0)
			return rc;
	}
	if (mkdir(path, 0700) && errno != EEXIST)
		return -errno;
	return 0;
}

int stk__cache_dir(char *buf, size_t len, char *why, size_t whylen)
{
	const char *x = getenv("XDG_CACHE_HOME");
	const char *home = getenv("HOME");
	int n;
	if (x && *x == '/')
		n = snprintf(buf, len, "%s/stoker", x);
	else if (home && *home)
		n = snprintf(buf, len, "%s/.cache/stoker", home);
	else /* a name anyone can guess: made private, and refused when another's */
		n = snprintf(buf, len, "/tmp/stoker-cache-%d", (int)geteuid());
	if (n < 0 || (size_t)n >= len)
		return stk__errf(why, whylen, -ENAMETOOLONG, "cache folder name too long");
	int rc = mkdir_private(buf);
	if (rc < 0)
		return stk__errf(why, whylen, rc, "cache folder %s: %s", buf, strerror(-rc));
	rc = stk__trust_dir(buf, why, whylen);
	return rc ? rc : n;
}

int stk_cache_dir(char *buf, size_t len)
{
	return stk__cache_dir(buf, len, NULL, 0);
}

int stk__mkdir_p(char *path)
{
	for (char *p = path + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		if (mkdir(path, 0755) && errno != EEXIST) {
			int e = errno;
			*p = '/';
			return -e;
		}
		*p = '/';
	}
	if (mkdir(path, 0755) && errno != EEXIST)
		return -errno;
	return 0;
}

void stk__index_paths(const struct stk__index_opts *o, const char *abs, bool is_list,
		      uint64_t key, char *beside, char *user, size_t len, char *why,
		      size_t whylen)
{
	if (is_list)
		snprintf(beside, len, "%s%s", abs, IDX_NAME);
	else
		snprintf(beside, len, "%s/%s", abs, IDX_NAME);
	char dir[PATH_MAX];
	user[0] = 0;
	int rc;
	if (o->cache_dir) {
		snprintf(dir, sizeof(dir), "%s", o->cache_dir);
		if (mkdir_private(dir) < 0) {
			/* a folder that cannot be made still names where the cache
			 * was tried: the write fails there, with the reason */
			snprintf(user, len, "%s/index-%016llx", dir, (unsigned long long)key);
			return;
		}
		rc = stk__trust_dir(dir, why, whylen);
	} else {
		rc = stk__cache_dir(dir, sizeof(dir), why, whylen);
	}
	/* refused (another's, writable by others): no cache there; any other
	 * failure still names where the write will fail, and why */
	if (rc >= 0 || (rc != -EPERM && rc != -ENAMETOOLONG))
		snprintf(user, len, "%s/index-%016llx", dir, (unsigned long long)key);
}
