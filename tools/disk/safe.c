/* disk/safe.c — what keeps `stoker disk` from harming data.
 *
 * A PATH is classified before anything runs: a folder gets our own files; an
 * existing file or a block device is refused unless --destructive names it
 * (or --readonly promises reads only).  Every file we make is created with
 * O_EXCL, so it cannot be someone else's, and recorded here; dk_cleanup()
 * removes them on success, on error and after SIGINT/SIGTERM (the handler
 * only sets dk_stop: the loops notice it and the command cleans up).
 */
#include "disk/disk.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

/* --- signals ------------------------------------------------------------ */

static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
static struct sigaction old_act[3];

static void on_signal(int sig)
{
	(void)sig;
	atomic_store(&dk_stop, 1);
}

void dk_signals_install(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	/* no SA_RESTART: a wait in progress returns EINTR and its loop looks at dk_stop */
	for (int i = 0; i < 3; i++)
		sigaction(sigs[i], &sa, &old_act[i]);
}

void dk_signals_restore(void)
{
	for (int i = 0; i < 3; i++)
		sigaction(sigs[i], &old_act[i], NULL);
}

/* --- files we created ----------------------------------------------------- */

struct made {
	int dirfd;
	char name[64];
	bool is_dir;
	uint32_t nsmall; /* is_dir: small files 0..nsmall-1 inside */
};

static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static struct made *reg;
static uint32_t reg_n, reg_cap;

static int record(int dirfd, const char *name, bool is_dir)
{
	pthread_mutex_lock(&reg_mu);
	if (reg_n == reg_cap) {
		uint32_t cap = reg_cap ? reg_cap * 2 : 16;
		struct made *r = realloc(reg, cap * sizeof(*r));
		if (!r) {
			pthread_mutex_unlock(&reg_mu);
			return -ENOMEM;
		}
		reg = r;
		reg_cap = cap;
	}
	struct made *m = &reg[reg_n++];
	memset(m, 0, sizeof(*m));
	m->dirfd = dirfd;
	snprintf(m->name, sizeof(m->name), "%s", name);
	m->is_dir = is_dir;
	pthread_mutex_unlock(&reg_mu);
	return 0;
}

