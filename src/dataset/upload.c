/*
 * dataset/upload.c — stoker/upload.h: files PUT into an S3-compatible store
 * (io/rblock.c signs and sends them), and for a tar shard its index beside
 * it, built from the local file by the rules a loader uses
 * (dataset/shards.c) and encoded as the loader's per-shard cache is
 * (dataset/sidx.c), with the size and the ETag the store answered the
 * shard's PUT with.  The index goes up after its shard, so a reader between
 * the two PUTs finds no index (or one for the previous version: stale,
 * refused) and reads the shard's headers instead: never a wrong index.
 */
#include "dataset/sidx.h"
#include "dataset/tar.h"
#include "io/remote.h"
#include "stoker/upload.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct stk_upload {
	struct stk__remote *r;
	CURL *h;
};

int stk_upload_create(struct stk_upload **out, const char *url, char *err,
			      size_t errlen)
{
	*out = NULL;
	if (err && errlen)
		err[0] = 0;
	if (!url || strncmp(url, "s3://", 5)) {
		snprintf(err, errlen, "%s: uploads go to s3://BUCKET/PREFIX/", url ? url : "(null)");
		return -EINVAL;
	}
	struct stk_upload *u = calloc(1, sizeof(*u));
	if (!u) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	int rc = stk__remote_create(&u->r, url, err, errlen);
	if (!rc && u->r->pattern[0]) {
		snprintf(err, errlen, "%s: name a folder to upload into (s3://BUCKET/PREFIX/), not "
			 "a shard or a pattern", url);
		rc = -EINVAL;
	}
	if (!rc && !(u->h = curl_easy_init())) {
		snprintf(err, errlen, "out of memory");
		rc = -ENOMEM;
	}
	if (!rc)
		rc = stk__remote_check(u->r, err, errlen);
	if (rc) {
		stk_upload_destroy(u);
		return rc;
	}
	*out = u;
	return 0;
}

const char *stk_upload_url(const struct stk_upload *u)
{
	return u->r->root;
}

/* The local shard's index, by the loader's rules (a damaged tar fails). */
static int index_local(int fd, uint64_t size, const char *path, const char *name,
		       struct builder *b, char *err, size_t errlen)
{
	static const struct stk__index_opts o = {.path = ""};
	*b = (struct builder){.o = &o, .root_fd = -1, .err = err, .errlen = errlen, .root = path};
	struct stk__tar_iter *it = NULL;
	int rc = stk__tar_open(&it, fd, size);
	if (rc)
		return stk__build_fail(b, rc, "%s: %s", path, stk_strerror(rc));
	/* messages say root/rel: the path, then the name it goes up as */
	rc = stk__shards_index_tar(b, name, it);
	stk__tar_close(it);
	return rc;
}

int stk_upload_file(struct stk_upload *u, const char *path, const char *name,
			    unsigned flags, stk_upload_progress_fn progress, void *ctx, char *err,
			    size_t errlen)
{
	if (err && errlen)
		err[0] = 0;
	if (!name || !*name || name[0] == '/' || strlen(name) > 1000) {
		snprintf(err, errlen, "%s: a relative object name of 1-1000 bytes, not '%s'",
			 u->r->root, name ? name : "(null)");
		return -EINVAL;
	}
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st)) {
		int e = errno;
		snprintf(err, errlen, "%s: %s", path, strerror(e));
		if (fd >= 0)
			close(fd);
		return -e;
	}
	if ((uint64_t)st.st_size > (5ull << 30)) {
		close(fd);
		snprintf(err, errlen, "%s: %llu bytes: over S3's 5 GiB for one PUT (multipart "
			 "uploads are not supported; pack smaller shards)", path,
			 (unsigned long long)st.st_size);
		return -EFBIG;
	}
	struct builder b = {0};
	int rc = 0;
	if (flags & STK_UPLOAD_SHARD_INDEX)
		rc = index_local(fd, (uint64_t)st.st_size, path, name, &b, err, errlen);
	char etag[96];
	struct stk__upsrc src = {.fd = fd, .size = (uint64_t)st.st_size, .progress = progress,
				 .ctx = ctx};
	if (!rc)
		rc = stk__remote_put(u->r, u->h, name, &src, etag, sizeof(etag), err, errlen);
	close(fd);
	if (!rc && (flags & STK_UPLOAD_SHARD_INDEX)) {
		void *buf = NULL;
		size_t len = 0;
		char iname[1100];
		snprintf(iname, sizeof(iname), "%s%s", name, SIDX_SUFFIX);
		rc = stk__sidx_encode(&b, (uint64_t)st.st_size, etag, &buf, &len);
		struct stk__upsrc isrc = {.fd = -1, .mem = buf, .size = len};
		if (rc)
			snprintf(err, errlen, "out of memory");
		else
			rc = stk__remote_put(u->r, u->h, iname, &isrc, etag, sizeof(etag), err, errlen);
		free(buf);
	}
	free(b.e);
	free(b.names.p);
	free(b.bad.p);
	return rc;
}

void stk_upload_destroy(struct stk_upload *u)
{
	if (!u)
		return;
	if (u->h)
		curl_easy_cleanup(u->h);
	stk__remote_destroy(u->r);
	free(u);
}
