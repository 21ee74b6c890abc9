/*
 * http_pool.c - the HTTP worker's PostgreSQL connections: an asynchronous
 * libpq pipeline per connection, the FIFO queue in front of them, group
 * commit, the watchdog, and reconnecting with backoff.
 *
 * A request never waits on a blocking call: each connection is driven by
 * libpq's asynchronous API (PQsendQueryPrepared, PQconsumeInput,
 * PQisBusy, PQgetResult) from the event loop, in pipeline mode with a
 * Sync after every statement: each statement is still its own
 * transaction, but the server finds the next one waiting instead of a
 * round trip later.  A job that finds every pipeline full waits in a
 * FIFO queue.
 *
 * Data flows one way: the pool knows statements and results, not
 * requests.  Its user (the worker) says how to send a job's statement
 * and hears of each job's end through the callbacks of struct
 * http_pool_ops (http.h).
 */
#include "config.h"

#include <sys/types.h>
#include <sys/queue.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <libpq-fe.h>

#include "outboxd.h"
#include "http.h"

#define HTTP_QUEUE_MAX		4096	/* jobs waiting for a connection */
#define HTTP_PIPELINE_DEPTH	2	/* statements in flight, each link */
#define HTTP_STATEMENT_TIMEOUT	"5s"	/* PostgreSQL statement_timeout */
#define HTTP_QUERY_WATCHDOG_MS	10000	/* no answer at all: drop the link */
#define HTTP_CONNECT_TIMEOUT_MS	10000
#define HTTP_BACKOFF_MIN_MS	100
#define HTTP_BACKOFF_MAX_MS	5000

static const char http_pool_sql_session[] =
	"SET statement_timeout = '" HTTP_STATEMENT_TIMEOUT "'";

enum http_link_state {
	HTTP_LINK_DOWN,		/* waiting to reconnect */
	HTTP_LINK_CONNECTING,	/* db_connecting_start() under way */
	HTTP_LINK_SETUP,	/* session settings and PREPAREs in flight */
	HTTP_LINK_READY		/* pipeline mode, 0..DEPTH jobs in flight */
};

/* What the pipeline owes next for the oldest job in flight. */
enum http_link_phase {
	HTTP_PHASE_RESULT,	/* its result */
	HTTP_PHASE_NULL,	/* the NULL that ends its results */
	HTTP_PHASE_SYNC		/* its PGRES_PIPELINE_SYNC */
};

/* One database connection of the pool. */
struct http_link {
	struct http_pool	*pool;
	int			 index;
	PGconn			*pg;
	struct db_connecting	*connecting;	/* HTTP_LINK_CONNECTING */
	enum http_link_state	 state;
	int			 step;		/* of the setup */
	int			 step_failed;
	struct event		*rev;		/* socket readable */
	struct event		*wev;		/* socket writable */
	struct event		*timer;		/* backoff, setup, watchdog */
	long			 backoff;	/* ms before the next attempt */
	struct http_jobq	 sent;		/* in flight, oldest first */
	int			 nsent;
	enum http_link_phase	 phase;
};

struct http_pool {
	struct event_base	*base;
	const char		*conninfo;
	struct http_pool_ops	 ops;
	struct http_link	*links;
	int			 nlinks;
	int			 nup;		/* links in SETUP or READY */
	struct http_jobq	 queue;
	int			 queued;
};

static void	http_link_run(struct http_link *, struct http_job *);
static void	http_link_broken(struct http_link *, const char *);
static void	http_link_fail(struct http_link *, const char *, const char *);
static void	http_link_setup_next(struct http_link *);
static void	http_link_connect(struct http_link *);

/* The pool is done with job: its user takes it, with res (or NULL). */
static void
http_link_done(struct http_link *l, struct http_job *job, const PGresult *res)
{
	l->pool->ops.done(job, res, l->index, l->pool->ops.arg);
}

/* Hand every queued job back without a result: no connection can take
 * them soon. */
static void
http_pool_flush_queue(struct http_pool *pool, struct http_link *l)
{
	struct http_job	*job;

	while ((job = TAILQ_FIRST(&pool->queue)) != NULL) {
		TAILQ_REMOVE(&pool->queue, job, entry);
		pool->queued--;
		http_link_done(l, job, NULL);
	}
}

