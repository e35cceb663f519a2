/* test_decode_order.c — the order the decode threads take a batch's landed
 * samples in (the costliest first: loader/producer.c's dq_take, from
 * image/image.c's stk__image_cost) changes no byte: the same batches, the
 * same images, labels and indices with the rule on and off, one or two
 * decode threads, each image the one stk_image_decode gives for its file;
 * and the rule does take the costliest first (a batch's largest progressive
 * file, last in sample order, is decoded early, not last). */
#include "testjpeg.h"

#include "image/image.h"
#include "loader/loader.h"
#include "stoker/stoker.h"

#include <limits.h>
#include <pthread.h>

#define NFILES 24

static int texture(int x, int y, int c)
{
	return (x * 7 + y * 13 + c * 50 + (x * y) % 31) % 256;
}

/* file i: (160 + 16i) x (120 + 16i), every third progressive; the last,
 * the largest, progressive */
static bool progressive(int i)
{
	return i % 3 == 2;
}

static uint8_t *picture(int i, size_t *len)
{
	return tu_jpeg(&(struct tu_jpeg){.w = 160 + 16 * i, .h = 120 + 16 * i, .comps = 3,
					 .progressive = progressive(i), .pixel = texture},
		       len);
}

static void test_cost(void **state)
{
	(void)state;
	size_t blen, plen;
	uint8_t *b = picture(0, &blen), *p = picture(2, &plen);
	assert_int_equal(stk__image_cost(b, blen), blen);
	assert_int_equal(stk__image_cost(p, plen), plen * 27 / 10);
	/* cut before the frame header: not known to be progressive */
	assert_int_equal(stk__image_cost(p, 20), 20);
	/* not a JPEG at all: its bytes */
	uint8_t junk[64] = {0x89, 'P', 'N', 'G'};
	assert_int_equal(stk__image_cost(junk, sizeof(junk)), sizeof(junk));
	assert_int_equal(stk__image_cost(junk, 0), 0);
	/* a large APP segment before the frame: still found */
	uint8_t *big = malloc(plen + 70000);
	assert_non_null(big);
	memcpy(big, p, 2);
	big[2] = 0xff;
	big[3] = 0xe1;
	big[4] = 0xff; /* 65535 bytes with the length field */
	big[5] = 0xff;
	memset(big + 6, 0xab, 65533);
	memcpy(big + 2 + 65537, p + 2, plen - 2);
	size_t biglen = plen + 65537;
	assert_int_equal(stk__image_cost(big, biglen), biglen * 27 / 10);
	free(big);
	free(b);
	free(p);
}

/* What the decoders saw, in order (one decode thread): each region's size. */
static int seen_w[4 * NFILES], seen_h[4 * NFILES], nseen;
static void see_region(const uint8_t *rgb, int w, int h, double bx, double by)
{
	(void)rgb;
	(void)bx;
	(void)by;
	if (nseen < 4 * NFILES) {
		seen_w[nseen] = w;
		seen_h[nseen] = h;
		nseen++;
	}
}

struct epoch {
	uint8_t *images;
	int64_t indices[NFILES], labels[NFILES];
	uint32_t counts[NFILES];
	int batches, samples;
};

static void run_epoch(const char *dir, const struct stk_image_opts *img, uint32_t flags,
		      struct epoch *e)
{
	struct stk_loader_opts o = {.size = sizeof(o), .path = dir, .batch_size = 8, .seed = 11,
				    .image = img, .flags = STK_F_QUIET | STK_F_NO_CACHE | flags};
	struct stk_loader *l;
	char err[512];
	assert_int_equal(stk_loader_create(&l, &o, err, sizeof(err)), 0);
	size_t ib = stk_image_bytes(img);
	memset(e, 0, sizeof(*e));
	e->images = malloc(ib * NFILES);
	assert_non_null(e->images);
	struct stk_batch *b;
	int rc;
	while ((rc = stk_loader_next(l, &b)) == 1) {
		assert_true(e->samples + (int)b->count <= NFILES);
		memcpy(e->images + (size_t)e->samples * ib, b->images, b->count * ib);
		for (uint32_t i = 0; i < b->count; i++) {
			e->indices[e->samples + (int)i] = b->indices[i];
			e->labels[e->samples + (int)i] = b->labels[i];
		}
		e->counts[e->batches++] = b->count;
		e->samples += (int)b->count;
		stk_batch_release(l, b);
	}
	assert_int_equal(rc, 0);
	assert_int_equal(e->samples, NFILES);
	stk_loader_destroy(l);
}

