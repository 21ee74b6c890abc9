/*
 * admin_http.c - the admin worker: the admin API on its own listener
 * (admin.listen, loopback by default), one process, so that operators'
 * requests never queue behind orders and never hold an order's database
 * connection.
 *
 *   GET  /outbox		counts by status, oldest pending age, top keys
 *   GET  /outbox/failed	failed rows, ?limit=N&after_id=ID
 *   POST /outbox/redrive	{"all":true} | {"ids":[...]} | {"event_type":T}
 *   POST /relay/pause		stop publishing (outbox_control.paused)
 *   POST /relay/resume		publish again
 *   GET  /destinations		each destination: rows, oldest, paused
 *   GET  /destinations/NAME	one destination
 *   POST /destinations/NAME/pause	stop publishing its rows
 *				(outbox_paused_destinations)
 *   POST /destinations/NAME/resume	publish them again
 *   POST /destinations/NAME/redrive	its failed rows back to pending (no
 *				body: all; or a body as /outbox/redrive's)
 *   POST /outbox/replay	publish sent rows again: a JSON filter, and
 *				"dry_run":true for the count alone
 *   GET  /outbox/replays	the latest replays and their progress,
 *				?limit=N; /outbox/replays/ID one of them
 *   POST /outbox/replays/ID/cancel	end a replay now
 *
 * NAME is percent-decoded and must be a destination of the configuration
 * this worker was started with: one that cannot be a name is 400
 * bad_destination_name, one the configuration lacks 404
 * unknown_destination (acting on it would only seem to work: no relay
 * publishes there).
 *
 * Every request needs "Authorization: Bearer TOKEN" with admin.token: none
 * (or another scheme) is 401, a wrong token 403, both {"error","message"}.
 * The token is compared in constant time and never logged.  Requests are
 * rare and small, so each runs its statements on one blocking libpq
 * connection (statement_timeout ADMIN_STATEMENT_TIMEOUT), opened at the
 * first request and again after it breaks: a database outage makes the
 * API answer 503, not the worker exit.  The operations themselves, and
 * their SQL, are admin.c's, shared with outboxctl.  Every connection has
 * the orders listener's guard (http_guard.c): strict framing before
 * evhttp, JSON refusals and error pages, the same line and header limits.
 * Which route a path is, and the query parameters each route takes (any
 * other is 400), are admin_route.c's.
 */
#include "config.h"

#include <sys/queue.h>

#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <libpq-fe.h>

#include "outboxd.h"
#include "http_guard.h"
#include "admin_route.h"
#include "replay.h"
#include "metrics_api.h"

#define ADMIN_STATEMENT_TIMEOUT	"10s"
#define ADMIN_IO_TIMEOUT_S	30
#define ADMIN_BODY_MAX		(1024 * 1024)
#define ADMIN_REALM		"Bearer realm=\"outboxd admin\""

struct admin_worker {
	struct conf		*conf;
	struct event_base	*base;
	struct evhttp		*http;
	struct http_guard	 guard;
	PGconn			*pg;
	int			 db_failing;	/* log a failing database once */
};

static struct admin_worker	*admin_self;	/* the guard of every answer */

/* Every answer goes out here, once per request (http_guard's count). */
static void
admin_send(struct evhttp_request *req, int code, const char *body)
{
	struct evkeyvalq	*h = evhttp_request_get_output_headers(req);

	evhttp_add_header(h, "Content-Type", "application/json");
	evhttp_add_header(h, "Cache-Control", "no-store");
	evbuffer_add(evhttp_request_get_output_buffer(req), body,
	    strlen(body));
	evbuffer_add(evhttp_request_get_output_buffer(req), "\n", 1);
	http_guard_request_end(&admin_self->guard, req);
	admin_self->guard.replying = 1;	/* ours, not an evhttp page */
	evhttp_send_reply(req, code, http_reason(code), NULL);
	admin_self->guard.replying = 0;
}

static int
admin_error(struct evhttp_request *req, int code, const char *ecode,
    const char *message)
{
	char	*s;

	if ((s = order_error_json(ecode, message)) == NULL) {
		admin_send(req, code, "{}");
		return code;
	}
	admin_send(req, code, s);
	free(s);
	return code;
}

