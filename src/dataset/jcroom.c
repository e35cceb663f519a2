/*
 * DESIGN dataset/jcroom.c — the room jpeg_cache's copies take across every
 * dataset that keeps them in one cache folder (<cache>/jpeg/<key>/, one
 * folder a dataset; dataset/jcache.c owns one folder's copies).
 *
 * jpeg_cache_limit bounds all of them together, so that a user who points
 * many datasets at one cache, or deletes a dataset, does not find the disk
 * filled by copies nobody reads.  Each folder keeps a record ("dataset":
 * its dataset's folder or file list, and the bytes its copies took when it
 * was last counted), written at each sweep and when its loader closes.  At
 * a loader's create its sweep walks the other folders once (a record each,
 * not their copies): a folder whose dataset is gone (its path answers
 * ENOENT) is emptied of the names stoker writes and removed; the others'
 * bytes count against the limit.  A folder with no record (made before
 * records were) is counted by walking it once.  Only a record this machine
 * wrote (/etc/machine-id, else the host name) can have its folder removed:
 * a cache shared between machines holds paths only their machine has.  Records and copies are
 * trusted as the copies are: this user's, written by no one else, in
 * folders that are this user's alone (dataset/jcache.c checks those).
 */
#include "dataset/jcache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#define RECORD "dataset"
#define RMAGIC 0x32524347504a4b53ull /* "SKJPGCR2": with the machine */
enum { R_MAGIC, R_BYTES, R_LEN, R_HOST, R_SUM, R_WORDS };

static uint64_t rsum_of(const uint64_t *w, const char *root, size_t len)
{
	return stk__mix64(stk__xxh64(root, len) ^ w[R_MAGIC] ^ stk__mix64(w[R_BYTES]) ^
			  stk__mix64(w[R_LEN] + 1) ^ stk__mix64(w[R_HOST] + 2));
}

/* This machine, as a record keeps it: a cache folder shared between
 * machines (a home folder on NFS) holds datasets at paths only their own
 * machine has, so only a folder recorded here is removed for its path. */
static uint64_t machine(void)
{
	char id[256] = "";
	int fd = open("/etc/machine-id", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, id, sizeof(id) - 1) : -1;
	if (fd >= 0)
		close(fd);
	if (n <= 0 && gethostname(id, sizeof(id) - 1))
		return 1;
	id[sizeof(id) - 1] = 0;
	return stk__xxh64(id, strlen(id)) | 1;
}

bool stk__jcache_name(const char *name, uint64_t *h)
{
	if (strlen(name) != 20 || strcmp(name + 16, ".jpg"))
		return false;
	uint64_t v = 0;
	for (int i = 0; i < 16; i++) {
		char c = name[i];
		int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
		if (d < 0)
			return false;
		v = v << 4 | (uint64_t)d;
	}
	*h = v;
	return true;
}

bool stk__jcache_temp_name(const char *name)
{
	size_t n = strlen(name);
	return n > 24 && !strcmp(name + n - 4, ".tmp") && !memcmp(name + 16, ".jpg.", 5);
}

void stk__jcache_record(const struct stk__jcache *jc, uint64_t bytes)
{
	char path[PATH_MAX], tmp[PATH_MAX];
	if (!jc->dir || !jc->root ||
	    snprintf(path, sizeof(path), "%s/" RECORD, jc->dir) >= (int)sizeof(path) ||
	    snprintf(tmp, sizeof(tmp), "%s.%d.tmp", path, (int)getpid()) >= (int)sizeof(tmp))
		return;
	size_t len = strlen(jc->root);
	uint64_t w[R_WORDS] = {[R_MAGIC] = RMAGIC, [R_BYTES] = bytes, [R_LEN] = len,
			       [R_HOST] = machine()};
	w[R_SUM] = rsum_of(w, jc->root, len);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return; /* a record is advice: without one the folder is walked */
	struct iovec v[2] = {{w, sizeof(w)}, {(void *)jc->root, len}};
	ssize_t n = writev(fd, v, 2);
	if (close(fd) || n != (ssize_t)(sizeof(w) + len) || rename(tmp, path))
		unlink(tmp);
}

