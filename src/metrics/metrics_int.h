/* metrics/metrics_int.h — what metrics/serve.c shares with metrics/published.c,
 * and what tests reach inside them.  Never installed. */
#ifndef STK_METRICS_INT_H
#define STK_METRICS_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* Parses a listen string (see stk_metrics_serve) into an address.  *wild is
 * set for ":PORT" (every interface: IPv6 any, dual-stack).  0 or -EINVAL. */
int stk__listen_parse(const char *listen, struct sockaddr_storage *ss, socklen_t *sl, int *wild);

/* The published files' names, <pid>-<name>.prom (metrics/published.c owns
 * the rule): a name is 1..STK__PUBLISHED_NAME_MAX of [A-Za-z0-9._-], not
 * starting with '.'.  stk__published_pid: a file name's pid, or -1 for a
 * name the rule does not allow. */
#define STK__PUBLISHED_NAME_MAX 64

/* metrics/remote.c: a loader's remote-data families (none for local data):
 * up to max rows into out, *r filled with the stats they came from; the
 * number of rows.  A row without `has` keeps its HELP and TYPE, no sample. */
struct stk__family {
	const char *name, *type, *help;
	uint64_t value;
	bool has;
};
struct stk_loader;
struct stk_remote_stats;
size_t stk__remote_families(const struct stk_loader *l, struct stk__family *out, size_t max,
			    struct stk_remote_stats *r);
int stk__published_name_ok(const char *name, size_t len);
long stk__published_pid(const char *filename);

#endif
