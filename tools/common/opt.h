/* common/opt.h — shared by the option code of common/ (opt.c, usage.c,
 * optrows.c); subcommands use common/cli.h. */
#ifndef STK_OPT_H
#define STK_OPT_H

#include "common/cli.h"

/* A range's end as a user types it: whole numbers in full ("1000000", not
 * "1e+06"), others as %g; into buf. */
const char *opt_num_text(char *buf, size_t len, double v);
/* The library row an OPT_LIB entry stands for (opt_add_library), or NULL. */
const struct stk_option *opt_lib_row(const struct opt *o);
/* Takes no argument: OPT_BOOL, or a library FLAG / NOFLAG row. */
bool opt_is_bool(const struct opt *o);
/* The entry named `name` (without "--"), or NULL. */
const struct opt *opt_named(const struct opt *opts, const char *name);
/* The option short letter c meant in this command before it got one meaning
 * in every command, when c is refused here now (*now: its meaning now). */
const struct opt *opt_moved_from(const struct opt *opts, int c, const char **now);
/* A library row's group in --help: "image", "remote", "data" (what is read,
 * in which order), "output" or "reading" (the rest): derived from the row's
 * table group and name, the table having no column for it. */
const char *opt_lib_group(const struct stk_option *r);
/* The moved letters, for --help: the nth, or 0 past the end. */
int opt_moved_letter(size_t nth);

#endif