/* The ready link with the fewest statements in flight and room for one
 * more, or NULL. */
static struct http_link *
http_pool_least_loaded(struct http_pool *pool)
{
	struct http_link	*l, *best = NULL;
	int			 i;

	for (i = 0; i < pool->nlinks; i++) {
		l = &pool->links[i];
		if (l->state == HTTP_LINK_READY &&
		    l->nsent < HTTP_PIPELINE_DEPTH &&
		    (best == NULL || l->nsent < best->nsent))
			best = l;
	}
	return best;
}

int
http_pool_submit(struct http_pool *pool, struct http_job *job)
{
	struct http_link	*best;

	if (pool->nup == 0)
		return HTTP_POOL_DOWN;
	if ((best = http_pool_least_loaded(pool)) != NULL) {
		http_link_run(best, job);
		return 0;
	}
	if (pool->queued >= HTTP_QUEUE_MAX)
		return HTTP_POOL_FULL;
	TAILQ_INSERT_TAIL(&pool->queue, job, entry);
	pool->queued++;
	return 0;
}

void
http_pool_push_front(struct http_pool *pool, struct http_job *job)
{
	TAILQ_INSERT_HEAD(&pool->queue, job, entry);
	pool->queued++;
}

int
http_pool_send_now(struct http_pool *pool, struct http_job *job)
{
	struct http_link	*best;

	if ((best = http_pool_least_loaded(pool)) == NULL)
		return -1;
	http_link_run(best, job);
	return 0;
}

int
http_pool_up(const struct http_pool *pool)
{
	return pool->nup;
}

int
http_pool_size(const struct http_pool *pool)
{
	return pool->nlinks;
}

/* Log a failed statement.  Orders the database refuses (a 422, see
 * db_result_refused()) are the client's doing and as frequent as it
 * likes: those lines are rate-limited, so a client cannot fill the log. */
void
http_pool_log_result(int link, const PGresult *res)
{
	static struct log_limit	 refused_limit;
	const char		*state, *msg;
	char			 buf[512];

	state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
	msg = db_result_error(buf, sizeof(buf), res, NULL);
	if (db_result_refused(res)) {
		struct db_why	 why;

		db_result_why(&why, res);
		log_limited(&refused_limit, LOG_LEVEL_WARN, "database "
		    "connection %d: order refused: %s (SQLSTATE %s)%s%s%s%s",
		    link, msg, state, why.detail != NULL ? " DETAIL: " : "",
		    why.detail != NULL ? why.detail : "",
		    why.hint != NULL ? " HINT: " : "",
		    why.hint != NULL ? why.hint : "");
	} else
		log_warnx("database connection %d: %s (SQLSTATE %s)",
		    link, msg, state != NULL ? state : "none");
}

/* ---- one connection --------------------------------------------------- */

static void
http_link_notice(void *arg, const char *message)
{
	struct http_link	*l = arg;
	char			 buf[512];

	log_debug("database connection %d: %s", l->index,
	    db_errline(buf, sizeof(buf), message));
}

/* Drop the libpq connection and its events. */
static void
http_link_close(struct http_link *l)
{
	event_del(l->rev);
	event_del(l->wev);
	event_del(l->timer);
	if (l->pg != NULL) {
		PQfinish(l->pg);
		l->pg = NULL;
	}
}

static void
http_link_arm(struct http_link *l, long ms)
{
	struct timeval	tv = clock_tv(ms);

	event_add(l->timer, &tv);
}

/* Send what libpq has buffered; the rest when the socket is writable. */
static int
http_link_flush(struct http_link *l)
{
	switch (PQflush(l->pg)) {
	case 0:
		return 0;
	case 1:
		event_add(l->wev, NULL);
		return 0;
	default:
		http_link_broken(l, "send");
		return -1;
	}
}

static void
http_link_writable(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	http_link_flush(arg);
}

/*
 * Give l queued jobs while its pipeline has room.  Group commit: the
 * orders that queued up while every connection was busy go in one
 * statement, so one transaction, with a commit for all of them (the
 * statement is http_orders.c's).
 */
