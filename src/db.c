/*
 * db.c - libpq helpers shared by the workers: connecting with the session
 * settings outboxd relies on (blocking, or from an event loop with a
 * deadline), reading why a statement failed, checking the schema.
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <libpq-fe.h>

#include "outboxd.h"

void
db_errcpy(char *err, size_t errlen, const char *msg)
{
	size_t	n;

	log_utf8_copy(err, errlen, msg != NULL && *msg != '\0' ? msg :
	    "unknown error");
	n = strlen(err);
	while (n > 0 && (err[n - 1] == '\n' || err[n - 1] == ' '))
		err[--n] = '\0';
}

const char *
db_errline(char *buf, size_t len, const char *msg)
{
	char	*p;

	db_errcpy(buf, len, msg);
	for (p = buf; (p = strchr(p, '\n')) != NULL; )
		*p = ' ';
	return buf;
}

const char *
db_result_error(char *buf, size_t len, const struct pg_result *res,
    const struct pg_conn *conn)
{
	const char	*msg = NULL;

	if (res != NULL && (msg = PQresultErrorField(res,
	    PG_DIAG_MESSAGE_PRIMARY)) != NULL &&
	    msg[strspn(msg, " \t\r\n")] == '\0')
		msg = "(an empty message)";
	if (msg == NULL && conn != NULL && *PQerrorMessage(conn) != '\0')
		msg = PQerrorMessage(conn);
	if (msg == NULL && res != NULL)
		msg = PQresStatus(PQresultStatus(res));
	return db_errline(buf, len, msg);
}

const char *
db_result_field(const struct pg_result *res, int field, char *buf,
    size_t len)
{
	const char	*v = PQresultErrorField(res, field);

	if (v == NULL || v[strspn(v, " \t\r\n")] == '\0')
		return NULL;
	return db_errline(buf, len, v);
}

void
db_result_why(struct db_why *why, const struct pg_result *res)
{
	why->detail = db_result_field(res, PG_DIAG_MESSAGE_DETAIL, why->dbuf,
	    sizeof(why->dbuf));
	why->hint = db_result_field(res, PG_DIAG_MESSAGE_HINT, why->hbuf,
	    sizeof(why->hbuf));
}

/*
 * SQLSTATE classes 22 (data exception), 23 (integrity constraint
 * violation), 27 (triggered data change violation), 44 (WITH CHECK OPTION
 * violation) and P0 (PL/pgSQL: RAISE EXCEPTION is P0001, a trigger may
 * pick another P0 code).  Any other failure (the connection, a
 * serialization failure or deadlock, a shutdown, a missing table) may
 * pass.  Source: PostgreSQL documentation, Appendix A "PostgreSQL Error
 * Codes".
 */
int
db_result_refused(const struct pg_result *res)
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

/* libpq writes notices, and errors that arrive between queries (the
 * server's "terminating connection" when it restarts), to stderr by
 * default: a line in neither log format.  They go through the log, at
 * warn for a WARNING or worse. */
static void
db_notice(void *arg, const PGresult *res)
{
	const char	*sev, *msg;

	(void)arg;
	if ((sev = PQresultErrorField(res,
	    PG_DIAG_SEVERITY_NONLOCALIZED)) == NULL &&
	    (sev = PQresultErrorField(res, PG_DIAG_SEVERITY)) == NULL)
		sev = "NOTICE";
	if ((msg = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY)) == NULL)
		msg = "(no message)";
	if (strcmp(sev, "WARNING") == 0 || strcmp(sev, "ERROR") == 0 ||
	    strcmp(sev, "FATAL") == 0 || strcmp(sev, "PANIC") == 0)
		log_warnx("database %s: %s", sev, msg);
	else
		log_info("database %s: %s", sev, msg);
}

/*
 * The gssencmode value passed with conninfo.  libpq's default, "prefer",
 * looks for Kerberos credentials on every connect, which maps the Kerberos
 * libraries into each worker's memory to find, nearly always, none.  Whatever the operator chose (conninfo, a pg_service.conf
 * service, environment) wins; "" leaves the keyword unset for libpq.
 */
static const char *
db_gssencmode(const char *conninfo)
{
	PQconninfoOption	*opts, *o;
	const char		*v = getenv("PGGSSENCMODE");
	int			 theirs = getenv("PGSERVICE") != NULL;

	if (v != NULL && *v != '\0')
		return "";
	if ((opts = PQconninfoParse(conninfo, NULL)) != NULL) {
		for (o = opts; o->keyword != NULL; o++)
			if ((strcmp(o->keyword, "service") == 0 ||
			    strcmp(o->keyword, "gssencmode") == 0) &&
			    o->val != NULL && *o->val != '\0')
				theirs = 1;
		PQconninfoFree(opts);
	}
	return theirs ? "" : "disable";
}

