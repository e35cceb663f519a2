/* common/tar.c — the ustar pieces `stoker pack` writes and reads: a member's
 * header (fixed owner, mode and mtime 0, so that the same data packs to the
 * same bytes), the extension WebDataset keys a member by, and a member's own
 * name read back from the header before its data (a repack of shards). */
#include "common/tar.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Sizes of 8 GiB and more do not fit eleven octal digits and take GNU's
 * base-256 form, which every reader of ustar we care about (GNU tar,
 * Python, WebDataset) accepts. */
void tar_header(unsigned char *h, const char *name, uint64_t size, char type)
{
	memset(h, 0, TAR_BLOCK);
	memcpy(h, name, strnlen(name, 99));
	memcpy(h + 100, "0000644", 8);
	memcpy(h + 108, "0000000", 8);
	memcpy(h + 116, "0000000", 8);
	if (size < (1ull << 33)) {
		char sz[24];
		snprintf(sz, sizeof(sz), "%011llo", (unsigned long long)size);
		memcpy(h + 124, sz, 12);
	} else {
		h[124] = 0x80;
		for (int i = 0; i < 8; i++)
			h[135 - i] = (unsigned char)(size >> (8 * i));
	}
	/* mtime 0: the shards depend on the data only, not on when files were copied. */
	memcpy(h + 136, "00000000000", 12);
	h[156] = type;
	memcpy(h + 257, "ustar\0" "00", 8);
	memset(h + 148, ' ', 8);
	unsigned sum = 0;
	for (unsigned i = 0; i < TAR_BLOCK; i++)
		sum += h[i];
	char cs[16];
	snprintf(cs, sizeof(cs), "%06o", sum & 0777777);
	memcpy(h + 148, cs, 7); /* six digits, NUL, and the space already there */
}

void tar_extension(const char *path, char *ext, size_t len)
{
	const char *base = strrchr(path, '/');
	base = base ? base + 1 : path;
	const char *dot = strrchr(base, '.');
	size_t n = dot && dot != base ? strlen(dot + 1) : 0;
	bool ok = n > 0 && n < TAR_EXT_MAX && n < len;
	for (size_t i = 0; ok && i < n; i++) {
		char c = dot[1 + i];
		ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		     c == '_' || c == '-';
		ext[i] = (char)(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
	}
	if (!ok)
		snprintf(ext, len, "bin");
	else
		ext[n] = 0;
}

void tar_member_name(int fd, uint64_t off, char *buf, size_t len)
{
	unsigned char h[TAR_BLOCK];
	buf[0] = 0;
	if (off < TAR_BLOCK || pread(fd, h, TAR_BLOCK, (off_t)(off - TAR_BLOCK)) != (ssize_t)TAR_BLOCK)
		return;
	int nl = (int)strnlen((const char *)h, 100), pl = 0;
	if (!memcmp(h + 257, "ustar", 5))
		pl = (int)strnlen((const char *)h + 345, 155);
	snprintf(buf, len, "%.*s%s%.*s", pl, (const char *)h + 345, pl ? "/" : "", nl,
		 (const char *)h);
}