static void
http_link_fill(struct http_link *l)
{
	struct http_pool	*pool = l->pool;
	struct http_job		*job, *more, **tail;

	while (l->state == HTTP_LINK_READY && l->nsent < HTTP_PIPELINE_DEPTH &&
	    (job = TAILQ_FIRST(&pool->queue)) != NULL) {
		TAILQ_REMOVE(&pool->queue, job, entry);
		pool->queued--;
		/* Orders waiting in a row become one statement. */
		tail = &job->next;
		while (job->kind == HTTP_JOB_INSERT && !job->solo &&
		    job->nbatch < HTTP_BATCH_MAX &&
		    (more = TAILQ_FIRST(&pool->queue)) != NULL &&
		    more->kind == HTTP_JOB_INSERT && !more->solo) {
			TAILQ_REMOVE(&pool->queue, more, entry);
			pool->queued--;
			*tail = more;
			tail = &more->next;
			job->nbatch++;
		}
		http_link_run(l, job);
	}
}

/*
 * A batch whose statement or commit failed (the server said so: nothing
 * of it was written) goes back to the front of the queue as single
 * orders, each in a transaction of its own, so that one order a user's
 * trigger or constraint refuses does not fail the others with it.  Once:
 * a single order is never batched again.
 */
static void
http_link_split(struct http_link *l, struct http_job *job)
{
	static struct log_limit	 split_limit;
	struct http_pool	*pool = l->pool;
	struct http_job		*next, *after = NULL;

	/* As often as a client sends refused orders among others: limited. */
	log_limited(&split_limit, LOG_LEVEL_INFO, "%d orders written together "
	    "failed; writing them one by one", job->nbatch);
	for (; job != NULL; job = next) {
		next = job->next;
		job->next = NULL;
		job->nbatch = 1;
		job->solo = 1;
		if (job->res != NULL) {
			PQclear(job->res);
			job->res = NULL;
		}
		if (job->req == NULL) {		/* answered already */
			http_link_done(l, job, NULL);
			continue;
		}
		if (after == NULL)
			TAILQ_INSERT_HEAD(&pool->queue, job, entry);
		else
			TAILQ_INSERT_AFTER(&pool->queue, after, job, entry);
		after = job;
		pool->queued++;
	}
}

/* A result that says the statement, or the transaction, failed. */
static int
http_res_failed(const PGresult *res)
{
	return PQresultStatus(res) != PGRES_TUPLES_OK &&
	    PQresultStatus(res) != PGRES_COMMAND_OK;
}

/*
 * Results of the pipeline (libpq pipeline mode): each job is its own
 * statement (and a NOTIFY with it when job->notify) and Sync, so its own
 * transaction, and yields a result and a NULL per statement, then
 * PGRES_PIPELINE_SYNC (no NULL follows a sync).  The transaction commits
 * at the Sync and can still fail there, so a job is done only at its
 * sync: with its statement's result, or the first error that came after.
 */
static int
http_link_pipeline(struct http_link *l, PGresult *res)
{
	struct http_job	*job = TAILQ_FIRST(&l->sent);
	PGresult	*jres;

	if (res == NULL) {
		if (l->phase != HTTP_PHASE_NULL)
			return -1;	/* nothing more has arrived */
		l->phase = HTTP_PHASE_SYNC;
		return 0;
	}
	if (job == NULL) {
		PQclear(res);
		return 0;
	}
	if (PQresultStatus(res) == PGRES_PIPELINE_SYNC) {
		TAILQ_REMOVE(&l->sent, job, entry);
		l->nsent--;
		if (job->res != NULL && job->nbatch > 1 &&
		    http_res_failed(job->res)) {
			/* A refusal is logged when its own order is
			 * refused again, alone. */
			if (!db_result_refused(job->res))
				http_pool_log_result(l->index, job->res);
			http_link_split(l, job);
		} else {
			jres = job->res;
			job->res = NULL;
			http_link_done(l, job, jres);
			PQclear(jres);
		}
		l->phase = HTTP_PHASE_RESULT;
		/* progress: the watchdog starts again */
		if (l->nsent > 0)
			http_link_arm(l, HTTP_QUERY_WATCHDOG_MS);
		else
			event_del(l->timer);
	} else {
		if (job->res == NULL || (!http_res_failed(job->res) &&
		    http_res_failed(res))) {
			PQclear(job->res);
			job->res = res;
			res = NULL;
		}
		l->phase = HTTP_PHASE_NULL;
	}
	PQclear(res);
	return 0;
}

