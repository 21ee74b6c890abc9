/*
 * test_order.c - POST /orders validation, order id syntax and the JSON the
 * API answers with (src/order.c): every refusal gives its own code, and
 * the limits are exact at the boundary.
 */
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

/* Parse a NUL-terminated body; returns order_parse's result. */
static int
parse(const char *body, struct order_input *in, struct order_error *err)
{
	memset(in, 0xa5, sizeof(*in));
	err->code = err->message = NULL;
	return order_parse(body, strlen(body), in, err);
}

/* The body must be refused with exactly this code (and some message). */
static void
expect_code(const char *body, const char *code)
{
	struct order_input	in;
	struct order_error	err;

	if (parse(body, &in, &err) != -1)
		fail_msg("accepted: %s", body);
	assert_non_null(err.code);
	assert_non_null(err.message);
	assert_true(err.message[0] != '\0');
	if (strcmp(err.code, code) != 0)
		fail_msg("%s: got %s, want %s", body, err.code, code);
}

/* A customerId of n bytes of 'x'. */
static char *
body_with_cid_len(size_t n)
{
	char	*b;
	size_t	 i;

	b = malloc(n + 64);
	assert_non_null(b);
	i = (size_t)sprintf(b, "{\"customerId\":\"");
	memset(b + i, 'x', n);
	sprintf(b + i + n, "\",\"amountCents\":1}");
	return b;
}

static void
test_good(void **state)
{
	struct order_input	in;
	struct order_error	err;

	(void)state;
	assert_int_equal(parse("{\"customerId\":\"c1\",\"amountCents\":4999}",
	    &in, &err), 0);
	assert_string_equal(in.customer_id, "c1");
	assert_int_equal(in.customer_id_len, 2);
	assert_int_equal(in.amount_cents, 4999);
	assert_null(err.code);

	/* whitespace around, members in any order, extras ignored, zero */
	assert_int_equal(parse(" \r\n\t{ \"amountCents\" : 0 , \"note\": "
	    "{\"a\":[1,2,null]}, \"customerId\":\"c 2\" } \n", &in, &err), 0);
	assert_string_equal(in.customer_id, "c 2");
	assert_int_equal(in.amount_cents, 0);

	/* an amount is an integer token: a fraction or an exponent is
	 * refused even where its value is whole (issue 25) */
	expect_code("{\"customerId\":\"c\",\"amountCents\":4999.0}",
	    "amount_cents_not_integer");
	expect_code("{\"customerId\":\"c\",\"amountCents\":1e3}",
	    "amount_cents_not_integer");

	/* escapes are decoded */
	assert_int_equal(parse("{\"customerId\":\"a\\\"b\\\\c\\/d\","
	    "\"amountCents\":1}", &in, &err), 0);
	assert_string_equal(in.customer_id, "a\"b\\c/d");

	/* the body need not be NUL-terminated: only len bytes count */
	assert_int_equal(order_parse("{\"customerId\":\"c\",\"amountCents\":7}"
	    "GARBAGE", strlen("{\"customerId\":\"c\",\"amountCents\":7}"),
	    &in, &err), 0);
	assert_int_equal(in.amount_cents, 7);
}

static void
test_malformed(void **state)
{
	(void)state;
	expect_code("", "malformed_json");
	expect_code("   ", "malformed_json");
	expect_code("{", "malformed_json");
	expect_code("{\"customerId\":\"c1\",\"amountCents\":4999",
	    "malformed_json");
	expect_code("{\"customerId\":\"c1\",\"amountCents\":4999}}",
	    "malformed_json");
	expect_code("{\"customerId\":\"c1\",\"amountCents\":4999} x",
	    "malformed_json");
	expect_code("{\"customerId\":'c1',\"amountCents\":4999}",
	    "malformed_json");
	expect_code("{customerId:\"c1\",amountCents:4999}", "malformed_json");
	expect_code("{\"customerId\":\"c1\",\"amountCents\":NaN}",
	    "malformed_json");
	expect_code("customerId=c1&amountCents=4999", "malformed_json");
	/* NUL, escaped or raw, would silently cut the string short */
	expect_code("{\"customerId\":\"c\\u0000d\",\"amountCents\":1}",
	    "malformed_json");
	expect_code("{\"x\":\"\\u0000\",\"customerId\":\"c\","
	    "\"amountCents\":1}", "malformed_json");
	{
		struct order_input	in;
		struct order_error	err;
		const char		raw[] = "{\"customerId\":\"c\0d\","
					    "\"amountCents\":1}";

		assert_int_equal(order_parse(raw, sizeof(raw) - 1, &in, &err),
		    -1);
		assert_string_equal(err.code, "malformed_json");
		assert_int_equal(order_parse(NULL, 0, &in, &err), -1);
		assert_string_equal(err.code, "malformed_json");
	}
}

