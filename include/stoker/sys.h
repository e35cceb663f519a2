/*
 * stoker/sys.h — readers of /proc and /sys, and a few probes, for
 * `stoker doctor`, `stoker iostat` and the metrics exporter.
 *
 * Conventions (those of stoker/stoker.h):
 *  - functions return 0 (or a count) on success and -errno on failure; errno
 *    is never set;
 *  - a struct that may grow starts with `uint32_t size`, set by the caller to
 *    sizeof(the struct) (0 is taken as the current size); the library never
 *    writes past it, so a program built against an older header keeps working;
 *  - every reader takes `root`, a prefix put before /proc and /sys: NULL or ""
 *    for the running system, or a folder holding a fake tree (root/proc/...,
 *    root/sys/...) for tests;
 *  - nothing here changes the system, and nothing keeps state between calls:
 *    any thread may call any function.
 */
#ifndef STOKER_SYS_H
#define STOKER_SYS_H

#include <stddef.h>
#include <stdint.h>

#include "stoker/stoker.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* /proc/diskstats.  All fields of every kernel format: 4 stat fields (2.6
 * partitions), 11 (classic), 15 (4.18+: discards) or 17 (5.5+: flushes);
 * fields the running kernel does not have read 0.  The tick fields are the
 * kernel's 32-bit millisecond counters (they wrap after ~49.7 days;
 * stk_sys_disk_rates takes that into account).                             */

struct stk_diskstat {
	uint32_t size;       /* sizeof(struct stk_diskstat), set by the caller */
	uint32_t major, minor;
	uint32_t nfields;    /* stat fields on the line: 4, 11, 15 or 17 */
	char name[64];
	uint64_t rd_ios, rd_merges, rd_sectors; /* sectors are 512 bytes, always */
	uint32_t rd_ticks;   /* ms spent reading */
	uint64_t wr_ios, wr_merges, wr_sectors;
	uint32_t wr_ticks;
	uint64_t in_flight;  /* I/Os in progress now */
	uint32_t io_ticks;   /* ms the device had I/O in flight (%util) */
	uint32_t time_in_queue; /* weighted ms: Σ in-flight × time (aqu-sz) */
	uint64_t dc_ios, dc_merges, dc_sectors;
	uint32_t dc_ticks;
	uint64_t fl_ios;
	uint32_t fl_ticks;
};

/* Parses one line of /proc/diskstats into *out (out->size set by the caller).
 * 0, or -EINVAL for a line that is not one. */
STK_API int stk_sys_diskstat_parse(const char *line, struct stk_diskstat *out);

/* Reads root/proc/diskstats into out[0..max).  The caller sets out[0].size;
 * the array's stride is that size.  Returns how many devices the file lists
 * (more than max: only max were stored; call again with more room), or
 * -errno.  */
STK_API int stk_sys_diskstats(const char *root, struct stk_diskstat *out, size_t max);

/* iostat -x's figures for one device over an interval, by sysstat's formulas. */
struct stk_disk_rates {
	uint32_t size;       /* sizeof(struct stk_disk_rates), set by the caller */
	double r_s, w_s, d_s, f_s;          /* requests completed per second */
	double rkb_s, wkb_s, dkb_s;         /* kB (1024 bytes) per second */
	double rrqm_s, wrqm_s, drqm_s;      /* requests merged per second */
	double rrqm_pct, wrqm_pct, drqm_pct; /* % of requests merged */
	double r_await, w_await, d_await, f_await; /* mean ms per request, queue + service */
	double rareq_sz, wareq_sz, dareq_sz; /* mean request size, kB */
	double aqu_sz;       /* mean requests in flight (queue + device) */
	double util;         /* % of the interval with I/O in flight; like sysstat,
				not capped at 100 (the kernel's io_ticks can overshoot) */
};

/* Rates between two snapshots of the same device taken interval_ms apart:
 * r/s = Δrd_ios / s; rkB/s = Δrd_sectors / 2 / s; r_await = Δrd_ticks /
 * Δrd_ios; rareq-sz = Δrd_sectors / 2 / Δrd_ios; aqu-sz = Δtime_in_queue /
 * interval_ms; %util = Δio_ticks / interval_ms × 100.  prev NULL means since
 * boot (all zeros), as iostat's first report.  A counter that went backwards
 * (device replaced) counts from 0; the 32-bit tick counters wrap.
 * 0, or -EINVAL (interval_ms <= 0, NULL cur/out). */
