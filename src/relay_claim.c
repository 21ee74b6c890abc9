/*
 * relay_claim.c - the relay's statements on the outbox: claim rows with
 * a lease, mark them sent, record failed attempts (backoff, last_error,
 * the failed state), give rows back; and the lease arithmetic that says
 * when a claim must wait.
 *
 * A claim marks up to batch_size pending rows with a random claim token
 * and pushes their available_at out by the lease, in one short
 * autocommitted statement (FOR UPDATE SKIP LOCKED keeps relays off each
 * other's rows).  No transaction is open while the broker is called.
 * Each outcome is then recorded guarded by its claim token (sent rows in
 * one statement for many chunks, failures one by one), so a relay whose
 * lease expired can never overwrite a row another relay has since taken.
 * A relay killed at any moment loses nothing: its rows become available
 * again when the lease ends.
 */
#include "config.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>

#include "relay.h"

#define RELAY_RETRY_AFTER_MAX	3600000	/* ms, cap on a broker's Retry-After */
#define RELAY_ERROR_MAX		1000	/* bytes of last_error kept */

/* Up to $3 rows (at most one per ordering key and destination: see
 * outbox_claim() in sql/schema.sql) under claim token $1 for a lease of
 * $2 ms; $4 the default destination's name, $5 (text[]) those whose rows
 * to leave. */
static const char relay_claim_sql[] =
	"SELECT id, event_type, "
	"ordering_key, payload, attempts, "
	"(1000 * extract(epoch FROM created_at))::bigint, destination, headers, "
	"replay FROM outbox_claim($1, $2, $3, $4, $5) ORDER BY id";

/*
 * Rows $1 (bigint[]) sent, each if still under its claim $2, sent_at the
 * broker's answer $3 (us since the epoch).  Answers how many were marked
 * and, if $4, how many of those have rows of their key still waiting.
 * The first row held behind each (outbox.held, see RELAY_HOLD_SQL) in
 * the claims' order is released, and counts as waiting: a hot key's
 * backlog comes back one ready row at a time, so no claim steps over the
 * rest.  Keys with no held row cost one probe of the (then empty)
 * outbox_held_idx.
 *
 * Both updates find their rows with "id = ANY (array)", an index
 * condition on the primary key, whatever the statistics say.  Joined to
 * the arrays alone, a plan made while the statistics still describe an
 * empty table (ANALYZE ran before a backlog landed) walked all of
 * outbox_pkey for every row of the mark: 20,000 pending rows made each
 * mark of 100 take 400-600 ms, until autovacuum analyzed the table again.
 */
static const char relay_mark_sql[] =
	"WITH u AS ("
	"UPDATE outbox o SET status = 'sent', "
	"sent_at = timestamptz 'epoch' + d.ack * interval '1 microsecond', "
	"claim = NULL, attempts = o.attempts + 1, last_error = NULL "
	"FROM unnest($1::bigint[], $2::bigint[], $3::bigint[]) "
	"AS d(id, claim, ack) WHERE o.id = ANY ($1::bigint[]) "
	"AND o.id = d.id AND o.claim = d.claim "
	"RETURNING o.id, o.ordering_key, o.destination), "
	"h AS (UPDATE outbox s SET held = false "
	"WHERE s.id = ANY (ARRAY(SELECT (SELECT n.id FROM outbox n "
	"WHERE n.held AND n.ordering_key = u.ordering_key "
	"AND n.destination IS NOT DISTINCT FROM u.destination "
	"ORDER BY coalesce(n.commit_seq, 0), n.id LIMIT 1) FROM u)) "
	"RETURNING 1) "
	"SELECT count(*), count(*) FILTER (WHERE CASE WHEN $4::boolean "
	"THEN EXISTS (SELECT 1 FROM outbox s WHERE s.ordering_key = "
	"u.ordering_key AND s.status <> 'sent' AND s.id <> u.id) END) + "
	"(SELECT count(*) FROM h) FROM u";

/*
 * A failed head holds back every other row of its key and destination
 * (outbox_claim()'s order) until it is sent or redriven.  Left in the
 * claims' index, those rows would be stepped over one by one by every
 * claim: a hot key with a long backlog would slow every relay's claims
 * for every other key.  So the record of a head's failure also holds
 * them (outbox.held: out of outbox_ready_idx), when the head is
 * dead-lettered or waits at least RELAY_HOLD_MS; the mark that sends
 * the head, a redrive, or retention's sweep release them.
 */
