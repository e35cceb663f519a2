/*
 * loader/shard_read.c — how a batch of tar members is read.
 *
 * Every shard is opened once, at create (O_DIRECT when the loader reads
 * direct; buffered ones get POSIX_FADV_RANDOM under global shuffle, so the
 * kernel reads a member and not the megabytes of read-ahead after it), and
 * members are read by offset on that descriptor: no open and close per
 * sample.  A batch's members are taken in (shard, offset) order, and
 * neighbours at most MERGE_GAP apart (the tar headers between them) become
 * one read of at most MERGE_MAX bytes, laid out in the slot in file order;
 * each sample's offset in the batch points at its bytes in that run.  A
 * video clip whose video has a byte index is never merged: its ranges
 * (loader/video.c, the first from the member's tar header) are laid out
 * first, on the same descriptor, and checked as a member's read is.  A
 * buffered read starts at the member's 512-byte header and a direct one
 * usually covers it anyway: where the header is in the bytes read, its hash
 * must be the tag the index keeps (name, size, mtime, owners: the whole
 * header), and after every reap each shard read is stat'ed once: a size or
 * mtime that is not the index's refuses its reads (a rewrite whose headers
 * are byte-identical, as `stoker pack` writes them).  So a shard rewritten
 * since it was indexed gives errors naming the shard and the offset, never
 * another member's bytes.  Such a member cannot be read again (its offset
 * is the old shard's), so the first error of each changed shard is said on
 * stderr too: under skip its members would otherwise leave every epoch of
 * the run seen only in the counters.
 * More shards than a quarter of RLIMIT_NOFILE: each read opens its shard
 * (the engines' open → read → close chain), as for folders.
 * Shard shuffle over buffered shards: a rank streams its shards in order
 * through the shuffle window, so every member of a shard is read this epoch
 * and the window only picks when.  A batch's members are scattered over the
 * window (1.2 members a read: random reads, slower than global shuffle on a
 * disk where fio's sequential reads beat its random ones 1.4x), so each
 * claim asks the kernel to read each of its shards ahead, in order, from
 * where the last claim left it to 32 MiB past the batch's last member
 * (POSIX_FADV_WILLNEED, from the I/O thread outside the mutex, before the
 * batch's reads go out): the shards are read front to back in large
 * requests, and the member reads find their pages in the page cache or
 * under way.  Buffered only: O_DIRECT has no cache to read ahead into (the
 * loader reads direct when the dataset does not fit in memory).
 */
#include "loader/loader.h"
#include "dataset/tar.h"
#include "io/remote.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#define TAR_BLOCK 512u

/* The shard holding sample i: the last one starting at or before it. */
static const struct shard *shard_of(const struct stk_loader *l, int64_t i)
{
	uint32_t lo = 0, hi = l->nshards;
	while (hi - lo > 1) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (l->shards[mid].first <= i)
			lo = mid;
		else
			hi = mid;
	}
	return &l->shards[lo];
}

/* Bytes one POSIX_FADV_WILLNEED reads at most: the kernel cuts a call to the
 * file's read-ahead window (read_ahead_kb, twice that under
 * POSIX_FADV_SEQUENTIAL); 256 KiB where the device cannot be seen. */
static uint64_t ra_chunk(const char *root)
{
	struct stk_blockdev b = {.size = sizeof(b)};
	struct stk_queue q = {.size = sizeof(q)};
	uint64_t kb = 128;
	if (stk_sys_blockdev_for_path(NULL, root, &b) == 0 && stk_sys_queue(NULL, b.disk, &q) == 0 &&
	    q.read_ahead_kb > 0)
		kb = (uint64_t)q.read_ahead_kb;
	kb *= 2;
	kb = kb < 128 ? 128 : kb > 8192 ? 8192 : kb;
	return kb << 10;
}

