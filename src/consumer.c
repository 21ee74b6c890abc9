/*
 * consumer.c - the consumer worker: long-poll the SQS queue, write one
 * fulfillment item per message to DynamoDB with a conditional put, and
 * delete a message only after its write succeeded or was found done
 * already (AWS SQS API: ReceiveMessage, DeleteMessageBatch; AWS DynamoDB
 * API: PutItem with ConditionExpression).
 *
 * Delivery is at least once, so the put is conditional on no item for the
 * orderId existing: ConditionalCheckFailedException means "already done".
 * Any other failure leaves the message; SQS shows it again after the
 * visibility timeout, and its redrive policy dead-letters a message that
 * keeps failing (e.g. a body that cannot be mapped).
 *
 * Up to consumer.concurrency batches in hand or being received at once:
 * each batch writes its messages concurrently and deletes the done ones
 * with one DeleteMessageBatch, so the writes of one batch overlap the
 * receive and the delete of others.  While the queue has messages, a
 * receive is started for every free slot: one ReceiveMessage at a time
 * would bound the drain at a batch per SQS round trip, whatever the
 * writes allow.  An empty answer brings the worker back to one long poll
 * at a time, so an idle queue costs one poll per worker, as before.
 *
 * A PutItem that DynamoDB throttles (ProvisionedThroughputExceeded-
 * Exception, ThrottlingException, RequestLimitExceeded) is retried with
 * backoff (CONSUMER_PUT_TRIES in all, consumer_batch.c), and no batch
 * is received while the backoff runs: a throttled table gets fewer
 * requests, not more.  Left throttled, the message stays in the queue
 * for a later delivery.
 *
 * Who does what: consumer.c is the worker (receive, backoff, stop, the
 * loop); consumer_batch.c one batch of received messages (skip, map,
 * write, retry throttled writes, delete); consumer.h what they share.
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sys/queue.h>

#include <event2/event.h>
#include <cjson/cJSON.h>

#include "outboxd.h"
#include "broker.h"
#include "creds.h"
#include "consumer.h"

#define CONSUMER_BACKOFF_MIN	100L	/* ms */
#define CONSUMER_BACKOFF_MAX	5000L	/* ms */
#define CONSUMER_POLL_MARGIN	10000L	/* ms on top of the long poll */
#define CONSUMER_SHORT_POLL	1000L	/* ms between empty short polls */

/* Delay before receive attempt number fails+1: 100 ms doubling to 5 s,
 * half of it random ("equal jitter") so workers do not retry in step. */
long
consumer_backoff(int fails)
{
	long	base = CONSUMER_BACKOFF_MIN;
	int	i;

	for (i = 1; i < fails && base < CONSUMER_BACKOFF_MAX; i++)
		base *= 2;
	if (base > CONSUMER_BACKOFF_MAX)
		base = CONSUMER_BACKOFF_MAX;
	return (base / 2 + random() % (base / 2 + 1));
}

static void
consumer_retry_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	consumer_next(arg);
}

/* A receive failed: log once per distinct error (why NULL: no AWS
 * credentials yet, which creds.c reports), then wait and retry. */
void
consumer_receive_failed(struct consumer *c, const char *why)
{
	struct timeval	tv;
	long		delay;

	c->fails++;
	delay = consumer_backoff(c->fails);
	if (why == NULL)
		log_debug("ReceiveMessage waits for AWS credentials (retry in "
		    "%ld ms)", delay);
	else if (strcmp(why, c->last_error) != 0) {
		log_warnx("ReceiveMessage failed (retrying with backoff up "
		    "to %ld ms%s): %s", CONSUMER_BACKOFF_MAX,
		    strstr(why, "QueueDoesNotExist") != NULL ?
		    "; the queue may be created later" : "", why);
		snprintf(c->last_error, sizeof c->last_error, "%s", why);
	} else
		log_debug("ReceiveMessage failed again (%d): %s", c->fails,
		    why);
	tv = clock_tv(delay);
	evtimer_add(c->retry, &tv);
}

static void
consumer_received(const struct aws_result *res, void *arg)
{
	struct consumer		*c = arg;
	struct sqs_message	*msgs;
	struct timeval		 tv;
	char			 why[sizeof c->last_error];
	int			 n;

	c->receiving--;
	if (!res->ok) {
		c->backlog = 0;
		snprintf(why, sizeof why, "%s%s%s%s",
		    res->status == 0 ? "transport: " : "",
		    res->error_type != NULL ? res->error_type : "",
		    res->error_type != NULL ? ": " : "",
		    res->error_message != NULL ? res->error_message : "?");
		consumer_receive_failed(c, why);
		return;
	}
	if (sqs_receive_parse(res->json, &msgs, &n) == -1) {
		consumer_receive_failed(c, "malformed ReceiveMessage reply");
		return;
	}
	if (c->fails > 0 && c->last_error[0] != '\0')
		log_info("ReceiveMessage works again after %d failures",
		    c->fails);
	c->fails = 0;
	c->last_error[0] = '\0';
	c->backlog = n > 0;
	if (n == 0) {
		/* Without a long poll an empty queue answers at once. */
		if (c->conf->consumer.wait_time <= 0 && !c->stopping) {
			tv = clock_tv(CONSUMER_SHORT_POLL);
			evtimer_add(c->retry, &tv);
		} else
			consumer_next(c);
		return;
	}
	log_debug("received %d messages", n);
	consumer_process(c, msgs, n);
	consumer_next(c);
}

