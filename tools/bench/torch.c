/* bench/torch.c — `stoker bench --vs torch`: PyTorch's DataLoader over the
 * same samples at num_workers 0, 2 and the CPUs, and stoker's Python binding
 * with the options this run was given, each timed by one rule (start-up =
 * create until the first batch, then --ramp, then a window of --runtime;
 * the ratio of the steady rates).  Both sides are Python (python3 -m
 * stoker.vs_torch, in the package), started here
 * with posix_spawn: the interpreter from $STOKER_PYTHON, else Debian's
 * /usr/bin/python3 (where python3-torch lives), else python3 on PATH; the
 * package beside this binary's source tree when there is one, and the very
 * libstoker this process runs (STOKER_LIB), so both sides read one index. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench/bench.h"
#include "common/cli.h"

extern char **environ;


static const char *python(void)
{
	const char *p = getenv("STOKER_PYTHON");
	if (p && *p)
		return p;
	return access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
}

/* NAME=VALUE into buf; returns buf. */
static char *env_kv(char *buf, size_t len, const char *name, const char *value)
{
	snprintf(buf, len, "%s=%s", name, value);
	return buf;
}

/* The environment for the child: ours, with PYTHONPATH led by the source
 * tree's python/ (when this binary is a build tree's) and STOKER_LIB set to
 * the library this process loaded. */
static char **child_env(char *pp, size_t pplen, char *lib, size_t liblen)
{
	size_t n = 0;
	while (environ[n])
		n++;
	char **env = calloc(n + 3, sizeof(*env));
	if (!env)
		return NULL;
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (strncmp(environ[i], "PYTHONPATH=", 11) && strncmp(environ[i], "STOKER_LIB=", 11))
			env[k++] = environ[i];
	char exe[PATH_MAX], tree[PATH_MAX + 32], probe[PATH_MAX + 64];
	ssize_t el = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	const char *old = getenv("PYTHONPATH");
	if (el > 0) {
		exe[el] = 0;
		char *slash = strrchr(exe, '/');
		if (slash)
			*slash = 0;
		snprintf(tree, sizeof(tree), "%s/../python", exe);
		snprintf(probe, sizeof(probe), "%s/stoker/vs_torch.py", tree);
		if (access(probe, R_OK) == 0) {
			char v[PATH_MAX * 2 + 64];
			snprintf(v, sizeof(v), "%s%s%s", tree, old && *old ? ":" : "", old ? old : "");
			env[k++] = env_kv(pp, pplen, "PYTHONPATH", v);
		} else if (old) {
			env[k++] = env_kv(pp, pplen, "PYTHONPATH", old);
		}
	}
	Dl_info di;
	if (dladdr((void *)stk_version, &di) && di.dli_fname && di.dli_fname[0] == '/')
		env[k++] = env_kv(lib, liblen, "STOKER_LIB", di.dli_fname);
	env[k] = NULL;
	return env;
}

