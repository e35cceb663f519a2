/*
 * dataset/shards.c — the index of tar shards (WebDataset's layout).
 *
 * WebDataset's rule: a member's key is its path up to the first dot of its
 * base name, the rest is its extension; consecutive members with one key are
 * one sample.  The sample's bytes are its first member that is not a label
 * (.cls, whose text is the label); a sample with no such member is not one.
 * Each shard is read for its tar headers only (dataset/tar.c); the samples point
 * into the shard at their bytes' offsets.  Every member the archive holds is
 * either read or refused by name: a hard or symbolic link to a member before
 * it in the shard is its target's bytes (a map of the shard's members so
 * far); a link elsewhere, a sparse file (its data is a map of chunks, not
 * the file), a device, a fifo or an unknown type is refused with its sample,
 * as damage is (fail: the index fails naming it; skip: left out, counted).
 */
#include "base/internal.h"
#include "dataset/build.h"
#include "dataset/tar.h"

#include <dirent.h>
#include <fcntl.h>
#include <glob.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* The shard's members so far, by normalized path: what a link may name. */
struct member {
	uint64_t hash, name; /* name: offset in the names buffer */
	uint64_t off, size, tag;
};
struct members {
	struct member *v;
	size_t cap, n;
	struct buf names;
};

/* path without "." and empty parts, ".." applied; -1 when it climbs above
 * the archive's root or does not fit. */
static int normalize(const char *path, char *out, size_t len)
{
	size_t n = 0;
	for (const char *p = path; *p;) {
		const char *e = strchrnul(p, '/');
		size_t l = (size_t)(e - p);
		if (l == 2 && p[0] == '.' && p[1] == '.') {
			if (!n)
				return -1;
			while (n && out[n - 1] != '/')
				n--;
			if (n)
				n--; /* the slash */
		} else if (l && !(l == 1 && p[0] == '.')) {
			if (n + !!n + l + 1 > len)
				return -1;
			if (n)
				out[n++] = '/';
			memcpy(out + n, p, l);
			n += l;
		}
		p = *e ? e + 1 : e;
	}
	out[n] = 0;
	return 0;
}

static struct member *members_find(struct members *ms, const char *norm, uint64_t h, bool *found)
{
	*found = false;
	for (size_t j = h % ms->cap;; j = (j + 1) % ms->cap) {
		struct member *m = &ms->v[j];
		if (!m->hash)
			return m;
		if (m->hash == h && !strcmp(ms->names.p + m->name, norm)) {
			*found = true;
			return m;
		}
	}
}

/* Records a member's bytes under its normalized name (a later one wins,
 * as tar's extraction does).  0 or -ENOMEM. */
static int members_add(struct members *ms, const char *norm, uint64_t off, uint64_t size,
		       uint64_t tag)
{
	if (2 * (ms->n + 1) > ms->cap) {
		size_t cap = ms->cap ? ms->cap * 2 : 256;
		struct member *v = calloc(cap, sizeof(*v));
		if (!v)
			return -ENOMEM;
		for (size_t i = 0; i < ms->cap; i++)
			for (size_t j = ms->v[i].hash % cap; ms->v[i].hash; j = (j + 1) % cap)
				if (!v[j].hash) {
					v[j] = ms->v[i];
					break;
				}
		free(ms->v);
		ms->v = v;
		ms->cap = cap;
	}
	uint64_t h = stk__fnv1a(0xcbf29ce484222325ull, norm, strlen(norm)) | 1;
	bool found;
	struct member *m = members_find(ms, norm, h, &found);
	if (!found) {
		if (stk__buf_add(&ms->names, norm, strlen(norm), &m->name))
			return -ENOMEM;
		m->hash = h;
		ms->n++;
	}
	m->off = off;
	m->size = size;
	m->tag = tag;
	return 0;
}

static const struct member *members_get(struct members *ms, const char *norm)
{
	bool found;
	if (!ms->cap)
		return NULL;
	struct member *m = members_find(
		ms, norm, stk__fnv1a(0xcbf29ce484222325ull, norm, strlen(norm)) | 1, &found);
	return found ? m : NULL;
}

/* Where a member's bytes are: its own (a file), its target's (a link to a
 * member before it), or NULL with the reason it is refused in why. */