static int
admin_json(struct evhttp_request *req, int code, cJSON *j)
{
	char	*s;

	if ((s = cJSON_PrintUnformatted(j)) == NULL) {
		cJSON_Delete(j);
		return admin_error(req, 500, "internal_error", "out of memory");
	}
	cJSON_Delete(j);
	admin_send(req, code, s);
	cJSON_free(s);
	return code;
}

/* The peer, for the audit lines of changes. */
static void
admin_peer(struct evhttp_request *req, char *buf, size_t len)
{
	struct evhttp_connection	*c = evhttp_request_get_connection(req);
	char				*addr = NULL;
	ev_uint16_t			 port = 0;

	if (c != NULL)
		evhttp_connection_get_peer(c, &addr, &port);
	snprintf(buf, len, "%s:%u", addr != NULL ? addr : "?", port);
}

/* The database connection, (re)opened when needed; NULL with err. */
static PGconn *
admin_db(struct admin_worker *a, char *err, size_t errlen)
{
	PGresult	*res;

	if (a->pg != NULL && PQstatus(a->pg) == CONNECTION_OK)
		return a->pg;
	if (a->pg != NULL) {
		PQfinish(a->pg);
		a->pg = NULL;
	}
	if ((a->pg = db_connect(a->conf->database, "admin", err,
	    errlen)) == NULL)
		goto fail;
	res = PQexec(a->pg, "SET statement_timeout = '"
	    ADMIN_STATEMENT_TIMEOUT "'");
	if (PQresultStatus(res) != PGRES_COMMAND_OK) {
		snprintf(err, errlen, "session setup failed");
		PQclear(res);
		PQfinish(a->pg);
		a->pg = NULL;
		goto fail;
	}
	PQclear(res);
	if (a->db_failing)
		log_info("database reachable again");
	a->db_failing = 0;
	return a->pg;
fail:
	if (!a->db_failing)
		log_warnx("database: %s", err);
	a->db_failing = 1;
	return NULL;
}

/* A statement failed: 503, and a broken connection is dropped. */
static int
admin_db_failed(struct admin_worker *a, struct evhttp_request *req,
    const char *err)
{
	log_warnx("%s", err);
	if (a->pg != NULL && PQstatus(a->pg) != CONNECTION_OK) {
		PQfinish(a->pg);
		a->pg = NULL;
	}
	return admin_error(req, 503, "database_unavailable", err);
}

/* Authorization: Bearer TOKEN.  Returns 0, or the status answered. */
static int
admin_auth(struct admin_worker *a, struct evhttp_request *req)
{
	struct evkeyvalq	*h = evhttp_request_get_input_headers(req);
	const char		*v = evhttp_find_header(h, "Authorization");

	if (v == NULL || strncasecmp(v, "Bearer ", 7) != 0) {
		evhttp_add_header(evhttp_request_get_output_headers(req),
		    "WWW-Authenticate", ADMIN_REALM);
		return admin_error(req, 401, "unauthorized", "this API needs "
		    "an Authorization: Bearer header with admin.token");
	}
	for (v += 7; *v == ' '; v++)
		;
	if (!admin_token_equal(v, a->conf->admin.token))
		return admin_error(req, 403, "forbidden", "the bearer token is "
		    "not valid");
	return 0;
}

/* GET /outbox/failed, q its query (admin_route_query()). */
static int
admin_get_failed(struct admin_worker *a, struct evhttp_request *req,
    const struct evkeyvalq *q)
{
	char			 err[512], msg[128];
	int64_t			 limit, after;
	cJSON			*j;
	PGconn			*pg;

	if (admin_route_query_int(q, "limit", ADMIN_FAILED_LIMIT, 1,
	    ADMIN_FAILED_MAX, &limit) == -1 ||
	    admin_route_query_int(q, "after_id", 0, 0, INT64_MAX, &after) ==
	    -1) {
		snprintf(msg, sizeof(msg), "limit must be 1 to %d and after_id "
		    "a row id", ADMIN_FAILED_MAX);
		return admin_error(req, 400, "bad_request", msg);
	}
	if ((pg = admin_db(a, err, sizeof(err))) == NULL)
		return admin_error(req, 503, "database_unavailable", err);
	if (admin_failed(pg, after, (int)limit, &j, err, sizeof(err)) == -1)
		return admin_db_failed(a, req, err);
	return admin_json(req, 200, j);
}

/* A destination name checked against the configuration: 0, or the
 * status answered (400 or 404). */
