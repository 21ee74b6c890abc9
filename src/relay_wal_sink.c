/*
 * relay_wal_sink.c - relay.mode = "wal": events to the sinks.  Each
 * destination's queue is in commit order; an event goes out only when no
 * earlier event of its ordering key is at the sink or waiting out a
 * backoff, so a key's events keep their order while other keys' go on,
 * in batches of the sink's size with several calls in flight.  The
 * sinks are the table path's (struct sink), answering per message.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "relay_wal.h"
#include "relay.h"
#include "metrics_api.h"

#define WAL_SCAN_MAX	2048	/* events looked at per pump and
				   destination */
#define WAL_KEYS	4096	/* key table: twice WAL_SCAN_MAX */


/* The keys a pump has met (open addressing, stamped per pump so that it
 * need not be cleared). */
struct wal_keys {
	const char	*k[WAL_KEYS];
	unsigned	 stamp[WAL_KEYS];
	unsigned	 now;
};

/* 1 if key was in the set already; else adds it and returns 0. */
static int
wal_keys_add(struct wal_keys *ks, const char *key)
{
	uint32_t	h = 2166136261u;
	const char	*p;
	unsigned	i;

	for (p = key; *p != '\0'; p++)
		h = (h ^ (unsigned char)*p) * 16777619u;
	for (i = h & (WAL_KEYS - 1); ks->stamp[i] == ks->now;
	    i = (i + 1) & (WAL_KEYS - 1))
		if (strcmp(ks->k[i], key) == 0)
			return 1;
	ks->stamp[i] = ks->now;
	ks->k[i] = key;
	return 0;
}

static void	wal_answered(struct outbox_msg *, int, void *);

static void
wal_send(struct relay_wal *w, struct wal_chunk *ch)
{
	struct wal_dest	*d = ch->d;
	int		 i;

	for (i = 0; i < ch->n; i++) {
		ch->msgs[i] = ch->ev[i]->m;
		ch->msgs[i].error = NULL;
		ch->msgs[i].outcome = SINK_SENT;
		ch->msgs[i].answered = 0;
		ch->ev[i]->at_sink = 1;
	}
	ch->sink_us = clock_mono_us();
	TAILQ_INSERT_TAIL(&w->chunks, ch, entry);
	d->at_sink++;
	w->at_sink++;
	if (d->sink->publish(w->httpc, &d->t, ch->msgs, ch->n, wal_answered,
	    ch) == -1) {
		log_limited(&d->t.call_limit, LOG_LEVEL_WARN, "destination "
		    "%s: could not start a publish of %d message(s); retried",
		    d->t.dest->name, ch->n);
		for (i = 0; i < ch->n; i++) {
			ch->msgs[i].outcome = SINK_RETRY;
			ch->msgs[i].reason = SINK_REASON_OTHER;
		}
		wal_answered(ch->msgs, ch->n, ch);
	}
}

/* Hand each destination's next events to its free calls: in commit
 * order, skipping a key whose earlier event is at the sink or waiting
 * out a backoff. */
void
relay_wal_pump(struct relay_wal *w)
{
	static struct wal_keys	 ks;
	struct wal_chunk	*ch;
	struct wal_dest		*d;
	struct wal_ev		*ev;
	size_t			 bytes, budget = w->conf->relay.max_message_size;
	int64_t			 now = clock_mono_us();
	int			 i, scanned;

	if (w->stopping)
		return;
	for (i = 0; i < w->n_dests; i++) {
		d = &w->dests[i];
		if (d->at_sink >= d->slots || TAILQ_EMPTY(&d->q) ||
		    d->paused || w->paused_all)
			continue;
		ks.now++;
		ch = NULL;
		bytes = 0;
		scanned = 0;
		TAILQ_FOREACH(ev, &d->q, entry) {
			if (++scanned > WAL_SCAN_MAX)
				break;
			if (wal_keys_add(&ks, ev->m.key) || ev->at_sink ||
			    ev->due_us > now)
				continue;
			if (ch != NULL && (ch->n == d->max_batch ||
			    bytes + ev->m.payload_len > budget)) {
				wal_send(w, ch);
				ch = NULL;
				if (d->at_sink >= d->slots)
					break;
			}
			if (ch == NULL) {
				if ((ch = calloc(1, sizeof(*ch))) == NULL)
					fatal("calloc");
				ch->w = w;
				ch->d = d;
				bytes = 0;
			}
			ch->ev[ch->n++] = ev;
			bytes += ev->m.payload_len;
		}
		if (ch != NULL)
			wal_send(w, ch);
	}
}

/* Count a call's outcomes as the table path does. */
static void
wal_count(struct wal_chunk *ch)
{
	metrics_sink_duration(metrics_dest(ch->d->t.dest),
	    (uint64_t)(clock_mono_us() - ch->sink_us));
	relay_sink_count_msgs(ch->w->conf, metrics_dest(ch->d->t.dest),
	    ch->msgs, ch->n, clock_wall_us() / 1000);
}

static void
wal_answered(struct outbox_msg *msgs, int n, void *arg)
{
	struct wal_chunk	*ch = arg;
	struct relay_wal	*w = ch->w;
	struct wal_ev		*ev;
	int			 i;

	(void)msgs;
	(void)n;
	wal_count(ch);
	TAILQ_REMOVE(&w->chunks, ch, entry);
	ch->d->at_sink--;
	w->at_sink--;
	for (i = 0; i < ch->n; i++) {
		ev = ch->ev[i];
		ev->at_sink = 0;
		ev->m.attempts++;
		free(ev->m.error);
		ev->m.error = ch->msgs[i].error;
		ev->m.outcome = ch->msgs[i].outcome;
		ev->m.reason = ch->msgs[i].reason;
		if (ev->m.outcome == SINK_RETRY &&
		    ev->m.attempts < w->conf->relay.max_attempts) {
			/* Its key waits with it: order is kept. */
			ev->due_us = clock_mono_us() + 1000 * (int64_t)
			    relay_backoff(w->conf, ev->m.attempts,
			    ch->msgs[i].retry_after);
			continue;
		}
		TAILQ_REMOVE(&ev->dest->q, ev, entry);
		relay_wal_finish(w, ev);
	}
	free(ch);
	if (w->stopping && w->at_sink == 0)
		event_base_loopbreak(w->base);
	else
		event_active(w->pump_ev, EV_TIMEOUT, 1);
}

