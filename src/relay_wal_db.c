/*
 * relay_wal_db.c - relay.mode = "wal": the outbox table stays the truth.
 * Rows published from the WAL are marked sent, and rows that failed for
 * good are marked failed with their last error, in bulk: one statement
 * for everything queued, sent without waiting on the relay's normal
 * connection at most every WAL_TICK_MS (relay_wal.c), off the stream's
 * path.  A row's event is done (its transaction may be confirmed) only
 * once the statement has committed, so that a confirmed row is never
 * left pending.  Only pending rows change: a row a table-mode relay
 * (during a switch) or an operator has dealt with meanwhile is left as
 * it is.
 */
#include "config.h"

#include <sys/select.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <event2/event.h>
#include <libpq-fe.h>

#include "relay_wal.h"

#define WAL_ERROR_MAX	1000	/* bytes of last_error kept, as in table
				   mode */
#define WAL_RECORD_MAX	5000	/* rows per statement */
#define WAL_STR_(x)	#x
#define WAL_STR(x)	WAL_STR_(x)

static int	relay_wal_db_ready(struct relay_wal *);

/*
 * Whether the transaction of 32-bit xid X (pgoutput's Begin gives
 * those) is still in progress in the statement's snapshot, with the
 * snapshot as s (WAL_SNAP_SQL): the walsender streams a transaction once
 * its commit is flushed, which may be before the commit is visible to
 * other sessions (a synchronous standby's answer, or a busy machine, lies
 * between), so a row can be published before it can be seen.  X is taken
 * as the xid8 nearest the snapshot's xmax (a streamed transaction is
 * recent); one at or past xmax is in progress too, which
 * pg_snapshot_xip() alone would miss.
 */
#define WAL_SNAP_SQL \
	"(SELECT pg_current_snapshot() AS snap, " \
	"pg_snapshot_xmax(pg_current_snapshot())::text::bigint AS xm) AS s"
#define WAL_IN_PROGRESS_SQL(x) \
	"(" x " <> 0 AND NOT pg_visible_in_snapshot((s.xm + (((" x " - " \
	"s.xm % 4294967296 + 2147483648) % 4294967296 + 4294967296) % " \
	"4294967296 - 2147483648))::text::xid8, s.snap))"

/*
 * $1: a JSON array of {"id", "n" (attempts made), "err" (null: sent),
 * "x" (its transaction's xid)}.  Answers the rows it cannot see, each
 * with whether its transaction is still in progress (marked later) or
 * not (deleted since).  A row seen but no longer pending (marked by
 * table mode meanwhile) is left as it is.  The rows of a key sent here
 * release the next row held behind the last of them (outbox.held: the
 * stamp holds a transaction's later rows of a key), as table mode's mark
 * does, so that a switch to table mode finds none held with nothing left
 * to release it.
 */
static const char relay_wal_record_sql[] =
	"WITH d AS (SELECT * FROM jsonb_to_recordset($1::jsonb) "
	"AS d(id bigint, n int, err text, x bigint)), "
	"u AS (UPDATE outbox o SET "
	"status = CASE WHEN d.err IS NULL THEN 'sent' ELSE 'failed' END, "
	"sent_at = CASE WHEN d.err IS NULL THEN now() END, "
	"claim = NULL, attempts = o.attempts + d.n, last_error = d.err, "
	"held = false "
	"FROM d WHERE o.id = d.id AND o.status = 'pending' "
	"RETURNING o.status, o.ordering_key, o.destination, "
	"ARRAY[coalesce(o.commit_seq, 0), o.id] AS pos), "
	"h AS (UPDATE outbox s SET held = false FROM (SELECT ordering_key, "
	"destination, max(pos) AS pos FROM u WHERE status = 'sent' "
	"GROUP BY 1, 2) k WHERE s.id = (SELECT n.id FROM outbox n "
	"WHERE n.held AND n.ordering_key = k.ordering_key "
	"AND n.destination IS NOT DISTINCT FROM k.destination "
	"AND (coalesce(n.commit_seq, 0), n.id) > (k.pos[1], k.pos[2]) "
	"ORDER BY coalesce(n.commit_seq, 0), n.id LIMIT 1)) "
	"SELECT d.id, " WAL_IN_PROGRESS_SQL("d.x") " FROM d, " WAL_SNAP_SQL
	" WHERE NOT EXISTS (SELECT 1 FROM outbox o WHERE o.id = d.id) "
	"ORDER BY d.id";

