/*
 * admin.c - the outbox operations behind the admin API (admin_http.c) and
 * outboxctl: one place for their SQL, so both always do the same thing.
 *
 * Every function runs on a blocking libpq connection of its caller (the
 * admin worker's, or outboxctl's) and answers the admin API's JSON as a
 * cJSON tree; outboxctl prints that tree as it is (--json) or as a table.
 * Timestamps are those of the session (db_connect sets TimeZone UTC),
 * written as JSON strings ("2026-11-29T15:04:05.678+00:00").
 *
 * Redrive: a failed row goes back to pending with attempts = 0 and
 * available_at = now(); its claim is cleared and last_error is kept (it
 * says why the row had failed until the next attempt overwrites it, and
 * a successful publish clears it).  first_claimed_at is kept too, so the
 * row stays its key's head and per-key order holds.  The relays are woken
 * with NOTIFY, since no insert does it.  Pause and resume set
 * outbox_control.paused, which outbox_claim() reads on every claim:
 * publishing stops after the batches already claimed.
 *
 * Destinations: a row's destination column names one (NULL: the default
 * destination of the configuration, which the caller passes).  Pausing
 * one writes outbox_paused_destinations, which outbox_claim() reads on
 * every claim as it reads the pause switch; a redrive can be limited to
 * one destination's failed rows.  A name must be one of the
 * configuration (admin_dest_check()): acting on a name the relays do not
 * know would only seem to work.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <libpq-fe.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "outboxd.h"

#define ADMIN_TOP_KEYS		10
#define ADMIN_IDS_SHOWN		1000	/* ids listed in a redrive answer */
#define ADMIN_OTHER_DESTS	20	/* names not in outbox.conf shown */

static const char admin_sql_counts[] =
	"SELECT count(*) FILTER (WHERE status = 'pending'), "
	"count(*) FILTER (WHERE status = 'sent'), "
	"count(*) FILTER (WHERE status = 'failed'), count(*), "
	"(SELECT extract(epoch FROM clock_timestamp() - p.created_at)"
	"::float8 FROM outbox p WHERE p.status = 'pending' ORDER BY p.id "
	"LIMIT 1), "
	"(SELECT to_json(p.created_at) #>> '{}' FROM outbox p "
	"WHERE p.status = 'pending' ORDER BY p.id LIMIT 1), "
	"coalesce((SELECT c.paused FROM outbox_control c WHERE c.id = 1), "
	"false), "
	"(SELECT to_json(c.paused_at) #>> '{}' FROM outbox_control c "
	"WHERE c.id = 1) "
	"FROM outbox";

static const char admin_sql_keys[] =
	"SELECT ordering_key, count(*) FILTER (WHERE status = 'pending'), "
	"count(*) FILTER (WHERE status = 'failed'), "
	"to_json(min(created_at)) #>> '{}' "
	"FROM outbox WHERE status <> 'sent' GROUP BY ordering_key "
	"ORDER BY count(*) DESC, min(id) LIMIT 10";

static const char admin_sql_failed[] =
	"SELECT id, event_type, ordering_key, attempts, last_error, "
	"to_json(created_at) #>> '{}', destination FROM outbox "
	"WHERE status = 'failed' AND id > $1 ORDER BY id LIMIT $2";

/* $1 and $2 the destination (NULL: any) and the default's name: a row
 * whose column is NULL is the default's. */
#define ADMIN_REDRIVE_SET \
	"UPDATE outbox SET status = 'pending', attempts = 0, " \
	"available_at = now(), claim = NULL WHERE status = 'failed' " \
	"AND ($1::text IS NULL OR coalesce(destination, $2::text) = $1) "
/* ... and the rows held behind the redriven ones (outbox.held) released:
 * they follow their head again. */
#define ADMIN_REDRIVE_RETURN \
	"RETURNING id, ordering_key, destination), " \
	"h AS (UPDATE outbox s SET held = false FROM r WHERE s.held " \
	"AND s.ordering_key = r.ordering_key " \
	"AND s.destination IS NOT DISTINCT FROM r.destination) " \
	"SELECT id FROM r ORDER BY id"