static const struct member *resolve(struct members *ms, const struct stk__tar_member *m,
				    struct member *self, char *why, size_t len)
{
	char norm[PATH_MAX], target[PATH_MAX * 2];
	static const char *const other = "not a regular file, a link or a sparse file";
	if (m->kind == STK__TAR_FILE) {
		*self = (struct member){.off = m->data_off, .size = m->size, .tag = m->tag};
		return self;
	}
	if (m->kind == STK__TAR_SPARSE) {
		snprintf(why, len, "a sparse file (type '%c'%s): its stored data is a map of chunks, "
			 "not the file; not read", m->typeflag ? m->typeflag : '0',
			 m->typeflag == 'S' ? ", GNU" : ", PAX GNU.sparse");
		return NULL;
	}
	if (m->kind == STK__TAR_OTHER) {
		snprintf(why, len, "of type '%c' (%s): not read",
			 m->typeflag >= 0x20 && m->typeflag < 0x7f ? m->typeflag : '?',
			 m->typeflag == '3' ? "character device" : m->typeflag == '4' ? "block device"
			 : m->typeflag == '6' ? "fifo" : m->typeflag == 'M' ? "a part of a multi-volume file"
			 : other);
		return NULL;
	}
	const char *kind = m->kind == STK__TAR_HARDLINK ? "a hard link" : "a symbolic link";
	if (!m->link || !*m->link) {
		snprintf(why, len, "%s without a target: not read", kind);
		return NULL;
	}
	if (m->kind == STK__TAR_SYMLINK) {
		if (m->link[0] == '/') {
			snprintf(why, len, "a symbolic link to '%s', outside the shard: not read", m->link);
			return NULL;
		}
		const char *slash = strrchr(m->name, '/');
		snprintf(target, sizeof(target), "%.*s%s%s", slash ? (int)(slash - m->name) : 0,
			 m->name, slash ? "/" : "", m->link);
	} else {
		snprintf(target, sizeof(target), "%s", m->link);
	}
	const struct member *t = normalize(target, norm, sizeof(norm)) ? NULL : members_get(ms, norm);
	if (!t)
		snprintf(why, len, "%s to '%s', which is not a member before it in this shard: "
			 "not read", kind, m->link);
	return t;
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
		/* a shard that cannot be opened: by the policy, like a sample */
		return stk__build_bad(b, BAD_OPEN, rel, -e, "%s/%s: %s", b->root, rel, strerror(e));
	}
	int rc = stk__build_add_dir(b, rel, &st);
	struct stk__tar_iter *it = NULL;
	if (!rc && (rc = stk__tar_open(&it, fd, (uint64_t)st.st_size)))
		rc = stk__build_fail(b, rc, "%s/%s: %s", b->root, rel, stk_strerror(rc));
	if (!rc)
		rc = stk__shards_index_tar(b, rel, it);
	stk__tar_close(it);
	close(fd);
	return rc;
}

