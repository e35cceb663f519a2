/* fuzz_tar_types.c — libFuzzer target for the tar member types through the
 * shard index (dataset/tar.c, dataset/shards.c): the input is one shard,
 * written to a file in a temporary folder and indexed as a dataset under
 * skip and under fail.  What a caller relies on: the iterator's members lie
 * inside the file, each with a kind, links with a target; every indexed
 * sample's bytes are a regular member's (its offset, size and header tag),
 * whatever links name (a link is its target's bytes) and whatever sparse or
 * other members hold (never served raw); an index that fails says why,
 * naming the shard.  Built and run by `make fuzz` (clang); test_tar replays
 * tests/fuzz/tar_types_corpus (tests/fuzz/make_corpus.py wrote the seeds
 * with GNU tar and Python's tarfile) in every `make test`. */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dataset/index.h"
#include "dataset/tar.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct fuzz_reg {
	uint64_t off, size, tag;
};

static const char *fuzz_shard_path(void)
{
	static char path[64];
	if (path[0])
		return path;
	char tmpl[] = "/tmp/stoker-fuzz-tar-XXXXXX";
	if (!mkdtemp(tmpl))
		abort();
	snprintf(path, sizeof(path), "%s/s.tar", tmpl);
	return path;
}

/* The regular members the iterator returns (until the end or damage). */
static size_t fuzz_members(int fd, size_t size, const uint8_t *data, struct fuzz_reg **out)
{
	struct stk__tar_iter *it;
	size_t n = 0, cap = 0;
	*out = NULL;
	if (stk__tar_open(&it, fd, size))
		return 0;
	struct stk__tar_member m;
	char err[256];
	int r;
	while ((r = stk__tar_next(it, &m, err, sizeof(err))) == 1) {
		if (m.data_off > size || m.size > size - m.data_off || m.header_off >= m.data_off ||
		    !m.name[0] || m.kind > STK__TAR_OTHER || m.data_off < 512)
			abort();
		if ((m.kind == STK__TAR_HARDLINK || m.kind == STK__TAR_SYMLINK) != (m.link != NULL))
			abort();
		if (m.kind != STK__TAR_FILE)
			continue;
		if (m.tag != stk__tar_header_tag(data + m.data_off - 512))
			abort();
		if (n == cap) {
			cap = cap ? cap * 2 : 64;
			*out = realloc(*out, cap * sizeof(**out));
			if (!*out)
				abort();
		}
		(*out)[n++] = (struct fuzz_reg){m.data_off, m.size, m.tag};
	}
	if (r != 0 && r != STK_ECORRUPT)
		abort();
	if (r == STK_ECORRUPT && strncmp(err, "offset ", 7))
		abort();
	stk__tar_close(it);
	return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *path = fuzz_shard_path();
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || (size && write(fd, data, size) != (ssize_t)size))
		abort();
	struct fuzz_reg *reg;
	size_t nreg = fuzz_members(fd, size, data, &reg);
	close(fd);
	for (int skip = 0; skip < 2; skip++) {
		char warn[512] = "", err[1024] = "";
		struct stk__index_opts o = {.path = path, .no_cache = true, .skip_bad = skip,
					    .warning = warn, .warnlen = sizeof(warn)};
		struct stk_dataset *ds;
		int rc = stk__dataset_open(&ds, &o, err, sizeof(err));
		if (rc) {
			if (rc > 0 || !strstr(err, "s.tar"))
				abort();
			continue;
		}
		for (int64_t i = 0; i < ds->n; i++) {
			const struct stk_entry *e = &ds->entries[i];
			size_t k = 0;
			while (k < nreg && (reg[k].off != e->offset || reg[k].size != e->size ||
					    reg[k].tag != e->tag))
				k++;
			if (k == nreg) /* bytes that are no regular member's */
				abort();
		}
		if (ds->nbad && !strstr(warn, "s.tar"))
			abort();
		stk__dataset_close(ds);
	}
	free(reg);
	return 0;
}
