/*
 * sys/probe.c — probes that try the real thing instead of reading settings:
 * io_uring (a ring with the opcodes the loader uses, through the engine's own
 * probe), O_DIRECT in a folder (an unnamed O_TMPFILE, or an existing file
 * read-only), and NVIDIA GPUs through NVML.
 *
 * NVML is opened with dlopen at each call and closed after: the library is
 * never needed to build or run, a machine without the driver costs one failed
 * dlopen, and nothing stays loaded in a process that only asked once.  The
 * few NVML entry points used are declared here with their documented
 * signatures (nvml.h is not needed either).
 */
#include "io/engine.h"
#include "sys/sys_int.h"

#include <dirent.h>
#include <dlfcn.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

int stk_sys_io_uring_probe(char *why, size_t len)
{
	char buf[256] = "";
	int rc = stk__uring_probe(buf, sizeof(buf));
	if (why && len)
		snprintf(why, len, "%s", rc < 0 ? buf : "io_uring works");
	return rc;
}

/* ---- O_DIRECT ----------------------------------------------------------- */

static void say(char *why, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say(char *why, size_t len, const char *fmt, ...)
{
	if (!why || !len)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, len, fmt, ap);
	va_end(ap);
}

/* One aligned block through fd, which has O_DIRECT set: write (when asked)
 * then read back.  0, -EINVAL (refused) or another -errno. */
static int direct_io(int fd, bool write_too)
{
	void *buf;
	if (posix_memalign(&buf, STK_DIRECT_ALIGN, STK_DIRECT_ALIGN))
		return -ENOMEM;
	memset(buf, 0x5a, STK_DIRECT_ALIGN);
	int rc = 0;
	if (write_too && pwrite(fd, buf, STK_DIRECT_ALIGN, 0) != (ssize_t)STK_DIRECT_ALIGN)
		rc = errno ? -errno : -EIO;
	if (!rc && pread(fd, buf, STK_DIRECT_ALIGN, 0) < 0)
		rc = -errno;
	free(buf);
	return rc;
}

/* First regular file under dir, depth-first, giving up after `budget`
 * entries so a huge tree costs little. */
static int find_file(const char *dir, char *out, size_t len, int *budget, int depth)
{
	DIR *d = opendir(dir);
	if (!d)
		return -errno;
	int rc = -ENOENT;
	for (struct dirent *e; rc && *budget > 0 && (e = readdir(d));) {
		(*budget)--;
		if (e->d_name[0] == '.')
			continue;
		char p[PATH_MAX];
		struct stat st;
		if (snprintf(p, sizeof(p), "%s/%s", dir, e->d_name) >= (int)sizeof(p) || lstat(p, &st))
			continue;
		if (S_ISREG(st.st_mode) && st.st_size > 0) {
			rc = snprintf(out, len, "%s", p) >= (int)len ? -ENAMETOOLONG : 0;
		} else if (S_ISDIR(st.st_mode) && depth < 16) {
			rc = find_file(p, out, len, budget, depth + 1);
			if (rc && rc != -ENOENT)
				rc = -ENOENT;
		}
	}
	closedir(d);
	return rc;
}

static int probe_existing(const char *dir, const char *file, char *why, size_t len)
{
	char found[PATH_MAX];
	if (!file) {
		int budget = 10000;
		if (find_file(dir, found, sizeof(found), &budget, 0)) {
			say(why, len, "%s holds no file to read", dir);
			return -ENOENT;
		}
		file = found;
	}
	/* read-only: never writes to a user's file */
	int fd = open(file, O_RDONLY | O_DIRECT | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		say(why, len, "open(%s, O_DIRECT): %s", file, strerror(e));
		return -e;
	}
	int rc = direct_io(fd, false);
	close(fd);
	say(why, len, rc ? "O_DIRECT read of %s: %s" : "O_DIRECT read of %s works", file,
	    strerror(-rc));
	return rc;
}

int stk_sys_direct_read_probe(const char *dir, const char *file, char *why, size_t len)
{
	return dir || file ? probe_existing(dir ? dir : ".", file, why, len) : -EINVAL;
}

