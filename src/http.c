/*
 * http.c - the HTTP worker: the order API on libevent 2.1's evhttp, backed
 * by a few asynchronous PostgreSQL connections per worker.
 *
 *   POST /orders		201, order and outbox rows in one statement
 *   GET  /orders/{id}	200 or 404
 *   GET  /healthz		200 {"status":"ok"}
 *   GET  /readyz		200 or 503, JSON saying what is wrong (metrics.c)
 *   GET  /metrics		Prometheus text exposition (metrics.c)
 *
 * Every 4xx/5xx carries {"error": CODE, "message": TEXT}.  Several workers
 * accept on the master's listening socket.  A request never waits on a
 * blocking call: each database connection is driven by libpq's
 * asynchronous API (PQsendQueryPrepared, PQconsumeInput, PQisBusy,
 * PQgetResult) from the event loop, in pipeline mode with a Sync after
 * every statement: each statement is still its own transaction, but the
 * server finds the next one waiting instead of a round trip later.  A
 * request that finds every pipeline full waits in a FIFO queue.
 *
 * Request size.  evhttp's own limits apply (evhttp_set_max_body_size,
 * _headers_size); evhttp 2.1 answers them with an HTML page and gives a
 * server no hook to replace it (evhttp_set_errorcb only exists from 2.2).
 * So each connection's bufferevent is made here (evhttp_set_bevcb): a
 * callback on its output buffer sees evhttp start an error page of its
 * own and has it replaced by the same status with a JSON body, and one on
 * its input buffer cuts a request that trickles in for too long.  Taking a
 * connection over from evhttp while it may still hold unparsed pipelined
 * requests crashes it, so that is only done for a request that is late.
 *
 * Pages replaced: bad request line, unknown method, Expect other than
 * 100-continue, body or headers over the limits (413).
 */
#include "config.h"

#include <sys/types.h>
#include <sys/queue.h>
#include <sys/socket.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/listener.h>
#include <libpq-fe.h>

#include "outboxd.h"

#define HTTP_IO_TIMEOUT_S	15	/* a silent client is dropped */
#define HTTP_REQUEST_TIMEOUT_S	30	/* one request, first byte to last */
#define HTTP_HEAD_MAX		16384	/* request line and headers */
#define HTTP_LINGER_MS		2000	/* reading after a refusal */
#define HTTP_FLUSH_MS		2000	/* stopping: last answers to go out */
#define HTTP_DRAIN_MS		300	/* stopping: requests already on an
					   accepted connection get in */
#define HTTP_QUEUE_MAX		4096	/* requests waiting for the database */
#define HTTP_PIPELINE_DEPTH	2	/* statements in flight, each link */
#define HTTP_BATCH_MAX		32	/* orders written by one statement */
#define HTTP_NOTIFY_MS		5	/* at most one NOTIFY per this, each */
#define HTTP_JOBS_KEPT		1024	/* free job records kept for reuse */
#define HTTP_STATEMENT_TIMEOUT	"5s"	/* PostgreSQL statement_timeout */
#define HTTP_QUERY_WATCHDOG_MS	10000	/* no answer at all: drop the link */
#define HTTP_CONNECT_TIMEOUT_MS	10000
#define HTTP_BACKOFF_MIN_MS	100
#define HTTP_BACKOFF_MAX_MS	5000

/* Type OIDs of the statement parameters (PostgreSQL pg_type.dat). */
#define HTTP_OID_INT8		20
#define HTTP_OID_TEXT		25
#define HTTP_OID_UUID		2950
#define HTTP_OID_TEXT_ARRAY	1009
#define HTTP_OID_INT8_ARRAY	1016

#define HTTP_STMT_INSERT	"outboxd_order_insert"
#define HTTP_STMT_INSERT_MANY	"outboxd_order_insert_many"
#define HTTP_STMT_GET		"outboxd_order_get"
#define HTTP_STMT_INSERT_CLAIMED "outboxd_order_insert_claimed"

/* The new order o ($1, $2), as the statements below insert it. */
#define HTTP_SQL_ORDER							\
	"WITH o AS (INSERT INTO orders (customer_id, amount_cents) "	\
	"VALUES ($1, $2) "						\
	"RETURNING id, customer_id, amount_cents, created_at), "
/* Its order.created event's type, ordering key and payload, from o: the
 * same bytes whichever statement writes the row. */
#define HTTP_SQL_EVENT							\
	"'order.created', o.id::text, json_build_object("		\
	"'orderId', o.id, 'customerId', o.customer_id, "		\
	"'amountCents', o.amount_cents, 'createdAt', o.created_at)"

/* The order and its order.created event, atomically, in one round trip.
 * created_at is formatted by the server in the session's TimeZone, UTC. */
static const char http_sql_insert[] =
	HTTP_SQL_ORDER
	"e AS (INSERT INTO outbox (event_type, ordering_key, payload) "
	"SELECT " HTTP_SQL_EVENT " FROM o) "
	"SELECT id, customer_id, amount_cents, to_json(created_at) #>> '{}' "
	"FROM o";

/*
 * The same, with its outbox row written already claimed for relay 1
 * (handoff.c): $3 the claim token, $4 the lease in ms, set as
 * outbox_claim() sets them.  The row's ordering key is the new order's
 * id, so it is its key's head.  While the relays are paused the row is
 * written unclaimed, as any other.  Columns 5-10 are the row for the
 * handoff (claim NULL: paused).
 */
static const char http_sql_insert_claimed[] =
	HTTP_SQL_ORDER
	"p AS (SELECT NOT coalesce((SELECT paused FROM outbox_control "
	"WHERE id = 1), false) AS go), "
	"e AS (INSERT INTO outbox (event_type, ordering_key, payload, claim, "
	"available_at, first_claimed_at) "
	"SELECT " HTTP_SQL_EVENT ", "
	"CASE WHEN p.go THEN $3::bigint END, "
	"now() + CASE WHEN p.go THEN $4::bigint ELSE 0 END "
	"* interval '1 millisecond', CASE WHEN p.go THEN now() END "
	"FROM o, p "
	"RETURNING id, claim, event_type, ordering_key, payload::text, "
	"(1000 * extract(epoch FROM created_at))::bigint AS created_ms) "
	"SELECT o.id, o.customer_id, o.amount_cents, "
	"to_json(o.created_at) #>> '{}', e.id, e.claim, e.event_type, "
	"e.ordering_key, e.payload, e.created_ms FROM o, e";

/* Its columns after the order's four. */
enum { HTTP_COL_ROW_ID = 4, HTTP_COL_CLAIM, HTTP_COL_TYPE, HTTP_COL_KEY,
	HTTP_COL_PAYLOAD, HTTP_COL_CREATED_MS, HTTP_COLS_CLAIMED };

/*
 * Group commit: the orders that queued up while every connection was busy
 * go in one statement, so one transaction, with a commit for all of them.
 * Each order still gets its 201 only after that commit, and a failure
 * fails every order of the statement (none was written).  $1 and $2 are
 * the customer ids and amounts; n, the position in them, pairs each row
 * with its request (an INSERT's RETURNING order is not guaranteed).
 */
static const char http_sql_insert_many[] =
	"WITH i AS MATERIALIZED (SELECT gen_random_uuid() AS id, t.c, t.a, t.n "
	"FROM unnest($1::text[], $2::bigint[]) WITH ORDINALITY AS t(c, a, n)), "
	"o AS (INSERT INTO orders (id, customer_id, amount_cents) "
	"SELECT i.id, i.c, i.a FROM i ORDER BY i.n "
	"RETURNING id, customer_id, amount_cents, created_at), "
	"e AS (INSERT INTO outbox (event_type, ordering_key, payload) "
	"SELECT " HTTP_SQL_EVENT " FROM o) "
	"SELECT i.n, o.id, o.customer_id, o.amount_cents, "
	"to_json(o.created_at) #>> '{}' FROM o JOIN i ON i.id = o.id";

static const char http_sql_get[] =
	"SELECT id, customer_id, amount_cents, to_json(created_at) #>> '{}' "
	"FROM orders WHERE id = $1";

static const char http_sql_session[] =
	"SET statement_timeout = '" HTTP_STATEMENT_TIMEOUT "'";

/*
 * Does a trigger still wake the relays for our inserts?  sql/schema.sql's
 * trigger skips sessions that set outboxd.notify = off, as ours do (the
 * connection options), and then this worker notifies, debounced; a
 * trigger without that condition (an older schema) notifies for us.
 */
static const char http_sql_trigger[] =
	"SELECT EXISTS (SELECT 1 FROM pg_trigger "
	"WHERE tgrelid = to_regclass('outbox') AND tgenabled <> 'D' "
	"AND tgfoid = to_regprocedure('outbox_notify()') "
	"AND pg_get_triggerdef(oid) NOT LIKE '%outboxd.notify%')";

static const char http_sql_notify[] = "NOTIFY " OUTBOX_CHANNEL;
struct http_worker;

enum http_job_kind { HTTP_JOB_INSERT, HTTP_JOB_GET, HTTP_JOB_NOTIFY,
	HTTP_JOB_STATS, HTTP_JOB_GIVE_BACK };

/* A request waiting for, or using, a database connection (req is NULL
 * for our own NOTIFY and GIVE_BACK statements). */
struct http_job {
	TAILQ_ENTRY(http_job)	 entry;
	struct evhttp_request	*req;
	enum http_job_kind	 kind;
	struct order_input	 in;
	char			 amount[24];
	char			 id[ORDER_UUID_LEN + 1];
	int			 route;		/* HTTP_JOB_STATS: which */
	struct http_job		*next;		/* INSERT: the batch's others */
	int			 nbatch;	/* orders in the batch it heads */
	int			 notify;	/* INSERT: its transaction also
						   sends the NOTIFY */
	int			 solo;		/* INSERT: never in a batch */
	int			 handoff;	/* INSERT: written claimed, for
						   relay 1 */
	int64_t			 handoff_claim;	/* ... its claim token */
	int64_t			 handoff_us;	/* ... sent at (monotonic) */
	int64_t			 row_id;	/* GIVE_BACK: the outbox row */
	int			 given;		/* GIVE_BACK: done */
	PGresult		*res;		/* its result, kept until the
						   Sync says committed */
};
TAILQ_HEAD(http_jobq, http_job);

