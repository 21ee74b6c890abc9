/*
 * wal.h - what relay.mode = "wal" shares between its files: wal_stream.c
 * (the replication connection: checks, slot and publication, the copy
 * stream, standby status updates), wal_event.c (a table-less event's
 * JSON) and relay_wal.c (the events' way to the sinks and the LSN the
 * slot may confirm).  Nothing outside them includes it but relay.c (the
 * dispatch), outboxctl and the tests.
 */
#ifndef OUTBOXD_WAL_H
#define OUTBOXD_WAL_H

#include <stddef.h>
#include <stdint.h>

#include "pgoutput.h"

struct conf;
struct event_base;
struct pg_conn;

/* ---- wal_event.c: a table-less event (pg_logical_emit_message) ------- */

struct wal_event {
	char		*destination;	/* NULL: the default destination */
	char		*event_type;
	char		*key;		/* ordering key */
	char		*headers;	/* JSON object text, NULL: none */
	size_t		 headers_len;
	char		*payload;	/* JSON text, as written */
	size_t		 payload_len;
};

/* The content of a logical decoding message (text, len bytes) into *ev
 * (clear with wal_event_clear()).  0, or -1 with the reason in err
 * (errlen bytes); nothing to clear then. */
int		 wal_event_parse(const char *text, size_t len,
		    struct wal_event *ev, char *err, size_t errlen);
void		 wal_event_clear(struct wal_event *);

/* ---- wal_stream.c: the replication connection ----------------------- */

/*
 * What the server must allow for relay.mode = "wal", checked on conn (a
 * normal connection): wal_level = logical, the role's REPLICATION
 * attribute (or superuser), and a free replication slot unless ours
 * exists (max_replication_slots against pg_replication_slots).  0, or -1
 * with what to change in err (errlen bytes).  Used by outboxd -t and
 * every relay at start.
 */
int		 wal_check(struct pg_conn *conn, const struct conf *c,
		    char *err, size_t errlen);

struct wal_stream;

/* What the stream tells its owner, from the event loop. */
struct wal_stream_cb {
	/* A pgoutput message, decoded; m is valid during the call. */
	void	(*msg)(void *arg, const struct pgo_msg *m);
	/* A keepalive: the server's WAL has reached wal_end and nothing
	 * before it is still to come. */
	void	(*keepalive)(void *arg, uint64_t wal_end);
	/* Streaming started (up 1) or the stream was lost (up 0: what came
	 * and was not confirmed comes again on the next stream). */
	void	(*state)(void *arg, int up);
	/* The slot was just created, exporting snapshot (its name): the
	 * rows pending in it will never be streamed.  0, or -1 to drop the
	 * slot again and retry later. */
	int	(*created)(void *arg, const char *snapshot);
};

/*
 * Start streaming relay.wal_slot on base's loop: connect with
 * replication=database, create the publication and the slot when they
 * are missing (never dropped here), START_REPLICATION from the slot's
 * confirmed position.  A slot another reader holds (SQLSTATE 55006), a
 * lost connection or a garbled message: retried about every second.
 * conf and cb must outlive it.  NULL when out of memory.
 */
struct wal_stream *wal_stream_new(struct event_base *, const struct conf *,
		    const struct wal_stream_cb *cb, void *arg);
/* Everything up to lsn is done: it goes to the server as the flush and
 * apply positions with the next status update (about every second, and
 * at once when the server asks). */
void		 wal_stream_confirm(struct wal_stream *, uint64_t lsn);
/* Bytes of WAL between the server's end (as its last message said) and
 * the position confirmed, into *lag: 0, or -1 when not streaming. */
int		 wal_stream_lag(const struct wal_stream *, uint64_t *lag);
/* The server's WAL insert position (pg_current_wal_insert_lsn()) read
 * just before the current or last stream started; 0 before the first.  A
 * transaction whose commit record is before it was committed while
 * this stream was not running: table mode, or no relay at all, may have
 * published its rows since. */
uint64_t	 wal_stream_start_lsn(const struct wal_stream *);
/* Stop reading (paused 1: too much in hand) or read again. */
void		 wal_stream_pause(struct wal_stream *, int paused);
/* Send a last status update, close, free.  NULL is ignored. */
void		 wal_stream_free(struct wal_stream *);

/* ---- relay_wal.c: the worker in relay.mode = "wal" ------------------ */

/* The relay worker's main loop in wal mode (relay.c dispatches here):
 * exit status as relay_main()'s. */
int		 relay_wal_main(struct conf *, int index);

#endif /* OUTBOXD_WAL_H */