int stk_sys_direct_probe(const char *dir, const char *file, char *why, size_t len)
{
	if (!dir)
		return -EINVAL;
	/* An unnamed file: nothing is left behind, even if we are killed. */
	int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL)) {
		char tmpl[PATH_MAX];
		if (snprintf(tmpl, sizeof(tmpl), "%s/.stoker-direct-XXXXXX", dir) >= (int)sizeof(tmpl))
			return -ENAMETOOLONG;
		fd = mkostemp(tmpl, O_CLOEXEC);
		if (fd >= 0) {
			unlink(tmpl); /* removed at once: the descriptor keeps it alive */
		}
	}
	if (fd < 0) {
		int e = errno;
		if (e == EROFS || e == EACCES || e == EPERM)
			return probe_existing(dir, file, why, len);
		say(why, len, "cannot create a temporary file in %s: %s", dir, strerror(e));
		return -e;
	}
	int rc = 0;
	int fl = fcntl(fd, F_GETFL);
	/* The filesystem says no when the flag is set (tmpfs before 6.6, some FUSE). */
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_DIRECT) < 0)
		rc = -errno;
	if (!rc)
		rc = direct_io(fd, true);
	close(fd);
	say(why, len, rc ? "O_DIRECT on a temporary file in %s: %s"
			 : "write and read of a temporary file in %s",
	    dir, strerror(-rc));
	return rc;
}

/* ---- PCIe and NVML ------------------------------------------------------ */

double stk_sys_pcie_gbps(int gen, int width)
{
	/* GB/s per lane, one direction, after line coding */
	static const double lane[] = {0, 0.25, 0.5, 0.9846, 1.9692, 3.9385, 7.5625, 15.125};
	if (gen < 1 || (size_t)gen >= STK_ARRAY_SIZE(lane) || width < 1)
		return 0;
	return lane[gen] * width;
}

typedef int nvret;
typedef void *nvdev;
struct nvmem {
	unsigned long long total, free, used;
};
/* nvmlMemory_v2_t: "used" without the driver's reservation, as nvidia-smi
 * shows it (v1's used counts the reservation: +615 MiB on an H200) */
struct nvmem2 {
	unsigned int version;
	unsigned long long total, reserved, free, used;
};
struct nvutil {
	unsigned int gpu, memory;
};

struct nvml {
	void *so;
	nvret (*init)(void);
	nvret (*shutdown)(void);
	const char *(*errstr)(nvret);
	nvret (*count)(unsigned int *);
	nvret (*handle)(unsigned int, nvdev *);
	nvret (*name)(nvdev, char *, unsigned int);
	nvret (*mem)(nvdev, struct nvmem *);
	nvret (*mem2)(nvdev, struct nvmem2 *);
	nvret (*pci)(nvdev, void *); /* nvmlPciInfo_t: busId at byte 36 */
	nvret (*gen)(nvdev, unsigned int *), (*width)(nvdev, unsigned int *);
	nvret (*gen_max)(nvdev, unsigned int *), (*width_max)(nvdev, unsigned int *);
	nvret (*util)(nvdev, struct nvutil *);
};

static int nvml_open(struct nvml *n, char *why, size_t len)
{
	memset(n, 0, sizeof(*n));
	n->so = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!n->so) {
		say(why, len, "no NVIDIA driver found (libnvidia-ml.so.1 cannot be loaded)");
		return -ENOENT;
	}
	static const struct {
		const char *sym;
		size_t off;
		bool required;
	} syms[] = {
#define S(name, field, req) {name, offsetof(struct nvml, field), req}
		S("nvmlInit_v2", init, true),
		S("nvmlShutdown", shutdown, true),
		S("nvmlErrorString", errstr, false),
		S("nvmlDeviceGetCount_v2", count, true),
		S("nvmlDeviceGetHandleByIndex_v2", handle, true),
		S("nvmlDeviceGetName", name, false),
		S("nvmlDeviceGetMemoryInfo", mem, false),
		S("nvmlDeviceGetMemoryInfo_v2", mem2, false),
		S("nvmlDeviceGetPciInfo_v3", pci, false),
		S("nvmlDeviceGetCurrPcieLinkGeneration", gen, false),
		S("nvmlDeviceGetCurrPcieLinkWidth", width, false),
		S("nvmlDeviceGetMaxPcieLinkGeneration", gen_max, false),
		S("nvmlDeviceGetMaxPcieLinkWidth", width_max, false),
		S("nvmlDeviceGetUtilizationRates", util, false),
#undef S
	};
	for (size_t i = 0; i < STK_ARRAY_SIZE(syms); i++) {
		void *f = dlsym(n->so, syms[i].sym);
		if (!f && syms[i].required) {
			say(why, len, "libnvidia-ml.so.1 lacks %s (driver too old)", syms[i].sym);
			dlclose(n->so);
			return -ENOENT;
		}
		memcpy((char *)n + syms[i].off, &f, sizeof(f));
	}
	nvret r = n->init();
	if (r) {
		say(why, len, "NVML does not start: %s (no driver loaded, or no GPU visible)",
		    n->errstr ? n->errstr(r) : "error");
		dlclose(n->so);
		return -ENODEV;
	}
	return 0;
}

