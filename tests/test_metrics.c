/* test_metrics.c — the Prometheus text of a loader (counters equal to its
 * stats, histograms cumulative with +Inf == _count, labels escaped), of a
 * fake /proc/diskstats (whole disks only, node_exporter's units), of the GPU
 * (stoker_gpu_devices 0 without a driver); publishing writes and removes its
 * file; the server answers GET /metrics on loopback (ephemeral port), 404
 * and 405 elsewhere, and refuses bad listen strings. */
#include "testutil.h"

#include "metrics/metrics_int.h"
#include "stoker/metrics.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <time.h>

#define NCLASS 2
#define PER_CLASS 20
#define N (NCLASS * PER_CLASS)
#define BATCH 8
#define LATENCY_NS 50000 /* the null engine's read time: no read is faster */

static char *root;
static uint64_t total_bytes;

static size_t file_size(int c, int i)
{
	return (size_t)((c * 1009 + i * 37) % 3000 + 1);
}

/* File (c, i): file_size(c, i) bytes of 'x'. */
static size_t fill(uint8_t *buf, int c, int i)
{
	size_t n = file_size(c, i);
	memset(buf, 'x', n);
	return n;
}

static int setup(void **state)
{
	(void)state;
	root = tu_mkdtemp();
	tu_tree(root, NCLASS, NULL, "class%d", PER_CLASS, "%02d.jpg", 3001, fill);
	for (int c = 0; c < NCLASS; c++)
		for (int i = 0; i < PER_CLASS; i++)
			total_bytes += file_size(c, i);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	tu_rmrf(root);
	free(root);
	return 0;
}

static struct stk_loader *make_loader(void)
{
	struct stk_loader_opts o = {.size = sizeof(o),
				    .flags = STK_F_QUIET | STK_F_NO_CACHE | STK_F_NO_SHUFFLE,
				    .path = root,
				    .batch_size = BATCH,
				    .engine = STK_ENGINE_NULL,
				    .null_latency_ns = LATENCY_NS};
	struct stk_loader *l = NULL;
	char err[512];
	int rc = stk_loader_create(&l, &o, err, sizeof(err));
	if (rc)
		fail_msg("create: %s (%s)", err, stk_err_name(rc));
	return l;
}

static void run_epoch(struct stk_loader *l)
{
	struct stk_batch *b;
	int rc;
	while ((rc = stk_loader_next(l, &b)) == 1)
		stk_batch_release(l, b);
	assert_int_equal(rc, 0);
}

/* Renders into a fresh buffer sized by a first call. */
static char *render(const struct stk_loader *l, const char *name)
{
	int n = stk_loader_metrics_text(l, name, NULL, 0);
	assert_true(n > 0);
	size_t cap = (size_t)n + 4096; /* the time-based gauges may grow a digit */
	char *buf = malloc(cap);
	assert_non_null(buf);
	int m = stk_loader_metrics_text(l, name, buf, cap);
	assert_true(m > 0 && (size_t)m < cap);
	assert_int_equal(strlen(buf), m);
	return buf;
}

/* The value of the sample line that starts with `series` (name{labels}). */
static bool value_of(const char *text, const char *series, double *v)
{
	size_t sl = strlen(series);
	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		if (!strncmp(p, series, sl) && p[sl] == ' ') {
			*v = strtod(p + sl + 1, NULL);
			return true;
		}
	}
	return false;
}

static double must(const char *text, const char *series)
{
	double v;
	if (!value_of(text, series, &v))
		fail_msg("no sample %s in:\n%s", series, text);
	return v;
}

/* Every family has HELP then TYPE before its samples, every sample line's
 * name belongs to the family declared last, and the value parses. */