static int
relay_wal_id_cmp(const void *a, const void *b)
{
	int64_t	x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

/* res's rows (id, in progress): the ids whose second column is true
 * into *t, the others into *f, in order; caller frees both. */
static void
relay_wal_split(const PGresult *res, int64_t **t, int *nt, int64_t **f,
    int *nf)
{
	int	i, n = PQntuples(res);

	if ((*t = reallocarray(NULL, (size_t)n + 1, sizeof(**t))) == NULL ||
	    (*f = reallocarray(NULL, (size_t)n + 1, sizeof(**f))) == NULL)
		fatal("reallocarray");
	*nt = *nf = 0;
	for (i = 0; i < n; i++) {
		if (strcmp(PQgetvalue(res, i, 1), "t") == 0)
			(*t)[(*nt)++] = strtoll(PQgetvalue(res, i, 0), NULL, 10);
		else
			(*f)[(*nf)++] = strtoll(PQgetvalue(res, i, 0), NULL, 10);
	}
}

static int
relay_wal_has(const int64_t *v, int n, int64_t id)
{
	return bsearch(&id, v, (size_t)n, sizeof(*v), relay_wal_id_cmp) !=
	    NULL;
}

struct pg_conn *
relay_wal_db(struct relay_wal *w)
{
	char	err[512];

	if (w->db != NULL && PQstatus(w->db) == CONNECTION_OK)
		return w->db;
	relay_wal_db_close(w);
	/* The connect blocks (up to connect_timeout): at most one a
	 * second while the server is away. */
	if (clock_mono_us() < w->db_retry_us)
		return NULL;
	if ((w->db = db_connect(w->conf->database, "relay", err,
	    sizeof(err))) == NULL) {
		w->db_retry_us = clock_mono_us() + 1000000;
		log_limited(&w->db_limit, LOG_LEVEL_WARN, "cannot connect to "
		    "PostgreSQL to record published rows (trying again): %s",
		    err);
		if (!w->db_down) {
			w->db_down = 1;
			relay_wal_confirm(w);
		}
		return NULL;
	}
	w->db_down = 0;
	return w->db;
}

void
relay_wal_db_close(struct relay_wal *w)
{
	int	i;

	if (w->db_ev != NULL)
		event_free(w->db_ev);
	w->db_ev = NULL;
	if (w->db != NULL)
		PQfinish(w->db);
	w->db = NULL;
	w->polling = 0;
	/* A statement lost with its connection: its rows again. */
	for (i = w->nrecording - 1; i >= 0; i--) {
		TAILQ_INSERT_HEAD(&w->recordq, w->recording[i], entry);
		w->nrecord++;
	}
	free(w->recording);
	w->recording = NULL;
	w->nrecording = 0;
}

/* The statement's answer: its events done, or queued again (all of
 * them when it failed; those whose commit is not visible yet, see
 * relay_wal_record_sql, for the next tick).  unseen: the rows not seen
 * whose transaction is no longer in progress: deleted since. */
static void
relay_wal_recorded(struct relay_wal *w, int ok, const int64_t *waiting,
    int nwaiting, const int64_t *unseen, int nunseen)
{
	struct wal_ev	**evs = w->recording;
	int		  i, n = w->nrecording;

	w->recording = NULL;
	w->nrecording = 0;
	if (!ok) {
		for (i = n - 1; i >= 0; i--) {
			TAILQ_INSERT_HEAD(&w->recordq, evs[i], entry);
			w->nrecord++;
		}
		free(evs);
		return;
	}
	for (i = 0; i < n; i++) {
		if (relay_wal_has(waiting, nwaiting, evs[i]->row)) {
			TAILQ_INSERT_TAIL(&w->recordq, evs[i], entry);
			w->nrecord++;
			continue;
		}
		if (relay_wal_has(unseen, nunseen, evs[i]->row))
			log_warnx("outbox row %" PRId64 " was %s but is no "
			    "longer in the outbox (deleted?): not marked",
			    evs[i]->row, evs[i]->m.outcome == SINK_SENT ?
			    "published" : "failed");
		relay_wal_done(w, evs[i]);
	}
	free(evs);
}

/* The pause query's answer: a NULL row when everything is paused, then
 * one row per paused destination. */
static void
relay_wal_paused(struct relay_wal *w, const PGresult *res)
{
	const struct conf_destination	*cd;
	int				 i, was = w->paused_all;

	if (PQresultStatus(res) != PGRES_TUPLES_OK)
		return;			/* kept as they were */
	w->paused_all = 0;
	for (i = 0; i < w->n_dests; i++)
		w->dests[i].paused = 0;
	for (i = 0; i < PQntuples(res); i++) {
		if (PQgetisnull(res, i, 0)) {
			w->paused_all = 1;
			continue;
		}
		if ((cd = conf_destination_find(w->conf, PQgetvalue(res, i,
		    0))) != NULL)
			w->dests[cd - w->conf->destinations].paused = 1;
	}
	if (was != w->paused_all)
		log_info("publishing %s (outboxctl %s)", w->paused_all ?
		    "paused" : "resumed", w->paused_all ? "pause" : "resume");
	relay_wal_pump(w);
}

/* The statement keeping the confirmed position in outbox_wal_confirmed,
 * into buf; "" when there is nothing new (only the streaming relay has:
 * one at a time, so the last writer is right, and a value that came
 * from elsewhere is overwritten).  The slot name is [a-z0-9_]
 * (conf_wal.c), the LSN hexadecimal: no quoting. */
static const char *
relay_wal_store_sql(struct relay_wal *w, char *buf, size_t len)
{
	uint64_t	lag;
	char		lsn[24];

	if (w->confirmed <= w->stored_lsn ||
	    wal_stream_lag(w->stream, &lag) == -1)
		return "";
	snprintf(buf, len, "INSERT INTO outbox_wal_confirmed AS c (slot, lsn) "
	    "VALUES ('%s', '%s') ON CONFLICT (slot) DO UPDATE SET lsn = "
	    "excluded.lsn, updated_at = now(); ",
	    w->conf->relay.wal_slot, pgo_lsn_text(w->confirmed, lsn,
	    sizeof(lsn)));
	w->stored_lsn = w->confirmed;
	return buf;
}

void
relay_wal_pause_poll(struct relay_wal *w)
{
	int64_t		 now = clock_mono_us();
	char		 sql[512], store[256];

	if (w->nrecording > 0 || w->polling || now - w->polled_us < 1000000 ||
	    relay_wal_db(w) == NULL || relay_wal_db_ready(w) == -1)
		return;
	w->polled_us = now;
	/* The position first: its COMMAND_OK is skipped by
	 * relay_wal_paused(). */
	snprintf(sql, sizeof(sql), "%sSELECT NULL::text WHERE (SELECT paused "
	    "FROM outbox_control WHERE id = 1) UNION ALL SELECT destination "
	    "FROM outbox_paused_destinations", relay_wal_store_sql(w, store,
	    sizeof(store)));
	if (PQsendQuery(w->db, sql) != 1 || PQflush(w->db) == -1) {
		relay_wal_db_close(w);
		return;
	}
	w->polling = 1;
	event_add(w->db_ev, NULL);
}

static void
relay_wal_on_db(evutil_socket_t fd, short what, void *arg)
{
	struct relay_wal	*w = arg;
	PGresult		*res;
	char			 why[512];
	int64_t			*unseen = NULL, *waiting = NULL;
	int			 ok = 1, nunseen = 0, nwaiting = 0;

	(void)fd;
	(void)what;
	if (PQconsumeInput(w->db) == 0) {
		log_limited(&w->db_limit, LOG_LEVEL_WARN, "recording published "
		    "rows: %s", db_errline(why, sizeof(why),
		    PQerrorMessage(w->db)));
		relay_wal_db_close(w);
		return;
	}
	if (PQisBusy(w->db))
		return;
	if (w->polling) {
		while ((res = PQgetResult(w->db)) != NULL) {
			relay_wal_paused(w, res);
			PQclear(res);
		}
		w->polling = 0;
		event_del(w->db_ev);
		return;
	}
	while ((res = PQgetResult(w->db)) != NULL) {
		if (PQresultStatus(res) != PGRES_TUPLES_OK) {
			ok = 0;
			log_limited(&w->db_limit, LOG_LEVEL_WARN, "recording "
			    "published rows failed (trying again): %s",
			    db_result_error(why, sizeof(why), res, w->db));
		} else if (unseen == NULL)
			relay_wal_split(res, &waiting, &nwaiting, &unseen,
			    &nunseen);
		PQclear(res);
	}
	event_del(w->db_ev);
	relay_wal_recorded(w, ok, waiting, nwaiting, unseen, nunseen);
	free(waiting);
	free(unseen);
}

/* The JSON parameter for the first up to WAL_RECORD_MAX queued rows,
 * which move to w->recording.  Caller frees. */
static char *
relay_wal_param(struct relay_wal *w)
{
	cJSON		*a, *o;
	struct wal_ev	*ev;
	char		 err[WAL_ERROR_MAX + 1], *text;
	int		 n = 0;

	if ((a = cJSON_CreateArray()) == NULL)
		fatal("cJSON_CreateArray");
	if ((w->recording = reallocarray(NULL, w->nrecord < WAL_RECORD_MAX ?
	    (size_t)w->nrecord : WAL_RECORD_MAX, sizeof(*w->recording))) ==
	    NULL)
		fatal("reallocarray");
	while ((ev = TAILQ_FIRST(&w->recordq)) != NULL && n < WAL_RECORD_MAX) {
		TAILQ_REMOVE(&w->recordq, ev, entry);
		w->nrecord--;
		w->recording[n++] = ev;
		if ((o = cJSON_CreateObject()) == NULL ||
		    cJSON_AddNumberToObject(o, "id", (double)ev->row) == NULL ||
		    cJSON_AddNumberToObject(o, "n", ev->m.attempts) == NULL ||
		    cJSON_AddNumberToObject(o, "x", ev->xid) == NULL)
			fatal("cJSON");
		if (ev->m.outcome == SINK_SENT) {
			if (cJSON_AddNullToObject(o, "err") == NULL)
				fatal("cJSON");
		} else {
			log_utf8_copy(err, sizeof(err), ev->m.error != NULL ?
			    ev->m.error : "unknown error");
			if (cJSON_AddStringToObject(o, "err", err) == NULL)
				fatal("cJSON");
		}
		cJSON_AddItemToArray(a, o);
	}
	w->nrecording = n;
	if ((text = cJSON_PrintUnformatted(a)) == NULL)
		fatal("cJSON_PrintUnformatted");
	cJSON_Delete(a);
	return text;
}

/* The connection's event, made once per connection. */
static int
relay_wal_db_ready(struct relay_wal *w)
{
	if (w->db_ev == NULL && ((w->db_ev = event_new(w->base,
	    PQsocket(w->db), EV_READ | EV_PERSIST, relay_wal_on_db, w)) ==
	    NULL || PQsetnonblocking(w->db, 1) == -1))
		fatalx("event_new");
	return 0;
}

void
relay_wal_record(struct relay_wal *w)
{
	const char	*p[1];
	char		*param, why[512];

	if (w->nrecord == 0 || w->nrecording > 0 || w->polling ||
	    relay_wal_db(w) == NULL)
		return;
	relay_wal_db_ready(w);
	param = relay_wal_param(w);
	p[0] = param;
	if (PQsendQueryParams(w->db, relay_wal_record_sql, 1, NULL, p, NULL,
	    NULL, 0) != 1) {
		log_limited(&w->db_limit, LOG_LEVEL_WARN, "recording published "
		    "rows: %s", db_errline(why, sizeof(why),
		    PQerrorMessage(w->db)));
		free(param);
		relay_wal_db_close(w);
		return;
	}
	free(param);
	if (PQflush(w->db) == -1) {
		relay_wal_db_close(w);
		return;
	}
	event_add(w->db_ev, NULL);
}

/* Wait (blocking) for the statement in flight, if any, and take its
 * answer. */
static void
relay_wal_db_wait(struct relay_wal *w)
{
	if ((w->nrecording == 0 && !w->polling) || w->db == NULL)
		return;
	PQsetnonblocking(w->db, 0);
	while (w->db != NULL && (w->nrecording > 0 || w->polling) &&
	    PQisBusy(w->db) && PQconsumeInput(w->db) == 1) {
		struct timeval	tv = { 0, 10000 };
		fd_set		rfds;

		FD_ZERO(&rfds);
		FD_SET(PQsocket(w->db), &rfds);
		(void)select(PQsocket(w->db) + 1, &rfds, NULL, NULL, &tv);
	}
	if (w->db != NULL && (w->nrecording > 0 || w->polling))
		relay_wal_on_db(-1, EV_READ, w);
	if (w->db != NULL)
		PQsetnonblocking(w->db, 1);
}

void
relay_wal_store_now(struct relay_wal *w)
{
	char	store[256];

	relay_wal_db_wait(w);
	if (w->db != NULL && *relay_wal_store_sql(w, store, sizeof(store)))
		PQclear(PQexec(w->db, store));
}

void
relay_wal_stored_forget(struct relay_wal *w, uint64_t lsn)
{
	char	text[24];
	const char *p[2] = { w->conf->relay.wal_slot, text };

	pgo_lsn_text(lsn, text, sizeof(text));
	if (w->db != NULL)
		PQclear(PQexecParams(w->db, "DELETE FROM outbox_wal_confirmed "
		    "WHERE slot = $1 AND lsn = $2::pg_lsn", 2, NULL, p, NULL,
		    NULL, 0));
}

int
relay_wal_stored(struct relay_wal *w, uint64_t *lsn)
{
	PGresult	*res;
	const char	*p[1] = { w->conf->relay.wal_slot };
	int		 rv = -1;

	*lsn = 0;
	if (relay_wal_db(w) == NULL || (relay_wal_db_wait(w), w->db == NULL))
		return -1;
	res = PQexecParams(w->db, "SELECT lsn::text FROM outbox_wal_confirmed "
	    "WHERE slot = $1", 1, NULL, p, NULL, NULL, 0);
	if (PQresultStatus(res) == PGRES_TUPLES_OK && (PQntuples(res) == 0 ||
	    pgo_lsn_parse(PQgetvalue(res, 0, 0), lsn) == 0))
		rv = 0;
	PQclear(res);
	return rv;
}

void
relay_wal_record_now(struct relay_wal *w)
{
	int	tries;

	/* A statement in flight first, then the rest, a few at most. */
	for (tries = 0; tries < 4 && (w->nrecording > 0 || w->nrecord > 0);
	    tries++) {
		relay_wal_db_wait(w);
		relay_wal_record(w);
		if (w->nrecording == 0)
			return;
		relay_wal_db_wait(w);
	}
}

/* Run sql (blocking) expecting want: the result (caller clears), or
 * NULL logged. */
static PGresult *
relay_wal_exec(struct relay_wal *w, const char *sql, int n,
    const char *const *p, ExecStatusType want)
{
	PGresult	*res;
	char		 why[512];

	res = PQexecParams(w->db, sql, n, NULL, p, NULL, NULL, 0);
	if (PQresultStatus(res) == want)
		return res;
	log_error("catch-up: %s", db_result_error(why, sizeof(why), res,
	    w->db));
	PQclear(res);
	return NULL;
}

/*
 * The rows pending in the snapshot the slot exported (read in it, in a
 * repeatable-read transaction that imports it) committed before the
 * slot's consistent point: marked claim = -1, only if still pending,
 * after that transaction (an imported snapshot's transaction would fail
 * on rows changed since).  A table-mode relay still running during a
 * switch may claim one of them meanwhile: it publishes it, and so may
 * the catch-up (a duplicate).
 */
int
relay_wal_catchup_mark(struct relay_wal *w, const char *snapshot)
{
	PGresult	*res;
	const char	*p[1];
	char		 sql[128], *ids;
	int64_t		*v;
	int		 i, n;

	if (strspn(snapshot, "0123456789ABCDEFabcdef-") != strlen(snapshot) ||
	    strlen(snapshot) > 64 || relay_wal_db(w) == NULL)
		return -1;
	relay_wal_db_wait(w);
	if (w->db == NULL)
		return -1;
	if ((res = relay_wal_exec(w, "BEGIN ISOLATION LEVEL REPEATABLE READ "
	    "READ ONLY", 0, NULL, PGRES_COMMAND_OK)) == NULL)
		return -1;
	PQclear(res);
	snprintf(sql, sizeof(sql), "SET TRANSACTION SNAPSHOT '%s'", snapshot);
	if ((res = relay_wal_exec(w, sql, 0, NULL, PGRES_COMMAND_OK)) ==
	    NULL || (PQclear(res), res = relay_wal_exec(w, "SELECT id FROM "
	    "outbox WHERE status = 'pending'", 0, NULL, PGRES_TUPLES_OK)) ==
	    NULL) {
		PQclear(PQexec(w->db, "ROLLBACK"));
		return -1;
	}
	n = PQntuples(res);
	if ((v = reallocarray(NULL, n > 0 ? (size_t)n : 1, sizeof(*v))) ==
	    NULL)
		fatal("reallocarray");
	for (i = 0; i < n; i++)
		v[i] = strtoll(PQgetvalue(res, i, 0), NULL, 10);
	PQclear(res);
	PQclear(PQexec(w->db, "COMMIT"));
	if ((ids = db_int8_array(v, n)) == NULL)
		fatal("db_int8_array");
	free(v);
	p[0] = ids;
	res = relay_wal_exec(w, "UPDATE outbox SET claim = -1 WHERE id = "
	    "ANY($1::bigint[]) AND status = 'pending'", 1, p,
	    PGRES_COMMAND_OK);
	free(ids);
	if (res == NULL)
		return -1;
	log_info("catch-up: %s row(s) were pending before slot %s existed: "
	    "they are published first", PQcmdTuples(res),
	    w->conf->relay.wal_slot);
	PQclear(res);
	return 0;
}

/*
 * The backlog's rows were committed while this stream did not run:
 * table mode (a slot kept through a table-mode period), or this relay
 * before a restart (sent and marked, not yet confirmed), may have
 * published or failed them since.  Their status is the truth.  A row
 * not to be seen waits while its transaction is in progress in the same
 * snapshot (its commit not visible yet, see WAL_IN_PROGRESS_SQL);
 * otherwise it was deleted (retention deletes rows sent long ago).
 */
int
relay_wal_check(struct relay_wal *w)
{
	struct wal_ev	*ev;
	PGresult	*res;
	const char	*p[2];
	char		*ids, *xids, why[512];
	int64_t		*v, *x;
	int		 i, n = 0;

	if ((v = reallocarray(NULL, (size_t)w->nchecks + 1, sizeof(*v))) ==
	    NULL || (x = reallocarray(NULL, (size_t)w->nchecks + 1,
	    sizeof(*x))) == NULL)
		fatal("reallocarray");
	TAILQ_FOREACH(ev, &w->checkq, entry)
		if (ev->row > 0) {
			x[n] = ev->xid;
			v[n++] = ev->row;
		}
	if (n == 0 || relay_wal_db(w) == NULL || (relay_wal_db_wait(w),
	    w->db == NULL)) {
		free(v);
		free(x);
		return n == 0 ? 0 : -1;
	}
	if ((ids = db_int8_array(v, n)) == NULL ||
	    (xids = db_int8_array(x, n)) == NULL)
		fatal("db_int8_array");
	free(v);
	free(x);
	p[0] = ids;
	p[1] = xids;
	/* A row per event, in checkq's order, in one snapshot: pending
	 * (NULL: not to be seen), and then whether its transaction is in
	 * progress.  id = ANY keeps the join to outbox an index lookup
	 * whatever the statistics say (see relay_mark_sql). */
	res = PQexecParams(w->db, "SELECT o.status = 'pending', CASE WHEN "
	    "o.id IS NULL THEN " WAL_IN_PROGRESS_SQL("d.x") " END FROM "
	    "unnest($1::bigint[], $2::bigint[]) WITH ORDINALITY AS d(id, x, i) "
	    "LEFT JOIN outbox o ON o.id = d.id AND o.id = ANY ($1::bigint[]) "
	    "CROSS JOIN " WAL_SNAP_SQL
	    " ORDER BY d.i", 2, NULL, p, NULL, NULL, 0);
	free(ids);
	free(xids);
	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != n) {
		log_limited(&w->db_limit, LOG_LEVEL_WARN, "checking the rows "
		    "committed before the stream started (trying again): %s",
		    db_result_error(why, sizeof(why), res, w->db));
		PQclear(res);
		return -1;
	}
	i = 0;
	TAILQ_FOREACH(ev, &w->checkq, entry) {
		ev->gone = 0;
		if (ev->row <= 0)
			continue;
		if (PQgetisnull(res, i, 0))
			ev->gone = strcmp(PQgetvalue(res, i, 1), "t") == 0 ?
			    -1 : 1;
		else if (strcmp(PQgetvalue(res, i, 0), "t") != 0)
			ev->gone = 1;
		i++;
	}
	PQclear(res);
	return 0;
}

