/*
 * dataset.c — the index of samples: path, size and label of each.
 *
 * A folder follows torchvision's ImageFolder rule: sorted class folders get
 * labels 0..K-1, files are taken from each class folder's tree in the order
 * of sorted(os.walk()) then sorted file names, filtered by extension.  A folder
 * with no subfolders is flat (label -1).  A regular file is a list of
 * `path[<TAB>label]` lines, relative paths resolved against the list's folder.
 *
 * Walking a million files costs a stat each, so the index is cached: beside the
 * data when it is writable (ROOT/.stoker-index, LIST.stoker-index), else in the
 * user's cache folder.  The cache is one file mapped read-only; it is reused
 * while every indexed folder's mtime (and, for a list, the list's mtime and
 * size) is unchanged: adding, removing or renaming a file changes its folder's
 * mtime.  Rewriting a file in place with a new size is not noticed until then;
 * the read of a shrunken file fails as a short read naming the file.
 */
#include "internal.h"
#include "tar.h"

#include <dirent.h>
#include <glob.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define IDX_MAGIC "STKIDX01"
#define IDX_VERSION 2u
#define IDX_NAME ".stoker-index"

enum { KIND_FOLDER = 1, KIND_FLAT = 2, KIND_LIST = 3, KIND_SHARDS = 4 };

struct idx_header {
	char magic[8];
	uint32_t version;
	uint32_t kind;
	uint64_t key;        /* hash of the absolute root, kind and extensions */
	uint64_t n, nclasses, ndirs;
	uint64_t names_len, class_names_len, dir_names_len;
	uint64_t max_size;
	uint64_t total_len;  /* of the whole file: a truncated cache is refused */
};

/* A folder (or the list file) whose change invalidates the index. */
struct idx_dir {
	uint64_t mtime_ns;
	uint64_t size;       /* list file only */
	uint64_t name;       /* offset in dir_names: path relative to root ("" = root) */
};

/* A growable byte buffer for the string arenas. */
struct buf {
	char *p;
	uint64_t len, cap;
};

static int buf_add(struct buf *b, const char *s, size_t l, uint64_t *off)
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

/* Everything the builder accumulates. */
struct builder {
	const struct stk__index_opts *o;
	int root_fd;
	struct stk_entry *e;
	int64_t n, cap;
	struct buf names, class_names, dir_names;
	struct idx_dir *dirs;
	uint64_t ndirs, dirs_cap;
	char *err;
	size_t errlen;
	const char *root;
};

static int fail(struct builder *b, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(struct builder *b, int rc, const char *fmt, ...)
{
	if (b->err && b->errlen) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(b->err, b->errlen, fmt, ap);
		va_end(ap);
	}
	return rc;
}

static uint64_t fnv1a(uint64_t h, const void *p, size_t l)
{
	const unsigned char *c = p;
	for (size_t i = 0; i < l; i++)
		h = (h ^ c[i]) * 0x100000001b3ull;
	return h;
}

static uint64_t mtime_ns(const struct stat *st)
{
	return (uint64_t)st->st_mtim.tv_sec * 1000000000ull + (uint64_t)st->st_mtim.tv_nsec;
}

static const char *const default_exts[] = {".jpg", ".jpeg", ".png", ".ppm", ".bmp",
					   ".pgm", ".tif", ".tiff", ".webp"};

static bool ext_ok(const char *exts, const char *name)
{
	size_t nl = strlen(name);
	if (!strncmp(name, ".stoker-", 8))
		return false;
	if (exts && !strcmp(exts, "*"))
		return true;
	if (!exts) {
		for (size_t i = 0; i < STK_ARRAY_SIZE(default_exts); i++) {
			size_t el = strlen(default_exts[i]);
			if (nl >= el && !strcasecmp(name + nl - el, default_exts[i]))
				return true;
		}
		return false;
	}
	for (const char *p = exts; *p;) {
		const char *c = strchr(p, ',');
		size_t el = c ? (size_t)(c - p) : strlen(p);
		if (el && nl >= el && !strncasecmp(name + nl - el, p, el))
			return true;
		if (!c)
			break;
		p = c + 1;
	}
	return false;
}

