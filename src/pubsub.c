/*
 * pubsub.c - request bodies and replies of Google Cloud Pub/Sub's REST
 * API (Pub/Sub REST reference: projects.topics.publish, PubsubMessage;
 * Google's JSON error model, AIP-193).  Pure functions: no I/O, no
 * logging, so the unit tests and the fuzzer can drive them; callers log
 * what they report.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cjson/cJSON.h>
#include <openssl/evp.h>

#include "outboxd.h"
#include "broker.h"

char *
pubsub_publish_url(const char *endpoint, const char *project,
    const char *topic)
{
	char	*url;

	if (endpoint == NULL || project == NULL || topic == NULL)
		return NULL;
	/* conf_dest.c admits only characters that need no escape here. */
	if (asprintf(&url, "%s/v1/projects/%s/topics/%s:publish", endpoint,
	    project, topic) == -1)
		return NULL;
	return url;
}

int
pubsub_message_check(const struct outbox_msg *m, int ordering, char *why,
    size_t len)
{
	int	i;

	if (m->payload_len > PUBSUB_MAX_DATA) {
		snprintf(why, len, "Pub/Sub: data of %zu bytes, at most %d",
		    m->payload_len, PUBSUB_MAX_DATA);
		return -1;
	}
	if (m->nheaders + 1 > PUBSUB_MAX_ATTRS) {
		snprintf(why, len, "Pub/Sub: %d attributes (the headers and "
		    "EventType), at most %d", m->nheaders + 1,
		    PUBSUB_MAX_ATTRS);
		return -1;
	}
	if (strlen(m->event_type) > PUBSUB_ATTR_VALUE_MAX) {
		snprintf(why, len, "Pub/Sub: the event type has %zu bytes, an "
		    "attribute value at most %d", strlen(m->event_type),
		    PUBSUB_ATTR_VALUE_MAX);
		return -1;
	}
	for (i = 0; i < m->nheaders; i++) {
		const struct outbox_header	*h = &m->headers[i];

		/* The names are outbox(7)'s: printable ASCII only. */
		if (strncasecmp(h->name, "goog", 4) == 0) {
			snprintf(why, len, "Pub/Sub: header \"%.64s\": an "
			    "attribute key may not start with \"goog\"",
			    h->name);
			return -1;
		}
		if (strlen(h->name) > PUBSUB_ATTR_KEY_MAX) {
			snprintf(why, len, "Pub/Sub: header \"%.64s...\": an "
			    "attribute key has at most %d bytes", h->name,
			    PUBSUB_ATTR_KEY_MAX);
			return -1;
		}
		if (strlen(h->value) > PUBSUB_ATTR_VALUE_MAX) {
			snprintf(why, len, "Pub/Sub: header \"%.64s\" has a "
			    "value of %zu bytes, an attribute value at most %d",
			    h->name, strlen(h->value), PUBSUB_ATTR_VALUE_MAX);
			return -1;
		}
	}
	if (ordering && strlen(m->key) > PUBSUB_ORDERING_KEY_MAX) {
		snprintf(why, len, "Pub/Sub: ordering key of %zu bytes, at most "
		    "%d", strlen(m->key), PUBSUB_ORDERING_KEY_MAX);
		return -1;
	}
	return 0;
}

/* len bytes of data as base64 (RFC 4648, padded): caller frees. */
static char *
pubsub_base64(const char *data, size_t len)
{
	char	*out;

	if (len > PUBSUB_MAX_DATA ||
	    (out = malloc((len + 2) / 3 * 4 + 1)) == NULL)
		return NULL;
	EVP_EncodeBlock((unsigned char *)out, (const unsigned char *)data,
	    (int)len);
	return out;
}

char *
pubsub_publish_body(const struct outbox_msg *msgs, int n, int ordering,
    size_t *len)
{
	const struct outbox_msg	*m;
	cJSON			*root, *arr, *msg, *attrs;
	char			*data, *body;
	int			 i, k, nsent = 0;

	if (n < 1 || n > PUBSUB_MAX_MESSAGES ||
	    (root = cJSON_CreateObject()) == NULL)
		return NULL;
	if ((arr = cJSON_AddArrayToObject(root, "messages")) == NULL)
		goto fail;
	for (i = 0; i < n; i++) {
		m = &msgs[i];
		if (m->outcome == SINK_REJECTED)
			continue;
		if ((msg = cJSON_CreateObject()) == NULL)
			goto fail;
		cJSON_AddItemToArray(arr, msg);
		if ((data = pubsub_base64(m->payload, m->payload_len)) == NULL)
			goto fail;
		if (cJSON_AddStringToObject(msg, "data", data) == NULL) {
			free(data);
			goto fail;
		}
		free(data);
		if ((attrs = cJSON_AddObjectToObject(msg, "attributes")) ==
		    NULL || cJSON_AddStringToObject(attrs,
		    PUBSUB_EVENT_TYPE_ATTR, m->event_type) == NULL)
			goto fail;
		for (k = 0; k < m->nheaders; k++)
			if (cJSON_AddStringToObject(attrs, m->headers[k].name,
			    m->headers[k].value) == NULL)
				goto fail;
		/* Pub/Sub: an empty orderingKey is no key. */
		if (ordering && m->key[0] != '\0' &&
		    cJSON_AddStringToObject(msg, "orderingKey", m->key) == NULL)
			goto fail;
		nsent++;
	}
	if (nsent == 0 || (body = cJSON_PrintUnformatted(root)) == NULL)
		goto fail;
	cJSON_Delete(root);
	if (strlen(body) > PUBSUB_MAX_REQUEST) {
		free(body);
		return NULL;
	}
	if (len != NULL)
		*len = strlen(body);
	return body;
fail:
	cJSON_Delete(root);
	return NULL;
}

