/*
 * test_headers.c - a row's headers (sink.c): every rule of outbox(7),
 * HEADERS, refused by sink_headers_check() with the same message as
 * sql/schema.sql's outbox_check_headers() gives (tests/integration/
 * headers.sh checks those), the boundaries accepted; and the SQS codec
 * (sqs.c) leaving a message the relay refused out of the request and its
 * verdict alone in the reply.
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

/* The rule sink_headers_check() finds in the headers column json ("" when
 * none); the column must parse as an object of strings. */
static const char *
rule_of(const char *json)
{
	static char		 why[512];
	struct outbox_header	*h;
	int			 n, rc;

	assert_int_equal(sink_headers_parse(json, strlen(json), &h, &n), 0);
	why[0] = '\0';
	rc = sink_headers_check(h, n, why, sizeof(why));
	sink_headers_free(h, n);
	assert_int_equal(rc, why[0] != '\0' ? -1 : 0);
	return (why);
}

/* A JSON object {"NAME": "VALUE"} with VALUE of len bytes of c. */
static char *
one_long(const char *name, char c, size_t len)
{
	char	*s;
	size_t	 n = strlen(name);

	assert_non_null(s = malloc(n + len + 16));
	snprintf(s, n + 16, "{\"%s\": \"", name);
	memset(s + strlen(s), c, len);
	strcpy(s + n + 6 + len, "\"}");
	return (s);
}

static void
test_names(void **state)
{
	char	*s, name[300];

	(void)state;
	assert_string_equal(rule_of("{\"\": \"x\"}"),
	    "header name \"\" is empty");
	memset(name, 'n', 257);
	name[257] = '\0';
	s = one_long(name, 'x', 1);
	assert_string_equal(rule_of(s), "header name \"nnnnnnnnnnnnnnnnnnnnnnn"
	    "nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn\"... has 257 characters, "
	    "at most 256");
	free(s);
	assert_string_equal(rule_of("{\"x trace\": \"1\"}"), "header name "
	    "\"x trace\" may hold only letters, digits, \"_\", \"-\" and \".\"");
	/* What ends up in last_error and the log is printable ASCII. */
	assert_string_equal(rule_of("{\"a\\nb\\\"\\u00e9\": \"1\"}"),
	    "header name \"a\\x0ab\\x22\\xc3\\xa9\" may hold only letters, "
	    "digits, \"_\", \"-\" and \".\"");
	assert_string_equal(rule_of("{\"aws.traceId\": \"1\"}"), "header name "
	    "\"aws.traceId\" starts with \"AWS.\" or \"Amazon.\", which AWS "
	    "reserves");
	assert_string_equal(rule_of("{\"AMAZON.x\": \"1\"}"), "header name "
	    "\"AMAZON.x\" starts with \"AWS.\" or \"Amazon.\", which AWS "
	    "reserves");
	assert_string_equal(rule_of("{\"a..b\": \"1\"}"),
	    "header name \"a..b\" has two periods in a row");
	assert_string_equal(rule_of("{\".a\": \"1\"}"),
	    "header name \".a\" starts or ends with \".\"");
	assert_string_equal(rule_of("{\"a.\": \"1\"}"),
	    "header name \"a.\" starts or ends with \".\"");
	assert_string_equal(rule_of("{\"Tenant\": \"a\", \"x\": \"1\", "
	    "\"tenant\": \"b\"}"), "headers \"Tenant\" and \"tenant\" differ "
	    "only in case (HTTP header names are case-insensitive)");
}

static void
test_reserved(void **state)
{
	static const char *const	 cases[][2] = {
		{ "EventType", "set by outboxd" },
		{ "eventtype", "set by outboxd" },
		{ "Content-Type", "set by outboxd" },
		{ "user-agent", "set by outboxd" },
		{ "webhook-id", "set by outboxd" },
		{ "Webhook-Timestamp", "set by outboxd" },
		{ "webhook-signature", "set by outboxd" },
		{ "X-Outbox-Event-Type", "set by outboxd" },
		{ "outbox-replay", "set by outboxd" },
		{ "Authorization", "authentication" },
		{ "proxy-authorization", "authentication" },
		{ "Cookie", "authentication" },
		{ "Connection", "hop-by-hop" },
		{ "Keep-Alive", "hop-by-hop" },
		{ "Proxy-Connection", "hop-by-hop" },
		{ "TE", "hop-by-hop" },
		{ "Trailer", "hop-by-hop" },
		{ "transfer-encoding", "hop-by-hop" },
		{ "Upgrade", "hop-by-hop" },
		{ "Host", "HTTP framing" },
		{ "Content-Length", "HTTP framing" },
		{ "Content-Encoding", "HTTP framing" },
		{ "Expect", "HTTP framing" },
	};
	char	json[128], want[128];
	size_t	i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		snprintf(json, sizeof(json), "{\"%s\": \"x\"}", cases[i][0]);
		snprintf(want, sizeof(want), "header \"%s\" is reserved (%s)",
		    cases[i][0], cases[i][1]);
		assert_string_equal(rule_of(json), want);
	}
	/* Only the names themselves: longer ones are the row's. */
	assert_string_equal(rule_of("{\"X-Host\": \"x\", \"TE2\": \"x\", "
	    "\"Cookies\": \"x\", \"EventType2\": \"x\"}"), "");
}

