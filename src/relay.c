/*
 * relay.c - the relay worker: its loop, the scheduler that decides which
 * statement goes next on its one connection, and its stop (drain, give
 * back, give up).
 *
 * Claim, publish, record: relay_claim.c claims pending rows with a lease
 * and records each outcome guarded by the claim; relay_sink.c takes the
 * claimed rows to the sink in chunks; relay_pg.c is the connection, with
 * one statement in flight at a time; relay_handoff.c takes the rows HTTP
 * workers hand to relay 1 already claimed.  Relay 1 also runs retention
 * (retention.c) and the replay job (replay_job.c), each on a connection
 * of its own.
 *
 * Wake-ups: relay 1 LISTENs on OUTBOX_CHANNEL (a payload-free hint sent
 * once per inserting statement) and claims on every notification; every
 * relay polls every poll_interval as the safety net, and makes a full pass
 * after every (re)connect because notifications sent while nobody listened
 * are gone.  The others start on their poll and keep claiming while their
 * claims come back full (a backlog), see relay_on_input().
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "relay.h"
#include "creds.h"
#include "wal.h"

#define RELAY_MASTER_STOP_WAIT_MS 1000	/* relay 1 stopped by a SIGTERM: how
					   long it waits for the master's
					   stop (SIGUSR2) */
#define RELAY_RECORD_MS		2	/* sent rows wait at most this */

static void	relay_next_statement(struct relay *);

/* Claim, or go on claiming, as soon as the connection is free. */
void
relay_kick(struct relay *r)
{
	r->want_claim = 1;
	relay_next(r);
}

/*
 * Claim again only if there may be something: the last claim was full, a
 * NOTIFY came since, or a sent row's key has more rows (the mark saw them;
 * the claim skipped them while their head was out).  Else a claim would
 * come back empty: rows due later (a backoff, a lease) are the poll's.
 */
void
relay_want_claim(struct relay *r)
{
	if (!r->stopping && r->inflight <= RELAY_LOW_WATER &&
	    (r->backlog || r->woken || r->followers))
		r->want_claim = 1;
}

static void
relay_next_statement(struct relay *r)
{
	int	mark, claim;

	if (r->conn == NULL || r->pg_query != RELAY_PG_NONE)
		return;
	mark = r->want_mark && r->nsent > 0;
	claim = r->want_claim && !r->stopping &&
	    r->inflight < RELAY_MAX_INFLIGHT && !relay_claim_held(r) &&
	    !relay_sink_full(r);
	/* Taking turns bounds each one's wait to one statement of the
	 * other.  Claims first would hold acked rows unmarked past their
	 * lease during a backlog (published twice); marks first would keep
	 * the claims waiting while the sink answers (each answer brings
	 * rows to mark) until it runs dry, and then it idles. */
	if (mark && (!claim || !r->marked_last)) {
		r->want_mark = 0;
		r->marked_last = 1;
		relay_mark_start(r);
		return;
	}
	r->want_mark = mark;
	if (claim) {
		r->want_claim = 0;
		r->marked_last = 0;
		relay_claim_start(r);
	}
}

/*
 * Start the next statement the relay owes, unless one is in flight: the
 * mark of the sent rows (it may find their keys' next rows) or a claim if
 * there is room; when both are owed, the one that did not go last.  Then
 * open or close relay 1's handoff socket.
 */
void
relay_next(struct relay *r)
{
	relay_next_statement(r);
	relay_handoff_gate(r);
}

/* Stopping, and nothing is left at the sink or in flight: mark the last
 * sent rows and leave the loop. */
void
relay_maybe_done(struct relay *r)
{
	struct timeval	tv = clock_tv(RELAY_MASTER_STOP_WAIT_MS);

	if (!r->stopping || r->inflight > 0 || r->pg_query != RELAY_PG_NONE)
		return;
	/*
	 * Relay 1 stopped by a SIGTERM: the whole process group's (Ctrl-C,
	 * kill -TERM -PGID), or one sent to it alone.  In the first case the
	 * master's stop (SIGUSR2) follows, sent once it has shut the handoff
	 * socket; only then is the socket's content final, for
	 * relay_handoff_give_back().  Wait for it, a little: in the second
	 * case none comes, and the relay 1 the master starts next reads the
	 * socket.
	 */
	if (r->handoff_ev != NULL && r->stopped && !r->master_stop &&
	    !r->master_stop_waited) {
		if (!evtimer_pending(r->master_stop_ev, NULL))
			evtimer_add(r->master_stop_ev, &tv);
		return;
	}
	relay_mark_now(r);
	event_base_loopbreak(r->base);
}

