/*
 * sink_http.c - publish outbox messages as HTTP webhooks signed per the
 * Standard Webhooks specification (https://www.standardwebhooks.com/):
 * one POST per message to webhook.url, all of a call started at once.
 *
 * The body is the payload byte for byte, identical on every retry, and
 * webhook-id is the outbox row id, so a receiver can drop duplicates (the
 * relay delivers at least once).  webhook-timestamp is the time of this
 * attempt, and the signature covers it: a receiver may refuse old
 * timestamps to stop replays.
 *
 * Outcomes: 2xx = sent; 408, 429, 5xx and every transport error (refused
 * connection, DNS, TLS, timeout) = retry, honouring Retry-After; any other
 * answer, 3xx included (redirects are not followed), = rejected for good.
 * A wrong URL or certificate is an operator's problem that retries give
 * time to fix; a 4xx is the receiver refusing this very message.
 *
 * The secret is never logged, nor is the URL (it may carry a token).
 */
#include "config.h"

#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>
#include <openssl/evp.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/params.h>

#include "outboxd.h"
#include "broker.h"

#define WEBHOOK_SECRET_PREFIX	"whsec_"
#define WEBHOOK_KEY_MAX		256	/* bytes of a decoded whsec_ key */
/* "{id}.{timestamp}." of the signed content on the stack: an outbox id */
#define WEBHOOK_HEAD_MAX	128
#define WEBHOOK_ANSWER_MAX	200	/* bytes of an answer kept in errors */
#define WEBHOOK_DEFAULT_TIMEOUT	10000L	/* ms, if the conf gives none */
#define WEBHOOK_B64		"ABCDEFGHIJKLMNOPQRSTUVWXYZ" \
				"abcdefghijklmnopqrstuvwxyz0123456789+/"
/* POSTs per call: a call's slot is held until its slowest answer, so
 * small calls let one slow answer hold back few others. */
#define SINK_HTTP_MAX_BATCH	4
/* What a message counts toward relay.max_message_size besides payload
 * and event type: the same as for SQS (sink_sqs.c), so that the key fails
 * the same rows whichever the sink; a webhook has no limit of its own. */
#define SINK_HTTP_MSG_OVERHEAD	(sizeof("EventType") - 1 + \
				sizeof("String") - 1)

struct sink_http_call;

/* One delivery: the argument of its httpc callback. */
struct sink_http_one {
	struct sink_http_call	*call;
	int			 i;		/* index in msgs */
};

struct sink_http_call {
	struct sink_target	*t;
	struct outbox_msg	*msgs;
	int			 n;
	int			 pending;	/* deliveries not yet done */
	unsigned int		 refused;	/* bit i: msgs[i] refused by
						   the relay, not sent */
	sink_done_cb		*done;
	void			*arg;
	struct sink_http_one	 one[SINK_HTTP_MAX_BATCH];
};

/*
 * Decode the base64 after "whsec_" (padding optional) into key.  Returns
 * the key length, or -1 if the text is not base64, or the key is empty
 * or longer than keysize.
 */
static int
webhook_key_decode(const char *b64in, unsigned char *key, size_t keysize)
{
	char		 b64[WEBHOOK_KEY_MAX * 4 / 3 + 8];
	size_t		 len = strlen(b64in), pad, i;
	int		 n;

	/* EVP_DecodeBlock wants the padding, and would skip white space we
	 * do not accept. */
	if (len == 0 || len + 3 >= sizeof(b64))
		return (-1);
	memcpy(b64, b64in, len);
	while (len > 0 && b64[len - 1] == '=')
		len--;
	if (strspn(b64in, WEBHOOK_B64) < len)
		return (-1);
	while (len % 4 != 0)
		b64[len++] = '=';
	b64[len] = '\0';
	for (pad = 0, i = len; i > 0 && b64[i - 1] == '='; i--)
		pad++;
	if (pad > 2 || len / 4 * 3 - pad > keysize)
		return (-1);
	/* Checks every character; counts the padding as zero bytes. */
	n = EVP_DecodeBlock(key, (const unsigned char *)b64, (int)len);
	OPENSSL_cleanse(b64, sizeof(b64));
	if (n < 0 || (size_t)n < pad || (size_t)n - pad == 0)
		return (-1);
	return (n - (int)pad);
}

/* The HMAC key of a secret into key (WEBHOOK_KEY_MAX bytes): the decoded
 * base64 after "whsec_", else the secret's own bytes (*k points at
 * either).  Its length, or -1. */
