/*
 * dataset/url_list.c — the names of remote shards: {A..B} brace patterns
 * and lists of shard URLs.
 *
 * A list of URLs is a text file whose lines (blank ones and # comments
 * aside) are shard URLs, s3://, http:// or https://, each naming one object
 * or a {A..B} pattern of them, as WebDataset's url lists do.  It is told
 * from a local file list (`path[<TAB>label]`, dataset/dataset.c) by its
 * lines: a URL on any of the first 10^4 that are not blank or comments
 * makes the whole file a list of URLs, and a line that is not one (a local
 * path first, too) is an error naming the list and the line.  The URLs
 * share one server (one bucket for s3://, one scheme, host and port for
 * HTTP), so that one set of credentials and one endpoint serve them; the
 * root is their longest common folder and each shard is named relative to
 * it, as a pattern's shards are.
 */
#include "dataset/build.h"
#include "io/remote.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int stk__expand_braces(const char *pat, char ***out, size_t *n, char *err, size_t errlen)
{
	size_t cap = *n;
	const char *lb = strchr(pat, '{'), *dots = lb ? strstr(lb, "..") : NULL,
		   *rb = dots ? strchr(dots, '}') : NULL;
	char one[1024];
	if (!lb)
		return stk__str_push(out, n, &cap, pat);
	char *end;
	unsigned long long a = strtoull(lb + 1, &end, 10), z;
	int width = (int)(dots ? dots - lb - 1 : 0);
	bool ok = dots && rb && end == dots && width > 0;
	if (ok) {
		z = strtoull(dots + 2, &end, 10);
		ok = end == rb && z >= a && z - a <= 10000000;
	}
	if (!ok) {
		snprintf(err, errlen, "%s: brace pattern wants {FIRST..LAST} numbers", pat);
		return -EINVAL;
	}
	for (unsigned long long i = a; i <= z; i++) {
		snprintf(one, sizeof(one), "%.*s%0*llu%s", (int)(lb - pat), pat, width, i, rb + 1);
		if (stk__str_push(out, n, &cap, one))
			return -ENOMEM;
	}
	return 0;
}

/* The line without its end of line and surrounding blanks; NULL for a blank
 * line or a comment. */
static char *clean(char *line)
{
	size_t len = strlen(line);
	while (len && strchr(" \t\r\n", line[len - 1]))
		line[--len] = 0;
	while (*line == ' ' || *line == '\t')
		line++;
	return *line && *line != '#' ? line : NULL;
}

bool stk__url_list_is(const char *path)
{
	struct stat st;
	if (!path || stat(path, &st) || !S_ISREG(st.st_mode) || stk__shards_is_tar(path))
		return false;
	FILE *f = fopen(path, "re");
	if (!f)
		return false;
	/* a URL on any of its first lines, not only the first: a local path
	 * among URLs is then an error naming its line, not a local list */
	char buf[4096];
	bool yes = false;
	for (int i = 0; i < 10000 && !yes && fgets(buf, sizeof(buf), f); i++) {
		const char *l = clean(buf);
		yes = l && stk__remote_is_url(l);
	}
	fclose(f);
	return yes;
}

/* The length of "s3://BUCKET/" or "SCHEME://HOST[:PORT]/" at the start of
 * url (0 when there is nothing after it). */
static size_t server_len(const char *url)
{
	const char *host = strstr(url, "://") + 3, *slash = strchr(host, '/');
	return slash && slash > host && slash[1] ? (size_t)(slash + 1 - url) : 0;
}

