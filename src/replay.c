/*
 * replay.c - requests to publish sent outbox rows again (outboxctl
 * replay, POST /outbox/replay): the filter and its checks, the dry run's
 * count, the record of a replay, its progress and its cancellation.
 *
 * A request only records the replay (outbox_replays, sql/schema.sql);
 * relay 1's job (replay_job.c) puts the selected rows back to pending a
 * few at a time, at relay.replay_rate, so live rows never queue behind
 * a large replay.  The relay then publishes a replayed row as any other,
 * with its original id and body, and adds the Outbox-Replay header.
 *
 * Every filter value is checked here, before any statement: a value the
 * database would refuse (a time it cannot read, bytes that are not
 * UTF-8) is the caller's mistake, a 400, not a database error.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <libpq-fe.h>

#include "outboxd.h"
#include "replay.h"

/* The rows a filter selects, as outbox_replay_step() selects them: sent
 * at or before the request.  $1 event type, $2 key, $3 destination, $4
 * the default destination's name, $5..$8 the time ranges (NULL: any),
 * $9 who, $10 a dry run. */
static const char replay_sql_request[] =
	"WITH c AS (SELECT count(*) AS n, "
	"(SELECT max(m.id) FROM outbox m) AS last FROM outbox o "
	"WHERE o.status = 'sent' AND o.sent_at <= now() "
	"AND ($1::text IS NULL OR o.event_type = $1) "
	"AND ($2::text IS NULL OR o.ordering_key = $2) "
	"AND ($3::text IS NULL OR coalesce(o.destination, $4::text) = $3) "
	"AND ($5::timestamptz IS NULL OR o.created_at >= $5) "
	"AND ($6::timestamptz IS NULL OR o.created_at < $6) "
	"AND ($7::timestamptz IS NULL OR o.sent_at >= $7) "
	"AND ($8::timestamptz IS NULL OR o.sent_at < $8)), "
	"i AS (INSERT INTO outbox_replays (event_type, ordering_key, "
	"destination, default_destination, created_from, created_to, "
	"sent_from, sent_to, requested_by, last_id, total) "
	"SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, c.last, c.n FROM c "
	"WHERE c.n > 0 AND NOT $10::boolean RETURNING id) "
	"SELECT c.n, i.id FROM c LEFT JOIN i ON true";

/* A replay's object, columns in replay_obj()'s order. */
#define REPLAY_SQL_COLUMNS \
	"SELECT r.id, r.event_type, r.ordering_key, r.destination, " \
	"to_json(r.created_from) #>> '{}', to_json(r.created_to) #>> '{}', " \
	"to_json(r.sent_from) #>> '{}', to_json(r.sent_to) #>> '{}', " \
	"r.requested_by, to_json(r.requested_at) #>> '{}', r.total, r.done, " \
	"(SELECT count(*) FROM outbox o WHERE o.replay = r.id " \
	"AND o.status = 'pending'), " \
	"(SELECT count(*) FROM outbox o WHERE o.replay = r.id " \
	"AND o.status = 'failed'), " \
	"to_json(r.finished_at) #>> '{}', r.cancelled " \
	"FROM outbox_replays r "
static const char replay_sql_list[] = REPLAY_SQL_COLUMNS
	"WHERE $1::bigint = 0 OR r.id = $1 ORDER BY r.id DESC LIMIT $2";
static const char replay_sql_cancel[] =
	"UPDATE outbox_replays SET finished_at = now(), cancelled = true "
	"WHERE id = $1 AND finished_at IS NULL RETURNING id";

static const char *const replay_parts[] = {
	"event_type", "ordering_key", "destination", "created_from",
	"created_to", "sent_from", "sent_to"
};
#define REPLAY_NPARTS	(sizeof(replay_parts) / sizeof(replay_parts[0]))

/* The filter's part i (replay_parts' order). */
static char **
replay_part(struct replay_filter *f, size_t i)
{
	char	**p[REPLAY_NPARTS] = { &f->event_type, &f->ordering_key,
		    &f->destination, &f->created_from, &f->created_to,
		    &f->sent_from, &f->sent_to };

	return p[i];
}

