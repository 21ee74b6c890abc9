/*
 * wal_stream.c - relay.mode = "wal": the replication connection.  What
 * the server must allow (wal_check()), the publication and the slot
 * (created when missing, never dropped here: outboxctl wal-drop does
 * it), START_REPLICATION with pgoutput, reading the copy stream without
 * blocking on the relay's libevent loop, and standby status updates.
 *
 * PostgreSQL 15 documentation, 55.4 "Streaming Replication Protocol"
 * (CREATE_REPLICATION_SLOT, START_REPLICATION, XLogData, Primary
 * keepalive message, Standby status update) and 31 "Logical
 * Replication" (publications).  pgoutput options: proto_version '1',
 * publication_names, messages 'true' (logical decoding messages).
 *
 * One reader: a slot has at most one active reader.  Every relay worker
 * tries START_REPLICATION; the server refuses all but one with SQLSTATE
 * 55006 (object_in_use), and those stand by and try again every
 * WAL_RETRY_MS, so that when the reader dies (its walsender sees the
 * connection close) another takes over from the confirmed position.
 *
 * The connect and the statements before START_REPLICATION block the loop
 * (they run only while not streaming, at most every WAL_RETRY_MS, with
 * connect_timeout); the stream itself is read with PQconsumeInput and
 * PQgetCopyData(async) when the socket is readable, and status updates
 * are written with PQputCopyData and PQflush without blocking.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <libpq-fe.h>

#include "outboxd.h"
#include "wal.h"

#define WAL_RETRY_MS	1000	/* standing by, or after a lost stream */
#define WAL_STATUS_MS	1000	/* standby status updates, at least */

struct wal_stream {
	struct event_base	*base;
	const struct conf	*conf;
	const struct wal_stream_cb *cb;
	void			*arg;
	PGconn			*conn;
	struct event		*read_ev;
	struct event		*write_ev;	/* PQflush owes bytes */
	struct event		*status_ev;
	struct event		*soon_ev;	/* confirmed moved: report it */
	struct event		*retry_ev;
	struct pgo_msg		 msg;		/* decoded (large) */
	uint64_t		 received;	/* end of the last XLogData */
	uint64_t		 confirmed;	/* flush position to report */
	uint64_t		 reported;	/* ... last reported */
	uint64_t		 server_end;	/* the server's WAL end, as its
						   last message said */
	uint64_t		 start_lsn;	/* its WAL position just before
						   START_REPLICATION */
	int			 streaming;
	int			 paused;
	int			 had_slot;	/* seen the slot since start */
	int			 standing_by;	/* logged once per spell */
	struct log_limit	 fail_limit;
};

static void	wal_stream_retry(struct wal_stream *, const char *why);

/* The value of a one-row, one-column answer to sql on conn, or NULL
 * with the reason in err.  Caller frees. */
static char *
wal_query1(PGconn *conn, const char *sql, const char *const *params,
    int nparams, char *err, size_t errlen)
{
	PGresult	*res;
	char		*v = NULL;

	res = nparams > 0 ? PQexecParams(conn, sql, nparams, NULL, params,
	    NULL, NULL, 0) : PQexec(conn, sql);
	if (PQresultStatus(res) != PGRES_TUPLES_OK)
		db_result_error(err, errlen, res, conn);
	else if (PQntuples(res) == 0)
		snprintf(err, errlen, "no row");
	else if ((v = strdup(PQgetvalue(res, 0, 0))) == NULL)
		snprintf(err, errlen, "out of memory");
	PQclear(res);
	return v;
}

