/*
 * broker.h - the way out to the brokers, below the relay and consumer
 * workers: the HTTP client (httpc.c), AWS calls signed with SigV4
 * (aws.c), the SQS and DynamoDB codecs (sqs.c, ddb.c, no I/O), and the
 * sinks the relay publishes through (sink_sqs.c, sink_http.c).  Grouped
 * by the file that defines them; outboxd.h's conventions apply.
 */
#ifndef OUTBOXD_BROKER_H
#define OUTBOXD_BROKER_H

#include "outboxd.h"

struct curl_slist;

/* ---- httpc.c: libcurl multi interface driven by a libevent loop ------- */

struct httpc;

struct httpc_request {
	const char		*url;
	const char		*method;	/* "GET", "PUT"; NULL = POST */
	struct curl_slist	*headers;	/* taken over: httpc frees */
	const char		*body;		/* copied */
	size_t			 body_len;
	const char		*aws_sigv4;	/* "aws:amz:REGION:SERVICE" or NULL */
	const char		*username;	/* SigV4 access key id */
	const char		*password;	/* SigV4 secret */
	long			 timeout;	/* ms, whole request; 0 = none */
	void			(*arg_free)(void *); /* frees the callback's
						   arg when httpc_free() aborts
						   the request; NULL: none */
};

struct httpc_response {
	int		 curl_code;	/* CURLcode; 0 = a response arrived */
	const char	*curl_error;	/* text when curl_code != 0 */
	long		 status;	/* HTTP status, 0 when no response */
	const char	*body;		/* NUL-terminated; valid during the cb */
	size_t		 body_len;
	long		 retry_after;	/* s from Retry-After, -1 if absent */
};

typedef void	 httpc_cb(const struct httpc_response *, void *arg);

/* Connections a client keeps to one host; requests beyond them wait in
 * libcurl, where their timeout already runs. */
#define HTTPC_MAX_HOST_CONNS	16

/* A client bound to base; reuses connections.  NULL on failure. */
struct httpc	*httpc_new(struct event_base *base);
/* Abort what is in flight (callbacks are not called; each request's
 * arg_free is) and free. */
void		 httpc_free(struct httpc *);
/* Start a POST (or r->method); cb runs exactly once from the event loop, later.
 * Returns -1 (cb never runs) if the request could not be started. */
int		 httpc_post(struct httpc *, const struct httpc_request *,
		    httpc_cb *cb, void *arg);
/* Append the header "fmt" (printf-style, "Name: value") to *list for an
 * httpc_request; on failure returns -1 and frees the whole list (*list =
 * NULL), so callers check once after building it. */
int		 httpc_header(struct curl_slist **list, const char *fmt, ...)
		    OUTBOXD_PRINTF(2, 3);

/* ---- aws.c: AWS JSON protocol over httpc, signed with SigV4 ----------- */

enum aws_service { AWS_SQS, AWS_DYNAMODB };

struct aws_result {
	int		 ok;		/* HTTP 2xx and a JSON body */
	long		 status;	/* HTTP status, 0 = transport error */
	struct cJSON	*json;		/* parsed body or NULL; freed after cb */
	const char	*error_type;	/* "ConditionalCheckFailedException",
					   "QueueDoesNotExist", ... or NULL */
	const char	*error_message;	/* service or transport text, or NULL */
	long		 retry_after;	/* s, -1 if none */
};

typedef void	 aws_cb(const struct aws_result *, void *arg);

/*
 * Call ACTION (e.g. "SendMessageBatch", "PutItem") of service with the JSON
 * request body, signed with SigV4 for conf->aws.region (AWS Signature
 * Version 4; JSON 1.0 protocol: X-Amz-Target + application/x-amz-json-1.0;
 * X-Amz-Security-Token when a session token is set).  timeout in ms.  cb
 * runs once, later; if httpc_free() aborts the call first, cb never runs
 * and arg_free (unless NULL) is called with arg instead.  Returns -1 (cb
 * never runs, arg is the caller's) if the request could not be started.
 */
int		 aws_call(struct httpc *, const struct conf *, enum aws_service,
		    const char *action, const char *body, size_t body_len,
		    long timeout, aws_cb *cb, void *arg,
		    void (*arg_free)(void *));

/* A request body: root as compact JSON text (caller frees), its length
 * in *len unless len is NULL; root is freed.  NULL if out of memory. */
char		*aws_json_print(struct cJSON *root, size_t *len);

/* ---- sqs.c: SQS JSON request bodies and replies (no I/O) -------------- */

struct outbox_msg;			/* sink_sqs.c section below */

