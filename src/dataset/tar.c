/* dataset/tar.c — iterates the members of a tar archive, for the shard index.
 *
 * DESIGN: the archive is read with pread only, one 512-byte header at a time,
 * and every offset is checked against file_size before it is read, so a bad
 * archive can neither make us read past the file nor allocate from a size it
 * claims: metadata payloads (GNU long names 'L'/'K', PAX 'x') are capped at
 * STK__TAR_META_MAX before anything is allocated, and member data is never
 * read, only bounds-checked.  Each header must pass GNU tar's checksum test
 * (unsigned or signed byte sum).  Metadata headers only set "pending" state
 * (name, size) for the header that follows; one stk__tar_next call consumes
 * them together with that header, so the name it returns lives in the
 * iterator until the next call.  Formats: v7 (no magic), POSIX ustar (the
 * prefix field), GNU ("ustar  \0": no prefix, base-256 sizes), PAX (path,
 * size, linkpath; global headers skipped).  The end is a zero block, or EOF
 * on a block boundary (writers that stop early are common enough to accept).
 * Every member but directories and volume labels is returned with its kind
 * (links with their targets, sparse files and the rest marked as such), so
 * the index decides about each and none vanishes unseen.  GNU sparse
 * headers' extension blocks are stepped over to the data.
 */
#include "dataset/tar.h"

#include "base/internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BLOCK 512u

/* Header field offsets and widths (POSIX ustar; GNU shares them). */
#define H_NAME 0
#define H_NAME_LEN 100
#define H_SIZE 124
#define H_SIZE_LEN 12
#define H_CHKSUM 148
#define H_CHKSUM_LEN 8
#define H_TYPE 156
#define H_LINK 157
#define H_LINK_LEN 100
#define H_MAGIC 257
#define H_PREFIX 345
#define H_PREFIX_LEN 155
/* Old GNU sparse headers: more map entries follow in extension blocks
 * while this byte (and then byte 504 of each block) is set. */
#define H_GNU_EXTENDED 482
#define H_GNU_EXT_MORE 504

enum { RUNNING, ENDED, FAILED };

struct stk__tar_iter {
	int fd;
	stk__tar_read_fn read; /* set: reads go through it (remote shards), not fd */
	void *read_ctx;
	uint64_t file_size;
	uint64_t off; /* next header */
	int state;
	int ret;      /* the code returned once ENDED or FAILED */
	char *long_name; /* from an 'L' header, for the next member */
	char *long_link; /* from a 'K' header */
	char *pax_path;  /* from an 'x' header */
	char *pax_link;
	char *pax_sparse_name; /* GNU.sparse.name */
	bool pax_sparse;  /* any GNU.sparse.* record */
	bool pax_has_size;
	uint64_t pax_size;
	char name[H_PREFIX_LEN + 1 + H_NAME_LEN + 1]; /* "prefix/name" */
	char link[H_LINK_LEN + 1];
	unsigned char blk[BLOCK];
};

int stk__tar_open(struct stk__tar_iter **out, int fd, uint64_t file_size)
{
	struct stk__tar_iter *it = calloc(1, sizeof(*it));
	*out = it;
	if (!it)
		return -ENOMEM;
	it->fd = fd;
	it->file_size = file_size;
	return 0;
}

static void drop_pending(struct stk__tar_iter *it)
{
	free(it->long_name);
	free(it->long_link);
	free(it->pax_path);
	free(it->pax_link);
	free(it->pax_sparse_name);
	it->long_name = it->long_link = it->pax_path = it->pax_link = it->pax_sparse_name = NULL;
	it->pax_has_size = it->pax_sparse = false;
}

void stk__tar_close(struct stk__tar_iter *it)
{
	if (!it)
		return;
	drop_pending(it);
	free(it);
}