/* The socket is readable: collect what results have arrived. */
static void
http_link_readable(evutil_socket_t fd, short what, void *arg)
{
	struct http_link	*l = arg;
	struct http_pool	*pool = l->pool;
	PGresult		*res;
	int			 step_done = 0;

	(void)fd;
	(void)what;
	if (!PQconsumeInput(l->pg)) {
		http_link_broken(l, "receive");
		return;
	}
	/* Writing may have waited for the server to read. */
	if (http_link_flush(l) == -1)
		return;
	while (!PQisBusy(l->pg)) {
		res = PQgetResult(l->pg);
		if (l->state == HTTP_LINK_READY) {
			if (http_link_pipeline(l, res) == -1)
				break;
			continue;
		}
		if (res == NULL) {
			step_done = l->state == HTTP_LINK_SETUP;
			break;
		}
		/* Setup results; anything else is the server saying goodbye
		 * to an idle connection, which the next read reports. */
		if (l->state == HTTP_LINK_SETUP) {
			if (PQresultStatus(res) == PGRES_TUPLES_OK &&
			    PQntuples(res) == 1)
				pool->ops.setup_row(res, pool->ops.arg);
			else if (PQresultStatus(res) != PGRES_COMMAND_OK) {
				http_pool_log_result(l->index, res);
				l->step_failed = 1;
			}
		}
		PQclear(res);
	}
	if (PQstatus(l->pg) == CONNECTION_BAD) {
		http_link_broken(l, "connection lost");
		return;
	}
	if (step_done)
		http_link_setup_next(l);
	else
		http_link_fill(l);
}

/* Send the next setup statement (the session's, then ops.setup's in
 * order), or enter pipeline mode after the last. */
static void
http_link_setup_next(struct http_link *l)
{
	const struct http_pool_ops	*ops = &l->pool->ops;
	const struct http_pool_stmt	*st;
	int				 ok, step;

	if (l->step_failed) {
		http_link_broken(l, "session setup failed");
		return;
	}
	step = l->step++;
	if (step == 0)
		ok = PQsendQuery(l->pg, http_pool_sql_session);
	else if (step <= ops->nsetup) {
		st = &ops->setup[step - 1];
		ok = st->name != NULL ? PQsendPrepare(l->pg, st->name,
		    st->sql, st->nparams, st->types) :
		    PQsendQuery(l->pg, st->sql);
	} else {
		if (!PQenterPipelineMode(l->pg)) {
			http_link_broken(l, "pipeline mode");
			return;
		}
		if (l->backoff > HTTP_BACKOFF_MIN_MS)
			log_info("database connection %d: ready", l->index);
		l->backoff = HTTP_BACKOFF_MIN_MS;
		l->state = HTTP_LINK_READY;
		l->phase = HTTP_PHASE_RESULT;
		event_del(l->timer);
		http_link_fill(l);
		return;
	}
	if (!ok) {
		http_link_broken(l, "setup");
		return;
	}
	http_link_flush(l);
}

/* A connected PGconn (db_connect() or db_connecting_start()): make it
 * ours. */
static int
http_link_attach(struct http_link *l)
{
	struct http_pool	*pool = l->pool;
	evutil_socket_t		 fd = PQsocket(l->pg);

	if (fd < 0 || PQsetnonblocking(l->pg, 1) != 0)
		return -1;
	PQsetNoticeProcessor(l->pg, http_link_notice, l);
	event_del(l->rev);
	event_del(l->wev);
	event_assign(l->rev, pool->base, fd, EV_READ | EV_PERSIST,
	    http_link_readable, l);
	event_assign(l->wev, pool->base, fd, EV_WRITE, http_link_writable, l);
	if (event_add(l->rev, NULL) == -1)
		return -1;
	l->state = HTTP_LINK_SETUP;
	l->step = 0;
	l->step_failed = 0;
	pool->nup++;
	http_link_arm(l, HTTP_CONNECT_TIMEOUT_MS);
	http_link_setup_next(l);
	return 0;
}

