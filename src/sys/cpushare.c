/*
 * sys/cpushare.c — a rank's share of its host's CPUs, for the loader's default
 * thread counts and their affinity (one owner: the loader, Python and
 * `stoker doctor` all ask here).
 *
 * The ranks on a host come from the launcher: torchrun's LOCAL_RANK and
 * LOCAL_WORLD_SIZE, else Open MPI's OMPI_COMM_WORLD_LOCAL_RANK and _SIZE, or
 * the loader's options.  The CPUs they divide are the cgroup's cpuset (else
 * the online CPUs) as far as this process's affinity mask allows, and no more
 * than the cgroup's cpu.max quota.  If the launcher already bound the rank
 * (its mask is a strict part of the host's), that mask is its share; else
 * rank r takes the r-th slice of the mask.  Within the share one CPU is left
 * to the training thread (the one the creating thread runs on, if it is in
 * the share): the loader's threads are pinned to the rest, so decode threads
 * never take the core the trainer's Python/CUDA launch thread runs on.  The
 * trainer's thread itself is not pinned: threads it starts later (PyTorch's
 * intra-op pool) would inherit a one-CPU mask.  Without a launcher nothing is
 * pinned and the defaults are today's: usable CPUs - 1 decode threads.
 */
#include "sys/cpushare.h"
#include "sys/sys_int.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* "0-3,8,10-11" → set; -EINVAL if malformed. */
static int parse_cpulist(const char *s, cpu_set_t *set)
{
	CPU_ZERO(set);
	while (*s && *s != '\n') {
		char *end;
		unsigned long a = strtoul(s, &end, 10), b = a;
		if (end == s)
			return -EINVAL;
		if (*end == '-') {
			s = end + 1;
			b = strtoul(s, &end, 10);
			if (end == s || b < a)
				return -EINVAL;
		}
		for (unsigned long c = a; c <= b && c < CPU_SETSIZE; c++)
			CPU_SET((int)c, set);
		if (*end && *end != ',' && *end != '\n')
			return -EINVAL;
		s = *end == ',' ? end + 1 : end;
	}
	return 0;
}

/* set → "0-3,8" into buf. */
static void format_cpulist(const cpu_set_t *set, char *buf, size_t len)
{
	size_t k = 0;
	buf[0] = 0;
	for (int c = 0; c < CPU_SETSIZE && k < len; c++) {
		if (!CPU_ISSET(c, set))
			continue;
		int e = c;
		while (e + 1 < CPU_SETSIZE && CPU_ISSET(e + 1, set))
			e++;
		int n = e > c ? snprintf(buf + k, len - k, "%s%d-%d", k ? "," : "", c, e)
			      : snprintf(buf + k, len - k, "%s%d", k ? "," : "", c);
		if (n < 0 || (size_t)n >= len - k) {
			buf[k] = 0;
			return;
		}
		k += (size_t)n;
		c = e;
	}
}

int stk__cpu_facts(struct stk__cpu_facts *f)
{
	memset(f, 0, sizeof(*f));
	char buf[4096], dir[PATH_MAX], mnt[PATH_MAX];
	cpu_set_t online;
	CPU_ZERO(&online);
	if (stk__sys_read("", buf, sizeof(buf), "/sys/devices/system/cpu/online") <= 0 ||
	    parse_cpulist(buf, &online) || !CPU_COUNT(&online)) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);
		for (long c = 0; c < n && c < CPU_SETSIZE; c++)
			CPU_SET((int)c, &online);
	}
	f->host = online;
	/* the cgroup's cpuset: v2 cpuset.cpus.effective, v1 cpuset.effective_cpus */
	int v = stk__sys_cgroup_dir("", "cpuset", dir, sizeof(dir), mnt, sizeof(mnt));
	cpu_set_t cg;
	if (v > 0 &&
	    stk__sys_read("", buf, sizeof(buf), "%s/%s", dir,
			  v == 2 ? "cpuset.cpus.effective" : "cpuset.effective_cpus") > 0 &&
	    !parse_cpulist(buf, &cg) && CPU_COUNT(&cg)) {
		CPU_AND(&f->host, &f->host, &cg);
		if (!CPU_COUNT(&f->host))
			f->host = cg;
	}
	if (sched_getaffinity(0, sizeof(f->mask), &f->mask) || !CPU_COUNT(&f->mask))
		f->mask = f->host;
	struct stk_cpus c = {.size = sizeof(c)};
	if (stk_sys_cpus("", &c) == 0)
		f->quota = c.quota;
	f->current = sched_getcpu();
	return 0;
}