int
wal_check(PGconn *conn, const struct conf *c, char *err, size_t errlen)
{
	const char	*slot[1] = { c->relay.wal_slot };
	char		 why[256], *v;
	int		 rv = -1;

	if ((v = wal_query1(conn, "SHOW wal_level", NULL, 0, why,
	    sizeof(why))) == NULL) {
		snprintf(err, errlen, "cannot read wal_level: %s", why);
		return -1;
	}
	if (strcmp(v, "logical") != 0) {
		snprintf(err, errlen, "relay.mode = \"wal\" needs wal_level = "
		    "logical, and the server has wal_level = %s: set it "
		    "(ALTER SYSTEM SET wal_level = logical) and restart "
		    "PostgreSQL, or use relay.mode = \"table\"", v);
		goto out;
	}
	free(v);
	if ((v = wal_query1(conn, "SELECT CASE WHEN rolreplication OR "
	    "rolsuper THEN 'yes' ELSE current_user END FROM pg_roles WHERE "
	    "rolname = current_user", NULL, 0, why, sizeof(why))) == NULL) {
		snprintf(err, errlen, "cannot read the role's attributes: %s",
		    why);
		return -1;
	}
	if (strcmp(v, "yes") != 0) {
		snprintf(err, errlen, "relay.mode = \"wal\" needs the "
		    "REPLICATION attribute, which role \"%s\" lacks: ALTER "
		    "ROLE \"%s\" REPLICATION (and allow it a replication "
		    "connection in pg_hba.conf)", v, v);
		goto out;
	}
	free(v);
	/* "free" when our slot exists already, else "N/M" slots in use. */
	if ((v = wal_query1(conn, "SELECT CASE WHEN EXISTS (SELECT 1 FROM "
	    "pg_replication_slots WHERE slot_name = $1) THEN 'free' WHEN "
	    "(SELECT count(*) FROM pg_replication_slots) < "
	    "current_setting('max_replication_slots')::int THEN 'free' ELSE "
	    "(SELECT count(*) FROM pg_replication_slots)::text || ' of ' || "
	    "current_setting('max_replication_slots') END", slot, 1, why,
	    sizeof(why))) == NULL) {
		snprintf(err, errlen, "cannot read the replication slots: %s",
		    why);
		return -1;
	}
	if (strcmp(v, "free") != 0) {
		snprintf(err, errlen, "relay.mode = \"wal\" needs a free "
		    "replication slot for \"%s\", and %s are in use: raise "
		    "max_replication_slots (and restart PostgreSQL) or drop a "
		    "slot nobody reads (pg_drop_replication_slot())",
		    c->relay.wal_slot, v);
		goto out;
	}
	rv = 0;
out:
	free(v);
	return rv;
}

/* Connect with replication=database (blocking, connect_timeout 5 s):
 * the operator's conninfo overrides our defaults, and the replication
 * keyword comes after it so that nothing overrides that. */
