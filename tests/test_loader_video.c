/* test_loader_video.c — the loader's video mode: every clip of an epoch once
 * (clips_per_video of each video), ImageFolder labels, the same clips and
 * pixels for the same (seed, epoch), resume mid-epoch, ranks splitting the
 * clips, a corrupt video failed / skipped / replaced and named, the options
 * that cannot go together refused, the memory accounted.  The videos are
 * made by the library's own stk_video_make (no ffmpeg CLI). */
#include "testutil.h"

#include "stoker/stoker.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dataset/vcache.h"
#include "video/vindex.h"

extern bool stk__video_whole_files; /* loader/video.c: the test's switch */

#define NCLASS 2
#define PER_CLASS 3
#define NVID (NCLASS * PER_CLASS)
#define CPV 2
#define NCLIP (NVID * CPV)
#define FRAMES 4
#define SIDE 32

static char *root, *badroot;
static const char *const class_dirs[NCLASS] = {"b_walk", "a_run"}; /* created unsorted */

static void make_video(const char *path, uint32_t frames, uint64_t seed)
{
	struct stk_video_make_opts m = {.size = sizeof(m), .width = 64, .height = 48,
					.frames = frames, .fps = 25, .gop = 8, .seed = seed};
	char err[512];
	int rc = stk_video_make(path, &m, err, sizeof(err));
	if (rc)
		fail_msg("stk_video_make %s: %s (%s)", path, err, stk_err_name(rc));
}

static int setup(void **state)
{
	(void)state;
	root = tu_mkdtemp();
	badroot = tu_mkdtemp();
	char p[PATH_MAX];
	for (int c = 0; c < NCLASS; c++) {
		snprintf(p, sizeof(p), "%s/%s", root, class_dirs[c]);
		tu_mkdir(p);
		for (int i = 0; i < PER_CLASS; i++) {
			snprintf(p, sizeof(p), "%s/%s/v%d.%s", root, class_dirs[c], i,
				 i == 2 ? "mkv" : "mp4");
			make_video(p, 30 + 10 * (uint32_t)i, (uint64_t)(c * 10 + i));
		}
		snprintf(p, sizeof(p), "%s/%s/notes.jpg", root, class_dirs[c]);
		tu_write(p, "not a video", 11); /* video mode's folders take video files only */
	}
	/* badroot: four good videos and one that is not a video */
	snprintf(p, sizeof(p), "%s/x", badroot);
	tu_mkdir(p);
	for (int i = 0; i < 4; i++) {
		snprintf(p, sizeof(p), "%s/x/good%d.mp4", badroot, i);
		make_video(p, 30, (uint64_t)(100 + i));
	}
	snprintf(p, sizeof(p), "%s/x/broken.mp4", badroot);
	/* larger than the good ones: replace finds a stand-in that fits its room */
	static const char junk[65536] = "this is no mp4: no ftyp, no moov";
	tu_write(p, junk, sizeof(junk));
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	tu_rmrf(root);
	tu_rmrf(badroot);
	free(root);
	free(badroot);
	return 0;
}

static const struct stk_video_opts vopts = {.size = sizeof(vopts), .frames = FRAMES, .stride = 2,
					    .out_size = SIDE, .clips_per_video = CPV};

static int create(struct stk_loader **l, struct stk_loader_opts o, char *err, size_t errlen)
{
	o.size = sizeof(o);
	o.flags |= STK_F_QUIET | STK_F_NO_CACHE;
	if (!o.path)
		o.path = root;
	if (!o.video)
		o.video = &vopts;
	return stk_loader_create(l, &o, err, errlen);
}

static struct stk_loader *make(struct stk_loader_opts o)
{
	struct stk_loader *l = NULL;
	char err[1024];
	int rc = create(&l, o, err, sizeof(err));
	if (rc)
		fail_msg("create: %s (%s)", err, stk_err_name(rc));
	return l;
}

/* One epoch from where the loader is: each clip's sample number (video x
 * CPV + clip) into ids, its pixels' checksum into sums; the clip count. */
