/* build.h — the index builder and the cache file's layout, shared by
 * build.c (the builder), dataset/dataset.c (folders, file lists), cache.c (the cache
 * file) and shards.c (tar shards).  Single-threaded: one builder per index
 * build. */
#ifndef STK_DATASET_BUILD_H
#define STK_DATASET_BUILD_H

#include "dataset/index.h"

#include <sys/stat.h>

#define IDX_MAGIC "STKIDX01"
#define IDX_VERSION 5u
#define IDX_NAME ".stoker-index"

enum { KIND_FOLDER = 1, KIND_FLAT = 2, KIND_LIST = 3, KIND_SHARDS = 4 };

/* The cache file's header (dataset/cache.c). */
struct idx_header {
	char magic[8];
	uint32_t version;
	uint32_t kind;
	uint64_t key;        /* hash of the absolute root, kind and extensions */
	uint64_t n, nclasses, ndirs;
	uint64_t names_len, class_names_len, dir_names_len;
	uint64_t max_size;
	uint64_t total_len;  /* of the whole file: a truncated cache is refused */
	uint64_t nbad, bad_len; /* what the index left out (bad records, below) */
	uint64_t checksum;   /* stk__index_checksum of the file: last, see there */
};

/* A bad record: a file, folder or shard the index left out under the skip
 * policy, remembered so that a later run under the fail policy still fails
 * and every run counts it.  Three strings: "<kind><code>" (kind: 'S' stat
 * failed or not a regular file, 'O' open failed: both checked again at load,
 * and the cache is stale once the check passes; 'D' damaged content, which
 * the shard's recorded size and mtime cover; code: the error, in decimal),
 * the path relative to the root, and the message. */
enum { BAD_STAT = 'S', BAD_OPEN = 'O', BAD_DAMAGE = 'D' };

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
	struct buf bad;      /* bad records */
	uint64_t nbad;
	uint64_t nfiles;     /* files a folder's listings held, of any name: "is empty" */
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
/* A file, folder or shard that cannot be indexed (kind BAD_*, rel to the
 * root, rc its error): under skip_bad a bad record (0: go on), else the
 * build fails with the message (rc). */
