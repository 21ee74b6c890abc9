/*
 * retention.c - deletes sent outbox rows older than relay.retention, and
 * Idempotency-Keys older than http.idempotency_ttl.
 *
 * Runs inside relay 1 of each instance, on a PostgreSQL connection of its
 * own.  On the relay's connection a mark owed during a delete would wait
 * for it: a delete suddenly slower than the last one (a server under an
 * I/O storm) would push marks past their rows' lease, and another relay
 * would publish those rows again.  On its own connection a delete holds
 * up nothing but itself.
 *
 * Rows go in small batches (RETENTION_BATCH, oldest sent first, up to
 * RETENTION_ROUNDS statements a pass), so no statement holds many row
 * locks or runs long next to the inserts.  The first pass is
 * RETENTION_FIRST s after the relay starts; a pass that left rows due is
 * followed by another in a second, else in RETENTION_EVERY.  The rows
 * due are found with outbox_sent_idx (sql/schema.sql), so a pass that
 * finds none reads next to nothing.
 *
 * Each pass then deletes expired Idempotency-Keys the same way (their
 * own RETENTION_ROUNDS, through outbox_idempotency_keys_created_idx):
 * the HTTP workers no longer honour them (http_orders.c), and a day of
 * keyed orders would otherwise stay for ever.  A failed outbox delete
 * (a trigger of the user's refusing it, say) does not keep the keys.
 *
 * Last, each pass releases held rows (outbox.held) that nothing holds any
 * more: the mark that sends a head and a redrive release its key's rows
 * themselves, but a head deleted or re-keyed by hand (or in the
 * transaction that wrote the rows behind it, or by an older release)
 * leaves them held; this finds them through outbox_held_idx.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <libpq-fe.h>

#include "outboxd.h"
#include "metrics_api.h"

#define RETENTION_BATCH		500	/* sent rows deleted per statement */
#define RETENTION_ROUNDS	20	/* statements per pass */
#define RETENTION_FIRST		5	/* s from the start to the first pass */
#define RETENTION_EVERY		60	/* s between passes */
#define RETENTION_CONNECT_MS	10000	/* ms a connect may take */

struct retention {
	const struct conf	*conf;
	struct event_base	*base;
	PGconn			*conn;
	struct event		*timer;		/* the next pass */
	struct db_connecting	*connecting;	/* the connect under way */
	struct event		*conn_ev;	/* a delete's answer */
	PGresult		*res;		/* ... its result, once read */
	int			 passing;	/* a pass is under way */
	int			 busy;		/* a delete is in flight */
	int			 keys;		/* the pass deletes keys now
						   (1), releases held rows
						   (2) */
	int			 more;		/* ... and left outbox rows due */
	int			 rounds;	/* statements this pass (and
						   phase) */
	long			 total;		/* rows this pass deleted */
	long			 total_keys;	/* keys this pass deleted */
	int			 connect_failed; /* warned once per outage */
	int			 stopping;
};

static void	retention_send(struct retention *);
static void	retention_end(struct retention *, int);

static void
retention_close(struct retention *rt)
{
	db_connecting_cancel(rt->connecting);
	rt->connecting = NULL;
	if (rt->conn_ev != NULL) {
		event_free(rt->conn_ev);
		rt->conn_ev = NULL;
	}
	PQclear(rt->res);
	rt->res = NULL;
	if (rt->conn != NULL)
		PQfinish(rt->conn);
	rt->conn = NULL;
	rt->busy = 0;
}

/* The connection broke (a server restart, say): log it, end the pass;
 * the next pass connects again. */
static void
retention_lost(struct retention *rt)
{
	char	msg[512];

	db_errcpy(msg, sizeof(msg), PQerrorMessage(rt->conn));
	log_warnx("retention: connection lost: %s", msg);
	retention_close(rt);
	retention_end(rt, 0);
}

/* The pass is over: say what it deleted, and set the next one (sooner
 * when the last statement found a full batch). */
static void
retention_end(struct retention *rt, int more)
{
	struct timeval	tv = { more ? 1 : RETENTION_EVERY, 0 };

	if (!rt->passing)		/* lost while idle: the timer runs */
		return;
	rt->passing = 0;
	if (rt->total > 0)
		log_info("retention: deleted %ld sent row(s) older than %ld s",
		    rt->total, rt->conf->relay.retention);
	if (rt->total_keys > 0)
		log_info("retention: deleted %ld idempotency key(s) older than "
		    "%ld s", rt->total_keys, rt->conf->http.idempotency_ttl);
	rt->total = 0;
	rt->total_keys = 0;
	if (!rt->stopping)
		evtimer_add(rt->timer, &tv);
}

/* The outbox rows are done (more: some are left due): on to the keys,
 * unless stopping. */