/* Runs argv with stdout into a growing buffer; the exit status or <0. */
int bench_run_capture(char *const argv[], char **out)
{
	int fd[2];
	if (pipe2(fd, O_CLOEXEC))
		return -errno;
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, fd[1], STDOUT_FILENO);
	char pp[PATH_MAX * 2 + 96], lib[PATH_MAX + 32];
	char **env = child_env(pp, sizeof(pp), lib, sizeof(lib));
	pid_t pid;
	int rc = env ? posix_spawnp(&pid, argv[0], &fa, NULL, argv, env) : ENOMEM;
	posix_spawn_file_actions_destroy(&fa);
	free(env);
	close(fd[1]);
	if (rc) {
		close(fd[0]);
		return -rc;
	}
	size_t cap = 1 << 16, len = 0;
	char *buf = malloc(cap);
	ssize_t got;
	while (buf && (got = read(fd[0], buf + len, cap - len - 1)) != 0) {
		if (got < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		len += (size_t)got;
		if (cap - len < 1024) {
			char *nb = realloc(buf, cap * 2);
			if (!nb)
				break;
			buf = nb;
			cap *= 2;
		}
	}
	close(fd[0]);
	int st = 0;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (buf)
		buf[len] = 0;
	*out = buf;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

/* The options the user changed (their text differs from the default's),
 * as "--option NAME=TEXT" pairs at argv[k]: the loader's, and the image
 * options stoker.Image takes that the crop's arguments do not carry; batch
 * size and seed travel as their own flags.  The new k. */
static int changed_options(const struct bench_opts *o, const char **argv, int k, int max,
			   char (*text)[320])
{
	static const char *const image_kw[] = {"decode_threads", "layout", "max_pixels", "max_scans",
					       "max_decode_time", NULL};
	struct stk_loader_opts zl = {.size = sizeof(zl)}, dl = {.size = sizeof(dl)};
	struct stk_image_opts zi = {.size = sizeof(zi)}, di = {.size = sizeof(di)};
	const struct stk_option *r;
	int n = 0;
	for (int i = 0; (r = stk_option_at(i)) && k + 2 < max; i++) {
		bool img = r->group == STK_OPT_IMAGE;
		if (img) {
			int j = 0;
			while (image_kw[j] && strcmp(image_kw[j], r->name))
				j++;
			if (!o->image || !image_kw[j])
				continue;
		} else if (!strcmp(r->name, "batch_size") || !strcmp(r->name, "seed")) {
			continue;
		}
		const void *cur = img ? (const void *)&o->img : (const void *)&o->lo;
		void *def = img ? (void *)&di : (void *)&dl;
		char v[256], z[256], d[256];
		stk_option_set(r, def, NULL, NULL, 0);
		if (stk_option_get(r, cur, v, sizeof(v)) < 0 ||
		    stk_option_get(r, img ? (const void *)&zi : (const void *)&zl, z, sizeof(z)) < 0 ||
		    stk_option_get(r, def, d, sizeof(d)) < 0 || !strcmp(v, z) || !strcmp(v, d))
			continue;
		snprintf(text[n], sizeof(text[n]), "%s=%s", r->name, v);
		argv[k++] = "--option";
		argv[k++] = text[n++];
	}
	return k;
}

json_t *bench_vs_torch(const struct bench_opts *o, const struct stk_loader_opts *lo,
		       const struct stk_image_opts *img, uint64_t samples, char *why, size_t len)
{
	static const char *const caches[] = {"warm", "cold", "as-is"};
	char bs[32], n[32], seed[32], mean[3][32], sd[3][32], secs[32], ramp[32], rounds[32];
	static char opts[64][320]; /* argv points into it */
	struct py_crop_args ca;
	/* each side's window as long as one of stoker's runs (at least a second),
	 * after the same ramp */
	snprintf(secs, sizeof(secs), "%g", o->runtime > 1 ? o->runtime : 1);
	snprintf(ramp, sizeof(ramp), "%g", o->ramp);
	/* as many rounds of every side as stoker's own runs (--repeat), in turns */
	snprintf(rounds, sizeof(rounds), "%lld", (long long)(o->repeat > 0 ? o->repeat : 1));
	snprintf(bs, sizeof(bs), "%u", lo->batch_size);
	snprintf(n, sizeof(n), "%llu", (unsigned long long)samples);
	snprintf(seed, sizeof(seed), "%llu", (unsigned long long)lo->seed);
	const char *argv[200] = {python(), "-c", BENCH_PY_BOOT("vs_torch"), o->path, "--json",
				 "--batch-size", bs, "--samples", n, "--seconds", secs, "--ramp", ramp,
				 "--cache", caches[o->cache], "--seed", seed, "--rounds", rounds};
	int k = 19;
	k = changed_options(o, argv, k, 64 * 2, opts);
	if (o->image) {
		char dt[16], crop[32];
		stk_option_get(stk_option_find("dtype"), img, dt, sizeof(dt));
		stk_option_get(stk_option_find("crop"), img, crop, sizeof(crop));
		static char dtype[16], cropname[32]; /* argv outlives this block */
		snprintf(dtype, sizeof(dtype), "%s", dt);
		snprintf(cropname, sizeof(cropname), "%s", crop);
		const char *more[] = {"--image", "--crop", cropname, "--dtype", dtype};
		for (size_t i = 0; i < sizeof(more) / sizeof(more[0]); i++)
			argv[k++] = more[i];
		k = bench_py_crop_args(img, &ca, argv, k);
		if (img->flags & STK_IMG_NO_FLIP)
			argv[k++] = "--no-flip";
		if (img->flags & STK_IMG_NORMALIZE) {
			argv[k++] = "--normalize";
			argv[k++] = "--mean";
			for (int c = 0; c < 3; c++) {
				snprintf(mean[c], sizeof(mean[c]), "%.9g", (double)img->mean[c]);
				argv[k++] = mean[c];
			}
			argv[k++] = "--std";
			for (int c = 0; c < 3; c++) {
				snprintf(sd[c], sizeof(sd[c]), "%.9g", (double)img->std[c]);
				argv[k++] = sd[c];
			}
		}
	}
	argv[k] = NULL;
	char ierr[512];
	json_t *j = bench_run_py((char *const *)argv, "vs_torch", "best", JSON_OBJECT, ierr,
				 sizeof(ierr), why, len);
	if (!j && !why[0])
		snprintf(why, len, "skipped: %s (%s); install: apt-get install "
				   "python3-torch python3-torchvision (or `make peers` and --vs all)",
			 argv[0], ierr[0] ? ierr : "torch");
	return j;
}

int bench_py_crop_args(const struct stk_image_opts *img, struct py_crop_args *a,
		       const char **argv, int k)
{
	snprintf(a->size, sizeof(a->size), "%u", img->width);
	snprintf(a->frac, sizeof(a->frac), "%g", (double)img->crop_frac);
	snprintf(a->scale[0], sizeof(a->scale[0]), "%g", (double)img->scale_min);
	snprintf(a->scale[1], sizeof(a->scale[1]), "%g", (double)img->scale_max);
	snprintf(a->ratio[0], sizeof(a->ratio[0]), "%g", (double)img->ratio_min);
	snprintf(a->ratio[1], sizeof(a->ratio[1]), "%g", (double)img->ratio_max);
	const char *more[] = {"--size", a->size, "--crop-frac", a->frac, "--scale", a->scale[0],
			      a->scale[1], "--ratio", a->ratio[0], a->ratio[1]};
	for (size_t i = 0; i < sizeof(more) / sizeof(more[0]); i++)
		argv[k++] = more[i];
	return k;
}

json_t *bench_run_py(char *const argv[], const char *module, const char *key, int type,
		     char *ierr, size_t ielen, char *why, size_t len)
{
	char *out = NULL;
	int rc = bench_run_capture(argv, &out);
	json_t *j = NULL;
	why[0] = ierr[0] = 0;
	if (rc < 0) {
		snprintf(why, len, "cannot start %s: %s", argv[0], strerror(-rc));
	} else if (rc == 3) {
		char *nl = out ? strchr(out, '\n') : NULL;
		if (nl)
			*nl = 0;
		snprintf(ierr, ielen, "%s", out ? out : "");
	} else if (rc) {
		snprintf(why, len, "%s -m stoker.%s exited %d (see above)", argv[0], module, rc);
	} else {
		json_error_t je;
		j = out ? json_loads(out, 0, &je) : NULL;
		const json_t *v = j ? json_object_get(j, key) : NULL;
		if (!v || (int)json_typeof(v) != type) {
			snprintf(why, len, "stoker.%s printed no result", module);
			json_decref(j);
			j = NULL;
		}
	}
	free(out);
	return j;
}

/* One side's line: its start-up and steady rate, or why it has none. */
static void side_print(const char *name, const json_t *r, bool best)
{
	const char *err = json_string_value(json_object_get(r, "error"));
	if (err) {
		printf("    %-26s failed: %s\n", name, err);
		return;
	}
	char sps[96];
	struct spread sp = {.median = json_real_value(json_object_get(r, "samples_per_s")),
			    .min = json_real_value(json_object_get(r, "samples_per_s_min")),
			    .max = json_real_value(json_object_get(r, "samples_per_s_max")),
			    .n = (int)json_array_size(json_object_get(r, "rounds"))};
	printf("    %-26s %8.2f s %24s samples/s%s\n", name,
	       json_real_value(json_object_get(r, "startup_s")),
	       fmt_spread(sps, sizeof(sps), &sp, "%.0f"), best ? "  (best)" : "");
}

void vs_torch_print(const json_t *vt)
{
	const json_t *runs = json_object_get(vt, "runs");
	const json_t *best = json_object_get(vt, "best");
	const json_t *tm = json_object_get(vt, "timing");
	json_int_t nr = json_integer_value(json_object_get(tm, "rounds"));
	printf("\n  vs PyTorch's DataLoader (torch %s, the same samples, %lld CPUs); each side timed "
	       "alike:\n  start-up = create until the first batch, then a %.2f s ramp, then a "
	       "%.2f s window;\n  %lld round%s of every side, in turns (medians):\n",
	       json_string_value(json_object_get(vt, "torch")),
	       (long long)json_integer_value(json_object_get(vt, "cpus")),
	       json_real_value(json_object_get(tm, "ramp_s")),
	       json_real_value(json_object_get(tm, "window_s")), (long long)nr, nr == 1 ? "" : "s");
	printf("    %-26s %10s %34s\n", "", "start-up", "steady (min-max)");
	side_print("stoker (Python binding)", json_object_get(vt, "stoker"), false);
	json_int_t bw = json_integer_value(json_object_get(best, "workers"));
	size_t i;
	const json_t *r;
	json_array_foreach(runs, i, r) {
		json_int_t w = json_integer_value(json_object_get(r, "workers"));
		char name[64];
		snprintf(name, sizeof(name), "DataLoader num_workers=%lld", (long long)w);
		side_print(name, r, w == bw);
	}
	const json_t *ratio = json_object_get(vt, "ratio");
	if (ratio)
		printf("    stoker / best DataLoader %10.2fx (steady rates)\n", json_real_value(ratio));
}
