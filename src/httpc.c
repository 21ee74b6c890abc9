/*
 * httpc.c - HTTP client: libcurl's multi interface driven by a libevent
 * loop, in the pattern of curl's docs/examples/hiperfifo.c
 * (CURLMOPT_SOCKETFUNCTION + CURLMOPT_TIMERFUNCTION, one event per socket,
 * one evtimer, curl_multi_socket_action).
 *
 * One easy handle per request in flight; connections live in the multi
 * handle's cache, so keep-alive connections are reused across requests.
 * A finished request's handle is reset and kept for the next one (up to
 * HTTPC_IDLE_EASY): curl_easy_init() and curl_easy_cleanup() allocate and
 * free several kilobytes each, once per webhook event otherwise.  Callbacks
 * run only from event callbacks, never from inside httpc_post().
 *
 * curl_global_init() runs once per process, on the first httpc_new(); it
 * is never undone (curl_global_cleanup at exit buys nothing).  A child
 * after fork() makes its own httpc: handles are never shared.
 */
#include "config.h"

#include <sys/queue.h>

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <event2/event.h>

#include "outboxd.h"
#include "broker.h"

#define HTTPC_MAX_BODY		(64 * 1024 * 1024)	/* bytes */
#define HTTPC_CONNECT_TIMEOUT	10000L			/* ms */
#define HTTPC_KEEPIDLE		60L			/* s */
#define HTTPC_KEEPINTVL		30L			/* s */
#define HTTPC_IDLE_EASY		32			/* handles kept */

struct httpc_sock {
	LIST_ENTRY(httpc_sock)	 entry;
	struct httpc		*hc;
	curl_socket_t		 fd;
	struct event		*ev;
};

struct httpc_req {
	LIST_ENTRY(httpc_req)	 entry;
	struct httpc		*hc;
	CURL			*easy;		/* NULL: httpc_later() */
	struct event		*later;		/* httpc_later()'s timer */
	struct curl_slist	*headers;
	char			*body;	/* POSTFIELDS: kept to the end */
	char			*buf;		/* response body */
	size_t			 len;
	size_t			 size;
	long			 retry_after;	/* s, -1 if absent */
	httpc_cb		*cb;
	void			*arg;
	void			(*arg_free)(void *);
	char			 errbuf[CURL_ERROR_SIZE];
};

struct httpc {
	struct event_base	*base;
	CURLM			*multi;
	struct event		*timer;
	LIST_HEAD(, httpc_req)	 reqs;
	LIST_HEAD(, httpc_sock)	 socks;
	int			 busy;		/* inside a user callback */
	int			 dying;		/* httpc_free() while busy */
	CURL			*idle[HTTPC_IDLE_EASY];	/* reset, unused */
	int			 nidle;
};

static int	httpc_global_done;

static void	httpc_destroy(struct httpc *);

static void
httpc_req_free(struct httpc_req *req)
{
	struct httpc	*hc = req->hc;

	if (req->easy != NULL) {
		if (!hc->dying && hc->nidle < HTTPC_IDLE_EASY) {
			curl_easy_reset(req->easy);
			hc->idle[hc->nidle++] = req->easy;
		} else
			curl_easy_cleanup(req->easy);
	}
	if (req->later != NULL)
		event_free(req->later);
	curl_slist_free_all(req->headers);
	free(req->body);
	free(req->buf);
	free(req);
}