int dk_create(int dirfd, const char *name, int flags)
{
	int fd = openat(dirfd, name, flags | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	int r = record(dirfd, name, false);
	if (r) {
		/* cannot promise its removal later: undo now */
		close(fd);
		unlinkat(dirfd, name, 0);
		return r;
	}
	return fd;
}

int dk_mkdir(int dirfd, const char *name)
{
	if (mkdirat(dirfd, name, 0700))
		return -errno;
	int r = record(dirfd, name, true);
	if (r)
		unlinkat(dirfd, name, AT_REMOVEDIR);
	return r;
}

void dk_note_small(int dirfd, const char *dir, uint32_t n)
{
	pthread_mutex_lock(&reg_mu);
	for (uint32_t i = 0; i < reg_n; i++)
		if (reg[i].dirfd == dirfd && reg[i].is_dir && !strcmp(reg[i].name, dir))
			reg[i].nsmall = n;
	pthread_mutex_unlock(&reg_mu);
}

/* Removes only names we made: small files by their numbers, never a tree walk. */
static void remove_made(const struct made *m)
{
	if (!m->is_dir) {
		if (unlinkat(m->dirfd, m->name, 0) && errno != ENOENT)
			fprintf(stderr, "stoker disk: cannot remove %s: %s\n", m->name,
				strerror(errno));
		return;
	}
	int d = openat(m->dirfd, m->name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (d >= 0) {
		char n[32];
		for (uint32_t i = 0; i < m->nsmall; i++) {
			dk_small_name(n, sizeof(n), i);
			unlinkat(d, n, 0);
		}
		close(d);
	}
	if (unlinkat(m->dirfd, m->name, AT_REMOVEDIR) && errno != ENOENT)
		fprintf(stderr, "stoker disk: cannot remove folder %s: %s\n", m->name,
			strerror(errno));
}

void dk_remove(int dirfd, const char *name)
{
	pthread_mutex_lock(&reg_mu);
	for (uint32_t i = 0; i < reg_n; i++) {
		if (reg[i].dirfd == dirfd && !strcmp(reg[i].name, name)) {
			remove_made(&reg[i]);
			reg[i] = reg[--reg_n];
			break;
		}
	}
	pthread_mutex_unlock(&reg_mu);
}

uint32_t dk_cleanup(void)
{
	pthread_mutex_lock(&reg_mu);
	uint32_t n = reg_n;
	while (reg_n)
		remove_made(&reg[--reg_n]);
	free(reg);
	reg = NULL;
	reg_cap = 0;
	pthread_mutex_unlock(&reg_mu);
	return n;
}

/* --- targets ------------------------------------------------------------ */

static const char *fs_name(long type)
{
	static const struct {
		long magic;
		const char *name;
	} fs[] = {
		{0xEF53, "ext4"},          {0x58465342, "xfs"},       {0x9123683E, "btrfs"},
		{0x01021994, "tmpfs"},     {0x858458f6, "ramfs"},     {0x6969, "nfs"},
		{0x794c7630, "overlay"},   {0x2fc12fc1, "zfs"},       {0xF2F52010, "f2fs"},
		{0x65735546, "fuse"},      {0x00c36400, "ceph"},      {0x0BD00BD0, "lustre"},
		{0x01021997, "9p"},        {0xFE534D42, "smb2"},      {0x5346544e, "ntfs"},
		{0x4d44, "vfat"},          {0x2011BAB0, "exfat"},     {0x47504653, "gpfs"},
	};
	for (size_t i = 0; i < sizeof(fs) / sizeof(fs[0]); i++)
		if ((long)(uint32_t)type == fs[i].magic)
			return fs[i].name;
	return "other";
}

/* The kernel's name for a block device number ("vda"), from sysfs. */
static void dev_name(dev_t d, char *out, size_t len)
{
	char p[96], line[128];
	snprintf(out, len, "-");
	snprintf(p, sizeof(p), "/sys/dev/block/%u:%u/uevent", major(d), minor(d));
	FILE *f = fopen(p, "re");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "DEVNAME=", 8)) {
			line[strcspn(line, "\n")] = 0;
			snprintf(out, len, "%.40s", line + 8);
		}
	fclose(f);
}

/* Does a comma-separated --destructive list name the same object as st? */
static bool named(const char *list, const struct stat *st)
{
	if (!list || !*list)
		return false;
	char *copy = strdup(list);
	if (!copy)
		return false;
	bool hit = false;
	char *save = NULL;
	for (char *p = strtok_r(copy, ",", &save); p && !hit; p = strtok_r(NULL, ",", &save)) {
		struct stat s2;
		if (!stat(p, &s2))
			hit = s2.st_dev == st->st_dev && s2.st_ino == st->st_ino &&
			      s2.st_rdev == st->st_rdev;
	}
	free(copy);
	return hit;
}

void dk_dio_probe(struct dk_target *t, int dirfd, const char *path)
{
	struct statx sx;
	if (!statx(dirfd, path, 0, STATX_DIOALIGN, &sx) && (sx.stx_mask & STATX_DIOALIGN)) {
		/* the filesystem answers; 0 means it does not do direct I/O */
		t->dio_align = sx.stx_dio_offset_align;
		t->dio_refused = sx.stx_dio_offset_align == 0;
	}
	if (t->memfs)
		t->dio_refused = true;
}