#define RELAY_HOLD_MS		1000
#define RELAY_HOLD_SQL \
	"UPDATE outbox o SET held = true FROM h " \
	"WHERE o.ordering_key = h.ordering_key " \
	"AND o.destination IS NOT DISTINCT FROM h.destination " \
	"AND o.id <> h.id AND o.status = 'pending' AND NOT o.held"

/* Row $1, if still under claim $2, to the dead-letter state with last
 * error $3; the rows of its key held. */
static const char relay_fail_sql[] =
	"WITH h AS (UPDATE outbox SET "
	"status = 'failed', claim = NULL, "
	"attempts = attempts + 1, last_error = $3 "
	"WHERE id = $1 AND claim = $2 "
	"RETURNING id, ordering_key, destination) " RELAY_HOLD_SQL;

/* Row $1, if still under claim $2, retried in $4 ms, last error $3. */
static const char relay_retry_sql[] =
	"UPDATE outbox SET "
	"claim = NULL, attempts = attempts + 1, "
	"last_error = $3, "
	"available_at = now() + $4 * interval '1 ms' "
	"WHERE id = $1 AND claim = $2";

/* The same, with the rows of its key held (a wait of RELAY_HOLD_MS or
 * more). */
static const char relay_retry_hold_sql[] =
	"WITH h AS (UPDATE outbox SET "
	"claim = NULL, attempts = attempts + 1, "
	"last_error = $3, "
	"available_at = now() + $4 * interval '1 ms' "
	"WHERE id = $1 AND claim = $2 "
	"RETURNING id, ordering_key, destination) " RELAY_HOLD_SQL;

/* Giving rows back is claim.c's claim_give_back_sql, shared with the
 * HTTP workers. */

/* The hot statements, prepared once per connection (relay_pg.c). */
static const struct relay_pg_stmt relay_claim_stmt = {
	1, "outboxd_relay_claim", relay_claim_sql, 5
};
static const struct relay_pg_stmt relay_mark_stmt = {
	2, "outboxd_relay_sent", relay_mark_sql, 4
};

/* Remember how long a statement took, in us: the longest of the recent
 * ones, each older one counting half as much. */
static void
relay_cost(int64_t *cost, int64_t took)
{
	*cost = took > *cost / 2 ? took : *cost / 2;
}

/*
 * Delay before the next attempt, in ms: backoff_base doubled per attempt
 * already made, capped at backoff_max, with "equal jitter" (half fixed,
 * half random) so rows that failed together do not retry together.  A
 * broker's Retry-After wins when it asks for longer.
 */
long
relay_backoff(const struct conf *c, int attempts, long retry_after)
{
	long	d = c->relay.backoff_base;
	int	i;

	for (i = 1; i < attempts && d < c->relay.backoff_max; i++)
		d *= 2;
	if (d > c->relay.backoff_max)
		d = c->relay.backoff_max;
	d = d / 2 + random() % (d / 2 + 1);
	if (retry_after > d)
		d = retry_after > RELAY_RETRY_AFTER_MAX ?
		    RELAY_RETRY_AFTER_MAX : retry_after;
	return d;
}

/*
 * Claim up to batch_size rows (at most one per ordering key: see
 * outbox_claim() in sql/schema.sql), no more than the relay has room for
 * (RELAY_MAX_INFLIGHT claimed rows); relay_claim_done() gets the answer.
 */
void
relay_claim_start(struct relay *r)
{
	char		 claim[24], lease[24], limit[24], skip[1024];
	const char	*p[5];
	int		 room;

	room = RELAY_MAX_INFLIGHT - r->inflight;
	if (room > r->conf->relay.batch_size)
		room = r->conf->relay.batch_size;
	r->claiming_token = claim_token();
	r->claiming_limit = room;
	snprintf(claim, sizeof(claim), "%" PRId64, r->claiming_token);
	snprintf(lease, sizeof(lease), "%ld", r->conf->relay.lease);
	snprintf(limit, sizeof(limit), "%d", room);
	p[0] = claim;
	p[1] = lease;
	p[2] = limit;
	p[3] = r->conf->default_destination >= 0 ?
	    r->conf->destinations[r->conf->default_destination].name : NULL;
	relay_sink_skip(r, skip, sizeof(skip));
	p[4] = skip;
	r->woken = 0;
	r->followers = 0;
	relay_pg_send(r, RELAY_PG_CLAIM, &relay_claim_stmt, p);
}

