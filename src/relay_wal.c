/*
 * relay_wal.c - the relay worker in relay.mode = "wal": events streamed
 * from the slot (wal_stream.c) to the sinks, and the LSN the slot may
 * confirm.
 *
 * Events: an Insert on the outbox relation (columns found by name in its
 * Relation message) with status pending, and a transactional logical
 * decoding message whose prefix is relay.wal_message_prefix (its JSON:
 * wal_event.c).  Each goes to its destination's queue in commit order.
 *
 * Order: within a destination, an event goes to the sink only when no
 * earlier event of its ordering key is at the sink or waiting out a
 * backoff (wal_pump()), so a key's events are published in commit order
 * while other keys' go on, several calls in flight per destination.
 *
 * Nothing acknowledged early: a transaction is done when every one of
 * its events is (sent, or failed for good, and, for a row, recorded on
 * the outbox by relay_wal_db.c); the flush position sent to the server
 * moves only to the end of the oldest transactions all done
 * (wal_confirm()).  After a restart the server streams again from there:
 * at-least-once, duplicates only of events that were in flight.  With
 * nothing in hand, a keepalive's WAL position is confirmed, so that the
 * slot does not hold WAL written by other tables.
 *
 * A stream lost and taken again sends the unconfirmed transactions
 * again: those already in hand are skipped by their commit LSN (one cut
 * short is resumed after the events already taken), so nothing is
 * published twice by one relay.
 *
 * The catch-up (rows pending before the slot existed) and the backlog
 * (rows committed before the stream started, perhaps published since):
 * relay_wal_backlog.c.
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>

#include "relay_wal.h"
#include "relay.h"
#include "creds.h"
#include "metrics_api.h"

#define WAL_MAX_HELD	20000	/* events in hand: stop reading above */
#define WAL_CHECK_MAX	1000	/* backlog events checked at once */

enum wal_col { C_ID, C_TYPE, C_KEY, C_PAYLOAD, C_STATUS, C_CREATED,
	C_DEST, C_HEADERS, C_N };
static const char *const wal_col_names[C_N] = { "id", "event_type",
	"ordering_key", "payload", "status", "created_at", "destination",
	"headers" };

/* The events of t still to be recorded no longer point at it. */
static void
wal_txn_detach(struct relay_wal *w, const struct wal_txn *t)
{
	struct wal_ev	*ev;
	int		 i;

	TAILQ_FOREACH(ev, &w->recordq, entry)
		if (ev->txn == t)
			ev->txn = NULL;
	for (i = 0; i < w->nrecording; i++)
		if (w->recording[i]->txn == t)
			w->recording[i]->txn = NULL;
}

/*
 * Confirm the end of the oldest transactions that are done.  While the
 * normal connection is down (w->db_down: PostgreSQL stopping or
 * restarting, which waits for its logical walsender to have everything
 * confirmed), a transaction whose events the sinks all acknowledged is
 * confirmed before their rows are marked sent: the marks stay queued and
 * are recorded once the connection is back, and only if outboxd itself
 * dies meanwhile are those rows left pending (published, not marked).
 * A permanent failure is always recorded first.
 */
void
relay_wal_confirm(struct relay_wal *w)
{
	struct wal_txn	*t;

	while ((t = TAILQ_FIRST(&w->txns)) != NULL && t->committed &&
	    (t->left == 0 || (w->db_down && t->left == t->unmarked))) {
		TAILQ_REMOVE(&w->txns, t, entry);
		w->catchup_txns -= t->catchup;
		if (t->end_lsn > w->confirmed)
			w->confirmed = t->end_lsn;
		if (t->left > 0)
			wal_txn_detach(w, t);
		free(t);
	}
	if (TAILQ_EMPTY(&w->txns) && w->cur == NULL &&
	    w->idle_lsn > w->confirmed)
		w->confirmed = w->idle_lsn;
	if (w->stream != NULL)
		wal_stream_confirm(w->stream, w->confirmed);
}

static void
wal_ev_free(struct wal_ev *ev)
{
	free(ev->m.event_type);
	free(ev->m.key);
	free(ev->m.payload);
	free(ev->m.error);
	sink_headers_free(ev->m.headers, ev->m.nheaders);
	free(ev);
}