int dk_target_open(struct dk_target *t, const char *path, const char *destructive,
		   bool readonly, char *why, size_t len)
{
	memset(t, 0, sizeof(*t));
	t->path = path;
	t->dirfd = -1;
	struct stat st;
	if (stat(path, &st)) {
		int e = errno;
		snprintf(why, len, "%s: %s", path, strerror(e));
		return -e;
	}
	struct statfs sf;
	if (!statfs(path, &sf)) {
		snprintf(t->fs, sizeof(t->fs), "%s", fs_name((long)sf.f_type));
		t->memfs = !strcmp(t->fs, "tmpfs") || !strcmp(t->fs, "ramfs");
	}
	bool allowed = named(destructive, &st);
	if (S_ISDIR(st.st_mode)) {
		if (readonly) {
			snprintf(why, len,
				 "%s: --readonly needs an existing file or block device to read; "
				 "in a folder stoker must write its own test files",
				 path);
			return DK_REFUSED;
		}
		t->kind = DK_DIR;
		dev_name(st.st_dev, t->dev, sizeof(t->dev));
		t->dirfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (t->dirfd < 0) {
			int e = errno;
			snprintf(why, len, "%s: %s", path, strerror(e));
			return -e;
		}
		/* a folder does not answer STATX_DIOALIGN: asked again of our data file */
		dk_dio_probe(t, AT_FDCWD, path);
		return 0;
	}
	if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode)) {
		snprintf(why, len, "%s: not a folder, a regular file or a block device", path);
		return DK_REFUSED;
	}
	const char *what = S_ISBLK(st.st_mode) ? "a block device" : "an existing file";
	if (!allowed && !readonly) {
		snprintf(why, len,
			 "%s is %s: refusing to touch it (stoker disk writes only files it "
			 "creates, inside a folder).  Pass --readonly to benchmark it with reads "
			 "only, or --destructive=%s to allow writes that destroy its data",
			 path, what, path);
		return DK_REFUSED;
	}
	t->destructive = allowed && !readonly;
	if (S_ISREG(st.st_mode)) {
		t->kind = DK_FILE;
		t->size = (uint64_t)st.st_size;
		dev_name(st.st_dev, t->dev, sizeof(t->dev));
		dk_dio_probe(t, AT_FDCWD, path);
	} else {
		t->kind = DK_BLOCKDEV;
		snprintf(t->fs, sizeof(t->fs), "block device");
		t->memfs = false;
		dev_name(st.st_rdev, t->dev, sizeof(t->dev));
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			int e = errno;
			snprintf(why, len, "%s: %s", path, strerror(e));
			return -e;
		}
		int lbs = 0;
		if (ioctl(fd, BLKGETSIZE64, &t->size) || ioctl(fd, BLKSSZGET, &lbs)) {
			int e = errno;
			close(fd);
			snprintf(why, len, "%s: cannot read its size: %s", path, strerror(e));
			return -e;
		}
		close(fd);
		t->dio_align = lbs > 0 ? (uint32_t)lbs : 512;
	}
	if (t->size < 1048576) {
		snprintf(why, len, "%s: %s of %llu bytes is too small to benchmark (1 MiB at least)",
			 path, what, (unsigned long long)t->size);
		return DK_REFUSED;
	}
	return 0;
}

void dk_target_close(struct dk_target *t)
{
	if (t->dirfd >= 0)
		close(t->dirfd);
	t->dirfd = -1;
}

/* --- the page cache --------------------------------------------------------- */

double dk_resident(int fd, uint64_t size)
{
	/* looking at the first 16 GiB is enough to tell cold from warm */
	if (size > (16ull << 30))
		size = 16ull << 30;
	if (!size)
		return 0;
	long pg = sysconf(_SC_PAGESIZE);
	size_t pages = (size_t)((size + (uint64_t)pg - 1) / (uint64_t)pg);
	void *m = mmap(NULL, (size_t)size, PROT_READ, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED)
		return -1;
	unsigned char *vec = malloc(pages);
	double r = -1;
	if (vec && !mincore(m, (size_t)size, vec)) {
		size_t in = 0;
		for (size_t i = 0; i < pages; i++)
			in += vec[i] & 1;
		r = (double)in / (double)pages;
	}
	free(vec);
	munmap(m, (size_t)size);
	return r;
}