static void
consumer_receive(struct consumer *c)
{
	char	*body;
	size_t	 len;
	long	 timeout;

	body = sqs_receive_body(c->conf->sqs_queue_url,
	    c->conf->consumer.wait_time, c->conf->consumer.max_messages, &len);
	if (body == NULL) {
		consumer_receive_failed(c, "cannot build ReceiveMessage");
		return;
	}
	timeout = c->conf->consumer.wait_time * 1000L + CONSUMER_POLL_MARGIN;
	if (aws_call(c->hc, c->conf, AWS_SQS, "ReceiveMessage", body, len,
	    timeout, consumer_received, c, NULL) == -1) {
		char	st[8];

		free(body);
		consumer_receive_failed(c, strcmp(creds_state(st, sizeof st),
		    "ok") != 0 ? NULL : "request not started");
		return;
	}
	free(body);
	c->receiving++;
}

/* Stopping (deadline: a stop, not a retirement): nothing is left to wait
 * for, no batch in hand and no receive but, at a stop, idle long polls
 * (see consumer_on_stop()). */
static int
consumer_stop_now(const struct consumer *c, int deadline)
{
	return (c->n_batches == 0 &&
	    (c->receiving == 0 || (deadline && !c->backlog)));
}

/*
 * Receive again while there is room for a batch (those in hand and those
 * being received count), no receive waits out a backoff, DynamoDB is not
 * throttling us, and either no receive is in flight or the queue has a
 * backlog; stopping, end the loop once the last batch is done.
 */
void
consumer_next(struct consumer *c)
{
	struct timeval	tv;
	int64_t		now;

	if (c->stopping) {
		if (consumer_stop_now(c, c->stop_deadline))
			event_base_loopbreak(c->base);
		return;
	}
	while (!evtimer_pending(c->retry, NULL) &&
	    c->n_batches + c->receiving < c->conf->consumer.concurrency &&
	    (c->receiving == 0 || c->backlog)) {
		if ((now = clock_mono_us()) < c->throttled_until) {
			tv = clock_tv((c->throttled_until - now + 999) / 1000);
			evtimer_add(c->retry, &tv);
			return;
		}
		consumer_receive(c);
	}
}

/*
 * Stopping, and the messages in hand are still not written or deleted
 * (DynamoDB or SQS hangs: each call may take CONSUMER_WRITE_TIMEOUT, as
 * long as the default shutdown_timeout): end before the master's SIGKILL,
 * so that the stop is clean and says why.  Nothing is lost: a message not
 * deleted is delivered again after the visibility timeout, and one whose
 * item was written then finds it (a duplicate delivery).
 */
static void
consumer_give_up_cb(evutil_socket_t fd, short what, void *arg)
{
	struct consumer	*c = arg;

	struct consumer_batch	*b;
	int			 pending = 0, msgs = 0, deletes = 0;

	(void)fd;
	(void)what;
	TAILQ_FOREACH(b, &c->batches, entry) {
		pending += b->pending;
		deletes += b->deleting;
		msgs += b->n;
	}
	if (c->n_batches == 0) {
		/* Else finished in the same turn. */
		if (c->receiving > 0)
			log_warnx("stopping with %d ReceiveMessage(s) unanswered "
			    "%ld ms after the stop signal: the messages they "
			    "took, if any, come back after the visibility "
			    "timeout", c->receiving, proc_give_up_ms(c->conf));
		event_base_loopbreak(c->base);
		return;
	}
	/* None of these batches is deleted: all of it comes back, the items
	 * written meanwhile as duplicate deliveries. */
	if (pending > 0)
		log_warnx("stopping with %d PutItem(s) of the %d message(s) in "
		    "hand unanswered %ld ms after the stop signal: SQS delivers "
		    "the messages again after the visibility timeout",
		    pending, msgs, proc_give_up_ms(c->conf));
	else
		log_warnx("stopping with %d DeleteMessageBatch(es) of the %d "
		    "message(s) in hand unanswered %ld ms after the stop "
		    "signal: SQS delivers them again after the visibility "
		    "timeout (their items are written)", deletes, msgs,
		    proc_give_up_ms(c->conf));
	event_base_loopbreak(c->base);
}

