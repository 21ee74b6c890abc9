/*
 * test_aws_json.c - the SQS and DynamoDB JSON mappings (sqs.c, ddb.c):
 * request bodies field by field, every kind of SendMessageBatch outcome,
 * ReceiveMessage replies including the empty {}, payload -> PutItem item,
 * malformed bodies, and a GetItem item back to plain JSON.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <cjson/cJSON.h>

#include "outboxd.h"
#include "broker.h"

#define STD_URL		"http://127.0.0.1:9324/000000000000/orders"
#define FIFO_URL	"http://127.0.0.1:9324/000000000000/orders.fifo"
/* UTF-8: e-acute, check mark, grinning face (4 bytes), quote, symbols */
#define UNICODE_TEXT	"\xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x98\x80 (it's) ~*+!"

static cJSON *
parse(const char *s)
{
	cJSON	*j;

	j = cJSON_Parse(s);
	assert_non_null(j);
	return j;
}

static const char *
str_at(const cJSON *obj, const char *name)
{
	const cJSON	*v = cJSON_GetObjectItemCaseSensitive(obj, name);

	assert_true(cJSON_IsString(v));
	return v->valuestring;
}

static void
msg_init(struct outbox_msg *m, int64_t id, const char *type, const char *key,
    const char *payload)
{
	memset(m, 0, sizeof(*m));
	m->id = id;
	m->event_type = (char *)type;
	m->key = (char *)key;
	m->payload = (char *)payload;
	m->payload_len = strlen(payload);
	m->outcome = SINK_SENT;		/* must be overwritten */
}

static void
msgs_free_errors(struct outbox_msg *m, int n)
{
	int	i;

	for (i = 0; i < n; i++) {
		free(m[i].error);
		m[i].error = NULL;
	}
}

static void
test_fifo_detect(void **state)
{
	(void)state;
	assert_true(sqs_queue_is_fifo(FIFO_URL));
	assert_false(sqs_queue_is_fifo(STD_URL));
	assert_false(sqs_queue_is_fifo("fifo"));
	assert_false(sqs_queue_is_fifo(NULL));
}

static void
test_batch_body_standard(void **state)
{
	struct outbox_msg	 m[2];
	const cJSON		*entries, *e, *attr;
	cJSON			*j;
	char			*body;
	size_t			 len;
	const char		*p0 =
	    "{\"orderId\":\"o-1\",\"amountCents\":4999}";

	(void)state;
	msg_init(&m[0], 41, "order.created", "o-1", p0);
	msg_init(&m[1], 9000000000123LL, "order.created", "o-2",
	    "{\"orderId\":\"" UNICODE_TEXT "\"}");
	body = sqs_send_batch_body(STD_URL, m, 2, &len);
	assert_non_null(body);
	assert_int_equal(len, strlen(body));
	j = parse(body);
	assert_string_equal(str_at(j, "QueueUrl"), STD_URL);
	entries = cJSON_GetObjectItemCaseSensitive(j, "Entries");
	assert_int_equal(cJSON_GetArraySize(entries), 2);

	e = cJSON_GetArrayItem(entries, 0);
	assert_string_equal(str_at(e, "Id"), "41");
	/* The payload travels as is, as the message body text. */
	assert_string_equal(str_at(e, "MessageBody"), p0);
	attr = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(e, "MessageAttributes"),
	    "EventType");
	assert_string_equal(str_at(attr, "DataType"), "String");
	assert_string_equal(str_at(attr, "StringValue"), "order.created");
	/* No FIFO fields on a standard queue. */
	assert_null(cJSON_GetObjectItemCaseSensitive(e, "MessageGroupId"));
	assert_null(cJSON_GetObjectItemCaseSensitive(e,
	    "MessageDeduplicationId"));

	e = cJSON_GetArrayItem(entries, 1);
	assert_string_equal(str_at(e, "Id"), "9000000000123");
	assert_string_equal(str_at(e, "MessageBody"),
	    "{\"orderId\":\"" UNICODE_TEXT "\"}");
	cJSON_Delete(j);
	free(body);
}

