/*
 * relay.c - the relay worker: publishes pending outbox rows to the sink.
 *
 * Claim, commit, publish, record: a claim marks up to batch_size pending
 * rows with a random claim token and pushes their available_at out by the
 * lease, in one short autocommitted statement (FOR UPDATE SKIP LOCKED
 * keeps relays off each other's rows).  No transaction is open while the
 * broker is called.  Each message's outcome is then recorded on its own,
 * guarded by the claim token, so a relay whose lease expired can never
 * overwrite a row another relay has since taken.  A relay killed at any
 * moment loses nothing: its rows become available again when the lease
 * ends.
 *
 * Wake-ups: LISTEN on OUTBOX_CHANNEL (a payload-free hint sent once per
 * inserting statement), plus a poll every poll_interval as the safety net,
 * plus a full pass after every (re)connect because notifications sent
 * while nobody listened are gone.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>
#include <libpq-fe.h>

#include "outboxd.h"

#define RELAY_SQS_BATCH		10	/* SendMessageBatch maximum */
#define RELAY_MAX_INFLIGHT	8	/* chunks being published at once */
#define RELAY_RECONNECT_MIN	100	/* ms */
#define RELAY_RECONNECT_MAX	5000	/* ms */
#define RELAY_RETRY_DELAY	1000	/* ms before a failed row is retried */
#define RELAY_ERROR_MAX		1000	/* bytes of last_error kept */

struct relay;

/* Up to RELAY_SQS_BATCH messages published with one sink call. */
struct relay_chunk {
	struct relay		*relay;
	int64_t			 claim;
	struct outbox_msg	 msgs[RELAY_SQS_BATCH];
	int			 n;
};

struct relay {
	struct conf		*conf;
	int			 index;
	struct event_base	*base;
	struct httpc		*httpc;
	PGconn			*conn;
	struct event		*conn_ev;	/* readable: notifications */
	struct event		*poll_ev;	/* poll_interval safety net */
	struct event		*reconnect_ev;
	long			 reconnect_delay;
	int			 reconnect_fails;
	int			 inflight;	/* chunks at the sink */
	int			 woken;		/* NOTIFY seen since last claim */
	int			 stopping;
};

static void	relay_kick(struct relay *);
static void	relay_disconnect(struct relay *, const char *);

static int64_t
relay_new_claim(void)
{
	/* Unique enough per claim; only compared for equality. */
	return (((int64_t)random() << 31) ^ random() ^
	    ((int64_t)time(NULL) << 20)) & INT64_MAX;
}

static void
relay_chunk_free(struct relay_chunk *ch)
{
	int	i;

	for (i = 0; i < ch->n; i++) {
		free(ch->msgs[i].event_type);
		free(ch->msgs[i].key);
		free(ch->msgs[i].payload);
		free(ch->msgs[i].error);
	}
	free(ch);
}

static void
relay_drain_notifies(struct relay *r)
{
	PGnotify	*nf;

	while ((nf = PQnotifies(r->conn)) != NULL) {
		r->woken = 1;
		PQfreemem(nf);
	}
}

/* Run a statement on the relay's connection; on a broken connection
 * disconnect (and reconnect later).  Returns the result or NULL. */
static PGresult *
relay_exec(struct relay *r, const char *sql, int nparams,
    const char *const *params, ExecStatusType want)
{
	PGresult	*res;

	if (r->conn == NULL)
		return NULL;
	res = PQexecParams(r->conn, sql, nparams, NULL, params, NULL, NULL, 0);
	/* A query reads the socket too: notifications it took in would
	 * otherwise wait for the next poll. */
	relay_drain_notifies(r);
	if (PQresultStatus(res) == want)
		return res;
	if (PQstatus(r->conn) != CONNECTION_OK) {
		PQclear(res);
		relay_disconnect(r, PQerrorMessage(r->conn));
		return NULL;
	}
	log_error("query failed: %s", PQresultErrorMessage(res));
	PQclear(res);
	return NULL;
}