/*
 * The connection failed (what, and why: libpq's message): hand its jobs
 * back without a result, close it and try again after the backoff
 * (HTTP_BACKOFF_MIN_MS doubling to HTTP_BACKOFF_MAX_MS).  A statement in
 * flight may or may not have committed; the client is told the database
 * was unavailable either way.  With no connection left, queued jobs go
 * back at once rather than waiting for a server that is not there.
 */
static void
http_link_fail(struct http_link *l, const char *what, const char *why)
{
	struct http_pool	*pool = l->pool;
	struct http_job		*job;
	char			 buf[512];

	db_errline(buf, sizeof(buf), why);
	/* Once per outage; the attempts that follow only at debug level. */
	if (l->backoff == HTTP_BACKOFF_MIN_MS)
		log_warnx("database connection %d: %s: %s; retrying in %ld ms",
		    l->index, what, buf, l->backoff);
	else
		log_debug("database connection %d: %s: %s; retrying in %ld ms",
		    l->index, what, buf, l->backoff);
	while ((job = TAILQ_FIRST(&l->sent)) != NULL) {
		TAILQ_REMOVE(&l->sent, job, entry);
		if (job->res != NULL) {
			PQclear(job->res);
			job->res = NULL;
		}
		http_link_done(l, job, NULL);
	}
	l->nsent = 0;
	if (l->state == HTTP_LINK_SETUP || l->state == HTTP_LINK_READY)
		pool->nup--;
	http_link_close(l);
	l->state = HTTP_LINK_DOWN;
	http_link_arm(l, l->backoff);
	l->backoff *= 2;
	if (l->backoff > HTTP_BACKOFF_MAX_MS)
		l->backoff = HTTP_BACKOFF_MAX_MS;
	if (pool->nup == 0)
		http_pool_flush_queue(pool, l);
}

/* http_link_fail() with libpq's message of the connection. */
static void
http_link_broken(struct http_link *l, const char *what)
{
	http_link_fail(l, what, l->pg != NULL ? PQerrorMessage(l->pg) : NULL);
}

/* The one timer: reconnect when down; give up on a setup or a pipeline
 * that makes no progress (a connect has its own deadline). */
static void
http_link_timer(evutil_socket_t fd, short what, void *arg)
{
	struct http_link	*l = arg;

	(void)fd;
	(void)what;
	switch (l->state) {
	case HTTP_LINK_DOWN:
		http_link_connect(l);
		break;
	case HTTP_LINK_CONNECTING:	/* db_connecting_start()'s deadline */
		break;
	case HTTP_LINK_SETUP:
		http_link_broken(l, "connect timed out");
		break;
	case HTTP_LINK_READY:
		if (l->nsent > 0)
			http_link_broken(l, "no answer from the server");
		break;
	}
}

/* db_connecting_start()'s answer. */
static void
http_link_connected(PGconn *pg, int timed_out, const char *err, void *arg)
{
	struct http_link	*l = arg;

	l->connecting = NULL;
	if (pg == NULL) {
		http_link_fail(l, timed_out ? "connect timed out" : "connect",
		    err);
		return;
	}
	l->pg = pg;
	if (http_link_attach(l) == -1)
		http_link_broken(l, "attach");
}

/*
 * Start an asynchronous reconnect (db_connecting_start()) with the session
 * settings of db_connect(): a blocking connect would stall every request
 * of this worker while the server is away.
 */
static void
http_link_connect(struct http_link *l)
{
	char	err[512];

	if ((l->connecting = db_connecting_start(l->pool->base,
	    l->pool->conninfo, "http", HTTP_CONNECT_TIMEOUT_MS,
	    http_link_connected, l, err, sizeof(err))) == NULL) {
		http_link_fail(l, "connect", err);
		return;
	}
	l->state = HTTP_LINK_CONNECTING;
}