static void
test_escaped_backslash_before_u0000_text(void **state)
{
	struct order_input	in;
	struct order_error	err;

	(void)state;
	/* "\\u0000" is a backslash then the text u0000: allowed */
	assert_int_equal(parse("{\"customerId\":\"a\\\\u0000\","
	    "\"amountCents\":1}", &in, &err), 0);
	assert_string_equal(in.customer_id, "a\\u0000");
}

static void
test_not_object(void **state)
{
	(void)state;
	expect_code("[]", "not_an_object");
	expect_code("[{\"customerId\":\"c1\",\"amountCents\":1}]",
	    "not_an_object");
	expect_code("\"c1\"", "not_an_object");
	expect_code("42", "not_an_object");
	expect_code("null", "not_an_object");
	expect_code("true", "not_an_object");
}

static void
test_customer_id(void **state)
{
	(void)state;
	expect_code("{}", "customer_id_missing");
	expect_code("{\"amountCents\":1}", "customer_id_missing");
	/* names are case-sensitive */
	expect_code("{\"customerid\":\"c\",\"amountCents\":1}",
	    "customer_id_missing");
	expect_code("{\"customerId\":\"\",\"amountCents\":1}",
	    "customer_id_empty");
	expect_code("{\"customerId\":null,\"amountCents\":1}",
	    "customer_id_not_string");
	expect_code("{\"customerId\":42,\"amountCents\":1}",
	    "customer_id_not_string");
	expect_code("{\"customerId\":true,\"amountCents\":1}",
	    "customer_id_not_string");
	expect_code("{\"customerId\":[\"c\"],\"amountCents\":1}",
	    "customer_id_not_string");
	expect_code("{\"customerId\":{},\"amountCents\":1}",
	    "customer_id_not_string");
	/* invalid UTF-8: lone continuation, overlong '/', a surrogate,
	 * beyond U+10FFFF, truncated sequence */
	expect_code("{\"customerId\":\"a\x80\",\"amountCents\":1}",
	    "customer_id_invalid");
	expect_code("{\"customerId\":\"\xc0\xaf\",\"amountCents\":1}",
	    "customer_id_invalid");
	expect_code("{\"customerId\":\"\xed\xa0\x80\",\"amountCents\":1}",
	    "customer_id_invalid");
	expect_code("{\"customerId\":\"\xf4\x90\x80\x80\",\"amountCents\":1}",
	    "customer_id_invalid");
	expect_code("{\"customerId\":\"\xe2\x82\",\"amountCents\":1}",
	    "customer_id_invalid");
	/* the customerId is checked before amountCents */
	expect_code("{\"customerId\":\"\",\"amountCents\":-1}",
	    "customer_id_empty");
}

static void
test_customer_id_length(void **state)
{
	struct order_input	in;
	struct order_error	err;
	char			*b;

	(void)state;
	b = body_with_cid_len(256);
	assert_int_equal(parse(b, &in, &err), 0);
	assert_int_equal(in.customer_id_len, 256);
	assert_int_equal(strlen(in.customer_id), 256);
	free(b);

	b = body_with_cid_len(257);
	expect_code(b, "customer_id_too_long");
	free(b);

	b = body_with_cid_len(100000);
	expect_code(b, "customer_id_too_long");
	free(b);

	/* the limit is in bytes, after unescaping: 128 "é" = 256 bytes */
	{
		char	body[2048];
		size_t	i, n;

		n = (size_t)sprintf(body, "{\"customerId\":\"");
		for (i = 0; i < 128; i++)
			n += (size_t)sprintf(body + n, "\\u00e9");
		sprintf(body + n, "\",\"amountCents\":1}");
		assert_int_equal(parse(body, &in, &err), 0);
		assert_int_equal(in.customer_id_len, 256);
		n = (size_t)sprintf(body, "{\"customerId\":\"x");
		for (i = 0; i < 128; i++)
			n += (size_t)sprintf(body + n, "\xc3\xa9");
		sprintf(body + n, "\",\"amountCents\":1}");
		expect_code(body, "customer_id_too_long");
	}
}

