/* test_cpushare.c — ranks sharing a host: each loader's default threads are
 * its share of the host's CPUs (affinity-, cpuset- and quota-aware), one CPU
 * of the share is left to the training thread, the launcher's environment is
 * read (torchrun, Open MPI) and refused when malformed, and the loader's
 * threads really run on the share. */
#include "testutil.h"

#include "sys/cpushare.h"
#include "stoker/stoker.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>

static struct stk__cpu_facts facts(int ncpu, double quota, int current)
{
	struct stk__cpu_facts f = {.quota = quota, .current = current};
	CPU_ZERO(&f.host);
	for (int c = 0; c < ncpu; c++)
		CPU_SET(c, &f.host);
	f.mask = f.host;
	return f;
}

static struct stk_cpu_share share(const struct stk__cpu_facts *f, uint32_t lr, uint32_t lw,
				  cpu_set_t *set, bool *pin)
{
	struct stk_cpu_share s = {.size = sizeof(s)};
	stk__cpu_share_of(f, lr, lw, lw ? "options" : "none", &s, set, pin);
	return s;
}

static void test_no_launcher(void **state)
{
	(void)state;
	cpu_set_t set;
	bool pin;
	struct stk__cpu_facts f = facts(16, 0, 3);
	struct stk_cpu_share s = share(&f, 0, 0, &set, &pin);
	assert_false(pin); /* nothing pinned, today's defaults */
	assert_int_equal(s.cpus, 16);
	assert_int_equal(s.decode_threads, 15);
	assert_int_equal(s.io_threads, 2);
	assert_int_equal(s.trainer_cpu, -1);
	assert_string_equal(s.cpulist, "");
	f = facts(16, 4.5, 3); /* a cgroup quota of 4.5 CPUs */
	s = share(&f, 0, 0, &set, &pin);
	assert_int_equal(s.cpus, 4);
	assert_int_equal(s.decode_threads, 3);
	f = facts(1, 0, 0);
	s = share(&f, 0, 0, &set, &pin);
	assert_int_equal(s.decode_threads, 1);
	assert_int_equal(s.io_threads, 1);
	/* 2 CPUs: one I/O thread, as with a launcher (below 4 CPUs), not 2 */
	f = facts(2, 0, 0);
	s = share(&f, 0, 0, &set, &pin);
	assert_int_equal(s.decode_threads, 1);
	assert_int_equal(s.io_threads, 1);
}

static void test_slices(void **state)
{
	(void)state;
	cpu_set_t set;
	bool pin;
	struct stk__cpu_facts f = facts(16, 0, 9);
	/* 4 ranks on 16 CPUs: rank 2 takes CPUs 8-11; its trainer runs on 9 */
	struct stk_cpu_share s = share(&f, 2, 4, &set, &pin);
	assert_true(pin);
	assert_int_equal(s.cpus, 4);
	assert_false(s.bound);
	assert_false(s.oversubscribed);
	assert_int_equal(s.trainer_cpu, 9);
	assert_string_equal(s.cpulist, "8,10-11");
	assert_int_equal(s.decode_threads, 3);
	assert_int_equal(s.io_threads, 2);
	assert_int_equal(CPU_COUNT(&set), 3);
	assert_false(CPU_ISSET(9, &set));
	/* the creating thread elsewhere: the share's first CPU is the trainer's */
	f.current = 1;
	s = share(&f, 2, 4, &set, &pin);
	assert_int_equal(s.trainer_cpu, 8);
	assert_string_equal(s.cpulist, "9-11");
	/* the ranks' slices are disjoint and cover the mask */
	cpu_set_t all;
	CPU_ZERO(&all);
	for (uint32_t r = 0; r < 4; r++) {
		s = share(&f, r, 4, &set, &pin);
		CPU_SET(s.trainer_cpu, &set);
		cpu_set_t both;
		CPU_AND(&both, &all, &set);
		assert_int_equal(CPU_COUNT(&both), 0);
		CPU_OR(&all, &all, &set);
	}
	assert_true(CPU_EQUAL(&all, &f.mask));
	/* a quota of 4 CPUs over 2 ranks: 2 each, one for the trainer */
	f = facts(16, 4, 0);
	s = share(&f, 1, 2, &set, &pin);
	assert_int_equal(s.cpus, 2);
	assert_int_equal(s.decode_threads, 1);
	assert_string_equal(s.cpulist, "3");
	assert_int_equal(s.trainer_cpu, 2);
	/* more ranks than CPUs: one each, wrapping; said */
	f = facts(2, 0, 0);
	s = share(&f, 2, 3, &set, &pin);
	assert_true(s.oversubscribed);
	assert_int_equal(s.cpus, 1);
	assert_int_equal(s.trainer_cpu, -1);
	assert_string_equal(s.cpulist, "0");
	/* 2 ranks on 2 CPUs: one each, no CPU to spare for the trainer */
	s = share(&f, 1, 2, &set, &pin);
	assert_false(s.oversubscribed);
	assert_string_equal(s.cpulist, "1");
	assert_int_equal(s.decode_threads, 1);
}