/* The n-th CPU (0-based) of set; -1 past its end. */
static int nth_cpu(const cpu_set_t *set, int n)
{
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, set) && n-- == 0)
			return c;
	return -1;
}

/* I/O threads (io_uring rings) for a share of `cpus`: 2, or 1 below 4 CPUs,
 * where a second ring would take a core from decode or the trainer (the rule
 * docs/options.md gives, with a launcher or without one). */
static uint32_t io_threads_for(uint32_t cpus)
{
	return cpus >= 4 ? 2 : 1;
}

void stk__cpu_share_of(const struct stk__cpu_facts *f, uint32_t local_rank,
		       uint32_t local_world, const char *source, struct stk_cpu_share *out,
		       cpu_set_t *loader_set, bool *pin)
{
	struct stk_cpu_share s = {.size = sizeof(s), .local_rank = local_rank,
				  .local_world_size = local_world ? local_world : 1,
				  .trainer_cpu = -1};
	snprintf(s.source, sizeof(s.source), "%s", source);
	int nmask = CPU_COUNT(&f->mask) ? CPU_COUNT(&f->mask) : 1;
	s.host_cpus = (uint32_t)(CPU_COUNT(&f->host) ? CPU_COUNT(&f->host) : nmask);
	s.allowed = (uint32_t)nmask;
	s.quota = f->quota;
	struct stk_cpus c = {.size = sizeof(c), .logical = s.host_cpus, .allowed = (uint32_t)nmask,
			     .quota = f->quota};
	double usable = stk_cpus_usable(&c);
	cpu_set_t set = f->mask;
	*pin = local_world > 0;
	if (!local_world) { /* no launcher: today's defaults, nothing pinned */
		s.cpus = usable >= 1 ? (uint32_t)usable : 1;
		s.decode_threads = s.cpus > 1 ? s.cpus - 1 : 1;
		s.io_threads = io_threads_for(s.cpus);
		*loader_set = set;
		stk__sys_out(out, &s, sizeof(s));
		return;
	}
	cpu_set_t inter;
	CPU_AND(&inter, &f->mask, &f->host);
	s.bound = CPU_EQUAL(&inter, &f->mask) && nmask < CPU_COUNT(&f->host);
	if (s.bound) { /* the launcher gave this rank CPUs of its own */
		s.cpus = (uint32_t)nmask;
		if (f->quota > 0 && f->quota / local_world < s.cpus)
			s.cpus = f->quota / local_world >= 1 ? (uint32_t)(f->quota / local_world) : 1;
		s.oversubscribed = f->quota > 0 && f->quota < local_world;
	} else { /* the r-th slice of the mask */
		uint32_t per = (uint32_t)(usable / local_world);
		s.oversubscribed = per < 1;
		s.cpus = per ? per : 1;
		CPU_ZERO(&set);
		for (uint32_t k = 0; k < s.cpus; k++)
			CPU_SET(nth_cpu(&f->mask, (int)((local_rank * s.cpus + k) % (uint32_t)nmask)), &set);
	}
	*loader_set = set;
	if (s.cpus >= 2 && CPU_COUNT(&set) >= 2) {
		s.trainer_cpu = f->current >= 0 && CPU_ISSET(f->current, &set) ? f->current
										: nth_cpu(&set, 0);
		CPU_CLR(s.trainer_cpu, loader_set);
	}
	s.decode_threads = s.cpus > 1 ? s.cpus - 1 : 1;
	s.io_threads = io_threads_for(s.cpus);
	format_cpulist(loader_set, s.cpulist, sizeof(s.cpulist));
	stk__sys_out(out, &s, sizeof(s));
}

/* A rank and world size from the launcher's environment, the first pair of
 * names whose size is set: 1 found, 0 none, -EINVAL with the reason in why. */