/* Deliver every finished transfer to its callback. */
static void
httpc_check(struct httpc *hc)
{
	struct httpc_response	 resp;
	struct httpc_req	*req;
	CURLMsg			*m;
	CURL			*easy;
	CURLcode		 code;
	char			*priv;
	long			 status;
	int			 left;

	while (!hc->dying &&
	    (m = curl_multi_info_read(hc->multi, &left)) != NULL) {
		if (m->msg != CURLMSG_DONE)
			continue;
		/* m is invalid once the handle is removed. */
		easy = m->easy_handle;
		code = m->data.result;
		priv = NULL;
		curl_easy_getinfo(easy, CURLINFO_PRIVATE, &priv);
		req = (struct httpc_req *)priv;
		status = 0;
		curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
		curl_multi_remove_handle(hc->multi, easy);
		LIST_REMOVE(req, entry);

		memset(&resp, 0, sizeof resp);
		resp.curl_code = code;
		if (code != CURLE_OK) {
			/* A cut-off response is no response. */
			resp.curl_error = req->errbuf[0] != '\0' ?
			    req->errbuf : curl_easy_strerror(code);
			status = 0;
		}
		resp.status = status;
		resp.body = req->buf != NULL ? req->buf : "";
		resp.body_len = req->len;
		resp.retry_after = status != 0 ? req->retry_after : -1;

		hc->busy++;
		req->cb(&resp, req->arg);
		hc->busy--;
		httpc_req_free(req);
	}
	if (hc->dying && hc->busy == 0)
		httpc_destroy(hc);
}

static void
httpc_event_cb(evutil_socket_t fd, short what, void *arg)
{
	struct httpc	*hc = arg;
	int		 action = 0, running;

	if (what & EV_READ)
		action |= CURL_CSELECT_IN;
	if (what & EV_WRITE)
		action |= CURL_CSELECT_OUT;
	curl_multi_socket_action(hc->multi, fd, action, &running);
	httpc_check(hc);
}

static void
httpc_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct httpc	*hc = arg;
	int		 running;

	(void)fd;
	(void)what;
	curl_multi_socket_action(hc->multi, CURL_SOCKET_TIMEOUT, 0, &running);
	httpc_check(hc);
}

/* CURLMOPT_TIMERFUNCTION: (re)arm the single timer; timeout in ms. */
static int
httpc_timer_fn(CURLM *multi, long timeout, void *arg)
{
	struct httpc	*hc = arg;
	struct timeval	 tv;

	(void)multi;
	if (timeout < 0) {
		evtimer_del(hc->timer);
		return (0);
	}
	/* 0 means "now": still from the loop, never from our caller. */
	tv = clock_tv(timeout);
	if (evtimer_add(hc->timer, &tv) == -1) {
		log_warnx("httpc: cannot arm timer");
		return (-1);
	}
	return (0);
}

static void
httpc_sock_free(struct httpc_sock *hs)
{
	LIST_REMOVE(hs, entry);
	if (hs->ev != NULL)
		event_free(hs->ev);
	free(hs);
}

/* CURLMOPT_SOCKETFUNCTION: watch s for what curl asks. */
static int
httpc_socket_fn(CURL *easy, curl_socket_t s, int what, void *arg,
    void *sockp)
{
	struct httpc		*hc = arg;
	struct httpc_sock	*hs = sockp;
	short			 kind;

	(void)easy;
	if (what == CURL_POLL_REMOVE) {
		if (hs != NULL) {
			curl_multi_assign(hc->multi, s, NULL);
			httpc_sock_free(hs);
		}
		return (0);
	}
	if (hs == NULL) {
		if ((hs = calloc(1, sizeof *hs)) == NULL) {
			log_warn("httpc: socket state");
			return (-1);
		}
		hs->hc = hc;
		hs->fd = s;
		LIST_INSERT_HEAD(&hc->socks, hs, entry);
		curl_multi_assign(hc->multi, s, hs);
	} else if (hs->ev != NULL) {
		event_free(hs->ev);
		hs->ev = NULL;
	}
	kind = EV_PERSIST;
	if (what & CURL_POLL_IN)
		kind |= EV_READ;
	if (what & CURL_POLL_OUT)
		kind |= EV_WRITE;
	if ((hs->ev = event_new(hc->base, s, kind, httpc_event_cb, hc)) ==
	    NULL || event_add(hs->ev, NULL) == -1) {
		log_warnx("httpc: cannot watch socket %d", (int)s);
		return (-1);
	}
	return (0);
}