/* Relay 1 waited RELAY_MASTER_STOP_WAIT_MS for the master's stop in vain:
 * a SIGTERM sent to it alone.  Leave; the socket is the next relay 1's. */
static void
relay_on_master_stop_wait(evutil_socket_t fd, short what, void *arg)
{
	struct relay	*r = arg;

	(void)fd;
	(void)what;
	r->master_stop_waited = 1;
	relay_maybe_done(r);
}

static void
relay_on_record(evutil_socket_t fd, short what, void *arg)
{
	struct relay	*r = arg;

	(void)fd;
	(void)what;
	if (r->nsent > 0)
		r->want_mark = 1;	/* and then, maybe, a claim */
	else
		relay_want_claim(r);
	relay_next(r);
}

static void
relay_on_poll(evutil_socket_t fd, short what, void *arg)
{
	struct relay	*r = arg;

	(void)fd;
	(void)what;
	if (relay_pg_check(r) == -1)
		return;
	relay_kick(r);
}

void
relay_on_input(struct relay *r)
{
	if (r->conn == NULL || r->stopping) {
		relay_maybe_done(r);
		return;
	}
	/* Relay 1, the only listener, answers every notification.  The
	 * others claim on their poll and go on while their claims come back
	 * full: all of them drain a backlog, but a single new order does not
	 * cost every relay a claim (only one could get it) and the CPU they
	 * would take from the one that does. */
	if (r->woken)
		r->want_claim = 1;
	relay_next(r);
}

void
relay_schedule_record(struct relay *r)
{
	if (r->stopping) {
		/* A claim under way may add chunks. */
		relay_pg_wait_result(r);
		relay_maybe_done(r);
		if (r->inflight == 0)
			return;
	}
	/*
	 * Sent rows are marked, and the next claim made, from
	 * relay_on_record(): once this turn of the loop is over when few
	 * chunks are left at the sink (a new order goes out at once), else
	 * within RELAY_RECORD_MS, so that a backlog is marked and claimed
	 * in large statements rather than one per finished chunk.
	 */
	if (r->inflight <= RELAY_LOW_WATER)
		event_active(r->record_ev, EV_TIMEOUT, 1);
	else if (!event_pending(r->record_ev, EV_TIMEOUT, NULL)) {
		struct timeval	tv = { 0, RELAY_RECORD_MS * 1000 };

		evtimer_add(r->record_ev, &tv);
	}
}

/*
 * Stopping, and the sink still has not answered for rows it was given
 * (SQS or the webhook receiver hangs: a request may take relay.timeout,
 * as long as the default shutdown_timeout): end before the master's
 * SIGKILL, so that the stop is clean and says why.  Nothing is lost: the
 * rows stay claimed and are published again when their lease ends; if the
 * broker took them meanwhile, that is a duplicate (at-least-once).  Rows
 * the sink did answer for are marked after the loop, as at any stop.
 */
static void
relay_on_give_up(evutil_socket_t fd, short what, void *arg)
{
	struct relay	*r = arg;

	(void)fd;
	(void)what;
	if (r->at_sink == 0)
		return;		/* only a statement left: relay_maybe_done() */
	relay_sink_give_up(r);
	event_base_loopbreak(r->base);
}

/* deadline: the master kills at shutdown_timeout (a stop, not a reload's
 * retirement); a retired relay may get a stop later, see
 * proc_worker_signals(). */
static void
relay_stop(void *arg, int deadline)
{
	struct relay	*r = arg;

	if (deadline)
		r->stopped = 1;
	if (deadline == PROC_STOP_MASTER && !r->master_stop) {
		r->master_stop = 1;
		if (r->stopping) {	/* after a SIGTERM: maybe waiting */
			evtimer_del(r->master_stop_ev);
			relay_maybe_done(r);
		}
	}
	if (!r->stopping) {
		r->stopping = 1;
		retention_stop(r->retention);
		replay_job_stop(r->replay);
		/* Rows handed over from now on are left for the next relay 1
		 * (the master keeps the socket) or their lease. */
		relay_handoff_gate(r);
		/* Rows already at the sink are recorded; claimed rows still
		 * waiting for it are given back, unclaimed rows stay pending
		 * for the next relay.  A statement in flight is answered
		 * first (relay_pg_on_readable). */
		relay_sink_pump(r);
		relay_maybe_done(r);
	}
	if (deadline && r->at_sink > 0 && proc_give_up_arm(r->give_up, r->conf))
		log_info("stopping after the %d row(s) at the sink (giving up "
		    "those still unanswered after %ld ms)",
		    relay_sink_rows(r), proc_give_up_ms(r->conf));
}

