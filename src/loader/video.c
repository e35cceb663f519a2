/*
 * loader/video.c — the loader's video mode: a sample is a clip.
 *
 * Video v gives clips_per_video samples, v x clips_per_video + k for k =
 * 0..clips_per_video-1, so the sampler shuffles, splits over ranks and
 * resumes clips exactly as it does images.  When a batch is claimed its
 * clip numbers become their videos (stk__vloader_claim): from there the
 * reads, labels, indices, the skip policy's compaction and the replace
 * policy's stand-ins are per file as in the other modes, and each place
 * keeps its k (a stand-in video gives the clip k of the place it fills, so
 * stand-ins stay deterministic).  A video is read whole into the slot's read
 * area (its size is the index's; a file larger than a slot can be is the
 * oversize error of loader/create.c, naming it and its size); a decode
 * thread then decodes clip k (video/'s stk__video_decode: seek to the
 * keyframe before the clip's start, decode forward, convert and resize)
 * straight into the slot's clip area, which follows the reads page-aligned
 * (l->img_off), and records the clip's facts (start time, frames decoded)
 * in the slot's clip_info.  The clip's start and crop come from (seed,
 * epoch, sample number), never from thread timing.
 */
#include "loader/loader.h"
#include "image/image.h"
#include "video/video.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The working memory a decoder holds, in frames of the video's size: the
 * codec's reference frames (H.264 keeps up to 16), the frame being decoded
 * and the one converted.  Until a clip was decoded, a 720p video is assumed. */
#define DECODER_FRAMES 18
#define ASSUMED_PIXELS (1280u * 720u)

struct stk__vloader {
	struct stk_video_opts o;        /* defaults applied */
	size_t clip_bytes;
	uint32_t batch, nslots;
	struct stk_clip_info *info;     /* nslots x batch */
	uint32_t *clip;                 /* nslots x batch: each place's k */
	_Atomic uint64_t max_pixels;    /* the largest frame decoded so far */
};

int stk__vloader_check(const struct stk_video_opts *o, char *err, size_t errlen)
{
	struct stk_video_opts scratch;
	int rc = stk__video_opts(&scratch, o, err, errlen);
	return rc < 0 ? rc : 0;
}

int stk__vloader_init(struct stk_loader *l, const struct stk_video_opts *o, char *err,
		      size_t errlen)
{
	struct stk__vloader *v = calloc(1, sizeof(*v));
	if (!v) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	int rc = stk__video_opts(&v->o, o, err, errlen);
	if (rc < 0) {
		free(v);
		return rc;
	}
	v->clip_bytes = stk__video_clip_bytes(&v->o);
	l->video = v;
	l->per_file = v->o.clips_per_video;
	return 0;
}

int stk__vloader_slots(struct stk_loader *l)
{
	struct stk__vloader *v = l->video;
	v->batch = l->o.batch_size;
	v->nslots = l->pool.nslots;
	size_t n = (size_t)v->batch * v->nslots;
	v->info = calloc(n, sizeof(*v->info));
	v->clip = calloc(n, sizeof(*v->clip));
	return v->info && v->clip ? 0 : -ENOMEM;
}

void stk__vloader_free(struct stk_loader *l)
{
	if (!l->video)
		return;
	free(l->video->info);
	free(l->video->clip);
	free(l->video);
	l->video = NULL;
}

uint32_t stk__vloader_decode_threads(const struct stk_loader *l)
{
	return l->video->o.decode_threads ? l->video->o.decode_threads : l->share.decode_threads;
}

uint64_t stk__vloader_out_bytes(const struct stk_loader *l)
{
	return l->video ? (uint64_t)l->o.batch_size * l->video->clip_bytes : 0;
}

