/*
 * iostat.c — `stoker iostat [-d DEV...] [INTERVAL [COUNT]]`: per-device I/O
 * figures from /proc/diskstats deltas, the columns and formulas of sysstat's
 * `iostat -x` (stk_sys_disk_rates), so the two agree over the same interval.
 *
 * Like iostat: the first report covers the time since boot unless -y; then
 * one report per INTERVAL seconds, COUNT reports in all (forever without
 * COUNT, one without INTERVAL).  By default only whole disks that have done
 * I/O are shown, without loop and ram devices; named devices (partitions
 * too) are shown whatever they did.  Intervals are timed with CLOCK_BOOTTIME
 * (what /proc/uptime counts), and each sleep aims at an absolute deadline so
 * reports do not drift.  --json prints one JSON object per report and line.
 */
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/cli.h"
#include "stoker/sys.h"

/* The subcommand (also declared in common/cli.h, with the others). */
int cmd_iostat(int argc, char **argv);

struct snap {
	struct stk_diskstat *d;
	int n, cap;
	double t_ms; /* CLOCK_BOOTTIME */
};

struct iostat {
	const char *root;
	char **devs; /* named devices, or NULL */
	int ndevs;
	bool all, json, omit_idle;
};

static volatile sig_atomic_t stop;
static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static double boottime_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Reads diskstats, growing the array until every device fits. */
static int take(struct snap *s, const char *root)
{
	for (;;) {
		if (s->cap)
			s->d[0].size = sizeof(s->d[0]);
		int n = stk_sys_diskstats(root, s->d, (size_t)s->cap);
		if (n < 0)
			return n;
		if (n <= s->cap) {
			s->n = n;
			s->t_ms = boottime_ms();
			return 0;
		}
		struct stk_diskstat *p = realloc(s->d, (size_t)n * 2 * sizeof(*p));
		if (!p)
			return -ENOMEM;
		s->d = p;
		s->cap = n * 2;
	}
}

static const struct stk_diskstat *find(const struct snap *s, const struct stk_diskstat *d)
{
	for (int i = 0; i < s->n; i++)
		if (s->d[i].major == d->major && s->d[i].minor == d->minor &&
		    !strcmp(s->d[i].name, d->name))
			return &s->d[i];
	return NULL;
}

static bool named(const struct iostat *o, const char *name)
{
	for (int i = 0; i < o->ndevs; i++)
		if (!strcmp(o->devs[i], name))
			return true;
	return false;
}

/* iostat -x's default choice: whole disks that have done I/O, no loop/ram. */
static bool shown(const struct iostat *o, const struct stk_diskstat *d)
{
	if (o->ndevs)
		return named(o, d->name);
	if (o->all)
		return true;
	if (!strncmp(d->name, "loop", 4) ||
	    (!strncmp(d->name, "ram", 3) && d->name[3] >= '0' && d->name[3] <= '9'))
		return false;
	if (!(d->rd_ios + d->wr_ios + d->dc_ios + d->fl_ios))
		return false;
	return stk_sys_disk_is_whole(o->root, d->name) == 1;
}

static const char *const cols[] = {
	"r/s",  "rkB/s", "rrqm/s", "%rrqm", "r_await", "rareq-sz", "w/s",     "wkB/s",
	"wrqm/s", "%wrqm", "w_await", "wareq-sz", "d/s", "dkB/s",  "drqm/s",   "%drqm",
	"d_await", "dareq-sz", "f/s", "f_await", "aqu-sz", "%util",
};
/* sysstat's column widths, so the table lines up the same way */
static const int widths[] = {7, 9, 8, 6, 7, 8, 7, 9, 8, 6, 7, 8, 7, 9, 8, 6, 7, 8, 7, 7, 7, 6};
/* sysstat's JSON names for the same columns */
static const char *const jcols[] = {
	"r/s",  "rkB/s", "rrqm/s", "rrqm", "r_await", "rareq-sz", "w/s",     "wkB/s",
	"wrqm/s", "wrqm", "w_await", "wareq-sz", "d/s", "dkB/s",  "drqm/s",   "drqm",
	"d_await", "dareq-sz", "f/s", "f_await", "aqu-sz", "util",
};

