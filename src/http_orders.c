/*
 * http_orders.c - POST /orders and GET /orders/{id}: checking the request,
 * the statement that writes or reads the order, and the answer.
 *
 *   POST /orders		201, order and outbox rows in one statement
 *				(with an Idempotency-Key: and the key's row,
 *				or the order the key made before)
 *   GET  /orders/{id}	200 or 404
 */
#include "config.h"

#include <sys/types.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <libpq-fe.h>

#include "outboxd.h"
#include "http.h"

/* Type OIDs of the statement parameters (PostgreSQL pg_type.dat). */
#define HTTP_OID_BYTEA		17
#define HTTP_OID_INT8		20
#define HTTP_OID_TEXT		25
#define HTTP_OID_UUID		2950
#define HTTP_OID_TEXT_ARRAY	1009
#define HTTP_OID_INT8_ARRAY	1016

#define HTTP_STMT_INSERT	"outboxd_order_insert"
#define HTTP_STMT_INSERT_MANY	"outboxd_order_insert_many"
#define HTTP_STMT_GET		"outboxd_order_get"
#define HTTP_STMT_INSERT_CLAIMED "outboxd_order_insert_claimed"
#define HTTP_STMT_INSERT_KEYED	"outboxd_order_insert_keyed"

/* Advisory lock space of an Idempotency-Key (sql/schema.sql takes 2026
 * and 2027), and how long its statement waits for a key's row another
 * writer holds. */
#define HTTP_KEY_LOCK_SPACE	"2028"
#define HTTP_KEY_LOCK_TIMEOUT	"100ms"

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
 * id, so it is its key's head.  While the relays are paused, or the
 * default destination ($5, NULL: none), where its destination NULL sends
 * it, is in outbox_paused_destinations, the row is written unclaimed, as
 * any other, and waits there like the rest of that destination's rows.
 * Columns HTTP_COL_ROW_ID.. (http.h) are the row for the handoff (claim
 * NULL: paused).
 */
static const char http_sql_insert_claimed[] =
	HTTP_SQL_ORDER
	"p AS (SELECT NOT coalesce((SELECT paused FROM outbox_control "
	"WHERE id = 1), false) AND NOT EXISTS (SELECT 1 FROM "
	"outbox_paused_destinations WHERE destination = $5::text) AS go), "
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

/*
 * Group commit (http_pool.c batches the orders that queued up): one
 * statement, so one transaction, for all of them.  Each order still gets
 * its 201 only after that commit, and a failure fails every order of the
 * statement (none was written).  $1 and $2 are the customer ids and
 * amounts; n, the position in them, pairs each row with its request (an
 * INSERT's RETURNING order is not guaranteed).
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

/*
 * An order with an Idempotency-Key: $3 the key, $4 the fingerprint of the
 * order (idempotency_fingerprint()), $5 http.idempotency_ttl in s.  One
 * statement, so the key's row commits with the order or not at all.  Its
 * one row says what happened, then the order's four columns:
 *   created	the key was free (or had expired): order, outbox row and
 *		key row written
 *   replayed	the key made an order with this fingerprint: that order
 *		(NULLs if it has been deleted since), nothing written
 *   reused	the key made an order with another fingerprint: NULLs
 *   busy	another transaction is writing this key right now (its
 *		advisory lock is taken): NULLs, nothing written
 * and no row when the key's row committed between this statement's
 * snapshot and its insert (the other writer's commit released the lock
 * just in time): running it again finds that row.
 *
 * Outboxd's own writers of one key meet at the advisory lock, which
 * never waits; the primary key decides all the same, whoever writes the
 * table.  A writer that does not take the lock (an operator's psql, an
 * older outboxd) and holds the key's row makes the insert wait: for
 * HTTP_KEY_LOCK_TIMEOUT only (then SQLSTATE 55P03, answered 409), since
 * every order of the connection waits behind it.  lock_timeout is set for
 * the key's insert alone (u), and put back (r) before the order's own
 * inserts, whose waits (a trigger of the user's) keep the session's
 * setting: each step reads the one before it, which orders them.
 */
