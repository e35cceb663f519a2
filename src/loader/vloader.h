/* loader/vloader.h — video mode's state, shared by loader/video.c (clips:
 * their reads and decode) and loader/video_index.c (the video index: made,
 * loaded from the cache, learnt).  Internal. */
#ifndef STK_LOADER_VLOADER_H
#define STK_LOADER_VLOADER_H

#include "loader/loader.h"
#include "dataset/vcache.h"
#include "video/demux.h"
#include "video/vindex.h"

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
	_Atomic uint64_t max_pixels;    /* the largest frame: the index's, or decoded so far */
	/* the video index: ranged reads */
	bool ranged;                    /* some videos have one, or may get one (learn) */
	bool learn;                     /* remote data: a video's first whole read makes it */
	struct vvid {
		uint64_t *rec;          /* its words (owned, checked), NULL: read whole */
		uint64_t words;
		uint64_t room;          /* the most a clip of it takes in a read area */
		_Atomic int state;      /* learn: 0 none yet, 1 being made, 2 made or none */
	} *vid;                         /* per dataset entry */
	int64_t nvid;
	_Atomic uint64_t rec_bytes;     /* the records' memory (learnt: grows while read) */
	struct vplace *place;           /* nslots x batch: each place's reads (n 0: whole) */
	struct sio *parts;              /* nslots x batch x (STK__VSPAN_MAX - 1) */
	_Atomic uint64_t n_ranged, n_whole;
	/* learn: the cache file and its items (keys owned), written when every
	 * video was seen, at each epoch's end and at the end */
	char *cpath;
	struct stk__vcache_item *items;
	uint64_t known, learned, written;
};

/* --- loader/video_index.c (below loader/video.c) -------------------------- */
/* learn: the cache file written with every record made so far.  Any thread,
 * under mu, or after the threads are joined. */
void stk__vloader_learn_write(struct stk__vloader *v);
/* learn: video idx was read whole and decoded from data/len: its record is
 * made from those bytes (once a video; a decode thread, without mu). */
void stk__vloader_learn(struct stk_loader *l, int64_t idx, const void *data, size_t len);

#endif