static void
test_batch_body_fifo(void **state)
{
	struct outbox_msg	 m[2];
	const cJSON		*e;
	cJSON			*j;
	char			*body;

	(void)state;
	msg_init(&m[0], 7, "order.created", "cust-42", "{}");
	msg_init(&m[1], 8, "order.created", NULL, "{}");
	body = sqs_send_batch_body(FIFO_URL, m, 2, NULL);
	assert_non_null(body);
	j = parse(body);
	e = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "Entries"),
	    0);
	assert_string_equal(str_at(e, "MessageGroupId"), "cust-42");
	assert_string_equal(str_at(e, "MessageDeduplicationId"), "7");
	e = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "Entries"),
	    1);
	/* No key still needs a group. */
	assert_string_equal(str_at(e, "MessageGroupId"), "outbox");
	assert_string_equal(str_at(e, "MessageDeduplicationId"), "8");
	cJSON_Delete(j);
	free(body);
}

/* The unicode body survives build -> wire text -> parse byte for byte,
 * and payload_len (not a NUL) bounds the payload. */
static void
test_batch_body_unicode_exact(void **state)
{
	struct outbox_msg	 m;
	char			 buf[64];
	cJSON			*j;
	char			*body;
	const char		*got;

	(void)state;
	snprintf(buf, sizeof(buf), "%sGARBAGE", UNICODE_TEXT);
	msg_init(&m, 1, "order.created", "k", buf);
	m.payload_len = strlen(UNICODE_TEXT);
	body = sqs_send_batch_body(STD_URL, &m, 1, NULL);
	assert_non_null(body);
	/* cJSON writes UTF-8 as is, not as \u escapes. */
	assert_non_null(strstr(body, UNICODE_TEXT));
	j = parse(body);
	got = str_at(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j,
	    "Entries"), 0), "MessageBody");
	assert_int_equal(strlen(got), strlen(UNICODE_TEXT));
	assert_memory_equal(got, UNICODE_TEXT, strlen(UNICODE_TEXT));
	cJSON_Delete(j);
	free(body);
}

static void
test_batch_body_bad_input(void **state)
{
	struct outbox_msg	m;

	(void)state;
	msg_init(&m, 1, "t", "k", "{}");
	assert_null(sqs_send_batch_body(NULL, &m, 1, NULL));
	assert_null(sqs_send_batch_body(STD_URL, &m, 0, NULL));
	m.payload = NULL;
	assert_null(sqs_send_batch_body(STD_URL, &m, 1, NULL));
}

/* 9 Successful + 1 Failed with SenderFault false: 9 sent, 1 retried. */
static void
test_batch_reply_nine_plus_one(void **state)
{
	struct outbox_msg	 m[10];
	cJSON			*reply, *ok, *e;
	char			 id[16];
	int			 i;

	(void)state;
	reply = cJSON_CreateObject();
	ok = cJSON_AddArrayToObject(reply, "Successful");
	for (i = 0; i < 10; i++) {
		msg_init(&m[i], 100 + i, "order.created", "k", "{}");
		if (i == 6)
			continue;
		e = cJSON_CreateObject();
		snprintf(id, sizeof(id), "%d", 100 + i);
		cJSON_AddStringToObject(e, "Id", id);
		cJSON_AddStringToObject(e, "MessageId", "mid");
		cJSON_AddItemToArray(ok, e);
	}
	e = cJSON_CreateObject();
	cJSON_AddStringToObject(e, "Id", "106");
	cJSON_AddFalseToObject(e, "SenderFault");
	cJSON_AddStringToObject(e, "Code", "InternalError");
	cJSON_AddStringToObject(e, "Message", "try again");
	cJSON_AddItemToArray(cJSON_AddArrayToObject(reply, "Failed"), e);

	assert_int_equal(sqs_send_batch_parse(reply, m, 10), 9);
	for (i = 0; i < 10; i++) {
		if (i == 6)
			continue;
		assert_int_equal(m[i].outcome, SINK_SENT);
		assert_null(m[i].error);
	}
	assert_int_equal(m[6].outcome, SINK_RETRY);
	assert_non_null(m[6].error);
	assert_non_null(strstr(m[6].error, "InternalError"));
	assert_non_null(strstr(m[6].error, "try again"));
	msgs_free_errors(m, 10);
	cJSON_Delete(reply);
}

