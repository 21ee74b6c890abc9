/*
 * http_guard.c - the per-connection guard of an evhttp listener, the
 * HTTP worker's and the admin worker's (each owns a struct http_guard,
 * http_guard.h): strict framing in front of evhttp, JSON refusals,
 * cutting a request that trickles in too slowly, lingering after a
 * refusal.
 *
 * evhttp 2.1 frames requests leniently (http_frame.c says how) and
 * answers its own errors in HTML, with no hook to do otherwise.  So each
 * connection's bufferevent is made here (evhttp_set_bevcb) with a
 * callback on its input buffer, which libevent runs as bytes are read,
 * before the bufferevent's read callback gives them to evhttp.  It feeds
 * every byte to the connection's http_frame: chunk extensions, which
 * evhttp cannot parse, are cut out of their lines; on a refusal every
 * byte from the refused one on is cut, and the connection is taken over
 * and answered {"error", "message"} with the framer's status (400, 413,
 * 414, 431, 501, 505), at once if evhttp holds nothing of the client's,
 * else once the answers owed before it are written.  evhttp's limits
 * are set above the framer's, so evhttp sees only requests the framer
 * found whole and within them.  A page evhttp still sends (Expect other
 * than 100-continue, empty lines before a request) is caught on the
 * output buffer and replaced by the same status in JSON.
 *
 * It also counts the connections from accept to close, for the gate
 * that http_guard_accept.c puts on the HTTP worker's listener
 * (http_guard_listen(): the connection cap and the pause when
 * descriptors run out).
 */
#include "config.h"

#include <sys/types.h>
#include <sys/queue.h>
#include <sys/socket.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>

#include "outboxd.h"
#include "http_guard.h"
#include "http_frame.h"
#include "metrics_api.h"

#define HTTP_REQUEST_TIMEOUT_S	30	/* one request, first byte to last */
#define HTTP_LINGER_MS		2000	/* reading after a refusal */

/* One accepted connection as the guard sees it. */
struct http_conn {
	struct http_guard		*g;
	struct bufferevent		*bev;
	struct evhttp_connection	*evcon;
	struct evbuffer_cb_entry	*first_cb;	/* till the first byte */
	struct evbuffer_cb_entry	*in_cb;
	struct evbuffer_cb_entry	*out_cb;
	int				 listed;	/* on g->conns */
	size_t				 pending;	/* bytes not answered */
	time_t				 started;	/* first of them, s */
	int				 refusing;
	int				 eof;
	int64_t				 linger_until;	/* monotonic us */
	struct event			*fix_ev;	/* swaps error pages */
	size_t				 fix_from;	/* where it starts */
	int				 fixing;
	int				 busy;		/* requests in our hands */
	struct http_frame		 frame;		/* the client's bytes */
	uint64_t			 fed;		/* stream offset after the
							   last byte framed */
	uint64_t			 req_at;	/* where the request being
							   framed started */
	const struct http_frame_error	*stop;		/* refuse once idle */
	struct event			*over_ev;	/* ... from the loop */
	int				 editing;	/* we cut the input */
	TAILQ_ENTRY(http_conn)		 entry;
};

/* Monotonic seconds, for idle timeouts. */
static time_t
http_now(void)
{
	return (time_t)(clock_mono_us() / 1000000);
}

/*
 * The guarded connection a request came on, or NULL (the client left).
 * A linear search: a worker holds few connections that send requests.
 */
static struct http_conn *
http_conn_of(struct http_guard *g, struct evhttp_request *req)
{
	struct evhttp_connection	*evcon;
	struct http_conn		*c;

	if ((evcon = evhttp_request_get_connection(req)) == NULL)
		return NULL;
	TAILQ_FOREACH(c, &g->conns, entry)
		if (c->evcon == evcon)
			return c;
	return NULL;
}

/* evhttp is done with the connection (or we are): forget it; one more
 * may be accepted. */
static void
http_conn_closed(struct evhttp_connection *evcon, void *arg)
{
	struct http_conn	*c = arg;
	struct http_guard	*g = c->g;

	(void)evcon;
	if (c->listed) {
		if (c->fix_ev != NULL)
			event_free(c->fix_ev);
		if (c->over_ev != NULL)
			event_free(c->over_ev);
		evbuffer_remove_cb_entry(bufferevent_get_input(c->bev),
		    c->in_cb);
		evbuffer_remove_cb_entry(bufferevent_get_output(c->bev),
		    c->out_cb);
		TAILQ_REMOVE(&g->conns, c, entry);
	} else
		evbuffer_remove_cb_entry(bufferevent_get_input(c->bev),
		    c->first_cb);
	free(c);
	g->nconns--;
	/* A descriptor is free now: no need to wait for the timer. */
	http_guard_accept_resume(g);
}

