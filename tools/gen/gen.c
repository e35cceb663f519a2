/* gen/gen.c — `stoker gen DIR`: a synthetic ImageNet-like folder of real JPEGs
 * (DIR/c0000/00000000.jpg ...), PNGs or WebPs (--format) for benchmarks and tests.
 *
 * The pictures are made in gen/image.c; image i depends only on (seed, i),
 * so the bytes do not depend on the thread count.  Threads take image numbers from an atomic counter; each file is written as
 * NAME.tmp and renamed, so no half-written JPEG is left under its name. */
#include "common/cli.h"
#include "common/outdir.h"
#include "gen/gen.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

struct gen {
	const char *dir;
	uint64_t seed;
	int64_t images, classes;
	int quality, cwidth, fwidth; /* digits in class and file names */
	int format;                  /* enum gen_format, or FORMAT_MIXED */
	atomic_int_fast64_t next, done;
	atomic_uint_fast64_t bytes;
	atomic_int finished; /* worker threads that have returned */
	pthread_mutex_t lock;
	char err[512]; /* the first failure; guarded by lock */
};

/* Set by SIGINT/SIGTERM or a failure: workers finish the image in hand and
 * stop.  A lock-free atomic, so both a handler and threads may set it. */
static atomic_int stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static void fail(struct gen *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(struct gen *g, const char *fmt, ...)
{
	pthread_mutex_lock(&g->lock);
	if (!g->err[0]) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(g->err, sizeof(g->err), fmt, ap);
		va_end(ap);
	}
	pthread_mutex_unlock(&g->lock);
	stop = 1;
}

static void class_dir(const struct gen *g, int64_t c, char *buf, size_t len)
{
	snprintf(buf, len, "%s/c%0*lld", g->dir, g->cwidth, (long long)c);
}

/* --format mixed: JPEG, PNG and WebP in turn within each class (image i of
 * class i % classes is the (i / classes)th there) */
#define FORMAT_MIXED 3
static const char *const exts[] = {"jpg", "png", "webp"};

static enum gen_format format_of(const struct gen *g, int64_t i)
{
	return g->format == FORMAT_MIXED ? (enum gen_format)((i % g->classes + i / g->classes) % 3)
					 : (enum gen_format)g->format;
}

/* Writes len bytes to dir/name.<ext> through dir/name.tmp.  0, or fills g->err. */
static int write_image(struct gen *g, int64_t i, const unsigned char *buf, size_t len)
{
	char dir[4096], tmp[4200], path[4200];
	class_dir(g, i % g->classes, dir, sizeof(dir));
	snprintf(tmp, sizeof(tmp), "%s/%0*lld.tmp", dir, g->fwidth, (long long)i);
	int n = snprintf(path, sizeof(path), "%s/%0*lld.%s", dir, g->fwidth, (long long)i,
			 exts[format_of(g, i)]);
	if (n < 0 || (size_t)n >= sizeof(path)) {
		fail(g, "%s: path too long", dir);
		return -1;
	}
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		fail(g, "cannot create %s: %s", tmp, strerror(errno));
		return -1;
	}
	const char *what = "write";
	int e = 0;
	for (size_t off = 0; off < len;) {
		ssize_t w = write(fd, buf + off, len - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			e = w < 0 ? errno : EIO;
			break;
		}
		off += (size_t)w;
	}
	/* close() can be the first to report ENOSPC or EIO (NFS, quotas). */
	if (close(fd) && !e) {
		e = errno;
		what = "close";
	}
	if (!e && rename(tmp, path)) {
		e = errno;
		what = "rename";
	}
	if (e) {
		unlink(tmp);
		fail(g, "cannot %s %s: %s", what, !strcmp(what, "rename") ? path : tmp, strerror(e));
		return -1;
	}
	return 0;
}

static void *worker(void *arg)
{
	struct gen *g = arg;
	struct gen_scratch *sc = gen_scratch_new();
	if (!sc)
		fail(g, "out of memory");
	while (sc && !stop) {
		int64_t i = atomic_fetch_add(&g->next, 1);
		if (i >= g->images)
			break;
		const unsigned char *jpg;
		size_t len;
		if (gen_render(g->seed, i, format_of(g, i), g->quality, sc, &jpg, &len)) {
			fail(g, "out of memory encoding image %lld", (long long)i);
			break;
		}
		if (write_image(g, i, jpg, len))
			break;
		atomic_fetch_add(&g->bytes, len);
		atomic_fetch_add(&g->done, 1);
	}
	gen_scratch_free(sc);
	atomic_fetch_add(&g->finished, 1);
	return NULL;
}