static int hexval(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
		: c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* %XX escapes decoded in place (the transport encodes names again); false
 * when one is %00, which would cut the name short. */
static bool decode(char *s)
{
	char *o = s;
	for (; *s; s++) {
		if (*s == '%' && hexval(s[1]) >= 0 && hexval(s[2]) >= 0) {
			*o = (char)(hexval(s[1]) * 16 + hexval(s[2]));
			if (!*o++)
				return false;
			s += 2;
		} else {
			*o++ = *s;
		}
	}
	*o = 0;
	return true;
}

int stk__url_list_read(const char *path, struct stk__url_list *out, char *err, size_t errlen)
{
	*out = (struct stk__url_list){0};
	FILE *f = fopen(path, "re");
	if (!f) {
		int e = errno;
		snprintf(err, errlen, "%s: cannot open the list of URLs: %s", path, strerror(e));
		return -e;
	}
	char *line = NULL, **urls = NULL;
	size_t cap = 0, n = 0, lcap = 0, first_n = 0;
	unsigned lineno = 0;
	int rc = 0;
	while (!rc && getline(&line, &cap, f) >= 0) {
		lineno++;
		char *u = clean(line);
		if (!u)
			continue;
		size_t sl = stk__remote_is_url(u) ? server_len(u) : 0;
		if (!sl) {
			snprintf(err, errlen, "%s:%u: '%.300s' is not a shard URL (a list of URLs has one "
				 "s3://BUCKET/KEY, http(s)://HOST/PATH or {A..B} pattern of them a "
				 "line; local shards are named by their folder or a pattern)",
				 path, lineno, u);
			rc = -EINVAL;
			break;
		}
		if (memchr(u, '{', sl)) {
			snprintf(err, errlen, "%s:%u: %.300s: a {A..B} pattern names objects, not "
				 "buckets or servers", path, lineno, u);
			rc = -EINVAL;
			break;
		}
		if (strchr(u, '?') || strchr(u, '#')) {
			snprintf(err, errlen, "%s:%u: %.300s: a query string or fragment is not sent "
				 "(name the object itself)", path, lineno, u);
			rc = -EINVAL;
			break;
		}
		if (n && (sl != first_n || strncmp(u, urls[0], sl))) {
			snprintf(err, errlen, "%s:%u: %.300s: not on the server of the list's first URL "
				 "(%.*s): one list reads from one bucket or one HTTP server",
				 path, lineno, u, (int)first_n, urls[0]);
			rc = -EINVAL;
			break;
		}
		size_t before = n;
		rc = stk__expand_braces(u, &urls, &n, err, errlen);
		if (rc == -EINVAL) {
			char why[1200];
			snprintf(why, sizeof(why), "%s", err);
			snprintf(err, errlen, "%s:%u: %s", path, lineno, why);
		}
		if (!before)
			first_n = sl;
		if (!rc && lcap < n) {
			unsigned *nl = realloc(out->lines, n * 2 * sizeof(*nl));
			if (!nl)
				rc = -ENOMEM;
			else
				out->lines = nl, lcap = n * 2;
		}
		for (size_t i = before; !rc && i < n; i++)
			out->lines[i] = lineno;
	}
	free(line);
	fclose(f);
	if (rc == -ENOMEM)
		snprintf(err, errlen, "out of memory");
	if (!rc && !n) {
		snprintf(err, errlen, "%s: the list of URLs names no shard", path);
		rc = STK_EEMPTY;
	}
	/* the root: the longest common folder, at least the server */
	size_t root = first_n;
	if (!rc) {
		root = strlen(urls[0]);
		for (size_t i = 1; i < n; i++) {
			size_t k = 0;
			while (k < root && urls[i][k] == urls[0][k])
				k++;
			root = k;
		}
		while (root > first_n && urls[0][root - 1] != '/')
			root--;
		if (root < first_n)
			root = first_n;
		snprintf(out->root, sizeof(out->root), "%.*s", (int)root, urls[0]);
	}
	for (size_t i = 0; !rc && i < n; i++) {
		size_t l = strlen(urls[i]);
		if (l == root || urls[i][l - 1] == '/') {
			snprintf(err, errlen, "%s:%u: %s names a folder, not a shard (list its shards, "
				 "or give the prefix itself as the dataset)", path, out->lines[i],
				 urls[i]);
			rc = -EINVAL;
			break;
		}
		memmove(urls[i], urls[i] + root, l - root + 1);
		if (!decode(urls[i])) {
			snprintf(err, errlen, "%s:%u: a shard's name holds %%00 (a NUL byte, which "
				 "no object name has)", path, out->lines[i]);
			rc = -EINVAL;
			break;
		}
	}
	if (rc) {
		for (size_t i = 0; i < n; i++)
			free(urls[i]);
		free(urls);
		free(out->lines);
		*out = (struct stk__url_list){0};
		return rc;
	}
	out->rels = urls;
	out->n = n;
	return 0;
}

void stk__url_list_free(struct stk__url_list *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->rels[i]);
	free(l->rels);
	free(l->lines);
	*l = (struct stk__url_list){0};
}
