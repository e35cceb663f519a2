/* doctor/doctor.h — what the `stoker doctor` files share: the list of checks being
 * built and the facts gathered once (PATH's files, GPUs) that several checks
 * use. */
#ifndef STK_DOCTOR_H
#define STK_DOCTOR_H

#include <stdbool.h>
#include <stdint.h>

#include "common/cli.h"
#include "stoker/sys.h"

enum { ST_OK, ST_WARN, ST_FAIL };

struct check {
	char name[32];
	int status;
	char value[512];
	char why[768];
	char fix[768]; /* commands, one per line; "" when nothing to do */
	bool explain;  /* print why and fix even when ok (guidance, not a problem) */
};

#define DOCTOR_MAX_CHECKS 48
#define DOCTOR_MAX_GPUS 16

struct doctor {
	const char *root; /* "" or a fake /proc + /sys tree (tests) */
	const char *path; /* NULL without PATH */
	uint64_t batch, prefetch, sample; /* sample: bytes, 0 = from PATH */
	int64_t local_world, decode_threads; /* cpu share: 0 = from the environment / default */
	/* PATH's files, counted once */
	bool path_ok, is_dir, count_capped;
	uint64_t files, bytes;
	struct stk_cpus cpus; /* read once: the CPU check and the disk's rotational flag use it */
	int cpus_rc;
	/* GPUs (before the CPU check: each training process wants a core) */
	int ngpu;
	char gpu_why[256];
	struct stk_gpu gpus[DOCTOR_MAX_GPUS];
	struct check checks[DOCTOR_MAX_CHECKS];
	int n;
};

/* doctor/report.c.  Appends a check (the last slot is reused when full) and
 * returns it. */
struct check *doc_add(struct doctor *d, const char *name, int status);
/* A loader option's default, as text, from the library's option table. */
const char *doc_default(const char *name);
/* printf into one of a check's fields (c->value, c->why, c->fix). */
void doc_set(char *field, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
#define SET(c, field, ...) doc_set((c)->field, sizeof((c)->field), __VA_ARGS__)

/* The subcommand (also declared in common/cli.h, with the others). */
int cmd_doctor(int argc, char **argv);

/* The "cpu share" check: each rank's share of the host (doctor/share.c). */
void doc_share_check(struct doctor *d);
/* doctor/video.c: FFmpeg's libraries and decoders for video mode. */
void doc_video_check(struct doctor *d);

/* The checks about PATH: filesystem, mount options, device, queue settings,
 * the I/O plan for that storage, O_DIRECT (doctor/path.c). */
void doc_path_checks(struct doctor *d);

#endif