static const char admin_sql_redrive_all[] =
	"WITH r AS (" ADMIN_REDRIVE_SET ADMIN_REDRIVE_RETURN;
static const char admin_sql_redrive_ids[] =
	"WITH r AS (" ADMIN_REDRIVE_SET "AND id = ANY ($3::bigint[]) "
	ADMIN_REDRIVE_RETURN;
static const char admin_sql_redrive_type[] =
	"WITH r AS (" ADMIN_REDRIVE_SET "AND event_type = $3 "
	ADMIN_REDRIVE_RETURN;

/*
 * Unsent rows and pauses by destination, $1 the default's name: name,
 * pending, failed, oldest pending age (s) and created_at, paused and
 * since when.  Busiest first; a NULL name is rows with no destination
 * when there is no default.
 */
static const char admin_sql_dests[] =
	"SELECT coalesce(r.name, p.destination), coalesce(r.pending, 0), "
	"coalesce(r.failed, 0), "
	"extract(epoch FROM clock_timestamp() - r.oldest)::float8, "
	"to_json(r.oldest) #>> '{}', p.destination IS NOT NULL, "
	"to_json(p.paused_at) #>> '{}' "
	"FROM (SELECT coalesce(destination, $1::text) AS name, "
	"count(*) FILTER (WHERE status = 'pending') AS pending, "
	"count(*) FILTER (WHERE status = 'failed') AS failed, "
	"min(created_at) FILTER (WHERE status = 'pending') AS oldest "
	"FROM outbox WHERE status <> 'sent' GROUP BY 1) r "
	"FULL JOIN outbox_paused_destinations p ON p.destination = r.name "
	"ORDER BY coalesce(r.pending, 0) + coalesce(r.failed, 0) DESC, 1 "
	"LIMIT 10000";

/* Keep the first pause time while paused. */
static const char admin_sql_dest_pause[] =
	"INSERT INTO outbox_paused_destinations AS p (destination) "
	"VALUES ($1) ON CONFLICT (destination) DO UPDATE "
	"SET paused_at = p.paused_at RETURNING to_json(paused_at) #>> '{}'";
static const char admin_sql_dest_resume[] =
	"DELETE FROM outbox_paused_destinations WHERE destination = $1";

/* Keep the first pause time while paused; none while running. */
static const char admin_sql_pause[] =
	"INSERT INTO outbox_control AS c (id, paused, paused_at) "
	"VALUES (1, $1::boolean, CASE WHEN $1::boolean THEN now() END) "
	"ON CONFLICT (id) DO UPDATE SET paused = excluded.paused, "
	"paused_at = CASE WHEN excluded.paused THEN "
	"coalesce(CASE WHEN c.paused THEN c.paused_at END, now()) END "
	"RETURNING paused, to_json(paused_at) #>> '{}'";

static const char admin_sql_wake[] = "NOTIFY " OUTBOX_CHANNEL;

/* "what: " and libpq's message on one line. */
static void
admin_pgerr(char *err, size_t errlen, const char *what, const char *msg)
{
	char	buf[512];

	snprintf(err, errlen, "%s: %s", what, db_errline(buf, sizeof(buf),
	    msg));
}

/* Run sql; the result if it has the wanted status, else NULL with err. */
static PGresult *
admin_exec(PGconn *conn, const char *what, const char *sql, int nparams,
    const char *const *params, ExecStatusType want, char *err,
    size_t errlen)
{
	PGresult	*res;

	res = PQexecParams(conn, sql, nparams, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(res) == want)
		return res;
	admin_pgerr(err, errlen, what, res != NULL ?
	    PQresultErrorMessage(res) : PQerrorMessage(conn));
	PQclear(res);
	return NULL;
}

static cJSON *
admin_num(const PGresult *res, int row, int col)
{
	return cJSON_CreateNumber(strtod(PQgetvalue(res, row, col), NULL));
}

