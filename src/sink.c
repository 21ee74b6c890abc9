/*
 * sink.c - what every sink shares: the sink of a destination's sink =,
 * and a row's headers column read into the headers a sink sends.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "outboxd.h"
#include "broker.h"

const struct sink *
sink_of(int kind)
{
	switch (kind) {
	case CONF_SINK_HTTP:
		return &sink_http;
	case CONF_SINK_SNS:
		return &sink_sns;
	default:
		return &sink_sqs;
	}
}

size_t
sink_header_size(const struct outbox_header *h)
{
	return strlen(h->name) + sizeof("String") - 1 + strlen(h->value);
}

void
sink_headers_free(struct outbox_header *h, int n)
{
	int	i;

	for (i = 0; i < n; i++) {
		free(h[i].name);
		free(h[i].value);
	}
	free(h);
}

int
sink_headers_parse(const char *json, size_t len, struct outbox_header **out,
    int *nout)
{
	cJSON			*root, *e;
	struct outbox_header	*h = NULL;
	int			 n = 0, cap;

	*out = NULL;
	*nout = 0;
	if (json == NULL || len == 0)
		return 0;
	if ((root = cJSON_ParseWithLength(json, len)) == NULL)
		return -1;
	if (!cJSON_IsObject(root)) {
		cJSON_Delete(root);
		return -1;
	}
	cap = cJSON_GetArraySize(root);
	if (cap > 0 && (h = calloc((size_t)cap, sizeof(*h))) == NULL) {
		cJSON_Delete(root);
		return -1;
	}
	cJSON_ArrayForEach(e, root) {
		if (!cJSON_IsString(e) || e->string == NULL ||
		    (h[n].name = strdup(e->string)) == NULL ||
		    (h[n].value = strdup(e->valuestring)) == NULL) {
			sink_headers_free(h, n + 1);
			cJSON_Delete(root);
			return -1;
		}
		n++;
	}
	cJSON_Delete(root);
	*out = h;
	*nout = n;
	return 0;
}
