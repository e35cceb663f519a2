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
 * stand-ins stay deterministic).  The video index (loader/video_index.c:
 * made at create, or for remote data learnt from a video's first whole
 * read) says each video's byte layout, so a clip reads only its
 * ranges.  When a batch is laid out, each clip's start (from (seed, epoch,
 * sample number), the decoder's own rule, video/start.c) gives the byte
 * ranges it needs (the header's, and keyframe to last packet), read one
 * after another into the batch's read area: the first in ios[i], the
 * others in `parts`, counting down on the first (loader/producer.c), each
 * counted up to its `need` so a short one shows.  In a shard the first read
 * starts at the member's tar header (its tag is checked, as a whole
 * member's is: loader/shard_read.c); under O_DIRECT every read is rounded
 * out to the block size and the decoder is handed the video's bytes within
 * (vplace).  A video without a record (not an MP4/MOV or Matroska/WebM,
 * not learnt yet, read_bytes, stk__video_whole_files) is read whole, as
 * before.  The records also give the largest video's frame size, which
 * sizes the decoders' memory before the first batch.  As in image mode the
 * reads go to read areas (two: decoding is the pace) sized by the largest
 * clip's ranges, given back once the batch is decoded; the slot holds only
 * the clips.  A decode thread decodes clip k (stk__video_decode_ext over the
 * ranges, or stk__video_decode over the file: seek to the keyframe before
 * the clip's start, decode forward, convert and resize) straight into the
 * slot's clip area and records the clip's facts (start time, frames
 * decoded) in the slot's clip_info.
 */
#include "loader/loader.h"
#include "loader/vloader.h"
#include "image/image.h"
#include "video/video.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The working memory a decoder holds, in frames of the video's size: the
 * codec's reference frames (H.264 keeps up to 16), the frame being decoded
 * and the one converted.  The size is the largest video's in the video index
 * (recorded when it was made), or the largest decoded so far; without
 * either (no index yet: other containers, remote data before its videos'
 * first reads), a 720p video is assumed. */
#define DECODER_FRAMES 18
#define ASSUMED_PIXELS (1280u * 720u)


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
	if (v->ranged) {
		v->place = calloc(n, sizeof(*v->place));
		v->parts = calloc(n * (STK__VSPAN_MAX - 1), sizeof(*v->parts));
		if (!v->place || !v->parts)
			return -ENOMEM;
	}
	return v->info && v->clip ? 0 : -ENOMEM;
}


void stk__vloader_epoch_end(struct stk_loader *l)
{
	struct stk__vloader *v = l->video;
	if (v && v->learn && v->learned > v->written)
		stk__vloader_learn_write(v);
}

void stk__vloader_free(struct stk_loader *l)
{
	if (!l->video)
		return;
	struct stk__vloader *v = l->video;
	if (v->learn && v->learned > v->written) /* (the threads are joined) */
		stk__vloader_learn_write(v);
	if (v->items)
		for (int64_t i = 0; i < v->nvid; i++)
			free((char *)v->items[i].path);
	free(v->items);
	free(v->cpath);
	if (v->vid)
		for (int64_t i = 0; i < v->nvid; i++)
			free(v->vid[i].rec);
	free(v->vid);
	free(v->place);
	free(l->video->parts);
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
	uint64_t seed = stk__sample_seed(l->o.seed, epoch, (int64_t)sample);
	const struct vplace *pl = v->place ? &v->place[at] : NULL;
	int rc;
	if (pl && pl->n) { /* the clip's ranges, where its reads put them */
		rc = stk__video_decode_ext(&v->o, pl->ext, pl->n, l->ds->entries[video].size, seed, k,
					   out, info, why, whylen);
		atomic_fetch_add(&v->n_ranged, 1);
	} else {
		rc = stk__video_decode(&v->o, data, len, seed, k, out, info, why, whylen);
		atomic_fetch_add(&v->n_whole, 1);
		if (!rc && v->learn && !atomic_load(&v->vid[video].state))
			stk__vloader_learn(l, video, data, len);
	}
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
	b->clips = stk__pool_slot(&l->pool, slot) + l->img_off; /* (split: data is NULL) */
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
	const struct stk__vloader *v = l->video;
	uint64_t places = (uint64_t)v->batch * v->nslots;
	return places * (sizeof(struct stk_clip_info) + sizeof(uint32_t)) +
	       sizeof(struct stk__vloader) + v->rec_bytes +
	       (v->vid ? (uint64_t)l->ds->n * sizeof(*v->vid) : 0) +
	       (v->ranged ? places * (sizeof(struct vplace) +
				      (STK__VSPAN_MAX - 1) * sizeof(struct sio)) : 0);
}

uint64_t stk__video_decoder_bytes(uint32_t threads, uint32_t codec_threads, uint64_t px)
{
	if (!px)
		px = ASSUMED_PIXELS;
	/* frame threads hold a frame each; YUV 4:2:0: 1.5 bytes a pixel */
	return (uint64_t)threads * (DECODER_FRAMES + codec_threads) * px * 3 / 2;
}

uint64_t stk__vloader_decode_bytes(const struct stk_loader *l, uint32_t threads)
{
	if (!l->video)
		return 0;
	return stk__video_decoder_bytes(threads, l->video->o.threads,
					atomic_load(&l->video->max_pixels));
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

/* --- ranged reads (issue 38: the index is loader/video_index.c's) ------- */

uint32_t stk__vloader_reads_per_clip(const struct stk_loader *l)
{
	return l->video && l->video->ranged ? STK__VSPAN_MAX : 1;
}

uint64_t stk__vloader_setup(struct stk_loader *l, struct slot *s, uint32_t i, int64_t idx,
			    uint64_t place, int fd)
{
	struct stk__vloader *v = l->video;
	uint32_t si = (uint32_t)(s - l->slots);
	size_t at = (size_t)si * v->batch + i;
	if (!v->place)
		return 0;
	struct vplace *pl = &v->place[at];
	pl->n = 0;
	const struct vvid *vd = &v->vid[idx];
	if (!vd->rec)
		return 0; /* read whole */
	struct stk__vspan sp;
	uint64_t sample = (uint64_t)idx * l->per_file + v->clip[at];
	struct stk__vidx vx;
	stk__vidx_peek(vd->rec, &vx);
	stk__vidx_plan(&vx, &v->o, stk__sample_seed(l->o.seed, s->epoch, (int64_t)sample),
		       v->clip[at], &sp);
	const struct stk_entry *e = &l->ds->entries[idx];
	uint64_t lo = e->offset, hi = e->offset + e->size, rs[STK__VSPAN_MAX], re[STK__VSPAN_MAX];
	uint64_t room = 0;
	uint32_t n = 0;
	for (uint32_t j = 0; j < sp.n; j++) { /* the reads: in the file, rounded, merged */
		uint64_t fs = lo + sp.off[j], fe = fs + sp.len[j];
		if (!j && l->ds->shards && !l->direct && !sp.off[0] && lo >= 512)
			fs -= 512; /* the member's tar header: shard_read.c checks its tag */
		if (l->direct) {
			fs &= ~(uint64_t)(STK_DIRECT_ALIGN - 1);
			fe = STK_ALIGN_UP(fe, STK_DIRECT_ALIGN);
		}
		if (n && fs <= re[n - 1]) {
			room += fe > re[n - 1] ? fe - re[n - 1] : 0;
			re[n - 1] = fe > re[n - 1] ? fe : re[n - 1];
		} else {
			rs[n] = fs;
			re[n++] = fe;
			room += fe - fs;
		}
	}
	if (!n || room > vd->room)
		return 0; /* (never: the room counts the most a clip takes) read whole */
	const char *path = stk__entry_path(l->ds, idx);
	uint8_t *base = stk__loader_read_base(l, s) + place;
	struct sio *x = &s->ios[i];
	uint64_t off = 0, bytes = 0;
	for (uint32_t j = 0; j < n; j++) {
		struct sio *p = j ? &v->parts[at * (STK__VSPAN_MAX - 1) + j - 1] : x;
		uint64_t a = rs[j] > lo ? rs[j] : lo, b = re[j] < hi ? re[j] : hi;
		uint64_t need = b - rs[j]; /* what lies past the video's end may not be there */
		stk__sio_begin(p,
			       (struct stk_io){.op = fd >= 0 ? STK_IO_READ : STK_IO_READ_FILE, .fd = fd,
					       .path = path, .len = re[j] - rs[j], .offset = rs[j],
					       .buf_index = stk__loader_read_buf(l, s),
					       .buf = base + off},
			       need, true, si, i, lo, true, j ? x : NULL);
		p->need = need;
		pl->ext[j] = (struct stk__vext){.off = a - lo, .len = b - a,
						.p = base + off + (a - rs[j])};
		off += re[j] - rs[j];
		bytes += b - a;
	}
	pl->n = n;
	x->skip = (uint32_t)(rs[0] < lo ? lo - rs[0] : 0);
	x->size = bytes;
	x->nleft = n;
	x->pres = 0;
	s->indices[i] = idx;
	s->labels[i] = e->label;
	s->sizes[i] = bytes;
	s->offsets[i] = place + x->skip;
	return room;
}

uint32_t stk__vloader_queue_parts(struct stk_loader *l, struct slot *s, struct sio *x)
{
	if (x->nleft < 2)
		return 0;
	struct io_thread *r = &l->rings[s->ring];
	size_t at = (size_t)(s - l->slots) * l->video->batch + x->idx;
	for (uint32_t j = 1; j < x->nleft; j++)
		r->queue[(r->qhead + r->qlen++) % r->qcap] =
			&l->video->parts[at * (STK__VSPAN_MAX - 1) + j - 1];
	return x->nleft - 1;
}

void stk__vloader_counts(const struct stk_loader *l, uint64_t *ranged, uint64_t *whole)
{
	*ranged = l->video ? atomic_load(&l->video->n_ranged) : 0;
	*whole = l->video ? atomic_load(&l->video->n_whole) : 0;
}
