/*
 * relay.c - the relay worker: publishes pending outbox rows to the sink.
 *
 * Claim, commit, publish, record: a claim marks up to batch_size pending
 * rows with a random claim token and pushes their available_at out by the
 * lease, in one short autocommitted statement (FOR UPDATE SKIP LOCKED
 * keeps relays off each other's rows).  No transaction is open while the
 * broker is called.  Each message's outcome is then recorded, guarded by
 * its claim token (sent rows in one statement for many chunks, failures
 * one by one), so a relay whose lease expired can never overwrite a row
 * another relay has since taken.  A relay killed at any moment loses
 * nothing: its rows become available again when the lease ends.
 *
 * The claim and the mark go to PostgreSQL without waiting for the answer
 * (one statement in flight on the relay's connection, its result read
 * when the socket is readable): while the server works on them the relay
 * goes on with the sink's answers.  Waiting for them held a webhook relay
 * idle for a third of its time.  Rarer statements (a failure) wait, after
 * the statement in flight has been answered.  Claimed rows wait in the
 * relay for a free slot at the sink (relay_pump()); a claim is made while
 * enough of them are still waiting to keep the sink busy until its answer
 * comes.  Relay 1 also runs retention (retention.c), on a connection of
 * its own.
 *
 * Wake-ups: relay 1 LISTENs on OUTBOX_CHANNEL (a payload-free hint sent
 * once per inserting statement) and claims on every notification; every
 * relay polls every poll_interval as the safety net, and makes a full pass
 * after every (re)connect because notifications sent while nobody listened
 * are gone.  The others start on their poll and keep claiming while their
 * claims come back full (a backlog), see relay_on_conn().
 */
#include "config.h"

#include <sys/queue.h>

#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>
#include <libpq-fe.h>

#include "outboxd.h"

#define RELAY_MAX_INFLIGHT	320	/* rows claimed, not yet recorded */
#define RELAY_LOW_WATER		(RELAY_MAX_INFLIGHT / 2) /* claim again */
#define RELAY_GIVE_BACK_MAX	100	/* handed-off rows a statement */
#define RELAY_WORD_WAIT_MS	1000	/* relay 1 stopped by a SIGTERM: how
					   long it waits for the master's */
#define RELAY_RECORD_MS		2	/* sent rows wait at most this */
#define RELAY_RECONNECT_MIN	100	/* ms */
#define RELAY_RECONNECT_MAX	5000	/* ms */
#define RELAY_RETRY_AFTER_MAX	3600000	/* ms, cap on a broker's Retry-After */
#define RELAY_ERROR_MAX		1000	/* bytes of last_error kept */

struct relay;

/* The statement in flight on a relay's connection, if any. */
enum relay_query { RELAY_Q_NONE, RELAY_Q_CLAIM, RELAY_Q_SENT };

/*
 * A chunk is what one sink call publishes (up to the sink's max_batch
 * messages).  At most the sink's slots chunks are at the sink at once;
 * the other claimed chunks wait in the relay, ready to go as soon as a
 * slot frees, so the relay has work while its next claim is under way.
 */
struct relay_chunk {
	struct relay		*relay;
	int64_t			 claim;
	struct outbox_msg	 msgs[SINK_MAX_BATCH];
	int			 n;
	size_t			 bytes;		/* message sizes added up */
	int64_t			 acked_us;	/* when the sink answered (wall
						   clock: it becomes sent_at) */
	int64_t			 claimed_us;	/* when its claim was sent */
	int64_t			 answered_us;	/* ... and came back */
	int64_t			 lease_end_us;	/* ... its lease ends (monotonic:
						   claimed_us + the lease) */
	int64_t			 sink_us;	/* handed to the sink (monotonic) */
	int			 at_sink;	/* handed to the sink */
	TAILQ_ENTRY(relay_chunk) entry;		/* in ready or at_sinkq */
};

/* A row the sink took, until the mark records it. */
struct relay_sent {
	int64_t			 id;
	int64_t			 claim;		/* its claim token */
	int64_t			 acked_us;	/* as in its chunk */
	int64_t			 lease_end_us;	/* ... its claim's lease ends */
};

struct relay {
	struct conf		*conf;
	int			 index;
	struct event_base	*base;
	struct httpc		*httpc;
	PGconn			*conn;
	struct event		*conn_ev;	/* readable: notifications */
	struct event		*poll_ev;	/* poll_interval safety net */
	struct event		*reconnect_ev;
	struct event		*give_up;	/* stopping: rows at the sink */
	struct event		*handoff_ev;	/* relay 1: rows handed over */
	struct retention	*retention;	/* relay 1: old sent rows */
	const struct sink	*sink;
	long			 reconnect_delay;
	int			 reconnect_fails;
	int			 inflight;	/* rows claimed, not recorded */
	TAILQ_HEAD(, relay_chunk) ready;	/* ... waiting for a slot */
	TAILQ_HEAD(, relay_chunk) at_sinkq;	/* ... at the sink */
	int			 at_sink;	/* ... how many */
	struct event		*record_ev;	/* records the sent rows */
	struct relay_sent	*sent;		/* sent, not recorded yet */
	int			 nsent;
	int			 sent_cap;
	int			 marking;	/* sent[0..marking) are being
						   marked by the query in flight */
	int			 woken;		/* NOTIFY seen since last claim */
	int			 backlog;	/* the last claim came back full */
	enum relay_query	 busy;		/* the statement in flight */
	PGresult		*busy_res;	/* ... its result, once read */
	int64_t			 busy_token;	/* ... a claim's token */
	int64_t			 busy_us;	/* ... when it was sent */
	int64_t			 claim_cost_us;	/* how long claims take */
	int64_t			 mark_cost_us;	/* ... and marks */
	int			 busy_asked;	/* ... a claim's limit */
	long			 sink_timeout;	/* ms, the sink's request
						   timeout, see relay_pump */
	int			 handoff_on;	/* handoff_ev is added */
	int			 handoff_shut;	/* ... never again: shut */
	struct log_limit	 stale_limit;	/* "too late to publish" */
	struct log_limit	 hold_limit;	/* "holding the next claim" */
	int			 want_claim;	/* claim when the connection is free */
	int			 want_mark;	/* mark the sent rows, likewise */
	int			 marked_last;	/* the last statement was a mark */
	unsigned		 prepared;	/* relay_stmt bits, this conn */
	int			 followers;	/* marked rows' keys have more */
	int			 stopping;
	int			 stopped;	/* a stop, not a reload's retire */
	int			 master_stop;	/* ... the master's (SIGUSR2) */
	struct event		*word_ev;	/* relay 1: waiting for it */
	int			 word_waited;	/* ... in vain */
};

static void	relay_kick(struct relay *);
static void	relay_pump(struct relay *);
static void	relay_next(struct relay *);
static void	relay_next_statement(struct relay *);
static void	relay_handoff_gate(struct relay *);
static void	relay_finish(struct relay *);
static void	relay_disconnect(struct relay *, const char *);