enum http_db_state {
	HTTP_DB_DOWN,		/* waiting to reconnect */
	HTTP_DB_CONNECTING,	/* PQconnectPoll under way */
	HTTP_DB_SETUP,		/* session settings and PREPAREs in flight */
	HTTP_DB_READY		/* pipeline mode, 0..DEPTH jobs in flight */
};

/* What the pipeline owes next for the oldest job in flight. */
enum http_db_phase {
	HTTP_PHASE_RESULT,	/* its result */
	HTTP_PHASE_NULL,	/* the NULL that ends its results */
	HTTP_PHASE_SYNC		/* its PGRES_PIPELINE_SYNC */
};

struct http_db {
	struct http_worker	*w;
	int			 index;
	PGconn			*pg;
	struct db_connecting	*connecting;	/* HTTP_DB_CONNECTING */
	enum http_db_state	 state;
	int			 step;		/* of the setup */
	int			 step_failed;
	struct event		*rev;		/* socket readable */
	struct event		*wev;		/* socket writable */
	struct event		*timer;		/* backoff, connect, watchdog */
	long			 backoff;	/* ms before the next attempt */
	struct http_jobq	 sent;		/* in flight, oldest first */
	int			 nsent;
	enum http_db_phase	 phase;
};

struct http_worker {
	struct conf		*conf;
	int			 index;
	struct event_base	*base;
	struct evhttp		*http;
	struct evhttp_bound_socket *bound;
	struct http_db		*dbs;
	int			 ndb;
	int			 nup;		/* dbs in SETUP or READY */
	struct http_jobq	 queue;
	int			 queued;
	struct http_jobq	 spare;
	int			 nspare;
	int			 inflight;	/* requests not yet answered */
	int			 unflushed;	/* answers not yet written */
	int			 replying;	/* in evhttp_send_reply() */
	int			 stopping;
	int			 giving_back;	/* GIVE_BACK jobs not put yet */
	int			 notify_self;	/* no trigger notifies */
	int			 notify_dirty;	/* orders since the last */
	struct event		*notify_ev;	/* the NOTIFY window */
	struct event		*drain_ev;	/* end of HTTP_DRAIN_MS */
	int			 drained;	/* HTTP_DRAIN_MS are over */
	size_t			 max_body;
	TAILQ_HEAD(, http_conn)	 conns;
};

/* One accepted connection as the size guard sees it. */
struct http_conn {
	struct http_worker		*w;
	struct bufferevent		*bev;
	struct evhttp_connection	*evcon;
	struct evbuffer_cb_entry	*in_cb;
	struct evbuffer_cb_entry	*out_cb;
	size_t				 pending;	/* bytes not answered */
	time_t				 started;	/* first of them, s */
	int				 refusing;
	int				 eof;
	struct timespec			 linger_until;
	struct event			*fix_ev;	/* swaps error pages */
	size_t				 fix_from;	/* where it starts */
	int				 fixing;
	int				 busy;		/* requests in our hands */
	TAILQ_ENTRY(http_conn)		 entry;
};

/* One worker per process: the bufferevent hook has no argument of its own
 * that outlives the accept. */
static struct http_worker	*http_self;

/* Responses are built here: one request is answered at a time. */
static char			 http_out[ORDER_JSON_MAX];

/*
 * Route and start of every request a handler holds, for the metrics:
 * evhttp 2.1 gives a request no user pointer, so they are found by the
 * request's address (open addressing, linear probing, deletion by
 * backward shift).  A full table only loses durations and counts, never
 * a request.
 */
#define HTTP_TIMING_SLOTS	8192		/* a power of two */
struct http_timing {
	const struct evhttp_request	*req;
	uint64_t			 t0;	/* us, monotonic */
	int				 route;
};
static struct http_timing	 http_timings[HTTP_TIMING_SLOTS];

/* Why the server refused an order, beyond its message: http_pgwhy(). */
struct http_pgwhy {
	const char	*detail;	/* NULL, or dbuf */
	const char	*hint;		/* NULL, or hbuf */
	char		 dbuf[512];
	char		 hbuf[256];
};

static void	http_db_run(struct http_db *, struct http_job *);
static struct http_conn *http_conn_of(struct http_worker *,
		    struct evhttp_request *);
static void	http_db_broken(struct http_db *, const char *);
static void	http_db_fail(struct http_db *, const char *, const char *);
static void	http_db_setup_next(struct http_db *);
static void	http_db_connect(struct http_db *);
static void	http_notify(struct http_worker *);
static int	http_handoff_claim(struct http_worker *);
static void	http_handoff(struct http_worker *, struct http_job *);
static void	http_give_back(struct http_worker *, int64_t, int64_t);
static int	http_notify_claim(struct http_worker *);
static void	http_stats_reply(struct http_worker *, struct evhttp_request *,
		    int, const char *);
static void	http_pgwhy(struct http_pgwhy *, const PGresult *);
static const char *http_pgfield(const PGresult *, int, char *, size_t);

/* Monotonic seconds, for idle timeouts. */
static time_t
http_now(void)
{
	return (time_t)(clock_mono_us() / 1000000);
}

/* ---- request metrics -------------------------------------------------- */

static size_t
http_timing_slot(const struct evhttp_request *req)
{
	uint64_t	p = (uint64_t)(uintptr_t)req;

	/* Fibonacci hashing of the address: the top 13 bits. */
	return (size_t)((p * UINT64_C(0x9e3779b97f4a7c15)) >> 51) &
	    (HTTP_TIMING_SLOTS - 1);
}

static void
http_timing_start(const struct evhttp_request *req, int route)
{
	size_t	i = http_timing_slot(req), n;

	for (n = 0; n < HTTP_TIMING_SLOTS; n++) {
		if (http_timings[i].req == NULL || http_timings[i].req == req) {
			http_timings[i].req = req;
			http_timings[i].t0 = (uint64_t)clock_mono_us();
			http_timings[i].route = route;
			return;
		}
		i = (i + 1) & (HTTP_TIMING_SLOTS - 1);
	}
}

/* Count req's answer (status code) with its route and duration. */
static void
http_timing_end(const struct evhttp_request *req, int code)
{
	size_t	i = http_timing_slot(req), j, k, n;

	for (n = 0; http_timings[i].req != req; n++) {
		if (http_timings[i].req == NULL || n == HTTP_TIMING_SLOTS)
			return;
		i = (i + 1) & (HTTP_TIMING_SLOTS - 1);
	}
	metrics_http_request(http_timings[i].route, code,
	    (uint64_t)clock_mono_us() - http_timings[i].t0);
	/* Move later entries of the probe run into the hole. */
	for (j = i;;) {
		j = (j + 1) & (HTTP_TIMING_SLOTS - 1);
		if (http_timings[j].req == NULL)
			break;
		k = http_timing_slot(http_timings[j].req);
		if (i <= j ? (i < k && k <= j) : (i < k || k <= j))
			continue;	/* its home is between: it stays */
		http_timings[i] = http_timings[j];
		i = j;
	}
	http_timings[i].req = NULL;
}

static int
http_route(const char *path)
{
	if (strcmp(path, "/orders") == 0)
		return METRICS_ROUTE_ORDERS;
	if (strncmp(path, "/orders/", 8) == 0)
		return METRICS_ROUTE_ORDER;
	if (strcmp(path, "/healthz") == 0)
		return METRICS_ROUTE_HEALTHZ;
	if (strcmp(path, "/readyz") == 0)
		return METRICS_ROUTE_READYZ;
	if (strcmp(path, "/metrics") == 0)
		return METRICS_ROUTE_METRICS;
	return METRICS_ROUTE_OTHER;
}

/* ---- answering ------------------------------------------------------- */

/* A stopping worker leaves its loop once every request is answered, every
 * handed-off row given back (http_give_back()) and every answer written,
 * or HTTP_FLUSH_MS after the last answer if a client does not take its
 * answer. */
static void
http_maybe_exit(struct http_worker *w)
{
	struct timeval	tv = clock_tv(HTTP_FLUSH_MS);

	if (!w->stopping || !w->drained || w->inflight > 0 ||
	    w->giving_back > 0)
		return;
	if (w->unflushed == 0)
		event_base_loopexit(w->base, NULL);
	else
		event_base_loopexit(w->base, &tv);
}

/* evhttp wrote an answer completely (libevent 2.1 on_complete_cb). */
static void
http_sent(struct evhttp_request *req, void *arg)
{
	struct http_worker	*w = arg;

	(void)req;
	if (--w->unflushed == 0)
		http_maybe_exit(w);
}

/* Send the answer to a request the handler took (inflight counted it);
 * body may be NULL. */
static void
http_send(struct http_worker *w, struct evhttp_request *req, int code,
    const char *body, size_t len)
{
	struct evkeyvalq	*h = evhttp_request_get_output_headers(req);
	struct http_conn	*c;

	if (body != NULL) {
		if (evhttp_find_header(h, "Content-Type") == NULL)
			evhttp_add_header(h, "Content-Type",
			    "application/json");
		evbuffer_add(evhttp_request_get_output_buffer(req), body, len);
	}
	http_timing_end(req, code);
	if ((c = http_conn_of(w, req)) != NULL && c->busy > 0)
		c->busy--;
	/* Clients go to another worker from now on. */
	if (w->stopping)
		evhttp_add_header(h, "Connection", "close");
	/* A request whose client left is freed unanswered by evhttp. */
	if (evhttp_request_get_connection(req) != NULL) {
		evhttp_request_set_on_complete_cb(req, http_sent, w);
		w->unflushed++;
	}
	w->replying = 1;	/* this output is ours, not evhttp's */
	evhttp_send_reply(req, code, NULL, NULL);
	w->replying = 0;
	if (--w->inflight == 0)
		http_maybe_exit(w);
}

static void
http_error(struct http_worker *w, struct evhttp_request *req, int code,
    const char *ecode, const char *message)
{
	char	*s;

	if ((s = order_error_json(ecode, message)) == NULL) {
		http_send(w, req, code, NULL, 0);
		return;
	}
	http_send(w, req, code, s, strlen(s));
	free(s);
}

/* 422 for an order PostgreSQL refused (http_res_refused()): its message,
 * and its DETAIL and HINT when it has them, each cut to a few hundred
 * bytes at a character. */
