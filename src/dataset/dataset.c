/*
 * dataset/dataset.c — the index of samples: path, size and label of each.
 *
 * A folder follows torchvision's ImageFolder rule: sorted class folders get
 * labels 0..K-1, files are taken from each class folder's tree in the order
 * of sorted(os.walk()) then sorted file names, filtered by extension.  A folder
 * with no subfolders is flat (label -1).  A regular file is a list of
 * `path[<TAB>label]` lines, relative paths resolved against the list's folder.
 * Tar shards (a folder of .tar files, a pattern, one .tar) are indexed by
 * dataset/shards.c with the builder this file owns (dataset/build.h).
 *
 * Walking a million files costs a stat each, so the index is cached
 * (dataset/cache.c): in the user's cache folder, keyed by the dataset, or
 * with index_beside beside the data when it is writable (ROOT/.stoker-index,
 * LIST.stoker-index).  The cache is one file
 * mapped read-only; it is reused while every indexed folder's mtime (and, for
 * a list, the list's mtime and size) is unchanged: adding, removing or
 * renaming a file changes its folder's mtime.  A file rewritten in place with
 * a new size is caught by its read (the loader asks for one byte past the
 * indexed size): STK_ESHORT or STK_EGREW naming the file, and the loader
 * removes the cache file so that the next create indexes it again.
 */
#include "base/internal.h"
#include "dataset/build.h"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

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