/* Hand the connection back to evhttp to be freed; c goes with it. */
static void
http_conn_finish(struct http_conn *c)
{
	evhttp_connection_free(c->evcon);
}

/*
 * The connection a callback of ours on bev is for.  Never the callback's
 * argument: evhttp's deferred read (evhttp_deferred_read_cb, scheduled by
 * evhttp_start_read_() when an answer is written and pipelined bytes
 * wait) calls whatever read callback the bufferevent has with evhttp's
 * connection as its argument.  Taking a connection over with our
 * callbacks and c as their argument while that read was pending had our
 * read callback take the evhttp_connection for a struct http_conn, which
 * is how taking over mid-pipeline crashed the worker.
 */
static struct http_conn *
http_conn_of_bev(struct bufferevent *bev)
{
	void	*arg;

	bufferevent_getcb(bev, NULL, NULL, NULL, &arg);
	return arg;
}

static void
http_conn_linger_read(struct bufferevent *bev, void *arg)
{
	struct http_conn	*c = http_conn_of_bev(bev);
	struct evbuffer		*in = bufferevent_get_input(bev);

	(void)arg;
	evbuffer_drain(in, evbuffer_get_length(in));
	if (clock_mono_us() >= c->linger_until)
		http_conn_finish(c);
}

/* The refusal is written: say so with a FIN, keep reading till the
 * client closes. */
static void
http_conn_linger_write(struct bufferevent *bev, void *arg)
{
	struct http_conn	*c = http_conn_of_bev(bev);

	(void)arg;
	if (c->eof) {
		http_conn_finish(c);
		return;
	}
	(void)shutdown(bufferevent_getfd(bev), SHUT_WR);
}

static void
http_conn_linger_event(struct bufferevent *bev, short what, void *arg)
{
	struct http_conn	*c = http_conn_of_bev(bev);

	(void)arg;
	if ((what & BEV_EVENT_EOF) && (what & BEV_EVENT_READING) &&
	    evbuffer_get_length(bufferevent_get_output(bev)) > 0) {
		c->eof = 1;	/* still writing the answer */
		return;
	}
	http_conn_finish(c);
}

/*
 * Take the connection from evhttp and answer e ourselves, then close it.
 * Only when nothing of evhttp's is under way (http_conn_idle()): no
 * request in a handler's hands, no answer being written, no whole
 * request left in the input; the one evhttp may be reading is cut off.
 */
static void
http_conn_refuse(struct http_conn *c, const struct http_frame_error *e)
{
	struct evbuffer	*in = bufferevent_get_input(c->bev);
	struct evbuffer	*out = bufferevent_get_output(c->bev);
	struct timeval	 tv = clock_tv(HTTP_LINGER_MS);
	char		*body;

	log_debug("refused a request: %d %s", e->status, e->code);
	c->refusing = 1;
	bufferevent_setcb(c->bev, http_conn_linger_read,
	    http_conn_linger_write, http_conn_linger_event, c);
	c->editing = 1;
	evbuffer_drain(in, evbuffer_get_length(in));
	c->editing = 0;
	body = order_error_json(e->code, e->message);
	evbuffer_add_printf(out, "HTTP/1.1 %d %s\r\n"
	    "Content-Type: application/json\r\n"
	    "Content-Length: %zu\r\n"
	    "Connection: close\r\n\r\n%s", e->status, e->reason,
	    body != NULL ? strlen(body) : 0, body != NULL ? body : "");
	free(body);
	c->linger_until = clock_mono_us() + HTTP_LINGER_MS * 1000;
	bufferevent_set_timeouts(c->bev, &tv, &tv);
	bufferevent_enable(c->bev, EV_READ | EV_WRITE);
}

/*
 * May the connection be taken over now?  Not while a handler holds a
 * request (busy), an answer is still being written (evhttp calls its
 * on_complete callback only once it is), or a whole request that evhttp
 * has not parsed yet waits in the input (its bytes start before
 * c->req_at): that one is evhttp's to read and ours to answer first.
 */
