/* transcode.c — `stoker transcode SRC DST`: a copy of a folder dataset, same
 * layout, with every JPEG rewritten losslessly by stk_jpeg_transcode
 * (restart markers that tile the MCU rows, optimized Huffman tables), so
 * image mode decodes only the intervals a crop covers.  Any other file, and
 * a JPEG the library refuses (corrupt, truncated, unsupported), is copied
 * byte for byte and named in the summary with the reason; hidden entries
 * (.stoker-index, .git) are left out.  The tree is
 * walked first (directories made as met), then worker threads take the
 * files in order; each output is written to <name>.tmp and renamed, so a
 * file under its final name is always complete, and SIGINT, SIGTERM or
 * SIGHUP unlink the .tmp files being written before the process dies of the
 * signal: an interrupted run leaves only whole files.  transcode_file is shared
 * with `stoker pack --transcode`. */
#include "common/cli.h"
#include "common/outdir.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

int transcode_file(const char *path, uint64_t offset, uint64_t size, void **out, size_t *outlen,
		   char *why, size_t whylen)
{
	*out = NULL;
	*outlen = 0;
	why[0] = 0;
	/* O_NONBLOCK: a FIFO in a file's place opens at once, and is refused below */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		snprintf(why, whylen, "cannot open: %s", strerror(errno));
		return -1;
	}
	struct stat st;
	int bad = fstat(fd, &st) ? errno : 0;
	/* a whole file has the indexed size; a tar member lies within its shard */
	if (bad || !S_ISREG(st.st_mode) ||
	    (size && (offset ? (uint64_t)st.st_size < offset + size
			     : (uint64_t)st.st_size != size))) {
		snprintf(why, whylen, "%s", bad ? strerror(bad) : !S_ISREG(st.st_mode)
			 ? "not a regular file" : "the file changed since it was indexed");
		close(fd);
		return -1;
	}
	if (!size)
		size = (uint64_t)st.st_size;
	uint8_t *buf = malloc(size ? (size_t)size : 1);
	if (!buf) {
		close(fd);
		snprintf(why, whylen, "out of memory (%llu bytes)", (unsigned long long)size);
		return -1;
	}
	for (uint64_t got = 0; got < size;) {
		ssize_t r = pread(fd, buf + got, (size_t)(size - got), (off_t)(offset + got));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			snprintf(why, whylen, "cannot read: %s", r ? strerror(errno) : "file shrank");
			close(fd);
			free(buf);
			return -1;
		}
		got += (uint64_t)r;
	}
	close(fd);
	void *t;
	size_t tlen;
	char err[256];
	int e = stk_jpeg_transcode(buf, (size_t)size, &t, &tlen, err, sizeof(err));
	if (e) { /* kept as it was */
		snprintf(why, whylen, "%s", err);
		*out = buf;
		*outlen = (size_t)size;
		return 1;
	}
	free(buf);
	/* the library's buffer is freed with stk_free; hand back a malloc'ed copy */
	*out = malloc(tlen ? tlen : 1);
	if (!*out) {
		stk_free(t);
		snprintf(why, whylen, "out of memory (%zu bytes)", tlen);
		return -1;
	}
	memcpy(*out, t, tlen);
	stk_free(t);
	*outlen = tlen;
	return 0;
}

struct entry {
	char *rel;   /* path below SRC */
	uint64_t size;
	int state;   /* 0 to do, 1 transcoded, 2 kept (why), 3 failed (why) */
	uint64_t out;
	char *why;
};

struct tc {
	const char *src, *dst;
	size_t srclen;
	struct entry *e;
	size_t n, cap;
	atomic_size_t next, done;
	atomic_int failed;
	char walk_err[9000];
};

static struct tc *walking; /* nftw has no user pointer */

static int add_entry(struct tc *t, const char *rel, uint64_t size)
{
	if (t->n == t->cap) {
		size_t cap = t->cap ? 2 * t->cap : 1024;
		struct entry *e = realloc(t->e, cap * sizeof(*e));
		if (!e)
			return -1;
		t->e = e;
		t->cap = cap;
	}
	t->e[t->n] = (struct entry){.rel = strdup(rel), .size = size};
	return t->e[t->n++].rel ? 0 : -1;
}

