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
 * stand-ins stay deterministic).  At create the video index (issue 38:
 * video/vindex.c's records, kept in the index cache by dataset/vcache.c,
 * made from the whole file where the cache has none or refuses it) says each
 * video's byte layout; when a batch is laid out, each clip's start (from
 * (seed, epoch, sample number), the decoder's own rule, video/start.c) gives
 * the byte ranges it needs (the header's, and keyframe to last packet), read
 * one after another into the batch's read area: the first in ios[i], the
 * others in `parts`, counting down on the first (loader/producer.c).  A
 * video without a record (not an MP4 or Matroska/WebM, tar shards, remote
 * data, O_DIRECT, stk__video_whole_files) is read whole, as before.  The
 * records also give the largest video's frame size, which sizes the
 * decoders' memory before the first batch.  As in image mode the
 * reads go to read areas (two: decoding is the pace) sized by the largest
 * clip's ranges, given back once the batch is decoded; the slot holds only
 * the clips.  A decode thread decodes clip k (stk__video_decode_ext over the
 * ranges, or stk__video_decode over the file: seek to the keyframe before
 * the clip's start, decode forward, convert and resize) straight into the
 * slot's clip area and records the clip's facts (start time, frames
 * decoded) in the slot's clip_info.
 */
#include "loader/loader.h"
#include "dataset/vcache.h"
#include "image/image.h"
#include "video/demux.h"
#include "video/video.h"
#include "video/vindex.h"

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
 * either (no index: tar shards, remote data), a 720p video is assumed. */
#define DECODER_FRAMES 18
#define ASSUMED_PIXELS (1280u * 720u)

struct stk__vloader {
	struct stk_video_opts o;        /* defaults applied */
	size_t clip_bytes;
	uint32_t batch, nslots;
	struct stk_clip_info *info;     /* nslots x batch */
	uint32_t *clip;                 /* nslots x batch: each place's k */
	_Atomic uint64_t max_pixels;    /* the largest frame decoded so far */
	/* the video index: ranged reads */
	bool ranged;                    /* some videos have one */
	struct vvid {
		uint64_t *rec;          /* its words (owned, checked), NULL: read whole */
		uint64_t room;          /* the most a clip of it reads */
	} *vid;                         /* per dataset entry */
	int64_t nvid;
	uint64_t rec_bytes;             /* the records' memory */
	struct stk__vspan *span;        /* nslots x batch: each place's ranges (n 0: whole) */
	struct sio *parts;              /* nslots x batch x (STK__VSPAN_MAX - 1) */
	_Atomic uint64_t n_ranged, n_whole;
};

/* Whole files only: forces every clip to read its whole file (tests compare
 * the two paths' pixels). */
bool stk__video_whole_files;

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
		v->span = calloc(n, sizeof(*v->span));
		v->parts = calloc(n * (STK__VSPAN_MAX - 1), sizeof(*v->parts));
		if (!v->span || !v->parts)
			return -ENOMEM;
	}
	return v->info && v->clip ? 0 : -ENOMEM;
}

void stk__vloader_free(struct stk_loader *l)
{
	if (!l->video)
		return;
	if (l->video->vid)
		for (int64_t i = 0; i < l->video->nvid; i++)
			free(l->video->vid[i].rec);
	free(l->video->vid);
	free(l->video->span);
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
	const struct stk__vspan *sp = v->span ? &v->span[at] : NULL;
	int rc;
	if (sp && sp->n) { /* the clip's ranges, one after another from data */
		struct stk__vext ext[STK__VSPAN_MAX];
		const uint8_t *p = data;
		for (uint32_t j = 0; j < sp->n; j++) {
			ext[j] = (struct stk__vext){.off = sp->off[j], .len = sp->len[j], .p = p};
			p += sp->len[j];
		}
		(void)len;
		rc = stk__video_decode_ext(&v->o, ext, sp->n, l->ds->entries[video].size, seed, k, out,
					   info, why, whylen);
		atomic_fetch_add(&v->n_ranged, 1);
	} else {
		rc = stk__video_decode(&v->o, data, len, seed, k, out, info, why, whylen);
		atomic_fetch_add(&v->n_whole, 1);
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
	       (v->ranged ? places * (sizeof(struct stk__vspan) +
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

/* --- the video index: ranged reads (issue 38) ------------------------------ */

/* The file's identity as the cache keeps it. */
static void ident(const struct stat *st, struct stk__vcache_item *it)
{
	it->size = (uint64_t)st->st_size;
	it->mtime_ns = stk__mtime_ns(st);
	it->ctime_ns = stk__ctime_ns(st);
	it->ino = (uint64_t)st->st_ino;
	it->dev = (uint64_t)st->st_dev;
}

/* Reads file path (under the root) whole into *buf: its size, or <0. */
static int64_t slurp(const struct stk_loader *l, const char *path, uint8_t **buf, size_t *cap,
		     struct stat *st)
{
	int fd = openat(l->ds->root_fd, path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, st)) {
		int e = -errno;
		close(fd);
		return e;
	}
	size_t n = (size_t)st->st_size;
	if (n > *cap) {
		uint8_t *b = realloc(*buf, n);
		if (!b) {
			close(fd);
			return -ENOMEM;
		}
		*buf = b;
		*cap = n;
	}
	size_t got = 0;
	while (got < n) {
		ssize_t k = pread(fd, *buf + got, n - got, (off_t)got);
		if (k <= 0)
			break;
		got += (size_t)k;
	}
	close(fd);
	return (int64_t)got;
}

int stk__vloader_index(struct stk_loader *l, char *err, size_t errlen)
{
	struct stk__vloader *v = l->video;
	const struct stk_dataset *ds = l->ds;
	const char *off_why = stk__video_whole_files ? "whole files asked for" :
			      ds->shards ? "tar shards: not yet" : ds->remote ? "remote data: not yet" :
			      l->direct ? "O_DIRECT reads" : l->ops == &stk__engine_null ? "null engine" :
			      NULL;
	if (off_why || !ds->n)
		return 0;
	v->vid = calloc((size_t)ds->n, sizeof(*v->vid));
	v->nvid = ds->n;
	if (!v->vid)
		return stk__errf(err, errlen, -ENOMEM, "out of memory (the video index)");
	char path[PATH_MAX + 8], why[PATH_MAX + 256];
	bool cache = ds->cache_path &&
		     snprintf(path, sizeof(path), "%s.video", ds->cache_path) < (int)sizeof(path);
	struct stk__vcache c = {0};
	if (cache) {
		int rc = stk__vcache_load(path, &c, why, sizeof(why));
		if (rc < 0 && rc != -ENOMEM)
			stk__loader_notice(l, "%s; the video index is made again", why);
		else if (rc == -ENOMEM)
			return stk__errf(err, errlen, -ENOMEM, "out of memory (the video index)");
	}
	uint8_t *buf = NULL;
	size_t cap = 0;
	uint64_t made = 0, none = 0;
	int64_t first_none = -1;
	char none_why[256] = "";
	struct stk__vcache_item *items = calloc((size_t)ds->n, sizeof(*items));
	if (!items) {
		stk__vcache_free(&c);
		return stk__errf(err, errlen, -ENOMEM, "out of memory (the video index)");
	}
	int rc = 0;
	for (int64_t i = 0; i < ds->n && !rc; i++) {
		const char *name = stk__entry_path(ds, i);
		struct vvid *x = &v->vid[i];
		struct stk__vcache_item *it = &items[i];
		it->path = name;
		struct stat st;
		const struct stk__vcache_item *old = (size_t)i < c.n && !strcmp(c.item[i].path, name)
							     ? &c.item[i] : NULL;
		struct stk__vidx vx;
		bool have = false;
		if (old && !fstatat(ds->root_fd, name, &st, 0)) {
			ident(&st, it);
			have = old->size == it->size && old->mtime_ns == it->mtime_ns &&
			       old->ctime_ns == it->ctime_ns && old->ino == it->ino &&
			       old->dev == it->dev && it->size == ds->entries[i].size;
			if (have && old->words) {
				x->rec = malloc(old->words * 8);
				if (!x->rec) {
					rc = -ENOMEM;
					break;
				}
				memcpy(x->rec, old->rec, old->words * 8);
				it->words = old->words;
				if (stk__vidx_view(x->rec, it->words, it->size, &vx, why,
						   sizeof(why)) < 0) {
					stk__loader_notice(l, "%s: the video index's record of %s is "
							   "refused (%s); made again", path, name, why);
					free(x->rec);
					x->rec = NULL;
					it->words = 0;
					have = false;
				}
			}
		}
		if (!have) {
			made++;
			int64_t n = slurp(l, name, &buf, &cap, &st);
			if (n == -ENOMEM) {
				rc = -ENOMEM;
				break;
			}
			if (n < 0) /* the read says it, naming the file */
				continue;
			ident(&st, it);
			size_t words = 0;
			int m = n == (int64_t)it->size && it->size == ds->entries[i].size
					? stk__vidx_make(buf, (size_t)n, &x->rec, &words, why, sizeof(why))
					: 1;
			if (m < 0) {
				rc = m;
				break;
			}
			if (m == 0 && stk__vidx_view(x->rec, words, it->size, &vx, why,
						     sizeof(why)) < 0) {
				free(x->rec);
				x->rec = NULL;
				m = 1;
			}
			it->words = m ? 0 : words;
			if (m && first_none < 0) {
				first_none = i;
				snprintf(none_why, sizeof(none_why), "%.200s", n == (int64_t)it->size ? why :
					 "it changed while read");
			}
		}
		it->rec = x->rec;
		if (x->rec) {
			x->room = stk__vidx_max_bytes(&vx, &v->o);
			v->rec_bytes += it->words * 8;
			v->ranged = true;
			/* the decoders' memory from the first batch (Loader.memory()) */
			uint64_t px = (uint64_t)vx.width * vx.height, mx = atomic_load(&v->max_pixels);
			if (px > mx)
				atomic_store(&v->max_pixels, px);
		} else {
			none++;
			if (first_none < 0) {
				first_none = i;
				snprintf(none_why, sizeof(none_why), "no byte index");
			}
		}
	}
	free(buf);
	if (!rc && cache && made)
		stk__vcache_write(path, items, (size_t)ds->n); /* a read-only folder: made again */
	free(items);
	stk__vcache_free(&c);
	if (rc)
		return stk__errf(err, errlen, rc, "out of memory (the video index)");
	if (none)
		stk__loader_notice(l, "%llu of %lld videos have no byte index (the first: %s: %s): "
				   "their clips are read whole", (unsigned long long)none,
				   (long long)ds->n, stk__entry_path(ds, first_none), none_why);
	return 0;
}

uint64_t stk__vloader_room(const struct stk_loader *l, int64_t idx)
{
	const struct stk__vloader *v = l->video;
	return v && v->vid && v->vid[idx].rec ? v->vid[idx].room : 0;
}

uint32_t stk__vloader_reads_per_clip(const struct stk_loader *l)
{
	return l->video && l->video->ranged ? STK__VSPAN_MAX : 1;
}

uint64_t stk__vloader_setup(struct stk_loader *l, struct slot *s, uint32_t i, int64_t idx,
			    uint64_t place)
{
	struct stk__vloader *v = l->video;
	uint32_t si = (uint32_t)(s - l->slots);
	size_t at = (size_t)si * v->batch + i;
	if (!v->span)
		return 0;
	struct stk__vspan *sp = &v->span[at];
	sp->n = 0;
	if (!v->vid[idx].rec)
		return 0; /* read whole */
	uint64_t sample = (uint64_t)idx * l->per_file + v->clip[at];
	struct stk__vidx vx;
	stk__vidx_peek(v->vid[idx].rec, &vx);
	stk__vidx_plan(&vx, &v->o, stk__sample_seed(l->o.seed, s->epoch, (int64_t)sample),
		       v->clip[at], sp);
	const struct stk_entry *e = &l->ds->entries[idx];
	const char *path = stk__entry_path(l->ds, idx);
	uint8_t *base = stk__loader_read_base(l, s) + place;
	struct sio *x = &s->ios[i];
	s->indices[i] = idx;
	s->labels[i] = e->label;
	s->sizes[i] = sp->bytes;
	s->offsets[i] = place;
	uint64_t off = 0;
	for (uint32_t j = 0; j < sp->n; j++) {
		struct sio *p = j ? &v->parts[at * (STK__VSPAN_MAX - 1) + j - 1] : x;
		stk__sio_begin(p,
			       (struct stk_io){.op = STK_IO_READ_FILE, .path = path, .len = sp->len[j],
					       .offset = e->offset + sp->off[j],
					       .buf_index = stk__loader_read_buf(l, s), .buf = base + off},
			       sp->len[j], true, si, i, e->offset, true, j ? x : NULL);
		off += sp->len[j];
	}
	x->size = sp->bytes;
	x->nleft = sp->n;
	x->pres = 0;
	return sp->bytes;
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