static int
http_conn_idle(const struct http_conn *c)
{
	size_t	 held = evbuffer_get_length(bufferevent_get_input(c->bev));

	return c->busy == 0 && evbuffer_get_length(
	    bufferevent_get_output(c->bev)) == 0 && c->fed - held >= c->req_at;
}

/*
 * Refuse the connection with e: at once if it is idle, else once it is
 * (http_conn_over(), after each answer is written).  No byte from here on
 * reaches evhttp (http_conn_frame()).
 */
static void
http_conn_stop(struct http_conn *c, const struct http_frame_error *e)
{
	if (c->refusing || c->stop != NULL)
		return;
	c->stop = e;
	if (http_conn_idle(c))
		http_conn_refuse(c, e);
}

/* From the loop, after an answer was written: outside evhttp's calls, and
 * after evhttp_send_done() has taken the next request or closed. */
static void
http_conn_over(evutil_socket_t fd, short what, void *arg)
{
	struct http_conn	*c = arg;

	(void)fd;
	(void)what;
	if (!c->refusing && c->stop != NULL && http_conn_idle(c))
		http_conn_refuse(c, c->stop);
}

static const struct http_frame_error http_err_timeout = { 408,
	"Request Timeout", "request_timeout",
	"the request took too long to send" };
static const struct http_frame_error http_err_memory = { 503,
	"Service Unavailable", "internal_error",
	"the server is short of memory" };

/* n more bytes of the request being received arrived. */
static void
http_conn_count(struct http_conn *c, size_t n)
{
	time_t			 now = http_now();

	if (c->pending == 0)
		c->started = now;
	c->pending += n;
	if (now - c->started > HTTP_REQUEST_TIMEOUT_S)
		http_conn_stop(c, &http_err_timeout);
}

/* Remove n bytes at offset from of the input (evhttp never sees them).
 * -1 when out of memory. */
static int
http_conn_cut(struct http_conn *c, struct evbuffer *in, size_t from,
    size_t n)
{
	int	 rc = 0;

	c->editing = 1;
	if (from > 0 && evbuffer_remove_buffer(in, c->g->cut_buf, from) !=
	    (int)from)
		rc = -1;
	else if (evbuffer_drain(in, n) == -1 ||
	    evbuffer_prepend_buffer(in, c->g->cut_buf) == -1)
		rc = -1;
	/* never left for the next connection's cut */
	evbuffer_drain(c->g->cut_buf, evbuffer_get_length(c->g->cut_buf));
	c->editing = 0;
	return rc;
}

/*
 * Frame the n bytes just read, at the input's end, before evhttp's read
 * callback sees them (the bufferevent runs it after this buffer's
 * callbacks): cut each chunk extension out of its line, which evhttp
 * 2.1 cannot parse, and on a refusal cut every byte from the refused one
 * on and stop the connection.  Peeks at the buffer's own memory.
 */
static void
http_conn_frame(struct http_conn *c, struct evbuffer *in, size_t n)
{
	struct evbuffer_iovec		 v[8];
	struct evbuffer_ptr		 at;
	enum http_frame_result		 r;
	size_t				 len = evbuffer_get_length(in);
	size_t				 pos = len - n, base, used, dl, ext;
	const char			*d;
	int				 nv, i;

	base = c->fed - pos;		/* stream offset of the input's start */
	if (c->stop != NULL) {
		if (http_conn_cut(c, in, pos, n) == -1)
			goto memory;
		return;
	}
again:
	if (pos >= len)
		goto done;
	if (evbuffer_ptr_set(in, &at, pos, EVBUFFER_PTR_SET) == -1)
		goto memory;
	nv = evbuffer_peek(in, (ev_ssize_t)(len - pos), &at, v, 8);
	for (i = 0; i < nv && i < 8 && pos < len; i++) {
		d = v[i].iov_base;
		dl = v[i].iov_len < len - pos ? v[i].iov_len : len - pos;
		while (dl > 0) {
			r = http_frame_feed(&c->frame, d, dl, &used);
			pos += used;
			d += used;
			dl -= used;
			switch (r) {
			case HTTP_FRAME_END:
				c->req_at = base + pos;
				break;
			case HTTP_FRAME_EXT:
				/* its line is whole in the input: evhttp reads
				 * a chunk size line only once it has ended */
				if ((ext = http_frame_ext(&c->frame)) >= pos ||
				    http_conn_cut(c, in, pos - 1 - ext, ext) == -1)
					goto memory;
				pos -= ext;
				len -= ext;
				goto again;
			case HTTP_FRAME_ERROR:
				c->fed = base + pos;
				if (http_conn_cut(c, in, pos, len - pos) == -1)
					goto memory;
				http_conn_stop(c, http_frame_error(&c->frame));
				return;
			case HTTP_FRAME_MORE:
				break;
			}
		}
	}
	if (pos < len)
		goto again;
done:
	c->fed = base + len;
	return;
memory:
	/* cannot cut: let evhttp see no more of this connection */
	c->editing = 1;
	evbuffer_drain(in, evbuffer_get_length(in));
	c->editing = 0;
	c->fed = base;
	c->req_at = 0;
	c->stop = NULL;
	http_conn_stop(c, &http_err_memory);
}