static int
webhook_key(const char *secret, unsigned char *key, const unsigned char **k)
{
	const size_t	plen = sizeof(WEBHOOK_SECRET_PREFIX) - 1;
	size_t		len;

	if (strncmp(secret, WEBHOOK_SECRET_PREFIX, plen) == 0) {
		*k = key;
		return webhook_key_decode(secret + plen, key, WEBHOOK_KEY_MAX);
	}
	/* Any length: HMAC hashes a key longer than a block. */
	len = strlen(secret);
	*k = (const unsigned char *)secret;
	return len > INT_MAX ? -1 : (int)len;
}

/*
 * A keyed HMAC-SHA256 per secret, made once and copied for each message:
 * OpenSSL 3's one-shot HMAC() looks the MAC and the digest up by name on
 * every call, which cost more than the hash of a webhook's body.  A few
 * secrets are kept (a relay has one per webhook destination); the copy of
 * a secret that is let go is cleansed.
 */
#define WEBHOOK_MACS	4
static struct webhook_mac {
	char		*secret;
	EVP_MAC_CTX	*ctx;		/* keyed, never updated itself */
} webhook_macs[WEBHOOK_MACS];
static int	 webhook_mac_next;
static EVP_MAC	*webhook_hmac;

static EVP_MAC_CTX *
webhook_mac(const char *secret)
{
	unsigned char		 key[WEBHOOK_KEY_MAX];
	const unsigned char	*k;
	struct webhook_mac	*w;
	OSSL_PARAM		 params[2];
	int			 i, keylen;

	for (i = 0; i < WEBHOOK_MACS; i++)
		if (webhook_macs[i].secret != NULL &&
		    strcmp(webhook_macs[i].secret, secret) == 0)
			return webhook_macs[i].ctx;
	if ((keylen = webhook_key(secret, key, &k)) <= 0)
		return NULL;
	if (webhook_hmac == NULL &&
	    (webhook_hmac = EVP_MAC_fetch(NULL, "HMAC", NULL)) == NULL) {
		OPENSSL_cleanse(key, sizeof(key));
		return NULL;
	}
	w = &webhook_macs[webhook_mac_next];
	webhook_mac_next = (webhook_mac_next + 1) % WEBHOOK_MACS;
	if (w->secret != NULL)
		OPENSSL_clear_free(w->secret, strlen(w->secret));
	EVP_MAC_CTX_free(w->ctx);
	params[0] = OSSL_PARAM_construct_utf8_string("digest", "SHA256", 0);
	params[1] = OSSL_PARAM_construct_end();
	if ((w->ctx = EVP_MAC_CTX_new(webhook_hmac)) == NULL ||
	    EVP_MAC_init(w->ctx, k, (size_t)keylen, params) != 1 ||
	    (w->secret = strdup(secret)) == NULL) {
		EVP_MAC_CTX_free(w->ctx);
		w->ctx = NULL;
		w->secret = NULL;
	}
	OPENSSL_cleanse(key, sizeof(key));
	return w->ctx;
}

int
webhook_secret_ok(const char *secret)
{
	unsigned char		 key[WEBHOOK_KEY_MAX];
	const unsigned char	*k;
	int			 keylen;

	if (secret == NULL)
		return 0;
	keylen = webhook_key(secret, key, &k);
	OPENSSL_cleanse(key, sizeof(key));
	return keylen > 0;
}

int
webhook_sign(const char *secret, const char *id, int64_t ts,
    const char *body, size_t len, char *out, size_t outlen)
{
	unsigned char	 mac[EVP_MAX_MD_SIZE];
	char		 buf[WEBHOOK_HEAD_MAX], *head = buf;
	size_t		 maclen = 0;
	EVP_MAC_CTX	*base, *ctx = NULL;
	int		 n, ok = 0;

	if (secret == NULL || id == NULL || (body == NULL && len != 0) ||
	    out == NULL || outlen < WEBHOOK_SIG_LEN + 1)
		return (-1);
	/* The signed content: "{id}.{timestamp}.{body}". */
	n = snprintf(buf, sizeof(buf), "%s.%" PRId64 ".", id, ts);
	if (n < 0)
		return (-1);
	if ((size_t)n >= sizeof(buf) && ((head = malloc((size_t)n + 1)) ==
	    NULL || snprintf(head, (size_t)n + 1, "%s.%" PRId64 ".", id,
	    ts) != n))
		goto done;
	if ((base = webhook_mac(secret)) == NULL ||
	    (ctx = EVP_MAC_CTX_dup(base)) == NULL)
		goto done;
	ok = EVP_MAC_update(ctx, (const unsigned char *)head, (size_t)n) ==
	    1 && (len == 0 || EVP_MAC_update(ctx, (const unsigned char *)body,
	    len) == 1) && EVP_MAC_final(ctx, mac, &maclen, sizeof(mac)) == 1 &&
	    maclen == 32;
done:
	EVP_MAC_CTX_free(ctx);
	if (head != buf)
		free(head);
	if (!ok)
		return (-1);
	memcpy(out, "v1,", 3);
	/* 32 bytes -> 44 characters and a NUL. */
	EVP_EncodeBlock((unsigned char *)out + 3, mac, (int)maclen);
	return (0);
}