static const char *
replay_part_get(const struct replay_filter *f, size_t i)
{
	return *replay_part((struct replay_filter *)f, i);
}

void
replay_filter_clear(struct replay_filter *f)
{
	size_t	i;

	for (i = 0; i < REPLAY_NPARTS; i++)
		free(*replay_part(f, i));
	memset(f, 0, sizeof(*f));
}

/* n decimal digits at s into *v; -1 if any is not a digit. */
static int
replay_digits(const char *s, int n, int *v)
{
	int	i;

	*v = 0;
	for (i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		*v = *v * 10 + (s[i] - '0');
	}
	return 0;
}

/* Days from 1970-01-01 to y-m-d of the proleptic Gregorian calendar
 * (Howard Hinnant's days_from_civil). */
static int64_t
replay_days(int64_t y, int m, int d)
{
	int64_t	era, yoe, doy;

	y -= m <= 2;
	era = (y >= 0 ? y : y - 399) / 400;
	yoe = y - era * 400;
	doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	return era * 146097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719468;
}

/*
 * RFC 3339, section 5.6: full-date "T" full-time, where time-secfrac is
 * "." and digits and time-offset "Z" or +hh:mm / -hh:mm; "T" and "Z" in
 * either case (section 5.6's note).  Second 60 is a leap second.  Of
 * what RFC 3339 allows, PostgreSQL's timestamptz refuses the year 0000 and
 * offsets beyond 15:59: refused here too, so that they are the client's
 * 400 and not the database's error.
 */
int
replay_time_parse(const char *s, double *secs)
{
	static const int	 mdays[] = { 31, 29, 31, 30, 31, 30, 31, 31,
				    30, 31, 30, 31 };
	const char		*p;
	int			 y, mo, d, h, mi, sec, oh = 0, om = 0, sign = 0;
	double			 frac = 0, scale = 0.1;

	if (strlen(s) < 20 || replay_digits(s, 4, &y) == -1 || s[4] != '-' ||
	    replay_digits(s + 5, 2, &mo) == -1 || s[7] != '-' ||
	    replay_digits(s + 8, 2, &d) == -1 ||
	    (s[10] != 'T' && s[10] != 't') ||
	    replay_digits(s + 11, 2, &h) == -1 || s[13] != ':' ||
	    replay_digits(s + 14, 2, &mi) == -1 || s[16] != ':' ||
	    replay_digits(s + 17, 2, &sec) == -1)
		return 0;
	if (y < 1 || mo < 1 || mo > 12 || d < 1 || d > mdays[mo - 1] ||
	    h > 23 || mi > 59 || sec > 60)
		return 0;
	if (mo == 2 && d == 29 && !(y % 4 == 0 && (y % 100 != 0 ||
	    y % 400 == 0)))
		return 0;
	p = s + 19;
	if (*p == '.') {
		if (p[1] < '0' || p[1] > '9')
			return 0;
		/* PostgreSQL keeps microseconds; more digits are rounded. */
		for (p++; *p >= '0' && *p <= '9'; p++) {
			if (p - (s + 19) > 9)
				return 0;
			frac += (*p - '0') * scale;
			scale /= 10;
		}
	}
	if (*p == 'Z' || *p == 'z')
		p++;
	else if (*p == '+' || *p == '-') {
		sign = *p == '-' ? -1 : 1;
		if (replay_digits(p + 1, 2, &oh) == -1 || p[3] != ':' ||
		    replay_digits(p + 4, 2, &om) == -1 || oh > 15 || om > 59)
			return 0;
		p += 6;
	} else
		return 0;
	if (*p != '\0')
		return 0;
	*secs = (double)replay_days(y, mo, d) * 86400 + h * 3600 + mi * 60 +
	    sec + frac - sign * (oh * 3600 + om * 60);
	return 1;
}