/* opt_parse stops at the first operand (getopt's "+"), yet the usage reads
 * `stoker gen DIR --images N`: put the options first, each with its argument,
 * then "--" and the operands.  out has room for argc + 2; returns its count. */
static char sep[] = "--";

static int options_first(const struct opt *opts, int argc, char **argv, char **out)
{
	int k = 1;
	out[0] = argv[0];
	for (int pass = 0; pass < 2; pass++) {
		if (pass == 1)
			out[k++] = sep;
		for (int a = 1; a < argc; a++) {
			const char *s = argv[a];
			if (!strcmp(s, "--")) {
				for (a++; pass == 1 && a < argc; a++)
					out[k++] = argv[a];
				break;
			}
			if (s[0] != '-' || !s[1]) {
				if (pass == 1)
					out[k++] = argv[a];
				continue;
			}
			/* Does it take the next word?  Long names may be abbreviated. */
			bool takes = false;
			size_t l = strlen(s + 2);
			for (const struct opt *o = opts; o->name; o++)
				if (o->type != OPT_BOOL && o->type != OPT_SECTION &&
				    (s[1] == '-' ? !strncmp(s + 2, o->name, l) && !strchr(s, '=')
						 : (o->short_name == s[1] || kept_short("gen", o) == s[1]) &&
						       !s[2]))
					takes = true;
			if (pass == 0)
				out[k++] = argv[a];
			if (takes && a + 1 < argc && pass == 0)
				out[k++] = argv[a + 1];
			a += takes && a + 1 < argc;
		}
	}
	out[k] = NULL;
	return k;
}

static int run(struct gen *g, int nthreads, bool json)
{
	char buf[4200];
	for (int64_t c = 0; c < g->classes; c++) {
		class_dir(g, c, buf, sizeof(buf));
		if (mkdir(buf, 0755) && errno != EEXIST) {
			fprintf(stderr, "stoker gen: cannot create %s: %s\n", buf, strerror(errno));
			return EXIT_FAIL;
		}
	}

	/* Stop cleanly on ^C: in-flight images are finished and renamed, so no
	 * .tmp is left behind.  A second ^C kills at once. */
	struct sigaction sa = {.sa_handler = on_signal, .sa_flags = SA_RESETHAND};
	struct sigaction old_int, old_term;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, &old_int);
	sigaction(SIGTERM, &sa, &old_term);

	pthread_t *tids = calloc((size_t)nthreads, sizeof(*tids));
	if (!tids) {
		fprintf(stderr, "stoker gen: out of memory\n");
		return EXIT_FAIL;
	}
	double t0 = now_s(), cpu0 = process_cpu_s();
	int started = 0;
	for (; started < nthreads; started++) {
		int e = pthread_create(&tids[started], NULL, worker, g);
		if (e) {
			fail(g, "cannot start a thread: %s", strerror(e));
			break;
		}
	}
	char mb[32];
	const struct timespec tick = {0, 100 * 1000 * 1000};
	while (atomic_load(&g->finished) < started) {
		nanosleep(&tick, NULL);
		double dt = now_s() - t0;
		int64_t done = atomic_load(&g->done);
		progress("gen %s: %lld/%lld images, %s, %.0f images/s", g->dir, (long long)done,
			 (long long)g->images, fmt_bytes(mb, sizeof(mb), (double)atomic_load(&g->bytes)),
			 dt > 0 ? (double)done / dt : 0.0);
	}
	for (int t = 0; t < started; t++)
		pthread_join(tids[t], NULL);
	free(tids);
	double secs = now_s() - t0, cpu = process_cpu_s() - cpu0;
	progress_done();
	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGTERM, &old_term, NULL);

	int64_t done = atomic_load(&g->done);
	uint64_t bytes = atomic_load(&g->bytes);
	if (g->err[0]) {
		fprintf(stderr, "stoker gen: %s\n", g->err);
		return EXIT_FAIL;
	}
	if (done < g->images) {
		fprintf(stderr, "stoker gen: interrupted after %lld of %lld images in %s\n",
			(long long)done, (long long)g->images, g->dir);
		return EXIT_FAIL;
	}
	double mean = (double)bytes / (double)done;
	if (json) {
		static const char *const names[] = {"jpeg", "png", "webp", "mixed"};
		json_t *o = json_pack("{s:s, s:s, s:I, s:I, s:I, s:i, s:I, s:f, s:f, s:f, s:i, s:f, s:f}",
				      "dir", g->dir, "format", names[g->format], "images",
				      (json_int_t)done, "classes",
				      (json_int_t)g->classes, "seed", (json_int_t)g->seed,
				      "quality", g->quality, "bytes", (json_int_t)bytes,
				      "seconds", secs, "mean_bytes", mean, "images_per_s",
				      secs > 0 ? (double)done / secs : 0.0, "threads", nthreads,
				      "cpu_s", cpu, "images_per_cpu_s", cpu > 0 ? (double)done / cpu : 0.0);
		int bad = !o || json_dumpf(o, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(6));
		json_decref(o);
		if (bad || putchar('\n') == EOF)
			return EXIT_FAIL;
	} else {
		char mn[32];
		printf("wrote %lld images in %lld classes to %s: %s, mean %s, %.1f s (%.0f images/s, "
		       "%.0f per CPU second)\n",
		       (long long)done, (long long)g->classes, g->dir,
		       fmt_bytes(mb, sizeof(mb), (double)bytes), fmt_bytes(mn, sizeof(mn), mean),
		       secs, secs > 0 ? (double)done / secs : 0.0, cpu > 0 ? (double)done / cpu : 0.0);
	}
	return fflush(stdout) ? EXIT_FAIL : EXIT_OK;
}