enum sink_outcome
webhook_outcome(long status)
{
	if (status >= 200 && status <= 299)
		return (SINK_SENT);
	if (status == 0 || status == 408 || status == 429 ||
	    (status >= 500 && status <= 599))
		return (SINK_RETRY);
	return (SINK_REJECTED);
}

/* The first WEBHOOK_ANSWER_MAX bytes of an answer as one line of
 * printable ASCII (it ends up in last_error and in logs). */
static void
sink_http_answer(const char *body, size_t len, char *buf, size_t size)
{
	size_t	i, o = 0;

	if (len > WEBHOOK_ANSWER_MAX)
		len = WEBHOOK_ANSWER_MAX;
	for (i = 0; i < len && o + 1 < size; i++) {
		unsigned char	c = (unsigned char)body[i];

		if (c == '\r' || c == '\n' || c == '\t')
			c = ' ';
		else if (c < 0x20 || c >= 0x7f)
			c = '?';
		if (c == ' ' && (o == 0 || buf[o - 1] == ' '))
			continue;
		buf[o++] = (char)c;
	}
	while (o > 0 && buf[o - 1] == ' ')
		o--;
	buf[o] = '\0';
}

enum sink_reason
webhook_reason(long status, enum sink_outcome outcome, const char *answer)
{
	if (status == 0)
		return (SINK_REASON_TRANSPORT);
	/* A receiver that says it throttles is throttling whatever the
	 * status; 408 is the receiver giving up on a slow request. */
	if (strstr(answer, "Throttl") != NULL ||
	    strstr(answer, "TooManyRequests") != NULL || status == 429)
		return (SINK_REASON_THROTTLED);
	if (status == 408)
		return (SINK_REASON_TRANSPORT);
	if (status >= 500 && status <= 599)
		return (SINK_REASON_SERVER);
	if (outcome == SINK_REJECTED)
		return (SINK_REASON_REJECTED);
	return (SINK_REASON_OTHER);
}

/* All deliveries of a call are done: one log line for the failures, then
 * the relay's callback. */
static void
sink_http_finish(struct sink_http_call *call)
{
	const char	*first = NULL;
	int		 i, nretry = 0, nrej = 0, nsent = 0, n = 0;

	for (i = 0; i < call->n; i++) {
		/* Never sent: the relay logs its own refusals. */
		if (call->refused & (1U << i))
			continue;
		n++;
		switch (call->msgs[i].outcome) {
		case SINK_SENT:
			nsent++;
			break;
		case SINK_RETRY:
			nretry++;
			break;
		case SINK_REJECTED:
			nrej++;
			break;
		}
		if (call->msgs[i].outcome != SINK_SENT && first == NULL)
			first = call->msgs[i].error;
	}
	/* A receiver that is down fails every call: rate-limited, as the
	 * SQS sink's failures are, so an outage cannot flood the log. */
	if (nretry + nrej > 0)
		log_limited_kv(&call->t->call_limit, LOG_LEVEL_WARN,
		    (const char *[]){ "destination", call->t->dest->name,
		    NULL }, "webhook: %d of %d deliveries failed (%d to retry, "
		    "%d rejected); first: %s", nretry + nrej, n, nretry,
		    nrej, first != NULL ? first : "?");
	else {
		log_debug("webhook: %d of %d delivered", nsent, n);
		sink_limit_end(call->t, "webhook delivery");
	}
	call->done(call->msgs, call->n, call->arg);
	free(call);
}

