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
/* The loop hc runs in. */
struct event_base *httpc_base(const struct httpc *);
/* Start a POST (or r->method); cb runs exactly once from the event loop, later.
 * Returns -1 (cb never runs) if the request could not be started. */
int		 httpc_post(struct httpc *, const struct httpc_request *,
		    httpc_cb *cb, void *arg);
/* Append the header "fmt" (printf-style, "Name: value") to *list for an
 * httpc_request; on failure returns -1 and frees the whole list (*list =
 * NULL), so callers check once after building it. */
int		 httpc_header(struct curl_slist **list, const char *fmt, ...)
		    OUTBOXD_PRINTF(2, 3);
/* Run cb from the event loop, soon, with an empty response (curl_code 0,
 * status 0), for a caller that has its answer without asking anyone but
 * must answer later; httpc_free() first calls arg_free (unless NULL)
 * instead.  Returns -1 (cb never runs) if out of memory. */
int		 httpc_later(struct httpc *, httpc_cb *cb, void *arg,
		    void (*arg_free)(void *));

/* ---- aws.c: AWS JSON and query protocols over httpc, SigV4 ------------ */

/* SQS and DynamoDB speak JSON 1.0; SNS the query protocol (form-encoded
 * request, XML reply). */
enum aws_service { AWS_SQS, AWS_DYNAMODB, AWS_SNS };

struct aws_result {
	int		 ok;		/* HTTP 2xx and a JSON body */
	long		 status;	/* HTTP status, 0 = transport error */
	struct cJSON	*json;		/* parsed body or NULL; freed after cb;
					   always NULL for AWS_SNS */
	const char	*body;		/* the reply as it came (AWS_SNS: the
					   XML to parse); valid during cb */
	size_t		 body_len;	/* bytes */
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
 * X-Amz-Security-Token when a session token is set).  For AWS_SNS the
 * body is the query protocol's form (it names the Action itself; action
 * is only for log lines), sent as application/x-www-form-urlencoded;
 * ok means HTTP 2xx, and an ErrorResponse sets error_type (its Code) and
 * error_message.  timeout in ms.  cb
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
/* aws_error.c.  1 if an AWS error code or message (either may be NULL)
 * says the service throttles (ThrottlingException, Throttled,
 * TooManyRequests...). */
int		 aws_throttled(const char *code, const char *text);
/* The enum sink_reason of an SQS or SNS call that failed as a whole
 * (SendMessageBatch, PublishBatch): HTTP status (0 = no answer) and the
 * error's code and message (either may be NULL). */
