/*
 * sink_sqs.c - publish outbox messages to an SQS queue with one
 * SendMessageBatch per call (AWS SQS API: SendMessageBatch).
 *
 * SQS answers 200 even when some entries failed, so every entry of the
 * reply is read.  A failure of the whole request (transport, 5xx,
 * throttling, and 4xx such as QueueDoesNotExist) retries every message:
 * a wrong queue URL or missing permission is a configuration problem that
 * an operator fixes, and must not dead-letter good messages.  Only an
 * entry SQS itself calls a sender fault is rejected.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "outboxd.h"
#include "broker.h"

#define SQS_MAX_BATCH		10	/* entries per SendMessageBatch */
/* SQS counts the EventType attribute's name, type and value toward a
 * message's size (the value is the event type itself). */
#define SQS_ATTR_OVERHEAD	(sizeof("EventType") - 1 + sizeof("String") - 1)
#define SINK_DEFAULT_TIMEOUT	10000L	/* ms, if the relay gives none */

struct sink_sqs_call {
	struct sink_target	*t;
	struct outbox_msg	*msgs;
	int			 n;
	sink_done_cb		*done;
	void			*arg;
	unsigned int		 refused;	/* bit i: msgs[i] refused by
						   the relay, not sent */
};

static void
sink_sqs_reply(const struct aws_result *res, void *arg)
{
	struct sink_sqs_call	*call = arg;
	char			*why, id[24];
	int			 i, sent;

	if (!res->ok) {
		if (res->status == 0) {
			if (asprintf(&why, "SQS transport error: %s",
			    res->error_message != NULL ? res->error_message :
			    "unknown") == -1)
				why = NULL;
		} else if (asprintf(&why, "SQS HTTP %ld %s: %s", res->status,
		    res->error_type != NULL ? res->error_type : "error",
		    res->error_message != NULL ? res->error_message : "-") ==
		    -1)
			why = NULL;
		/* A broker that is down fails every batch: one line per
		 * LOG_LIMIT_MS. */
		log_limited_kv(&call->t->call_limit, LOG_LEVEL_WARN,
		    (const char *[]){ "destination", call->t->dest->name,
		    NULL }, "SendMessageBatch of %d messages failed, will "
		    "retry: %s", call->n, why != NULL ? why : "?");
		for (i = 0; i < call->n; i++) {
			/* Refused by the relay, not sent: its verdict
			 * stays. */
			if (call->refused & (1U << i))
				continue;
			call->msgs[i].outcome = SINK_RETRY;
			call->msgs[i].reason = aws_failure_reason(
			    res->status, res->error_type, res->error_message);
			call->msgs[i].error = why != NULL ? strdup(why) : NULL;
		}
		free(why);
	} else {
		sent = sqs_send_batch_parse(res->json, call->msgs, call->n);
		if (sent != call->n) {
			for (i = 0; i < call->n; i++) {
				if (call->msgs[i].outcome == SINK_SENT ||
				    (call->refused & (1U << i)))
					continue;
				snprintf(id, sizeof(id), "%lld",
				    (long long)call->msgs[i].id);
				log_limited_kv(&call->t->entry_limit,
				    LOG_LEVEL_WARN, (const char *[]){
				    "destination", call->t->dest->name,
				    "outbox_id", id, NULL }, "SQS entry %s: %s",
				    call->msgs[i].outcome == SINK_REJECTED ?
				    "rejected" : "not accepted, will retry",
				    call->msgs[i].error != NULL ?
				    call->msgs[i].error : "?");
			}
		}
		log_debug("SendMessageBatch: %d of %d sent", sent, call->n);
		sink_limit_end(call->t, "SendMessageBatch");
	}
	call->done(call->msgs, call->n, call->arg);
	free(call);
}

static int
sink_sqs_publish(struct httpc *hc, struct sink_target *t,
    struct outbox_msg *msgs, int n, sink_done_cb *done, void *arg)
{
	const struct conf_destination	*d = t->dest;
	struct sink_sqs_call	*call;
	char			*body;
	size_t			 len;
	long			 timeout;
	int			 i;

	if (n < 1 || n > SQS_MAX_BATCH) {
		log_warnx("sink_sqs_publish: %d messages (1..%d)", n,
		    SQS_MAX_BATCH);
		return (-1);
	}
	if (d->queue_url == NULL) {
		log_warnx("sink_sqs_publish: destination %s has no queue_url",
		    d->name);
		return (-1);
	}
	if ((body = sqs_send_batch_body(d->queue_url, msgs, n, &len)) ==
	    NULL) {
		log_warnx("sink_sqs_publish: cannot build the request "
		    "(%d messages)", n);
		return (-1);
	}
	if ((call = calloc(1, sizeof *call)) == NULL) {
		log_warn("sink_sqs_publish");
		free(body);
		return (-1);
	}
	call->t = t;
	call->msgs = msgs;
	call->n = n;
	call->done = done;
	call->arg = arg;
	for (i = 0; i < n; i++)
		if (msgs[i].outcome == SINK_REJECTED)
			call->refused |= 1U << i;
	timeout = d->timeout > 0 ? d->timeout : SINK_DEFAULT_TIMEOUT;
	if (aws_call(hc, t->conf, AWS_SQS, "SendMessageBatch", body, len, timeout,
	    sink_sqs_reply, call, free) == -1) {
		free(body);
		free(call);
		return (-1);
	}
	free(body);		/* httpc keeps its own copy */
	return (0);
}

static void
sink_sqs_loggable(const struct sink_target *t, const char **text, int *len)
{
	*text = t->dest->queue_url;
	*len = (int)strlen(t->dest->queue_url);
}

/* One SendMessageBatch a call, up to as many at once as httpc keeps
 * connections to the host. */
const struct sink sink_sqs = {
	.name = "sqs",
	.target = "SQS (SendMessageBatch)",
	.unanswered = "SendMessageBatch entries",
	.max_batch = SQS_MAX_BATCH,
	.slots = HTTPC_MAX_HOST_CONNS,
	.msg_overhead = SQS_ATTR_OVERHEAD,
	.publish = sink_sqs_publish,
	.loggable = sink_sqs_loggable,
};