static void check_format(const char *text)
{
	char fam[128] = "", type[32] = "";
	const char *p = text;
	while (*p) {
		const char *e = strchr(p, '\n');
		assert_non_null(e); /* every line ends with a newline */
		char line[1024];
		size_t n = (size_t)(e - p);
		assert_true(n < sizeof(line));
		memcpy(line, p, n);
		line[n] = 0;
		p = e + 1;
		if (!strncmp(line, "# HELP ", 7)) {
			assert_int_equal(sscanf(line + 7, "%127s", fam), 1);
			type[0] = 0;
			continue;
		}
		if (!strncmp(line, "# TYPE ", 7)) {
			char f2[128];
			assert_int_equal(sscanf(line + 7, "%127s %31s", f2, type), 2);
			assert_string_equal(f2, fam);
			continue;
		}
		assert_true(type[0]); /* a sample with no TYPE line before it */
		size_t fl = strlen(fam);
		assert_true(!strncmp(line, fam, fl));
		const char *rest = line + fl;
		if (!strcmp(type, "histogram"))
			assert_true(!strncmp(rest, "_bucket{", 8) || !strncmp(rest, "_sum{", 5) ||
				    !strncmp(rest, "_count{", 7));
		else
			assert_true(*rest == '{' || *rest == ' ');
		if (!strcmp(type, "counter"))
			assert_true(strstr(fam, "_total") == fam + fl - 6);
		const char *sp = strrchr(line, ' ');
		char *end;
		double v = strtod(sp + 1, &end);
		assert_true(end != sp + 1 && *end == 0);
		assert_true(v >= 0);
	}
}

/* Cumulative buckets never decrease, +Inf equals _count; returns _count
 * and the cumulative count at `le`. */
static uint64_t check_histogram(const char *text, const char *name, const char *labels,
				const char *le, uint64_t *at_le)
{
	char series[512], inf[512];
	double prev = 0;
	int buckets = 0;
	const char *p = text;
	snprintf(series, sizeof(series), "%s_bucket{%s,le=\"", name, labels);
	*at_le = UINT64_MAX;
	while ((p = strstr(p, series))) {
		const char *q = p + strlen(series);
		double v = strtod(strchr(q, ' ') + 1, NULL);
		assert_true(v >= prev);
		prev = v;
		if (!strncmp(q, le, strlen(le)) && q[strlen(le)] == '"')
			*at_le = (uint64_t)v;
		buckets++;
		p = q;
	}
	assert_true(buckets >= 10);
	assert_true(*at_le != UINT64_MAX);
	snprintf(inf, sizeof(inf), "%s_bucket{%s,le=\"+Inf\"}", name, labels);
	snprintf(series, sizeof(series), "%s_count{%s}", name, labels);
	double count = must(text, series);
	assert_true(must(text, inf) == count);
	assert_true(prev == count); /* +Inf is the last bucket */
	return (uint64_t)count;
}