static const char http_sql_insert_keyed[] =
	"WITH t AS MATERIALIZED (SELECT current_setting('lock_timeout') AS lt, "
	"pg_try_advisory_xact_lock(" HTTP_KEY_LOCK_SPACE ", hashtext($3)) "
	"AS got), "
	"x AS MATERIALIZED (SELECT k.fingerprint, k.order_id "
	"FROM outbox_idempotency_keys k, t WHERE t.got AND k.key = $3 "
	"AND k.created_at > now() - $5 * interval '1 second'), "
	"u AS MATERIALIZED (SELECT set_config('lock_timeout', '"
	HTTP_KEY_LOCK_TIMEOUT "', true) FROM t "
	"WHERE t.got AND NOT EXISTS (SELECT 1 FROM x)), "
	"k AS (INSERT INTO outbox_idempotency_keys AS k "
	"(key, fingerprint, order_id) SELECT $3, $4, gen_random_uuid() FROM u "
	"ON CONFLICT (key) DO UPDATE SET fingerprint = excluded.fingerprint, "
	"order_id = excluded.order_id, created_at = now() "
	"WHERE k.created_at <= now() - $5 * interval '1 second' "
	"RETURNING k.order_id), "
	"r AS MATERIALIZED (SELECT k.order_id, "
	"set_config('lock_timeout', t.lt, true) FROM t LEFT JOIN k ON true), "
	"o AS (INSERT INTO orders (id, customer_id, amount_cents) "
	"SELECT r.order_id, $1, $2 FROM r WHERE r.order_id IS NOT NULL "
	"RETURNING id, customer_id, amount_cents, created_at), "
	"e AS (INSERT INTO outbox (event_type, ordering_key, payload) "
	"SELECT " HTTP_SQL_EVENT " FROM o) "
	"SELECT 'created', id, customer_id, amount_cents, "
	"to_json(created_at) #>> '{}' FROM o "
	"UNION ALL SELECT CASE WHEN x.fingerprint = $4 THEN 'replayed' "
	"ELSE 'reused' END, g.id, g.customer_id, g.amount_cents, "
	"to_json(g.created_at) #>> '{}' FROM x LEFT JOIN orders g "
	"ON g.id = x.order_id AND x.fingerprint = $4 "
	"UNION ALL SELECT 'busy', NULL, NULL, NULL, NULL FROM t WHERE NOT t.got";

static const char http_sql_get[] =
	"SELECT id, customer_id, amount_cents, to_json(created_at) #>> '{}' "
	"FROM orders WHERE id = $1";

static const Oid http_insert_types[] = { HTTP_OID_TEXT, HTTP_OID_INT8 };
static const Oid http_get_types[] = { HTTP_OID_UUID };
static const Oid http_many_types[] = { HTTP_OID_TEXT_ARRAY,
	HTTP_OID_INT8_ARRAY };
static const Oid http_claimed_types[] = { HTTP_OID_TEXT, HTTP_OID_INT8,
	HTTP_OID_INT8, HTTP_OID_INT8, HTTP_OID_TEXT };
static const Oid http_keyed_types[] = { HTTP_OID_TEXT, HTTP_OID_INT8,
	HTTP_OID_TEXT, HTTP_OID_BYTEA, HTTP_OID_INT8 };

const struct http_pool_stmt http_orders_stmts[] = {
	{ HTTP_STMT_INSERT, http_sql_insert, 2, http_insert_types },
	{ HTTP_STMT_GET, http_sql_get, 1, http_get_types },
	{ HTTP_STMT_INSERT_MANY, http_sql_insert_many, 2, http_many_types },
	{ HTTP_STMT_INSERT_CLAIMED, http_sql_insert_claimed, 5,
	    http_claimed_types },
	{ HTTP_STMT_INSERT_KEYED, http_sql_insert_keyed, 5,
	    http_keyed_types },
};
const int http_orders_nstmts = sizeof(http_orders_stmts) /
	sizeof(*http_orders_stmts);

/* Answers are built here: one request is answered at a time. */
static char	http_orders_out[ORDER_JSON_MAX];

/* ---- the routes ------------------------------------------------------- */

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

/*
 * The request's Idempotency-Key into key: 0 none, 1 one, or -1 after
 * answering 400 (malformed, or given more than once: the draft allows one,
 * and two keys could name two orders).
 */
static int
http_orders_key(struct http_worker *w, struct evhttp_request *req,
    char *key)
{
	struct evkeyvalq	*h = evhttp_request_get_input_headers(req);
	struct evkeyval		*kv;
	const char		*v = NULL, *why;
	int			 n = 0;

	TAILQ_FOREACH(kv, h, next)
		if (strcasecmp(kv->key, "Idempotency-Key") == 0) {
			v = kv->value;
			n++;
		}
	if (n == 0)
		return 0;
	if (n > 1)
		why = "Idempotency-Key must be given once";
	else if (idempotency_key_parse(v, key, &why) == 0)
		return 1;
	http_reply_error(w, req, 400, "idempotency_key_invalid", why);
	return -1;
}

