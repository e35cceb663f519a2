/*
 * DESIGN dataset/jcache.c — the loader's own rewrites of a folder's JPEGs
 * (image option jpeg_cache): each JPEG losslessly transcoded (the same DCT
 * coefficients, so the same pixels: sequential, restart intervals that tile
 * the rows) and kept in <cache folder>/jpeg/<key of the dataset's folder,
 * or of its file list: two lists in one folder keep their own>/, one
 * file a sample, named by a hash of its path.  The loader reads the copy
 * instead of the file once it exists (loader/jcache.c).
 *
 * Never trusted blindly, by the rules of the index cache (dataset/cache.c,
 * base/trust.c): the folders are made 0700 and refused when another user's
 * or writable by others; a copy that is not a regular file of this user's,
 * or that others may write, is refused; and every read of a copy is checked
 * before its bytes are decoded: the header (magic, version, lengths, its own
 * checksum), the source file's identity now (size, mtime, ctime, inode,
 * device: a copy or a `touch` of the source cannot keep them) against the
 * one the copy was made from, and the JPEG bytes' checksum.  The checksum
 * finds damage, not forgery: what keeps another user's bytes out is the
 * owner and mode.  Written to a temporary name and renamed into place.
 *
 * Bounded (image option jpeg_cache_limit, over every dataset's copies in
 * the cache folder: dataset/jcroom.c): at create the folder is walked
 * once (stk__jcache_sweep): copies of files no longer in the dataset
 * (removed, renamed) and a dead writer's temporary files are removed, the
 * rest counted with the other datasets' (whose folders are removed when
 * their dataset is gone), and this dataset's removed past the limit when
 * it was lowered or the others fill it.  While the
 * loader runs a copy is written only when it fits under the limit; once
 * one does not, none is made for the rest of the run (for a loop over the
 * dataset, keeping the first copies serves as well as any other choice,
 * and never rewrites one each epoch as least-recently-used would).  A copy
 * of a changed file is refused when read and written over by the new one.
 */
#include "dataset/jcache.h"
#include "dataset/build.h"
#include "dataset/index.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define MAGIC 0x314347504a4b5453ull /* "STKJPGC1" */
#define VERSION 1u
enum { H_MAGIC, H_VERSION, H_SIZE, H_MTIME, H_CTIME, H_INO, H_DEV, H_LEN, H_SUM, H_HSUM, H_WORDS };
_Static_assert(H_WORDS * 8 == STK_JCACHE_HDR, "header size");

