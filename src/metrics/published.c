/*
 * metrics/published.c — what `stoker exporter` serves, collected by the
 * library: this machine's disks and GPUs (metrics/metrics.c) and the loaders
 * running here, which publish themselves as <pid>-<name>.prom files
 * (stk_loader_publish, metrics/serve.c, names by the rule below).
 *
 * The files are merged, not concatenated: every loader writes the same
 * families, and the text format allows one HELP/TYPE per family with all of
 * its samples together, so samples are regrouped under their family (in the
 * order families first appear, files in name order).  A file is taken whole
 * or not at all: one whose lines do not parse, or that claims a family the
 * exporter writes itself, is left out (Prometheus would otherwise drop the
 * whole scrape), and counted in stoker_exporter_invalid_files.  A file
 * whose process is gone is stale and ignored (never deleted: it may be
 * another user's); so is one whose pid now belongs to a process started
 * after the file was last written (its start time: sys/sys.c).  No state is
 * kept between calls.
 */
#include "base/internal.h"
#include "metrics/metrics_int.h"
#include "stoker/metrics.h"
#include "sys/sys_int.h"

#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_FILES 4096
#define MAX_FILE_BYTES (1 << 20)

/* ---- a growing string ------------------------------------------------------ */

struct sb {
	char *p;
	size_t len, cap;
	bool oom;
};

/* Room for `extra` more bytes and a NUL. */
static bool sb_reserve(struct sb *b, size_t extra)
{
	if (b->oom)
		return false;
	if (b->len + extra + 1 <= b->cap)
		return true;
	size_t cap = b->cap ? b->cap : 4096;
	while (cap < b->len + extra + 1)
		cap *= 2;
	char *p = realloc(b->p, cap);
	if (!p) {
		b->oom = true;
		return false;
	}
	b->p = p;
	b->cap = cap;
	return true;
}

static void sb_add(struct sb *b, const char *s, size_t n)
{
	if (!sb_reserve(b, n))
		return;
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = 0;
}