static void
http_refused(struct http_worker *w, struct evhttp_request *req,
    const PGresult *res)
{
	struct http_pgwhy	 why;
	char			 buf[400], msg[512], *s;
	const char		*m, *state;

	/* A trigger may raise an empty message: say that, and its code,
	 * rather than "unknown error". */
	if ((m = http_pgfield(res, PG_DIAG_MESSAGE_PRIMARY, buf,
	    sizeof(buf))) != NULL)
		snprintf(msg, sizeof(msg), "the database refused the order: "
		    "%s", m);
	else {
		state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
		snprintf(msg, sizeof(msg), "the database refused the order "
		    "with an empty message (SQLSTATE %s)", state != NULL ?
		    state : "none");
	}
	http_pgwhy(&why, res);
	if ((s = order_error_json_detail("order_refused", msg, why.detail,
	    why.hint)) == NULL) {
		http_send(w, req, 422, NULL, 0);
		return;
	}
	http_send(w, req, 422, s, strlen(s));
	free(s);
}

static void
http_unavailable(struct http_worker *w, struct evhttp_request *req)
{
	http_error(w, req, 503, "database_unavailable",
	    "the database is unavailable; try again later");
}

static void
http_not_found(struct http_worker *w, struct evhttp_request *req)
{
	http_error(w, req, 404, "not_found", "no such resource");
}

static void
http_bad_method(struct http_worker *w, struct evhttp_request *req,
    const char *allow)
{
	evhttp_add_header(evhttp_request_get_output_headers(req), "Allow",
	    allow);
	http_error(w, req, 405, "method_not_allowed",
	    "method not allowed for this resource");
}

/* ---- jobs ------------------------------------------------------------- */

static struct http_job *
http_job_get(struct http_worker *w)
{
	struct http_job	*job;

	if ((job = TAILQ_FIRST(&w->spare)) != NULL) {
		TAILQ_REMOVE(&w->spare, job, entry);
		w->nspare--;
	} else if ((job = malloc(sizeof(*job))) == NULL)
		return NULL;
	job->kind = HTTP_JOB_INSERT;	/* not a stale GIVE_BACK */
	job->next = NULL;
	job->nbatch = 1;
	job->notify = 0;
	job->solo = 0;
	job->handoff = 0;
	job->res = NULL;
	return job;
}

/* A handed-off row http_give_back() could not give back. */
static void
http_give_back_lost(int64_t id)
{
	log_warnx("could not give back outbox row %" PRId64 ": it is "
	    "published when its lease ends (relay.lease)", id);
}

/* Give back job and the rest of its batch. */
static void
http_job_put(struct http_worker *w, struct http_job *job)
{
	struct http_job	*next;

	for (; job != NULL; job = next) {
		next = job->next;
		if (job->res != NULL) {
			PQclear(job->res);
			job->res = NULL;
		}
		if (job->kind == HTTP_JOB_GIVE_BACK) {
			/* Whatever kept it from running (no connection, a
			 * broken one, an error) says so here, once. */
			if (!job->given)
				http_give_back_lost(job->row_id);
			if (--w->giving_back == 0)
				http_maybe_exit(w);
		}
		if (w->nspare >= HTTP_JOBS_KEPT) {
			free(job);
			continue;
		}
		TAILQ_INSERT_HEAD(&w->spare, job, entry);
		w->nspare++;
	}
}

/* Answer 503 to every request of job's batch not answered yet. */
static void
http_job_fail(struct http_worker *w, struct http_job *job)
{
	for (; job != NULL; job = job->next)
		if (job->req != NULL) {
			http_unavailable(w, job->req);
			job->req = NULL;
		}
}

/* Answer every queued request 503: no connection can take them soon. */
static void
http_queue_fail(struct http_worker *w)
{
	struct http_job	*job;

	while ((job = TAILQ_FIRST(&w->queue)) != NULL) {
		TAILQ_REMOVE(&w->queue, job, entry);
		w->queued--;
		http_job_fail(w, job);
		http_job_put(w, job);
	}
}

/* Send job on the least loaded connection with room, or queue it. */
static void
http_job_submit(struct http_worker *w, struct http_job *job)
{
	struct http_db	*db, *best = NULL;
	int		 i;

	if (w->nup == 0) {
		http_unavailable(w, job->req);
		http_job_put(w, job);
		return;
	}
	for (i = 0; i < w->ndb; i++) {
		db = &w->dbs[i];
		if (db->state == HTTP_DB_READY &&
		    db->nsent < HTTP_PIPELINE_DEPTH &&
		    (best == NULL || db->nsent < best->nsent))
			best = db;
	}
	if (best != NULL) {
		http_db_run(best, job);
		return;
	}
	if (w->queued >= HTTP_QUEUE_MAX) {
		http_error(w, job->req, 503, "database_unavailable",
		    "too many requests are waiting for the database");
		http_job_put(w, job);
		return;
	}
	TAILQ_INSERT_TAIL(&w->queue, job, entry);
	w->queued++;
}

/* ---- database connections -------------------------------------------- */

/* One of a failed statement's fields (PQresultErrorField) in buf, on one
 * line and cut at a character; NULL if the server sent none, or only
 * blanks (RAISE ... USING DETAIL = '' says nothing). */
static const char *
http_pgfield(const PGresult *res, int field, char *buf, size_t len)
{
	const char	*v = PQresultErrorField(res, field);

	if (v == NULL || v[strspn(v, " \t\r\n")] == '\0')
		return NULL;
	return db_errline(buf, len, v);
}

/* A failed statement's DETAIL and HINT; NULL where the server sent none. */
static void
http_pgwhy(struct http_pgwhy *why, const PGresult *res)
{
	why->detail = http_pgfield(res, PG_DIAG_MESSAGE_DETAIL, why->dbuf,
	    sizeof(why->dbuf));
	why->hint = http_pgfield(res, PG_DIAG_MESSAGE_HINT, why->hbuf,
	    sizeof(why->hbuf));
}

static void
http_db_notice(void *arg, const char *message)
{
	struct http_db	*db = arg;
	char		 buf[512];

	log_debug("database connection %d: %s", db->index,
	    db_errline(buf, sizeof(buf), message));
}

/* Drop the libpq connection and its events. */
static void
http_db_close(struct http_db *db)
{
	event_del(db->rev);
	event_del(db->wev);
	event_del(db->timer);
	if (db->pg != NULL) {
		PQfinish(db->pg);
		db->pg = NULL;
	}
}

static void
http_db_arm(struct http_db *db, long ms)
{
	struct timeval	tv = clock_tv(ms);

	event_add(db->timer, &tv);
}

/* Send what libpq has buffered; the rest when the socket is writable. */
static int
http_db_flush(struct http_db *db)
{
	switch (PQflush(db->pg)) {
	case 0:
		return 0;
	case 1:
		event_add(db->wev, NULL);
		return 0;
	default:
		http_db_broken(db, "send");
		return -1;
	}
}

static void
http_db_writable(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	http_db_flush(arg);
}

/* Give db queued jobs while its pipeline has room. */
static void
http_db_fill(struct http_db *db)
{
	struct http_worker	*w = db->w;
	struct http_job		*job;

	struct http_job		*more, **tail;

	while (db->state == HTTP_DB_READY && db->nsent < HTTP_PIPELINE_DEPTH &&
	    (job = TAILQ_FIRST(&w->queue)) != NULL) {
		TAILQ_REMOVE(&w->queue, job, entry);
		w->queued--;
		/* Orders waiting in a row become one statement. */
		tail = &job->next;
		while (job->kind == HTTP_JOB_INSERT && !job->solo &&
		    job->nbatch < HTTP_BATCH_MAX &&
		    (more = TAILQ_FIRST(&w->queue)) != NULL &&
		    more->kind == HTTP_JOB_INSERT && !more->solo) {
			TAILQ_REMOVE(&w->queue, more, entry);
			w->queued--;
			*tail = more;
			tail = &more->next;
			job->nbatch++;
		}
		http_db_run(db, job);
	}
}

static int	http_res_refused(const PGresult *);

/* Log a failed statement.  Orders the database refuses (a 422, see
 * http_res_refused()) are the client's doing and as frequent as it likes:
 * those lines are rate-limited, so a client cannot fill the log. */
static void
http_db_log_result(struct http_db *db, const PGresult *res)
{
	static struct log_limit	 refused_limit;
	const char		*state, *msg;
	char			 buf[512];

	state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
	msg = db_result_error(buf, sizeof(buf), res, NULL);
	if (http_res_refused(res)) {
		struct http_pgwhy	 why;

		http_pgwhy(&why, res);
		log_limited(&refused_limit, LOG_LEVEL_WARN, "database "
		    "connection %d: order refused: %s (SQLSTATE %s)%s%s%s%s",
		    db->index, msg, state, why.detail != NULL ? " DETAIL: " : "",
		    why.detail != NULL ? why.detail : "",
		    why.hint != NULL ? " HINT: " : "",
		    why.hint != NULL ? why.hint : "");
	} else
		log_warnx("database connection %d: %s (SQLSTATE %s)",
		    db->index, msg, state != NULL ? state : "none");
}

/*
 * Did the server refuse the order itself?  SQLSTATE classes 22 (data
 * exception), 23 (integrity constraint violation), 27 (triggered data
 * change violation), 44 (WITH CHECK OPTION violation) and P0 (PL/pgSQL:
 * RAISE EXCEPTION is P0001, a trigger may pick another P0 code).
 * Retrying the same order cannot change that, so the client gets a 422
 * with the server's message rather than a 503, which says "try again".
 * Any other failure (the connection, a serialization failure or deadlock,
 * a shutdown, a missing table) may pass.  Source: PostgreSQL
 * documentation, Appendix A "PostgreSQL Error Codes".
 */
static int
http_res_refused(const PGresult *res)
{
	static const char *const classes[] = { "22", "23", "27", "44", "P0" };
	const char	*state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
	size_t		 i;

	for (i = 0; state != NULL && i < sizeof(classes) / sizeof(*classes);
	    i++)
		if (strncmp(state, classes[i], 2) == 0)
			return 1;
	return 0;
}

/* Answer req with the order in row of res, columns col..col+3 (id,
 * customer, amount, created): 201 and its Location when it was created. */