static PGconn *
wal_connect(const struct conf *c, char *err, size_t errlen)
{
	const char	*keys[] = { "application_name", "options",
			    "connect_timeout",
			    "keepalives_idle", "keepalives_interval",
			    "keepalives_count", "dbname", "replication",
			    "client_encoding", NULL };
	const char	*vals[] = { "outboxd relay wal", "-c TimeZone=UTC",
			    "5", "5", "2", "3",
			    c->database, "database", "UTF8", NULL };
	PGconn		*conn;

	if ((conn = PQconnectdbParams(keys, vals, 1)) == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	if (PQstatus(conn) != CONNECTION_OK) {
		db_errline(err, errlen, PQerrorMessage(conn));
		PQfinish(conn);
		return NULL;
	}
	return conn;
}

/* Run sql (simple query protocol: all a walsender takes) expecting
 * want; 0, or -1 with the reason (and its SQLSTATE into state, 6
 * bytes) in err. */
static int
wal_exec(PGconn *conn, const char *sql, ExecStatusType want, char *state,
    char *err, size_t errlen)
{
	PGresult	*res = PQexec(conn, sql);
	const char	*s;

	if (state != NULL)
		state[0] = '\0';
	if (PQresultStatus(res) == want) {
		PQclear(res);
		return 0;
	}
	db_result_error(err, errlen, res, conn);
	if (state != NULL && (s = PQresultErrorField(res,
	    PG_DIAG_SQLSTATE)) != NULL)
		snprintf(state, 6, "%s", s);
	PQclear(res);
	return -1;
}

/*
 * Create the slot, exporting its snapshot: the rows pending in it
 * committed before the slot's consistent point and will never be
 * streamed, so the owner marks them for the catch-up (relay_wal_db.c)
 * while the snapshot still exists (until the next command on this
 * connection).  If it cannot, the slot is dropped again: made without
 * its catch-up, it would leave those rows behind for good.
 */
static int
wal_create(struct wal_stream *s, char *err, size_t errlen)
{
	const struct conf	*c = s->conf;
	char			 sql[256], why[256];
	const char		*st;
	PGresult		*res;
	int			 rv, exists;

	snprintf(sql, sizeof(sql), "CREATE_REPLICATION_SLOT %s LOGICAL "
	    "pgoutput EXPORT_SNAPSHOT", c->relay.wal_slot);
	res = PQexec(s->conn, sql);
	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQnfields(res) < 3 ||
	    PQntuples(res) != 1) {
		st = PQresultErrorField(res, PG_DIAG_SQLSTATE);
		exists = st != NULL && strcmp(st, "42710") == 0;
		db_result_error(why, sizeof(why), res, s->conn);
		PQclear(res);
		/* Another relay made it meanwhile: its catch-up. */
		if (exists)
			return 0;
		snprintf(err, errlen, "cannot create slot %s: %s",
		    c->relay.wal_slot, why);
		return -1;
	}
	rv = s->cb->created(s->arg, PQgetvalue(res, 0, 2));
	PQclear(res);
	if (rv == -1) {
		snprintf(sql, sizeof(sql), "DROP_REPLICATION_SLOT %s",
		    c->relay.wal_slot);
		(void)wal_exec(s->conn, sql, PGRES_COMMAND_OK, NULL, why,
		    sizeof(why));
		snprintf(err, errlen, "created slot %s but could not mark the "
		    "rows pending before it for the catch-up: dropped it "
		    "again", c->relay.wal_slot);
		return -1;
	}
	log_info("created logical replication slot %s (pgoutput); it is "
	    "never dropped by outboxd itself: outboxctl wal-drop does it",
	    c->relay.wal_slot);
	return 0;
}

/*
 * The publication and the slot, created when missing.  A slot that
 * PostgreSQL invalidated (wal_status 'lost': max_slot_wal_keep_size) is
 * useless: dropped and made again, loudly; so is a slot that vanished
 * after we had seen it (dropped behind our back).  0, or -1.
 */
static int
wal_setup(struct wal_stream *s, char *err, size_t errlen)
{
	const struct conf	*c = s->conf;
	char			 sql[512], why[256], state[6], *v;
	PGresult		*res;
	int			 have, lost;

	snprintf(sql, sizeof(sql), "SELECT 1 FROM pg_publication WHERE "
	    "pubname = '%s'", c->relay.wal_publication);
	res = PQexec(s->conn, sql);
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		db_result_error(err, errlen, res, s->conn);
		PQclear(res);
		return -1;
	}
	have = PQntuples(res) > 0;
	PQclear(res);
	if (!have) {
		snprintf(sql, sizeof(sql), "CREATE PUBLICATION %s FOR TABLE "
		    "outbox WITH (publish = 'insert')",
		    c->relay.wal_publication);
		/* Another relay may make it at the same time: 23505
		 * (unique_violation) or 42710 (duplicate_object). */
		if (wal_exec(s->conn, sql, PGRES_COMMAND_OK, state, why,
		    sizeof(why)) == 0)
			log_info("created publication %s for the outbox's "
			    "inserts", c->relay.wal_publication);
		else if (strcmp(state, "23505") != 0 &&
		    strcmp(state, "42710") != 0) {
			snprintf(err, errlen, "cannot create publication %s: "
			    "%s", c->relay.wal_publication, why);
			return -1;
		}
	}
	/* Names are [a-z0-9_] (conf_wal.c): no quoting needed. */
	snprintf(sql, sizeof(sql), "SELECT coalesce(wal_status, '') FROM "
	    "pg_replication_slots WHERE slot_name = '%s'", c->relay.wal_slot);
	v = wal_query1(s->conn, sql, NULL, 0, why, sizeof(why));
	if (v == NULL && strcmp(why, "no row") != 0) {
		snprintf(err, errlen, "cannot read slot %s: %s",
		    c->relay.wal_slot, why);
		return -1;
	}
	lost = v != NULL && strcmp(v, "lost") == 0;
	have = v != NULL;
	free(v);
	if (lost) {
		log_error("replication slot %s was invalidated by PostgreSQL "
		    "(wal_status lost: the WAL it needed was removed, see "
		    "max_slot_wal_keep_size): dropping it and creating it "
		    "again; rows committed meanwhile are published by the "
		    "catch-up, table-less events committed meanwhile are lost",
		    c->relay.wal_slot);
		snprintf(sql, sizeof(sql), "DROP_REPLICATION_SLOT %s",
		    c->relay.wal_slot);
		if (wal_exec(s->conn, sql, PGRES_COMMAND_OK, NULL, why,
		    sizeof(why)) == -1) {
			snprintf(err, errlen, "cannot drop the lost slot %s: "
			    "%s", c->relay.wal_slot, why);
			return -1;
		}
		have = 0;
	} else if (!have && s->had_slot)
		log_error("replication slot %s is gone (dropped behind "
		    "outboxd's back?): creating it again; rows committed "
		    "meanwhile are published by the catch-up, table-less "
		    "events committed meanwhile are lost", c->relay.wal_slot);
	if (!have && wal_create(s, err, errlen) == -1)
		return -1;
	s->had_slot = 1;
	return 0;
}