static void
test_values(void **state)
{
	char	*s;

	(void)state;
	assert_string_equal(rule_of("{\"x-a\": \"\"}"), "header \"x-a\" is "
	    "empty (SQS and SNS refuse an empty value)");
	assert_string_equal(rule_of("{\"x-a\": \"1\\r\\nX-Injected: yes\"}"),
	    "header \"x-a\" has a control character in its value (only tab "
	    "is allowed)");
	assert_string_equal(rule_of("{\"x-a\": \"1\\u00012\"}"),
	    "header \"x-a\" has a control character in its value (only tab "
	    "is allowed)");
	assert_string_equal(rule_of("{\"x-a\": \"1\\u007f2\"}"),
	    "header \"x-a\" has a control character in its value (only tab "
	    "is allowed)");
	assert_string_equal(rule_of("{\"x-a\": \"1\\u00852\"}"),
	    "header \"x-a\" has a control character in its value (only tab "
	    "is allowed)");
	assert_string_equal(rule_of("{\"x-a\": \"1\\uffff2\"}"),
	    "header \"x-a\" has U+FFFE or U+FFFF in its value");
	assert_string_equal(rule_of("{\"x-a\": \"1\\ufffe\"}"),
	    "header \"x-a\" has U+FFFE or U+FFFF in its value");
	assert_string_equal(rule_of("{\"x-a\": \" 1\"}"), "header \"x-a\" "
	    "has a space or tab at the start or end of its value (HTTP would "
	    "drop it)");
	assert_string_equal(rule_of("{\"x-a\": \"1\\t\"}"), "header \"x-a\" "
	    "has a space or tab at the start or end of its value (HTTP would "
	    "drop it)");
	s = one_long("x-a", 'v', 4097);
	assert_string_equal(rule_of(s),
	    "header \"x-a\" has a value of 4097 bytes, at most 4096");
	free(s);
	/* A tab inside, U+00A0..U+00FF, U+FFFD and a 4-byte character are
	 * fine. */
	assert_string_equal(rule_of("{\"x-a\": \"a\\tb \\u00a0\\u00e9\\u00ff "
	    "\\ufffd \\ud83d\\ude00\"}"), "");
}

static void
test_counts(void **state)
{
	char	*s, *t;

	(void)state;
	assert_string_equal(rule_of("{\"h1\": \"v\", \"h2\": \"v\", \"h3\": "
	    "\"v\", \"h4\": \"v\", \"h5\": \"v\", \"h6\": \"v\", \"h7\": \"v\", "
	    "\"h8\": \"v\", \"h9\": \"v\"}"), "9 headers, at most 8 (SQS and "
	    "SNS take 10 message attributes; EventType is one, Outbox-Replay "
	    "on a replay another)");
	assert_string_equal(rule_of("{\"h1\": \"v\", \"h2\": \"v\", \"h3\": "
	    "\"v\", \"h4\": \"v\", \"h5\": \"v\", \"h6\": \"v\", \"h7\": \"v\", "
	    "\"h8\": \"v\"}"), "");
	/* 4096-byte values, 8192 bytes in all: accepted; 2 more: not. */
	s = one_long("a", 'v', 4095);
	t = one_long("b", 'v', 4095);
	s[strlen(s) - 1] = ',';
	assert_non_null(s = realloc(s, strlen(s) + strlen(t) + 1));
	strcat(s, t + 1);
	assert_string_equal(rule_of(s), "");
	free(s);
	free(t);
	s = one_long("a", 'v', 4096);
	t = one_long("b", 'v', 4096);
	s[strlen(s) - 1] = ',';
	assert_non_null(s = realloc(s, strlen(s) + strlen(t) + 1));
	strcat(s, t + 1);
	assert_string_equal(rule_of(s),
	    "8194 bytes of header names and values, at most 8192");
	free(s);
	free(t);
	assert_string_equal(rule_of("{}"), "");
}

/* A message the relay refused is not in the SendMessageBatch request, and
 * the reply leaves its outcome, reason and error as they were. */
static void
test_sqs_leaves_refused_out(void **state)
{
	struct outbox_msg	 m[3];
	cJSON			*j, *reply;
	char			*body, *err;
	int			 i;

	(void)state;
	memset(m, 0, sizeof(m));
	for (i = 0; i < 3; i++) {
		m[i].id = 10 + i;
		m[i].event_type = "t";
		m[i].key = "k";
		m[i].payload = "{}";
		m[i].payload_len = 2;
	}
	assert_non_null(err = strdup("headers: header \"Host\" is reserved "
	    "(HTTP framing)"));
	m[1].outcome = SINK_REJECTED;
	m[1].reason = SINK_REASON_REJECTED;
	m[1].error = err;
	assert_non_null(body = sqs_send_batch_body("https://q/123/q", m, 3,
	    NULL));
	assert_non_null(j = cJSON_Parse(body));
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j,
	    "Entries")), 2);
	assert_null(strstr(body, "\"11\""));
	cJSON_Delete(j);
	free(body);

	/* Even a reply that names it (it cannot) changes nothing. */
	assert_non_null(reply = cJSON_Parse("{\"Successful\": [{\"Id\": "
	    "\"10\"}, {\"Id\": \"11\"}, {\"Id\": \"12\"}]}"));
	assert_int_equal(sqs_send_batch_parse(reply, m, 3), 2);
	assert_int_equal(m[0].outcome, SINK_SENT);
	assert_int_equal(m[1].outcome, SINK_REJECTED);
	assert_int_equal(m[1].reason, SINK_REASON_REJECTED);
	assert_ptr_equal(m[1].error, err);
	assert_int_equal(m[2].outcome, SINK_SENT);
	cJSON_Delete(reply);

	/* Nothing left to send: no request. */
	m[0].outcome = m[2].outcome = SINK_REJECTED;
	assert_null(sqs_send_batch_body("https://q/123/q", m, 3, NULL));
	free(err);
}

int
main(void)
{
	const struct CMUnitTest	tests[] = {
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_reserved),
		cmocka_unit_test(test_values),
		cmocka_unit_test(test_counts),
		cmocka_unit_test(test_sqs_leaves_refused_out),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