static int launcher_env(const char *const (*names)[2], size_t n, uint32_t *rank, uint32_t *world,
			char *source, size_t slen, char *why, size_t wlen)
{
	for (size_t i = 0; i < n; i++) {
		const char *r = getenv(names[i][0]), *w = getenv(names[i][1]);
		if (!w || !*w)
			continue;
		char *end;
		unsigned long wv = strtoul(w, &end, 10), rv = 0;
		if (*end || !wv || wv > UINT32_MAX) {
			snprintf(why, wlen, "environment %s=%s is not a positive integer", names[i][1], w);
			return -EINVAL;
		}
		if (r && *r) {
			rv = strtoul(r, &end, 10);
			if (*end || rv >= wv) {
				snprintf(why, wlen, "environment %s=%s is not below %s=%s", names[i][0], r,
					 names[i][1], w);
				return -EINVAL;
			}
		}
		*rank = (uint32_t)rv;
		*world = (uint32_t)wv;
		snprintf(source, slen, "%s", names[i][1]);
		return 1;
	}
	return 0;
}

/* The local rank and size (ranks on this host). */
static int local_env(uint32_t *rank, uint32_t *world, char *source, size_t slen, char *why,
		     size_t wlen)
{
	static const char *const names[][2] = {
		{"LOCAL_RANK", "LOCAL_WORLD_SIZE"},                            /* torchrun */
		{"OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"}, /* Open MPI */
	};
	return launcher_env(names, STK_ARRAY_SIZE(names), rank, world, source, slen, why, wlen);
}

int stk__rank_env(uint32_t *rank, uint32_t *world, char *source, size_t slen, char *why,
		  size_t wlen)
{
	static const char *const names[][2] = {
		{"RANK", "WORLD_SIZE"},                            /* torchrun */
		{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"}, /* Open MPI */
	};
	return launcher_env(names, STK_ARRAY_SIZE(names), rank, world, source, slen, why, wlen);
}

int stk__cpu_share(uint32_t local_rank, uint32_t local_world, struct stk_cpu_share *out,
		   cpu_set_t *loader_set, bool *pin, char *why, size_t wlen)
{
	char source[40] = "options";
	if (local_world && local_rank >= local_world) {
		snprintf(why, wlen, "local_rank: %u must be below local_world_size %u", local_rank,
			 local_world);
		return -EINVAL;
	}
	if (!local_world) {
		int rc = local_env(&local_rank, &local_world, source, sizeof(source), why, wlen);
		if (rc < 0)
			return rc;
		if (rc == 0)
			snprintf(source, sizeof(source), "none");
	}
	struct stk__cpu_facts f;
	stk__cpu_facts(&f);
	stk__cpu_share_of(&f, local_rank, local_world, source, out, loader_set, pin);
	return 0;
}

int stk_cpu_share(uint32_t local_rank, uint32_t local_world_size, struct stk_cpu_share *out,
		  char *errbuf, size_t errlen)
{
	char scratch[8];
	if (!errbuf || !errlen) {
		errbuf = scratch;
		errlen = sizeof(scratch);
	}
	errbuf[0] = 0;
	if (out->size && out->size < offsetof(struct stk_cpu_share, cpulist)) {
		snprintf(errbuf, errlen, "struct stk_cpu_share too small (%u bytes)", out->size);
		return -EINVAL;
	}
	cpu_set_t set;
	bool pin;
	return stk__cpu_share(local_rank, local_world_size, out, &set, &pin, errbuf, errlen);
}

double stk_cpus_usable(const struct stk_cpus *c)
{
	double u = c && c->logical ? c->logical : 1;
	if (c && c->allowed && c->allowed < u)
		u = c->allowed;
	if (c && c->quota > 0 && c->quota < u)
		u = c->quota;
	return u >= 1 ? u : 1;
}

int stk_cpu_share_for(const struct stk_cpus *cpus, uint32_t local_world_size,
		      struct stk_cpu_share *out)
{
	if (!cpus || !out)
		return -EINVAL;
	/* facts as a reading gives them: the first `logical` CPUs online, the
	 * first `allowed` of them in the mask */
	struct stk__cpu_facts f = {.quota = cpus->quota, .current = -1};
	uint32_t logical = cpus->logical ? cpus->logical : 1;
	uint32_t allowed = cpus->allowed && cpus->allowed < logical ? cpus->allowed : logical;
	CPU_ZERO(&f.host);
	CPU_ZERO(&f.mask);
	for (uint32_t i = 0; i < logical && i < CPU_SETSIZE; i++) {
		CPU_SET(i, &f.host);
		if (i < allowed)
			CPU_SET(i, &f.mask);
	}
	cpu_set_t set;
	bool pin;
	stk__cpu_share_of(&f, 0, local_world_size, local_world_size ? "options" : "none", out,
			  &set, &pin);
	return 0;
}