static void test_bound_and_cpuset(void **state)
{
	(void)state;
	cpu_set_t set;
	bool pin;
	/* mpirun --bind-to / numactl gave this rank CPUs 4-7 of 16: its share */
	struct stk__cpu_facts f = facts(16, 0, 5);
	CPU_ZERO(&f.mask);
	for (int c = 4; c < 8; c++)
		CPU_SET(c, &f.mask);
	struct stk_cpu_share s = share(&f, 1, 4, &set, &pin);
	assert_true(s.bound);
	assert_int_equal(s.cpus, 4);
	assert_int_equal(s.trainer_cpu, 5);
	assert_string_equal(s.cpulist, "4,6-7");
	/* a container's cpuset of 8 CPUs that the mask equals: not bound,
	 * the ranks divide those 8 */
	f = facts(8, 0, 0);
	for (int c = 0; c < 8; c++) {
		CPU_CLR(c, &f.host);
		CPU_CLR(c, &f.mask);
		CPU_SET(c + 8, &f.host);
		CPU_SET(c + 8, &f.mask);
	}
	s = share(&f, 1, 2, &set, &pin);
	assert_false(s.bound);
	assert_int_equal(s.host_cpus, 8);
	assert_int_equal(s.cpus, 4);
	assert_int_equal(s.trainer_cpu, 12);
	assert_string_equal(s.cpulist, "13-15");
}

static void test_environment(void **state)
{
	(void)state;
	struct stk_cpu_share s = {.size = sizeof(s)};
	char err[256];
	unsetenv("LOCAL_RANK");
	unsetenv("LOCAL_WORLD_SIZE");
	unsetenv("OMPI_COMM_WORLD_LOCAL_RANK");
	unsetenv("OMPI_COMM_WORLD_LOCAL_SIZE");
	assert_int_equal(stk_cpu_share(0, 0, &s, err, sizeof(err)), 0);
	assert_string_equal(s.source, "none");
	setenv("OMPI_COMM_WORLD_LOCAL_RANK", "1", 1);
	setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "3", 1);
	assert_int_equal(stk_cpu_share(0, 0, &s, err, sizeof(err)), 0);
	assert_string_equal(s.source, "OMPI_COMM_WORLD_LOCAL_SIZE");
	assert_int_equal(s.local_rank, 1);
	assert_int_equal(s.local_world_size, 3);
	setenv("LOCAL_RANK", "0", 1); /* torchrun's first */
	setenv("LOCAL_WORLD_SIZE", "2", 1);
	assert_int_equal(stk_cpu_share(0, 0, &s, err, sizeof(err)), 0);
	assert_string_equal(s.source, "LOCAL_WORLD_SIZE");
	assert_int_equal(s.local_world_size, 2);
	/* options win over the environment */
	assert_int_equal(stk_cpu_share(3, 4, &s, err, sizeof(err)), 0);
	assert_string_equal(s.source, "options");
	assert_int_equal(s.local_rank, 3);
	setenv("LOCAL_RANK", "2", 1);
	assert_int_equal(stk_cpu_share(0, 0, &s, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "LOCAL_RANK=2 is not below LOCAL_WORLD_SIZE=2"));
	setenv("LOCAL_WORLD_SIZE", "two", 1);
	assert_int_equal(stk_cpu_share(0, 0, &s, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "LOCAL_WORLD_SIZE=two"));
	assert_int_equal(stk_cpu_share(2, 2, &s, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "local_rank: 2 must be below local_world_size 2"));
	unsetenv("LOCAL_RANK");
	unsetenv("LOCAL_WORLD_SIZE");
	unsetenv("OMPI_COMM_WORLD_LOCAL_RANK");
	unsetenv("OMPI_COMM_WORLD_LOCAL_SIZE");
}

