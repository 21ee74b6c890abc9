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
 * backoff (CONSUMER_PUT_TRIES in all), and no batch is received while the
 * backoff runs: a throttled table gets fewer requests, not more.  Left
 * throttled, the message stays in the queue for a later delivery.
 *
 * A queue may carry events of other types and other services: only a
 * message whose EventType attribute is one of consumer.event_types is
 * written.  Any other, or one without the attribute, is not ours to
 * judge: it is deleted with the done ones, unread and unwritten, and
 * counted as skipped; the log names each such type once per worker, not
 * each message (a busy shared queue would flood it).
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

#define CONSUMER_BACKOFF_MIN	100L	/* ms */
#define CONSUMER_BACKOFF_MAX	5000L	/* ms */
#define CONSUMER_WRITE_TIMEOUT	10000L	/* ms per PutItem / delete */
#define CONSUMER_POLL_MARGIN	10000L	/* ms on top of the long poll */
#define CONSUMER_SHORT_POLL	1000L	/* ms between empty short polls */
#define CONSUMER_PUT_TRIES	4	/* a throttled PutItem, in all */

/* Event types skipped that a worker names in the log once each (more
 * are only counted), compared by their first CONSUMER_TYPE_SHOWN bytes. */
#define CONSUMER_SKIP_NAMED	16
#define CONSUMER_TYPE_SHOWN	128

struct consumer;

/* A DynamoDB or SQS that is down fails every message: one line per
 * LOG_LIMIT_MS for each kind of failure. */
static struct log_limit	consumer_put_limit;
static struct log_limit	consumer_delete_limit;

struct consumer_job {
	struct consumer_batch	*batch;
	int			 index;
	int			 done;		/* written or already there */
	int			 tries;		/* PutItems sent */
	int			 throttled;	/* the last one was */
	char			*order_id;
	char			*put;		/* its PutItem body, kept for a
						   retry; NULL when none is due */
	size_t			 put_len;
};

struct consumer_batch {
	TAILQ_ENTRY(consumer_batch) entry;
	struct consumer		*c;
	struct sqs_message	*msgs;
	struct consumer_job	*jobs;
	struct event		*retry;		/* backoff of throttled puts */
	int			 n;
	int			 pending;	/* PutItems in flight */
	int			 deleting;	/* DeleteMessageBatch in flight */
};
TAILQ_HEAD(consumer_batches, consumer_batch);

struct consumer {
	struct conf		*conf;
	struct event_base	*base;
	struct httpc		*hc;
	struct event		*retry;		/* backoff before a receive */
	struct event		*give_up;	/* stopping: the messages in hand */
	struct consumer_batches	 batches;	/* messages in hand */
	int			 n_batches;
	int			 receiving;	/* ReceiveMessages in flight */
	int			 backlog;	/* the last answer had messages:
						   receive into every free slot */
	int			 throttles;	/* throttled PutItems in a row */
	int64_t			 throttled_until; /* µs, monotonic: no
						   receive before */
	int			 stopping;
	int			 stop_deadline;	/* a stop, not a retirement:
						   no waiting for a poll */
	int			 fails;		/* receive failures in a row */
	char			 last_error[256];
	/* skipped event types already named in the log */
	char			 skip_named[CONSUMER_SKIP_NAMED]
				    [CONSUMER_TYPE_SHOWN];
	int			 n_skip_named;
	int			 skip_untyped_named; /* no EventType */
	int			 skip_more_named; /* "more types" said */
};

static void	consumer_receive(struct consumer *);
static void	consumer_next(struct consumer *);
static void	consumer_put(struct consumer_job *);

static void
consumer_batch_free(struct consumer_batch *b)
{
	int	i;

	for (i = 0; i < b->n; i++) {
		free(b->jobs[i].order_id);
		free(b->jobs[i].put);
	}
	free(b->jobs);
	if (b->retry != NULL)
		event_free(b->retry);
	sqs_messages_free(b->msgs, b->n);
	free(b);
}

/* The batch is done with (deleted, or given up to SQS's redelivery):
 * free it and receive again if there is room. */
static void
consumer_batch_end(struct consumer_batch *b)
{
	struct consumer	*c = b->c;

	TAILQ_REMOVE(&c->batches, b, entry);
	c->n_batches--;
	consumer_batch_free(b);
	consumer_next(c);
}

