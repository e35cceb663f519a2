/* common/outdir.c — the output folder of pack, transcode and gen, checked
 * before anything is made: never the input, inside it (its files would
 * become part of the dataset: a new class that shifts every label) or
 * holding it, and never a folder with something in it unless the user asks
 * for it to be replaced whole (old shards or images beside new ones would
 * mix two datasets).  Paths are compared by their real paths: realpath for
 * the part that exists, the rest as written; a loader's samples are checked
 * one by one (a file list, or a link in the input, may name a file in the
 * output folder, which --replace would remove).  The removal walks by file
 * descriptor (openat with O_NOFOLLOW, unlinkat), so a link inside the folder
 * is removed, never followed, and a filesystem mounted below it is refused
 * rather than emptied. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "common/outdir.h"
#include "common/cli.h"
#include "stoker/stoker.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* p's real path into buf (PATH_MAX bytes): realpath as far as p exists, the
 * rest appended with "." and ".." applied as written; with !follow, p's last
 * name is not resolved (where a link itself lies).  0 or -errno (ENOTDIR: a
 * part of p is a file, so nothing can be made there). */
static int resolve(const char *p, char *buf, int depth, bool follow)
{
	if (follow && realpath(p, buf))
		return 0;
	if (follow && (errno != ENOENT || depth > 256))
		return errno == ENOENT ? -ELOOP : -errno;
	char tmp[PATH_MAX], parent[PATH_MAX];
	if (snprintf(tmp, sizeof(tmp), "%s", p) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	size_t l = strlen(tmp);
	while (l > 1 && tmp[l - 1] == '/')
		tmp[--l] = 0;
	char *slash = strrchr(tmp, '/');
	const char *last = slash ? slash + 1 : tmp;
	if (!slash)
		snprintf(parent, sizeof(parent), ".");
	else if (slash == tmp)
		snprintf(parent, sizeof(parent), "/");
	else
		snprintf(parent, sizeof(parent), "%.*s", (int)(slash - tmp), tmp);
	int e = resolve(parent, buf, depth + 1, true);
	if (e || !*last || !strcmp(last, "."))
		return e;
	if (!strcmp(last, "..") || (!follow && !*last)) {
		char *s = strrchr(buf, '/');
		if (s)
			s[s == buf] = 0; /* "/a" -> "/", "/a/b" -> "/a" */
		return 0;
	}
	size_t bl = strlen(buf);
	if (snprintf(buf + bl, PATH_MAX - bl, "%s%s", bl > 1 ? "/" : "", last) >= (int)(PATH_MAX - bl))
		return -ENAMETOOLONG;
	char again[PATH_MAX]; /* after a "..", what follows may exist (and be a link) */
	if (follow && realpath(buf, again))
		memcpy(buf, again, strlen(again) + 1);
	return 0;
}

int outdir_real(const char *path, char *buf)
{
	return resolve(path, buf, 0, true);
}

bool outdir_within(const char *a, const char *b)
{
	size_t l = strlen(b);
	return !strncmp(a, b, l) && (a[l] == '/' || !a[l] || (l == 1 && b[0] == '/'));
}

/* The first entry of the folder at path into name: 1, 0 when it is empty
 * or does not exist (or is not a folder: mkdirs says so), -errno. */
static int first_entry(const char *path, char *name, size_t len)
{
	DIR *d = opendir(path);
	if (!d)
		return errno == ENOENT || errno == ENOTDIR ? 0 : -errno;
	struct dirent *de;
	int r = 0;
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) {
			snprintf(name, len, "%s", de->d_name);
			r = 1;
			break;
		}
	closedir(d);
	return r;
}

int outdir_check(const char *cmd, const char *in_label, const char *in, const char *out_label,
		 const char *out, bool replace)
{
	char rin[PATH_MAX], rout[PATH_MAX], lin[PATH_MAX];
	bool have_in = in && realpath(in, rin);
	if (have_in && resolve(out, rout, 0, true) == 0) {
		const char *why = NULL;
		if (!strcmp(rin, rout))
			why = "is %s %s itself";
		else if (outdir_within(rout, rin))
			why = "is inside %s %s: what it writes would become part of the dataset";
		else if (outdir_within(rin, rout))
			why = "holds %s %s: what it writes would mix with the dataset";
		else if (resolve(in, lin, 0, false) == 0 && outdir_within(lin, rout))
			why = "holds %s %s (a link to the data, which --replace would remove)";
		if (why) {
			fprintf(stderr, "stoker %s: %s %s ", cmd, out_label, out);
			fprintf(stderr, why, in_label, in);
			fprintf(stderr, "; choose a folder apart from it\n");
			return EXIT_USAGE;
		}
	}
	char name[256];
	int ne = first_entry(out, name, sizeof(name));
	if (ne < 0) {
		fprintf(stderr, "stoker %s: cannot read %s: %s\n", cmd, out, strerror(-ne));
		return EXIT_FAIL;
	}
	if (ne && !replace) {
		fprintf(stderr, "stoker %s: %s %s is not empty (it holds %s): new files beside old "
			"ones would mix two datasets; choose an empty or new folder, or --replace to "
			"replace it whole\n", cmd, out_label, out, name);
		return EXIT_USAGE;
	}
	/* a slip (".", "~", an unset variable's "/") must not empty a home */
	const char *home = getenv("HOME");
	char cwd[PATH_MAX], rhome[PATH_MAX];
	const char *held = NULL;
	if (ne && resolve(out, rout, 0, true) == 0) {
		if (getcwd(cwd, sizeof(cwd)) && outdir_within(cwd, rout))
			held = "the current folder";
		else if (home && *home && realpath(home, rhome) && outdir_within(rhome, rout))
			held = "your home folder";
	}
	if (held) {
		fprintf(stderr, "stoker %s: --replace: %s %s holds %s; it is not emptied for you "
			"(remove what it holds yourself, or choose another folder)\n", cmd, out_label,
			out, held);
		return EXIT_USAGE;
	}
	return EXIT_OK;
}