static size_t
httpc_write_fn(char *data, size_t size, size_t nmemb, void *arg)
{
	struct httpc_req	*req = arg;
	size_t			 n = size * nmemb, want;
	char			*p;

	if (n > HTTPC_MAX_BODY - req->len)
		return (0);		/* CURLE_WRITE_ERROR */
	if (req->len + n + 1 > req->size) {
		want = req->size != 0 ? req->size : 4096;
		while (want < req->len + n + 1)
			want *= 2;
		if ((p = realloc(req->buf, want)) == NULL)
			return (0);
		req->buf = p;
		req->size = want;
	}
	memcpy(req->buf + req->len, data, n);
	req->len += n;
	req->buf[req->len] = '\0';
	return (n);
}

/* Only the delay-seconds form of Retry-After (RFC 9110 10.2.3); the
 * HTTP-date form is ignored. */
static size_t
httpc_header_fn(char *data, size_t size, size_t nmemb, void *arg)
{
	static const char	 name[] = "retry-after:";
	struct httpc_req	*req = arg;
	size_t			 n = size * nmemb, i;
	long			 v;

	/* A new status line (after 100 Continue, say) starts afresh. */
	if (n >= 5 && strncmp(data, "HTTP/", 5) == 0) {
		req->retry_after = -1;
		return (n);
	}
	if (n < sizeof name - 1 || strncasecmp(data, name, sizeof name - 1))
		return (n);
	i = sizeof name - 1;
	while (i < n && (data[i] == ' ' || data[i] == '\t'))
		i++;
	if (i == n || !isdigit((unsigned char)data[i]))
		return (n);
	for (v = 0; i < n && isdigit((unsigned char)data[i]); i++) {
		if (v < 86400)
			v = v * 10 + (data[i] - '0');
	}
	req->retry_after = v > 86400 ? 86400 : v;
	return (n);
}

struct httpc *
httpc_new(struct event_base *base)
{
	struct httpc	*hc;
	CURLcode	 rc;

	if (!httpc_global_done) {
		if ((rc = curl_global_init(CURL_GLOBAL_DEFAULT)) != CURLE_OK) {
			log_warnx("curl_global_init: %s",
			    curl_easy_strerror(rc));
			return (NULL);
		}
		httpc_global_done = 1;
	}
	if ((hc = calloc(1, sizeof *hc)) == NULL) {
		log_warn("httpc_new");
		return (NULL);
	}
	hc->base = base;
	LIST_INIT(&hc->reqs);
	LIST_INIT(&hc->socks);
	if ((hc->multi = curl_multi_init()) == NULL ||
	    (hc->timer = evtimer_new(base, httpc_timer_cb, hc)) == NULL) {
		log_warnx("httpc_new: cannot create multi handle or timer");
		httpc_destroy(hc);
		return (NULL);
	}
	curl_multi_setopt(hc->multi, CURLMOPT_SOCKETFUNCTION, httpc_socket_fn);
	curl_multi_setopt(hc->multi, CURLMOPT_SOCKETDATA, hc);
	curl_multi_setopt(hc->multi, CURLMOPT_TIMERFUNCTION, httpc_timer_fn);
	curl_multi_setopt(hc->multi, CURLMOPT_TIMERDATA, hc);
	/* Extra requests to a host wait for a free connection. */
	curl_multi_setopt(hc->multi, CURLMOPT_MAX_HOST_CONNECTIONS,
	    (long)HTTPC_MAX_HOST_CONNS);
	curl_multi_setopt(hc->multi, CURLMOPT_MAXCONNECTS,
	    (long)HTTPC_MAX_HOST_CONNS * 2);
	return (hc);
}

