/*
 * DESIGN loader/jcache.c — image option jpeg_cache: the loader reads its own
 * lossless rewrite of a folder's JPEG (dataset/jcache.c) instead of the file.
 *
 * The first time the I/O thread lays out a sample it looks for its copy
 * (one lstat: a trusted regular file, its length); a sample with a copy is
 * read from it (read.c), one without is read from its file.  A decode thread
 * given a file's bytes with no copy yet transcodes them first
 * (stk_jpeg_transcode: the same DCT coefficients, sequential, restart
 * intervals), decodes the rewrite (its crop's intervals only: cheaper than
 * the file's own decode, most of all for a progressive file) and writes it
 * as the copy; from then on the crop of every epoch entropy-decodes only its
 * own intervals, and a progressive file costs what a baseline one does.  Not
 * a JPEG, or one libjpeg warns about: the file's bytes are decoded, as
 * without the cache (its error, if any, is the file's).  A file changed less than a second
 * before its read was submitted is not copied this time (git's racy-clean
 * rule: its ctime could not tell a change made during the read).
 *
 * A copy read is checked before its bytes are decoded (dataset/jcache.c:
 * header, the source's size, mtime, ctime, inode and device now, checksum);
 * a copy refused, or whose read failed, is named in a notice (the first 16)
 * and the file itself is read by the decode thread, decoded, and copied
 * again.  Pixels never depend on the copy: its coefficients are the file's.
 * Bounded (jpeg_cache_limit, dataset/jcache.c): at create the copies'
 * folder is swept (copies of files no longer in the dataset removed, the
 * rest counted, removed past the limit), and a copy is written only when it
 * fits; the first that does not stops the copies for the run, said once.
 * A full disk (ENOSPC, EDQUOT) stops them too, said once naming the folder
 * and the reason: the sample was decoded before its copy was written, so
 * none is lost and the epoch goes on reading the files.  A copy refused
 * when read (damaged, or its file changed) is removed, and written again.
 * Memory: a word a sample and a path a slot's sample, fixed at create.
 */
#include "loader/loader.h"
#include "dataset/jcache.h"
#include "image/image.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define NAMED 16 /* refused copies named in a notice; the rest counted */
#define RACY_NS 1000000000ull

int stk__loader_jcache_open(struct stk_loader *l)
{
	if (!(l->img.flags & STK_IMG_JPEG_CACHE))
		return 0;
	if (!l->image || l->video || l->ds->shards || l->ds->remote || !l->split) {
		stk__loader_notice(l, "jpeg_cache applies to image mode over a folder or a file "
				   "list without keep_raw: off here");
		return 0;
	}
	char why[512];
	struct stk__jcache *jc = calloc(1, sizeof(*jc));
	if (!jc)
		return -ENOMEM;
	/* a folder's copies are keyed by the folder, a file list's by the list:
	 * two lists in one folder must not sweep each other's copies away */
	char list[PATH_MAX];
	struct stat st;
	const char *key = l->ds->root;
	if (l->o.path && realpath(l->o.path, list) && !stat(list, &st) && S_ISREG(st.st_mode))
		key = list;
	int rc = stk__jcache_open(jc, l->cache_dir, key, l->ds->n, why, sizeof(why));
	if (rc) {
		free(jc);
		if (rc == -ENOMEM)
			return rc;
		stk__loader_notice(l, "jpeg_cache off: %s", why);
		return 0;
	}
	struct stk__jcache_sweep sw;
	jc->limit = l->img.jpeg_cache_limit;
	if ((rc = stk__jcache_sweep(jc, l->ds, &sw)) < 0) {
		if (rc != -ENOMEM)
			stk__loader_notice(l, "jpeg_cache off: JPEG cache folder %s: %s", jc->dir,
					   strerror(-rc));
		stk__jcache_close(jc);
		free(jc);
		return rc == -ENOMEM ? rc : 0;
	}
	if (sw.orphans)
		stk__loader_notice(l, "jpeg_cache: %llu copies of files no longer in the dataset "
				   "removed from %s (%.1f MB)", (unsigned long long)sw.orphans, jc->dir,
				   (double)sw.orphan_bytes / 1e6);
	if (sw.gone_sets || sw.gone)
		stk__loader_notice(l, "jpeg_cache: the copies of %llu datasets that are gone "
				   "removed from %.*s (%llu copies, %.1f MB)",
				   (unsigned long long)sw.gone_sets,
				   (int)(strrchr(jc->dir, '/') - jc->dir), jc->dir,
				   (unsigned long long)sw.gone, (double)sw.gone_bytes / 1e6);
	if (sw.evicted)
		stk__loader_notice(l, "jpeg_cache: %llu copies removed from %s (%.1f MB) to keep "
				   "them under jpeg_cache_limit (%llu bytes)",
				   (unsigned long long)sw.evicted, jc->dir,
				   (double)sw.evicted_bytes / 1e6, (unsigned long long)jc->limit);
	l->jpaths = calloc((size_t)l->pool.nslots * l->o.batch_size, jc->plen);
	if (!l->jpaths) {
		stk__jcache_close(jc);
		free(jc);
		return -ENOMEM;
	}
	l->jc = jc;
	return 0;
}

