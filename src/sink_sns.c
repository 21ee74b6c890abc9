/*
 * sink_sns.c - publish outbox messages to an SNS topic with one
 * PublishBatch per call (AWS SNS API: PublishBatch; query protocol, the
 * only one SNS speaks: sns.c builds the form and reads the XML).
 *
 * As for SQS (sink_sqs.c): SNS answers 200 even when some entries failed,
 * so every entry of the reply is read; an entry SNS calls a sender fault
 * is rejected (dead letter), any other failed or unlisted entry retried.
 * A failure of the whole request (transport, 5xx, throttling, and 4xx
 * such as NotFound or AuthorizationError) retries every message: a wrong
 * topic ARN or a missing permission is for an operator to fix, and must
 * not dead-letter good messages.
 *
 * SNS's own limits are checked here, since relay.max_message_size may be
 * set above them: a message that SNS could never take (more than 256 KiB
 * with its attributes, more than 10 attributes) is rejected unsent, with
 * the rule in its last_error, and a call whose messages together exceed
 * 256 KiB goes out as several PublishBatch requests, answered together.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "outboxd.h"
#include "broker.h"

#define SNS_MAX_BATCH		10	/* entries per PublishBatch */
/* SNS counts the EventType attribute's name, type and value toward a
 * message's size (the value is the event type itself). */
#define SNS_ATTR_OVERHEAD	(sizeof("EventType") - 1 + sizeof("String") - 1)
#define SINK_DEFAULT_TIMEOUT	10000L	/* ms, if the relay gives none */

struct sink_sns_call {
	struct sink_target	*t;
	struct outbox_msg	*msgs;
	int			 n;
	sink_done_cb		*done;
	void			*arg;
	int			 pending;	/* requests unanswered, +1
						   while publish runs */
	int			 aborted;	/* httpc_free() took one */
};

/* One PublishBatch of a call: msgs[off .. off + cnt - 1]. */
struct sink_sns_part {
	struct sink_sns_call	*call;
	int			 off;
	int			 cnt;
};

/* A request of the call is over (answered or aborted): the last one
 * answers the call, unless httpc_free() aborted any. */
static void
sink_sns_unref(struct sink_sns_call *call)
{
	if (--call->pending > 0)
		return;
	if (!call->aborted)
		call->done(call->msgs, call->n, call->arg);
	free(call);
}

static void
sink_sns_abort(void *arg)
{
	struct sink_sns_part	*part = arg;

	part->call->aborted = 1;
	sink_sns_unref(part->call);
	free(part);
}

/* Log the messages of msgs[0..n-1] that were not sent. */
static void
sink_sns_log_entries(struct sink_target *t, const struct outbox_msg *msgs,
    int n)
{
	char	id[24];
	int	i;

	for (i = 0; i < n; i++) {
		if (msgs[i].outcome == SINK_SENT)
			continue;
		snprintf(id, sizeof(id), "%lld", (long long)msgs[i].id);
		log_limited_kv(&t->entry_limit, LOG_LEVEL_WARN,
		    (const char *[]){ "destination", t->dest->name,
		    "outbox_id", id, NULL }, "SNS entry %s: %s",
		    msgs[i].outcome == SINK_REJECTED ? "rejected" :
		    "not accepted, will retry",
		    msgs[i].error != NULL ? msgs[i].error : "?");
	}
}

/* Every message of msgs[0..n-1] that was to be sent is retried for why
 * (may be NULL: out of memory). */
static void
sink_sns_retry_all(struct outbox_msg *msgs, int n, int reason,
    const char *why, long retry_after)
{
	int	i;

	for (i = 0; i < n; i++) {
		if (msgs[i].outcome == SINK_REJECTED)
			continue;
		msgs[i].outcome = SINK_RETRY;
		msgs[i].reason = reason;
		msgs[i].error = why != NULL ? strdup(why) : NULL;
		if (retry_after >= 0)
			msgs[i].retry_after = retry_after * 1000;
	}
}

