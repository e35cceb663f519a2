/* fuzz_url_list.c — libFuzzer target for lists of shard URLs
 * (dataset/url_list.c): the input is the list file, written to a temporary
 * folder, told from a local file list (stk__url_list_is) and read
 * (stk__url_list_read).  What a caller relies on: a defined return, an error
 * that says why whenever it fails, and on 0 at least one shard, a root that
 * is an s3:// or http(s):// server's folder ending in '/', each shard's name
 * relative to it (not empty) with the 1-based line it came from, in order.
 * Built and run by `make fuzz` (clang); tests/test_fuzz.c replays
 * tests/fuzz/url_list_corpus in every `make test`. */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dataset/build.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *fuzz_list_path(void)
{
	static char path[64];
	if (path[0])
		return path;
	char tmpl[] = "/tmp/stoker-fuzz-urls-XXXXXX";
	if (!mkdtemp(tmpl))
		abort();
	snprintf(path, sizeof(path), "%s/urls.txt", tmpl);
	return path;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* a {A..B} pattern may name 10^7 shards: inputs that name over 10^5
	 * are too slow to fuzz, not wrong */
	if (size > 4096)
		return 0;
	char text[4097];
	memcpy(text, data, size);
	text[size] = 0;
	for (const char *lb = text; (lb = memchr(lb, '{', size - (size_t)(lb - text))); lb++) {
		char *end;
		unsigned long long a = strtoull(lb + 1, &end, 10);
		if (end[0] == '.' && end[1] == '.') {
			unsigned long long z = strtoull(end + 2, NULL, 10);
			if (z > a && z - a > 100000)
				return 0;
		}
	}
	const char *path = fuzz_list_path();
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || (size && write(fd, data, size) != (ssize_t)size))
		abort();
	close(fd);
	(void)stk__url_list_is(path);
	struct stk__url_list l;
	char err[2048];
	err[0] = 0;
	int rc = stk__url_list_read(path, &l, err, sizeof(err));
	if (rc && (!err[0] || !memchr(err, 0, sizeof(err))))
		abort(); /* a failure always says why */
	if (rc)
		return 0;
	size_t rl = strnlen(l.root, sizeof(l.root));
	if (!l.n || rl == sizeof(l.root) || !rl || l.root[rl - 1] != '/' ||
	    (strncmp(l.root, "s3://", 5) && strncmp(l.root, "http://", 7) &&
	     strncmp(l.root, "https://", 8)))
		abort();
	for (size_t i = 0; i < l.n; i++)
		if (!l.rels[i] || !l.rels[i][0] || !l.lines[i] || (i && l.lines[i] < l.lines[i - 1]))
			abort();
	stk__url_list_free(&l);
	return 0;
}
