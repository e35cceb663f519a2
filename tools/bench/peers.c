/* bench/peers.c — `stoker bench --vs dali,spdl,...`: the real peers (PyTorch
 * 2.x's DataLoader, DALI, SPDL, Mosaic Streaming, LitData, WebDataset, FFCV)
 * beside stoker on the same samples.  The measuring is Python's (python3 -m
 * stoker.vs_peers, in the package): each run a process of its own, sampled
 * for peak PSS and CPU, stoker and the peers in alternating rounds, every run
 * timed by the rule --vs torch follows (start-up, --ramp, the window).  It runs
 * in the peers' virtual environment that bench/peers/setup.sh makes
 * ($STOKER_PEERS_PYTHON, else $STOKER_PEERS/bin/python, else
 * <cache>/stoker/peers/bin/python); without one, one line says what was
 * skipped and the command that makes it. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/bench.h"

static const char *const known[] = {"torch", "torch-pil", "dali", "dali-wds", "spdl", "ffcv",
				    "streaming", "litdata", "wds", "all", NULL};

bool bench_vs_torch_only(const char *vs)
{
	return strcmp(vs, "torch") == 0;
}

int bench_vs_names(const char *vs, const char *const *names, const char *kind, char *why,
		   size_t len)
{
	char list[256] = "", buf[256];
	for (int k = 0; names[k]; k++)
		snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s", k ? ", " : "",
			 names[k]);
	if (snprintf(buf, sizeof(buf), "%s", vs) >= (int)sizeof(buf) || !*vs) {
		snprintf(why, len, "--vs: a list of %ss: %s", kind, list);
		return -1;
	}
	char *save = NULL;
	for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		int k = 0;
		while (names[k] && strcmp(names[k], t))
			k++;
		if (!names[k]) {
			snprintf(why, len, "--vs: '%s' is not a %s (%s)", t, kind, list);
			return -1;
		}
	}
	return 0;
}

int bench_vs_check(const char *vs, char *why, size_t len)
{
	return bench_vs_names(vs, known, "peer", why, len);
}

int bench_peers_python(char *buf, size_t len, char *dir, size_t dlen)
{
	const char *e = getenv("STOKER_PEERS_PYTHON");
	if (e && *e) {
		snprintf(buf, len, "%s", e);
		snprintf(dir, dlen, "%s", e);
		return access(buf, X_OK) == 0 ? 0 : -1;
	}
	e = getenv("STOKER_PEERS");
	if (e && *e) {
		snprintf(dir, dlen, "%s", e);
	} else {
		const char *x = getenv("XDG_CACHE_HOME"), *h = getenv("HOME");
		if (x && *x)
			snprintf(dir, dlen, "%s/stoker/peers", x);
		else
			snprintf(dir, dlen, "%s/.cache/stoker/peers", h && *h ? h : "/root");
	}
	snprintf(buf, len, "%s/bin/python", dir);
	return access(buf, X_OK) == 0 ? 0 : -1;
}

json_t *bench_vs_peers(const struct bench_opts *o, const struct stk_loader_opts *lo,
		       const struct stk_image_opts *img, char *why, size_t len)
{
	char py[PATH_MAX + 16], dir[PATH_MAX];
	if (bench_peers_python(py, sizeof(py), dir, sizeof(dir))) {
		snprintf(why, len, "skipped %s: no peers environment at %s; make it with: make peers "
				   "(sh bench/peers/setup.sh)", o->vs, dir);
		return NULL;
	}
	char bs[32], seed[32], secs[32], ramp[32], rounds[32], self[PATH_MAX];
	struct py_crop_args ca;
	snprintf(bs, sizeof(bs), "%u", lo->batch_size);
	snprintf(seed, sizeof(seed), "%llu", (unsigned long long)lo->seed);
	/* each run at least 3 s after its first batch; 5 rounds at least (medians) */
	snprintf(secs, sizeof(secs), "%g", o->runtime > 3 ? o->runtime : 3);
	snprintf(ramp, sizeof(ramp), "%g", o->ramp); /* every side's, as stoker's runs */
	snprintf(rounds, sizeof(rounds), "%lld", (long long)(o->repeat > 5 ? o->repeat : 5));
	ssize_t sl = readlink("/proc/self/exe", self, sizeof(self) - 1);
	self[sl > 0 ? sl : 0] = 0;
	const char *mode = !o->image ? "raw" : img->crop ? "val" : "train";
	const char *argv[48] = {py, "-c", BENCH_PY_BOOT("vs_peers"), o->path, "--json", "--peers", o->vs,
				"--mode", mode, "--cache", o->cache == CACHE_COLD ? "cold" : "warm",
				"--batch-size", bs, "--seed", seed, "--seconds", secs, "--ramp", ramp,
				"--rounds", rounds, "--stoker", self};
	int k = 23;
	if (o->image) {
		char dt[16];
		stk_option_get(stk_option_find("dtype"), img, dt, sizeof(dt));
		if (strcmp(dt, "uint8") || (img->flags & (STK_IMG_NORMALIZE | STK_IMG_NO_FLIP)) ||
		    img->width != img->height) {
			snprintf(why, len, "the peers are compared on square uint8 images with the "
					   "flip (no --dtype, --normalize, --no-flip)");
			return NULL;
		}
		k = bench_py_crop_args(img, &ca, argv, k);
	}
	argv[k] = NULL;
	char ierr[512];
	json_t *j = bench_run_py((char *const *)argv, "vs_peers", "table", JSON_ARRAY, ierr,
				 sizeof(ierr), why, len);
	if (!j && !why[0])
		snprintf(why, len, "skipped %s: %s cannot import stoker.vs_peers (%s); remake the "
				   "venv: make peers", o->vs, py, ierr[0] ? ierr : "?");
	return j;
}

void vs_peers_print(const json_t *vp)
{
	size_t i;
	const json_t *line;
	putchar('\n');
	json_array_foreach(json_object_get(vp, "table"), i, line)
		printf("  %s\n", json_string_value(line));
}