/* Delay before receive attempt number fails+1: 100 ms doubling to 5 s,
 * half of it random ("equal jitter") so workers do not retry in step. */
static long
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
static void
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
consumer_deleted(const struct aws_result *res, void *arg)
{
	struct consumer_batch	*b = arg;
	char			**errors;
	int			 i, n = 0, k;

	for (i = 0; i < b->n; i++)
		n += b->jobs[i].done;
	if (!res->ok) {
		log_limited(&consumer_delete_limit, LOG_LEVEL_WARN,
		    "DeleteMessageBatch of %d messages failed: %s%s%s; "
		    "they will be delivered again (their writes are done)", n,
		    res->error_type != NULL ? res->error_type : "",
		    res->error_type != NULL ? ": " : "",
		    res->error_message != NULL ? res->error_message : "?");
	} else if ((errors = calloc(n, sizeof *errors)) != NULL) {
		if (sqs_delete_batch_parse(res->json, n, errors) > 0) {
			/* Entry k is the k-th done job. */
			for (i = 0, k = 0; i < b->n; i++) {
				if (!b->jobs[i].done)
					continue;
				if (errors[k] != NULL)
					log_limited_kv(&consumer_delete_limit,
					    LOG_LEVEL_WARN, (const char *[]){
					    "order_id", b->jobs[i].order_id,
					    "message_id",
					    b->msgs[i].message_id, NULL },
					    "message not deleted: %s",
					    errors[k]);
				k++;
			}
		}
		for (k = 0; k < n; k++)
			free(errors[k]);
		free(errors);
	}
	consumer_batch_end(b);
}

/* Every write of the batch has answered: delete the done messages. */
static void
consumer_delete(struct consumer_batch *b)
{
	struct consumer	 *c = b->c;
	const char	**handles;
	char		 *body;
	size_t		  len;
	int		  i, n = 0;

	if ((handles = calloc(b->n, sizeof *handles)) == NULL) {
		log_warn("consumer_delete");
		goto end;
	}
	for (i = 0; i < b->n; i++) {
		if (b->jobs[i].done)
			handles[n++] = b->msgs[i].receipt_handle;
	}
	if (n == 0) {
		free(handles);
		goto end;
	}
	body = sqs_delete_batch_body(c->conf->sqs_queue_url, handles, n, &len);
	free(handles);
	if (body == NULL) {
		log_warnx("cannot build DeleteMessageBatch for %d messages", n);
		goto end;
	}
	if (aws_call(c->hc, c->conf, AWS_SQS, "DeleteMessageBatch", body, len,
	    CONSUMER_WRITE_TIMEOUT, consumer_deleted, b, NULL) == -1) {
		log_warnx("DeleteMessageBatch of %d messages not started; "
		    "they will be delivered again", n);
		free(body);
		goto end;
	}
	free(body);
	b->deleting = 1;
	return;

end:
	consumer_batch_end(b);
}

/* DynamoDB's answer to too many requests (HTTP 400 with these types). */
static int
consumer_throttled(const struct aws_result *res)
{
	return (res->error_type != NULL &&
	    (aws_throttled(res->error_type, NULL) ||
	    strstr(res->error_type, "ProvisionedThroughputExceeded") != NULL ||
	    strstr(res->error_type, "RequestLimitExceeded") != NULL));
}

/* The throttled puts' backoff ran out: send them again (or, stopping,
 * give them up and delete what is done). */
static void
consumer_retry_puts_cb(evutil_socket_t fd, short what, void *arg)
{
	struct consumer_batch	*b = arg;
	int			 i;

	(void)fd;
	(void)what;
	for (i = 0; i < b->n; i++) {
		if (!b->jobs[i].throttled)
			continue;
		b->jobs[i].throttled = 0;
		if (b->c->stopping) {
			free(b->jobs[i].put);
			b->jobs[i].put = NULL;
		} else
			consumer_put(&b->jobs[i]);
	}
	if (b->pending == 0)
		consumer_delete(b);
}

/*
 * Every PutItem of the batch has answered.  Throttled ones with tries
 * left wait out a backoff (and hold the next receive for as long);
 * then the done messages are deleted.
 */