void stk__vloader_claim(struct stk_loader *l, uint32_t slot, int64_t *idx, uint32_t n)
{
	struct stk__vloader *v = l->video;
	uint32_t *clip = v->clip + (size_t)slot * v->batch;
	for (uint32_t i = 0; i < n; i++) {
		clip[i] = (uint32_t)(idx[i] % l->per_file);
		idx[i] /= l->per_file;
	}
}

int stk__vloader_decode(struct stk_loader *l, uint32_t slot, uint32_t i, int64_t video,
			uint64_t epoch, const void *data, size_t len, char *why, size_t whylen)
{
	struct stk__vloader *v = l->video;
	size_t at = (size_t)slot * v->batch + i;
	uint32_t k = v->clip[at];
	uint64_t sample = (uint64_t)video * l->per_file + k;
	uint8_t *out = stk__pool_slot(&l->pool, slot) + l->img_off + (size_t)i * v->clip_bytes;
	struct stk_clip_info *info = &v->info[at];
	memset(info, 0, sizeof(*info));
	info->size = sizeof(*info);
	int rc = stk__video_decode(&v->o, data, len, stk__sample_seed(l->o.seed, epoch,
								    (int64_t)sample),
				   k, out, info, why, whylen);
	info->clip = k;
	if (!rc) {
		uint64_t px = (uint64_t)info->width * info->height;
		uint64_t mx = atomic_load(&v->max_pixels);
		while (px > mx && !atomic_compare_exchange_weak(&v->max_pixels, &mx, px))
			;
	}
	return rc;
}

void stk__vloader_move(struct stk_loader *l, uint32_t slot, uint32_t to, uint32_t from)
{
	struct stk__vloader *v = l->video;
	size_t base = (size_t)slot * v->batch;
	uint8_t *clips = stk__pool_slot(&l->pool, slot) + l->img_off;
	memcpy(clips + (size_t)to * v->clip_bytes, clips + (size_t)from * v->clip_bytes,
	       v->clip_bytes);
	v->info[base + to] = v->info[base + from];
	v->clip[base + to] = v->clip[base + from];
}

void stk__vloader_batch(const struct stk_loader *l, uint32_t slot, struct stk_batch *b)
{
	const struct stk__vloader *v = l->video;
	size_t base = (size_t)slot * v->batch;
	b->clips = b->data + l->img_off;
	b->clip_bytes = v->clip_bytes;
	b->frames = v->o.frames;
	b->tchw = v->o.layout == STK_VLAYOUT_TCHW;
	b->channels = 3;
	b->height = b->width = v->o.out_size;
	b->dtype = STK_DTYPE_UINT8;
	b->clip_info = v->info + base;
}

uint64_t stk__vloader_meta_bytes(const struct stk_loader *l)
{
	if (!l->video)
		return 0;
	return (uint64_t)l->video->batch * l->video->nslots *
	       (sizeof(struct stk_clip_info) + sizeof(uint32_t)) + sizeof(struct stk__vloader);
}

uint64_t stk__vloader_decode_bytes(const struct stk_loader *l, uint32_t threads)
{
	if (!l->video)
		return 0;
	uint64_t px = atomic_load(&l->video->max_pixels);
	if (!px)
		px = ASSUMED_PIXELS;
	uint32_t ft = l->video->o.threads; /* frame threads hold a frame each */
	/* YUV 4:2:0: 1.5 bytes a pixel */
	return (uint64_t)threads * (DECODER_FRAMES + ft) * px * 3 / 2;
}

int stk_loader_video_options(const struct stk_loader *l, struct stk_video_opts *out)
{
	if (!l || !out)
		return -EINVAL;
	struct stk_video_opts o = {0};
	if (l->video) {
		o = l->video->o;
		o.decode_threads = l->ndthreads; /* "auto" resolved */
	}
	o.size = sizeof(o);
	size_t n = out->size && out->size < sizeof(o) ? out->size : sizeof(o);
	memcpy(out, &o, n);
	out->size = (uint32_t)n;
	return l->video ? 1 : 0;
}
