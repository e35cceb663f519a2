/* bench/torch.c — `stoker bench --vs torch`: PyTorch's DataLoader over the
 * same samples, at its best worker count, beside the loader.  The DataLoader
 * side is Python (python3 -m stoker.vs_torch, in the package), started here
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

json_t *bench_vs_torch(const struct bench_opts *o, const struct stk_loader_opts *lo,
		       const struct stk_image_opts *img, uint64_t samples, char *why, size_t len)
{
	static const char *const caches[] = {"warm", "cold", "as-is"};
	char bs[32], n[32], seed[32], mean[3][32], sd[3][32], secs[32];
	struct py_crop_args ca;
	/* each worker count as long as one of stoker's runs (at least a second) */
	snprintf(secs, sizeof(secs), "%g", o->runtime > 1 ? o->runtime : 1);
	snprintf(bs, sizeof(bs), "%u", lo->batch_size);
	snprintf(n, sizeof(n), "%llu", (unsigned long long)samples);
	snprintf(seed, sizeof(seed), "%llu", (unsigned long long)lo->seed);
	const char *argv[64] = {python(), "-c", BENCH_PY_BOOT("vs_torch"), o->path, "--json",
				"--batch-size", bs, "--samples", n, "--seconds", secs,
				"--cache", caches[o->cache], "--seed", seed};
	int k = 15;
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

void vs_torch_print(const json_t *vt, double stoker_sps)
{
	const json_t *runs = json_object_get(vt, "runs");
	const json_t *best = json_object_get(vt, "best");
	double bsps = json_real_value(json_object_get(best, "samples_per_s"));
	printf("\n  vs PyTorch's DataLoader (torch %s, the same samples, num_workers 0..%lld):\n",
	       json_string_value(json_object_get(vt, "torch")),
	       (long long)json_integer_value(json_object_get(vt, "cpus")));
	json_int_t bw = json_integer_value(json_object_get(best, "workers"));
	size_t i;
	const json_t *r;
	json_array_foreach(runs, i, r) {
		json_int_t w = json_integer_value(json_object_get(r, "workers"));
		printf("    num_workers=%-3lld %12.0f samples/s%s\n", (long long)w,
		       json_real_value(json_object_get(r, "samples_per_s")), w == bw ? "  (best)" : "");
	}
	if (bsps > 0)
		printf("    stoker / best DataLoader %10.2fx\n", stoker_sps / bsps);
}
