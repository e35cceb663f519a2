/*
 * base/fmt.c — figures in words: sizes, rates and durations, the one
 * formatter every front end prints them with (the CLI's tables, the tuner's
 * and the verdict's sentences, --help's ranges), so that one figure never
 * reads two ways ("1.29e+03 MB/s" here, "1.29 GB/s" there).
 *
 * Decimal units for measured figures (kB, MB, GB: what iostat and fio's
 * MB/s say), three significant digits; binary units for sizes a user types
 * (KiB, MiB: powers of two, printed exactly when they are whole).
 */
#include "base/internal.h"

#include <stdio.h>

/* v (>= 1) with three significant digits and no more decimals than that. */
static int three(char *buf, size_t len, double v, const char *unit)
{
	int d = v < 9.995 ? 2 : v < 99.95 ? 1 : 0;
	return snprintf(buf, len, "%.*f %s", d, v, unit);
}

const char *stk_fmt_bytes(char *buf, size_t len, double b)
{
	static const char *const u[] = {"B", "kB", "MB", "GB", "TB", "PB"};
	int i = 0;
	while (b >= 999.5 && i < 5) {
		b /= 1000;
		i++;
	}
	if (i == 0)
		snprintf(buf, len, "%.0f B", b);
	else
		three(buf, len, b, u[i]);
	return buf;
}

const char *stk_fmt_rate(char *buf, size_t len, double bytes_per_s)
{
	char b[32];
	snprintf(buf, len, "%s/s", stk_fmt_bytes(b, sizeof(b), bytes_per_s));
	return buf;
}

const char *stk_fmt_ibytes(char *buf, size_t len, double b)
{
	static const char *const u[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
	int i = 0;
	while (b >= 1024 && i < 6) {
		b /= 1024;
		i++;
	}
	if (b == (double)(long long)b)
		snprintf(buf, len, "%lld %s", (long long)b, u[i]);
	else
		three(buf, len, b, u[i]);
	return buf;
}

const char *stk_fmt_ns(char *buf, size_t len, double ns)
{
	if (ns < 999.5)
		snprintf(buf, len, "%.0f ns", ns);
	else if (ns < 999.95e3)
		snprintf(buf, len, "%.1f us", ns / 1e3);
	else if (ns < 999.995e6)
		snprintf(buf, len, "%.2f ms", ns / 1e6);
	else
		snprintf(buf, len, "%.2f s", ns / 1e9);
	return buf;
}