void
relay_wal_done(struct relay_wal *w, struct wal_ev *ev)
{
	if (ev->txn != NULL) {
		ev->txn->left--;
		if (ev->row > 0 && ev->m.outcome == SINK_SENT)
			ev->txn->unmarked--;
	}
	w->held--;
	wal_ev_free(ev);
	if (w->paused && w->held < WAL_MAX_HELD / 2) {
		w->paused = 0;
		wal_stream_pause(w->stream, w->catchup || w->stopping);
	}
	relay_wal_confirm(w);
}

/* An event failed for good or was sent: a row is recorded on the outbox
 * first; a table-less one is done (a failure logged: there is no row to
 * keep it). */
void
relay_wal_finish(struct relay_wal *w, struct wal_ev *ev)
{
	char	id[24];

	if (ev->m.outcome != SINK_SENT) {
		snprintf(id, sizeof(id), "%" PRId64, ev->m.id);
		log_kv(LOG_LEVEL_ERROR, (const char *[]){ ev->row > 0 ?
		    "outbox_id" : "message_lsn", id, "ordering_key",
		    ev->m.key, "destination", ev->dest != NULL ?
		    ev->dest->t.dest->name : "(other)", NULL },
		    "publish failed after %d attempt(s)%s: "
		    "%s%s", ev->m.attempts, ev->m.outcome == SINK_REJECTED ?
		    " (permanent error)" : "", ev->m.error != NULL ?
		    ev->m.error : "unknown error", ev->row > 0 ? "" :
		    " (a table-less event: it has no row to keep it, it is "
		    "dropped)");
	}
	if (ev->row > 0) {
		if (ev->m.outcome == SINK_SENT && ev->txn != NULL)
			ev->txn->unmarked++;
		TAILQ_INSERT_TAIL(&w->recordq, ev, entry);
		w->nrecord++;
		return;
	}
	relay_wal_done(w, ev);
}

/* ---- events from the stream ----------------------------------------- */

/* created_at as the walsender writes it (TimeZone UTC, DateStyle ISO:
 * "2026-12-02 01:41:28.123456+00"): ms since the epoch, or now. */
static int64_t
wal_created_ms(const struct pgo_value *v)
{
	char		buf[64];
	struct tm	tm;
	int		ms = 0;

	if (v->kind != 't' || v->val.len >= sizeof(buf))
		return clock_wall_us() / 1000;
	memcpy(buf, v->val.p, v->val.len);
	buf[v->val.len] = '\0';
	memset(&tm, 0, sizeof(tm));
	if (sscanf(buf, "%d-%d-%d %d:%d:%d", &tm.tm_year, &tm.tm_mon,
	    &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec) != 6)
		return clock_wall_us() / 1000;
	if (buf[19] == '.')
		ms = (int)strtol(buf + 20, NULL, 10);
	while (ms >= 1000)
		ms /= 10;
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	return (int64_t)timegm(&tm) * 1000 + ms;
}

/* The checks relay_sink_add() makes on a claimed row: a destination of
 * ours, headers keeping the rules, the size. */
static void
wal_ev_check(struct relay_wal *w, struct wal_ev *ev, const char *dest,
    const char *headers, size_t headers_len)
{
	const struct conf_destination	*cd = conf_destination_find(w->conf,
					    dest);
	size_t				 size, budget =
					    w->conf->relay.max_message_size;
	char				 why[512];
	int				 i;

	ev->dest = cd != NULL ? &w->dests[cd - w->conf->destinations] : NULL;
	if (ev->dest == NULL && dest == NULL) {
		sink_refuse(&ev->m, SINK_REASON_REJECTED, "no destination: "
		    "the event names none and outbox.conf has no default");
		return;
	}
	if (ev->dest == NULL) {
		sink_refuse(&ev->m, SINK_REASON_REJECTED, "destination \"%s\" "
		    "is not in outbox.conf", dest);
		return;
	}
	if (sink_headers_parse(headers, headers_len, &ev->m.headers,
	    &ev->m.nheaders) == -1) {
		sink_refuse(&ev->m, SINK_REASON_REJECTED, "headers: not a JSON "
		    "object whose values are strings");
		ev->dest = NULL;
		return;
	}
	if (sink_headers_check(ev->m.headers, ev->m.nheaders, why,
	    sizeof(why)) == -1) {
		sink_refuse(&ev->m, SINK_REASON_REJECTED, "headers: %s", why);
		ev->dest = NULL;
		return;
	}
	size = ev->m.payload_len + strlen(ev->m.event_type) +
	    ev->dest->sink->msg_overhead;
	for (i = 0; i < ev->m.nheaders; i++)
		size += sink_header_size(&ev->m.headers[i]);
	if (size > budget) {
		sink_refuse(&ev->m, SINK_REASON_TOO_LARGE, "message of %zu "
		    "bytes exceeds relay.max_message_size (%zu bytes)", size,
		    budget);
		ev->dest = NULL;
	}
}