/* One message from ReceiveMessage; strings are malloc'd. */
struct sqs_message {
	char		*message_id;
	char		*receipt_handle;
	char		*body;
	size_t		 body_len;	/* bytes */
	char		*event_type;	/* EventType attribute or NULL */
	long		 receive_count;	/* ApproximateReceiveCount or 0 */
};

/* 1 if the queue URL names a FIFO queue (ends in ".fifo"), else 0. */
int		 sqs_queue_is_fifo(const char *queue_url);
/*
 * SendMessageBatch body for msgs[0..n-1] (AWS SQS API: SendMessageBatch):
 * body = payload, String message attributes EventType and the row's
 * headers, values byte for byte.  A message whose outcome is
 * SINK_REJECTED (the relay refused it) is left out.  Returns the JSON
 * text (caller frees) and its length in *len, or NULL (also when every
 * message was left out).
 */
char		*sqs_send_batch_body(const char *queue_url,
		    const struct outbox_msg *msgs, int n, size_t *len);
/*
 * Set outcome, reason and error of every msg from a SendMessageBatch
 * reply (Successful -> SINK_SENT; Failed with SenderFault ->
 * SINK_REJECTED, else SINK_RETRY; in neither list -> SINK_RETRY).  A
 * message already SINK_REJECTED was not sent and is left as it is; any
 * other's previous error pointer is overwritten, not freed.  Returns the
 * number of SINK_SENT.
 */
int		 sqs_send_batch_parse(const struct cJSON *reply,
		    struct outbox_msg *msgs, int n);
/* The enum sink_reason of a SendMessageBatch that failed as a whole:
 * HTTP status (0 = no answer) and the error's type and message (either
 * may be NULL). */
int		 sqs_send_batch_reason(long status, const char *type,
		    const char *message);
/* ReceiveMessage body (AWS SQS API: ReceiveMessage); wait_time in s.
 * Caller frees; NULL on failure. */
char		*sqs_receive_body(const char *queue_url, int wait_time,
		    int max_messages, size_t *len);
/* Parse a ReceiveMessage reply ({} = none) into *out (caller frees with
 * sqs_messages_free) and *n.  -1 if a message lacks ReceiptHandle/Body. */
int		 sqs_receive_parse(const struct cJSON *reply,
		    struct sqs_message **out, int *n);
void		 sqs_messages_free(struct sqs_message *, int n);
/* DeleteMessageBatch body (AWS SQS API: DeleteMessageBatch); entry Id i is
 * the decimal index of handles[i].  Caller frees; NULL on failure. */
char		*sqs_delete_batch_body(const char *queue_url,
		    const char *const *handles, int n, size_t *len);
/* Parse a DeleteMessageBatch reply: errors[i] = NULL if deleted, else a
 * malloc'd reason (caller frees).  Returns the number not deleted. */
int		 sqs_delete_batch_parse(const struct cJSON *reply, int n,
		    char **errors);

/* ---- ddb.c: DynamoDB JSON request bodies and items (no I/O) ----------- */

/* The fulfillment written for one order event; strings malloc'd. */
struct fulfillment {
	char		*order_id;
	char		*customer_id;
	int64_t		 amount_cents;
};

/*
 * Map an SQS message body (the outbox payload: {"orderId", "customerId",
 * "amountCents", ...}) to f (clear with ddb_fulfillment_clear).  On a
 * malformed body returns -1 with the reason in err (errlen bytes).
 */
int		 ddb_fulfillment_parse(const char *body, size_t len,
		    struct fulfillment *f, char *err, size_t errlen);
void		 ddb_fulfillment_clear(struct fulfillment *);
/* RFC 3339 UTC with milliseconds ("2025-01-02T03:04:05.678Z") of ms since
 * the epoch into buf (at least 25 bytes).  -1 if it does not fit. */
int		 ddb_timestamp(char *buf, size_t len, int64_t ms);
/* Conditional PutItem body (AWS DynamoDB API: PutItem) for f with
 * status "received" and createdAt = created_at, only if no item with this
 * orderId exists.  Caller frees; NULL on failure. */
char		*ddb_fulfillment_put_body(const char *table,
		    const struct fulfillment *f, const char *created_at,
		    size_t *len);
/* Strongly consistent GetItem body by orderId (AWS DynamoDB API: GetItem).
 * Caller frees; NULL on failure. */
char		*ddb_get_body(const char *table, const char *order_id,
		    size_t *len);
/* Convert a DynamoDB item (attribute name -> AttributeValue) to plain JSON
 * (S -> string, N -> number, M -> object, ...).  Caller cJSON_Delete()s;
 * NULL if item is not an object or holds an unknown type. */
struct cJSON	*ddb_item_to_json(const struct cJSON *item);

