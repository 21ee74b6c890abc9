/*
 * http.c - the HTTP worker: its event loop and routes, the health,
 * readiness and metrics routes, answering, and the stop with its drain.
 *
 *   POST /orders		201, order and outbox rows in one statement
 *   GET  /orders/{id}	200 or 404			(http_orders.c)
 *   GET  /healthz		200 {"status":"ok"}
 *   GET  /readyz		200 or 503, JSON saying what is wrong (metrics.c)
 *   GET  /metrics		Prometheus text exposition (metrics.c)
 *
 * Every 4xx/5xx carries {"error": CODE, "message": TEXT}.  Several workers
 * accept on the master's listening socket.  The worker's PostgreSQL
 * connections are http_pool.c's; what happens after an order commits is
 * http_wake.c's; the guard on each client connection is http_guard.c's,
 * the listener's accept gate http_guard_accept.c's.  This file wires
 * them: it tells the pool how to send each kind of job and takes each
 * job back when the pool is done with it.
 */
#include "config.h"

#include <sys/types.h>
#include <sys/queue.h>
#include <sys/resource.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <libpq-fe.h>

#include "outboxd.h"
#include "http.h"
#include "metrics_api.h"

#define HTTP_IO_TIMEOUT_S	15	/* a silent client is dropped */
#define HTTP_FLUSH_MS		2000	/* stopping: last answers to go out */
#define HTTP_DRAIN_MS		300	/* stopping: requests already on an
					   accepted connection get in */
#define HTTP_JOBS_KEPT		1024	/* free job records kept for reuse */
#define HTTP_SETUP_MAX		8	/* statements of a link's setup */
#define HTTP_CONNS_AUTO_MAX	65536	/* http.max_connections 0, at most */

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
 * handed-off row given back (http_wake.c) and every answer written, or
 * HTTP_FLUSH_MS after the last answer if a client does not take its
 * answer. */
void
http_exit_if_done(struct http_worker *w)
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
		http_exit_if_done(w);
}

void
http_reply(struct http_worker *w, struct evhttp_request *req, int code,
    const char *body, size_t len)
{
	struct evkeyvalq	*h = evhttp_request_get_output_headers(req);

	if (body != NULL) {
		if (evhttp_find_header(h, "Content-Type") == NULL)
			evhttp_add_header(h, "Content-Type",
			    "application/json");
		evbuffer_add(evhttp_request_get_output_buffer(req), body, len);
	}
	http_timing_end(req, code);
	http_guard_request_end(&w->guard, req);
	/* Clients go to another worker from now on. */
	if (w->stopping)
		evhttp_add_header(h, "Connection", "close");
	/* A request whose client left is freed unanswered by evhttp. */
	if (evhttp_request_get_connection(req) != NULL) {
		evhttp_request_set_on_complete_cb(req, http_sent, w);
		w->unflushed++;
	}
	w->guard.replying = 1;	/* this output is ours, not evhttp's */
	evhttp_send_reply(req, code, http_reason(code), NULL);
	w->guard.replying = 0;
	if (--w->inflight == 0)
		http_exit_if_done(w);
}

void
http_reply_error(struct http_worker *w, struct evhttp_request *req, int code,
    const char *ecode, const char *message)
{
	char	*s;

	if ((s = order_error_json(ecode, message)) == NULL) {
		http_reply(w, req, code, NULL, 0);
		return;
	}
	http_reply(w, req, code, s, strlen(s));
	free(s);
}

void
http_reply_unavailable(struct http_worker *w, struct evhttp_request *req)
{
	http_reply_error(w, req, 503, "database_unavailable",
	    "the database is unavailable; try again later");
}

static void
http_not_found(struct http_worker *w, struct evhttp_request *req)
{
	http_reply_error(w, req, 404, "not_found", "no such resource");
}

static void
http_bad_method(struct http_worker *w, struct evhttp_request *req,
    const char *allow)
{
	evhttp_add_header(evhttp_request_get_output_headers(req), "Allow",
	    allow);
	http_reply_error(w, req, 405, "method_not_allowed",
	    "method not allowed for this resource");
}

/* ---- jobs ------------------------------------------------------------- */

struct http_job *
http_job_new(struct http_worker *w)
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

