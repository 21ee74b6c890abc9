/*
 * relay.h - what the relay worker's files (relay*.c) share: the worker's
 * state, its chunks of claimed rows, and the functions each file lends
 * the others.  Nothing outside the relay includes it; relay_main() is in
 * outboxd.h.
 *
 * Who does what: relay.c is the worker (the loop, what to do next, stop,
 * drain, give up); relay_pg.c its PostgreSQL connection; relay_claim.c
 * the statements on the outbox (claim, lease, mark sent, record failures,
 * give back); relay_sink.c the way from claimed rows to the sink and back
 * to outcomes; relay_handoff.c the rows relay 1 takes from the handoff
 * socket.
 */
#ifndef RELAY_H
#define RELAY_H

#include <sys/queue.h>

#include <stdint.h>

#include <libpq-fe.h>

#include "outboxd.h"
#include "broker.h"
#include "replay.h"

#define RELAY_MAX_INFLIGHT	320	/* rows claimed, not yet recorded */
#define RELAY_LOW_WATER		(RELAY_MAX_INFLIGHT / 2) /* claim again */

struct relay;

/*
 * One destination as a relay publishes to it: its sink and the chunks it
 * has at that sink.  A relay has one per destination of its
 * configuration, in its order, and one more for rows naming a
 * destination it does not have (sink NULL: they are failed).
 */
struct relay_dest {
	struct sink_target	 t;
	const struct sink	*sink;		/* NULL: not configured */
	int			 max_batch;	/* messages per call */
	int			 slots;		/* calls at once */
	int			 at_sink;	/* chunks at its sink */
	int			 inflight;	/* rows claimed, not recorded */
	int			 cap;		/* claim none of its rows while
						   inflight reaches this */
	struct relay_chunk	*filling;	/* chunk a claim is filling */
	int			 skipped;	/* the last claim left its rows */
};

/* The statement in flight on a relay's connection, if any. */
enum relay_pg_query { RELAY_PG_NONE, RELAY_PG_CLAIM, RELAY_PG_MARK };

/* One of the hot statements, prepared once per connection (bit is its
 * bit in relay.prepared). */
struct relay_pg_stmt {
	unsigned	 bit;
	const char	*name;
	const char	*sql;
	int		 nparams;
};

/*
 * A chunk is what one sink call publishes (up to the sink's max_batch
 * messages).  At most the sink's slots chunks are at the sink at once;
 * the other claimed chunks wait in the relay, ready to go as soon as a
 * slot frees, so the relay has work while its next claim is under way.
 */
struct relay_chunk {
	struct relay		*relay;
	struct relay_dest	*dest;
	int64_t			 claim;
	struct outbox_msg	 msgs[SINK_MAX_BATCH];
	int			 n;
	size_t			 bytes;		/* message sizes added up */
	int64_t			 acked_us;	/* when the sink answered (wall
						   clock: it becomes sent_at) */
	int64_t			 claimed_us;	/* when its claim was sent */
	int64_t			 answered_us;	/* ... and came back */
	int64_t			 lease_end_us;	/* ... its lease ends (monotonic:
						   claimed_us + the lease) */
	int64_t			 sink_us;	/* handed to the sink (monotonic) */
	int			 at_sink;	/* handed to the sink */
	TAILQ_ENTRY(relay_chunk) entry;		/* in ready or at_sinkq */
};