/* Keywords and values for PQconnectdbParams()/PQconnectStartParams()
 * (expand_dbname = 1), see db_connect().  p holds every string but
 * conninfo, which must outlive the connect. */
struct db_params {
	const char	*keys[12];
	const char	*vals[12];
	char		 app[64];
};

static void
db_params_init(struct db_params *p, const char *conninfo, const char *role)
{
	/* Our defaults come first so that the operator's conninfo, expanded
	 * from dbname last, overrides them.  Keepalives and a user timeout
	 * make a dead server or network show up as an error within seconds
	 * instead of a hang.  Timestamps go out in UTC. */
	static const char *const keys[] = { "application_name", "options",
			    "connect_timeout", "keepalives_idle",
			    "keepalives_interval", "keepalives_count",
			    "tcp_user_timeout", "gssencmode", "dbname",
			    "client_encoding", NULL };
	int		 i;

	for (i = 0; keys[i] != NULL; i++)
		p->keys[i] = keys[i];
	p->keys[i] = NULL;
	snprintf(p->app, sizeof(p->app), "outboxd %s", role);
	p->vals[0] = p->app;
	/* The HTTP workers wake the relays themselves, debounced
	 * (http_wake.c),
	 * and write only keys no other row shares: see sql/schema.sql. */
	p->vals[1] = strcmp(role, "http") == 0 ? HTTP_SESSION_OPTIONS :
	    strcmp(role, "retention") == 0 ? RETENTION_SESSION_OPTIONS :
	    "-c TimeZone=UTC";
	p->vals[2] = "10";
	p->vals[3] = "5";
	p->vals[4] = "2";
	p->vals[5] = "3";
	p->vals[6] = "10000";
	p->vals[7] = db_gssencmode(conninfo);
	p->vals[8] = conninfo;
	/* After the conninfo, so that neither it nor PGCLIENTENCODING
	 * changes it: whatever the database's encoding, what outboxd reads
	 * goes into JSON (answers, events, logs) and must be UTF-8, and
	 * what it writes (a customer id) is UTF-8, for the server to
	 * convert. */
	p->vals[9] = "UTF8";
	p->vals[10] = NULL;
}