static int64_t run_epoch(struct stk_loader *l, int64_t *ids, uint64_t *sums, int64_t cap)
{
	struct stk_batch *b;
	int64_t n = 0;
	int rc;
	while ((rc = stk_loader_next(l, &b)) == 1) {
		assert_non_null(b->clips);
		assert_int_equal(b->clip_bytes, (size_t)FRAMES * SIDE * SIDE * 3);
		assert_int_equal(b->frames, FRAMES);
		assert_int_equal(b->height, SIDE);
		assert_int_equal(b->width, SIDE);
		assert_int_equal(b->tchw, 0);
		assert_null(b->images);
		for (uint32_t i = 0; i < b->count; i++) {
			const struct stk_clip_info *ci = &b->clip_info[i];
			assert_true(ci->clip < CPV);
			assert_true(ci->frames_decoded >= 1);
			assert_true(ci->start_s >= 0);
			assert_true(n < cap);
			ids[n] = b->indices[i] * CPV + ci->clip;
			uint64_t h = 1469598103934665603ull;
			const uint8_t *px = (const uint8_t *)b->clips + i * b->clip_bytes;
			for (size_t k = 0; k < b->clip_bytes; k++)
				h = (h ^ px[k]) * 1099511628211ull;
			if (sums)
				sums[n] = h;
			n++;
		}
		stk_batch_release(l, b);
	}
	assert_int_equal(rc, 0);
	return n;
}

static void test_every_clip_once(void **state)
{
	(void)state;
	struct stk_loader *l = make((struct stk_loader_opts){.batch_size = 5, .seed = 7});
	assert_int_equal(stk_loader_num_samples(l), NVID); /* the dataset: videos */
	assert_int_equal(stk_loader_rank_samples(l), NCLIP); /* an epoch: clips */
	assert_int_equal(stk_loader_len(l), (NCLIP + 4) / 5);
	struct stk_batch *b;
	int seen[NCLIP] = {0};
	int64_t n = 0;
	while (stk_loader_next(l, &b) == 1) {
		for (uint32_t i = 0; i < b->count; i++) {
			int64_t v = b->indices[i];
			assert_true(v >= 0 && v < NVID);
			char path[PATH_MAX];
			int64_t label;
			assert_int_equal(stk_loader_sample(l, v, path, sizeof(path), NULL, &label), 0);
			assert_int_equal(b->labels[i], label);
			/* ImageFolder: classes sorted, a_run = 0 */
			assert_int_equal(label, strstr(path, "/a_run/") ? 0 : 1);
			assert_null(strstr(path, ".jpg"));
			seen[v * CPV + b->clip_info[i].clip]++;
			n++;
		}
		stk_batch_release(l, b);
	}
	assert_int_equal(n, NCLIP);
	for (int i = 0; i < NCLIP; i++)
		assert_int_equal(seen[i], 1);
	struct stk_video_opts eff = {.size = sizeof(eff)};
	assert_int_equal(stk_loader_video_options(l, &eff), 1);
	assert_int_equal(eff.clips_per_video, CPV);
	assert_int_equal(eff.frames, FRAMES);
	stk_loader_destroy(l);
}

static void test_deterministic(void **state)
{
	(void)state;
	int64_t a[NCLIP], b[NCLIP], c[NCLIP];
	uint64_t sa[NCLIP], sb[NCLIP], sc[NCLIP];
	struct stk_loader *l = make((struct stk_loader_opts){.batch_size = 4, .seed = 3});
	assert_int_equal(run_epoch(l, a, sa, NCLIP), NCLIP);
	stk_loader_destroy(l);
	/* other threads, another batch size: the same clips, the same pixels */
	l = make((struct stk_loader_opts){.batch_size = 4, .seed = 3, .io_threads = 1});
	assert_int_equal(run_epoch(l, b, sb, NCLIP), NCLIP);
	stk_loader_destroy(l);
	assert_memory_equal(a, b, sizeof(a));
	assert_memory_equal(sa, sb, sizeof(sa));
	/* the next epoch: another order, other starts or crops */
	l = make((struct stk_loader_opts){.batch_size = 4, .seed = 3, .epoch = 1});
	assert_int_equal(run_epoch(l, c, sc, NCLIP), NCLIP);
	stk_loader_destroy(l);
	assert_memory_not_equal(a, c, sizeof(a));
	int same = 0;
	for (int i = 0; i < NCLIP; i++)
		for (int j = 0; j < NCLIP; j++)
			same += a[i] == c[j] && sa[i] == sc[j];
	assert_true(same < NCLIP);
}

