/*
 * http_guard.h - the per-connection guard (http_guard.c) in front of an
 * evhttp: strict framing, JSON refusals and error pages, the 408 cut.
 * Both listeners use it: the HTTP worker (http.c), which also gates its
 * listener with it (http_guard_listen(), http_guard_accept.c), and the
 * admin worker (admin_http.c).  Each owns one struct http_guard and
 * passes it in.
 */
#ifndef HTTP_GUARD_H
#define HTTP_GUARD_H

#include <sys/queue.h>

#include <stddef.h>

#include "outboxd.h"
#include "http_frame.h"

struct event;
struct event_base;
struct evbuffer;
struct evhttp;
struct evhttp_bound_socket;
struct evhttp_request;
struct http_conn;

/*
 * The reason phrase for a status libevent's table lacks (for 422 and 429
 * it says "Client Error"), for evhttp_send_reply(); NULL: libevent's
 * own.  RFC 9110 15.5.21 (422), RFC 6585 4 and 5 (429, 431).
 */
static inline const char *
http_reason(int code)
{
	switch (code) {
	case 422:
		return "Unprocessable Content";
	case 429:
		return "Too Many Requests";
	case 431:
		return "Request Header Fields Too Large";
	}
	return NULL;
}

/* What the framer lets through (414, 431; a trailer gets the header
 * section's limit of its own; bodies: http_guard.max_body, 413). */
#define HTTP_LINE_MAX		8192	/* request line */
#define HTTP_HEAD_MAX		16384	/* header section */
/* evhttp's own limit (evhttp_set_max_headers_size), above what the
 * framer passes, so that the framer answers first: evhttp counts the
 * request line, header and trailer lines together, without their line
 * endings.  Its body limit is the guard's max_body. */
#define HTTP_EVHTTP_HEAD_MAX	(HTTP_LINE_MAX + 2 * HTTP_HEAD_MAX + 1024)

struct http_guard {
	/* The owner's: set before http_guard_attach(). */
	struct event_base	*base;
	struct evhttp		*http;
	size_t			 max_body;	/* body limit, 413 */
	int			 replying;	/* set around the owner's
						   evhttp_send_reply(): that
						   output is not an error page */
	/* The accept gate, set for http_guard_listen(): the HTTP worker's
	 * only (the admin worker leaves them 0). */
	struct evhttp_bound_socket *bound;
	int			 max_conns;	/* at most open; 0: no cap */
	int			 stopping;	/* http_guard_stop() was called */
	int			 paused;	/* HTTP_PAUSED_* bits */
	struct event		*resume_ev;	/* accepting again after EMFILE */
	struct log_limit	 fd_limit;	/* "cannot accept" */
	struct log_limit	 cap_limit;	/* "max_connections reached" */
	/* The guard's. */
	struct http_frame_limits limits;	/* every connection's */
	struct evbuffer		*cut_buf;	/* http_conn_cut()'s */
	TAILQ_HEAD(, http_conn)	 conns;		/* that sent a byte */
	TAILQ_HEAD(, http_conn)	 fresh;		/* accepted this loop pass */
	struct event		*adopt_ev;	/* hooks the fresh ones' close */
	int			 nconns;	/* open, from accept to close */
};

/* Why accepting is paused (http_guard.paused). */
#define HTTP_PAUSED_FDS		0x1	/* descriptors ran out: retry later */
#define HTTP_PAUSED_CAP		0x2	/* max_conns open: until one closes */

/* Guard and count every connection g->http accepts from now on
 * (evhttp_set_bevcb).  -1 if out of memory. */
int		 http_guard_attach(struct http_guard *);
/*
 * Gate g->bound's listener: pause accepting when descriptors run out
 * (EMFILE, ENFILE: one rate-limited line, retried every
 * HTTP_ACCEPT_RETRY_MS and at every close) or while g->max_conns
 * connections are open (until one closes), instead of libevent's warning
 * on every failed accept.  One gated guard per process.  -1 if out of
 * memory.
 */
int		 http_guard_listen(struct http_guard *);
/* Stopping: accept nothing more (the other workers go on). */
void		 http_guard_stop(struct http_guard *);
/* After evhttp_free(): free what is left of the guard. */
void		 http_guard_free(struct http_guard *);
/* A handler took req / answered it: the guard's count of requests in our
 * hands on its connection.  Every request taken must be ended exactly
 * once, whatever the answer, or a refusal pipelined after it waits. */
void		 http_guard_request_start(struct http_guard *,
		    struct evhttp_request *);
void		 http_guard_request_end(struct http_guard *,
		    struct evhttp_request *);

/* ---- between the guard's files (http_guard.c, http_guard_accept.c) ---- */

/* Stop accepting while why (HTTP_PAUSED_* bits) holds: the listener is
 * disabled by the first reason only (without g->bound, only the bits
 * are set). */
void		 http_guard_accept_pause(struct http_guard *, int why);
/* A connection closed, or a pause's timer ran out: accept again unless
 * stopping or still at g->max_conns.  No-op when not paused or without
 * g->bound. */
void		 http_guard_accept_resume(struct http_guard *);

#endif /* HTTP_GUARD_H */
