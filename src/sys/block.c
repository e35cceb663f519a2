/*
 * sys/block.c — mounts and block devices: the mount holding a path (longest
 * mount-point prefix of its real path in /proc/mounts), the block device
 * behind it (st_dev → /sys/dev/block/MAJ:MIN → the whole disk through the
 * partition's `partition` file and parent folder), what kind of device that
 * is, its queue settings (/sys/block/DEV/queue), and /dev/shm's size.
 *
 * Like sys/sys.c, every reader takes a root prefix for fake trees, reads small
 * files whole, and keeps no state.  Kinds come from the kernel's names and
 * sysfs attributes (nvme*, vd*, sd* with vendor "ATA"...), never from
 * running tools like lsblk.
 */
#include "sys/sys_int.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

/* Does mount point mp contain path?  "/" holds everything; "/data" holds
 * "/data" and "/data/x", not "/database". */
static size_t prefix_len(const char *mp, const char *path)
{
	size_t l = strlen(mp);
	if (l == 1 && mp[0] == '/')
		return 1;
	if (strncmp(mp, path, l) || (path[l] && path[l] != '/'))
		return 0;
	return l;
}

int stk_sys_mount_for_path(const char *root, const char *path, struct stk_mount *out)
{
	if (!path || !out)
		return -EINVAL;
	char real[PATH_MAX];
	if (!realpath(path, real)) {
		if (path[0] != '/')
			return -errno;
		if (snprintf(real, sizeof(real), "%s", path) >= (int)sizeof(real))
			return -ENAMETOOLONG;
	}
	char path_m[PATH_MAX];
	int rc = stk__sys_path(path_m, sizeof(path_m), root, "/proc/mounts");
	if (rc < 0)
		return rc;
	FILE *f = fopen(path_m, "re");
	if (!f)
		return -errno;
	struct stk_mount m, best;
	memset(&best, 0, sizeof(best));
	size_t best_len = 0;
	char *line = NULL;
	size_t cap = 0;
	while (getline(&line, &cap, f) > 0) {
		char *save, *src = strtok_r(line, " \n", &save);
		char *mp = strtok_r(NULL, " \n", &save);
		char *type = strtok_r(NULL, " \n", &save);
		char *opts = strtok_r(NULL, " \n", &save);
		if (!src || !mp || !type || !opts)
			continue;
		stk__sys_unescape(src);
		stk__sys_unescape(mp);
		size_t l = prefix_len(mp, real);
		if (!l || l < best_len)
			continue;
		/* >=: a later mount on the same point hides the earlier one */
		memset(&m, 0, sizeof(m));
		snprintf(m.source, sizeof(m.source), "%s", src);
		snprintf(m.mountpoint, sizeof(m.mountpoint), "%s", mp);
		snprintf(m.fstype, sizeof(m.fstype), "%s", type);
		snprintf(m.options, sizeof(m.options), "%s", opts);
		best = m;
		best_len = l;
	}
	free(line);
	fclose(f);
	if (!best_len)
		return -ENOENT;
	stk__sys_out(out, &best, sizeof(best));
	return 0;
}

const char *stk_sys_dev_kind_name(int kind)
{
	static const char *const names[] = {
		[STK_DEV_UNKNOWN] = "unknown", [STK_DEV_NVME] = "nvme",
		[STK_DEV_SATA] = "sata",       [STK_DEV_SCSI] = "scsi",
		[STK_DEV_VIRTIO] = "virtio",   [STK_DEV_VIRTUAL] = "virtual",
		[STK_DEV_MMC] = "mmc",         [STK_DEV_NETWORK] = "network",
		[STK_DEV_MEMORY] = "memory",
	};
	return kind >= 0 && (size_t)kind < STK_ARRAY_SIZE(names) ? names[kind] : "unknown";
}

int stk_sys_fs_kind(const char *fstype)
{
	static const char *const net[] = {
		"nfs",  "nfs4",    "cifs",   "smb3",      "smbfs", "ceph",   "lustre", "gpfs",
		"9p",   "afs",     "beegfs", "glusterfs", "ocfs2", "gfs2",   "orangefs",
		"pvfs2", "virtiofs", "davfs", "sshfs",
	};
	static const char *const mem[] = {"tmpfs", "ramfs", "devtmpfs", "hugetlbfs"};
	if (!fstype)
		return STK_DEV_UNKNOWN;
	for (size_t i = 0; i < STK_ARRAY_SIZE(mem); i++)
		if (!strcmp(fstype, mem[i]))
			return STK_DEV_MEMORY;
	for (size_t i = 0; i < STK_ARRAY_SIZE(net); i++)
		if (!strcmp(fstype, net[i]))
			return STK_DEV_NETWORK;
	/* fuse.s3fs, fuse.gcsfuse, fuse.sshfs...: data comes over the network
	 * (or from a user-space daemon), with the same per-file latency. */
	if (!strncmp(fstype, "fuse", 4))
		return STK_DEV_NETWORK;
	return STK_DEV_UNKNOWN;
}

