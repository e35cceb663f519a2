/*
 * disk/common.c — what every part of `stoker disk` shares: the patterns'
 * names, the small-file pattern's file names (written by disk/io.c, removed
 * by disk/safe.c) and the stop flag a signal raises (disk/safe.c installs
 * the handlers; the loops look at it).
 */
#include <stdio.h>

#include "disk/disk.h"

const char *const dk_pattern_name[DK_NPAT] = {"seqread", "seqwrite", "randread", "smallfiles",
					      "checkpoint"};

atomic_int dk_stop;

void dk_small_name(char *buf, size_t len, uint32_t i)
{
	snprintf(buf, len, "s%07u", i);
}
