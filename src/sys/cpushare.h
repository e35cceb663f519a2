/*
 * cpushare.h — the CPU share rule (sys/cpushare.c): the CPUs this process may use
 * and the part of them a loader's threads take.
 */
#ifndef STK_SYS_CPUSHARE_H
#define STK_SYS_CPUSHARE_H

#include "base/internal.h"

#include <sched.h>

/* What a CPU share is computed from (the running system, or a test's). */
struct stk__cpu_facts {
	cpu_set_t host;   /* the cgroup's cpuset within the online CPUs */
	cpu_set_t mask;   /* this process's affinity */
	double quota;     /* cpu.max in CPUs, 0: none */
	int current;      /* the CPU the calling thread runs on, -1: unknown */
};
int stk__cpu_facts(struct stk__cpu_facts *f);
/* The share from facts; local_world 0: no launcher.  loader_set gets the
 * CPUs for the loader's threads, *pin whether to pin them. */
void stk__cpu_share_of(const struct stk__cpu_facts *f, uint32_t local_rank,
		       uint32_t local_world, const char *source, struct stk_cpu_share *out,
		       cpu_set_t *loader_set, bool *pin);
/* stk_cpu_share with the loader's CPU set; the reason in why on -EINVAL. */
int stk__cpu_share(uint32_t local_rank, uint32_t local_world, struct stk_cpu_share *out,
		   cpu_set_t *loader_set, bool *pin, char *why, size_t wlen);

/* The job's rank and world size from the launcher's environment: $RANK and
 * $WORLD_SIZE (torchrun), else Open MPI's $OMPI_COMM_WORLD_RANK and _SIZE.
 * 1 found (source names the size's variable), 0 none, -EINVAL with the
 * reason in why (a value that is not a number, a rank not below the size). */
int stk__rank_env(uint32_t *rank, uint32_t *world, char *source, size_t slen, char *why,
		  size_t wlen);

#endif