struct pg_conn *
db_connect(const char *conninfo, const char *role, char *err, size_t errlen)
{
	struct db_params	 p;
	PGconn			*conn;

	db_params_init(&p, conninfo, role);
	conn = PQconnectdbParams(p.keys, p.vals, 1);
	if (conn == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	if (PQstatus(conn) != CONNECTION_OK) {
		db_errcpy(err, errlen, PQerrorMessage(conn));
		PQfinish(conn);
		return NULL;
	}
	db_log_notices(conn);
	return conn;
}

/* The connection of db_connect() started without waiting
 * (PQconnectStartParams), for db_connecting_start() to drive.  libpq
 * resolves the host name before this returns. */
static PGconn *
db_connect_start(const char *conninfo, const char *role)
{
	struct db_params	p;

	db_params_init(&p, conninfo, role);
	return PQconnectStartParams(p.keys, p.vals, 1);
}

/* A connect under way from an event loop (db_connecting_start()). */
struct db_connecting {
	struct event_base	*base;
	PGconn			*conn;
	struct event		*ev;		/* the socket, as libpq asks */
	struct event		*deadline;
	db_connected_cb		*cb;
	void			*arg;
};

static void
db_connecting_release(struct db_connecting *dc)
{
	if (dc->ev != NULL)
		event_free(dc->ev);
	if (dc->deadline != NULL)
		event_free(dc->deadline);
	free(dc);
}

/* The connect is over: dc is freed, then cb runs; a connection that
 * failed is closed after it, so that err (libpq's message) lives as
 * long as the call. */
static void
db_connecting_end(struct db_connecting *dc, int ok, int timed_out)
{
	PGconn		*conn = dc->conn;
	db_connected_cb	*cb = dc->cb;
	void		*arg = dc->arg;

	db_connecting_release(dc);
	if (ok) {
		cb(conn, 0, NULL, arg);
		return;
	}
	cb(NULL, timed_out, PQerrorMessage(conn), arg);
	PQfinish(conn);
}

static void
db_connecting_timeout(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	db_connecting_end(arg, 0, 1);
}

static void
db_connecting_poll(evutil_socket_t fd, short what, void *arg)
{
	struct db_connecting		*dc = arg;
	PostgresPollingStatusType	 st;

	(void)fd;
	(void)what;
	switch ((st = PQconnectPoll(dc->conn))) {
	case PGRES_POLLING_OK:
		db_connecting_end(dc, 1, 0);
		return;
	case PGRES_POLLING_READING:
	case PGRES_POLLING_WRITING:
		/* libpq may change sockets while it tries addresses */
		event_free(dc->ev);
		if ((dc->ev = event_new(dc->base, PQsocket(dc->conn),
		    st == PGRES_POLLING_READING ? EV_READ : EV_WRITE,
		    db_connecting_poll, dc)) == NULL ||
		    event_add(dc->ev, NULL) == -1)
			fatalx("event_add");
		return;
	default:
		db_connecting_end(dc, 0, 0);
		return;
	}
}

struct db_connecting *
db_connecting_start(struct event_base *base, const char *conninfo,
    const char *role, long timeout, db_connected_cb *cb, void *arg,
    char *err, size_t errlen)
{
	struct db_connecting	*dc;
	struct timeval		 tv = clock_tv(timeout);

	if ((dc = calloc(1, sizeof(*dc))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	/* connect_timeout is not enforced by PQconnectPoll: the deadline
	 * event is. */
	dc->conn = db_connect_start(conninfo, role);
	if (dc->conn == NULL || PQstatus(dc->conn) == CONNECTION_BAD) {
		db_errcpy(err, errlen, dc->conn != NULL ?
		    PQerrorMessage(dc->conn) : "out of memory");
		PQfinish(dc->conn);
		free(dc);
		return NULL;
	}
	dc->base = base;
	dc->cb = cb;
	dc->arg = arg;
	if ((dc->deadline = evtimer_new(base, db_connecting_timeout, dc)) ==
	    NULL || evtimer_add(dc->deadline, &tv) == -1 ||
	    (dc->ev = event_new(base, PQsocket(dc->conn), EV_WRITE,
	    db_connecting_poll, dc)) == NULL || event_add(dc->ev, NULL) == -1)
		fatalx("event_add");
	return dc;
}

void
db_connecting_cancel(struct db_connecting *dc)
{
	if (dc == NULL)
		return;
	PQfinish(dc->conn);
	db_connecting_release(dc);
}

void
db_log_notices(struct pg_conn *conn)
{
	PQsetNoticeReceiver(conn, db_notice, NULL);
}

char *
db_int8_array(const int64_t *v, int n)
{
	char	*s;
	size_t	 off = 0, cap = (size_t)n * 21 + 3;
	int	 i;

	if ((s = malloc(cap)) == NULL)
		return NULL;
	s[off++] = '{';
	for (i = 0; i < n; i++)
		off += (size_t)snprintf(s + off, cap - off, "%s%" PRId64,
		    i ? "," : "", v[i]);
	s[off++] = '}';
	s[off] = '\0';
	return s;
}

int
db_check_schema(struct pg_conn *conn, char *err, size_t errlen)
{
	PGresult	*res;
	int		 ok, index;

	/* outbox_claim() takes destinations since they came in (and
	 * outbox has their columns), and the HTTP workers prepare their
	 * Idempotency-Key statement on outbox_idempotency_keys, wal mode
	 * keeps its position in outbox_wal_confirmed: an older
	 * schema must be applied again. */
	res = PQexec(conn, "SELECT to_regclass('orders') IS NOT NULL AND "
	    "to_regclass('outbox') IS NOT NULL AND "
	    "to_regprocedure('outbox_notify()') IS NOT NULL AND "
	    "to_regprocedure('outbox_stamp()') IS NOT NULL AND "
	    "to_regclass('outbox_control') IS NOT NULL AND "
	    "to_regclass('outbox_paused_destinations') IS NOT NULL AND "
	    "to_regclass('outbox_idempotency_keys') IS NOT NULL AND "
	    "to_regclass('outbox_wal_confirmed') IS NOT NULL AND "
	    "to_regprocedure('outbox_claim(bigint,bigint,integer,text,text[])') "
	    "IS NOT NULL, "
	    "to_regclass('outbox_sent_idx') IS NOT NULL");
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		db_errcpy(err, errlen, PQresultErrorMessage(res));
		PQclear(res);
		return -1;
	}
	ok = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
	index = strcmp(PQgetvalue(res, 0, 1), "t") == 0;
	PQclear(res);
	/* Added later; outboxd works without it, retention slowly. */
	if (ok && !index)
		log_warnx("the index outbox_sent_idx is missing: each retention "
		    "pass reads the whole outbox until it is there; apply "
		    "%s/sql/schema.sql again (its comment on the index says "
		    "how to build it first without holding writes)", PKGDATADIR);
	if (!ok) {
		snprintf(err, errlen, "the outboxd schema is missing or out of "
		    "date in this database; apply it with: psql \"$DATABASE_URL\" "
		    "-v ON_ERROR_STOP=1 -f %s/sql/schema.sql (re-running it "
		    "is harmless)", PKGDATADIR);
		return -1;
	}
	return 0;
}

int
db_refuses_us(const char *conninfo)
{
	PGPing	ping = PQping(conninfo);

	return ping != PQPING_REJECT && ping != PQPING_NO_RESPONSE;
}