static void
test_customer_id_unicode(void **state)
{
	struct order_input	in;
	struct order_error	err;

	(void)state;
	/* raw UTF-8: 2-, 3- and 4-byte sequences, kept byte for byte */
	assert_int_equal(parse("{\"customerId\":\"J\xc3\xbcrgen-\xe5\xae\xa2"
	    "\xe6\x88\xb7-\xf0\x9f\x98\x80\",\"amountCents\":1}", &in, &err),
	    0);
	assert_string_equal(in.customer_id,
	    "J\xc3\xbcrgen-\xe5\xae\xa2\xe6\x88\xb7-\xf0\x9f\x98\x80");
	assert_int_equal(in.customer_id_len, 19);

	/* the same characters escaped, including a surrogate pair */
	assert_int_equal(parse("{\"customerId\":\"J\\u00fcrgen-\\u5ba2\\u6237-"
	    "\\ud83d\\ude00\",\"amountCents\":1}", &in, &err), 0);
	assert_string_equal(in.customer_id,
	    "J\xc3\xbcrgen-\xe5\xae\xa2\xe6\x88\xb7-\xf0\x9f\x98\x80");

	/* a lone surrogate escape is not a character */
	expect_code("{\"customerId\":\"\\ud83d\",\"amountCents\":1}",
	    "malformed_json");
}

static void
test_amount(void **state)
{
	(void)state;
	expect_code("{\"customerId\":\"c\"}", "amount_cents_missing");
	expect_code("{\"customerId\":\"c\",\"amountcents\":1}",
	    "amount_cents_missing");
	expect_code("{\"customerId\":\"c\",\"amountCents\":\"12\"}",
	    "amount_cents_not_number");
	expect_code("{\"customerId\":\"c\",\"amountCents\":null}",
	    "amount_cents_not_number");
	expect_code("{\"customerId\":\"c\",\"amountCents\":true}",
	    "amount_cents_not_number");
	expect_code("{\"customerId\":\"c\",\"amountCents\":false}",
	    "amount_cents_not_number");
	expect_code("{\"customerId\":\"c\",\"amountCents\":[1]}",
	    "amount_cents_not_number");
	expect_code("{\"customerId\":\"c\",\"amountCents\":{}}",
	    "amount_cents_not_number");
	expect_code("{\"customerId\":\"c\",\"amountCents\":4999.5}",
	    "amount_cents_not_integer");
	expect_code("{\"customerId\":\"c\",\"amountCents\":0.001}",
	    "amount_cents_not_integer");
	expect_code("{\"customerId\":\"c\",\"amountCents\":-1}",
	    "amount_cents_negative");
	expect_code("{\"customerId\":\"c\",\"amountCents\":-9007199254740991}",
	    "amount_cents_negative");
	expect_code("{\"customerId\":\"c\",\"amountCents\":-1e400}",
	    "amount_cents_negative");
	expect_code("{\"customerId\":\"c\",\"amountCents\":9007199254740992}",
	    "amount_cents_too_large");
	expect_code("{\"customerId\":\"c\",\"amountCents\":9007199254740993}",
	    "amount_cents_too_large");
	expect_code("{\"customerId\":\"c\",\"amountCents\":1e16}",
	    "amount_cents_not_integer");
	expect_code("{\"customerId\":\"c\",\"amountCents\":1e400}",
	    "amount_cents_not_integer");
}

static void
test_amount_bounds(void **state)
{
	struct order_input	in;
	struct order_error	err;

	(void)state;
	assert_int_equal(parse("{\"customerId\":\"c\",\"amountCents\":"
	    "9007199254740991}", &in, &err), 0);
	assert_true(in.amount_cents == INT64_C(9007199254740991));
	assert_true(in.amount_cents == ORDER_AMOUNT_MAX);
	expect_code("{\"customerId\":\"c\",\"amountCents\":-0}",
	    "amount_cents_negative");
	assert_int_equal(parse("{\"customerId\":\"c\",\"amountCents\":1}",
	    &in, &err), 0);
	assert_int_equal(in.amount_cents, 1);
}

