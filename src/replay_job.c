/*
 * replay_job.c - relay 1 carries replays out: it runs
 * outbox_replay_step() (sql/schema.sql) a few times a second, which puts
 * the selected sent rows back to pending at relay.replay_rate rows a
 * second, and the relays publish them as any pending row.
 *
 * Small steps, not one large update: a replay of 20,000 rows moved at
 * once would be 20,000 pending rows ahead of every live row in the
 * claims' id order, and the live rows would wait until the sink had
 * published them all.  At the rate, the claims take a few replayed rows
 * with the live ones each time.  The step also holds back while 2 s
 * worth of the replay's rows still wait (a destination that is slow or
 * paused), and keeps the rate across hosts (each relay 1 steps, the
 * table says when the last step was).
 *
 * Its own PostgreSQL connection, as retention.c's and for the same
 * reason: relay 1's marks must never wait behind it.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <libpq-fe.h>

#include "outboxd.h"
#include "replay.h"

#define REPLAY_STEP_MS		200	/* between steps of a replay */
#define REPLAY_IDLE_MS		2000	/* between looks for a new one */
#define REPLAY_FAIL_MS		30000	/* after a failed step */
#define REPLAY_CONNECT_MS	10000	/* ms a connect may take */

struct replay_job {
	const struct conf	*conf;
	struct event_base	*base;
	PGconn			*conn;
	struct event		*timer;
	struct db_connecting	*connecting;
	struct event		*conn_ev;
	PGresult		*res;
	int			 busy;		/* a step is in flight */
	int64_t			 current;	/* the replay stepped last */
	long			 moved;		/* ... rows it moved, here */
	struct log_limit	 fail_limit;
	int			 stopping;
};

static void
replay_job_close(struct replay_job *j)
{
	db_connecting_cancel(j->connecting);
	j->connecting = NULL;
	if (j->conn_ev != NULL) {
		event_free(j->conn_ev);
		j->conn_ev = NULL;
	}
	PQclear(j->res);
	j->res = NULL;
	if (j->conn != NULL)
		PQfinish(j->conn);
	j->conn = NULL;
	j->busy = 0;
}

static void
replay_job_later(struct replay_job *j, long ms)
{
	struct timeval	tv = clock_tv(ms);

	if (!j->stopping)
		evtimer_add(j->timer, &tv);
}

/* A step's answer: the next step soon while a replay is under way. */
static void
replay_job_done(struct replay_job *j, PGresult *res)
{
	char		 buf[512];
	int64_t		 id;
	int		 moved;

	j->busy = 0;
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		log_limited(&j->fail_limit, LOG_LEVEL_ERROR, "replay: step "
		    "failed: %s", db_result_error(buf, sizeof(buf), res,
		    j->conn));
		if (PQstatus(j->conn) != CONNECTION_OK)
			replay_job_close(j);
		replay_job_later(j, REPLAY_FAIL_MS);
		return;
	}
	if (PQntuples(res) != 1) {
		replay_job_later(j, REPLAY_IDLE_MS);
		return;
	}
	id = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
	moved = atoi(PQgetvalue(res, 0, 1));
	if (id != j->current) {
		j->current = id;
		j->moved = 0;
		log_info("replay %lld: under way at %d row(s)/s", (long long)id,
		    j->conf->relay.replay_rate);
	}
	j->moved += moved;
	if (strcmp(PQgetvalue(res, 0, 2), "t") == 0) {
		log_info("replay %lld: every selected row is back to pending "
		    "(%ld by this relay)", (long long)id, j->moved);
		j->current = 0;
	}
	replay_job_later(j, REPLAY_STEP_MS);
}

static void
replay_job_lost(struct replay_job *j)
{
	char	msg[512];

	db_errcpy(msg, sizeof(msg), PQerrorMessage(j->conn));
	log_limited(&j->fail_limit, LOG_LEVEL_WARN, "replay: connection lost: "
	    "%s", msg);
	replay_job_close(j);
	replay_job_later(j, REPLAY_IDLE_MS);
}