static void test_loader_text(void **state)
{
	(void)state;
	struct stk_loader *l = make_loader();
	run_epoch(l);
	char *t = render(l, "train");
	check_format(t);
	char labels[128], s[256];
	snprintf(labels, sizeof(labels), "loader=\"train\",pid=\"%d\"", (int)getpid());
	struct stk_stats st = {.size = sizeof(st)};
	assert_int_equal(stk_loader_stats(l, &st), 0);
#define SERIES(name) (snprintf(s, sizeof(s), "%s{%s}", name, labels), s)
	assert_true(must(t, SERIES("stoker_loader_samples_total")) == N);
	assert_true(must(t, SERIES("stoker_loader_bytes_total")) == (double)total_bytes);
	assert_true(must(t, SERIES("stoker_loader_batches_total")) == (N + BATCH - 1) / BATCH);
	assert_true(must(t, SERIES("stoker_loader_errors_total")) == 0);
	assert_true(must(t, SERIES("stoker_loader_pool_bytes")) == (double)st.pool_bytes);
	double ratio = must(t, SERIES("stoker_loader_data_stall_ratio"));
	assert_true(ratio >= 0 && ratio <= 1);
	/* every read took 50 µs: a mean above zero, never above the most at once */
	double inflight = must(t, SERIES("stoker_loader_reads_in_flight"));
	double inflight_max = must(t, SERIES("stoker_loader_reads_in_flight_max"));
	assert_true(inflight_max >= 1 && inflight_max == st.inflight_max);
	assert_true(inflight > 0 && inflight <= inflight_max);
	/* the consumer's waits: the counter is the stats' total, the histogram's sum agrees */
	double stall_s = must(t, SERIES("stoker_loader_data_stall_seconds_total"));
	assert_true(stall_s > 0 && stall_s <= st.total_wait_s);
	assert_true(must(t, SERIES("stoker_loader_queue_depth")) == st.queue_depth);
	assert_true(must(t, SERIES("stoker_loader_io_threads")) == st.io_threads);
	for (const char *f = "stoker_loader_samples_total\0stoker_loader_bytes_total\0"
			     "stoker_loader_batch_wait_seconds\0stoker_loader_read_latency_seconds\0"
			     "stoker_loader_decode_seconds\0stoker_loader_reads_in_flight\0";
	     *f; f += strlen(f) + 1) {
		snprintf(s, sizeof(s), "# HELP %s ", f);
		assert_non_null(strstr(t, s));
	}
	assert_non_null(strstr(t, "# TYPE stoker_loader_batch_wait_seconds histogram\n"));
	assert_non_null(strstr(t, "# TYPE stoker_loader_samples_total counter\n"));
	assert_non_null(strstr(t, "# TYPE stoker_loader_data_stall_ratio gauge\n"));

	uint64_t at;
	/* every read takes the null engine's 50 µs: none by 25 µs, and the
	 * re-bucketing never moves a value below its true bound */
	uint64_t reads = check_histogram(t, "stoker_loader_read_latency_seconds", labels,
					 "2.5e-05", &at);
	assert_int_equal(reads, N);
	assert_int_equal(at, 0);
	snprintf(s, sizeof(s), "stoker_loader_read_latency_seconds_sum{%s}", labels);
	assert_true(must(t, s) >= N * LATENCY_NS / 1e9 * 0.99);
	uint64_t waits = check_histogram(t, "stoker_loader_batch_wait_seconds", labels, "10", &at);
	assert_true(waits >= (N + BATCH - 1) / BATCH);
	assert_int_equal(at, waits); /* nobody waited 10 s */
	assert_int_equal(check_histogram(t, "stoker_loader_decode_seconds", labels, "1", &at), 0);
	free(t);

	/* snprintf's contract: truncated, terminated, the full length returned */
	char small[100];
	int full = stk_loader_metrics_text(l, "train", small, sizeof(small));
	assert_true(full > (int)sizeof(small));
	assert_int_equal(strlen(small), sizeof(small) - 1);
	assert_int_equal(stk_loader_metrics_text(NULL, "x", small, sizeof(small)), -EINVAL);

	/* counters never go back: a reset starts the stats' window, not theirs */
	stk_loader_stats_reset(l);
	t = render(l, "train");
	assert_true(must(t, SERIES("stoker_loader_samples_total")) == N);
	assert_true(must(t, SERIES("stoker_loader_batches_total")) == (N + BATCH - 1) / BATCH);
	assert_true(must(t, SERIES("stoker_loader_bytes_total")) == (double)total_bytes);
	assert_true(must(t, SERIES("stoker_loader_data_stall_seconds_total")) >= stall_s);
	/* while the window's gauges and histograms restart */
	snprintf(s, sizeof(s), "stoker_loader_batch_wait_seconds_count{%s}", labels);
	assert_true(must(t, s) == 0);
	free(t);
#undef SERIES
	stk_loader_destroy(l);
}

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

/* The kind set to 1 in stoker_loader_bottleneck; fails unless exactly one of
 * the STK_BOUND_COUNT series is 1 and the others 0. */
static int bottleneck_kind(const char *t, const char *labels)
{
	int kind = -1;
	for (int k = 0; k < STK_BOUND_COUNT; k++) {
		char s[256];
		snprintf(s, sizeof(s), "stoker_loader_bottleneck{%s,kind=\"%s\"}", labels,
			 stk_bound_name(k));
		double v = must(t, s);
		assert_true(v == 0 || v == 1);
		if (v == 1) {
			assert_int_equal(kind, -1);
			kind = k;
		}
	}
	assert_true(kind >= 0);
	return kind;
}

/* The verdict the library gives is the one exported, with its evidence: a
 * loader asked for nothing is "unknown"; a consumer slower than the null
 * engine's reads is consumer-bound, waiting under 5 % of the time. */
