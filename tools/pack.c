/* pack.c — `stoker pack DIR OUT`: writes a folder dataset as WebDataset-style
 * tar shards, OUT/<prefix>-000000.tar ..., plus OUT/classes.txt.
 *
 * The folder is indexed by the library itself (a loader over the null engine,
 * which reads nothing), so samples, labels and class names are exactly what
 * the loader sees: ImageFolder order, or a seeded shuffle.  Sample k becomes
 * two adjacent members, <k>.<ext> (the file's bytes) and <k>.cls (its label
 * in decimal), k written as %08lld: WebDataset groups members by the name up
 * to the first dot, and the keys sort in pack order.  Headers are plain ustar
 * (names stay under 100 bytes), with fixed owner, mode and mtime so that the
 * same folder packs to the same bytes.  Each shard is written to .tmp,
 * fsync'd and renamed: a shard under its final name is always complete.  On
 * SIGINT, SIGTERM or SIGHUP the handler unlinks the .tmp being written and
 * ends the process by the signal: an interrupted pack leaves nothing behind.
 * With --transcode each JPEG goes in rewritten by stk_jpeg_transcode
 * (transcode_file, shared with `stoker transcode`); a file it refuses goes
 * in as it was and is named in the summary.  DIR may be shards: a sample is
 * then the extent of its member (stk_loader_sample_extent), keyed by the
 * extension of the member's own name (common/tar.c), and DIR/classes.txt
 * goes on.  A local OUT is checked before anything is made (common/outdir.c:
 * apart from DIR, empty unless --replace, which empties it once DIR is
 * indexed).
 *
 * OUT may be s3://BUCKET/PREFIX/ (stoker/upload.h): each shard is written to
 * a staging folder on local disk (--stage), PUT from there with its index
 * beside it (NAME.tar.stoker-index) and deleted, so the local disk holds one
 * shard at a time; classes.txt goes up last.  The bucket and credentials
 * are checked before the first shard is written. */
#include "common/cli.h"
#include "common/outdir.h"
#include "common/tar.h"
#include "stoker/upload.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#define BLOCK TAR_BLOCK
#define COPY_BUF (1u << 20)

/* Declared in common/cli.h once the command is registered; repeated here so that the
 * file builds warning-free on its own. */
int cmd_pack(int argc, char **argv);

struct pack {
	const char *dir, *out, *prefix;
	uint64_t shard_size;
	struct stk_loader *loader;
	char *buf;              /* COPY_BUF bytes */
	FILE *f;                /* the shard being written, or NULL */
	char tmp[4200], path[4200];
	uint64_t shard_bytes;   /* written to f so far */
	int64_t shard_samples;
	int shards;
	uint64_t bytes;         /* all shards, end blocks included */
	uint64_t align;         /* --align: each sample's bytes start at a multiple (0: none) */
	/* --transcode */
	bool transcode;
	void *mem;              /* the sample's bytes, when they come from memory */
	size_t mem_len;
	int64_t transcoded;
	uint64_t tc_in, tc_out; /* bytes of the JPEGs rewritten, before and after */
	json_t *kept;           /* [{path, reason}] of the files kept as they were */
	/* OUT is s3://...: out is the staging folder, url the destination */
	struct stk_upload *up;
	const char *url;
	double up_t0, up_last;
};

/* The temporary file being written, for the signal handler: the name is
 * complete before `armed` is set, and unlinking a name already renamed
 * away is harmless. */
static char tmp_name[4300];
static volatile sig_atomic_t tmp_armed;

static void tmp_arm(const char *path)
{
	tmp_armed = 0;
	atomic_signal_fence(memory_order_seq_cst);
	snprintf(tmp_name, sizeof(tmp_name), "%s", path);
	atomic_signal_fence(memory_order_seq_cst);
	tmp_armed = 1;
}

static void tmp_disarm(void)
{
	tmp_armed = 0;
	atomic_signal_fence(memory_order_seq_cst);
}

static void on_signal(int sig)
{
	if (tmp_armed)
		unlink(tmp_name); /* async-signal-safe */
	signal(sig, SIG_DFL);
	raise(sig); /* dies of the signal, as the caller expects of Ctrl-C */
}