int
replay_filter_set(struct replay_filter *f, const struct conf *c,
    const char *name, const char *value, char *err, size_t errlen)
{
	char	**slot;
	double	  t;
	size_t	  i, len = strlen(value);

	for (i = 0; i < REPLAY_NPARTS; i++)
		if (strcmp(name, replay_parts[i]) == 0)
			break;
	if (i == REPLAY_NPARTS) {
		snprintf(err, errlen, "unknown filter \"%.64s\" (expected "
		    "event_type, ordering_key, destination, created_from, "
		    "created_to, sent_from, sent_to; and dry_run)", name);
		return -1;
	}
	slot = replay_part(f, i);
	if (*slot != NULL) {
		snprintf(err, errlen, "%s is given twice", name);
		return -1;
	}
	if (i == 2) {
		switch (admin_dest_check(c, value, err, errlen)) {
		case 0:
			break;
		case -1:
			return REPLAY_BAD_DESTINATION;
		default:
			return REPLAY_UNKNOWN_DESTINATION;
		}
	} else if (i >= 3) {
		if (!replay_time_parse(value, &t)) {
			snprintf(err, errlen, "%s must be an RFC 3339 date-time "
			    "such as 2026-01-02T03:04:05Z or "
			    "2026-01-02T03:04:05.5+01:00 (year 0001 or later, "
			    "offset within 15:59)", name);
			return -1;
		}
	} else if (len == 0 || len > REPLAY_VALUE_MAX ||
	    !order_utf8_valid((const unsigned char *)value, len)) {
		snprintf(err, errlen, "%s must be 1 to %d bytes of UTF-8", name,
		    REPLAY_VALUE_MAX);
		return -1;
	}
	if ((*slot = strdup(value)) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	return 0;
}

int
replay_filter_check(const struct replay_filter *f, char *err, size_t errlen)
{
	double	a, b;
	size_t	i;

	for (i = 0; i < REPLAY_NPARTS; i++)
		if (replay_part_get(f, i) != NULL)
			break;
	if (i == REPLAY_NPARTS) {
		snprintf(err, errlen, "a replay needs a filter: at least one of "
		    "event_type, ordering_key, destination, created_from, "
		    "created_to, sent_from and sent_to (a replay of every sent "
		    "row is never what was meant)");
		return -1;
	}
	if (f->created_from != NULL && f->created_to != NULL &&
	    replay_time_parse(f->created_from, &a) &&
	    replay_time_parse(f->created_to, &b) && a >= b) {
		snprintf(err, errlen, "created_from must be before created_to");
		return -1;
	}
	if (f->sent_from != NULL && f->sent_to != NULL &&
	    replay_time_parse(f->sent_from, &a) &&
	    replay_time_parse(f->sent_to, &b) && a >= b) {
		snprintf(err, errlen, "sent_from must be before sent_to");
		return -1;
	}
	return 0;
}

int
replay_parse(const char *body, size_t len, const struct conf *c,
    struct replay_filter *f, int *dry_run, char *err, size_t errlen)
{
	struct json_error	 jerr;
	cJSON			*root, *e;
	int			 rv = -1;

	memset(f, 0, sizeof(*f));
	*dry_run = 0;
	/* As strict as POST /outbox/redrive (admin.c). */
	if (body != NULL && len > 0 && body[len - 1] == '\0')
		len--;
	if ((root = json_parse(body, len, NULL, 0, &jerr)) == NULL ||
	    !cJSON_IsObject(root)) {
		snprintf(err, errlen, "%s%sthe body must be a JSON object such "
		    "as {\"event_type\":\"order.created\","
		    "\"created_from\":\"2026-01-02T00:00:00Z\",\"dry_run\":true}",
		    root == NULL ? json_message(jerr.fault) : "",
		    root == NULL ? "; " : "");
		cJSON_Delete(root);
		return -1;
	}
	cJSON_ArrayForEach(e, root) {
		if (strcmp(e->string, "dry_run") == 0) {
			if (!cJSON_IsBool(e)) {
				snprintf(err, errlen, "\"dry_run\" must be true "
				    "or false");
				goto fail;
			}
			*dry_run = cJSON_IsTrue(e);
			continue;
		}
		if (!cJSON_IsString(e)) {
			snprintf(err, errlen, "\"%.64s\" must be a string",
			    e->string);
			goto fail;
		}
		if ((rv = replay_filter_set(f, c, e->string, e->valuestring,
		    err, errlen)) != 0)
			goto fail;
		rv = -1;
	}
	if (replay_filter_check(f, err, errlen) == -1)
		goto fail;
	cJSON_Delete(root);
	return 0;
fail:
	cJSON_Delete(root);
	replay_filter_clear(f);
	return rv;
}

/* Run sql; the result if it has the wanted status, else NULL with err. */
static PGresult *
replay_exec(PGconn *conn, const char *what, const char *sql, int nparams,
    const char *const *params, ExecStatusType want, char *err,
    size_t errlen)
{
	PGresult	*res;
	char		 buf[512];

	res = PQexecParams(conn, sql, nparams, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(res) == want)
		return res;
	snprintf(err, errlen, "%s: %s", what, db_errline(buf, sizeof(buf),
	    res != NULL ? PQresultErrorMessage(res) : PQerrorMessage(conn)));
	PQclear(res);
	return NULL;
}

/* A text column, or JSON null. */
static cJSON *
replay_str(const PGresult *res, int row, int col)
{
	if (PQgetisnull(res, row, col))
		return cJSON_CreateNull();
	return cJSON_CreateString(PQgetvalue(res, row, col));
}

static cJSON *
replay_num(const PGresult *res, int row, int col)
{
	return cJSON_CreateNumber(strtod(PQgetvalue(res, row, col), NULL));
}

/* The filter's parts that are set, as a JSON object. */
static cJSON *
replay_filter_json(const struct replay_filter *f)
{
	cJSON	*o = cJSON_CreateObject();
	size_t	 i;

	for (i = 0; i < REPLAY_NPARTS; i++)
		if (replay_part_get(f, i) != NULL)
			cJSON_AddStringToObject(o, replay_parts[i],
			    replay_part_get(f, i));
	return o;
}

/* Row i of a REPLAY_SQL_COLUMNS answer as the API's object. */
static cJSON *
replay_obj(const PGresult *res, int i)
{
	cJSON		*o = cJSON_CreateObject(), *filter;
	const char	*state;
	int		 col;

	cJSON_AddItemToObject(o, "id", replay_num(res, i, 0));
	if (!PQgetisnull(res, i, 15) && strcmp(PQgetvalue(res, i, 15), "t") ==
	    0)
		state = "cancelled";
	else if (PQgetisnull(res, i, 14))
		state = "running";
	else if (strcmp(PQgetvalue(res, i, 12), "0") != 0)
		state = "sending";
	else
		state = "done";
	cJSON_AddStringToObject(o, "state", state);
	filter = cJSON_AddObjectToObject(o, "filter");
	for (col = 1; col <= 7; col++)
		if (!PQgetisnull(res, i, col))
			cJSON_AddItemToObject(filter, replay_parts[col - 1],
			    replay_str(res, i, col));
	cJSON_AddItemToObject(o, "requested_by", replay_str(res, i, 8));
	cJSON_AddItemToObject(o, "requested_at", replay_str(res, i, 9));
	cJSON_AddItemToObject(o, "total", replay_num(res, i, 10));
	cJSON_AddItemToObject(o, "done", replay_num(res, i, 11));
	cJSON_AddItemToObject(o, "pending", replay_num(res, i, 12));
	cJSON_AddItemToObject(o, "failed", replay_num(res, i, 13));
	cJSON_AddItemToObject(o, "finished_at", replay_str(res, i, 14));
	cJSON_AddBoolToObject(o, "cancelled", strcmp(state, "cancelled") == 0);
	return o;
}

/* Replay id's object, or NULL (err set: a database error; else none). */
static cJSON *
replay_get(PGconn *conn, int64_t id, char *err, size_t errlen)
{
	PGresult	*res;
	const char	*p[2];
	char		 ids[24];
	cJSON		*o = NULL;

	err[0] = '\0';
	snprintf(ids, sizeof(ids), "%" PRId64, id);
	p[0] = ids;
	p[1] = "1";
	if ((res = replay_exec(conn, "replay", replay_sql_list, 2, p,
	    PGRES_TUPLES_OK, err, errlen)) == NULL)
		return NULL;
	if (PQntuples(res) == 1)
		o = replay_obj(res, 0);
	PQclear(res);
	return o;
}

int
replay_request(struct pg_conn *conn, const struct conf *c,
    const struct replay_filter *f, int dry_run, const char *requested_by,
    cJSON **out, char *err, size_t errlen)
{
	PGresult	*res;
	const char	*p[10];
	cJSON		*root, *rep = NULL;
	size_t		 i;
	int64_t		 id = 0;

	*out = NULL;
	for (i = 0; i < 3; i++)
		p[i] = replay_part_get(f, i);
	p[3] = c->default_destination >= 0 ?
	    c->destinations[c->default_destination].name : NULL;
	for (i = 3; i < REPLAY_NPARTS; i++)
		p[i + 1] = replay_part_get(f, i);
	p[8] = requested_by;
	p[9] = dry_run ? "true" : "false";
	if ((res = replay_exec(conn, "replay", replay_sql_request, 10, p,
	    PGRES_TUPLES_OK, err, errlen)) == NULL)
		return -1;
	if (PQntuples(res) != 1) {
		snprintf(err, errlen, "replay: no answer to the count");
		PQclear(res);
		return -1;
	}
	root = cJSON_CreateObject();
	cJSON_AddBoolToObject(root, "dry_run", dry_run);
	cJSON_AddItemToObject(root, "selected", replay_num(res, 0, 0));
	cJSON_AddItemToObject(root, "filter", replay_filter_json(f));
	if (!PQgetisnull(res, 0, 1))
		id = strtoll(PQgetvalue(res, 0, 1), NULL, 10);
	PQclear(res);
	/* Committed: a failure to read it back is the request's answer
	 * still, with the id alone. */
	if (id > 0 && (rep = replay_get(conn, id, err, errlen)) == NULL) {
		rep = cJSON_CreateObject();
		cJSON_AddNumberToObject(rep, "id", (double)id);
	}
	cJSON_AddItemToObject(root, "replay", rep != NULL ? rep :
	    cJSON_CreateNull());
	*out = root;
	return 0;
}

int
replay_list(struct pg_conn *conn, int64_t id, int limit, cJSON **out,
    char *err, size_t errlen)
{
	PGresult	*res;
	const char	*p[2];
	char		 ids[24], lim[24];
	cJSON		*root, *arr;
	int		 i;

	*out = NULL;
	snprintf(ids, sizeof(ids), "%" PRId64, id);
	snprintf(lim, sizeof(lim), "%d", limit);
	p[0] = ids;
	p[1] = lim;
	if ((res = replay_exec(conn, "replays", replay_sql_list, 2, p,
	    PGRES_TUPLES_OK, err, errlen)) == NULL)
		return -1;
	root = cJSON_CreateObject();
	arr = cJSON_AddArrayToObject(root, "replays");
	for (i = 0; i < PQntuples(res); i++)
		cJSON_AddItemToArray(arr, replay_obj(res, i));
	PQclear(res);
	*out = root;
	return 0;
}

int
replay_cancel(struct pg_conn *conn, int64_t id, cJSON **out, char *err,
    size_t errlen)
{
	PGresult	*res;
	const char	*p[1];
	char		 ids[24];
	int		 n;

	*out = NULL;
	snprintf(ids, sizeof(ids), "%" PRId64, id);
	p[0] = ids;
	if ((res = replay_exec(conn, "cancel replay", replay_sql_cancel, 1, p,
	    PGRES_TUPLES_OK, err, errlen)) == NULL)
		return -1;
	n = PQntuples(res);
	PQclear(res);
	if ((*out = replay_get(conn, id, err, errlen)) == NULL)
		return err[0] != '\0' ? -1 : 0;
	return n == 1 ? 1 : -2;
}