static void
http_conn_input(struct evbuffer *buf, const struct evbuffer_cb_info *info,
    void *arg)
{
	struct http_conn	*c = arg;

	if (c->editing || c->refusing || info->n_added == 0)
		return;
	/* framed first: http_conn_idle() counts the new bytes as fed */
	http_conn_frame(c, buf, info->n_added);
	if (!c->refusing)
		http_conn_count(c, info->n_added);
}

/*
 * Let us read and rewrite out's start: bufferevent_sock freezes it after
 * every write (bufferevent_writecb), and evbuffer_copyout_from(),
 * _drain() and _remove_buffer() then fail on it.  Only bufferevent_setfd()
 * thaws it, at accept, which is why a page on a fresh connection was
 * replaced and the second one on a kept-alive connection went out in
 * HTML.  Returns 1 if it was frozen (give that to http_out_refreeze()).
 */
static int
http_out_thaw(struct evbuffer *out)
{
	char	 ch;

	if (evbuffer_get_length(out) == 0 || evbuffer_copyout(out, &ch, 1) ==
	    1)
		return 0;
	evbuffer_unfreeze(out, 1);
	return 1;
}

static void
http_out_refreeze(struct evbuffer *out, int frozen)
{
	if (frozen)
		evbuffer_freeze(out, 1);
}

/* Code and message for a status evhttp answers on its own. */
static const struct http_frame_error http_page_errors[] = {
	{ 400, NULL, "bad_request", "the request is not valid HTTP" },
	{ 413, NULL, "body_too_large", "the request body is too large" },
	{ 417, NULL, "expectation_failed",
	    "only Expect: 100-continue is supported" },
	{ 501, NULL, "method_not_implemented",
	    "this HTTP method is not implemented" }
};

/*
 * Runs right after evhttp has queued an error page of its own and before
 * the loop writes a byte of it (the socket is written only when its write
 * event fires): swap the page for {"error", "message"} with the same status
 * line.  evhttp still closes the connection afterwards, as it asked.
 */
static void
http_conn_fix(evutil_socket_t fd, short what, void *arg)
{
	struct http_conn	*c = arg;
	struct evbuffer		*out = bufferevent_get_output(c->bev);
	struct evbuffer_ptr	 at;
	const char		*code, *message;
	char			 line[128], *eol, *body = NULL;
	ev_ssize_t		 n;
	size_t			 i;
	int			 status, frozen;

	(void)fd;
	(void)what;
	if (c->refusing || c->fix_from >= evbuffer_get_length(out) ||
	    evbuffer_ptr_set(out, &at, c->fix_from, EVBUFFER_PTR_SET) == -1)
		return;
	frozen = http_out_thaw(out);
	c->fixing = 1;
	n = evbuffer_copyout_from(out, &at, line, sizeof(line) - 1);
	line[n < 0 ? 0 : n] = '\0';
	/* "HTTP/1.x NNN Reason\r\n" */
	if ((eol = strstr(line, "\r\n")) == NULL || eol - line < 13)
		goto done;
	*eol = '\0';
	status = atoi(line + 9);
	code = status < 500 ? "bad_request" : "internal_error";
	message = "the request could not be handled";
	for (i = 0; i < sizeof(http_page_errors) / sizeof(http_page_errors[0]);
	    i++)
		if (http_page_errors[i].status == status) {
			code = http_page_errors[i].code;
			message = http_page_errors[i].message;
		}
	/* the answers before the page stay */
	if ((body = order_error_json(code, message)) == NULL ||
	    evbuffer_remove_buffer(out, c->g->cut_buf, c->fix_from) !=
	    (int)c->fix_from)
		goto done;
	evbuffer_drain(out, evbuffer_get_length(out));
	evbuffer_add_printf(out, "%s\r\nContent-Type: application/json\r\n"
	    "Content-Length: %zu\r\nConnection: close\r\n\r\n%s", line,
	    strlen(body), body);
	log_debug("answered an evhttp error page in JSON: %d", status);
done:
	evbuffer_prepend_buffer(out, c->g->cut_buf);
	http_out_refreeze(out, frozen);
	c->fixing = 0;
	free(body);
}