static uint64_t ns_of(struct timespec t)
{
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static uint64_t hsum_of(const uint64_t *h)
{
	uint64_t s = 0x9e3779b97f4a7c15ull;
	for (int i = 0; i < H_HSUM; i++)
		s = stk__mix64(s ^ h[i]) + (uint64_t)i;
	return s;
}

static int mkdir_trusted(char *path, char *why, size_t whylen)
{
	if (mkdir(path, 0700) && errno != EEXIST)
		return stk__errf(why, whylen, -errno, "JPEG cache folder %s: %s", path,
				 strerror(errno));
	return stk__trust_dir(path, why, whylen);
}

int stk__jcache_open(struct stk__jcache *jc, const char *cache_dir, const char *root, int64_t n,
		     char *why, size_t whylen)
{
	memset(jc, 0, sizeof(*jc));
	char dir[PATH_MAX];
	int rc;
	if (cache_dir && *cache_dir) {
		if (snprintf(dir, sizeof(dir), "%s", cache_dir) >= (int)sizeof(dir))
			return stk__errf(why, whylen, -ENAMETOOLONG, "cache_dir too long");
		if ((rc = stk__mkdir_p(dir)) < 0 || (rc = mkdir_trusted(dir, why, whylen)) < 0)
			return rc == -EPERM ? rc : stk__errf(why, whylen, rc, "cache folder %s: %s",
							     dir, strerror(-rc));
	} else if ((rc = stk__cache_dir(dir, sizeof(dir), why, whylen)) < 0) {
		return rc;
	}
	size_t used = strlen(dir);
	uint64_t key = stk__xxh64(root, strlen(root));
	if (snprintf(dir + used, sizeof(dir) - used, "/jpeg") >= (int)(sizeof(dir) - used) ||
	    (rc = mkdir_trusted(dir, why, whylen)) < 0)
		return rc < 0 ? rc : -ENAMETOOLONG;
	used = strlen(dir);
	if (snprintf(dir + used, sizeof(dir) - used, "/%016llx", (unsigned long long)key) >=
		    (int)(sizeof(dir) - used) ||
	    (rc = mkdir_trusted(dir, why, whylen)) < 0)
		return rc < 0 ? rc : -ENAMETOOLONG;
	jc->dlen = strlen(dir);
	jc->plen = jc->dlen + 1 + 16 + 4 + 1; /* "/%016llx.jpg" */
	jc->dir = strdup(dir);
	jc->root = strdup(root);
	jc->state = calloc((size_t)(n > 0 ? n : 1), sizeof(*jc->state));
	jc->n = n;
	if (!jc->dir || !jc->root || !jc->state) {
		stk__jcache_close(jc);
		return stk__errf(why, whylen, -ENOMEM, "out of memory");
	}
	return 0;
}

void stk__jcache_close(struct stk__jcache *jc)
{
	if (jc->swept) {
		uint64_t u = atomic_load(&jc->used);
		stk__jcache_record(jc, u > jc->others ? u - jc->others : 0);
	}
	free(jc->dir);
	free(jc->root);
	free((void *)jc->state);
	memset(jc, 0, sizeof(*jc));
}

void stk__jcache_path(const struct stk__jcache *jc, const char *rel, char *buf)
{
	snprintf(buf, jc->plen, "%s/%016llx.jpg", jc->dir,
		 (unsigned long long)stk__xxh64(rel, strlen(rel)));
}

int64_t stk__jcache_look(const char *path, char *why, size_t whylen)
{
	struct stat st;
	if (lstat(path, &st))
		return errno == ENOENT ? 0 : stk__errf(why, whylen, -errno, "%s: %s", path,
						      strerror(errno));
	if (!S_ISREG(st.st_mode))
		return stk__errf(why, whylen, -EPERM, "JPEG copy %s is not a regular file", path);
	int rc = stk__trust_stat(&st, (uid_t)-1, "JPEG copy", path, why, whylen);
	if (rc)
		return rc;
	if (st.st_size <= STK_JCACHE_HDR || st.st_size > UINT32_MAX - STK_JC_COPY)
		return stk__errf(why, whylen, STK_ECORRUPT, "JPEG copy %s: %lld bytes", path,
				 (long long)st.st_size);
	return st.st_size;
}

int stk__jcache_check(const uint8_t *buf, size_t len, const struct stat *src,
		      const uint8_t **jpeg, size_t *jlen, char *why, size_t whylen)
{
	uint64_t h[H_WORDS];
	if (len <= sizeof(h))
		return stk__errf(why, whylen, STK_ECORRUPT, "%zu bytes, shorter than its header", len);
	memcpy(h, buf, sizeof(h));
	if (h[H_MAGIC] != MAGIC || h[H_VERSION] != VERSION || h[H_HSUM] != hsum_of(h))
		return stk__errf(why, whylen, STK_ECORRUPT, "its header is damaged");
	if (h[H_LEN] != len - sizeof(h))
		return stk__errf(why, whylen, STK_ECORRUPT, "%zu bytes after its header, not %llu",
				 len - sizeof(h), (unsigned long long)h[H_LEN]);
	if (h[H_SIZE] != (uint64_t)src->st_size || h[H_MTIME] != ns_of(src->st_mtim) ||
	    h[H_CTIME] != ns_of(src->st_ctim) || h[H_INO] != (uint64_t)src->st_ino ||
	    h[H_DEV] != (uint64_t)src->st_dev)
		return stk__errf(why, whylen, -ESTALE,
				 "made from another version of the file (size, mtime, ctime, "
				 "inode or device differ)");
	if (h[H_SUM] != stk__xxh64(buf + sizeof(h), len - sizeof(h)))
		return stk__errf(why, whylen, STK_ECORRUPT, "its checksum does not match its bytes");
	*jpeg = buf + sizeof(h);
	*jlen = len - sizeof(h);
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

int stk__jcache_sweep(struct stk__jcache *jc, const struct stk_dataset *ds,
		      struct stk__jcache_sweep *out)
{
	memset(out, 0, sizeof(*out));
	uint64_t *want = malloc((size_t)(ds->n > 0 ? ds->n : 1) * sizeof(*want));
	struct { uint64_t h, size; } *kept = NULL;
	size_t nkept = 0, capk = 0;
	if (!want)
		return -ENOMEM;
	for (int64_t i = 0; i < ds->n; i++) {
		const char *rel = stk__entry_path(ds, i);
		want[i] = stk__xxh64(rel, strlen(rel));
	}
	qsort(want, (size_t)ds->n, sizeof(*want), cmp_u64);
	int fd = open(jc->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		free(want);
		return -e;
	}
	int rc = 0;
	time_t now = time(NULL);
	struct dirent *de;
	while ((de = readdir(d))) {
		uint64_t h = 0;
		struct stat st;
		bool copy = stk__jcache_name(de->d_name, &h);
		if ((!copy && !stk__jcache_temp_name(de->d_name)) ||
		    fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) || !S_ISREG(st.st_mode))
			continue; /* not a name of ours, or not a plain file: left alone */
		if (!copy) { /* a writer's, unless it died: one takes milliseconds */
			if (st.st_mtime + 60 < now && !unlinkat(fd, de->d_name, 0))
				out->temps++;
			continue;
		}
		if (!bsearch(&h, want, (size_t)ds->n, sizeof(*want), cmp_u64)) {
			if (!unlinkat(fd, de->d_name, 0)) {
				out->orphans++;
				out->orphan_bytes += (uint64_t)st.st_size;
			}
			continue;
		}
		if (nkept == capk) {
			size_t cap = capk ? 2 * capk : 1024;
			void *k = realloc(kept, cap * sizeof(*kept));
			if (!k) {
				rc = -ENOMEM;
				break;
			}
			kept = k;
			capk = cap;
		}
		kept[nkept].h = h;
		kept[nkept++].size = (uint64_t)st.st_size;
		out->kept_bytes += (uint64_t)st.st_size;
	}
	if (!rc)
		rc = stk__jcache_others(jc, out); /* the other datasets' copies */
	struct statvfs vs;
	if (!jc->limit) { /* auto */
		uint64_t q = statvfs(jc->dir, &vs) ? 1ull << 30 :
			     ((uint64_t)vs.f_bavail * vs.f_frsize + out->kept_bytes +
			      out->others_bytes) / 4;
		jc->limit = q < (100ull << 30) ? q : 100ull << 30;
	}
	for (size_t i = nkept; !rc && i-- > 0 && out->kept_bytes + out->others_bytes > jc->limit;) {
		char name[24];
		snprintf(name, sizeof(name), "%016llx.jpg", (unsigned long long)kept[i].h);
		if (!unlinkat(fd, name, 0)) {
			out->evicted++;
			out->evicted_bytes += kept[i].size;
			out->kept_bytes -= kept[i].size;
			nkept--;
		}
	}
	out->kept = nkept;
	jc->others = out->others_bytes;
	atomic_store(&jc->used, out->kept_bytes + out->others_bytes);
	if (!rc) {
		jc->swept = true;
		stk__jcache_record(jc, out->kept_bytes);
	}
	closedir(d);
	free(kept);
	free(want);
	return rc;
}

bool stk__jcache_reserve(struct stk__jcache *jc, uint64_t len)
{
	if (atomic_load(&jc->stopped))
		return false;
	uint64_t was = atomic_fetch_add(&jc->used, len);
	if (was + len <= jc->limit)
		return true;
	atomic_fetch_sub(&jc->used, len);
	atomic_store(&jc->stopped, true);
	return false;
}

void stk__jcache_release(struct stk__jcache *jc, uint64_t len)
{
	uint64_t u = atomic_load(&jc->used);
	while (!atomic_compare_exchange_weak(&jc->used, &u, u > len ? u - len : 0))
		;
}

int64_t stk__jcache_write(const char *path, const struct stat *src, const void *jpeg,
			  size_t jlen)
{
	static _Atomic uint64_t seq;
	char tmp[PATH_MAX];
	if (snprintf(tmp, sizeof(tmp), "%s.%d.%llu.tmp", path, (int)getpid(),
		     (unsigned long long)atomic_fetch_add(&seq, 1)) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	uint64_t h[H_WORDS] = {
		[H_MAGIC] = MAGIC, [H_VERSION] = VERSION, [H_SIZE] = (uint64_t)src->st_size,
		[H_MTIME] = ns_of(src->st_mtim), [H_CTIME] = ns_of(src->st_ctim),
		[H_INO] = (uint64_t)src->st_ino, [H_DEV] = (uint64_t)src->st_dev, [H_LEN] = jlen,
		[H_SUM] = stk__xxh64(jpeg, jlen)};
	h[H_HSUM] = hsum_of(h);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -errno;
	struct iovec v[2] = {{h, sizeof(h)}, {(void *)jpeg, jlen}};
	ssize_t w = writev(fd, v, 2);
	int rc = w < 0 ? -errno : (size_t)w != sizeof(h) + jlen ? -EIO : 0;
	if (close(fd) && !rc)
		rc = -errno;
	if (!rc && rename(tmp, path))
		rc = -errno;
	if (rc) {
		unlink(tmp);
		return rc;
	}
	return (int64_t)(sizeof(h) + jlen);
}
