/*
 * disk/disk_mpi.c — `mpirun -np N stoker disk PATH...`: every rank runs the same
 * cases on its own files, in a folder of its own inside PATH
 * (.stoker-disk-<pid>-r<rank>, removed afterwards), so N clients load the
 * storage at once, as IOR's file-per-process mode does.  The ranks lay out
 * their data files, meet before each case and run it; rank 0 merges the
 * results (bytes and I/Os summed over the slowest rank's time, the latency
 * histograms bucket by bucket) into the usual table or JSON, followed by the
 * spread over the ranks with the slowest one named.  An existing file or
 * device is only read under mpirun (--readonly): the ranks would overwrite
 * each other.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "disk/disk.h"
#include "common/mpi.h"

static double env_timeout(void)
{
	const char *v = getenv("STOKER_MPI_TIMEOUT");
	char *end;
	double t = v ? strtod(v, &end) : 0;
	return v && *v && !*end && t > 0 ? t : 300;
}

static char *options_text(const struct dk_conf *cf, const struct dk_case *cases, unsigned n,
			  char **paths, unsigned np, const char *destructive, bool json)
{
	size_t cap = 8192 + (size_t)np * (PATH_MAX + 8), k = 0;
	char *t = malloc(cap);
	if (!t)
		return NULL;
	k += (size_t)snprintf(t + k, cap - k,
			      "engine=%d\ndirect=%d\nsize=%llu\nfiles=%llu\nfile_size=%llu\n"
			      "checkpoint_size=%llu\nreadonly=%d\nno_drop=%d\nseed=%llu\njson=%d\n"
			      "destructive=%s\n",
			      cf->engine, cf->direct, (unsigned long long)cf->size,
			      (unsigned long long)cf->files, (unsigned long long)cf->file_mean,
			      (unsigned long long)cf->ckpt_size, cf->readonly, cf->no_drop,
			      (unsigned long long)cf->seed, json, destructive ? destructive : "");
	for (unsigned i = 0; i < n && k < cap; i++)
		k += (size_t)snprintf(t + k, cap - k, "case %u=%s bs %llu qd %u threads %u runtime %g "
				      "ramp %g\n", i, dk_pattern_name[cases[i].pat],
				      (unsigned long long)cases[i].bs, cases[i].qd, cases[i].threads,
				      cases[i].runtime, cases[i].ramp);
	for (unsigned i = 0; i < np && k < cap; i++)
		k += (size_t)snprintf(t + k, cap - k, "path %u=%s\n", i, paths[i]);
	return t;
}

/* One rank's result of one case, as it travels to rank 0. */
static char *result_text(const struct mpi *m, const struct dk_result *r)
{
	json_t *j = json_pack("{s:i,s:s,s:b,s:b,s:i,s:s,s:I,s:I,s:f,s:f,s:f,s:f,s:I,s:I,s:I,s:f,"
			      "s:b,s:s,s:s,s:o}",
			      "rank", m->rank, "host", m->host, "ran", r->ran, "skipped", r->skipped,
			      "err", r->err, "errmsg", r->errmsg, "bytes", (json_int_t)r->bytes,
			      "ios", (json_int_t)r->ios, "seconds", r->seconds, "write_s",
			      r->write_s, "fsync_s", r->fsync_s, "read_s", r->read_s, "read_bytes",
			      (json_int_t)r->read_bytes, "nfiles", (json_int_t)r->nfiles,
			      "files_bytes", (json_int_t)r->files_bytes, "create_s", r->create_s,
			      "direct", r->direct, "engine", r->engine ? r->engine : "", "cache",
			      r->cache, "hist", mpi_hist_json(r->hist));
	char *t = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	return t;
}

static double max_d(double a, double b)
{
	return a > b ? a : b;
}

/* Rank 0: the ranks' results of one case into *agg (its hist already made),
 * and their spread as JSON. */