/* SenderFault true rejects; an entry in neither list is retried; ids
 * SQS invents are ignored. */
static void
test_batch_reply_sender_fault_and_missing(void **state)
{
	struct outbox_msg	 m[3];
	cJSON			*reply;

	(void)state;
	msg_init(&m[0], 1, "t", "k", "{}");
	msg_init(&m[1], 2, "t", "k", "{}");
	msg_init(&m[2], 3, "t", "k", "{}");
	reply = parse("{\"Successful\":[{\"Id\":\"1\"},{\"Id\":\"77\"}],"
	    "\"Failed\":[{\"Id\":\"2\",\"SenderFault\":true,"
	    "\"Code\":\"InvalidMessageContents\","
	    "\"Message\":\"bad chars\"}]}");
	assert_int_equal(sqs_send_batch_parse(reply, m, 3), 1);
	assert_int_equal(m[0].outcome, SINK_SENT);
	assert_null(m[0].error);
	assert_int_equal(m[1].outcome, SINK_REJECTED);
	assert_string_equal(m[1].error,
	    "SQS InvalidMessageContents: bad chars");
	assert_int_equal(m[2].outcome, SINK_RETRY);
	assert_non_null(m[2].error);
	msgs_free_errors(m, 3);
	cJSON_Delete(reply);

	/* A reply without either list retries everything. */
	msg_init(&m[0], 1, "t", "k", "{}");
	reply = parse("{}");
	assert_int_equal(sqs_send_batch_parse(reply, m, 1), 0);
	assert_int_equal(m[0].outcome, SINK_RETRY);
	msgs_free_errors(m, 1);
	cJSON_Delete(reply);
}

static void
test_receive_body(void **state)
{
	const cJSON	*a;
	cJSON		*j;
	char		*body;

	(void)state;
	body = sqs_receive_body(STD_URL, 20, 10, NULL);
	assert_non_null(body);
	j = parse(body);
	assert_string_equal(str_at(j, "QueueUrl"), STD_URL);
	assert_int_equal(cJSON_GetObjectItemCaseSensitive(j,
	    "WaitTimeSeconds")->valueint, 20);
	assert_int_equal(cJSON_GetObjectItemCaseSensitive(j,
	    "MaxNumberOfMessages")->valueint, 10);
	a = cJSON_GetObjectItemCaseSensitive(j, "MessageAttributeNames");
	assert_int_equal(cJSON_GetArraySize(a), 1);
	assert_string_equal(cJSON_GetArrayItem(a, 0)->valuestring, "All");
	a = cJSON_GetObjectItemCaseSensitive(j, "AttributeNames");
	assert_string_equal(cJSON_GetArrayItem(a, 0)->valuestring,
	    "ApproximateReceiveCount");
	cJSON_Delete(j);
	free(body);
}