/* Free everything; no callback runs. */
static void
httpc_destroy(struct httpc *hc)
{
	struct httpc_req	*req;
	struct httpc_sock	*hs;

	while ((req = LIST_FIRST(&hc->reqs)) != NULL) {
		LIST_REMOVE(req, entry);
		if (req->easy != NULL)
			curl_multi_remove_handle(hc->multi, req->easy);
		if (req->arg_free != NULL)
			req->arg_free(req->arg);
		httpc_req_free(req);
	}
	while (hc->nidle > 0)
		curl_easy_cleanup(hc->idle[--hc->nidle]);
	if (hc->multi != NULL)
		curl_multi_cleanup(hc->multi);
	/* Sockets curl did not tell us to forget before cleanup. */
	while ((hs = LIST_FIRST(&hc->socks)) != NULL)
		httpc_sock_free(hs);
	if (hc->timer != NULL)
		event_free(hc->timer);
	free(hc);
}

void
httpc_free(struct httpc *hc)
{
	if (hc == NULL)
		return;
	if (hc->busy) {
		/* Called from a callback: httpc_check frees on return. */
		hc->dying = 1;
		return;
	}
	httpc_destroy(hc);
}

struct event_base *
httpc_base(const struct httpc *hc)
{
	return hc->base;
}

int
httpc_post(struct httpc *hc, const struct httpc_request *r, httpc_cb *cb,
    void *arg)
{
	struct httpc_req	*req;
	CURL			*e;
	CURLMcode		 mrc;

	if (hc->dying) {
		curl_slist_free_all(r->headers);
		return (-1);
	}
	if ((req = calloc(1, sizeof *req)) == NULL) {
		log_warn("httpc_post");
		curl_slist_free_all(r->headers);
		return (-1);
	}
	req->hc = hc;
	req->headers = r->headers;
	req->retry_after = -1;
	req->cb = cb;
	req->arg = arg;
	req->arg_free = r->arg_free;
	/* Our own copy: POSTFIELDS is not copied by curl, and SigV4 hashes
	 * exactly these bytes. */
	if ((req->body = malloc(r->body_len + 1)) == NULL) {
		log_warn("httpc_post");
		httpc_req_free(req);
		return (-1);
	}
	if (r->body_len != 0)
		memcpy(req->body, r->body, r->body_len);
	req->body[r->body_len] = '\0';

	if (hc->nidle > 0)
		e = req->easy = hc->idle[--hc->nidle];
	else if ((e = req->easy = curl_easy_init()) == NULL) {
		log_warnx("httpc_post: curl_easy_init failed");
		httpc_req_free(req);
		return (-1);
	}
	if (curl_easy_setopt(e, CURLOPT_URL, r->url) != CURLE_OK) {
		log_warnx("httpc_post: bad URL");
		httpc_req_free(req);
		return (-1);
	}
#if LIBCURL_VERSION_NUM >= 0x075500
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
#endif
	curl_easy_setopt(e, CURLOPT_PRIVATE, (char *)req);
	curl_easy_setopt(e, CURLOPT_ERRORBUFFER, req->errbuf);
	/* No SIGALRM for DNS timeouts: signals belong to the loop. */
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(e, CURLOPT_TCP_KEEPIDLE, HTTPC_KEEPIDLE);
	curl_easy_setopt(e, CURLOPT_TCP_KEEPINTVL, HTTPC_KEEPINTVL);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, HTTPC_CONNECT_TIMEOUT);
	if (r->timeout > 0)
		curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, r->timeout);
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, req->headers);
	if (r->method != NULL && strcmp(r->method, "GET") == 0)
		curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
	else {
		/* PUT with a body from POSTFIELDS, as curl -X PUT -d. */
		curl_easy_setopt(e, CURLOPT_POST, 1L);
		curl_easy_setopt(e, CURLOPT_POSTFIELDS, req->body);
		curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE,
		    (curl_off_t)r->body_len);
		if (r->method != NULL)
			curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, r->method);
	}
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, httpc_write_fn);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, req);
	curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, httpc_header_fn);
	curl_easy_setopt(e, CURLOPT_HEADERDATA, req);
	if (r->aws_sigv4 != NULL) {
		if (curl_easy_setopt(e, CURLOPT_AWS_SIGV4, r->aws_sigv4) !=
		    CURLE_OK) {
			log_warnx("httpc_post: libcurl lacks AWS SigV4");
			httpc_req_free(req);
			return (-1);
		}
		curl_easy_setopt(e, CURLOPT_USERNAME,
		    r->username != NULL ? r->username : "");
		curl_easy_setopt(e, CURLOPT_PASSWORD,
		    r->password != NULL ? r->password : "");
	}

	LIST_INSERT_HEAD(&hc->reqs, req, entry);
	/* Arms the timer at 0 ms: the transfer would start from the loop. */
	if ((mrc = curl_multi_add_handle(hc->multi, e)) != CURLM_OK) {
		log_warnx("httpc_post: %s", curl_multi_strerror(mrc));
		LIST_REMOVE(req, entry);
		httpc_req_free(req);
		return (-1);
	}
	/*
	 * Start it now instead: on a reused connection the request leaves
	 * before the caller's next work (an HTTP worker's 201), not a turn
	 * of the loop later.  Not from inside a callback of ours, where
	 * libcurl refuses a nested call.  The timer still runs this turn,
	 * so a transfer that ended here is reported from the loop; running
	 * it early is allowed (libcurl then arms it again even for the
	 * same deadline: multi.c clears timer_lastcall on a timeout run).
	 */
	if (!hc->busy) {
		int	running;

		curl_multi_socket_action(hc->multi, CURL_SOCKET_TIMEOUT, 0,
		    &running);
		event_active(hc->timer, EV_TIMEOUT, 1);
	}
	return (0);
}