/*
 * The claim's answer (res NULL: it failed): hand the rows to the sink in
 * chunks that respect its batch limits.  Claims follow one another while
 * there is room and they come back full.  One that got fewer rows than it
 * asked for took what there was: the claims stop there, so its messages
 * go out now rather than after one more (empty) claim.
 */
void
relay_claim_done(struct relay *r, PGresult *res)
{
	struct claimed_row	 row;
	int64_t			 now = clock_mono_us();
	int			 i, n;

	relay_cost(&r->claim_cost_us, now - r->pg_sent_us);
	n = res != NULL ? PQntuples(res) : -1;
	r->backlog = n == r->claiming_limit;
	/* Its answers may have come while the claim was under way. */
	if (n >= 0 && relay_sink_room_again(r))
		r->backlog = 1;
	r->want_claim = n >= 0 && (n == r->claiming_limit || r->woken);
	row.claim = r->claiming_token;
	row.claimed_us = r->pg_sent_us;
	row.lease_ms = r->conf->relay.lease;
	for (i = 0; i < n; i++) {
		row.id = strtoll(PQgetvalue(res, i, 0), NULL, 10);
		row.type = PQgetvalue(res, i, 1);
		row.type_len = PQgetlength(res, i, 1);
		row.key = PQgetvalue(res, i, 2);
		row.key_len = PQgetlength(res, i, 2);
		row.payload = PQgetvalue(res, i, 3);
		row.payload_len = PQgetlength(res, i, 3);
		row.created_ms = strtoll(PQgetvalue(res, i, 5), NULL, 10);
		row.destination = PQgetisnull(res, i, 6) ? NULL :
		    PQgetvalue(res, i, 6);
		row.headers = PQgetisnull(res, i, 7) ? NULL :
		    PQgetvalue(res, i, 7);
		row.headers_len = PQgetlength(res, i, 7);
		row.replay = PQgetisnull(res, i, 8) ? 0 :
		    strtoll(PQgetvalue(res, i, 8), NULL, 10);
		relay_sink_add(r, &row, atoi(PQgetvalue(res, i, 4)), now);
	}
	relay_sink_flush(r);
	relay_sink_pump(r);
	if (n > 0)
		log_debug("claimed %d row(s)", n);
}

/* How long, in us, until the first lease of a row this relay claimed and
 * has not marked yet ends (INT64_MAX: it holds none). */
int64_t
relay_lease_left(const struct relay *r)
{
	const struct relay_chunk	*ch;
	int64_t				 first = INT64_MAX;
	int				 i;

	TAILQ_FOREACH(ch, &r->ready, entry)
		if (ch->lease_end_us < first)
			first = ch->lease_end_us;
	TAILQ_FOREACH(ch, &r->at_sinkq, entry)
		if (ch->lease_end_us < first)
			first = ch->lease_end_us;
	for (i = 0; i < r->nsent; i++)
		if (r->sent[i].lease_end_us < first)
			first = r->sent[i].lease_end_us;
	if (first == INT64_MAX)
		return INT64_MAX;
	return first - clock_mono_us();
}

/*
 * Must the next claim wait?  A mark owed while a claim is in flight waits
 * for its answer (one statement at a time on the connection).  When claims
 * are slow (a loaded server, a lock) against the lease, the mark of rows
 * the sink acks meanwhile can come after their lease has ended, when
 * another relay's claim may have taken them again: they would be
 * published twice.  So a claim is held while it, and the mark after it,
 * could end (twice the time they took lately) after the lease of a row
 * this relay claimed and has not marked yet.  The rows at the sink come
 * back, or are left to their lease by relay_sink_pump(), within the sink's
 * timeout; once they are marked the claim goes.
 */
int
relay_marks_late(const struct relay *r, int64_t lease_left)
{
	return 2 * (r->claim_cost_us + r->mark_cost_us) >= lease_left;
}