static void
http_order_reply(struct http_worker *w, struct evhttp_request *req,
    int created, const PGresult *res, int row, int col)
{
	char	location[sizeof("/orders/") + ORDER_UUID_LEN];
	int	n;

	n = order_json(http_out, sizeof(http_out), PQgetvalue(res, row, col),
	    PQgetvalue(res, row, col + 1), PQgetvalue(res, row, col + 2),
	    PQgetvalue(res, row, col + 3));
	if (n == -1) {
		log_warnx("order %s: cannot build its JSON",
		    PQgetvalue(res, row, col));
		http_unavailable(w, req);
		return;
	}
	if (!created) {
		http_send(w, req, 200, http_out, (size_t)n);
		return;
	}
	snprintf(location, sizeof(location), "/orders/%s",
	    PQgetvalue(res, row, col));
	evhttp_add_header(evhttp_request_get_output_headers(req), "Location",
	    location);
	http_send(w, req, 201, http_out, (size_t)n);
}

/* The result of a batch of orders (http_sql_insert_many): row n answers
 * the batch's nth request.  A failed batch never gets here: it is split
 * at its Sync (http_batch_split()). */
static void
http_db_answer_batch(struct http_db *db, struct http_job *job,
    const PGresult *res)
{
	struct http_job	*jobs[HTTP_BATCH_MAX], *j;
	int		 i, k, n = 0;

	for (j = job; j != NULL && n < HTTP_BATCH_MAX; j = j->next)
		jobs[n++] = j;
	for (i = 0; i < PQntuples(res) && PQnfields(res) == 5; i++) {
		k = atoi(PQgetvalue(res, i, 0)) - 1;
		if (k < 0 || k >= n || jobs[k]->req == NULL)
			continue;
		http_order_reply(db->w, jobs[k]->req, 1, res, i, 1);
		jobs[k]->req = NULL;
	}
	for (i = 0; i < n; i++)
		if (jobs[i]->req != NULL) {
			log_warnx("database connection %d: no row for order "
			    "%d of %d", db->index, i + 1, n);
			break;
		}
	http_job_fail(db->w, job);	/* any left: cannot be */
}

/* The result of job's statement: answer its request(s). */
static void
http_db_answer(struct http_db *db, struct http_job *job, const PGresult *res)
{
	struct http_worker	*w = db->w;
	struct evhttp_request	*req = job->req;

	if (job->nbatch > 1) {
		http_db_answer_batch(db, job, res);
		return;
	}
	if (req == NULL) {		/* our NOTIFY or GIVE_BACK */
		if (PQresultStatus(res) != PGRES_COMMAND_OK)
			http_db_log_result(db, res);
		else if (job->kind == HTTP_JOB_GIVE_BACK) {
			job->given = 1;
			/* 0 rows: its lease ended and a relay took it. */
			if (strcmp(PQcmdTuples((PGresult *)res), "1") == 0)
				log_info("gave back outbox row %" PRId64 ": "
				    "outboxd is stopping and relay 1 will not "
				    "publish it; any relay may now", job->row_id);
		}
		return;
	}
	job->req = NULL;
	if (job->kind == HTTP_JOB_STATS) {
		metrics_outbox_store(res);
		http_stats_reply(w, req, job->route, NULL);
		return;
	}
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		http_db_log_result(db, res);
		if (job->kind == HTTP_JOB_INSERT && http_res_refused(res))
			http_refused(w, req, res);
		else
			http_unavailable(w, req);
		return;
	}
	if (job->kind == HTTP_JOB_GET && PQntuples(res) == 0) {
		http_error(w, req, 404, "not_found", "no order with this id");
		return;
	}
	if (PQntuples(res) != 1 ||
	    PQnfields(res) != (job->handoff ? HTTP_COLS_CLAIMED : 4)) {
		log_warnx("database connection %d: %d rows of %d columns, "
		    "expected 1 of %d", db->index, PQntuples(res),
		    PQnfields(res), job->handoff ? HTTP_COLS_CLAIMED : 4);
		http_unavailable(w, req);
		return;
	}
	http_order_reply(w, req, job->kind == HTTP_JOB_INSERT, res, 0, 0);
}

/*
 * A batch whose statement or commit failed (the server said so: nothing
 * of it was written) goes back to the front of the queue as single
 * orders, each in a transaction of its own, so that one order a user's
 * trigger or constraint refuses does not fail the others with it.  Once:
 * a single order is never batched again.
 */