int gen_dataset(const struct gen_params *p, bool json)
{
	if (p->classes < 1 || p->classes > p->images) {
		fprintf(stderr, "stoker gen: --classes must be 1..--images\n");
		return EXIT_USAGE;
	}
	int nthreads = p->threads;
	if (!nthreads) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);
		nthreads = n > 0 ? (int)n : 1;
	}
	if (nthreads > p->images)
		nthreads = (int)p->images;

	int oc = outdir_check("gen", NULL, NULL, "DIR", p->dir, p->replace);
	if (oc)
		return oc;
	if (p->replace && outdir_clear("gen", p->dir))
		return EXIT_FAIL;
	char failed[4096];
	int e = mkdirs(p->dir, failed, sizeof(failed));
	if (e) {
		fprintf(stderr, "stoker gen: cannot create %s: %s\n", e == -ENAMETOOLONG ? p->dir : failed,
			strerror(-e));
		return EXIT_FAIL;
	}

	/* Names at least c0000 and 00000000, wider when needed so that sorted
	 * names stay in number order. */
	int cw = snprintf(NULL, 0, "%lld", (long long)p->classes - 1);
	int fw = snprintf(NULL, 0, "%lld", (long long)p->images - 1);
	struct gen g = {
		.dir = p->dir,
		.seed = p->seed,
		.images = p->images,
		.classes = p->classes,
		.quality = p->quality,
		.format = p->format,
		.cwidth = cw < 4 ? 4 : cw,
		.fwidth = fw < 8 ? 8 : fw,
	};
	pthread_mutex_init(&g.lock, NULL);
	stop = 0;
	int rc = run(&g, nthreads, json);
	pthread_mutex_destroy(&g.lock);
	return rc;
}