/* nftw: stops at SRC's first file (a link counts), so an empty SRC fails
 * before DST is made. */
static int any_file(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)path, (void)st, (void)ftw;
	return type == FTW_D || type == FTW_DP ? FTW_CONTINUE : FTW_STOP;
}

static int walk_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	struct tc *t = walking;
	const char *rel = path + t->srclen;
	while (*rel == '/')
		rel++;
	/* hidden entries (the loader's .stoker-index, .git) are not the dataset's */
	if (ftw->level > 0 && path[ftw->base] == '.')
		return type == FTW_D ? FTW_SKIP_SUBTREE : FTW_CONTINUE;
	char out[4400];
	if (snprintf(out, sizeof(out), "%s/%s", t->dst, rel) >= (int)sizeof(out)) {
		snprintf(t->walk_err, sizeof(t->walk_err), "%s: path too long", path);
		return FTW_STOP;
	}
	if (type == FTW_D) {
		if (mkdir(out, 0755) && errno != EEXIST) {
			snprintf(t->walk_err, sizeof(t->walk_err), "cannot create %s: %s", out,
				 strerror(errno));
			return FTW_STOP;
		}
		return FTW_CONTINUE;
	}
	if (type == FTW_DNR || type == FTW_NS) {
		snprintf(t->walk_err, sizeof(t->walk_err), "cannot read %s", path);
		return FTW_STOP;
	}
	struct stat target;
	if (type == FTW_SL && (stat(path, &target) || !S_ISREG(target.st_mode)))
		return FTW_CONTINUE; /* a link to a folder or to nothing: not followed, not copied */
	if (type == FTW_SL)
		st = &target;
	if (!S_ISREG(st->st_mode))
		return FTW_CONTINUE;
	if (add_entry(t, rel, (uint64_t)st->st_size)) {
		snprintf(t->walk_err, sizeof(t->walk_err), "out of memory");
		return FTW_STOP;
	}
	return FTW_CONTINUE;
}

/* --replace: a link in SRC to a file in DST (which is about to be emptied)
 * stops the walk, its path in walk_err.  Links are the only way: SRC and DST
 * are apart, and links to folders are not followed. */
static char link_dst[PATH_MAX];

static int link_apart(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)st;
	char real[PATH_MAX];
	if (ftw->level > 0 && path[ftw->base] == '.')
		return type == FTW_D ? FTW_SKIP_SUBTREE : FTW_CONTINUE;
	if (type != FTW_SL || !realpath(path, real) || !outdir_within(real, link_dst))
		return FTW_CONTINUE;
	snprintf(walking->walk_err, sizeof(walking->walk_err), "SRC's %s links to %s in DST "
		 "%s: --replace would remove it; choose a folder apart from the data", path, real,
		 walking->dst);
	return FTW_STOP;
}

/* The .tmp file each worker is writing, for the signal handler: a name is
 * complete before its flag is set, and unlinking a name already renamed
 * away is harmless.  Allocated before the handler is installed. */
#define TMP_MAX_PATH 4500
static char (*tmp_names)[TMP_MAX_PATH];
static volatile sig_atomic_t *tmp_armed;
static int tmp_slots;

static void on_signal(int sig)
{
	for (int i = 0; i < tmp_slots; i++)
		if (tmp_armed[i])
			unlink(tmp_names[i]); /* async-signal-safe */
	signal(sig, SIG_DFL);
	raise(sig); /* dies of the signal, as the caller expects of Ctrl-C */
}

static int install_cleanup(int slots)
{
	tmp_names = calloc((size_t)slots, sizeof(*tmp_names));
	tmp_armed = calloc((size_t)slots, sizeof(*tmp_armed));
	if (!tmp_names || !tmp_armed)
		return -1;
	tmp_slots = slots;
	on_stop_signals(on_signal);
	return 0;
}