int stk__shards_open(struct stk_loader *l, char *err, size_t errlen)
{
	const struct stk_dataset *ds = l->ds;
	uint32_t n = 0;
	for (int64_t i = 0; i < ds->n; i++)
		n += i == 0 || ds->entries[i].name != ds->entries[i - 1].name;
	l->shards = calloc(n ? n : 1, sizeof(*l->shards));
	if (!l->shards) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	for (int64_t i = 0; i < ds->n; i++)
		if (i == 0 || ds->entries[i].name != ds->entries[i - 1].name)
			l->shards[l->nshards++] = (struct shard){.first = i, .fd = -1};
	if (ds->remote) { /* objects: ranged GETs by name (io/http.c) */
		snprintf(l->shard_why, sizeof(l->shard_why), "shards: %u objects at %s, read by "
			 "ranged GETs; a batch's neighbouring members merged into one request",
			 l->nshards, ds->root);
		return 0;
	}
	/* each shard's size and mtime as indexed (recorded in sample order) */
	for (uint64_t k = 0, d = 0; k < l->nshards && d < ds->ndirs; d++) {
		const char *p = stk__entry_path(ds, l->shards[k].first);
		if (strcmp(ds->dir_names + ds->dirs[d].name, p))
			continue;
		l->shards[k].stamped = true;
		l->shards[k].size = ds->dirs[d].size;
		l->shards[k].mtime_ns = ds->dirs[d].mtime_ns;
		k++;
	}
	struct rlimit rl;
	uint64_t budget = getrlimit(RLIMIT_NOFILE, &rl) == 0 ? rl.rlim_cur / 4 : 256;
	if (l->nshards > budget) {
		snprintf(l->shard_why, sizeof(l->shard_why),
			 "shards: %u, more than a quarter of the open-file limit (%llu): each read "
			 "opens its shard", l->nshards, (unsigned long long)rl.rlim_cur);
		return 0;
	}
	bool random = !(l->o.flags & STK_F_NO_SHUFFLE) && l->o.shuffle_mode == STK_SHUFFLE_GLOBAL;
	/* shard shuffle streams each shard (not read_bytes: only the members'
	 * first bytes are wanted) */
	l->stream_ra = !l->direct && !random && l->o.shuffle_mode == STK_SHUFFLE_SHARD &&
		       !(l->o.flags & STK_F_NO_SHUFFLE) && !l->o.read_bytes;
	if (l->stream_ra)
		l->ra_chunk = ra_chunk(ds->root);
	for (uint32_t k = 0; k < l->nshards; k++) {
		const char *p = stk__entry_path(ds, (int64_t)l->shards[k].first);
		int fd = openat(ds->root_fd, p, O_RDONLY | O_CLOEXEC | (l->direct ? O_DIRECT : 0));
		if (fd < 0) {
			/* the read names it, by the error policy; the others stay open */
			continue;
		}
		if (!l->direct && random)
			posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM);
		else if (l->stream_ra) /* twice the device's read-ahead a call */
			posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
		l->shards[k].fd = fd;
	}
	snprintf(l->shard_why, sizeof(l->shard_why),
		 "shards: %u open once, %s%s; a batch's neighbouring members merged into one read",
		 l->nshards, l->direct ? "O_DIRECT" : "buffered",
		 l->direct ? "" : random ? ", no read-ahead past a member (global shuffle)"
		 : l->stream_ra ? ", each shard read ahead in order (shard shuffle)" : "");
	return 0;
}

void stk__shards_close(struct stk_loader *l)
{
	for (uint32_t k = 0; l->shards && k < l->nshards; k++)
		if (l->shards[k].fd >= 0)
			close(l->shards[k].fd);
	free(l->shards);
	l->shards = NULL;
	l->nshards = 0;
}

static int by_place(const void *a, const void *b)
{
	const struct sio *x = *(struct sio *const *)a, *y = *(struct sio *const *)b;
	if (x->io.path != y->io.path)
		return x->io.path < y->io.path ? -1 : 1;
	return x->at < y->at ? -1 : x->at > y->at;
}

/* The read's start for a run beginning with the member at `at`: its header
 * too when buffered (512 bytes), the block holding it when direct. */
static uint64_t run_start(const struct stk_loader *l, uint64_t at)
{
	if (l->direct)
		return at & ~(uint64_t)(STK_DIRECT_ALIGN - 1);
	return at >= TAR_BLOCK ? at - TAR_BLOCK : at;
}

static uint64_t run_end(const struct stk_loader *l, uint64_t end)
{
	return l->direct ? STK_ALIGN_UP(end, STK_DIRECT_ALIGN) : end;
}

#define RA_AHEAD (32ull << 20)

/* Shard shuffle: notes the read-ahead for the shards of a batch whose
 * members, sorted by place, are tmp[0..n).  Under mu. */