static void
http_batch_split(struct http_worker *w, struct http_job *job)
{
	static struct log_limit	 split_limit;
	struct http_job		*next, *after = NULL;

	/* As often as a client sends refused orders among others: limited. */
	log_limited(&split_limit, LOG_LEVEL_INFO, "%d orders written together "
	    "failed; writing them one by one", job->nbatch);
	for (; job != NULL; job = next) {
		next = job->next;
		job->next = NULL;
		job->nbatch = 1;
		job->solo = 1;
		job->notify = 0;
		if (job->res != NULL) {
			PQclear(job->res);
			job->res = NULL;
		}
		if (job->req == NULL) {
			http_job_put(w, job);
			continue;
		}
		if (after == NULL)
			TAILQ_INSERT_HEAD(&w->queue, job, entry);
		else
			TAILQ_INSERT_AFTER(&w->queue, after, job, entry);
		after = job;
		w->queued++;
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
 * at the Sync and can still fail there, so a job is answered only at its
 * sync: with its statement's result, or the first error that came after.
 */
static int
http_db_pipeline(struct http_db *db, PGresult *res)
{
	struct http_worker	*w = db->w;
	struct http_job		*job = TAILQ_FIRST(&db->sent);

	if (res == NULL) {
		if (db->phase != HTTP_PHASE_NULL)
			return -1;	/* nothing more has arrived */
		db->phase = HTTP_PHASE_SYNC;
		return 0;
	}
	if (job == NULL) {
		PQclear(res);
		return 0;
	}
	if (PQresultStatus(res) == PGRES_PIPELINE_SYNC) {
		TAILQ_REMOVE(&db->sent, job, entry);
		db->nsent--;
		if (job->res != NULL && job->nbatch > 1 &&
		    http_res_failed(job->res)) {
			/* A refusal is logged when its own order is
			 * refused again, alone. */
			if (!http_res_refused(job->res))
				http_db_log_result(db, job->res);
			http_batch_split(w, job);
			job = NULL;
		} else if (job->res != NULL) {
			/* Committed: hand the row over before the 201 goes
			 * out, so that relay 1 is on its way before the
			 * client wakes; or wake the relays, unless this very
			 * transaction did. */
			if (job->handoff && !http_res_failed(job->res))
				http_handoff(w, job);
			http_db_answer(db, job, job->res);
			if (job->kind == HTTP_JOB_INSERT && !job->handoff &&
			    !job->notify && !http_res_failed(job->res))
				http_notify(w);
		}
		if (job != NULL) {
			/* Whoever is still unanswered (no result at all, or
			 * a batch's row missing) gets a 503. */
			http_job_fail(w, job);
			http_job_put(w, job);
		}
		db->phase = HTTP_PHASE_RESULT;
		/* progress: the watchdog starts again */
		if (db->nsent > 0)
			http_db_arm(db, HTTP_QUERY_WATCHDOG_MS);
		else
			event_del(db->timer);
	} else {
		if (job->res == NULL || (!http_res_failed(job->res) &&
		    http_res_failed(res))) {
			PQclear(job->res);
			job->res = res;
			res = NULL;
		}
		db->phase = HTTP_PHASE_NULL;
	}
	PQclear(res);
	return 0;
}

/* The socket is readable: collect what results have arrived. */
static void
http_db_readable(evutil_socket_t fd, short what, void *arg)
{
	struct http_db	*db = arg;
	PGresult	*res;
	int		 step_done = 0;

	(void)fd;
	(void)what;
	if (!PQconsumeInput(db->pg)) {
		http_db_broken(db, "receive");
		return;
	}
	/* Writing may have waited for the server to read. */
	if (http_db_flush(db) == -1)
		return;
	while (!PQisBusy(db->pg)) {
		res = PQgetResult(db->pg);
		if (db->state == HTTP_DB_READY) {
			if (http_db_pipeline(db, res) == -1)
				break;
			continue;
		}
		if (res == NULL) {
			step_done = db->state == HTTP_DB_SETUP;
			break;
		}
		/* Setup results; anything else is the server saying goodbye
		 * to an idle connection, which the next read reports. */
		if (db->state == HTTP_DB_SETUP) {
			if (PQresultStatus(res) == PGRES_TUPLES_OK &&
			    PQntuples(res) == 1)
				db->w->notify_self =
				    strcmp(PQgetvalue(res, 0, 0), "t") != 0;
			else if (PQresultStatus(res) != PGRES_COMMAND_OK) {
				http_db_log_result(db, res);
				db->step_failed = 1;
			}
		}
		PQclear(res);
	}
	if (PQstatus(db->pg) == CONNECTION_BAD) {
		http_db_broken(db, "connection lost");
		return;
	}
	if (step_done)
		http_db_setup_next(db);
	else
		http_db_fill(db);
}

/* Send the next setup statement, or enter pipeline mode after the last. */
static void
http_db_setup_next(struct http_db *db)
{
	static const Oid	 insert_types[] = { HTTP_OID_TEXT,
				    HTTP_OID_INT8 };
	static const Oid	 get_types[] = { HTTP_OID_UUID };
	static const Oid	 many_types[] = { HTTP_OID_TEXT_ARRAY,
				    HTTP_OID_INT8_ARRAY };
	static const Oid	 claimed_types[] = { HTTP_OID_TEXT,
				    HTTP_OID_INT8, HTTP_OID_INT8, HTTP_OID_INT8 };
	int			 ok;

	if (db->step_failed) {
		http_db_broken(db, "session setup failed");
		return;
	}
	switch (db->step++) {
	case 0:
		ok = PQsendQuery(db->pg, http_sql_session);
		break;
	case 1:
		ok = PQsendPrepare(db->pg, HTTP_STMT_INSERT, http_sql_insert,
		    2, insert_types);
		break;
	case 2:
		ok = PQsendPrepare(db->pg, HTTP_STMT_GET, http_sql_get, 1,
		    get_types);
		break;
	case 3:
		ok = PQsendQuery(db->pg, http_sql_trigger);
		break;
	case 4:
		ok = PQsendPrepare(db->pg, HTTP_STMT_INSERT_MANY,
		    http_sql_insert_many, 2, many_types);
		break;
	case 5:
		ok = PQsendPrepare(db->pg, HTTP_STMT_INSERT_CLAIMED,
		    http_sql_insert_claimed, 4, claimed_types);
		break;
	default:
		if (!PQenterPipelineMode(db->pg)) {
			http_db_broken(db, "pipeline mode");
			return;
		}
		if (db->backoff > HTTP_BACKOFF_MIN_MS)
			log_info("database connection %d: ready", db->index);
		db->backoff = HTTP_BACKOFF_MIN_MS;
		db->state = HTTP_DB_READY;
		db->phase = HTTP_PHASE_RESULT;
		event_del(db->timer);
		http_db_fill(db);
		return;
	}
	if (!ok) {
		http_db_broken(db, "setup");
		return;
	}
	http_db_flush(db);
}

/* A connected PGconn (db_connect() or PQconnectPoll): make it ours. */
static int
http_db_attach(struct http_db *db)
{
	struct http_worker	*w = db->w;
	evutil_socket_t		 fd = PQsocket(db->pg);

	if (fd < 0 || PQsetnonblocking(db->pg, 1) != 0)
		return -1;
	PQsetNoticeProcessor(db->pg, http_db_notice, db);
	event_del(db->rev);
	event_del(db->wev);
	event_assign(db->rev, w->base, fd, EV_READ | EV_PERSIST,
	    http_db_readable, db);
	event_assign(db->wev, w->base, fd, EV_WRITE, http_db_writable, db);
	if (event_add(db->rev, NULL) == -1)
		return -1;
	db->state = HTTP_DB_SETUP;
	db->step = 0;
	db->step_failed = 0;
	w->nup++;
	http_db_arm(db, HTTP_CONNECT_TIMEOUT_MS);
	http_db_setup_next(db);
	return 0;
}

/*
 * The connection failed: answer its requests 503, close it and try again
 * after the backoff (HTTP_BACKOFF_MIN_MS doubling to HTTP_BACKOFF_MAX_MS).
 * A statement in flight may or may not have committed; the client is told
 * the database was unavailable either way.  With no connection left,
 * queued requests are answered 503 at once rather than waiting for a
 * server that is not there.
 */
static void
http_db_fail(struct http_db *db, const char *what, const char *why)
{
	struct http_worker	*w = db->w;
	struct http_job		*job;
	char			 buf[512];

	db_errline(buf, sizeof(buf), why);
	/* Once per outage; the attempts that follow only at debug level. */
	if (db->backoff == HTTP_BACKOFF_MIN_MS)
		log_warnx("database connection %d: %s: %s; retrying in %ld ms",
		    db->index, what, buf, db->backoff);
	else
		log_debug("database connection %d: %s: %s; retrying in %ld ms",
		    db->index, what, buf, db->backoff);
	while ((job = TAILQ_FIRST(&db->sent)) != NULL) {
		TAILQ_REMOVE(&db->sent, job, entry);
		http_job_fail(w, job);
		http_job_put(w, job);
	}
	db->nsent = 0;
	if (db->state == HTTP_DB_SETUP || db->state == HTTP_DB_READY)
		w->nup--;
	http_db_close(db);
	db->state = HTTP_DB_DOWN;
	http_db_arm(db, db->backoff);
	db->backoff *= 2;
	if (db->backoff > HTTP_BACKOFF_MAX_MS)
		db->backoff = HTTP_BACKOFF_MAX_MS;
	if (w->nup == 0)
		http_queue_fail(w);
}

/* http_db_fail() with libpq's message of the connection. */
static void
http_db_broken(struct http_db *db, const char *what)
{
	http_db_fail(db, what, db->pg != NULL ? PQerrorMessage(db->pg) : NULL);
}

/* The one timer: reconnect when down; give up on a connect, a setup or a
 * pipeline that makes no progress. */
static void
http_db_timer(evutil_socket_t fd, short what, void *arg)
{
	struct http_db	*db = arg;

	(void)fd;
	(void)what;
	switch (db->state) {
	case HTTP_DB_DOWN:
		http_db_connect(db);
		break;
	case HTTP_DB_CONNECTING:	/* db_connecting_start()'s deadline */
		break;
	case HTTP_DB_SETUP:
		http_db_broken(db, "connect timed out");
		break;
	case HTTP_DB_READY:
		if (db->nsent > 0)
			http_db_broken(db, "no answer from the server");
		break;
	}
}

/* db_connecting_start()'s answer. */
static void
http_db_connected(PGconn *pg, int timed_out, const char *err, void *arg)
{
	struct http_db	*db = arg;

	db->connecting = NULL;
	if (pg == NULL) {
		http_db_fail(db, timed_out ? "connect timed out" : "connect",
		    err);
		return;
	}
	db->pg = pg;
	if (http_db_attach(db) == -1)
		http_db_broken(db, "attach");
}

/*
 * Start an asynchronous reconnect (db_connecting_start()) with the session
 * settings of db_connect(): a blocking connect would stall every request
 * of this worker while the server is away.
 */
static void
http_db_connect(struct http_db *db)
{
	char	err[512];

	if ((db->connecting = db_connecting_start(db->w->base,
	    db->w->conf->database, "http", HTTP_CONNECT_TIMEOUT_MS,
	    http_db_connected, db, err, sizeof(err))) == NULL) {
		http_db_fail(db, "connect", err);
		return;
	}
	db->state = HTTP_DB_CONNECTING;
}

/*
 * The two array parameters of http_sql_insert_many for job's batch, as
 * text[] and int8[] literals: each customer id double-quoted, with '"'
 * and '\\' escaped (PostgreSQL manual 8.15.6, array value input).
 */
static void
http_batch_arrays(const struct http_job *job, char *ids, char *amounts)
{
	const char	*c;

	*ids++ = '{';
	*amounts++ = '{';
	for (; job != NULL; job = job->next) {
		*ids++ = '"';
		for (c = job->in.customer_id; *c != '\0'; c++) {
			if (*c == '"' || *c == '\\')
				*ids++ = '\\';
			*ids++ = *c;
		}
		*ids++ = '"';
		amounts = stpcpy(amounts, job->amount);
		if (job->next != NULL) {
			*ids++ = ',';
			*amounts++ = ',';
		}
	}
	memcpy(ids, "}", 2);
	memcpy(amounts, "}", 2);
}

/* Append job's statement and a Sync to db's pipeline. */
static void
http_db_run(struct http_db *db, struct http_job *job)
{
	/* Every id escaped and quoted, every amount, and a comma each. */
	static char	 ids[HTTP_BATCH_MAX * (2 * ORDER_CUSTOMER_ID_MAX + 3) + 3];
	static char	 amounts[HTTP_BATCH_MAX * 22 + 3];
	const char	*values[4];
	char		 claim[24], lease[24], row[24];
	int		 ok;

	TAILQ_INSERT_TAIL(&db->sent, job, entry);
	if (db->nsent++ == 0)
		http_db_arm(db, HTTP_QUERY_WATCHDOG_MS);
	if (job->kind == HTTP_JOB_INSERT && job->nbatch > 1) {
		/* libpq copies the values into its buffer at once. */
		http_batch_arrays(job, ids, amounts);
		log_debug("database connection %d: %d orders in one "
		    "statement", db->index, job->nbatch);
		values[0] = ids;
		values[1] = amounts;
		ok = PQsendQueryPrepared(db->pg, HTTP_STMT_INSERT_MANY, 2,
		    values, NULL, NULL, 0);
	} else if (job->kind == HTTP_JOB_INSERT && http_handoff_claim(db->w)) {
		/* The first order after a quiet spell: written claimed and
		 * handed to relay 1 after its commit (http_handoff()). */
		job->handoff = 1;
		job->handoff_claim = claim_token();
		job->handoff_us = clock_mono_us();
		snprintf(claim, sizeof(claim), "%" PRId64, job->handoff_claim);
		snprintf(lease, sizeof(lease), "%ld", db->w->conf->relay.lease);
		values[0] = job->in.customer_id;
		values[1] = job->amount;
		values[2] = claim;
		values[3] = lease;
		ok = PQsendQueryPrepared(db->pg, HTTP_STMT_INSERT_CLAIMED, 4,
		    values, NULL, NULL, 0);
	} else if (job->kind == HTTP_JOB_INSERT) {
		values[0] = job->in.customer_id;
		values[1] = job->amount;
		ok = PQsendQueryPrepared(db->pg, HTTP_STMT_INSERT, 2, values,
		    NULL, NULL, 0);
	} else if (job->kind == HTTP_JOB_GET) {
		values[0] = job->id;
		ok = PQsendQueryPrepared(db->pg, HTTP_STMT_GET, 1, values,
		    NULL, NULL, 0);
	} else if (job->kind == HTTP_JOB_STATS)
		ok = PQsendQueryParams(db->pg, metrics_outbox_sql, 0, NULL,
		    NULL, NULL, NULL, 0);
	else if (job->kind == HTTP_JOB_GIVE_BACK) {
		/* A handed-off row nobody will read (http_give_back()). */
		snprintf(row, sizeof(row), "{%" PRId64 "}", job->row_id);
		snprintf(claim, sizeof(claim), "{%" PRId64 "}",
		    job->handoff_claim);
		values[0] = row;
		values[1] = claim;
		ok = PQsendQueryParams(db->pg, claim_give_back_sql, 2, NULL,
		    values, NULL, NULL, 0);
	} else
		ok = PQsendQueryParams(db->pg, http_sql_notify, 0, NULL, NULL,
		    NULL, NULL, 0);
	/* The first order after a quiet spell carries the NOTIFY in its own
	 * transaction: the relays hear of it at its commit, one round trip
	 * sooner than from a NOTIFY sent after it (http_notify_send()). */
	if (ok && job->kind == HTTP_JOB_INSERT && !job->handoff &&
	    http_notify_claim(db->w)) {
		job->notify = 1;
		ok = PQsendQueryParams(db->pg, http_sql_notify, 0, NULL, NULL,
		    NULL, NULL, 0);
	}
	/* PQpipelineSync also pushes the bytes out, as far as the socket
	 * takes them. */
	if (!ok || !PQpipelineSync(db->pg)) {
		http_db_broken(db, "send");
		return;
	}
	http_db_flush(db);
}

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
http_notify_send(struct http_worker *w)
{
	struct http_db	*db, *best = NULL;
	struct http_job	*job;
	struct timeval	 tv = clock_tv(HTTP_NOTIFY_MS);
	int		 i;

	w->notify_dirty = 0;
	event_add(w->notify_ev, &tv);
	for (i = 0; i < w->ndb; i++) {
		db = &w->dbs[i];
		if (db->state == HTTP_DB_READY &&
		    db->nsent < HTTP_PIPELINE_DEPTH &&
		    (best == NULL || db->nsent < best->nsent))
			best = db;
	}
	if (best == NULL || (job = http_job_get(w)) == NULL) {
		w->notify_dirty = 1;	/* at the end of the window */
		return;
	}
	job->kind = HTTP_JOB_NOTIFY;
	job->req = NULL;
	http_db_run(best, job);
}

/* Open the NOTIFY window (HTTP_NOTIFY_MS) unless one is open: 1 if this
 * call opened it, for the order that comes after a quiet spell. */
static int
http_window_open(struct http_worker *w)
{
	struct timeval	tv = clock_tv(HTTP_NOTIFY_MS);

	if (event_pending(w->notify_ev, EV_TIMEOUT, NULL))
		return 0;
	w->notify_dirty = 0;
	event_add(w->notify_ev, &tv);
	return 1;
}

/*
 * May this order be written claimed and handed to relay 1?  Only the
 * first after a quiet spell, like the NOTIFY it replaces (it opens the
 * same window): under load the relays' own claims take many rows a
 * statement and spread them over every relay, while a handed-off row
 * costs relay 1 a publish of its own.  Not while stopping: relay 1 may
 * be gone before the commit.
 */
static int
http_handoff_claim(struct http_worker *w)
{
	return !w->stopping && w->conf->relay.handoff &&
	    w->conf->relay.workers > 0 && handoff_can_send() &&
	    http_window_open(w);
}

/* job's order committed with its outbox row claimed: hand the row to
 * relay 1.  A row the socket does not take stays claimed until its lease
 * ends, then any relay publishes it. */
static void
http_handoff(struct http_worker *w, struct http_job *job)
{
	static struct log_limit	 limit;
	const PGresult		*res = job->res;
	struct claimed_row	 row;

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
		http_give_back(w, row.id, row.claim);
		return;
	}
	metrics_handoff(0, 1);
	log_limited(&limit, LOG_LEVEL_WARN, "could not hand outbox row %"
	    PRId64 " to relay 1 (%s): it is published when its lease ends "
	    "(relay.lease)", row.id, errno == EAGAIN ? "relay 1 is not "
	    "reading" : strerror(errno));
}

/*
 * An order whose row was written claimed for relay 1 committed after
 * outboxd began to stop: the socket is shut (handoff_shut()), nobody will
 * read the row, and it would wait for its lease (relay.lease), after the
 * restart that usually follows a stop.  Give it back instead: free for
 * any relay's claim.  The job goes to the head of the queue, before the
 * requests, so that a worker the master kills at shutdown_timeout has sent
 * it: http_db_fill() sends it once the result processing that called this
 * is over (never from inside it).  The worker does not leave before it is
 * answered (http_job_put()).
 */
static void
http_give_back(struct http_worker *w, int64_t id, int64_t claim)
{
	struct http_job	*job;

	if ((job = http_job_get(w)) == NULL) {
		http_give_back_lost(id);
		return;
	}
	job->kind = HTTP_JOB_GIVE_BACK;
	job->req = NULL;
	job->given = 0;
	job->row_id = id;
	job->handoff_claim = claim;
	TAILQ_INSERT_HEAD(&w->queue, job, entry);
	w->queued++;
	w->giving_back++;
}

/* May an order's transaction carry a NOTIFY now?  Only when no window is
 * open; then this opens one, as a NOTIFY sent on its own would. */
static int
http_notify_claim(struct http_worker *w)
{
	return w->notify_self && http_window_open(w);
}

static void
http_notify_window(evutil_socket_t fd, short what, void *arg)
{
	struct http_worker	*w = arg;

	(void)fd;
	(void)what;
	if (w->notify_dirty)
		http_notify_send(w);
}

/* An order committed.  The NOTIFY leaves from the loop, never from
 * inside a connection's result processing. */
static void
http_notify(struct http_worker *w)
{
	if (!w->notify_self)
		return;
	w->notify_dirty = 1;
	if (!event_pending(w->notify_ev, EV_TIMEOUT, NULL))
		event_active(w->notify_ev, EV_TIMEOUT, 1);
}

/* ---- routes ----------------------------------------------------------- */

/* "application/json", any case, parameters allowed (RFC 9110 8.3.1). */
static int
http_is_json(const char *v)
{
	size_t	n;

	v += strspn(v, " \t");
	n = strcspn(v, "; \t");
	if (n != 16 || strncasecmp(v, "application/json", 16) != 0)
		return 0;
	v += n;
	v += strspn(v, " \t");
	return *v == '\0' || *v == ';';
}

static void
http_order_create(struct http_worker *w, struct evhttp_request *req)
{
	struct evbuffer		*body = evhttp_request_get_input_buffer(req);
	size_t			 len = evbuffer_get_length(body);
	const char		*ct;
	struct order_error	 oe;
	struct http_job		*job;
	char			 msg[128];

	if (len > w->max_body) {
		snprintf(msg, sizeof(msg), "request body is larger than %zu "
		    "bytes", w->max_body);
		http_error(w, req, 413, "body_too_large", msg);
		return;
	}
	ct = evhttp_find_header(evhttp_request_get_input_headers(req),
	    "Content-Type");
	if (ct != NULL && !http_is_json(ct)) {
		http_error(w, req, 415, "unsupported_media_type",
		    "Content-Type must be application/json");
		return;
	}
	if ((job = http_job_get(w)) == NULL) {
		http_error(w, req, 503, "out_of_memory", "out of memory");
		return;
	}
	if (order_parse((const char *)evbuffer_pullup(body, -1), len,
	    &job->in, &oe) == -1) {
		http_job_put(w, job);
		http_error(w, req, 400, oe.code, oe.message);
		return;
	}
	snprintf(job->amount, sizeof(job->amount), "%" PRId64,
	    job->in.amount_cents);
	job->kind = HTTP_JOB_INSERT;
	job->req = req;
	http_job_submit(w, job);
}

static void
http_order_get(struct http_worker *w, struct evhttp_request *req,
    const char *id)
{
	struct http_job	*job;

	/* Not an id: no such order, and no reason to ask the database. */
	if (!order_uuid_valid(id, strlen(id))) {
		http_error(w, req, 404, "not_found", "no order with this id");
		return;
	}
	if ((job = http_job_get(w)) == NULL) {
		http_error(w, req, 503, "out_of_memory", "out of memory");
		return;
	}
	memcpy(job->id, id, ORDER_UUID_LEN + 1);
	job->kind = HTTP_JOB_GET;
	job->req = req;
	http_job_submit(w, job);
}

/*
 * GET /metrics and GET /readyz: the counters are in shared memory; the
 * outbox figures behind them are read again (one statement through the
 * pipeline, like an order) when older than METRICS_CACHE_MS.  With no
 * database connection up, /metrics still answers (last known figures,
 * outboxd_database_up 0) and /readyz says why it is not ready.
 */
static void
http_stats_reply(struct http_worker *w, struct evhttp_request *req,
    int route, const char *db_down)
{
	struct evkeyvalq	*h = evhttp_request_get_output_headers(req);
	char			*text;
	size_t			 len;
	int			 code;

	evhttp_add_header(h, "Cache-Control", "no-store");
	if (route == METRICS_ROUTE_METRICS) {
		if ((text = metrics_render(&len)) == NULL) {
			http_error(w, req, 503, "out_of_memory",
			    "out of memory");
			return;
		}
		evhttp_add_header(h, "Content-Type", METRICS_CONTENT_TYPE);
		http_send(w, req, 200, text, len);
		free(text);
		return;
	}
	if ((code = metrics_ready(http_out, sizeof(http_out), db_down,
	    &len)) == -1) {
		http_error(w, req, 503, "internal_error", "readiness");
		return;
	}
	http_send(w, req, code, http_out, len);
}

static void
http_stats(struct http_worker *w, struct evhttp_request *req, int route)
{
	struct http_job	*job;

	if (w->nup == 0) {
		metrics_outbox_down("no connection to PostgreSQL "
		    "(reconnecting)");
		http_stats_reply(w, req, route, "no connection to PostgreSQL "
		    "(reconnecting)");
		return;
	}
	if (metrics_outbox_fresh() || (job = http_job_get(w)) == NULL) {
		http_stats_reply(w, req, route, NULL);
		return;
	}
	job->kind = HTTP_JOB_STATS;
	job->route = route;
	job->req = req;
	http_job_submit(w, job);
}

/* Every request evhttp has read completely comes here. */
static void
http_request(struct evhttp_request *req, void *arg)
{
	static const char	 ok[] = "{\"status\":\"ok\"}";
	struct http_worker	*w = arg;
	struct http_conn	*c;
	const struct evhttp_uri	*uri;
	const char		*path = NULL;
	enum evhttp_cmd_type	 m = evhttp_request_get_command(req);
	int			 get = m == EVHTTP_REQ_GET ||
				    m == EVHTTP_REQ_HEAD;

	w->inflight++;
	if ((c = http_conn_of(w, req)) != NULL) {
		/* What the input holds now is the next request's. */
		c->busy++;
		c->pending = evbuffer_get_length(bufferevent_get_input(
		    c->bev));
		c->started = http_now();
	}
	if ((uri = evhttp_request_get_evhttp_uri(req)) != NULL)
		path = evhttp_uri_get_path(uri);
	if (path == NULL)
		path = "";
	http_timing_start(req, http_route(path));

	if (strcmp(path, "/orders") == 0) {
		if (m != EVHTTP_REQ_POST)
			http_bad_method(w, req, "POST");
		else
			http_order_create(w, req);
	} else if (strncmp(path, "/orders/", 8) == 0 && path[8] != '\0' &&
	    strchr(path + 8, '/') == NULL) {
		if (!get)
			http_bad_method(w, req, "GET, HEAD");
		else
			http_order_get(w, req, path + 8);
	} else if (strcmp(path, "/healthz") == 0) {
		if (!get)
			http_bad_method(w, req, "GET, HEAD");
		else
			http_send(w, req, 200, ok, sizeof(ok) - 1);
	} else if (strcmp(path, "/readyz") == 0 ||
	    strcmp(path, "/metrics") == 0) {
		if (!get)
			http_bad_method(w, req, "GET, HEAD");
		else
			http_stats(w, req, http_route(path));
	} else
		http_not_found(w, req);
}

/* ---- the size guard on each connection ------------------------------- */

/* evhttp is done with the connection (or we are): forget it. */
/*
 * The guarded connection a request came on, or NULL (the client left).
 * A linear search: a worker holds few connections that send requests.
 */
static struct http_conn *
http_conn_of(struct http_worker *w, struct evhttp_request *req)
{
	struct evhttp_connection	*evcon;
	struct http_conn		*c;

	if ((evcon = evhttp_request_get_connection(req)) == NULL)
		return NULL;
	TAILQ_FOREACH(c, &w->conns, entry)
		if (c->evcon == evcon)
			return c;
	return NULL;
}

static void
http_conn_closed(struct evhttp_connection *evcon, void *arg)
{
	struct http_conn	*c = arg;

	(void)evcon;
	if (c->fix_ev != NULL)
		event_free(c->fix_ev);
	evbuffer_remove_cb_entry(bufferevent_get_input(c->bev), c->in_cb);
	evbuffer_remove_cb_entry(bufferevent_get_output(c->bev), c->out_cb);
	TAILQ_REMOVE(&c->w->conns, c, entry);
	free(c);
}

/* Hand the connection back to evhttp to be freed; c goes with it. */
static void
http_conn_finish(struct http_conn *c)
{
	evhttp_connection_free(c->evcon);
}

static int
http_conn_linger_over(const struct http_conn *c)
{
	struct timespec	now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return now.tv_sec > c->linger_until.tv_sec ||
	    (now.tv_sec == c->linger_until.tv_sec &&
	    now.tv_nsec >= c->linger_until.tv_nsec);
}

static void
http_conn_linger_read(struct bufferevent *bev, void *arg)
{
	struct http_conn	*c = arg;
	struct evbuffer		*in = bufferevent_get_input(bev);

	evbuffer_drain(in, evbuffer_get_length(in));
	if (http_conn_linger_over(c))
		http_conn_finish(c);
}

/* The refusal is written: say so with a FIN, keep reading till the
 * client closes. */
static void
http_conn_linger_write(struct bufferevent *bev, void *arg)
{
	struct http_conn	*c = arg;

	if (c->eof) {
		http_conn_finish(c);
		return;
	}
	(void)shutdown(bufferevent_getfd(bev), SHUT_WR);
}

static void
http_conn_linger_event(struct bufferevent *bev, short what, void *arg)
{
	struct http_conn	*c = arg;

	if ((what & BEV_EVENT_EOF) && (what & BEV_EVENT_READING) &&
	    evbuffer_get_length(bufferevent_get_output(bev)) > 0) {
		c->eof = 1;	/* still writing the answer */
		return;
	}
	http_conn_finish(c);
}

/*
 * Take the connection from evhttp and answer it ourselves: the request is
 * too large or too slow and evhttp's answer would be HTML.  evhttp has not
 * shown this request to the handler (reading stops while a handler owns
 * one), so nobody else holds it.
 */
static void
http_conn_refuse(struct http_conn *c, int status, const char *reason,
    const char *code, const char *message)
{
	struct evbuffer	*in = bufferevent_get_input(c->bev);
	struct evbuffer	*out = bufferevent_get_output(c->bev);
	struct timeval	 tv = clock_tv(HTTP_LINGER_MS);
	char		*body;

	log_debug("refused a request: %s", code);
	c->refusing = 1;
	bufferevent_setcb(c->bev, http_conn_linger_read,
	    http_conn_linger_write, http_conn_linger_event, c);
	evbuffer_drain(in, evbuffer_get_length(in));
	body = order_error_json(code, message);
	evbuffer_add_printf(out, "HTTP/1.1 %d %s\r\n"
	    "Content-Type: application/json\r\n"
	    "Content-Length: %zu\r\n"
	    "Connection: close\r\n\r\n%s", status, reason,
	    body != NULL ? strlen(body) : 0, body != NULL ? body : "");
	free(body);
	clock_gettime(CLOCK_MONOTONIC, &c->linger_until);
	c->linger_until.tv_sec += HTTP_LINGER_MS / 1000;
	c->linger_until.tv_nsec += (HTTP_LINGER_MS % 1000) * 1000000L;
	if (c->linger_until.tv_nsec >= 1000000000L) {
		c->linger_until.tv_sec++;
		c->linger_until.tv_nsec -= 1000000000L;
	}
	bufferevent_set_timeouts(c->bev, &tv, &tv);
	bufferevent_enable(c->bev, EV_READ | EV_WRITE);
}

/* n more bytes of the request being received arrived. */
static void
http_conn_count(struct http_conn *c, size_t n)
{
	time_t			 now = http_now();

	if (c->pending == 0)
		c->started = now;
	c->pending += n;
	/*
	 * The input may hold pipelined requests that evhttp has not parsed
	 * yet, and taking the connection over from evhttp then crashed it
	 * (a deferred read still pending): sizes are left to evhttp's own
	 * limits (evhttp_set_max_body_size/_headers_size), whose HTML pages
	 * http_conn_fix() turns into JSON.  Only a request that trickles in
	 * for too long, with nothing of ours in flight, is cut here.
	 */
	if (c->busy == 0 && now - c->started > HTTP_REQUEST_TIMEOUT_S)
		http_conn_refuse(c, 408, "Request Timeout",
		    "request_timeout", "the request took too long to send");
}

static void
http_conn_input(struct evbuffer *buf, const struct evbuffer_cb_info *info,
    void *arg)
{
	struct http_conn	*c = arg;

	(void)buf;
	if (!c->refusing && info->n_added > 0)
		http_conn_count(c, info->n_added);
}

/* Code and message for a status evhttp answers on its own. */
static void
http_status_error(int status, const char **code, const char **message)
{
	switch (status) {
	case 400:
		*code = "bad_request";
		*message = "the request is not valid HTTP";
		return;
	case 413:
		*code = "body_too_large";
		*message = NULL;	/* says the limit */
		return;
	case 417:
		*code = "expectation_failed";
		*message = "only Expect: 100-continue is supported";
		return;
	case 501:
		*code = "not_implemented";
		*message = "this HTTP method is not supported";
		return;
	}
	*code = status < 500 ? "bad_request" : "internal_error";
	*message = "the request could not be handled";
}

/*
 * Runs right after evhttp has queued an error page of its own and before
 * the loop writes a byte of it (the socket is written only when its write
 * event fires): swap the page for {"error", "message"} with the same status
 * line.  evhttp still closes the connection afterwards, as it asked.
 */
static void
http_conn_fix(evutil_socket_t fd, short what, void *arg)
{
	struct http_conn	*c = arg;
	struct evbuffer		*out = bufferevent_get_output(c->bev);
	struct evbuffer		*keep = NULL;
	struct evbuffer_ptr	 at;
	const char		*code, *message;
	char			 line[128], msg[128], *eol, *body;
	size_t			 len = evbuffer_get_length(out), n;
	int			 status;

	(void)fd;
	(void)what;
	if (c->refusing || c->fix_from >= len ||
	    evbuffer_ptr_set(out, &at, c->fix_from, EVBUFFER_PTR_SET) == -1)
		return;
	n = evbuffer_copyout_from(out, &at, line, sizeof(line) - 1);
	line[n == (size_t)-1 ? 0 : n] = '\0';
	/* "HTTP/1.x NNN Reason\r\n" */
	if ((eol = strstr(line, "\r\n")) == NULL || eol - line < 13)
		return;
	*eol = '\0';
	status = atoi(line + 9);
	http_status_error(status, &code, &message);
	if (message == NULL) {
		snprintf(msg, sizeof(msg), "request body is larger than %zu "
		    "bytes", c->w->max_body);
		message = msg;
	}
	if ((body = order_error_json(code, message)) == NULL)
		return;
	c->fixing = 1;
	if (c->fix_from > 0 && ((keep = evbuffer_new()) == NULL ||
	    evbuffer_remove_buffer(out, keep, c->fix_from) == -1)) {
		if (keep != NULL)
			evbuffer_free(keep);
		c->fixing = 0;
		free(body);
		return;
	}
	evbuffer_drain(out, evbuffer_get_length(out));
	evbuffer_add_printf(out, "%s\r\nContent-Type: application/json\r\n"
	    "Content-Length: %zu\r\nConnection: close\r\n\r\n%s", line,
	    strlen(body), body);
	if (keep != NULL) {
		evbuffer_prepend_buffer(out, keep);
		evbuffer_free(keep);
	}
	c->fixing = 0;
	free(body);
	log_debug("answered an evhttp error page in JSON: %d", status);
}

/* An answer is being written, so the request before it is complete: what
 * the input holds now is the start of the next one. */
static void
http_conn_output(struct evbuffer *buf, const struct evbuffer_cb_info *info,
    void *arg)
{
	struct http_conn	*c = arg;
	struct evbuffer_ptr	 at;
	char			 head[13];

	if (c->refusing || c->fixing || info->n_added == 0)
		return;
	c->pending = evbuffer_get_length(bufferevent_get_input(c->bev));
	if (c->pending > 0)
		c->started = http_now();
	/* Our answers go out inside http_send(); anything else starting
	 * with a status line is evhttp answering on its own: 100 Continue,
	 * or an HTML error page to replace once it is complete. */
	if (c->w->replying || c->fix_ev == NULL ||
	    event_pending(c->fix_ev, EV_TIMEOUT, NULL) ||
	    evbuffer_ptr_set(buf, &at, info->orig_size, EVBUFFER_PTR_SET) ==
	    -1 || evbuffer_copyout_from(buf, &at, head, sizeof(head) - 1) !=
	    sizeof(head) - 1)
		return;
	head[sizeof(head) - 1] = '\0';
	if (strncmp(head, "HTTP/1.", 7) != 0 || head[9] < '4')
		return;
	c->fix_from = info->orig_size;
	event_active(c->fix_ev, EV_TIMEOUT, 1);
}

/*
 * First bytes on a new connection.  evhttp has set its callbacks on the
 * bufferevent by now, with the connection as their argument (libevent 2.1
 * http.c, evhttp_start_read_): that gives the connection whose close
 * callback frees the guard.  Connections that never send a byte cost
 * nothing.
 */
static void
http_conn_first(struct evbuffer *buf, const struct evbuffer_cb_info *info,
    void *arg)
{
	struct bufferevent	*bev = arg;
	struct http_conn	*c;
	bufferevent_data_cb	 rcb, wcb;
	bufferevent_event_cb	 ecb;
	void			*cbarg;

	if (info->n_added == 0)
		return;
	bufferevent_getcb(bev, &rcb, &wcb, &ecb, &cbarg);
	if (cbarg == NULL || evhttp_connection_get_bufferevent(cbarg) != bev)
		return;
	if ((c = calloc(1, sizeof(*c))) == NULL)
		return;		/* try again with the next bytes */
	c->w = http_self;
	c->bev = bev;
	c->evcon = cbarg;
	c->fix_ev = event_new(c->w->base, -1, 0, http_conn_fix, c);
	c->in_cb = evbuffer_add_cb(buf, http_conn_input, c);
	c->out_cb = evbuffer_add_cb(bufferevent_get_output(bev),
	    http_conn_output, c);
	if (c->fix_ev == NULL || c->in_cb == NULL || c->out_cb == NULL) {
		if (c->fix_ev != NULL)
			event_free(c->fix_ev);
		if (c->in_cb != NULL)
			evbuffer_remove_cb_entry(buf, c->in_cb);
		if (c->out_cb != NULL)
			evbuffer_remove_cb_entry(bufferevent_get_output(bev),
			    c->out_cb);
		free(c);
		return;
	}
	TAILQ_INSERT_TAIL(&c->w->conns, c, entry);
	evhttp_connection_set_closecb(c->evcon, http_conn_closed, c);
	evbuffer_remove_cb(buf, http_conn_first, bev);
	http_conn_count(c, info->n_added);
}

/* evhttp_set_bevcb: the bufferevent of each accepted connection. */
static struct bufferevent *
http_conn_new(struct event_base *base, void *arg)
{
	struct bufferevent	*bev;

	(void)arg;
	if ((bev = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE)) ==
	    NULL)
		return NULL;
	if (evbuffer_add_cb(bufferevent_get_input(bev), http_conn_first,
	    bev) == NULL) {
		bufferevent_free(bev);
		return NULL;
	}
	return bev;
}