static void test_resume(void **state)
{
	(void)state;
	int64_t full[NCLIP], tail[NCLIP];
	uint64_t sfull[NCLIP], stail[NCLIP];
	struct stk_loader *l = make((struct stk_loader_opts){.batch_size = 3, .seed = 5, .epoch = 2});
	assert_int_equal(run_epoch(l, full, sfull, NCLIP), NCLIP);
	stk_loader_destroy(l);
	for (uint64_t k = 1; k < 4; k += 2) {
		l = make((struct stk_loader_opts){.batch_size = 3, .seed = 5, .epoch = 2,
						  .start_batch = k});
		int64_t got = run_epoch(l, tail, stail, NCLIP);
		assert_int_equal(got, NCLIP - (int64_t)k * 3);
		assert_memory_equal(tail, full + k * 3, (size_t)got * sizeof(int64_t));
		assert_memory_equal(stail, sfull + k * 3, (size_t)got * sizeof(uint64_t));
		stk_loader_destroy(l);
	}
	/* mid-epoch, through the resume point */
	l = make((struct stk_loader_opts){.batch_size = 3, .seed = 5, .epoch = 2});
	struct stk_batch *b;
	for (int i = 0; i < 2; i++) {
		assert_int_equal(stk_loader_next(l, &b), 1);
		stk_batch_release(l, b);
	}
	struct stk_resume point = {.size = sizeof(point)};
	assert_int_equal(stk_loader_resume_point(l, &point), 0);
	stk_loader_destroy(l);
	l = make((struct stk_loader_opts){.batch_size = 3, .seed = 5});
	assert_int_equal(stk_loader_resume(l, &point), 0);
	assert_int_equal(run_epoch(l, tail, stail, NCLIP), NCLIP - 6);
	assert_memory_equal(tail, full + 6, (NCLIP - 6) * sizeof(int64_t));
	assert_memory_equal(stail, sfull + 6, (NCLIP - 6) * sizeof(uint64_t));
	stk_loader_destroy(l);
	/* another clips_per_video is another dataset of samples: refused */
	l = make((struct stk_loader_opts){.batch_size = 3, .seed = 5,
					  .video = &(struct stk_video_opts){
						  .size = sizeof(struct stk_video_opts),
						  .frames = FRAMES, .out_size = SIDE,
						  .clips_per_video = 3}});
	assert_true(stk_loader_resume(l, &point) < 0);
	stk_loader_destroy(l);
}

static void test_ranks(void **state)
{
	(void)state;
	int seen[NCLIP] = {0};
	int64_t ids[NCLIP];
	int64_t total = 0;
	for (uint32_t r = 0; r < 3; r++) {
		struct stk_loader *l = make((struct stk_loader_opts){.batch_size = 2, .seed = 9,
								    .rank = r, .world_size = 3});
		assert_int_equal(stk_loader_rank_samples(l), NCLIP / 3);
		int64_t n = run_epoch(l, ids, NULL, NCLIP);
		assert_int_equal(n, NCLIP / 3);
		for (int64_t i = 0; i < n; i++)
			seen[ids[i]]++;
		total += n;
		stk_loader_destroy(l);
	}
	assert_int_equal(total, NCLIP);
	for (int i = 0; i < NCLIP; i++)
		assert_int_equal(seen[i], 1);
}