STK_API int stk_sys_disk_rates(const struct stk_diskstat *prev, const struct stk_diskstat *cur,
			       double interval_ms, struct stk_disk_rates *out);

/* 1 when NAME is a whole disk (root/sys/block/NAME exists), 0 for a
 * partition or an unknown name.  When root/sys/block itself is missing (a
 * /proc-only tree), every name counts as a disk. */
STK_API int stk_sys_disk_is_whole(const char *root, const char *name);

/* ------------------------------------------------------------------------ */
/* Memory, CPUs, limits and tunables.                                       */

/* root/proc/meminfo, in bytes. */
struct stk_meminfo {
	uint32_t size;
	uint64_t total, free, available; /* MemAvailable (estimated when missing) */
	uint64_t buffers, cached, shmem, dirty, writeback;
	uint64_t swap_total, swap_free;
	uint64_t hugepages_total, hugepage_size;
};
STK_API int stk_sys_meminfo(const char *root, struct stk_meminfo *out);

/* The memory limit of this process's cgroup: the smallest memory.max on the
 * path from its cgroup up to the hierarchy's root (cgroup v2), or
 * memory.limit_in_bytes (v1).  Returns 1 and sets *limit when limited, 0 when
 * unlimited or not in a memory cgroup, or -errno.  *usage (may be NULL) gets
 * the cgroup's current usage when known, else 0.  */
STK_API int stk_sys_cgroup_memory(const char *root, uint64_t *limit, uint64_t *usage);

/* CPUs: online logical CPUs (root/sys/devices/system/cpu/online), physical
 * cores (distinct package + core_id among them), packages, and the cgroup
 * CPU quota (cpu.max, or v1's cfs quota / period) in CPUs, 0 when none.
 * `allowed` is this process's affinity mask count (the running system only;
 * 0 with a fake root).  `virtualized` is 1 when root/proc/cpuinfo has the
 * x86 "hypervisor" flag: a virtual machine, whose disks' rotational flag
 * says little about the storage behind them. */
struct stk_cpus {
	uint32_t size;
	uint32_t logical, physical, packages, allowed;
	double quota;
	uint32_t virtualized;
};
STK_API int stk_sys_cpus(const char *root, struct stk_cpus *out);
/* The one "usable CPUs" rule: the online CPUs, narrowed to the affinity mask
 * (allowed), capped by the cgroup's quota; at least 1.  The loader's CPU share,
 * the I/O plan and `stoker doctor` all count with it. */
STK_API double stk_cpus_usable(const struct stk_cpus *c);

/* vm and kernel settings; -1 (or "") for what the kernel does not have. */
struct stk_tunables {
	uint32_t size;
	int32_t dirty_ratio, dirty_background_ratio;   /* % of available memory */
	int64_t dirty_bytes, dirty_background_bytes;   /* used instead when non-zero */
	int32_t io_uring_disabled;                     /* 0, 1 (group only) or 2 */
	char thp_enabled[16];  /* the active choice: "always", "madvise", "never" */
	char thp_defrag[16];
	uint64_t nofile_soft, nofile_hard; /* RLIMIT_NOFILE of this process (not root-relative) */
	uint64_t memlock_soft, memlock_hard; /* RLIMIT_MEMLOCK, bytes; UINT64_MAX: unlimited */
	int32_t cap_ipc_lock;  /* CAP_IPC_LOCK in root/proc/self/status (exempt from the
				  memlock limit): 1, 0, or -1 unknown */
};
STK_API int stk_sys_tunables(const char *root, struct stk_tunables *out);

/* ------------------------------------------------------------------------ */
/* Mounts, block devices and their queues.                                  */

struct stk_mount {
	uint32_t size;
	char source[256];     /* "/dev/nvme0n1p2", "server:/export", "tmpfs" */
	char mountpoint[1024];
	char fstype[64];
	char options[1024];   /* as in /proc/mounts: "rw,noatime,..." */
};

/* The mount holding PATH: the longest mount point that prefixes PATH's real
 * path, from root/proc/mounts (the last such line wins, as the kernel
 * stacks them).  PATH is resolved with realpath() when it exists; otherwise
 * it is used as written (it must then be absolute).  0 or -errno. */
STK_API int stk_sys_mount_for_path(const char *root, const char *path, struct stk_mount *out);

/* 1 when the comma-separated option list has `opt` (exactly), else 0;
 * with val (may be NULL) receiving what follows "opt=" when present. */