/* deadline: the master kills at shutdown_timeout (a stop, not a reload's
 * retirement); a retired consumer may get a stop later, see
 * proc_worker_signals(). */
static void
consumer_on_stop(void *arg, int deadline)
{
	struct consumer		*c = arg;
	struct consumer_batch	*b;
	int			 msgs = 0;

	if (consumer_stop_now(c, deadline)) {
		/*
		 * Only an idle long poll or a backoff wait: end now.  An
		 * abandoned poll may still take a message, which SQS shows
		 * again after the visibility timeout.  Receives started for
		 * a backlog are waited for (up to the give-up below) and what
		 * they bring is finished: abandoned, each would leave up to
		 * max_messages messages invisible until then.  Retired by a
		 * reload, with no deadline, the consumer lets its polls end
		 * (wait_time, 20 s at most) and finishes what they bring, so
		 * that a reload delays no message.
		 */
		c->stopping = 1;
		evtimer_del(c->retry);
		event_base_loopbreak(c->base);
		return;
	}
	c->stopping = 1;
	c->stop_deadline = deadline;
	evtimer_del(c->retry);
	TAILQ_FOREACH(b, &c->batches, entry) {
		msgs += b->n;
		/* Throttled puts waiting for their retry: given up now. */
		if (b->retry != NULL && evtimer_pending(b->retry, NULL)) {
			evtimer_del(b->retry);
			event_active(b->retry, EV_TIMEOUT, 0);
		}
	}
	if (deadline && (c->n_batches > 0 || c->receiving > 0) &&
	    proc_give_up_arm(c->give_up, c->conf))
		log_info("stopping after the %d message(s) in hand and what "
		    "%d receive(s) in flight bring (giving them up after "
		    "%ld ms)", msgs, c->receiving, proc_give_up_ms(c->conf));
}

int
consumer_main(struct conf *conf, int index)
{
	struct consumer		 c;
	struct consumer_batch	*b;
	char			 types[512] = "";
	size_t			 off;
	int			 status = 1, i, n;

	log_init("consumer", index);
	proc_set_title("outboxd: consumer %d", index);
	srandom((unsigned int)getpid() ^ (unsigned int)time(NULL));

	memset(&c, 0, sizeof c);
	c.conf = conf;
	TAILQ_INIT(&c.batches);
	if (conf->sqs_queue_url == NULL || conf->dynamodb_table == NULL) {
		log_error("consumer needs sqs queue_url and dynamodb table");
		return (OUTBOXD_EX_CONFIG);
	}
	/* Never the parent's loop or connections: our own after fork. */
	if ((c.base = event_base_new()) == NULL) {
		log_error("consumer: cannot create event base");
		return (1);
	}
	if ((c.hc = httpc_new(c.base)) == NULL ||
	    (c.retry = evtimer_new(c.base, consumer_retry_cb, &c)) == NULL ||
	    (c.give_up = evtimer_new(c.base, consumer_give_up_cb, &c)) == NULL ||
	    proc_worker_signals(c.base, consumer_on_stop, &c) == -1) {
		log_error("consumer: cannot set up the event loop");
		goto out;
	}
	for (i = 0, off = 0; i < conf->consumer.n_event_types &&
	    off < sizeof types; i++) {
		n = snprintf(types + off, sizeof types - off, "%s%s",
		    i > 0 ? ", " : "", conf->consumer.event_types[i]);
		off = n < 0 ? sizeof types : off + (size_t)n;
	}
	log_info("consuming %s into table %s (wait %d s, up to %d messages "
	    "a batch, %d batches at once; event types written: %s; others "
	    "are skipped)", conf->sqs_queue_url, conf->dynamodb_table,
	    conf->consumer.wait_time, conf->consumer.max_messages,
	    conf->consumer.concurrency, types);

	/* Our own AWS credentials, fetched on our loop (creds.c); until
	 * they come, ReceiveMessage is not started and retried with
	 * backoff. */
	if (creds_start(c.base, conf, CREDS_SLOT_CONSUMER + index, NULL) ==
	    -1) {
		status = OUTBOXD_EX_CONFIG;
		goto out;
	}
	consumer_receive(&c);
	if (event_base_dispatch(c.base) == -1) {
		log_error("consumer: event loop failed");
		goto out;
	}
	proc_worker_done();
	log_info("consumer stopped");
	status = 0;

out:
	/* Aborts an abandoned long poll; no callback runs. */
	httpc_free(c.hc);
	creds_stop();
	while ((b = TAILQ_FIRST(&c.batches)) != NULL) {
		TAILQ_REMOVE(&c.batches, b, entry);
		consumer_batch_free(b);
	}
	if (c.retry != NULL)
		event_free(c.retry);
	if (c.give_up != NULL)
		event_free(c.give_up);
	event_base_free(c.base);
	return (status);
}