static int
admin_dest_answer(struct admin_worker *a, struct evhttp_request *req,
    const char *name)
{
	char	err[512];

	switch (admin_dest_check(a->conf, name, err, sizeof(err))) {
	case 0:
		return 0;
	case -1:
		return admin_error(req, 400, "bad_destination_name", err);
	default:
		return admin_error(req, 404, "unknown_destination", err);
	}
}

/* POST /outbox/redrive, or dest non-NULL: POST
 * /destinations/NAME/redrive, where no body means all. */
static int
admin_post_redrive(struct admin_worker *a, struct evhttp_request *req,
    const char *dest)
{
	struct evbuffer		*in = evhttp_request_get_input_buffer(req);
	struct admin_redrive	 sel;
	char			 err[512], peer[80];
	cJSON			*j, *n;
	PGconn			*pg;
	int			 code;

	memset(&sel, 0, sizeof(sel));
	if (dest != NULL && evbuffer_get_length(in) == 0)
		sel.all = 1;
	else if (admin_redrive_parse((const char *)evbuffer_pullup(in, -1),
	    evbuffer_get_length(in), &sel, err, sizeof(err)) == -1)
		return admin_error(req, 400, "bad_request", err);
	if (dest != NULL && sel.destination != NULL &&
	    strcmp(dest, sel.destination) != 0) {
		admin_redrive_clear(&sel);
		return admin_error(req, 400, "bad_request", "\"destination\" "
		    "in the body is not the one in the path");
	}
	if (dest != NULL && sel.destination == NULL &&
	    (sel.destination = strdup(dest)) == NULL) {
		admin_redrive_clear(&sel);
		return admin_error(req, 500, "internal_error", "out of memory");
	}
	if (sel.destination != NULL &&
	    (code = admin_dest_answer(a, req, sel.destination)) != 0) {
		admin_redrive_clear(&sel);
		return code;
	}
	if ((pg = admin_db(a, err, sizeof(err))) == NULL) {
		admin_redrive_clear(&sel);
		return admin_error(req, 503, "database_unavailable", err);
	}
	if (admin_redrive(pg, a->conf, &sel, &j, err, sizeof(err)) == -1) {
		admin_redrive_clear(&sel);
		return admin_db_failed(a, req, err);
	}
	admin_peer(req, peer, sizeof(peer));
	n = cJSON_GetObjectItemCaseSensitive(j, "redriven");
	log_kv(LOG_LEVEL_INFO, (const char *[]){ "peer", peer, "event_type",
	    sel.event_type, "destination", sel.destination, NULL },
	    "redrive (%s): %d failed row(s) back to pending", sel.all ? "all" :
	    sel.event_type != NULL ? "by event type" : "by id",
	    n != NULL ? n->valueint : 0);
	admin_redrive_clear(&sel);
	return admin_json(req, 200, j);
}

/* GET /destinations (name NULL) or GET /destinations/NAME. */
static int
admin_get_destinations(struct admin_worker *a, struct evhttp_request *req,
    const char *name)
{
	char	 err[512];
	cJSON	*j;
	PGconn	*pg;
	int	 code;

	if (name != NULL && (code = admin_dest_answer(a, req, name)) != 0)
		return code;
	if ((pg = admin_db(a, err, sizeof(err))) == NULL)
		return admin_error(req, 503, "database_unavailable", err);
	if (admin_destinations(pg, a->conf, name, &j, err, sizeof(err)) == -1)
		return admin_db_failed(a, req, err);
	return admin_json(req, 200, j);
}

/* POST /destinations/NAME/pause and .../resume. */
static int
admin_post_dest_pause(struct admin_worker *a, struct evhttp_request *req,
    const char *name, int paused)
{
	char	 err[512], peer[80];
	cJSON	*j;
	PGconn	*pg;
	int	 code;

	if ((code = admin_dest_answer(a, req, name)) != 0)
		return code;
	if ((pg = admin_db(a, err, sizeof(err))) == NULL)
		return admin_error(req, 503, "database_unavailable", err);
	if (admin_dest_pause(pg, name, paused, &j, err, sizeof(err)) == -1)
		return admin_db_failed(a, req, err);
	admin_peer(req, peer, sizeof(peer));
	log_kv(LOG_LEVEL_INFO, (const char *[]){ "peer", peer, "destination",
	    name, NULL }, "publishing to destination %s", paused ? "paused" :
	    "resumed");
	return admin_json(req, 200, j);
}