static void
test_receive_parse(void **state)
{
	struct sqs_message	*msgs;
	cJSON			*reply;
	int			 n;

	(void)state;
	/* An empty long poll answers {}. */
	reply = parse("{}");
	n = -1;
	assert_int_equal(sqs_receive_parse(reply, &msgs, &n), 0);
	assert_int_equal(n, 0);
	assert_null(msgs);
	cJSON_Delete(reply);

	reply = parse("{\"Messages\":[]}");
	assert_int_equal(sqs_receive_parse(reply, &msgs, &n), 0);
	assert_int_equal(n, 0);
	cJSON_Delete(reply);

	reply = parse("{\"Messages\":[{\"MessageId\":\"m-1\","
	    "\"ReceiptHandle\":\"rh-1\",\"Body\":\"" UNICODE_TEXT "\","
	    "\"Attributes\":{\"ApproximateReceiveCount\":\"3\"},"
	    "\"MessageAttributes\":{\"EventType\":{\"DataType\":\"String\","
	    "\"StringValue\":\"order.created\"}}},"
	    "{\"MessageId\":\"m-2\",\"ReceiptHandle\":\"rh-2\","
	    "\"Body\":\"{}\"}]}");
	assert_int_equal(sqs_receive_parse(reply, &msgs, &n), 0);
	assert_int_equal(n, 2);
	assert_string_equal(msgs[0].message_id, "m-1");
	assert_string_equal(msgs[0].receipt_handle, "rh-1");
	assert_string_equal(msgs[0].body, UNICODE_TEXT);
	assert_int_equal(msgs[0].body_len, strlen(UNICODE_TEXT));
	assert_string_equal(msgs[0].event_type, "order.created");
	assert_int_equal(msgs[0].receive_count, 3);
	assert_string_equal(msgs[1].receipt_handle, "rh-2");
	assert_null(msgs[1].event_type);
	assert_int_equal(msgs[1].receive_count, 0);
	sqs_messages_free(msgs, n);
	cJSON_Delete(reply);

	/* A message without a receipt handle cannot be deleted later. */
	reply = parse("{\"Messages\":[{\"MessageId\":\"m\",\"Body\":\"x\"}]}");
	assert_int_equal(sqs_receive_parse(reply, &msgs, &n), -1);
	assert_null(msgs);
	cJSON_Delete(reply);
}

static void
test_delete_batch(void **state)
{
	const char	*handles[3] = { "rh-a", "rh-b", "rh-c" };
	const cJSON	*e;
	cJSON		*j, *reply;
	char		*body, *errors[3];

	(void)state;
	body = sqs_delete_batch_body(STD_URL, handles, 3, NULL);
	assert_non_null(body);
	j = parse(body);
	assert_string_equal(str_at(j, "QueueUrl"), STD_URL);
	e = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "Entries"),
	    2);
	assert_string_equal(str_at(e, "Id"), "2");
	assert_string_equal(str_at(e, "ReceiptHandle"), "rh-c");
	cJSON_Delete(j);
	free(body);

	reply = parse("{\"Successful\":[{\"Id\":\"0\"}],\"Failed\":[{"
	    "\"Id\":\"1\",\"SenderFault\":true,\"Code\":"
	    "\"ReceiptHandleIsInvalid\",\"Message\":\"gone\"}]}");
	assert_int_equal(sqs_delete_batch_parse(reply, 3, errors), 2);
	assert_null(errors[0]);
	assert_string_equal(errors[1], "SQS ReceiptHandleIsInvalid: gone");
	assert_non_null(errors[2]);	/* in neither list */
	free(errors[1]);
	free(errors[2]);
	cJSON_Delete(reply);
}