static int by_path(const void *a, const void *b)
{
	return strcmp(((const struct entry *)a)->rel, ((const struct entry *)b)->rel);
}

static int write_file(const char *path, const void *data, size_t len, int slot, char *why,
		      size_t whylen)
{
	char *tmp = tmp_names[slot];
	tmp_armed[slot] = 0;
	atomic_signal_fence(memory_order_seq_cst);
	snprintf(tmp, TMP_MAX_PATH, "%s.tmp", path);
	atomic_signal_fence(memory_order_seq_cst);
	tmp_armed[slot] = 1;
	int rc = -1, fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		snprintf(why, whylen, "cannot create %s: %s", tmp, strerror(errno));
		goto out;
	}
	const uint8_t *p = data;
	for (size_t done = 0; done < len;) {
		ssize_t w = write(fd, p + done, len - done);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			snprintf(why, whylen, "cannot write %s: %s", tmp, strerror(w ? errno : ENOSPC));
			close(fd);
			unlink(tmp);
			goto out;
		}
		done += (size_t)w;
	}
	if (close(fd) || rename(tmp, path)) {
		snprintf(why, whylen, "cannot write %s: %s", path, strerror(errno));
		unlink(tmp);
		goto out;
	}
	rc = 0;
out:
	tmp_armed[slot] = 0;
	atomic_signal_fence(memory_order_seq_cst);
	return rc;
}

struct worker {
	struct tc *t;
	int slot; /* its tmp_names entry */
};

static void *worker(void *arg)
{
	struct tc *t = ((struct worker *)arg)->t;
	int slot = ((struct worker *)arg)->slot;
	for (;;) {
		size_t i = atomic_fetch_add(&t->next, 1);
		if (i >= t->n || atomic_load(&t->failed))
			break;
		struct entry *e = &t->e[i];
		char in[4400], out[4400], why[9216];
		snprintf(in, sizeof(in), "%s/%s", t->src, e->rel);
		snprintf(out, sizeof(out), "%s/%s", t->dst, e->rel);
		void *data;
		size_t len;
		int rc = transcode_file(in, 0, 0, &data, &len, why, sizeof(why));
		if (rc >= 0 && write_file(out, data, len, slot, why, sizeof(why)))
			rc = -1;
		free(data);
		e->state = rc < 0 ? 3 : rc ? 2 : 1;
		e->out = rc < 0 ? 0 : len;
		if (rc)
			e->why = strdup(why);
		if (rc < 0)
			atomic_store(&t->failed, 1);
		atomic_fetch_add(&t->done, 1);
	}
	return NULL;
}

