/*
 * metrics/serve.c — getting the text of metrics/metrics.c to Prometheus: a
 * publisher thread that keeps a loader's metrics in a file for
 * `stoker exporter`, and an HTTP server (libmicrohttpd) for /metrics.
 *
 * Publishing is node_exporter's textfile idea: each loader rewrites
 * <dir>/<pid>-<name>.prom every interval (write a temporary file, rename it
 * over the old one: a reader sees a whole file or the previous one), and the
 * exporter serves the files whose process is alive.  No socket per loader,
 * no registry, nothing to clean up after a crash but a file the exporter
 * already ignores.  The folder and the names are metrics/published.c's, which
 * also collects the files for the exporter.
 *
 * The server binds its own socket and hands it to libmicrohttpd, so a bind
 * error comes back as its errno (EADDRINUSE, EACCES) and port 0 works.  One
 * internal thread serves every connection, so a render function never runs
 * twice at once.  Our threads (the publisher's, the server's) start with
 * every signal blocked: Ctrl-C goes to the program's own threads, which is
 * what a CLI's sigwait and Python's signal handling expect.
 */
#include "base/internal.h"
#include "metrics/metrics_int.h"
#include "stoker/metrics.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <limits.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>


/* Starts a thread with every signal blocked (see the top). */
static int start_quiet(pthread_t *t, void *(*fn)(void *), void *arg)
{
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int rc = -pthread_create(t, NULL, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return rc;
}

/* ---- publishing ------------------------------------------------------------ */

struct stk_publisher {
	const struct stk_loader *l;
	char name[65];
	char path[PATH_MAX], tmp[PATH_MAX];
	uint64_t interval_ns;
	char *buf; /* the publisher thread's, after create */
	size_t cap;
	pthread_mutex_t mu;
	pthread_cond_t cv; /* on CLOCK_MONOTONIC: a clock change neither stalls nor floods */
	bool stop;
	pthread_t th;
};

static int write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? -errno : -EIO;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static int publish_once(struct stk_publisher *p)
{
	int n;
	while ((n = stk_loader_metrics_text(p->l, p->name, p->buf, p->cap)) >= 0 &&
	       (size_t)n >= p->cap) {
		size_t cap = (size_t)n + 4096; /* room for counters that grow a digit */
		char *b = realloc(p->buf, cap);
		if (!b)
			return -ENOMEM;
		p->buf = b;
		p->cap = cap;
	}
	if (n < 0)
		return n;
	/* O_NOFOLLOW: in a shared sticky folder, never write through a link
	 * someone else left under our temporary name. */
	int fd = open(p->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	int rc = write_all(fd, p->buf, (size_t)n);
	if (close(fd) && !rc)
		rc = -errno;
	if (!rc && rename(p->tmp, p->path))
		rc = -errno;
	if (rc)
		unlink(p->tmp);
	return rc;
}

static void *publish_main(void *arg)
{
	struct stk_publisher *p = arg;
	struct timespec next, now;
	clock_gettime(CLOCK_MONOTONIC, &next);
	pthread_mutex_lock(&p->mu);
	while (!p->stop) {
		uint64_t t = (uint64_t)next.tv_sec * 1000000000ull + (uint64_t)next.tv_nsec +
			     p->interval_ns;
		clock_gettime(CLOCK_MONOTONIC, &now);
		uint64_t tnow = (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
		if (t < tnow) /* a slow write (or a suspend): start afresh, no burst */
			t = tnow + p->interval_ns;
		next.tv_sec = (time_t)(t / 1000000000ull);
		next.tv_nsec = (long)(t % 1000000000ull);
		while (!p->stop && pthread_cond_timedwait(&p->cv, &p->mu, &next) != ETIMEDOUT)
			;
		if (p->stop)
			break;
		pthread_mutex_unlock(&p->mu);
		/* A failure (disk full, folder removed) is retried next time; the
		 * file's age tells a reader it went stale. */
		publish_once(p);
		pthread_mutex_lock(&p->mu);
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

int stk_loader_publish(struct stk_publisher **out, const struct stk_loader *l, const char *dir,
		       const char *name, double interval_s)
{
	if (!out)
		return -EINVAL;
	*out = NULL;
	if (!name)
		name = "default";
	if (!l || !stk__published_name_ok(name, strlen(name)) || !(interval_s == 0 || (interval_s >= 0.001 && interval_s <= 86400)))
		return -EINVAL;
	char dbuf[PATH_MAX];
	int rc;
	if (!dir) {
		if ((rc = stk_metrics_dir(dbuf, sizeof(dbuf))) < 0)
			return rc;
		dir = dbuf;
	}
	struct stk_publisher *p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->l = l;
	snprintf(p->name, sizeof(p->name), "%s", name);
	p->interval_ns = (uint64_t)((interval_s ? interval_s : 5.0) * 1e9);
	int pid = (int)getpid();
	int n1 = snprintf(p->path, sizeof(p->path), "%s/%d-%s.prom", dir, pid, name);
	/* hidden, so the exporter never takes it for a published file */
	int n2 = snprintf(p->tmp, sizeof(p->tmp), "%s/.%d-%s.prom.tmp", dir, pid, name);
	if (n1 < 0 || n2 < 0 || (size_t)n1 >= sizeof(p->path) || (size_t)n2 >= sizeof(p->tmp)) {
		free(p);
		return -ENAMETOOLONG;
	}
	pthread_condattr_t ca;
	if ((rc = -pthread_condattr_init(&ca))) {
		free(p);
		return rc;
	}
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	rc = -pthread_cond_init(&p->cv, &ca);
	pthread_condattr_destroy(&ca);
	if (rc) {
		free(p);
		return rc;
	}
	pthread_mutex_init(&p->mu, NULL);
	if ((rc = publish_once(p)) || (rc = start_quiet(&p->th, publish_main, p))) {
		unlink(p->path);
		pthread_cond_destroy(&p->cv);
		pthread_mutex_destroy(&p->mu);
		free(p->buf);
		free(p);
		return rc;
	}
	*out = p;
	return 0;
}

const char *stk_publisher_path(const struct stk_publisher *p)
{
	return p ? p->path : NULL;
}

void stk_publisher_destroy(struct stk_publisher *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	p->stop = true;
	pthread_cond_signal(&p->cv);
	pthread_mutex_unlock(&p->mu);
	pthread_join(p->th, NULL);
	unlink(p->path);
	unlink(p->tmp); /* left only if the last write failed half-way */
	pthread_cond_destroy(&p->cv);
	pthread_mutex_destroy(&p->mu);
	free(p->buf);
	free(p);
}

/* ---- the HTTP server ---------------------------------------------------- */

static int parse_port(const char *s, in_port_t *port)
{
	unsigned v = 0;
	size_t n = 0;
	for (; s[n]; n++) {
		if (s[n] < '0' || s[n] > '9' || n >= 5)
			return -EINVAL;
		v = v * 10 + (unsigned)(s[n] - '0');
	}
	if (!n || v > 65535)
		return -EINVAL;
	*port = htons((in_port_t)v);
	return 0;
}

int stk__listen_parse(const char *s, struct sockaddr_storage *ss, socklen_t *sl, int *wild)
{
	if (!s || !*s)
		s = "127.0.0.1:9464";
	char host[64];
	const char *port;
	size_t hl;
	memset(ss, 0, sizeof(*ss));
	*wild = 0;
	if (s[0] == '[') {
		const char *end = strchr(s, ']');
		if (!end || end[1] != ':' || (hl = (size_t)(end - s - 1)) == 0 || hl >= sizeof(host))
			return -EINVAL;
		memcpy(host, s + 1, hl);
		host[hl] = 0;
		port = end + 2;
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;
		a->sin6_family = AF_INET6;
		if (inet_pton(AF_INET6, host, &a->sin6_addr) != 1)
			return -EINVAL;
		*sl = sizeof(*a);
		return parse_port(port, &a->sin6_port);
	}
	const char *colon = strrchr(s, ':');
	if (!colon || (hl = (size_t)(colon - s)) >= sizeof(host) || memchr(s, ':', hl))
		return -EINVAL; /* no port, or an IPv6 address without its brackets */
	memcpy(host, s, hl);
	host[hl] = 0;
	port = colon + 1;
	if (!hl) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;
		a->sin6_family = AF_INET6;
		a->sin6_addr = in6addr_any;
		*sl = sizeof(*a);
		*wild = 1;
		return parse_port(port, &a->sin6_port);
	}
	struct sockaddr_in *a = (struct sockaddr_in *)ss;
	a->sin_family = AF_INET;
	/* numeric only (inet_pton refuses "1.2.3" and friends): no name lookup
	 * decides where metrics are exposed */
	if (inet_pton(AF_INET, strcmp(host, "localhost") ? host : "127.0.0.1", &a->sin_addr) != 1)
		return -EINVAL;
	*sl = sizeof(*a);
	return parse_port(port, &a->sin_port);
}

static int open_listener(const char *listen_str, int *port)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	int wild, rc;
	if ((rc = stk__listen_parse(listen_str, &ss, &sl, &wild)) < 0)
		return rc;
	int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 && wild && errno == EAFNOSUPPORT) {
		/* a kernel without IPv6: every interface is IPv4's any */
		in_port_t p = ((struct sockaddr_in6 *)&ss)->sin6_port;
		struct sockaddr_in *a = (struct sockaddr_in *)&ss;
		memset(&ss, 0, sizeof(ss));
		a->sin_family = AF_INET;
		a->sin_addr.s_addr = htonl(INADDR_ANY);
		a->sin_port = p;
		sl = sizeof(*a);
		fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	}
	if (fd < 0)
		return -errno;
	int one = 1, zero = 0;
	/* a restarted exporter rebinds while the old connections sit in TIME_WAIT */
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (wild && ss.ss_family == AF_INET6) /* ":PORT" means IPv4 too */
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
	if (bind(fd, (struct sockaddr *)&ss, sl) || listen(fd, 128)) {
		rc = -errno;
		close(fd);
		return rc;
	}
	sl = sizeof(ss);
	if (getsockname(fd, (struct sockaddr *)&ss, &sl)) {
		rc = -errno;
		close(fd);
		return rc;
	}
	*port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
					       : ((struct sockaddr_in *)&ss)->sin_port);
	return fd;
}

struct stk_metrics_server {
	struct MHD_Daemon *d;
	int port;
	int (*render)(void *, char *, size_t);
	void *arg;
	size_t cap; /* the last body's size, with room: the next one's first guess */
	/* stk_metrics_serve's own render */
	const struct stk_loader *l;
	char *name;
};

#define CTYPE_METRICS "text/plain; version=0.0.4; charset=utf-8"
#define CTYPE_TEXT "text/plain; charset=utf-8"

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, const char *ctype,
			     char *body, size_t len, enum MHD_ResponseMemoryMode mode)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(len, body, mode);
	if (!r) {
		if (mode == MHD_RESPMEM_MUST_FREE)
			free(body);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
	if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
	enum MHD_Result ret = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
			      const char *method, const char *version, const char *upload,
			      size_t *upload_size, void **req)
{
	(void)version;
	(void)upload;
	(void)upload_size;
	(void)req;
	struct stk_metrics_server *s = cls;
	static char not_found[] = "not found: this server has /metrics\n";
	static char not_allowed[] = "only GET and HEAD\n";
	if (strcmp(url, "/metrics"))
		return reply(c, MHD_HTTP_NOT_FOUND, CTYPE_TEXT, not_found, sizeof(not_found) - 1,
			     MHD_RESPMEM_PERSISTENT);
	if (strcmp(method, "GET") && strcmp(method, "HEAD"))
		return reply(c, MHD_HTTP_METHOD_NOT_ALLOWED, CTYPE_TEXT, not_allowed,
			     sizeof(not_allowed) - 1, MHD_RESPMEM_PERSISTENT);
	size_t cap = s->cap ? s->cap : 65536;
	int n = -ENOMEM;
	/* the text may grow between the sizing call and the next: a few tries */
	for (int tries = 0; tries < 4; tries++) {
		char *b = malloc(cap);
		if (!b) {
			n = -ENOMEM;
			break;
		}
		n = s->render(s->arg, b, cap);
		if (n >= 0 && (size_t)n < cap) {
			s->cap = (size_t)n + (size_t)n / 4 + 4096;
			return reply(c, MHD_HTTP_OK, CTYPE_METRICS, b, (size_t)n,
				     MHD_RESPMEM_MUST_FREE);
		}
		free(b);
		if (n < 0)
			break;
		cap = (size_t)n + 4096;
		n = -EAGAIN;
	}
	char msg[128];
	int ml = snprintf(msg, sizeof(msg), "cannot render the metrics: %s\n", stk_strerror(n));
	return reply(c, MHD_HTTP_INTERNAL_SERVER_ERROR, CTYPE_TEXT, msg,
		     ml > 0 && (size_t)ml < sizeof(msg) ? (size_t)ml : strlen(msg),
		     MHD_RESPMEM_MUST_COPY);
}