int cmd_gen(int argc, char **argv)
{
	int64_t images, classes, seed, threads, quality;
	int format = 0;
	bool force = false, replace = false, json = false, video = false;
	int64_t count, gop;
	double min_s, max_s;
	const char *sizes = NULL, *rates = NULL;
	const struct opt opts[] = {
		OPT_GROUP("dataset"),
		{"images", 'n', OPT_INT, &images, "10000", 1, 1e9, NULL, "N", "number of images"},
		{"classes", 'c', OPT_INT, &classes, "100", 1, 1e6, NULL, "K",
		 "class folders c0000..., images dealt round-robin (K <= N)"},
		OPT_SEED('s', &seed, "0", "image i depends only on (seed, i)"),
		OPT_GROUP("run"),
		{"threads", 'T', OPT_INT, &threads, "0", 0, 256, NULL, "T",
		 "encoder threads (0 = online CPUs)"},
		OPT_GROUP("dataset"),
		{"quality", 0, OPT_INT, &quality, "90", 1, 100, NULL, "Q", "JPEG and WebP quality"},
		{"format", 0, OPT_CHOICE, &format, "jpeg", 0, 0, "jpeg,png,webp,mixed", "F",
		 "file format (PNG: 8-bit RGB; WebP: lossy; mixed: the three in turn in each "
		 "class)"},
		OPT_GROUP("video"),
		{"video", 0, OPT_BOOL, &video, NULL, 0, 0, NULL, NULL,
		 "H.264 MP4s instead of pictures: DIR/<class>/<n>.mp4, each frame's index drawn "
		 "in its centre (needs FFmpeg's libraries)"},
		{"count", 0, OPT_INT, &count, "200", 1, 1e7, NULL, "N", "--video: number of videos"},
		{"min-seconds", 0, OPT_DOUBLE, &min_s, "5", 0.04, 600, NULL, "S",
		 "--video: shortest length"},
		{"max-seconds", 0, OPT_DOUBLE, &max_s, "20", 0.04, 600, NULL, "S",
		 "--video: longest length (each video's drawn between; at most 4095 frames)"},
		{"sizes", 0, OPT_STR, &sizes, "640x360,960x540,1280x720", 0, 0, NULL, "WxH,...",
		 "--video: frame sizes, one drawn per video (even sides)"},
		{"fps", 0, OPT_STR, &rates, "25,30", 0, 0, NULL, "F,...",
		 "--video: frame rates, one drawn per video"},
		{"gop", 0, OPT_INT, &gop, "250", 1, 4095, NULL, "K",
		 "--video: a keyframe every K frames (250: x264's and the ffmpeg command's default)"},
		OPT_GROUP("output"),
		{"replace", 0, OPT_BOOL, &replace, NULL, 0, 0, NULL, NULL,
		 "DIR is a folder with files in it: replace it whole (what it holds is removed "
		 "first) [refused]"},
		{"force", 'f', OPT_BOOL, &force, NULL, 0, 0, NULL, NULL,
		 "refused: it wrote into a non-empty DIR, old files beside new; see --replace"},
		{"json", 0, OPT_BOOL, &json, NULL, 0, 0, NULL, NULL, "print a JSON summary"},
		OPT_END,
	};
	const struct cmd_help help = {
		"gen", "[options] DIR",
		"Writes an ImageNet-like folder of real JPEGs, DIR/<class>/<n>.jpg: 300-640 x\n"
		"240-480 pixels, ~100 KB each at quality 90, labelled by sorted class folder;\n"
		"or the same pictures as .png or .webp files (--format); or, with --video,\n"
		"H.264 MP4s (DIR/<class>/<n>.mp4) made with FFmpeg's libraries.\n"
		"The bytes depend only on the seed, not on the thread count.",
		"stoker gen /data/fake                   # 10,000 JPEGs in 100 classes\n"
		"stoker gen -n 1000000 -c 1000 /data/big # ImageNet's size\n"
		"stoker gen --video -c 10 /data/vid      # 200 H.264 MP4s, 5-20 s, 360p-720p",
	};
	char **av = malloc((size_t)(argc + 2) * sizeof(*av));
	if (!av) {
		fprintf(stderr, "stoker gen: out of memory\n");
		return EXIT_FAIL;
	}
	int ac = options_first(opts, argc, argv, av);
	int first = opt_parse(&help, opts, ac, av);
	/* A parse that ran to the end stopped just past our "--"; one that
	 * stopped elsewhere printed --help (opt_parse returns optind then). */
	bool helped = first > 0 && av[first - 1] != sep;
	char *dirarg = first > 0 && first < ac ? av[first] : NULL;
	int nops = first > 0 ? ac - first : 0;
	free(av);
	if (first <= 0 || helped)
		return first < 0 ? -first : EXIT_OK;
	if (nops != 1) {
		fprintf(stderr, "stoker gen: %s\ntry 'stoker gen --help'\n",
			nops ? "give exactly one DIR" : "missing DIR");
		return EXIT_USAGE;
	}
	if (force) {
		fprintf(stderr, "stoker gen: --force is gone: writing into a non-empty DIR mixed old "
			"files with new; --replace replaces DIR whole\n");
		return EXIT_USAGE;
	}
	if (video) {
		struct gen_video_params v = {.dir = dirarg, .count = count, .classes = classes,
					      .seed = (uint64_t)seed, .threads = (int)threads,
					      .min_seconds = min_s, .max_seconds = max_s,
					      .gop = (uint32_t)gop, .replace = replace};
		if (classes > count) {
			fprintf(stderr, "stoker gen: --classes is more than --count\n");
			return EXIT_USAGE;
		}
		if (min_s > max_s) {
			fprintf(stderr, "stoker gen: --min-seconds is more than --max-seconds\n");
			return EXIT_USAGE;
		}
		if (gen_video_sizes(sizes, &v) || gen_video_rates(rates, &v)) {
			fprintf(stderr, "stoker gen: --sizes takes WxH,... (even sides, 16..8192, at "
				"most %d) and --fps F,... (1..240)\n", GEN_VIDEO_MAX);
			return EXIT_USAGE;
		}
		return gen_videos(&v, json);
	}
	if (classes > images) { /* an empty class folder would not load */
		fprintf(stderr, "stoker gen: --classes is more than --images\n");
		return EXIT_USAGE;
	}
	struct gen_params p = {.dir = dirarg, .images = images, .classes = classes,
				 .seed = (uint64_t)seed, .threads = (int)threads,
				 .quality = (int)quality, .format = format,
				 .replace = replace};
	return gen_dataset(&p, json);
}