/* ---- the worker ------------------------------------------------------- */

/* SIGTERM: stop accepting (the other workers go on accepting on
 * the shared socket), answer what is in hand, then leave the loop. */
static void
http_drained(evutil_socket_t fd, short what, void *arg)
{
	struct http_worker	*w = arg;

	(void)fd;
	(void)what;
	w->drained = 1;
	http_maybe_exit(w);
}

static void
http_on_stop(void *arg, int deadline)
{
	struct http_worker	*w = arg;

	(void)deadline;		/* requests are short: no give-up */
	if (w->stopping)
		return;
	w->stopping = 1;
	/* Disabled, not closed: the other workers go on accepting on the
	 * shared socket; evhttp_free() closes our duplicate at exit. */
	if (w->bound != NULL)
		evconnlistener_disable(evhttp_bound_socket_get_listener(
		    w->bound));
	log_info("stopping: %d requests in progress", w->inflight);
	/*
	 * A connection accepted just before the stop may not have sent its
	 * request yet, and one whose request is read in this very loop
	 * pass is not counted yet: give them HTTP_DRAIN_MS to get in
	 * (answered with "Connection: close") before leaving.
	 */
	{
		struct timeval	tv = clock_tv(HTTP_DRAIN_MS);

		w->drain_ev = evtimer_new(w->base, http_drained, w);
		if (w->drain_ev == NULL || evtimer_add(w->drain_ev, &tv) == -1)
			w->drained = 1;
	}
	http_maybe_exit(w);
}