void stk__loader_jcache_close(struct stk_loader *l)
{
	if (l->jc) {
		stk__jcache_close(l->jc);
		free(l->jc);
		l->jc = NULL;
	}
	free(l->jpaths);
	l->jpaths = NULL;
}

static void refused(const struct stk_loader *l, const char *copy, int64_t idx, const char *why)
{
	uint32_t k = atomic_fetch_add(&l->jc->refused, 1);
	if (k >= NAMED)
		return;
	const char *rel = stk__entry_path(l->ds, idx);
	bool abs = rel[0] == '/';
	stk__loader_notice(l, "JPEG copy %s of %s%s%s refused: %s; the file is read instead%s",
			   copy, abs ? "" : l->ds->root, abs ? "" : "/", rel, why,
			   k + 1 == NAMED ? " (further refusals are not named)" : "");
}

bool stk__loader_jcopy(struct stk_loader *l, struct slot *s, uint32_t i, int64_t idx,
		       const char **path, uint64_t *size)
{
	struct stk__jcache *jc = l->jc;
	if (!jc || idx < 0 || idx >= jc->n)
		return false;
	uint32_t st = atomic_load_explicit(&jc->state[idx], memory_order_relaxed);
	if (st != STK_JC_UNKNOWN && st < STK_JC_COPY)
		return false;
	char *p = l->jpaths + ((size_t)(s - l->slots) * l->o.batch_size + i) * jc->plen;
	stk__jcache_path(jc, stk__entry_path(l->ds, idx), p);
	if (st == STK_JC_UNKNOWN) {
		char why[512];
		int64_t n = stk__jcache_look(p, why, sizeof(why));
		if (n < 0)
			refused(l, p, idx, why);
		st = n > 0 ? STK_JC_COPY + (uint32_t)n : STK_JC_NONE;
		uint32_t was = STK_JC_UNKNOWN;
		atomic_compare_exchange_strong(&jc->state[idx], &was, st);
		if (st < STK_JC_COPY)
			return false;
	}
	*path = p;
	*size = st - STK_JC_COPY;
	return true;
}

static uint64_t real_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_REALTIME, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* Sample idx's file bytes, read from `read_at` (realtime ns), when it has
 * no copy: rewritten (the copy in *out, *olen; 0) when its file has not
 * changed since before that read, else 1 (left as it is; the copy's state
 * MAKING until write_copy, on 0). */
static int rewrite(struct stk_loader *l, int64_t idx, const uint8_t *buf, size_t len,
		   uint64_t read_at, struct stat *st, void **out, size_t *olen)
{
	struct stk__jcache *jc = l->jc;
	uint32_t was = STK_JC_NONE;
	if (atomic_load_explicit(&jc->stopped, memory_order_relaxed))
		return 1; /* the limit, or a full disk: no more copies this run */
	if (idx < 0 || idx >= jc->n ||
	    !atomic_compare_exchange_strong(&jc->state[idx], &was, STK_JC_MAKING))
		return 1; /* another thread's, never, or not looked at */
	uint64_t ctime = 0;
	if (!fstatat(l->ds->root_fd, stk__entry_path(l->ds, idx), st, 0))
		ctime = (uint64_t)st->st_ctim.tv_sec * 1000000000ull + (uint64_t)st->st_ctim.tv_nsec;
	if (!ctime || (uint64_t)st->st_size != len || ctime + RACY_NS > read_at) {
		atomic_store(&jc->state[idx], STK_JC_NONE); /* the next epoch tries again */
		return 1;
	}
	char why[256];
	if (stk_jpeg_transcode(buf, len, out, olen, why, sizeof(why))) {
		atomic_store(&jc->state[idx], STK_JC_NEVER); /* not a JPEG, or refused */
		return 1;
	}
	return 0;
}

/* Writes the rewrite of sample idx (made by rewrite) and frees it. */
static void write_copy(struct stk_loader *l, int64_t idx, const struct stat *st, void *out,
		       size_t olen)
{
	struct stk__jcache *jc = l->jc;
	const char *rel = stk__entry_path(l->ds, idx);
	uint32_t next = STK_JC_NEVER;
	uint64_t len = STK_JCACHE_HDR + (uint64_t)olen;
	if (!stk__jcache_reserve(jc, len)) {
		if (!atomic_exchange(&jc->said, true))
			stk__loader_notice(l, "jpeg_cache: the copies in %s reached jpeg_cache_limit "
					   "(%llu bytes): no more are made in this run; the other "
					   "files are read", jc->dir, (unsigned long long)jc->limit);
		stk_free(out);
		atomic_store(&jc->state[idx], STK_JC_NONE);
		return;
	}
	char *p = malloc(jc->plen);
	int64_t n = p ? (stk__jcache_path(jc, rel, p), stk__jcache_write(p, st, out, olen)) : -ENOMEM;
	if (n <= 0)
		stk__jcache_release(jc, len);
	if (n > 0 && (uint64_t)n < UINT32_MAX - STK_JC_COPY) {
		next = STK_JC_COPY + (uint32_t)n;
		atomic_fetch_add(&jc->made, 1);
	} else if (n == -ENOSPC || n == -EDQUOT) { /* the sample is decoded: nothing lost */
		atomic_store(&jc->stopped, true);
		next = STK_JC_NONE;
		if (!atomic_exchange(&jc->said, true))
			stk__loader_notice(l, "jpeg_cache: the cache folder %s is full (%s): no more "
					   "copies are made in this run; the files are read", jc->dir,
					   strerror((int)-n));
	} else if (n < 0 && atomic_fetch_add(&jc->refused, 1) < NAMED) {
		stk__loader_notice(l, "JPEG copy %s could not be written: %s; the file is read",
				   p ? p : rel, strerror((int)-n));
	}
	free(p);
	stk_free(out);
	atomic_store(&jc->state[idx], next);
}

