/*
 * consumer.h - what the consumer worker's files share: the worker's
 * state, its batches of received messages, and the functions each file
 * lends the other.  Nothing outside the consumer includes it;
 * consumer_main() is in outboxd.h.
 *
 * Who does what: consumer.c is the worker (receive, backoff, stop, the
 * loop); consumer_batch.c one batch of received messages (skip the
 * types not ours, map, write with PutItem, retry throttled writes,
 * delete the done ones).
 */
#ifndef CONSUMER_H
#define CONSUMER_H

#include <sys/queue.h>

#include <stdint.h>

#include "outboxd.h"
#include "broker.h"

/* Event types skipped that a worker names in the log once each (more
 * are only counted), compared by their first CONSUMER_TYPE_SHOWN bytes. */
#define CONSUMER_SKIP_NAMED	16
#define CONSUMER_TYPE_SHOWN	128

struct event;
struct event_base;
struct httpc;
struct consumer;

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

/* ---- consumer.c: the worker ------------------------------------------- */

/* Delay in ms before attempt number fails+1 (a receive, or a throttled
 * batch's PutItems): 100 ms doubling to 5 s, half of it random. */
long		 consumer_backoff(int fails);
/* A receive failed, or its batch could not be taken (why NULL: no AWS
 * credentials yet): log once per distinct error, then receive again
 * after consumer_backoff(). */
void		 consumer_receive_failed(struct consumer *, const char *why);
/* Receive again if there is room and nothing holds it back; stopping,
 * end the loop once nothing is left to wait for.  Called whenever a
 * batch ends. */
void		 consumer_next(struct consumer *);

/* ---- consumer_batch.c: one batch of received messages ----------------- */

/* Take the n messages of one ReceiveMessage (msgs, malloc'd by
 * sqs_receive_parse(): the batch owns them from here, even on failure)
 * as a batch of c's: skip those of other event types, write the others
 * concurrently, then delete the done ones; the batch ends itself (and
 * calls consumer_next()).  Out of memory: the messages are freed, left
 * to SQS's redelivery, and consumer_receive_failed() is called. */
void		 consumer_process(struct consumer *, struct sqs_message *msgs,
		    int n);
/* Free a batch not on c->batches (or taken off it): its jobs, its retry
 * timer, its messages.  Sends nothing: an unfinished batch's messages
 * come back after the visibility timeout. */
void		 consumer_batch_free(struct consumer_batch *);

#endif /* CONSUMER_H */