static void install_cleanup(void)
{
	on_stop_signals(on_signal);
}

static int put(struct pack *p, const void *data, size_t len)
{
	if (len && fwrite(data, 1, len, p->f) != len)
		return -1;
	p->shard_bytes += len;
	return 0;
}

static int pad(struct pack *p)
{
	static const unsigned char zero[BLOCK];
	size_t n = (size_t)((BLOCK - p->shard_bytes % BLOCK) % BLOCK);
	return put(p, zero, n);
}

/* --align: a PAX extended header ('x') holding one "comment" record, which
 * every reader ignores (POSIX), sized so that the next member's data starts
 * at a multiple of p->align in the shard: O_DIRECT then reads a member
 * without a block of its neighbours at either end.  The header applies to
 * the next member only, and a comment changes nothing about it. */
static int align_pad(struct pack *p)
{
	if (!p->align)
		return 0;
	uint64_t at = (p->shard_bytes + BLOCK) % p->align; /* where the data would start */
	if (!at)
		return 0;
	uint64_t need = p->align - at;   /* a multiple of BLOCK: header + record */
	if (need < 2 * BLOCK)
		need += p->align;
	uint64_t rec = need - BLOCK;      /* the record fills the data blocks exactly */
	char digits[24];
	int d = snprintf(digits, sizeof(digits), "%llu", (unsigned long long)rec);
	unsigned char h[BLOCK];
	tar_header(h, "././@PaxHeader", rec, 'x');
	if (put(p, h, BLOCK) || put(p, digits, (size_t)d) || put(p, " comment=", 9))
		return -1;
	for (uint64_t k = (uint64_t)d + 10; k < rec; k++)
		if (fputc('0', p->f) == EOF)
			return -1;
	p->shard_bytes += rec - (uint64_t)d - 10;
	return put(p, "\n", 1);
}

/* The failure of a write to the shard: errno as fwrite/fclose left it. */
static int write_failed(struct pack *p)
{
	fprintf(stderr, "stoker pack: cannot write %s: %s\n", p->tmp,
		errno ? strerror(errno) : "write error");
	return -1;
}

static void up_progress(void *ctx, uint64_t done, uint64_t total)
{
	struct pack *p = ctx;
	double t = now_s();
	if (t - p->up_last < 0.1 && done < total)
		return;
	p->up_last = t;
	char a[32], b[32];
	progress("pack: upload %s/shard %d: %s of %s, %.0f MB/s", stk_upload_url(p->up), p->shards,
		 fmt_bytes(a, sizeof(a), (double)done), fmt_bytes(b, sizeof(b), (double)total),
		 t > p->up_t0 ? (double)done / (t - p->up_t0) / 1e6 : 0.0);
}

/* PUTs the staged file at path as name (a shard: with its index), then
 * deletes it; an interrupted upload leaves no staged file behind. */
static int upload(struct pack *p, const char *path, const char *name, unsigned flags)
{
	char err[4096];
	tmp_arm(path);
	p->up_t0 = now_s();
	int e = stk_upload_file(p->up, path, name, flags, up_progress, p, err, sizeof(err));
	unlink(path);
	tmp_disarm();
	if (e)
		fprintf(stderr, "stoker pack: %s\n", err[0] ? err : stk_strerror(e));
	return e ? -1 : 0;
}

static int shard_open(struct pack *p)
{
	snprintf(p->path, sizeof(p->path), "%s/%s-%06d.tar", p->out, p->prefix, p->shards);
	int n = snprintf(p->tmp, sizeof(p->tmp), "%s.tmp", p->path);
	if (n < 0 || (size_t)n >= sizeof(p->tmp)) {
		fprintf(stderr, "stoker pack: %s: path too long\n", p->out);
		return -1;
	}
	tmp_arm(p->tmp);
	p->f = fopen(p->tmp, "wbe");
	if (!p->f) {
		tmp_disarm();
		fprintf(stderr, "stoker pack: cannot create %s: %s\n", p->tmp, strerror(errno));
		return -1;
	}
	p->shard_bytes = 0;
	p->shard_samples = 0;
	return 0;
}

