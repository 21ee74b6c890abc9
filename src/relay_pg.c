/*
 * relay_pg.c - the relay's PostgreSQL connection: connect (relay 1 also
 * LISTENs), reconnect with backoff, send a statement and read its result.
 *
 * The hot statements (a claim, a mark) go to PostgreSQL without waiting
 * for the answer: one statement in flight on the connection, its result
 * read when the socket is readable, so that the relay goes on with the
 * sink's answers while the server works.  Rarer statements (a failure, a
 * give-back) wait, after the statement in flight has been answered.
 * Prepared once per connection: parsing and planning the hot statements
 * again for every claim cost the server about as much as running them.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <libpq-fe.h>

#include "relay.h"

#define RELAY_RECONNECT_MIN	100	/* ms */
#define RELAY_RECONNECT_MAX	5000	/* ms */

static void
relay_pg_drain_notifies(struct relay *r)
{
	PGnotify	*nf;

	while ((nf = PQnotifies(r->conn)) != NULL) {
		r->woken = 1;
		PQfreemem(nf);
	}
}

/* After a statement failed: disconnect (and reconnect later) when the
 * connection is what broke, else log the statement's error. */
static void
relay_pg_failed(struct relay *r, const PGresult *res)
{
	if (PQstatus(r->conn) != CONNECTION_OK)
		relay_pg_disconnect(r, PQerrorMessage(r->conn));
	else
		log_error("query failed: %s", res != NULL ?
		    PQresultErrorMessage(res) : PQerrorMessage(r->conn));
}

/* Run a statement and wait for it, after the statement in flight, if
 * any, has been answered.  Returns the result (the caller PQclear()s it)
 * or NULL, the error logged. */
PGresult *
relay_pg_exec(struct relay *r, const char *sql, int nparams,
    const char *const *params, ExecStatusType want)
{
	PGresult	*res;

	/* One statement at a time on a connection. */
	relay_pg_wait_result(r);
	if (r->conn == NULL)
		return NULL;
	res = PQexecParams(r->conn, sql, nparams, NULL, params, NULL, NULL, 0);
	/* A query reads the socket too: notifications it took in would
	 * otherwise wait for the next poll. */
	relay_pg_drain_notifies(r);
	if (PQresultStatus(res) == want)
		return res;
	relay_pg_failed(r, res);
	PQclear(res);
	return NULL;
}

/* Send one of the hot statements (prepared first if this connection has
 * not seen it) without waiting: relay_pg_on_readable() reads the answer
 * and hands it to relay_pg_complete().  Returns 0, or -1 with the error
 * handled. */
int
relay_pg_send(struct relay *r, enum relay_pg_query q,
    const struct relay_pg_stmt *st, const char *const *params)
{
	PGresult	*res;

	if (!(r->prepared & st->bit)) {
		res = PQprepare(r->conn, st->name, st->sql, st->nparams,
		    NULL);
		relay_pg_drain_notifies(r);
		if (PQresultStatus(res) != PGRES_COMMAND_OK) {
			relay_pg_failed(r, res);
			PQclear(res);
			return -1;
		}
		PQclear(res);
		r->prepared |= st->bit;
	}
	if (!PQsendQueryPrepared(r->conn, st->name, st->nparams, params,
	    NULL, NULL, 0)) {
		relay_pg_failed(r, NULL);
		return -1;
	}
	r->pg_query = q;
	r->pg_sent_us = clock_mono_us();
	return 0;
}

/* The statement in flight is answered (its result read into pg_res):
 * hand the result to its own step.  A failure is logged or, when the
 * connection broke, leads to a reconnect. */
static void
relay_pg_complete(struct relay *r)
{
	enum relay_pg_query	 q = r->pg_query;
	PGresult		*res = r->pg_res;

	r->pg_query = RELAY_PG_NONE;
	r->pg_res = NULL;
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		relay_pg_failed(r, res);
		PQclear(res);
		res = NULL;
	}
	if (q == RELAY_PG_CLAIM)
		relay_claim_done(r, res);
	else
		relay_mark_done(r, res);
	PQclear(res);
}

/* Read the answer of the statement in flight as far as it has come;
 * with block, wait until it is complete and hand it on. */