/* Remember how long a statement took, in us: the longest of the recent
 * ones, each older one counting half as much. */
static void
relay_cost(int64_t *cost, int64_t took)
{
	*cost = took > *cost / 2 ? took : *cost / 2;
}

static void
relay_chunk_free(struct relay_chunk *ch)
{
	int	i;

	for (i = 0; i < ch->n; i++) {
		free(ch->msgs[i].event_type);
		free(ch->msgs[i].key);
		free(ch->msgs[i].payload);
		free(ch->msgs[i].error);
	}
	free(ch);
}

static void
relay_drain_notifies(struct relay *r)
{
	PGnotify	*nf;

	while ((nf = PQnotifies(r->conn)) != NULL) {
		r->woken = 1;
		PQfreemem(nf);
	}
}

/*
 * Delay before the next attempt, in ms: backoff_base doubled per attempt
 * already made, capped at backoff_max, with "equal jitter" (half fixed,
 * half random) so rows that failed together do not retry together.  A
 * broker's Retry-After wins when it asks for longer.
 */
static long
relay_backoff(const struct conf *c, int attempts, long retry_after)
{
	long	d = c->relay.backoff_base;
	int	i;

	for (i = 1; i < attempts && d < c->relay.backoff_max; i++)
		d *= 2;
	if (d > c->relay.backoff_max)
		d = c->relay.backoff_max;
	d = d / 2 + random() % (d / 2 + 1);
	if (retry_after > d)
		d = retry_after > RELAY_RETRY_AFTER_MAX ?
		    RELAY_RETRY_AFTER_MAX : retry_after;
	return d;
}

/* The hot statements, prepared once per connection (bits of prepared):
 * parsing and planning them again for every claim cost the server about
 * as much as running them. */
enum relay_stmt { RELAY_CLAIM = 1, RELAY_SENT = 2 };

static const char *const relay_stmt_names[] = {
	[RELAY_CLAIM] = "outboxd_relay_claim",
	[RELAY_SENT] = "outboxd_relay_sent",
};

/* After a statement failed: disconnect (and reconnect later) when the
 * connection is what broke, else log the statement's error. */
static void
relay_failed(struct relay *r, const PGresult *res)
{
	if (PQstatus(r->conn) != CONNECTION_OK)
		relay_disconnect(r, PQerrorMessage(r->conn));
	else
		log_error("query failed: %s", res != NULL ?
		    PQresultErrorMessage(res) : PQerrorMessage(r->conn));
}

/* Run a statement and wait for it, after the statement in flight, if
 * any, has been answered.  Returns the result (the caller PQclear()s it)
 * or NULL, the error logged. */
static PGresult *
relay_exec(struct relay *r, const char *sql, int nparams,
    const char *const *params, ExecStatusType want)
{
	PGresult	*res;

	relay_finish(r);	/* one statement at a time on a connection */
	if (r->conn == NULL)
		return NULL;
	res = PQexecParams(r->conn, sql, nparams, NULL, params, NULL, NULL, 0);
	/* A query reads the socket too: notifications it took in would
	 * otherwise wait for the next poll. */
	relay_drain_notifies(r);
	if (PQresultStatus(res) == want)
		return res;
	relay_failed(r, res);
	PQclear(res);
	return NULL;
}

/* Send one of the hot statements (prepared first if this connection has
 * not seen it) without waiting: relay_on_conn() reads the answer and hands
 * it to relay_complete().  Returns 0, or -1 with the error handled. */
static int
relay_send(struct relay *r, enum relay_query q, enum relay_stmt stmt,
    const char *sql, int nparams, const char *const *params)
{
	PGresult	*res;

	if (!(r->prepared & stmt)) {
		res = PQprepare(r->conn, relay_stmt_names[stmt], sql, nparams,
		    NULL);
		relay_drain_notifies(r);
		if (PQresultStatus(res) != PGRES_COMMAND_OK) {
			relay_failed(r, res);
			PQclear(res);
			return -1;
		}
		PQclear(res);
		r->prepared |= stmt;
	}
	if (!PQsendQueryPrepared(r->conn, relay_stmt_names[stmt], nparams,
	    params, NULL, NULL, 0)) {
		relay_failed(r, NULL);
		return -1;
	}
	r->busy = q;
	r->busy_us = clock_mono_us();
	return 0;
}

/* Queue row i of a chunk, which the sink took, for relay_mark_start(). */
static void
relay_queue_sent(struct relay *r, const struct relay_chunk *ch, int i)
{
	if (r->nsent == r->sent_cap) {
		r->sent_cap = r->sent_cap ? r->sent_cap * 2 : 256;
		r->sent = reallocarray(r->sent, r->sent_cap, sizeof(*r->sent));
		if (r->sent == NULL)
			fatal("reallocarray");
	}
	r->sent[r->nsent].id = ch->msgs[i].id;
	r->sent[r->nsent].claim = ch->claim;
	r->sent[r->nsent].acked_us = ch->acked_us;
	r->sent[r->nsent++].lease_end_us = ch->lease_end_us;
}

/* Record a failed attempt at row i of a chunk: retried after a backoff,
 * or dead-lettered. */
static void
relay_record_failure(struct relay *r, const struct relay_chunk *ch, int i)
{
	const struct outbox_msg	*m = &ch->msgs[i];
	char			 claim[24], delay[24], id[24];
	char			 err[RELAY_ERROR_MAX + 1];
	const char		*p[4];
	PGresult		*res;
	int			 attempts = m->attempts + 1;

	snprintf(claim, sizeof(claim), "%" PRId64, ch->claim);
	snprintf(id, sizeof(id), "%" PRId64, m->id);
	log_utf8_copy(err, sizeof(err), m->error != NULL ?
	    m->error : "unknown error");
	p[0] = id;
	p[1] = claim;
	p[2] = err;
	if (m->outcome == SINK_REJECTED ||
	    attempts >= r->conf->relay.max_attempts) {
		/* The dead-letter state: kept, listed and redriven by an
		 * operator; it holds back its key's later rows so their
		 * order survives. */
		log_kv(LOG_LEVEL_ERROR, (const char *[]){
		    "outbox_id", id, "ordering_key", m->key, NULL },
		    "publish failed after %d attempt(s)%s: %s",
		    attempts, m->outcome == SINK_REJECTED ?
		    " (permanent error)" : "", err);
		res = relay_exec(r, "UPDATE outbox SET "
		    "status = 'failed', claim = NULL, "
		    "attempts = attempts + 1, last_error = $3 "
		    "WHERE id = $1 AND claim = $2", 3, p,
		    PGRES_COMMAND_OK);
	} else {
		/* The sink has logged why, once per request. */
		snprintf(delay, sizeof(delay), "%ld", relay_backoff(
		    r->conf, attempts, m->retry_after));
		log_kv(LOG_LEVEL_DEBUG, (const char *[]){
		    "outbox_id", id, "ordering_key", m->key, NULL },
		    "attempt %d failed, retry in %s ms: %s", attempts,
		    delay, err);
		p[3] = delay;
		res = relay_exec(r, "UPDATE outbox SET "
		    "claim = NULL, attempts = attempts + 1, "
		    "last_error = $3, "
		    "available_at = now() + $4 * interval '1 ms' "
		    "WHERE id = $1 AND claim = $2", 4, p,
		    PGRES_COMMAND_OK);
	}
	if (res != NULL)
		PQclear(res);
}

