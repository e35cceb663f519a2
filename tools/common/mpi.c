/*
 * common/mpi.c — Open MPI for `stoker bench` and `stoker disk`, loaded at run time.
 *
 * libmpi is dlopen'ed (RTLD_GLOBAL: its plugins resolve against it) only when
 * mpirun started the process, so the CLI neither links nor needs it.  The
 * calls are Open MPI's C ABI (MPI_Comm and MPI_Datatype are pointers, the
 * predefined objects are the ompi_mpi_* symbols), stable across Open MPI 3
 * to 5, which is what Debian ships.
 *
 * Everything the tools exchange goes through a step: each rank sends one
 * text to rank 0 (its status, its options, its results), rank 0 answers every
 * rank with one text.  Point to point with a deadline rather than a blocking
 * collective, so that rank 0 knows exactly which ranks did not arrive and
 * says so (then MPI_Abort ends the job) instead of waiting for ever; a rank
 * that hears nothing from rank 0 does the same.  A rank that dies is
 * mpirun's to notice: it ends the job and names it.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/cli.h"
#include "common/mpi.h"

typedef void *MPI_Comm;
typedef void *MPI_Datatype;
typedef void *MPI_Request;

static struct {
	void *h;
	int (*Init)(int *, char ***);
	int (*Finalize)(void);
	int (*Comm_rank)(MPI_Comm, int *);
	int (*Comm_size)(MPI_Comm, int *);
	int (*Isend)(const void *, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request *);
	int (*Irecv)(void *, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request *);
	int (*Test)(MPI_Request *, int *, void *);
	int (*Abort)(MPI_Comm, int);
	MPI_Comm world;
	MPI_Datatype byte;
} M;

bool mpi_wanted(void)
{
	const char *no = getenv("STOKER_NO_MPI");
	if (no && *no && strcmp(no, "0"))
		return false;
	const char *n = getenv("OMPI_COMM_WORLD_SIZE");
	return n && *n;
}

static int env_int(const char *name, int def)
{
	const char *v = getenv(name);
	char *end;
	long x = v ? strtol(v, &end, 10) : 0;
	return v && *v && !*end && x >= 0 && x < (1 << 30) ? (int)x : def;
}

int mpi_start(struct mpi *m, double timeout, char *why, size_t len)
{
	memset(m, 0, sizeof(*m));
	m->timeout = timeout;
	const char *names[] = {getenv("STOKER_LIBMPI"), "libmpi.so.40", "libmpi.so"};
	char err[512] = "";
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]) && !M.h; i++) {
		if (!names[i] || !*names[i])
			continue;
		M.h = dlopen(names[i], RTLD_NOW | RTLD_GLOBAL);
		if (!M.h)
			snprintf(err, sizeof(err), "%s", dlerror());
	}
	if (!M.h) {
		snprintf(why, len, "started by mpirun (OMPI_COMM_WORLD_SIZE=%s) but Open MPI's library "
			 "cannot be loaded (%s); install it (apt-get install libopenmpi3), set "
			 "STOKER_LIBMPI to it, or run without mpirun",
			 getenv("OMPI_COMM_WORLD_SIZE"), err);
		return -ENOENT;
	}
	struct {
		const char *name;
		void **slot;
	} syms[] = {
		{"MPI_Init", (void **)&M.Init},           {"MPI_Finalize", (void **)&M.Finalize},
		{"MPI_Comm_rank", (void **)&M.Comm_rank}, {"MPI_Comm_size", (void **)&M.Comm_size},
		{"MPI_Isend", (void **)&M.Isend},         {"MPI_Irecv", (void **)&M.Irecv},
		{"MPI_Test", (void **)&M.Test},           {"MPI_Abort", (void **)&M.Abort},
		{"ompi_mpi_comm_world", &M.world},        {"ompi_mpi_byte", &M.byte},
	};
	for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
		*syms[i].slot = dlsym(M.h, syms[i].name);
		if (!*syms[i].slot) {
			snprintf(why, len, "libmpi has no %s: not Open MPI (stoker speaks Open MPI's "
				 "ABI)", syms[i].name);
			return -ENOSYS;
		}
	}
	if (M.Init(NULL, NULL)) {
		snprintf(why, len, "MPI_Init failed");
		return -EIO;
	}
	M.Comm_rank(M.world, &m->rank);
	M.Comm_size(M.world, &m->size);
	m->local_rank = env_int("OMPI_COMM_WORLD_LOCAL_RANK", 0);
	m->local_size = env_int("OMPI_COMM_WORLD_LOCAL_SIZE", 1);
	if (gethostname(m->host, sizeof(m->host)))
		snprintf(m->host, sizeof(m->host), "?");
	m->host[sizeof(m->host) - 1] = 0;
	/* the report is rank 0's; the others say only what goes wrong */
	if (m->rank)
		setenv("STOKER_NO_PROGRESS", "1", 1);
	return 0;
}

