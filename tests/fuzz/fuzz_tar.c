/* fuzz_tar.c — libFuzzer target for the tar member iterator (src/dataset/tar.c).
 * The input is written to one memfd, reused across runs, and iterated to the
 * end: the iterator must return a defined code and read nothing past the file.
 * Build and run (see the Makefile's fuzz target):
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -std=gnu11 -D_GNU_SOURCE \
 *     -Iinclude -Isrc tests/fuzz/fuzz_tar.c src/dataset/tar.c -o build/fuzz_tar
 *   build/fuzz_tar -max_total_time=300 -max_len=65536 tests/fuzz/tar_corpus */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "stoker/stoker.h"
#include "dataset/tar.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int fd = -1;
	if (fd < 0 && (fd = memfd_create("fuzz_tar", MFD_CLOEXEC)) < 0)
		abort();
	if (ftruncate(fd, 0) || (size && pwrite(fd, data, size, 0) != (ssize_t)size))
		abort();
	struct stk__tar_iter *it;
	if (stk__tar_open(&it, fd, size))
		return 0;
	struct stk__tar_member m;
	char err[256];
	int r;
	while ((r = stk__tar_next(it, &m, err, sizeof(err))) == 1) {
		/* What a caller relies on: the member lies inside the file. */
		if (m.data_off + m.size > size || m.header_off >= m.data_off || !m.name[0])
			abort();
		(void)strlen(m.name);
	}
	if (r != 0 && r != STK_ECORRUPT)
		abort();
	if (r == STK_ECORRUPT && strncmp(err, "offset ", 7))
		abort();
	stk__tar_close(it);
	return 0;
}
