/*
 * exporter.c — `stoker exporter [--listen ADDR] [--dir DIR] [--once]`: a
 * Prometheus /metrics endpoint for this machine: disk counters per device,
 * GPU utilization and memory through NVML, and the metrics of the loaders
 * running here, which publish themselves as <pid>-<name>.prom files
 * (stk_loader_publish) in DIR.  What it serves is the library's
 * (stk_machine_metrics_text: the merge of the published files, the stale
 * ones left out); this file is its command line and its server loop.
 *
 * SIGINT and SIGTERM are blocked and taken with sigwait, so Ctrl-C ends the
 * loop on this thread and the exit is clean.
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cli.h"
#include "stoker/metrics.h"

/* The subcommand (to be declared in common/cli.h with the others). */
int cmd_exporter(int argc, char **argv);

struct exporter {
	const char *root, *dir;
};

/* The server's render function: the library's exposition. */
static int render(void *arg, char *buf, size_t len)
{
	struct exporter *e = arg;
	return stk_machine_metrics_text(e->root, e->dir, buf, len);
}

int cmd_exporter(int argc, char **argv)
{
	const char *listen_at = NULL, *dir = NULL, *root = "";
	bool once = false;
	static const struct cmd_help help = {
		"exporter", "[--listen ADDR] [--dir DIR] [--once]",
		"A Prometheus /metrics endpoint for this machine: disk counters per device\n"
		"(stoker_disk_*, node_exporter's figures), GPU utilization and memory through NVML\n"
		"(stoker_gpu_*), and the metrics of the loaders running here (stoker_loader_*),\n"
		"which publish themselves in DIR (stk_loader_publish; files of processes that\n"
		"are gone are ignored).  It listens on loopback unless told otherwise: ADDR is\n"
		"HOST:PORT (numeric IPv4 or localhost), [IPv6]:PORT, or :PORT for every\n"
		"interface.  --once prints the exposition instead.  Ctrl-C stops it.",
		"stoker exporter                       # http://127.0.0.1:9464/metrics\n"
		"stoker exporter --listen :9464        # on every interface, for a Prometheus elsewhere\n"
		"stoker exporter --once | promtool check metrics  # one exposition, checked"};
	const struct opt opts[] = {
		OPT_GROUP("serving"),
		{"listen", 'l', OPT_STR, &listen_at, "127.0.0.1:9464", 0, 0, NULL, "ADDR",
		 "where to serve /metrics (port 0: any free port, printed at start)"},
		{"dir", 'd', OPT_STR, &dir, NULL, 0, 0, NULL, "DIR",
		 "where loaders publish [$STOKER_METRICS_DIR, else /run/stoker when writable, "
		 "else ~/.cache/stoker/metrics]"},
		OPT_GROUP("output"),
		{"once", 0, OPT_BOOL, &once, NULL, 0, 0, NULL, NULL,
		 "print the exposition on stdout and exit (no server)"},
		OPT_GROUP("testing"),
		{"root", 0, OPT_STR, &root, NULL, 0, 0, NULL, "DIR",
		 "read /proc and /sys under DIR for the disks (a fake tree, for tests)"},
		OPT_END,
	};
	int first = opt_parse(&help, opts, argc, argv);
	if (first < 0)
		return -first;
	if (first < argc) {
		fprintf(stderr, "stoker exporter: unexpected operand '%s'\ntry 'stoker exporter --help'\n",
			argv[first]);
		return EXIT_USAGE;
	}
	char dbuf[PATH_MAX];
	if (!dir) {
		int rc = stk_metrics_dir(dbuf, sizeof(dbuf));
		if (rc < 0) {
			fprintf(stderr, "stoker exporter: no folder for published loaders: %s (use --dir)\n",
				stk_strerror(rc));
			return EXIT_FAIL;
		}
		dir = dbuf;
	} else if (access(dir, R_OK | X_OK)) {
		/* not fatal: the folder may appear when the first loader publishes */
		fprintf(stderr, "stoker exporter: warning: %s: %s (no published loaders until it can be read)\n",
			dir, strerror(errno));
	}
	struct exporter e = {.root = root, .dir = dir};
	/* render once in both modes: a bad --root or an unreadable diskstats
	 * is said now, not as a 500 on the first scrape */
	int rc = stk_machine_metrics_text(root, dir, NULL, 0);
	char *text = rc >= 0 ? malloc((size_t)rc + 1) : NULL;
	if (rc >= 0 && text)
		rc = stk_machine_metrics_text(root, dir, text, (size_t)rc + 1);
	else if (rc >= 0)
		rc = -ENOMEM;
	if (rc < 0) {
		fprintf(stderr, "stoker exporter: %s/proc/diskstats: %s\n", root, stk_strerror(rc));
		free(text);
		return EXIT_FAIL;
	}
	if (once) {
		size_t w = fwrite(text, 1, (size_t)rc, stdout);
		free(text);
		if (w != (size_t)rc || fflush(stdout)) {
			fprintf(stderr, "stoker exporter: cannot write the exposition: %s\n", strerror(errno));
			return EXIT_FAIL;
		}
		return EXIT_OK;
	}
	free(text);

	/* Blocked before the server's thread starts, so only sigwait takes them. */
	sigset_t sigs, old;
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &sigs, &old);
	struct stk_metrics_server *srv;
	rc = stk_metrics_serve_fn(&srv, listen_at, render, &e);
	if (rc == -EINVAL) {
		fprintf(stderr,
			"stoker exporter: --listen '%s': not HOST:PORT (numeric IPv4 or localhost), "
			"[IPv6]:PORT or :PORT, with a port from 0 to 65535\n",
			listen_at);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		return EXIT_USAGE;
	}
	if (rc < 0) {
		fprintf(stderr, "stoker exporter: cannot listen on %s: %s\n", listen_at, stk_strerror(rc));
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		return EXIT_FAIL;
	}
	const char *colon = strrchr(listen_at, ':');
	int hl = colon ? (int)(colon - listen_at) : 0, port = stk_metrics_server_port(srv);
	if (hl)
		fprintf(stderr, "stoker exporter: serving http://%.*s:%d/metrics; loaders from %s\n",
			hl, listen_at, port, dir);
	else
		fprintf(stderr, "stoker exporter: serving /metrics on port %d of every interface; "
			"loaders from %s\n", port, dir);
	int sig;
	while (sigwait(&sigs, &sig))
		;
	stk_metrics_server_destroy(srv);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	fprintf(stderr, "stoker exporter: stopped (%s)\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
	return EXIT_OK;
}