STK_API int stk_sys_mount_opt(const char *options, const char *opt, char *val, size_t len);

enum stk_dev_kind {
	STK_DEV_UNKNOWN = 0,
	STK_DEV_NVME,
	STK_DEV_SATA,    /* sd* behind libata */
	STK_DEV_SCSI,    /* sd* on SAS/SCSI/USB/iSCSI... */
	STK_DEV_VIRTIO,  /* vd* (virtio-blk) */
	STK_DEV_VIRTUAL, /* dm-*, md*, loop*, zram*, nbd*, rbd* */
	STK_DEV_MMC,
	STK_DEV_NETWORK, /* no block device: NFS, CIFS, Lustre, CephFS, FUSE... */
	STK_DEV_MEMORY,  /* no block device: tmpfs, ramfs */
};
/* "nvme", "sata", "scsi", "virtio", "virtual", "mmc", "network", "memory", "unknown". */
STK_API const char *stk_sys_dev_kind_name(int kind);
/* The network-or-memory kind of a filesystem type ("nfs4" → STK_DEV_NETWORK),
 * or STK_DEV_UNKNOWN when it is backed by a block device (or unknown). */
STK_API int stk_sys_fs_kind(const char *fstype);

struct stk_blockdev {
	uint32_t size;
	uint32_t major, minor;
	char name[64];        /* what st_dev names: "nvme0n1p2", "vda", "dm-0" */
	char disk[64];        /* the whole disk: "nvme0n1", "vda", "dm-0" */
	int32_t partition;    /* partition number, 0 for a whole disk */
	int32_t kind;         /* enum stk_dev_kind */
	int32_t rotational;   /* 1 spinning, 0 not, -1 unknown */
	char model[64];       /* root/sys/block/DISK/device/model, "" when none */
};
/* The block device of MAJOR:MINOR through root/sys/dev/block/MAJ:MIN (a
 * partition leads to its whole disk through its `partition` file and parent
 * folder).  0, or -ENODEV when there is none (anonymous devices: tmpfs, NFS,
 * overlay, btrfs subvolumes...). */
STK_API int stk_sys_blockdev_by_devnum(const char *root, uint32_t major, uint32_t minor,
				       struct stk_blockdev *out);
/* The same for the device holding PATH (stat's st_dev). */
STK_API int stk_sys_blockdev_for_path(const char *root, const char *path,
				      struct stk_blockdev *out);

/* root/sys/block/DISK/queue: -1 (or "") for what is missing. */
struct stk_queue {
	uint32_t size;
	char scheduler[32];    /* the active one: "none", "mq-deadline", "bfq", "kyber" */
	char schedulers[128];  /* all offered, as written: "[none] mq-deadline" */
	int64_t read_ahead_kb, nr_requests, rotational, logical_block_size;
	int64_t max_sectors_kb, hw_queues; /* hw_queues: entries of queue/../mq/ */
};
STK_API int stk_sys_queue(const char *root, const char *disk, struct stk_queue *out);

/* RDMA devices (InfiniBand, RoCE, iWARP: what NCCL's IB transport and
 * GPUDirect RDMA use): the entries of root/sys/class/infiniband.  Returns
 * their count (0 when there is none or no such folder) and, in names (may be
 * NULL), the first few, comma-separated. */
STK_API int stk_sys_rdma_devices(const char *root, char *names, size_t len);

/* ------------------------------------------------------------------------ */
/* The I/O plan: how the loader would read from the storage behind a path.  */

struct stk_io_plan {
	uint32_t size;
	int32_t kind;          /* enum stk_dev_kind of the storage behind the path */
	int32_t rotational;    /* 1 a spinning disk (a virtual disk's flag is not
				  trusted: 0 then), 0 not, -1 unknown */
	char disk[64];         /* the whole disk ("nvme0n1"), "" for network or memory */
	uint32_t queue_depth;  /* reads in flight, all I/O threads together */
	uint32_t io_threads;   /* I/O threads (io_uring rings), within the usable CPUs */
	uint32_t dl_workers_min, dl_workers_max; /* the PyTorch DataLoader rule of
						   thumb (num_workers) for the same storage */
	char why[384];         /* the storage's trait behind the numbers */
};
/* The plan for the storage holding PATH (its mount from root/proc/mounts, its
 * device from root/sys, the usable CPUs; root as for the readers above).  One
 * table per storage kind: a SATA SSD's single queue of 32 commands, NVMe's
 * many deep queues, a spinning disk's seeks, a network filesystem's round
 * trips, memory's copies.  The loader's automatic queue depth probes the
 * storage itself and falls back to this plan's depth when its probe cannot
 * tell (the consumer sets the pace); these are the values to give it
 * (queue_depth, io_threads) to fix them for this storage.  0, or -errno when PATH is on no
 * network or memory mount and cannot be stat'ed. */