static void
consumer_batch_written(struct consumer_batch *b)
{
	struct consumer	*c = b->c;
	struct timeval	 tv;
	long		 delay;
	int		 i, again = 0;

	for (i = 0; i < b->n; i++)
		again += b->jobs[i].throttled;
	if (again == 0 || c->stopping) {
		consumer_delete(b);
		return;
	}
	if (b->retry == NULL &&
	    (b->retry = evtimer_new(c->base, consumer_retry_puts_cb, b)) ==
	    NULL) {
		log_warnx("cannot arm the PutItem retry: %d message(s) left "
		    "for a later delivery", again);
		consumer_delete(b);
		return;
	}
	delay = consumer_backoff(c->throttles);
	if (clock_mono_us() + delay * 1000 > c->throttled_until)
		c->throttled_until = clock_mono_us() + delay * 1000;
	log_limited(&consumer_put_limit, LOG_LEVEL_WARN, "DynamoDB throttled "
	    "%d PutItem(s): retrying in %ld ms, no messages received "
	    "meanwhile", again, delay);
	tv = clock_tv(delay);
	evtimer_add(b->retry, &tv);
}

static void
consumer_put_done(const struct aws_result *res, void *arg)
{
	struct consumer_job	*job = arg;
	struct consumer_batch	*b = job->batch;
	struct sqs_message	*m = &b->msgs[job->index];

	const char		*kv[] = { "order_id", job->order_id,
				    "message_id", m->message_id, NULL };

	if (res->ok || (res->error_type != NULL && strcmp(res->error_type,
	    "ConditionalCheckFailedException") == 0)) {
		free(job->put);
		job->put = NULL;
		b->c->throttles = 0;
	}
	if (res->ok) {
		job->done = 1;
		metrics_consumer(METRICS_CONSUMER_PROCESSED);
		log_kv(LOG_LEVEL_DEBUG, kv, "order fulfilled");
		log_limit_end(&consumer_put_limit, NULL, "PutItem");
	} else if (res->error_type != NULL &&
	    strcmp(res->error_type, "ConditionalCheckFailedException") == 0) {
		/* An earlier delivery wrote it. */
		job->done = 1;
		metrics_consumer(METRICS_CONSUMER_DUPLICATE);
		log_kv(LOG_LEVEL_INFO, kv, "order already fulfilled "
		    "(duplicate delivery)");
	} else if (consumer_throttled(res) && job->tries < CONSUMER_PUT_TRIES) {
		job->throttled = 1;
		b->c->throttles++;
	} else {
		metrics_consumer(METRICS_CONSUMER_ERROR);
		log_limited_kv(&consumer_put_limit, LOG_LEVEL_WARN, kv,
		    "PutItem failed, message left for a later attempt: "
		    "%s%s%s%s",
		    res->status == 0 ? "transport: " : "",
		    res->error_type != NULL ? res->error_type : "",
		    res->error_type != NULL ? ": " : "",
		    res->error_message != NULL ? res->error_message : "?");
	}
	if (!job->throttled) {
		free(job->put);
		job->put = NULL;
	}
	if (--b->pending == 0)
		consumer_batch_written(b);
}

/* Send job's PutItem (job->put); on failure to start, the message is
 * left for a later delivery. */
static void
consumer_put(struct consumer_job *job)
{
	struct consumer_batch	*b = job->batch;
	struct consumer		*c = b->c;

	job->tries++;
	if (aws_call(c->hc, c->conf, AWS_DYNAMODB, "PutItem", job->put,
	    job->put_len, CONSUMER_WRITE_TIMEOUT, consumer_put_done, job,
	    NULL) == -1) {
		metrics_consumer(METRICS_CONSUMER_ERROR);
		log_kv(LOG_LEVEL_WARN, (const char *[]){ "order_id",
		    job->order_id, NULL }, "PutItem not started, "
		    "message left for a later attempt");
		free(job->put);
		job->put = NULL;
	} else
		b->pending++;
}

/* 1 if a message with this EventType attribute (NULL: none) is ours to
 * write: one of consumer.event_types. */
static int
consumer_wanted(const struct conf *conf, const char *event_type)
{
	int	i;

	if (event_type == NULL)
		return (0);
	for (i = 0; i < conf->consumer.n_event_types; i++)
		if (strcmp(event_type, conf->consumer.event_types[i]) == 0)
			return (1);
	return (0);
}

/*
 * Message i is of a type not ours: mark it done (deleted with the batch,
 * nothing written), count it, and log the type only the first time this
 * worker skips it; each message gets a debug line.
 */
