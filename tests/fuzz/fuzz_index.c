/* fuzz_index.c — libFuzzer target for the index-cache loader
 * (stk__index_load, dataset/cache.c): the input's first byte says what the
 * harness fixes up, the rest is the cache file.  Bit 0: the checksum made
 * right (else almost every input stops there); bit 1: the folder records
 * named "" given the test folder's mtime, so the entries' checks, the
 * folders' and the bad records' are reached.  The file is a regular
 * one in the data folder, an empty temporary one.  What a caller
 * relies on: a defined return (0, 1, STK_EINDEX with a reason, -ESTALE,
 * -errno), and on 0 an index whose every entry names a NUL-terminated path
 * inside the map with a label and a place in range.  Built and run by `make
 * fuzz` (clang); tests/test_fuzz.c replays tests/fuzz/index_corpus in every
 * `make test`. */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dataset/build.h"
#include "base/internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char fuzz_index_tmpl[] = "/tmp/stoker-fuzz-index-XXXXXX";

static int fuzz_index_dir(void)
{
	static int fd = -1;
	if (fd >= 0)
		return fd;
	if (!mkdtemp(fuzz_index_tmpl))
		abort();
	fd = open(fuzz_index_tmpl, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		abort();
	return fd;
}

static size_t fuzz_pad8(size_t x)
{
	return (x + 7) & ~(size_t)7;
}

/* Gives every folder record named "" the data folder's mtime and size. */
static void fuzz_fix_mtimes(uint8_t *p, size_t len, int dir)
{
	struct idx_header h;
	memcpy(&h, p, sizeof(h));
	if (h.n > len || h.ndirs > len || h.names_len > len || h.class_names_len > len ||
	    h.dir_names_len > len)
		return;
	size_t o_dirs = fuzz_pad8(sizeof(h)) + fuzz_pad8(h.n * sizeof(struct stk_entry)) +
			fuzz_pad8(h.names_len) + fuzz_pad8(h.class_names_len);
	size_t o_dnames = o_dirs + fuzz_pad8(h.ndirs * sizeof(struct idx_dir));
	if (o_dnames + h.dir_names_len > len)
		return;
	struct stat st;
	if (fstatat(dir, "", &st, AT_EMPTY_PATH))
		return;
	for (uint64_t i = 0; i < h.ndirs; i++) {
		struct idx_dir d;
		memcpy(&d, p + o_dirs + i * sizeof(d), sizeof(d));
		if (d.name < h.dir_names_len && p[o_dnames + d.name] == 0) {
			d.mtime_ns = stk__mtime_ns(&st);
			d.ctime_ns = stk__ctime_ns(&st);
			d.ino = (uint64_t)st.st_ino;
			d.dev = (uint64_t)st.st_dev;
			d.size = (uint64_t)st.st_size;
			memcpy(p + o_dirs + i * sizeof(d), &d, sizeof(d));
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int mfd = -1;
	if (!size)
		return 0;
	int dir = fuzz_index_dir();
	/* a regular file of the test folder's own: the loader opens no
	 * symlink, and /proc/self/fd/N is one */
	char path[sizeof(fuzz_index_tmpl) + 16];
	snprintf(path, sizeof(path), "%s/index", fuzz_index_tmpl);
	if (mfd < 0 && (mfd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600)) < 0)
		abort();
	size_t len = size - 1;
	uint8_t *p = malloc(len ? len : 1);
	if (!p)
		abort();
	memcpy(p, data + 1, len);
	uint64_t key = 0;
	if (len >= sizeof(struct idx_header)) {
		struct idx_header h;
		memcpy(&h, p, sizeof(h));
		key = h.key; /* the key is the caller's; take the file's */
		if (data[0] & 2)
			fuzz_fix_mtimes(p, len, dir);
		if (data[0] & 1) {
			h.checksum = stk__index_file_checksum(p, len);
			memcpy(p + offsetof(struct idx_header, checksum), &h.checksum, 8);
		}
	}
	if (ftruncate(mfd, 0) || (len && pwrite(mfd, p, len, 0) != (ssize_t)len))
		abort();
	free(p);
	char why[256];
	struct stk_dataset ds = {.root_fd = dir};
	struct stk__index_check chk = {.key = key, .vfd = dir, .data_fd = dir, .also = (uid_t)-1};
	why[0] = 0;
	int rc = stk__index_load(path, &chk, &ds, why, sizeof(why));
	if ((rc == STK_EINDEX || rc == 2 || rc == -ESTALE) && (!why[0] || !memchr(why, 0, sizeof(why))))
		abort(); /* damage, a refusal and a change always say why */
	if (rc != 0 && rc != 1 && rc != 2 && rc != STK_EINDEX && rc != -ESTALE && !(rc < 0 && rc > -4096))
		abort();
	if (rc)
		return 0;
	/* what the loader then reads: each entry's path, label and place */
	const struct idx_header *h = ds.map;
	for (int64_t i = 0; i < ds.n; i++) {
		const struct stk_entry *e = &ds.entries[i];
		if (e->name >= ds.names_len || strlen(ds.names + e->name) >= ds.names_len - e->name)
			abort();
		if (h->kind == KIND_FOLDER && (e->label < 0 || e->label >= ds.nclasses))
			abort();
		if (e->label < -1 || e->size > ds.max_size)
			abort();
	}
	for (uint64_t off = 0, k = 0; k < (uint64_t)ds.nclasses; k++) {
		if (off >= h->class_names_len)
			abort();
		off += strlen(ds.class_names + off) + 1;
	}
	for (uint64_t off = 0, k = 0; k < ds.nbad * 3; k++) {
		if (off >= ds.bad_len)
			abort();
		off += strlen(ds.bad + off) + 1;
	}
	munmap(ds.map, ds.map_len);
	return 0;
}