/* Ends the shard with two zero blocks, makes it durable, gives it its name. */
static int shard_close(struct pack *p)
{
	static const unsigned char end[2 * BLOCK];
	errno = 0;
	int bad = put(p, end, sizeof(end)) || fflush(p->f) || fsync(fileno(p->f));
	int e = errno;
	/* fclose can be the first to report ENOSPC or EIO (NFS, quotas). */
	if (fclose(p->f) && !bad) {
		bad = 1;
		e = errno;
	}
	p->f = NULL;
	if (bad) {
		errno = e;
		write_failed(p);
		unlink(p->tmp);
		tmp_disarm();
		return -1;
	}
	if (rename(p->tmp, p->path)) {
		fprintf(stderr, "stoker pack: cannot rename %s to %s: %s\n", p->tmp, p->path,
			strerror(errno));
		unlink(p->tmp);
		tmp_disarm();
		return -1;
	}
	tmp_disarm();
	p->bytes += p->shard_bytes;
	p->shards++;
	const char *base = strrchr(p->path, '/') + 1;
	return p->up ? upload(p, p->path, base, STK_UPLOAD_SHARD_INDEX) : 0;
}

/* Appends the sample at path (its bytes at offset: a tar shard's member, or
 * 0 for a whole file) as key k: header, the bytes, padding, then the .cls
 * member.  The size comes from the index; a file that changed since is an
 * error rather than a member whose header lies.  A member is keyed by the
 * extension of its own name in the shard, not the shard's ".tar". */
static int add_sample(struct pack *p, int64_t k, const char *path, uint64_t offset,
		      uint64_t size, int64_t label)
{
	char ext[TAR_EXT_MAX], name[100], cls[32], member[300];
	unsigned char h[BLOCK];
	int fd = p->mem ? -1 : open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (!p->mem && fd < 0) {
		fprintf(stderr, "stoker pack: cannot open %s: %s\n", path, strerror(errno));
		return -1;
	}
	/* O_NONBLOCK and this check: a FIFO put in a file's place since it was
	 * indexed is refused rather than waited on for ever */
	struct stat st;
	int bad = fd >= 0 && fstat(fd, &st) ? errno : 0;
	if (fd >= 0 && (bad || !S_ISREG(st.st_mode))) {
		fprintf(stderr, "stoker pack: %s: %s\n", path,
			bad ? strerror(bad) : "not a regular file (replaced since it was indexed)");
		close(fd);
		return -1;
	}
	if (offset) {
		int mfd = fd >= 0 ? fd : open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
		tar_member_name(mfd, offset, member, sizeof(member));
		if (mfd >= 0 && mfd != fd)
			close(mfd);
		tar_extension(member[0] ? member : "", ext, sizeof(ext));
	} else {
		tar_extension(path, ext, sizeof(ext));
	}
	if (!strcmp(ext, "cls")) {
		fprintf(stderr, "stoker pack: %s%s%s: a .cls sample would collide with the label "
			"member\n", path, offset ? ": member " : "", offset ? member : "");
		if (fd >= 0)
			close(fd);
		return -1;
	}
	snprintf(name, sizeof(name), "%08lld.%s", (long long)k, ext);
	if (align_pad(p)) {
		if (fd >= 0)
			close(fd);
		return write_failed(p);
	}
	if (p->mem) { /* --transcode: the bytes are in memory */
		tar_header(h, name, size, '0');
		if (put(p, h, BLOCK) || put(p, p->mem, p->mem_len))
			return write_failed(p);
		goto data_done;
	}
	tar_header(h, name, size, '0');
	if (put(p, h, BLOCK)) {
		close(fd);
		return write_failed(p);
	}
	uint64_t left = size;
	for (;;) {
		/* One byte more than expected at the end detects a file that grew
		 * (a member's next byte is its shard's: the member's end is its size). */
		size_t want = left < COPY_BUF ? (size_t)left + !offset : COPY_BUF;
		if (!want)
			break;
		ssize_t r = pread(fd, p->buf, want, (off_t)(offset + size - left));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			fprintf(stderr, "stoker pack: cannot read %s: %s\n", path, strerror(errno));
			close(fd);
			return -1;
		}
		if (r == 0 || (uint64_t)r > left) {
			if (r == 0 && !left)
				break;
			fprintf(stderr, "stoker pack: %s: the file %s since it was indexed (%llu "
				"bytes)\n", path, r ? "grew" : "shrank", (unsigned long long)size);
			close(fd);
			return -1;
		}
		if (put(p, p->buf, (size_t)r)) {
			close(fd);
			return write_failed(p);
		}
		left -= (uint64_t)r;
	}
	close(fd);