/* Record the sink's verdict for every message of a chunk. */
static void
relay_record(struct relay *r, struct relay_chunk *ch)
{
	char		 claim[24], delay[24], ids[RELAY_SQS_BATCH * 21 + 3];
	char		 id[24], err[RELAY_ERROR_MAX + 1];
	const char	*p[4];
	PGresult	*res;
	size_t		 off = 0;
	int		 i, nsent = 0;

	snprintf(claim, sizeof(claim), "%" PRId64, ch->claim);
	ids[off++] = '{';
	for (i = 0; i < ch->n; i++) {
		struct outbox_msg	*m = &ch->msgs[i];

		if (m->outcome != SINK_SENT)
			continue;
		off += snprintf(ids + off, sizeof(ids) - off, "%s%" PRId64,
		    nsent ? "," : "", m->id);
		nsent++;
	}
	ids[off++] = '}';
	ids[off] = '\0';
	if (nsent > 0) {
		p[0] = ids;
		p[1] = claim;
		res = relay_exec(r, "UPDATE outbox SET status = 'sent', "
		    "sent_at = now(), claim = NULL, attempts = attempts + 1, "
		    "last_error = NULL WHERE id = ANY($1::bigint[]) AND "
		    "claim = $2", 2, p, PGRES_COMMAND_OK);
		if (res != NULL) {
			log_debug("sent %d message(s), %s rows marked", nsent,
			    PQcmdTuples(res));
			PQclear(res);
		}
	}

	snprintf(delay, sizeof(delay), "%d", RELAY_RETRY_DELAY);
	for (i = 0; i < ch->n; i++) {
		struct outbox_msg	*m = &ch->msgs[i];

		if (m->outcome == SINK_SENT)
			continue;
		snprintf(id, sizeof(id), "%" PRId64, m->id);
		snprintf(err, sizeof(err), "%s", m->error != NULL ? m->error :
		    "unknown error");
		p[0] = id;
		p[1] = claim;
		p[2] = err;
		if (m->outcome == SINK_REJECTED) {
			log_error("outbox id=%s rejected by the sink, marked "
			    "failed: %s", id, err);
			res = relay_exec(r, "UPDATE outbox SET status = "
			    "'failed', claim = NULL, attempts = attempts + 1, "
			    "last_error = $3 WHERE id = $1 AND claim = $2", 3,
			    p, PGRES_COMMAND_OK);
		} else {
			/* The sink has logged why, once per request. */
			log_debug("outbox id=%s publish failed, will retry: "
			    "%s", id, err);
			p[3] = delay;
			res = relay_exec(r, "UPDATE outbox SET claim = NULL, "
			    "attempts = attempts + 1, last_error = $3, "
			    "available_at = now() + $4 * interval '1 ms' "
			    "WHERE id = $1 AND claim = $2", 4, p,
			    PGRES_COMMAND_OK);
		}
		if (res != NULL)
			PQclear(res);
	}
}

static void
relay_published(struct outbox_msg *msgs, int n, void *arg)
{
	struct relay_chunk	*ch = arg;
	struct relay		*r = ch->relay;

	(void)msgs;
	(void)n;
	relay_record(r, ch);
	relay_chunk_free(ch);
	r->inflight--;
	if (r->stopping && r->inflight == 0) {
		event_base_loopbreak(r->base);
		return;
	}
	relay_kick(r);
}

/*
 * Claim up to batch_size rows and hand them to the sink in chunks.
 * Returns the number of rows claimed, or -1 on error.
 */