static void test_loader_verdict(void **state)
{
	(void)state;
	struct stk_loader *l = make_loader();
	char labels[128], s[256];
	snprintf(labels, sizeof(labels), "loader=\"v\",pid=\"%d\"", (int)getpid());
#define SERIES(name) (snprintf(s, sizeof(s), "%s{%s}", name, labels), s)
	char *t = render(l, "v");
	check_format(t);
	assert_int_equal(bottleneck_kind(t, labels), STK_BOUND_UNKNOWN);
	free(t);

	struct stk_batch *b;
	sleep_ms(50); /* the prefetch fills: every batch below is ready when asked for */
	for (int i = 0; i < 4; i++) {
		assert_int_equal(stk_loader_next(l, &b), 1);
		stk_batch_release(l, b);
		sleep_ms(50); /* the training step */
	}
	t = render(l, "v");
	check_format(t);
	struct stk_verdict v = {.size = sizeof(v)};
	assert_int_equal(stk_loader_diagnose(l, 10, &v), 0);
	int kind = bottleneck_kind(t, labels);
	assert_int_equal(kind, v.kind);
	if (kind != STK_BOUND_CONSUMER)
		fail_msg("verdict %s, want consumer-bound: %s", stk_bound_name(kind), v.evidence);
	double stall = must(t, SERIES("stoker_loader_diagnosis_data_stall_ratio"));
	assert_true(stall < 0.05 && fabs(stall - v.stall_ratio) < 0.01);
	double win = must(t, SERIES("stoker_loader_diagnosis_window_seconds"));
	assert_true(win >= 0.12 && win < 10); /* the loader's life so far, not the 10 s asked */
	assert_true(must(t, SERIES("stoker_loader_diagnosis_copy_wait_ratio")) == 0);
	assert_true(must(t, SERIES("stoker_loader_diagnosis_decode_busy_ratio")) == 0);
	assert_true(must(t, SERIES("stoker_loader_diagnosis_reads_in_flight")) > 0);
	assert_true(must(t, SERIES("stoker_loader_diagnosis_prefetch_batches")) == v.prefetch);
	/* the null engine reads no device: the families, no (false zero) samples */
	assert_non_null(strstr(t, "# TYPE stoker_loader_diagnosis_device_utilization_ratio gauge\n"));
	assert_null(strstr(t, "\nstoker_loader_diagnosis_device_"));
	free(t);
	/* the consumer's copy waits count (a binding's device copies): gpu-copy-bound */
	stk_loader_add_time(l, STK_TIME_COPY_WAIT, 2000000000ull);
	t = render(l, "v");
	assert_int_equal(bottleneck_kind(t, labels), STK_BOUND_GPU_COPY);
	assert_true(must(t, SERIES("stoker_loader_diagnosis_copy_wait_ratio")) > 0.3);
	assert_true(must(t, SERIES("stoker_loader_copy_wait_seconds_total")) == 2.0);
	free(t);
#undef SERIES
	stk_loader_destroy(l);
}

static void test_loader_names(void **state)
{
	(void)state;
	struct stk_loader *l = make_loader();
	char *t = render(l, "a\"b\\c\nd");
	char want[128];
	snprintf(want, sizeof(want), "stoker_loader_samples_total{loader=\"a\\\"b\\\\c\\nd\",pid=\"%d\"} 0\n",
		 (int)getpid());
	assert_non_null(strstr(t, want));
	check_format(t);
	free(t);
	t = render(l, NULL);
	assert_non_null(strstr(t, "{loader=\"default\","));
	free(t);
	char lng[200];
	memset(lng, 'n', sizeof(lng) - 1);
	lng[sizeof(lng) - 1] = 0;
	assert_int_equal(stk_loader_metrics_text(l, lng, NULL, 0), -EINVAL);
	stk_loader_destroy(l);
}

static char *fixture(const char *name)
{
	static char b[PATH_MAX];
	const char *slash = strrchr(__FILE__, '/');
	snprintf(b, sizeof(b), "%.*s/fixtures/doctor/%s", slash ? (int)(slash - __FILE__) : 1,
		 slash ? __FILE__ : ".", name);
	return b;
}