static int
admin_post_pause(struct admin_worker *a, struct evhttp_request *req,
    int paused)
{
	char	 err[512], peer[80];
	cJSON	*j;
	PGconn	*pg;

	if ((pg = admin_db(a, err, sizeof(err))) == NULL)
		return admin_error(req, 503, "database_unavailable", err);
	if (admin_pause(pg, paused, &j, err, sizeof(err)) == -1)
		return admin_db_failed(a, req, err);
	admin_peer(req, peer, sizeof(peer));
	log_kv(LOG_LEVEL_INFO, (const char *[]){ "peer", peer, NULL },
	    "publishing %s", paused ? "paused" : "resumed");
	return admin_json(req, 200, j);
}

/* POST /outbox/replay: 202 with the replay recorded, 200 for a dry run
 * or a filter that selects nothing. */
static int
admin_post_replay(struct admin_worker *a, struct evhttp_request *req)
{
	struct evbuffer		*in = evhttp_request_get_input_buffer(req);
	struct replay_filter	 f;
	char			 err[512], peer[80], who[96];
	cJSON			*j, *n, *rep;
	PGconn			*pg;
	int			 dry_run, rv;

	/* The destination filter answers as a destination in a path does
	 * (admin_dest_answer()). */
	rv = replay_parse((const char *)evbuffer_pullup(in, -1),
	    evbuffer_get_length(in), a->conf, &f, &dry_run, err, sizeof(err));
	if (rv == REPLAY_UNKNOWN_DESTINATION)
		return admin_error(req, 404, "unknown_destination", err);
	if (rv == REPLAY_BAD_DESTINATION)
		return admin_error(req, 400, "bad_destination_name", err);
	if (rv != 0)
		return admin_error(req, 400, "bad_request", err);
	if ((pg = admin_db(a, err, sizeof(err))) == NULL) {
		replay_filter_clear(&f);
		return admin_error(req, 503, "database_unavailable", err);
	}
	admin_peer(req, peer, sizeof(peer));
	snprintf(who, sizeof(who), "admin API %s", peer);
	rv = replay_request(pg, a->conf, &f, dry_run, who, &j, err,
	    sizeof(err));
	if (rv == -1) {
		replay_filter_clear(&f);
		return admin_db_failed(a, req, err);
	}
	n = cJSON_GetObjectItemCaseSensitive(j, "selected");
	rep = cJSON_GetObjectItemCaseSensitive(j, "replay");
	log_kv(LOG_LEVEL_INFO, (const char *[]){ "peer", peer, "event_type",
	    f.event_type, "destination", f.destination, NULL },
	    "replay%s: %.0f sent row(s) selected%s", dry_run ? " (dry run)" :
	    "", n != NULL ? n->valuedouble : 0, cJSON_IsObject(rep) ?
	    ", recorded for relay 1" : "");
	replay_filter_clear(&f);
	return admin_json(req, cJSON_IsObject(rep) ? 202 : 200, j);
}

/* GET /outbox/replays (id 0) or /outbox/replays/ID, q its query
 * (admin_route_query()). */
static int
admin_get_replays(struct admin_worker *a, struct evhttp_request *req,
    const struct evkeyvalq *q, int64_t id)
{
	char			 err[512], msg[128];
	int64_t			 limit;
	cJSON			*j, *arr;
	PGconn			*pg;

	if (admin_route_query_int(q, "limit", REPLAY_LIST_LIMIT, 1,
	    REPLAY_LIST_MAX, &limit) == -1) {
		snprintf(msg, sizeof(msg), "limit must be 1 to %d",
		    REPLAY_LIST_MAX);
		return admin_error(req, 400, "bad_request", msg);
	}
	if ((pg = admin_db(a, err, sizeof(err))) == NULL)
		return admin_error(req, 503, "database_unavailable", err);
	if (replay_list(pg, id, (int)limit, &j, err, sizeof(err)) == -1)
		return admin_db_failed(a, req, err);
	if (id == 0)
		return admin_json(req, 200, j);
	arr = cJSON_GetObjectItemCaseSensitive(j, "replays");
	if (cJSON_GetArraySize(arr) != 1) {
		cJSON_Delete(j);
		return admin_error(req, 404, "unknown_replay", "no such replay");
	}
	arr = cJSON_DetachItemFromArray(arr, 0);
	cJSON_Delete(j);
	return admin_json(req, 200, arr);
}