/* An answer is being written, so the request before it is complete: what
 * the input holds now is the start of the next one. */
static void
http_conn_output(struct evbuffer *buf, const struct evbuffer_cb_info *info,
    void *arg)
{
	struct http_conn	*c = arg;
	struct evbuffer_ptr	 at;
	char			 head[13];
	ev_ssize_t		 n;
	int			 frozen;

	if (c->refusing || c->fixing)
		return;
	/* an answer is written: the refusal may be next */
	if (c->stop != NULL && info->n_deleted > 0 &&
	    evbuffer_get_length(buf) == 0)
		event_active(c->over_ev, EV_TIMEOUT, 1);
	if (info->n_added == 0)
		return;
	c->pending = evbuffer_get_length(bufferevent_get_input(c->bev));
	if (c->pending > 0)
		c->started = http_now();
	/* Our answers go out inside http_reply(); anything else starting
	 * with a status line is evhttp answering on its own: 100 Continue,
	 * or an HTML error page to replace once it is complete. */
	if (c->g->replying || c->fix_ev == NULL ||
	    event_pending(c->fix_ev, EV_TIMEOUT, NULL) ||
	    evbuffer_ptr_set(buf, &at, info->orig_size, EVBUFFER_PTR_SET) ==
	    -1)
		return;
	frozen = http_out_thaw(buf);
	n = evbuffer_copyout_from(buf, &at, head, sizeof(head) - 1);
	http_out_refreeze(buf, frozen);
	if (n != sizeof(head) - 1)
		return;
	head[sizeof(head) - 1] = '\0';
	if (strncmp(head, "HTTP/1.", 7) != 0 || head[9] < '4')
		return;
	c->fix_from = info->orig_size;
	event_active(c->fix_ev, EV_TIMEOUT, 1);
}

/*
 * First bytes on a connection: guard it from now on.  Connections that
 * never send a byte cost only their struct http_conn.
 */
static void
http_conn_first(struct evbuffer *buf, const struct evbuffer_cb_info *info,
    void *arg)
{
	struct http_conn	*c = arg;

	if (info->n_added == 0 || c->evcon == NULL || c->listed)
		return;
	if (c->fix_ev == NULL &&
	    (c->fix_ev = event_new(c->g->base, -1, 0, http_conn_fix, c)) ==
	    NULL)
		return;		/* try again with the next bytes */
	if (c->over_ev == NULL &&
	    (c->over_ev = event_new(c->g->base, -1, 0, http_conn_over, c)) ==
	    NULL)
		return;
	if (c->in_cb == NULL &&
	    (c->in_cb = evbuffer_add_cb(buf, http_conn_input, c)) == NULL)
		return;
	if (c->out_cb == NULL && (c->out_cb = evbuffer_add_cb(
	    bufferevent_get_output(c->bev), http_conn_output, c)) == NULL)
		return;
	evbuffer_remove_cb_entry(buf, c->first_cb);
	c->first_cb = NULL;
	c->listed = 1;
	TAILQ_INSERT_TAIL(&c->g->conns, c, entry);
	http_conn_input(buf, info, c);
}

/*
 * The connections accepted in the loop pass that just ran: evhttp has
 * made each one's connection by now and set its callbacks on the
 * bufferevent with the connection as their argument (libevent 2.1 http.c,
 * evhttp_get_request, evhttp_start_read_), which gives the connection
 * whose close callback counts the close.  Nothing of theirs can have run
 * in between (their sockets are read from the next poll on); one that
 * evhttp freed at once (no memory) has its callbacks cleared, and our
 * reference kept its bufferevent's memory.
 */