static void
test_fulfillment_put_item(void **state)
{
	struct fulfillment	 f;
	const cJSON		*item;
	cJSON			*j;
	char			 err[128], *body;
	const char		*payload = "{\"orderId\":\"8d3c-uuid\","
	    "\"customerId\":\"c1\",\"amountCents\":4999,"
	    "\"createdAt\":\"2025-01-01T00:00:00.000Z\",\"extra\":[1]}";

	(void)state;
	assert_int_equal(ddb_fulfillment_parse(payload, strlen(payload), &f,
	    err, sizeof(err)), 0);
	assert_string_equal(f.order_id, "8d3c-uuid");
	assert_string_equal(f.customer_id, "c1");
	assert_int_equal(f.amount_cents, 4999);

	body = ddb_fulfillment_put_body("fulfillments", &f,
	    "2025-06-01T10:20:30.456Z", NULL);
	assert_non_null(body);
	j = parse(body);
	assert_string_equal(str_at(j, "TableName"), "fulfillments");
	assert_string_equal(str_at(j, "ConditionExpression"),
	    "attribute_not_exists(orderId)");
	item = cJSON_GetObjectItemCaseSensitive(j, "Item");
	assert_int_equal(cJSON_GetArraySize(item), 5);
	assert_string_equal(str_at(cJSON_GetObjectItemCaseSensitive(item,
	    "orderId"), "S"), "8d3c-uuid");
	assert_string_equal(str_at(cJSON_GetObjectItemCaseSensitive(item,
	    "customerId"), "S"), "c1");
	/* N travels as a decimal string. */
	assert_string_equal(str_at(cJSON_GetObjectItemCaseSensitive(item,
	    "amountCents"), "N"), "4999");
	assert_null(cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(item, "amountCents"), "S"));
	assert_string_equal(str_at(cJSON_GetObjectItemCaseSensitive(item,
	    "status"), "S"), "received");
	assert_string_equal(str_at(cJSON_GetObjectItemCaseSensitive(item,
	    "createdAt"), "S"), "2025-06-01T10:20:30.456Z");
	cJSON_Delete(j);
	free(body);
	ddb_fulfillment_clear(&f);
	assert_null(f.order_id);
}

static void
test_fulfillment_amount_forms(void **state)
{
	struct fulfillment	 f;
	char			 err[128];
	const char		*big = "{\"orderId\":\"o\","
	    "\"customerId\":\"c\",\"amountCents\":\"9223372036854775807\"}";
	const char		*zero = "{\"orderId\":\"o\","
	    "\"customerId\":\"c\",\"amountCents\":0}";

	(void)state;
	/* A digit string stays exact beyond 2^53. */
	assert_int_equal(ddb_fulfillment_parse(big, strlen(big), &f, err,
	    sizeof(err)), 0);
	assert_true(f.amount_cents == INT64_MAX);
	ddb_fulfillment_clear(&f);
	assert_int_equal(ddb_fulfillment_parse(zero, strlen(zero), &f, err,
	    sizeof(err)), 0);
	assert_int_equal(f.amount_cents, 0);
	ddb_fulfillment_clear(&f);
}

static void
expect_malformed(const char *body, const char *why)
{
	struct fulfillment	f;
	char			err[128];

	err[0] = '\0';
	assert_int_equal(ddb_fulfillment_parse(body, strlen(body), &f, err,
	    sizeof(err)), -1);
	assert_null(f.order_id);
	assert_null(f.customer_id);
	if (strstr(err, why) == NULL)
		fail_msg("body %s: error \"%s\" lacks \"%s\"", body, err, why);
}

static void
test_fulfillment_malformed(void **state)
{
	(void)state;
	expect_malformed("", "empty");
	expect_malformed("not json {", "not JSON");
	expect_malformed("[1,2]", "not a JSON object");
	expect_malformed("{\"customerId\":\"c\",\"amountCents\":1}",
	    "orderId");
	expect_malformed("{\"orderId\":\"\",\"customerId\":\"c\","
	    "\"amountCents\":1}", "orderId");
	expect_malformed("{\"orderId\":5,\"customerId\":\"c\","
	    "\"amountCents\":1}", "orderId");
	expect_malformed("{\"orderId\":\"o\",\"amountCents\":1}",
	    "customerId");
	expect_malformed("{\"orderId\":\"o\",\"customerId\":\"c\"}",
	    "amountCents missing");
	expect_malformed("{\"orderId\":\"o\",\"customerId\":\"c\","
	    "\"amountCents\":12.5}", "not an integer");
	expect_malformed("{\"orderId\":\"o\",\"customerId\":\"c\","
	    "\"amountCents\":\"12.5\"}", "not an integer");
	expect_malformed("{\"orderId\":\"o\",\"customerId\":\"c\","
	    "\"amountCents\":\"abc\"}", "not an integer");
	expect_malformed("{\"orderId\":\"o\",\"customerId\":\"c\","
	    "\"amountCents\":1e300}", "not an integer");
	expect_malformed("{\"orderId\":\"o\",\"customerId\":\"c\","
	    "\"amountCents\":true}", "not an integer");
}