static json_t *merge(struct mpi *m, char **all, struct dk_result *agg, const char *target)
{
	int n = m->size, nskip = 0;
	double *mb = calloc((size_t)n, sizeof(double)), *io = calloc((size_t)n, sizeof(double));
	json_t *ranks = json_array();
	agg->ran = true;
	agg->target = target;
	for (int r = 0; r < n; r++) {
		json_error_t je;
		json_t *j = json_loads(all[r], 0, &je);
		if (!j)
			continue;
		const char *host = json_string_value(json_object_get(j, "host"));
		double s = json_number_value(json_object_get(j, "seconds"));
		uint64_t bytes = (uint64_t)json_integer_value(json_object_get(j, "bytes"));
		uint64_t ios = (uint64_t)json_integer_value(json_object_get(j, "ios"));
		int err = (int)json_integer_value(json_object_get(j, "err"));
		if (err && !agg->err) {
			agg->err = err;
			snprintf(agg->errmsg, sizeof(agg->errmsg), "rank %d (%s): %s", r, host,
				 json_string_value(json_object_get(j, "errmsg")));
		}
		nskip += json_is_true(json_object_get(j, "skipped"));
		if (json_is_true(json_object_get(j, "skipped")) && !agg->errmsg[0])
			snprintf(agg->errmsg, sizeof(agg->errmsg), "%s",
				 json_string_value(json_object_get(j, "errmsg")));
		agg->bytes += bytes;
		agg->ios += ios;
		agg->seconds = max_d(agg->seconds, s);
		agg->write_s = max_d(agg->write_s, json_number_value(json_object_get(j, "write_s")));
		agg->fsync_s = max_d(agg->fsync_s, json_number_value(json_object_get(j, "fsync_s")));
		agg->read_s = max_d(agg->read_s, json_number_value(json_object_get(j, "read_s")));
		agg->create_s = max_d(agg->create_s, json_number_value(json_object_get(j, "create_s")));
		agg->read_bytes += (uint64_t)json_integer_value(json_object_get(j, "read_bytes"));
		agg->nfiles += (uint64_t)json_integer_value(json_object_get(j, "nfiles"));
		agg->files_bytes += (uint64_t)json_integer_value(json_object_get(j, "files_bytes"));
		if (r == 0) {
			agg->direct = json_is_true(json_object_get(j, "direct"));
			snprintf(agg->cache, sizeof(agg->cache), "%s",
				 json_string_value(json_object_get(j, "cache")));
			const char *e = json_string_value(json_object_get(j, "engine"));
			agg->engine = e && !strcmp(e, "psync") ? "psync" : "io_uring";
		}
		mpi_hist_add_json(agg->hist, json_object_get(j, "hist"));
		mb[r] = s > 0 ? (double)bytes / s / 1e6 : 0;
		io[r] = s > 0 ? (double)ios / s : 0;
		json_array_append_new(ranks, json_pack("{s:i,s:s,s:f,s:f,s:f,s:I,s:I,s:i,s:s}", "rank",
						       r, "host", host, "mb_per_s", mb[r], "iops",
						       io[r], "seconds", s, "bytes", (json_int_t)bytes,
						       "ios", (json_int_t)ios, "err", err, "errmsg",
						       json_string_value(json_object_get(j, "errmsg"))));
		json_decref(j);
	}
	agg->skipped = nskip == n;
	struct mpi_spread sm, si;
	mpi_spread_of(mb, n, &sm);
	mpi_spread_of(io, n, &si);
	free(mb);
	free(io);
	return json_pack("{s:o,s:o,s:o}", "mb_per_s", mpi_spread_json(&sm), "iops",
			 mpi_spread_json(&si), "ranks", ranks);
}

static void print_spread(const struct mpi *m, const struct dk_case *cases, unsigned ncases,
			 char **paths, unsigned np, json_t *spreads)
{
	printf("\nper rank (mpirun: %d ranks; each its own files):\n", m->size);
	printf("  %-34s %11s %11s %11s   %s\n", "case", "MB/s min", "median", "max",
	       "slowest rank");
	for (unsigned t = 0; t < np; t++) {
		if (np > 1)
			printf("  %s\n", paths[t]);
		for (unsigned c = 0; c < ncases; c++) {
			json_t *s = json_array_get(spreads, (size_t)t * ncases + c);
			if (!s)
				continue;
			const json_t *mb = json_object_get(s, "mb_per_s");
			int slow = (int)json_integer_value(json_object_get(mb, "slowest_rank"));
			const json_t *rk = json_array_get(json_object_get(s, "ranks"), (size_t)slow);
			char title[96], bs[24];
			const struct dk_case *k = &cases[c];
			if (k->pat == DK_SMALLFILES)
				snprintf(title, sizeof(title), "%s qd %u", dk_pattern_name[k->pat], k->qd);
			else
				snprintf(title, sizeof(title), "%s %s qd %u x%u", dk_pattern_name[k->pat],
					 dk_fmt_iec(bs, sizeof(bs), k->bs), k->qd, k->threads);
			printf("  %-34s %11.1f %11.1f %11.1f   %d (%s)\n", title,
			       json_number_value(json_object_get(mb, "min")),
			       json_number_value(json_object_get(mb, "median")),
			       json_number_value(json_object_get(mb, "max")), slow,
			       json_string_value(json_object_get(rk, "host")));
		}
	}
}