/* ---- sinks: where relays publish (sink_sqs.c, sink_http.c) ------------ */

enum sink_outcome {
	SINK_SENT,		/* broker acknowledged */
	SINK_RETRY,		/* may succeed later (5xx, timeout, throttling) */
	SINK_REJECTED		/* can never succeed (SenderFault, too large) */
};

/*
 * Why a publish attempt failed, set where the failure is seen (the sink
 * for a broker's answer, the relay for a message over
 * relay.max_message_size); outboxd_publish_failures_total counts by it.
 * The order is the exposition's.
 */
enum sink_reason {
	SINK_REASON_TRANSPORT,	/* no answer: connect, TLS, timeout, 408 */
	SINK_REASON_THROTTLED,	/* 429, or the broker says it throttles */
	SINK_REASON_SERVER,	/* 5xx, or the broker failed an entry */
	SINK_REASON_CLIENT,	/* a 4xx that is retried (SQS: the queue
				   URL, a permission) */
	SINK_REASON_REJECTED,	/* can never succeed (SINK_REJECTED) */
	SINK_REASON_TOO_LARGE,	/* over relay.max_message_size */
	SINK_REASON_OTHER,	/* none of these (could not even start) */
	SINK_NREASONS
};

/* A header of a row (its headers column): an SQS or SNS message
 * attribute of type String, a webhook request header. */
struct outbox_header {
	char		*name;
	char		*value;
};

/* One outbox row in flight; the relay owns the strings. */
struct outbox_msg {
	int64_t		 id;
	char		*event_type;
	char		*key;		/* ordering key */
	char		*payload;	/* JSON text */
	size_t		 payload_len;
	struct outbox_header *headers;	/* the row's, in the column's order */
	int		 nheaders;
	int		 attempts;	/* publish attempts before this one */
	int64_t		 created_ms;	/* the row's created_at, ms since the
					   epoch (publish latency) */
	/* filled by the sink before done() */
	enum sink_outcome outcome;
	enum sink_reason reason;	/* unless SINK_SENT */
	char		*error;		/* malloc'd reason, NULL when sent */
	long		 retry_after;	/* ms the broker asked us to wait
					   (HTTP Retry-After), -1 = none */
	int		 answered;	/* set by a sink that answers message
					   by message: this one's outcome is
					   final though done() has not run
					   (a relay giving up at a stop
					   records it); never set by a sink
					   whose call is answered whole */
};

/* Runs once per publish call, from the event loop, with every message's
 * outcome filled in; never if httpc_free() aborts the call first (a relay
 * giving up at a stop), when the sink frees its own state and the msgs
 * stay the caller's. */
typedef void	 sink_done_cb(struct outbox_msg *msgs, int n, void *arg);

/* The most messages any sink takes in one call (max_batch below). */
#define SINK_MAX_BATCH		10

/*
 * What a relay keeps for one destination between publish calls: the
 * configuration it publishes by, and the rate limits of the sink's log
 * lines (a destination that is down fails every call; another one's
 * lines must still be seen).
 */
struct sink_target {
	const struct conf		*conf;
	const struct conf_destination	*dest;
	struct log_limit		 call_limit;	/* a failed call */
	struct log_limit		 entry_limit;	/* a failed entry */
};

/*
 * A kind of destination the relay publishes to (a destination's sink =),
 * described so that the relay needs to know nothing else about it.
 */
struct sink {
	const char	*name;		/* "sqs", "http" */
	const char	*target;	/* what log lines call it: "SQS
					   (SendMessageBatch)", "the webhook" */
	const char	*unanswered;	/* what they call messages of a call
					   still unanswered while others of
					   it are (see answered) */
	int		 max_batch;	/* messages per publish call, 1 to
					   SINK_MAX_BATCH */
	int		 slots;		/* publish calls in flight at once:
					   no more requests than httpc keeps
					   connections to the host, since one
					   waiting in libcurl for a connection
					   already runs down its timeout */
	size_t		 msg_overhead;	/* bytes a message counts toward
					   relay.max_message_size besides its
					   payload and event type */
	/*
	 * Publish msgs[0..n-1] (n 1..max_batch); done runs once, later,
	 * with every outcome filled in.  A message whose outcome is
	 * SINK_REJECTED on entry (the relay decided: too large) is not
	 * sent.  Returns -1 (done never runs) if the call could not be
	 * started.
	 */
	int		(*publish)(struct httpc *, struct sink_target *,
			    struct outbox_msg *msgs, int n, sink_done_cb *done,
			    void *arg);
	/* The part of the destination that may be logged (a URL may carry a
	 * token): *text and its length in *len. */
	void		(*loggable)(const struct sink_target *,
			    const char **text, int *len);
};