/* Idle or slow clients (connected, sending nothing) must not starve a
 * scrape: a full server stops accepting, and a scrape waits in the backlog
 * until an idle one times out.  So the limit is far above what scrapers use:
 * 512 connections (one thread polls them all with epoll; each holds at most
 * its 32 KiB pool, touched only as used), at most half of ulimit -n so a
 * loader in the same process keeps its descriptors; idle ones are closed
 * after IDLE_S. */
#define MAX_CONNECTIONS 512u
#define IDLE_S 10u

static unsigned connection_limit(void)
{
	struct rlimit rl;
	unsigned n = MAX_CONNECTIONS;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
	    rl.rlim_cur / 2 < n)
		n = rl.rlim_cur / 2 > 16 ? (unsigned)(rl.rlim_cur / 2) : 16;
	return n;
}

/* Binds and starts serving s, filled in by the caller; frees s on failure. */
static int start(struct stk_metrics_server **out, struct stk_metrics_server *s,
		 const char *listen_str)
{
	int fd = open_listener(listen_str, &s->port);
	if (fd < 0) {
		free(s->name);
		free(s);
		return fd;
	}
	/* MHD starts its thread inside this call: block signals around it */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	s->d = MHD_start_daemon(MHD_USE_AUTO_INTERNAL_THREAD, 0, NULL, NULL, handle, s,
				MHD_OPTION_LISTEN_SOCKET, fd,
				MHD_OPTION_CONNECTION_LIMIT, connection_limit(),
				MHD_OPTION_CONNECTION_TIMEOUT, IDLE_S,
				MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)32768, MHD_OPTION_END);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (!s->d) {
		close(fd);
		free(s->name);
		free(s);
		return -EIO;
	}
	*out = s;
	return 0;
}