static void
wal_stream_flush(struct wal_stream *s)
{
	int	rv;

	if (s->conn == NULL)
		return;
	if ((rv = PQflush(s->conn)) == 1)
		event_add(s->write_ev, NULL);
	else if (rv == -1)
		wal_stream_retry(s, PQerrorMessage(s->conn));
}

/* A standby status update: written = what came, flush = apply = what the
 * relay confirmed. */
static void
wal_stream_status(struct wal_stream *s, int reply)
{
	uint8_t	buf[34];
	size_t	n;

	if (s->conn == NULL || !s->streaming)
		return;
	n = pgo_status_update(buf, s->received > s->confirmed ? s->received :
	    s->confirmed, s->confirmed, s->confirmed,
	    pgo_pg_time(clock_wall_us()), reply);
	if (PQputCopyData(s->conn, (const char *)buf, (int)n) != 1) {
		wal_stream_retry(s, PQerrorMessage(s->conn));
		return;
	}
	s->reported = s->confirmed;
	wal_stream_flush(s);
}

/* One CopyData message of the stream: 0, or -1 (the stream is dropped). */
static int
wal_stream_copy(struct wal_stream *s, const uint8_t *buf, size_t len)
{
	struct pgo_copy	 cp;
	char		 err[256];

	if (pgo_copy_parse(buf, len, &cp, err, sizeof(err)) == -1 ||
	    (cp.kind == PGO_COPY_XLOGDATA &&
	    pgo_parse(cp.data, cp.len, &s->msg, err, sizeof(err)) == -1)) {
		log_error("replication stream of slot %s: %s; reconnecting",
		    s->conf->relay.wal_slot, err);
		return -1;
	}
	if (cp.wal_end > s->server_end)
		s->server_end = cp.wal_end;
	if (cp.kind == PGO_COPY_KEEPALIVE) {
		s->cb->keepalive(s->arg, cp.wal_end);
		if (cp.reply)
			wal_stream_status(s, 0);
		return 0;
	}
	if (cp.wal_start > s->received)
		s->received = cp.wal_start;
	s->cb->msg(s->arg, &s->msg);
	return 0;
}