int
relay_main(struct conf *conf, int index)
{
	struct relay		 r;
	struct timeval		 tv;
	char			 err[512];
	const char		*target;
	int			 target_len, i;

	log_init("relay", index);
	proc_set_title("outboxd: relay %d", index);
	if (conf->relay.mode == CONF_RELAY_WAL)
		return relay_wal_main(conf, index);	/* relay_wal.c */
	memset(&r, 0, sizeof(r));
	r.conf = conf;
	r.index = index;
	relay_sink_open(&r);
	TAILQ_INIT(&r.ready);
	TAILQ_INIT(&r.at_sinkq);
	if ((r.base = event_base_new()) == NULL)
		fatalx("event_base_new failed");
	if ((r.httpc = httpc_new(r.base)) == NULL)
		fatalx("httpc_new failed");
	if (proc_worker_signals(r.base, relay_stop, &r) == -1)
		fatalx("cannot install signal handlers");
	/* Without a server at start the relay runs all the same and
	 * reconnects with backoff, as after an outage; one that refuses the
	 * connection is a setting to fix. */
	switch (relay_pg_open(&r, err, sizeof(err))) {
	case -1:
		log_warnx("PostgreSQL unreachable at start (retrying with "
		    "backoff): %s", err);
		break;
	case -2:
		/* Left to the master's restart backoff, and its giving up. */
		log_error("cannot connect to PostgreSQL: %s", err);
		return 1;
	}
	r.record_ev = evtimer_new(r.base, relay_on_record, &r);
	r.give_up = evtimer_new(r.base, relay_on_give_up, &r);
	r.master_stop_ev = evtimer_new(r.base, relay_on_master_stop_wait, &r);
	r.poll_ev = event_new(r.base, -1, EV_PERSIST, relay_on_poll, &r);
	tv = clock_tv(conf->relay.poll_interval);
	if (r.record_ev == NULL || r.give_up == NULL ||
	    r.master_stop_ev == NULL || r.poll_ev == NULL ||
	    event_add(r.poll_ev, &tv) == -1)
		fatalx("event_add");
	relay_handoff_open(&r);
	/* Even with relay.retention 0: expired Idempotency-Keys go. */
	if (index == 1 && (r.retention = retention_new(r.base, conf)) == NULL)
		fatalx("retention_new");
	if (index == 1 && (r.replay = replay_job_new(r.base, conf)) == NULL)
		fatalx("replay_job_new");
	for (i = 0; i < r.n_dests; i++) {
		struct relay_dest	*d = &r.dests[i];

		d->sink->loggable(&d->t, &target, &target_len);
		log_kv(LOG_LEVEL_INFO, (const char *[]){ "destination",
		    d->t.dest->name, NULL }, "publishing to %s %.*s (batch %d, "
		    "concurrency %d, claim %d, poll %ld ms)", d->sink->name,
		    target_len, target, d->max_batch, d->slots,
		    conf->relay.batch_size, conf->relay.poll_interval);
	}

	/* Our own AWS credentials, fetched on our loop (creds.c), if a
	 * destination is AWS's: a relay of webhooks and Pub/Sub topics
	 * looks for none (and /readyz does not wait for them). */
	if (conf_destinations_aws(conf) &&
	    creds_start(r.base, conf, index, NULL) == -1)
		return (OUTBOXD_EX_CONFIG);
	relay_kick(&r);			/* rows written while we were down */
	event_base_dispatch(r.base);
	relay_mark_now(&r);		/* what finished in the last turn */
	relay_handoff_give_back(&r);
	proc_worker_done();

	relay_pg_close(&r);
	relay_handoff_close(&r);
	event_free(r.poll_ev);
	event_free(r.record_ev);
	event_free(r.give_up);
	event_free(r.master_stop_ev);
	free(r.sent);
	retention_free(r.retention);
	replay_job_free(r.replay);
	/* Aborts the requests of a give-up (no callback runs); their
	 * chunks' rows are left to the lease, as are those of chunks still
	 * waiting after a forced exit. */
	httpc_free(r.httpc);
	creds_stop();
	gcp_auth_stop();		/* its refresh timer is on r.base */
	relay_sink_free(&r);
	event_base_free(r.base);
	log_info("stopped");
	return 0;
}