static void test_same_bytes(void **state)
{
	(void)state;
	char *d = tu_mkdtemp();
	char p[PATH_MAX];
	uint8_t *jpg[NFILES];
	size_t len[NFILES];
	snprintf(p, sizeof(p), "%s/k0", d);
	tu_mkdir(p);
	for (int i = 0; i < NFILES; i++) {
		jpg[i] = picture(i, &len[i]);
		snprintf(p, sizeof(p), "%s/k0/%02d.jpg", d, i);
		tu_write(p, jpg[i], len[i]);
	}
	for (int crop = 0; crop < 2; crop++) {
		struct stk_image_opts img = {.size = sizeof(img), .width = 56, .height = 48,
					     .crop = crop ? STK_CROP_CENTER : STK_CROP_RANDOM_RESIZED,
					     .flags = crop ? STK_IMG_NO_FLIP : 0};
		size_t ib = stk_image_bytes(&img);
		struct epoch ref = {0};
		for (int run = 0; run < 4; run++) {
			stk__loader_costly_first = run & 1;
			img.decode_threads = run < 2 ? 1 : 2;
			struct epoch e;
			run_epoch(d, &img, 0, &e);
			if (!run) {
				ref = e;
				/* each image is its file's, decoded alone */
				uint8_t *one = malloc(ib);
				assert_non_null(one);
				for (int i = 0; i < NFILES; i++) {
					int64_t k = ref.indices[i];
					assert_true(k >= 0 && k < NFILES);
					char err[256];
					assert_int_equal(stk_image_decode(&img, jpg[k], len[k], 11, 0, k, one,
									  err, sizeof(err)), 0);
					if (memcmp(one, ref.images + (size_t)i * ib, ib))
						fail_msg("sample %d (file %lld) is not its file's image", i,
							 (long long)k);
				}
				free(one);
				continue;
			}
			assert_int_equal(e.batches, ref.batches);
			assert_memory_equal(e.counts, ref.counts, sizeof(e.counts));
			assert_memory_equal(e.indices, ref.indices, sizeof(e.indices));
			assert_memory_equal(e.labels, ref.labels, sizeof(e.labels));
			if (memcmp(e.images, ref.images, ib * NFILES))
				fail_msg("%s crop: the images differ with costly_first %d, %u decode "
					 "thread(s)", crop ? "centre" : "random", run & 1,
					 img.decode_threads);
			free(e.images);
		}
		free(ref.images);
	}
	stk__loader_costly_first = 1;
	for (int i = 0; i < NFILES; i++)
		free(jpg[i]);
	tu_rmrf(d);
	free(d);
}

/* One batch of every file in sample order, one decode thread: with the rule
 * the last file (the largest, progressive) is decoded among the first,
 * where FIFO takes it last. */
static void test_costliest_first(void **state)
{
	(void)state;
	char *d = tu_mkdtemp();
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/k0", d);
	tu_mkdir(p);
	struct stk_image_opts img = {.size = sizeof(img), .width = 56, .height = 48,
				     .crop = STK_CROP_CENTER, .decode_threads = 1};
	char err[256];
	assert_int_equal(stk__image_defaults(&img, err, sizeof(err)), 0);
	uint8_t *out = malloc(stk_image_bytes(&img));
	assert_non_null(out);
	int ref_w[NFILES], ref_h[NFILES];
	for (int i = 0; i < NFILES; i++) {
		size_t len;
		uint8_t *jpg = picture(i, &len);
		snprintf(p, sizeof(p), "%s/k0/%02d.jpg", d, i);
		tu_write(p, jpg, len);
		/* the region each file gives: unique, so it names the file */
		nseen = 0;
		stk__image_region_hook = see_region;
		assert_int_equal(stk__image_decode(&img, jpg, len, 1, out, err, sizeof(err), NULL), 0);
		stk__image_region_hook = NULL;
		assert_int_equal(nseen, 1);
		ref_w[i] = seen_w[0];
		ref_h[i] = seen_h[0];
		for (int j = 0; j < i; j++)
			assert_false(ref_w[j] == ref_w[i] && ref_h[j] == ref_h[i]);
		free(jpg);
	}
	free(out);
	struct stk_loader_opts o = {.size = sizeof(o), .path = d, .batch_size = NFILES,
				    .image = &img,
				    .flags = STK_F_QUIET | STK_F_NO_CACHE | STK_F_NO_SHUFFLE};
	struct stk_loader *l;
	char lerr[512];
	stk__loader_costly_first = 1;
	nseen = 0;
	stk__image_region_hook = see_region;
	assert_int_equal(stk_loader_create(&l, &o, lerr, sizeof(lerr)), 0);
	struct stk_batch *b;
	assert_int_equal(stk_loader_next(l, &b), 1);
	assert_int_equal(b->count, NFILES);
	for (uint32_t i = 0; i < b->count; i++)
		assert_int_equal(b->indices[i], i);
	stk_batch_release(l, b);
	stk_loader_destroy(l);
	stk__image_region_hook = NULL;
	assert_int_equal(nseen, NFILES);
	int at = -1;
	for (int k = 0; k < nseen; k++)
		if (seen_w[k] == ref_w[NFILES - 1] && seen_h[k] == ref_h[NFILES - 1])
			at = k;
	assert_true(at >= 0);
	/* the first picks may be made before the batch's reads have all landed */
	if (at >= NFILES / 2)
		fail_msg("the batch's costliest file was decoded %dth of %d", at + 1, NFILES);
	tu_rmrf(d);
	free(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cost),
		cmocka_unit_test(test_same_bytes),
		cmocka_unit_test(test_costliest_first),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