int		 aws_failure_reason(long status, const char *code,
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
	int64_t		 replay;	/* the replay that put it back to
					   pending (outbox.replay); 0: live */
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

/* Fail m for good, unsent (SINK_REJECTED, reason), with the error fmt
 * says: a message no retry could get through. */
void		 sink_refuse(struct outbox_msg *m, enum sink_reason reason,
		    const char *fmt, ...) OUTBOXD_PRINTF(3, 4);
/* The sink of a destination's sink = (enum conf_sink). */
const struct sink *sink_of(int);
/* A publish call to t's destination worked: log_limit_end() of its
 * call_limit, the line saying what (the call's name) and destination=.
 * Inline: the fuzz targets link a sink's file without sink.c. */
static inline void
sink_limit_end(struct sink_target *t, const char *what)
{
	log_limit_end(&t->call_limit, (const char *[]){ "destination",
	    t->dest->name, NULL }, what);
}
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
#define SINK_HEADERS_MAX	8	/* SQS and SNS: 10 attributes; one is
					   EventType, one the replay marker */
/* The header (SQS and SNS message attribute) the relay adds to a
 * replayed row's message, valued with the replay's id (outboxctl(8),
 * replay); reserved, so that no row can forge it. */
#define SINK_REPLAY_HEADER	"Outbox-Replay"
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
 * attributes EventType and the row's headers.  Answered like SQS's.  A
 * message SNS could never take (over SNS_MAX_BATCH_BYTES, more than
 * SNS_MAX_ATTRIBUTES attributes) is SINK_REJECTED unsent; a call whose
 * messages exceed SNS_MAX_BATCH_BYTES together is sent as several
 * requests.  The call is answered whole.
 */
extern const struct sink sink_sns;

/* ---- sns.c: SNS query protocol bodies and XML replies (no I/O) -------- */

#define SNS_MAX_BATCH_BYTES	262144	/* a PublishBatch's messages and
					   attributes, all together (SNS) */
#define SNS_MAX_ATTRIBUTES	10	/* message attributes a message may
					   have (SNS) */
#define SNS_TEXT_LEN		513	/* bytes kept of a text in a reply,
					   NUL included (longer is cut) */

/* An ErrorResponse/Error: Type ("Sender", "Receiver"), Code
 * ("NotFound", "AuthorizationError", "Throttled", ...), Message. */
struct sns_error {
	char	type[SNS_TEXT_LEN];
	char	code[SNS_TEXT_LEN];
	char	message[SNS_TEXT_LEN];
};

/* 1 if the topic ARN names a FIFO topic (ends in ".fifo"), else 0. */
int		 sns_topic_is_fifo(const char *topic_arn);
/* The message attributes m is sent with: EventType (unless the event
 * type is empty) and one per header. */
int		 sns_msg_attributes(const struct outbox_msg *m);
/* Bytes m counts toward SNS's limits: payload, and each attribute's
 * name, type "String" and value (as relay.max_message_size counts). */
size_t		 sns_msg_size(const struct outbox_msg *m);
/*
 * PublishBatch form body (AWS SNS API: PublishBatch, query protocol) for
 * the msgs[0..n-1] not already SINK_REJECTED: entry Id = the outbox id,
 * Message = payload, String message attributes EventType and the
 * headers; for a ".fifo" topic MessageGroupId = key and
 * MessageDeduplicationId = id.  Values are percent-encoded per RFC 3986.
 * Returns the text (caller frees) and its length in *len, or NULL (out
 * of memory, or nothing to send).
 */
char		*sns_publish_batch_body(const char *topic_arn,
		    const struct outbox_msg *msgs, int n, size_t *len);
/*
 * Set outcome, reason and error (malloc'd; any previous pointer is
 * overwritten, not freed) of every msg not already SINK_REJECTED from a
 * PublishBatch reply of len bytes: Successful -> SINK_SENT; Failed with
 * SenderFault true -> SINK_REJECTED, else SINK_RETRY; in neither ->
 * SINK_RETRY; listed in both -> as Failed.  Returns the number of
 * SINK_SENT, or -1 if the XML is not a PublishBatchResponse (malformed,
 * truncated, a DOCTYPE) when every such msg is SINK_RETRY.
 */
int		 sns_publish_batch_parse(const char *xml, size_t len,
		    struct outbox_msg *msgs, int n);
/* An ErrorResponse of len bytes into *e (fields "" when absent).  0, or
 * -1 when it is not one (e is cleared). */
int		 sns_error_parse(const char *xml, size_t len,
		    struct sns_error *e);

/*
 * The Standard Webhooks signature of one delivery into out (outlen >=
 * WEBHOOK_SIG_LEN + 1): "v1," and the base64 of HMAC-SHA256 over
 * "{id}.{ts}.{body}" (body = len bytes; ts = unix seconds).  The key is
 * the base64-decoded rest of a secret that starts with "whsec_" (padding
 * optional; at most 256 bytes), else the secret's own bytes.  Returns -1
 * if that base64 is not valid, the key is empty, or out is too small.  The
 * keyed HMAC of the last few secrets is kept.
 */
#define WEBHOOK_SIG_LEN		47	/* "v1," + 44 base64 characters */
int		 webhook_sign(const char *secret, const char *id, int64_t ts,
		    const char *body, size_t len, char *out, size_t outlen);
/* 1 if webhook_sign() can sign with secret (its whsec_ base64 decodes to
 * a key of 1 to 256 bytes, or it is a non-empty string), else 0.  Keeps
 * nothing of it. */
int		 webhook_secret_ok(const char *secret);
/* What a webhook answer with this HTTP status means: 2xx SINK_SENT; 408,
 * 429, 5xx and 0 (no answer) SINK_RETRY; anything else, 3xx included
 * (redirects are not followed), SINK_REJECTED. */
enum sink_outcome webhook_outcome(long status);
/* The enum sink_reason of a failed webhook answer with this HTTP status
 * (0: none came) and outcome; answer is its text as the error keeps it:
 * a receiver that says it throttles is throttling whatever the status. */
enum sink_reason webhook_reason(long status, enum sink_outcome outcome,
		    const char *answer);

/* ---- pubsub.c: Google Cloud Pub/Sub REST bodies and replies (no I/O) -- */

/*
 * Pub/Sub's limits (Pub/Sub: Quotas and limits, "Resource limits"): a
 * publish request carries at most 1000 messages and 10 MB; a message's
 * data at most 10 MB; a message at most 100 attributes, keys of at most
 * 256 bytes, values of at most 1024 bytes; an ordering key at most 1 KB.
 * A relay's call is at most SINK_MAX_BATCH (10) messages and, like its
 * batches, at most relay.max_message_size (1 MiB at most) before base64,
 * so a request stays far below the request limits; the attribute limits
 * are tighter than outbox(7)'s header rules and are checked per message.
 */
#define PUBSUB_MAX_MESSAGES	1000
#define PUBSUB_MAX_REQUEST	(10 * 1000 * 1000)	/* bytes */
#define PUBSUB_MAX_DATA		(10 * 1000 * 1000)	/* bytes */
#define PUBSUB_MAX_ATTRS	100
#define PUBSUB_ATTR_KEY_MAX	256			/* bytes */
#define PUBSUB_ATTR_VALUE_MAX	1024			/* bytes */
#define PUBSUB_ORDERING_KEY_MAX	1024			/* bytes */
/* The attribute that carries a row's event type, as SQS's does. */
#define PUBSUB_EVENT_TYPE_ATTR	"EventType"

/* Google's error body (AIP-193): {"error": {"code", "message",
 * "status"}}. */
struct pubsub_error {
	long		 code;		/* HTTP status it states, 0 if none */
	char		 status[40];	/* "NOT_FOUND", "" if none */
	char		 message[512];	/* Google's text, "" if none */
};

/* "ENDPOINT/v1/projects/PROJECT/topics/TOPIC:publish" (Pub/Sub REST:
 * projects.topics.publish).  Caller frees; NULL if out of memory. */
char		*pubsub_publish_url(const char *endpoint, const char *project,
		    const char *topic);
/* 0 if Pub/Sub takes m as a message (the limits above; attribute keys
 * not starting with "goog", which Google reserves), else -1 with the
 * rule broken, naming a header but never its value, in why. */
int		 pubsub_message_check(const struct outbox_msg *m, int ordering,
		    char *why, size_t len);
/*
 * The publish request body for msgs[0..n-1] (Pub/Sub REST:
 * projects.topics.publish, PubsubMessage): data = base64 of the payload,
 * attributes = EventType and the row's headers, orderingKey = the row's
 * key when ordering is set and the key is not empty.  A message whose
 * outcome is SINK_REJECTED is left out.  JSON text (caller frees), its
 * length in *len; NULL if out of memory or every message was left out.
 */
char		*pubsub_publish_body(const struct outbox_msg *msgs, int n,
		    int ordering, size_t *len);
/* A 2xx publish reply {"messageIds": [...]}: one ID per message sent
 * marks every such msg SINK_SENT and returns their number; else -1 with
 * why (whylen bytes) and the outcomes untouched. */
int		 pubsub_publish_parse(const char *body, size_t len,
		    struct outbox_msg *msgs, int n, char *why, size_t whylen);
/* Google's error JSON into *e; -1 if body is not one (e is cleared). */
int		 pubsub_error_parse(const char *body, size_t len,
		    struct pubsub_error *e);
/* What a failed publish means: by the error's status when it has one
 * (UNAVAILABLE, DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED, ABORTED,
 * INTERNAL, UNKNOWN, CANCELLED, UNAUTHENTICATED: SINK_RETRY; any other,
 * such as INVALID_ARGUMENT, NOT_FOUND, PERMISSION_DENIED: SINK_REJECTED),
 * else by the HTTP status (0, 401, 408, 429, 5xx: SINK_RETRY; other
 * 4xx, 3xx: SINK_REJECTED; 2xx: SINK_SENT). */
enum sink_outcome pubsub_outcome(long http, const char *status);
/* Its enum sink_reason: REJECTED, TRANSPORT (0, 408, CANCELLED),
 * THROTTLED (429, RESOURCE_EXHAUSTED), CLIENT (other 4xx), SERVER. */
enum sink_reason pubsub_reason(long http, const char *status);

/* ---- gcp_auth.c: Google access tokens (Application Default
 * Credentials) ----------------------------------------------------------- */

/* A service-account key file's parts (its JSON: type "service_account",
 * client_email, private_key_id, private_key, token_uri). */
struct gcp_sa_key {
	char		*client_email;
	char		*private_key_id;	/* the JWT's kid; may be NULL */
	char		*token_uri;
	void		*pkey;			/* EVP_PKEY, RSA */
};

/* The OAuth 2.0 scope outboxd asks for (Pub/Sub's). */
#define GCP_AUTH_SCOPE		"https://www.googleapis.com/auth/pubsub"
/* The assertion's lifetime (Google: at most an hour). */
#define GCP_AUTH_JWT_LIFETIME_S	3600

/* Parse a service-account key file's text (len bytes) into k (clear with
 * gcp_sa_key_clear); -1 with the reason in err, which never quotes the
 * file. */
int		 gcp_sa_key_parse(const char *json, size_t len,
		    struct gcp_sa_key *k, char *err, size_t errlen);
void		 gcp_sa_key_clear(struct gcp_sa_key *);
/*
 * The JWT bearer assertion for k at now_s (unix seconds): RS256 over
 * header {"alg":"RS256","typ":"JWT","kid"} and claims {iss =
 * client_email, scope = GCP_AUTH_SCOPE, aud = token_uri, iat, exp = iat
 * + GCP_AUTH_JWT_LIFETIME_S} (Google OAuth 2.0 for Server to Server
 * Applications; RFC 7523).  Caller frees (and should wipe); NULL on
 * failure.
 */
char		*gcp_jwt_assertion(const struct gcp_sa_key *k, int64_t now_s);
/* A token endpoint's or the metadata server's reply {"access_token",
 * "expires_in", "token_type": "Bearer"}: the token (caller frees) and its
 * lifetime in s in *expires_in; NULL if it is not one. */
char		*gcp_token_parse(const char *body, size_t len,
		    long *expires_in);

/* Wipe and free a secret's text (NULL: nothing). */
void		 gcp_free_secret(char *s);
/* 1 if t can be an access token: 1 to 4096 bytes of the characters an
 * HTTP header's bearer token may hold (RFC 6750, 2.1). */
int		 gcp_token_valid(const char *t);
/*
 * The Application Default Credentials file a process uses, as Google's
 * libraries find it: GOOGLE_APPLICATION_CREDENTIALS, else the well-known
 * file $CLOUDSDK_CONFIG/application_default_credentials.json or
 * ~/.config/gcloud/application_default_credentials.json of user (the
 * user outboxd runs as; NULL: $HOME's) if it exists, else none (the
 * metadata server).  The file is read and parsed, nothing is fetched:
 * 0 with *file (caller frees; NULL: the metadata server) and what was
 * found in desc (as outboxd -t says it), or -1 with "FILE: why" in err.
 */
int		 gcp_adc_find(const char *user, char **file, char *desc,
		    size_t desclen, char *err, size_t errlen);

/* ---- gcp_external.c: authorized_user and external_account files ------ */

enum gcp_cred_type { GCP_CRED_USER = 1, GCP_CRED_EXTERNAL };

/* An authorized_user or external_account file's parts (AIP-4117). */
struct gcp_cred {
	enum gcp_cred_type	 type;
	char			*client_id;	/* external: NULL or STS Basic */
	char			*client_secret;	/* secret; wiped */
	char			*refresh_token;	/* user; secret; wiped */
	char			*token_uri;	/* token_uri / token_url */
	char			*audience;	/* external from here on */
	char			*subject_token_type;
	char			*impersonation_url;	/* NULL: none */
	long			 lifetime_s;	/* impersonated token's */
	char			*user_project;	/* workforce; NULL: none */
	char			*src_file;	/* subject token: a file */
	char			*src_url;	/* or a URL, */
	char			**src_headers;	/* "Name: value" to send */
	int			 src_nheaders;
	char			*src_field;	/* JSON member; NULL: text */
};

/* Parse an ADC file's text of type authorized_user or external_account
 * into c (gcp_cred_clear); -1 with the reason in err (never quoting a
 * secret), which names an unsupported type or credential_source kind
 * (AWS-sourced, executable-sourced). */
int		 gcp_cred_parse(const char *json, size_t len,
		    struct gcp_cred *c, char *err, size_t errlen);
void		 gcp_cred_clear(struct gcp_cred *c);
/* (gcp_external.c serves gcp_auth.c too.)  A failed token request's line for the log and the rows, into err:
 * "Google credentials: WHAT: transport error" or "... WHAT HTTP N" and,
 * with quote, the endpoint's OAuth or Google error text (never the
 * request's); returns its enum sink_reason. */
int		 gcp_reply_error(const struct httpc_response *res,
		    const char *what, int quote, char *err, size_t errlen);
/* What c is, for a log line or outboxd -t (no secret). */
void		 gcp_cred_describe(const struct gcp_cred *c, char *buf,
		    size_t len);
/* A subject token (caller frees, wipes) from a credential_source's
 * text: trimmed text, or with field the JSON member of that name; NULL
 * with why in err (never quoting the text). */
char		*gcp_subject_parse(const char *text, size_t len,
		    const char *field, char *err, size_t errlen);
/* Form bodies (caller frees, wipes; NULL if out of memory):
 * grant_type=refresh_token with client_id, client_secret, refresh_token;
 * the STS token exchange (grant_type token-exchange, audience, scope
 * (cloud-platform when impersonating, else GCP_AUTH_SCOPE),
 * requested_token_type access_token, subject_token, subject_token_type,
 * options {"userProject"} for a workforce pool without a client). */
char		*gcp_refresh_body(const struct gcp_cred *c);
char		*gcp_sts_body(const struct gcp_cred *c, const char *subject);
/* generateAccessToken's JSON body {"scope": [GCP_AUTH_SCOPE],
 * "lifetime": "Ns"}; its reply {"accessToken", "expireTime"}: the token
 * (caller frees) and its life in s from now_s, NULL if not one. */
char		*gcp_iam_body(const struct gcp_cred *c);
char		*gcp_iam_parse(const char *body, size_t len, int64_t now_s,
		    long *life);
/* An access token (taken over by the callee) and its life in s, or NULL
 * with err and reason (enum sink_reason). */
typedef void	 gcp_fetched_cb(char *token, long life_s, const char *err,
		    int reason);
/* Start fetching an access token for c over hc (timeout ms a request):
 * refresh_token; or the subject token (the file read now, the URL
 * fetched), STS, then generateAccessToken if set.  done runs once from
 * the loop; if httpc_free() aborts it first, aborted runs instead.  -1
 * if nothing could start (neither runs).  c must outlive the fetch. */
int		 gcp_cred_fetch(const struct gcp_cred *c, struct httpc *hc,
		    long timeout, gcp_fetched_cb *done, void (*aborted)(void));

/* A token for a request, or why there is none: token NULL, error (never
 * holding a credential) and reason (enum sink_reason) set. */
typedef void	 gcp_token_cb(const char *token, const char *error,
		    int reason, void *arg);
/*
 * An access token for Pub/Sub, from Application Default Credentials:
 * file (gcp_adc_find's) is a service-account key (a signed JWT
 * exchanged at its token_uri), an authorized_user or an
 * external_account file (gcp_external.c); NULL: the metadata server
 * (GCE_METADATA_HOST or metadata.google.internal, Metadata-Flavor:
 * Google).  One per process, refreshed over hc before it expires while
 * the cached one still serves, by a timer on hc's loop when no publish
 * comes first (so an idle relay keeps a fresh one).  Returns 1 with a usable token in *token
 * (valid until control returns to the loop), or 0 when none is usable
 * yet: cb runs once, later, with one or with why not (arg is then the
 * caller's again); if httpc_free() aborts the fetch first, cb never runs
 * and arg_free(arg) is called.  -1 (cb never runs) if nothing could be
 * started.  timeout: ms for a token request.
 */
int		 gcp_auth_token(struct httpc *hc, long timeout,
		    const char *file, const char **token, gcp_token_cb *cb, void *arg,
		    void (*arg_free)(void *));
/* Pub/Sub refused token (401): forget it, so that the next call fetches
 * a new one. */
void		 gcp_auth_reject(const char *token);
/* Forget the process's token, key and refresh timer; call after
 * httpc_free() and before the caller's event_base_free(). */
void		 gcp_auth_stop(void);

/*
 * A destination's sink = "pubsub": up to 10 messages with one
 * projects.topics.publish to conf->pubsub.endpoint, with a bearer token
 * from gcp_auth.c (none with PUBSUB_EMULATOR_HOST).  A message Pub/Sub
 * would refuse (pubsub_message_check) is rejected alone, unsent.  The
 * call is answered whole.
 */
extern const struct sink sink_pubsub;

#endif /* OUTBOXD_BROKER_H */
