/* common/mpi.h — `stoker bench` and `stoker disk` under mpirun (Open MPI), the way
 * IOR and DLIO run: every rank runs its share, they start together, rank 0
 * prints the aggregate and the spread.
 *
 *   common/mpi.c        Open MPI loaded at run time (dlopen: a machine without it
 *                builds and runs as before), and the one exchange the tools
 *                use: a step, where rank 0 gathers a text from every rank and
 *                sends one back, with a deadline, so a rank that died or hangs
 *                ends the job with its name instead of a hang
 *   common/mpi_out.c    what rank 0 computes from the ranks' texts: spreads, the
 *                slowest rank, histograms merged bucket by bucket
 *   bench/bench_mpi.c  stoker bench's run under MPI
 *   disk/disk_mpi.c   stoker disk's run under MPI
 */
#ifndef STK_MPI_H
#define STK_MPI_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "stoker/stoker.h"

struct mpi {
	int rank, size;
	int local_rank, local_size; /* ranks on this host (Open MPI's environment) */
	char host[64];
	double timeout;             /* seconds a step waits for the others */
	unsigned step;              /* steps taken: every rank takes the same ones */
};

/* Whether this process was started by mpirun (OMPI_COMM_WORLD_SIZE is set):
 * then the tools run their MPI variant.  STOKER_NO_MPI=1 says no. */
bool mpi_wanted(void);

/* Loads libmpi (STOKER_LIBMPI, else libmpi.so.40, libmpi.so) and calls
 * MPI_Init.  0, or <0 with the reason (what to install) in why. */
int mpi_start(struct mpi *m, double timeout, char *why, size_t len);
void mpi_end(struct mpi *m);
/* Ends every rank of the job now (MPI_Abort), after `why` on stderr. */
void mpi_abort(struct mpi *m, int code, const char *why) __attribute__((noreturn));

/* A step named `phase`: every rank sends `mine` (text) to rank 0; rank 0
 * gets all of them in all[0..size) (freed with mpi_free_all) and answers
 * with `reply` (rank 0 sets it after looking at all; NULL: "ok"), which every
 * rank gets back in *reply_out (malloc'ed; NULL is fine).  Rank 0 calls it
 * twice: with reply_out == NULL and all != NULL to gather, then
 * mpi_reply(); the others once.  A rank missing past the deadline ends the
 * job (mpi_abort) naming it and the phase. */
void mpi_gather(struct mpi *m, const char *phase, const char *mine, char ***all);
void mpi_reply(struct mpi *m, const char *phase, const char *reply, char **reply_out);
void mpi_free_all(struct mpi *m, char **all);

/* The usual step: every rank says "ok" or what failed; if one failed, rank 0
 * prints "stoker TOOL: rank R (HOST): REASON" for each and every rank
 * returns false.  Doubles as the barrier before timing. */
bool mpi_check(struct mpi *m, const char *tool, const char *phase, const char *failure);

/* Options that must be the same on every rank: rank 0 compares each rank's
 * text ("name=value\n" lines) with its own and names the first difference;
 * false on every rank when they differ. */
bool mpi_same_options(struct mpi *m, const char *tool, const char *text);

/* --- common/mpi_out.c ----------------------------------------------------------- */

/* A histogram as JSON ({min, max, sum, buckets: [[upper, count], ...]}), and
 * back, added to h: exactly what stk_hist_merge would give (0, or -1). */
json_t *mpi_hist_json(const struct stk_hist *h);
int mpi_hist_add_json(struct stk_hist *h, const json_t *j);

/* Min, median and max of v[0..n), and where the min is. */
struct mpi_spread {
	double min, median, max;
	int argmin;
};
void mpi_spread_of(const double *v, int n, struct mpi_spread *s);
json_t *mpi_spread_json(const struct mpi_spread *s);

/* Bench and disk under MPI: 0/1/2 (the exit codes). */
struct bench_opts;
int bench_mpi(struct bench_opts *o, const char *path);
struct dk_conf;
struct dk_case;
int disk_mpi(const struct dk_conf *cf, const struct dk_case *cases, unsigned ncases,
	     char **paths, unsigned npaths, const char *destructive, bool json, const char *set);

#endif