int stk_metrics_serve_fn(struct stk_metrics_server **out, const char *listen_str,
			 int (*render)(void *arg, char *buf, size_t len), void *arg)
{
	if (!out)
		return -EINVAL;
	*out = NULL;
	if (!render)
		return -EINVAL;
	struct stk_metrics_server *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->render = render;
	s->arg = arg;
	return start(out, s, listen_str);
}

/* The loader's, the disks' and the GPUs' text, one after the other. */
static int render_loader(void *arg, char *buf, size_t len)
{
	struct stk_metrics_server *s = arg;
	size_t pos = 0;
	for (int part = 0; part < 3; part++) {
		char *b = pos < len ? buf + pos : NULL;
		size_t room = pos < len ? len - pos : 0;
		int n = part == 0 ? (s->l ? stk_loader_metrics_text(s->l, s->name, b, room) : 0)
			: part == 1 ? stk_disk_metrics_text(NULL, b, room)
				    : stk_gpu_metrics_text(b, room);
		if (n < 0 && part == 1)
			n = 0; /* no /proc/diskstats here: the loader's figures still count */
		if (n < 0)
			return n;
		pos += (size_t)n;
	}
	return pos > INT_MAX ? -EOVERFLOW : (int)pos;
}

int stk_metrics_serve(struct stk_metrics_server **out, const char *listen_str,
		      const struct stk_loader *l, const char *name)
{
	if (!out)
		return -EINVAL;
	*out = NULL;
	if (name && strlen(name) > 128)
		return -EINVAL;
	struct stk_metrics_server *s = calloc(1, sizeof(*s));
	if (!s || (name && !(s->name = strdup(name)))) {
		free(s);
		return -ENOMEM;
	}
	s->render = render_loader;
	s->arg = s;
	s->l = l;
	return start(out, s, listen_str);
}

int stk_metrics_server_port(const struct stk_metrics_server *s)
{
	return s ? s->port : -EINVAL;
}

void stk_metrics_server_destroy(struct stk_metrics_server *s)
{
	if (!s)
		return;
	MHD_stop_daemon(s->d);
	free(s->name);
	free(s);
}
