/*
 * sink_pubsub.c - publish outbox messages to a Google Cloud Pub/Sub topic
 * with one projects.topics.publish per call (Pub/Sub REST reference),
 * authorised with a bearer token from gcp_auth.c, or with none when
 * PUBSUB_EMULATOR_HOST points at the emulator.
 *
 * Pub/Sub stores a request's messages all or none, so the call is
 * answered whole: 200 with one messageId per message = sent; a failure
 * that may pass (429, 5xx, UNAVAILABLE, DEADLINE_EXCEEDED, a transport
 * error, an expired token) retries every message; one that cannot
 * (INVALID_ARGUMENT, NOT_FOUND, PERMISSION_DENIED) rejects them with
 * Google's message, and outboxctl redrive sends them once it is fixed.
 *
 * Ordering: Pub/Sub pauses an ordering key after a failed publish until
 * the client resumes it, so that a later message of the key cannot pass
 * an earlier one.  outboxd holds a key back itself: a claim returns at
 * most one row per key and destination, and a row that failed keeps its
 * key until it is sent or given up, so no later message of the key is
 * ever published first and there is nothing to resume.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <event2/event.h>

#include "outboxd.h"
#include "broker.h"

#define SINK_PUBSUB_MAX_BATCH	SINK_MAX_BATCH	/* of Pub/Sub's 1000 */
#define SINK_PUBSUB_TIMEOUT	10000L	/* ms, if the relay gives none */
/* The same as for SQS (sink_sqs.c), so that relay.max_message_size
 * fails the same rows whichever the sink: Pub/Sub counts the EventType
 * attribute too. */
#define SINK_PUBSUB_OVERHEAD	(sizeof("EventType") - 1 + \
				sizeof("String") - 1)

struct sink_pubsub_call {
	struct sink_target	*t;
	struct outbox_msg	*msgs;
	int			 n;
	sink_done_cb		*done;
	void			*arg;
	char			*url;
	char			*body;
	size_t			 len;
	char			*token;		/* the one sent; wiped */
};

static void
sink_pubsub_call_free(void *arg)
{
	struct sink_pubsub_call	*call = arg;

	free(call->url);
	free(call->body);
	gcp_free_secret(call->token);
	free(call);
}

/* Every message not yet rejected gets outcome and why; then done. */
static void
sink_pubsub_finish(struct sink_pubsub_call *call, enum sink_outcome outcome,
    int reason, const char *why, long retry_after)
{
	int	i;

	if (outcome != SINK_SENT) {
		log_limited_kv(&call->t->call_limit, LOG_LEVEL_WARN,
		    (const char *[]){ "destination", call->t->dest->name,
		    NULL }, "Pub/Sub publish of %d messages failed%s: %s",
		    call->n, outcome == SINK_RETRY ? ", will retry" :
		    ", rejected", why);
		for (i = 0; i < call->n; i++) {
			/* Refused before the request: that verdict
			 * stays. */
			if (call->msgs[i].outcome == SINK_REJECTED)
				continue;
			call->msgs[i].outcome = outcome;
			call->msgs[i].reason = reason;
			call->msgs[i].retry_after = retry_after;
			call->msgs[i].error = strdup(why);
		}
	} else
		sink_limit_end(call->t, "Pub/Sub publish");
	call->done(call->msgs, call->n, call->arg);
	sink_pubsub_call_free(call);
}

static void
sink_pubsub_reply(const struct httpc_response *res, void *arg)
{
	struct sink_pubsub_call	*call = arg;
	struct pubsub_error	 e;
	char			 why[700];
	enum sink_outcome	 outcome;

	if (res->curl_code != 0) {
		snprintf(why, sizeof(why), "Pub/Sub transport error: %s",
		    res->curl_error != NULL ? res->curl_error : "unknown");
		sink_pubsub_finish(call, SINK_RETRY, SINK_REASON_TRANSPORT, why,
		    -1);
		return;
	}
	if (res->status >= 200 && res->status < 300) {
		if (pubsub_publish_parse(res->body, res->body_len, call->msgs,
		    call->n, why, sizeof(why)) >= 0) {
			log_debug("Pub/Sub publish: %d messages", call->n);
			sink_pubsub_finish(call, SINK_SENT, 0, NULL, -1);
		} else
			sink_pubsub_finish(call, SINK_RETRY, SINK_REASON_SERVER,
			    why, -1);
		return;
	}
	pubsub_error_parse(res->body, res->body_len, &e);
	if (res->status == 401)
		gcp_auth_reject(call->token);
	outcome = pubsub_outcome(res->status, e.status);
	snprintf(why, sizeof(why), "Pub/Sub HTTP %ld %s: %s", res->status,
	    e.status[0] != '\0' ? e.status : "error", e.message[0] != '\0' ?
	    e.message : "(no message)");
	sink_pubsub_finish(call, outcome == SINK_SENT ? SINK_RETRY : outcome,
	    pubsub_reason(res->status, e.status), why,
	    res->retry_after >= 0 ? res->retry_after * 1000 : -1);
}

/* Send the request, with token unless the emulator is used.  -1 if it
 * could not start (the call is still the caller's). */
