/*
 * http_wake.c - waking the relays after an order commits: the debounced
 * NOTIFY window, handing the row to relay 1 (handoff.c), and giving back
 * handed-off rows nobody will read (claim.c).
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <libpq-fe.h>

#include "outboxd.h"
#include "http.h"
#include "metrics_api.h"

#define HTTP_NOTIFY_MS		5	/* at most one NOTIFY per this, each */

/*
 * Does a trigger still wake the relays for our inserts?  sql/schema.sql's
 * trigger skips sessions that set outboxd.notify = off, as ours do (the
 * connection options), and then this worker notifies, debounced; a
 * trigger without that condition (an older schema) notifies for us.
 */
const char http_wake_trigger_sql[] =
	"SELECT EXISTS (SELECT 1 FROM pg_trigger "
	"WHERE tgrelid = to_regclass('outbox') AND tgenabled <> 'D' "
	"AND tgfoid = to_regprocedure('outbox_notify()') "
	"AND pg_get_triggerdef(oid) NOT LIKE '%outboxd.notify%')";

static const char http_sql_notify[] = "NOTIFY " OUTBOX_CHANNEL;

static void	http_wake_give_back(struct http_worker *, int64_t, int64_t);

void
http_wake_trigger_row(struct http_worker *w, const PGresult *res)
{
	/* relay.mode = "wal": the relays stream the inserts, nobody
	 * listens. */
	w->notify_self = w->conf->relay.mode != CONF_RELAY_WAL &&
	    strcmp(PQgetvalue(res, 0, 0), "t") != 0;
}

int
http_wake_send_notify(PGconn *pg)
{
	return PQsendQueryParams(pg, http_sql_notify, 0, NULL, NULL, NULL,
	    NULL, 0);
}

/* ---- the NOTIFY window ------------------------------------------------ */

/*
 * Wake the relays when the schema does not (no trigger calls
 * outbox_notify()).  A trigger that notifies on every insert costs each
 * order transaction a database-wide lock at commit, which PostgreSQL
 * takes for any transaction that queued a NOTIFY, so at most one
 * NOTIFY per HTTP_NOTIFY_MS goes out from here: the first order after a
 * quiet spell wakes the relays at once, later ones at the end of the
 * window.  Sent only after the order's commit, so relays find the row.
 */
static void
http_wake_notify_send(struct http_worker *w)
{
	struct http_job	*job;
	struct timeval	 tv = clock_tv(HTTP_NOTIFY_MS);

	w->notify_dirty = 0;
	event_add(w->notify_ev, &tv);
	if ((job = http_job_new(w)) == NULL) {
		w->notify_dirty = 1;	/* at the end of the window */
		return;
	}
	job->kind = HTTP_JOB_NOTIFY;
	job->req = NULL;
	if (http_pool_send_now(w->pool, job) == -1) {
		http_job_free(w, job);
		w->notify_dirty = 1;	/* no room: at the end of the window */
	}
}

/* Open the NOTIFY window (HTTP_NOTIFY_MS) unless one is open: 1 if this
 * call opened it, for the order that comes after a quiet spell. */
static int
http_wake_window_open(struct http_worker *w)
{
	struct timeval	tv = clock_tv(HTTP_NOTIFY_MS);

	if (event_pending(w->notify_ev, EV_TIMEOUT, NULL))
		return 0;
	w->notify_dirty = 0;
	event_add(w->notify_ev, &tv);
	return 1;
}

/* Only when no window is open; then this opens one, as a NOTIFY sent on
 * its own would. */
int
http_wake_take_notify(struct http_worker *w)
{
	return w->notify_self && http_wake_window_open(w);
}

static void
http_wake_window_end(evutil_socket_t fd, short what, void *arg)
{
	struct http_worker	*w = arg;

	(void)fd;
	(void)what;
	if (w->notify_dirty)
		http_wake_notify_send(w);
}

/* The NOTIFY leaves from the loop, never from inside a connection's
 * result processing. */
void
http_wake_after_commit(struct http_worker *w)
{
	if (!w->notify_self)
		return;
	w->notify_dirty = 1;
	if (!event_pending(w->notify_ev, EV_TIMEOUT, NULL))
		event_active(w->notify_ev, EV_TIMEOUT, 1);
}

int
http_wake_init(struct http_worker *w)
{
	if ((w->notify_ev = evtimer_new(w->base, http_wake_window_end, w)) ==
	    NULL)
		return -1;
	return 0;
}

void
http_wake_free(struct http_worker *w)
{
	if (w->notify_ev != NULL)
		event_free(w->notify_ev);
	w->notify_ev = NULL;
}

/* ---- the handoff to relay 1 ------------------------------------------- */

/*
 * Only the first order after a quiet spell, like the NOTIFY it replaces
 * (it opens the same window): under load the relays' own claims take
 * many rows a statement and spread them over every relay, while a
 * handed-off row costs relay 1 a publish of its own.  Not while stopping:
 * relay 1 may be gone before the commit.
 */