void
http_orders_create(struct http_worker *w, struct evhttp_request *req)
{
	struct evbuffer		*body = evhttp_request_get_input_buffer(req);
	size_t			 len = evbuffer_get_length(body);
	const char		*ct;
	struct order_error	 oe;
	struct http_job		*job;
	char			 msg[128], key[IDEMPOTENCY_KEY_MAX + 1];
	int			 keyed;

	if (len > w->max_body) {
		snprintf(msg, sizeof(msg), "request body is larger than %zu "
		    "bytes", w->max_body);
		http_reply_error(w, req, 413, "body_too_large", msg);
		return;
	}
	ct = evhttp_find_header(evhttp_request_get_input_headers(req),
	    "Content-Type");
	if (ct != NULL && !http_is_json(ct)) {
		http_reply_error(w, req, 415, "unsupported_media_type",
		    "Content-Type must be application/json");
		return;
	}
	if ((keyed = http_orders_key(w, req, key)) == -1)
		return;
	if ((job = http_job_new(w)) == NULL) {
		http_reply_error(w, req, 503, "out_of_memory", "out of memory");
		return;
	}
	if (order_parse((const char *)evbuffer_pullup(body, -1), len,
	    &job->in, &oe) == -1) {
		http_job_free(w, job);
		http_reply_error(w, req, 400, oe.code, oe.message);
		return;
	}
	snprintf(job->amount, sizeof(job->amount), "%" PRId64,
	    job->in.amount_cents);
	job->kind = HTTP_JOB_INSERT;
	job->req = req;
	/* Job records are reused, and http_job_new() knows nothing of
	 * keys: both cases are set here. */
	job->keyed = keyed;
	job->key_again = 0;
	if (keyed) {
		if (idempotency_fingerprint(&job->in, job->fingerprint) == -1) {
			http_job_free(w, job);
			log_warnx("SHA-256 failed (libcrypto)");
			http_reply_error(w, req, 503, "internal_error",
			    "cannot compute the request's fingerprint");
			return;
		}
		memcpy(job->key, key, sizeof(job->key));
		/* Its own statement, never in a group commit: see
		 * http_sql_insert_keyed. */
		job->solo = 1;
	}
	http_job_submit(w, job);
}

void
http_orders_get(struct http_worker *w, struct evhttp_request *req,
    const char *id)
{
	struct http_job	*job;

	/* Not an id: no such order, and no reason to ask the database. */
	if (!order_uuid_valid(id, strlen(id))) {
		http_reply_error(w, req, 404, "not_found",
		    "no order with this id");
		return;
	}
	if ((job = http_job_new(w)) == NULL) {
		http_reply_error(w, req, 503, "out_of_memory", "out of memory");
		return;
	}
	memcpy(job->id, id, ORDER_UUID_LEN + 1);
	job->kind = HTTP_JOB_GET;
	job->keyed = 0;
	job->req = req;
	http_job_submit(w, job);
}

/* ---- the statement ---------------------------------------------------- */

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

int
http_orders_send(struct http_worker *w, PGconn *pg, struct http_job *job,
    int link)
{
	/* Every id escaped and quoted, every amount, and a comma each. */
	static char	 ids[HTTP_BATCH_MAX * (2 * ORDER_CUSTOMER_ID_MAX + 3) + 3];
	static char	 amounts[HTTP_BATCH_MAX * 22 + 3];
	const char	*values[5];
	char		 claim[24], lease[24], ttl[24];

	if (job->kind == HTTP_JOB_GET) {
		values[0] = job->id;
		return PQsendQueryPrepared(pg, HTTP_STMT_GET, 1, values, NULL,
		    NULL, 0);
	}
	if (job->keyed) {
		/*
		 * Never written claimed: the handoff's statement has no key,
		 * and a keyed order may write nothing at all.  The worker
		 * (http_job_send()) may have offered it the handoff: it
		 * then wakes the relays after the commit instead, as for
		 * any order without a NOTIFY of its own.
		 */
		job->handoff = 0;
		snprintf(ttl, sizeof(ttl), "%ld", w->conf->http.idempotency_ttl);
		values[0] = job->in.customer_id;
		values[1] = job->amount;
		values[2] = job->key;
		values[3] = job->fingerprint;
		values[4] = ttl;
		return PQsendQueryPrepared(pg, HTTP_STMT_INSERT_KEYED, 5, values,
		    NULL, NULL, 0);
	}
	if (job->nbatch > 1) {
		/* libpq copies the values into its buffer at once. */
		http_batch_arrays(job, ids, amounts);
		log_debug("database connection %d: %d orders in one "
		    "statement", link, job->nbatch);
		values[0] = ids;
		values[1] = amounts;
		return PQsendQueryPrepared(pg, HTTP_STMT_INSERT_MANY, 2, values,
		    NULL, NULL, 0);
	}
	values[0] = job->in.customer_id;
	values[1] = job->amount;
	if (!job->handoff)
		return PQsendQueryPrepared(pg, HTTP_STMT_INSERT, 2, values,
		    NULL, NULL, 0);
	/* Handed to relay 1 after its commit (http_wake_handoff()). */
	snprintf(claim, sizeof(claim), "%" PRId64, job->handoff_claim);
	snprintf(lease, sizeof(lease), "%ld", w->conf->relay.lease);
	values[2] = claim;
	values[3] = lease;
	/* Its row's destination is NULL: the default's pause holds it. */
	values[4] = w->conf->default_destination >= 0 ?
	    w->conf->destinations[w->conf->default_destination].name : NULL;
	return PQsendQueryPrepared(pg, HTTP_STMT_INSERT_CLAIMED, 5, values,
	    NULL, NULL, 0);
}

