/* dataset.h — the index builder and the cache file's layout, shared by
 * dataset.c (folders, file lists), dataset_cache.c (the cache file) and
 * dataset_shards.c (tar shards).  Single-threaded: one builder per index
 * build. */
#ifndef STK_DATASET_H
#define STK_DATASET_H

#include "internal.h"

#include <sys/stat.h>

#define IDX_MAGIC "STKIDX01"
#define IDX_VERSION 2u
#define IDX_NAME ".stoker-index"

enum { KIND_FOLDER = 1, KIND_FLAT = 2, KIND_LIST = 3, KIND_SHARDS = 4 };

/* The cache file's header (dataset_cache.c). */
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

static inline uint64_t stk__mtime_ns(const struct stat *st)
{
	return (uint64_t)st->st_mtim.tv_sec * 1000000000ull + (uint64_t)st->st_mtim.tv_nsec;
}

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

/* A directory's entries split into sorted subfolders and sorted files (following
 * symlinks, like os.walk(followlinks=True)).  Names are malloc'ed. */
struct listing {
	char **dirs, **files;
	size_t ndirs, nfiles;
};

/* Appends l bytes of s and a NUL to b; *off is where they start.  0 or -ENOMEM. */
int stk__buf_add(struct buf *b, const char *s, size_t l, uint64_t *off);
/* Formats the error into the builder's buffer and returns rc. */
int stk__build_fail(struct builder *b, int rc, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* FNV-1a of l bytes of p, continuing from h. */
uint64_t stk__fnv1a(uint64_t h, const void *p, size_t l);
/* Adds a sample: its name's offset in b->names, size, label, offset in its file. */
int stk__build_add_entry(struct builder *b, uint64_t name, uint64_t size, int64_t label,
			 uint64_t offset);
/* Records a folder (or file) whose change makes the index stale. */
int stk__build_add_dir(struct builder *b, const char *rel, const struct stat *st);
/* Appends a copy of s to the growable array *v.  0 or -ENOMEM. */
int stk__str_push(char ***v, size_t *n, size_t *cap, const char *s);
/* qsort comparator for char *. */
int stk__cmp_str(const void *a, const void *b);
/* Lists rel (relative to the root) into l, sorted; its stat into *dst. */
int stk__build_list_dir(struct builder *b, const char *rel, struct listing *l, struct stat *dst);
void stk__listing_free(struct listing *l);

/* dataset_cache.c.  The header of the index b holds (counts, the largest
 * sample, the file's length). */
void stk__index_header(struct idx_header *h, uint32_t kind, uint64_t key, const struct builder *b);
/* Writes the index to path (atomically: a temporary file renamed).  0 or <0. */
int stk__index_write(const char *path, const struct idx_header *h, const struct builder *b);
/* Maps the cache file at path and checks it against the data under root_fd:
 * 0 and fills ds, STK_EINDEX (malformed), -ESTALE (the data changed) or <0. */
int stk__index_load(const char *path, uint64_t key, int root_fd, struct stk_dataset *ds);
/* The two places a cache may be: beside the data, and in the cache folder
 * (user[0] = 0 when there is none). */
void stk__index_paths(const struct stk__index_opts *o, const char *abs, bool is_list,
		      uint64_t key, char *beside, char *user, size_t len);

/* dataset_shards.c.  Whether a path has glob or brace characters. */
bool stk__shards_is_pattern(const char *p);
/* Whether a file name ends in .tar. */
bool stk__shards_is_tar(const char *name);
/* Whether the folder holds .tar files and no subfolders (a shard set). */
bool stk__shards_is_dir(int root_fd);
/* Indexes the shards of the root folder, or of pattern when not NULL. */
int stk__shards_build(struct builder *b, const char *pattern);

#endif