static void
test_uuid(void **state)
{
	const char	*good[] = {
		"123e4567-e89b-12d3-a456-426614174000",
		"00000000-0000-0000-0000-000000000000",
		"FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF",
		"a0eebc99-9C0B-4ef8-bb6d-6bb9bd380a11",
	};
	const char	*bad[] = {
		"",
		"123e4567e89b12d3a456426614174000",
		"{123e4567-e89b-12d3-a456-426614174000}",
		"123e4567-e89b-12d3-a456-42661417400",
		"123e4567-e89b-12d3-a456-4266141740000",
		"123e4567-e89b-12d3-a456_426614174000",
		"123e4567-e89b-12d3-a4566-26614174000",
		"g23e4567-e89b-12d3-a456-426614174000",
		"123e4567-e89b-12d3-a456-42661417400 ",
		"../../../../../../../../../etc/passw",
		"123e4567-e89b-12d3-a456-42661417400%",
	};
	size_t		 i;

	(void)state;
	for (i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		if (!order_uuid_valid(good[i], strlen(good[i])))
			fail_msg("rejected %s", good[i]);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (order_uuid_valid(bad[i], strlen(bad[i])))
			fail_msg("accepted %s", bad[i]);
	/* only len bytes count */
	assert_true(order_uuid_valid("123e4567-e89b-12d3-a456-426614174000/x",
	    36));
	assert_false(order_uuid_valid(NULL, 36));
}

static void
test_error_json(void **state)
{
	cJSON	*o;
	char	*s;

	(void)state;
	s = order_error_json("not_found", "no order with id \"x\"");
	assert_non_null(s);
	assert_string_equal(s, "{\"error\":\"not_found\","
	    "\"message\":\"no order with id \\\"x\\\"\"}");
	o = cJSON_Parse(s);
	assert_non_null(o);
	assert_string_equal(cJSON_GetObjectItem(o, "error")->valuestring,
	    "not_found");
	assert_string_equal(cJSON_GetObjectItem(o, "message")->valuestring,
	    "no order with id \"x\"");
	assert_int_equal(cJSON_GetArraySize(o), 2);
	cJSON_Delete(o);
	free(s);
}

static void
test_error_json_detail(void **state)
{
	char	*s;

	(void)state;
	s = order_error_json_detail("order_refused", "refused",
	    "on the \"block\" list", "ask support");
	assert_non_null(s);
	assert_string_equal(s, "{\"error\":\"order_refused\",\"message\":"
	    "\"refused\",\"detail\":\"on the \\\"block\\\" list\","
	    "\"hint\":\"ask support\"}");
	free(s);
	s = order_error_json_detail("order_refused", "refused", NULL, "h");
	assert_non_null(s);
	assert_string_equal(s, "{\"error\":\"order_refused\",\"message\":"
	    "\"refused\",\"hint\":\"h\"}");
	free(s);
	s = order_error_json_detail("order_refused", "refused", NULL, NULL);
	assert_non_null(s);
	assert_string_equal(s, "{\"error\":\"order_refused\",\"message\":"
	    "\"refused\"}");
	free(s);
}

static void
test_order_json(void **state)
{
	char	 buf[ORDER_JSON_MAX], cid[ORDER_CUSTOMER_ID_MAX + 1];
	cJSON	*o;
	int	 n;

	(void)state;
	n = order_json(buf, sizeof(buf), "123e4567-e89b-12d3-a456-426614174000",
	    "c1", "4999", "2025-01-02T03:04:05.678901+00:00");
	assert_true(n > 0);
	assert_int_equal((size_t)n, strlen(buf));
	assert_string_equal(buf, "{\"id\":\"123e4567-e89b-12d3-a456-"
	    "426614174000\",\"customer_id\":\"c1\",\"amount_cents\":4999,"
	    "\"created_at\":\"2025-01-02T03:04:05.678901+00:00\"}");

	/* 2^53 - 1 and 10^15 stay plain digits, never 1e+15 */
	n = order_json(buf, sizeof(buf), "i", "c", "9007199254740991", "t");
	assert_true(n > 0);
	assert_non_null(strstr(buf, "\"amount_cents\":9007199254740991,"));
	n = order_json(buf, sizeof(buf), "i", "c", "1000000000000000", "t");
	assert_true(n > 0);
	assert_non_null(strstr(buf, "\"amount_cents\":1000000000000000,"));

	/* the worst customerId the API accepts (256 control characters,
	 * each escaped to six bytes) fits ORDER_JSON_MAX, and round-trips */
	memset(cid, 0x01, ORDER_CUSTOMER_ID_MAX);
	cid[ORDER_CUSTOMER_ID_MAX] = '\0';
	n = order_json(buf, sizeof(buf), "123e4567-e89b-12d3-a456-426614174000",
	    cid, "9007199254740991", "2025-01-02T03:04:05.678901+00:00");
	assert_true(n > 0);
	o = cJSON_Parse(buf);
	assert_non_null(o);
	assert_string_equal(cJSON_GetObjectItem(o, "customer_id")->valuestring,
	    cid);
	assert_true(cJSON_IsNumber(cJSON_GetObjectItem(o, "amount_cents")));
	cJSON_Delete(o);

	/* not a number from the database, or no room: refused */
	assert_int_equal(order_json(buf, sizeof(buf), "i", "c", "12a", "t"),
	    -1);
	assert_int_equal(order_json(buf, sizeof(buf), "i", "c", "", "t"), -1);
	assert_int_equal(order_json(buf, 10, "i", "c", "1", "t"), -1);
}

/* ---- strict JSON (issue 25, item 7): RFC 8259 exactly, src/json.c ---- */

static void
test_strict_control_bytes(void **state)
{
	char	body[64];
	int	c;

	(void)state;
	/* any raw byte below 0x20 inside a string, in customerId or not */
	for (c = 1; c < 0x20; c++) {
		snprintf(body, sizeof(body), "{\"customerId\":\"x%cy\","
		    "\"amountCents\":1}", c);
		expect_code(body, "malformed_json");
		snprintf(body, sizeof(body), "{\"n\":\"%c\",\"customerId\":"
		    "\"c\",\"amountCents\":1}", c);
		expect_code(body, "malformed_json");
	}
	expect_code("{\"customerId\":\"x\r\ninjected=1\",\"amountCents\":1}",
	    "malformed_json");
	expect_code("{\"customerId\":\"x\ny\",\"amountCents\":1}",
	    "malformed_json");
	expect_code("{\"customerId\":\"x\ty\",\"amountCents\":1}",
	    "malformed_json");
	expect_code("{\"customerId\":\"\x01\",\"amountCents\":1}",
	    "malformed_json");
	/* the message says why */
	{
		struct order_input	in;
		struct order_error	err;

		assert_int_equal(parse("{\"customerId\":\"x\r\ninjected=1\","
		    "\"amountCents\":1}", &in, &err), -1);
		assert_non_null(strstr(err.message, "control character"));
	}
}

static void
test_strict_numbers(void **state)
{
	(void)state;
	expect_code("{\"customerId\":\"c\",\"amountCents\":01}",
	    "malformed_json");
	expect_code("{\"customerId\":\"c\",\"amountCents\":00}",
	    "malformed_json");
	expect_code("{\"customerId\":\"c\",\"amountCents\":-01}",
	    "malformed_json");
	expect_code("{\"customerId\":\"c\",\"amountCents\":1.}",
	    "malformed_json");
	expect_code("{\"customerId\":\"c\",\"amountCents\":1.e2}",
	    "malformed_json");
	expect_code("{\"customerId\":\"c\",\"amountCents\":.5}",
	    "malformed_json");
	expect_code("{\"customerId\":\"c\",\"amountCents\":+1}",
	    "malformed_json");
	expect_code("{\"customerId\":\"c\",\"amountCents\":1e}",
	    "malformed_json");
	expect_code("{\"customerId\":\"c\",\"amountCents\":0x10}",
	    "malformed_json");
	expect_code("{\"customerId\":\"c\",\"amountCents\":Infinity}",
	    "malformed_json");
	/* in a member outboxd ignores too */
	expect_code("{\"n\":01,\"customerId\":\"c\",\"amountCents\":1}",
	    "malformed_json");
	expect_code("{\"n\":[1.],\"customerId\":\"c\",\"amountCents\":1}",
	    "malformed_json");
}

static void
test_strict_whitespace(void **state)
{
	(void)state;
	expect_code("{\"customerId\":\"c\",\f\"amountCents\":1}",
	    "malformed_json");
	expect_code("\f{\"customerId\":\"c\",\"amountCents\":1}",
	    "malformed_json");
	expect_code("{\"customerId\":\"c\",\"amountCents\":1}\f",
	    "malformed_json");
	expect_code("{\"customerId\":\"c\",\v\"amountCents\":1}",
	    "malformed_json");
	expect_code("{\"customerId\":\"c\",\xc2\xa0\"amountCents\":1}",
	    "malformed_json");
	expect_code("\xef\xbb\xbf{\"customerId\":\"c\",\"amountCents\":1}",
	    "malformed_json");
	{
		struct order_input	in;
		struct order_error	err;
		const char		raw[] = "{\"customerId\":\"c\","
					    "\"amountCents\":1}\0";

		/* a NUL after the object is not whitespace */
		assert_int_equal(order_parse(raw, sizeof(raw) - 1, &in, &err),
		    -1);
		assert_string_equal(err.code, "malformed_json");
	}
}

static void
test_strict_strings(void **state)
{
	(void)state;
	/* escapes JSON does not have */
	expect_code("{\"customerId\":\"\\x41\",\"amountCents\":1}",
	    "malformed_json");
	expect_code("{\"customerId\":\"\\'\",\"amountCents\":1}",
	    "malformed_json");
	expect_code("{\"customerId\":\"\\u00G1\",\"amountCents\":1}",
	    "malformed_json");
	/* \u surrogates not paired high-low */
	expect_code("{\"customerId\":\"\\ude00\",\"amountCents\":1}",
	    "malformed_json");
	expect_code("{\"customerId\":\"\\ude00\\ud83d\",\"amountCents\":1}",
	    "malformed_json");
	expect_code("{\"customerId\":\"\\ud83d\\u0041\",\"amountCents\":1}",
	    "malformed_json");
	expect_code("{\"customerId\":\"\\ud83dx\",\"amountCents\":1}",
	    "malformed_json");
	expect_code("{\"x\":\"\\ud83d\",\"customerId\":\"c\","
	    "\"amountCents\":1}", "malformed_json");
	/* bytes that are not UTF-8 outside customerId: overlong '/', an
	 * overlong 3-byte and 4-byte form, an encoded surrogate */
	expect_code("{\"x\":\"\xc0\xaf\",\"customerId\":\"c\","
	    "\"amountCents\":1}", "malformed_json");
	expect_code("{\"x\":\"\xe0\x80\xaf\",\"customerId\":\"c\","
	    "\"amountCents\":1}", "malformed_json");
	expect_code("{\"x\":\"\xf0\x80\x80\xaf\",\"customerId\":\"c\","
	    "\"amountCents\":1}", "malformed_json");
	expect_code("{\"\xed\xa0\x80\":1,\"customerId\":\"c\","
	    "\"amountCents\":1}", "malformed_json");
	/* ... and inside it, customerId's own code */
	expect_code("{\"customerId\":\"\xe0\x80\xaf\",\"amountCents\":1}",
	    "customer_id_invalid");
	expect_code("{\"customerId\":\"\xf0\x80\x80\xaf\",\"amountCents\":1}",
	    "customer_id_invalid");
	/* trailing text is refused, even after valid JSON */
	expect_code("{\"customerId\":\"c\",\"amountCents\":1}{}",
	    "malformed_json");
	expect_code("{\"customerId\":\"c\",\"amountCents\":1}\n,",
	    "malformed_json");
}

static void
test_duplicate_members(void **state)
{
	struct order_input	in;
	struct order_error	err;

	(void)state;
	expect_code("{\"customerId\":\"a\",\"customerId\":\"b\","
	    "\"amountCents\":1}", "duplicate_member");
	expect_code("{\"customerId\":\"a\",\"amountCents\":1,"
	    "\"amountCents\":100000}", "duplicate_member");
	/* the same name after unescaping */
	expect_code("{\"customerId\":\"a\",\"customer\\u0049d\":\"b\","
	    "\"amountCents\":1}", "duplicate_member");
	expect_code("{\"\\u0063ustomerId\":\"a\",\"customerId\":\"b\","
	    "\"amountCents\":1}", "duplicate_member");
	expect_code("{\"customerId\":\"a\",\"amountCents\":1,"
	    "\"amount\\u0043ents\":2}", "duplicate_member");
	/* in members outboxd ignores, at any depth */
	expect_code("{\"x\":1,\"x\":2,\"customerId\":\"a\","
	    "\"amountCents\":1}", "duplicate_member");
	expect_code("{\"customerId\":\"a\",\"amountCents\":1,"
	    "\"meta\":{\"k\":1,\"k\":2}}", "duplicate_member");
	expect_code("{\"customerId\":\"a\",\"amountCents\":1,"
	    "\"items\":[{\"sku\":1,\"\\u0073ku\":2}]}", "duplicate_member");
	assert_int_equal(parse("{\"customerId\":\"a\",\"customerId\":\"b\","
	    "\"amountCents\":1}", &in, &err), -1);
	assert_non_null(strstr(err.message, "twice"));

	/* an escaped name that is the wanted one is used as that member */
	assert_int_equal(parse("{\"customer\\u0049d\":\"e\","
	    "\"amount\\u0043ents\":42}", &in, &err), 0);
	assert_string_equal(in.customer_id, "e");
	assert_int_equal(in.amount_cents, 42);
	/* the same name nested is not a repeat */
	assert_int_equal(parse("{\"customerId\":\"a\",\"amountCents\":1,"
	    "\"meta\":{\"customerId\":\"b\",\"amountCents\":2}}", &in, &err),
	    0);
	assert_string_equal(in.customer_id, "a");
	assert_int_equal(in.amount_cents, 1);
}

/* amountCents must come out as exactly v. */
static void
expect_amount(const char *amount, int64_t v)
{
	struct order_input	in;
	struct order_error	err;
	char			body[256];

	snprintf(body, sizeof(body), "{\"customerId\":\"c\",\"amountCents\":"
	    "%s}", amount);
	if (parse(body, &in, &err) != 0)
		fail_msg("%s refused: %s", amount, err.code);
	if (in.amount_cents != v)
		fail_msg("%s: got %lld, want %lld", amount,
		    (long long)in.amount_cents, (long long)v);
}

static void
expect_amount_code(const char *amount, const char *code)
{
	char	body[512];

	snprintf(body, sizeof(body), "{\"customerId\":\"c\",\"amountCents\":"
	    "%s}", amount);
	expect_code(body, code);
}

static void
test_amount_exact(void **state)
{
	(void)state;
	expect_amount("4999", 4999);
	expect_amount("0", 0);
	expect_amount("9007199254740991", INT64_C(9007199254740991));
	/* a double would round each of these to an integer and store it */
	expect_amount_code("4999.0000000000001", "amount_cents_not_integer");
	expect_amount_code("4999.00000000000000000000000000000000000000000"
	    "0000000000000000000000000000001", "amount_cents_not_integer");
	expect_amount_code("1e-400", "amount_cents_not_integer");
	expect_amount_code("-1e-400", "amount_cents_negative");
	expect_amount_code("5e-324", "amount_cents_not_integer");
	expect_amount_code("4.9999999999999999999e3",
	    "amount_cents_not_integer");
	expect_amount_code("9007199254740991.5", "amount_cents_not_integer");
	expect_amount_code("1e-99999999999999999999",
	    "amount_cents_not_integer");
	/* negative */
	expect_amount_code("-1", "amount_cents_negative");
	expect_amount_code("-4999", "amount_cents_negative");
	expect_amount_code("-99999999999999999999999",
	    "amount_cents_negative");
	/* beyond 2^53 - 1, checked on the digits */
	expect_amount_code("9007199254740992", "amount_cents_too_large");
	expect_amount_code("99999999999999999999999",
	    "amount_cents_too_large");
	expect_amount_code("18446744073709551616", "amount_cents_too_large");
	expect_amount_code("9223372036854775808", "amount_cents_too_large");
	expect_amount_code("1e99999999999999999999",
	    "amount_cents_not_integer");
	/* an integer token only, even where the value is whole */
	expect_amount_code("4999.0", "amount_cents_not_integer");
	expect_amount_code("1e3", "amount_cents_not_integer");
	expect_amount_code("4999E0", "amount_cents_not_integer");
	expect_amount_code("-0", "amount_cents_negative");
	expect_amount_code("10000000000000000000000000000000000000000000000"
	    "00000000000000000000000000000000000", "amount_cents_too_large");
}

static void
test_customer_id_blank(void **state)
{
	static const char *const blank[] = {
		" ", "   ", "\\t", " \\n ", "\\r\\n", "\\u000b\\u000c",
		"\\u0085", "\\u00a0", "\xc2\xa0", "\\u1680",
		"\\u2000", "\\u2001", "\\u2002", "\\u2003", "\\u2004",
		"\\u2005", "\\u2006", "\\u2007", "\\u2008", "\\u2009",
		"\\u200a", "\\u2028", "\\u2029", "\\u202f", "\\u205f",
		"\\u3000", "\xe3\x80\x80",
		/* invisible format characters */
		"\\u200b", "\\u200c", "\\u200d", "\\u2060", "\\ufeff",
		"\xef\xbb\xbf", "\\u180e", "\\u00ad",
		/* other default-ignorable ones: direction marks, variation
		 * selectors, a Hangul filler, a tag character */
		"\\u200e", "\\u200f", "\\u202e", "\\u2066", "\\ufe0f",
		"\\u3164", "\\udb40\\udc20", "\xf3\xa0\x80\xa0",
		/* and any mix */
		" \\u200b\\u00a0\\u2060 \\ufeff\\t\\u200f",
	};
	static const char *const visible[] = {
		"a", " a", "a ", "\\u200ba", "a\\u00a0b", "\\u00a0.",
		"\xf0\x9f\x98\x80", "_", "0", "\\u0001", "\\u2027",
		"\\u2030", "\\u205e", "\\u2070", "\\u2fff", "\\u3001",
		"\\ufe10", "\\ufff9", "\\udb40\\udc00\\u00e9",
	};
	struct order_input	 in;
	struct order_error	 err;
	char			 body[256];
	size_t			 i;

	(void)state;
	for (i = 0; i < sizeof(blank) / sizeof(blank[0]); i++) {
		snprintf(body, sizeof(body), "{\"customerId\":\"%s\","
		    "\"amountCents\":1}", blank[i]);
		expect_code(body, "customer_id_empty");
		assert_int_equal(parse(body, &in, &err), -1);
		assert_non_null(strstr(err.message, "blank"));
	}
	for (i = 0; i < sizeof(visible) / sizeof(visible[0]); i++) {
		snprintf(body, sizeof(body), "{\"customerId\":\"%s\","
		    "\"amountCents\":1}", visible[i]);
		if (parse(body, &in, &err) != 0)
			fail_msg("refused %s: %s", visible[i], err.code);
	}
	/* the empty id keeps its own message */
	assert_int_equal(parse("{\"customerId\":\"\",\"amountCents\":1}",
	    &in, &err), -1);
	assert_string_equal(err.message, "customerId must not be empty");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_good),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_escaped_backslash_before_u0000_text),
		cmocka_unit_test(test_not_object),
		cmocka_unit_test(test_customer_id),
		cmocka_unit_test(test_customer_id_length),
		cmocka_unit_test(test_customer_id_unicode),
		cmocka_unit_test(test_amount),
		cmocka_unit_test(test_amount_bounds),
		cmocka_unit_test(test_uuid),
		cmocka_unit_test(test_error_json),
		cmocka_unit_test(test_error_json_detail),
		cmocka_unit_test(test_order_json),
		cmocka_unit_test(test_strict_control_bytes),
		cmocka_unit_test(test_strict_numbers),
		cmocka_unit_test(test_strict_whitespace),
		cmocka_unit_test(test_strict_strings),
		cmocka_unit_test(test_duplicate_members),
		cmocka_unit_test(test_amount_exact),
		cmocka_unit_test(test_customer_id_blank),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