/* ---- the answer ------------------------------------------------------- */

/* 422 for an order PostgreSQL refused (db_result_refused()): its message,
 * and its DETAIL and HINT when it has them, each cut to a few hundred
 * bytes at a character. */
static void
http_orders_refused(struct http_worker *w, struct evhttp_request *req,
    const PGresult *res)
{
	struct db_why	 why;
	char		 buf[400], msg[512], *s;
	const char	*m, *state;

	/* A trigger may raise an empty message: say that, and its code,
	 * rather than "unknown error". */
	if ((m = db_result_field(res, PG_DIAG_MESSAGE_PRIMARY, buf,
	    sizeof(buf))) != NULL)
		snprintf(msg, sizeof(msg), "the database refused the order: "
		    "%s", m);
	else {
		state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
		snprintf(msg, sizeof(msg), "the database refused the order "
		    "with an empty message (SQLSTATE %s)", state != NULL ?
		    state : "none");
	}
	db_result_why(&why, res);
	if ((s = order_error_json_detail("order_refused", msg, why.detail,
	    why.hint)) == NULL) {
		http_reply(w, req, 422, NULL, 0);
		return;
	}
	http_reply(w, req, 422, s, strlen(s));
	free(s);
}

/* Answer req with the order in row of res, columns col..col+3 (id,
 * customer, amount, created): 201 and its Location when it was created. */
static void
http_orders_reply(struct http_worker *w, struct evhttp_request *req,
    int created, const PGresult *res, int row, int col)
{
	char	location[sizeof("/orders/") + ORDER_UUID_LEN];
	int	n;

	n = order_json(http_orders_out, sizeof(http_orders_out),
	    PQgetvalue(res, row, col), PQgetvalue(res, row, col + 1),
	    PQgetvalue(res, row, col + 2), PQgetvalue(res, row, col + 3));
	if (n == -1) {
		log_warnx("order %s: cannot build its JSON",
		    PQgetvalue(res, row, col));
		http_reply_unavailable(w, req);
		return;
	}
	if (!created) {
		http_reply(w, req, 200, http_orders_out, (size_t)n);
		return;
	}
	snprintf(location, sizeof(location), "/orders/%s",
	    PQgetvalue(res, row, col));
	evhttp_add_header(evhttp_request_get_output_headers(req), "Location",
	    location);
	http_reply(w, req, 201, http_orders_out, (size_t)n);
}

/* The result of a batch of orders (http_sql_insert_many): row n answers
 * the batch's nth request.  A failed batch never gets here: the pool
 * splits it at its Sync. */
static void
http_orders_answer_batch(struct http_worker *w, struct http_job *job,
    const PGresult *res, int link)
{
	struct http_job	*jobs[HTTP_BATCH_MAX], *j;
	int		 i, k, n = 0;

	for (j = job; j != NULL && n < HTTP_BATCH_MAX; j = j->next)
		jobs[n++] = j;
	for (i = 0; i < PQntuples(res) && PQnfields(res) == 5; i++) {
		k = atoi(PQgetvalue(res, i, 0)) - 1;
		if (k < 0 || k >= n || jobs[k]->req == NULL)
			continue;
		http_orders_reply(w, jobs[k]->req, 1, res, i, 1);
		jobs[k]->req = NULL;
	}
	for (i = 0; i < n; i++)
		if (jobs[i]->req != NULL) {
			log_warnx("database connection %d: no row for order "
			    "%d of %d", link, i + 1, n);
			break;
		}
	http_job_fail(w, job);	/* any left: cannot be */
}