/*
 * Record the sink's verdict for every message of a chunk.  Sent rows are
 * queued for relay_mark_start(), which marks those of many chunks with
 * one statement; a failure is recorded at once, on its own.
 */
static void
relay_record(struct relay *r, struct relay_chunk *ch)
{
	int	i;

	for (i = 0; i < ch->n; i++)
		if (ch->msgs[i].outcome == SINK_SENT)
			relay_queue_sent(r, ch, i);
	for (i = 0; i < ch->n; i++)
		if (ch->msgs[i].outcome != SINK_SENT)
			relay_record_failure(r, ch, i);
}

/* One field (at byte offset off) of every queued sent row as a bigint[]
 * literal; the caller frees it. */
static char *
relay_sent_array(const struct relay *r, size_t off)
{
	int64_t	*v;
	char	*s;
	int	 i;

	if ((v = reallocarray(NULL, r->nsent + 1, sizeof(*v))) == NULL)
		fatal("reallocarray");
	for (i = 0; i < r->nsent; i++)
		memcpy(&v[i], (const char *)&r->sent[i] + off, sizeof(*v));
	if ((s = db_int8_array(v, r->nsent)) == NULL)
		fatal("malloc");
	free(v);
	return s;
}

/*
 * Start marking every queued sent row 'sent' with one statement, each
 * guarded by the claim it was sent under; relay_marked() gets the answer.
 * sent_at is the moment the broker's answer reached the relay (its
 * clock), not the later moment of this statement.  Unless a claim follows
 * anyway (the last one was full), it also tells whether a marked row's key
 * has rows still waiting (its next row may be claimable now):
 * r->followers, until the next claim.  When the connection is gone the
 * queue is kept and marked after the reconnect; the lease (30 s by
 * default) gives that time before another relay may take the rows again.
 */
static void
relay_mark_start(struct relay *r)
{
	char		*ids, *claims, *acks;
	const char	*p[4];

	ids = relay_sent_array(r, offsetof(struct relay_sent, id));
	claims = relay_sent_array(r, offsetof(struct relay_sent, claim));
	acks = relay_sent_array(r, offsetof(struct relay_sent, acked_us));
	p[0] = ids;
	p[1] = claims;
	p[2] = acks;
	/* After a full claim another one follows anyway (relay_want_claim)
	 * and takes the followers: no need to look for them (an index probe
	 * per row) while a backlog drains. */
	p[3] = r->backlog ? "f" : "t";
	if (relay_send(r, RELAY_Q_SENT, RELAY_SENT, "WITH u AS ("
	    "UPDATE outbox o SET status = 'sent', "
	    "sent_at = timestamptz 'epoch' + d.ack * interval '1 microsecond', "
	    "claim = NULL, attempts = o.attempts + 1, last_error = NULL "
	    "FROM unnest($1::bigint[], $2::bigint[], $3::bigint[]) "
	    "AS d(id, claim, ack) WHERE o.id = d.id AND o.claim = d.claim "
	    "RETURNING o.id, o.ordering_key) "
	    "SELECT count(*), count(*) FILTER (WHERE CASE WHEN $4::boolean "
	    "THEN EXISTS (SELECT 1 FROM outbox s WHERE s.ordering_key = "
	    "u.ordering_key AND s.status <> 'sent' AND s.id <> u.id) END) "
	    "FROM u", 4, p) == 0)
		r->marking = r->nsent;
	else if (r->conn != NULL) {
		/* Not sent, connection fine: as for a failed mark below. */
		r->followers = 1;
		r->nsent = 0;
	}
	free(ids);
	free(claims);
	free(acks);
}

/*
 * Claim again only if there may be something: the last claim was full, a
 * NOTIFY came since, or a sent row's key has more rows (the mark saw them;
 * the claim skipped them while their head was out).  Else a claim would
 * come back empty: rows due later (a backoff, a lease) are the poll's.
 */
static void
relay_want_claim(struct relay *r)
{
	if (!r->stopping && r->inflight <= RELAY_LOW_WATER &&
	    (r->backlog || r->woken || r->followers))
		r->want_claim = 1;
}

/* The mark's answer (res NULL: it failed). */
static void
relay_marked(struct relay *r, PGresult *res)
{
	int	n = r->marking;

	relay_cost(&r->mark_cost_us, clock_mono_us() - r->busy_us);
	r->marking = 0;
	if (res == NULL && r->conn == NULL)
		return;		/* kept for after the reconnect */
	/* Kept until the next claim, which may come only after more
	 * marks; on an error, assume followers: a claim too many costs
	 * little. */
	if (res == NULL || strcmp(PQgetvalue(res, 0, 1), "0") != 0)
		r->followers = 1;
	if (res != NULL)
		log_debug("sent %d message(s), %s rows marked", n,
		    PQgetvalue(res, 0, 0));
	/* Rows sent while the mark was under way wait for the next one. */
	r->nsent -= n;
	memmove(r->sent, r->sent + n, r->nsent * sizeof(*r->sent));
	if (r->nsent > 0)
		r->want_mark = 1;
	relay_want_claim(r);
}

/* Mark the queued sent rows now and wait for it (stopping). */
static void
relay_record_sent(struct relay *r)
{
	relay_finish(r);
	if (r->nsent > 0 && r->conn != NULL) {
		relay_mark_start(r);
		relay_finish(r);
	}
}

/* Stopping, and nothing is left at the sink or in flight: mark the last
 * sent rows and leave the loop. */
static void
relay_maybe_done(struct relay *r)
{
	struct timeval	tv = clock_tv(RELAY_WORD_WAIT_MS);

	if (!r->stopping || r->inflight > 0 || r->busy != RELAY_Q_NONE)
		return;
	/*
	 * Relay 1 stopped by a SIGTERM: the whole process group's (Ctrl-C,
	 * kill -TERM -PGID), or one sent to it alone.  In the first case the
	 * master's word follows, sent once it has shut the handoff socket;
	 * only then is the socket's content final, for
	 * relay_handoff_give_back().  Wait for it, a little: in the second
	 * case none comes, and the relay 1 the master starts next reads the
	 * socket.
	 */
	if (r->handoff_ev != NULL && r->stopped && !r->master_stop &&
	    !r->word_waited) {
		if (!evtimer_pending(r->word_ev, NULL))
			evtimer_add(r->word_ev, &tv);
		return;
	}
	relay_record_sent(r);
	event_base_loopbreak(r->base);
}