void
relay_wal_dispatch(struct relay_wal *w, struct wal_ev *ev)
{
	if (ev->dest == NULL) {
		ev->m.attempts = 1;
		metrics_publish_failure(metrics_dest(NULL), ev->m.reason);
		metrics_published(metrics_dest(NULL), METRICS_PUBLISH_FAILED, 1);
		relay_wal_finish(w, ev);
	} else {
		TAILQ_INSERT_TAIL(&ev->dest->q, ev, entry);
		event_active(w->pump_ev, EV_TIMEOUT, 1);
	}
}

/* Take an event into the current transaction: to its destination (see
 * relay_wal_dispatch()), or first to the backlog's check. */
static void
wal_take(struct relay_wal *w, struct wal_ev *ev, const char *dest,
    const char *headers, size_t headers_len)
{
	ev->txn = w->cur;
	ev->xid = w->cur->xid;
	ev->m.outcome = SINK_RETRY;	/* not sent yet */
	ev->m.retry_after = -1;
	ev->m.reason = SINK_REASON_OTHER;
	w->cur->left++;
	w->held++;
	wal_ev_check(w, ev, dest, headers, headers_len);
	/* The catch-up's rows were pending in the slot's snapshot, never
	 * streamed: they go first, unchecked. */
	if (w->cur->backlog || (w->nchecks > 0 && !w->cur->catchup)) {
		TAILQ_INSERT_TAIL(&w->checkq, ev, entry);
		if (++w->nchecks % WAL_CHECK_MAX == 0)
			relay_wal_backlog_check(w);
	} else
		relay_wal_dispatch(w, ev);
	if (w->held >= WAL_MAX_HELD && !w->paused) {
		w->paused = 1;
		wal_stream_pause(w->stream, 1);
	}
}

/* 1 if the current transaction's next event was taken before the
 * stream was lost (it comes again), else 0. */
static int
wal_seen(struct relay_wal *w)
{
	if (w->cur == NULL || w->skip_txn)
		return 1;
	if (w->skip_events > 0) {
		w->skip_events--;
		return 1;
	}
	w->cur->seen++;
	return 0;
}

static struct wal_ev *
wal_ev_new(void)
{
	struct wal_ev	*ev;

	if ((ev = calloc(1, sizeof(*ev))) == NULL)
		fatal("calloc");
	return ev;
}

static char *
wal_strndup(const char *p, size_t n)
{
	char	*s;

	if ((s = strndup(p != NULL ? p : "", n)) == NULL)
		fatal("strndup");
	return s;
}

void
relay_wal_take_row(struct relay_wal *w, const struct wal_row *row)
{
	struct wal_ev	*ev = wal_ev_new();
	char		*dest = NULL;

	ev->row = ev->m.id = row->id;
	log_debug("outbox row %" PRId64 " taken", ev->row);
	ev->m.event_type = wal_strndup(row->type.p, row->type.len);
	ev->m.key = wal_strndup(row->key.p, row->key.len);
	ev->m.payload = wal_strndup(row->payload.p, row->payload.len);
	ev->m.payload_len = row->payload.len;
	ev->m.created_ms = row->created_ms;
	if (row->dest.p != NULL)
		dest = wal_strndup(row->dest.p, row->dest.len);
	wal_take(w, ev, dest, row->headers.p, row->headers.len);
	free(dest);
}