static void
retention_keys_next(struct retention *rt, int more)
{
	rt->more = more;
	rt->keys = 1;
	rt->rounds = 0;
	if (rt->stopping)
		retention_end(rt, more);
	else
		retention_send(rt);
}

/* The keys are done: on to the held rows, one statement. */
static void
retention_held_next(struct retention *rt)
{
	rt->keys = 2;
	if (rt->stopping)
		retention_end(rt, rt->more);
	else
		retention_send(rt);
}

/* A delete's answer: go on with the pass or end it.  A failure is logged
 * and ends its part of the pass; a broken connection is opened again by
 * the next. */
static void
retention_done(struct retention *rt, PGresult *res)
{
	char		 buf[512];
	int		 n;

	rt->busy = 0;
	if (PQresultStatus(res) != PGRES_COMMAND_OK) {
		log_error("retention: %s failed: %s", rt->keys == 2 ?
		    "releasing held rows" : rt->keys ?
		    "delete of idempotency keys" : "delete",
		    db_result_error(buf, sizeof(buf), res, rt->conn));
		metrics_retention(1, 0);
		if (PQstatus(rt->conn) != CONNECTION_OK) {
			retention_close(rt);
			retention_end(rt, 0);
		} else if (!rt->keys)
			retention_keys_next(rt, 0);
		else if (rt->keys == 1)
			retention_held_next(rt);
		else
			retention_end(rt, rt->more);
		return;
	}
	n = atoi(PQcmdTuples(res));
	if (rt->keys == 2) {
		if (n > 0)
			log_warnx("retention: released %d held row(s) whose "
			    "head is gone (deleted by hand?)", n);
		retention_end(rt, rt->more);
		return;
	}
	if (rt->keys)
		rt->total_keys += n;	/* not sent rows: not in the metric */
	else {
		rt->total += n;
		metrics_retention(0, n);
	}
	if (n == RETENTION_BATCH && ++rt->rounds < RETENTION_ROUNDS &&
	    !rt->stopping)
		retention_send(rt);
	else if (!rt->keys)
		retention_keys_next(rt, n == RETENTION_BATCH);
	else {
		rt->more = rt->more || n == RETENTION_BATCH;
		retention_held_next(rt);
	}
}

static void
retention_on_conn(evutil_socket_t fd, short what, void *arg)
{
	struct retention	*rt = arg;
	PGresult		*res;

	(void)fd;
	(void)what;
	if (PQconsumeInput(rt->conn) == 0) {
		retention_lost(rt);
		return;
	}
	while (rt->busy && !PQisBusy(rt->conn)) {
		if ((res = PQgetResult(rt->conn)) != NULL) {
			if (rt->res == NULL)
				rt->res = res;
			else
				PQclear(res);
			continue;
		}
		res = rt->res != NULL ? rt->res :
		    PQmakeEmptyPGresult(rt->conn, PGRES_FATAL_ERROR);
		rt->res = NULL;
		retention_done(rt, res);
		PQclear(res);
	}
}

/* Expired keys, as http_orders.c's statement sees them: created_at at
 * or before now() - $1 s.  A key a retry is reading is not locked (the
 * retry takes the order it names); one a new order is taking over is,
 * and is skipped. */
static const char retention_sql_keys[] =
	"DELETE FROM outbox_idempotency_keys WHERE key IN (SELECT key "
	"FROM outbox_idempotency_keys "
	"WHERE created_at <= now() - $1 * interval '1 second' "
	"ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED)";

/* Held rows with no unsent, unheld row of their key and destination
 * ahead of them in the claims' order left to hold them.  An unheld row
 * behind them holds nothing (the claims' NOT EXISTS keeps it behind
 * them), so it must not keep them held either. */
static const char retention_sql_held[] =
	"UPDATE outbox o SET held = false WHERE o.held "
	"AND NOT EXISTS (SELECT 1 FROM outbox s "
	"WHERE s.ordering_key = o.ordering_key "
	"AND s.destination IS NOT DISTINCT FROM o.destination "
	"AND s.id <> o.id AND s.status <> 'sent' AND NOT s.held "
	"AND (coalesce(s.commit_seq, 0), s.id) < "
	"(coalesce(o.commit_seq, 0), o.id))";

/* Send the pass's next delete without waiting; retention_on_conn() reads
 * its answer. */
static void
retention_send(struct retention *rt)
{
	char		 age[24], lim[24];
	const char	*p[2];

	snprintf(age, sizeof(age), "%ld", rt->keys ?
	    rt->conf->http.idempotency_ttl : rt->conf->relay.retention);
	snprintf(lim, sizeof(lim), "%d", RETENTION_BATCH);
	p[0] = age;
	p[1] = lim;
	if (rt->keys == 2) {
		if (!PQsendQueryParams(rt->conn, retention_sql_held, 0, NULL,
		    NULL, NULL, NULL, 0)) {
			retention_lost(rt);
			return;
		}
		rt->busy = 1;
		return;
	}
	if (!PQsendQueryParams(rt->conn, rt->keys ? retention_sql_keys :
	    "DELETE FROM outbox "
	    "WHERE id IN (SELECT id FROM outbox WHERE status = 'sent' AND "
	    "sent_at < now() - $1 * interval '1 second' "
	    "ORDER BY sent_at LIMIT $2 FOR UPDATE SKIP LOCKED)", 2, NULL, p, NULL,
	    NULL, 0)) {
		retention_lost(rt);
		return;
	}
	rt->busy = 1;
}

