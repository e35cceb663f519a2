/* test_fuzz.c — replays the fuzzers' corpora (tests/fuzz/image_corpus, index_corpus,
 * url_list_corpus,
 * png_corpus, webp_corpus) through
 * the same harnesses `make fuzz` runs under libFuzzer: the JPEG path with
 * random crop boxes, the index-cache loader, lists of shard URLs, in every `make test` with any C
 * compiler (and under ASan/UBSan in CI).  A harness aborts on a broken
 * contract; a crasher found by the fuzzer goes into its corpus once fixed. */
#include "testutil.h"


#define LLVMFuzzerTestOneInput fuzz_image_one
#include "fuzz/fuzz_image.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_index_one
#include "fuzz/fuzz_index.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_url_list_one
#include "fuzz/fuzz_url_list.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_png_one
#include "fuzz/fuzz_png.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_webp_one
#include "fuzz/fuzz_webp.c"
#undef LLVMFuzzerTestOneInput

/* Runs fn over every file of dir; the count of files. */
static int replay(const char *dir, int (*fn)(const uint8_t *, size_t))
{
	struct tu_target t = {fn};
	return tu_replay(dir, tu_target_one, &t);
}

static void test_image_corpus(void **state)
{
	(void)state;
	int n = replay("tests/fuzz/image_corpus", fuzz_image_one);
	if (n < 0)
		skip(); /* run from another folder than the repository's */
	assert_true(n >= 10);
}

static void test_index_corpus(void **state)
{
	(void)state;
	int n = replay("tests/fuzz/index_corpus", fuzz_index_one);
	if (n < 0)
		skip();
	assert_true(n >= 8);
}

static void test_url_list_corpus(void **state)
{
	(void)state;
	int n = replay("tests/fuzz/url_list_corpus", fuzz_url_list_one);
	if (n < 0)
		skip();
	assert_true(n >= 8);
}

static void test_png_corpus(void **state)
{
	(void)state;
	int n = replay("tests/fuzz/png_corpus", fuzz_png_one);
	if (n < 0)
		skip();
	assert_true(n >= 10);
}

static void test_webp_corpus(void **state)
{
	(void)state;
	int n = replay("tests/fuzz/webp_corpus", fuzz_webp_one);
	if (n < 0)
		skip();
	assert_true(n >= 10);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_image_corpus),
		cmocka_unit_test(test_index_corpus),
		cmocka_unit_test(test_url_list_corpus),
		cmocka_unit_test(test_png_corpus),
		cmocka_unit_test(test_webp_corpus),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