static void test_disk_text(void **state)
{
	(void)state;
	const char *r = fixture("ok");
	int n = stk_disk_metrics_text(r, NULL, 0);
	assert_true(n > 0);
	char *t = malloc((size_t)n + 1);
	assert_non_null(t);
	assert_int_equal(stk_disk_metrics_text(r, t, (size_t)n + 1), n);
	check_format(t);
	/* whole disks only: no partitions, loop or ram devices */
	assert_null(strstr(t, "device=\"vda1\""));
	assert_null(strstr(t, "device=\"loop"));
	assert_null(strstr(t, "device=\"ram0\""));
	assert_null(strstr(t, "device=\"nvme0n1p1\""));
	/* the vda line, in node_exporter's units */
	assert_true(must(t, "stoker_disk_reads_completed_total{device=\"vda\"}") == 18216005);
	assert_true(must(t, "stoker_disk_read_bytes_total{device=\"vda\"}") == 275884002.0 * 512);
	assert_non_null(strstr(t, "stoker_disk_read_time_seconds_total{device=\"vda\"} 6769.945\n"));
	assert_true(must(t, "stoker_disk_writes_completed_total{device=\"vda\"}") == 140297);
	assert_true(must(t, "stoker_disk_written_bytes_total{device=\"vda\"}") == 150996136.0 * 512);
	assert_non_null(strstr(t, "stoker_disk_io_time_seconds_total{device=\"vda\"} 321.140\n"));
	assert_non_null(
		strstr(t, "stoker_disk_io_time_weighted_seconds_total{device=\"vda\"} 7154.830\n"));
	assert_true(must(t, "stoker_disk_discards_completed_total{device=\"vda\"}") == 18772);
	assert_true(must(t, "stoker_disk_flush_requests_total{device=\"vda\"}") == 5950);
	assert_true(must(t, "stoker_disk_io_now{device=\"nvme0n1\"}") == 1);
	assert_true(must(t, "stoker_disk_reads_completed_total{device=\"sda\"}") == 500);
	/* sda's line has 11 fields: no discard series rather than a false zero */
	assert_null(strstr(t, "stoker_disk_discards_completed_total{device=\"sda\"}"));
	assert_non_null(strstr(t, "# TYPE stoker_disk_io_now gauge\n"));
	free(t);
	assert_int_equal(stk_disk_metrics_text("/nonexistent-stoker-root", NULL, 0), -ENOENT);
	/* this machine's */
	n = stk_disk_metrics_text(NULL, NULL, 0);
	assert_true(n > 0 || n == -ENOENT);
}

static void test_gpu_text(void **state)
{
	(void)state;
	char t[65536];
	int n = stk_gpu_metrics_text(t, sizeof(t));
	assert_true(n > 0 && (size_t)n < sizeof(t));
	check_format(t);
	double count = must(t, "stoker_gpu_devices");
	if (count == 0) {
		/* no driver here: the count and nothing else */
		assert_string_equal(t, "# HELP stoker_gpu_devices NVIDIA GPUs visible through NVML (0 "
				       "without a driver).\n# TYPE stoker_gpu_devices gauge\n"
				       "stoker_gpu_devices 0\n");
		return;
	}
	double total = must(t, "stoker_gpu_memory_total_bytes{gpu=\"0\"}");
	double used = must(t, "stoker_gpu_memory_used_bytes{gpu=\"0\"}");
	assert_true(total > 0 && used <= total);
	double util;
	if (value_of(t, "stoker_gpu_utilization_ratio{gpu=\"0\"}", &util))
		assert_true(util >= 0 && util <= 1);
}

static bool exists(const char *p)
{
	struct stat st;
	return stat(p, &st) == 0;
}


