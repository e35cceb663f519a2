/*
 * io/null.c — the null engine, for tests and for measuring the
 * pipeline's own overhead: reads complete without touching memory (res is
 * the length asked for), in submission order, each latency_ns after its
 * submit.  One list under a mutex; a reap that must wait sleeps on a
 * CLOCK_MONOTONIC condition until the oldest is due or wake is called.
 * With STOKER_NULL_CHANNELS=K (the queue-depth tuner's tests) it models a
 * device: a read waits for one of K channels, so throughput stops rising at
 * depth K and latency grows past it.
 */
#include "io/engine.h"

#include <pthread.h>
#include <stdlib.h>

struct stk_eng {
	pthread_mutex_t mu;
	pthread_cond_t done_cv;
	struct stk_io *todo_head, *todo_tail;
	bool woken;
	uint64_t latency_ns;
	uint64_t *chan;      /* STOKER_NULL_CHANNELS: when each channel is free */
	unsigned nchan;
};

static int null_init(struct stk_eng **out, const struct stk_engine_cfg *cfg)
{
	struct stk_eng *e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	pthread_mutex_init(&e->mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&e->done_cv, &ca);
	pthread_condattr_destroy(&ca);
	e->latency_ns = cfg->null_latency_ns;
	const char *k = getenv("STOKER_NULL_CHANNELS");
	if (k && *k && (e->nchan = (unsigned)strtoul(k, NULL, 10)) &&
	    !(e->chan = calloc(e->nchan, sizeof(*e->chan)))) {
		free(e);
		return -ENOMEM;
	}
	*out = e;
	return 0;
}

static void null_exit(struct stk_eng *e)
{
	if (!e)
		return;
	pthread_mutex_destroy(&e->mu);
	pthread_cond_destroy(&e->done_cv);
	free(e->chan);
	free(e);
}

static int null_submit(struct stk_eng *e, struct stk_io **ios, unsigned n)
{
	pthread_mutex_lock(&e->mu);
	uint64_t now = stk__now_ns();
	for (unsigned i = 0; i < n; i++) {
		ios[i]->res = (int64_t)ios[i]->len;
		ios[i]->priv.t = now;
		if (e->nchan) { /* the channel free first; start times stay in order */
			unsigned c = 0;
			for (unsigned k = 1; k < e->nchan; k++)
				c = e->chan[k] < e->chan[c] ? k : c;
			ios[i]->priv.t = e->chan[c] > now ? e->chan[c] : now;
			e->chan[c] = ios[i]->priv.t + e->latency_ns;
		}
		stk__io_push(&e->todo_head, &e->todo_tail, ios[i]);
	}
	pthread_mutex_unlock(&e->mu);
	return 0;
}

static int null_reap(struct stk_eng *e, struct stk_io **done, unsigned max, bool wait)
{
	unsigned n = 0;
	pthread_mutex_lock(&e->mu);
	for (;;) {
		uint64_t now = stk__now_ns();
		while (e->todo_head && n < max && e->todo_head->priv.t + e->latency_ns <= now)
			done[n++] = stk__io_pop(&e->todo_head, &e->todo_tail);
		if (n || !wait || e->woken)
			break;
		if (!e->todo_head) {
			pthread_cond_wait(&e->done_cv, &e->mu);
			continue;
		}
		uint64_t due = e->todo_head->priv.t + e->latency_ns;
		struct timespec ts = {.tv_sec = (time_t)(due / 1000000000ull),
				      .tv_nsec = (long)(due % 1000000000ull)};
		pthread_cond_timedwait(&e->done_cv, &e->mu, &ts);
	}
	e->woken = false;
	pthread_mutex_unlock(&e->mu);
	return (int)n;
}

static void null_wake(struct stk_eng *e)
{
	pthread_mutex_lock(&e->mu);
	e->woken = true;
	pthread_mutex_unlock(&e->mu);
	pthread_cond_signal(&e->done_cv); /* after the unlock: the woken reap does not wait for mu */
}

const struct stk_engine_ops stk__engine_null = {
	.name = "null",
	.init = null_init,
	.submit = null_submit,
	.reap = null_reap,
	.wake = null_wake,
	.exit = null_exit,
};
