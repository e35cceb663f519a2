/*
 * loader/memory.c — the memory a loader takes, one rule for every front end.
 *
 * The slot size is the smaller of the worst batch (the batch_size largest
 * samples together) and a bound no real batch reaches: batch_size × mean +
 * 8 σ √batch_size + the largest sample (create applies it to the index;
 * stk_memory_estimate to a mean size, σ unknown: 0).  The pool is prefetch
 * slots.  In image mode a slot holds the batch's images; the reads, needed
 * only until they are decoded, go to read areas of that bound each, reused
 * as soon as their batch is decoded, so a batch waiting for the trainer
 * holds no file bytes.  stk__read_areas: enough for 256 reads in flight (one
 * at batch 256: the decoders start on a batch as its first reads land, and
 * a local read ahead of them pays nothing, bench/loader_memory.sh), at least
 * two for remote data (a request's latency each batch), at most prefetch;
 * the image option read_areas sets it.  Video mode: the slots hold the clips,
 * two read areas the clips' byte ranges (decoding, not reading, is the pace:
 * one batch decoding, the next read meanwhile).  With keep_raw the images follow
 * the reads in the slot, page-aligned.  Decode threads hold, per image, the
 * decoded region and its resized rows (freed after each image): estimated
 * at twice the RGB pixels of an image of the mean sample size, at 2 pixels a
 * byte (JPEG at quality 90 on photographs), no more than max_pixels allows.
 */
#include "loader/loader.h"
#include "image/image.h"
#include "video/video.h"
#include "io/remote.h"
#include "dataset/jcache.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define PIXELS_PER_BYTE 2.0

uint64_t stk__slot_bound(uint32_t batch, double n, double sum, double sq, double mx,
			 uint64_t worst)
{
	if (n <= 0)
		return worst;
	double mean = sum / n, var = sq / n - mean * mean;
	double bound = batch * mean + 8 * sqrt(var > 0 ? var : 0) * sqrt(batch) + mx;
	return bound < (double)worst ? (uint64_t)bound : worst;
}

#define AREAS_INFLIGHT 256u /* reads the read areas hold at least, prefetch allowing */
#define VIDEO_AREAS 2u
/* jpeg_cache before create: a copy's path, ~/.cache/stoker/jpeg/<key>/<sum>.jpg */
#define JCACHE_PATH_GUESS 96u

uint32_t stk__read_areas(const struct stk_loader_opts *o, const struct stk_image_opts *img,
			 bool remote)
{
	if (!img) /* video: decode-bound; one batch decoding, the next read meanwhile */
		return o->prefetch < VIDEO_AREAS ? o->prefetch : VIDEO_AREAS;
	uint32_t n = (AREAS_INFLIGHT + o->batch_size - 1) / o->batch_size;
	if (remote && n < 2) /* an object store's latency: the next batch read meanwhile */
		n = 2;
	if (img->read_areas)
		n = img->read_areas;
	n = n > 64 ? 64 : n; /* a bit each in areas_used */
	return n < o->prefetch ? n : o->prefetch;
}

static bool split(const struct stk_image_opts *img)
{
	return img && !(img->flags & STK_IMG_KEEP_RAW);
}

/* A slot's bytes for `raw` bytes of reads: the reads (raw mode, keep_raw),
 * the images (image mode). */
static uint64_t slot_with_images(uint64_t raw, uint32_t batch, const struct stk_image_opts *img)
{
	if (!img)
		return raw;
	return (split(img) ? 0 : STK_ALIGN_UP(raw, 4096)) + (uint64_t)batch * stk__image_bytes(img);
}

static uint64_t meta_per_slot(uint32_t batch)
{
	return (4 * (uint64_t)batch + 1) * sizeof(uint64_t) + (uint64_t)batch * sizeof(struct sio) +
	       sizeof(struct slot);
}

static uint64_t decode_bytes(uint32_t threads, double mean, const struct stk_image_opts *img)
{
	double px = mean * PIXELS_PER_BYTE;
	if (img->max_pixels && px > (double)img->max_pixels)
		px = (double)img->max_pixels;
	return (uint64_t)(threads * 2 * 3 * px);
}

/* Totals m and copies it into the caller's out, no more than its size says
 * (0: ours); out->size then says how much was written. */
static int give(struct stk_memory *m, struct stk_memory *out)
{
	m->pool_bytes = (uint64_t)m->nslots * m->slot_bytes;
	m->read_pool_bytes = (uint64_t)m->read_areas * m->read_area_bytes;
	m->total = m->pool_bytes + m->read_pool_bytes + m->index_bytes + m->meta_bytes +
		   m->decode_bytes;
	if (out->size && out->size < offsetof(struct stk_memory, total) + sizeof(uint64_t))
		return -EINVAL;
	size_t n = out->size && out->size < sizeof(*m) ? out->size : sizeof(*m);
	memcpy(out, m, n);
	out->size = (uint32_t)n;
	return 0;
}