static void sb_printf(struct sb *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(struct sb *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n <= 0 || !sb_reserve(b, (size_t)n))
		return;
	va_start(ap, fmt);
	vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

/* Appends what a stk_*_metrics_text function renders (snprintf's contract). */
static int sb_render(struct sb *b, int (*fn)(void *, char *, size_t), void *arg)
{
	for (int tries = 0; tries < 4; tries++) {
		size_t room = b->cap - b->len; /* b->len < b->cap whenever cap != 0 */
		int n = fn(arg, b->cap ? b->p + b->len : NULL, b->cap ? room : 0);
		if (n < 0)
			return n;
		if (b->cap && (size_t)n < room) {
			b->len += (size_t)n;
			return 0;
		}
		/* too small: grow and render again (the text may grow in between) */
		if (!sb_reserve(b, (size_t)n + 4096))
			return -ENOMEM;
		b->p[b->len] = 0;
	}
	return -EAGAIN;
}

/* ---- families merged from the published files ---------------------------- */

struct fam {
	char *name;
	char *help; /* the whole "# HELP ..." line, from the first file that has one */
	char type[16];
	struct sb samples;
};

struct merge {
	struct fam *v;
	size_t n, cap;
	bool oom;
};

static void merge_free(struct merge *m)
{
	for (size_t i = 0; i < m->n; i++) {
		free(m->v[i].name);
		free(m->v[i].help);
		free(m->v[i].samples.p);
	}
	free(m->v);
	memset(m, 0, sizeof(*m));
}

static struct fam *fam_find(struct merge *m, const char *name, size_t len)
{
	for (size_t i = 0; i < m->n; i++)
		if (strlen(m->v[i].name) == len && !memcmp(m->v[i].name, name, len))
			return &m->v[i];
	return NULL;
}

static struct fam *fam_get(struct merge *m, const char *name, size_t len)
{
	struct fam *f = fam_find(m, name, len);
	if (f)
		return f;
	if (m->n == m->cap) {
		size_t cap = m->cap ? m->cap * 2 : 64;
		struct fam *v = realloc(m->v, cap * sizeof(*v));
		if (!v) {
			m->oom = true;
			return NULL;
		}
		m->v = v;
		m->cap = cap;
	}
	f = &m->v[m->n];
	memset(f, 0, sizeof(*f));
	if (!(f->name = strndup(name, len))) {
		m->oom = true;
		return NULL;
	}
	m->n++;
	return f;
}

static size_t metric_name_len(const char *s)
{
	size_t n = 0;
	if (!(isalpha((unsigned char)s[0]) || s[0] == '_' || s[0] == ':'))
		return 0;
	while (isalnum((unsigned char)s[n]) || s[n] == '_' || s[n] == ':')
		n++;
	return n;
}

/* A sample line: name, optional {labels}, a value, an optional timestamp.
 * Returns the name's length, 0 when the line is not one. */
static size_t sample_line(const char *s)
{
	size_t n = metric_name_len(s);
	if (!n)
		return 0;
	const char *p = s + n;
	if (*p == '{') {
		p++;
		while (*p != '}') {
			if (!(isalpha((unsigned char)*p) || *p == '_'))
				return 0;
			while (isalnum((unsigned char)*p) || *p == '_')
				p++;
			if (p[0] != '=' || p[1] != '"')
				return 0;
			for (p += 2; *p != '"'; p++) {
				if (!*p || *p == '\n')
					return 0;
				if (*p == '\\' && (p[1] == '\\' || p[1] == '"' || p[1] == 'n'))
					p++;
				else if (*p == '\\')
					return 0;
			}
			p++;
			if (*p == ',')
				p++;
			else if (*p != '}')
				return 0;
		}
		p++;
	}
	if (*p++ != ' ')
		return 0;
	char *end;
	if (!strncmp(p, "NaN", 3) || !strncmp(p, "+Inf", 4) || !strncmp(p, "-Inf", 4))
		end = (char *)p + (p[0] == 'N' ? 3 : 4);
	else if (strtod(p, &end), end == p)
		return 0;
	if (*end == ' ') { /* a timestamp: an integer in ms */
		p = end + 1;
		if (*p == '-')
			p++;
		if (!isdigit((unsigned char)*p))
			return 0;
		while (isdigit((unsigned char)*p))
			p++;
		end = (char *)p;
	}
	return *end ? 0 : n;
}

/* Families this exporter writes itself: a file may not bring its own. */
static bool reserved(const char *name)
{
	return !strncmp(name, "stoker_disk_", 12) || !strncmp(name, "stoker_gpu_", 11) ||
	       !strncmp(name, "stoker_exporter_", 16);
}

/* Whether a sample named name[0..n) belongs to the family declared last
 * (fam, of type `type`): its own name or, for a histogram or summary, one
 * of its series. */
static bool of_family(const char *name, size_t n, const char *fam, const char *type)
{
	size_t fl = strlen(fam);
	if (!fl || n < fl || memcmp(name, fam, fl))
		return false;
	const char *suf = name + fl;
	size_t sl = n - fl;
	if (!sl)
		return true;
	bool hs = !strcmp(type, "histogram") || !strcmp(type, "summary");
	return hs && ((sl == 7 && !memcmp(suf, "_bucket", 7)) || (sl == 4 && !memcmp(suf, "_sum", 4)) ||
		      (sl == 6 && !memcmp(suf, "_count", 6)));
}

/* Checks (commit false) or merges (commit true) one file's text.  Checking
 * first means a bad line late in a file leaves nothing of it behind. */
static int merge_text(struct merge *m, char *text, bool commit)
{
	char cur[256] = "", curtype[16] = ""; /* the family declared last */
	for (char *line = text, *next; line && *line; line = next) {
		next = strchr(line, '\n');
		size_t ll = next ? (size_t)(next - line) : strlen(line);
		if (next)
			*next++ = 0;
		if (!ll)
			continue;
		if (line[0] == '#') {
			bool help = !strncmp(line, "# HELP ", 7), type = !strncmp(line, "# TYPE ", 7);
			if (!help && !type)
				continue; /* a plain comment */
			const char *name = line + 7;
			size_t n = metric_name_len(name);
			if (!n || n >= sizeof(cur) || (name[n] != ' ' && name[n]))
				return -1;
			if (strlen(cur) != n || memcmp(cur, name, n)) {
				memcpy(cur, name, n);
				cur[n] = 0;
				curtype[0] = 0;
			}
			if (reserved(cur))
				return -1;
			struct fam *f = fam_find(m, name, n);
			if (type) {
				const char *t = name[n] ? name + n + 1 : "";
				if (strcmp(t, "counter") && strcmp(t, "gauge") && strcmp(t, "histogram") &&
				    strcmp(t, "summary") && strcmp(t, "untyped"))
					return -1;
				if (f && f->type[0] && strcmp(f->type, t))
					return -1; /* another file says otherwise */
				snprintf(curtype, sizeof(curtype), "%s", t);
			}
			if (commit) {
				if (!(f = fam_get(m, name, n)))
					return -ENOMEM;
				if (type && !f->type[0])
					snprintf(f->type, sizeof(f->type), "%s", curtype);
				if (help && !f->help && !(f->help = strdup(line)))
					return -ENOMEM;
			}
			continue;
		}
		size_t n = sample_line(line);
		if (!n || n >= sizeof(cur))
			return -1;
		const char *fname = line;
		size_t fl = n;
		if (of_family(line, n, cur, curtype)) {
			fname = cur;
			fl = strlen(cur);
		} else {
			char own[sizeof(cur)];
			memcpy(own, line, n);
			own[n] = 0;
			if (reserved(own))
				return -1;
		}
		if (commit) {
			struct fam *f = fam_get(m, fname, fl);
			if (!f)
				return -ENOMEM;
			sb_add(&f->samples, line, ll);
			sb_add(&f->samples, "\n", 1);
			if (f->samples.oom)
				return -ENOMEM;
		}
	}
	return 0;
}

/* ---- the published files -------------------------------------------------- */

static bool alive(long pid, time_t written)
{
	if (pid <= 0 || pid > INT_MAX)
		return false;
	if (kill((pid_t)pid, 0) && errno != EPERM) /* EPERM: alive, another user's */
		return false;
	double start = stk__sys_process_start("", pid);
	/* a reused pid: this process started after the file was last written
	 * (btime has a one-second grain: allow two) */
	return !(start > 0 && start > (double)written + 2);
}

/* ---- where the files go, and their names ---------------------------------- */

#define RUN_DIR "/run/stoker"

/* mkdir -p, in place (buf is restored). */
static int mkdir_p(char *buf)
{
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		int bad = mkdir(buf, 0755) && errno != EEXIST;
		int e = errno;
		*p = '/';
		if (bad)
			return -e;
	}
	return mkdir(buf, 0755) && errno != EEXIST ? -errno : 0;
}

