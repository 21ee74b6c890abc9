/*
 * sqs.c - request bodies and reply parsing for the SQS JSON 1.0 protocol
 * (AWS SQS API reference: SendMessageBatch, ReceiveMessage,
 * DeleteMessageBatch).  Pure functions: no I/O, no logging, so the unit
 * tests can drive them; callers log what they report.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "outboxd.h"
#include "broker.h"

/* FIFO message groups need some id; used when a row has no key. */
#define SQS_DEFAULT_GROUP	"outbox"

static char	*sqs_strdup_printf(const char *, ...) OUTBOXD_PRINTF(1, 2);

static char *
sqs_strdup_printf(const char *fmt, ...)
{
	va_list	 ap;
	char	*s;

	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) == -1)
		s = NULL;
	va_end(ap);
	return (s);
}

/* String member or NULL when missing or not a string. */
static const char *
sqs_get_string(const cJSON *obj, const char *name)
{
	const cJSON	*v;

	v = cJSON_GetObjectItemCaseSensitive(obj, name);
	if (!cJSON_IsString(v))
		return (NULL);
	return (v->valuestring);
}

int
sqs_queue_is_fifo(const char *queue_url)
{
	size_t	len;

	if (queue_url == NULL)
		return (0);
	len = strlen(queue_url);
	return (len >= 5 && strcmp(queue_url + len - 5, ".fifo") == 0);
}

char *
sqs_send_batch_body(const char *queue_url, const struct outbox_msg *msgs,
    int n, size_t *len)
{
	const struct outbox_msg	*m;
	cJSON			*root, *entries, *e, *attrs, *attr;
	char			 id[32], *body;
	size_t			 blen;
	int			 i, fifo, nentries = 0;

	if (queue_url == NULL || n < 1)
		return (NULL);
	fifo = sqs_queue_is_fifo(queue_url);
	if ((root = cJSON_CreateObject()) == NULL)
		return (NULL);
	if (cJSON_AddStringToObject(root, "QueueUrl", queue_url) == NULL ||
	    (entries = cJSON_AddArrayToObject(root, "Entries")) == NULL)
		goto fail;
	for (i = 0; i < n; i++) {
		m = &msgs[i];
		/* Refused by the relay (too large, headers that break the
		 * rules): never sent.  Sent with the others, an attribute
		 * SQS refuses would fail the whole batch. */
		if (m->outcome == SINK_REJECTED)
			continue;
		if (m->payload == NULL)
			goto fail;
		nentries++;
		/* payload_len is authoritative; the text may lack a NUL. */
		blen = m->payload_len != 0 ? m->payload_len :
		    strlen(m->payload);
		if ((body = strndup(m->payload, blen)) == NULL)
			goto fail;
		snprintf(id, sizeof id, "%" PRId64, m->id);
		if ((e = cJSON_CreateObject()) == NULL) {
			free(body);
			goto fail;
		}
		cJSON_AddItemToArray(entries, e);
		if (cJSON_AddStringToObject(e, "Id", id) == NULL ||
		    cJSON_AddStringToObject(e, "MessageBody", body) == NULL) {
			free(body);
			goto fail;
		}
		free(body);
		if ((m->event_type != NULL && *m->event_type != '\0') ||
		    m->nheaders > 0) {
			int	h;

			if ((attrs = cJSON_AddObjectToObject(e,
			    "MessageAttributes")) == NULL)
				goto fail;
			if (m->event_type != NULL && *m->event_type != '\0' &&
			    ((attr = cJSON_AddObjectToObject(attrs,
			    "EventType")) == NULL ||
			    cJSON_AddStringToObject(attr, "DataType",
			    "String") == NULL ||
			    cJSON_AddStringToObject(attr, "StringValue",
			    m->event_type) == NULL))
				goto fail;
			/* The row's headers, each a String attribute with
			 * the value byte for byte (the schema and the relay,
			 * sink_headers_check(), keep them to SQS's rules). */
			for (h = 0; h < m->nheaders; h++)
				if ((attr = cJSON_AddObjectToObject(attrs,
				    m->headers[h].name)) == NULL ||
				    cJSON_AddStringToObject(attr, "DataType",
				    "String") == NULL ||
				    cJSON_AddStringToObject(attr, "StringValue",
				    m->headers[h].value) == NULL)
					goto fail;
		}
		if (fifo) {
			/*
			 * Group by ordering key: SQS keeps per-group order.
			 * The dedup id makes a retry inside SQS's 5 minute
			 * window harmless.
			 */
			if (cJSON_AddStringToObject(e, "MessageGroupId",
			    m->key != NULL && *m->key != '\0' ? m->key :
			    SQS_DEFAULT_GROUP) == NULL ||
			    cJSON_AddStringToObject(e, "MessageDeduplicationId",
			    id) == NULL)
				goto fail;
		}
	}
	if (nentries == 0)
		goto fail;
	return (aws_json_print(root, len));

fail:
	cJSON_Delete(root);
	return (NULL);
}