int stk__shards_index_tar(struct builder *b, const char *rel, struct stk__tar_iter *it)
{
	uint64_t name;
	int rc = 0;
	if (stk__buf_add(&b->names, rel, strlen(rel), &name))
		rc = stk__build_fail(b, -ENOMEM, "%s: out of memory indexing", b->root);
	struct keyset seen = {0};
	struct members ms = {0};
	char key[PATH_MAX] = "", why[512], norm[PATH_MAX];
	size_t keylen = 0;
	bool have = false, have_data = false, refused = false;
	uint64_t data_off = 0, data_size = 0, data_tag = 0;
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
			if (have_data && !refused)
				rc = stk__build_add_entry(b, name, data_size, label, data_off, data_tag);
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
			int added = keyset_add(&seen, stk__fnv1a(0xcbf29ce484222325ull, m.name, kl));
			if (added < 0) {
				rc = stk__build_fail(b, added, "%s: out of memory indexing", b->root);
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
			have_data = refused = false;
			label = -1;
		}
		struct member self;
		const struct member *at = resolve(&ms, &m, &self, why, sizeof(why));
		if (at && !normalize(m.name, norm, sizeof(norm)) &&
		    members_add(&ms, norm, at->off, at->size, at->tag)) {
			rc = stk__build_fail(b, -ENOMEM, "%s: out of memory indexing", b->root);
			break;
		}
		if (!at) { /* its sample with it, counted once */
			if (!refused)
				rc = stk__build_bad(b, BAD_DAMAGE, rel, STK_EFORMAT, "%s/%s: offset %llu: "
						    "member '%s' is %s", b->root, rel,
						    (unsigned long long)m.header_off, m.name, why);
			refused = true;
			continue;
		}
		if (refused)
			continue;
		if (!strcmp(ext, "cls")) {
			char txt[32] = "";
			size_t n = at->size < sizeof(txt) - 1 ? (size_t)at->size : sizeof(txt) - 1;
			char *end;
			errno = 0;
			long long v = stk__tar_read(it, txt, n, at->off) == 0
					      ? strtoll(txt, &end, 10) : (end = txt, 0);
			while (end && (*end == ' ' || *end == '\n' || *end == '\r' || *end == '\t'))
				end++;
			if (end == txt || *end || errno || v < -1) {
				snprintf(why, sizeof(why), "offset %llu: %s: label '%.*s' is not an "
					 "integer", (unsigned long long)at->off, m.name, (int)n, txt);
				more = STK_ECORRUPT;
				break;
			}
			label = v;
		} else if (!have_data) {
			have_data = true;
			data_off = at->off;
			data_size = at->size;
			data_tag = at->tag;
		}
	}
	if (!rc && more < 0) /* under skip the samples before the damage stay */
		rc = stk__build_bad(b, BAD_DAMAGE, rel, more, "%s/%s: %s", b->root, rel, why);
	free(seen.v);
	free(ms.v);
	free(ms.names.p);
	return rc;
}

bool stk__shards_is_pattern(const char *p)
{
	return strpbrk(p, "*?[{") != NULL;
}

bool stk__shards_is_tar(const char *name)
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
			return stk__build_fail(b, -EINVAL, "%s: brace pattern wants {FIRST..LAST} numbers", pattern);
		z = strtoull(dots + 2, &end, 10);
		if (end != rb || z < a || z - a > 10000000)
			return stk__build_fail(b, -EINVAL, "%s: brace pattern wants {FIRST..LAST} numbers", pattern);
		for (unsigned long long i = a; i <= z; i++) {
			snprintf(one, sizeof(one), "%.*s%0*llu%s", (int)(lb - base), base, width, i, rb + 1);
			if (stk__str_push(out, n, &cap, one))
				return stk__build_fail(b, -ENOMEM, "out of memory");
		}
	} else {
		glob_t g;
		int grc = glob(pattern, 0, NULL, &g);
		if (grc == GLOB_NOMATCH)
			return stk__build_fail(b, -ENOENT, "%s: no file matches", pattern);
		if (grc)
			return stk__build_fail(b, -EINVAL, "%s: bad pattern", pattern);
		for (size_t i = 0; i < g.gl_pathc; i++) {
			const char *p = strrchr(g.gl_pathv[i], '/');
			if (stk__str_push(out, n, &cap, p ? p + 1 : g.gl_pathv[i])) {
				globfree(&g);
				return stk__build_fail(b, -ENOMEM, "out of memory");
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
	int rc = stk__build_list_dir(b, "", &l, &st);
	if (rc)
		return rc;
	size_t cap = 0;
	*out = NULL;
	*n = 0;
	for (size_t i = 0; !rc && i < l.nfiles; i++)
		if (stk__shards_is_tar(l.files[i]) && stk__str_push(out, n, &cap, l.files[i]))
			rc = stk__build_fail(b, -ENOMEM, "out of memory");
	if (!rc)
		rc = stk__build_add_dir(b, "", &st); /* a shard added or removed: stale */
	stk__listing_free(&l);
	return rc;
}

bool stk__shards_is_dir(int root_fd)
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
		tar |= stk__shards_is_tar(de->d_name);
	}
	closedir(d);
	return tar && !sub;
}

int stk__shards_build(struct builder *b, const char *pattern)
{
	char **names = NULL;
	size_t n = 0;
	int rc = pattern ? expand_pattern(b, pattern, &names, &n) : list_shards(b, &names, &n);
	if (!rc && n > 1)
		qsort(names, n, sizeof(char *), stk__cmp_str);
	for (size_t i = 0; !rc && i < n; i++)
		rc = index_shard(b, names[i]);
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return rc;
}