/* POST /outbox/replays/ID/cancel: 200 cancelled, 409 over already. */
static int
admin_post_replay_cancel(struct admin_worker *a, struct evhttp_request *req,
    int64_t id)
{
	char	 err[512], peer[80], ids[24];
	cJSON	*j;
	PGconn	*pg;
	int	 rv;

	if ((pg = admin_db(a, err, sizeof(err))) == NULL)
		return admin_error(req, 503, "database_unavailable", err);
	switch (rv = replay_cancel(pg, id, &j, err, sizeof(err))) {
	case -1:
		return admin_db_failed(a, req, err);
	case 0:
		return admin_error(req, 404, "unknown_replay", "no such replay");
	case -2:
		cJSON_Delete(j);
		return admin_error(req, 409, "replay_over", "the replay is over "
		    "already: every selected row was back to pending, or it "
		    "was cancelled");
	}
	admin_peer(req, peer, sizeof(peer));
	snprintf(ids, sizeof(ids), "%lld", (long long)id);
	log_kv(LOG_LEVEL_INFO, (const char *[]){ "peer", peer, "replay", ids,
	    NULL }, "replay cancelled");
	return admin_json(req, 200, j);
}

static int
admin_bad_method(struct evhttp_request *req, const char *allow)
{
	evhttp_add_header(evhttp_request_get_output_headers(req), "Allow",
	    allow);
	return admin_error(req, 405, "method_not_allowed", "method not "
	    "allowed for this resource");
}

static void
admin_request(struct evhttp_request *req, void *arg)
{
	struct admin_worker	*a = arg;
	const struct evhttp_uri	*uri = evhttp_request_get_evhttp_uri(req);
	const char		*path = uri != NULL ? evhttp_uri_get_path(uri) :
				    NULL;
	enum evhttp_cmd_type	 m = evhttp_request_get_command(req);
	uint64_t		 t0 = (uint64_t)clock_mono_us();
	char			 err[512], *name = NULL;
	cJSON			*j;
	PGconn			*pg;
	struct evkeyvalq	 q;
	int64_t			 replay_id = 0;
	int			 route, code, get, post, bad = 0;

	TAILQ_INIT(&q);
	http_guard_request_start(&a->guard, req);
	if (path == NULL)
		path = "";
	get = m == EVHTTP_REQ_GET || m == EVHTTP_REQ_HEAD;
	post = m == EVHTTP_REQ_POST;
	route = admin_route(path, &name, &bad, &replay_id);

	/* Nothing, not even which routes exist, without the token. */
	if ((code = admin_auth(a, req)) != 0)
		goto done;
	if (route != METRICS_ROUTE_OTHER &&
	    admin_route_query(uri, route, replay_id, &q, err, sizeof(err)) ==
	    -1) {
		code = admin_error(req, 400, "bad_request", err);
		goto done;
	}
	switch (route) {
	case METRICS_ROUTE_OUTBOX:
		if (!get) {
			code = admin_bad_method(req, "GET, HEAD");
			break;
		}
		if ((pg = admin_db(a, err, sizeof(err))) == NULL)
			code = admin_error(req, 503, "database_unavailable",
			    err);
		else if (admin_status(pg, a->conf, &j, err, sizeof(err)) == -1)
			code = admin_db_failed(a, req, err);
		else
			code = admin_json(req, 200, j);
		break;
	case METRICS_ROUTE_FAILED:
		code = get ? admin_get_failed(a, req, &q) :
		    admin_bad_method(req, "GET, HEAD");
		break;
	case METRICS_ROUTE_REDRIVE:
		code = post ? admin_post_redrive(a, req, NULL) :
		    admin_bad_method(req, "POST");
		break;
	case METRICS_ROUTE_PAUSE:
	case METRICS_ROUTE_RESUME:
		code = post ? admin_post_pause(a, req,
		    route == METRICS_ROUTE_PAUSE) :
		    admin_bad_method(req, "POST");
		break;
	case METRICS_ROUTE_DESTINATIONS:
		code = get ? admin_get_destinations(a, req, NULL) :
		    admin_bad_method(req, "GET, HEAD");
		break;
	case METRICS_ROUTE_DESTINATION:
	case METRICS_ROUTE_DEST_PAUSE:
	case METRICS_ROUTE_DEST_RESUME:
	case METRICS_ROUTE_DEST_REDRIVE:
		if (route == METRICS_ROUTE_DESTINATION ? !get : !post)
			code = admin_bad_method(req,
			    route == METRICS_ROUTE_DESTINATION ? "GET, HEAD" :
			    "POST");
		else if (bad)
			code = admin_error(req, 400, "bad_destination_name",
			    "the destination name in the path cannot be "
			    "decoded (a NUL byte?)");
		else if (route == METRICS_ROUTE_DESTINATION)
			code = admin_get_destinations(a, req, name);
		else if (route == METRICS_ROUTE_DEST_REDRIVE)
			code = admin_post_redrive(a, req, name);
		else
			code = admin_post_dest_pause(a, req, name,
			    route == METRICS_ROUTE_DEST_PAUSE);
		break;
	case METRICS_ROUTE_REPLAY:
		code = post ? admin_post_replay(a, req) :
		    admin_bad_method(req, "POST");
		break;
	case METRICS_ROUTE_REPLAYS:
		code = get ? admin_get_replays(a, req, &q, replay_id) :
		    admin_bad_method(req, "GET, HEAD");
		break;
	case METRICS_ROUTE_REPLAY_CANCEL:
		code = post ? admin_post_replay_cancel(a, req, replay_id) :
		    admin_bad_method(req, "POST");
		break;
	default:
		code = admin_error(req, 404, "not_found", "no such resource");
		break;
	}
done:
	evhttp_clear_headers(&q);
	free(name);
	metrics_http_request(route, code, (uint64_t)clock_mono_us() - t0);
}

