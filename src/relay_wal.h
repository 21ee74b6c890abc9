/*
 * relay_wal.h - what relay_wal.c (the worker in relay.mode = "wal": the
 * events, their way to the sinks, the LSN the slot may confirm) shares
 * with relay_wal_db.c (recording published rows on the outbox table).
 * Private to those two files.
 */
#ifndef OUTBOXD_RELAY_WAL_H
#define OUTBOXD_RELAY_WAL_H

#include <sys/queue.h>

#include <stdint.h>

#include "outboxd.h"
#include "broker.h"
#include "wal.h"

#define WAL_TICK_MS	100	/* backoffs due, rows to record */

/* A transaction streamed from the slot, until all of its events are
 * done; the list of them is in commit order. */
struct wal_txn {
	uint64_t		 final_lsn;	/* its commit record (Begin) */
	uint64_t		 end_lsn;	/* ... and the end of it */
	int			 committed;	/* its Commit came */
	int			 left;		/* events not done yet */
	int			 seen;		/* events taken from it */
	int			 unmarked;	/* ... sent, their rows not yet
						   marked */
	int64_t			 begun_us;	/* its Begin came (monotonic) */
	int			 catchup;	/* rows of the catch-up */
	uint32_t		 xid;		/* from its Begin */
	int			 backlog;	/* committed before the stream
						   started: its rows are
						   checked (w->checkq) */
	TAILQ_ENTRY(wal_txn)	 entry;
};

/* One destination as the wal relay publishes to it. */
struct wal_dest {
	struct sink_target	 t;
	const struct sink	*sink;
	int			 max_batch;
	int			 slots;
	int			 at_sink;	/* calls in flight */
	int			 paused;	/* outboxctl pause NAME */
	TAILQ_HEAD(, wal_ev)	 q;		/* events for the sink, in
						   commit order */
};

/* An event: an outbox row's insert or a logical decoding message. */
struct wal_ev {
	struct wal_txn		*txn;
	struct wal_dest		*dest;		/* NULL: refused already */
	struct outbox_msg	 m;		/* m.id: the row's id, or the
						   message's LSN */
	int64_t			 row;		/* outbox.id; 0: table-less */
	int64_t			 due_us;	/* monotonic: not before */
	int			 at_sink;
	uint32_t		 xid;		/* its transaction's (0: the
						   catch-up's) */
	int			 gone;		/* the backlog's check: 1 its
						   row is no longer pending
						   (not published), -1 not
						   to be seen yet (wait) */
	TAILQ_ENTRY(wal_ev)	 entry;		/* in dest->q, recordq or
						   checkq */
};

struct relay_wal {
	struct conf		*conf;
	int			 index;
	struct event_base	*base;
	struct httpc		*httpc;
	struct wal_stream	*stream;
	struct wal_dest		*dests;		/* n_dests */
	int			 n_dests;
	struct retention	*retention;	/* relay 1 */
	TAILQ_HEAD(wal_txnq, wal_txn) txns;
	struct wal_txn		*cur;		/* between Begin and Commit */
	int			 skip_txn;	/* ... had it all already */
	int			 skip_events;	/* ... had this many of it */
	uint64_t		 last_final;	/* newest transaction taken */
	uint64_t		 confirmed;
	uint64_t		 idle_lsn;	/* keepalive with nothing held */
	uint32_t		 outbox_oid;	/* the outbox's Relation */
	int			 col[16];	/* its columns, by enum wal_col */
	int			 held;		/* events in hand */
	int			 at_sink;	/* calls in flight */
	TAILQ_HEAD(, wal_chunk)	 chunks;	/* ... their chunks */
	int			 paused;
	TAILQ_HEAD(, wal_ev)	 recordq;	/* rows to record */
	int			 nrecord;
	TAILQ_HEAD(, wal_ev)	 checkq;	/* events of the backlog, in
						   commit order, whose rows
						   are checked first */
	int			 nchecks;
	int64_t			 backlog_gone;	/* ... no longer pending */
	/* relay_wal_db.c */
	struct pg_conn		*db;
	struct event		*db_ev;
	struct wal_ev		**recording;	/* the statement's events */
	int			 nrecording;
	int			 polling;	/* ... or the pause query */
	int			 db_down;	/* cannot connect: see
						   relay_wal_confirm() */
	int64_t			 db_retry_us;	/* no connect before */
	int			 paused_all;	/* outboxctl pause */
	int64_t			 polled_us;	/* the last pause query */
	uint64_t		 stored_lsn;	/* confirmed, as last kept in
						   outbox_wal_confirmed */
	struct event		*pump_ev;
	struct event		*tick_ev;
	struct event		*give_up;
	int			 stopping;
	struct log_limit	 bad_limit;	/* bad messages */
	struct log_limit	 db_limit;
	struct log_limit	 lag_limit;	/* relay.wal_lag_warning */
	int			 ticks;
	int			 catchup;	/* catch-up under way: the
						   stream waits */
	int			 catchup_txns;	/* ... its pages in hand */
	int64_t			 catchup_after;	/* ... the last id taken */
};