static void test_corrupt_video(void **state)
{
	(void)state;
	struct stk_video_opts one = vopts;
	one.clips_per_video = 1;
	/* fail: the epoch ends with the file named */
	struct stk_loader *l = make((struct stk_loader_opts){.path = badroot, .batch_size = 5,
							    .on_error = STK_ON_ERROR_FAIL,
							    .video = &one});
	struct stk_batch *b;
	int rc;
	while ((rc = stk_loader_next(l, &b)) == 1)
		stk_batch_release(l, b);
	assert_true(rc < 0);
	const char *e = stk_last_error(l);
	assert_non_null(strstr(e, "broken.mp4"));
	stk_loader_destroy(l);
	/* skip: the batch is shorter, the error counted */
	l = make((struct stk_loader_opts){.path = badroot, .batch_size = 5,
					  .on_error = STK_ON_ERROR_SKIP, .video = &one});
	int64_t ids[8];
	uint64_t sums[8];
	assert_int_equal(run_epoch(l, ids, sums, 8), 4);
	struct stk_stats st = {.size = sizeof(st)};
	assert_int_equal(stk_loader_stats(l, &st), 0);
	assert_int_equal(st.errors, 1);
	assert_non_null(strstr(stk_last_error(l), "broken.mp4"));
	stk_loader_destroy(l);
	/* replace: full batches, a good video stands in; deterministic */
	uint64_t first[5];
	for (int round = 0; round < 2; round++) {
		l = make((struct stk_loader_opts){.path = badroot, .batch_size = 5, .seed = 1,
						  .on_error = STK_ON_ERROR_REPLACE, .video = &one});
		int nrc = stk_loader_next(l, &b);
		if (nrc != 1)
			fail_msg("replace: %d %s", nrc, stk_last_error(l));
		assert_int_equal(b->count, 5);
		assert_int_equal(b->replaced, 1);
		for (uint32_t i = 0; i < b->count; i++) {
			char path[PATH_MAX];
			assert_int_equal(stk_loader_sample(l, b->indices[i], path, sizeof(path), NULL,
							   NULL), 0);
			assert_null(strstr(path, "broken"));
			uint64_t h = 0;
			const uint8_t *px = (const uint8_t *)b->clips + i * b->clip_bytes;
			for (size_t k = 0; k < b->clip_bytes; k++)
				h = h * 31 + px[k];
			if (round == 0)
				first[i] = h;
			else
				assert_int_equal(first[i], h);
		}
		stk_batch_release(l, b);
		assert_int_equal(stk_loader_next(l, &b), 0);
		assert_non_null(strstr(stk_last_error(l), "broken.mp4"));
		stk_loader_destroy(l);
	}
}

static void test_options(void **state)
{
	(void)state;
	struct stk_loader *l = NULL;
	char err[1024];
	struct stk_image_opts img = {.size = sizeof(img)};
	assert_int_equal(create(&l, (struct stk_loader_opts){.image = &img}, err, sizeof(err)),
			 -EINVAL);
	assert_null(l);
	assert_non_null(strstr(err, "image and video"));
	struct stk_loader_opts o = {.size = sizeof(o), .path = root, .image = &img,
				    .video = &vopts};
	assert_int_equal(stk_loader_opts_check(&o, err, sizeof(err)), -EINVAL);
	assert_int_equal(create(&l, (struct stk_loader_opts){.read_bytes = 100}, err, sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "read_bytes"));
	struct stk_video_opts bad = vopts;
	bad.frames = 5000;
	o = (struct stk_loader_opts){.size = sizeof(o), .path = root, .video = &bad};
	assert_true(stk_loader_opts_check(&o, err, sizeof(err)) < 0);
	assert_non_null(strstr(err, "frames"));
	assert_true(create(&l, (struct stk_loader_opts){.video = &bad}, err, sizeof(err)) < 0);
	assert_non_null(strstr(err, "frames"));
	/* a folder with no video in it says which extensions were looked for */
	char *d = tu_mkdtemp(), p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/a.jpg", d);
	tu_write(p, "x", 1);
	assert_int_equal(create(&l, (struct stk_loader_opts){.path = d}, err, sizeof(err)),
			 STK_EEMPTY);
	assert_non_null(strstr(err, ".mp4"));
	tu_rmrf(d);
	free(d);
}