static void
wal_on_insert(struct relay_wal *w, const struct pgo_msg *m)
{
	const struct pgo_value	*v = m->u.ins.vals;
	struct wal_row		 row;
	char			*end, id[24];
	int			 i;

	memset(&row, 0, sizeof(row));
	if (m->u.ins.oid != w->outbox_oid || w->outbox_oid == 0)
		return;
	for (i = 0; i < C_N; i++)
		if (w->col[i] >= m->u.ins.ncols && i != C_DEST &&
		    i != C_HEADERS)
			goto bad;
	for (i = 0; i < C_N; i++)
		if (w->col[i] >= 0 && w->col[i] < m->u.ins.ncols &&
		    v[w->col[i]].kind == 'u')
			goto bad;
	if (v[w->col[C_STATUS]].kind != 't' ||
	    v[w->col[C_STATUS]].val.len != 7 ||
	    memcmp(v[w->col[C_STATUS]].val.p, "pending", 7) != 0)
		return;		/* written sent or failed: not ours */
	if (v[w->col[C_ID]].kind != 't' || v[w->col[C_TYPE]].kind != 't' ||
	    v[w->col[C_KEY]].kind != 't' || v[w->col[C_PAYLOAD]].kind != 't')
		goto bad;
	if (wal_seen(w))
		return;
	if (v[w->col[C_ID]].val.len == 0 ||
	    v[w->col[C_ID]].val.len >= sizeof(id))
		goto bad;
	memcpy(id, v[w->col[C_ID]].val.p, v[w->col[C_ID]].val.len);
	id[v[w->col[C_ID]].val.len] = '\0';
	row.id = strtoll(id, &end, 10);
	if (*end != '\0' || row.id <= 0)
		goto bad;
	row.type = v[w->col[C_TYPE]].val;
	row.key = v[w->col[C_KEY]].val;
	row.payload = v[w->col[C_PAYLOAD]].val;
	row.created_ms = wal_created_ms(&v[w->col[C_CREATED]]);
	if (w->col[C_DEST] >= 0 && w->col[C_DEST] < m->u.ins.ncols &&
	    v[w->col[C_DEST]].kind == 't')
		row.dest = v[w->col[C_DEST]].val;
	if (w->col[C_HEADERS] >= 0 && w->col[C_HEADERS] < m->u.ins.ncols &&
	    v[w->col[C_HEADERS]].kind == 't')
		row.headers = v[w->col[C_HEADERS]].val;
	relay_wal_take_row(w, &row);
	return;
bad:
	log_limited(&w->bad_limit, LOG_LEVEL_ERROR, "an outbox insert "
	    "streamed without its id, event_type, ordering_key, payload or "
	    "status: skipped (the row stays pending for the table path)");
}

static void
wal_on_message(struct relay_wal *w, const struct pgo_msg *m)
{
	const struct conf	*c = w->conf;
	struct wal_event	 e;
	struct wal_ev		*ev;
	char			 err[256], lsn[24];

	if (m->u.message.prefix.len != strlen(c->relay.wal_message_prefix) ||
	    memcmp(m->u.message.prefix.p, c->relay.wal_message_prefix,
	    m->u.message.prefix.len) != 0)
		return;
	if (m->u.message.transactional && w->skip_txn)
		return;		/* of a transaction we had, or confirmed */
	if (!m->u.message.transactional || w->cur == NULL) {
		log_limited(&w->bad_limit, LOG_LEVEL_ERROR, "a "
		    "non-transactional message with prefix \"%s\" at %s: "
		    "skipped (use pg_logical_emit_message(true, ...))",
		    c->relay.wal_message_prefix, pgo_lsn_text(m->u.message.lsn,
		    lsn, sizeof(lsn)));
		metrics_wal_bad_message();
		return;
	}
	if (wal_seen(w))
		return;
	if (wal_event_parse(m->u.message.content.p, m->u.message.content.len,
	    &e, err, sizeof(err)) == -1) {
		/* No row to record it on: logged, counted, skipped. */
		log_limited(&w->bad_limit, LOG_LEVEL_ERROR, "message with "
		    "prefix \"%s\" at %s: %s: skipped (see outboxd(8), "
		    "TABLE-LESS EVENTS)", c->relay.wal_message_prefix,
		    pgo_lsn_text(m->u.message.lsn, lsn, sizeof(lsn)), err);
		metrics_wal_bad_message();
		return;
	}
	ev = wal_ev_new();
	/* Its LSN is its id (the webhook-id, a FIFO queue's deduplication
	 * id): the same when it is streamed again. */
	ev->m.id = (int64_t)m->u.message.lsn;
	ev->m.event_type = e.event_type;
	ev->m.key = e.key;
	ev->m.payload = e.payload;
	ev->m.payload_len = e.payload_len;
	ev->m.created_ms = clock_wall_us() / 1000;
	e.event_type = e.key = e.payload = NULL;
	wal_take(w, ev, e.destination, e.headers, e.headers_len);
	wal_event_clear(&e);
}