static void
wal_stream_on_read(evutil_socket_t fd, short what, void *arg)
{
	struct wal_stream	*s = arg;
	char			*buf;
	int			 n;

	(void)fd;
	(void)what;
	if (PQconsumeInput(s->conn) == 0) {
		wal_stream_retry(s, PQerrorMessage(s->conn));
		return;
	}
	while (s->conn != NULL && !s->paused &&
	    (n = PQgetCopyData(s->conn, &buf, 1)) > 0) {
		n = wal_stream_copy(s, (const uint8_t *)buf, (size_t)n);
		PQfreemem(buf);
		if (n == -1) {
			wal_stream_retry(s, NULL);
			return;
		}
	}
	if (s->conn == NULL || s->paused)
		return;
	if (n == -1) {
		PGresult	*res = PQgetResult(s->conn);
		char		 why[256];

		/* The server ended the copy (it is shutting down): the
		 * result is a success, its status no reason to show. */
		if (PQresultStatus(res) == PGRES_COMMAND_OK)
			snprintf(why, sizeof(why), "the server ended the "
			    "stream (shutting down?)");
		else
			db_result_error(why, sizeof(why), res, s->conn);
		PQclear(res);
		wal_stream_retry(s, why);
	} else if (n == -2)
		wal_stream_retry(s, PQerrorMessage(s->conn));
}

static void
wal_stream_on_write(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	wal_stream_flush(arg);
}

static void
wal_stream_on_status(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	wal_stream_status(arg, 0);
}

/* Connect, set up, START_REPLICATION; else try again later. */
static void
wal_stream_on_retry(evutil_socket_t fd, short what, void *arg)
{
	struct wal_stream	*s = arg;
	const struct conf	*c = s->conf;
	char			 sql[512], err[512], state[6], *v;
	struct timeval		 tv;

	(void)fd;
	(void)what;
	if ((s->conn = wal_connect(c, err, sizeof(err))) == NULL) {
		wal_stream_retry(s, err);
		return;
	}
	if (wal_setup(s, err, sizeof(err)) == -1) {
		wal_stream_retry(s, err);
		return;
	}
	/* Where the server's WAL is now: what commits before it was
	 * written while this stream did not run (wal_stream_start_lsn()). */
	s->start_lsn = 0;
	if ((v = wal_query1(s->conn, "SELECT "
	    "pg_current_wal_insert_lsn()::text", NULL, 0, err,
	    sizeof(err))) != NULL && pgo_lsn_parse(v, &s->start_lsn) == -1)
		snprintf(err, sizeof(err), "pg_current_wal_insert_lsn() "
		    "answered \"%.64s\"", v);
	if (v == NULL || s->start_lsn == 0) {
		free(v);
		wal_stream_retry(s, err);
		return;
	}
	free(v);
	/* 0/0: from the slot's confirmed_flush_lsn. */
	snprintf(sql, sizeof(sql), "START_REPLICATION SLOT %s LOGICAL 0/0 "
	    "(proto_version '1', publication_names '%s', messages 'true')",
	    c->relay.wal_slot, c->relay.wal_publication);
	if (wal_exec(s->conn, sql, PGRES_COPY_BOTH, state, err,
	    sizeof(err)) == -1) {
		if (strcmp(state, "55006") == 0) {
			if (!s->standing_by)
				log_info("slot %s is streamed by another reader:"
				    " standing by (trying again every %d ms)",
				    c->relay.wal_slot, WAL_RETRY_MS);
			s->standing_by = 1;
			PQfinish(s->conn);
			s->conn = NULL;
			tv = clock_tv(WAL_RETRY_MS);
			evtimer_add(s->retry_ev, &tv);
			return;
		}
		wal_stream_retry(s, err);
		return;
	}
	if (PQsetnonblocking(s->conn, 1) == -1) {
		wal_stream_retry(s, "cannot make the connection non-blocking");
		return;
	}
	s->read_ev = event_new(s->base, PQsocket(s->conn), EV_READ |
	    EV_PERSIST, wal_stream_on_read, s);
	s->write_ev = event_new(s->base, PQsocket(s->conn), EV_WRITE,
	    wal_stream_on_write, s);
	if (s->read_ev == NULL || s->write_ev == NULL)
		fatalx("event_new");
	if (!s->paused)
		event_add(s->read_ev, NULL);
	s->streaming = 1;
	s->standing_by = 0;
	log_info("streaming slot %s (publication %s, messages with prefix "
	    "\"%s\")", c->relay.wal_slot, c->relay.wal_publication,
	    c->relay.wal_message_prefix);
	s->cb->state(s->arg, 1);
	/* What libpq read with the answer. */
	wal_stream_on_read(-1, EV_READ, s);
}