int
relay_claim_held(struct relay *r)
{
	int64_t	left = relay_lease_left(r);

	if (!relay_marks_late(r, left))
		return 0;
	log_limited(&r->hold_limit, LOG_LEVEL_WARN, "holding the next claim "
	    "until the %d row(s) this relay holds are marked: their lease "
	    "ends in %lld ms (a claim took %lld ms lately, a mark %lld ms)",
	    r->inflight + r->nsent, (long long)(left > 0 ? left / 1000 : 0),
	    (long long)r->claim_cost_us / 1000,
	    (long long)r->mark_cost_us / 1000);
	return 1;
}

/* Queue row i of a chunk, which the sink took, for relay_mark_start(). */
void
relay_mark_queue(struct relay *r, const struct relay_chunk *ch, int i)
{
	if (r->nsent == r->sent_cap) {
		r->sent_cap = r->sent_cap ? r->sent_cap * 2 : 256;
		r->sent = reallocarray(r->sent, r->sent_cap, sizeof(*r->sent));
		if (r->sent == NULL)
			fatal("reallocarray");
	}
	r->sent[r->nsent].id = ch->msgs[i].id;
	r->sent[r->nsent].claim = ch->claim;
	r->sent[r->nsent].acked_us = ch->acked_us;
	r->sent[r->nsent++].lease_end_us = ch->lease_end_us;
}

/* One field (at byte offset off) of every queued sent row as a bigint[]
 * literal; the caller frees it. */
static char *
relay_mark_array(const struct relay *r, size_t off)
{
	int64_t	*v;
	char	*s;
	int	 i;

	if ((v = reallocarray(NULL, r->nsent + 1, sizeof(*v))) == NULL)
		fatal("reallocarray");
	for (i = 0; i < r->nsent; i++)
		memcpy(&v[i], (const char *)&r->sent[i] + off, sizeof(*v));
	if ((s = db_int8_array(v, r->nsent)) == NULL)
		fatal("malloc");
	free(v);
	return s;
}

/*
 * Start marking every queued sent row 'sent' with one statement, each
 * guarded by the claim it was sent under; relay_mark_done() gets the
 * answer.  sent_at is the moment the broker's answer reached the relay (its
 * clock), not the later moment of this statement.  Unless a claim follows
 * anyway (the last one was full), it also tells whether a marked row's key
 * has rows still waiting (its next row may be claimable now):
 * r->followers, until the next claim.  When the connection is gone the
 * queue is kept and marked after the reconnect; the lease gives that
 * time before another relay may take the rows again.
 */
void
relay_mark_start(struct relay *r)
{
	char		*ids, *claims, *acks;
	const char	*p[4];

	ids = relay_mark_array(r, offsetof(struct relay_sent, id));
	claims = relay_mark_array(r, offsetof(struct relay_sent, claim));
	acks = relay_mark_array(r, offsetof(struct relay_sent, acked_us));
	p[0] = ids;
	p[1] = claims;
	p[2] = acks;
	/* After a full claim another one follows anyway (relay_want_claim)
	 * and takes the followers: no need to look for them (an index probe
	 * per row) while a backlog drains. */
	p[3] = r->backlog ? "f" : "t";
	if (relay_pg_send(r, RELAY_PG_MARK, &relay_mark_stmt, p) == 0)
		r->marking = r->nsent;
	else if (r->conn != NULL) {
		/* Not sent, connection fine: as for a failed mark below. */
		r->followers = 1;
		r->nsent = 0;
	}
	free(ids);
	free(claims);
	free(acks);
}

/* The mark's answer (res NULL: it failed). */
void
relay_mark_done(struct relay *r, PGresult *res)
{
	int	n = r->marking;

	relay_cost(&r->mark_cost_us, clock_mono_us() - r->pg_sent_us);
	r->marking = 0;
	if (res == NULL && r->conn == NULL)
		return;		/* kept for after the reconnect */
	/* Kept until the next claim, which may come only after more
	 * marks; on an error, assume followers: a claim too many costs
	 * little. */
	if (res == NULL || strcmp(PQgetvalue(res, 0, 1), "0") != 0)
		r->followers = 1;
	if (res != NULL)
		log_debug("sent %d message(s), %s rows marked", n,
		    PQgetvalue(res, 0, 0));
	/* Rows sent while the mark was under way wait for the next one. */
	r->nsent -= n;
	memmove(r->sent, r->sent + n, r->nsent * sizeof(*r->sent));
	if (r->nsent > 0)
		r->want_mark = 1;
	relay_want_claim(r);
}

