/*
 * sink_sns.c - publish outbox messages to an SNS topic with one
 * PublishBatch per call (AWS SNS API: PublishBatch).
 */
#include "config.h"

#include <string.h>

#include "outboxd.h"
#include "broker.h"

#define SNS_MAX_BATCH		10	/* entries per PublishBatch */

static int
sink_sns_publish(struct httpc *hc, struct sink_target *t,
    struct outbox_msg *msgs, int n, sink_done_cb *done, void *arg)
{
	(void)hc;
	(void)msgs;
	(void)n;
	(void)done;
	(void)arg;
	log_warnx("destination %s: the SNS sink is not built yet",
	    t->dest->name);
	return (-1);
}

static void
sink_sns_loggable(const struct sink_target *t, const char **text, int *len)
{
	*text = t->dest->topic_arn;
	*len = (int)strlen(t->dest->topic_arn);
}

const struct sink sink_sns = {
	.name = "sns",
	.target = "SNS (PublishBatch)",
	.unanswered = "PublishBatch entries",
	.max_batch = SNS_MAX_BATCH,
	.slots = HTTPC_MAX_HOST_CONNS,
	.msg_overhead = sizeof("EventType") - 1 + sizeof("String") - 1,
	.publish = sink_sns_publish,
	.loggable = sink_sns_loggable,
};