static void test_memory(void **state)
{
	(void)state;
	struct stk_loader *l = make((struct stk_loader_opts){.batch_size = 4, .prefetch = 3});
	struct stk_memory m = {.size = sizeof(m)};
	assert_int_equal(stk_loader_memory(l, &m), 0);
	assert_int_equal(m.nslots, 3);
	/* a slot holds the batch's clips; the reads (a clip's byte ranges, at
	 * most its file) go to two read areas, reused once decoded */
	uint64_t largest = 0, sz;
	for (int64_t i = 0; i < NVID; i++) {
		assert_int_equal(stk_loader_sample(l, i, NULL, 0, &sz, NULL), 0);
		largest = sz > largest ? sz : largest;
	}
	assert_true(m.slot_bytes >= 4ull * FRAMES * SIDE * SIDE * 3);
	assert_true(m.slot_bytes < 4ull * FRAMES * SIDE * SIDE * 3 + 4096);
	assert_int_equal(m.read_areas, 2);
	assert_true(m.read_area_bytes > 0);
	assert_true(m.read_area_bytes <= 4 * largest + 4 * 4096 + 8192);
	assert_true(m.decode_threads >= 1);
	assert_true(m.decode_bytes > 0);
	/* before any batch, the decoders' memory is the largest video's size
	 * (64x48, from the video index), not the 720p assumed without one */
	stk__video_whole_files = true;
	struct stk_loader *lw = make((struct stk_loader_opts){.batch_size = 4, .prefetch = 3});
	stk__video_whole_files = false;
	struct stk_memory mw = {.size = sizeof(mw)};
	assert_int_equal(stk_loader_memory(lw, &mw), 0);
	stk_loader_destroy(lw);
	assert_int_equal(mw.decode_threads, m.decode_threads);
	if (m.decode_bytes * (1280 * 720) != mw.decode_bytes * (64 * 48))
		fail_msg("decoders %llu bytes with the index, %llu at the assumed 720p",
			 (unsigned long long)m.decode_bytes, (unsigned long long)mw.decode_bytes);
	assert_int_equal(m.total, m.pool_bytes + m.read_pool_bytes + m.index_bytes + m.meta_bytes +
				   m.decode_bytes);
	/* the estimate counts video mode the same way: clips in slots, reads in areas */
	struct stk_memory e = {.size = sizeof(e)};
	struct stk_loader_opts eo = {.size = sizeof(eo), .batch_size = 4, .prefetch = 3,
				     .video = &vopts};
	char err[256];
	assert_int_equal(stk_memory_estimate(&eo, NVID, largest, &e, err, sizeof(err)), 0);
	assert_int_equal(e.slot_bytes, m.slot_bytes);
	assert_int_equal(e.read_areas, 2);
	assert_true(e.decode_bytes > 0);
	assert_true(e.read_pool_bytes > 0);
	stk_loader_destroy(l);
}

/* Long videos (keyframes 25 apart), many random clips: the ranged reads give
 * the same pixels as whole files, read far fewer bytes, and the index cache
 * is reused, refused when damaged (naming it) and made again when stale. */
#define LONG_VID 3
#define LONG_CPV 24
static int64_t ranged_epoch(const char *dir, const char *cache, bool whole, uint64_t *sums,
			    struct stk_stats *st, char *errout, size_t errlen)
{
	struct stk_video_opts vo = {.size = sizeof(vo), .frames = 6, .stride = 3, .out_size = 24,
				    .clips_per_video = LONG_CPV};
	struct stk_loader_opts o = {.size = sizeof(o), .path = dir, .batch_size = 5, .seed = 7,
				    .video = &vo, .cache_dir = cache};
	stk__video_whole_files = whole;
	struct stk_loader *l = NULL;
	char err[1024];
	int rc = stk_loader_create(&l, &o, err, sizeof(err));
	stk__video_whole_files = false;
	if (rc)
		fail_msg("create: %s", err);
	struct stk_batch *b;
	int64_t n = 0;
	while ((rc = stk_loader_next(l, &b)) == 1) {
		for (uint32_t i = 0; i < b->count; i++) {
			uint64_t h = 1469598103934665603ull;
			const uint8_t *px = (const uint8_t *)b->clips + i * b->clip_bytes;
			for (size_t k = 0; k < b->clip_bytes; k++)
				h = (h ^ px[k]) * 1099511628211ull;
			sums[b->indices[i] * LONG_CPV + b->clip_info[i].clip] = h;
			n++;
		}
		stk_batch_release(l, b);
	}
	if (errout)
		snprintf(errout, errlen, "%s", rc < 0 ? stk_last_error(l) : "");
	st->size = sizeof(*st);
	assert_int_equal(stk_loader_stats(l, st), 0);
	if (rc < 0 || st->total_errors)
		printf("epoch: %d %s\n", rc, stk_last_error(l));
	stk_loader_destroy(l);
	return rc < 0 ? rc : n;
}