int stk_metrics_dir(char *buf, size_t len)
{
	if (!buf || !len)
		return -EINVAL;
	const char *env = getenv("STOKER_METRICS_DIR");
	int n, rc;
	if (env && *env) {
		n = snprintf(buf, len, "%s", env);
		if (n < 0 || (size_t)n >= len)
			return -ENAMETOOLONG;
		return (rc = mkdir_p(buf)) < 0 ? rc : n;
	}
	/* One folder every user's loaders can share, as /tmp is shared: only
	 * root can create it under /run, and it is made sticky so nobody
	 * replaces another's file. */
	if (access(RUN_DIR, W_OK | X_OK) && mkdir(RUN_DIR, 0755) == 0)
		chmod(RUN_DIR, 01777);
	if (!access(RUN_DIR, W_OK | X_OK)) {
		n = snprintf(buf, len, "%s", RUN_DIR);
		return (size_t)n >= len ? -ENAMETOOLONG : n;
	}
	if ((rc = stk_cache_dir(buf, len)) < 0)
		return rc;
	n = snprintf(buf + rc, len - (size_t)rc, "/metrics");
	if (n < 0 || (size_t)(rc + n) >= len)
		return -ENAMETOOLONG;
	return (rc = mkdir_p(buf)) < 0 ? rc : (int)strlen(buf);
}

int stk__published_name_ok(const char *s, size_t n)
{
	if (!n || n > STK__PUBLISHED_NAME_MAX || s[0] == '.')
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!(isalnum((unsigned char)s[i]) || s[i] == '.' || s[i] == '_' || s[i] == '-'))
			return 0;
	return 1;
}

