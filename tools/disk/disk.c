/* disk/disk.c — `stoker disk PATH...`: storage benchmark in training's access
 * patterns (sequential, random, many small files, checkpoint write), fio's
 * way: queue depth, O_DIRECT, per-I/O latency percentiles.
 *
 * This file holds the options, turns them into a list of cases, checks every
 * PATH before anything is written, runs each case on each PATH and hands the
 * results to the printers.  Patterns live in disk/pat.c, the engines in
 * disk/io.c, the safety rules in disk/safe.c, output in disk/out.c.
 */
#include "disk/disk.h"
#include "common/mpi.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KiB 1024ull
#define MiB (1024ull * KiB)
#define GiB (1024ull * MiB)

struct args {
	const char *pattern, *destructive;
	bool all, json, direct, buffered, readonly, no_drop;
	uint64_t size, bs, file_mean, ckpt_size;
	int64_t qd, threads, files, seed;
	double runtime, ramp;
	int engine;
	int64_t repeat;
	const char *plot;
};

/* The sets: quick (default, about 30 s per PATH) and --all (minutes).
 * Each row is a case; --pattern keeps the rows of the patterns it names. */
static const struct dk_case quick_set[] = {
	{DK_SEQWRITE, 1 * MiB, 8, 1, 0, 0},  {DK_SEQREAD, 1 * MiB, 8, 1, 0, 0},
	{DK_RANDREAD, 4 * KiB, 32, 1, 0, 0}, {DK_SMALLFILES, 0, 32, 1, 0, 0},
	{DK_CHECKPOINT, 4 * MiB, 1, 1, 0, 0},
};
static const struct dk_case all_set[] = {
	{DK_SEQWRITE, 1 * MiB, 8, 1, 0, 0},    {DK_SEQREAD, 1 * MiB, 8, 1, 0, 0},
	{DK_SEQREAD, 1 * MiB, 1, 1, 0, 0},     {DK_RANDREAD, 4 * KiB, 1, 1, 0, 0},
	{DK_RANDREAD, 4 * KiB, 32, 1, 0, 0},   {DK_RANDREAD, 4 * KiB, 32, 4, 0, 0},
	{DK_RANDREAD, 128 * KiB, 16, 1, 0, 0}, {DK_SMALLFILES, 0, 32, 1, 0, 0},
	{DK_SMALLFILES, 0, 1, 1, 0, 0},        {DK_CHECKPOINT, 4 * MiB, 1, 1, 0, 0},
};