static void test_publish(void **state)
{
	(void)state;
	struct stk_loader *l = make_loader();
	run_epoch(l);
	char *dir = tu_mkdtemp();
	struct stk_publisher *p;
	assert_int_equal(stk_loader_publish(&p, l, dir, "pubtest", 0.01), 0);
	char want[PATH_MAX];
	snprintf(want, sizeof(want), "%s/%d-pubtest.prom", dir, (int)getpid());
	assert_string_equal(stk_publisher_path(p), want);
	/* written at once, with the loader's figures */
	FILE *f = fopen(want, "r");
	assert_non_null(f);
	char *text = calloc(1, 1 << 20);
	assert_non_null(text);
	size_t got = fread(text, 1, (1 << 20) - 1, f);
	fclose(f);
	assert_true(got > 0);
	char series[128];
	snprintf(series, sizeof(series), "stoker_loader_samples_total{loader=\"pubtest\",pid=\"%d\"}",
		 (int)getpid());
	assert_true(must(text, series) == N);
	check_format(text);
	free(text);
	/* and rewritten every interval: a removed file comes back */
	assert_int_equal(unlink(want), 0);
	for (int i = 0; i < 500 && !exists(want); i++)
		sleep_ms(10);
	assert_true(exists(want));
	stk_publisher_destroy(p);
	assert_false(exists(want));
	assert_int_equal(rmdir(dir), 0); /* nothing left behind, no temporary file either */

	/* refusals */
	assert_int_equal(stk_loader_publish(&p, l, dir, "x", 1), -ENOENT); /* folder gone */
	assert_null(p);
	tu_mkdir(dir);
	const char *bad[] = {"", ".hidden", "a/b", "../up", "sp ace",
			     "0123456789012345678901234567890123456789012345678901234567890123456789"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(stk_loader_publish(&p, l, dir, bad[i], 1), -EINVAL);
	assert_int_equal(stk_loader_publish(&p, l, dir, "x", -1), -EINVAL);
	assert_int_equal(stk_loader_publish(&p, l, dir, "x", NAN), -EINVAL);
	assert_int_equal(stk_loader_publish(&p, l, dir, "x", 1e9), -EINVAL);
	assert_int_equal(stk_loader_publish(&p, NULL, dir, "x", 1), -EINVAL);
	/* NULL name and interval 0 take the defaults */
	assert_int_equal(stk_loader_publish(&p, l, dir, NULL, 0), 0);
	assert_non_null(strstr(stk_publisher_path(p), "-default.prom"));
	stk_publisher_destroy(p);
	stk_publisher_destroy(NULL);

	/* the default folder follows $STOKER_METRICS_DIR (created) */
	char sub[PATH_MAX], got_dir[PATH_MAX];
	snprintf(sub, sizeof(sub), "%s/a/b", dir);
	setenv("STOKER_METRICS_DIR", sub, 1);
	assert_int_equal(stk_metrics_dir(got_dir, sizeof(got_dir)), strlen(sub));
	assert_string_equal(got_dir, sub);
	assert_true(exists(sub));
	assert_int_equal(stk_metrics_dir(got_dir, 4), -ENAMETOOLONG);
	assert_int_equal(stk_loader_publish(&p, l, NULL, "envdir", 1), 0);
	assert_true(!strncmp(stk_publisher_path(p), sub, strlen(sub)));
	stk_publisher_destroy(p);
	unsetenv("STOKER_METRICS_DIR");
	tu_rmrf(dir);
	free(dir);
	stk_loader_destroy(l);
}

/* One naming rule for the published files: what stk_loader_publish refuses,
 * the collector does not take for a published file either (it took names of
 * any length before). */
static void test_published_names(void **state)
{
	(void)state;
	char fn[128], name[80];
	memset(name, 'a', 64);
	name[64] = 0;
	snprintf(fn, sizeof(fn), "123-%s.prom", name);
	assert_int_equal(stk__published_pid(fn), 123);
	name[64] = 'a';
	name[65] = 0;
	snprintf(fn, sizeof(fn), "123-%s.prom", name);
	assert_int_equal(stk__published_pid(fn), -1);
	assert_int_equal(stk__published_pid("123-.x.prom"), -1);
	assert_int_equal(stk__published_pid("123-a b.prom"), -1);
	assert_int_equal(stk__published_pid("123-ab.txt"), -1);
	assert_int_equal(stk__published_pid(".123-ab.prom.tmp"), -1);
	assert_int_equal(stk__published_pid("x-ab.prom"), -1);
	/* and the publisher refuses the name the collector would not read */
	struct stk_publisher *p = NULL;
	assert_int_equal(stk_loader_publish(&p, (const struct stk_loader *)1, "/tmp", name, 1),
			 -EINVAL);
	assert_null(p);
}

static void test_listen_parse(void **state)
{
	(void)state;
	struct sockaddr_storage ss;
	socklen_t sl;
	int wild;
	char a[INET6_ADDRSTRLEN];
	const struct {
		const char *in, *addr;
		int port, wild;
	} good[] = {
		{NULL, "127.0.0.1", 9464, 0},	    {"", "127.0.0.1", 9464, 0},
		{"127.0.0.1:9464", "127.0.0.1", 9464, 0}, {"0.0.0.0:80", "0.0.0.0", 80, 0},
		{"localhost:0", "127.0.0.1", 0, 0},  {"[::1]:65535", "::1", 65535, 0},
		{"[::]:9", "::", 9, 0},		    {":9464", "::", 9464, 1},
	};
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		assert_int_equal(stk__listen_parse(good[i].in, &ss, &sl, &wild), 0);
		int port;
		if (ss.ss_family == AF_INET) {
			struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
			inet_ntop(AF_INET, &s4->sin_addr, a, sizeof(a));
			port = ntohs(s4->sin_port);
			assert_int_equal(sl, sizeof(*s4));
		} else {
			struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
			assert_int_equal(ss.ss_family, AF_INET6);
			inet_ntop(AF_INET6, &s6->sin6_addr, a, sizeof(a));
			port = ntohs(s6->sin6_port);
			assert_int_equal(sl, sizeof(*s6));
		}
		assert_string_equal(a, good[i].addr);
		assert_int_equal(port, good[i].port);
		assert_int_equal(wild, good[i].wild);
	}
	const char *bad[] = {"9464", "127.0.0.1", "127.0.0.1:", "127.0.0.1:65536",
			     "127.0.0.1:-1", "127.0.0.1:+80", "127.0.0.1:80x", "127.0.0.1:080000",
			     "1.2.3:80", "256.1.1.1:80", "example.com:80", "::1:80", "[::1]",
			     "[::1]80", "[::1:80", "[]:80", "[1.2.3.4]:80", " 127.0.0.1:80",
			     "127.0.0.1:80 ", "*:80"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (stk__listen_parse(bad[i], &ss, &sl, &wild) != -EINVAL)
			fail_msg("'%s' was accepted", bad[i]);
}

/* One HTTP/1.0 request to 127.0.0.1:port; the whole answer, bounded in time
 * (5 s without progress) and size. */
static char *http(int port, const char *method, const char *path)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	struct timeval tv = {5, 0};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((in_port_t)port)};
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(fd, (struct sockaddr *)&a, sizeof(a))) {
		close(fd);
		return NULL;
	}
	char req[256];
	int n = snprintf(req, sizeof(req), "%s %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n", method, path);
	assert_int_equal(write(fd, req, (size_t)n), n);
	size_t cap = 4 << 20, len = 0;
	char *buf = malloc(cap);
	assert_non_null(buf);
	ssize_t r;
	while (len + 1 < cap && (r = read(fd, buf + len, cap - 1 - len)) > 0)
		len += (size_t)r;
	buf[len] = 0;
	close(fd);
	return buf;
}

