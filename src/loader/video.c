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
 * video/vindex.c's records, kept in the index cache by dataset/vcache.c)
 * says each video's byte layout: made from the whole file (a tar member's
 * bytes in its shard, keyed by the shard's identity and the member's
 * offset) where the cache has none or refuses it.  Remote data (S3/HTTP
 * shards) is not read at create, which would fetch every video: a video's
 * first clip reads it whole and its decode thread makes the record from
 * those bytes (the transport checked them against the object's ETag and
 * size; the cache file's key holds the ETag, so another version of the
 * object is another key), so its later clips, and the next run's, read
 * ranges.  When a batch is laid out, each clip's start (from (seed, epoch,
 * sample number), the decoder's own rule, video/start.c) gives the byte
 * ranges it needs (the header's, and keyframe to last packet), read one
 * after another into the batch's read area: the first in ios[i], the
 * others in `parts`, counting down on the first (loader/producer.c), each
 * counted up to its `need` so a short one shows.  In a shard the first read
 * starts at the member's tar header (its tag is checked, as a whole
 * member's is: loader/shard_read.c); under O_DIRECT every read is rounded
 * out to the block size and the decoder is handed the video's bytes within
 * (vplace).  A video without a record (not an MP4, not learnt yet,
 * read_bytes, stk__video_whole_files) is read whole, as before.  As in image mode the
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
#include "io/remote.h"
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
 * and the one converted.  Until a clip was decoded, a 720p video is assumed. */
#define DECODER_FRAMES 18
#define ASSUMED_PIXELS (1280u * 720u)

/* A clip's reads, as laid out: for the decoder, each read's bytes of the
 * video (offsets in the video, where they lie in the read area). */
struct vplace {
	uint32_t n;
	struct stk__vext ext[STK__VSPAN_MAX];
};

struct stk__vloader {
	struct stk_video_opts o;        /* defaults applied */
	size_t clip_bytes;
	uint32_t batch, nslots;
	struct stk_clip_info *info;     /* nslots x batch */
	uint32_t *clip;                 /* nslots x batch: each place's k */
	_Atomic uint64_t max_pixels;    /* the largest frame decoded so far */
	/* the video index: ranged reads */
	bool ranged;                    /* some videos have one, or may get one (learn) */
	bool learn;                     /* remote data: a video's first whole read makes it */
	struct vvid {
		uint64_t *rec;          /* its words (owned), NULL: read whole */
		uint64_t words;
		struct stk__vidx v;
		uint64_t room;          /* the most a clip of it takes in a read area */
		_Atomic int state;      /* learn: 0 none yet, 1 being made, 2 made or none */
	} *vid;                         /* per dataset entry */
	int64_t nvid;
	uint64_t rec_bytes;             /* the records' memory */
	struct vplace *place;           /* nslots x batch: each place's reads (n 0: whole) */
	struct sio *parts;              /* nslots x batch x (STK__VSPAN_MAX - 1) */
	_Atomic uint64_t n_ranged, n_whole;
	/* learn: the cache file and its items (keys owned), written when every
	 * video was seen and at the end */
	char *cpath;
	struct stk__vcache_item *items;
	uint64_t known, learned, written;
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
		v->place = calloc(n, sizeof(*v->place));
		v->parts = calloc(n * (STK__VSPAN_MAX - 1), sizeof(*v->parts));
		if (!v->place || !v->parts)
			return -ENOMEM;
	}
	return v->info && v->clip ? 0 : -ENOMEM;
}

static void learn_write(struct stk__vloader *v);
static void learn(struct stk_loader *l, int64_t idx, const void *data, size_t len);