static int add_entry(struct builder *b, const char *rel, uint64_t size, int64_t label)
{
	uint64_t off;
	if (stk__buf_add(&b->names, rel, strlen(rel), &off))
		return stk__build_fail(b, -ENOMEM, "%s: out of memory indexing", b->root);
	return stk__build_add_entry(b, off, size, label, 0, 0);
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
	if (dfd < 0) {
		int e = errno;
		return stk__build_bad(b, BAD_OPEN, *rel ? rel : ".", -e, "%s/%s: cannot open folder: %s",
				      b->root, rel, strerror(e));
	}
	int rc = 0;
	char path[PATH_MAX];
	b->nfiles += l->nfiles;
	for (size_t i = 0; i < l->nfiles && !rc; i++) {
		if (!ext_ok(b->o->extensions, l->files[i]))
			continue;
		struct stat st;
		if (join(path, sizeof(path), rel, l->files[i])) {
			/* by the policy, as a file that cannot be opened: under skip
			 * left out and counted, not the end of the index */
			char *p = NULL;
			if (asprintf(&p, "%s%s%s", rel, *rel ? "/" : "", l->files[i]) < 0) {
				rc = stk__build_fail(b, -ENOMEM, "%s: out of memory", b->root);
				break;
			}
			rc = stk__build_bad(b, BAD_STAT, p, -ENAMETOOLONG, "%s/%s: path too long "
					    "(%zu bytes, PATH_MAX %d)", b->root, p, strlen(p), PATH_MAX);
			free(p);
		} else if (fstatat(dfd, l->files[i], &st, 0)) {
			/* a dangling symlink, a file gone: by the policy, like a read */
			int e = errno;
			rc = stk__build_bad(b, BAD_STAT, path, -e, "%s/%s: cannot index: %s", b->root,
					    path, strerror(e));
		} else {
			rc = add_entry(b, path, (uint64_t)st.st_size, label);
		}
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
	int rc = stk__str_push(&todo, &ntodo, &cap, class_rel);
	/* Collect the folders first: sorted(os.walk()) orders them by full path. */
	for (size_t i = 0; !rc && i < ntodo; i++) {
		struct listing l;
		struct stat st;
		if ((rc = stk__build_list_dir(b, todo[i], &l, &st))) {
			/* a folder that cannot be listed: by the policy (left out) */
			if ((rc = stk__build_bad(b, BAD_OPEN, todo[i], rc, "%s/%s: cannot list folder: %s",
						 b->root, todo[i], stk_strerror(rc))))
				break;
			free(todo[i]);
			todo[i] = todo[--ntodo]; /* the last one takes its place: visit i again */
			i--; /* may wrap; the loop's i++ brings it back (size_t arithmetic) */
			continue;
		}
		rc = stk__build_add_dir(b, todo[i], &st);
		char path[PATH_MAX];
		for (size_t j = 0; !rc && j < l.ndirs; j++) {
			if (join(path, sizeof(path), todo[i], l.dirs[j]))
				rc = stk__build_fail(b, -ENAMETOOLONG, "%s/%s: path too long", b->root, todo[i]);
			else if (stk__str_push(&todo, &ntodo, &cap, path))
				rc = stk__build_fail(b, -ENOMEM, "%s: out of memory", b->root);
		}
		stk__listing_free(&l);
	}
	if (!rc)
		qsort(todo, ntodo, sizeof(char *), stk__cmp_str);
	for (size_t i = 0; !rc && i < ntodo; i++) {
		struct listing l;
		struct stat st;
		if ((rc = stk__build_list_dir(b, todo[i], &l, &st))) {
			rc = stk__build_bad(b, BAD_OPEN, todo[i], rc, "%s/%s: cannot list folder: %s",
					    b->root, todo[i], stk_strerror(rc));
			continue;
		}
		rc = add_files(b, todo[i], &l, label);
		stk__listing_free(&l);
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
	int rc = stk__build_list_dir(b, "", &top, &st);
	if (rc)
		return rc;
	rc = stk__build_add_dir(b, "", &st);
	if (!rc && top.ndirs == 0) {
		*kind = KIND_FLAT;
		rc = add_files(b, "", &top, -1);
	} else if (!rc) {
		*kind = KIND_FOLDER;
		uint64_t off;
		for (size_t i = 0; !rc && i < top.ndirs; i++) {
			if (stk__buf_add(&b->class_names, top.dirs[i], strlen(top.dirs[i]), &off))
				rc = stk__build_fail(b, -ENOMEM, "%s: out of memory", b->root);
			else
				rc = walk_class(b, top.dirs[i], (int64_t)i);
		}
	}
	stk__listing_free(&top);
	return rc;
}

static int build_list(struct builder *b, const char *list_path)
{
	FILE *f = fopen(list_path, "re");
	if (!f)
		return stk__build_fail(b, -errno, "%s: cannot open file list: %s", list_path, strerror(errno));
	struct stat st;
	int rc = fstat(fileno(f), &st) ? -errno : 0;
	if (!rc) /* the list itself is what is validated */
		rc = stk__build_add_dir(b, "", &st);
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
		/* PATH a file given for a folder (a JPEG, a tar without .tar): say how
		 * it was read rather than quote its bytes as a label */
		bool text = true;
		for (ssize_t k = 0; k < len && text; k++)
			text = (unsigned char)line[k] >= 0x20 || line[k] == '\t';
		if (!text) {
			rc = stk__build_fail(b, -EINVAL, "%s: a file, so it was read as a file list (a "
					     "path, a TAB and a label a line), but line %llu is not "
					     "text: a folder or .tar shards were expected?", list_path,
					     (unsigned long long)lineno);
			break;
		}
		int64_t label = -1;
		char *tab = strchr(line, '\t');
		if (tab) {
			*tab = 0;
			char *end;
			errno = 0;
			long long v = strtoll(tab + 1, &end, 10);
			if (errno || end == tab + 1 || *end || v < -1) {
				rc = stk__build_fail(b, -EINVAL, "%s:%llu: label '%.40s' is not an "
						     "integer >= -1 (a file, so it was read as a file "
						     "list: a path, a TAB and a label a line)",
						     list_path, (unsigned long long)lineno, tab + 1);
				break;
			}
			label = v;
		}
		struct stat fs;
		if (fstatat(b->root_fd, line, &fs, 0)) {
			int e = errno;
			rc = stk__build_bad(b, BAD_STAT, line, -e, "%s:%llu: %s: %s", list_path,
					    (unsigned long long)lineno, line, strerror(e));
		} else if (!S_ISREG(fs.st_mode)) {
			rc = stk__build_bad(b, BAD_STAT, line, -EISDIR, "%s:%llu: %s: not a regular file",
					    list_path, (unsigned long long)lineno, line);
		} else {
			rc = add_entry(b, line, (uint64_t)fs.st_size, label);
		}
	}
	free(line);
	fclose(f);
	return rc;
}

/* The "no samples" error: for a folder, which names were looked for and the
 * option that widens them (named as the options struct and the option table
 * name it; front ends add their own spelling). */
static int no_samples(struct builder *b, const struct stk__index_opts *o, bool not_folder)
{
	if (not_folder)
		return stk__build_fail(b, STK_EEMPTY, "%s: no samples found", o->path);
	if (!b->nfiles)
		return stk__build_fail(b, STK_EEMPTY, "%s: no samples found: the folder is empty%s",
				       o->path, b->ndirs > 1 ? " (no file in it or its subfolders)" : "");
	if (o->extensions)
		return stk__build_fail(b, STK_EEMPTY, "%s: no samples found: no file ends in one "
				       "of the extensions \"%s\"", o->path, o->extensions);
	char list[256] = "";
	for (size_t i = 0, at = 0; i < STK_ARRAY_SIZE(default_exts) && at < sizeof(list); i++)
		at += (size_t)snprintf(list + at, sizeof(list) - at, "%s%s", i ? " " : "",
				       default_exts[i]);
	return stk__build_fail(b, STK_EEMPTY, "%s: no samples found: no file has an ImageFolder "
			       "extension (%s); the extensions option takes others, \"*\" any file",
			       o->path, list);
}

/* Everything was left out (skip policy): the first reason. */
static int no_samples_left(struct builder *b, const struct stk__index_opts *o)
{
	const char *rel = b->bad.p + strlen(b->bad.p) + 1, *msg = rel + strlen(rel) + 1;
	return stk__build_fail(b, STK_EEMPTY, "%s: no sample could be indexed; the first: %s",
			       o->path, msg);
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

/* Adds a line to what the caller says once (o->notice). */
static void say(const struct stk__index_opts *o, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void say(const struct stk__index_opts *o, const char *fmt, ...)
{
	if (!o->notice || !o->noticelen)
		return;
	size_t at = strlen(o->notice);
	if (at && at + 1 < o->noticelen)
		o->notice[at++] = '\n';
	if (at + 1 >= o->noticelen)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(o->notice + at, o->noticelen - at, fmt, ap);
	va_end(ap);
}

/* No cache could be written (read-only folders, a full disk, a cache path
 * that is a file): every start indexes again, so it is said, once a process
 * for each dataset, with where it was tried and why (rc 1: not tried). */
/* Whether what is said of the dataset with this key (or of this key and a
 * reason, hashed in) is said for the first time in this process. */
static bool first_time(uint64_t key)
{
	static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	static uint64_t said[32];
	static unsigned nsaid;
	bool again = false;
	pthread_mutex_lock(&mu);
	for (unsigned i = 0; i < nsaid && i < 32; i++)
		again |= said[i] == key;
	if (!again)
		said[nsaid++ % 32] = key;
	pthread_mutex_unlock(&mu);
	return !again;
}

static void cache_unwritten(const struct stk__index_opts *o, uint64_t key, const char *beside,
			    int rb, const char *user, int ru)
{
	if (!first_time(key) || !o->notice || !o->noticelen)
		return;
	char where[2 * PATH_MAX + 200];
	int n = 0;
	if (rb != 1)
		n = snprintf(where, sizeof(where), "%s: %s", beside, strerror(-rb));
	if (ru != 1 && n >= 0 && (size_t)n < sizeof(where))
		snprintf(where + n, sizeof(where) - (size_t)n, "%s%s: %s", n ? "; " : "", user,
			 strerror(-ru));
	else if (ru == 1 && n >= 0 && (size_t)n < sizeof(where))
		snprintf(where + n, sizeof(where) - (size_t)n, "%sno user cache folder "
			 "($XDG_CACHE_HOME, $HOME)", n ? "; " : "");
	say(o, "index cache not written, so every start indexes %s again: %s (cache_dir names a "
	    "writable folder)", o->path, where);
}

int stk__dataset_open(struct stk_dataset **out, const struct stk__index_opts *o, char *err,
		      size_t errlen)
{
	*out = NULL;
	struct builder b = {.o = o, .err = err, .errlen = errlen, .root = o->path, .root_fd = -1};
	if (!o->path || !*o->path)
		return stk__build_fail(&b, -EINVAL, "no dataset path given");
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
		if (e != ENOENT || !stk__shards_is_pattern(slash ? slash + 1 : o->path) ||
		    !realpath(dir, abs) || strlen(abs) + strlen(slash ? slash : o->path) + 2 >= sizeof(abs))
			return stk__build_fail(&b, -e, "%s: %s", o->path, strerror(e));
		size_t al = strlen(abs);
		snprintf(abs + al, sizeof(abs) - al, "/%s", slash ? slash + 1 : o->path);
		pattern = abs;
	} else if (stat(abs, &st)) {
		return stk__build_fail(&b, -errno, "%s: %s", o->path, strerror(errno));
	} else if (S_ISREG(st.st_mode) && stk__shards_is_tar(abs)) {
		pattern = abs; /* one shard */
	}
	bool is_list = !pattern && S_ISREG(st.st_mode);
	if (!pattern && !is_list && !S_ISDIR(st.st_mode))
		return stk__build_fail(&b, -EINVAL, "%s: neither a folder nor a file list", o->path);

	struct stk_dataset *ds = calloc(1, sizeof(*ds));
	if (!ds)
		return stk__build_fail(&b, -ENOMEM, "out of memory");
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
		int rc = stk__build_fail(&b, ds->root ? -errno : -ENOMEM, "%s: %s", rootdir,
					 strerror(ds->root ? errno : ENOMEM));
		stk__dataset_close(ds);
		return rc;
	}
	b.root_fd = ds->root_fd;
	b.root = ds->root;

	bool shards = pattern || stk__shards_is_dir(ds->root_fd);
	uint64_t key = stk__fnv1a(0xcbf29ce484222325ull, abs, strlen(abs) + 1);
	key = stk__fnv1a(key, shards ? "S" : is_list ? "L" : "F", 1);
	key = stk__fnv1a(key, o->extensions ? o->extensions : "",
			 o->extensions ? strlen(o->extensions) : 0);

	char beside[PATH_MAX + 32], user[PATH_MAX + 32], why[PATH_MAX + 200] = "";
	stk__index_paths(o, abs, is_list, key, beside, user, sizeof(beside), why, sizeof(why));
	bool no_cache = o->no_cache;
	if (!no_cache && !user[0] && why[0]) { /* refused: no cache at all */
		if (first_time(stk__fnv1a(key, why, strlen(why))))
			say(o, "%s: not used; the index is built without caching (cache_dir "
			    "names a folder of yours)", why);
		no_cache = true;
	}
	if (pattern)
		beside[0] = 0; /* no file of ours beside a pattern's shards */
	int list_fd = -1;
	if (is_list) /* a list's cache is validated against the list itself */
		list_fd = open(abs, O_PATH | O_CLOEXEC);
	int vfd = is_list ? list_fd : ds->root_fd;
	struct stat root_st;
	struct stk__index_check chk = {.key = key, .vfd = vfd, .data_fd = ds->root_fd,
				       .list = is_list ? abs : NULL};
	/* beside the data, its owner may have written the cache: they own the data */
	uid_t data_owner = fstat(ds->root_fd, &root_st) ? (uid_t)-1 : root_st.st_uid;
	bool said = false; /* a damaged cache is said once */
	if (!no_cache && vfd >= 0) {
		/* the place it is written first; beside the data, one written there
		 * earlier (index_beside, or an older stoker) is still used.  Asked
		 * for beside, the user's folder only when the data's is read-only. */
		const char *cands[] = {o->beside ? beside : user, o->beside ? user : beside};
		bool beside_rw = false;
		if (o->beside && beside[0]) {
			char dir[sizeof(beside)];
			snprintf(dir, sizeof(dir), "%s", beside);
			char *slash = strrchr(dir, '/');
			if (slash)
				*slash = 0;
			beside_rw = access(slash ? (dir[0] ? dir : "/") : ".", W_OK) == 0;
		}
		for (size_t i = 0; i < 2; i++) {
			if (!cands[i][0] || (i == 1 && beside_rw))
				continue;
			why[0] = 0;
			chk.also = cands[i] == beside ? data_owner : (uid_t)-1;
			int lr = stk__index_load(cands[i], &chk, ds, why, sizeof(why));
			if (lr == STK_EINDEX && !said) {
				say(o, "index cache %s is damaged (%s): not used, the index is built "
				    "again", cands[i], why);
				said = true;
			} else if (lr == 2) { /* untrusted: neither read nor replaced */
				if (first_time(stk__fnv1a(key, why, strlen(why))))
					say(o, "%s: not used; the index is built without caching",
					    why);
				no_cache = true;
				break;
			} else if (lr == -ESTALE && !said) {
				say(o, "index cache %s is out of date (%s): the index is built again",
				    cands[i], why);
				said = true;
			}
			if (lr != 0)
				continue;
			ds->shards = shards;
			uint64_t cl = ((const struct idx_header *)ds->map)->class_names_len;
			if (set_classes(ds, cl)) {
				munmap(ds->map, ds->map_len);
				ds->map = NULL;
				free(ds->classes);
				ds->classes = NULL;
				/* nothing may point into the map (close frees what is not) */
				ds->entries = NULL;
				ds->names = ds->class_names = NULL;
				ds->bad = NULL;
				ds->dirs = NULL;
				ds->ndirs = 0;
				continue;
			}
			if (list_fd >= 0)
				close(list_fd);
			ds->cache_path = strdup(cands[i]);
			int rc = stk__index_bad_report(ds, o, cands[i], err, errlen);
			if (rc) {
				stk__dataset_close(ds);
				return rc;
			}
			*out = ds;
			return 0;
		}
	}
	if (list_fd >= 0)
		close(list_fd);

	uint32_t kind = shards ? KIND_SHARDS : KIND_LIST;
	int rc = shards    ? stk__shards_build(&b, pattern)
		 : is_list ? build_list(&b, abs)
			   : build_folder(&b, &kind);
	if (!rc && b.n == 0)
		rc = b.nbad ? no_samples_left(&b, o) : no_samples(&b, o, shards || is_list);
	if (!rc && b.n > (int64_t)UINT32_MAX)
		rc = stk__build_fail(&b, -E2BIG, "%s: more than 2^32 samples", o->path);
	if (rc) {
		free(b.e);
		free(b.names.p);
		free(b.class_names.p);
		free(b.dirs);
		free(b.dir_names.p);
		free(b.bad.p);
		stk__dataset_close(ds);
		return rc;
	}
	struct idx_header h;
	stk__index_header(&h, kind, key, &b);
	if (!no_cache) { /* best effort: a failed cache only costs time, said */
		/* beside the data only when asked (index_beside), else the user's folder */
		int rb = o->beside && beside[0] ? stk__index_write(beside, !is_list, &h, &b) : 1;
		int ru = rb && user[0] ? stk__index_write(user, false, &h, &b) : 1;
		const char *at = !rb ? beside : !ru ? user : NULL;
		ds->cache_path = at ? strdup(at) : NULL;
		if (!at)
			cache_unwritten(o, key, beside, rb, user, ru);
	}
	ds->shards = shards;

	ds->n = b.n;
	ds->entries = b.e;
	ds->names = b.names.p;
	ds->names_len = b.names.len;
	ds->max_size = h.max_size;
	ds->class_names = b.class_names.p;
	ds->nclasses = (int64_t)h.nclasses;
	ds->nbad = b.nbad;
	ds->bad = b.bad.p;
	ds->bad_len = b.bad.len;
	ds->dirs = b.dirs;
	ds->ndirs = b.ndirs;
	ds->dir_names = b.dir_names.p ? b.dir_names.p : "";
	if (set_classes(ds, b.class_names.len)) {
		stk__dataset_close(ds);
		return stk__build_fail(&b, -ENOMEM, "out of memory");
	}
	stk__index_bad_report(ds, o, NULL, err, errlen); /* the warning (skip_bad) */
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
		free((char *)ds->bad);
		free((void *)ds->dirs);
		if (ds->ndirs)
			free((char *)ds->dir_names);
	}
	free(ds->classes);
	free(ds->cache_path);
	free(ds->vcache_path);
	if (ds->root_fd >= 0)
		close(ds->root_fd);
	free(ds->root);
	free(ds);
}