static void
http_conn_adopt(evutil_socket_t fd, short what, void *arg)
{
	struct http_guard	*g = arg;
	struct http_conn	*c;
	bufferevent_data_cb	 rcb, wcb;
	bufferevent_event_cb	 ecb;
	void			*cbarg;

	(void)fd;
	(void)what;
	while ((c = TAILQ_FIRST(&g->fresh)) != NULL) {
		TAILQ_REMOVE(&g->fresh, c, entry);
		bufferevent_getcb(c->bev, &rcb, &wcb, &ecb, &cbarg);
		if (cbarg == NULL ||
		    evhttp_connection_get_bufferevent(cbarg) != c->bev) {
			bufferevent_decref(c->bev);
			free(c);
			g->nconns--;
			http_guard_accept_resume(g);
			continue;
		}
		c->evcon = cbarg;
		evhttp_connection_set_closecb(c->evcon, http_conn_closed, c);
		bufferevent_decref(c->bev);
	}
}

/* evhttp_set_bevcb: the bufferevent of each accepted connection, counted
 * from here; at the cap, the listener stops before the next accept (it
 * checks after every connection). */
static struct bufferevent *
http_conn_new(struct event_base *base, void *arg)
{
	struct http_guard	*g = arg;
	struct bufferevent	*bev;
	struct http_conn	*c;

	if ((bev = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE)) ==
	    NULL)
		return NULL;
	if ((c = calloc(1, sizeof(*c))) == NULL ||
	    (c->first_cb = evbuffer_add_cb(bufferevent_get_input(bev),
	    http_conn_first, c)) == NULL) {
		free(c);
		bufferevent_free(bev);
		return NULL;	/* evhttp makes one, neither guarded nor
				   counted */
	}
	c->g = g;
	c->bev = bev;
	http_frame_init(&c->frame, &g->limits);
	bufferevent_incref(bev);	/* till http_conn_adopt() */
	TAILQ_INSERT_TAIL(&g->fresh, c, entry);
	event_active(g->adopt_ev, EV_TIMEOUT, 1);
	if (++g->nconns >= g->max_conns && g->max_conns > 0 &&
	    !g->stopping) {
		if (!(g->paused & HTTP_PAUSED_CAP)) {
			metrics_accept_paused(METRICS_PAUSE_MAX_CONNECTIONS);
			log_limited(&g->cap_limit, LOG_LEVEL_WARN, "%d client "
			    "connections open (http.max_connections): not "
			    "accepting more until one closes", g->nconns);
		}
		http_guard_accept_pause(g, HTTP_PAUSED_CAP);
	}
	return bev;
}

int
http_guard_attach(struct http_guard *g)
{
	TAILQ_INIT(&g->conns);
	TAILQ_INIT(&g->fresh);
	g->limits.max_line = HTTP_LINE_MAX;
	g->limits.max_head = HTTP_HEAD_MAX;
	g->limits.max_body = g->max_body;
	if ((g->cut_buf = evbuffer_new()) == NULL ||
	    (g->adopt_ev = event_new(g->base, -1, 0, http_conn_adopt, g)) ==
	    NULL)
		return -1;
	evhttp_set_bevcb(g->http, http_conn_new, g);
	return 0;
}

void
http_guard_free(struct http_guard *g)
{
	struct http_conn	*c;

	/* evhttp_free() has freed their connections: drop our references. */
	while ((c = TAILQ_FIRST(&g->fresh)) != NULL) {
		TAILQ_REMOVE(&g->fresh, c, entry);
		bufferevent_decref(c->bev);
		free(c);
	}
	if (g->adopt_ev != NULL)
		event_free(g->adopt_ev);
	if (g->resume_ev != NULL)
		event_free(g->resume_ev);
	if (g->cut_buf != NULL)
		evbuffer_free(g->cut_buf);
	g->cut_buf = NULL;
}

void
http_guard_request_start(struct http_guard *g, struct evhttp_request *req)
{
	struct http_conn	*c;

	if ((c = http_conn_of(g, req)) != NULL) {
		/* What the input holds now is the next request's. */
		c->busy++;
		c->pending = evbuffer_get_length(bufferevent_get_input(
		    c->bev));
		c->started = http_now();
	}
}

void
http_guard_request_end(struct http_guard *g, struct evhttp_request *req)
{
	struct http_conn	*c;

	if ((c = http_conn_of(g, req)) != NULL && c->busy > 0)
		c->busy--;
}
