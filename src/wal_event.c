/*
 * wal_event.c - the JSON of a table-less event, the content of
 * pg_logical_emit_message(true, PREFIX, JSON) that relay.mode = "wal"
 * publishes (outboxd(8), TABLE-LESS EVENTS):
 *
 *	{"destination": "orders",	optional; null or absent: the
 *					relay.default_destination
 *	 "event_type": "order.shipped",	required, a non-empty string
 *	 "ordering_key": "customer-42",	required, a string
 *	 "headers": {"Tenant": "a"},	optional: an object of strings
 *	 "payload": {...}}		required: any JSON value, published
 *					byte for byte as written
 *
 * Checked strictly (json.c: RFC 8259, no duplicate member); no I/O.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "outboxd.h"
#include "wal.h"

enum { W_DEST, W_TYPE, W_KEY, W_HEADERS, W_PAYLOAD, W_N };

static int
wal_event_str(const cJSON *root, const char *name, int need, char **out,
    char *err, size_t errlen)
{
	const cJSON	*v = cJSON_GetObjectItemCaseSensitive(root, name);

	*out = NULL;
	if (v == NULL || cJSON_IsNull(v)) {
		if (!need)
			return 0;
		snprintf(err, errlen, "\"%s\" is missing", name);
		return -1;
	}
	if (!cJSON_IsString(v)) {
		snprintf(err, errlen, "\"%s\" must be a string", name);
		return -1;
	}
	if (need > 1 && v->valuestring[0] == '\0') {
		snprintf(err, errlen, "\"%s\" must not be empty", name);
		return -1;
	}
	if ((*out = strdup(v->valuestring)) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	return 0;
}

int
wal_event_parse(const char *text, size_t len, struct wal_event *ev,
    char *err, size_t errlen)
{
	struct json_member	 want[W_N] = {
		[W_DEST] = { "destination", NULL, 0 },
		[W_TYPE] = { "event_type", NULL, 0 },
		[W_KEY] = { "ordering_key", NULL, 0 },
		[W_HEADERS] = { "headers", NULL, 0 },
		[W_PAYLOAD] = { "payload", NULL, 0 },
	};
	struct json_error	 jerr;
	cJSON			*root, *h;

	memset(ev, 0, sizeof(*ev));
	if ((root = json_parse(text, len, want, W_N, &jerr)) == NULL) {
		snprintf(err, errlen, "not valid JSON at byte %zu: %s",
		    jerr.offset, json_message(jerr.fault));
		return -1;
	}
	if (!cJSON_IsObject(root)) {
		snprintf(err, errlen, "not a JSON object");
		goto bad;
	}
	if (wal_event_str(root, "destination", 0, &ev->destination, err,
	    errlen) == -1 ||
	    wal_event_str(root, "event_type", 2, &ev->event_type, err,
	    errlen) == -1 ||
	    wal_event_str(root, "ordering_key", 1, &ev->key, err,
	    errlen) == -1)
		goto bad;
	h = cJSON_GetObjectItemCaseSensitive(root, "headers");
	if (h != NULL && !cJSON_IsNull(h)) {
		if (!cJSON_IsObject(h)) {
			snprintf(err, errlen, "\"headers\" must be an object "
			    "of strings");
			goto bad;
		}
		ev->headers = strndup(want[W_HEADERS].value,
		    want[W_HEADERS].len);
		ev->headers_len = want[W_HEADERS].len;
		if (ev->headers == NULL) {
			snprintf(err, errlen, "out of memory");
			goto bad;
		}
	}
	if (want[W_PAYLOAD].value == NULL) {
		snprintf(err, errlen, "\"payload\" is missing");
		goto bad;
	}
	ev->payload = strndup(want[W_PAYLOAD].value, want[W_PAYLOAD].len);
	ev->payload_len = want[W_PAYLOAD].len;
	if (ev->payload == NULL) {
		snprintf(err, errlen, "out of memory");
		goto bad;
	}
	cJSON_Delete(root);
	return 0;
bad:
	cJSON_Delete(root);
	wal_event_clear(ev);
	return -1;
}

void
wal_event_clear(struct wal_event *ev)
{
	free(ev->destination);
	free(ev->event_type);
	free(ev->key);
	free(ev->headers);
	free(ev->payload);
	memset(ev, 0, sizeof(*ev));
}
