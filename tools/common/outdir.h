/* common/outdir.h — the output folder of a command that writes one (pack,
 * transcode, gen): checked before anything is made, replaced whole only when
 * the user asks (--replace). */
#ifndef STK_OUTDIR_H
#define STK_OUTDIR_H

#include <stdbool.h>

/* The output folder `out` of command `cmd` (for messages), which reads `in`
 * (NULL: a command with no input).  Refused, said on stderr naming the
 * folders and the reason, when out is in, lies inside it or holds it (by
 * their real paths: links and ".." resolved as far as the path exists), or
 * when out is a folder with anything in it and !replace.  Creates and removes
 * nothing.  EXIT_OK, EXIT_USAGE (refused) or EXIT_FAIL (out cannot be read).
 * An `in` that does not exist is left to the command to report. */
int outdir_check(const char *cmd, const char *in_label, const char *in, const char *out_label,
		 const char *out, bool replace);

/* path's real path into buf (PATH_MAX bytes), as outdir_check sees paths:
 * realpath as far as it exists, the rest as written.  0 or -errno. */
int outdir_real(const char *path, char *buf);
/* a (a real path) is b or lies below it. */
bool outdir_within(const char *a, const char *b);

struct stk_loader;
/* --replace: no file of the loader's samples (indexed from dir_arg) lies
 * in out, which is about to be emptied.  0, or -1 (said, naming the file). */
int outdir_samples_apart(const char *cmd, struct stk_loader *loader, const char *dir_arg,
			 const char *out);

/* --replace, once outdir_check has accepted out: removes everything out
 * holds (out itself stays), never following a symbolic link and never
 * entering another filesystem mounted below it.  0, or -1 (said, naming the
 * entry that could not be removed). */
int outdir_clear(const char *cmd, const char *out);

#endif