int
pubsub_publish_parse(const char *body, size_t len, struct outbox_msg *msgs,
    int n, char *why, size_t whylen)
{
	cJSON		*root, *ids, *id;
	int		 i, k = 0, want = 0, got;

	for (i = 0; i < n; i++)
		if (msgs[i].outcome != SINK_REJECTED)
			want++;
	if ((root = cJSON_ParseWithLength(body, len)) == NULL ||
	    !cJSON_IsObject(root) ||
	    !cJSON_IsArray(ids = cJSON_GetObjectItemCaseSensitive(root,
	    "messageIds"))) {
		snprintf(why, whylen, "Pub/Sub: a 2xx reply without "
		    "messageIds");
		cJSON_Delete(root);
		return -1;
	}
	got = cJSON_GetArraySize(ids);
	cJSON_ArrayForEach(id, ids)
		if (!cJSON_IsString(id) || id->valuestring[0] == '\0')
			got = -1;
	if (got != want) {
		snprintf(why, whylen, "Pub/Sub: a reply with %d messageIds for "
		    "%d messages", got, want);
		cJSON_Delete(root);
		return -1;
	}
	cJSON_Delete(root);
	/* The IDs are in the order of the request's messages; one for each
	 * means each was stored. */
	for (i = 0; i < n; i++)
		if (msgs[i].outcome != SINK_REJECTED) {
			msgs[i].outcome = SINK_SENT;
			k++;
		}
	return k;
}

int
pubsub_error_parse(const char *body, size_t len, struct pubsub_error *e)
{
	cJSON		*root, *err, *v;

	memset(e, 0, sizeof(*e));
	if (body == NULL || (root = cJSON_ParseWithLength(body, len)) == NULL)
		return -1;
	err = cJSON_GetObjectItemCaseSensitive(root, "error");
	if (!cJSON_IsObject(err)) {
		cJSON_Delete(root);
		return -1;
	}
	v = cJSON_GetObjectItemCaseSensitive(err, "code");
	if (cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble < 1000)
		e->code = (long)v->valuedouble;
	v = cJSON_GetObjectItemCaseSensitive(err, "status");
	if (cJSON_IsString(v) && strspn(v->valuestring,
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZ_") == strlen(v->valuestring))
		snprintf(e->status, sizeof(e->status), "%s", v->valuestring);
	v = cJSON_GetObjectItemCaseSensitive(err, "message");
	if (cJSON_IsString(v))
		log_utf8_copy(e->message, sizeof(e->message), v->valuestring);
	cJSON_Delete(root);
	return 0;
}

/* gRPC codes Google's error model names (google.rpc.Code) that a retry
 * may get past; every other named one is permanent. */
static const char *const pubsub_retried[] = {
	"UNAVAILABLE", "DEADLINE_EXCEEDED", "RESOURCE_EXHAUSTED", "ABORTED",
	"INTERNAL", "UNKNOWN", "CANCELLED", "UNAUTHENTICATED",
};

enum sink_outcome
pubsub_outcome(long http, const char *status)
{
	size_t	i;

	if (status != NULL && status[0] != '\0') {
		for (i = 0; i < sizeof(pubsub_retried) /
		    sizeof(pubsub_retried[0]); i++)
			if (strcmp(status, pubsub_retried[i]) == 0)
				return SINK_RETRY;
		return SINK_REJECTED;
	}
	if (http >= 200 && http < 300)
		return SINK_SENT;
	/* 401: a token that expired on the way is fetched again. */
	if (http == 0 || http == 401 || http == 408 || http == 429 ||
	    http >= 500)
		return SINK_RETRY;
	return SINK_REJECTED;
}

enum sink_reason
pubsub_reason(long http, const char *status)
{
	if (pubsub_outcome(http, status) == SINK_REJECTED)
		return SINK_REASON_REJECTED;
	if (http == 0 || http == 408 || (status != NULL &&
	    strcmp(status, "CANCELLED") == 0))
		return SINK_REASON_TRANSPORT;
	if (http == 429 || (status != NULL &&
	    strcmp(status, "RESOURCE_EXHAUSTED") == 0))
		return SINK_REASON_THROTTLED;
	if (http >= 400 && http < 500)
		return SINK_REASON_CLIENT;
	return SINK_REASON_SERVER;
}