static int fail(struct stk__tar_iter *it, char *err, size_t errlen, int code, uint64_t off,
		const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static int fail(struct stk__tar_iter *it, char *err, size_t errlen, int code, uint64_t off,
		const char *fmt, ...)
{
	if (err && errlen) {
		int n = snprintf(err, errlen, "offset %llu: ", (unsigned long long)off);
		if (n >= 0 && (size_t)n < errlen) {
			va_list ap;
			va_start(ap, fmt);
			vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
			va_end(ap);
		}
	}
	it->state = FAILED;
	it->ret = code;
	return code;
}

/* Reads exactly len bytes at off (the caller checked off + len <= file_size).
 * 0, STK_ESHORT if the file shrank under us, or -errno. */
static int read_at(int fd, void *buf, size_t len, uint64_t off)
{
	for (size_t done = 0; done < len;) {
		ssize_t r = pread(fd, (char *)buf + done, len - done, (off_t)(off + done));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			return STK_ESHORT;
		done += (size_t)r;
	}
	return 0;
}

/* An octal field as tar writes it: leading spaces, digits, then NULs or
 * spaces to the end of the field.  An empty field is 0 (Python and GNU tar
 * read it so).  0, or -1 when the field holds anything else. */
static int parse_octal(const unsigned char *f, size_t len, uint64_t *out)
{
	size_t i = 0;
	uint64_t v = 0;
	while (i < len && f[i] == ' ')
		i++;
	for (; i < len && f[i] >= '0' && f[i] <= '7'; i++) {
		if (v >> 60) /* 12 digits never get here; a guard, not a limit */
			return -1;
		v = v * 8 + (uint64_t)(f[i] - '0');
	}
	for (; i < len; i++)
		if (f[i] != 0 && f[i] != ' ')
			return -1;
	*out = v;
	return 0;
}

/* A size field: octal, or GNU base-256 (first byte 0x80, big-endian value
 * in the rest) for members of 8 GiB and more.  Negative values are refused. */
static int parse_size_field(const unsigned char *f, uint64_t *out)
{
	if (!(f[0] & 0x80))
		return parse_octal(f, H_SIZE_LEN, out);
	if (f[0] & 0x40)
		return -1; /* negative */
	uint64_t v = f[0] & 0x3f;
	for (size_t i = 1; i < H_SIZE_LEN; i++) {
		if (v >> 55) /* would not fit in 63 bits */
			return -1;
		v = (v << 8) | f[i];
	}
	*out = v;
	return 0;
}

static bool all_zero(const unsigned char *b, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (b[i])
			return false;
	return true;
}

/* GNU tar accepts the sum of the header's bytes, as unsigned or as signed
 * chars (old Sun and BSD tars), with the checksum field counted as spaces. */
static bool checksum_ok(const unsigned char *b)
{
	uint64_t want;
	if (parse_octal(b + H_CHKSUM, H_CHKSUM_LEN, &want))
		return false;
	int64_t us = 0, ss = 0;
	for (size_t i = 0; i < BLOCK; i++) {
		unsigned char c = i >= H_CHKSUM && i < H_CHKSUM + H_CHKSUM_LEN ? ' ' : b[i];
		us += c;
		ss += (signed char)c;
	}
	return (int64_t)want == us || (int64_t)want == ss;
}

uint64_t stk__tar_header_tag(const unsigned char *h)
{
	uint64_t t = 0x7461726865616472ull; /* "tarheadr" */
	for (size_t i = 0; i < BLOCK; i += 8) {
		uint64_t w;
		memcpy(&w, h + i, 8);
		t = stk__mix64(t ^ w);
	}
	return t ? t : 1;
}

void stk__tar_header_describe(const unsigned char *h, char *out, size_t len)
{
	uint64_t size;
	if (all_zero(h, BLOCK) || !checksum_ok(h) || parse_size_field(h + H_SIZE, &size)) {
		snprintf(out, len, "no tar header");
		return;
	}
	char name[H_NAME_LEN + 1];
	memcpy(name, h + H_NAME, H_NAME_LEN);
	name[H_NAME_LEN] = 0;
	snprintf(out, len, "the header of '%s' (%llu bytes)", name, (unsigned long long)size);
}

/* Copies a fixed-width, possibly unterminated header string. */
static size_t field_str(char *dst, const unsigned char *f, size_t len)
{
	size_t n = strnlen((const char *)f, len);
	memcpy(dst, f, n);
	dst[n] = 0;
	return n;
}

/* PAX records: "LEN key=value\n", LEN counting the whole record in decimal.
 * Any deviation is corruption: a record that lies about its length would
 * shift every later one.  NUL padding after the last record is tolerated, as
 * Python's reader does.  Takes path and size; other keys are ignored. */
static int parse_pax(struct stk__tar_iter *it, const char *buf, size_t len, const char **why)
{
	size_t pos = 0;
	while (pos < len && buf[pos]) {
		size_t rlen = 0, i = pos;
		while (i < len && buf[i] >= '0' && buf[i] <= '9' && i - pos < 6) {
			rlen = rlen * 10 + (size_t)(buf[i] - '0');
			i++;
		}
		if (i == pos || i >= len || buf[i] != ' ') {
			*why = "PAX record length is not a number";
			return -1;
		}
		if (rlen < i - pos + 4 || rlen > len - pos || buf[pos + rlen - 1] != '\n') {
			*why = "PAX record length does not match the record";
			return -1;
		}
		const char *key = buf + i + 1, *end = buf + pos + rlen - 1;
		const char *eq = memchr(key, '=', (size_t)(end - key));
		if (!eq || eq == key) {
			*why = "PAX record without key=value";
			return -1;
		}
		const char *val = eq + 1;
		size_t klen = (size_t)(eq - key), vlen = (size_t)(end - val);
		char **str = klen == 4 && !memcmp(key, "path", 4)      ? &it->pax_path
			     : klen == 8 && !memcmp(key, "linkpath", 8) ? &it->pax_link
			     : klen == 15 && !memcmp(key, "GNU.sparse.name", 15) ? &it->pax_sparse_name
										   : NULL;
		if (klen > 11 && !memcmp(key, "GNU.sparse.", 11))
			it->pax_sparse = true;
		if (str && vlen) {
			if (memchr(val, 0, vlen)) {
				*why = "PAX path holds a NUL byte";
				return -1;
			}
			char *p = strndup(val, vlen);
			if (!p)
				return -ENOMEM;
			free(*str);
			*str = p;
		} else if (klen == 4 && !memcmp(key, "size", 4) && vlen) {
			uint64_t v = 0;
			for (const char *c = val; c < end; c++) {
				if (*c < '0' || *c > '9' || v > (INT64_MAX - 9) / 10) {
					*why = "PAX size is not a number";
					return -1;
				}
				v = v * 10 + (uint64_t)(*c - '0');
			}
			it->pax_size = v;
			it->pax_has_size = true;
		}
		pos += rlen;
	}
	for (; pos < len; pos++)
		if (buf[pos]) {
			*why = "data after the PAX padding";
			return -1;
		}
	return 0;
}

/* Reads a metadata payload ('L', 'x') of size bytes at off into a fresh
 * NUL-terminated buffer; the caller checked the size cap and the bounds. */
static int read_meta(struct stk__tar_iter *it, uint64_t off, uint64_t size, char **out)
{
	char *buf = malloc((size_t)size + 1);
	if (!buf)
		return -ENOMEM;
	int r = stk__tar_read(it, buf, (size_t)size, off);
	if (r) {
		free(buf);
		return r;
	}
	buf[size] = 0;
	*out = buf;
	return 0;
}

int stk__tar_next(struct stk__tar_iter *it, struct stk__tar_member *m, char *err, size_t errlen)
{
	if (it->state != RUNNING) {
		if (it->state == FAILED && err && errlen)
			snprintf(err, errlen, "offset %llu: iteration already failed",
				 (unsigned long long)it->off);
		return it->ret;
	}
	drop_pending(it); /* the previous member's name */
	uint64_t start = it->off; /* first header of the member, metadata included */
	bool pending = false;
	for (;;) {
		uint64_t off = it->off;
		if (!pending)
			start = off;
		if (off == it->file_size) {
			if (pending)
				return fail(it, err, errlen, STK_ECORRUPT, off,
					    "archive ends after an extended header");
			it->state = ENDED;
			it->ret = 0;
			return 0;
		}
		if (off > it->file_size) /* the last member's padding was cut off */
			return fail(it, err, errlen, STK_ECORRUPT, it->file_size,
				    "archive truncated inside a member's padding (file %llu bytes)",
				    (unsigned long long)it->file_size);
		if (it->file_size - off < BLOCK)
			return fail(it, err, errlen, STK_ECORRUPT, off,
				    off ? "truncated header (%llu bytes left)"
					: "not a tar file (%llu bytes, less than one header)",
				    (unsigned long long)(it->file_size - off));
		int r = stk__tar_read(it, it->blk, BLOCK, off);
		if (r)
			return fail(it, err, errlen, r, off, "cannot read the header: %s",
				    r == STK_ESHORT ? "the file shrank" : strerror(-r));
		const unsigned char *b = it->blk;
		if (all_zero(b, BLOCK)) {
			if (pending)
				return fail(it, err, errlen, STK_ECORRUPT, off,
					    "end of archive after an extended header");
			it->state = ENDED;
			it->ret = 0;
			return 0;
		}
		if (!checksum_ok(b))
			return fail(it, err, errlen, STK_ECORRUPT, off,
				    off ? "header checksum mismatch"
					: "not a tar file (header checksum mismatch)");
		uint64_t size;
		if (parse_size_field(b + H_SIZE, &size))
			return fail(it, err, errlen, STK_ECORRUPT, off, "bad size field");
		char type = (char)b[H_TYPE];
		bool posix = !memcmp(b + H_MAGIC, "ustar\0", 6);
		if (pending && it->pax_has_size && type != 'x' && type != 'L' && type != 'K')
			size = it->pax_size;
		/* Links, devices, fifos and directories carry no data (POSIX; Python
		 * reads them so) whatever their size field says. */
		bool nodata = type == '1' || type == '2' || type == '3' || type == '4' ||
			      type == '5' || type == '6';
		uint64_t data_off = off + BLOCK, dsize = nodata ? 0 : size;
		if (type == 'S' && !posix && b[H_GNU_EXTENDED]) {
			/* the sparse map's extension blocks come before the data */
			unsigned char ext[BLOCK];
			do {
				if (it->file_size - data_off < BLOCK)
					return fail(it, err, errlen, STK_ECORRUPT, off,
						    "GNU sparse map runs past the end of the file");
				r = read_at(it->fd, ext, BLOCK, data_off);
				if (r)
					return fail(it, err, errlen, r, data_off, "cannot read the "
						    "sparse map: %s", r == STK_ESHORT ? "the file shrank"
										  : strerror(-r));
				data_off += BLOCK;
			} while (ext[H_GNU_EXT_MORE]);
		}
		if (dsize > it->file_size - data_off)
			return fail(it, err, errlen, STK_ECORRUPT, off,
				    "member data runs past the end of the file "
				    "(size %llu, file %llu bytes)",
				    (unsigned long long)dsize, (unsigned long long)it->file_size);
		/* Cannot overflow: dsize <= file_size - data_off. */
		it->off = data_off + STK_ALIGN_UP(dsize, BLOCK);

		if (type == 'L' || type == 'K' || type == 'x') {
			if (size > STK__TAR_META_MAX)
				return fail(it, err, errlen, STK_ECORRUPT, off,
					    "%s header of %llu bytes (more than %u)",
					    type == 'x' ? "PAX" : "long name",
					    (unsigned long long)size, STK__TAR_META_MAX);
			pending = true;
			char *buf;
			r = read_meta(it, data_off, size, &buf);
			if (r)
				return fail(it, err, errlen, r, data_off, "cannot read %s",
					    r == -ENOMEM ? "(out of memory)" : "the extended header");
			if (type == 'L' || type == 'K') {
				char **dst = type == 'L' ? &it->long_name : &it->long_link;
				free(*dst);
				*dst = buf;
				continue;
			}
			const char *why = "out of memory";
			r = parse_pax(it, buf, (size_t)size, &why);
			free(buf);
			if (r)
				return fail(it, err, errlen, r == -ENOMEM ? r : STK_ECORRUPT, data_off,
					    "%s", why);
			continue;
		}
		if (type == 'g' || type == 'V') /* global PAX header, volume label: not members */
			continue;

		char *short_name = it->name;
		size_t n = 0;
		if (posix && b[H_PREFIX]) {
			n = field_str(short_name, b + H_PREFIX, H_PREFIX_LEN);
			short_name[n++] = '/';
		}
		n += field_str(short_name + n, b + H_NAME, H_NAME_LEN);
		/* v7 and old GNU tars mark directories by a trailing slash only;
		 * 'D' is GNU's directory with its listing. */
		if (type == '5' || type == 'D' || (type == 0 && n && short_name[n - 1] == '/')) {
			drop_pending(it);
			pending = false;
			continue;
		}
		enum stk__tar_kind kind = type == '0' || type == '7' || type == 0
						  ? (it->pax_sparse ? STK__TAR_SPARSE : STK__TAR_FILE)
					  : type == '1' ? STK__TAR_HARDLINK
					  : type == '2' ? STK__TAR_SYMLINK
					  : type == 'S' ? STK__TAR_SPARSE
							: STK__TAR_OTHER;
		const char *name = it->pax_path ? it->pax_path : it->long_name ? it->long_name
									: short_name;
		if (kind == STK__TAR_SPARSE && it->pax_sparse_name)
			name = it->pax_sparse_name; /* the file's, not "GNUSparseFile.N/..." */
		if (!*name)
			return fail(it, err, errlen, STK_ECORRUPT, off, "member without a name");
		m->link = NULL;
		if (kind == STK__TAR_HARDLINK || kind == STK__TAR_SYMLINK) {
			field_str(it->link, b + H_LINK, H_LINK_LEN);
			m->link = it->pax_link ? it->pax_link : it->long_link ? it->long_link : it->link;
		}
		m->kind = kind;
		m->typeflag = type;
		m->name = name;
		m->header_off = start;
		m->data_off = data_off;
		m->size = size;
		m->tag = stk__tar_header_tag(b);
		return 1;
	}
}

int stk__tar_open_reader(struct stk__tar_iter **out, stk__tar_read_fn read, void *ctx,
			 uint64_t file_size)
{
	int rc = stk__tar_open(out, -1, file_size);
	if (!rc) {
		(*out)->read = read;
		(*out)->read_ctx = ctx;
	}
	return rc;
}

int stk__tar_read(struct stk__tar_iter *it, void *buf, size_t len, uint64_t off)
{
	if (off > it->file_size || len > it->file_size - off)
		return STK_ESHORT;
	return it->read ? it->read(it->read_ctx, buf, len, off) : read_at(it->fd, buf, len, off);
}