static int
relay_claim(struct relay *r)
{
	char			 claim[24], lease[24], limit[24];
	const char		*p[3];
	struct relay_chunk	*ch = NULL;
	PGresult		*res;
	int			 i, n, room;

	room = (RELAY_MAX_INFLIGHT - r->inflight) * RELAY_SQS_BATCH;
	if (room > r->conf->relay.batch_size)
		room = r->conf->relay.batch_size;
	snprintf(claim, sizeof(claim), "%" PRId64, relay_new_claim());
	snprintf(lease, sizeof(lease), "%ld", r->conf->relay.lease);
	snprintf(limit, sizeof(limit), "%d", room);
	p[0] = claim;
	p[1] = lease;
	p[2] = limit;
	res = relay_exec(r,
	    "UPDATE outbox SET claim = $1, "
	    "    available_at = now() + $2 * interval '1 ms' "
	    "WHERE id IN (SELECT id FROM outbox "
	    "    WHERE status = 'pending' AND available_at <= now() "
	    "    ORDER BY id LIMIT $3 FOR UPDATE SKIP LOCKED) "
	    "RETURNING id, event_type, ordering_key, payload::text",
	    3, p, PGRES_TUPLES_OK);
	if (res == NULL)
		return -1;
	n = PQntuples(res);
	for (i = 0; i < n; i++) {
		struct outbox_msg	*m;

		if (ch == NULL) {
			if ((ch = calloc(1, sizeof(*ch))) == NULL)
				fatal("calloc");
			ch->relay = r;
			ch->claim = strtoll(claim, NULL, 10);
		}
		m = &ch->msgs[ch->n++];
		m->id = strtoll(PQgetvalue(res, i, 0), NULL, 10);
		m->event_type = strdup(PQgetvalue(res, i, 1));
		m->key = strdup(PQgetvalue(res, i, 2));
		m->payload = strdup(PQgetvalue(res, i, 3));
		m->payload_len = PQgetlength(res, i, 3);
		if (m->event_type == NULL || m->key == NULL ||
		    m->payload == NULL)
			fatal("strdup");
		if (ch->n == RELAY_SQS_BATCH || i == n - 1) {
			r->inflight++;
			if (sink_sqs_publish(r->httpc, r->conf, ch->msgs, ch->n,
			    relay_published, ch) == -1) {
				/* Not started: the lease brings the rows
				 * back; free them here. */
				log_warnx("could not start a publish of %d "
				    "message(s)", ch->n);
				r->inflight--;
				relay_chunk_free(ch);
			}
			ch = NULL;
		}
	}
	PQclear(res);
	if (n > 0)
		log_debug("claimed %d row(s)", n);
	return n;
}

/* Claim and publish while there is room and rows keep coming. */
static void
relay_kick(struct relay *r)
{
	int	n;

	while (r->conn != NULL && !r->stopping &&
	    r->inflight < RELAY_MAX_INFLIGHT) {
		r->woken = 0;
		n = relay_claim(r);
		if (n < 0 || (n == 0 && !r->woken))
			break;
	}
}

static void
relay_on_conn(evutil_socket_t fd, short what, void *arg)
{
	struct relay	*r = arg;

	(void)fd;
	(void)what;
	if (PQconsumeInput(r->conn) == 0) {
		relay_disconnect(r, PQerrorMessage(r->conn));
		return;
	}
	r->woken = 0;
	relay_drain_notifies(r);
	if (r->woken)
		relay_kick(r);
}

static void
relay_on_poll(evutil_socket_t fd, short what, void *arg)
{
	struct relay	*r = arg;

	(void)fd;
	(void)what;
	if (r->conn != NULL && PQstatus(r->conn) != CONNECTION_OK) {
		relay_disconnect(r, PQerrorMessage(r->conn));
		return;
	}
	relay_kick(r);
}

static int
relay_connect(struct relay *r, char *err, size_t errlen)
{
	PGresult	*res;

	if ((r->conn = db_connect(r->conf->database, "relay", err,
	    errlen)) == NULL)
		return -1;
	res = PQexec(r->conn, "LISTEN " OUTBOX_CHANNEL);
	if (PQresultStatus(res) != PGRES_COMMAND_OK) {
		snprintf(err, errlen, "LISTEN: %s", PQresultErrorMessage(res));
		PQclear(res);
		PQfinish(r->conn);
		r->conn = NULL;
		return -1;
	}
	PQclear(res);
	r->conn_ev = event_new(r->base, PQsocket(r->conn),
	    EV_READ | EV_PERSIST, relay_on_conn, r);
	if (r->conn_ev == NULL || event_add(r->conn_ev, NULL) == -1)
		fatalx("event_add");
	return 0;
}