static const char *body_of(const char *resp)
{
	const char *b = strstr(resp, "\r\n\r\n");
	assert_non_null(b);
	return b + 4;
}

static void test_server(void **state)
{
	(void)state;
	struct stk_loader *l = make_loader();
	run_epoch(l);
	struct stk_metrics_server *s;
	assert_int_equal(stk_metrics_serve(&s, "127.0.0.1:0", l, "srv"), 0);
	int port = stk_metrics_server_port(s);
	assert_true(port > 0 && port < 65536);

	char *r = http(port, "GET", "/metrics");
	assert_non_null(r);
	assert_true(!strncmp(r, "HTTP/1.1 200", 12) || !strncmp(r, "HTTP/1.0 200", 12));
	assert_non_null(strstr(r, "Content-Type: text/plain; version=0.0.4"));
	const char *body = body_of(r);
	check_format(body);
	char series[128];
	snprintf(series, sizeof(series), "stoker_loader_samples_total{loader=\"srv\",pid=\"%d\"}",
		 (int)getpid());
	assert_true(must(body, series) == N);
	assert_non_null(strstr(body, "\nstoker_gpu_devices "));
	assert_non_null(strstr(body, "# TYPE stoker_disk_reads_completed_total counter\n"));
	free(r);

	r = http(port, "GET", "/metrics?x=1"); /* a query string changes nothing */
	assert_non_null(r);
	assert_non_null(strstr(r, " 200 "));
	free(r);
	r = http(port, "GET", "/");
	assert_non_null(r);
	assert_true(!strncmp(r + 8, " 404", 4));
	free(r);
	r = http(port, "POST", "/metrics");
	assert_non_null(r);
	assert_true(!strncmp(r + 8, " 405", 4));
	assert_non_null(strstr(r, "Allow: GET, HEAD"));
	free(r);
	r = http(port, "HEAD", "/metrics");
	assert_non_null(r);
	assert_true(!strncmp(r + 8, " 200", 4));
	assert_string_equal(body_of(r), "");
	free(r);

	/* the port is taken while the server runs, free after */
	char lst[64];
	snprintf(lst, sizeof(lst), "127.0.0.1:%d", port);
	struct stk_metrics_server *s2;
	assert_int_equal(stk_metrics_serve(&s2, lst, NULL, NULL), -EADDRINUSE);
	assert_null(s2);
	stk_metrics_server_destroy(s);
	r = http(port, "GET", "/metrics");
	assert_null(r); /* refused: the socket is closed */
	stk_metrics_server_destroy(NULL);

	const char *bad[] = {"localhost", "127.0.0.1:99999", "::1:9464", "host.example:80"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(stk_metrics_serve(&s, bad[i], l, "x"), -EINVAL);
		assert_null(s);
	}
	/* IPv6 loopback, where the kernel has it */
	int rc = stk_metrics_serve(&s, "[::1]:0", NULL, NULL);
	if (rc == 0) {
		assert_true(stk_metrics_server_port(s) > 0);
		stk_metrics_server_destroy(s);
	} else {
		assert_true(rc == -EADDRNOTAVAIL || rc == -EAFNOSUPPORT);
	}
	stk_loader_destroy(l);
}