static int parse_patterns(const char *s, unsigned *mask)
{
	*mask = 0;
	char *copy = strdup(s), *save = NULL;
	if (!copy)
		return -ENOMEM;
	int r = 0;
	for (char *p = strtok_r(copy, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
		unsigned m = 0;
		for (int i = 0; i < DK_NPAT; i++)
			if (!strcmp(p, dk_pattern_name[i]))
				m = 1u << i;
		if (!strcmp(p, "all"))
			m = (1u << DK_NPAT) - 1;
		if (!m) {
			fprintf(stderr,
				"stoker disk: --pattern: '%s' is not one of "
				"seqread,seqwrite,randread,smallfiles,checkpoint\n",
				p);
			r = -EINVAL;
			break;
		}
		*mask |= m;
	}
	free(copy);
	if (!r && !*mask) {
		fprintf(stderr, "stoker disk: --pattern: no pattern named\n");
		r = -EINVAL;
	}
	return r;
}

static bool same_case(const struct dk_case *a, const struct dk_case *b)
{
	return a->pat == b->pat && a->bs == b->bs && a->qd == b->qd && a->threads == b->threads;
}

/* The set's rows for the chosen patterns, with explicit options applied;
 * rows made identical by an override are kept once. */
static uint32_t build_cases(const struct args *a, unsigned mask, struct dk_case *out)
{
	const struct dk_case *set = a->all ? all_set : quick_set;
	size_t n = a->all ? sizeof(all_set) / sizeof(all_set[0])
			  : sizeof(quick_set) / sizeof(quick_set[0]);
	uint32_t k = 0;
	for (size_t i = 0; i < n; i++) {
		if (!(mask & (1u << set[i].pat)))
			continue;
		struct dk_case c = set[i];
		if (a->bs && c.pat != DK_SMALLFILES)
			c.bs = a->bs;
		if (a->qd)
			c.qd = (uint32_t)a->qd;
		if (a->threads)
			c.threads = (uint32_t)a->threads;
		c.runtime = a->runtime >= 0 ? a->runtime : a->all ? 15 : 4;
		c.ramp = a->ramp >= 0 ? a->ramp : a->all ? 1 : 0.5;
		/* one pass over cold files or a checkpoint: a ramp would drop the
		 * very reads that matter */
		if (c.pat == DK_SMALLFILES || c.pat == DK_CHECKPOINT)
			c.ramp = 0;
		bool dup = false;
		for (uint32_t j = 0; j < k; j++)
			dup = dup || same_case(&out[j], &c);
		if (!dup)
			out[k++] = c;
	}
	return k;
}

/* opt_parse returns optind after printing --help (-EXIT_OK is 0), and it
 * stops right after the -h/--help it met: that argument tells. */
static bool helped(int argc, char **argv, int first)
{
	if (first < 1 || first > argc)
		return false;
	const char *a = argv[first - 1];
	if (!strcmp(a, "--help"))
		return true;
	/* "-h" or a group of flags ending in it ("-ah") */
	return a[0] == '-' && a[1] != '-' && a[1] && a[strlen(a) - 1] == 'h' &&
	       strspn(a + 1, "ah") == strlen(a + 1);
}

static const struct cmd_help help = {
	"disk",
	"[options] PATH [PATH...]",
	"Benchmarks storage in the access patterns of training: seqread and seqwrite "
	"(large blocks, O_DIRECT, with queue depth), randread (block size, queue depth, "
	"threads), smallfiles (N files of an ImageNet-like size mix, cache dropped, read "
	"whole in random order) and checkpoint (large writes, then fsync; read back).  "
	"Reports MB/s, IOPS and latency percentiles per pattern; several PATHs give one "
	"column each with the ratio to the first.  In a folder PATH it writes only its "
	"own " DK_PREFIX "<pid>-* files and removes them, also on Ctrl-C.  An existing "
	"file or a block device is refused unless --readonly or --destructive=PATH names "
	"it.  Without --all it runs a quick set (about 30 s per PATH).  Exit: 0 ok, 1 a "
	"pattern failed, 2 bad usage or refused PATH, 130 interrupted.",
	"stoker disk /data                      # the quick set in a folder on the data's disk\n"
	"stoker disk --all /data /scratch       # the full set, two places side by side\n"
	"stoker disk -p randread --bs 4k -q 1 --readonly /dev/nvme0n1  # one pattern, a device",
};

int cmd_disk(int argc, char **argv)
{
	struct args a = {.runtime = -1, .ramp = -1};
	const struct opt opts[] = {
		OPT_GROUP("patterns"),
		{"pattern", 'p', OPT_STR, &a.pattern, NULL, 0, 0, NULL, "LIST",
		 "patterns, comma-separated: seqread,seqwrite,randread,smallfiles,checkpoint "
		 "[all of them]"},
		{"all", 'a', OPT_BOOL, &a.all, NULL, 0, 0, NULL, NULL,
		 "the full set: more cases, 15 s each, bigger files (minutes per PATH)"},
		{"size", 0, OPT_SIZE, &a.size, NULL, 1048576, 1e15, NULL, "SIZE",
		 "data file size in a folder; caps an existing file or device [1GiB, --all 4GiB]"},
		{"runtime", 't', OPT_SECONDS, &a.runtime, NULL, 0, 86400, NULL, "SECS",
		 "seconds per pattern after the ramp; 0 = one pass over the data [4, --all 15]"},
		{"ramp", 0, OPT_SECONDS, &a.ramp, NULL, 0, 3600, NULL, "SECS",
		 "warm-up seconds per pattern, left out of the figures [0.5, --all 1]"},
		{"bs", 'b', OPT_SIZE, &a.bs, NULL, 512, 64 * 1048576.0, NULL, "SIZE",
		 "block size [seq 1MiB, randread 4KiB, checkpoint 4MiB]"},
		{"qd", 'q', OPT_INT, &a.qd, NULL, 1, 1024, NULL, "N",
		 "I/Os in flight per thread [seq 8, randread 32, smallfiles 32, checkpoint 1]"},
		{"threads", 'T', OPT_INT, &a.threads, NULL, 1, 256, NULL, "N",
		 "threads per pattern [1]"},
		{"engine", 'e', OPT_CHOICE, &a.engine, "io_uring", 0, 0, "io_uring,psync", "NAME",
		 "I/O engine (psync runs qd workers per thread)"},
		{"direct", 0, OPT_BOOL, &a.direct, NULL, 0, 0, NULL, NULL,
		 "O_DIRECT for every pattern (default: all but checkpoint)"},
		{"buffered", 0, OPT_BOOL, &a.buffered, NULL, 0, 0, NULL, NULL,
		 "through the page cache (evicted before reads, fsync counted after writes)"},
		{"files", 'n', OPT_INT, &a.files, NULL, 1, 10000000, NULL, "N",
		 "smallfiles: how many files [2000, --all 20000]"},
		{"file-size", 0, OPT_SIZE, &a.file_mean, "110kB", 4096, 64 * 1048576.0, NULL,
		 "SIZE", "smallfiles: mean file size (log-normal, like ImageNet)"},
		{"checkpoint-size", 'c', OPT_SIZE, &a.ckpt_size, NULL, 1048576, 1e15, NULL, "SIZE",
		 "checkpoint: bytes written [1GiB, --all 4GiB]"},
		OPT_GROUP("safety"),
		{"readonly", 0, OPT_BOOL, &a.readonly, NULL, 0, 0, NULL, NULL,
		 "read patterns only, on an existing file or block device"},
		{"destructive", 0, OPT_STR, &a.destructive, NULL, 0, 0, NULL, "PATH[,PATH]",
		 "allow writes to this existing file or block device: its data is destroyed"},
		{"no-drop", 0, OPT_BOOL, &a.no_drop, NULL, 0, 0, NULL, NULL,
		 "never write /proc/sys/vm/drop_caches (it slows everyone on a shared machine)"},
		OPT_GROUP("patterns"),
		OPT_SEED(0, &a.seed, "0", "random offsets and file sizes"),
		{"repeat", 'r', OPT_INT, &a.repeat, "1", 1, SPREAD_MAX, NULL, "N",
		 "rounds of every case, the PATHs alternating in each: MB/s and IOPS as the median "
		 "(min-max), JSON every round"},
		OPT_GROUP("output"),
		{"plot", 0, OPT_STR, &a.plot, NULL, 0, 0, NULL, "FILE",
		 "an SVG chart of MB/s by pattern and PATH (and FILE.png with rsvg-convert)"},
		{"json", 0, OPT_BOOL, &a.json, NULL, 0, 0, NULL, NULL, "JSON on stdout"},
		OPT_END,
	};
	int first = opt_parse(&help, opts, argc, argv);
	if (first < 0)
		return -first;
	if (helped(argc, argv, first))
		return EXIT_OK;
	if (first >= argc) {
		fprintf(stderr, "stoker disk: needs at least one PATH (a folder to test in)\n"
				"try 'stoker disk --help'\n");
		return EXIT_USAGE;
	}
	if (a.direct && a.buffered) {
		fprintf(stderr, "stoker disk: --direct and --buffered exclude each other\n");
		return EXIT_USAGE;
	}
	unsigned mask = (1u << DK_NPAT) - 1;
	if (a.pattern && parse_patterns(a.pattern, &mask))
		return EXIT_USAGE;
	if (a.readonly)
		mask &= 1u << DK_SEQREAD | 1u << DK_RANDREAD;
	if (!mask) {
		fprintf(stderr, "stoker disk: --readonly leaves only seqread and randread\n");
		return EXIT_USAGE;
	}

	struct dk_conf cf = {
		.engine = a.engine == 1 ? DK_PSYNC : DK_URING,
		.direct = a.direct ? 1 : a.buffered ? 0 : -1,
		.size = a.size ? a.size : a.all ? 4 * GiB : 1 * GiB,
		.size_given = a.size != 0,
		.files = a.files ? (uint64_t)a.files : a.all ? 20000 : 2000,
		.file_mean = a.file_mean,
		.ckpt_size = a.ckpt_size ? a.ckpt_size : a.all ? 4 * GiB : 1 * GiB,
		.readonly = a.readonly,
		.no_drop = a.no_drop,
		.seed = (uint64_t)a.seed,
	};
	struct dk_case cases[sizeof(all_set) / sizeof(all_set[0])];
	uint32_t ncases = build_cases(&a, mask, cases);
	uint32_t nt = (uint32_t)(argc - first);
	if (mpi_wanted()) /* started by mpirun: every rank on its own files, rank 0 the report */
		return disk_mpi(&cf, cases, ncases, argv + first, nt, a.destructive, a.json,
				a.pattern || a.bs || a.qd || a.threads ? "custom" : a.all ? "all" : "quick");
	uint32_t rounds = (uint32_t)a.repeat;
	size_t ncells = (size_t)nt * ncases;
	struct dk_target *targets = calloc(nt, sizeof(*targets));
	struct dk_result *all = calloc(ncells * rounds, sizeof(*all));
	struct dk_result *res = calloc(ncells, sizeof(*res));
	if (!targets || !all || !res) {
		free(targets);
		free(all);
		free(res);
		fprintf(stderr, "stoker disk: out of memory\n");
		return EXIT_FAIL;
	}
	int rc = EXIT_OK;
	uint32_t opened = 0;
	bool ran = false;
	/* every PATH is checked before anything is written to any of them */
	for (; opened < nt; opened++) {
		char why[512];
		int r = dk_target_open(&targets[opened], argv[first + (int)opened], a.destructive,
				       a.readonly, why, sizeof(why));
		if (r) {
			fprintf(stderr, "stoker disk: %s\n", why);
			/* a PATH that is not there is bad usage, like one refused */
			rc = r == DK_REFUSED || r == -ENOENT || r == -ENOTDIR ? EXIT_USAGE : EXIT_FAIL;
			break;
		}
	}
	for (size_t i = 0; rc == EXIT_OK && i < ncells * rounds; i++)
		if (stk_hist_create(&all[i].hist)) {
			fprintf(stderr, "stoker disk: out of memory\n");
			rc = EXIT_FAIL;
		}
	if (rc == EXIT_OK) {
		ran = true;
		atomic_store(&dk_stop, 0);
		dk_signals_install();
		/* rounds alternate the PATHs; a PATH's data file stays for its rounds */
		for (uint32_t k = 0; k < rounds && !atomic_load(&dk_stop); k++)
			for (uint32_t ti = 0; ti < nt && !atomic_load(&dk_stop); ti++) {
				for (uint32_t ci = 0; ci < ncases && !atomic_load(&dk_stop); ci++) {
					struct dk_result *r = &all[(k * nt + ti) * ncases + ci];
					r->ran = true;
					if (dk_run_case(&targets[ti], &cases[ci], &cf, r)) {
						fprintf(stderr, "stoker disk: %s: %s\n",
							dk_pattern_name[cases[ci].pat], r->errmsg);
						rc = EXIT_FAIL;
					}
				}
			}
		for (uint32_t ti = 0; ti < nt; ti++)
			dk_target_done(&targets[ti]);
		dk_cleanup();
		if (atomic_load(&dk_stop))
			fprintf(stderr, "stoker disk: interrupted; the files it created are removed\n");
	}
	for (uint32_t i = 0; i < opened; i++)
		dk_target_close(&targets[i]);
	bool stopped = atomic_load(&dk_stop);
	if (ran) {
		struct dk_report rp = {&cf, a.pattern || a.bs || a.qd || a.threads ? "custom"
					    : a.all ? "all" : "quick",
				       targets, nt, cases, ncases, res, stopped, rounds, all, ""};
		/* each cell shows its median round (latencies too) */
		for (uint32_t ti = 0; ti < nt; ti++)
			for (uint32_t ci = 0; ci < ncases; ci++)
				res[(size_t)ti * ncases + ci] = *dk_median_round(&rp, ti, ci);
		char warn[512] = "";
		double shortest = 1e300;
		const struct dk_result *sh = NULL;
		for (size_t i = 0; i < ncells * rounds; i++)
			if (all[i].ran && !all[i].skipped && !all[i].err && all[i].c.runtime > 0 &&
			    all[i].seconds < shortest) {
				shortest = all[i].seconds;
				sh = &all[i];
			}
		if (sh && shortest < MIN_RUNTIME_S) /* which one, and what makes it longer */
			snprintf(warn, sizeof(warn), "%s on %s was measured only %.2f s (%s): under "
				 "%.0f s a figure is mostly noise", dk_pattern_name[sh->c.pat],
				 sh->target, shortest, sh->c.pat == DK_CHECKPOINT
				 ? "the time to write --checkpoint-size; a larger one writes longer"
				 : "--runtime", MIN_RUNTIME_S);
		else if (a.runtime == 0)
			snprintf(warn, sizeof(warn), "--runtime 0: each block pattern is one pass over "
				 "the data, however short");
		rp.warning = warn;
		if (a.json ? dk_print_json(stdout, &rp) : (dk_print_table(stdout, &rp), 0)) {
			fprintf(stderr, "stoker disk: cannot write the JSON\n");
			rc = EXIT_FAIL;
		}
		if (a.plot) {
			char png[4096];
			int pr = dk_plot(&rp, a.plot, png, sizeof(png));
			if (pr < 0) {
				fprintf(stderr, "stoker disk: %s: %s\n", a.plot, strerror(-pr));
				rc = EXIT_FAIL;
			} else if (!a.json) {
				printf("\nplot: %s%s%s\n", a.plot, png[0] ? ", " : "", png);
			}
		}
	}
	dk_signals_restore();
	for (size_t i = 0; i < ncells * rounds; i++)
		stk_hist_destroy(all[i].hist);
	free(all);
	free(res);
	free(targets);
	return stopped ? 130 : rc;
}