int stk__build_bad(struct builder *b, char kind, const char *rel, int rc, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
/* Formats the error into the builder's buffer and returns rc. */
int stk__build_fail(struct builder *b, int rc, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* FNV-1a of l bytes of p, continuing from h. */
uint64_t stk__fnv1a(uint64_t h, const void *p, size_t l);
/* Adds a sample: its name's offset in b->names, size, label, offset in its
 * file and (shards) its member's header tag. */
int stk__build_add_entry(struct builder *b, uint64_t name, uint64_t size, int64_t label,
			 uint64_t offset, uint64_t tag);
/* Records a folder (or file) whose change makes the index stale. */
int stk__build_add_dir(struct builder *b, const char *rel, const struct stat *st);
/* Appends a copy of s to the growable array *v.  0 or -ENOMEM. */
int stk__str_push(char ***v, size_t *n, size_t *cap, const char *s);
/* qsort comparator for char *. */
int stk__cmp_str(const void *a, const void *b);
/* Lists rel (relative to the root) into l, sorted; its stat into *dst. */
int stk__build_list_dir(struct builder *b, const char *rel, struct listing *l, struct stat *dst);
void stk__listing_free(struct listing *l);

/* dataset/cache.c.  The checksum a cache file of len bytes at p (its header
 * first) must carry (tests and the fuzzer forge valid ones with it). */
uint64_t stk__index_file_checksum(const void *p, size_t len);
/* The header of the index b holds (counts, the largest
 * sample, the file's length). */
void stk__index_header(struct idx_header *h, uint32_t kind, uint64_t key, const struct builder *b);
/* Writes the index to path (atomically: a temporary file renamed; mode
 * 0644).  in_root: path is in the indexed folder (beside the data), whose
 * new times are recorded.  0 or <0. */
int stk__index_write(const char *path, bool in_root, const struct idx_header *h,
		     const struct builder *b);
/* What a cache file is checked against. */
struct stk__index_check {
	uint64_t key;     /* the dataset's (stk__dataset_open) */
	int vfd;          /* where the folder records are relative to (a list: the list) */
	int data_fd;      /* the root, for the bad records */
	uid_t also;       /* an owner trusted besides the user and root ((uid_t)-1: none) */
	const char *list; /* a list's path: its lines are read against the entries */
};
/* Checks the cache file at path before reading it (a regular file, not a
 * symlink, owned by the user, root or c->also, writable by no one else),
 * maps it, checks its integrity (checksum, every entry against the header
 * and the folders, names inside the root) and checks it against the data:
 * each folder's identity (inode, mtime, ctime, size), a list's lines, the bad
 * records.  0 and fills ds; 1 when it is another version's or another
 * dataset's (rebuilt silently); 2 when refused as untrusted, STK_EINDEX when
 * damaged, -ESTALE when the data changed, each with the reason in why; or
 * -errno. */
int stk__index_load(const char *path, const struct stk__index_check *c, struct stk_dataset *ds,
		    char *why, size_t whylen);
/* What the index left out (ds->nbad records): under skip_bad the first is
 * named in o->warning (0); else, from a cache that a skip run wrote, the
 * error naming it (its code, the message in err). */
int stk__index_bad_report(const struct stk_dataset *ds, const struct stk__index_opts *o,
			  const char *cache, char *err, size_t errlen);
/* mkdir -p of path (its '/'s put back): 0 or -errno. */
int stk__mkdir_p(char *path);
/* The two places a cache may be: beside the data, and in the cache folder
 * (user[0] = 0 when there is none, or when it is refused: the reason in why). */
void stk__index_paths(const struct stk__index_opts *o, const char *abs, bool is_list,
		      uint64_t key, char *beside, char *user, size_t len, char *why,
		      size_t whylen);
/* The user's cache folder (stk_cache_dir), made if missing (the last part
 * 0700), refused when another user's or writable by others: its length, or
 * <0 with the reason in why. */
int stk__cache_dir(char *buf, size_t len, char *why, size_t whylen);

/* dataset/shards.c.  Whether a path has glob or brace characters. */
bool stk__shards_is_pattern(const char *p);
/* Whether a file name ends in .tar. */
bool stk__shards_is_tar(const char *name);
/* Whether the folder holds .tar files and no subfolders (a shard set). */
bool stk__shards_is_dir(int root_fd);
/* Indexes the shards of the root folder, or of pattern when not NULL. */
int stk__shards_build(struct builder *b, const char *pattern);
/* Indexes the members of one shard (rel, relative to the root) read through
 * it: its samples into b; damage by the policy (dataset/remote.c too). */
struct stk__tar_iter;
int stk__shards_index_tar(struct builder *b, const char *rel, struct stk__tar_iter *it);

/* dataset/url_list.c.  Appends the names a {A..B} pattern makes (pat itself
 * when it has none) to out; 0 or <0 with the reason in err. */
int stk__expand_braces(const char *pat, char ***out, size_t *n, char *err, size_t errlen);
/* A list of shard URLs: their common root URL (a folder, '/' ended) and each
 * shard's name relative to it, with the line it came from. */
struct stk__url_list {
	char root[1200];
	char **rels;
	unsigned *lines;
	size_t n;
};
/* Whether path is a regular file whose first line (blank ones and comments
 * aside) is a URL: a list of shard URLs. */
bool stk__url_list_is(const char *path);
/* Reads the list; 0, or <0 with err naming the list and the line. */
int stk__url_list_read(const char *path, struct stk__url_list *out, char *err, size_t errlen);
void stk__url_list_free(struct stk__url_list *l);

#endif
