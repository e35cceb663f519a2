/* metrics.c — a loader that shows its metrics to Prometheus while it runs:
 * published for `stoker exporter` (a file per loader, rewritten every
 * interval) and/or served in-process on /metrics.  Reads epochs for SECONDS.
 *
 *   cc metrics.c -lstoker -o metrics
 *   ./metrics /data/train --publish train &       # then: stoker exporter --once
 *   ./metrics /data/train --serve 127.0.0.1:9464  # then: curl 127.0.0.1:9464/metrics
 *
 * Options: --publish NAME (into $STOKER_METRICS_DIR or the default folder),
 * --dir DIR (publish there instead), --serve ADDR, --seconds S (default 60).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <stoker/metrics.h>
#include <stoker/stoker.h>

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	const char *path = NULL, *name = NULL, *dir = NULL, *listen = NULL;
	double seconds = 60;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--publish") && i + 1 < argc)
			name = argv[++i];
		else if (!strcmp(argv[i], "--dir") && i + 1 < argc)
			dir = argv[++i];
		else if (!strcmp(argv[i], "--serve") && i + 1 < argc)
			listen = argv[++i];
		else if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
			seconds = strtod(argv[++i], NULL);
		else if (argv[i][0] != '-' && !path)
			path = argv[i];
		else
			path = NULL, i = argc; /* anything else: usage */
	}
	if (!path || (!name && !listen)) {
		fprintf(stderr, "usage: %s PATH [--publish NAME [--dir DIR]] [--serve ADDR] [--seconds S]\n",
			argv[0]);
		return 2;
	}
	struct stk_loader_opts o = {.size = sizeof(o), .path = path, .batch_size = 16};
	struct stk_loader *l;
	char err[512];
	int rc = stk_loader_create(&l, &o, err, sizeof(err));
	if (rc < 0) {
		fprintf(stderr, "metrics: %s\n", err);
		return 1;
	}
	struct stk_publisher *pub = NULL;
	struct stk_metrics_server *srv = NULL;
	if (name && (rc = stk_loader_publish(&pub, l, dir, name, 0.2)) < 0) {
		fprintf(stderr, "metrics: cannot publish: %s\n", stk_strerror(rc));
		goto out;
	}
	if (listen && (rc = stk_metrics_serve(&srv, listen, l, name ? name : "example")) < 0) {
		fprintf(stderr, "metrics: cannot serve on %s: %s\n", listen, stk_strerror(rc));
		goto out;
	}
	if (pub)
		printf("published %s\n", stk_publisher_path(pub));
	if (srv)
		printf("serving port %d\n", stk_metrics_server_port(srv));
	fflush(stdout);
	/* the training loop: a millisecond of "compute" per batch */
	double end = now() + seconds;
	for (uint64_t epoch = 0; now() < end; epoch++) {
		struct stk_batch *b;
		stk_loader_start(l, epoch, 0);
		while (now() < end && (rc = stk_loader_next(l, &b)) == 1) {
			struct timespec ms = {0, 1000000};
			nanosleep(&ms, NULL);
			stk_batch_release(l, b);
		}
		if (rc < 0) {
			fprintf(stderr, "metrics: %s\n", stk_last_error(l));
			break;
		}
	}
	rc = rc < 0;
out:
	/* publisher and server go first: they read the loader */
	stk_metrics_server_destroy(srv);
	stk_publisher_destroy(pub);
	stk_loader_destroy(l);
	return rc < 0 ? 1 : rc;
}
