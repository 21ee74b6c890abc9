/*
 * relay_handoff.c - the rows relay 1 takes from the handoff socket
 * (handoff.c), published like the rows of its own claims, and those it
 * gives back when outboxd stops with rows still in the socket.
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>

#include <event2/event.h>

#include "relay.h"
#include "metrics_api.h"

#define RELAY_GIVE_BACK_MAX	100	/* handed-off rows a statement */

/*
 * Relay 1 reads handed-off rows (handoff.c) only when it could have
 * claimed them itself: connected, no statement in flight, room, marks not
 * late.  A handed-off row taken while the connection hangs (a backend
 * stuck on a lock or I/O) would be published and then wait for its mark
 * behind that statement, past its lease, while another relay's claim
 * takes it again; a claim would not have got it.  Rows wait in the socket
 * meanwhile, and relay_sink_pump() drops those whose lease it can no longer
 * keep.
 */
void
relay_handoff_gate(struct relay *r)
{
	int	on;

	if (r->handoff_ev == NULL)
		return;
	on = !r->stopping && !r->handoff_shut && r->conn != NULL &&
	    r->pg_query == RELAY_PG_NONE &&
	    r->inflight < RELAY_MAX_INFLIGHT &&
	    !relay_marks_late(r, relay_lease_left(r));
	if (on == r->handoff_on)
		return;
	if (on ? event_add(r->handoff_ev, NULL) : event_del(r->handoff_ev))
		fatalx("handoff event");
	r->handoff_on = on;
}

/*
 * Relay 1: rows an HTTP worker wrote already claimed and handed over
 * (handoff.c), published like the rows of a claim of its own.  Their
 * lease runs from when the worker sent its statement, so relay_sink_pump()'s
 * check covers a row that waited long in the socket.
 */
static void
relay_handoff_on_readable(evutil_socket_t fd, short what, void *arg)
{
	static char		 buf[HANDOFF_MAX];
	struct relay		*r = arg;
	struct claimed_row	 row;
	int64_t			 now = clock_mono_us();
	int			 rv, n = 0;

	(void)fd;
	(void)what;
	while (r->inflight + n < RELAY_MAX_INFLIGHT &&
	    (rv = handoff_recv(&row, buf, sizeof(buf))) != 0) {
		if (rv == -1) {
			if (errno != EMSGSIZE && errno != EBADMSG) {
				log_warn("handoff socket");
				event_del(r->handoff_ev);
				event_free(r->handoff_ev);
				r->handoff_ev = NULL;
				break;
			}
			log_warnx("skipped a malformed handed-off row: its "
			    "lease brings it back");
			continue;
		}
		relay_sink_add(r, &row, 0, now);
		n++;
	}
	relay_sink_flush(r);
	if (n > 0) {
		metrics_handoff(n, 0);
		log_debug("took %d handed-off row(s)", n);
	} else if (handoff_is_shut()) {
		/* The master's stop, whose SIGUSR2 has not reached us (it
		 * may come before our signal handlers are set): an empty
		 * shut socket polls readable for ever. */
		log_info("the handoff socket is shut (outboxd is stopping): "
		    "taking no more handed-off rows");
		r->handoff_shut = 1;
	}
	relay_sink_pump(r);
	relay_handoff_gate(r);
}

/*
 * Relay 1 leaving at the master's stop: give back the rows still in the
 * handoff socket.  Nobody will read them (a reload's new relay 1 would, so
 * a retired relay 1 leaves them there, and so does one stopped alone),
 * and they would wait for their lease, after the restart that usually
 * follows.  The master shut the socket before its stop signal (handoff_shut()),
 * so no row comes after this: an HTTP worker whose order commits later
 * gives its row back itself (http.c).
 */
void
relay_handoff_give_back(struct relay *r)
{
	static char		 buf[HANDOFF_MAX];
	struct claimed_row	 row;
	int64_t			 ids[RELAY_GIVE_BACK_MAX];
	int64_t			 claims[RELAY_GIVE_BACK_MAX];
	int			 rv, more, n = 0, given = 0, left = 0;

	if (r->handoff_ev == NULL || !r->master_stop)
		return;
	do {
		rv = handoff_recv(&row, buf, sizeof(buf));
		/* A malformed datagram (EMSGSIZE, EBADMSG) is skipped; any
		 * other error ends the reading. */
		more = rv == 1 || (rv == -1 && (errno == EMSGSIZE ||
		    errno == EBADMSG));
		if (rv == 1) {
			ids[n] = row.id;
			claims[n++] = row.claim;
		}
		if (n > 0 && (n == RELAY_GIVE_BACK_MAX || !more)) {
			int	g = r->conn != NULL ? relay_claim_give_back(r,
				    ids, claims, n) : -1;

			if (g >= 0)
				given += g;
			else
				left += n;
			n = 0;
		}
	} while (more);
	if (given > 0)
		log_info("gave back %d handed-off row(s) at the stop", given);
	if (left > 0)
		log_warnx("could not give back %d handed-off row(s) at the "
		    "stop (%s): they are published when their lease ends "
		    "(relay.lease)", left, r->conn == NULL ? "no database "
		    "connection" : "the statement failed");
}

void
relay_handoff_open(struct relay *r)
{
	if (r->index != 1 || handoff_fd() == -1)
		return;
	if ((r->handoff_ev = event_new(r->base, handoff_fd(),
	    EV_READ | EV_PERSIST, relay_handoff_on_readable, r)) == NULL)
		fatalx("event_new");
}

void
relay_handoff_close(struct relay *r)
{
	if (r->handoff_ev != NULL)
		event_free(r->handoff_ev);
	r->handoff_ev = NULL;
}