/* Drop the connection (why: for the log, or NULL when logged) and try
 * again in WAL_RETRY_MS. */
static void
wal_stream_retry(struct wal_stream *s, const char *why)
{
	struct timeval	tv = clock_tv(WAL_RETRY_MS);
	char		buf[512];
	int		was = s->streaming;

	if (why != NULL)
		log_limited(&s->fail_limit, LOG_LEVEL_WARN, "replication "
		    "stream of slot %s: %s (trying again every %d ms)",
		    s->conf->relay.wal_slot, db_errline(buf, sizeof(buf), why),
		    WAL_RETRY_MS);
	if (s->read_ev != NULL)
		event_free(s->read_ev);
	if (s->write_ev != NULL)
		event_free(s->write_ev);
	s->read_ev = s->write_ev = NULL;
	if (s->conn != NULL)
		PQfinish(s->conn);
	s->conn = NULL;
	s->streaming = 0;
	s->received = 0;
	evtimer_add(s->retry_ev, &tv);
	if (was)
		s->cb->state(s->arg, 0);
}

struct wal_stream *
wal_stream_new(struct event_base *base, const struct conf *c,
    const struct wal_stream_cb *cb, void *arg)
{
	struct wal_stream	*s;
	struct timeval		 tv = clock_tv(WAL_STATUS_MS);

	if ((s = calloc(1, sizeof(*s))) == NULL)
		return NULL;
	s->base = base;
	s->conf = c;
	s->cb = cb;
	s->arg = arg;
	s->status_ev = event_new(base, -1, EV_PERSIST, wal_stream_on_status,
	    s);
	s->retry_ev = evtimer_new(base, wal_stream_on_retry, s);
	s->soon_ev = evtimer_new(base, wal_stream_on_status, s);
	if (s->status_ev == NULL || s->retry_ev == NULL || s->soon_ev == NULL ||
	    event_add(s->status_ev, &tv) == -1) {
		wal_stream_free(s);
		return NULL;
	}
	event_active(s->retry_ev, EV_TIMEOUT, 1);
	return s;
}

/* A position confirmed goes to the server at the end of this turn of
 * the loop, not only on the timer: a reader killed then makes its
 * successor stream again only what was really not done. */
void
wal_stream_confirm(struct wal_stream *s, uint64_t lsn)
{
	if (lsn <= s->confirmed)
		return;
	s->confirmed = lsn;
	if (s->streaming && !event_pending(s->soon_ev, EV_TIMEOUT, NULL))
		event_active(s->soon_ev, EV_TIMEOUT, 1);
}

int
wal_stream_lag(const struct wal_stream *s, uint64_t *lag)
{
	if (!s->streaming)
		return -1;
	*lag = s->server_end > s->confirmed ? s->server_end - s->confirmed : 0;
	return 0;
}

uint64_t
wal_stream_start_lsn(const struct wal_stream *s)
{
	return s->start_lsn;
}

void
wal_stream_pause(struct wal_stream *s, int paused)
{
	if (s->paused == paused)
		return;
	s->paused = paused;
	if (s->read_ev == NULL)
		return;
	if (paused)
		event_del(s->read_ev);
	else {
		event_add(s->read_ev, NULL);
		event_active(s->read_ev, EV_READ, 1);	/* libpq's buffer */
	}
}

void
wal_stream_free(struct wal_stream *s)
{
	if (s == NULL)
		return;
	if (s->conn != NULL && s->streaming && s->confirmed > s->reported) {
		/* Blocking, once, at exit: the last confirmed position. */
		PQsetnonblocking(s->conn, 0);
		wal_stream_status(s, 0);
	}
	if (s->read_ev != NULL)
		event_free(s->read_ev);
	if (s->write_ev != NULL)
		event_free(s->write_ev);
	if (s->status_ev != NULL)
		event_free(s->status_ev);
	if (s->retry_ev != NULL)
		event_free(s->retry_ev);
	if (s->soon_ev != NULL)
		event_free(s->soon_ev);
	if (s->conn != NULL)
		PQfinish(s->conn);
	free(s);
}