/* The sink of a destination's sink = (enum conf_sink). */
const struct sink *sink_of(int);
/* Bytes a header counts toward a message's size at the sink (SQS and SNS
 * count an attribute's name, type "String" and value). */
size_t		 sink_header_size(const struct outbox_header *);
/*
 * A row's headers column (JSON text of len bytes, an object of strings;
 * NULL or empty: none) into *out (caller frees with sink_headers_free;
 * NULL when none) and their count into *n.  Returns 0, or -1 if it is
 * not an object of strings or memory ran out (nothing to free then).
 */
int		 sink_headers_parse(const char *json, size_t len,
		    struct outbox_header **out, int *n);
void		 sink_headers_free(struct outbox_header *, int n);
/* The header rules of outbox(7), HEADERS (sql/schema.sql checks them when
 * a row is written): at most SINK_HEADERS_MAX headers, names 1 to
 * SINK_HEADER_NAME_MAX of [A-Za-z0-9_.-] (SQS and SNS attribute names),
 * values 1 to SINK_HEADER_VALUE_MAX bytes, all of them together at most
 * SINK_HEADERS_BYTES_MAX bytes. */
#define SINK_HEADERS_MAX	9	/* SQS and SNS: 10 attributes, one is
					   EventType */
#define SINK_HEADER_NAME_MAX	256	/* characters */
#define SINK_HEADER_VALUE_MAX	4096	/* bytes */
#define SINK_HEADERS_BYTES_MAX	8192	/* bytes of every name and value */
/*
 * Check h[0..n-1] against those rules, as sql/schema.sql's
 * outbox_check_headers() does, for rows it did not check (written before
 * it existed, or while it was disabled): a header that SQS or SNS refuses
 * fails its whole batch on every retry, and one that breaks a webhook's
 * header block must never be sent.  Returns 0, or -1 with the rule
 * broken, naming the header (never its value), in why (len bytes).
 */
int		 sink_headers_check(const struct outbox_header *h, int n,
		    char *why, size_t len);

/*
 * relay.sink = "sqs": up to 10 messages with one SendMessageBatch (AWS
 * SQS API: SendMessageBatch): body = payload, message attribute
 * EventType.  Every entry of Successful and Failed is read; an entry
 * missing from both is SINK_RETRY.  For a ".fifo" queue MessageGroupId =
 * key and MessageDeduplicationId = id.  The call is answered whole.
 */
extern const struct sink sink_sqs;

/*
 * relay.sink = "http": one POST per message to conf->webhook.url, all of
 * a call at once, signed per Standard Webhooks (webhook-id = outbox id,
 * webhook-timestamp, webhook-signature "v1,BASE64" of HMAC-SHA256 over
 * "id.timestamp.body" with conf->webhook.secret).  2xx = SINK_SENT; 408,
 * 429, 5xx, connect errors and timeouts = SINK_RETRY (retry_after from
 * Retry-After); other 4xx = SINK_REJECTED.  Each message is answered (and
 * marked answered) as its own answer comes.
 */
extern const struct sink sink_http;

/*
 * A destination's sink = "sns": up to 10 messages with one PublishBatch
 * (AWS SNS API: PublishBatch, query protocol) to its topic_arn; message
 * attributes EventType and the row's headers.  Answered like SQS's.
 */
extern const struct sink sink_sns;

/*
 * The Standard Webhooks signature of one delivery into out (outlen >=
 * WEBHOOK_SIG_LEN + 1): "v1," and the base64 of HMAC-SHA256 over
 * "{id}.{ts}.{body}" (body = len bytes; ts = unix seconds).  The key is
 * the base64-decoded rest of a secret that starts with "whsec_" (padding
 * optional; at most 256 bytes), else the secret's own bytes.  Returns -1
 * if that base64 is not valid, the key is empty, or out is too small.
 */
#define WEBHOOK_SIG_LEN		47	/* "v1," + 44 base64 characters */
int		 webhook_sign(const char *secret, const char *id, int64_t ts,
		    const char *body, size_t len, char *out, size_t outlen);
/* What a webhook answer with this HTTP status means: 2xx SINK_SENT; 408,
 * 429, 5xx and 0 (no answer) SINK_RETRY; anything else, 3xx included
 * (redirects are not followed), SINK_REJECTED. */
enum sink_outcome webhook_outcome(long status);
/* The enum sink_reason of a failed webhook answer with this HTTP status
 * (0: none came) and outcome; answer is its text as the error keeps it:
 * a receiver that says it throttles is throttling whatever the status. */
enum sink_reason webhook_reason(long status, enum sink_outcome outcome,
		    const char *answer);

#endif /* OUTBOXD_BROKER_H */