int stk_sys_gpus(struct stk_gpu *out, size_t max, char *why, size_t len)
{
	long stride = stk__sys_stride(out, max, sizeof(*out), sizeof(uint32_t));
	if (stride < 0)
		return (int)stride;
	struct nvml n;
	int rc = nvml_open(&n, why, len);
	if (rc < 0)
		return rc;
	unsigned int count = 0;
	nvret r = n.count(&count);
	if (r) {
		say(why, len, "nvmlDeviceGetCount: %s", n.errstr ? n.errstr(r) : "error");
		n.shutdown();
		dlclose(n.so);
		return -ENODEV;
	}
	for (unsigned int i = 0; i < count && i < max; i++) {
		struct stk_gpu g;
		memset(&g, 0, sizeof(g));
		g.index = i;
		g.pcie_gen = g.pcie_width = g.pcie_gen_max = g.pcie_width_max = g.util_gpu = -1;
		nvdev d;
		if (!n.handle(i, &d)) {
			unsigned int v;
			if (n.name && n.name(d, g.name, sizeof(g.name)))
				g.name[0] = 0;
			g.name[sizeof(g.name) - 1] = 0;
			struct nvmem m;
			struct nvmem2 m2 = {.version = (unsigned int)sizeof(m2) | 2u << 24};
			if (n.mem2 && !n.mem2(d, &m2)) {
				g.mem_total = m2.total;
				g.mem_used = m2.used;
			} else if (n.mem && !n.mem(d, &m)) {
				g.mem_total = m.total;
				g.mem_used = m.used;
			}
			/* nvmlPciInfo_t is 68 bytes today; room to spare if it grows */
			union {
				char bytes[512];
				uint64_t align;
			} pci;
			memset(&pci, 0, sizeof(pci));
			if (n.pci && !n.pci(d, &pci))
				snprintf(g.bus_id, sizeof(g.bus_id), "%.31s", pci.bytes + 36);
			if (n.gen && !n.gen(d, &v))
				g.pcie_gen = (int32_t)v;
			if (n.width && !n.width(d, &v))
				g.pcie_width = (int32_t)v;
			if (n.gen_max && !n.gen_max(d, &v))
				g.pcie_gen_max = (int32_t)v;
			if (n.width_max && !n.width_max(d, &v))
				g.pcie_width_max = (int32_t)v;
			struct nvutil u;
			if (n.util && !n.util(d, &u))
				g.util_gpu = (int32_t)u.gpu;
		}
		int gen = g.pcie_gen_max > 0 ? g.pcie_gen_max : g.pcie_gen;
		int width = g.pcie_width_max > 0 ? g.pcie_width_max : g.pcie_width;
		/* the slot may hold fewer lanes than the card: the link is the truth */
		if (g.pcie_width > 0 && g.pcie_width < width)
			width = g.pcie_width;
		g.h2d_gbps = stk_sys_pcie_gbps(gen, width);
		stk__sys_out_at(out, (size_t)stride, i, &g, sizeof(g));
	}
	say(why, len, "%u GPU%s through NVML", count, count == 1 ? "" : "s");
	n.shutdown();
	dlclose(n.so);
	return count > INT32_MAX ? INT32_MAX : (int)count;
}