/* A folder's record: its dataset's path in root (rootlen bytes), its bytes
 * and the machine that wrote it; false when there is none, or it is
 * damaged or not trusted. */
static bool read_record(int dfd, char *root, size_t rootlen, uint64_t *bytes, uint64_t *host)
{
	int fd = openat(dfd, RECORD, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;
	char why[8];
	uint64_t w[R_WORDS];
	*bytes = *host = 0;
	if (fd < 0)
		return false;
	bool ok = !fstat(fd, &st) && S_ISREG(st.st_mode) &&
		  !stk__trust_stat(&st, (uid_t)-1, "record", RECORD, why, sizeof(why)) &&
		  read(fd, w, sizeof(w)) == (ssize_t)sizeof(w) && w[R_MAGIC] == RMAGIC &&
		  w[R_LEN] > 0 && w[R_LEN] < rootlen &&
		  read(fd, root, w[R_LEN]) == (ssize_t)w[R_LEN];
	close(fd);
	if (!ok)
		return false;
	root[w[R_LEN]] = 0;
	if (w[R_SUM] != rsum_of(w, root, w[R_LEN]) || root[0] != '/')
		return false;
	*bytes = w[R_BYTES];
	*host = w[R_HOST];
	return true;
}

/* Walks one folder: the bytes of its copies (and, with drop, removes them,
 * its temporaries and its record: only the names stoker writes). */
static uint64_t walk(int dfd, bool drop, uint64_t *files)
{
	DIR *d = fdopendir(dup(dfd));
	uint64_t bytes = 0, h;
	if (!d)
		return 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		struct stat st;
		bool ours = stk__jcache_name(de->d_name, &h) || stk__jcache_temp_name(de->d_name) ||
			    !strcmp(de->d_name, RECORD);
		if (!ours || fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) ||
		    !S_ISREG(st.st_mode))
			continue;
		if (drop && unlinkat(dfd, de->d_name, 0))
			continue;
		if (strcmp(de->d_name, RECORD)) {
			bytes += (uint64_t)st.st_size;
			*files += 1;
		}
	}
	closedir(d);
	return bytes;
}

int stk__jcache_others(const struct stk__jcache *jc, struct stk__jcache_sweep *out)
{
	char parent[PATH_MAX], root[PATH_MAX];
	if (snprintf(parent, sizeof(parent), "%s", jc->dir) >= (int)sizeof(parent))
		return -ENAMETOOLONG;
	char *slash = strrchr(parent, '/');
	if (!slash)
		return -EINVAL;
	const char *mine = jc->dir + (slash - parent) + 1;
	*slash = 0;
	int pfd = open(parent, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d = pfd >= 0 ? fdopendir(pfd) : NULL;
	if (!d) {
		int e = errno;
		if (pfd >= 0)
			close(pfd);
		return -e;
	}
	struct dirent *de;
	uint64_t here = machine();
	while ((de = readdir(d))) {
		uint64_t h, bytes, host, files = 0;
		char name[24];
		struct stat st;
		char why[8];
		/* a dataset's folder is named as a copy is, less ".jpg" */
		if (strlen(de->d_name) != 16 || !strcmp(de->d_name, mine) ||
		    snprintf(name, sizeof(name), "%s.jpg", de->d_name) >= (int)sizeof(name) ||
		    !stk__jcache_name(name, &h) ||
		    fstatat(pfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) || !S_ISDIR(st.st_mode) ||
		    stk__trust_stat(&st, (uid_t)-1, "folder", de->d_name, why, sizeof(why)))
			continue;
		int dfd = openat(pfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (dfd < 0)
			continue;
		struct stat rs;
		if (!read_record(dfd, root, sizeof(root), &bytes, &host)) {
			out->others_bytes += walk(dfd, false, &files); /* no record: counted */
		} else if (host == here && lstat(root, &rs) && errno == ENOENT) {
			out->gone_bytes += walk(dfd, true, &files);
			out->gone += files;
			if (!unlinkat(pfd, de->d_name, AT_REMOVEDIR))
				out->gone_sets++;
		} else {
			out->others_bytes += bytes;
		}
		close(dfd);
	}
	closedir(d);
	return 0;
}