static int add_entry_at(struct builder *b, uint64_t name, uint64_t size, int64_t label,
			uint64_t offset)
{
	if (b->n == b->cap) {
		int64_t cap = b->cap ? b->cap * 2 : 4096;
		struct stk_entry *e = realloc(b->e, (size_t)cap * sizeof(*e));
		if (!e)
			return fail(b, -ENOMEM, "%s: out of memory indexing", b->root);
		b->e = e;
		b->cap = cap;
	}
	b->e[b->n++] = (struct stk_entry){.size = size, .label = label, .name = name, .offset = offset};
	return 0;
}

static int add_entry(struct builder *b, const char *rel, uint64_t size, int64_t label)
{
	uint64_t off;
	if (buf_add(&b->names, rel, strlen(rel), &off))
		return fail(b, -ENOMEM, "%s: out of memory indexing", b->root);
	return add_entry_at(b, off, size, label, 0);
}

static int add_dir(struct builder *b, const char *rel, const struct stat *st)
{
	if (b->ndirs == b->dirs_cap) {
		uint64_t cap = b->dirs_cap ? b->dirs_cap * 2 : 64;
		struct idx_dir *d = realloc(b->dirs, cap * sizeof(*d));
		if (!d)
			return fail(b, -ENOMEM, "%s: out of memory indexing", b->root);
		b->dirs = d;
		b->dirs_cap = cap;
	}
	uint64_t off;
	if (buf_add(&b->dir_names, rel, strlen(rel), &off))
		return fail(b, -ENOMEM, "%s: out of memory indexing", b->root);
	b->dirs[b->ndirs++] = (struct idx_dir){
		.mtime_ns = mtime_ns(st), .size = (uint64_t)st->st_size, .name = off};
	return 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A directory's entries split into sorted subfolders and sorted files (following
 * symlinks, like os.walk(followlinks=True)).  Names are malloc'ed. */
struct listing {
	char **dirs, **files;
	size_t ndirs, nfiles;
};

static void listing_free(struct listing *l)
{
	for (size_t i = 0; i < l->ndirs; i++)
		free(l->dirs[i]);
	for (size_t i = 0; i < l->nfiles; i++)
		free(l->files[i]);
	free(l->dirs);
	free(l->files);
	memset(l, 0, sizeof(*l));
}

static int push(char ***v, size_t *n, size_t *cap, const char *s)
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

/* Lists rel (relative to root); sizes of regular files go to *sizes if wanted. */
static int list_dir(struct builder *b, const char *rel, struct listing *l, struct stat *dst)
{
	memset(l, 0, sizeof(*l));
	int fd = openat(b->root_fd, *rel ? rel : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return fail(b, -errno, "%s/%s: cannot open folder: %s", b->root, rel, strerror(errno));
	if (fstat(fd, dst)) {
		int e = errno;
		close(fd);
		return fail(b, -e, "%s/%s: %s", b->root, rel, strerror(e));
	}
	DIR *d = fdopendir(fd);
	if (!d) {
		int e = errno;
		close(fd);
		return fail(b, -e, "%s/%s: %s", b->root, rel, strerror(e));
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
			if (fstatat(dirfd(d), de->d_name, &st, 0))
				continue; /* dangling symlink: not a sample */
			isdir = S_ISDIR(st.st_mode);
			isreg = S_ISREG(st.st_mode);
		}
		if (isdir)
			rc = push(&l->dirs, &l->ndirs, &dcap, de->d_name);
		else if (isreg)
			rc = push(&l->files, &l->nfiles, &fcap, de->d_name);
		if (rc)
			break;
	}
	closedir(d);
	if (rc) {
		listing_free(l);
		return fail(b, rc, "%s/%s: out of memory listing", b->root, rel);
	}
	if (l->ndirs)
		qsort(l->dirs, l->ndirs, sizeof(char *), cmp_str);
	if (l->nfiles)
		qsort(l->files, l->nfiles, sizeof(char *), cmp_str);
	return 0;
}