static void
sink_http_reply(const struct httpc_response *resp, void *arg)
{
	struct sink_http_one	*one = arg;
	struct sink_http_call	*call = one->call;
	struct outbox_msg	*m = &call->msgs[one->i];
	char			 answer[WEBHOOK_ANSWER_MAX + 1];
	int			 r;

	free(m->error);
	m->error = NULL;
	m->retry_after = -1;
	m->answered = 1;
	if (resp->curl_code != 0 || resp->status == 0) {
		m->outcome = SINK_RETRY;
		m->reason = webhook_reason(0, m->outcome, "");
		r = asprintf(&m->error, "webhook transport error: %s",
		    resp->curl_error != NULL ? resp->curl_error : "no answer");
	} else {
		m->outcome = webhook_outcome(resp->status);
		if (m->outcome == SINK_RETRY && resp->retry_after >= 0)
			m->retry_after = resp->retry_after * 1000;
		if (m->outcome == SINK_SENT)
			r = 0;
		else {
			sink_http_answer(resp->body != NULL ? resp->body : "",
			    resp->body_len, answer, sizeof(answer));
			m->reason = webhook_reason(resp->status, m->outcome,
			    answer);
			r = asprintf(&m->error, "webhook HTTP %ld%s%s",
			    resp->status, answer[0] != '\0' ? ": " : "",
			    answer);
		}
	}
	if (r == -1)
		m->error = NULL;
	log_debug("webhook: id=%" PRId64 " HTTP %ld -> %s", m->id,
	    resp->status, m->outcome == SINK_SENT ? "sent" :
	    m->outcome == SINK_RETRY ? "retry" : "rejected");
	if (--call->pending == 0)
		sink_http_finish(call);
}

/* httpc_free() aborted a delivery (the relay gave up at a stop): the
 * relay's callback never runs; the last one frees the call.  The
 * messages are the relay's. */
static void
sink_http_abort(void *arg)
{
	struct sink_http_one	*one = arg;

	if (--one->call->pending == 0)
		free(one->call);
}

/* Start the delivery of msgs[i]; -1 (with m->error set) if it cannot. */
static int
sink_http_start(struct httpc *hc, const struct conf_destination *d,
    struct sink_http_call *call, int i, int64_t now)
{
	struct outbox_msg	*m = &call->msgs[i];
	struct curl_slist	*h = NULL;
	struct httpc_request	 req;
	char			 id[24], sig[WEBHOOK_SIG_LEN + 1];
	char			 etype[128];
	const char		*why;
	size_t			 len, j;
	int			 k;

	snprintf(id, sizeof(id), "%" PRId64, m->id);
	len = m->payload_len != 0 ? m->payload_len : strlen(m->payload);
	if (webhook_sign(d->secret, id, now, m->payload, len, sig,
	    sizeof(sig)) == -1) {
		why = "cannot sign: webhook.secret is empty, or after "
		    "\"whsec_\" not base64 of 1 to 256 bytes";
		goto fail;
	}
	/* A header value must not break the header block. */
	snprintf(etype, sizeof(etype), "%s", m->event_type != NULL ?
	    m->event_type : "");
	for (j = 0; etype[j] != '\0'; j++)
		if ((unsigned char)etype[j] < 0x20 ||
		    (unsigned char)etype[j] >= 0x7f)
			etype[j] = '?';
	if (httpc_header(&h, "Content-Type: application/json") == -1 ||
	    httpc_header(&h, "User-Agent: outboxd/%s",
	    PACKAGE_VERSION) == -1 ||
	    httpc_header(&h, "webhook-id: %s", id) == -1 ||
	    httpc_header(&h, "webhook-timestamp: %" PRId64, now) == -1 ||
	    httpc_header(&h, "webhook-signature: %s", sig) == -1 ||
	    (etype[0] != '\0' && httpc_header(&h,
	    "X-Outbox-Event-Type: %s", etype) == -1) ||
	    /* No "Expect: 100-continue" round trip for large bodies. */
	    httpc_header(&h, "Expect:") == -1) {
		why = "out of memory";
		goto fail;
	}
	/* The row's headers, values byte for byte.  The schema and the
	 * relay (sink_headers_check(), outbox(7)) keep their names to
	 * letters, digits, '_', '-' and '.', their values free of control
	 * characters and of spaces at either end (which libcurl would send
	 * but a receiver drop), and refuse the names this sink sets itself
	 * and those of HTTP's own machinery. */
	for (k = 0; k < m->nheaders; k++)
		if (httpc_header(&h, "%s: %s", m->headers[k].name,
		    m->headers[k].value) == -1) {
			why = "out of memory";
			goto fail;
		}