static void test_ranged_reads(void **state)
{
	(void)state;
	char *dir = tu_mkdtemp(), *cache = tu_mkdtemp(), p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/c", dir);
	tu_mkdir(p);
	uint64_t total = 0;
	for (int i = 0; i < LONG_VID; i++) {
		snprintf(p, sizeof(p), "%s/c/long%d.mp4", dir, i);
		struct stk_video_make_opts m = {.size = sizeof(m), .width = 96, .height = 64,
						.frames = 200 + 40 * (uint32_t)i, .fps = 25, .gop = 25,
						.seed = 500 + (uint64_t)i};
		char err[512];
		if (stk_video_make(p, &m, err, sizeof(err)))
			fail_msg("stk_video_make: %s", err);
		struct stat st;
		assert_int_equal(stat(p, &st), 0);
		total += (uint64_t)st.st_size;
	}
	uint64_t whole[LONG_VID * LONG_CPV] = {0}, ranged[LONG_VID * LONG_CPV] = {0};
	struct stk_stats sw, sr;
	assert_int_equal(ranged_epoch(dir, cache, true, whole, &sw, NULL, 0), LONG_VID * LONG_CPV);
	assert_int_equal(sw.total_video_whole, LONG_VID * LONG_CPV);
	assert_int_equal(sw.total_video_ranged, 0);
	assert_int_equal(ranged_epoch(dir, cache, false, ranged, &sr, NULL, 0), LONG_VID * LONG_CPV);
	if (sr.total_video_ranged != LONG_VID * LONG_CPV)
		fail_msg("ranged %llu whole %llu", (unsigned long long)sr.total_video_ranged,
			 (unsigned long long)sr.total_video_whole);
	for (int i = 0; i < LONG_VID * LONG_CPV; i++)
		if (whole[i] != ranged[i])
			fail_msg("clip %d: ranged pixels differ from the whole file's", i);
	/* a clip reads its header and one or two keyframe intervals: far below its file */
	double per_clip = (double)sr.total_bytes / (double)sr.total_samples;
	double per_file = (double)sw.total_bytes / (double)sw.total_samples;
	if (!(per_clip < per_file / 2))
		fail_msg("ranged reads %.0f bytes a clip, whole files %.0f", per_clip, per_file);
	/* the cache file is there; damaged, it is refused and made again */
	char cpath[PATH_MAX] = "";
	char cmd[2 * PATH_MAX];
	snprintf(cmd, sizeof(cmd), "ls %s/*.video 2>/dev/null", cache);
	FILE *f = popen(cmd, "r");
	assert_non_null(f);
	assert_non_null(fgets(cpath, sizeof(cpath), f));
	pclose(f);
	cpath[strcspn(cpath, "\n")] = 0;
	struct stat cs;
	assert_int_equal(stat(cpath, &cs), 0);
	/* flip a byte inside a record (past the 40-byte header) */
	FILE *w = fopen(cpath, "r+b");
	assert_non_null(w);
	assert_int_equal(fseek(w, (long)cs.st_size - 20, SEEK_SET), 0);
	int ch = fgetc(w);
	assert_int_equal(fseek(w, (long)cs.st_size - 20, SEEK_SET), 0);
	fputc(ch ^ 0x5a, w);
	fclose(w);
	uint64_t again[LONG_VID * LONG_CPV];
	char eb0[1024];
	assert_int_equal(ranged_epoch(dir, cache, false, again, &sr, NULL, 0), LONG_VID * LONG_CPV);
	assert_memory_equal(again, ranged, sizeof(again));
	assert_int_equal(sr.total_video_ranged, LONG_VID * LONG_CPV);
	/* refused, made again and written back: the flipped byte is the file's again */
	w = fopen(cpath, "rb");
	assert_non_null(w);
	assert_int_equal(fseek(w, (long)cs.st_size - 20, SEEK_SET), 0);
	assert_int_equal(fgetc(w), ch);
	fclose(w);
	/* a cache of the old format (version 1: 16 bytes a packet) is refused and
	 * made again, in the new one */
	w = fopen(cpath, "r+b");
	assert_non_null(w);
	uint64_t ver = 1;
	assert_int_equal(fseek(w, 8, SEEK_SET), 0);
	assert_int_equal(fwrite(&ver, 8, 1, w), 1);
	fclose(w);
	struct stk__vcache vold;
	assert_true(stk__vcache_load(cpath, &vold, eb0, sizeof(eb0)) < 0);
	assert_non_null(strstr(eb0, "not a video index of this version"));
	assert_int_equal(ranged_epoch(dir, cache, false, again, &sr, NULL, 0), LONG_VID * LONG_CPV);
	assert_memory_equal(again, ranged, sizeof(again));
	assert_int_equal(sr.total_video_ranged, LONG_VID * LONG_CPV);
	assert_int_equal(stk__vcache_load(cpath, &vold, eb0, sizeof(eb0)), 1);
	stk__vcache_free(&vold);
	/* writable by others: refused (not trusted), made again, written 0644 */
	assert_int_equal(chmod(cpath, 0666), 0);
	assert_int_equal(ranged_epoch(dir, cache, false, again, &sr, NULL, 0), LONG_VID * LONG_CPV);
	assert_int_equal(stat(cpath, &cs), 0);
	assert_int_equal(cs.st_mode & 0777, 0644);
	assert_memory_equal(again, ranged, sizeof(again));
	/* planted: a record whose checksum holds but whose keyframe positions
	 * are another file's: the plan's reads then miss what FFmpeg asks for,
	 * and the clip fails naming the video, never decoding other bytes */
	struct stk__vcache vc;
	char why[512];
	assert_int_equal(stk__vcache_load(cpath, &vc, why, sizeof(why)), 1);
	assert_int_equal(vc.n, LONG_VID);
	struct stk__vcache_item *it = &vc.item[0];
	assert_true(it->words > 11);
	/* the same video's index, every start reading from the file's end */
	snprintf(p, sizeof(p), "%s/%s", dir, it->path);
	FILE *vf = fopen(p, "rb");
	assert_non_null(vf);
	uint8_t *vb = malloc(it->size);
	assert_non_null(vb);
	assert_int_equal(fread(vb, 1, it->size, vf), it->size);
	fclose(vf);
	struct stk__vidx_raw raw;
	assert_int_equal(stk__vidx_make_raw(vb, it->size, &raw, why, sizeof(why)), 0);
	free(vb);
	for (uint32_t j = 0; j < raw.nkey; j++)
		raw.kpos[j] = it->size - 1;
	uint64_t *planted;
	size_t pw;
	assert_int_equal(stk__vidx_pack(&raw, &planted, &pw), 0);
	stk__vidx_raw_free(&raw);
	it->rec = planted;
	it->words = pw;
	assert_int_equal(stk__vcache_write(cpath, vc.item, vc.n, 0644), 0);
	stk__vcache_free(&vc);
	free(planted);
	char eb[1024];
	struct stk_video_opts vo1 = {.size = sizeof(vo1), .frames = 6, .stride = 3, .out_size = 24,
				     .clips_per_video = LONG_CPV};
	struct stk_loader_opts fo = {.size = sizeof(fo), .path = dir, .batch_size = 5, .seed = 7,
				     .video = &vo1, .cache_dir = cache, .flags = STK_F_QUIET,
				     .on_error = STK_ON_ERROR_FAIL};
	struct stk_loader *fl = NULL;
	assert_int_equal(stk_loader_create(&fl, &fo, eb, sizeof(eb)), 0);
	struct stk_batch *fb;
	int frc;
	while ((frc = stk_loader_next(fl, &fb)) == 1)
		stk_batch_release(fl, fb);
	assert_true(frc < 0);
	snprintf(eb, sizeof(eb), "%s", stk_last_error(fl));
	stk_loader_destroy(fl);
	if (!strstr(eb, "long0.mp4") || !strstr(eb, "index does not match"))
		fail_msg("planted index: %s", eb);
	assert_int_equal(unlink(cpath), 0); /* (the planted record would fail what follows) */
	/* a planted index whose checksum holds but whose positions are wrong
	 * (the file replaced behind the same name and size): the file's ctime
	 * differs, so that video is indexed again, and the pixels stay */
	snprintf(p, sizeof(p), "%s/c/long1.mp4", dir);
	snprintf(cmd, sizeof(cmd), "%s/new.mp4", cache);
	struct stk_video_make_opts m = {.size = sizeof(m), .width = 96, .height = 64,
					.frames = 240, .fps = 25, .gop = 30, .seed = 999};
	char err[512];
	if (stk_video_make(cmd, &m, err, sizeof(err)))
		fail_msg("stk_video_make: %s", err);
	/* rewritten in place (same inode), its mtime set back: only its ctime
	 * tells, and the record made for the old bytes must not be used */
	struct stat before;
	assert_int_equal(stat(p, &before), 0);
	FILE *in = fopen(cmd, "rb");
	assert_non_null(in);
	static char bytes[1 << 20];
	size_t nlen = fread(bytes, 1, sizeof(bytes), in);
	fclose(in);
	assert_true(nlen > 0 && nlen < sizeof(bytes));
	FILE *o = fopen(p, "r+b"); /* in place: the same inode */
	assert_non_null(o);
	assert_int_equal(fwrite(bytes, 1, nlen, o), nlen);
	assert_int_equal(ftruncate(fileno(o), (off_t)nlen), 0);
	fclose(o);
	struct timespec ts[2] = {before.st_atim, before.st_mtim};
	assert_int_equal(utimensat(AT_FDCWD, p, ts, 0), 0);
	uint64_t w2[LONG_VID * LONG_CPV], r2[LONG_VID * LONG_CPV];
	assert_int_equal(ranged_epoch(dir, cache, true, w2, &sw, NULL, 0), LONG_VID * LONG_CPV);
	assert_int_equal(ranged_epoch(dir, cache, false, r2, &sr, NULL, 0), LONG_VID * LONG_CPV);
	assert_memory_equal(w2, r2, sizeof(w2));
	assert_int_equal(sr.total_video_ranged, LONG_VID * LONG_CPV);
	tu_rmrf(dir);
	tu_rmrf(cache);
	free(dir);
	free(cache);
}

