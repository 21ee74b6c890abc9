/*
 * ddb.c - request bodies and item mapping for DynamoDB's JSON 1.0 protocol
 * (AWS DynamoDB API reference: PutItem, GetItem; AttributeValue).  Pure
 * functions: no I/O, no logging, so the unit tests can drive them.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "outboxd.h"
#include "broker.h"

/* Largest integer a double (cJSON's number) holds exactly: 2^53 - 1. */
#define DDB_MAX_SAFE_INT	9007199254740991.0

/* {"S": s} or {"N": s} under name in obj; NULL on allocation failure. */
static cJSON *
ddb_add_attr(cJSON *obj, const char *name, const char *type, const char *s)
{
	cJSON	*v;

	if ((v = cJSON_AddObjectToObject(obj, name)) == NULL)
		return (NULL);
	return (cJSON_AddStringToObject(v, type, s));
}

/* amountCents as a JSON integer, or a string of decimal digits (exact
 * beyond 2^53).  -1 if it is neither. */
static int
ddb_parse_amount(const cJSON *v, int64_t *out)
{
	const char	*s;
	char		*end;
	long long	 ll;

	if (cJSON_IsNumber(v)) {
		/* cJSON keeps a double: reject fractions and values it
		 * cannot hold exactly. */
		if (v->valuedouble > DDB_MAX_SAFE_INT ||
		    v->valuedouble < -DDB_MAX_SAFE_INT ||
		    v->valuedouble != (double)(int64_t)v->valuedouble)
			return (-1);
		*out = (int64_t)v->valuedouble;
		return (0);
	}
	if (cJSON_IsString(v)) {
		s = v->valuestring;
		if (*s == '-')
			s++;
		if (*s < '0' || *s > '9')
			return (-1);
		errno = 0;
		ll = strtoll(v->valuestring, &end, 10);
		if (errno != 0 || *end != '\0')
			return (-1);
		*out = ll;
		return (0);
	}
	return (-1);
}

void
ddb_fulfillment_clear(struct fulfillment *f)
{
	free(f->order_id);
	free(f->customer_id);
	memset(f, 0, sizeof *f);
}

int
ddb_fulfillment_parse(const char *body, size_t len, struct fulfillment *f,
    char *err, size_t errlen)
{
	cJSON		*root;
	const cJSON	*v;

	memset(f, 0, sizeof *f);
	if (body == NULL || len == 0) {
		snprintf(err, errlen, "empty message body");
		return (-1);
	}
	if ((root = cJSON_ParseWithLength(body, len)) == NULL) {
		snprintf(err, errlen, "message body is not JSON");
		return (-1);
	}
	if (!cJSON_IsObject(root)) {
		snprintf(err, errlen, "message body is not a JSON object");
		goto fail;
	}
	v = cJSON_GetObjectItemCaseSensitive(root, "orderId");
	if (!cJSON_IsString(v) || *v->valuestring == '\0') {
		snprintf(err, errlen, "orderId missing or not a non-empty "
		    "string");
		goto fail;
	}
	if ((f->order_id = strdup(v->valuestring)) == NULL) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	v = cJSON_GetObjectItemCaseSensitive(root, "customerId");
	if (!cJSON_IsString(v) || *v->valuestring == '\0') {
		snprintf(err, errlen, "customerId missing or not a non-empty "
		    "string");
		goto fail;
	}
	if ((f->customer_id = strdup(v->valuestring)) == NULL) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	v = cJSON_GetObjectItemCaseSensitive(root, "amountCents");
	if (v == NULL) {
		snprintf(err, errlen, "amountCents missing");
		goto fail;
	}
	if (ddb_parse_amount(v, &f->amount_cents) == -1) {
		snprintf(err, errlen, "amountCents is not an integer");
		goto fail;
	}
	cJSON_Delete(root);
	return (0);

fail:
	cJSON_Delete(root);
	ddb_fulfillment_clear(f);
	return (-1);
}

int
ddb_timestamp(char *buf, size_t len, int64_t ms)
{
	struct tm	tm;
	time_t		t;
	size_t		n;
	int		frac;

	t = (time_t)(ms / 1000);
	frac = (int)(ms % 1000);
	if (frac < 0) {
		frac += 1000;
		t--;
	}
	if (gmtime_r(&t, &tm) == NULL)
		return (-1);
	if ((n = strftime(buf, len, "%Y-%m-%dT%H:%M:%S", &tm)) == 0)
		return (-1);
	if ((size_t)snprintf(buf + n, len - n, ".%03dZ", frac) >= len - n)
		return (-1);
	return (0);
}