/* Index of the message whose decimal id is s, or -1. */
static int
sqs_find_msg(const struct outbox_msg *msgs, int n, const char *s)
{
	char		*end;
	long long	 v;
	int		 i;

	if (s == NULL || *s == '\0')
		return (-1);
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno != 0 || *end != '\0')
		return (-1);
	for (i = 0; i < n; i++) {
		if (msgs[i].id == (int64_t)v)
			return (i);
	}
	return (-1);
}

int
sqs_send_batch_parse(const struct cJSON *reply, struct outbox_msg *msgs,
    int n)
{
	const cJSON	*list, *e, *sf;
	const char	*code, *text;
	int		 i, sent = 0;
	enum { SEEN_NONE, SEEN_OK, SEEN_FAILED, SEEN_NOT_SENT } *seen;

	if ((seen = calloc(n > 0 ? n : 1, sizeof *seen)) == NULL) {
		/* Cannot tell: everything sent is retried. */
		for (i = 0; i < n; i++) {
			if (msgs[i].outcome == SINK_REJECTED)
				continue;
			msgs[i].outcome = SINK_RETRY;
			msgs[i].reason = SINK_REASON_OTHER;
			msgs[i].error = NULL;
		}
		return (0);
	}

	for (i = 0; i < n; i++) {
		/* Not in the request (sqs_send_batch_body): the relay's
		 * verdict and error stay, whatever the reply says. */
		if (msgs[i].outcome == SINK_REJECTED) {
			seen[i] = SEEN_NOT_SENT;
			continue;
		}
		msgs[i].outcome = SINK_RETRY;
		msgs[i].reason = SINK_REASON_SERVER;	/* SQS lost it */
		msgs[i].error = NULL;
	}

	/* Failed first: an id listed in both is not trusted as sent. */
	list = cJSON_GetObjectItemCaseSensitive(reply, "Failed");
	cJSON_ArrayForEach(e, list) {
		i = sqs_find_msg(msgs, n, sqs_get_string(e, "Id"));
		if (i == -1 || seen[i] != SEEN_NONE)
			continue;
		seen[i] = SEEN_FAILED;
		code = sqs_get_string(e, "Code");
		text = sqs_get_string(e, "Message");
		sf = cJSON_GetObjectItemCaseSensitive(e, "SenderFault");
		msgs[i].outcome = cJSON_IsTrue(sf) ? SINK_REJECTED : SINK_RETRY;
		/* An entry SQS failed on its side is a server error. */
		msgs[i].reason = aws_throttled(code, text) ?
		    SINK_REASON_THROTTLED : msgs[i].outcome == SINK_REJECTED ?
		    SINK_REASON_REJECTED : SINK_REASON_SERVER;
		msgs[i].error = sqs_strdup_printf("SQS %s%s%s",
		    code != NULL ? code : "error",
		    text != NULL ? ": " : "", text != NULL ? text : "");
	}

	list = cJSON_GetObjectItemCaseSensitive(reply, "Successful");
	cJSON_ArrayForEach(e, list) {
		i = sqs_find_msg(msgs, n, sqs_get_string(e, "Id"));
		if (i == -1 || seen[i] != SEEN_NONE)
			continue;
		seen[i] = SEEN_OK;
		msgs[i].outcome = SINK_SENT;
		sent++;
	}

	for (i = 0; i < n; i++) {
		if (seen[i] == SEEN_NONE)
			msgs[i].error = strdup("SQS reply does not list this "
			    "entry");
	}
	free(seen);
	return (sent);
}

char *
sqs_receive_body(const char *queue_url, int wait_time, int max_messages,
    size_t *len)
{
	cJSON	*root, *a;

	if (queue_url == NULL)
		return (NULL);
	if ((root = cJSON_CreateObject()) == NULL)
		return (NULL);
	if (cJSON_AddStringToObject(root, "QueueUrl", queue_url) == NULL ||
	    cJSON_AddNumberToObject(root, "WaitTimeSeconds", wait_time) ==
	    NULL ||
	    cJSON_AddNumberToObject(root, "MaxNumberOfMessages",
	    max_messages) == NULL)
		goto fail;
	if ((a = cJSON_AddArrayToObject(root, "MessageAttributeNames")) ==
	    NULL)
		goto fail;
	cJSON_AddItemToArray(a, cJSON_CreateString("All"));
	if ((a = cJSON_AddArrayToObject(root, "AttributeNames")) == NULL)
		goto fail;
	cJSON_AddItemToArray(a, cJSON_CreateString("ApproximateReceiveCount"));
	return (aws_json_print(root, len));

fail:
	cJSON_Delete(root);
	return (NULL);
}

void
sqs_messages_free(struct sqs_message *msgs, int n)
{
	int	i;

	if (msgs == NULL)
		return;
	for (i = 0; i < n; i++) {
		free(msgs[i].message_id);
		free(msgs[i].receipt_handle);
		free(msgs[i].body);
		free(msgs[i].event_type);
	}
	free(msgs);
}