/* Decodes sample idx from its file's bytes; without a copy yet, rewrites
 * them first and decodes the rewrite (the same pixels: the same
 * coefficients), whose crop takes only its restart intervals, then keeps it. */
static int decode_bytes(struct stk_loader *l, int64_t idx, const uint8_t *buf, size_t len,
			uint64_t read_at, uint64_t seed, void *out, char *why, size_t whylen,
			struct stk__decode_info *info)
{
	struct stat st;
	void *rw;
	size_t rlen;
	if (rewrite(l, idx, buf, len, read_at, &st, &rw, &rlen))
		return stk__image_decode(&l->img, buf, len, seed, out, why, whylen, info);
	int rc = stk__image_decode(&l->img, rw, rlen, seed, out, why, whylen, info);
	if (rc) { /* not expected: the file's own decode has the last word */
		stk_free(rw);
		atomic_store(&l->jc->state[idx], STK_JC_NEVER);
		return stk__image_decode(&l->img, buf, len, seed, out, why, whylen, info);
	}
	write_copy(l, idx, &st, rw, rlen);
	return 0;
}

/* The file of sample idx read here (its copy refused), decoded, copied again. */
static int decode_file(struct stk_loader *l, int64_t idx, uint64_t seed, void *out, char *why,
		       size_t whylen, struct stk__decode_info *info)
{
	const char *rel = stk__entry_path(l->ds, idx);
	bool abs = rel[0] == '/';
	uint64_t t = real_ns();
	int fd = openat(l->ds->root_fd, rel, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st)) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		return stk__errf(why, whylen, -e, "%s%s%s: %s", abs ? "" : l->ds->root,
				 abs ? "" : "/", rel, strerror(e));
	}
	size_t len = (size_t)st.st_size;
	uint8_t *buf = malloc(len ? len : 1);
	ssize_t got = buf ? pread(fd, buf, len, 0) : -1;
	int e = got < 0 ? (buf ? errno : ENOMEM) : 0;
	close(fd);
	if (e || (size_t)got != len) {
		free(buf);
		return stk__errf(why, whylen, e ? -e : STK_ESHORT, "%s%s%s: %s", abs ? "" : l->ds->root,
				 abs ? "" : "/", rel, e ? strerror(e) : "short read");
	}
	int rc = decode_bytes(l, idx, buf, len, t, seed, out, why, whylen, info);
	free(buf);
	return rc;
}

int stk__loader_jcache_decode(struct stk_loader *l, struct sio *x, int64_t idx, uint64_t seed,
			      void *out, char *why, size_t whylen, struct stk__decode_info *info)
{
	const uint8_t *buf = (const uint8_t *)x->io.buf + x->skip;
	if (x->jcopy) {
		const uint8_t *jpeg;
		size_t jlen;
		struct stat st;
		int rc = x->jrc;
		if (rc)
			snprintf(why, whylen, "its read failed: %s", stk_strerror(rc));
		else if (fstatat(l->ds->root_fd, stk__entry_path(l->ds, idx), &st, 0))
			rc = stk__errf(why, whylen, -errno, "its file: %s", strerror(errno));
		else
			rc = stk__jcache_check(buf, x->size, &st, &jpeg, &jlen, why, whylen);
		if (!rc) {
			rc = stk__image_decode(&l->img, jpeg, jlen, seed, out, why, whylen, info);
			if (!rc)
				return 0;
		}
		refused(l, x->io.path, idx, why);
		if (!unlink(x->io.path)) /* written again from the file, room allowing */
			stk__jcache_release(l->jc, x->size);
		atomic_store(&l->jc->state[idx], STK_JC_NONE);
		return decode_file(l, idx, seed, out, why, whylen, info);
	}
	if (!x->t_submit) /* (a read's submit time: the racy-clean rule needs it) */
		return stk__image_decode(&l->img, buf, x->size, seed, out, why, whylen, info);
	uint64_t read_at = real_ns() - (stk__now_ns() - x->t_submit);
	return decode_bytes(l, idx, buf, x->size, read_at, seed, out, why, whylen, info);
}