/* Matroska and WebM (issue 38): H.264 in MKV and VP9 in WebM, indexed (their
 * seeks land on clusters the packets do not say, and read the Cues first):
 * every clip ranged, its pixels the whole file's, far fewer bytes read. */
static void test_ranged_matroska(void **state)
{
	(void)state;
	char *dir = tu_mkdtemp(), *cache = tu_mkdtemp(), p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/c", dir);
	tu_mkdir(p);
	static const char *const names[LONG_VID] = {"long0.mkv", "long1.webm", "long2.mkv"};
	static const char *const codecs[LONG_VID] = {"h264", "vp9", "mpeg4"};
	for (int i = 0; i < LONG_VID; i++) {
		snprintf(p, sizeof(p), "%s/c/%s", dir, names[i]);
		struct stk_video_make_opts m = {.size = sizeof(m), .width = 96, .height = 64,
						.frames = 200 + 40 * (uint32_t)i, .fps = 25, .gop = 25,
						.codec = codecs[i], .seed = 700 + (uint64_t)i};
		char err[512];
		if (stk_video_make(p, &m, err, sizeof(err)))
			fail_msg("stk_video_make %s: %s", names[i], err);
	}
	uint64_t whole[LONG_VID * LONG_CPV] = {0}, ranged[LONG_VID * LONG_CPV] = {0};
	struct stk_stats sw, sr;
	assert_int_equal(ranged_epoch(dir, cache, true, whole, &sw, NULL, 0), LONG_VID * LONG_CPV);
	assert_int_equal(sw.total_video_ranged, 0);
	char eb[1024];
	int64_t n = ranged_epoch(dir, cache, false, ranged, &sr, eb, sizeof(eb));
	if (n != LONG_VID * LONG_CPV)
		fail_msg("ranged epoch: %lld clips: %s", (long long)n, eb);
	if (sr.total_video_ranged != LONG_VID * LONG_CPV)
		fail_msg("ranged %llu whole %llu", (unsigned long long)sr.total_video_ranged,
			 (unsigned long long)sr.total_video_whole);
	for (int i = 0; i < LONG_VID * LONG_CPV; i++)
		if (whole[i] != ranged[i])
			fail_msg("clip %d (%s): ranged pixels differ from the whole file's", i,
				 names[i / LONG_CPV]);
	double per_clip = (double)sr.total_bytes / (double)sr.total_samples;
	double per_file = (double)sw.total_bytes / (double)sw.total_samples;
	if (!(per_clip < per_file / 2))
		fail_msg("ranged reads %.0f bytes a clip, whole files %.0f", per_clip, per_file);
	/* from the cache, the same */
	assert_int_equal(ranged_epoch(dir, cache, false, whole, &sr, NULL, 0), LONG_VID * LONG_CPV);
	assert_memory_equal(whole, ranged, sizeof(whole));
	tu_rmrf(dir);
	tu_rmrf(cache);
	free(dir);
	free(cache);
}

int main(void)
{
	char codecs[256];
	if (stk_video_codecs(codecs, sizeof(codecs)) < 0) {
		printf("test_loader_video: skipped: %s\n", codecs);
		return 0;
	}
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_clip_once),
		cmocka_unit_test(test_deterministic),
		cmocka_unit_test(test_resume),
		cmocka_unit_test(test_ranks),
		cmocka_unit_test(test_corrupt_video),
		cmocka_unit_test(test_options),
		cmocka_unit_test(test_memory),
		cmocka_unit_test(test_ranged_reads),
		cmocka_unit_test(test_ranged_matroska),
	};
	return cmocka_run_group_tests_name("loader_video", tests, setup, teardown);
}
