/* test_url_list.c — lists of shard URLs, without a server: what makes a file
 * one (its first line that is not blank or a comment), the root the URLs
 * share and each shard's name under it, {A..B} lines expanded in order,
 * %XX decoded, and every refusal naming the list and the line.  Reading the
 * shards is tested against real servers (tests/python/test_remote_sources.py). */
#include "testutil.h"

#include "base/internal.h"
#include "dataset/build.h"


static const char *list(const char *name, const char *text)
{
	static char p[4200];
	snprintf(p, sizeof(p), "%s/%s", tu_dir, name);
	FILE *f = fopen(p, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	return p;
}

static void test_what_is_a_list(void **state)
{
	(void)state;
	assert_true(stk__url_list_is(list("a.txt", "# shards\n\n  s3://b/k/x.tar\n")));
	assert_true(stk__url_list_is(list("b.list", "https://h/x.tar\n")));
	/* a URL on any line makes it a list of URLs: a local path among them
	 * is an error naming its line, not a local list's first entry */
	const char *mixed = list("c.txt", "img/1.jpg\t3\nhttp://h/x.tar\n");
	assert_true(stk__url_list_is(mixed));
	struct stk__url_list l;
	char err[1024];
	assert_int_equal(stk__url_list_read(mixed, &l, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "c.txt:1: 'img/1.jpg"));
	assert_non_null(strstr(err, "is not a shard URL"));
	assert_false(stk__url_list_is(list("f.txt", "img/1.jpg\t3\nimg/2.jpg\t4\n")));
	assert_false(stk__url_list_is(list("d.txt", "# nothing but comments\n\n")));
	assert_false(stk__url_list_is(tu_dir)); /* a folder */
	assert_false(stk__url_list_is(list("e.tar", "http://h/x.tar\n"))); /* a shard */
	assert_false(stk__url_list_is("/no/such/list"));
}

static void test_root_names_and_order(void **state)
{
	(void)state;
	struct stk__url_list l;
	char err[2048];
	const char *p = list("ok.list", "# c\nhttp://h:8080/d/e/b.tar\n\n"
					"http://h:8080/d/x-{08..10}.tar  \n"
					"http://h:8080/d/e/my%20shard.tar\n");
	assert_int_equal(stk__url_list_read(p, &l, err, sizeof(err)), 0);
	assert_string_equal(l.root, "http://h:8080/d/");
	assert_int_equal(l.n, 5);
	const char *want[] = {"e/b.tar", "x-08.tar", "x-09.tar", "x-10.tar", "e/my shard.tar"};
	const unsigned lines[] = {2, 4, 4, 4, 5};
	for (size_t i = 0; i < 5; i++) {
		assert_string_equal(l.rels[i], want[i]);
		assert_int_equal(l.lines[i], lines[i]);
	}
	stk__url_list_free(&l);
	/* one shard: its folder is the root; a bucket's root is the bucket */
	assert_int_equal(stk__url_list_read(list("one.list", "s3://bkt/a/b/c.tar\n"), &l, err,
					    sizeof(err)), 0);
	assert_string_equal(l.root, "s3://bkt/a/b/");
	stk__url_list_free(&l);
	assert_int_equal(stk__url_list_read(list("two.list", "s3://bkt/a.tar\ns3://bkt/b/c.tar\n"),
					    &l, err, sizeof(err)), 0);
	assert_string_equal(l.root, "s3://bkt/");
	assert_string_equal(l.rels[1], "b/c.tar");
	stk__url_list_free(&l);
}

static void refused(const char *name, const char *text, const char *want1, const char *want2)
{
	struct stk__url_list l;
	char err[2048] = "";
	assert_true(stk__url_list_read(list(name, text), &l, err, sizeof(err)) < 0);
	assert_non_null(strstr(err, name));
	if (!strstr(err, want1) || (want2 && !strstr(err, want2)))
		fail_msg("%s: '%s' lacks '%s' / '%s'", name, err, want1, want2 ? want2 : "");
	assert_int_equal(l.n, 0);
}

static void test_refusals_name_the_line(void **state)
{
	(void)state;
	refused("local.list", "http://h/a.tar\n\n./b.tar\n", "local.list:3:", "not a shard URL");
	refused("hosts.list", "http://h/a.tar\nhttp://other/b.tar\n", "hosts.list:2:",
		"not on the server of the list's first URL (http://h/)");
	refused("scheme.list", "http://h/a.tar\nhttps://h/b.tar\n", "scheme.list:2:", NULL);
	refused("bucket.list", "s3://b1/a.tar\ns3://b2/a.tar\n", "bucket.list:2:", NULL);
	refused("query.list", "https://h/a.tar?X-Amz-Signature=1\n", "query.list:1:",
		"query string");
	refused("folder.list", "s3://bkt/tu_dir/\n", "folder.list:1:", "names a folder");
	refused("nobucket.list", "s3://bkt\n", "nobucket.list:1:", "not a shard URL");
	refused("brace.list", "\nhttp://h/x-{1..}.tar\n", "brace.list:2:", "{FIRST..LAST}");
	refused("empty.list", "# only\n", "names no shard", NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_what_is_a_list),
		cmocka_unit_test(test_root_names_and_order),
		cmocka_unit_test(test_refusals_name_the_line),
	};
	return cmocka_run_group_tests(tests, tu_dir_setup, tu_dir_teardown);
}