/* A text column, or JSON null when NULL. */
static cJSON *
admin_str(const PGresult *res, int row, int col)
{
	if (PQgetisnull(res, row, col))
		return cJSON_CreateNull();
	return cJSON_CreateString(PQgetvalue(res, row, col));
}

/* The answer, or -1 if even its root could not be made. */
static int
admin_tree_ok(cJSON *root, cJSON **out, char *err, size_t errlen)
{
	if (root == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	*out = root;
	return 0;
}

static const char *const admin_sink_names[] = {
	[CONF_SINK_SQS] = "sqs",
	[CONF_SINK_HTTP] = "http",
	[CONF_SINK_SNS] = "sns",
	[CONF_SINK_PUBSUB] = "pubsub",
};

/* The default destination's name, or NULL if there is none. */
static const char *
admin_default_name(const struct conf *c)
{
	return c->default_destination >= 0 ?
	    c->destinations[c->default_destination].name : NULL;
}

/* Destination name (NULL: rows without one, and no default) as row i of
 * an admin_sql_dests answer says (i -1: none, it has no rows). */
static cJSON *
admin_dest_obj(const struct conf *c, const char *name, const PGresult *res,
    int i)
{
	const struct conf_destination	*d;
	cJSON				*o;

	d = name != NULL ? conf_destination_find(c, name) : NULL;
	if ((o = cJSON_CreateObject()) == NULL)
		return NULL;
	cJSON_AddItemToObject(o, "name", name != NULL ?
	    cJSON_CreateString(name) : cJSON_CreateNull());
	cJSON_AddItemToObject(o, "sink", d != NULL ?
	    cJSON_CreateString(admin_sink_names[d->sink]) :
	    cJSON_CreateNull());
	cJSON_AddBoolToObject(o, "default", d != NULL &&
	    d - c->destinations == c->default_destination);
	cJSON_AddBoolToObject(o, "configured", d != NULL);
	cJSON_AddItemToObject(o, "pending", i >= 0 ? admin_num(res, i, 1) :
	    cJSON_CreateNumber(0));
	cJSON_AddItemToObject(o, "failed", i >= 0 ? admin_num(res, i, 2) :
	    cJSON_CreateNumber(0));
	cJSON_AddItemToObject(o, "oldest_pending_age_seconds",
	    i >= 0 && !PQgetisnull(res, i, 3) ? admin_num(res, i, 3) :
	    cJSON_CreateNull());
	cJSON_AddItemToObject(o, "oldest_pending_created_at", i >= 0 ?
	    admin_str(res, i, 4) : cJSON_CreateNull());
	cJSON_AddBoolToObject(o, "paused", i >= 0 &&
	    strcmp(PQgetvalue(res, i, 5), "t") == 0);
	cJSON_AddItemToObject(o, "paused_at", i >= 0 ? admin_str(res, i, 6) :
	    cJSON_CreateNull());
	return o;
}

/*
 * The destinations into arr: each of the configuration in its order, then
 * up to ADMIN_OTHER_DESTS names that rows or pauses hold and it lacks,
 * busiest first.  only non-NULL: that configured one alone.
 */
static int
admin_dests_add(PGconn *conn, const struct conf *c, const char *only,
    cJSON *arr, char *err, size_t errlen)
{
	PGresult	*res;
	const char	*p[1], *name;
	int		 i, k, n, other = 0;

	p[0] = admin_default_name(c);
	if ((res = admin_exec(conn, "destinations", admin_sql_dests, 1, p,
	    PGRES_TUPLES_OK, err, errlen)) == NULL)
		return -1;
	n = PQntuples(res);
	for (k = 0; k < c->n_destinations; k++) {
		name = c->destinations[k].name;
		if (only != NULL && strcmp(only, name) != 0)
			continue;
		for (i = 0; i < n; i++)
			if (!PQgetisnull(res, i, 0) &&
			    strcmp(PQgetvalue(res, i, 0), name) == 0)
				break;
		cJSON_AddItemToArray(arr, admin_dest_obj(c, name, res,
		    i < n ? i : -1));
	}
	for (i = 0; only == NULL && i < n && other < ADMIN_OTHER_DESTS; i++) {
		name = PQgetisnull(res, i, 0) ? NULL : PQgetvalue(res, i, 0);
		if (name != NULL && conf_destination_find(c, name) != NULL)
			continue;
		cJSON_AddItemToArray(arr, admin_dest_obj(c, name, res, i));
		other++;
	}
	PQclear(res);
	return 0;
}

int
admin_destinations(struct pg_conn *conn, const struct conf *c,
    const char *name, cJSON **out, char *err, size_t errlen)
{
	cJSON	*root, *arr;

	*out = NULL;
	if ((arr = cJSON_CreateArray()) == NULL)
		return admin_tree_ok(NULL, out, err, errlen);
	if (admin_dests_add(conn, c, name, arr, err, errlen) == -1) {
		cJSON_Delete(arr);
		return -1;
	}
	if (name != NULL) {
		/* One object: the destination's own. */
		root = cJSON_DetachItemFromArray(arr, 0);
		cJSON_Delete(arr);
		return admin_tree_ok(root, out, err, errlen);
	}
	if ((root = cJSON_CreateObject()) == NULL) {
		cJSON_Delete(arr);
		return admin_tree_ok(NULL, out, err, errlen);
	}
	cJSON_AddItemToObject(root, "destinations", arr);
	return admin_tree_ok(root, out, err, errlen);
}

int
admin_dest_check(const struct conf *c, const char *name, char *err,
    size_t errlen)
{
	/* The rule outbox.conf's names keep: any other name is none of
	 * its destinations, and may not be shown as it is. */
	if (name == NULL || !conf_destination_name_ok(name)) {
		snprintf(err, errlen, "a destination name is "
		    CONF_DESTINATION_NAME_RULE);
		return -1;
	}
	if (conf_destination_find(c, name) == NULL) {
		snprintf(err, errlen, "no destination \"%s\" in %s", name,
		    c->path != NULL ? c->path : "the configuration");
		return -2;
	}
	return 0;
}

int
admin_dest_pause(struct pg_conn *conn, const char *name, int paused,
    cJSON **out, char *err, size_t errlen)
{
	PGresult	*res, *w;
	cJSON		*root;
	const char	*p[1];

	*out = NULL;
	p[0] = name;
	if ((res = admin_exec(conn, paused ? "pause" : "resume", paused ?
	    admin_sql_dest_pause : admin_sql_dest_resume, 1, p, paused ?
	    PGRES_TUPLES_OK : PGRES_COMMAND_OK, err, errlen)) == NULL)
		return -1;
	if (!paused && (w = admin_exec(conn, "wake the relays",
	    admin_sql_wake, 0, NULL, PGRES_COMMAND_OK, err, errlen)) != NULL)
		PQclear(w);
	root = cJSON_CreateObject();
	cJSON_AddStringToObject(root, "destination", name);
	cJSON_AddBoolToObject(root, "paused", paused);
	cJSON_AddItemToObject(root, "paused_at", paused &&
	    PQntuples(res) == 1 ? admin_str(res, 0, 0) : cJSON_CreateNull());
	PQclear(res);
	return admin_tree_ok(root, out, err, errlen);
}

int
admin_status(struct pg_conn *conn, const struct conf *c, cJSON **out,
    char *err, size_t errlen)
{
	PGresult	*res, *keys;
	cJSON		*root, *counts, *arr, *k;
	int		 i;

	*out = NULL;
	if ((res = admin_exec(conn, "outbox status", admin_sql_counts, 0, NULL,
	    PGRES_TUPLES_OK, err, errlen)) == NULL)
		return -1;
	if ((keys = admin_exec(conn, "backlog by key", admin_sql_keys, 0, NULL,
	    PGRES_TUPLES_OK, err, errlen)) == NULL) {
		PQclear(res);
		return -1;
	}
	root = cJSON_CreateObject();
	counts = cJSON_AddObjectToObject(root, "counts");
	cJSON_AddItemToObject(counts, "pending", admin_num(res, 0, 0));
	cJSON_AddItemToObject(counts, "sent", admin_num(res, 0, 1));
	cJSON_AddItemToObject(counts, "failed", admin_num(res, 0, 2));
	cJSON_AddItemToObject(root, "total", admin_num(res, 0, 3));
	cJSON_AddItemToObject(root, "oldest_pending_age_seconds",
	    PQgetisnull(res, 0, 4) ? cJSON_CreateNull() :
	    admin_num(res, 0, 4));
	cJSON_AddItemToObject(root, "oldest_pending_created_at",
	    admin_str(res, 0, 5));
	cJSON_AddBoolToObject(root, "paused",
	    strcmp(PQgetvalue(res, 0, 6), "t") == 0);
	cJSON_AddItemToObject(root, "paused_at", admin_str(res, 0, 7));
	arr = cJSON_AddArrayToObject(root, "backlog_by_key");
	for (i = 0; i < PQntuples(keys) && i < ADMIN_TOP_KEYS; i++) {
		k = cJSON_CreateObject();
		cJSON_AddItemToObject(k, "ordering_key", admin_str(keys, i, 0));
		cJSON_AddItemToObject(k, "pending", admin_num(keys, i, 1));
		cJSON_AddItemToObject(k, "failed", admin_num(keys, i, 2));
		cJSON_AddItemToObject(k, "oldest_created_at",
		    admin_str(keys, i, 3));
		cJSON_AddItemToArray(arr, k);
	}
	PQclear(res);
	PQclear(keys);
	arr = cJSON_AddArrayToObject(root, "destinations");
	if (admin_dests_add(conn, c, NULL, arr, err, errlen) == -1) {
		cJSON_Delete(root);
		return -1;
	}
	return admin_tree_ok(root, out, err, errlen);
}

int
admin_failed(struct pg_conn *conn, int64_t after_id, int limit, cJSON **out,
    char *err, size_t errlen)
{
	PGresult	*res;
	cJSON		*root, *rows, *r;
	char		 after[24], lim[16];
	const char	*p[2];
	int		 i, n;

	*out = NULL;
	if (limit < 1 || limit > ADMIN_FAILED_MAX)
		limit = ADMIN_FAILED_LIMIT;
	snprintf(after, sizeof(after), "%" PRId64, after_id < 0 ? 0 :
	    after_id);
	snprintf(lim, sizeof(lim), "%d", limit);
	p[0] = after;
	p[1] = lim;
	if ((res = admin_exec(conn, "failed rows", admin_sql_failed, 2, p,
	    PGRES_TUPLES_OK, err, errlen)) == NULL)
		return -1;
	root = cJSON_CreateObject();
	rows = cJSON_AddArrayToObject(root, "rows");
	n = PQntuples(res);
	for (i = 0; i < n; i++) {
		r = cJSON_CreateObject();
		cJSON_AddItemToObject(r, "id", admin_num(res, i, 0));
		cJSON_AddItemToObject(r, "event_type", admin_str(res, i, 1));
		cJSON_AddItemToObject(r, "ordering_key", admin_str(res, i, 2));
		cJSON_AddItemToObject(r, "attempts", admin_num(res, i, 3));
		cJSON_AddItemToObject(r, "last_error", admin_str(res, i, 4));
		cJSON_AddItemToObject(r, "created_at", admin_str(res, i, 5));
		/* As written: null is relay.default_destination's. */
		cJSON_AddItemToObject(r, "destination", admin_str(res, i, 6));
		cJSON_AddItemToArray(rows, r);
	}
	/* A full page may have a next one. */
	cJSON_AddItemToObject(root, "next_after_id", n == limit ?
	    admin_num(res, n - 1, 0) : cJSON_CreateNull());
	PQclear(res);
	return admin_tree_ok(root, out, err, errlen);
}

void
admin_redrive_clear(struct admin_redrive *sel)
{
	free(sel->ids);
	free(sel->event_type);
	free(sel->destination);
	memset(sel, 0, sizeof(*sel));
}

int
admin_redrive_parse(const char *body, size_t len, struct admin_redrive *sel,
    char *err, size_t errlen)
{
	struct json_error	 jerr;
	cJSON			*root, *all, *ids, *type, *dest, *e;
	int			 nkeys = 0, n;

	memset(sel, 0, sizeof(*sel));
	/*
	 * As strict as POST /orders (json.c): RFC 8259 exactly, no repeated
	 * member names.  One exception: a single NUL byte ending the body is
	 * not part of it, since callers that pass a C string's length with
	 * its NUL (tests/unit/test_ops.c does) were accepted before; a NUL
	 * anywhere else is refused.
	 */
	if (body != NULL && len > 0 && body[len - 1] == '\0')
		len--;
	if ((root = json_parse(body, len, NULL, 0, &jerr)) == NULL ||
	    !cJSON_IsObject(root)) {
		snprintf(err, errlen, "%s%sthe body must be a JSON object: "
		    "{\"all\":true}, {\"ids\":[...]} or {\"event_type\":\"...\"}",
		    root == NULL ? json_message(jerr.fault) : "",
		    root == NULL ? "; " : "");
		cJSON_Delete(root);
		return -1;
	}
	cJSON_ArrayForEach(e, root) {
		if (strcmp(e->string, "destination") == 0)
			continue;
		if (strcmp(e->string, "all") != 0 &&
		    strcmp(e->string, "ids") != 0 &&
		    strcmp(e->string, "event_type") != 0) {
			snprintf(err, errlen, "unknown key \"%.64s\" (expected "
			    "all, ids or event_type, and destination)",
			    e->string);
			goto fail;
		}
		nkeys++;
	}
	all = cJSON_GetObjectItemCaseSensitive(root, "all");
	ids = cJSON_GetObjectItemCaseSensitive(root, "ids");
	type = cJSON_GetObjectItemCaseSensitive(root, "event_type");
	dest = cJSON_GetObjectItemCaseSensitive(root, "destination");
	if (nkeys != 1) {
		snprintf(err, errlen, "give exactly one of all, ids and "
		    "event_type");
		goto fail;
	}
	/* Checked against the configuration by the caller. */
	if (dest != NULL && (!cJSON_IsString(dest) ||
	    (sel->destination = strdup(dest->valuestring)) == NULL)) {
		snprintf(err, errlen, "\"destination\" must be a string");
		goto fail;
	}
	if (all != NULL) {
		if (!cJSON_IsTrue(all)) {
			snprintf(err, errlen, "\"all\" must be true");
			goto fail;
		}
		sel->all = 1;
	} else if (type != NULL) {
		if (!cJSON_IsString(type) || type->valuestring[0] == '\0') {
			snprintf(err, errlen, "\"event_type\" must be a "
			    "non-empty string");
			goto fail;
		}
		if ((sel->event_type = strdup(type->valuestring)) == NULL) {
			snprintf(err, errlen, "out of memory");
			goto fail;
		}
	} else {
		n = cJSON_GetArraySize(ids);
		if (!cJSON_IsArray(ids) || n < 1 ||
		    n > ADMIN_REDRIVE_IDS_MAX) {
			snprintf(err, errlen, "\"ids\" must be an array of 1 to "
			    "%d row ids", ADMIN_REDRIVE_IDS_MAX);
			goto fail;
		}
		if ((sel->ids = calloc((size_t)n, sizeof(*sel->ids))) == NULL) {
			snprintf(err, errlen, "out of memory");
			goto fail;
		}
		cJSON_ArrayForEach(e, ids) {
			/* 2^53: a double holds every integer below */
			if (!cJSON_IsNumber(e) || e->valuedouble < 1 ||
			    e->valuedouble > 9007199254740991.0 ||
			    e->valuedouble != (double)(int64_t)e->valuedouble) {
				snprintf(err, errlen, "\"ids\" must hold "
				    "positive integers");
				goto fail;
			}
			sel->ids[sel->nids++] = (int64_t)e->valuedouble;
		}
	}
	cJSON_Delete(root);
	return 0;
fail:
	cJSON_Delete(root);
	admin_redrive_clear(sel);
	return -1;
}

int
admin_redrive(struct pg_conn *conn, const struct conf *c,
    const struct admin_redrive *sel, cJSON **out, char *err, size_t errlen)
{
	PGresult	*res, *w;
	cJSON		*root, *arr;
	const char	*p[3];
	char		*ids = NULL;
	int		 i, n;

	*out = NULL;
	p[0] = sel->destination;
	p[1] = admin_default_name(c);
	if (sel->all)
		res = admin_exec(conn, "redrive", admin_sql_redrive_all, 2,
		    p, PGRES_TUPLES_OK, err, errlen);
	else if (sel->event_type != NULL) {
		p[2] = sel->event_type;
		res = admin_exec(conn, "redrive", admin_sql_redrive_type, 3,
		    p, PGRES_TUPLES_OK, err, errlen);
	} else {
		if ((ids = db_int8_array(sel->ids, sel->nids)) == NULL) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		p[2] = ids;
		res = admin_exec(conn, "redrive", admin_sql_redrive_ids, 3, p,
		    PGRES_TUPLES_OK, err, errlen);
		free(ids);
	}
	if (res == NULL)
		return -1;
	n = PQntuples(res);
	/* Committed already; a lost wake-up only waits for the next poll. */
	if (n > 0 && (w = admin_exec(conn, "wake the relays", admin_sql_wake,
	    0, NULL, PGRES_COMMAND_OK, err, errlen)) != NULL)
		PQclear(w);
	root = cJSON_CreateObject();
	cJSON_AddNumberToObject(root, "redriven", n);
	arr = cJSON_AddArrayToObject(root, "ids");
	for (i = 0; i < n && i < ADMIN_IDS_SHOWN; i++)
		cJSON_AddItemToArray(arr, admin_num(res, i, 0));
	cJSON_AddBoolToObject(root, "ids_truncated", n > ADMIN_IDS_SHOWN);
	PQclear(res);
	return admin_tree_ok(root, out, err, errlen);
}

int
admin_pause(struct pg_conn *conn, int paused, cJSON **out, char *err,
    size_t errlen)
{
	PGresult	*res, *w;
	cJSON		*root;
	const char	*p[1];

	*out = NULL;
	p[0] = paused ? "true" : "false";
	if ((res = admin_exec(conn, paused ? "pause" : "resume",
	    admin_sql_pause, 1, p, PGRES_TUPLES_OK, err, errlen)) == NULL)
		return -1;
	if (PQntuples(res) != 1) {
		snprintf(err, errlen, "%s: outbox_control did not answer",
		    paused ? "pause" : "resume");
		PQclear(res);
		return -1;
	}
	if (!paused && (w = admin_exec(conn, "wake the relays",
	    admin_sql_wake, 0, NULL, PGRES_COMMAND_OK, err, errlen)) != NULL)
		PQclear(w);
	root = cJSON_CreateObject();
	cJSON_AddBoolToObject(root, "paused",
	    strcmp(PQgetvalue(res, 0, 0), "t") == 0);
	cJSON_AddItemToObject(root, "paused_at", admin_str(res, 0, 1));
	PQclear(res);
	return admin_tree_ok(root, out, err, errlen);
}

int
admin_token_equal(const char *a, const char *b)
{
	unsigned char	da[EVP_MAX_MD_SIZE], db[EVP_MAX_MD_SIZE];
	unsigned int	la = 0, lb = 0;

	if (a == NULL || b == NULL)
		return 0;
	/* Equal-length digests: the comparison time tells nothing about
	 * the token, not even its length. */
	if (EVP_Digest(a, strlen(a), da, &la, EVP_sha256(), NULL) != 1 ||
	    EVP_Digest(b, strlen(b), db, &lb, EVP_sha256(), NULL) != 1 ||
	    la != lb)
		return 0;
	return CRYPTO_memcmp(da, db, la) == 0;
}