#define WAL_CATCHUP_PAGE	5000	/* rows a catch-up page takes */

int
relay_wal_catchup_load(struct relay_wal *w)
{
	struct wal_txn	*t;
	struct wal_row	 row;
	PGresult	*res;
	const char	*p[1];
	char		 after[24];
	int		 i, n;

	if (relay_wal_db(w) == NULL)
		return -1;
	relay_wal_db_wait(w);
	if (w->db == NULL)
		return -1;
	snprintf(after, sizeof(after), "%" PRId64, w->catchup_after);
	p[0] = after;
	if ((res = relay_wal_exec(w, "SELECT id, event_type, ordering_key, "
	    "payload::text, destination, headers::text, "
	    "(1000 * extract(epoch FROM created_at))::bigint FROM outbox "
	    "WHERE status = 'pending' AND claim = -1 AND id > $1::bigint "
	    "ORDER BY id LIMIT " WAL_STR(WAL_CATCHUP_PAGE), 1, p,
	    PGRES_TUPLES_OK)) == NULL)
		return -1;
	if ((n = PQntuples(res)) > 0) {
		if ((t = calloc(1, sizeof(*t))) == NULL)
			fatal("calloc");
		t->committed = 1;
		t->catchup = 1;
		t->begun_us = clock_mono_us();
		TAILQ_INSERT_HEAD(&w->txns, t, entry);
		w->catchup_txns++;
		w->cur = t;
		for (i = 0; i < n; i++) {
#define COL(c)	((struct pgo_str){ PQgetisnull(res, i, c) ? NULL :	\
		    PQgetvalue(res, i, c), (size_t)PQgetlength(res, i, c) })
			memset(&row, 0, sizeof(row));
			row.id = strtoll(PQgetvalue(res, i, 0), NULL, 10);
			row.type = COL(1);
			row.key = COL(2);
			row.payload = COL(3);
			row.dest = COL(4);
			row.headers = COL(5);
			row.created_ms = strtoll(PQgetvalue(res, i, 6), NULL,
			    10);
#undef COL
			relay_wal_take_row(w, &row);
			w->catchup_after = row.id;
		}
		w->cur = NULL;
		log_info("catch-up: publishing %d row(s) pending before the "
		    "slot", n);
	}
	PQclear(res);
	return n;
}