/* Append job's statement (ops.send) and a Sync to l's pipeline. */
static void
http_link_run(struct http_link *l, struct http_job *job)
{
	struct http_pool	*pool = l->pool;
	int			 ok;

	TAILQ_INSERT_TAIL(&l->sent, job, entry);
	if (l->nsent++ == 0)
		http_link_arm(l, HTTP_QUERY_WATCHDOG_MS);
	ok = pool->ops.send(l->pg, job, l->index, pool->ops.arg);
	/* PQpipelineSync also pushes the bytes out, as far as the socket
	 * takes them. */
	if (!ok || !PQpipelineSync(l->pg)) {
		http_link_broken(l, "send");
		return;
	}
	http_link_flush(l);
}

/* ---- the pool --------------------------------------------------------- */

struct http_pool *
http_pool_new(struct event_base *base, const char *conninfo, int nlinks,
    const struct http_pool_ops *ops)
{
	struct http_pool	*pool;
	struct http_link	*l;
	char			 err[1024];
	int			 i;

	if ((pool = calloc(1, sizeof(*pool))) == NULL ||
	    (pool->links = calloc(nlinks, sizeof(*pool->links))) == NULL) {
		log_warn("calloc");
		free(pool);
		return NULL;
	}
	pool->base = base;
	pool->conninfo = conninfo;
	pool->ops = *ops;
	pool->nlinks = nlinks;
	TAILQ_INIT(&pool->queue);
	for (i = 0; i < nlinks; i++) {
		l = &pool->links[i];
		l->pool = pool;
		l->index = i;
		TAILQ_INIT(&l->sent);
		l->backoff = HTTP_BACKOFF_MIN_MS;
		l->rev = event_new(base, -1, 0, NULL, NULL);
		l->wev = event_new(base, -1, 0, NULL, NULL);
		l->timer = evtimer_new(base, http_link_timer, l);
		if (l->rev == NULL || l->wev == NULL || l->timer == NULL) {
			log_warnx("event_new failed");
			http_pool_free(pool);
			return NULL;
		}
	}
	/*
	 * A server that is not there yet (or still starting) is a lost
	 * link: the worker starts all the same, answers 503 and reconnects
	 * with backoff, as after an outage.  One that answers and refuses
	 * us (db_refuses_us()) is a setting to fix: left to the master's
	 * restart backoff and its giving up.
	 */
	for (i = 0; i < nlinks; i++) {
		l = &pool->links[i];
		if ((l->pg = db_connect(conninfo, "http", err,
		    sizeof(err))) == NULL) {
			if (db_refuses_us(conninfo)) {
				log_error("database: %s", err);
				http_pool_free(pool);
				return NULL;
			}
			http_link_fail(l, "connect", err);
		} else if (http_link_attach(l) == -1)
			http_link_broken(l, "attach");
	}
	return pool;
}

/* Free job and the rest of its batch, and their results. */
static void
http_pool_free_jobs(struct http_job *job)
{
	struct http_job	*next;

	for (; job != NULL; job = next) {
		next = job->next;
		PQclear(job->res);
		free(job);
	}
}

void
http_pool_free(struct http_pool *pool)
{
	struct http_link	*l;
	struct http_job		*job;
	int			 i;

	if (pool == NULL)
		return;
	for (i = 0; i < pool->nlinks; i++) {
		l = &pool->links[i];
		while ((job = TAILQ_FIRST(&l->sent)) != NULL) {
			TAILQ_REMOVE(&l->sent, job, entry);
			http_pool_free_jobs(job);
		}
		if (l->rev != NULL)
			event_del(l->rev);
		if (l->wev != NULL)
			event_del(l->wev);
		if (l->timer != NULL)
			event_del(l->timer);
		if (l->pg != NULL)
			PQfinish(l->pg);
		db_connecting_cancel(l->connecting);
		if (l->rev != NULL)
			event_free(l->rev);
		if (l->wev != NULL)
			event_free(l->wev);
		if (l->timer != NULL)
			event_free(l->timer);
	}
	while ((job = TAILQ_FIRST(&pool->queue)) != NULL) {
		TAILQ_REMOVE(&pool->queue, job, entry);
		http_pool_free_jobs(job);
	}
	free(pool->links);
	free(pool);
}