static void
relay_on_reconnect(evutil_socket_t fd, short what, void *arg)
{
	struct relay	*r = arg;
	struct timeval	 tv;
	char		 err[512];

	(void)fd;
	(void)what;
	if (r->stopping)
		return;
	if (relay_connect(r, err, sizeof(err)) == 0) {
		log_info("reconnected to PostgreSQL after %d attempt(s); "
		    "listening again, catching up", r->reconnect_fails + 1);
		r->reconnect_delay = RELAY_RECONNECT_MIN;
		r->reconnect_fails = 0;
		relay_kick(r);		/* what was sent while away */
		return;
	}
	/* Rate-limited: the first failure, then every tenth. */
	if (r->reconnect_fails++ % 10 == 0)
		log_warnx("PostgreSQL unreachable (attempt %d, next in %ld "
		    "ms): %s", r->reconnect_fails, r->reconnect_delay, err);
	tv.tv_sec = r->reconnect_delay / 1000;
	tv.tv_usec = (r->reconnect_delay % 1000) * 1000;
	evtimer_add(r->reconnect_ev, &tv);
	r->reconnect_delay *= 2;
	if (r->reconnect_delay > RELAY_RECONNECT_MAX)
		r->reconnect_delay = RELAY_RECONNECT_MAX;
}

static void
relay_disconnect(struct relay *r, const char *why)
{
	struct timeval	tv;

	if (r->conn == NULL)
		return;
	log_warnx("lost the PostgreSQL connection: %s",
	    why != NULL && *why ? why : "unknown error");
	if (r->conn_ev != NULL) {
		event_free(r->conn_ev);
		r->conn_ev = NULL;
	}
	PQfinish(r->conn);
	r->conn = NULL;
	tv.tv_sec = r->reconnect_delay / 1000;
	tv.tv_usec = (r->reconnect_delay % 1000) * 1000;
	evtimer_add(r->reconnect_ev, &tv);
}

static void
relay_stop(void *arg)
{
	struct relay	*r = arg;

	r->stopping = 1;
	/* Rows already at the sink are recorded; unclaimed rows stay
	 * pending for the next relay. */
	if (r->inflight == 0)
		event_base_loopbreak(r->base);
}

int
relay_main(struct conf *conf, int index)
{
	struct relay	 r;
	struct timeval	 tv;
	char		 err[512];

	log_init("relay", index);
	proc_set_title("outboxd: relay %d", index);
	memset(&r, 0, sizeof(r));
	r.conf = conf;
	r.index = index;
	r.reconnect_delay = RELAY_RECONNECT_MIN;
	if ((r.base = event_base_new()) == NULL)
		fatalx("event_base_new failed");
	if ((r.httpc = httpc_new(r.base)) == NULL)
		fatalx("httpc_new failed");
	if (proc_worker_signals(r.base, relay_stop, &r) == -1)
		fatalx("cannot install signal handlers");
	/* A failure at start is left to the master's restart backoff. */
	if (relay_connect(&r, err, sizeof(err)) == -1) {
		log_error("cannot connect to PostgreSQL: %s", err);
		return 1;
	}
	r.reconnect_ev = evtimer_new(r.base, relay_on_reconnect, &r);
	r.poll_ev = event_new(r.base, -1, EV_PERSIST, relay_on_poll, &r);
	tv.tv_sec = conf->relay.poll_interval / 1000;
	tv.tv_usec = (conf->relay.poll_interval % 1000) * 1000;
	if (r.reconnect_ev == NULL || r.poll_ev == NULL ||
	    event_add(r.poll_ev, &tv) == -1)
		fatalx("event_add");
	log_info("publishing to %s (batch %d, poll %ld ms)",
	    conf->sqs_queue_url, conf->relay.batch_size,
	    conf->relay.poll_interval);

	relay_kick(&r);			/* rows written while we were down */
	event_base_dispatch(r.base);

	if (r.conn_ev != NULL)
		event_free(r.conn_ev);
	if (r.conn != NULL)
		PQfinish(r.conn);
	event_free(r.poll_ev);
	event_free(r.reconnect_ev);
	httpc_free(r.httpc);
	event_base_free(r.base);
	log_info("stopped");
	return 0;
}