/* A publish call: the events and the messages the sink fills in (copies
 * of the events' messages; the strings stay the events'). */
struct wal_chunk {
	struct relay_wal	*w;
	struct wal_dest		*d;
	struct wal_ev		*ev[SINK_MAX_BATCH];
	struct outbox_msg	 msgs[SINK_MAX_BATCH];
	int			 n;
	int64_t			 sink_us;
	TAILQ_ENTRY(wal_chunk)	 entry;		/* in w->chunks */
};

/* An event is done (sent, or failed for good and recorded): free it and
 * confirm what may be. */
void		 relay_wal_done(struct relay_wal *, struct wal_ev *);

/* Confirm the end of the oldest transactions that are done. */
void		 relay_wal_confirm(struct relay_wal *);
/* An event was sent or failed for good: a row's goes to be recorded, a
 * table-less one is done (a failure is logged). */
void		 relay_wal_finish(struct relay_wal *, struct wal_ev *);

/* An outbox row to publish (strings not NUL-terminated, copied): from
 * an Insert, or from the catch-up. */
struct wal_row {
	int64_t			 id;
	struct pgo_str		 type, key, payload;
	struct pgo_str		 dest;		/* p NULL: the default */
	struct pgo_str		 headers;	/* p NULL: none */
	int64_t			 created_ms;
};

/* Take row into the current transaction (w->cur). */
void		 relay_wal_take_row(struct relay_wal *, const struct wal_row *);

/* An event (checked by wal_ev_check()) to its destination's queue, or
 * (refused) straight to its end. */
void		 relay_wal_dispatch(struct relay_wal *, struct wal_ev *);

/* relay_wal_backlog.c.  The next page of the catch-up, when one is
 * under way and the last is done; the stream reads again after the last
 * page. */
void		 relay_wal_catchup_next(struct relay_wal *);
/* The backlog's events (w->checkq) whose rows are still pending go on
 * to their destinations in order, the others are done unpublished
 * (counted in one log line).  Nothing changes while the check cannot be
 * made: the next tick tries again. */
void		 relay_wal_backlog_check(struct relay_wal *);
/* A stream started: skip what commits before the position kept in
 * outbox_wal_confirmed, if it is past w->confirmed and not past the
 * server's WAL (then a warning); blocking. */
void		 relay_wal_resume_stored(struct relay_wal *);

/* relay_wal_sink.c.  Hand each destination's next events to its free
 * calls: in commit order, skipping a key whose earlier event is at the
 * sink or waiting out a backoff. */
void		 relay_wal_pump(struct relay_wal *);

/* relay_wal_db.c.  Start recording the rows of recordq (sent, or
 * failed with m.error) with one statement on the relay's normal
 * connection, unless one is in flight; each event is done once it has
 * committed.  Connects (blocking) when there is no connection. */
void		 relay_wal_record(struct relay_wal *);
/* Ask, without waiting, which destinations outboxctl paused (and
 * whether all are), at most every second, when the connection is free;
 * the answer sets w->paused_all and each wal_dest's paused. */
void		 relay_wal_pause_poll(struct relay_wal *);
/* Keep w->confirmed in outbox_wal_confirmed now, if it moved (blocking,
 * stopping; otherwise it goes with the pause query, every second). */
void		 relay_wal_store_now(struct relay_wal *);
/* The position outbox_wal_confirmed keeps for the slot into *lsn (0:
 * none), blocking.  0, or -1 (no connection, or the query failed). */
int		 relay_wal_stored(struct relay_wal *, uint64_t *lsn);
/* Delete the slot's kept position if it is still lsn (blocking; right
 * after relay_wal_stored()). */
void		 relay_wal_stored_forget(struct relay_wal *, uint64_t lsn);
/* Record what is queued and wait (stopping). */
void		 relay_wal_record_now(struct relay_wal *);
/* Close the connection. */
void		 relay_wal_db_close(struct relay_wal *);
/* Mark the rows pending in the slot's exported snapshot for the
 * catch-up (claim -1), blocking.  0, or -1 (logged). */
int		 relay_wal_catchup_mark(struct relay_wal *, const char *snapshot);
/* Take the next page of rows marked for the catch-up, after id
 * w->catchup_after, into a transaction of their own at the head: the
 * number taken, or -1 (logged). */
int		 relay_wal_catchup_load(struct relay_wal *);
/* Which rows of w->checkq are still pending on the outbox, with one
 * query (blocking): the others' events get gone = 1, those of rows not
 * to be seen -1 while their transaction is in progress, else 1.  0, or
 * -1 (logged: nothing changed). */
int		 relay_wal_check(struct relay_wal *);
/* The normal connection (connecting if need be, blocking), or NULL. */
struct pg_conn	*relay_wal_db(struct relay_wal *);

#endif /* OUTBOXD_RELAY_WAL_H */