static int join(char *out, size_t len, const char *a, const char *b)
{
	int n = *a ? snprintf(out, len, "%s/%s", a, b) : snprintf(out, len, "%s", b);
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* Adds the files of one directory (already listed) with their sizes. */
static int add_files(struct builder *b, const char *rel, const struct listing *l, int64_t label)
{
	int dfd = openat(b->root_fd, *rel ? rel : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return fail(b, -errno, "%s/%s: %s", b->root, rel, strerror(errno));
	int rc = 0;
	char path[PATH_MAX];
	for (size_t i = 0; i < l->nfiles && !rc; i++) {
		if (!ext_ok(b->o->extensions, l->files[i]))
			continue;
		struct stat st;
		if (fstatat(dfd, l->files[i], &st, 0)) {
			rc = fail(b, -errno, "%s/%s/%s: %s", b->root, rel, l->files[i], strerror(errno));
			break;
		}
		if (join(path, sizeof(path), rel, l->files[i]))
			rc = fail(b, -ENAMETOOLONG, "%s/%s/%s: path too long", b->root, rel, l->files[i]);
		else
			rc = add_entry(b, path, (uint64_t)st.st_size, label);
	}
	close(dfd);
	return rc;
}

/* The files of one class folder: every folder of its tree in sorted path order
 * (Python's sorted(os.walk())), each folder's files sorted by name. */
static int walk_class(struct builder *b, const char *class_rel, int64_t label)
{
	char **todo = NULL;
	size_t ntodo = 0, cap = 0;
	int rc = push(&todo, &ntodo, &cap, class_rel);
	/* Collect the folders first: sorted(os.walk()) orders them by full path. */
	for (size_t i = 0; !rc && i < ntodo; i++) {
		struct listing l;
		struct stat st;
		if ((rc = list_dir(b, todo[i], &l, &st)))
			break;
		rc = add_dir(b, todo[i], &st);
		char path[PATH_MAX];
		for (size_t j = 0; !rc && j < l.ndirs; j++) {
			if (join(path, sizeof(path), todo[i], l.dirs[j]))
				rc = fail(b, -ENAMETOOLONG, "%s/%s: path too long", b->root, todo[i]);
			else if (push(&todo, &ntodo, &cap, path))
				rc = fail(b, -ENOMEM, "%s: out of memory", b->root);
		}
		listing_free(&l);
	}
	if (!rc)
		qsort(todo, ntodo, sizeof(char *), cmp_str);
	for (size_t i = 0; !rc && i < ntodo; i++) {
		struct listing l;
		struct stat st;
		if ((rc = list_dir(b, todo[i], &l, &st)))
			break;
		rc = add_files(b, todo[i], &l, label);
		listing_free(&l);
	}
	for (size_t i = 0; i < ntodo; i++)
		free(todo[i]);
	free(todo);
	return rc;
}

static int build_folder(struct builder *b, uint32_t *kind)
{
	struct listing top;
	struct stat st;
	int rc = list_dir(b, "", &top, &st);
	if (rc)
		return rc;
	rc = add_dir(b, "", &st);
	if (!rc && top.ndirs == 0) {
		*kind = KIND_FLAT;
		rc = add_files(b, "", &top, -1);
	} else if (!rc) {
		*kind = KIND_FOLDER;
		uint64_t off;
		for (size_t i = 0; !rc && i < top.ndirs; i++) {
			if (buf_add(&b->class_names, top.dirs[i], strlen(top.dirs[i]), &off))
				rc = fail(b, -ENOMEM, "%s: out of memory", b->root);
			else
				rc = walk_class(b, top.dirs[i], (int64_t)i);
		}
	}
	listing_free(&top);
	return rc;
}

static int build_list(struct builder *b, const char *list_path)
{
	FILE *f = fopen(list_path, "re");
	if (!f)
		return fail(b, -errno, "%s: cannot open file list: %s", list_path, strerror(errno));
	struct stat st;
	int rc = fstat(fileno(f), &st) ? -errno : 0;
	if (!rc) /* the list itself is what is validated */
		rc = add_dir(b, "", &st);
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	uint64_t lineno = 0;
	while (!rc && (len = getline(&line, &cap, f)) >= 0) {
		lineno++;
		while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
			line[--len] = 0;
		if (len == 0 || line[0] == '#')
			continue;
		int64_t label = -1;
		char *tab = strchr(line, '\t');
		if (tab) {
			*tab = 0;
			char *end;
			errno = 0;
			long long v = strtoll(tab + 1, &end, 10);
			if (errno || end == tab + 1 || *end || v < -1) {
				rc = fail(b, -EINVAL, "%s:%llu: label '%s' is not an integer >= -1",
					  list_path, (unsigned long long)lineno, tab + 1);
				break;
			}
			label = v;
		}
		struct stat fs;
		if (fstatat(b->root_fd, line, &fs, 0)) {
			rc = fail(b, -errno, "%s:%llu: %s: %s", list_path, (unsigned long long)lineno,
				  line, strerror(errno));
			break;
		}
		if (!S_ISREG(fs.st_mode)) {
			rc = fail(b, -EISDIR, "%s:%llu: %s: not a regular file", list_path,
				  (unsigned long long)lineno, line);
			break;
		}
		rc = add_entry(b, line, (uint64_t)fs.st_size, label);
	}
	free(line);
	fclose(f);
	return rc;
}

/* --- tar shards ------------------------------------------------------------
 * WebDataset's rule: a member's key is its path up to the first dot of its
 * base name, the rest is its extension; consecutive members with one key are
 * one sample.  The sample's bytes are its first member that is not a label
 * (.cls, whose text is the label); a sample with no such member is not one. */

static void split_key(const char *name, size_t *keylen, const char **ext)
{
	const char *base = strrchr(name, '/');
	base = base ? base + 1 : name;
	const char *dot = strchr(base, '.');
	*keylen = dot ? (size_t)(dot - name) : strlen(name);
	*ext = dot ? dot + 1 : "";
}

/* A set of 64-bit key hashes, to refuse a key seen earlier in the shard. */
struct keyset {
	uint64_t *v;
	size_t cap, n;
};

static int keyset_add(struct keyset *k, uint64_t h) /* 1 added, 0 present, <0 */
{
	if (!h)
		h = 1;
	if (2 * (k->n + 1) > k->cap) {
		size_t cap = k->cap ? k->cap * 2 : 1024;
		uint64_t *v = calloc(cap, sizeof(*v));
		if (!v)
			return -ENOMEM;
		for (size_t i = 0; i < k->cap; i++)
			for (size_t j = k->v[i] % cap; k->v[i]; j = (j + 1) % cap)
				if (!v[j]) {
					v[j] = k->v[i];
					break;
				}
		free(k->v);
		k->v = v;
		k->cap = cap;
	}
	for (size_t j = h % k->cap;; j = (j + 1) % k->cap) {
		if (k->v[j] == h)
			return 0;
		if (!k->v[j]) {
			k->v[j] = h;
			k->n++;
			return 1;
		}
	}
}

static void warn(struct builder *b, const char *msg)
{
	char *w = b->o->warning;
	if (!w || !b->o->warnlen || w[0])
		return; /* the first is the one worth reading */
	snprintf(w, b->o->warnlen, "%s", msg);
}

/* Indexes one shard (rel, relative to root).  A damaged shard fails the
 * index, or under skip_bad keeps the samples before the damage. */
static int index_shard(struct builder *b, const char *rel)
{
	int fd = openat(b->root_fd, rel, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st)) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		return fail(b, -e, "%s/%s: %s", b->root, rel, strerror(e));
	}
	uint64_t name;
	int rc = add_dir(b, rel, &st);
	if (!rc && buf_add(&b->names, rel, strlen(rel), &name))
		rc = fail(b, -ENOMEM, "%s: out of memory indexing", b->root);
	struct stk__tar_iter *it = NULL;
	if (!rc && (rc = stk__tar_open(&it, fd, (uint64_t)st.st_size)))
		rc = fail(b, rc, "%s/%s: %s", b->root, rel, stk_strerror(rc));
	struct keyset seen = {0};
	char key[PATH_MAX] = "", why[512];
	size_t keylen = 0;
	bool have = false, have_data = false;
	uint64_t data_off = 0, data_size = 0;
	int64_t label = -1;
	struct stk__tar_member m;
	int more = 1;
	while (!rc && more > 0) {
		more = stk__tar_next(it, &m, why, sizeof(why));
		size_t kl = 0;
		const char *ext = "";
		if (more > 0)
			split_key(m.name, &kl, &ext);
		bool same = more > 0 && have && kl == keylen && !memcmp(m.name, key, kl);
		if (have && !same) { /* the previous sample is complete */
			if (have_data)
				rc = add_entry_at(b, name, data_size, label, data_off);
			have = false;
		}
		if (rc || more <= 0)
			break;
		if (!same) {
			if (kl >= sizeof(key)) {
				snprintf(why, sizeof(why), "offset %llu: key longer than %zu bytes",
					 (unsigned long long)m.header_off, sizeof(key) - 1);
				more = STK_ECORRUPT;
				break;
			}
			int added = keyset_add(&seen, fnv1a(0xcbf29ce484222325ull, m.name, kl));
			if (added < 0) {
				rc = fail(b, added, "%s: out of memory indexing", b->root);
				break;
			}
			if (!added) {
				snprintf(why, sizeof(why), "offset %llu: key '%.*s' appears again, apart "
					 "from its first members (duplicate key)",
					 (unsigned long long)m.header_off, (int)kl, m.name);
				more = STK_ECORRUPT;
				break;
			}
			memcpy(key, m.name, kl);
			key[kl] = 0;
			keylen = kl;
			have = true;
			have_data = false;
			label = -1;
		}
		if (!strcmp(ext, "cls")) {
			char txt[32] = "";
			size_t n = m.size < sizeof(txt) - 1 ? (size_t)m.size : sizeof(txt) - 1;
			char *end;
			errno = 0;
			long long v = pread(fd, txt, n, (off_t)m.data_off) == (ssize_t)n
					      ? strtoll(txt, &end, 10) : (end = txt, 0);
			while (end && (*end == ' ' || *end == '\n' || *end == '\r' || *end == '\t'))
				end++;
			if (end == txt || *end || errno || v < -1) {
				snprintf(why, sizeof(why), "offset %llu: %s: label '%.*s' is not an "
					 "integer", (unsigned long long)m.data_off, m.name, (int)n, txt);
				more = STK_ECORRUPT;
				break;
			}
			label = v;
		} else if (!have_data) {
			have_data = true;
			data_off = m.data_off;
			data_size = m.size;
		}
	}
	if (!rc && more < 0) {
		char msg[PATH_MAX + 600];
		snprintf(msg, sizeof(msg), "%s/%s: %s", b->root, rel, why);
		if (b->o->skip_bad)
			warn(b, msg); /* keep the samples before the damage */
		else
			rc = fail(b, more, "%s", msg);
	}
	free(seen.v);
	stk__tar_close(it);
	close(fd);
	return rc;
}