static void
consumer_skip(struct consumer *c, struct consumer_batch *b, int i)
{
	struct sqs_message	*m = &b->msgs[i];
	char			 type[CONSUMER_TYPE_SHOWN];
	const char		*kv[] = { "event_type", NULL, "message_id",
				    m->message_id, NULL };
	int			 k, named = 0;

	b->jobs[i].done = 1;
	metrics_consumer(METRICS_CONSUMER_SKIPPED);
	if (m->event_type == NULL) {
		named = c->skip_untyped_named;
		c->skip_untyped_named = 1;
		if (!named)
			log_kv(LOG_LEVEL_INFO, kv, "skipping messages without "
			    "an EventType attribute: deleted unwritten (further "
			    "ones are counted in outboxd_consumer_messages_total"
			    "{outcome=\"skipped\"}, not logged)");
		log_kv(LOG_LEVEL_DEBUG, kv, "message without an EventType "
		    "attribute skipped");
		return;
	}
	log_utf8_copy(type, sizeof type, m->event_type);
	kv[1] = type;
	for (k = 0; k < c->n_skip_named && !named; k++)
		named = strcmp(c->skip_named[k], type) == 0;
	if (!named && c->n_skip_named < CONSUMER_SKIP_NAMED) {
		memcpy(c->skip_named[c->n_skip_named++], type, sizeof type);
		log_kv(LOG_LEVEL_INFO, kv, "skipping messages of an event type "
		    "not in consumer.event_types: deleted unwritten (further "
		    "ones are counted in outboxd_consumer_messages_total"
		    "{outcome=\"skipped\"}, not logged)");
	} else if (!named && !c->skip_more_named) {
		c->skip_more_named = 1;
		log_kv(LOG_LEVEL_INFO, kv, "skipping messages of more than %d "
		    "event types not in consumer.event_types: further types "
		    "are not named", CONSUMER_SKIP_NAMED);
	}
	log_kv(LOG_LEVEL_DEBUG, kv, "message of an event type not in "
	    "consumer.event_types skipped");
}

/* Map and write every message of a batch concurrently; skip those of
 * other event types. */
static void
consumer_process(struct consumer *c, struct sqs_message *msgs, int n)
{
	struct consumer_batch	*b;
	struct consumer_job	*job;
	struct fulfillment	 f;
	char			 err[256], now[32], *body;
	size_t			 len;
	int			 i;

	if ((b = calloc(1, sizeof *b)) == NULL ||
	    (b->jobs = calloc(n, sizeof *b->jobs)) == NULL) {
		log_warn("consumer_process");
		free(b);
		sqs_messages_free(msgs, n);
		consumer_receive_failed(c, "out of memory");
		return;
	}
	b->c = c;
	b->msgs = msgs;
	b->n = n;
	TAILQ_INSERT_TAIL(&c->batches, b, entry);
	c->n_batches++;

	for (i = 0; i < n; i++) {
		job = &b->jobs[i];
		job->batch = b;
		job->index = i;
		if (!consumer_wanted(c->conf, msgs[i].event_type)) {
			consumer_skip(c, b, i);
			continue;
		}
		if (ddb_fulfillment_parse(msgs[i].body, msgs[i].body_len, &f,
		    err, sizeof err) == -1) {
			metrics_consumer(METRICS_CONSUMER_ERROR);
			log_kv(LOG_LEVEL_ERROR, (const char *[]){ "message_id",
			    msgs[i].message_id, NULL }, "message (received %ld "
			    "times) cannot be mapped to a fulfillment, left "
			    "for the dead-letter queue: %s",
			    msgs[i].receive_count, err);
			continue;
		}
		ddb_timestamp(now, sizeof now, clock_wall_us() / 1000);
		body = ddb_fulfillment_put_body(c->conf->dynamodb_table, &f,
		    now, &len);
		job->order_id = f.order_id;	/* keep for the log */
		f.order_id = NULL;
		ddb_fulfillment_clear(&f);
		if (body == NULL) {
			metrics_consumer(METRICS_CONSUMER_ERROR);
			log_kv(LOG_LEVEL_WARN, (const char *[]){ "order_id",
			    job->order_id, NULL }, "cannot build PutItem");
			continue;
		}
		job->put = body;
		job->put_len = len;
		consumer_put(job);
	}
	if (b->pending == 0)
		consumer_delete(b);
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
static void
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