void
http_job_free(struct http_worker *w, struct http_job *job)
{
	struct http_job	*next;

	for (; job != NULL; job = next) {
		next = job->next;
		if (job->res != NULL) {
			PQclear(job->res);
			job->res = NULL;
		}
		if (w->nspare >= HTTP_JOBS_KEPT) {
			free(job);
			continue;
		}
		TAILQ_INSERT_HEAD(&w->spare, job, entry);
		w->nspare++;
	}
}

void
http_job_fail(struct http_worker *w, struct http_job *job)
{
	for (; job != NULL; job = job->next)
		if (job->req != NULL) {
			http_reply_unavailable(w, job->req);
			job->req = NULL;
		}
}

void
http_job_submit(struct http_worker *w, struct http_job *job)
{
	switch (http_pool_submit(w->pool, job)) {
	case 0:
		return;
	case HTTP_POOL_FULL:
		http_reply_error(w, job->req, 503, "database_unavailable",
		    "too many requests are waiting for the database");
		break;
	default:
		http_reply_unavailable(w, job->req);
		break;
	}
	http_job_free(w, job);
}

/* ---- what the pool asks of the worker (struct http_pool_ops) ---------- */

/* Send job's statement(s) on pg; the pool adds the Sync. */
static int
http_job_send(PGconn *pg, struct http_job *job, int link, void *arg)
{
	struct http_worker	*w = arg;
	int			 ok;

	switch (job->kind) {
	case HTTP_JOB_INSERT:
		/* The first order after a quiet spell: written claimed and
		 * handed to relay 1 after its commit. */
		if (job->nbatch == 1)
			(void)http_wake_take_handoff(w, job);
		ok = http_orders_send(w, pg, job, link);
		/* Or it carries the NOTIFY in its own transaction: the
		 * relays hear of it at its commit, one round trip sooner
		 * than from a NOTIFY sent after it. */
		job->notify = 0;
		if (ok && !job->handoff && http_wake_take_notify(w)) {
			job->notify = 1;
			ok = http_wake_send_notify(pg);
		}
		return ok;
	case HTTP_JOB_GET:
		return http_orders_send(w, pg, job, link);
	case HTTP_JOB_STATS:
		return PQsendQueryParams(pg, metrics_outbox_sql, 0, NULL,
		    NULL, NULL, NULL, 0);
	case HTTP_JOB_GIVE_BACK:
		return http_wake_send_give_back(pg, job);
	case HTTP_JOB_NOTIFY:
		break;
	}
	return http_wake_send_notify(pg);
}

static void	http_stats_reply(struct http_worker *, struct evhttp_request *,
		    int, const char *);

/*
 * The pool is done with job: answer it from res.  An order's row is
 * handed over before the 201 goes out, so that relay 1 is on its way
 * before the client wakes; or the relays are woken, unless the order's
 * own transaction did.  Whoever is still unanswered (no result at all,
 * or a batch's row missing) gets a 503.
 */
static void
http_job_done(struct http_job *job, const PGresult *res, int link,
    void *arg)
{
	struct http_worker	*w = arg;
	int			 committed;

	committed = res != NULL && (PQresultStatus(res) == PGRES_TUPLES_OK ||
	    PQresultStatus(res) == PGRES_COMMAND_OK);
	switch (job->kind) {
	case HTTP_JOB_INSERT:
		if (committed && job->handoff)
			http_wake_handoff(w, job, res);
		http_orders_answer(w, job, res, link);
		if (committed && !job->handoff && !job->notify)
			http_wake_after_commit(w);
		break;
	case HTTP_JOB_GET:
		http_orders_answer(w, job, res, link);
		break;
	case HTTP_JOB_STATS:
		if (res != NULL && job->req != NULL) {
			metrics_outbox_store(res);
			http_stats_reply(w, job->req, job->route, NULL);
			job->req = NULL;
		}
		break;
	case HTTP_JOB_NOTIFY:
	case HTTP_JOB_GIVE_BACK:
		http_wake_done(w, job, res, link);
		break;
	}
	http_job_fail(w, job);
	http_job_free(w, job);
}

static void
http_setup_row(const PGresult *res, void *arg)
{
	http_wake_trigger_row(arg, res);
}