static void stream_ahead(struct stk_loader *l, struct io_thread *r, struct slot *s,
			 struct sio **tmp, uint32_t n)
{
	for (uint32_t k = 0; k < n;) {
		uint32_t j = k;
		uint64_t hi = 0;
		for (; j < n && tmp[j]->io.path == tmp[k]->io.path; j++)
			hi = tmp[j]->at + tmp[j]->size > hi ? tmp[j]->at + tmp[j]->size : hi;
		struct shard *sh = &l->shards[shard_of(l, s->indices[tmp[k]->idx]) - l->shards];
		k = j;
		if (sh->fd < 0)
			continue;
		if (sh->ra_gen != l->gen) { /* a new epoch (or a resume): its stream starts */
			sh->ra_gen = l->gen;
			sh->ra_end = 0;
		}
		uint64_t want = hi + RA_AHEAD;
		if (sh->stamped && want > sh->size)
			want = sh->size;
		if (want <= sh->ra_end || r->nra == STK_RA_MAX)
			continue;
		r->ra[r->nra++] = (struct stk__ra){.fd = sh->fd, .off = sh->ra_end,
						   .len = want - sh->ra_end};
		l->ra_bytes += want - sh->ra_end;
		sh->ra_end = want;
	}
}

void stk__shards_read_ahead(struct io_thread *r)
{
	uint64_t chunk = r->l->ra_chunk ? r->l->ra_chunk : 256u << 10;
	for (unsigned i = 0; i < r->nra; i++) /* advice: a failure only costs speed */
		for (uint64_t o = 0; o < r->ra[i].len; o += chunk)
			posix_fadvise(r->ra[i].fd, (off_t)(r->ra[i].off + o),
				      (off_t)(r->ra[i].len - o < chunk ? r->ra[i].len - o : chunk),
				      POSIX_FADV_WILLNEED);
	r->nra = 0;
}

uint32_t stk__shards_lay_out(struct stk_loader *l, struct io_thread *r, struct slot *s, uint32_t n)
{
	uint32_t si = (uint32_t)(s - l->slots);
	uint8_t *base = stk__loader_read_base(l, s);
	struct sio **tmp = l->sort_scratch;
	uint64_t off = 0;
	uint32_t queued = 0, nt = 0;
	for (uint32_t i = 0; i < n; i++) {
		int64_t idx = l->scratch_idx[i];
		const struct stk_entry *e = &l->ds->entries[idx];
		struct sio *x = &s->ios[i];
		/* a video clip with a byte index: its own ranges, first, never merged */
		uint64_t room = l->video ? stk__vloader_setup(l, s, i, idx, off, shard_of(l, idx)->fd)
					 : 0;
		if (room > l->raw_bytes - off) {
			/* a batch far above the size bound (see slot_bytes_for) */
			stk__loader_sample_error(l, s, x, STK_ETOOBIG, NULL);
			continue;
		}
		if (room) {
			off += room;
			r->queue[(r->qhead + r->qlen++) % r->qcap] = x;
			queued += 1 + stk__vloader_queue_parts(l, s, x);
			l->rd_members++;
			continue;
		}
		s->indices[i] = idx;
		s->labels[i] = e->label;
		/* read_bytes: only the member's first bytes */
		bool prefix = l->o.read_bytes && l->o.read_bytes < e->size;
		s->sizes[i] = prefix ? l->o.read_bytes : e->size;
		s->offsets[i] = 0;
		*x = (struct sio){.io = {.path = stk__entry_path(l->ds, idx),
					 .buf_index = stk__loader_read_buf(l, s)},
				  .size = s->sizes[i], .prefix = prefix, .at = e->offset, .slot = si,
				  .idx = i};
		tmp[nt++] = x;
	}
	qsort(tmp, nt, sizeof(*tmp), by_place);
	/* remote data under global shuffle: a member a request, the same ranges
	 * every epoch, so what the local cache keeps serves the next epoch (its
	 * neighbours in a batch are another epoch's; merges are rare there) */
	bool merge = !(l->ds->remote && l->o.shuffle_mode == STK_SHUFFLE_GLOBAL);
	for (uint32_t k = 0; k < nt;) {
		struct sio *lead = tmp[k];
		uint64_t start = run_start(l, lead->at), end = lead->at + lead->size;
		uint32_t j = k + 1;
		while (j < nt && merge && tmp[j]->io.path == lead->io.path &&
		       tmp[j]->at <= end + MERGE_GAP) {
			uint64_t e2 = tmp[j]->at + tmp[j]->size;
			e2 = e2 > end ? e2 : end;
			if (run_end(l, e2) - start > MERGE_MAX ||
			    run_end(l, e2) - start > l->raw_bytes - off)
				break;
			end = e2;
			j++;
		}
		uint64_t len = run_end(l, end) - start;
		if (len > l->raw_bytes - off) {
			/* a batch far above the size bound (see slot_bytes_for) */
			stk__loader_sample_error(l, s, lead, STK_ETOOBIG, NULL);
			k++;
			continue;
		}
		const struct shard *sh = shard_of(l, l->scratch_idx[lead->idx]);
		lead->io.op = sh->fd >= 0 ? STK_IO_READ : STK_IO_READ_FILE;
		lead->io.fd = sh->fd;
		lead->io.buf = base + off;
		lead->io.len = len;
		lead->io.offset = start;
		for (uint32_t m = k; m < j; m++) {
			struct sio *x = tmp[m];
			x->skip = (uint32_t)(x->at - start);
			x->rider = m + 1 < j ? tmp[m + 1] : NULL;
			if (m > k)
				x->io.buf = lead->io.buf;
			s->offsets[x->idx] = off + x->skip;
		}
		l->rd_members += j - k;
		off += len;
		r->queue[(r->qhead + r->qlen++) % r->qcap] = lead;
		queued++;
		k = j;
	}
	s->offsets[n] = off;
	if (l->stream_ra)
		stream_ahead(l, r, s, tmp, nt);
	return queued;
}