data_done:
	if (pad(p))
		return write_failed(p);
	if (label >= 0) {
		int n = snprintf(cls, sizeof(cls), "%lld\n", (long long)label);
		snprintf(name, sizeof(name), "%08lld.cls", (long long)k);
		tar_header(h, name, (uint64_t)n, '0');
		if (put(p, h, BLOCK) || put(p, cls, (size_t)n) || pad(p))
			return write_failed(p);
	}
	p->shard_samples++;
	return 0;
}

/* Bytes a sample adds to a shard. */
static uint64_t sample_bytes(uint64_t size, int64_t label)
{
	return BLOCK + (size + BLOCK - 1) / BLOCK * BLOCK + (label >= 0 ? 2 * BLOCK : 0);
}

/* DIR/classes.txt, when DIR is a folder holding one (shards `stoker pack`
 * wrote), copied to f: a repack keeps the class names.  0, or -1 when f
 * cannot be written; a DIR without one gives an empty file. */
static int copy_classes(struct pack *p, FILE *f)
{
	char path[4200];
	snprintf(path, sizeof(path), "%s/classes.txt", p->dir);
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK), rc = 0;
	struct stat st;
	if (fd < 0 || fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		if (fd >= 0)
			close(fd);
		return 0;
	}
	ssize_t r;
	while ((r = read(fd, p->buf, COPY_BUF)) > 0 && !rc)
		rc = fwrite(p->buf, 1, (size_t)r, f) != (size_t)r ? -1 : 0;
	close(fd);
	return rc;
}

static int write_classes(struct pack *p)
{
	char path[4200], tmp[4300];
	snprintf(path, sizeof(path), "%s/classes.txt", p->out);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	tmp_arm(tmp);
	FILE *f = fopen(tmp, "we");
	if (!f) {
		tmp_disarm();
		fprintf(stderr, "stoker pack: cannot create %s: %s\n", tmp, strerror(errno));
		return -1;
	}
	int64_t nc = stk_loader_num_classes(p->loader);
	int bad = 0;
	errno = 0;
	for (int64_t c = 0; c < nc && !bad; c++)
		bad = fprintf(f, "%s\n", stk_loader_class_name(p->loader, c)) < 0;
	if (!nc) /* shards (or a list) name no classes: theirs, if DIR has one, go on */
		bad = copy_classes(p, f);
	bad |= fflush(f) || fsync(fileno(f));
	int e = errno;
	if (fclose(f) && !bad) {
		bad = 1;
		e = errno;
	}
	if (bad || rename(tmp, path)) {
		fprintf(stderr, "stoker pack: cannot write %s: %s\n", bad ? tmp : path,
			strerror(bad ? (e ? e : EIO) : errno));
		unlink(tmp);
		tmp_disarm();
		return -1;
	}
	tmp_disarm();
	return p->up ? upload(p, path, "classes.txt", 0) : 0;
}