void mpi_end(struct mpi *m)
{
	(void)m;
	if (M.Finalize)
		M.Finalize();
}

void mpi_abort(struct mpi *m, int code, const char *why)
{
	fprintf(stderr, "stoker: rank %d (%s): %s; ending the job\n", m->rank, m->host, why);
	fflush(NULL);
	M.Abort(M.world, code);
	_exit(code);
}

static void pause_a_little(unsigned spins)
{
	struct timespec ts = {0, spins < 1000 ? 20000 : 1000000}; /* 20 us, then 1 ms */
	nanosleep(&ts, NULL);
}

/* Tags: each step has two, gather and reply, so steps never mix. */
static int tag_of(const struct mpi *m, int reply)
{
	return 1 + (int)(m->step % 8000) * 2 + reply;
}

/* Sends text to `to` (its length, then its bytes) and waits for both sends to
 * complete, at most until deadline. */
static void send_text(struct mpi *m, int to, int tag, const char *text, double deadline,
		      const char *phase)
{
	uint64_t n = strlen(text) + 1;
	MPI_Request rq[2];
	M.Isend(&n, (int)sizeof(n), M.byte, to, tag, M.world, &rq[0]);
	M.Isend(text, (int)n, M.byte, to, tag, M.world, &rq[1]);
	int done[2] = {0, 0};
	for (unsigned spins = 0; !done[0] || !done[1]; spins++) {
		for (int i = 0; i < 2; i++)
			if (!done[i])
				M.Test(&rq[i], &done[i], NULL);
		if (done[0] && done[1])
			break;
		if (now_s() > deadline) {
			char why[256];
			snprintf(why, sizeof(why), "rank %d did not take this rank's message at '%s' "
				 "within %.0f s", to, phase, m->timeout);
			mpi_abort(m, 1, why);
		}
		pause_a_little(spins);
	}
}

void mpi_gather(struct mpi *m, const char *phase, const char *mine, char ***all)
{
	int tag = tag_of(m, 0);
	double deadline = now_s() + m->timeout;
	if (m->rank) {
		/* rank 0 may still be running the step before: wait as long as it would */
		send_text(m, 0, tag, mine, deadline + m->timeout + 5, phase);
		if (all)
			*all = NULL;
		return;
	}
	int n = m->size;
	char **texts = calloc((size_t)n, sizeof(*texts));
	uint64_t *lens = calloc((size_t)n, sizeof(*lens));
	MPI_Request *rq = calloc((size_t)n, sizeof(*rq));
	int *stage = calloc((size_t)n, sizeof(*stage)); /* 0 len posted, 1 text posted, 2 done */
	if (!texts || !lens || !rq || !stage)
		mpi_abort(m, 1, "out of memory");
	texts[0] = strdup(mine ? mine : "");
	stage[0] = 2;
	for (int r = 1; r < n; r++)
		M.Irecv(&lens[r], (int)sizeof(lens[r]), M.byte, r, tag, M.world, &rq[r]);
	int left = n - 1;
	for (unsigned spins = 0; left > 0; spins++) {
		bool any = false;
		for (int r = 1; r < n; r++) {
			if (stage[r] == 2)
				continue;
			int flag = 0;
			M.Test(&rq[r], &flag, NULL);
			if (!flag)
				continue;
			any = true;
			if (stage[r] == 0) {
				if (lens[r] == 0 || lens[r] > (1u << 30) ||
				    !(texts[r] = calloc(1, (size_t)lens[r])))
					mpi_abort(m, 1, "a rank sent a message of a bad length");
				M.Irecv(texts[r], (int)lens[r], M.byte, r, tag, M.world, &rq[r]);
				stage[r] = 1;
			} else {
				texts[r][lens[r] - 1] = 0;
				stage[r] = 2;
				left--;
			}
		}
		if (left > 0 && !any && now_s() > deadline) {
			char missing[512] = "";
			size_t k = 0;
			int nmiss = 0;
			for (int r = 1; r < n; r++)
				if (stage[r] != 2 && k < sizeof(missing) - 16) {
					k += (size_t)snprintf(missing + k, sizeof(missing) - k, "%s%d",
							      nmiss ? ", " : "", r);
					nmiss++;
				}
			char why[768];
			snprintf(why, sizeof(why), "rank%s %s did not reach '%s' within %.0f s "
				 "(STOKER_MPI_TIMEOUT): stopped, hung or much slower than the others",
				 nmiss > 1 ? "s" : "", missing, phase, m->timeout);
			mpi_abort(m, 1, why);
		}
		if (!any)
			pause_a_little(spins);
	}
	free(lens);
	free(rq);
	free(stage);
	*all = texts;
}

