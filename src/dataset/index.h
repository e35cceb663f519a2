/*
 * index.h — the dataset's index as the rest of the library sees it: one entry
 * per sample (its file or shard, offset, size, label), built or loaded by
 * stk__dataset_open (dataset/dataset.c).
 */
#ifndef STK_DATASET_INDEX_H
#define STK_DATASET_INDEX_H

#include "base/internal.h"

#include <sys/stat.h>

struct stk_entry {
	uint64_t size;
	int64_t label;
	uint64_t name;   /* offset of the path (relative to root) in names */
	uint64_t offset; /* where the sample's bytes start in that file (tar shards) */
	uint64_t tag;    /* tar shards: the member's header (stk__tar_header_tag), which
			    every read checks; 0 for whole files */
};

static inline uint64_t stk__mtime_ns(const struct stat *st)
{
	return (uint64_t)st->st_mtim.tv_sec * 1000000000ull + (uint64_t)st->st_mtim.tv_nsec;
}

static inline uint64_t stk__ctime_ns(const struct stat *st)
{
	return (uint64_t)st->st_ctim.tv_sec * 1000000000ull + (uint64_t)st->st_ctim.tv_nsec;
}

/* A folder, the list file or a shard whose change invalidates the index: its
 * identity as stat gives it.  An mtime can be set back (tar x, rsync -a,
 * touch -d); the ctime cannot (the kernel sets it on every change, touch
 * included), and a folder deleted and made again has another ctime (and
 * mostly another inode). */
struct idx_dir {
	uint64_t mtime_ns;
	uint64_t ctime_ns;   /* beside mtime_ns: the checksum skips both of dirs[0] */
	uint64_t size;       /* list file and shards */
	uint64_t name;       /* offset in dir_names: path relative to root ("" = root) */
	uint64_t ino, dev;
};

struct stk_dataset {
	char *root;            /* folder, or the file list's folder */
	int root_fd;           /* O_PATH|O_DIRECTORY descriptor of root */
	int64_t n;
	struct stk_entry *entries;
	char *names;           /* NUL-separated paths */
	uint64_t names_len;
	int64_t nclasses;
	char **classes;        /* pointers into class_names */
	char *class_names;
	uint64_t max_size;
	bool shards;           /* samples are members of tar shards */
	void *map;             /* the cached index when loaded by mmap */
	size_t map_len;
	uint64_t nbad;         /* files, folders or shards left out (skip policy) */
	const char *bad;       /* their records (dataset/build.h), bad_len bytes */
	uint64_t bad_len;
	char *cache_path;      /* the cache file loaded or written, NULL if none */
	const struct idx_dir *dirs; /* what the index was built from, as it was then: the
				       shards' sizes and mtimes (in sample order) */
	uint64_t ndirs;
	const char *dir_names;
	struct stk__remote *remote; /* s3:// or http(s):// shards (dataset/remote.c), else NULL */
	char *vcache_path;     /* remote data: the video index's cache file (loader/video.c),
				  NULL if none; local data's is cache_path + ".video" */
};

struct stk__index_opts {
	const char *path;
	const char *extensions;
	const char *cache_dir;
	bool no_cache;
	bool beside;     /* the cache beside the data (else in the user's cache folder) */
	bool skip_bad;   /* what cannot be indexed is left out and counted (a warning);
			    else it fails the index */
	char *warning;   /* out: what was left out ("" if nothing), the first named */
	size_t warnlen;
	char *notice;    /* out: a damaged cache rebuilt, said once ("" if nothing) */
	size_t noticelen;
	uint64_t cache_limit;  /* remote data: the local cache's bound (0: auto) */
	bool no_remote_cache;  /* remote data: no local cache */
	uint64_t remote_timeout_ns, remote_connect_timeout_ns; /* 0: the transport's */
	unsigned remote_tries;                /* 0: no cap */
	uint64_t remote_retry_ns;             /* 0: the transport's */
	bool quiet;             /* remote data: the cache says nothing on stderr */
};

int stk__dataset_open(struct stk_dataset **out, const struct stk__index_opts *o, char *err,
		      size_t errlen);
void stk__dataset_close(struct stk_dataset *ds);
/* dataset/remote.c: as stk__dataset_open and _close, for local paths and
 * for s3://, http:// and https:// shards alike (the loader's entry points). */
int stk__dataset_open_any(struct stk_dataset **out, const struct stk__index_opts *o, char *err,
			  size_t errlen);
void stk__dataset_close_any(struct stk_dataset *ds);
static inline const char *stk__entry_path(const struct stk_dataset *ds, int64_t i)
{
	return ds->names + ds->entries[i].name;
}

#endif