/* CPU seconds of the process so far (all threads). */
static double cpu_s(void)
{
	struct rusage ru;
	if (getrusage(RUSAGE_SELF, &ru))
		return 0;
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
	       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static int report(struct tc *t, int threads, double secs, double cpu, bool json)
{
	uint64_t in = 0, out = 0, tin = 0, tout = 0;
	size_t ok = 0, kept = 0;
	for (size_t i = 0; i < t->n; i++) {
		struct entry *e = &t->e[i];
		in += e->size;
		out += e->out;
		ok += e->state == 1;
		kept += e->state == 2;
		if (e->state == 1) {
			tin += e->size;
			tout += e->out;
		}
	}
	double rate = secs > 0 ? (double)t->n / secs : 0;
	if (json) {
		json_t *k = json_array();
		for (size_t i = 0; i < t->n; i++)
			if (t->e[i].state == 2)
				json_array_append_new(k, json_pack("{s:s,s:s}", "path", t->e[i].rel, "reason",
								   t->e[i].why ? t->e[i].why : ""));
		json_t *o = json_pack("{s:s,s:s,s:I,s:I,s:I,s:I,s:I,s:f,s:f,s:i,s:f,s:f,s:f,s:o}", "src",
				      t->src, "dst", t->dst, "files", (json_int_t)t->n, "transcoded",
				      (json_int_t)ok, "kept_count", (json_int_t)kept, "bytes_in",
				      (json_int_t)in, "bytes_out", (json_int_t)out, "seconds", secs,
				      "cpu_s", cpu, "threads", threads, "files_per_s_per_thread",
				      threads ? rate / threads : 0, "files_per_cpu_s",
				      cpu > 0 ? (double)t->n / cpu : 0, "transcoded_size_ratio",
				      tin ? (double)tout / (double)tin : 1.0, "kept", k);
		int bad = !o || json_dumpf(o, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(6));
		json_decref(o);
		if (bad || putchar('\n') == EOF)
			return EXIT_FAIL;
	} else {
		char a[32], b[32];
		printf("transcoded %zu of %zu files from %s to %s: %s -> %s (rewritten JPEGs at "
		       "%.1f %% of their size), %.1f s, %.0f files/s (%d threads; %.0f files per CPU "
		       "second)\n",
		       ok, t->n, t->src, t->dst, fmt_bytes(a, sizeof(a), (double)in),
		       fmt_bytes(b, sizeof(b), (double)out), tin ? 100.0 * (double)tout / (double)tin : 100.0,
		       secs, rate, threads, cpu > 0 ? (double)t->n / cpu : 0);
		if (kept)
			printf("kept as they were (%zu):\n", kept);
		for (size_t i = 0; i < t->n; i++)
			if (t->e[i].state == 2)
				printf("  %s: %s\n", t->e[i].rel, t->e[i].why ? t->e[i].why : "");
	}
	return fflush(stdout) ? EXIT_FAIL : EXIT_OK;
}

int cmd_transcode(int argc, char **argv)
{
	int64_t threads;
	bool json = false, force = false, replace = false;
	const struct opt opts[] = {
		OPT_GROUP("run"),
		{"threads", 'T', OPT_INT, &threads, "0", 0, 1024, NULL, "T",
		 "worker threads (0 = online CPUs)"},
		OPT_GROUP("output"),
		{"replace", 0, OPT_BOOL, &replace, NULL, 0, 0, NULL, NULL,
		 "DST is a folder with files in it: replace it whole (what it holds is removed "
		 "first; never a folder that is or holds SRC) [refused]"},
		{"force", 'f', OPT_BOOL, &force, NULL, 0, 0, NULL, NULL,
		 "refused: it wrote into a non-empty DST, old files beside new; see --replace"},
		{"json", 0, OPT_BOOL, &json, NULL, 0, 0, NULL, NULL, "print a JSON summary"},
		OPT_END,
	};
	const struct cmd_help help = {
		"transcode", "[options] SRC DST",
		"Copies the folder SRC to DST, same layout, with every JPEG rewritten losslessly\n"
		"(the same DCT coefficients, so the same pixels) with restart markers that tile\n"
		"its MCU rows and optimized Huffman tables: image mode (stoker bench --image, the\n"
		"loader) then decodes only the intervals each crop covers.  Progressive JPEGs\n"
		"become baseline.  Other files, and JPEGs that are corrupt or unsupported, are\n"
		"copied as they are and listed with the reason; hidden files and folders\n"
		"(.stoker-index, .git) are left out.  DST must be new or empty (--replace)\n"
		"and apart from SRC: neither inside it nor holding it.",
		"stoker transcode /data/train /data/train-rst      # every JPEG rewritten, same layout\n"
		"stoker transcode -T 8 --json /data/val /data/val-rst  # 8 threads, a JSON summary\n"
		"stoker transcode --replace /data/train /data/train-rst  # made again from scratch",
	};
	int first = opt_parse(&help, opts, argc, argv);
	if (first < 0)
		return -first;
	if (argc - first != 2) {
		fprintf(stderr, "stoker transcode: give SRC and DST\ntry 'stoker transcode --help'\n");
		return EXIT_USAGE;
	}
	if (force) {
		fprintf(stderr, "stoker transcode: --force is gone: writing into a non-empty DST "
			"mixed old files with new; --replace replaces DST whole\n");
		return EXIT_USAGE;
	}
	struct tc t = {.src = argv[first], .dst = argv[first + 1]};
	int oc = outdir_check("transcode", "SRC", t.src, "DST", t.dst, replace);
	if (oc)
		return oc;
	struct stat st;
	errno = 0;
	if (stat(t.src, &st) || !S_ISDIR(st.st_mode)) {
		fprintf(stderr, "stoker transcode: %s: %s\n", t.src,
			errno ? strerror(errno) : "not a folder");
		return EXIT_FAIL;
	}
	if (nftw(t.src, any_file, 32, FTW_PHYS | FTW_ACTIONRETVAL) != FTW_STOP) {
		fprintf(stderr, "stoker transcode: %s: the folder is empty: no file to transcode "
			"(DST not made)\n", t.src);
		return EXIT_FAIL;
	}
	if (replace && outdir_real(t.dst, link_dst) == 0) {
		walking = &t;
		int lr = nftw(t.src, link_apart, 32, FTW_PHYS | FTW_ACTIONRETVAL);
		walking = NULL;
		if (lr && t.walk_err[0]) {
			fprintf(stderr, "stoker transcode: %s\n", t.walk_err);
			return EXIT_USAGE;
		}
	}
	if (replace && outdir_clear("transcode", t.dst))
		return EXIT_FAIL;
	int e = mkdirs(t.dst, NULL, 0);
	if (e) {
		fprintf(stderr, "stoker transcode: cannot create %s: %s\n", t.dst, strerror(-e));
		return EXIT_FAIL;
	}
	t.srclen = strlen(t.src);
	walking = &t;
	int wr = nftw(t.src, walk_one, 32, FTW_PHYS | FTW_ACTIONRETVAL);
	walking = NULL;
	int rc = EXIT_FAIL;
	if (wr) {
		fprintf(stderr, "stoker transcode: %s\n", t.walk_err[0] ? t.walk_err : strerror(errno));
		goto out;
	}
	if (t.n)
		qsort(t.e, t.n, sizeof(*t.e), by_path); /* the summary in path order */
	if (!threads) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);
		threads = n > 0 ? n : 1;
	}
	if ((size_t)threads > t.n)
		threads = t.n ? (int64_t)t.n : 1;
	pthread_t *tid = calloc((size_t)threads, sizeof(*tid));
	struct worker *w = calloc((size_t)threads, sizeof(*w));
	if (!tid || !w || install_cleanup((int)threads)) {
		fprintf(stderr, "stoker transcode: out of memory\n");
		free(tid);
		free(w);
		goto out;
	}
	double t0 = now_s(), c0 = cpu_s();
	int started = 0;
	for (; started < threads; started++) {
		w[started] = (struct worker){&t, started};
		if (pthread_create(&tid[started], NULL, worker, &w[started]))
			break;
	}
	if (!started) {
		w[0] = (struct worker){&t, 0};
		worker(&w[0]);
	}
	while (progress_enabled() && atomic_load(&t.done) < t.n && !atomic_load(&t.failed)) {
		double s = now_s() - t0;
		progress("transcode %s: %zu/%zu files, %.0f files/s", t.src, atomic_load(&t.done), t.n,
			 s > 0 ? (double)atomic_load(&t.done) / s : 0.0);
		usleep(100000);
	}
	for (int i = 0; i < started; i++)
		pthread_join(tid[i], NULL);
	free(tid);
	free(w);
	progress_done();
	double secs = now_s() - t0;
	for (size_t i = 0; i < t.n; i++)
		if (t.e[i].state == 3) {
			fprintf(stderr, "stoker transcode: %s/%s: %s\n", t.src, t.e[i].rel, t.e[i].why);
			goto out;
		}
	rc = report(&t, (int)(started ? started : 1), secs, cpu_s() - c0, json);
out:
	for (size_t i = 0; i < t.n; i++) {
		free(t.e[i].rel);
		free(t.e[i].why);
	}
	free(t.e);
	return rc;
}