int
sqs_receive_parse(const struct cJSON *reply, struct sqs_message **out,
    int *n)
{
	const cJSON		*list, *e, *v;
	struct sqs_message	*msgs, *m;
	const char		*s;
	char			*end;
	int			 count, i = 0;

	*out = NULL;
	*n = 0;
	if (!cJSON_IsObject(reply))
		return (-1);
	list = cJSON_GetObjectItemCaseSensitive(reply, "Messages");
	if (list == NULL || cJSON_IsNull(list))
		return (0);		/* an empty receive answers {} */
	if (!cJSON_IsArray(list))
		return (-1);
	if ((count = cJSON_GetArraySize(list)) == 0)
		return (0);
	if ((msgs = calloc(count, sizeof *msgs)) == NULL)
		return (-1);
	cJSON_ArrayForEach(e, list) {
		m = &msgs[i++];
		if ((s = sqs_get_string(e, "ReceiptHandle")) == NULL ||
		    (m->receipt_handle = strdup(s)) == NULL)
			goto fail;
		if ((s = sqs_get_string(e, "Body")) == NULL ||
		    (m->body = strdup(s)) == NULL)
			goto fail;
		m->body_len = strlen(m->body);
		if ((s = sqs_get_string(e, "MessageId")) != NULL &&
		    (m->message_id = strdup(s)) == NULL)
			goto fail;
		v = cJSON_GetObjectItemCaseSensitive(e, "MessageAttributes");
		v = cJSON_GetObjectItemCaseSensitive(v, "EventType");
		if ((s = sqs_get_string(v, "StringValue")) != NULL &&
		    (m->event_type = strdup(s)) == NULL)
			goto fail;
		v = cJSON_GetObjectItemCaseSensitive(e, "Attributes");
		if ((s = sqs_get_string(v, "ApproximateReceiveCount")) !=
		    NULL) {
			errno = 0;
			m->receive_count = strtol(s, &end, 10);
			if (errno != 0 || *end != '\0' || m->receive_count < 0)
				m->receive_count = 0;
		}
	}
	*out = msgs;
	*n = count;
	return (0);

fail:
	sqs_messages_free(msgs, count);
	return (-1);
}

char *
sqs_delete_batch_body(const char *queue_url, const char *const *handles,
    int n, size_t *len)
{
	cJSON	*root, *entries, *e;
	char	 id[16];
	int	 i;

	if (queue_url == NULL || n < 1)
		return (NULL);
	if ((root = cJSON_CreateObject()) == NULL)
		return (NULL);
	if (cJSON_AddStringToObject(root, "QueueUrl", queue_url) == NULL ||
	    (entries = cJSON_AddArrayToObject(root, "Entries")) == NULL)
		goto fail;
	for (i = 0; i < n; i++) {
		if (handles[i] == NULL || (e = cJSON_CreateObject()) == NULL)
			goto fail;
		cJSON_AddItemToArray(entries, e);
		snprintf(id, sizeof id, "%d", i);
		if (cJSON_AddStringToObject(e, "Id", id) == NULL ||
		    cJSON_AddStringToObject(e, "ReceiptHandle", handles[i]) ==
		    NULL)
			goto fail;
	}
	return (aws_json_print(root, len));

fail:
	cJSON_Delete(root);
	return (NULL);
}

/* Entry index from the decimal Id we gave it, or -1. */
static int
sqs_entry_index(const char *s, int n)
{
	char	*end;
	long	 v;

	if (s == NULL || *s == '\0')
		return (-1);
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno != 0 || *end != '\0' || v < 0 || v >= n)
		return (-1);
	return ((int)v);
}

int
sqs_delete_batch_parse(const struct cJSON *reply, int n, char **errors)
{
	const cJSON	*list, *e;
	const char	*code, *text;
	int		 i, failed = 0, *ok;

	for (i = 0; i < n; i++)
		errors[i] = NULL;
	if ((ok = calloc(n > 0 ? n : 1, sizeof *ok)) == NULL) {
		for (i = 0; i < n; i++)
			errors[i] = strdup("out of memory");
		return (n);
	}

	list = cJSON_GetObjectItemCaseSensitive(reply, "Successful");
	cJSON_ArrayForEach(e, list) {
		if ((i = sqs_entry_index(sqs_get_string(e, "Id"), n)) != -1)
			ok[i] = 1;
	}
	list = cJSON_GetObjectItemCaseSensitive(reply, "Failed");
	cJSON_ArrayForEach(e, list) {
		if ((i = sqs_entry_index(sqs_get_string(e, "Id"), n)) == -1 ||
		    errors[i] != NULL)
			continue;
		ok[i] = 0;
		code = sqs_get_string(e, "Code");
		text = sqs_get_string(e, "Message");
		errors[i] = sqs_strdup_printf("SQS %s%s%s",
		    code != NULL ? code : "error",
		    text != NULL ? ": " : "", text != NULL ? text : "");
	}
	for (i = 0; i < n; i++) {
		if (ok[i])
			continue;
		if (errors[i] == NULL)
			errors[i] = strdup("SQS reply does not list this "
			    "entry");
		failed++;
	}
	free(ok);
	return (failed);
}
