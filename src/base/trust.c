/*
 * base/trust.c — which cache folders and cache files stoker believes.
 *
 * The rule OpenSSH applies to ~/.ssh and git to a repository's owner: a
 * folder or file that another user could have written is not read.  A cache
 * folder (the user's, $XDG_CACHE_HOME/stoker, the /tmp fallback, cache_dir)
 * and a cache file (an index) are trusted when they belong to this user (or
 * root, who can write anything anyway, or the owner of the data beside which
 * the file sits, who can change the data too) and no group or other user may
 * write them.  Checked on the object itself (fstat of an open descriptor,
 * or stat after following a symlinked folder), so what is checked is what is
 * read.  The caller says the refusal once and goes on without the cache.
 */
#include "base/internal.h"

#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

int stk__trust_stat(const struct stat *st, uid_t also, const char *what, const char *path,
		    char *why, size_t whylen)
{
	uid_t me = geteuid();
	if (st->st_uid != me && st->st_uid != 0 && st->st_uid != also)
		return stk__errf(why, whylen, -EPERM, "%s %s belongs to uid %u, not to you (uid %u)",
				 what, path, (unsigned)st->st_uid, (unsigned)me);
	if (st->st_mode & (S_IWGRP | S_IWOTH))
		return stk__errf(why, whylen, -EPERM, "%s %s is writable by %s (mode %04o)", what,
				 path, st->st_mode & S_IWOTH ? "every user" : "its group",
				 (unsigned)(st->st_mode & 07777));
	return 0;
}

int stk__trust_dir(const char *path, char *why, size_t whylen)
{
	struct stat st;
	if (stat(path, &st))
		return stk__errf(why, whylen, -errno, "cache folder %s: %s", path, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return stk__errf(why, whylen, -ENOTDIR, "cache folder %s is not a folder", path);
	return stk__trust_stat(&st, (uid_t)-1, "cache folder", path, why, whylen);
}
