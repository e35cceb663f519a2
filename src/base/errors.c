/*
 * errors.c — the library's version and its error codes' names and messages
 * (STK_ERR_MAP in stoker.h is their one owner).
 */
#include "base/internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *stk_version(void)
{
	return STK__STR(STK_VERSION_MAJOR) "." STK__STR(STK_VERSION_MINOR) "." STK__STR(
		STK_VERSION_PATCH);
}

const char *stk_strerror(int err)
{
	switch (err) {
#define STK__ERR_MSG(name, value, msg) \
	case value:                    \
		return msg;
		STK_ERR_MAP(STK__ERR_MSG)
#undef STK__ERR_MSG
	}
	if (err < 0 && err > -4096)
		return strerror(-err);
	return "unknown error";
}

const char *stk_err_name(int err)
{
	switch (err) {
#define STK__ERR_NAME(name, value, msg) \
	case value:                     \
		return "STK_E" #name;
		STK_ERR_MAP(STK__ERR_NAME)
#undef STK__ERR_NAME
	}
	if (err < 0 && err > -4096) {
		const char *n = strerrorname_np(-err);
		if (n)
			return n;
	}
	return "EUNKNOWN";
}

int stk_err_at(int i)
{
	static const int codes[] = {
#define STK__ERR_CODE(name, value, msg) value,
		STK_ERR_MAP(STK__ERR_CODE)
#undef STK__ERR_CODE
	};
	return i >= 0 && (size_t)i < STK_ARRAY_SIZE(codes) ? codes[i] : 0;
}

int stk__errf(char *err, size_t len, int rc, const char *fmt, ...)
{
	if (err && len) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err, len, fmt, ap);
		va_end(ap);
	}
	return rc;
}