static void
sink_sns_reply(const struct aws_result *res, void *arg)
{
	struct sink_sns_part	*part = arg;
	struct sink_sns_call	*call = part->call;
	struct sink_target	*t = call->t;
	struct outbox_msg	*msgs = call->msgs + part->off;
	char			*why;
	int			 sent, i;

	if (!res->ok) {
		if (res->status == 0) {
			if (asprintf(&why, "SNS transport error: %s",
			    res->error_message != NULL ? res->error_message :
			    "unknown") == -1)
				why = NULL;
		} else if (asprintf(&why, "SNS HTTP %ld %s: %s", res->status,
		    res->error_type != NULL ? res->error_type : "error",
		    res->error_message != NULL ? res->error_message : "-") ==
		    -1)
			why = NULL;
		/* A topic that is down fails every batch: one line per
		 * LOG_LIMIT_MS. */
		log_limited_kv(&t->call_limit, LOG_LEVEL_WARN,
		    (const char *[]){ "destination", t->dest->name, NULL },
		    "PublishBatch of %d messages failed, will retry: %s",
		    part->cnt, why != NULL ? why : "?");
		sink_sns_retry_all(msgs, part->cnt, aws_failure_reason(
		    res->status, res->error_type, res->error_message), why,
		    res->retry_after);
		free(why);
	} else if ((sent = sns_publish_batch_parse(res->body, res->body_len,
	    msgs, part->cnt)) == -1) {
		for (i = 0; i < part->cnt - 1; i++)
			if (msgs[i].outcome != SINK_REJECTED)
				break;
		log_limited_kv(&t->call_limit, LOG_LEVEL_WARN,
		    (const char *[]){ "destination", t->dest->name, NULL },
		    "PublishBatch of %d messages: HTTP %ld but %s, will retry",
		    part->cnt, res->status, msgs[i].error != NULL ?
		    msgs[i].error : "the reply is unreadable");
	} else {
		if (sent != part->cnt)
			sink_sns_log_entries(t, msgs, part->cnt);
		log_debug("PublishBatch: %d of %d sent", sent, part->cnt);
		sink_limit_end(t, "PublishBatch");
	}
	sink_sns_unref(call);
	free(part);
}

/* httpc_later(): every message was rejected before a request. */
static void
sink_sns_unsent(const struct httpc_response *resp, void *arg)
{
	struct sink_sns_call	*call = arg;

	(void)resp;
	call->done(call->msgs, call->n, call->arg);
	free(call);
}


/* Start the PublishBatch of msgs[off .. off + cnt - 1].  0, or -1 if it
 * could not be started (nothing to free). */
static int
sink_sns_start(struct httpc *hc, struct sink_sns_call *call, int off,
    int cnt)
{
	const struct conf_destination	*d = call->t->dest;
	struct sink_sns_part		*part;
	char				*body;
	size_t				 len;
	long				 timeout;

	if ((body = sns_publish_batch_body(d->topic_arn, call->msgs + off,
	    cnt, &len)) == NULL) {
		log_warnx("sink_sns_publish: cannot build the request "
		    "(%d messages)", cnt);
		return (-1);
	}
	if ((part = calloc(1, sizeof(*part))) == NULL) {
		log_warn("sink_sns_publish");
		free(body);
		return (-1);
	}
	part->call = call;
	part->off = off;
	part->cnt = cnt;
	timeout = d->timeout > 0 ? d->timeout : SINK_DEFAULT_TIMEOUT;
	call->pending++;
	if (aws_call(hc, call->t->conf, AWS_SNS, "PublishBatch", body, len,
	    timeout, sink_sns_reply, part, sink_sns_abort) == -1) {
		call->pending--;
		free(part);
		free(body);
		return (-1);
	}
	free(body);		/* httpc keeps its own copy */
	return (0);
}

static int
sink_sns_publish(struct httpc *hc, struct sink_target *t,
    struct outbox_msg *msgs, int n, sink_done_cb *done, void *arg)
{
	const struct conf_destination	*d = t->dest;
	struct sink_sns_call	*call;
	size_t			 size, bytes = 0;
	int			 i, off = 0, cnt = 0, sendable = 0;
	int			 started = 0, parts = 0, nattr;