static int disk_kind(const char *root, const char *disk)
{
	static const struct {
		const char *prefix;
		int kind;
	} names[] = {
		{"nvme", STK_DEV_NVME},      {"vd", STK_DEV_VIRTIO},     {"xvd", STK_DEV_VIRTUAL},
		{"dm-", STK_DEV_VIRTUAL},    {"md", STK_DEV_VIRTUAL},    {"loop", STK_DEV_VIRTUAL},
		{"zram", STK_DEV_VIRTUAL},   {"nbd", STK_DEV_VIRTUAL},   {"rbd", STK_DEV_VIRTUAL},
		{"ram", STK_DEV_VIRTUAL},    {"mmcblk", STK_DEV_MMC},    {"pmem", STK_DEV_VIRTUAL},
	};
	for (size_t i = 0; i < STK_ARRAY_SIZE(names); i++)
		if (!strncmp(disk, names[i].prefix, strlen(names[i].prefix)))
			return names[i].kind;
	if (!strncmp(disk, "sd", 2)) {
		/* libata reports every ATA disk with the vendor "ATA" */
		char vendor[64];
		if (stk__sys_read(root, vendor, sizeof(vendor), "/sys/block/%s/device/vendor", disk) >
			    0 &&
		    !strncmp(vendor, "ATA", 3))
			return STK_DEV_SATA;
		return STK_DEV_SCSI;
	}
	return STK_DEV_UNKNOWN;
}

int stk_sys_blockdev_by_devnum(const char *root, uint32_t major, uint32_t minor,
			       struct stk_blockdev *out)
{
	char rel[64], link[PATH_MAX], dir[PATH_MAX];
	snprintf(rel, sizeof(rel), "/sys/dev/block/%u:%u", major, minor);
	int rc = stk__sys_path(link, sizeof(link), root, rel);
	if (rc < 0)
		return rc;
	if (!realpath(link, dir))
		return errno == ENOENT ? -ENODEV : -errno;
	struct stk_blockdev b;
	memset(&b, 0, sizeof(b));
	b.major = major;
	b.minor = minor;
	char *base = strrchr(dir, '/');
	if (!base)
		return -ENODEV;
	snprintf(b.name, sizeof(b.name), "%s", base + 1);
	int64_t part;
	if (!stk__sys_read_i64("", &part, "%s/partition", dir) && part > 0) {
		/* a partition's folder sits inside its disk's folder */
		b.partition = (int32_t)part;
		*base = 0;
		char *pb = strrchr(dir, '/');
		if (!pb)
			return -ENODEV;
		snprintf(b.disk, sizeof(b.disk), "%s", pb + 1);
	} else {
		snprintf(b.disk, sizeof(b.disk), "%s", b.name);
	}
	b.kind = disk_kind(root, b.disk);
	int64_t rot;
	b.rotational = stk__sys_read_i64(root, &rot, "/sys/block/%s/queue/rotational", b.disk)
			       ? -1
			       : (int32_t)(rot != 0);
	if (stk__sys_read(root, b.model, sizeof(b.model), "/sys/block/%s/device/model", b.disk) <
	    0)
		b.model[0] = 0;
	stk__trim(b.model);
	stk__sys_out(out, &b, sizeof(b));
	return 0;
}

int stk_sys_blockdev_for_path(const char *root, const char *path, struct stk_blockdev *out)
{
	struct stat st;
	if (!path || stat(path, &st))
		return path ? -errno : -EINVAL;
	int rc = -ENODEV;
	if (major(st.st_dev))
		rc = stk_sys_blockdev_by_devnum(root, major(st.st_dev), minor(st.st_dev), out);
	if (rc != -ENODEV)
		return rc;
	/* Anonymous st_dev (btrfs, some FUSE): the mount's source may still be
	 * a block device. */
	struct stk_mount m = {.size = sizeof(m)};
	struct stat ds;
	if (stk_sys_mount_for_path(root, path, &m) || strncmp(m.source, "/dev/", 5))
		return -ENODEV;
	char dev[PATH_MAX];
	if (stk__sys_path(dev, sizeof(dev), root, m.source) || stat(dev, &ds) ||
	    !S_ISBLK(ds.st_mode))
		return -ENODEV;
	return stk_sys_blockdev_by_devnum(root, major(ds.st_rdev), minor(ds.st_rdev), out);
}