/* ---- routes ----------------------------------------------------------- */

/*
 * GET /metrics and GET /readyz: the counters are in shared memory; the
 * outbox figures behind them are read again (one statement through the
 * pipeline, like an order) when older than METRICS_CACHE_MS.  With no
 * database connection up, /metrics still answers (last known figures,
 * outboxd_database_up 0) and /readyz says why it is not ready.
 */
static char	http_stats_out[METRICS_READY_MAX];	/* the /readyz body */

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
			http_reply_error(w, req, 503, "out_of_memory",
			    "out of memory");
			return;
		}
		evhttp_add_header(h, "Content-Type", METRICS_CONTENT_TYPE);
		http_reply(w, req, 200, text, len);
		free(text);
		return;
	}
	if ((code = metrics_ready(http_stats_out, sizeof(http_stats_out),
	    db_down, &len)) == -1) {
		http_reply_error(w, req, 503, "internal_error", "readiness");
		return;
	}
	http_reply(w, req, code, http_stats_out, len);
}

static void
http_stats(struct http_worker *w, struct evhttp_request *req, int route)
{
	struct http_job	*job;

	if (http_pool_up(w->pool) == 0) {
		metrics_outbox_down("no connection to PostgreSQL "
		    "(reconnecting)");
		http_stats_reply(w, req, route, "no connection to PostgreSQL "
		    "(reconnecting)");
		return;
	}
	if (metrics_outbox_fresh() || (job = http_job_new(w)) == NULL) {
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
	const struct evhttp_uri	*uri;
	const char		*path = NULL;
	enum evhttp_cmd_type	 m = evhttp_request_get_command(req);
	int			 get = m == EVHTTP_REQ_GET ||
				    m == EVHTTP_REQ_HEAD;

	w->inflight++;
	http_guard_request_start(&w->guard, req);
	if ((uri = evhttp_request_get_evhttp_uri(req)) != NULL)
		path = evhttp_uri_get_path(uri);
	if (path == NULL)
		path = "";
	http_timing_start(req, http_route(path));

	if (strcmp(path, "/orders") == 0) {
		if (m != EVHTTP_REQ_POST)
			http_bad_method(w, req, "POST");
		else
			http_orders_create(w, req);
	} else if (strncmp(path, "/orders/", 8) == 0 && path[8] != '\0' &&
	    strchr(path + 8, '/') == NULL) {
		if (!get)
			http_bad_method(w, req, "GET, HEAD");
		else
			http_orders_get(w, req, path + 8);
	} else if (strcmp(path, "/healthz") == 0) {
		if (!get)
			http_bad_method(w, req, "GET, HEAD");
		else
			http_reply(w, req, 200, ok, sizeof(ok) - 1);
	} else if (strcmp(path, "/readyz") == 0 ||
	    strcmp(path, "/metrics") == 0) {
		if (!get)
			http_bad_method(w, req, "GET, HEAD");
		else
			http_stats(w, req, http_route(path));
	} else
		http_not_found(w, req);
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
	http_exit_if_done(w);
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
	http_guard_stop(&w->guard);
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
	http_exit_if_done(w);
}

static void
http_worker_free(struct http_worker *w)
{
	struct http_job	*job;

	/* Frees every connection: their guards go with them. */
	if (w->http != NULL)
		evhttp_free(w->http);
	http_guard_free(&w->guard);
	http_pool_free(w->pool);
	http_wake_free(w);
	if (w->drain_ev != NULL)
		event_free(w->drain_ev);
	while ((job = TAILQ_FIRST(&w->spare)) != NULL) {
		TAILQ_REMOVE(&w->spare, job, entry);
		free(job);
	}
	if (w->base != NULL)
		event_base_free(w->base);
}

/* http.max_connections as this worker applies it (the guard's accept
 * gate): the configured value, or with 0 what RLIMIT_NOFILE leaves after
 * HTTP_FD_RESERVE and the database connections. */
static int
http_max_conns(const struct conf *conf)
{
	struct rlimit	rl;
	long		n;

	if (conf->http.max_connections > 0)
		return conf->http.max_connections;
	if (getrlimit(RLIMIT_NOFILE, &rl) == -1 || rl.rlim_cur == RLIM_INFINITY)
		return HTTP_CONNS_AUTO_MAX;
	n = (long)rl.rlim_cur - HTTP_FD_RESERVE - conf->http.db_connections;
	return n < 1 ? 1 : n > HTTP_CONNS_AUTO_MAX ? HTTP_CONNS_AUTO_MAX :
	    (int)n;
}

/* Open the pool (blocking, at start only; a link that cannot connect
 * retries with backoff) and begin each setup: the orders' statements,
 * then the question whether a trigger notifies. */
static int
http_worker_pool(struct http_worker *w)
{
	static struct http_pool_stmt	setup[HTTP_SETUP_MAX];
	struct http_pool_ops		ops;
	int				i, n = 0;

	for (i = 0; i < http_orders_nstmts && n < HTTP_SETUP_MAX - 1; i++)
		setup[n++] = http_orders_stmts[i];
	setup[n++] = (struct http_pool_stmt){ NULL, http_wake_trigger_sql, 0,
	    NULL };
	memset(&ops, 0, sizeof(ops));
	ops.setup = setup;
	ops.nsetup = n;
	ops.send = http_job_send;
	ops.done = http_job_done;
	ops.setup_row = http_setup_row;
	ops.arg = w;
	w->pool = http_pool_new(w->base, w->conf->database,
	    w->conf->http.db_connections > 0 ?
	    w->conf->http.db_connections : 1, &ops);
	return w->pool != NULL ? 0 : -1;
}

/*
 * Run HTTP worker index on the master's listening socket listen_fd
 * (already listening and non-blocking; shared with the other HTTP
 * workers, left open for the caller) until SIGTERM and the drain
 * that follows.  Opens conf->http.db_connections PostgreSQL connections
 * with db_connect() first; without a database it serves all the same
 * (503 database_unavailable, /readyz 503) while they reconnect.  Returns
 * the exit status: 0 after a graceful stop, 1 if the worker could not
 * start (no memory, no listener), so the master respawns it with
 * backoff.  Source: libevent 2.1 evhttp and
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
	TAILQ_INIT(&w.spare);
	w.max_body = conf->http.max_body_size > 0 ?
	    (size_t)conf->http.max_body_size : 0;

	if ((w.base = event_base_new()) == NULL) {
		log_warnx("event_base_new failed");
		goto fail;
	}
	if (proc_worker_signals(w.base, http_on_stop, &w) == -1) {
		log_warnx("cannot install signal events");
		goto fail;
	}
	if (http_wake_init(&w) == -1) {
		log_warnx("evtimer_new failed");
		goto fail;
	}
	if (http_worker_pool(&w) == -1)
		goto fail;

	if ((w.http = evhttp_new(w.base)) == NULL) {
		log_warnx("evhttp_new failed");
		goto fail;
	}
	evhttp_set_gencb(w.http, http_request, &w);
	w.guard.base = w.base;
	w.guard.http = w.http;
	w.guard.max_body = w.max_body;
	w.guard.max_conns = http_max_conns(conf);
	if (http_guard_attach(&w.guard) == -1) {
		log_warnx("event_new failed");
		goto fail;
	}
	evhttp_set_timeout(w.http, HTTP_IO_TIMEOUT_S);
	evhttp_set_max_body_size(w.http, (ev_ssize_t)w.max_body);
	/* http_guard.c frames each request first and refuses what breaks
	 * these limits in JSON: evhttp's would be HTML, and the wrong status */
	evhttp_set_max_headers_size(w.http, HTTP_EVHTTP_HEAD_MAX);
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
	if ((w.guard.bound = evhttp_accept_socket_with_handle(w.http,
	    fd)) == NULL) {
		log_warnx("cannot accept on the listening socket");
		close(fd);
		goto fail;
	}
	if (http_guard_listen(&w.guard) == -1)
		goto fail;
	metrics_set_sink_unready(conf->relay.unready_after);

	log_info("serving with %d database connections, at most %d client "
	    "connections", http_pool_size(w.pool), w.guard.max_conns);
	if (event_base_dispatch(w.base) == -1) {
		log_warnx("event loop failed");
		goto fail;
	}
	/* A request started in the loop pass that decided to leave is
	 * answered before we go; http_exit_if_done() ends this round. */
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
