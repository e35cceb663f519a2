/*
 * DESIGN dataset/vcache.c — the video index's cache file (issue 38), beside
 * the dataset's index cache (its path + ".video").
 *
 * One file: a header (magic, version, count, payload length, checksum), then
 * one record a video: its path under the root, the file's identity when it
 * was indexed (size, mtime, ctime, inode, device: a copy or a `touch` cannot
 * keep the ctime), and its byte index (video/vindex.c's words, none when the
 * file has none).  Written to a temporary name and renamed into place, 0644
 * (remote data's, under the cache folder's remote-index/: 0600).
 * Never trusted blindly, by the rules of the dataset's cache (dataset/cache.c,
 * issue 36): a file not owned by the user or writable by others is refused
 * (base/trust.c); a bad magic, version, length or checksum refuses the whole
 * (the caller rebuilds and says so, naming the file); a video whose identity
 * is not its file's now is indexed again; and every record's words are
 * checked (stk__vidx_view) before a loader plans a read from them.  Version
 * 2 holds video/vindex.c's coded records (~2.3 bytes a packet); a version-1
 * file (16 bytes a packet) is refused as not of this version and made
 * again, as a damaged one is.  This file
 * only stores and checks the container; what a record means is video/'s.
 */
#include "dataset/vcache.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAGIC 0x31584449564b5453ull /* "STKVIDX1" */
#define VERSION 2u /* 1: 16 bytes a packet (issue 38, item 2) */
enum { H_MAGIC, H_VERSION, H_COUNT, H_WORDS, H_SUM, H_WORDS_ALL };

static uint64_t sum_of(const uint64_t *w, size_t n)
{
	uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
	for (size_t i = 0; i < n; i++)
		h = stk__mix64(h ^ w[i]) + i;
	return h;
}

int stk__vcache_load(const char *path, struct stk__vcache *c, char *why, size_t whylen)
{
	memset(c, 0, sizeof(*c));
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : stk__errf(why, whylen, -errno, "%s: %s", path,
							  strerror(errno));
	struct stat st;
	int rc = fstat(fd, &st) ? -errno : 0;
	if (!rc)
		rc = stk__trust_stat(&st, (uid_t)-1, "video index", path, why, whylen);
	if (rc) {
		close(fd);
		return rc;
	}
	uint64_t h[H_WORDS_ALL];
	if (st.st_size < (off_t)sizeof(h) || pread(fd, h, sizeof(h), 0) != (ssize_t)sizeof(h) ||
	    h[H_MAGIC] != MAGIC || h[H_VERSION] != VERSION ||
	    h[H_WORDS] != ((uint64_t)st.st_size - sizeof(h)) / 8 ||
	    (uint64_t)st.st_size != sizeof(h) + h[H_WORDS] * 8) {
		close(fd);
		return stk__errf(why, whylen, STK_ECORRUPT, "%s: not a video index of this version, "
				 "or cut short", path);
	}
	uint64_t *w = malloc(h[H_WORDS] ? h[H_WORDS] * 8 : 8);
	if (!w) {
		close(fd);
		return -ENOMEM;
	}
	ssize_t got = pread(fd, w, h[H_WORDS] * 8, sizeof(h));
	close(fd);
	if (got != (ssize_t)(h[H_WORDS] * 8) || sum_of(w, h[H_WORDS]) != h[H_SUM]) {
		free(w);
		return stk__errf(why, whylen, STK_ECORRUPT, "%s: its checksum does not match "
				 "(damaged or altered)", path);
	}
	/* walk the records once: every length inside the payload */
	size_t n = h[H_COUNT], at = 0;
	c->item = calloc(n ? n : 1, sizeof(*c->item));
	if (!c->item) {
		free(w);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		if (at + 7 > h[H_WORDS]) {
			free(w);
			free(c->item);
			c->item = NULL;
			return stk__errf(why, whylen, STK_ECORRUPT, "%s: record %zu runs past the end",
					 path, i);
		}
		struct stk__vcache_item *it = &c->item[i];
		uint64_t plen = w[at], pw = (plen + 8) / 8; /* the path, NUL-ended, padded */
		it->size = w[at + 1];
		it->mtime_ns = w[at + 2];
		it->ctime_ns = w[at + 3];
		it->ino = w[at + 4];
		it->dev = w[at + 5];
		it->words = w[at + 6];
		at += 7;
		if (plen > PATH_MAX || at + pw > h[H_WORDS] || it->words > h[H_WORDS] - at - pw ||
		    memchr((const char *)(w + at), 0, plen) || ((const char *)(w + at))[plen]) {
			free(w);
			free(c->item);
			c->item = NULL;
			return stk__errf(why, whylen, STK_ECORRUPT, "%s: record %zu is malformed",
					 path, i);
		}
		it->path = (const char *)(w + at);
		at += pw;
		it->rec = w + at;
		at += it->words;
	}
	c->n = n;
	c->words = w;
	return 1;
}

void stk__vcache_free(struct stk__vcache *c)
{
	free(c->words);
	free(c->item);
	memset(c, 0, sizeof(*c));
}

int stk__vcache_write(const char *path, const struct stk__vcache_item *items, size_t n,
		      mode_t mode)
{
	size_t words = 0;
	for (size_t i = 0; i < n; i++)
		words += 7 + (strlen(items[i].path) + 8) / 8 + items[i].words;
	uint64_t *w = calloc(words + H_WORDS_ALL, 8);
	if (!w)
		return -ENOMEM;
	uint64_t *p = w + H_WORDS_ALL;
	for (size_t i = 0; i < n; i++) {
		const struct stk__vcache_item *it = &items[i];
		size_t plen = strlen(it->path);
		*p++ = plen;
		*p++ = it->size;
		*p++ = it->mtime_ns;
		*p++ = it->ctime_ns;
		*p++ = it->ino;
		*p++ = it->dev;
		*p++ = it->words;
		memcpy(p, it->path, plen); /* the rest of its words are zeros (calloc) */
		p += (plen + 8) / 8;
		if (it->words)
			memcpy(p, it->rec, it->words * 8);
		p += it->words;
	}
	w[H_MAGIC] = MAGIC;
	w[H_VERSION] = VERSION;
	w[H_COUNT] = n;
	w[H_WORDS] = words;
	w[H_SUM] = sum_of(w + H_WORDS_ALL, words);
	char tmp[PATH_MAX];
	int rc = 0;
	if (snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid()) >= (int)sizeof(tmp))
		rc = -ENAMETOOLONG;
	int fd = rc ? -1 : open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (!rc && fd < 0)
		rc = -errno;
	size_t len = (words + H_WORDS_ALL) * 8, done = 0;
	while (!rc && done < len) {
		ssize_t k = write(fd, (const char *)w + done, len - done);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			rc = k < 0 ? -errno : -EIO;
		else
			done += (size_t)k;
	}
	if (!rc && fchmod(fd, mode))
		rc = -errno;
	if (fd >= 0 && close(fd) && !rc)
		rc = -errno;
	if (!rc && rename(tmp, path))
		rc = -errno;
	if (rc && fd >= 0)
		unlink(tmp);
	free(w);
	return rc;
}