static void values(const struct stk_disk_rates *r, double v[22])
{
	const double x[22] = {
		r->r_s,     r->rkb_s,    r->rrqm_s, r->rrqm_pct, r->r_await, r->rareq_sz,
		r->w_s,     r->wkb_s,    r->wrqm_s, r->wrqm_pct, r->w_await, r->wareq_sz,
		r->d_s,     r->dkb_s,    r->drqm_s, r->drqm_pct, r->d_await, r->dareq_sz,
		r->f_s,     r->f_await,  r->aqu_sz, r->util,
	};
	memcpy(v, x, sizeof(x));
}

/* One report: prev NULL means since boot (interval_ms = uptime). */
static int report(const struct iostat *o, const struct snap *prev, const struct snap *cur,
		  double interval_ms)
{
	json_t *devs = o->json ? json_array() : NULL;
	if (o->json && !devs)
		return -ENOMEM;
	if (!o->json) {
		printf("%-13s", "Device");
		for (size_t i = 0; i < sizeof(cols) / sizeof(cols[0]); i++)
			printf(" %*s", widths[i], cols[i]);
		putchar('\n');
	}
	for (int i = 0; i < cur->n; i++) {
		const struct stk_diskstat *d = &cur->d[i], *p = NULL;
		if (!shown(o, d))
			continue;
		if (prev && !(p = find(prev, d)))
			continue; /* appeared during the interval: no delta yet */
		if (o->omit_idle && p && d->rd_ios == p->rd_ios && d->wr_ios == p->wr_ios &&
		    d->dc_ios == p->dc_ios && d->fl_ios == p->fl_ios)
			continue;
		struct stk_disk_rates r = {.size = sizeof(r)};
		if (stk_sys_disk_rates(p, d, interval_ms, &r))
			continue;
		double v[22];
		values(&r, v);
		if (o->json) {
			json_t *j = json_pack("{s:s}", "disk_device", d->name);
			for (size_t k = 0; j && k < 22; k++)
				if (json_object_set_new(j, jcols[k], json_real(v[k]))) {
					json_decref(j);
					j = NULL;
				}
			if (!j || json_array_append_new(devs, j)) {
				json_decref(devs);
				return -ENOMEM;
			}
		} else {
			printf("%-13s", d->name);
			for (size_t k = 0; k < 22; k++)
				printf(" %*.2f", widths[k], v[k]);
			putchar('\n');
		}
	}
	if (o->json) {
		char ts[64];
		time_t now = time(NULL);
		struct tm tm;
		strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S%z", localtime_r(&now, &tm));
		json_t *j = json_pack("{s:i,s:s,s:b,s:f,s:o}", "schema_version", 1, "timestamp", ts,
				      "since_boot", prev == NULL, "interval_s", interval_ms / 1000.0,
				      "disk", devs);
		if (!j || json_dumpf(j, stdout, JSON_COMPACT | JSON_REAL_PRECISION(10)) < 0) {
			json_decref(j);
			return -EIO;
		}
		json_decref(j);
	}
	putchar('\n');
	return fflush(stdout) ? -errno : 0;
}

/* Uptime in ms: what iostat divides its first (since boot) report by. */
static double uptime_ms(const char *root)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/proc/uptime", root);
	FILE *f = fopen(path, "re");
	double up = 0;
	if (f) {
		if (fscanf(f, "%lf", &up) != 1)
			up = 0;
		fclose(f);
	}
	return up > 0 ? up * 1e3 : boottime_ms();
}

/* Pulls "-d DEV", "-dDEV", "--device DEV", "--device=DEV" (comma lists too)
 * out of argv before the option table sees it: the table keeps one value
 * per option, and iostat users name several devices.  Returns the new argc. */