void stk__vloader_free(struct stk_loader *l)
{
	if (!l->video)
		return;
	struct stk__vloader *v = l->video;
	if (v->learn && v->learned > v->written) /* (the threads are joined) */
		learn_write(v);
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
			learn(l, video, data, len);
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

/* Reads len bytes at off of fd into *buf: how many, or <0. */
static int64_t slurp(int fd, uint64_t off, size_t n, uint8_t **buf, size_t *cap)
{
	if (n > *cap) {
		uint8_t *b = realloc(*buf, n ? n : 1);
		if (!b)
			return -ENOMEM;
		*buf = b;
		*cap = n;
	}
	size_t got = 0;
	while (got < n) {
		ssize_t k = pread(fd, *buf + got, n - got, (off_t)(off + got));
		if (k <= 0)
			break;
		got += (size_t)k;
	}
	return (int64_t)got;
}

/* The room a clip of a video with record v takes in a read area: its
 * bytes, a shard's tar header before its first read (buffered), O_DIRECT's
 * rounding of each read (the header's ranges and one span). */
static uint64_t room_of(const struct stk_loader *l, const struct stk__vidx *v,
			const struct stk_video_opts *o)
{
	uint64_t r = stk__vidx_max_bytes(v, o);
	if (l->direct)
		return r + (uint64_t)(v->nhdr + 1) * 2 * STK_DIRECT_ALIGN;
	return r + (l->ds->shards ? 512 : 0);
}

/* Entry i's key in the cache file: its path; a shard member's offset too;
 * remote data's the object's ETag too (another version is another key). */
static int key_of(const struct stk_loader *l, int64_t i, char *out, size_t len)
{
	const struct stk_dataset *ds = l->ds;
	const struct stk_entry *e = &ds->entries[i];
	const char *name = stk__entry_path(ds, i);
	int n;
	if (ds->remote) {
		const struct stk__robj *o = stk__remote_find(ds->remote, name);
		n = snprintf(out, len, "%s@%llu %s", name, (unsigned long long)e->offset,
			     o ? o->etag : "");
	} else if (ds->shards) {
		n = snprintf(out, len, "%s@%llu", name, (unsigned long long)e->offset);
	} else {
		n = snprintf(out, len, "%s", name);
	}
	return n >= 0 && (size_t)n < len ? 0 : -ENAMETOOLONG;
}

/* A record taken for entry i (its words copied, or owned when own): 0, or
 * STK_ECORRUPT when stk__vidx_view refuses it (why says why). */
static int take(const struct stk_loader *l, struct vvid *x, int64_t i, const uint64_t *rec,
		uint64_t words, bool own, char *why, size_t whylen)
{
	uint64_t *r = own ? (uint64_t *)rec : malloc(words * 8);
	if (!r)
		return -ENOMEM;
	if (!own)
		memcpy(r, rec, words * 8);
	int rc = stk__vidx_view(r, words, l->ds->entries[i].size, &x->v, why, whylen);
	if (rc < 0) {
		free(r);
		return rc;
	}
	x->rec = r;
	x->words = words;
	x->room = room_of(l, &x->v, &l->video->o);
	return 0;
}

int stk__vloader_index(struct stk_loader *l, char *err, size_t errlen)
{
	struct stk__vloader *v = l->video;
	const struct stk_dataset *ds = l->ds;
	const char *off_why = stk__video_whole_files ? "whole files asked for" :
			      l->o.read_bytes ? "read_bytes" :
			      l->ops == &stk__engine_null ? "null engine" : NULL;
	if (off_why || !ds->n)
		return 0;
	v->vid = calloc((size_t)ds->n, sizeof(*v->vid));
	v->nvid = ds->n;
	if (!v->vid)
		return stk__errf(err, errlen, -ENOMEM, "out of memory (the video index)");
	char path[PATH_MAX + 8], why[PATH_MAX + 256], key[PATH_MAX + 160];
	bool cache = ds->remote ? ds->vcache_path != NULL : ds->cache_path &&
		     snprintf(path, sizeof(path), "%s.video", ds->cache_path) < (int)sizeof(path);
	if (ds->remote && cache)
		snprintf(path, sizeof(path), "%s", ds->vcache_path);
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
	/* remote data: no video is read at create (that would fetch them all):
	 * a video's first whole read makes its record (learn) */
	v->learn = ds->remote != NULL;
	int rc = 0, fd = -1;
	uint64_t fd_name = UINT64_MAX; /* shards: the one open (entries[].name) */
	struct stat sst;               /* and its stat */
	for (int64_t i = 0; i < ds->n && !rc; i++) {
		const struct stk_entry *e = &ds->entries[i];
		const char *name = stk__entry_path(ds, i);
		struct vvid *x = &v->vid[i];
		struct stk__vcache_item *it = &items[i];
		if ((rc = key_of(l, i, key, sizeof(key))) || !(it->path = strdup(key))) {
			rc = rc ? rc : -ENOMEM;
			break;
		}
		struct stat st;
		const struct stk__vcache_item *old = (size_t)i < c.n && !strcmp(c.item[i].path, key)
							     ? &c.item[i] : NULL;
		bool have = false, there;
		if (ds->remote) { /* the object's version is in the key; its size here */
			const struct stk__robj *o = stk__remote_find(ds->remote, name);
			it->size = o ? o->size : 0;
			there = o != NULL;
		} else if (ds->shards) {
			if (fd_name != e->name) {
				if (fd >= 0)
					close(fd);
				fd_name = e->name;
				fd = openat(ds->root_fd, name, O_RDONLY | O_CLOEXEC);
				if (fd >= 0 && fstat(fd, &sst)) {
					close(fd);
					fd = -1;
				}
			}
			if ((there = fd >= 0))
				ident(&sst, it);
		} else if ((there = !fstatat(ds->root_fd, name, &st, 0))) {
			ident(&st, it);
		}
		if (old && there) {
			have = old->size == it->size && old->mtime_ns == it->mtime_ns &&
			       old->ctime_ns == it->ctime_ns && old->ino == it->ino &&
			       old->dev == it->dev && (ds->shards || it->size == e->size);
			if (have && old->words) {
				int t = take(l, x, i, old->rec, old->words, false, why, sizeof(why));
				if (t == -ENOMEM) {
					rc = t;
					break;
				}
				if (t < 0) {
					stk__loader_notice(l, "%s: the video index's record of %s is "
							   "refused (%s); made again", path, key, why);
					have = false;
				}
			}
		}
		if (ds->remote) {
			if (have) /* a record, or none (not an MP4): never learnt again */
				atomic_store(&x->state, 2);
			v->known += have;
			it->words = x->words;
			it->rec = x->rec;
			if (x->rec)
				v->rec_bytes += x->words * 8;
			continue;
		}
		if (!have) {
			made++;
			int64_t n;
			if (ds->shards) {
				n = fd >= 0 ? slurp(fd, e->offset, e->size, &buf, &cap) : -errno;
			} else {
				int ffd = openat(ds->root_fd, name, O_RDONLY | O_CLOEXEC);
				n = ffd < 0 ? -errno : fstat(ffd, &st) ? -errno
				    : slurp(ffd, 0, (size_t)st.st_size, &buf, &cap);
				if (ffd >= 0 && l->direct) /* O_DIRECT: the data does not fit in memory */
					posix_fadvise(ffd, 0, 0, POSIX_FADV_DONTNEED);
				if (ffd >= 0)
					close(ffd);
				if (n >= 0)
					ident(&st, it);
			}
			if (n == -ENOMEM) {
				rc = -ENOMEM;
				break;
			}
			if (n < 0) /* the read says it, naming the file */
				continue;
			uint64_t want = ds->shards ? e->size : it->size;
			uint64_t *rec = NULL;
			size_t words = 0;
			int m = n == (int64_t)want && want == e->size
					? stk__vidx_make(buf, (size_t)n, &rec, &words, why, sizeof(why))
					: 1;
			if (m < 0) {
				rc = m;
				break;
			}
			if (m == 0 && (m = take(l, x, i, rec, words, true, why, sizeof(why))) == -ENOMEM) {
				rc = m;
				break;
			}
			if (m && first_none < 0) {
				first_none = i;
				snprintf(none_why, sizeof(none_why), "%.200s", n == (int64_t)want ? why :
					 "it changed while read");
			}
			it->words = x->words;
		}
		it->rec = x->rec;
		if (x->rec) {
			v->rec_bytes += x->words * 8;
		} else {
			none++;
			if (first_none < 0) {
				first_none = i;
				snprintf(none_why, sizeof(none_why), "no byte index");
			}
		}
	}
	if (fd >= 0)
		close(fd);
	if (ds->shards && l->direct) /* what the shards' reads put in the page cache */
		for (int64_t i = 0; i < ds->n; i++)
			if (i == 0 || ds->entries[i].name != ds->entries[i - 1].name) {
				int f = openat(ds->root_fd, stk__entry_path(ds, i), O_RDONLY | O_CLOEXEC);
				if (f >= 0) {
					posix_fadvise(f, 0, 0, POSIX_FADV_DONTNEED);
					close(f);
				}
			}
	free(buf);
	v->ranged = v->learn;
	for (int64_t i = 0; i < ds->n; i++)
		v->ranged |= v->vid[i].rec != NULL;
	if (!rc && cache && made && !v->learn)
		stk__vcache_write(path, items, (size_t)ds->n); /* a read-only folder: made again */
	if (!rc && v->learn && cache && !(v->cpath = strdup(path)))
		rc = -ENOMEM;
	stk__vcache_free(&c);
	if (rc || !v->learn || !v->cpath) {
		for (int64_t i = 0; i < ds->n; i++)
			free((char *)items[i].path);
		free(items);
	} else {
		v->items = items; /* written as videos are learnt */
	}
	if (rc)
		return stk__errf(err, errlen, rc, rc == -ENAMETOOLONG ? "a video's name is too long "
				 "for the video index" : "out of memory (the video index)");
	if (none)
		stk__loader_notice(l, "%llu of %lld videos have no byte index (the first: %s: %s): "
				   "their clips are read whole", (unsigned long long)none,
				   (long long)ds->n, stk__entry_path(ds, first_none), none_why);
	return 0;
}

/* learn: the cache file written with every record made so far.  Any thread,
 * under mu, or after the threads are joined. */
static void learn_write(struct stk__vloader *v)
{
	if (!v->cpath || !v->items)
		return;
	for (int64_t i = 0; i < v->nvid; i++) {
		v->items[i].rec = v->vid[i].rec;
		v->items[i].words = v->vid[i].rec ? v->vid[i].words : 0;
	}
	stk__vcache_write(v->cpath, v->items, (size_t)v->nvid);
	v->written = v->learned;
}

/* learn: video idx was read whole and decoded from data/len (its member's
 * bytes, which the transport checked against the object's ETag and size):
 * its record is made from them, so its later clips read only their ranges.
 * Once a video (state), by the decode thread that got there first. */
static void learn(struct stk_loader *l, int64_t idx, const void *data, size_t len)
{
	struct stk__vloader *v = l->video;
	struct vvid *x = &v->vid[idx];
	int zero = 0;
	if (!atomic_compare_exchange_strong(&x->state, &zero, 1))
		return;
	const struct stk_entry *e = &l->ds->entries[idx];
	uint64_t *rec = NULL;
	size_t words = 0;
	char why[256];
	struct vvid got = {0};
	bool ok = false;
	if (len == e->size && stk__vidx_make(data, len, &rec, &words, why, sizeof(why)) == 0 &&
	    take(l, &got, idx, rec, words, true, why, sizeof(why)) == 0) { /* (rec is got's) */
		/* a room above the whole read's would not fit the slots sized for it */
		ok = got.room <= stk__loader_read_len(l, e->size);
		if (!ok)
			free(got.rec);
	}
	pthread_mutex_lock(&l->mu);
	if (ok) {
		x->words = got.words;
		x->v = got.v;
		x->room = got.room;
		x->rec = got.rec; /* the I/O threads see it under mu */
		v->rec_bytes += got.words * 8;
		v->learned++;
	}
	atomic_store(&x->state, 2);
	if (++v->known == (uint64_t)v->nvid && v->learned > v->written)
		learn_write(v); /* every video seen: kept for the next run */
	pthread_mutex_unlock(&l->mu);
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
	stk__vidx_plan(&vd->v, &v->o, stk__sample_seed(l->o.seed, s->epoch, (int64_t)sample),
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