static bool is_pattern(const char *p)
{
	return strpbrk(p, "*?[{") != NULL;
}

static bool ends_tar(const char *name)
{
	size_t l = strlen(name);
	return l > 4 && !strcmp(name + l - 4, ".tar");
}

/* Expands `dir/prefix{A..B}suffix` (numbers, zero-padded to A's width) and
 * glob characters into sorted shard paths relative to dir. */
static int expand_pattern(struct builder *b, const char *pattern, char ***out, size_t *n)
{
	size_t cap = 0;
	*out = NULL;
	*n = 0;
	const char *base = strrchr(pattern, '/');
	base = base ? base + 1 : pattern;
	const char *lb = strchr(base, '{'), *dots = lb ? strstr(lb, "..") : NULL,
		   *rb = dots ? strchr(dots, '}') : NULL;
	char one[PATH_MAX];
	if (lb && dots && rb) {
		char *end;
		unsigned long long a = strtoull(lb + 1, &end, 10), z;
		int width = (int)(dots - lb - 1);
		if (end != dots || width <= 0)
			return fail(b, -EINVAL, "%s: brace pattern wants {FIRST..LAST} numbers", pattern);
		z = strtoull(dots + 2, &end, 10);
		if (end != rb || z < a || z - a > 10000000)
			return fail(b, -EINVAL, "%s: brace pattern wants {FIRST..LAST} numbers", pattern);
		for (unsigned long long i = a; i <= z; i++) {
			snprintf(one, sizeof(one), "%.*s%0*llu%s", (int)(lb - base), base, width, i, rb + 1);
			if (push(out, n, &cap, one))
				return fail(b, -ENOMEM, "out of memory");
		}
	} else {
		glob_t g;
		int grc = glob(pattern, 0, NULL, &g);
		if (grc == GLOB_NOMATCH)
			return fail(b, -ENOENT, "%s: no file matches", pattern);
		if (grc)
			return fail(b, -EINVAL, "%s: bad pattern", pattern);
		for (size_t i = 0; i < g.gl_pathc; i++) {
			const char *p = strrchr(g.gl_pathv[i], '/');
			if (push(out, n, &cap, p ? p + 1 : g.gl_pathv[i])) {
				globfree(&g);
				return fail(b, -ENOMEM, "out of memory");
			}
		}
		globfree(&g);
	}
	return 0;
}