static void
test_timestamp(void **state)
{
	char	buf[32];

	(void)state;
	assert_int_equal(ddb_timestamp(buf, sizeof(buf), 1735689600123LL), 0);
	assert_string_equal(buf, "2025-01-01T00:00:00.123Z");
	assert_int_equal(ddb_timestamp(buf, sizeof(buf), 5), 0);
	assert_string_equal(buf, "1970-01-01T00:00:00.005Z");
	assert_int_equal(ddb_timestamp(buf, 10, 5), -1);
}

static void
test_get_body(void **state)
{
	cJSON	*j;
	char	*body;

	(void)state;
	body = ddb_get_body("fulfillments", "o-9", NULL);
	assert_non_null(body);
	j = parse(body);
	assert_string_equal(str_at(j, "TableName"), "fulfillments");
	assert_string_equal(str_at(cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(j, "Key"), "orderId"), "S"),
	    "o-9");
	assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j,
	    "ConsistentRead")));
	cJSON_Delete(j);
	free(body);
}

static void
test_item_to_json(void **state)
{
	cJSON	*item, *plain;
	char	*text;

	(void)state;
	item = parse("{\"orderId\":{\"S\":\"o-1\"},"
	    "\"amountCents\":{\"N\":\"4999\"},\"ratio\":{\"N\":\"12.5\"},"
	    "\"status\":{\"S\":\"received\"},\"flag\":{\"BOOL\":true},"
	    "\"none\":{\"NULL\":true},\"tags\":{\"SS\":[\"a\",\"b\"]},"
	    "\"m\":{\"M\":{\"k\":{\"L\":[{\"N\":\"1\"},{\"S\":\"x\"}]}}}}");
	plain = ddb_item_to_json(item);
	assert_non_null(plain);
	text = cJSON_PrintUnformatted(plain);
	assert_string_equal(text, "{\"orderId\":\"o-1\",\"amountCents\":4999,"
	    "\"ratio\":12.5,\"status\":\"received\",\"flag\":true,"
	    "\"none\":null,\"tags\":[\"a\",\"b\"],\"m\":{\"k\":[1,\"x\"]}}");
	free(text);
	cJSON_Delete(plain);
	cJSON_Delete(item);

	/* A number DynamoDB would never send is kept as text, not as
	 * broken JSON. */
	item = parse("{\"n\":{\"N\":\"1,5\"}}");
	plain = ddb_item_to_json(item);
	text = cJSON_PrintUnformatted(plain);
	assert_string_equal(text, "{\"n\":\"1,5\"}");
	free(text);
	cJSON_Delete(plain);
	cJSON_Delete(item);

	item = parse("{\"x\":{\"WHAT\":1}}");
	assert_null(ddb_item_to_json(item));
	cJSON_Delete(item);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fifo_detect),
		cmocka_unit_test(test_batch_body_standard),
		cmocka_unit_test(test_batch_body_fifo),
		cmocka_unit_test(test_batch_body_unicode_exact),
		cmocka_unit_test(test_batch_body_bad_input),
		cmocka_unit_test(test_batch_reply_nine_plus_one),
		cmocka_unit_test(test_batch_reply_sender_fault_and_missing),
		cmocka_unit_test(test_receive_body),
		cmocka_unit_test(test_receive_parse),
		cmocka_unit_test(test_delete_batch),
		cmocka_unit_test(test_fulfillment_put_item),
		cmocka_unit_test(test_fulfillment_amount_forms),
		cmocka_unit_test(test_fulfillment_malformed),
		cmocka_unit_test(test_timestamp),
		cmocka_unit_test(test_get_body),
		cmocka_unit_test(test_item_to_json),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