int stk_sys_disk_is_whole(const char *root, const char *name)
{
	char p[PATH_MAX];
	struct stat st;
	if (!name || !*name || strchr(name, '/') || stk__sys_path(p, sizeof(p), root, "/sys/block"))
		return 0;
	if (stat(p, &st))
		return 1; /* no sysfs in this tree: nothing to tell them apart by */
	size_t l = strlen(p);
	if (snprintf(p + l, sizeof(p) - l, "/%s", name) >= (int)(sizeof(p) - l))
		return 0;
	return !stat(p, &st);
}

int stk_sys_queue(const char *root, const char *disk, struct stk_queue *out)
{
	if (!disk || !*disk || strchr(disk, '/'))
		return -EINVAL;
	struct stk_queue q;
	memset(&q, 0, sizeof(q));
	char dir[PATH_MAX];
	int rc = stk__sys_path(dir, sizeof(dir), root, "/sys/block/");
	struct stat st;
	if (rc < 0 || strlen(dir) + strlen(disk) >= sizeof(dir))
		return -ENAMETOOLONG;
	memcpy(dir + strlen(dir), disk, strlen(disk) + 1);
	if (stat(dir, &st))
		return -errno;
	if (stk__sys_read(root, q.schedulers, sizeof(q.schedulers), "/sys/block/%s/queue/scheduler",
			  disk) > 0) {
		const char *a = strchr(q.schedulers, '['), *b = a ? strchr(a, ']') : NULL;
		if (a && b)
			snprintf(q.scheduler, sizeof(q.scheduler), "%.*s", (int)(b - a - 1), a + 1);
		else
			snprintf(q.scheduler, sizeof(q.scheduler), "%.31s", q.schedulers);
	}
	static const struct {
		const char *file;
		size_t off;
	} nums[] = {
		{"read_ahead_kb", offsetof(struct stk_queue, read_ahead_kb)},
		{"nr_requests", offsetof(struct stk_queue, nr_requests)},
		{"rotational", offsetof(struct stk_queue, rotational)},
		{"logical_block_size", offsetof(struct stk_queue, logical_block_size)},
		{"max_sectors_kb", offsetof(struct stk_queue, max_sectors_kb)},
	};
	for (size_t i = 0; i < STK_ARRAY_SIZE(nums); i++) {
		int64_t v;
		if (stk__sys_read_i64(root, &v, "/sys/block/%s/queue/%s", disk, nums[i].file))
			v = -1;
		memcpy((char *)&q + nums[i].off, &v, sizeof(v));
	}
	/* blk-mq lists one folder per hardware queue under mq/ */
	q.hw_queues = -1;
	size_t l = strlen(dir);
	if (snprintf(dir + l, sizeof(dir) - l, "/mq") < (int)(sizeof(dir) - l)) {
		DIR *d = opendir(dir);
		if (d) {
			q.hw_queues = 0;
			for (struct dirent *e; (e = readdir(d));)
				q.hw_queues += e->d_name[0] != '.';
			closedir(d);
		}
	}
	stk__sys_out(out, &q, sizeof(q));
	return 0;
}

/* tmpfs's size= option: "65536k", "8g", "1048576" (bytes). */
static int parse_tmpfs_size(const char *s, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (end == s || errno)
		return -EINVAL;
	switch (*end) {
	case 'k': case 'K': v <<= 10; break;
	case 'm': case 'M': v <<= 20; break;
	case 'g': case 'G': v <<= 30; break;
	case 't': case 'T': v <<= 40; break;
	case 0: break;
	default: return -EINVAL; /* "50%": resolved by the kernel, shown in k */
	}
	*out = v;
	return 0;
}

int stk_sys_shm(const char *root, uint64_t *total, uint64_t *avail)
{
	struct stk_mount m = {.size = sizeof(m)};
	char sz[64];
	uint64_t t = 0;
	bool fake = root && *root;
	if (!stk_sys_mount_for_path(root, "/dev/shm", &m) &&
	    !strcmp(m.mountpoint, "/dev/shm") && stk_sys_mount_opt(m.options, "size", sz, sizeof(sz)) &&
	    !parse_tmpfs_size(sz, &t) && t) {
		if (total)
			*total = t;
		if (avail)
			*avail = t;
		if (fake)
			return 0; /* a fake tree has no real filesystem to ask what is used */
	}
	char p[PATH_MAX];
	struct statvfs vfs;
	int rc = stk__sys_path(p, sizeof(p), root, "/dev/shm");
	if (rc < 0)
		return rc;
	if (statvfs(p, &vfs))
		return t ? 0 : -errno;
	if (total)
		*total = (uint64_t)vfs.f_blocks * vfs.f_frsize;
	if (avail)
		*avail = (uint64_t)vfs.f_bavail * vfs.f_frsize;
	return 0;
}