/* A render function whose text is larger than the server's first buffer,
 * then one that fails. */
static int big_calls;
static int render_big(void *arg, char *buf, size_t len)
{
	(void)arg;
	big_calls++;
	const size_t n = 200000;
	if (len) {
		size_t k = n < len - 1 ? n : len - 1;
		memset(buf, '#', k);
		for (size_t i = 99; i < k; i += 100)
			buf[i] = '\n';
		buf[k] = 0;
	}
	return (int)n;
}

static int render_fail(void *arg, char *buf, size_t len)
{
	(void)arg;
	(void)buf;
	(void)len;
	return -EIO;
}

static int open_fds(void)
{
	int n = 0;
	DIR *d = opendir("/proc/self/fd");
	assert_non_null(d);
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

static void test_server_fn(void **state)
{
	(void)state;
	struct stk_metrics_server *s;
	int fds = open_fds();
	assert_int_equal(stk_metrics_serve_fn(&s, "127.0.0.1:0", render_big, NULL), 0);
	int port = stk_metrics_server_port(s);
	char *r = http(port, "GET", "/metrics");
	assert_non_null(r);
	assert_int_equal(strlen(body_of(r)), 200000);
	free(r);
	int calls = big_calls;
	r = http(port, "GET", "/metrics"); /* sized right from the last answer: one call */
	assert_non_null(r);
	free(r);
	stk_metrics_server_destroy(s);
	assert_int_equal(big_calls, calls + 1);

	assert_int_equal(stk_metrics_serve_fn(&s, "127.0.0.1:0", render_fail, NULL), 0);
	r = http(stk_metrics_server_port(s), "GET", "/metrics");
	assert_non_null(r);
	assert_true(!strncmp(r + 8, " 500", 4));
	free(r);
	stk_metrics_server_destroy(s);
	assert_int_equal(stk_metrics_serve_fn(&s, "127.0.0.1:0", NULL, NULL), -EINVAL);
	assert_int_equal(open_fds(), fds); /* the sockets and MHD's own are closed */
}

/* 200 clients connect and send nothing (as a port scanner or a slowloris
 * does): a scrape still gets its answer, within the http() helper's bound of
 * 5 s without progress, below the 10 s after which the server drops idle
 * connections; then the idle ones are all still connected. */
static void test_server_idle_clients(void **state)
{
	(void)state;
	enum { IDLE = 200 };
	struct stk_metrics_server *s;
	assert_int_equal(stk_metrics_serve_fn(&s, "127.0.0.1:0", render_big, NULL), 0);
	int port = stk_metrics_server_port(s);
	int idle[IDLE];
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((in_port_t)port)};
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	for (int i = 0; i < IDLE; i++) { /* non-blocking: a full backlog must not stall us */
		idle[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		assert_true(idle[i] >= 0);
		int rc = connect(idle[i], (struct sockaddr *)&a, sizeof(a));
		assert_true(rc == 0 || errno == EINPROGRESS);
	}
	char *r = http(port, "GET", "/metrics");
	assert_non_null(r);
	assert_true(!strncmp(r, "HTTP/1.0 200", 12) || !strncmp(r, "HTTP/1.1 200", 12));
	assert_int_equal(strlen(body_of(r)), 200000);
	free(r);
	/* the idle ones were not dropped to make room: a read finds no EOF */
	int open = 0;
	for (int i = 0; i < IDLE; i++) {
		char c;
		ssize_t n = recv(idle[i], &c, 1, MSG_DONTWAIT);
		open += n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
		close(idle[i]);
	}
	assert_int_equal(open, IDLE);
	stk_metrics_server_destroy(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_loader_text), cmocka_unit_test(test_loader_verdict),
		cmocka_unit_test(test_loader_names),
		cmocka_unit_test(test_disk_text),   cmocka_unit_test(test_gpu_text),
		cmocka_unit_test(test_publish),	    cmocka_unit_test(test_listen_parse),
		cmocka_unit_test(test_published_names),
		cmocka_unit_test(test_server),	    cmocka_unit_test(test_server_fn),
		cmocka_unit_test(test_server_idle_clients),
	};
	return cmocka_run_group_tests_name("metrics", tests, setup, teardown);
}