static void
wal_on_relation(struct relay_wal *w, const struct pgo_msg *m)
{
	int	i, j;

	if (m->u.rel.relname.len != 6 ||
	    memcmp(m->u.rel.relname.p, "outbox", 6) != 0)
		return;
	w->outbox_oid = m->u.rel.oid;
	for (i = 0; i < C_N; i++) {
		w->col[i] = -1;
		for (j = 0; j < m->u.rel.ncols; j++)
			if (m->u.rel.cols[j].name.len ==
			    strlen(wal_col_names[i]) &&
			    memcmp(m->u.rel.cols[j].name.p, wal_col_names[i],
			    m->u.rel.cols[j].name.len) == 0)
				w->col[i] = j;
		if (w->col[i] == -1 && i != C_DEST && i != C_HEADERS) {
			log_error("the outbox relation streamed has no column "
			    "%s: its inserts are skipped (apply sql/schema.sql)",
			    wal_col_names[i]);
			w->outbox_oid = 0;
			return;
		}
	}
}

static void
wal_on_msg(void *arg, const struct pgo_msg *m)
{
	struct relay_wal	*w = arg;
	struct wal_txn		*t;

	switch (m->kind) {
	case PGO_BEGIN:
		log_debug("transaction %" PRIX64 " begins (last %" PRIX64
		    ", confirmed %" PRIX64 ")", m->u.begin.final_lsn,
		    (t = TAILQ_LAST(&w->txns, wal_txnq)) != NULL ?
		    t->final_lsn : 0, w->confirmed);
		w->skip_txn = 0;
		w->skip_events = 0;
		if ((t = TAILQ_LAST(&w->txns, wal_txnq)) != NULL &&
		    m->u.begin.final_lsn <= t->final_lsn) {
			/* Streamed again after a lost stream: skip what we
			 * have; resume one cut short. */
			if (m->u.begin.final_lsn == t->final_lsn &&
			    !t->committed) {
				w->cur = t;
				w->skip_events = t->seen;
			} else
				w->skip_txn = 1;
			break;
		}
		/* Confirmed X: the server sends again every transaction
		 * whose commit record starts at X or later (a keepalive's X
		 * may be the start of the next commit). */
		if (m->u.begin.final_lsn < w->confirmed) {
			w->skip_txn = 1;
			break;
		}
		if ((t = calloc(1, sizeof(*t))) == NULL)
			fatal("calloc");
		t->final_lsn = m->u.begin.final_lsn;
		t->xid = m->u.begin.xid;
		t->begun_us = clock_mono_us();
		t->backlog = t->final_lsn < wal_stream_start_lsn(w->stream);
		if (!t->backlog)
			relay_wal_backlog_check(w);
		TAILQ_INSERT_TAIL(&w->txns, t, entry);
		w->cur = t;
		break;
	case PGO_COMMIT:
		if (w->cur != NULL && !w->skip_txn) {
			w->cur->committed = 1;
			w->cur->end_lsn = m->u.commit.end_lsn;
		}
		w->cur = NULL;
		w->skip_txn = 0;
		w->skip_events = 0;
		relay_wal_confirm(w);
		break;
	case PGO_RELATION:
		wal_on_relation(w, m);
		break;
	case PGO_INSERT:
		if (w->cur != NULL)
			wal_on_insert(w, m);
		break;
	case PGO_MESSAGE:
		wal_on_message(w, m);
		break;
	default:		/* Origin, Type, Update, Delete, Truncate */
		break;
	}
}

