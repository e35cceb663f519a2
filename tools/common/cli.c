/* common/cli.c — what the subcommands share besides option parsing (opt.c,
 * usage.c, optrows.c): library messages in the CLI's words, the progress
 * line, formatting, timing, and small system helpers. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "common/cli.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* A library message in the CLI's words: each option the table names in it
 * ("rank: 3 must be below world_size 2") becomes the flag that sets it
 * ("--rank: 3 must be below --world-size 2").  Names with '_' are rewritten
 * wherever they stand as a word; plain ones ("rank", "seed") only where the
 * message starts with "name:", since as words they are also prose. */
const char *cli_flag_words(const char *msg, char *buf, size_t len)
{
	size_t o = 0;
	if (!len)
		return msg;
	for (const char *p = msg; *p && o + 1 < len;) {
		bool word_start = p == msg || !(isalnum((unsigned char)p[-1]) || p[-1] == '_' ||
						p[-1] == '-');
		const struct stk_option *r, *hit = NULL;
		size_t hl = 0;
		for (int i = 0; word_start && (r = stk_option_at(i)); i++) {
			size_t l = strlen(r->name);
			if (strncmp(p, r->name, l) || isalnum((unsigned char)p[l]) || p[l] == '_')
				continue;
			if (!strchr(r->name, '_') && !(p == msg && p[l] == ':'))
				continue;
			if (l > hl) {
				hit = r;
				hl = l;
			}
		}
		if (!hit) {
			buf[o++] = *p++;
			continue;
		}
		int n = snprintf(buf + o, len - o, "--%s", hit->type == STK_OPT_NOFLAG ? "no-" : "");
		o += n > 0 && (size_t)n < len - o ? (size_t)n : 0;
		for (size_t k = 0; k < hl && o + 1 < len; k++)
			buf[o++] = hit->name[k] == '_' ? '-' : hit->name[k];
		p += hl;
	}
	buf[o] = 0;
	return buf;
}

bool progress_enabled(void)
{
	static int tty = -1;
	if (tty < 0)
		tty = isatty(STDERR_FILENO) && !getenv("STOKER_NO_PROGRESS");
	return tty;
}

static bool progress_shown;

void progress(const char *fmt, ...)
{
	if (!progress_enabled())
		return;
	char line[160];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	fprintf(stderr, "\r\033[K%s", line);
	fflush(stderr);
	progress_shown = true;
}

void progress_done(void)
{
	if (progress_shown) {
		fprintf(stderr, "\r\033[K");
		fflush(stderr);
		progress_shown = false;
	}
}

/* The library's formatter: one for every command. */
const char *fmt_bytes(char *buf, size_t len, double b)
{
	return stk_fmt_bytes(buf, len, b);
}

const char *fmt_ns(char *buf, size_t len, double ns)
{
	return stk_fmt_ns(buf, len, ns);
}

double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

double process_cpu_s(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
	       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

int drop_caches(char *why, size_t len)
{
	sync();
	int fd = open("/proc/sys/vm/drop_caches", O_WRONLY | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		snprintf(why, len, "cannot open /proc/sys/vm/drop_caches: %s%s", strerror(e),
			 e == EACCES || e == EPERM ? " (needs root)" : "");
		return -e;
	}
	ssize_t w = write(fd, "3\n", 2);
	int e = errno;
	close(fd);
	if (w != 2) {
		snprintf(why, len, "cannot write /proc/sys/vm/drop_caches: %s%s", strerror(e),
			 e == EACCES || e == EPERM || e == EROFS ? " (needs root outside a container)" : "");
		return -e;
	}
	return 0;
}

int mkdirs(const char *dir, char *failed, size_t len)
{
	char p[4096];
	int n = snprintf(p, sizeof(p), "%s", dir);
	if (n < 0 || (size_t)n >= sizeof(p))
		return -ENAMETOOLONG;
	int e = 0;
	for (char *s = p + 1;; s++) {
		if (*s != '/' && *s)
			continue;
		char c = *s;
		*s = 0;
		if (mkdir(p, 0755) && errno != EEXIST) {
			e = -errno;
			break;
		}
		*s = c;
		if (!c)
			break;
	}
	struct stat st;
	if (!e && stat(p, &st))
		e = -errno;
	else if (!e && !S_ISDIR(st.st_mode))
		e = -ENOTDIR;
	if (e && failed && len)
		snprintf(failed, len, "%s", p);
	return e;
}

void on_stop_signals(void (*handler)(int))
{
	struct sigaction sa = {.sa_handler = handler};
	sigemptyset(&sa.sa_mask);
	static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaddset(&sa.sa_mask, sigs[i]);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
		struct sigaction old;
		/* a signal the caller ignores (nohup, a script's background job) stays so */
		if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler != SIG_IGN)
			sigaction(sigs[i], &sa, NULL);
	}
}