/* Relay 1 waited RELAY_WORD_WAIT_MS for the master's word in vain: a
 * SIGTERM sent to it alone.  Leave; the socket is the next relay 1's. */
static void
relay_on_word_wait(evutil_socket_t fd, short what, void *arg)
{
	struct relay	*r = arg;

	(void)fd;
	(void)what;
	r->word_waited = 1;
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

/* Count a chunk's outcomes: sent with their latency, failed attempts by
 * reason, and whether each will be retried or was given up. */
static void
relay_count(struct relay *r, const struct relay_chunk *ch)
{
	int64_t		now = ch->acked_us / 1000, lat;
	int		i, sink = r->conf->relay.sink, nsent = 0;

	for (i = 0; i < ch->n; i++) {
		const struct outbox_msg	*m = &ch->msgs[i];

		if (m->outcome == SINK_SENT) {
			nsent++;
			/* Clocks of two hosts: never below zero. */
			lat = now - m->created_ms;
			metrics_publish_latency(lat > 0 ?
			    (uint64_t)lat * 1000 : 0);
			continue;
		}
		metrics_publish_failure(m->reason);
		metrics_published(sink, m->outcome == SINK_REJECTED ||
		    m->attempts + 1 >= r->conf->relay.max_attempts ?
		    METRICS_PUBLISH_FAILED : METRICS_PUBLISH_RETRY, 1);
	}
	metrics_published(sink, METRICS_PUBLISH_SENT, nsent);
}

static void
relay_published(struct outbox_msg *msgs, int n, void *arg)
{
	struct relay_chunk	*ch = arg;
	struct relay		*r = ch->relay;

	(void)msgs;
	(void)n;
	ch->acked_us = clock_wall_us();
	if (ch->at_sink) {
		metrics_sink_duration(r->conf->relay.sink,
		    (uint64_t)(clock_mono_us() - ch->sink_us));
		TAILQ_REMOVE(&r->at_sinkq, ch, entry);
		r->at_sink--;
	}
	relay_count(r, ch);
	relay_record(r, ch);
	r->inflight -= ch->n;
	relay_chunk_free(ch);
	relay_pump(r);
	if (r->stopping) {
		relay_finish(r);	/* a claim under way may add chunks */
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
 * Give n claimed rows back, unpublished, with one statement: any relay may
 * claim them at once.  Each row only if it is still under the claim that
 * took it.  Returns how many were, or -1 (the statement failed: logged,
 * and the rows are left to their lease).
 */
static int
relay_give_back(struct relay *r, const int64_t *ids, const int64_t *claims,
    int n)
{
	char		*ids_arr, *claims_arr;
	const char	*p[2];
	PGresult	*res;
	int		 given = -1;

	if ((ids_arr = db_int8_array(ids, n)) == NULL ||
	    (claims_arr = db_int8_array(claims, n)) == NULL)
		fatal("malloc");
	p[0] = ids_arr;
	p[1] = claims_arr;
	res = relay_exec(r, claim_give_back_sql, 2, p, PGRES_COMMAND_OK);
	if (res != NULL)
		given = atoi(PQcmdTuples(res));
	PQclear(res);
	free(ids_arr);
	free(claims_arr);
	return given;
}

/*
 * Give the rows of every chunk still waiting for the sink back at once
 * (stopping: publishing them could take longer than shutdown_timeout, and
 * a relay killed then leaves them to the lease).
 */
static void
relay_release(struct relay *r)
{
	struct relay_chunk	*ch;
	int64_t			*ids, *claims;
	int			 n = 0;

	if (TAILQ_EMPTY(&r->ready))
		return;
	if ((ids = reallocarray(NULL, r->inflight, sizeof(*ids))) == NULL ||
	    (claims = reallocarray(NULL, r->inflight, sizeof(*claims))) == NULL)
		fatal("reallocarray");
	while ((ch = TAILQ_FIRST(&r->ready)) != NULL) {
		int	i;

		TAILQ_REMOVE(&r->ready, ch, entry);
		for (i = 0; i < ch->n; i++) {
			ids[n] = ch->msgs[i].id;
			claims[n++] = ch->claim;
		}
		r->inflight -= ch->n;
		relay_chunk_free(ch);
	}
	if ((n = relay_give_back(r, ids, claims, n)) >= 0)
		log_info("gave back %d claimed row(s) not yet published", n);
	free(ids);
	free(claims);
}

/*
 * Relay 1 leaving at the master's stop: give back the rows still in the
 * handoff socket.  Nobody will read them (a reload's new relay 1 would, so
 * a retired relay 1 leaves them there, and so does one stopped alone),
 * and they would wait for their lease, after the restart that usually
 * follows.  The master shut the socket before its word (handoff_shut()),
 * so no row comes after this: an HTTP worker whose order commits later
 * gives its row back itself (http.c).
 */
static void
relay_handoff_give_back(struct relay *r)
{
	static char		 buf[HANDOFF_MAX];
	struct claimed_row	 row;
	int64_t			 ids[RELAY_GIVE_BACK_MAX];
	int64_t			 claims[RELAY_GIVE_BACK_MAX];
	int			 rv, more, n = 0, given = 0, left = 0;

	if (r->handoff_ev == NULL || !r->master_stop)
		return;
	do {
		rv = handoff_recv(&row, buf, sizeof(buf));
		/* A malformed datagram (EMSGSIZE, EBADMSG) is skipped; any
		 * other error ends the reading. */
		more = rv == 1 || (rv == -1 && (errno == EMSGSIZE ||
		    errno == EBADMSG));
		if (rv == 1) {
			ids[n] = row.id;
			claims[n++] = row.claim;
		}
		if (n > 0 && (n == RELAY_GIVE_BACK_MAX || !more)) {
			int	g = r->conn != NULL ?
				    relay_give_back(r, ids, claims, n) : -1;

			if (g >= 0)
				given += g;
			else
				left += n;
			n = 0;
		}
	} while (more);
	if (given > 0)
		log_info("gave back %d handed-off row(s) at the stop", given);
	if (left > 0)
		log_warnx("could not give back %d handed-off row(s) at the "
		    "stop (%s): they are published when their lease ends "
		    "(relay.lease)", left, r->conn == NULL ? "no database "
		    "connection" : "the statement failed");
}

/*
 * Hand ready chunks to the sink while it has free slots.  A chunk that
 * waited so long that its publish could outlast the claim's lease (a sink
 * that answers in seconds) is not published: its rows come back when the
 * lease ends, where another relay could take them while this one was
 * still publishing them.
 */
static void
relay_pump(struct relay *r)
{
	struct relay_chunk	*ch;
	int64_t			 now;

	if (r->stopping) {
		relay_release(r);
		return;
	}
	while (r->at_sink < r->sink->slots &&
	    (ch = TAILQ_FIRST(&r->ready)) != NULL) {
		/* The lease must cover the wait for a slot and the request
		 * (the configuration check makes it at least twice the
		 * request's timeout). */
		long	wait_max = (ch->lease_end_us - ch->claimed_us) / 1000 -
			    r->sink_timeout;

		TAILQ_REMOVE(&r->ready, ch, entry);
		now = clock_mono_us();
		if ((now - ch->claimed_us) / 1000 >= wait_max) {
			long long	took = (ch->answered_us -
					    ch->claimed_us) / 1000;

			/* A claim that alone uses up the time the lease
			 * leaves it publishes nothing, however idle the sink:
			 * say what to change. */
			if (took >= wait_max)
				log_limited(&r->stale_limit, LOG_LEVEL_WARN,
				    "too late to publish within the lease: %d "
				    "claimed row(s) are left to its end, the "
				    "claim took %lld ms and relay.lease leaves "
				    "%ld ms (lease less the sink's timeout); "
				    "find why claims are slow, or raise "
				    "relay.lease", ch->n, took, wait_max);
			else
				log_limited(&r->stale_limit, LOG_LEVEL_WARN,
				    "too late to publish within the lease: %d "
				    "claimed row(s) are left to its end (the "
				    "claim took %lld ms, the wait for a free "
				    "request to the sink %lld ms)", ch->n, took,
				    (long long)(now - ch->answered_us) / 1000);
			r->inflight -= ch->n;
			relay_chunk_free(ch);
			continue;
		}
		ch->at_sink = 1;
		ch->sink_us = now;
		r->at_sink++;
		TAILQ_INSERT_TAIL(&r->at_sinkq, ch, entry);
		if (r->sink->publish(r->httpc, r->conf, ch->msgs, ch->n,
		    relay_published, ch) == -1) {
			/* Not started: the lease brings the rows back. */
			log_warnx("could not start a publish of %d "
			    "message(s)", ch->n);
			TAILQ_REMOVE(&r->at_sinkq, ch, entry);
			r->at_sink--;
			r->inflight -= ch->n;
			relay_chunk_free(ch);
		}
	}
}

/* Queue a claimed chunk for the sink (relay_pump() hands it on); one
 * whose messages are all decided already (too large) is recorded at
 * once. */
static void
relay_send_chunk(struct relay *r, struct relay_chunk *ch)
{
	int	i;

	r->inflight += ch->n;
	for (i = 0; i < ch->n; i++)
		if (ch->msgs[i].outcome != SINK_REJECTED)
			break;
	if (i == ch->n) {
		relay_published(ch->msgs, ch->n, ch);
		return;
	}
	TAILQ_INSERT_TAIL(&r->ready, ch, entry);
}

/*
 * Claim up to batch_size rows (at most one per ordering key: see
 * outbox_claim() in sql/schema.sql), no more than the relay has room for
 * (RELAY_MAX_INFLIGHT claimed rows); relay_claimed() gets the answer.
 */
static void
relay_claim_start(struct relay *r)
{
	char		 claim[24], lease[24], limit[24];
	const char	*p[3];
	int		 room;

	room = RELAY_MAX_INFLIGHT - r->inflight;
	if (room > r->conf->relay.batch_size)
		room = r->conf->relay.batch_size;
	r->busy_token = claim_token();
	r->busy_asked = room;
	snprintf(claim, sizeof(claim), "%" PRId64, r->busy_token);
	snprintf(lease, sizeof(lease), "%ld", r->conf->relay.lease);
	snprintf(limit, sizeof(limit), "%d", room);
	p[0] = claim;
	p[1] = lease;
	p[2] = limit;
	r->woken = 0;
	r->followers = 0;
	relay_send(r, RELAY_Q_CLAIM, RELAY_CLAIM, "SELECT id, event_type, "
	    "ordering_key, payload, attempts, "
	    "(1000 * extract(epoch FROM created_at))::bigint "
	    "FROM outbox_claim($1, $2, $3) ORDER BY id", 3, p);
}

/*
 * Add a claimed row to *chp, the chunk being filled (a new one when there
 * is none or the row does not fit: the full one goes to the sink).  The
 * strings are copied.  claim and claimed_us: the row's claim token and
 * when its claim was sent (monotonic us); answered_us when it came back.
 */
static void
relay_chunk_add(struct relay *r, struct relay_chunk **chp,
    const struct claimed_row *row, int attempts, int64_t answered_us)
{
	struct relay_chunk	*ch = *chp;
	struct outbox_msg	*m;
	size_t			 size, budget = r->conf->relay.max_message_size;
	int64_t			 lease_end = row->claimed_us +
				    row->lease_ms * 1000;

	size = row->payload_len + row->type_len + r->sink->msg_overhead;
	/* A batch may carry as much as one message may (SQS). */
	if (ch != NULL && (ch->n == r->sink->max_batch ||
	    ch->bytes + size > budget || ch->claim != row->claim ||
	    ch->lease_end_us != lease_end)) {
		relay_send_chunk(r, ch);
		ch = NULL;
	}
	if (ch == NULL) {
		if ((ch = calloc(1, sizeof(*ch))) == NULL)
			fatal("calloc");
		ch->relay = r;
		ch->claim = row->claim;
		ch->claimed_us = row->claimed_us;
		ch->answered_us = answered_us;
		ch->lease_end_us = lease_end;
	}
	m = &ch->msgs[ch->n++];
	ch->bytes += size;
	m->id = row->id;
	m->event_type = strndup(row->type, row->type_len);
	m->key = strndup(row->key, row->key_len);
	m->payload = strndup(row->payload, row->payload_len);
	m->payload_len = row->payload_len;
	m->attempts = attempts;
	m->created_ms = row->created_ms;
	m->retry_after = -1;
	m->reason = SINK_REASON_OTHER;	/* the sink says why, if it fails */
	if (m->event_type == NULL || m->key == NULL || m->payload == NULL)
		fatal("strndup");
	if (size > budget) {
		/* Retrying cannot make it fit. */
		m->outcome = SINK_REJECTED;
		m->reason = SINK_REASON_TOO_LARGE;
		if (asprintf(&m->error, "message of %zu bytes exceeds "
		    "relay.max_message_size (%zu bytes)", size, budget) == -1)
			m->error = NULL;
	}
	*chp = ch;
}

/*
 * The claim's answer (res NULL: it failed): hand the rows to the sink in
 * chunks that respect its batch limits.  Claims follow one another while
 * there is room and they come back full.  One that got fewer rows than it
 * asked for took what there was: the claims stop there, so its messages
 * go out now rather than after one more (empty) claim.
 */
static void
relay_claimed(struct relay *r, PGresult *res)
{
	struct relay_chunk	*ch = NULL;
	struct claimed_row	 row;
	int64_t			 now = clock_mono_us();
	int			 i, n;

	relay_cost(&r->claim_cost_us, now - r->busy_us);
	n = res != NULL ? PQntuples(res) : -1;
	r->backlog = n == r->busy_asked;
	r->want_claim = n >= 0 && (n == r->busy_asked || r->woken);
	row.claim = r->busy_token;
	row.claimed_us = r->busy_us;
	row.lease_ms = r->conf->relay.lease;
	for (i = 0; i < n; i++) {
		row.id = strtoll(PQgetvalue(res, i, 0), NULL, 10);
		row.type = PQgetvalue(res, i, 1);
		row.type_len = PQgetlength(res, i, 1);
		row.key = PQgetvalue(res, i, 2);
		row.key_len = PQgetlength(res, i, 2);
		row.payload = PQgetvalue(res, i, 3);
		row.payload_len = PQgetlength(res, i, 3);
		row.created_ms = strtoll(PQgetvalue(res, i, 5), NULL, 10);
		relay_chunk_add(r, &ch, &row, atoi(PQgetvalue(res, i, 4)), now);
	}
	if (ch != NULL)
		relay_send_chunk(r, ch);
	relay_pump(r);
	if (n > 0)
		log_debug("claimed %d row(s)", n);
}

/*
 * Relay 1: rows an HTTP worker wrote already claimed and handed over
 * (handoff.c), published like the rows of a claim of its own.  Their
 * lease runs from when the worker sent its statement, so relay_pump()'s
 * check covers a row that waited long in the socket.
 */
static void
relay_on_handoff(evutil_socket_t fd, short what, void *arg)
{
	static char		 buf[HANDOFF_MAX];
	struct relay		*r = arg;
	struct relay_chunk	*ch = NULL;
	struct claimed_row	 row;
	int64_t			 now = clock_mono_us();
	int			 rv, n = 0;

	(void)fd;
	(void)what;
	while (r->inflight + n < RELAY_MAX_INFLIGHT &&
	    (rv = handoff_recv(&row, buf, sizeof(buf))) != 0) {
		if (rv == -1) {
			if (errno != EMSGSIZE && errno != EBADMSG) {
				log_warn("handoff socket");
				event_del(r->handoff_ev);
				event_free(r->handoff_ev);
				r->handoff_ev = NULL;
				break;
			}
			log_warnx("skipped a malformed handed-off row: its "
			    "lease brings it back");
			continue;
		}
		relay_chunk_add(r, &ch, &row, 0, now);
		n++;
	}
	if (ch != NULL)
		relay_send_chunk(r, ch);
	if (n > 0) {
		metrics_handoff(n, 0);
		log_debug("took %d handed-off row(s)", n);
	} else if (handoff_is_shut()) {
		/* The master's stop, whose word has not reached us (it
		 * may come before our signal handlers are set): an empty
		 * shut socket polls readable for ever. */
		log_info("the handoff socket is shut (outboxd is stopping): "
		    "taking no more handed-off rows");
		r->handoff_shut = 1;
	}
	relay_pump(r);
	relay_handoff_gate(r);
}

/* Claim, or go on claiming, as soon as the connection is free. */
static void
relay_kick(struct relay *r)
{
	r->want_claim = 1;
	relay_next(r);
}

/* How long, in us, until the first lease of a row this relay claimed and
 * has not marked yet ends (INT64_MAX: it holds none). */
static int64_t
relay_lease_left(const struct relay *r)
{
	const struct relay_chunk	*ch;
	int64_t				 first = INT64_MAX;
	int				 i;

	TAILQ_FOREACH(ch, &r->ready, entry)
		if (ch->lease_end_us < first)
			first = ch->lease_end_us;
	TAILQ_FOREACH(ch, &r->at_sinkq, entry)
		if (ch->lease_end_us < first)
			first = ch->lease_end_us;
	for (i = 0; i < r->nsent; i++)
		if (r->sent[i].lease_end_us < first)
			first = r->sent[i].lease_end_us;
	if (first == INT64_MAX)
		return INT64_MAX;
	return first - clock_mono_us();
}

/*
 * Must the next claim wait?  A mark owed while a claim is in flight waits
 * for its answer (one statement at a time on the connection).  When claims
 * are slow (a loaded server, a lock) against the lease, the mark of rows
 * the sink acks meanwhile can come after their lease has ended, when
 * another relay's claim may have taken them again: they would be
 * published twice.  So a claim is held while it, and the mark after it,
 * could end (twice the time they took lately) after the lease of a row
 * this relay claimed and has not marked yet.  The rows at the sink come
 * back, or are left to their lease by relay_pump(), within the sink's
 * timeout; once they are marked the claim goes.
 */
static int
relay_marks_late(const struct relay *r, int64_t lease_left)
{
	return 2 * (r->claim_cost_us + r->mark_cost_us) >= lease_left;
}

static int
relay_claim_held(struct relay *r)
{
	int64_t	left = relay_lease_left(r);

	if (!relay_marks_late(r, left))
		return 0;
	log_limited(&r->hold_limit, LOG_LEVEL_WARN, "holding the next claim "
	    "until the %d row(s) this relay holds are marked: their lease "
	    "ends in %lld ms (a claim took %lld ms lately, a mark %lld ms)",
	    r->inflight + r->nsent, (long long)(left > 0 ? left / 1000 : 0),
	    (long long)r->claim_cost_us / 1000,
	    (long long)r->mark_cost_us / 1000);
	return 1;
}

/*
 * Relay 1 reads handed-off rows (handoff.c) only when it could have
 * claimed them itself: connected, no statement in flight, room, marks not
 * late.  A handed-off row taken while the connection hangs (a backend
 * stuck on a lock or I/O) would be published and then wait for its mark
 * behind that statement, past its lease, while another relay's claim
 * takes it again; a claim would not have got it.  Rows wait in the socket
 * meanwhile, and relay_pump() drops those whose lease it can no longer
 * keep.
 */
static void
relay_handoff_gate(struct relay *r)
{
	int	on;

	if (r->handoff_ev == NULL)
		return;
	on = !r->stopping && !r->handoff_shut && r->conn != NULL &&
	    r->busy == RELAY_Q_NONE &&
	    r->inflight < RELAY_MAX_INFLIGHT &&
	    !relay_marks_late(r, relay_lease_left(r));
	if (on == r->handoff_on)
		return;
	if (on ? event_add(r->handoff_ev, NULL) : event_del(r->handoff_ev))
		fatalx("handoff event");
	r->handoff_on = on;
}

/*
 * Start the next statement the relay owes, unless one is in flight: the
 * mark of the sent rows (it may find their keys' next rows) or a claim if
 * there is room; when both are owed, the one that did not go last.  Then
 * open or close relay 1's handoff socket.
 */
static void
relay_next(struct relay *r)
{
	relay_next_statement(r);
	relay_handoff_gate(r);
}

static void
relay_next_statement(struct relay *r)
{
	int	mark, claim;

	if (r->conn == NULL || r->busy != RELAY_Q_NONE)
		return;
	mark = r->want_mark && r->nsent > 0;
	claim = r->want_claim && !r->stopping &&
	    r->inflight < RELAY_MAX_INFLIGHT && !relay_claim_held(r);
	/* Taking turns bounds each one's wait to one statement of the
	 * other.  Claims always first held acked rows unmarked past their
	 * lease during a backlog (published twice); marks always first kept
	 * the claims waiting while the sink answered (each answer brings
	 * rows to mark) until it ran dry, and then it idled. */
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

/* The statement in flight is answered (its result read into busy_res):
 * hand the result to its own step.  A failure is logged or, when the
 * connection broke, leads to a reconnect. */
static void
relay_complete(struct relay *r)
{
	enum relay_query	 q = r->busy;
	PGresult		*res = r->busy_res;

	r->busy = RELAY_Q_NONE;
	r->busy_res = NULL;
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		relay_failed(r, res);
		PQclear(res);
		res = NULL;
	}
	if (q == RELAY_Q_CLAIM)
		relay_claimed(r, res);
	else
		relay_marked(r, res);
	PQclear(res);
}

/* Read the answer of the statement in flight as far as it has come;
 * with block, wait until it is complete and hand it on. */
static void
relay_read(struct relay *r, int block)
{
	PGresult	*res;

	while (r->busy != RELAY_Q_NONE && r->conn != NULL &&
	    (block || !PQisBusy(r->conn))) {
		if ((res = PQgetResult(r->conn)) == NULL) {
			if (r->busy_res == NULL)	/* cannot be: say so */
				r->busy_res = PQmakeEmptyPGresult(r->conn,
				    PGRES_FATAL_ERROR);
			relay_drain_notifies(r);
			relay_complete(r);
			return;
		}
		if (r->busy_res == NULL)
			r->busy_res = res;
		else
			PQclear(res);
	}
}

/* Wait for the statement in flight, if any, and hand its answer on. */
static void
relay_finish(struct relay *r)
{
	relay_read(r, 1);
}

static void
relay_on_conn(evutil_socket_t fd, short what, void *arg)
{
	struct relay	*r = arg;

	(void)fd;
	(void)what;
	if (PQconsumeInput(r->conn) == 0)
		relay_disconnect(r, PQerrorMessage(r->conn));
	else {
		relay_drain_notifies(r);
		relay_read(r, 0);
	}
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

static void
relay_on_poll(evutil_socket_t fd, short what, void *arg)
{
	struct relay	*r = arg;

	(void)fd;
	(void)what;
	if (r->conn != NULL && PQstatus(r->conn) != CONNECTION_OK) {
		relay_disconnect(r, PQerrorMessage(r->conn));
		return;
	}
	relay_kick(r);
}

static int
relay_connect(struct relay *r, char *err, size_t errlen)
{
	PGresult	*res;

	if ((r->conn = db_connect(r->conf->database, "relay", err,
	    errlen)) == NULL)
		return -1;
	r->prepared = 0;	/* prepared statements die with a session */
	/* A standby (or a server still in recovery after a failover)
	 * takes no claims: keep backing off until it is a primary. */
	res = PQexec(r->conn, "SELECT pg_is_in_recovery()");
	if (PQresultStatus(res) != PGRES_TUPLES_OK ||
	    strcmp(PQgetvalue(res, 0, 0), "f") != 0) {
		snprintf(err, errlen, "%s", PQresultStatus(res) ==
		    PGRES_TUPLES_OK ? "the server is in recovery (a standby)" :
		    PQresultErrorMessage(res));
		PQclear(res);
		PQfinish(r->conn);
		r->conn = NULL;
		return -1;
	}
	PQclear(res);
	/* Only relay 1 listens (relay_on_conn()).  A listener's backend
	 * and the relay itself wake for every notification: at 50 orders/s
	 * the others' wake-ups, for nothing, fell right when relay 1 and
	 * its backend needed the two cores. */
	if (r->index == 1) {
		res = PQexec(r->conn, "LISTEN " OUTBOX_CHANNEL);
		if (PQresultStatus(res) != PGRES_COMMAND_OK) {
			snprintf(err, errlen, "LISTEN: %s",
			    PQresultErrorMessage(res));
			PQclear(res);
			PQfinish(r->conn);
			r->conn = NULL;
			return -1;
		}
		PQclear(res);
	}
	r->conn_ev = event_new(r->base, PQsocket(r->conn),
	    EV_READ | EV_PERSIST, relay_on_conn, r);
	if (r->conn_ev == NULL || event_add(r->conn_ev, NULL) == -1)
		fatalx("event_add");
	return 0;
}

static void
relay_on_reconnect(evutil_socket_t fd, short what, void *arg)
{
	struct relay	*r = arg;
	struct timeval	 tv;
	char		 err[512];

	(void)fd;
	(void)what;
	if (r->stopping)
		return;
	if (relay_connect(r, err, sizeof(err)) == 0) {
		log_info("reconnected to PostgreSQL after %d attempt(s); "
		    "%scatching up", r->reconnect_fails + 1,
		    r->index == 1 ? "listening again, " : "");
		r->reconnect_delay = RELAY_RECONNECT_MIN;
		r->reconnect_fails = 0;
		r->want_mark = 1;	/* sent before the connection broke */
		relay_kick(r);		/* what was written while away */
		return;
	}
	/* Rate-limited: the first failure, then every tenth. */
	if (r->reconnect_fails++ % 10 == 0)
		log_warnx("PostgreSQL unreachable (attempt %d, next in %ld "
		    "ms): %s", r->reconnect_fails, r->reconnect_delay, err);
	tv = clock_tv(r->reconnect_delay);
	evtimer_add(r->reconnect_ev, &tv);
	r->reconnect_delay *= 2;
	/* Never wait longer than a poll would: rows written once the
	 * server is back are due within poll_interval. */
	if (r->reconnect_delay > RELAY_RECONNECT_MAX)
		r->reconnect_delay = RELAY_RECONNECT_MAX;
	if (r->reconnect_delay > r->conf->relay.poll_interval)
		r->reconnect_delay = r->conf->relay.poll_interval;
}

static void
relay_disconnect(struct relay *r, const char *why)
{
	struct timeval	tv;

	if (r->conn == NULL)
		return;
	log_warnx("lost the PostgreSQL connection: %s",
	    why != NULL && *why ? why : "unknown error");
	if (r->conn_ev != NULL) {
		event_free(r->conn_ev);
		r->conn_ev = NULL;
	}
	PQfinish(r->conn);
	r->conn = NULL;
	/* The statement in flight is lost with it: a claim's rows come back
	 * when their lease ends; rows being marked stay queued for after
	 * the reconnect. */
	r->busy = RELAY_Q_NONE;
	PQclear(r->busy_res);
	r->busy_res = NULL;
	r->marking = 0;
	relay_handoff_gate(r);
	tv = clock_tv(r->reconnect_delay);
	evtimer_add(r->reconnect_ev, &tv);
}

/* Rows of the chunks at the sink. */
static int
relay_at_sink_rows(const struct relay *r)
{
	const struct relay_chunk	*ch;
	int				 n = 0;

	TAILQ_FOREACH(ch, &r->at_sinkq, entry)
		n += ch->n;
	return n;
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
relay_give_up_cb(evutil_socket_t fd, short what, void *arg)
{
	struct relay		*r = arg;
	struct relay_chunk	*ch;
	int			 i, hung = 0, answered = 0;

	(void)fd;
	(void)what;
	if (r->at_sink == 0)
		return;		/* only a statement left: relay_maybe_done() */
	TAILQ_FOREACH(ch, &r->at_sinkq, entry) {
		/* A sink that answers message by message may have answered
		 * some of the chunk already (outbox_msg.answered): those
		 * answers are recorded like any other (sent_at is now, a
		 * little late). */
		ch->acked_us = clock_wall_us();
		for (i = 0; i < ch->n; i++) {
			const struct outbox_msg	*m = &ch->msgs[i];

			if (!m->answered)
				hung++;
			else if (m->outcome == SINK_SENT) {
				relay_queue_sent(r, ch, i);
				answered++;
			} else {
				relay_record_failure(r, ch, i);
				answered++;
			}
		}
	}
	if (answered > 0)
		log_warnx("stopping with %d %s still unanswered "
		    "%ld ms after the stop signal: their rows are published "
		    "again when their lease ends (relay.lease %ld ms); the %d "
		    "answered row(s) of the same requests are recorded", hung,
		    r->sink->unanswered, proc_give_up_ms(r->conf),
		    r->conf->relay.lease, answered);
	else
		log_warnx("stopping with %d row(s) given to %s still unanswered "
		    "%ld ms after the stop signal: they are published again "
		    "when their lease ends (relay.lease %ld ms)", hung,
		    r->sink->target, proc_give_up_ms(r->conf),
		    r->conf->relay.lease);
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
			evtimer_del(r->word_ev);
			relay_maybe_done(r);
		}
	}
	if (!r->stopping) {
		r->stopping = 1;
		retention_stop(r->retention);
		/* Rows handed over from now on are left for the next relay 1
		 * (the master keeps the socket) or their lease. */
		relay_handoff_gate(r);
		/* Rows already at the sink are recorded; claimed rows still
		 * waiting for it are given back, unclaimed rows stay pending
		 * for the next relay.  A statement in flight is answered
		 * first (relay_on_conn). */
		relay_pump(r);
		relay_maybe_done(r);
	}
	if (deadline && r->at_sink > 0 && proc_give_up_arm(r->give_up, r->conf))
		log_info("stopping after the %d row(s) at the sink (giving up "
		    "those still unanswered after %ld ms)",
		    relay_at_sink_rows(r), proc_give_up_ms(r->conf));
}

int
relay_main(struct conf *conf, int index)
{
	struct relay		 r;
	struct relay_chunk	*ch;
	struct timeval		 tv;
	char			 err[512];
	const char		*target;
	int			 target_len;

	log_init("relay", index);
	proc_set_title("outboxd: relay %d", index);
	memset(&r, 0, sizeof(r));
	r.conf = conf;
	r.index = index;
	r.reconnect_delay = RELAY_RECONNECT_MIN;
	r.sink = conf->relay.sink == CONF_SINK_HTTP ? &sink_http : &sink_sqs;
	if (r.sink->max_batch < 1 || r.sink->max_batch > SINK_MAX_BATCH)
		fatalx("sink %s: max_batch %d", r.sink->name,
		    r.sink->max_batch);
	/* relay_pump() takes it from each chunk's lease. */
	r.sink_timeout = conf_sink_timeout(conf);
	TAILQ_INIT(&r.ready);
	TAILQ_INIT(&r.at_sinkq);
	if ((r.base = event_base_new()) == NULL)
		fatalx("event_base_new failed");
	if ((r.httpc = httpc_new(r.base)) == NULL)
		fatalx("httpc_new failed");
	if (proc_worker_signals(r.base, relay_stop, &r) == -1)
		fatalx("cannot install signal handlers");
	/* A failure at start is left to the master's restart backoff. */
	if (relay_connect(&r, err, sizeof(err)) == -1) {
		log_error("cannot connect to PostgreSQL: %s", err);
		return 1;
	}
	r.reconnect_ev = evtimer_new(r.base, relay_on_reconnect, &r);
	r.record_ev = evtimer_new(r.base, relay_on_record, &r);
	r.give_up = evtimer_new(r.base, relay_give_up_cb, &r);
	r.word_ev = evtimer_new(r.base, relay_on_word_wait, &r);
	r.poll_ev = event_new(r.base, -1, EV_PERSIST, relay_on_poll, &r);
	tv = clock_tv(conf->relay.poll_interval);
	if (r.reconnect_ev == NULL || r.record_ev == NULL ||
	    r.give_up == NULL || r.word_ev == NULL || r.poll_ev == NULL ||
	    event_add(r.poll_ev, &tv) == -1)
		fatalx("event_add");
	if (index == 1 && handoff_fd() != -1 && (r.handoff_ev =
	    event_new(r.base, handoff_fd(), EV_READ | EV_PERSIST,
	    relay_on_handoff, &r)) == NULL)
		fatalx("event_new");
	if (index == 1 && conf->relay.retention > 0 &&
	    (r.retention = retention_new(r.base, conf)) == NULL)
		fatalx("retention_new");
	r.sink->loggable(conf, &target, &target_len);
	log_info("publishing to %s %.*s (batch %d, poll %ld ms)",
	    r.sink->name, target_len, target, conf->relay.batch_size,
	    conf->relay.poll_interval);

	relay_kick(&r);			/* rows written while we were down */
	event_base_dispatch(r.base);
	relay_record_sent(&r);		/* what finished in the last turn */
	relay_handoff_give_back(&r);
	proc_worker_done();
	/* Left only by a forced exit: their lease brings the rows back. */
	while ((ch = TAILQ_FIRST(&r.ready)) != NULL) {
		TAILQ_REMOVE(&r.ready, ch, entry);
		relay_chunk_free(ch);
	}

	if (r.conn_ev != NULL)
		event_free(r.conn_ev);
	if (r.conn != NULL)
		PQfinish(r.conn);
	if (r.handoff_ev != NULL)
		event_free(r.handoff_ev);
	event_free(r.poll_ev);
	event_free(r.reconnect_ev);
	event_free(r.record_ev);
	event_free(r.give_up);
	event_free(r.word_ev);
	free(r.sent);
	retention_free(r.retention);
	/* Aborts the requests of a give-up (no callback runs); their
	 * chunks' rows are left to the lease. */
	httpc_free(r.httpc);
	while ((ch = TAILQ_FIRST(&r.at_sinkq)) != NULL) {
		TAILQ_REMOVE(&r.at_sinkq, ch, entry);
		relay_chunk_free(ch);
	}
	event_base_free(r.base);
	log_info("stopped");
	return 0;
}
