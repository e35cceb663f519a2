/* dataset/tar.h — a bounded iterator over the members of a tar archive
 * (ustar, GNU, PAX, v7).  Internal: the shard index is built on it. */
#ifndef STK_TAR_H
#define STK_TAR_H

#include <stddef.h>
#include <stdint.h>

/* Long names and PAX headers larger than this are refused as corrupt: no
 * real writer comes near it, and it bounds what a bad header can allocate. */
#define STK__TAR_META_MAX (64u * 1024)

/* What a member is.  Directories, volume labels and metadata headers are
 * not members; every other type is, so that nothing is dropped unseen. */
enum stk__tar_kind {
	STK__TAR_FILE,      /* regular ('0', '7', v7 NUL): its bytes are at data_off */
	STK__TAR_HARDLINK,  /* '1': the bytes are link's (an earlier member) */
	STK__TAR_SYMLINK,   /* '2': link is the target's path, relative to the link's folder */
	STK__TAR_SPARSE,    /* GNU 'S' or PAX GNU.sparse.*: data_off holds a sparse map's chunks,
			       not the file */
	STK__TAR_OTHER,     /* devices, fifos, multi-volume parts, unknown types */
};

struct stk__tar_member {
	const char *name;    /* full path in the archive (GNU long name / PAX path applied;
				sparse: GNU.sparse.name); valid until the next call */
	const char *link;    /* links: the target (linkname, GNU 'K', PAX linkpath), else NULL */
	enum stk__tar_kind kind;
	char typeflag;       /* the header's, for messages */
	uint64_t header_off; /* offset of the member's first header block (incl. long-name/PAX blocks) */
	uint64_t data_off;   /* offset of its data */
	uint64_t size;       /* bytes of data */
	uint64_t tag;        /* stk__tar_header_tag of the header block just before the data */
};

struct stk__tar_iter;

/* Iterates the members of the tar read through fd (pread only; the fd's
 * size is file_size).  The fd stays the caller's.  0 or -ENOMEM. */
int stk__tar_open(struct stk__tar_iter **out, int fd, uint64_t file_size);
/* 1 and *m filled for the next member, 0 at the end of the archive,
 * <0 on bad data: STK_ECORRUPT with the reason and the byte offset in err
 * ("offset 10240: header checksum mismatch"), STK_ESHORT when the file is
 * shorter than file_size, -errno when pread fails.  After the end or an
 * error every later call returns the same code.  err may be NULL. */
int stk__tar_next(struct stk__tar_iter *it, struct stk__tar_member *m, char *err, size_t errlen);
void stk__tar_close(struct stk__tar_iter *it);
/* A hash of the 512-byte header block at h (the one just before a member's
 * data): its name, mode, owners, size, mtime, type and link name, all of
 * them.  Never 0.  The index keeps it for each sample; the loader's reads of
 * shards see that block for free and compare, so bytes are delivered only
 * under the member they were indexed as (a shard rewritten in place with
 * members of the same sizes is caught where any header byte differs). */
uint64_t stk__tar_header_tag(const unsigned char *h);
/* What the header block at h is, for an error when its tag is not the
 * indexed one: "no tar header" or "the header of 'NAME' (N bytes)". */
void stk__tar_header_describe(const unsigned char *h, char *out, size_t len);
/* Reads exactly len bytes at off into buf: 0, STK_ESHORT, or <0. */
typedef int (*stk__tar_read_fn)(void *ctx, void *buf, size_t len, uint64_t off);
/* As stk__tar_open, reading through read(ctx, ...) (remote shards: ranged GETs). */
int stk__tar_open_reader(struct stk__tar_iter **out, stk__tar_read_fn read, void *ctx,
			 uint64_t file_size);
/* Reads len bytes at off of the archive (bounds-checked against file_size),
 * through the iterator's reader: a .cls member's text, say. */
int stk__tar_read(struct stk__tar_iter *it, void *buf, size_t len, uint64_t off);
/* 1 when the 512 bytes at h are a tar header (checksum) whose size field
 * says size (or defers to a PAX size): a member's bytes are still where the
 * index found them.  For the loader's reads of shards, which see the header
 * just before a member's data for free. */
int stk__tar_header_matches(const unsigned char *h, uint64_t size);

#endif
