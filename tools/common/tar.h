/* common/tar.h — ustar headers for `stoker pack` (common/tar.c). */
#ifndef STK_TAR_H
#define STK_TAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TAR_BLOCK 512u
#define TAR_EXT_MAX 32 /* keeps "<key>.<ext>" far under ustar's 100 bytes */

/* A ustar header into h (TAR_BLOCK bytes): a member of `type` ('0' a
 * regular file, 'x' a PAX extended header) named name (99 bytes at most)
 * holding size bytes, checksum included. */
void tar_header(unsigned char *h, const char *name, uint64_t size, char type);
/* The extension WebDataset will key a member named path by: the basename's
 * text after its last dot, lowercased; "bin" when there is none or it is
 * unusual.  ext has len bytes (TAR_EXT_MAX). */
void tar_extension(const char *path, char *ext, size_t len);
/* The name of the member whose data starts at off in the tar open at fd,
 * from its own header just before (ustar prefix and name); "" when it
 * cannot be read. */
void tar_member_name(int fd, uint64_t off, char *buf, size_t len);

#endif
