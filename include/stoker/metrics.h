/*
 * stoker/metrics.h — Prometheus metrics: a loader's counters and histograms,
 * disk figures from /proc/diskstats and GPU figures through NVML, as text
 * exposition (format 0.0.4); a publisher that keeps a running loader's
 * metrics in a file for `stoker exporter`; an in-process /metrics server.
 * docs/metrics.md lists every name, label and unit.
 *
 * Conventions (those of stoker/stoker.h): 0 or a count on success, -errno on
 * failure, errno never set; handles in create/destroy pairs; strings copied.
 * The *_text functions render like snprintf: they write at most len bytes
 * (always NUL-terminated when len > 0; buf may be NULL when len is 0) and
 * return the length the whole text needs, so a caller whose buffer was too
 * small (return >= len) grows it and calls again.  They keep no state: any
 * thread may call them, for a loader too (its stats may be read from any
 * thread).
 */
#ifndef STOKER_METRICS_H
#define STOKER_METRICS_H

#include <stddef.h>

#include "stoker/stoker.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One loader's metrics (stoker_loader_*), labelled loader="<name>" (NULL →
 * "default"; at most 128 bytes, escaped as the format wants) and
 * pid="<this process>".  Counters run from create and never go back (the
 * stats' total_* figures); histograms and the plain gauges cover the stats
 * window (create or the last stk_loader_stats_reset); the verdict
 * (stoker_loader_bottleneck{kind=...}) and its evidence
 * (stoker_loader_diagnosis_*) cover the last 10 s, through
 * stk_loader_diagnose.  Length needed, or -EINVAL. */
STK_API int stk_loader_metrics_text(const struct stk_loader *loader, const char *name, char *buf,
				    size_t len);

/* Per-device counters from root/proc/diskstats (stoker_disk_*, named like
 * node_exporter's node_disk_*), labelled device="<name>": whole disks only,
 * without loop, ram and floppy devices.  root as in stoker/sys.h (NULL or ""
 * for this system).  Length needed, or -errno (-ENOENT without the file). */
STK_API int stk_disk_metrics_text(const char *root, char *buf, size_t len);

/* GPU utilization and memory per gpu="<index>" through NVML (loaded with
 * dlopen at each call; never needed to build or run), and stoker_gpu_devices,
 * which is 0 when there is no driver or no GPU: then that is all the text.
 * Length needed, or -ENOMEM. */
STK_API int stk_gpu_metrics_text(char *buf, size_t len);

/* The folder where loaders publish and `stoker exporter` looks:
 * $STOKER_METRICS_DIR when set; else /run/stoker when this process may write
 * there (root creates it, mode 1777 like /tmp, so every user's loaders can
 * share it); else <stk_cache_dir>/metrics.  Created if missing.  Writes the
 * path to buf; returns its length or -errno (-ENAMETOOLONG when it does not
 * fit in len). */
STK_API int stk_metrics_dir(char *buf, size_t len);

/* ------------------------------------------------------------------------ */
/* Publishing.  A publisher's thread rewrites <dir>/<pid>-<name>.prom with
 * stk_loader_metrics_text every interval (a temporary file renamed over it,
 * so a reader never sees half a file); `stoker exporter` serves the files of
 * live processes.  Destroy the publisher before its loader.                */

struct stk_publisher;

/* Writes the file once (so an unwritable folder fails here, not later) and
 * starts the thread.  dir NULL → stk_metrics_dir(); name NULL → "default",
 * else 1–64 of [A-Za-z0-9._-] not starting with '.', unique within the
 * process; interval_s 0 → 5 s (0.001 s .. 1 day).  -EINVAL for a bad name or
 * interval; -errno from creating the file. */
STK_API int stk_loader_publish(struct stk_publisher **out, const struct stk_loader *loader,
			       const char *dir, const char *name, double interval_s);
/* The file's path (owned by the publisher). */
STK_API const char *stk_publisher_path(const struct stk_publisher *pub);
/* Stops the thread and removes the file.  NULL is allowed. */
STK_API void stk_publisher_destroy(struct stk_publisher *pub);

/* Everything `stoker exporter` serves: this machine's disks (/proc and /sys
 * under root; NULL or "" for /), its GPUs, and the loaders published in dir
 * (NULL: stk_metrics_dir()) by live processes, merged under one HELP/TYPE per
 * family (a file that does not parse is left out and counted), with the
 * exporter's own gauges.  The snprintf contract above; -errno when the disks
 * cannot be read. */
STK_API int stk_machine_metrics_text(const char *root, const char *dir, char *buf, size_t len);

/* ------------------------------------------------------------------------ */
/* Serving /metrics over HTTP (libmicrohttpd, one internal thread).  GET or
 * HEAD /metrics answers 200 with text/plain; version=0.0.4; other paths get
 * 404, other methods 405.  `listen`: "HOST:PORT" with a numeric IPv4 host or
 * "localhost", "[IPv6]:PORT", or ":PORT" for every interface; NULL or "" →
 * "127.0.0.1:9464" (loopback).  Port 0 takes a free port
 * (stk_metrics_server_port tells which).  -EINVAL for a listen string that
 * is none of those; -errno from socket/bind/listen (-EADDRINUSE...).        */

struct stk_metrics_server;

/* Serves the loader's metrics (stk_loader_metrics_text with `name`; loader
 * may be NULL), this machine's disks and its GPUs.  Destroy the server
 * before the loader. */
STK_API int stk_metrics_serve(struct stk_metrics_server **out, const char *listen,
			      const struct stk_loader *loader, const char *name);
/* Serves what `render` writes: called on the server's thread, one request at
 * a time, with the snprintf contract above (it is called again with a larger
 * buffer when it returns >= len; <0 answers 500).  arg must outlive the
 * server. */
STK_API int stk_metrics_serve_fn(struct stk_metrics_server **out, const char *listen,
				 int (*render)(void *arg, char *buf, size_t len), void *arg);
/* The port the server listens on (the one chosen for port 0). */
STK_API int stk_metrics_server_port(const struct stk_metrics_server *srv);
/* Stops accepting, waits for the request in progress, closes the socket.
 * NULL is allowed. */
STK_API void stk_metrics_server_destroy(struct stk_metrics_server *srv);

#ifdef __cplusplus
}
#endif
#endif
