/*
 * stoker/upload.h — writing a dataset to an object store: `stoker pack DIR
 * s3://bucket/prefix/` puts its tar shards there, each with its index beside
 * it (NAME.tar.stoker-index), which a loader reading the prefix uses instead
 * of reading the shard's tar headers through ranged GETs, once it has checked
 * that the index names the shard's current size and ETag.
 *
 * Requests go where reads go and are signed the same way (SigV4 through
 * libcurl): credentials from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY
 * (AWS_SESSION_TOKEN), else the AWS_PROFILE profile of ~/.aws/credentials or
 * config; AWS_REGION; AWS_ENDPOINT_URL (path-style).  A file is streamed
 * from disk in one PUT (never held in memory), so one object is at most
 * 5 GiB, S3's limit for a single PUT (no multipart upload).  Errors name
 * the URL, the store's reason (its error code) and where the credentials
 * came from, never the secret.
 *
 * Conventions (those of stoker/stoker.h): 0 on success, -errno or STK_E* on
 * failure with the detail in err; errno never set.  One thread per handle.
 */
#ifndef STOKER_UPLOAD_H
#define STOKER_UPLOAD_H

#include <stddef.h>
#include <stdint.h>

#include "stoker/stoker.h"

#ifdef __cplusplus
extern "C" {
#endif

struct stk_upload;

/* A destination, s3://BUCKET/PREFIX/ (a folder: objects go under it by
 * name).  Checks the bucket and the credentials with a listing of one key,
 * so a wrong secret or a missing bucket fails here, before anything is
 * written.  0 and *out (stk_upload_destroy frees it), or <0 with the reason
 * in err.  url is copied. */
STK_API int stk_upload_create(struct stk_upload **out, const char *url, char *err,
			      size_t errlen);
/* The destination's URL for messages ("s3://bucket/prefix", no credentials). */
STK_API const char *stk_upload_url(const struct stk_upload *u);

/* stk_upload_file's flags: the file is a tar shard; its index goes beside it. */
#define STK_UPLOAD_SHARD_INDEX 1u

/* Called as bytes of a file go out (done of total), from the uploading thread. */
typedef void (*stk_upload_progress_fn)(void *ctx, uint64_t done, uint64_t total);

/* PUTs the local file at path as NAME under the destination (an object
 * replaced if there), streamed from the file and retried after transient
 * failures (5xx, SlowDown, resets).  With STK_UPLOAD_SHARD_INDEX the file
 * is indexed first (a damaged tar fails before any byte is sent) and its
 * index is PUT beside it, naming the ETag the store gave the shard.
 * progress may be NULL.  0 or <0 with the reason in err. */
STK_API int stk_upload_file(struct stk_upload *u, const char *path, const char *name,
			    unsigned flags, stk_upload_progress_fn progress, void *ctx, char *err,
			    size_t errlen);
STK_API void stk_upload_destroy(struct stk_upload *u);

#ifdef __cplusplus
}
#endif
#endif