static void
wal_on_keepalive(void *arg, uint64_t wal_end)
{
	struct relay_wal	*w = arg;

	if (w->cur == NULL && TAILQ_EMPTY(&w->txns)) {
		log_debug("keepalive at %" PRIX64 ", nothing in hand",
		    wal_end);
		w->idle_lsn = wal_end;
		relay_wal_confirm(w);
	}
	relay_wal_backlog_check(w);
}

static int
wal_on_created(void *arg, const char *snapshot)
{
	return relay_wal_catchup_mark(arg, snapshot);
}

static void
wal_on_state(void *arg, int up)
{
	struct relay_wal	*w = arg;

	/* A transaction cut short is resumed when it comes again (its
	 * Begin finds it at the tail, uncommitted). */
	if (!up)
		w->cur = NULL;
	else
		relay_wal_resume_stored(w);
	metrics_wal_streaming(up);
	if (up && !w->catchup) {
		w->catchup = 1;
		w->catchup_after = 0;
		wal_stream_pause(w->stream, 1);
		relay_wal_catchup_next(w);
	}
}

static const struct wal_stream_cb wal_cb = {
	wal_on_msg, wal_on_keepalive, wal_on_state, wal_on_created
};

/* ---- the worker ------------------------------------------------------ */

static void
wal_on_pump(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	relay_wal_pump(arg);
}

/* The slot's lag and the age of the oldest event not done, for the
 * metrics (every second, by the streaming relay), and the warning above
 * relay.wal_lag_warning (rate-limited). */
static void
wal_lag(struct relay_wal *w)
{
	struct wal_txn	*t = TAILQ_FIRST(&w->txns);
	uint64_t	 lag;
	int64_t		 age = 0;

	if (wal_stream_lag(w->stream, &lag) == -1)
		return;
	if (t != NULL)
		age = (clock_mono_us() - t->begun_us) / 1000;
	metrics_wal_lag((int64_t)lag, age);
	if (w->conf->relay.wal_lag_warning > 0 &&
	    lag > (uint64_t)w->conf->relay.wal_lag_warning)
		log_limited(&w->lag_limit, LOG_LEVEL_WARN, "slot %s is %" PRIu64
		    " bytes behind the server's WAL (relay.wal_lag_warning %ld),"
		    " the oldest event not done is %" PRId64 " ms old: the "
		    "server keeps that WAL until the sinks catch up",
		    w->conf->relay.wal_slot, lag,
		    w->conf->relay.wal_lag_warning, age);
}

static void
wal_on_tick(evutil_socket_t fd, short what, void *arg)
{
	struct relay_wal	*w = arg;

	(void)fd;
	(void)what;
	if (++w->ticks % (1000 / WAL_TICK_MS) == 0)
		wal_lag(w);
	relay_wal_backlog_check(w);
	relay_wal_record(w);
	relay_wal_pause_poll(w);
	relay_wal_catchup_next(w);
	relay_wal_pump(w);
}

/* Giving up at a stop: the events at the sink are not confirmed, and
 * come again from the slot (duplicates if the broker took them). */
static void
wal_on_give_up(evutil_socket_t fd, short what, void *arg)
{
	struct relay_wal	*w = arg;

	(void)fd;
	(void)what;
	log_warnx("stopping with %d call(s) to the sinks unanswered %ld ms "
	    "after the stop signal: their events are not confirmed and are "
	    "streamed again", w->at_sink, proc_give_up_ms(w->conf));
	event_base_loopbreak(w->base);
}

static void
wal_stop(void *arg, int deadline)
{
	struct relay_wal	*w = arg;

	if (!w->stopping) {
		w->stopping = 1;
		retention_stop(w->retention);
		wal_stream_pause(w->stream, 1);
		if (w->at_sink == 0)
			event_base_loopbreak(w->base);
	}
	if (deadline && w->at_sink > 0)
		proc_give_up_arm(w->give_up, w->conf);
}

static void
wal_dests_open(struct relay_wal *w)
{
	const struct conf	*c = w->conf;
	struct wal_dest		*d;
	int			 i;

	w->n_dests = c->n_destinations;
	if ((w->dests = calloc((size_t)w->n_dests + 1, sizeof(*w->dests))) ==
	    NULL)
		fatal("calloc");
	for (i = 0; i < w->n_dests; i++) {
		d = &w->dests[i];
		d->t.conf = c;
		d->t.dest = &c->destinations[i];
		d->sink = relay_sink_limits(d->t.dest, &d->max_batch,
		    &d->slots);
		TAILQ_INIT(&d->q);
	}
}