static void
relay_pg_read_result(struct relay *r, int block)
{
	PGresult	*res;

	while (r->pg_query != RELAY_PG_NONE && r->conn != NULL &&
	    (block || !PQisBusy(r->conn))) {
		if ((res = PQgetResult(r->conn)) == NULL) {
			if (r->pg_res == NULL)	/* cannot be: say so */
				r->pg_res = PQmakeEmptyPGresult(r->conn,
				    PGRES_FATAL_ERROR);
			relay_pg_drain_notifies(r);
			relay_pg_complete(r);
			return;
		}
		if (r->pg_res == NULL)
			r->pg_res = res;
		else
			PQclear(res);
	}
}

/* Wait for the result of the statement in flight, if any, and hand it
 * on. */
void
relay_pg_wait_result(struct relay *r)
{
	relay_pg_read_result(r, 1);
}

static void
relay_pg_on_readable(evutil_socket_t fd, short what, void *arg)
{
	struct relay	*r = arg;

	(void)fd;
	(void)what;
	if (PQconsumeInput(r->conn) == 0)
		relay_pg_disconnect(r, PQerrorMessage(r->conn));
	else {
		relay_pg_drain_notifies(r);
		relay_pg_read_result(r, 0);
	}
	relay_on_input(r);
}

static int
relay_pg_connect(struct relay *r, char *err, size_t errlen)
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
		goto fail;
	}
	PQclear(res);
	/* Only relay 1 listens (relay_on_input()).  A listener's backend
	 * and the relay itself wake for every notification: the others'
	 * wake-ups would be for nothing (one relay's claim gets the row),
	 * and would take the CPU from the relay and backend that do the
	 * work. */
	if (r->index == 1) {
		res = PQexec(r->conn, "LISTEN " OUTBOX_CHANNEL);
		if (PQresultStatus(res) != PGRES_COMMAND_OK) {
			snprintf(err, errlen, "LISTEN: %s",
			    PQresultErrorMessage(res));
			goto fail;
		}
		PQclear(res);
	}
	r->conn_ev = event_new(r->base, PQsocket(r->conn),
	    EV_READ | EV_PERSIST, relay_pg_on_readable, r);
	if (r->conn_ev == NULL || event_add(r->conn_ev, NULL) == -1)
		fatalx("event_add");
	return 0;

fail:
	PQclear(res);
	PQfinish(r->conn);
	r->conn = NULL;
	return -1;
}

static void
relay_pg_on_reconnect(evutil_socket_t fd, short what, void *arg)
{
	struct relay	*r = arg;
	struct timeval	 tv;
	char		 err[512];

	(void)fd;
	(void)what;
	if (r->stopping)
		return;
	if (relay_pg_connect(r, err, sizeof(err)) == 0) {
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

void
relay_pg_disconnect(struct relay *r, const char *why)
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
	r->pg_query = RELAY_PG_NONE;
	PQclear(r->pg_res);
	r->pg_res = NULL;
	r->marking = 0;
	relay_handoff_gate(r);
	tv = clock_tv(r->reconnect_delay);
	evtimer_add(r->reconnect_ev, &tv);
}

int
relay_pg_open(struct relay *r, char *err, size_t errlen)
{
	struct timeval	tv = clock_tv(RELAY_RECONNECT_MIN);

	r->reconnect_delay = RELAY_RECONNECT_MIN;
	if ((r->reconnect_ev = evtimer_new(r->base, relay_pg_on_reconnect,
	    r)) == NULL)
		fatalx("evtimer_new");
	if (relay_pg_connect(r, err, errlen) == 0)
		return 0;
	/* The server answered and refused us: waiting here cannot help,
	 * the master's restart backoff and its giving up say so. */
	if (db_refuses_us(r->conf->database))
		return -2;
	/* As after a lost connection: the first failure was said by the
	 * caller, the attempts that follow are counted from 1. */
	r->reconnect_fails = 1;
	r->reconnect_delay = 2 * RELAY_RECONNECT_MIN;
	evtimer_add(r->reconnect_ev, &tv);
	return -1;
}

int
relay_pg_check(struct relay *r)
{
	if (r->conn != NULL && PQstatus(r->conn) != CONNECTION_OK) {
		relay_pg_disconnect(r, PQerrorMessage(r->conn));
		return -1;
	}
	return 0;
}

void
relay_pg_close(struct relay *r)
{
	if (r->conn_ev != NULL)
		event_free(r->conn_ev);
	if (r->conn != NULL)
		PQfinish(r->conn);
	event_free(r->reconnect_ev);
}
