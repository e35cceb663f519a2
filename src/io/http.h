/*
 * io/http.h — what the remote read engine's two files share (io/http.c:
 * requests, the cache's readers, the engine's ops; io/hwin.c: windows):
 * its structures and the calls each makes of the other.  Private to them.
 */
#ifndef STK_IO_HTTP_H
#define STK_IO_HTTP_H

#include "io/engine.h"
#include "io/remote.h"

#include <pthread.h>

#define HIT_THREADS 4
#define WIN_STAGE (1u << 20)
/* Bytes handed to the cache's writer and not yet written, at most: past it
 * the curl thread writes a stage itself, so a disk slower than the network
 * slows the transfers instead of the queue growing with the dataset. */
#define WQ_MAX (32u << 20)

/* A window of an object being fetched (or queued to be), and the misses
 * waiting on it (linked by priv.next). */
struct win {
	const struct stk__robj *o;
	uint64_t off, len;
	struct stk_io *waiters;
	struct req *q;      /* its request, once started */
	struct win *next;
};

struct req {
	struct stk_eng *e;
	CURL *h;
	struct stk_io *io;  /* a member's read, or NULL for a window's */
	struct win *w;      /* a window's fetch */
	const char *path;
	uint64_t off;       /* where the range starts */
	uint8_t *stage;     /* a window's bytes not yet in the cache */
	uint64_t staged, flushed;
	const struct stk__robj *obj;
	struct curl_slist *hdrs;
	uint64_t want;      /* bytes asked for (the range, clamped to the object) */
	uint64_t got;       /* bytes of the range taken */
	uint64_t seen;      /* bytes of the body that came */
	struct stk__answer a; /* the answer's headers */
	int verdict;        /* stk__remote_verify's, at the end of the headers */
	char vwhy[240];
	bool enough;        /* a 200 (the whole object): stopped at the range's end */
	bool over;          /* more bytes than asked for */
	bool nokeep;        /* a window's answer without the ETag: not for the cache */
	bool fresh;         /* its next try on a new connection */
	bool paused;        /* a window's: on the paused list (win_yield) */
	uint64_t burst;     /* a window's bytes since it was last resumed */
	CURLcode cc;        /* how its last transfer ended */
	unsigned attempt;
	uint64_t first;     /* when its first try started: retries have a time */
	uint64_t due, t0;
	struct req *next;
};

struct stk_eng {
	CURLM *m;
	struct stk__remote *r;
	struct req *free_reqs, *delayed;
	struct req *paused; /* windows paused to let the thread out (win_yield) */
	/* a window's body callback (io/hwin.c's, set by http.c): io/hreq.c
	 * starts its GETs without calling up into hwin.c */
	size_t (*win_body)(char *ptr, size_t size, size_t n, void *arg);
	struct req **all;   /* every req made, for exit */
	size_t nall, capall;
	/* the cache's readers (hit_main) */
	pthread_t hit[HIT_THREADS];
	unsigned nhit;
	pthread_mutex_t hmu;
	pthread_cond_t hcv;
	struct stk_io *htodo_head, *htodo_tail, *hdone_head, *hdone_tail;
	bool hstop;
	struct stk_io *done_head, *done_tail;
	_Atomic bool woken;
	uint64_t rng;
	/* windows: each object's state per window (0 none, 1 queued or in
	 * flight, 2 done or failed), the windows queued and in flight */
	uint8_t **wstate;
	struct win *wqueue, *wfly;
	unsigned nfly;
	/* the cache's writer: windows' bytes into the cache off this thread,
	 * then (a marker after them, in order) their waiters to the readers */
	pthread_t wthr;
	bool wrun, wstop;
	pthread_cond_t wcv;
	struct wjob *wj_head, *wj_tail;
	uint64_t wq_bytes; /* queued to the writer, not yet written (hmu) */
};

struct wjob {
	struct wjob *next;
	const struct stk__robj *o;
	uint64_t off, len;
	uint8_t *buf;           /* bytes to keep (freed once written), or NULL */
	struct stk_io *waiters; /* a marker: these go to the readers */
};

/* io/http.c */
/* Of a body's next l bytes, the part within the range asked for: its start
 * in *at and its length, or -1 to stop the transfer. */
int64_t stk__http_in_range(struct req *q, size_t l, size_t *at);
/* io done with res, onto the list the next reap hands out. */
void stk__http_finish(struct stk_eng *e, struct stk_io *io, int64_t res);
/* Sends q (its range, If-Match, callbacks): 0 or -errno. */
int stk__http_start(struct stk_eng *e, struct req *q);
struct req *stk__http_get_req(struct stk_eng *e);
void stk__http_put_req(struct stk_eng *e, struct req *q);
/* A transfer is over: out of the multi handle, counted; its HTTP status. */
long stk__http_transfer_ended(struct stk_eng *e, struct req *q, CURLcode *cc);
/* 0 done, 1 try again, or the -errno to fail with; why says it. */
int stk__http_outcome(struct req *q, CURLcode cc, long status, char *why, size_t len);
/* q onto the delayed list to be tried again: true, or false when spent. */
bool stk__http_retry_later(struct stk_eng *e, struct req *q);

/* io/hwin.c */
/* A window's body callback (CURLOPT_WRITEFUNCTION). */
size_t stk__hwin_body(char *ptr, size_t size, size_t n, void *arg);
/* The windows paused to let the thread out go on. */
void stk__hwin_resume(struct stk_eng *e);
/* A miss of io waits for its window: true, or false to fetch it alone. */
bool stk__hwin_wait(struct stk_eng *e, struct stk_io *io, const struct stk__robj *o,
		    uint64_t want);
/* A window's transfer ended: kept, retried, or failed. */
void stk__hwin_ended(struct stk_eng *e, struct req *q, CURLcode cc);
/* The window will not be fetched again; then its waiters go back. */
void stk__hwin_settled(struct stk_eng *e, const struct win *w);
void stk__hwin_done(struct stk_eng *e, struct win *w, bool ok);
/* The cache's writer thread. */
void *stk__hwin_writer(void *arg);

#endif