static int pack_all(struct pack *p, const int64_t *order, int64_t n)
{
	char path[4096], mb[32];
	double t0 = now_s(), last = 0;
	for (int64_t k = 0; k < n; k++) {
		uint64_t size;
		int64_t label;
		uint64_t offset;
		int e = stk_loader_sample_extent(p->loader, order[k], path, sizeof(path), &offset,
						 &size);
		if (!e)
			e = stk_loader_sample(p->loader, order[k], NULL, 0, NULL, &label);
		if (e) {
			fprintf(stderr, "stoker pack: sample %lld: %s\n", (long long)order[k],
				stk_strerror(e));
			return -1;
		}
		if (p->transcode) {
			char why[512];
			free(p->mem);
			int t = transcode_file(path, offset, size, &p->mem, &p->mem_len, why,
					       sizeof(why));
			if (t < 0) {
				fprintf(stderr, "stoker pack: %s: %s\n", path, why);
				return -1;
			}
			if (t == 0) {
				p->transcoded++;
				p->tc_in += size;
				p->tc_out += p->mem_len;
			} else {
				json_array_append_new(p->kept, json_pack("{s:s,s:s}", "path", path, "reason",
									 why));
			}
			size = p->mem_len;
		}
		/* A new shard when this sample would overflow the current one; a
		 * sample larger than --shard-size still gets a shard of its own. */
		uint64_t need = sample_bytes(size, label) + 2 * BLOCK + (p->align ? p->align + BLOCK : 0);
		if (p->f && p->shard_samples && p->shard_bytes + need > p->shard_size &&
		    shard_close(p))
			return -1;
		if (!p->f && shard_open(p))
			return -1;
		if (add_sample(p, k, path, offset, size, label))
			return -1;
		double t = now_s();
		if (t - last > 0.1 || k + 1 == n) {
			last = t;
			progress("pack %s: %lld/%lld samples, %d shards, %s, %.0f samples/s", p->dir,
				 (long long)(k + 1), (long long)n, p->shards + 1,
				 fmt_bytes(mb, sizeof(mb), (double)(p->bytes + p->shard_bytes)),
				 t > t0 ? (double)(k + 1) / (t - t0) : 0.0);
		}
	}
	progress_done();
	return p->f ? shard_close(p) : 0;
}

