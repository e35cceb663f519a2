/*
 * doctor/share.c — `stoker doctor`'s "cpu share" check: the share of this
 * host's CPUs each rank's loader takes (libstoker's stk_cpu_share, the one
 * owner of that rule), and a warning when ranks × threads oversubscribe the
 * host.  The ranks per host come from --local-world-size, else from the
 * launcher's environment (torchrun's LOCAL_WORLD_SIZE, Open MPI's
 * OMPI_COMM_WORLD_LOCAL_SIZE), as the loader reads them.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "doctor/doctor.h"

void doc_share_check(struct doctor *d)
{
	struct check *k = doc_add(d, "cpu share", ST_OK);
	struct stk_cpu_share s = {.size = sizeof(s)};
	char err[256];
	uint32_t lw = (uint32_t)d->local_world;
	if (stk_cpu_share(0, lw, &s, err, sizeof(err)) < 0) {
		k->status = ST_WARN;
		SET(k, value, "%s", err);
		SET(k, why, "the loader refuses a launcher environment it cannot read");
		SET(k, fix, "export LOCAL_RANK=<0..N-1> LOCAL_WORLD_SIZE=<N, ranks on this host>");
		return;
	}
	uint32_t ranks = s.local_world_size, dec = (uint32_t)d->decode_threads;
	if (!dec)
		dec = s.decode_threads;
	if (!strcmp(s.source, "none")) {
		SET(k, value, "one process (no LOCAL_WORLD_SIZE or OMPI_COMM_WORLD_LOCAL_SIZE): %u CPUs, "
			      "%u decode + %u I/O thread%s, not pinned", s.cpus, dec, s.io_threads,
		    s.io_threads == 1 ? "" : "s");
		SET(k, why, "under torchrun or mpirun each rank's loader takes its share of the host's "
			    "CPUs; --local-world-size N shows that share");
	} else {
		char trainer[48] = "";
		if (s.trainer_cpu >= 0)
			snprintf(trainer, sizeof(trainer), ", CPU %d left to the trainer", s.trainer_cpu);
		bool one = !strpbrk(s.cpulist, ",-");
		SET(k, value, "%u rank%s on this host (%s%s): %u CPU%s each%s; rank %u's threads on "
			      "CPU%s %s%s; %u decode + %u I/O thread%s per rank",
		    ranks, ranks == 1 ? "" : "s", lw ? "--local-world-size" : s.source,
		    s.quota > 0 ? ", cgroup quota" : "", s.cpus, s.cpus == 1 ? "" : "s",
		    s.bound ? " (bound by the launcher)" : "", s.local_rank, one ? "" : "s",
		    s.cpulist, trainer, dec, s.io_threads, s.io_threads == 1 ? "" : "s");
		SET(k, why, "each rank's decode threads stay on its own CPUs, off the core its training "
			    "thread runs on, so ranks do not starve each other's Python/CUDA launch "
			    "threads");
	}
	/* per rank: the training thread plus the decode threads (I/O threads
	 * mostly wait on the kernel) */
	uint32_t need = dec + 1;
	uint32_t usable = s.host_cpus < s.allowed ? s.host_cpus : s.allowed;
	if (s.quota > 0 && s.quota < usable)
		usable = s.quota >= 1 ? (uint32_t)s.quota : 1;
	uint32_t total = s.bound ? ranks * s.cpus : usable;
	bool launcher = strcmp(s.source, "none") != 0; /* one process: the cpu check says it */
	if (launcher && (s.oversubscribed || need > s.cpus)) {
		k->status = ST_WARN;
		uint32_t fit = s.cpus > 1 ? s.cpus - 1 : 1;
		SET(k, why, "%u rank%s x (%u decode thread%s + 1 training thread) = %u threads for %u "
			    "CPU%s%s: ranks and their decode threads take turns on the same cores, and "
			    "the training threads wait",
		    ranks, ranks == 1 ? "" : "s", dec, dec == 1 ? "" : "s", ranks * need, total,
		    total == 1 ? "" : "s", s.oversubscribed ? " (more ranks than usable CPUs)" : "");
		if (s.oversubscribed || s.cpus < 2)
			SET(k, fix, "run at most %u rank%s on this host (2 CPUs each: the training "
				    "thread and a decode thread), or give the job more CPUs",
			    usable / 2 ? usable / 2 : 1, usable / 2 > 1 ? "s" : "");
		else
			SET(k, fix, "leave decode_threads at its default (%u per rank here), e.g. "
				    "stoker.Image(decode_threads=%u) or --decode-threads %u", fit, fit, fit);
	}
}
