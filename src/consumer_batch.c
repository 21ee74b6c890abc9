/*
 * consumer_batch.c - one batch of the consumer worker (consumer.c): the
 * messages one ReceiveMessage brought, each mapped to a fulfillment item
 * and written with its own conditional PutItem, all of them at once;
 * throttled writes sent again after a backoff; then the done messages
 * deleted with one DeleteMessageBatch, and only those: a message whose
 * write failed stays for SQS to deliver again.
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

#include <sys/queue.h>

#include <event2/event.h>
#include <cjson/cJSON.h>

#include "outboxd.h"
#include "broker.h"
#include "consumer.h"
#include "metrics_api.h"

#define CONSUMER_WRITE_TIMEOUT	10000L	/* ms per PutItem / delete */
#define CONSUMER_PUT_TRIES	4	/* a throttled PutItem, in all */

/* A DynamoDB or SQS that is down fails every message: one line per
 * LOG_LIMIT_MS for each kind of failure. */
static struct log_limit	consumer_put_limit;
static struct log_limit	consumer_delete_limit;

static void	consumer_put(struct consumer_job *);

void
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
void
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