void mpi_reply(struct mpi *m, const char *phase, const char *reply, char **reply_out)
{
	int tag = tag_of(m, 1);
	m->step++;
	if (!reply)
		reply = "ok";
	if (m->rank == 0) {
		double deadline = now_s() + m->timeout;
		for (int r = 1; r < m->size; r++)
			send_text(m, r, tag, reply, deadline, phase);
		if (reply_out)
			*reply_out = strdup(reply);
		return;
	}
	/* rank 0 answers once every rank arrived: up to its own deadline */
	double deadline = now_s() + 2 * m->timeout + 5;
	uint64_t n = 0;
	MPI_Request rq;
	M.Irecv(&n, (int)sizeof(n), M.byte, 0, tag, M.world, &rq);
	char *text = NULL;
	for (int stage = 0; stage < 2; stage++) {
		int flag = 0;
		for (unsigned spins = 0; !flag; spins++) {
			M.Test(&rq, &flag, NULL);
			if (flag)
				break;
			if (now_s() > deadline) {
				char why[256];
				snprintf(why, sizeof(why), "no word from rank 0 at '%s' within %.0f s", phase,
					 2 * m->timeout + 5);
				mpi_abort(m, 1, why);
			}
			pause_a_little(spins);
		}
		if (stage == 0) {
			if (n == 0 || n > (1u << 30) || !(text = calloc(1, (size_t)n)))
				mpi_abort(m, 1, "rank 0 sent a message of a bad length");
			M.Irecv(text, (int)n, M.byte, 0, tag, M.world, &rq);
		}
	}
	text[n - 1] = 0;
	if (reply_out)
		*reply_out = text;
	else
		free(text);
}

void mpi_free_all(struct mpi *m, char **all)
{
	for (int r = 0; all && r < m->size; r++)
		free(all[r]);
	free(all);
}

bool mpi_check(struct mpi *m, const char *tool, const char *phase, const char *failure)
{
	char mine[1024];
	if (failure)
		snprintf(mine, sizeof(mine), "fail %s\t%s", m->host, failure);
	else
		snprintf(mine, sizeof(mine), "ok");
	char **all = NULL, *reply = NULL;
	mpi_gather(m, phase, mine, &all);
	char verdict[8] = "ok";
	if (m->rank == 0) {
		for (int r = 0; r < m->size; r++) {
			if (!strncmp(all[r], "fail ", 5)) {
				char *host = all[r] + 5, *tab = strchr(host, '\t');
				if (tab)
					*tab = 0;
				fprintf(stderr, "stoker %s: rank %d (%s): %s\n", tool, r, host,
					tab ? tab + 1 : "");
				snprintf(verdict, sizeof(verdict), "stop");
			}
		}
		mpi_free_all(m, all);
	}
	mpi_reply(m, phase, verdict, &reply);
	bool ok = reply && !strcmp(reply, "ok");
	free(reply);
	return ok;
}

bool mpi_same_options(struct mpi *m, const char *tool, const char *text)
{
	char **all = NULL, *reply = NULL;
	mpi_gather(m, "options", text, &all);
	char verdict[8] = "ok";
	if (m->rank == 0) {
		for (int r = 1; r < m->size && !strcmp(verdict, "ok"); r++) {
			if (!strcmp(all[r], all[0]))
				continue;
			/* the first line that differs */
			const char *a = all[0], *b = all[r];
			while (*a && *a == *b) {
				const char *na = strchr(a, '\n'), *nb = strchr(b, '\n');
				if (!na || !nb || na - a != nb - b || strncmp(a, b, (size_t)(na - a)))
					break;
				a = na + 1;
				b = nb + 1;
			}
			int la = (int)strcspn(a, "\n"), lb = (int)strcspn(b, "\n");
			fprintf(stderr, "stoker %s: the ranks were started with different options: rank 0 "
				"has '%.*s', rank %d has '%.*s'; every rank must run the same command "
				"(only the data each reads differs)\n",
				tool, la, a, r, lb, b);
			snprintf(verdict, sizeof(verdict), "stop");
		}
		mpi_free_all(m, all);
	}
	mpi_reply(m, "options", verdict, &reply);
	bool ok = reply && !strcmp(reply, "ok");
	free(reply);
	return ok;
}