STK_API int stk_io_plan(const char *root, const char *path, struct stk_io_plan *out);

/* /dev/shm's size and free bytes: from its tmpfs line in root/proc/mounts
 * (size=), else statvfs(root/dev/shm).  0, or -ENOENT without one. */
STK_API int stk_sys_shm(const char *root, uint64_t *total, uint64_t *avail);

/* ------------------------------------------------------------------------ */
/* Probes: they try the real thing, on the running system.                  */

/* 0 when io_uring works here with what the loader needs (a ring, openat /
 * read / close, a sparse file table), else -errno with the reason in why
 * (may be NULL): -EPERM for seccomp or kernel.io_uring_disabled, -ENOSYS for
 * a kernel without io_uring. */
STK_API int stk_sys_io_uring_probe(char *why, size_t len);

/* Whether O_DIRECT reads work under DIR: one 4 KiB aligned write and read
 * of an unnamed temporary file there (O_TMPFILE; a named one removed at once
 * where O_TMPFILE is not supported), or — when DIR is read-only — an aligned
 * read of an existing file opened read-only (`file`, may be NULL: then the
 * first regular file found in DIR).  Never writes to an existing file.
 * 0 when it works, -EINVAL when the filesystem refuses O_DIRECT, other
 * -errno when the probe could not run; why (may be NULL) says what was done. */
STK_API int stk_sys_direct_probe(const char *dir, const char *file, char *why, size_t len);
/* The same question answered without writing anything: an aligned O_DIRECT
 * read of `file` opened read-only (NULL: the first regular file under dir),
 * what a loader's reads do.  What `stoker doctor PATH` asks, since it
 * changes nothing.  Same returns. */
STK_API int stk_sys_direct_read_probe(const char *dir, const char *file, char *why, size_t len);

/* Whether a pool of `bytes` can be pinned for GPU copies here, as the loader
 * pins its slots: the CUDA runtime loaded with dlopen ($STOKER_CUDART, a
 * path, first; then one the process already loaded, e.g. PyTorch's; then
 * libcudart.so.12 and the like), a device counted, cudaHostRegister of a
 * scratch mapping of that size, undone at once.  0 when it works, else
 * -ENOENT (no runtime), -ENODEV (the runtime finds no driver or device, or
 * fails to start: its error), -ENOMEM or -EIO (the registration refused,
 * with RLIMIT_MEMLOCK named when limited); why (may be NULL) says which.
 * A failure leaves no pending error in the runtime. */
STK_API int stk_sys_pin_probe(uint64_t bytes, char *why, size_t len);

/* NVIDIA GPUs through NVML (libnvidia-ml.so.1, opened with dlopen at the call:
 * never needed to build or run).  Fills out[0..max) (stride out[0].size) and
 * returns the count, or -ENOENT when the library cannot be loaded, or
 * -ENODEV when NVML is there but does not start (no driver / device);
 * why (may be NULL) gets the reason. */
struct stk_gpu {
	uint32_t size;
	uint32_t index;
	char name[96];
	char bus_id[32];
	uint64_t mem_total, mem_used;   /* bytes */
	int32_t pcie_gen, pcie_width;   /* current link (idle GPUs train down: see max) */
	int32_t pcie_gen_max, pcie_width_max; /* the most this GPU and slot allow */
	double h2d_gbps;               /* one-direction PCIe ceiling at the max link, GB/s */
	int32_t util_gpu;              /* % (-1 unknown) */
};
STK_API int stk_sys_gpus(struct stk_gpu *out, size_t max, char *why, size_t len);

/* The one-direction payload ceiling of a PCIe link in GB/s (10^9 bytes):
 * per-lane rate after line coding (8b/10b to gen 2, 128b/130b from gen 3,
 * FLIT from gen 6) × lanes.  0 for unknown generations. */
STK_API double stk_sys_pcie_gbps(int gen, int width);

#ifdef __cplusplus
}
#endif
#endif