uint64_t stk__shards_room(const struct stk_loader *l, int64_t idx)
{
	uint64_t clip = l->video ? stk__vloader_room(l, idx) : 0;
	if (clip)
		return clip;
	const struct stk_entry *e = &l->ds->entries[idx];
	bool prefix = l->o.read_bytes && l->o.read_bytes < e->size;
	uint64_t size = prefix ? l->o.read_bytes : e->size;
	return run_end(l, e->offset + size) - run_start(l, e->offset);
}

uint64_t stk__shards_setup_one(struct stk_loader *l, struct slot *s, uint32_t i, int64_t idx,
			       uint64_t place)
{
	uint64_t room = l->video ? stk__vloader_setup(l, s, i, idx, place, shard_of(l, idx)->fd) : 0;
	if (room)
		return room; /* a video clip's ranges */
	const struct stk_entry *e = &l->ds->entries[idx];
	struct sio *x = &s->ios[i];
	bool prefix = l->o.read_bytes && l->o.read_bytes < e->size;
	s->indices[i] = idx;
	s->labels[i] = e->label;
	s->sizes[i] = prefix ? l->o.read_bytes : e->size;
	const struct shard *sh = shard_of(l, idx);
	uint64_t start = run_start(l, e->offset);
	x->io = (struct stk_io){.op = sh->fd >= 0 ? STK_IO_READ : STK_IO_READ_FILE, .fd = sh->fd,
				.path = stk__entry_path(l->ds, idx),
				.buf_index = stk__loader_read_buf(l, s),
				.buf = stk__loader_read_base(l, s) + place,
				.len = stk__shards_room(l, idx), .offset = start};
	x->size = s->sizes[i];
	x->prefix = prefix;
	x->at = e->offset;
	x->skip = (uint32_t)(e->offset - start);
	x->rider = NULL;
	x->ranged = false; /* (the place's last read may have been a clip's ranges) */
	x->whole = NULL;
	x->nleft = 0;
	s->offsets[i] = place + x->skip;
	return x->io.len;
}

/* The shard's stat now: by its descriptor, or by its path when each read
 * opens it (the file a later read will open). */
static int shard_stat(const struct stk_loader *l, const struct shard *sh, struct stat *st)
{
	if (sh->fd >= 0)
		return fstat(sh->fd, st);
	return fstatat(l->ds->root_fd, stk__entry_path(l->ds, sh->first), st, 0);
}

void stk__shards_stat(const struct stk_loader *l, struct io_thread *r, struct sio *x)
{
	x->changed = false;
	if (x->io.res < 0)
		return;
	const struct shard *sh = shard_of(l, l->slots[x->slot].indices[x->idx]);
	uint32_t k = (uint32_t)(sh - l->shards);
	struct stat_memo *m = &r->stat_memo[k % STAT_MEMO];
	if (m->round == r->stat_round && m->shard == k) {
		x->changed = m->changed;
		return;
	}
	struct stat st;
	/* after the read: a write that put new bytes where it read had set the
	 * mtime first */
	if (!sh->stamped || shard_stat(l, sh, &st))
		return;
	x->changed = (uint64_t)st.st_size != sh->size || stk__mtime_ns(&st) != sh->mtime_ns;
	*m = (struct stat_memo){.round = r->stat_round, .shard = k, .changed = x->changed};
}