static int take_devices(int argc, char **argv, struct iostat *o)
{
	int w = 1;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *val = NULL;
		if (!strcmp(a, "--")) {
			while (i < argc)
				argv[w++] = argv[i++];
			break;
		}
		if (!strcmp(a, "-d") || !strcmp(a, "--device"))
			val = i + 1 < argc ? argv[++i] : "";
		else if (!strncmp(a, "--device=", 9))
			val = a + 9;
		else if (!strncmp(a, "-d", 2))
			val = a + 2;
		if (!val) {
			argv[w++] = argv[i];
			continue;
		}
		for (char *s = (char *)val, *save, *t; (t = strtok_r(s, ",", &save)); s = NULL)
			o->devs[o->ndevs++] = t;
		if (!*val)
			return -1;
	}
	argv[w] = NULL;
	return w;
}

static int parse_num(const char *s, double *out)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (end == s || *end || errno)
		return -1;
	*out = v;
	return 0;
}

int cmd_iostat(int argc, char **argv)
{
	struct iostat o = {.root = ""};
	bool skip_first = false, compat_x = false;
	const char *devopt = NULL;
	static const struct cmd_help help = {
		"iostat", "[-d DEV ...] [options] [INTERVAL [COUNT]]",
		"Per-device I/O from /proc/diskstats, with the columns and formulas of sysstat's\n"
		"`iostat -x`: r/s, rkB/s, r_await, rareq-sz, the same for writes, discards and\n"
		"flushes, aqu-sz and %util.  The first report covers the time since boot (unless\n"
		"-y); then one every INTERVAL seconds, COUNT in all.  Whole disks that have done I/O\n"
		"are shown, without loop and ram devices, unless devices are named (-d, or as\n"
		"operands like iostat) or --all is given.",
		"stoker iostat 1                 # every second, since-boot report first\n"
		"stoker iostat -y -z 500ms 10    # ten reports, half a second each, busy devices only\n"
		"stoker iostat -j -d nvme0n1 5 3 # one device as JSON lines"};
	const struct opt opts[] = {
		OPT_GROUP("devices"),
		{"device", 'd', OPT_STR, &devopt, NULL, 0, 0, NULL, "DEV",
		 "show DEV (repeat, or a comma list; partitions too)"},
		{"all", 'a', OPT_BOOL, &o.all, NULL, 0, 0, NULL, NULL,
		 "every device: partitions, loop, ram and idle ones too"},
		{"omit-idle", 'z', OPT_BOOL, &o.omit_idle, NULL, 0, 0, NULL, NULL,
		 "leave out devices with no I/O in the interval"},
		OPT_GROUP("output"),
		{"skip-first", 'y', OPT_BOOL, &skip_first, NULL, 0, 0, NULL, NULL,
		 "no since-boot report: the first covers INTERVAL"},
		{"extended", 'x', OPT_BOOL, &compat_x, NULL, 0, 0, NULL, NULL,
		 "accepted for iostat's habit (the report is always extended)"},
		{"json", 'j', OPT_BOOL, &o.json, NULL, 0, 0, NULL, NULL,
		 "one JSON object per report and line (sysstat's field names)"},
		OPT_GROUP("testing"),
		{"root", 0, OPT_STR, &o.root, NULL, 0, 0, NULL, "DIR",
		 "read /proc and /sys under DIR (a fake tree, for tests)"},
		OPT_END,
	};
	char **devs = calloc((size_t)argc + 1, sizeof(*devs));
	char **args = calloc((size_t)argc + 1, sizeof(*args));
	if (!devs || !args) {
		free(devs);
		free(args);
		fprintf(stderr, "stoker iostat: out of memory\n");
		return EXIT_FAIL;
	}
	/* the devices' strings are cut in place: work on copies */
	int rc = EXIT_USAGE;
	char **copies = calloc((size_t)argc + 1, sizeof(*copies));
	struct snap a = {0}, b = {0};
	if (!copies)
		goto oom;
	for (int i = 0; i < argc; i++)
		if (!(copies[i] = strdup(argv[i])))
			goto oom;
	memcpy(args, copies, sizeof(*args) * (size_t)argc);
	o.devs = devs;
	int nargs = take_devices(argc, args, &o);
	if (nargs < 0) {
		fprintf(stderr, "stoker iostat: -d needs a device name\ntry 'stoker iostat --help'\n");
		goto out;
	}
	int first = opt_parse(&help, opts, nargs, args);
	if (first < 0) {
		rc = -first;
		goto out;
	}
	double interval = 0, count = -1;
	int nnum = 0;
	for (int i = first; i < nargs; i++) {
		double v;
		uint64_t ns;
		if (nnum == 0 && !stk_parse_duration(args[i], 1000000000ull, &ns))
			v = (double)ns / 1e9; /* INTERVAL: "2", "500ms", "1m" */
		else if (parse_num(args[i], &v)) {
			o.devs[o.ndevs++] = args[i]; /* like iostat: a device operand */
			continue;
		}
		if (nnum == 0 && v > 0 && v <= 86400) {
			interval = v;
		} else if (nnum == 1 && v >= 1 && v <= 1e9 && v == (double)(long long)v) {
			count = v;
		} else {
			fprintf(stderr, "stoker iostat: '%s' is not a valid %s\n", args[i],
				nnum == 0 ? "INTERVAL (seconds or 500ms, 1m; > 0)" : nnum == 1 ? "COUNT (>= 1)" : "operand");
			goto out;
		}
		nnum++;
	}
	if (!interval && skip_first) {
		fprintf(stderr, "stoker iostat: -y needs an INTERVAL\n");
		goto out;
	}
	rc = EXIT_FAIL;
	int e = take(&a, o.root);
	if (e < 0) {
		fprintf(stderr, "stoker iostat: %s/proc/diskstats: %s\n", o.root, strerror(-e));
		goto out;
	}
	for (int i = 0; i < o.ndevs; i++) {
		bool found = false;
		for (int k = 0; k < a.n && !found; k++)
			found = !strcmp(a.d[k].name, o.devs[i]);
		if (!found) {
			fprintf(stderr, "stoker iostat: no device '%s' in %s/proc/diskstats\n", o.devs[i],
				o.root);
			goto out;
		}
	}
	struct sigaction sa = {.sa_handler = on_signal};
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	long long left = count > 0 ? (long long)count : interval ? -1 : 1;
	if (!skip_first) {
		if ((e = report(&o, NULL, &a, uptime_ms(o.root))) < 0)
			goto ioerr;
		if (left > 0)
			left--;
	}
	struct timespec next;
	clock_gettime(CLOCK_MONOTONIC, &next);
	struct snap *prev = &a, *cur = &b;
	while (left && !stop) {
		next.tv_sec += (time_t)interval;
		next.tv_nsec += (long)((interval - (double)(time_t)interval) * 1e9);
		if (next.tv_nsec >= 1000000000L) {
			next.tv_sec++;
			next.tv_nsec -= 1000000000L;
		}
		while (!stop && clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL) == EINTR)
			;
		if (stop)
			break;
		if ((e = take(cur, o.root)) < 0) {
			fprintf(stderr, "stoker iostat: %s/proc/diskstats: %s\n", o.root, strerror(-e));
			goto out;
		}
		if ((e = report(&o, prev, cur, cur->t_ms - prev->t_ms)) < 0)
			goto ioerr;
		struct snap *t = prev;
		prev = cur;
		cur = t;
		if (left > 0)
			left--;
	}
	rc = EXIT_OK;
	goto out;
ioerr:
	fprintf(stderr, "stoker iostat: cannot write the report: %s\n", strerror(-e));
	goto out;
oom:
	fprintf(stderr, "stoker iostat: out of memory\n");
	rc = EXIT_FAIL;
out:
	free(a.d);
	free(b.d);
	for (int i = 0; copies && i < argc; i++)
		free(copies[i]);
	free(copies);
	free(devs);
	free(args);
	return rc;
}