char *
ddb_fulfillment_put_body(const char *table, const struct fulfillment *f,
    const char *created_at, size_t *len)
{
	cJSON	*root, *item;
	char	 amount[32];

	if (table == NULL || f->order_id == NULL || f->customer_id == NULL ||
	    created_at == NULL)
		return (NULL);
	snprintf(amount, sizeof amount, "%" PRId64, f->amount_cents);
	if ((root = cJSON_CreateObject()) == NULL)
		return (NULL);
	if (cJSON_AddStringToObject(root, "TableName", table) == NULL ||
	    (item = cJSON_AddObjectToObject(root, "Item")) == NULL ||
	    ddb_add_attr(item, "orderId", "S", f->order_id) == NULL ||
	    ddb_add_attr(item, "customerId", "S", f->customer_id) == NULL ||
	    ddb_add_attr(item, "amountCents", "N", amount) == NULL ||
	    ddb_add_attr(item, "status", "S", "received") == NULL ||
	    ddb_add_attr(item, "createdAt", "S", created_at) == NULL ||
	    /* Duplicates (at-least-once delivery) fail the condition. */
	    cJSON_AddStringToObject(root, "ConditionExpression",
	    "attribute_not_exists(orderId)") == NULL) {
		cJSON_Delete(root);
		return (NULL);
	}
	return (aws_json_print(root, len));
}

char *
ddb_get_body(const char *table, const char *order_id, size_t *len)
{
	cJSON	*root, *key;

	if (table == NULL || order_id == NULL)
		return (NULL);
	if ((root = cJSON_CreateObject()) == NULL)
		return (NULL);
	if (cJSON_AddStringToObject(root, "TableName", table) == NULL ||
	    (key = cJSON_AddObjectToObject(root, "Key")) == NULL ||
	    ddb_add_attr(key, "orderId", "S", order_id) == NULL ||
	    cJSON_AddTrueToObject(root, "ConsistentRead") == NULL) {
		cJSON_Delete(root);
		return (NULL);
	}
	return (aws_json_print(root, len));
}

/* A DynamoDB number string as a JSON number, kept exact (raw) when it is
 * valid JSON number syntax, else as a string. */
static cJSON *
ddb_number(const char *s)
{
	const char	*p = s;

	if (*p == '-')
		p++;
	if (*p == '0')
		p++;
	else if (*p >= '1' && *p <= '9')
		while (*p >= '0' && *p <= '9')
			p++;
	else
		return (cJSON_CreateString(s));
	if (*p == '.') {
		p++;
		if (*p < '0' || *p > '9')
			return (cJSON_CreateString(s));
		while (*p >= '0' && *p <= '9')
			p++;
	}
	if (*p == 'e' || *p == 'E') {
		p++;
		if (*p == '+' || *p == '-')
			p++;
		if (*p < '0' || *p > '9')
			return (cJSON_CreateString(s));
		while (*p >= '0' && *p <= '9')
			p++;
	}
	if (*p != '\0')
		return (cJSON_CreateString(s));
	return (cJSON_CreateRaw(s));
}

static cJSON	*ddb_value(const cJSON *);

/* Array of the converted elements of list: AttributeValues for kind 'L',
 * number strings for 'N' (NS), other strings for 'S' (SS, BS). */
static cJSON *
ddb_list(const cJSON *list, int kind)
{
	const cJSON	*e;
	cJSON		*arr, *v;

	if (!cJSON_IsArray(list) || (arr = cJSON_CreateArray()) == NULL)
		return (NULL);
	cJSON_ArrayForEach(e, list) {
		if (kind == 'L')
			v = ddb_value(e);
		else if (!cJSON_IsString(e))
			v = NULL;
		else if (kind == 'N')
			v = ddb_number(e->valuestring);
		else
			v = cJSON_CreateString(e->valuestring);
		if (v == NULL) {
			cJSON_Delete(arr);
			return (NULL);
		}
		cJSON_AddItemToArray(arr, v);
	}
	return (arr);
}

/* One AttributeValue ({"S": ...}, {"N": ...}, ...) to plain JSON. */
static cJSON *
ddb_value(const cJSON *av)
{
	const cJSON	*v;
	const char	*t;

	if (!cJSON_IsObject(av) || (v = av->child) == NULL || v->next != NULL)
		return (NULL);
	t = v->string;
	if (strcmp(t, "S") == 0 || strcmp(t, "B") == 0)	/* B: base64 */
		return (cJSON_IsString(v) ?
		    cJSON_CreateString(v->valuestring) : NULL);
	if (strcmp(t, "N") == 0)
		return (cJSON_IsString(v) ? ddb_number(v->valuestring) : NULL);
	if (strcmp(t, "BOOL") == 0)
		return (cJSON_IsBool(v) ? cJSON_CreateBool(cJSON_IsTrue(v)) :
		    NULL);
	if (strcmp(t, "NULL") == 0)
		return (cJSON_CreateNull());
	if (strcmp(t, "M") == 0)
		return (ddb_item_to_json(v));
	if (strcmp(t, "L") == 0)
		return (ddb_list(v, 'L'));
	if (strcmp(t, "SS") == 0 || strcmp(t, "BS") == 0)
		return (ddb_list(v, 'S'));
	if (strcmp(t, "NS") == 0)
		return (ddb_list(v, 'N'));
	return (NULL);
}

struct cJSON *
ddb_item_to_json(const struct cJSON *item)
{
	const cJSON	*e;
	cJSON		*out, *v;

	if (!cJSON_IsObject(item) || (out = cJSON_CreateObject()) == NULL)
		return (NULL);
	cJSON_ArrayForEach(e, item) {
		if ((v = ddb_value(e)) == NULL) {
			cJSON_Delete(out);
			return (NULL);
		}
		cJSON_AddItemToObject(out, e->string, v);
	}
	return (out);
}