static void
http_worker_free(struct http_worker *w)
{
	struct http_job	*job;
	int		 i;

	/* Frees every connection: their guards go with them. */
	if (w->http != NULL)
		evhttp_free(w->http);
	for (i = 0; i < w->ndb && w->dbs != NULL; i++) {
		struct http_db	*db = &w->dbs[i];

		while ((job = TAILQ_FIRST(&db->sent)) != NULL) {
			TAILQ_REMOVE(&db->sent, job, entry);
			free(job);
		}
		if (db->rev != NULL)
			event_del(db->rev);
		if (db->wev != NULL)
			event_del(db->wev);
		if (db->timer != NULL)
			event_del(db->timer);
		if (db->pg != NULL)
			PQfinish(db->pg);
		db_connecting_cancel(db->connecting);
		if (db->rev != NULL)
			event_free(db->rev);
		if (db->wev != NULL)
			event_free(db->wev);
		if (db->timer != NULL)
			event_free(db->timer);
	}
	free(w->dbs);
	if (w->notify_ev != NULL)
		event_free(w->notify_ev);
	if (w->drain_ev != NULL)
		event_free(w->drain_ev);
	while ((job = TAILQ_FIRST(&w->queue)) != NULL) {
		TAILQ_REMOVE(&w->queue, job, entry);
		free(job);
	}
	while ((job = TAILQ_FIRST(&w->spare)) != NULL) {
		TAILQ_REMOVE(&w->spare, job, entry);
		free(job);
	}
	if (w->base != NULL)
		event_base_free(w->base);
	http_self = NULL;
}