static int
sink_pubsub_send(struct httpc *hc, struct sink_pubsub_call *call,
    const char *token)
{
	struct httpc_request	 r;
	struct curl_slist	*h = NULL;
	long			 timeout = call->t->dest->timeout;

	if (token != NULL && (call->token = strdup(token)) == NULL)
		return -1;
	httpc_header(&h, "Content-Type: application/json");
	if (token != NULL)
		httpc_header(&h, "Authorization: Bearer %s", token);
	if (h == NULL)
		return -1;
	memset(&r, 0, sizeof(r));
	r.url = call->url;
	r.headers = h;
	r.body = call->body;
	r.body_len = call->len;
	r.timeout = timeout > 0 ? timeout : SINK_PUBSUB_TIMEOUT;
	r.arg_free = sink_pubsub_call_free;
	return httpc_post(hc, &r, sink_pubsub_reply, call);
}

/* gcp_auth.c's answer for a call that waited for a token. */
struct sink_pubsub_wait {
	struct httpc		*hc;
	struct sink_pubsub_call	*call;
};

static void
sink_pubsub_wait_free(void *arg)
{
	struct sink_pubsub_wait	*w = arg;

	sink_pubsub_call_free(w->call);
	free(w);
}

static void
sink_pubsub_token(const char *token, const char *error, int reason,
    void *arg)
{
	struct sink_pubsub_wait	*w = arg;
	struct sink_pubsub_call	*call = w->call;
	struct httpc		*hc = w->hc;

	free(w);
	if (token == NULL)
		sink_pubsub_finish(call, SINK_RETRY, reason, error, -1);
	else if (sink_pubsub_send(hc, call, token) == -1)
		sink_pubsub_finish(call, SINK_RETRY, SINK_REASON_OTHER,
		    "Pub/Sub: could not start the request", -1);
}

/* Every message was refused here: answer from the loop, as promised. */
static void
sink_pubsub_none(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	sink_pubsub_finish(arg, SINK_SENT, 0, NULL, -1);
}

static int
sink_pubsub_publish(struct httpc *hc, struct sink_target *t,
    struct outbox_msg *msgs, int n, sink_done_cb *done, void *arg)
{
	const struct conf_destination	*d = t->dest;
	struct sink_pubsub_call		*call;
	struct sink_pubsub_wait		*w;
	struct timeval			 now = { 0, 0 };
	const char			*token = NULL;
	char				 why[300], id[24];
	int				 i, left = 0, rv;

	if (n < 1 || n > SINK_PUBSUB_MAX_BATCH || d->project == NULL ||
	    d->topic == NULL) {
		log_warnx("sink_pubsub_publish: %d messages (1..%d) to "
		    "destination %s", n, SINK_PUBSUB_MAX_BATCH, d->name);
		return -1;
	}
	/* What Pub/Sub would refuse fails alone, not its whole request. */
	for (i = 0; i < n; i++) {
		if (msgs[i].outcome == SINK_REJECTED)
			continue;
		if (pubsub_message_check(&msgs[i], d->ordering, why,
		    sizeof(why)) == 0) {
			left++;
			continue;
		}
		snprintf(id, sizeof(id), "%lld", (long long)msgs[i].id);
		log_limited_kv(&t->entry_limit, LOG_LEVEL_WARN, (const char *[]){
		    "destination", d->name, "outbox_id", id, NULL },
		    "rejected: %s", why);
		msgs[i].outcome = SINK_REJECTED;
		msgs[i].reason = SINK_REASON_REJECTED;
		msgs[i].error = strdup(why);
	}
	if ((call = calloc(1, sizeof(*call))) == NULL) {
		log_warn("sink_pubsub_publish");
		return -1;
	}
	call->t = t;
	call->msgs = msgs;
	call->n = n;
	call->done = done;
	call->arg = arg;
	if (left == 0) {
		if (event_base_once(httpc_base(hc), -1, EV_TIMEOUT,
		    sink_pubsub_none, call, &now) == -1) {
			free(call);
			return -1;
		}
		return 0;
	}
	if ((call->url = pubsub_publish_url(t->conf->pubsub.endpoint,
	    d->project, d->topic)) == NULL || (call->body =
	    pubsub_publish_body(msgs, n, d->ordering, &call->len)) == NULL) {
		log_warnx("sink_pubsub_publish: cannot build the request (%d "
		    "messages)", n);
		sink_pubsub_call_free(call);
		return -1;
	}
	if (t->conf->pubsub.emulator)
		return sink_pubsub_send(hc, call, NULL) == 0 ? 0 :
		    (sink_pubsub_call_free(call), -1);
	if ((w = calloc(1, sizeof(*w))) == NULL) {
		sink_pubsub_call_free(call);
		return -1;
	}
	w->hc = hc;
	w->call = call;
	rv = gcp_auth_token(hc, d->timeout > 0 ? d->timeout :
	    SINK_PUBSUB_TIMEOUT, t->conf->pubsub.adc_file, &token,
	    sink_pubsub_token, w,
	    sink_pubsub_wait_free);
	if (rv == 0)
		return 0;	/* w is gcp_auth.c's now */
	free(w);
	if (rv == 1 && sink_pubsub_send(hc, call, token) == 0)
		return 0;
	sink_pubsub_call_free(call);
	return -1;
}

/* Nothing of a Pub/Sub destination is secret. */
static void
sink_pubsub_loggable(const struct sink_target *t, const char **text,
    int *len)
{
	*text = t->dest->topic;
	*len = (int)strlen(t->dest->topic);
}

const struct sink sink_pubsub = {
	.name = "pubsub",
	.target = "Pub/Sub (topics.publish)",
	.unanswered = "Pub/Sub publish requests",
	.max_batch = SINK_PUBSUB_MAX_BATCH,
	.slots = HTTPC_MAX_HOST_CONNS,
	.msg_overhead = SINK_PUBSUB_OVERHEAD,
	.publish = sink_pubsub_publish,
	.loggable = sink_pubsub_loggable,
};