int stk_loader_memory(const struct stk_loader *l, struct stk_memory *out)
{
	if (!l || !out)
		return -EINVAL;
	struct stk_memory m = {.size = sizeof(m), .nslots = l->pool.nslots,
			       .slot_bytes = l->pool.slot_bytes, .read_areas = l->areas.nslots,
			       .read_area_bytes = l->areas.slot_bytes};
	const struct stk_dataset *ds = l->ds;
	m.index_bytes = ds->map ? ds->map_len
				: (uint64_t)ds->n * sizeof(*ds->entries) + ds->names_len;
	m.meta_bytes = (uint64_t)m.nslots * meta_per_slot(l->o.batch_size) +
		       stk__vloader_meta_bytes(l);
	if (l->jc) /* jpeg_cache: a state a sample, a copy's path a place */
		m.meta_bytes += (uint64_t)l->jc->n * sizeof(*l->jc->state) +
				(uint64_t)m.nslots * l->o.batch_size * l->jc->plen;
	if (l->video) { /* the clips are in the slots; the decoders hold frames */
		m.decode_threads = l->ndthreads;
		m.decode_bytes = stk__vloader_decode_bytes(l, l->ndthreads);
	}
	if (l->image) {
		m.decode_threads = l->ndthreads;
		double mean = 0;
		for (int64_t i = 0; i < ds->n; i++)
			mean += (double)ds->entries[i].size;
		m.decode_bytes = decode_bytes(m.decode_threads, ds->n ? mean / (double)ds->n : 0,
					      &l->img);
	}
	return give(&m, out);
}

int stk_memory_estimate(const struct stk_loader_opts *opts, uint64_t nsamples,
			uint64_t sample_bytes, struct stk_memory *out, char *errbuf, size_t errlen)
{
	char scratch[8];
	if (!errbuf || !errlen) {
		errbuf = scratch;
		errlen = sizeof(scratch);
	}
	errbuf[0] = 0;
	if (!out)
		return -EINVAL;
	struct stk_loader_opts o = {0};
	if (opts) {
		size_t n = opts->size && opts->size < sizeof(o) ? opts->size : sizeof(o);
		memcpy(&o, opts, n);
	}
	o.size = sizeof(o);
	o.path = NULL;
	o.world_size = o.world_size ? o.world_size : 1; /* the split does not change a slot */
	int rc = stk__opts_apply(STK_OPT_LOADER, &o, errbuf, errlen);
	if (rc < 0)
		return rc;
	struct stk_image_opts img;
	bool image = opts && (!opts->size || opts->size >= offsetof(struct stk_loader_opts, image) +
							      sizeof(void *)) && opts->image;
	if (image && (rc = stk__image_opts(&img, opts->image, errbuf, errlen)) < 0)
		return rc;
	struct stk_video_opts vid;
	bool video = !image && opts && (!opts->size || opts->size >= offsetof(struct stk_loader_opts,
									       video) + sizeof(void *)) &&
		     opts->video;
	if (video && (rc = stk__video_opts(&vid, opts->video, errbuf, errlen)) < 0)
		return rc;
	struct stk_memory m = {.size = sizeof(m), .nslots = o.prefetch};
	/* buffered reads ask for one byte past each file (loader/common.c) */
	uint64_t each = sample_bytes + 1, k = nsamples < o.batch_size ? nsamples : o.batch_size;
	uint64_t raw = o.slot_bytes ? o.slot_bytes
				    : stk__slot_bound(o.batch_size, 1, (double)each,
						      (double)each * (double)each, (double)each,
						      k * each);
	m.slot_bytes = STK_ALIGN_UP(slot_with_images(raw, o.batch_size, image ? &img : NULL), 4096);
	if (image && split(&img)) {
		m.read_areas = stk__read_areas(&o, &img,
						 opts->path && stk__remote_is_url(opts->path));
		m.read_area_bytes = STK_ALIGN_UP(raw, 4096);
	}
	if (video) { /* the clips in the slots; a clip's reads (at most its file) in read areas */
		m.slot_bytes = STK_ALIGN_UP((uint64_t)o.batch_size * stk__video_clip_bytes(&vid), 4096);
		m.read_areas = stk__read_areas(&o, NULL, opts->path && stk__remote_is_url(opts->path));
		m.read_area_bytes = STK_ALIGN_UP(raw, 4096);
		struct stk_cpu_share s = {.size = sizeof(s)};
		stk_cpu_share(o.local_rank, o.local_world_size, &s, NULL, 0);
		m.decode_threads = vid.decode_threads ? vid.decode_threads : s.decode_threads;
		m.decode_bytes = stk__video_decoder_bytes(m.decode_threads, vid.threads, 0);
	}
	m.index_bytes = nsamples * (sizeof(struct stk_entry) + 32); /* a short relative path */
	m.meta_bytes = (uint64_t)m.nslots * meta_per_slot(o.batch_size);
	if (image && (img.flags & STK_IMG_JPEG_CACHE)) /* a state a sample, a path a place */
		m.meta_bytes += nsamples * sizeof(uint32_t) +
				(uint64_t)m.nslots * o.batch_size * JCACHE_PATH_GUESS;
	if (image) {
		struct stk_cpu_share s = {.size = sizeof(s)};
		stk_cpu_share(o.local_rank, o.local_world_size, &s, NULL, 0);
		m.decode_threads = img.decode_threads ? img.decode_threads : s.decode_threads;
		m.decode_bytes = decode_bytes(m.decode_threads, (double)sample_bytes, &img);
	}
	return give(&m, out);
}