long stk__published_pid(const char *fn)
{
	char *end;
	if (!isdigit((unsigned char)fn[0]))
		return -1;
	errno = 0;
	long pid = strtol(fn, &end, 10);
	if (errno || *end != '-')
		return -1;
	const char *name = end + 1, *dot = strrchr(name, '.');
	if (!dot || strcmp(dot, ".prom") || !stk__published_name_ok(name, (size_t)(dot - name)))
		return -1;
	return pid;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Reads a live publisher's file whole (bounded), or NULL. */
static char *read_published(int dfd, const char *fn, long pid)
{
	int fd = openat(dfd, fn, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	struct stat st;
	char *text = NULL;
	if (!fstat(fd, &st) && S_ISREG(st.st_mode) && st.st_size <= MAX_FILE_BYTES &&
	    alive(pid, st.st_mtime) && (text = malloc((size_t)st.st_size + 1))) {
		size_t got = 0;
		ssize_t r;
		while (got < (size_t)st.st_size &&
		       (r = read(fd, text + got, (size_t)st.st_size - got)) > 0)
			got += (size_t)r;
		text[got] = 0;
	}
	close(fd);
	return text;
}

struct exporter {
	const char *root, *dir;
	int loaders, invalid; /* of the last scan */
};

/* Merges the live files of e->dir into out. */
static int scan(struct exporter *e, struct sb *out)
{
	e->loaders = e->invalid = 0;
	DIR *d = opendir(e->dir);
	if (!d)
		return 0; /* no folder yet: no loader has published */
	char **names = NULL;
	size_t n = 0, cap = 0;
	int rc = 0;
	for (struct dirent *de; n < MAX_FILES && (de = readdir(d));) {
		if (stk__published_pid(de->d_name) < 0)
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 64;
			char **v = realloc(names, cap * sizeof(*v));
			if (!v) {
				rc = -ENOMEM;
				break;
			}
			names = v;
		}
		if (!(names[n] = strdup(de->d_name))) {
			rc = -ENOMEM;
			break;
		}
		n++;
	}
	if (n)
		qsort(names, n, sizeof(*names), cmp_str);
	struct merge m = {0};
	for (size_t i = 0; !rc && i < n; i++) {
		char *text = read_published(dirfd(d), names[i], stk__published_pid(names[i]));
		if (!text)
			continue;
		char *copy = strdup(text);
		if (!copy) {
			free(text);
			rc = -ENOMEM;
			break;
		}
		if (merge_text(&m, copy, false) == 0) {
			rc = merge_text(&m, text, true);
			e->loaders++;
		} else {
			e->invalid++;
		}
		free(copy);
		free(text);
	}
	if (!rc && m.oom)
		rc = -ENOMEM;
	for (size_t i = 0; !rc && i < m.n; i++) {
		struct fam *f = &m.v[i];
		if (f->help) {
			sb_add(out, f->help, strlen(f->help));
			sb_add(out, "\n", 1);
		}
		if (f->type[0])
			sb_printf(out, "# TYPE %s %s\n", f->name, f->type);
		if (f->samples.len)
			sb_add(out, f->samples.p, f->samples.len);
	}
	merge_free(&m);
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	closedir(d);
	return rc;
}

static int disk_fn(void *arg, char *buf, size_t len)
{
	return stk_disk_metrics_text(((struct exporter *)arg)->root, buf, len);
}

static int gpu_fn(void *arg, char *buf, size_t len)
{
	(void)arg;
	return stk_gpu_metrics_text(buf, len);
}

/* The whole exposition into out; -errno when the disks cannot be read. */
static int exposition(struct exporter *e, struct sb *out)
{
	out->len = 0;
	int rc;
	if ((rc = sb_render(out, disk_fn, e)) < 0 || (rc = sb_render(out, gpu_fn, e)) < 0 ||
	    (rc = scan(e, out)) < 0)
		return rc;
	sb_printf(out,
		  "# HELP stoker_exporter_loaders Published loaders merged into this scrape.\n"
		  "# TYPE stoker_exporter_loaders gauge\nstoker_exporter_loaders %d\n"
		  "# HELP stoker_exporter_invalid_files Published files left out: they do not parse.\n"
		  "# TYPE stoker_exporter_invalid_files gauge\nstoker_exporter_invalid_files %d\n",
		  e->loaders, e->invalid);
	return out->oom ? -ENOMEM : 0;
}

int stk_machine_metrics_text(const char *root, const char *dir, char *buf, size_t len)
{
	char dbuf[PATH_MAX];
	if (!dir) {
		int rc = stk_metrics_dir(dbuf, sizeof(dbuf));
		if (rc < 0)
			return rc;
		dir = dbuf;
	}
	struct exporter e = {.root = root ? root : "", .dir = dir};
	struct sb out = {0};
	int rc = exposition(&e, &out);
	if (rc >= 0 && len) {
		size_t k = out.len < len - 1 ? out.len : len - 1;
		memcpy(buf, out.p ? out.p : "", k);
		buf[k] = 0;
	}
	if (rc >= 0)
		rc = out.len > INT_MAX ? -EOVERFLOW : (int)out.len;
	free(out.p);
	return rc;
}