static void
wal_free_all(struct relay_wal *w)
{
	struct wal_txn		*t;
	struct wal_ev		*ev;
	struct wal_chunk	*ch;
	int			 i;

	while ((ch = TAILQ_FIRST(&w->chunks)) != NULL) {
		TAILQ_REMOVE(&w->chunks, ch, entry);
		free(ch);
	}
	for (i = 0; i < w->n_dests; i++)
		while ((ev = TAILQ_FIRST(&w->dests[i].q)) != NULL) {
			TAILQ_REMOVE(&w->dests[i].q, ev, entry);
			wal_ev_free(ev);
		}
	while ((ev = TAILQ_FIRST(&w->recordq)) != NULL) {
		TAILQ_REMOVE(&w->recordq, ev, entry);
		wal_ev_free(ev);
	}
	while ((ev = TAILQ_FIRST(&w->checkq)) != NULL) {
		TAILQ_REMOVE(&w->checkq, ev, entry);
		wal_ev_free(ev);
	}
	while ((t = TAILQ_FIRST(&w->txns)) != NULL) {
		TAILQ_REMOVE(&w->txns, t, entry);
		free(t);
	}
	free(w->dests);
}

int
relay_wal_main(struct conf *conf, int index)
{
	struct relay_wal	 w;
	struct pg_conn		*db;
	struct timeval		 tv = clock_tv(WAL_TICK_MS);
	char			 err[512];

	memset(&w, 0, sizeof(w));
	w.conf = conf;
	w.index = index;
	TAILQ_INIT(&w.txns);
	TAILQ_INIT(&w.recordq);
	TAILQ_INIT(&w.checkq);
	TAILQ_INIT(&w.chunks);
	wal_dests_open(&w);
	if ((w.base = event_base_new()) == NULL)
		fatalx("event_base_new failed");
	if ((w.httpc = httpc_new(w.base)) == NULL)
		fatalx("httpc_new failed");
	if (proc_worker_signals(w.base, wal_stop, &w) == -1)
		fatalx("cannot install signal handlers");
	/* What the server must allow, said at once; a server down is
	 * waited for (the stream retries). */
	if ((db = relay_wal_db(&w)) != NULL &&
	    wal_check(db, conf, err, sizeof(err)) == -1) {
		log_error("%s", err);
		return OUTBOXD_EX_CONFIG;
	}
	w.pump_ev = event_new(w.base, -1, 0, wal_on_pump, &w);
	w.tick_ev = event_new(w.base, -1, EV_PERSIST, wal_on_tick, &w);
	w.give_up = evtimer_new(w.base, wal_on_give_up, &w);
	if (w.pump_ev == NULL || w.tick_ev == NULL || w.give_up == NULL ||
	    event_add(w.tick_ev, &tv) == -1)
		fatalx("event_add");
	if (index == 1 && (w.retention = retention_new(w.base, conf)) == NULL)
		fatalx("retention_new");
	/* AWS credentials only for AWS's destinations (relay.c). */
	if (conf_destinations_aws(conf) &&
	    creds_start(w.base, conf, index, NULL) == -1)
		return OUTBOXD_EX_CONFIG;
	if ((w.stream = wal_stream_new(w.base, conf, &wal_cb, &w)) == NULL)
		fatalx("wal_stream_new");
	event_base_dispatch(w.base);
	proc_worker_done();
	relay_wal_record_now(&w);
	relay_wal_store_now(&w);
	wal_stream_free(w.stream);	/* the last confirmed position */
	relay_wal_db_close(&w);
	event_free(w.pump_ev);
	event_free(w.tick_ev);
	event_free(w.give_up);
	retention_free(w.retention);
	httpc_free(w.httpc);		/* chunks at the sink: freed by
					   wal_free_all() */
	creds_stop();
	gcp_auth_stop();
	wal_free_all(&w);
	event_base_free(w.base);
	log_info("stopped");
	return 0;
}