/* A row the sink took, until the mark records it. */
struct relay_sent {
	int64_t			 id;
	int64_t			 claim;		/* its claim token */
	int64_t			 acked_us;	/* as in its chunk */
	int64_t			 lease_end_us;	/* ... its claim's lease ends */
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
	struct event		*give_up;	/* stopping: rows at the sink */
	struct event		*handoff_ev;	/* relay 1: rows handed over */
	struct retention	*retention;	/* relay 1: old sent rows */
	struct replay_job	*replay;	/* relay 1: replays (replay.h) */
	struct relay_dest	*dests;		/* n_dests + 1: see relay_dest */
	int			 n_dests;
	long			 reconnect_delay;
	int			 reconnect_fails;
	int			 inflight;	/* rows claimed, not recorded */
	TAILQ_HEAD(, relay_chunk) ready;	/* ... waiting for a slot */
	TAILQ_HEAD(, relay_chunk) at_sinkq;	/* ... at the sink */
	int			 at_sink;	/* ... how many */
	struct event		*record_ev;	/* records the sent rows */
	struct relay_sent	*sent;		/* sent, not recorded yet */
	int			 nsent;
	int			 sent_cap;
	int			 marking;	/* sent[0..marking) are being
						   marked by the query in flight */
	int			 woken;		/* NOTIFY seen since last claim */
	int			 backlog;	/* the last claim came back full,
						   or left a destination that
						   has room again */
	enum relay_pg_query	 pg_query;	/* the statement in flight */
	PGresult		*pg_res;	/* ... its result, once read */
	int64_t			 pg_sent_us;	/* ... when it was sent */
	int64_t			 claiming_token; /* ... a claim's token */
	int			 claiming_limit; /* ... a claim's limit */
	int64_t			 claim_cost_us;	/* how long claims take */
	int64_t			 mark_cost_us;	/* ... and marks */
	int			 handoff_on;	/* handoff_ev is added */
	int			 handoff_shut;	/* ... never again: shut */
	struct log_limit	 stale_limit;	/* "too late to publish" */
	struct log_limit	 hold_limit;	/* "holding the next claim" */
	int			 want_claim;	/* claim when the connection is free */
	int			 want_mark;	/* mark the sent rows, likewise */
	int			 marked_last;	/* the last statement was a mark */
	unsigned		 prepared;	/* relay_pg_stmt bits, this conn */
	int			 followers;	/* marked rows' keys have more */
	int			 stopping;
	int			 stopped;	/* a stop, not a reload's retire */
	int			 master_stop;	/* ... the master's (SIGUSR2) */
	struct event		*master_stop_ev; /* relay 1: waiting for it */
	int			 master_stop_waited; /* ... in vain */
};

/* ---- relay.c: the worker and its scheduler ---------------------------- */

/* Claim, or go on claiming, as soon as the connection is free. */
void		 relay_kick(struct relay *);
/* Start the next statement the relay owes, if the connection is free,
 * then open or close relay 1's handoff socket. */
void		 relay_next(struct relay *);
/* Ask for a claim if there may be rows to claim and there is room. */
void		 relay_want_claim(struct relay *);
/* Input came on the connection (relay_pg.c has read it): decide what
 * next, or end the loop when a stop has nothing left to wait for. */
void		 relay_on_input(struct relay *);
/* Stopping, and nothing is left at the sink or in flight: mark the last
 * sent rows and leave the loop. */
void		 relay_maybe_done(struct relay *);
/* The sink answered a chunk, now recorded: mark and claim next, now or
 * within a few ms (batched), or end a stop. */
void		 relay_schedule_record(struct relay *);

/* ---- relay_pg.c: the relay's PostgreSQL connection --------------------- */

/* First connection at start: connect (relay 1 also LISTENs), set up the
 * reconnect backoff.  -1 with the reason in err (errlen bytes): the
 * server is unreachable (or starting), reconnecting with backoff has
 * begun, as after a lost connection; -2: the server refused the
 * connection (no such database, role, authentication). */
int		 relay_pg_open(struct relay *, char *err, size_t errlen);
/* The connection broke (why: libpq's message, may be NULL): drop it and
 * the statement in flight, reconnect later with backoff. */
void		 relay_pg_disconnect(struct relay *, const char *why);
/* A poll's check: -1 if the connection turned out broken (and is now
 * dropped), else 0 (connected or not). */
int		 relay_pg_check(struct relay *);
/* At exit: close the connection, free its events. */
void		 relay_pg_close(struct relay *);
/* Run sql and wait for it, after the statement in flight has been
 * answered.  Returns the result (caller PQclear()s) if its status is
 * want, else NULL with the error logged or the connection dropped. */
PGresult	*relay_pg_exec(struct relay *, const char *sql, int nparams,
		    const char *const *params, ExecStatusType want);
/* Send hot statement st (prepared first on a new connection) as query q
 * without waiting; its answer goes to relay_claim_done() or
 * relay_mark_done().  0, or -1 with the error handled (logged, or the
 * connection dropped: then r->conn is NULL). */
int		 relay_pg_send(struct relay *, enum relay_pg_query q,
		    const struct relay_pg_stmt *st, const char *const *params);
/* Wait for the result of the statement in flight, if any, and hand it
 * on. */
void		 relay_pg_wait_result(struct relay *);

/* ---- relay_claim.c: the relay's statements on the outbox -------------- */

/* Claim up to batch_size rows (no more than there is room for) without
 * waiting; relay_claim_done() gets the answer. */
void		 relay_claim_start(struct relay *);
/* The claim's answer (res NULL: it failed): its rows to the sink. */
void		 relay_claim_done(struct relay *, PGresult *res);
/* 1 if the next claim must wait for the marks of rows whose lease ends
 * soon (logged, rate-limited), else 0. */
int		 relay_claim_held(struct relay *);
/* us until the first lease of a row held and not marked ends (INT64_MAX:
 * none held). */
