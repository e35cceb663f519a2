/* test_units.c — the one reader of sizes and durations (stk_parse_size,
 * stk_parse_duration) and the option table's size and duration rows through
 * it: "64MiB" for slot_bytes, "1m" for remote_timeout, as the CLI and
 * Python hand them to stk_option_set.  Public API only. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "stoker/stoker.h"

static uint64_t size_of(const char *s)
{
	uint64_t v = 12345;
	assert_int_equal(stk_parse_size(s, &v), 0);
	return v;
}

static void test_sizes(void **state)
{
	(void)state;
	assert_true(size_of("4096") == 4096);
	assert_true(size_of("64k") == 65536);
	assert_true(size_of("64K") == 65536);
	assert_true(size_of("64KiB") == 65536);
	assert_true(size_of("64KB") == 64000);
	assert_true(size_of("64MiB") == 64ull << 20);
	assert_true(size_of("64M") == 64ull << 20);
	assert_true(size_of("64MB") == 64000000ull);
	assert_true(size_of("1.5GiB") == 3ull << 29);
	assert_true(size_of("2 G") == 2ull << 30);
	assert_true(size_of("1T") == 1ull << 40);
	assert_true(size_of("1TB") == 1000000000000ull);
	assert_true(size_of("512B") == 512);
	uint64_t v = 7;
	static const char *const bad[] = {"", "k", "-1", "-0", "64XiB", "1e400", "nan", "inf",
					  "64 MiB x", "64ms"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_true(stk_parse_size(bad[i], &v) < 0);
		assert_true(v == 7); /* untouched */
	}
	assert_int_equal(stk_parse_size("16EiB", &v), -EINVAL); /* no such unit */
	assert_int_equal(stk_parse_size("20000000T", &v), -ERANGE);
	assert_int_equal(stk_parse_size(NULL, &v), -EINVAL);
}

static uint64_t ns_of(const char *s, uint64_t unit)
{
	uint64_t v = 12345;
	assert_int_equal(stk_parse_duration(s, unit, &v), 0);
	return v;
}

static void test_durations(void **state)
{
	(void)state;
	const uint64_t S = 1000000000ull;
	assert_true(ns_of("30s", 1) == 30 * S);
	assert_true(ns_of("30", S) == 30 * S);  /* the CLI's bare seconds */
	assert_true(ns_of("30", 1) == 30);      /* the table's bare ns */
	assert_true(ns_of("20", 1000000) == 20000000);
	assert_true(ns_of("500ms", S) == S / 2);
	assert_true(ns_of("200us", 1) == 200000);
	assert_true(ns_of("200\xc2\xb5s", 1) == 200000);
	assert_true(ns_of("2m", 1) == 120 * S);
	assert_true(ns_of("1.5min", 1) == 90 * S);
	assert_true(ns_of("1h", 1) == 3600 * S);
	assert_true(ns_of("0.25", S) == S / 4);
	assert_true(ns_of("2 s", 1) == 2 * S);
	uint64_t v = 7;
	static const char *const bad[] = {"", "s", "-1s", "2x", "2sec", "2S", "1e30h", "nan"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_true(stk_parse_duration(bad[i], S, &v) < 0);
		assert_true(v == 7);
	}
	assert_int_equal(stk_parse_duration("1", 0, &v), -EINVAL);
}

/* The table's size rows take units; its plain counts do not. */
static void test_option_rows(void **state)
{
	(void)state;
	struct stk_loader_opts o;
	char err[256];
	memset(&o, 0, sizeof(o));
	assert_int_equal(stk_option_set(stk_option_find("slot_bytes"), &o, "64MiB", err,
					sizeof(err)), 0);
	assert_true(o.slot_bytes == 64ull << 20);
	assert_int_equal(stk_option_set(stk_option_find("read_bytes"), &o, "1KiB", err,
					sizeof(err)), 0);
	assert_true(o.read_bytes == 1024);
	assert_int_equal(stk_option_set(stk_option_find("cache_limit"), &o, "10GB", err,
					sizeof(err)), 0);
	assert_true(o.cache_limit == 10000000000ull);
	assert_int_equal(stk_option_set(stk_option_find("slot_bytes"), &o, "auto", err,
					sizeof(err)), 0);
	assert_true(o.slot_bytes == 0);
	assert_int_equal(stk_option_set(stk_option_find("slot_bytes"), &o, "2TiB", err,
					sizeof(err)), -ERANGE);
	assert_non_null(strstr(err, "slot_bytes"));
	assert_int_equal(stk_option_set(stk_option_find("slot_bytes"), &o, "64XiB", err,
					sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "is not a size"));
	/* a count is not a size: 64k batches is a typo, not 65536 */
	assert_true(stk_option_set(stk_option_find("batch_size"), &o, "64k", err, sizeof(err)) < 0);
	assert_int_equal(stk_option_set(stk_option_find("remote_timeout"), &o, "1m", err,
					sizeof(err)), 0);
	assert_true(o.remote_timeout_ns == 60000000000ull);
	char buf[32];
	assert_true(stk_option_get(stk_option_find("remote_timeout"), &o, buf, sizeof(buf)) > 0);
	assert_string_equal(buf, "60s");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sizes),
		cmocka_unit_test(test_durations),
		cmocka_unit_test(test_option_rows),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