/* Open the pool (blocking, at start only) and begin each setup. */
static int
http_worker_db(struct http_worker *w)
{
	char	err[1024];
	int	i;

	w->ndb = w->conf->http.db_connections > 0 ?
	    w->conf->http.db_connections : 1;
	if ((w->dbs = calloc(w->ndb, sizeof(*w->dbs))) == NULL) {
		log_warn("calloc");
		return -1;
	}
	for (i = 0; i < w->ndb; i++) {
		struct http_db	*db = &w->dbs[i];

		db->w = w;
		db->index = i;
		TAILQ_INIT(&db->sent);
		db->backoff = HTTP_BACKOFF_MIN_MS;
		db->rev = event_new(w->base, -1, 0, NULL, NULL);
		db->wev = event_new(w->base, -1, 0, NULL, NULL);
		db->timer = evtimer_new(w->base, http_db_timer, db);
		if (db->rev == NULL || db->wev == NULL || db->timer == NULL) {
			log_warnx("event_new failed");
			return -1;
		}
	}
	for (i = 0; i < w->ndb; i++) {
		struct http_db	*db = &w->dbs[i];

		db->pg = db_connect(w->conf->database, "http", err,
		    sizeof(err));
		if (db->pg == NULL) {
			log_error("database: %s", err);
			return -1;
		}
		if (http_db_attach(db) == -1) {
			log_error("database connection %d: cannot use it: %s",
			    i, db_errline(err, sizeof(err),
			    PQerrorMessage(db->pg)));
			return -1;
		}
	}
	return 0;
}

/*
 * Run HTTP worker index on the master's listening socket listen_fd
 * (already listening and non-blocking; shared with the other HTTP
 * workers, left open for the caller) until SIGTERM and the drain
 * that follows.  Opens conf->http.db_connections PostgreSQL connections
 * with db_connect() first.  Returns the exit status: 0 after a graceful
 * stop, 1 if the worker could not start (no database, no memory), so the
 * master respawns it with backoff.  Source: libevent 2.1 evhttp and
 * bufferevent, libpq asynchronous command processing.
 */
int
http_worker_main(struct conf *conf, int listen_fd, int index)
{
	struct http_worker	 w;
	int			 fd;

	log_init("http", index);
	proc_set_title("outboxd: http %d", index);
	memset(&w, 0, sizeof(w));
	w.conf = conf;
	w.index = index;
	TAILQ_INIT(&w.queue);
	TAILQ_INIT(&w.spare);
	TAILQ_INIT(&w.conns);
	w.max_body = conf->http.max_body_size > 0 ?
	    (size_t)conf->http.max_body_size : 0;
	http_self = &w;

	if ((w.base = event_base_new()) == NULL) {
		log_warnx("event_base_new failed");
		goto fail;
	}
	if (proc_worker_signals(w.base, http_on_stop, &w) == -1) {
		log_warnx("cannot install signal events");
		goto fail;
	}
	if ((w.notify_ev = evtimer_new(w.base, http_notify_window, &w)) ==
	    NULL) {
		log_warnx("evtimer_new failed");
		goto fail;
	}
	if (http_worker_db(&w) == -1)
		goto fail;

	if ((w.http = evhttp_new(w.base)) == NULL) {
		log_warnx("evhttp_new failed");
		goto fail;
	}
	evhttp_set_gencb(w.http, http_request, &w);
	evhttp_set_bevcb(w.http, http_conn_new, NULL);
	evhttp_set_timeout(w.http, HTTP_IO_TIMEOUT_S);
	evhttp_set_max_body_size(w.http, (ev_ssize_t)w.max_body);
	evhttp_set_max_headers_size(w.http, HTTP_HEAD_MAX);
	evhttp_set_default_content_type(w.http, "application/json");
	/* Every method evhttp knows reaches the handler, which answers 405
	 * in JSON; evhttp's own 501 would be HTML. */
	evhttp_set_allowed_methods(w.http, EVHTTP_REQ_GET | EVHTTP_REQ_POST |
	    EVHTTP_REQ_HEAD | EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE |
	    EVHTTP_REQ_OPTIONS | EVHTTP_REQ_TRACE | EVHTTP_REQ_CONNECT |
	    EVHTTP_REQ_PATCH);
	/* evhttp closes the socket it is given (at evhttp_free()); the
	 * caller's descriptor stays as it was. */
	if ((fd = fcntl(listen_fd, F_DUPFD_CLOEXEC, 0)) == -1) {
		log_warn("dup listening socket");
		goto fail;
	}
	if ((w.bound = evhttp_accept_socket_with_handle(w.http, fd)) ==
	    NULL) {
		log_warnx("cannot accept on the listening socket");
		close(fd);
		goto fail;
	}

	log_info("serving with %d database connections", w.ndb);
	if (event_base_dispatch(w.base) == -1) {
		log_warnx("event loop failed");
		goto fail;
	}
	/* A request started in the loop pass that decided to leave is
	 * answered before we go; http_maybe_exit() ends this round. */
	while (w.inflight > 0 && event_base_dispatch(w.base) == 0)
		;
	proc_worker_done();
	log_info("stopped");
	http_worker_free(&w);
	return 0;
fail:
	http_worker_free(&w);
	return 1;
}