/*
 * Run keyed job's statement once more, for its request: its row committed
 * under another transaction after this one's snapshot.  The new job goes
 * to the head of the queue (done() may not submit).  1 if it is queued,
 * 0 if memory is short.
 */
static int
http_orders_again(struct http_worker *w, const struct http_job *job,
    struct evhttp_request *req)
{
	struct http_job	*again;

	if ((again = http_job_new(w)) == NULL)
		return 0;
	again->kind = HTTP_JOB_INSERT;
	again->req = req;
	again->in = job->in;
	memcpy(again->amount, job->amount, sizeof(again->amount));
	again->keyed = 1;
	again->key_again = 1;
	memcpy(again->key, job->key, sizeof(again->key));
	memcpy(again->fingerprint, job->fingerprint,
	    sizeof(again->fingerprint));
	again->solo = 1;
	http_pool_push_front(w->pool, again);
	return 1;
}

/* 409: the key is being written by another request (or, for a moment,
 * another transaction holds its row). */
static void
http_orders_key_busy(struct http_worker *w, struct evhttp_request *req)
{
	http_reply_error(w, req, 409, "idempotency_key_in_use", "a request "
	    "with this Idempotency-Key is still being processed; retry "
	    "later");
}

/*
 * The answer of an order with an Idempotency-Key (http_sql_insert_keyed's
 * states).  A replay is answered as the creation was: 201, Location, the
 * order as it is stored.
 */
static void
http_orders_answer_keyed(struct http_worker *w, struct http_job *job,
    const PGresult *res, int link)
{
	struct evhttp_request	*req = job->req;
	const char		*state, *sqlstate;

	job->req = NULL;
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		sqlstate = PQresultErrorField(res, PG_DIAG_SQLSTATE);
		/* lock_not_available: the lock_timeout of the key's insert */
		if (sqlstate != NULL && strcmp(sqlstate, "55P03") == 0) {
			http_orders_key_busy(w, req);
			return;
		}
		http_pool_log_result(link, res);
		if (db_result_refused(res))
			http_orders_refused(w, req, res);
		else
			http_reply_unavailable(w, req);
		return;
	}
	if (PQntuples(res) == 0) {
		if (!job->key_again && http_orders_again(w, job, req))
			return;
		http_orders_key_busy(w, req);
		return;
	}
	if (PQntuples(res) != 1 || PQnfields(res) != 5) {
		log_warnx("database connection %d: %d rows of %d columns, "
		    "expected 1 of 5", link, PQntuples(res), PQnfields(res));
		http_reply_unavailable(w, req);
		return;
	}
	state = PQgetvalue(res, 0, 0);
	if (strcmp(state, "busy") == 0)
		http_orders_key_busy(w, req);
	else if (strcmp(state, "reused") == 0)
		http_reply_error(w, req, 422, "idempotency_key_reused",
		    "this Idempotency-Key was used with another request body "
		    "(another customerId or amountCents)");
	else if (PQgetisnull(res, 0, 1))
		http_reply_error(w, req, 404, "not_found", "the order this "
		    "Idempotency-Key made no longer exists");
	else
		http_orders_reply(w, req, 1, res, 0, 1);
}

void
http_orders_answer(struct http_worker *w, struct http_job *job,
    const PGresult *res, int link)
{
	struct evhttp_request	*req = job->req;

	if (res == NULL)
		return;
	if (job->nbatch > 1) {
		http_orders_answer_batch(w, job, res, link);
		return;
	}
	if (req == NULL)
		return;
	if (job->kind == HTTP_JOB_INSERT && job->keyed) {
		http_orders_answer_keyed(w, job, res, link);
		return;
	}
	job->req = NULL;
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		http_pool_log_result(link, res);
		if (job->kind == HTTP_JOB_INSERT && db_result_refused(res))
			http_orders_refused(w, req, res);
		else
			http_reply_unavailable(w, req);
		return;
	}
	if (job->kind == HTTP_JOB_GET && PQntuples(res) == 0) {
		http_reply_error(w, req, 404, "not_found",
		    "no order with this id");
		return;
	}
	if (PQntuples(res) != 1 ||
	    PQnfields(res) != (job->handoff ? HTTP_COLS_CLAIMED : 4)) {
		log_warnx("database connection %d: %d rows of %d columns, "
		    "expected 1 of %d", link, PQntuples(res),
		    PQnfields(res), job->handoff ? HTTP_COLS_CLAIMED : 4);
		http_reply_unavailable(w, req);
		return;
	}
	http_orders_reply(w, req, job->kind == HTTP_JOB_INSERT, res, 0, 0);
}
