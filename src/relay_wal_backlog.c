/*
 * relay_wal_backlog.c - what the stream does not carry, or carries
 * again, in relay.mode = "wal".
 *
 * The catch-up: rows pending when the slot was created (table mode
 * before, or a slot lost or dropped and made again) are never streamed;
 * relay_wal_catchup_mark() marked them (claim -1) in the slot's exported
 * snapshot, durably, so whichever relay streams next publishes them
 * first, a page at a time, while the stream waits (so that a key's
 * rows keep their order).  A row also in flight from the stream before
 * a slot was lost is published twice: the duplicates are bounded by
 * what was in flight.
 *
 * The backlog: a transaction committed before the stream started
 * (wal_stream_start_lsn()) may have been published by table mode since
 * (a slot kept through a table-mode period streams all of it again), or
 * sent and marked by a relay that died before confirming it.
 * relay_wal.c holds its events in w->checkq, in commit order with
 * whatever streams after them, until one query (relay_wal_check())
 * says which rows are still pending; only those are published.  A
 * table-less event has no row to check and is published.
 *
 * The position kept: PostgreSQL before 17 saves a logical slot's
 * confirmed position at a clean shutdown only if something else about
 * the slot changed, so after a server restart the slot may stream again
 * transactions long done: the rows among them the backlog's check
 * stops, table-less events it cannot.  outbox_wal_confirmed keeps the
 * position as confirmed (relay_wal_pause_poll()); what commits before it
 * is skipped.  Never past the server's own position: a record from a
 * restored or another server would skip what was never seen, and is
 * deleted at once, before the server's WAL can grow past it.
 */
#include "config.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>

#include "relay_wal.h"

void
relay_wal_catchup_next(struct relay_wal *w)
{
	int	n;

	if (!w->catchup || w->catchup_txns > 0 || w->stopping)
		return;
	if ((n = relay_wal_catchup_load(w)) == -1)
		return;			/* the next tick tries again */
	if (n == 0) {
		w->catchup = 0;
		if (w->catchup_after > 0)
			log_info("catch-up done: the rows pending before the "
			    "slot are published");
		wal_stream_pause(w->stream, w->paused || w->stopping);
	}
}

void
relay_wal_backlog_check(struct relay_wal *w)
{
	struct wal_ev	*ev;

	if (w->nchecks == 0 || relay_wal_check(w) == -1)
		return;
	while ((ev = TAILQ_FIRST(&w->checkq)) != NULL && ev->gone != -1) {
		TAILQ_REMOVE(&w->checkq, ev, entry);
		w->nchecks--;
		if (!ev->gone) {
			relay_wal_dispatch(w, ev);
			continue;
		}
		log_debug("outbox row %" PRId64 " is no longer pending: not "
		    "published again", ev->row);
		w->backlog_gone++;
		relay_wal_done(w, ev);
	}
	if (w->backlog_gone > 0 && (w->cur == NULL || !w->cur->backlog)) {
		log_info("%" PRId64 " row(s) committed before the stream "
		    "started were no longer pending (published or failed "
		    "by table mode, or before a restart): not published "
		    "again", w->backlog_gone);
		w->backlog_gone = 0;
	}
}

void
relay_wal_resume_stored(struct relay_wal *w)
{
	uint64_t	stored, now = wal_stream_start_lsn(w->stream);
	char		a[24], b[24];

	if (relay_wal_stored(w, &stored) == -1 || stored <= w->confirmed)
		return;
	if (stored > now) {
		log_warnx("outbox_wal_confirmed says slot %s was confirmed up "
		    "to %s, past the server's WAL (%s): deleted, not used (a "
		    "restored or another server?)", w->conf->relay.wal_slot,
		    pgo_lsn_text(stored, a, sizeof(a)), pgo_lsn_text(now, b,
		    sizeof(b)));
		relay_wal_stored_forget(w, stored);
		return;
	}
	log_info("resuming slot %s past %s, the position outboxd confirmed "
	    "(kept in outbox_wal_confirmed)", w->conf->relay.wal_slot,
	    pgo_lsn_text(stored, a, sizeof(a)));
	w->confirmed = w->stored_lsn = stored;
}