int disk_mpi(const struct dk_conf *cf, const struct dk_case *cases, unsigned ncases,
	     char **paths, unsigned np, const char *destructive, bool json, const char *set)
{
	struct mpi m;
	char why[1024];
	if (mpi_start(&m, env_timeout(), why, sizeof(why))) {
		fprintf(stderr, "stoker disk: %s\n", why);
		return EXIT_FAIL;
	}
	int rc = EXIT_OK;
	char *text = options_text(cf, cases, ncases, paths, np, destructive, json);
	struct dk_target *base = calloc(np, sizeof(*base)), *own = calloc(np, sizeof(*own));
	struct dk_result *res = calloc((size_t)np * ncases, sizeof(*res));
	char(*sub)[PATH_MAX] = calloc(np, sizeof(*sub));
	json_t *spreads = json_array();
	unsigned opened = 0;
	if (!text || !base || !own || !res || !sub) {
		fprintf(stderr, "stoker disk: out of memory\n");
		rc = EXIT_FAIL;
		goto out;
	}
	if (!mpi_same_options(&m, "disk", text)) {
		rc = EXIT_USAGE;
		goto out;
	}
	/* every rank opens every PATH, and in a folder a folder of its own */
	char fail[PATH_MAX + 1100] = "";
	bool refused = false;
	for (; opened < np && !fail[0]; opened++) {
		int r = dk_target_open(&base[opened], paths[opened], destructive, cf->readonly, why,
				       sizeof(why));
		if (r) {
			snprintf(fail, sizeof(fail), "%s", why);
			refused = r == DK_REFUSED;
			break;
		}
		if (base[opened].kind != DK_DIR) {
			if (base[opened].destructive) {
				snprintf(fail, sizeof(fail), "%s: under mpirun every rank would write the "
					 "same %s: benchmark a folder (each rank writes its own files) "
					 "or pass --readonly", paths[opened],
					 base[opened].kind == DK_FILE ? "file" : "device");
				refused = true;
				opened++;
				break;
			}
			own[opened] = base[opened];
			own[opened].dirfd = -1; /* closed with base */
			continue;
		}
		char name[64];
		snprintf(name, sizeof(name), DK_PREFIX "%d-r%d", (int)getpid(), m.rank);
		int e = dk_mkdir(base[opened].dirfd, name);
		snprintf(sub[opened], sizeof(sub[opened]), "%s/%s", paths[opened], name);
		if (e || (e = dk_target_open(&own[opened], sub[opened], NULL, false, why, sizeof(why)))) {
			snprintf(fail, sizeof(fail), "%s: %s", sub[opened],
				 e < 0 ? stk_strerror(e) : why);
			opened++;
			break;
		}
	}
	if (!mpi_check(&m, "disk", "open", fail[0] ? fail : NULL)) {
		rc = refused ? EXIT_USAGE : EXIT_FAIL;
		goto out;
	}
	for (size_t i = 0; i < (size_t)np * ncases; i++)
		if (stk_hist_create(&res[i].hist))
			rc = EXIT_FAIL;
	atomic_store(&dk_stop, 0);
	dk_signals_install();
	bool stop = false;
	for (unsigned ti = 0; ti < np && !stop; ti++) {
		bool block = false;
		for (unsigned ci = 0; ci < ncases; ci++)
			block |= cases[ci].pat <= DK_RANDREAD;
		if (block) { /* the data files, before anyone starts timing */
			struct dk_result lay = {0};
			stk_hist_create(&lay.hist);
			int e = dk_prepare(&own[ti], cf, &lay);
			stk_hist_destroy(lay.hist);
			if (!mpi_check(&m, "disk", "layout", e ? lay.errmsg : NULL)) {
				rc = EXIT_FAIL;
				break;
			}
		}
		for (unsigned ci = 0; ci < ncases && !stop; ci++) {
			char phase[64];
			snprintf(phase, sizeof(phase), "start %s", dk_pattern_name[cases[ci].pat]);
			if (!mpi_check(&m, "disk", phase, atomic_load(&dk_stop) ? "interrupted" : NULL)) {
				stop = true;
				rc = 130;
				break;
			}
			struct dk_result mine = {0};
			stk_hist_create(&mine.hist);
			mine.ran = true;
			if (dk_run_case(&own[ti], &cases[ci], cf, &mine) && m.rank)
				fprintf(stderr, "stoker disk: rank %d: %s: %s\n", m.rank,
					dk_pattern_name[cases[ci].pat], mine.errmsg);
			char *t = result_text(&m, &mine);
			stk_hist_destroy(mine.hist);
			char **all = NULL;
			mpi_gather(&m, "results", t ? t : "{}", &all);
			free(t);
			if (m.rank == 0) {
				struct dk_result *agg = &res[(size_t)ti * ncases + ci];
				agg->c = cases[ci];
				json_t *sp = merge(&m, all, agg, paths[ti]);
				json_object_set_new(sp, "target", json_string(paths[ti]));
				json_object_set_new(sp, "pattern",
						    json_string(dk_pattern_name[cases[ci].pat]));
				json_object_set_new(sp, "bs", json_integer((json_int_t)cases[ci].bs));
				json_object_set_new(sp, "qd", json_integer(cases[ci].qd));
				json_object_set_new(sp, "threads", json_integer(cases[ci].threads));
				json_array_append_new(spreads, sp);
				mpi_free_all(&m, all);
				if (agg->err) {
					fprintf(stderr, "stoker disk: %s: %s\n", dk_pattern_name[cases[ci].pat],
						agg->errmsg);
					rc = EXIT_FAIL;
				}
			}
			mpi_reply(&m, "results", NULL, NULL);
		}
		dk_target_done(&own[ti]);
	}
	dk_cleanup(); /* our files, then our folders (last in, first out) */
	dk_signals_restore();
	if (m.rank == 0 && !stop) {
		struct dk_report rp = {cf, set, base, np, cases, ncases, res, false, 1, res, ""};
		if (json) {
			char *buf = NULL;
			size_t len = 0;
			FILE *mf = open_memstream(&buf, &len);
			int e = mf ? dk_print_json(mf, &rp) : -ENOMEM;
			if (mf)
				fclose(mf);
			json_error_t je;
			json_t *j = !e ? json_loads(buf, 0, &je) : NULL;
			free(buf);
			if (j) {
				int hosts = 0; /* the distinct hosts of the first case's ranks */
				json_t *seen = json_object();
				size_t i;
				json_t *rk;
				json_array_foreach(json_object_get(json_array_get(spreads, 0), "ranks"), i,
						   rk)
					json_object_set(seen, json_string_value(json_object_get(rk, "host")),
							json_true());
				hosts = (int)json_object_size(seen);
				json_decref(seen);
				json_object_set_new(j, "mpi", json_pack("{s:i,s:i,s:O}", "world_size",
									m.size, "hosts", hosts, "cases",
									spreads));
				json_dumpf(j, stdout, JSON_INDENT(2));
				putchar('\n');
				json_decref(j);
			} else {
				fprintf(stderr, "stoker disk: cannot write the JSON\n");
				rc = EXIT_FAIL;
			}
		} else {
			printf("stoker disk under mpirun: %d ranks, each on its own files; the columns "
			       "below are the aggregate (bytes and I/Os of all ranks over the slowest "
			       "rank's time, latency merged over the ranks)\n\n",
			       m.size);
			dk_print_table(stdout, &rp);
			print_spread(&m, cases, ncases, paths, np, spreads);
		}
		fflush(stdout);
	}
	mpi_check(&m, "disk", "end", NULL);
out:
	dk_cleanup(); /* what a failed open left (nothing after a run) */
	for (unsigned i = 0; base && i < opened; i++)
		dk_target_close(&base[i]);
	for (unsigned i = 0; own && i < opened; i++)
		if (own[i].dirfd >= 0 && own[i].kind == DK_DIR)
			dk_target_close(&own[i]);
	for (size_t i = 0; res && i < (size_t)np * ncases; i++)
		stk_hist_destroy(res[i].hist);
	json_decref(spreads);
	free(res);
	free(base);
	free(own);
	free(sub);
	free(text);
	mpi_end(&m);
	return rc;
}