/* One lstat a sample, a realpath a folder (consecutive samples share
 * theirs) or link; a shard's members share its path. */
int outdir_samples_apart(const char *cmd, struct stk_loader *loader, const char *dir_arg,
			  const char *out)
{
	char rout[PATH_MAX], path[PATH_MAX], last[PATH_MAX] = "", dir[PATH_MAX] = "";
	char rdir[PATH_MAX], real[PATH_MAX];
	if (outdir_real(out, rout))
		return 0; /* nothing there to remove */
	for (int64_t i = 0, n = stk_loader_num_samples(loader); i < n; i++) {
		struct stat st;
		if (stk_loader_sample(loader, i, path, sizeof(path), NULL, NULL) ||
		    !strcmp(path, last) || lstat(path, &st))
			continue; /* a sample that cannot be read is said when it is packed */
		snprintf(last, sizeof(last), "%s", path);
		const char *slash = strrchr(path, '/');
		size_t dl = slash ? (size_t)(slash - path) : 0;
		if (S_ISLNK(st.st_mode) || !slash) {
			if (!realpath(path, real))
				continue;
		} else {
			if (strlen(dir) != dl || strncmp(dir, path, dl)) {
				snprintf(dir, sizeof(dir), "%.*s", (int)dl, path);
				if (!realpath(dl ? dir : "/", rdir))
					rdir[0] = 0;
			}
			if (!rdir[0])
				continue;
			snprintf(real, sizeof(real), "%s/%s", strcmp(rdir, "/") ? rdir : "", slash + 1);
		}
		if (outdir_within(real, rout)) {
			bool same = !strcmp(real, path);
			fprintf(stderr, "stoker %s: OUT %s holds %s, a sample of DIR %s%s%s%s: "
				"--replace would remove it; choose a folder apart from the data\n",
				cmd, out, real, dir_arg, same ? "" : " (", same ? "" : path,
				same ? "" : ")");
			return -1;
		}
	}
	return 0;
}

/* Removes what the folder open at fd holds; path names it in messages. */
static int clear_at(const char *cmd, int fd, dev_t dev, const char *path)
{
	int dfd = dup(fd);
	DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
	if (!d) {
		fprintf(stderr, "stoker %s: --replace: cannot read %s: %s\n", cmd, path,
			strerror(errno));
		if (dfd >= 0)
			close(dfd);
		return -1;
	}
	int rc = 0;
	struct dirent *de;
	while (!rc && (errno = 0, de = readdir(d))) {
		const char *n = de->d_name;
		if (!strcmp(n, ".") || !strcmp(n, ".."))
			continue;
		char sub[PATH_MAX];
		snprintf(sub, sizeof(sub), "%s/%s", path, n);
		struct stat st;
		if (fstatat(fd, n, &st, AT_SYMLINK_NOFOLLOW)) {
			fprintf(stderr, "stoker %s: --replace: %s: %s\n", cmd, sub, strerror(errno));
			rc = -1;
			break;
		}
		if (S_ISDIR(st.st_mode)) {
			if (st.st_dev != dev) {
				fprintf(stderr, "stoker %s: --replace: %s is another filesystem mounted "
					"there; not removed (unmount it, or choose another folder)\n",
					cmd, sub);
				rc = -1;
				break;
			}
			int c = openat(fd, n, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (c < 0) {
				fprintf(stderr, "stoker %s: --replace: cannot open %s: %s\n", cmd, sub,
					strerror(errno));
				rc = -1;
				break;
			}
			rc = clear_at(cmd, c, dev, sub);
			close(c);
		}
		if (!rc && unlinkat(fd, n, S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0)) {
			fprintf(stderr, "stoker %s: --replace: cannot remove %s: %s\n", cmd, sub,
				strerror(errno));
			rc = -1;
		}
	}
	if (!rc && errno) {
		fprintf(stderr, "stoker %s: --replace: cannot read %s: %s\n", cmd, path, strerror(errno));
		rc = -1;
	}
	closedir(d);
	return rc;
}

int outdir_clear(const char *cmd, const char *out)
{
	int fd = open(out, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 && errno == ENOENT)
		return 0; /* nothing there to replace; the command makes it */
	if (fd < 0 || fstat(fd, &st)) {
		fprintf(stderr, "stoker %s: --replace: cannot open %s: %s\n", cmd, out,
			strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	int rc = clear_at(cmd, fd, st.st_dev, out);
	close(fd);
	return rc;
}