int64_t		 relay_lease_left(const struct relay *);
/* 1 if a claim and a mark now could end after lease_left (us). */
int		 relay_marks_late(const struct relay *, int64_t lease_left);
/* Queue row i of ch, which the sink took, for the next mark. */
void		 relay_mark_queue(struct relay *, const struct relay_chunk *ch,
		    int i);
/* Mark every queued sent row without waiting; relay_mark_done() gets the
 * answer. */
void		 relay_mark_start(struct relay *);
/* The mark's answer (res NULL: it failed). */
void		 relay_mark_done(struct relay *, PGresult *res);
/* Mark the queued sent rows now and wait for it (stopping). */
void		 relay_mark_now(struct relay *);
/* Record a failed attempt at row i of ch (waits for the statement):
 * retried after a backoff, or dead-lettered. */
void		 relay_fail_record(struct relay *, const struct relay_chunk *ch,
		    int i);
/* Delay before attempt attempts + 1, in ms: relay.backoff_base doubled
 * per attempt made, capped at relay.backoff_max, with jitter; a broker's
 * Retry-After (ms, -1: none) wins when longer.  (relay_wal.c too.) */
long		 relay_backoff(const struct conf *, int attempts,
		    long retry_after);
/* Record the sink's verdict for every message of ch. */
void		 relay_record_outcomes(struct relay *, struct relay_chunk *ch);
/* Give n claimed rows back unpublished (each only if still under its
 * claim) and wait.  Returns how many were, or -1 (logged; the rows are
 * left to their lease). */
int		 relay_claim_give_back(struct relay *, const int64_t *ids,
		    const int64_t *claims, int n);

/* ---- relay_sink.c: claimed rows to the sink, answers to outcomes ------ */

/* The sink of destination cd, and the messages per call (*max_batch)
 * and calls at once (*slots) it is published with: its settings within
 * the sink's own limits.  (relay_wal_sink.c too.) */
const struct sink *relay_sink_limits(const struct conf_destination *cd,
		    int *max_batch, int *slots);
/* Count a call's outcomes (msgs[0..n-1]) under metrics slot dest: sent
 * with their latency at now (ms since the epoch), replayed, failed
 * attempts by reason, retried or given up; then the sink's health for
 * /readyz.  (relay_wal_sink.c too.) */
void		 relay_sink_count_msgs(const struct conf *, int dest,
		    const struct outbox_msg *msgs, int n, int64_t now);
/* Set up the relay's destinations from its configuration. */
void		 relay_sink_open(struct relay *);
/* Add a claimed row (strings copied) to the chunk being filled for its
 * destination; a full chunk is queued for the sink and a new one
 * started.  attempts made before; answered_us: when its claim came back
 * (monotonic). */
void		 relay_sink_add(struct relay *, const struct claimed_row *row,
		    int attempts, int64_t answered_us);
/* Queue every chunk being filled for its sink; one whose messages are all
 * decided already (too large, no such destination) is recorded at
 * once. */
void		 relay_sink_flush(struct relay *);
/* The names of the destinations whose rows a claim must leave now (rows
 * in hand reached their cap), as a PostgreSQL text[] literal into buf
 * (len bytes): "{}" when none. */
void		 relay_sink_skip(const struct relay *, char *buf, size_t len);
/* Hand queued chunks to the sink while it has free slots; stopping, give
 * their rows back instead. */
void		 relay_sink_pump(struct relay *);
/* 1 if a destination the last claim left has room again (there may be
 * rows for it); forgets which were left. */
int		 relay_sink_room_again(struct relay *);
/* 1 if every destination has its fill of rows in hand: a claim now
 * would skip them all, reading every due row to find none. */
int		 relay_sink_full(const struct relay *);
/* Rows of the chunks at the sink. */
int		 relay_sink_rows(const struct relay *);
/* Giving up at a stop: record what the sink answered of its chunks so
 * far, log what it did not. */
void		 relay_sink_give_up(struct relay *);
/* Free the chunks left at exit (their rows are left to the lease). */
void		 relay_sink_free(struct relay *);

/* ---- relay_handoff.c: rows relay 1 takes from the handoff socket ------ */

/* Relay 1 with a handoff socket: set up reading it (off until
 * relay_handoff_gate() opens it). */
void		 relay_handoff_open(struct relay *);
/* Read the socket only while a claim of this relay could have taken the
 * rows itself. */
void		 relay_handoff_gate(struct relay *);
/* Leaving at the master's stop: give back the rows left in the socket. */
void		 relay_handoff_give_back(struct relay *);
/* At exit: free the socket's event. */
void		 relay_handoff_close(struct relay *);

#endif /* RELAY_H */