static void
admin_on_stop(void *arg, int deadline)
{
	struct admin_worker	*a = arg;

	(void)deadline;

	/* Requests are answered whole before the loop looks at signals. */
	event_base_loopexit(a->base, NULL);
}

/*
 * Serve the admin API on admin_fd (bound and listening by the master,
 * left open for it) until SIGTERM.  Returns 0 after a stop, 1 if the
 * worker could not start.
 */
int
admin_http_main(struct conf *conf, int admin_fd)
{
	struct admin_worker	 a;
	int			 fd, rv = 1;

	log_init("admin", -1);
	proc_set_title("outboxd: admin");
	memset(&a, 0, sizeof(a));
	a.conf = conf;
	if ((a.base = event_base_new()) == NULL) {
		log_warnx("event_base_new failed");
		return 1;
	}
	if (proc_worker_signals(a.base, admin_on_stop, &a) == -1 ||
	    (a.http = evhttp_new(a.base)) == NULL) {
		log_warnx("cannot set up the event loop");
		goto out;
	}
	evhttp_set_gencb(a.http, admin_request, &a);
	admin_self = &a;
	a.guard.base = a.base;
	a.guard.http = a.http;
	a.guard.max_body = ADMIN_BODY_MAX;
	if (http_guard_attach(&a.guard) == -1) {
		log_warnx("cannot set up the connection guard");
		goto out;
	}
	evhttp_set_timeout(a.http, ADMIN_IO_TIMEOUT_S);
	evhttp_set_max_body_size(a.http, ADMIN_BODY_MAX);
	/* the guard refuses what breaks the limits first, in JSON */
	evhttp_set_max_headers_size(a.http, HTTP_EVHTTP_HEAD_MAX);
	evhttp_set_default_content_type(a.http, "application/json");
	evhttp_set_allowed_methods(a.http, EVHTTP_REQ_GET | EVHTTP_REQ_POST |
	    EVHTTP_REQ_HEAD | EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE |
	    EVHTTP_REQ_PATCH | EVHTTP_REQ_OPTIONS | EVHTTP_REQ_TRACE |
	    EVHTTP_REQ_CONNECT);
	if ((fd = fcntl(admin_fd, F_DUPFD_CLOEXEC, 0)) == -1) {
		log_warn("dup admin socket");
		goto out;
	}
	if (evhttp_accept_socket_with_handle(a.http, fd) == NULL) {
		log_warnx("cannot accept on the admin socket");
		close(fd);
		goto out;
	}
	log_info("admin API on %s", conf->admin.listen);
	if (event_base_dispatch(a.base) == -1)
		log_warnx("event loop failed");
	else
		rv = 0;
	proc_worker_done();
	log_info("stopped");
out:
	if (a.http != NULL)
		evhttp_free(a.http);
	http_guard_free(&a.guard);
	if (a.pg != NULL)
		PQfinish(a.pg);
	event_base_free(a.base);
	return rv;
}