	if (n < 1 || n > SNS_MAX_BATCH) {
		log_warnx("sink_sns_publish: %d messages (1..%d)", n,
		    SNS_MAX_BATCH);
		return (-1);
	}
	if (d->topic_arn == NULL) {
		log_warnx("sink_sns_publish: destination %s has no topic_arn",
		    d->name);
		return (-1);
	}
	if ((call = calloc(1, sizeof *call)) == NULL) {
		log_warn("sink_sns_publish");
		return (-1);
	}
	call->t = t;
	call->msgs = msgs;
	call->n = n;
	call->done = done;
	call->arg = arg;
	call->pending = 1;	/* held until every request is started */

	/* What SNS could never take is rejected now, not retried. */
	for (i = 0; i < n; i++) {
		if (msgs[i].outcome == SINK_REJECTED)
			continue;
		if ((nattr = sns_msg_attributes(&msgs[i])) > SNS_MAX_ATTRIBUTES)
			sink_refuse(&msgs[i], SINK_REASON_REJECTED,
			    "%d message attributes (EventType and the "
			    "headers): SNS allows at most %d", nattr,
			    SNS_MAX_ATTRIBUTES);
		else if ((size = sns_msg_size(&msgs[i])) > SNS_MAX_BATCH_BYTES)
			sink_refuse(&msgs[i], SINK_REASON_TOO_LARGE,
			    "message of %zu bytes (payload and attributes) "
			    "exceeds SNS's limit of %d bytes", size,
			    SNS_MAX_BATCH_BYTES);
		else {
			sendable++;
			continue;
		}
		sink_sns_log_entries(t, &msgs[i], 1);
	}
	if (sendable == 0) {
		if (httpc_later(hc, sink_sns_unsent, call, free) == -1) {
			free(call);
			return (-1);
		}
		return (0);
	}

	/*
	 * One request for all, unless together they exceed what one
	 * PublishBatch may carry: then consecutive runs that fit.  (With
	 * relay.max_message_size at most 256 KiB the relay's chunks always
	 * fit.)
	 */
	for (i = 0; i <= n; i++) {
		size = i < n && msgs[i].outcome != SINK_REJECTED ?
		    sns_msg_size(&msgs[i]) : 0;
		if (i == n || (cnt > 0 && size > 0 &&
		    bytes + size > SNS_MAX_BATCH_BYTES)) {
			parts++;
			if (sink_sns_start(hc, call, off, i - off) == 0)
				started++;
			else	/* if others are out, answered with them */
				sink_sns_retry_all(msgs + off, i - off,
				    SINK_REASON_OTHER, "PublishBatch could "
				    "not be started", -1);
			off = i;
			bytes = 0;
			cnt = 0;
		}
		if (size > 0) {
			bytes += size;
			cnt++;
		}
	}
	if (started == 0) {
		free(call);
		return (-1);
	}
	if (parts > 1)
		log_debug("PublishBatch: %d messages in %d requests (over %d "
		    "bytes together)", sendable, parts, SNS_MAX_BATCH_BYTES);
	sink_sns_unref(call);	/* not the last: requests answer later */
	return (0);
}

static void
sink_sns_loggable(const struct sink_target *t, const char **text, int *len)
{
	*text = t->dest->topic_arn;
	*len = (int)strlen(t->dest->topic_arn);
}

/* One PublishBatch a call, up to as many at once as httpc keeps
 * connections to the host. */
const struct sink sink_sns = {
	.name = "sns",
	.target = "SNS (PublishBatch)",
	.unanswered = "PublishBatch entries",
	.max_batch = SNS_MAX_BATCH,
	.slots = HTTPC_MAX_HOST_CONNS,
	.msg_overhead = SNS_ATTR_OVERHEAD,
	.publish = sink_sns_publish,
	.loggable = sink_sns_loggable,
};