/* Thread ids of this process's loader threads (named stk-io*, stk-decode*). */
static int tasks(pid_t *out, int cap)
{
	DIR *d = opendir("/proc/self/task");
	assert_non_null(d);
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)) && n < cap) {
		if (e->d_name[0] == '.')
			continue;
		char p[320], comm[32] = "";
		snprintf(p, sizeof(p), "/proc/self/task/%s/comm", e->d_name);
		FILE *f = fopen(p, "r");
		if (f) {
			if (!fgets(comm, sizeof(comm), f))
				comm[0] = 0;
			fclose(f);
		}
		if (!strncmp(comm, "stk-", 4))
			out[n++] = (pid_t)strtol(e->d_name, NULL, 10);
	}
	closedir(d);
	return n;
}

/* A loader with a local rank pins its I/O and decode threads to the share:
 * every thread it started runs on the share's loader CPUs. */
static void test_loader_threads_pinned(void **state)
{
	(void)state;
	char *root = tu_mkdtemp(), p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/a.jpg", root);
	tu_write(p, "x", 1);
	cpu_set_t mine;
	assert_int_equal(sched_getaffinity(0, sizeof(mine), &mine), 0);
	pid_t before[256], after[256];
	int nb = tasks(before, 256);
	assert_int_equal(nb, 0);
	struct stk_image_opts img = {.size = sizeof(img), .decode_threads = 2};
	struct stk_loader_opts o = {.size = sizeof(o), .path = root, .engine = STK_ENGINE_NULL,
				    .flags = STK_F_QUIET | STK_F_NO_CACHE, .image = &img,
				    .local_rank = 0, .local_world_size = 1};
	struct stk_loader *l;
	char err[256];
	assert_int_equal(stk_loader_create(&l, &o, err, sizeof(err)), 0);
	struct stk_cpu_share s = {.size = sizeof(s)};
	assert_int_equal(stk_loader_cpu_share(l, &s), 0);
	assert_string_equal(s.source, "options");
	if (CPU_COUNT(&mine) >= 2) /* one CPU is the trainer's */
		assert_int_equal(s.trainer_cpu >= 0, 1);
	int na = tasks(after, 256), started = 0;
	for (int i = 0; i < na; i++) {
		bool old = false;
		for (int j = 0; j < nb; j++)
			old |= after[i] == before[j];
		if (old)
			continue;
		cpu_set_t got;
		assert_int_equal(sched_getaffinity(after[i], sizeof(got), &got), 0);
		if (s.trainer_cpu >= 0)
			assert_false(CPU_ISSET(s.trainer_cpu, &got));
		assert_int_equal(CPU_COUNT(&got), s.cpus > 1 ? (int)s.cpus - 1 : 1);
		started++;
	}
	assert_int_equal(started, 3); /* 2 decode threads and the I/O thread, named */
	stk_loader_destroy(l);
	/* STK_F_NO_AFFINITY: nothing pinned */
	o.flags |= STK_F_NO_AFFINITY;
	assert_int_equal(stk_loader_create(&l, &o, err, sizeof(err)), 0);
	na = tasks(after, 256);
	assert_int_equal(na, 3);
	for (int i = 0; i < na; i++) {
		cpu_set_t got;
		assert_int_equal(sched_getaffinity(after[i], sizeof(got), &got), 0);
		assert_true(CPU_EQUAL(&got, &mine));
	}
	stk_loader_destroy(l);
	/* a bad local rank is refused at create, naming it */
	o.local_rank = 1;
	assert_int_equal(stk_loader_create(&l, &o, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "local_rank: 1 must be below local_world_size 1"));
	tu_rmrf(root);
	free(root);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_no_launcher),
		cmocka_unit_test(test_slices),
		cmocka_unit_test(test_bound_and_cpuset),
		cmocka_unit_test(test_environment),
		cmocka_unit_test(test_loader_threads_pinned),
	};
	return cmocka_run_group_tests_name("cpushare", tests, NULL, NULL);
}