int
httpc_header(struct curl_slist **list, const char *fmt, ...)
{
	struct curl_slist	*l;
	va_list			 ap;
	char			*s;
	int			 r;

	va_start(ap, fmt);
	r = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (r == -1) {
		curl_slist_free_all(*list);
		*list = NULL;
		return (-1);
	}
	l = curl_slist_append(*list, s);
	free(s);
	if (l == NULL) {
		curl_slist_free_all(*list);
		*list = NULL;
		return (-1);
	}
	*list = l;
	return (0);
}

/* httpc_later()'s timer: the answer, from the loop. */
static void
httpc_later_cb(evutil_socket_t fd, short what, void *arg)
{
	struct httpc_req	*req = arg;
	struct httpc		*hc = req->hc;
	struct httpc_response	 resp;

	(void)fd;
	(void)what;
	LIST_REMOVE(req, entry);
	memset(&resp, 0, sizeof resp);
	resp.body = "";
	resp.retry_after = -1;
	hc->busy++;
	req->cb(&resp, req->arg);
	hc->busy--;
	httpc_req_free(req);
	if (hc->dying && hc->busy == 0)
		httpc_destroy(hc);
}

int
httpc_later(struct httpc *hc, httpc_cb *cb, void *arg, void (*arg_free)(void *))
{
	struct httpc_req	*req;
	struct timeval		 now = { 0, 0 };

	if (hc->dying || (req = calloc(1, sizeof *req)) == NULL)
		return (-1);
	req->hc = hc;
	req->cb = cb;
	req->arg = arg;
	req->arg_free = arg_free;
	req->retry_after = -1;
	/* On the list like a transfer, so that httpc_free() aborts it. */
	if ((req->later = evtimer_new(hc->base, httpc_later_cb, req)) == NULL ||
	    evtimer_add(req->later, &now) == -1) {
		httpc_req_free(req);
		return (-1);
	}
	LIST_INSERT_HEAD(&hc->reqs, req, entry);
	return (0);
}
