/* test_fmt.c — the one formatter every front end prints figures with:
 * three significant digits in decimal units for measured sizes and rates,
 * exact binary units for typed sizes, durations in the unit that reads. */
#include "testutil.h"

#include "stoker/stoker.h"

static void test_sizes_and_rates(void **state)
{
	(void)state;
	char b[32];
	assert_string_equal(stk_fmt_bytes(b, sizeof(b), 512), "512 B");
	assert_string_equal(stk_fmt_bytes(b, sizeof(b), 1320000), "1.32 MB");
	assert_string_equal(stk_fmt_bytes(b, sizeof(b), 66.7e6), "66.7 MB");
	assert_string_equal(stk_fmt_bytes(b, sizeof(b), 360.59e6), "361 MB");
	assert_string_equal(stk_fmt_bytes(b, sizeof(b), 999.7e6), "1.00 GB"); /* not "1000 MB" */
	assert_string_equal(stk_fmt_rate(b, sizeof(b), 1.29e9), "1.29 GB/s"); /* not 1.29e+03 MB/s */
	assert_string_equal(stk_fmt_rate(b, sizeof(b), 693e6), "693 MB/s");
	assert_string_equal(stk_fmt_ibytes(b, sizeof(b), 4096), "4 KiB");
	assert_string_equal(stk_fmt_ibytes(b, sizeof(b), 1099511627776.0), "1 TiB");
	assert_string_equal(stk_fmt_ibytes(b, sizeof(b), 1.5 * 1048576), "1.50 MiB");
	assert_string_equal(stk_fmt_ibytes(b, sizeof(b), 512), "512 B");
	/* a short buffer: cut, terminated */
	assert_string_equal(stk_fmt_bytes(b, 4, 66.7e6), "66.");
}

static void test_durations(void **state)
{
	(void)state;
	char b[32];
	assert_string_equal(stk_fmt_ns(b, sizeof(b), 850), "850 ns");
	assert_string_equal(stk_fmt_ns(b, sizeof(b), 170200), "170.2 us");
	assert_string_equal(stk_fmt_ns(b, sizeof(b), 999999), "1.00 ms"); /* not "1000.0 us" */
	assert_string_equal(stk_fmt_ns(b, sizeof(b), 2.79e6), "2.79 ms");
	assert_string_equal(stk_fmt_ns(b, sizeof(b), 1.5e9), "1.50 s");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sizes_and_rates),
		cmocka_unit_test(test_durations),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