/* A landed member's check: stk__shards_check's, before its notice. */
static int shard_check(struct stk_loader *l, struct sio *x, char *why, size_t len)
{
	int64_t res = x->io.res;
	if (res < 0) {
		/* over remote data, the transport's reason and tries: the last failed
		 * read of this object's (io/rfail.c) */
		char net[240] = "";
		bool said = l->ds->remote &&
			    stk__remote_failure(l->ds->remote, x->io.path, net + 2, sizeof(net) - 2);
		if (said)
			memcpy(net, ": ", 2);
		/* a changed object: the transport's reason says how it was seen */
		snprintf(why, len, "member at offset %llu (%llu bytes): %s%s", (unsigned long long)x->at,
			 (unsigned long long)x->size,
			 res == -ESTALE && said ? "" : res == -ESTALE && l->ds->remote
			 ? "the object changed since it was indexed (its ETag differs)"
			 : stk_strerror((int)res), res == -ESTALE && said ? net + 2 : net);
		return (int)res;
	}
	if ((uint64_t)res < (uint64_t)x->skip + x->size) {
		snprintf(why, len, "member at offset %llu (%llu bytes): short read: the shard ends "
			 "before it (truncated since it was indexed?)", (unsigned long long)x->at,
			 (unsigned long long)x->size);
		return STK_ESHORT;
	}
	int64_t idx = l->slots[x->slot].indices[x->idx];
	if (x->changed) {
		const struct shard *sh = shard_of(l, idx);
		struct stat st = {0};
		shard_stat(l, sh, &st);
		snprintf(why, len, "member at offset %llu (%llu bytes): the shard changed since it "
			 "was indexed (%llu bytes, modified %lld.%09ld; indexed: %llu bytes, "
			 "modified %llu.%09llu): its bytes may be another member's",
			 (unsigned long long)x->at, (unsigned long long)x->size,
			 (unsigned long long)st.st_size, (long long)st.st_mtim.tv_sec,
			 st.st_mtim.tv_nsec, (unsigned long long)sh->size,
			 (unsigned long long)(sh->mtime_ns / 1000000000u),
			 (unsigned long long)(sh->mtime_ns % 1000000000u));
		stk__loader_drop_index(l);
		return STK_ECORRUPT;
	}
	const uint8_t *h = (const uint8_t *)x->io.buf + x->skip - TAR_BLOCK;
	if (x->skip >= TAR_BLOCK && stk__tar_header_tag(h) != l->ds->entries[idx].tag) {
		char what[200];
		stk__tar_header_describe(h, what, sizeof(what));
		snprintf(why, len, "member at offset %llu (%llu bytes): %s just before it, not the "
			 "member indexed there: the shard changed since it was indexed",
			 (unsigned long long)x->at, (unsigned long long)x->size, what);
		stk__loader_drop_index(l);
		return STK_ECORRUPT;
	}
	return 0;
}

/* Says once on stderr (unless quiet) that the shard of sample idx changed
 * since it was indexed (why: the first member's error), naming it. */
static void say_changed(struct stk_loader *l, int64_t idx, const char *why)
{
	struct shard *sh = &l->shards[shard_of(l, idx) - l->shards];
	if (sh->warned)
		return;
	sh->warned = true;
	const char *p = stk__entry_path(l->ds, sh->first);
	bool abs = p[0] == '/';
	stk__loader_notice(l, "%s%s%s: %s; a shard changed since it was indexed cannot be read "
			   "again: each of its members is an error (on_error %s) until the next "
			   "create indexes it again", abs ? "" : l->ds->root, abs ? "" : "/", p, why,
			   l->o.on_error == STK_ON_ERROR_SKIP ? "skip" : l->o.on_error ==
			   STK_ON_ERROR_FAIL ? "fail" : "replace");
}

int stk__shards_check(struct stk_loader *l, struct sio *x, char *why, size_t len)
{
	int rc = shard_check(l, x, why, len);
	if (rc == STK_ESHORT || rc == STK_ECORRUPT || (rc == -ESTALE && l->ds->remote))
		say_changed(l, l->slots[x->slot].indices[x->idx], why);
	return rc;
}