/* A folder of .tar files (and no subfolders) is a shard set; so is a pattern. */
static int list_shards(struct builder *b, char ***out, size_t *n)
{
	struct listing l;
	struct stat st;
	int rc = list_dir(b, "", &l, &st);
	if (rc)
		return rc;
	size_t cap = 0;
	*out = NULL;
	*n = 0;
	for (size_t i = 0; !rc && i < l.nfiles; i++)
		if (ends_tar(l.files[i]) && push(out, n, &cap, l.files[i]))
			rc = fail(b, -ENOMEM, "out of memory");
	if (!rc)
		rc = add_dir(b, "", &st); /* a shard added or removed: stale */
	listing_free(&l);
	return rc;
}

static bool is_shard_dir(int root_fd)
{
	DIR *d = fdopendir(openat(root_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
	if (!d)
		return false;
	bool tar = false, sub = false;
	struct dirent *de;
	while ((de = readdir(d)) && !sub) {
		if (de->d_name[0] == '.')
			continue;
		sub |= de->d_type == DT_DIR;
		tar |= ends_tar(de->d_name);
	}
	closedir(d);
	return tar && !sub;
}

static int build_shards(struct builder *b, const char *pattern)
{
	char **names = NULL;
	size_t n = 0;
	int rc = pattern ? expand_pattern(b, pattern, &names, &n) : list_shards(b, &names, &n);
	if (!rc && n > 1)
		qsort(names, n, sizeof(char *), cmp_str);
	for (size_t i = 0; !rc && i < n; i++)
		rc = index_shard(b, names[i]);
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return rc;
}

/* --- the cache file ----------------------------------------------------- */

static size_t pad8(size_t x)
{
	return (x + 7) & ~(size_t)7;
}

static int write_index(const char *path, const struct idx_header *h, const struct builder *b)
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
		uint64_t m = mtime_ns(&st);
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

/* Maps a cache file and checks it against the data; 0 and fills ds, or <0. */
static int load_index(const char *path, uint64_t key, int root_fd, struct stk_dataset *ds)
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
		if (fstatat(root_fd, rel, &ds_st, *rel ? 0 : AT_EMPTY_PATH) || mtime_ns(&ds_st) != dirs[i].mtime_ns ||
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

static int set_classes(struct stk_dataset *ds, uint64_t class_names_len)
{
	if (!ds->nclasses)
		return 0;
	ds->classes = calloc((size_t)ds->nclasses, sizeof(char *));
	if (!ds->classes)
		return -ENOMEM;
	uint64_t off = 0;
	for (int64_t i = 0; i < ds->nclasses; i++) {
		if (off >= class_names_len)
			return STK_EINDEX;
		ds->classes[i] = ds->class_names + off;
		off += strlen(ds->classes[i]) + 1;
	}
	return 0;
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

/* The two places a cache may be: beside the data, and in the cache folder. */
static void cache_paths(const struct stk__index_opts *o, const char *abs, bool is_list,
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

int stk__dataset_open(struct stk_dataset **out, const struct stk__index_opts *o, char *err,
		      size_t errlen)
{
	*out = NULL;
	struct builder b = {.o = o, .err = err, .errlen = errlen, .root = o->path, .root_fd = -1};
	if (!o->path || !*o->path)
		return fail(&b, -EINVAL, "no dataset path given");
	char abs[PATH_MAX];
	const char *pattern = NULL; /* shards named by a pattern or one .tar: abs */
	struct stat st = {0};
	if (!realpath(o->path, abs)) {
		int e = errno;
		/* not a path: a shard pattern, whose folder must exist */
		char dir[PATH_MAX];
		const char *slash = strrchr(o->path, '/');
		snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash - o->path) : 1,
			 slash ? o->path : ".");
		if (e != ENOENT || !is_pattern(slash ? slash + 1 : o->path) || !realpath(dir, abs) ||
		    strlen(abs) + strlen(slash ? slash : o->path) + 2 >= sizeof(abs))
			return fail(&b, -e, "%s: %s", o->path, strerror(e));
		size_t al = strlen(abs);
		snprintf(abs + al, sizeof(abs) - al, "/%s", slash ? slash + 1 : o->path);
		pattern = abs;
	} else if (stat(abs, &st)) {
		return fail(&b, -errno, "%s: %s", o->path, strerror(errno));
	} else if (S_ISREG(st.st_mode) && ends_tar(abs)) {
		pattern = abs; /* one shard */
	}
	bool is_list = !pattern && S_ISREG(st.st_mode);
	if (!pattern && !is_list && !S_ISDIR(st.st_mode))
		return fail(&b, -EINVAL, "%s: neither a folder nor a file list", o->path);

	struct stk_dataset *ds = calloc(1, sizeof(*ds));
	if (!ds)
		return fail(&b, -ENOMEM, "out of memory");
	ds->root_fd = -1;
	char rootdir[PATH_MAX];
	snprintf(rootdir, sizeof(rootdir), "%s", abs);
	if (is_list || pattern) {
		char *slash = strrchr(rootdir, '/');
		if (slash == rootdir)
			slash[1] = 0;
		else if (slash)
			*slash = 0;
	}
	ds->root = strdup(rootdir);
	ds->root_fd = open(rootdir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (!ds->root || ds->root_fd < 0) {
		int rc = fail(&b, ds->root ? -errno : -ENOMEM, "%s: %s", rootdir,
			      strerror(ds->root ? errno : ENOMEM));
		stk__dataset_close(ds);
		return rc;
	}
	b.root_fd = ds->root_fd;
	b.root = ds->root;

	bool shards = pattern || is_shard_dir(ds->root_fd);
	uint64_t key = fnv1a(0xcbf29ce484222325ull, abs, strlen(abs) + 1);
	key = fnv1a(key, shards ? "S" : is_list ? "L" : "F", 1);
	key = fnv1a(key, o->extensions ? o->extensions : "", o->extensions ? strlen(o->extensions) : 0);

	char beside[PATH_MAX + 32], user[PATH_MAX + 32];
	cache_paths(o, abs, is_list, key, beside, user, sizeof(beside));
	if (pattern)
		beside[0] = 0; /* no file of ours beside a pattern's shards */
	int list_fd = -1;
	if (is_list) /* a list's cache is validated against the list itself */
		list_fd = open(abs, O_PATH | O_CLOEXEC);
	int vfd = is_list ? list_fd : ds->root_fd;
	if (!o->no_cache && vfd >= 0) {
		const char *cands[] = {beside, user};
		for (size_t i = 0; i < 2; i++) {
			if (!cands[i][0])
				continue;
			if (load_index(cands[i], key, vfd, ds) == 0) {
				ds->shards = shards;
				uint64_t cl = ((const struct idx_header *)ds->map)->class_names_len;
				if (set_classes(ds, cl)) {
					munmap(ds->map, ds->map_len);
					ds->map = NULL;
					continue;
				}
				if (list_fd >= 0)
					close(list_fd);
				*out = ds;
				return 0;
			}
		}
	}
	if (list_fd >= 0)
		close(list_fd);

	uint32_t kind = shards ? KIND_SHARDS : KIND_LIST;
	int rc = shards    ? build_shards(&b, pattern)
		 : is_list ? build_list(&b, abs)
			   : build_folder(&b, &kind);
	if (!rc && b.n == 0)
		rc = fail(&b, STK_EEMPTY, "%s: no samples found%s", o->path,
			  is_list ? "" : " (ImageFolder extensions; set extensions=\"*\" for any file)");
	if (!rc && b.n > (int64_t)UINT32_MAX)
		rc = fail(&b, -E2BIG, "%s: more than 2^32 samples", o->path);
	if (rc) {
		free(b.e);
		free(b.names.p);
		free(b.class_names.p);
		free(b.dirs);
		free(b.dir_names.p);
		stk__dataset_close(ds);
		return rc;
	}
	struct idx_header h = {.version = IDX_VERSION, .kind = kind, .key = key, .n = (uint64_t)b.n,
			       .ndirs = b.ndirs, .names_len = b.names.len,
			       .class_names_len = b.class_names.len,
			       .dir_names_len = b.dir_names.len};
	memcpy(h.magic, IDX_MAGIC, 8);
	for (uint64_t off = 0; off < b.class_names.len; off += strlen(b.class_names.p + off) + 1)
		h.nclasses++;
	for (int64_t i = 0; i < b.n; i++)
		if (b.e[i].size > h.max_size)
			h.max_size = b.e[i].size;
	h.total_len = pad8(sizeof(h)) + pad8((size_t)b.n * sizeof(*b.e)) + pad8(b.names.len) +
		      pad8(b.class_names.len) + pad8(b.ndirs * sizeof(*b.dirs)) + pad8(b.dir_names.len);
	if (!o->no_cache && (!beside[0] || write_index(beside, &h, &b)) && user[0])
		write_index(user, &h, &b); /* best effort: a failed cache only costs time */
	ds->shards = shards;

	ds->n = b.n;
	ds->entries = b.e;
	ds->names = b.names.p;
	ds->names_len = b.names.len;
	ds->max_size = h.max_size;
	ds->class_names = b.class_names.p;
	ds->nclasses = (int64_t)h.nclasses;
	free(b.dirs);
	free(b.dir_names.p);
	if (set_classes(ds, b.class_names.len)) {
		stk__dataset_close(ds);
		return fail(&b, -ENOMEM, "out of memory");
	}
	*out = ds;
	return 0;
}

void stk__dataset_close(struct stk_dataset *ds)
{
	if (!ds)
		return;
	if (ds->map) {
		munmap(ds->map, ds->map_len);
	} else {
		free(ds->entries);
		free(ds->names);
		free(ds->class_names);
	}
	free(ds->classes);
	if (ds->root_fd >= 0)
		close(ds->root_fd);
	free(ds->root);
	free(ds);
}
