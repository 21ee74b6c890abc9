/*
 * http_guard_accept.c - the accept gate of the HTTP worker's listener
 * (http_guard_listen(); the admin worker's listener has none), with the
 * connections http_guard.c counts from accept to close: with
 * http.max_connections open it stops accepting until one closes, and
 * when accept() runs out of descriptors (EMFILE, ENFILE) it pauses for
 * HTTP_ACCEPT_RETRY_MS instead of failing again at once, which libevent
 * would do, and log, in a busy loop while the kernel's backlog holds a
 * connection (as nginx and PgBouncer do).  At a stop it accepts nothing
 * more (http_guard_stop()).
 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include <event2/event.h>
#include <event2/http.h>
#include <event2/listener.h>
#include <event2/util.h>

#include "outboxd.h"
#include "http_guard.h"
#include "metrics_api.h"

#define HTTP_ACCEPT_RETRY_MS	250	/* out of descriptors: accept again */

/* The gated guard (one per process): the listener's error callback gets
 * evhttp's argument, not ours. */
static struct http_guard	*http_gate;

/* Accepting stops while why (HTTP_PAUSED_*) holds; only the first reason
 * disables the listener. */
void
http_guard_accept_pause(struct http_guard *g, int why)
{
	if (g->paused == 0 && g->bound != NULL)
		evconnlistener_disable(evhttp_bound_socket_get_listener(
		    g->bound));
	g->paused |= why;
}

/* Accept again if nothing holds it back: not stopping, a connection
 * below the cap; a pause for descriptors ends at its timer or a close. */
void
http_guard_accept_resume(struct http_guard *g)
{
	if (g->paused == 0 || g->stopping || g->bound == NULL)
		return;
	if (g->max_conns > 0 && g->nconns >= g->max_conns)
		return;
	g->paused = 0;
	if (g->resume_ev != NULL)
		evtimer_del(g->resume_ev);
	evconnlistener_enable(evhttp_bound_socket_get_listener(g->bound));
}

static void
http_accept_retry(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	http_guard_accept_resume(arg);
}

/*
 * accept() failed with an error that is not passing (libevent retries
 * EAGAIN, EINTR, ECONNABORTED itself): out of descriptors, or memory.
 * Pause, say so once per LOG_LIMIT_MS, try again soon.
 */
static void
http_accept_error(struct evconnlistener *lev, void *arg)
{
	struct http_guard	*g = http_gate;
	struct timeval		 tv = clock_tv(HTTP_ACCEPT_RETRY_MS);
	int			 err = EVUTIL_SOCKET_ERROR();

	(void)lev;
	(void)arg;
	metrics_accept_paused(METRICS_PAUSE_DESCRIPTORS);
	log_limited(&g->fd_limit, LOG_LEVEL_WARN, "cannot accept a "
	    "connection: %s (%d client connections open); pausing accepts "
	    "for %d ms", strerror(err), g->nconns, HTTP_ACCEPT_RETRY_MS);
	http_guard_accept_pause(g, HTTP_PAUSED_FDS);
	evtimer_add(g->resume_ev, &tv);
}

int
http_guard_listen(struct http_guard *g)
{
	http_gate = g;
	if ((g->resume_ev = evtimer_new(g->base, http_accept_retry, g)) ==
	    NULL)
		return -1;
	evconnlistener_set_error_cb(evhttp_bound_socket_get_listener(g->bound),
	    http_accept_error);
	return 0;
}

void
http_guard_stop(struct http_guard *g)
{
	g->stopping = 1;
	if (g->bound != NULL)
		evconnlistener_disable(evhttp_bound_socket_get_listener(
		    g->bound));
	if (g->resume_ev != NULL)
		evtimer_del(g->resume_ev);
}