int cmd_pack(int argc, char **argv)
{
	uint64_t shard_size;
	const char *prefix;
	int64_t seed = -1;
	bool json = false, transcode = false, replace = false;
	uint64_t align = 0;
	const char *stage, *exts = NULL;
	const char *tmpdir = getenv("TMPDIR");
	const struct opt opts[] = {
		OPT_GROUP("shards"),
		{"shard-size", 0, OPT_SIZE, &shard_size, "1GiB", 4096, 1099511627776.0, NULL, "BYTES",
		 "largest shard (a sample larger than this gets a shard of its own)"},
		{"prefix", 0, OPT_STR, &prefix, "train", 0, 0, NULL, "NAME",
		 "shard names: NAME-000000.tar ... (not starting with '.': loaders skip hidden "
		 "files)"},
		OPT_SEED('s', &seed, NULL, "shuffle the samples with this seed [ImageFolder order]"),
		{"extensions", 0, OPT_STR, &exts, NULL, 0, 0, NULL, "LIST",
		 "the files of DIR that are samples: \".mp4,.mkv,.webm\" for videos (a loader's "
		 "video mode reads them from the shards), \"*\" any [ImageFolder's images]"},
		{"transcode", 0, OPT_BOOL, &transcode, NULL, 0, 0, NULL, NULL,
		 "rewrite each JPEG losslessly with restart markers, so image mode decodes only "
		 "a crop's intervals (see stoker transcode) [bytes as they are]"},
		{"align", 0, OPT_SIZE, &align, "0", 0, 1048576, NULL, "BYTES",
		 "start each sample's bytes at a multiple of BYTES (a power of two, 512 or more; "
		 "4096 lets O_DIRECT read a member alone), padding with PAX comment headers every "
		 "tar reader skips [0: none]"},
		OPT_GROUP("remote"),
		{"stage", 0, OPT_STR, &stage, tmpdir && *tmpdir ? tmpdir : "/var/tmp", 0, 0, NULL,
		 "DIR", "OUT s3://...: where each shard is written before it is uploaded (one "
		 "shard's space; $TMPDIR, else /var/tmp)"},
		OPT_GROUP("output"),
		{"replace", 0, OPT_BOOL, &replace, NULL, 0, 0, NULL, NULL,
		 "OUT is a folder with files in it: replace it whole (what it holds is removed "
		 "first; never a folder that is or holds DIR) [refused]"},
		{"json", 0, OPT_BOOL, &json, NULL, 0, 0, NULL, NULL, "print a JSON summary"},
		OPT_END,
	};
	const struct cmd_help help = {
		"pack", "[options] DIR OUT",
		"Packs a folder dataset (DIR/<class>/<file>) into WebDataset-style tar shards,\n"
		"OUT/<prefix>-000000.tar ...: sample k is <k>.<ext> with the file's bytes and\n"
		"<k>.cls with its label; OUT/classes.txt names the labels, one per line.\n"
		"OUT may be s3://BUCKET/PREFIX/ (credentials and endpoint as for reading: AWS_*):\n"
		"each shard is uploaded as it is finished, with its index beside it\n"
		"(<shard>.tar.stoker-index), which loaders use instead of reading tar headers.\n"
		"DIR may also be shards (a repack: members keep their extension, classes.txt\n"
		"is carried over).  A local OUT must be new or empty (--replace) and apart from\n"
		"DIR: neither inside it nor holding it.",
		"stoker pack /data/train /data/train-tar          # 1 GiB shards, ImageFolder order\n"
		"stoker pack -s 0 --shard-size 256MiB /data/train /data/shards  # shuffled, smaller\n"
		"stoker pack --transcode /data/train s3://bucket/train  # crop-friendly JPEGs, uploaded",
	};
	int first = opt_parse(&help, opts, argc, argv);
	if (first < 0)
		return -first;
	if (argc - first != 2) {
		fprintf(stderr, "stoker pack: give DIR and OUT\ntry 'stoker pack --help'\n");
		return EXIT_USAGE;
	}
	if (align && (align < BLOCK || (align & (align - 1)))) {
		fprintf(stderr, "stoker pack: --align: %llu is not a power of two of 512 or more\n",
			(unsigned long long)align);
		return EXIT_USAGE;
	}
	size_t pl = strlen(prefix);
	if (!pl || pl > 200 || strchr(prefix, '/')) {
		fprintf(stderr, "stoker pack: --prefix: '%s' must be 1-200 characters without '/'\n",
			prefix);
		return EXIT_USAGE;
	}
	if (prefix[0] == '.') {
		fprintf(stderr, "stoker pack: --prefix: '%s' starts with '.': loaders skip hidden "
			"files, so no loader would find the shards\n", prefix);
		return EXIT_USAGE;
	}
	bool remote = strstr(argv[first + 1], "://") != NULL;
	int oc = remote ? EXIT_OK : outdir_check("pack", "DIR", argv[first], "OUT", argv[first + 1],
						  replace);
	if (oc)
		return oc;
	struct pack p = {.dir = argv[first], .out = argv[first + 1], .prefix = prefix,
			 .shard_size = shard_size, .transcode = transcode, .align = align,
			 .kept = transcode ? json_array() : NULL};

	/* The null engine reads nothing: the loader is only the folder's index. */
	char err[4096], staged[4200] = "";
	if (remote) { /* a URL: s3:// (any other is refused by name) */
		int ue = stk_upload_create(&p.up, p.out, err, sizeof(err));
		if (ue) {
			fprintf(stderr, "stoker pack: %s\n", err[0] ? err : stk_strerror(ue));
			json_decref(p.kept);
			return EXIT_FAIL;
		}
		p.url = stk_upload_url(p.up);
	}
	struct stk_loader_opts lo = {
		.size = sizeof(lo),
		.flags = STK_F_NO_SHUFFLE | STK_F_QUIET | STK_F_NO_CACHE,
		.path = p.dir,
		.extensions = exts,
		.batch_size = 1,
		.prefetch = 1,
		.engine = STK_ENGINE_NULL,
	};
	int e = stk_loader_create(&p.loader, &lo, err, sizeof(err));
	if (e) {
		fprintf(stderr, "stoker pack: %s\n", err[0] ? err : stk_strerror(e));
		stk_upload_destroy(p.up);
		json_decref(p.kept);
		return EXIT_FAIL;
	}
	int rc = EXIT_FAIL;
	int64_t n = stk_loader_num_samples(p.loader), *order = NULL;
	/* The staging folder once DIR is indexed: a --stage inside DIR is not
	 * taken for a class. */
	if (remote) {
		snprintf(staged, sizeof(staged), "%s/stoker-pack-XXXXXX", stage);
		if (!mkdtemp(staged)) {
			fprintf(stderr, "stoker pack: --stage: cannot create a folder in %s: %s\n", stage,
				strerror(errno));
			staged[0] = 0;
			goto out;
		}
		p.out = staged;
	} else if (replace && outdir_samples_apart("pack", p.loader, p.dir, p.out)) {
		rc = EXIT_USAGE;
		goto out;
	} else if (replace && outdir_clear("pack", p.out)) {
		goto out; /* only once DIR indexed: a mistyped DIR leaves OUT as it was */
	}
	e = mkdirs(p.out, NULL, 0);
	if (e) {
		fprintf(stderr, "stoker pack: cannot create %s: %s\n", p.out, strerror(-e));
		goto out;
	}
	order = malloc((size_t)n * sizeof(*order));
	p.buf = malloc(COPY_BUF);
	if (!order || !p.buf) {
		fprintf(stderr, "stoker pack: out of memory\n");
		goto out;
	}
	for (int64_t i = 0; i < n; i++)
		order[i] = i;
	/* Fisher-Yates under splitmix64: the order depends on the seed only. */
	uint64_t s = (uint64_t)seed;
	for (int64_t i = n - 1; seed >= 0 && i > 0; i--) {
		uint64_t z = mix64(s);
		s += 0x9e3779b97f4a7c15ull;
		int64_t j = (int64_t)(z % (uint64_t)(i + 1));
		int64_t t = order[i];
		order[i] = order[j];
		order[j] = t;
	}
	install_cleanup();
	double t0 = now_s();
	if (pack_all(&p, order, n) || write_classes(&p))
		goto out;
	double secs = now_s() - t0;
	const char *dest = p.url ? p.url : p.out;
	if (json) {
		json_t *o = json_pack("{s:s, s:s, s:s, s:I, s:I, s:i, s:I, s:I, s:f}", "dir", p.dir,
				      "out", dest, "prefix", p.prefix, "samples", (json_int_t)n,
				      "classes", (json_int_t)stk_loader_num_classes(p.loader),
				      "shards", p.shards, "bytes", (json_int_t)p.bytes,
				      "shard_size", (json_int_t)p.shard_size, "seconds", secs);
		if (o && seed >= 0)
			json_object_set_new(o, "seed", json_integer(seed));
		if (o && p.up)
			json_object_set_new(o, "index_beside", json_true());
		if (o && p.transcode) {
			json_object_set_new(o, "transcoded", json_integer(p.transcoded));
			json_object_set_new(o, "transcoded_size_ratio",
					    json_real(p.tc_in ? (double)p.tc_out / (double)p.tc_in : 1.0));
			json_object_set_new(o, "kept", json_incref(p.kept));
		}
		int bad = !o || json_dumpf(o, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(6));
		json_decref(o);
		if (bad || putchar('\n') == EOF)
			goto out;
	} else {
		char mb[32];
		printf("packed %lld samples in %lld classes into %d shards in %s%s: %s, %.1f s\n",
		       (long long)n, (long long)stk_loader_num_classes(p.loader), p.shards, dest,
		       p.up ? " (each with its index beside it)" : "",
		       fmt_bytes(mb, sizeof(mb), (double)p.bytes), secs);
		if (p.transcode) {
			size_t nk = json_array_size(p.kept);
			printf("transcoded %lld JPEGs (%.1f %% of their size)%s\n", (long long)p.transcoded,
			       p.tc_in ? 100.0 * (double)p.tc_out / (double)p.tc_in : 100.0,
			       nk ? "; kept as they were:" : "");
			for (size_t i = 0; i < nk; i++) {
				json_t *ke = json_array_get(p.kept, i);
				printf("  %s: %s\n", json_string_value(json_object_get(ke, "path")),
				       json_string_value(json_object_get(ke, "reason")));
			}
		}
	}
	rc = fflush(stdout) ? EXIT_FAIL : EXIT_OK;
out:
	progress_done();
	if (p.f) { /* a failure mid-shard: leave no .tmp behind */
		fclose(p.f);
		unlink(p.tmp);
		tmp_disarm();
	}
	if (staged[0]) /* empty unless a failure left a shard between its rename and upload */
		rmdir(staged);
	free(p.buf);
	free(p.mem);
	json_decref(p.kept);
	free(order);
	stk_loader_destroy(p.loader);
	stk_upload_destroy(p.up);
	return rc;
}