int
http_wake_take_handoff(struct http_worker *w, struct http_job *job)
{
	/* In relay.mode = "wal" nobody reads the socket: the row is
	 * streamed. */
	if (w->stopping || !w->conf->relay.handoff ||
	    w->conf->relay.mode == CONF_RELAY_WAL ||
	    w->conf->relay.workers <= 0 || !handoff_can_send() ||
	    !http_wake_window_open(w))
		return 0;
	job->handoff = 1;
	job->handoff_claim = claim_token();
	job->handoff_us = clock_mono_us();
	return 1;
}

/* A row written claimed for relay 1 stays claimed until its lease ends
 * when the socket does not take it; then any relay publishes it. */
void
http_wake_handoff(struct http_worker *w, const struct http_job *job,
    const PGresult *res)
{
	static struct log_limit	 limit;
	struct claimed_row	 row = { 0 };

	if (PQntuples(res) != 1 || PQnfields(res) != HTTP_COLS_CLAIMED ||
	    PQgetisnull(res, 0, HTTP_COL_CLAIM))
		return;			/* paused: written unclaimed */
	row.claim = job->handoff_claim;
	row.claimed_us = job->handoff_us;
	row.lease_ms = w->conf->relay.lease;
	row.id = strtoll(PQgetvalue(res, 0, HTTP_COL_ROW_ID), NULL, 10);
	row.type = PQgetvalue(res, 0, HTTP_COL_TYPE);
	row.type_len = PQgetlength(res, 0, HTTP_COL_TYPE);
	row.key = PQgetvalue(res, 0, HTTP_COL_KEY);
	row.key_len = PQgetlength(res, 0, HTTP_COL_KEY);
	row.payload = PQgetvalue(res, 0, HTTP_COL_PAYLOAD);
	row.payload_len = PQgetlength(res, 0, HTTP_COL_PAYLOAD);
	row.created_ms = strtoll(PQgetvalue(res, 0, HTTP_COL_CREATED_MS),
	    NULL, 10);
	if (handoff_send(&row) == 0)
		return;
	/* Stopping (handoff_shut()), or every reader gone: nobody will
	 * read it. */
	if (errno == EPIPE || errno == ECONNREFUSED) {
		http_wake_give_back(w, row.id, row.claim);
		return;
	}
	metrics_handoff(0, 1);
	log_limited(&limit, LOG_LEVEL_WARN, "could not hand outbox row %"
	    PRId64 " to relay 1 (%s): it is published when its lease ends "
	    "(relay.lease)", row.id, errno == EAGAIN ? "relay 1 is not "
	    "reading" : strerror(errno));
}

/* ---- giving handed-off rows back -------------------------------------- */

/* A handed-off row http_wake_give_back() could not give back. */
static void
http_wake_give_back_lost(int64_t id)
{
	log_warnx("could not give back outbox row %" PRId64 ": it is "
	    "published when its lease ends (relay.lease)", id);
}

/*
 * An order whose row was written claimed for relay 1 committed after
 * outboxd began to stop: the socket is shut (handoff_shut()), nobody will
 * read the row, and it would wait for its lease (relay.lease), after the
 * restart that usually follows a stop.  Give it back instead: free for
 * any relay's claim.  The job goes to the head of the pool's queue,
 * before the requests, so that a worker the master kills at
 * shutdown_timeout has sent it: the pool sends it once the result
 * processing that called this is over (never from inside it).  The
 * worker does not leave before it is done (http_wake_done()).
 */
static void
http_wake_give_back(struct http_worker *w, int64_t id, int64_t claim)
{
	struct http_job	*job;

	if ((job = http_job_new(w)) == NULL) {
		http_wake_give_back_lost(id);
		return;
	}
	job->kind = HTTP_JOB_GIVE_BACK;
	job->req = NULL;
	job->given = 0;
	job->row_id = id;
	job->handoff_claim = claim;
	http_pool_push_front(w->pool, job);
	w->giving_back++;
}

int
http_wake_send_give_back(PGconn *pg, const struct http_job *job)
{
	const char	*values[2];
	char		 row[24], claim[24];

	snprintf(row, sizeof(row), "{%" PRId64 "}", job->row_id);
	snprintf(claim, sizeof(claim), "{%" PRId64 "}", job->handoff_claim);
	values[0] = row;
	values[1] = claim;
	return PQsendQueryParams(pg, claim_give_back_sql, 2, NULL, values,
	    NULL, NULL, 0);
}

void
http_wake_done(struct http_worker *w, struct http_job *job,
    const PGresult *res, int link)
{
	if (res != NULL && PQresultStatus(res) != PGRES_COMMAND_OK)
		http_pool_log_result(link, res);
	else if (res != NULL && job->kind == HTTP_JOB_GIVE_BACK) {
		job->given = 1;
		/* 0 rows: its lease ended and a relay took it. */
		if (strcmp(PQcmdTuples((PGresult *)res), "1") == 0)
			log_info("gave back outbox row %" PRId64 ": outboxd "
			    "is stopping and relay 1 will not publish it; any "
			    "relay may now", job->row_id);
	}
	if (job->kind != HTTP_JOB_GIVE_BACK)
		return;
	/* Whatever kept it from running (no connection, a broken one, an
	 * error) says so here, once. */
	if (!job->given)
		http_wake_give_back_lost(job->row_id);
	if (--w->giving_back == 0)
		http_exit_if_done(w);
}