/* The connect failed or timed out: warned once per outage; the next
 * pass tries again. */
static void
retention_connect_failed(struct retention *rt, const char *why)
{
	char	msg[512];

	db_errcpy(msg, sizeof(msg), why);
	if (!rt->connect_failed++)
		log_warnx("retention: cannot connect to PostgreSQL: %s; trying "
		    "again at the next pass", msg);
	retention_close(rt);
	retention_end(rt, 0);
}

/* db_connecting_start()'s answer: start the pass that waited for it. */
static void
retention_connected(PGconn *conn, int timed_out, const char *err, void *arg)
{
	struct retention	*rt = arg;

	rt->connecting = NULL;
	if (conn == NULL) {
		retention_connect_failed(rt, timed_out ? "timed out" : err);
		return;
	}
	rt->conn = conn;
	rt->connect_failed = 0;
	db_log_notices(rt->conn);
	if ((rt->conn_ev = event_new(rt->base, PQsocket(rt->conn),
	    EV_READ | EV_PERSIST, retention_on_conn, rt)) == NULL ||
	    event_add(rt->conn_ev, NULL) == -1)
		fatalx("event_add");
	if (rt->passing && !rt->stopping)
		retention_send(rt);
}

/*
 * Open the connection without blocking relay 1's loop
 * (db_connecting_start()), within RETENTION_CONNECT_MS; the pass starts
 * once it is up.  A blocking connect to a server that accepts but does
 * not answer would hold relay 1's claims and marks for connect_timeout
 * (10 s): rows at the sink would time out and go out twice.
 */
static void
retention_connect(struct retention *rt)
{
	char	err[512];

	if ((rt->connecting = db_connecting_start(rt->base,
	    rt->conf->database, "retention", RETENTION_CONNECT_MS,
	    retention_connected, rt, err, sizeof(err))) == NULL)
		retention_connect_failed(rt, err);
}

static void
retention_on_timer(evutil_socket_t fd, short what, void *arg)
{
	struct retention	*rt = arg;

	(void)fd;
	(void)what;
	rt->passing = 1;
	rt->rounds = 0;
	rt->total = 0;
	rt->total_keys = 0;
	/* relay.retention 0 keeps sent rows: only keys go. */
	rt->keys = rt->conf->relay.retention == 0;
	rt->more = 0;
	if (rt->connecting != NULL)
		return;			/* the pass starts once connected */
	if (rt->conn == NULL)
		retention_connect(rt);	/* the pass goes on from there */
	else
		retention_send(rt);
}

struct retention *
retention_new(struct event_base *base, const struct conf *conf)
{
	struct retention	*rt;
	struct timeval		 first = { RETENTION_FIRST, 0 };

	if ((rt = calloc(1, sizeof(*rt))) == NULL)
		return NULL;
	rt->conf = conf;
	rt->base = base;
	if ((rt->timer = evtimer_new(base, retention_on_timer, rt)) == NULL ||
	    evtimer_add(rt->timer, &first) == -1) {
		retention_free(rt);
		return NULL;
	}
	/* Connect now, while the relay holds no rows: libpq resolves the
	 * host name before PQconnectStartParams() returns, which blocks. */
	retention_connect(rt);
	return rt;
}

void
retention_stop(struct retention *rt)
{
	if (rt == NULL)
		return;
	rt->stopping = 1;
	evtimer_del(rt->timer);
}

void
retention_free(struct retention *rt)
{
	PGcancel	*cancel;
	char		 err[256];

	if (rt == NULL)
		return;
	/* A delete in flight could go on in PostgreSQL after the relay
	 * exits: ask the server to cancel it, without waiting for the
	 * answer.  PQcancel() itself blocks, without a timeout, while a
	 * hung server does not take the request: so this comes after the
	 * relay's loop, when its rows are recorded. */
	if (rt->busy) {
		if ((cancel = PQgetCancel(rt->conn)) != NULL &&
		    PQcancel(cancel, err, sizeof(err)))
			log_info("retention: delete cancelled by the stop");
		else
			log_warnx("retention: cannot cancel the delete");
		PQfreeCancel(cancel);
		retention_end(rt, 0);	/* what the pass deleted so far */
	}
	retention_close(rt);
	if (rt->timer != NULL)
		event_free(rt->timer);
	free(rt);
}
