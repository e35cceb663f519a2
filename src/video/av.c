/*
 * DESIGN video/av.c — FFmpeg's libraries loaded at run time, once.
 *
 * libavcodec pulls in some seventy libraries (x264, dav1d, vpx, ...): linked,
 * every process that loads libstoker would load them, the .deb would depend
 * on them and the wheel would carry them.  So the build needs only the -dev
 * headers, and the first video call dlopens the sonames of the headers'
 * major versions (libavformat.so.59 ... for FFmpeg 5.1) under pthread_once,
 * fills one table of function pointers typed from the headers' prototypes
 * (video/av.h: the compiler checks every call), and keeps them for the
 * process.  Missing: every video call returns -ENOSYS saying which library
 * and the apt-get line.  FFmpeg's own logging is silenced (AV_LOG_QUIET:
 * errors reach the user through err, naming the file) unless
 * STOKER_AV_LOG=1.
 */
#include "video/av.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

struct stk__av stk__av_fn;

#define SONAME(name, major) "lib" name ".so." STK__STR(major)
static const char *const sonames[] = {
	SONAME("avutil", LIBAVUTIL_VERSION_MAJOR), SONAME("avcodec", LIBAVCODEC_VERSION_MAJOR),
	SONAME("avformat", LIBAVFORMAT_VERSION_MAJOR), SONAME("swscale", LIBSWSCALE_VERSION_MAJOR)};
/* Debian's package of each soname */
static const char *const packages[] = {
	"libavutil" STK__STR(LIBAVUTIL_VERSION_MAJOR), "libavcodec" STK__STR(LIBAVCODEC_VERSION_MAJOR),
	"libavformat" STK__STR(LIBAVFORMAT_VERSION_MAJOR),
	"libswscale" STK__STR(LIBSWSCALE_VERSION_MAJOR)};
enum { LIB_U, LIB_C, LIB_F, LIB_S, NLIBS };

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int load_rc;
static char load_err[512];

static void load(void)
{
	void *h[NLIBS] = {0};
	size_t o = 0;
	for (int i = 0; i < NLIBS; i++) {
		h[i] = dlopen(sonames[i], RTLD_NOW | RTLD_LOCAL);
		if (!h[i])
			o += (size_t)snprintf(load_err + o, o < sizeof(load_err) ? sizeof(load_err) - o : 0,
					      "%s%s", o ? ", " : "", sonames[i]);
	}
	if (o) {
		char pk[160];
		size_t p = 0;
		for (int i = 0; i < NLIBS; i++)
			p += (size_t)snprintf(pk + p, p < sizeof(pk) ? sizeof(pk) - p : 0, " %s",
					      packages[i]);
		size_t l = strlen(load_err);
		snprintf(load_err + l, sizeof(load_err) - l,
			 " missing: video needs FFmpeg's libraries: apt-get install%s", pk);
		load_rc = -ENOSYS;
		goto fail;
	}
#define STK__AV_SYM(lib, fn)                                                                     \
	if (!(*(void **)&stk__av_fn.fn = dlsym(h[LIB_##lib], #fn))) {                            \
		snprintf(load_err, sizeof(load_err),                                             \
			 "%s has no %s: not the FFmpeg stoker was built with", sonames[LIB_##lib], \
			 #fn);                                                                   \
		load_rc = -ENOSYS;                                                               \
		goto fail;                                                                       \
	}
	STK_AV_FUNCS(STK__AV_SYM)
#undef STK__AV_SYM
	{
		const char *e = getenv("STOKER_AV_LOG");
		if (!e || strcmp(e, "1"))
			AV(av_log_set_level)(AV_LOG_QUIET);
	}
	return; /* the handles stay open for the process */
fail:
	for (int i = 0; i < NLIBS; i++)
		if (h[i])
			dlclose(h[i]);
	memset(&stk__av_fn, 0, sizeof(stk__av_fn));
}

int stk__av_load(char *err, size_t errlen)
{
	pthread_once(&once, load);
	if (load_rc < 0)
		snprintf(err, errlen, "%s", load_err);
	return load_rc;
}

const char *stk__av_err(int averr, char *buf, size_t len)
{
	if (AV(av_strerror)(averr, buf, len) < 0)
		snprintf(buf, len, "FFmpeg error %d", averr);
	return buf;
}