	memset(&req, 0, sizeof(req));
	req.url = d->url;
	req.headers = h;		/* httpc frees it, even on failure */
	req.body = m->payload;
	req.body_len = len;
	req.timeout = d->timeout > 0 ? d->timeout : WEBHOOK_DEFAULT_TIMEOUT;
	req.arg_free = sink_http_abort;
	call->one[i].call = call;
	call->one[i].i = i;
	if (httpc_post(hc, &req, sink_http_reply, &call->one[i]) == -1) {
		why = "could not start the request";
		goto fail;
	}
	return (0);

fail:
	m->outcome = SINK_RETRY;
	m->reason = SINK_REASON_OTHER;
	m->answered = 1;
	m->retry_after = -1;
	free(m->error);
	if (asprintf(&m->error, "webhook: %s", why) == -1)
		m->error = NULL;
	return (-1);
}

static int
sink_http_publish(struct httpc *hc, struct sink_target *t,
    struct outbox_msg *msgs, int n, sink_done_cb *done, void *arg)
{
	const struct conf_destination	*d = t->dest;
	struct sink_http_call	*call;
	const char		*why = NULL;
	int64_t			 now;
	int			 i, started = 0;

	if (n < 1 || n > SINK_HTTP_MAX_BATCH) {
		log_warnx("sink_http_publish: %d messages (1..%d)", n,
		    SINK_HTTP_MAX_BATCH);
		return (-1);
	}
	if (d->url == NULL || d->secret == NULL) {
		log_warnx("sink_http_publish: destination %s has no url or "
		    "secret", d->name);
		return (-1);
	}
	if ((call = calloc(1, sizeof(*call))) == NULL) {
		log_warn("sink_http_publish");
		return (-1);
	}
	call->t = t;
	call->msgs = msgs;
	call->n = n;
	call->done = done;
	call->arg = arg;
	/* Held by this function until every delivery is started. */
	call->pending = 1;
	now = (int64_t)time(NULL);
	for (i = 0; i < n; i++) {
		/* Decided by the relay already (too large): not sent, and
		 * as good as answered. */
		if (msgs[i].outcome == SINK_REJECTED) {
			msgs[i].answered = 1;
			call->refused |= 1U << i;
			continue;
		}
		msgs[i].outcome = SINK_RETRY;
		msgs[i].answered = 0;
		msgs[i].retry_after = -1;
		call->pending++;
		if (sink_http_start(hc, d, call, i, now) == -1) {
			call->pending--;
			why = msgs[i].error;
		} else
			started++;
	}
	if (started == 0) {
		log_warnx("webhook: none of %d deliveries could be started: "
		    "%s", n, why != NULL ? why : "nothing to send");
		free(call);
		return (-1);
	}
	/* httpc never calls back from inside httpc_post(), so this is not
	 * the last reference; be safe anyway. */
	if (--call->pending == 0)
		sink_http_finish(call);
	return (0);
}

/* Length of "scheme://host[:port]" at the start of url. */
static int
sink_http_origin_len(const char *url)
{
	const char	*p = strstr(url, "://");

	p = p != NULL ? p + 3 : url;
	return (int)(p - url + strcspn(p, "/?#"));
}

/* A webhook URL may carry a token in its path or query, and a user and
 * password before its host: only the host and port may be logged, with
 * the scheme when nothing stands before the host. */
static void
sink_http_loggable(const struct sink_target *t, const char **text, int *len)
{
	const char	*url = t->dest->url, *host, *at;
	int		 n = sink_http_origin_len(url);

	host = strstr(url, "://");
	host = host != NULL ? host + 3 : url;
	at = memchr(host, '@', (size_t)(url + n - host));
	if (at == NULL) {
		*text = url;
		*len = n;
		return;
	}
	/* userinfo: from the last '@' of the authority on */
	while ((host = memchr(at + 1, '@', (size_t)(url + n - at - 1))) != NULL)
		at = host;
	*text = at + 1;
	*len = (int)(url + n - at - 1);
}

const struct sink sink_http = {
	.name = "http",
	.target = "the webhook",
	.unanswered = "webhook deliveries",
	.max_batch = SINK_HTTP_MAX_BATCH,
	/* A call's POSTs go at once: as many POSTs as connections. */
	.slots = HTTPC_MAX_HOST_CONNS / SINK_HTTP_MAX_BATCH,
	.msg_overhead = SINK_HTTP_MSG_OVERHEAD,
	.publish = sink_http_publish,
	.loggable = sink_http_loggable,
};