/* Mark the queued sent rows now and wait for it (stopping). */
void
relay_mark_now(struct relay *r)
{
	relay_pg_wait_result(r);
	if (r->nsent > 0 && r->conn != NULL) {
		relay_mark_start(r);
		relay_pg_wait_result(r);
	}
}

/* Record a failed attempt at row i of a chunk: retried after a backoff,
 * or dead-lettered. */
void
relay_fail_record(struct relay *r, const struct relay_chunk *ch, int i)
{
	const struct outbox_msg	*m = &ch->msgs[i];
	char			 claim[24], delay[24], id[24];
	char			 err[RELAY_ERROR_MAX + 1];
	const char		*p[4];
	PGresult		*res;
	int			 attempts = m->attempts + 1;
	/* "(other)" for a row naming a destination outbox.conf lacks, as
	 * in the metrics: its error names the row's. */
	const char		*dest = ch->dest->t.dest != NULL ?
				    ch->dest->t.dest->name : "(other)";

	snprintf(claim, sizeof(claim), "%" PRId64, ch->claim);
	snprintf(id, sizeof(id), "%" PRId64, m->id);
	log_utf8_copy(err, sizeof(err), m->error != NULL ?
	    m->error : "unknown error");
	p[0] = id;
	p[1] = claim;
	p[2] = err;
	if (m->outcome == SINK_REJECTED ||
	    attempts >= r->conf->relay.max_attempts) {
		/* The dead-letter state: kept, listed and redriven by an
		 * operator; it holds back its key's later rows so their
		 * order survives. */
		log_kv(LOG_LEVEL_ERROR, (const char *[]){
		    "outbox_id", id, "ordering_key", m->key,
		    "destination", dest, NULL },
		    "publish failed after %d attempt(s)%s: %s",
		    attempts, m->outcome == SINK_REJECTED ?
		    " (permanent error)" : "", err);
		res = relay_pg_exec(r, relay_fail_sql, 3, p,
		    PGRES_COMMAND_OK);
	} else {
		long	wait = relay_backoff(r->conf, attempts,
			    m->retry_after);

		/* The sink has logged why, once per request. */
		snprintf(delay, sizeof(delay), "%ld", wait);
		log_kv(LOG_LEVEL_DEBUG, (const char *[]){
		    "outbox_id", id, "ordering_key", m->key,
		    "destination", dest, NULL },
		    "attempt %d failed, retry in %s ms: %s", attempts,
		    delay, err);
		p[3] = delay;
		res = relay_pg_exec(r, wait >= RELAY_HOLD_MS ?
		    relay_retry_hold_sql : relay_retry_sql, 4, p,
		    PGRES_COMMAND_OK);
	}
	if (res != NULL)
		PQclear(res);
}

/*
 * Record the sink's verdict for every message of a chunk.  Sent rows are
 * queued for relay_mark_start(), which marks those of many chunks with
 * one statement; a failure is recorded at once, on its own.
 */
void
relay_record_outcomes(struct relay *r, struct relay_chunk *ch)
{
	int	i;

	for (i = 0; i < ch->n; i++)
		if (ch->msgs[i].outcome == SINK_SENT)
			relay_mark_queue(r, ch, i);
	for (i = 0; i < ch->n; i++)
		if (ch->msgs[i].outcome != SINK_SENT)
			relay_fail_record(r, ch, i);
}

/*
 * Give n claimed rows back, unpublished, with one statement: any relay may
 * claim them at once.  Each row only if it is still under the claim that
 * took it.  Returns how many were, or -1 (the statement failed: logged,
 * and the rows are left to their lease).
 */
int
relay_claim_give_back(struct relay *r, const int64_t *ids,
    const int64_t *claims, int n)
{
	char		*ids_arr, *claims_arr;
	const char	*p[2];
	PGresult	*res;
	int		 given = -1;

	if ((ids_arr = db_int8_array(ids, n)) == NULL ||
	    (claims_arr = db_int8_array(claims, n)) == NULL)
		fatal("malloc");
	p[0] = ids_arr;
	p[1] = claims_arr;
	res = relay_pg_exec(r, claim_give_back_sql, 2, p, PGRES_COMMAND_OK);
	if (res != NULL)
		given = atoi(PQcmdTuples(res));
	PQclear(res);
	free(ids_arr);
	free(claims_arr);
	return given;
}