static void
replay_job_on_conn(evutil_socket_t fd, short what, void *arg)
{
	struct replay_job	*j = arg;
	PGresult		*res;

	(void)fd;
	(void)what;
	if (PQconsumeInput(j->conn) == 0) {
		replay_job_lost(j);
		return;
	}
	while (j->busy && !PQisBusy(j->conn)) {
		if ((res = PQgetResult(j->conn)) != NULL) {
			if (j->res == NULL)
				j->res = res;
			else
				PQclear(res);
			continue;
		}
		res = j->res != NULL ? j->res :
		    PQmakeEmptyPGresult(j->conn, PGRES_FATAL_ERROR);
		j->res = NULL;
		replay_job_done(j, res);
		PQclear(res);
	}
}

static void
replay_job_send(struct replay_job *j)
{
	char		 rate[24];
	const char	*p[1];

	snprintf(rate, sizeof(rate), "%d", j->conf->relay.replay_rate);
	p[0] = rate;
	if (!PQsendQueryParams(j->conn, "SELECT replay, moved, finished FROM "
	    "outbox_replay_step($1)", 1, NULL, p, NULL, NULL, 0)) {
		replay_job_lost(j);
		return;
	}
	j->busy = 1;
}

static void
replay_job_connected(PGconn *conn, int timed_out, const char *err, void *arg)
{
	struct replay_job	*j = arg;
	char			 msg[512];

	j->connecting = NULL;
	if (conn == NULL) {
		db_errcpy(msg, sizeof(msg), timed_out ? "timed out" : err);
		log_limited(&j->fail_limit, LOG_LEVEL_WARN, "replay: cannot "
		    "connect to PostgreSQL: %s", msg);
		replay_job_later(j, REPLAY_IDLE_MS);
		return;
	}
	j->conn = conn;
	db_log_notices(j->conn);
	if ((j->conn_ev = event_new(j->base, PQsocket(j->conn),
	    EV_READ | EV_PERSIST, replay_job_on_conn, j)) == NULL ||
	    event_add(j->conn_ev, NULL) == -1)
		fatalx("event_add");
	if (!j->stopping)
		replay_job_send(j);
}

static void
replay_job_on_timer(evutil_socket_t fd, short what, void *arg)
{
	struct replay_job	*j = arg;
	char			 err[512];

	(void)fd;
	(void)what;
	if (j->busy || j->connecting != NULL || j->stopping)
		return;
	if (j->conn != NULL) {
		replay_job_send(j);
		return;
	}
	/* Without blocking relay 1's loop, as retention_connect(). */
	if ((j->connecting = db_connecting_start(j->base, j->conf->database,
	    "replay", REPLAY_CONNECT_MS, replay_job_connected, j, err,
	    sizeof(err))) == NULL) {
		log_limited(&j->fail_limit, LOG_LEVEL_WARN, "replay: cannot "
		    "connect to PostgreSQL: %s", err);
		replay_job_later(j, REPLAY_IDLE_MS);
	}
}

struct replay_job *
replay_job_new(struct event_base *base, const struct conf *conf)
{
	struct replay_job	*j;

	if ((j = calloc(1, sizeof(*j))) == NULL)
		return NULL;
	j->conf = conf;
	j->base = base;
	if ((j->timer = evtimer_new(base, replay_job_on_timer, j)) == NULL) {
		free(j);
		return NULL;
	}
	replay_job_later(j, REPLAY_STEP_MS);
	return j;
}

void
replay_job_stop(struct replay_job *j)
{
	if (j == NULL)
		return;
	j->stopping = 1;
	evtimer_del(j->timer);
}

void
replay_job_free(struct replay_job *j)
{
	PGcancel	*cancel;
	char		 err[256];

	if (j == NULL)
		return;
	/* A step is short; one in flight is cancelled, not waited for, as
	 * retention_free() does. */
	if (j->busy && (cancel = PQgetCancel(j->conn)) != NULL) {
		if (!PQcancel(cancel, err, sizeof(err)))
			log_warnx("replay: cannot cancel the step");
		PQfreeCancel(cancel);
	}
	replay_job_close(j);
	if (j->timer != NULL)
		event_free(j->timer);
	free(j);
}
