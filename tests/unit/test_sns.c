/*
 * test_sns.c - the SNS PublishBatch codec (sns.c): the form body decoded
 * back field by field with a decoder of the test's own, its percent-
 * encoding of reserved and non-ASCII bytes, FIFO fields, every kind of
 * entry outcome, ErrorResponse, and XML that must be refused: malformed,
 * truncated, a wrong root, a DOCTYPE with entities (billion laughs, an
 * external entity).
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

#include "outboxd.h"
#include "broker.h"

#define STD_ARN		"arn:aws:sns:us-east-1:000000000000:orders"
#define FIFO_ARN	"arn:aws:sns:us-east-1:000000000000:orders.fifo"
/* UTF-8: e-acute, check mark, grinning face (4 bytes), and every
 * character a form or SigV4 treats specially */
#define HARD_TEXT	"\xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x98\x80 a&b=c+d%e/f~g"
#define HARD_ENCODED	"%C3%A9%20%E2%9C%93%20%F0%9F%98%80%20a%26b%3Dc%2Bd%25e%2Ff~g"

#define RESP_ROOT	"<PublishBatchResponse " \
			"xmlns=\"http://sns.amazonaws.com/doc/2010-03-31/\">" \
			"<PublishBatchResult>"
#define RESP_HEAD	"<?xml version=\"1.0\"?>\n" RESP_ROOT
#define RESP_TAIL	"</PublishBatchResult><ResponseMetadata><RequestId>" \
			"r1</RequestId></ResponseMetadata></PublishBatchResponse>"

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
	m->outcome = SINK_SENT;		/* as the relay hands it over */
}

static void
msgs_clear(struct outbox_msg *m, int n)
{
	int	i;

	for (i = 0; i < n; i++) {
		free(m[i].error);
		m[i].error = NULL;
	}
}

/* ---- a form decoder of the test's own (RFC 3986 percent-decoding) ---- */

struct form {
	int	 n;
	char	*key[128];
	char	*val[128];
};

static int
hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;		/* lower case is not what SigV4 wants */
}

static char *
pct_decode(const char *s, size_t len)
{
	char	*out = malloc(len + 1), *o = out;
	size_t	 i;

	assert_non_null(out);
	for (i = 0; i < len; i++) {
		if (s[i] == '%') {
			assert_true(i + 2 < len);
			assert_true(hexval(s[i + 1]) >= 0 &&
			    hexval(s[i + 2]) >= 0);
			*o++ = (char)(hexval(s[i + 1]) * 16 + hexval(s[i + 2]));
			i += 2;
		} else {
			/* only unreserved characters go unencoded */
			assert_true((s[i] >= 'A' && s[i] <= 'Z') ||
			    (s[i] >= 'a' && s[i] <= 'z') ||
			    (s[i] >= '0' && s[i] <= '9') || s[i] == '-' ||
			    s[i] == '.' || s[i] == '_' || s[i] == '~');
			*o++ = s[i];
		}
	}
	*o = '\0';
	return out;
}

static void
form_parse(struct form *f, const char *body, size_t len)
{
	const char	*p = body, *end = body + len, *amp, *eq;

	memset(f, 0, sizeof(*f));
	assert_int_equal(strlen(body), len);
	while (p < end) {
		amp = memchr(p, '&', (size_t)(end - p));
		if (amp == NULL)
			amp = end;
		eq = memchr(p, '=', (size_t)(amp - p));
		assert_non_null(eq);
		assert_true(f->n < 128);
		f->key[f->n] = pct_decode(p, (size_t)(eq - p));
		f->val[f->n] = pct_decode(eq + 1, (size_t)(amp - eq - 1));
		f->n++;
		p = amp + 1;
	}
}

static const char *
form_get(const struct form *f, const char *key)
{
	int	i;

	for (i = 0; i < f->n; i++)
		if (strcmp(f->key[i], key) == 0)
			return f->val[i];
	return NULL;
}

static void
form_free(struct form *f)
{
	int	i;

	for (i = 0; i < f->n; i++) {
		free(f->key[i]);
		free(f->val[i]);
	}
}

#define E(k, rest)	"PublishBatchRequestEntries.member." #k "." rest

/* ---- request bodies --------------------------------------------------- */

static void
test_body_standard(void **state)
{
	struct outbox_header	 h[2] = {
		{ "traceparent",
		  "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" },
		{ "region", HARD_TEXT },
	};
	struct outbox_msg	 m[2];
	struct form		 f;
	char			*body;
	size_t			 len = 0;

	(void)state;
	msg_init(&m[0], 41, "order.created", "k1", "{\"t\":\"" HARD_TEXT "\"}");
	m[0].headers = h;
	m[0].nheaders = 2;
	msg_init(&m[1], 9000000000000000001LL, "", "k2", "{}");
	body = sns_publish_batch_body(STD_ARN, m, 2, &len);
	assert_non_null(body);
	/* values are encoded byte for byte, %20 for a space, never '+' */
	assert_non_null(strstr(body, "%22" HARD_ENCODED "%22"));
	assert_null(strchr(body, '+'));
	assert_non_null(strstr(body, "TopicArn=arn%3Aaws%3Asns%3Aus-east-1"));
	form_parse(&f, body, len);
	assert_string_equal(f.key[0], "Action");
	assert_string_equal(f.val[0], "PublishBatch");
	assert_string_equal(form_get(&f, "Version"), "2010-03-31");
	assert_string_equal(form_get(&f, "TopicArn"), STD_ARN);
	assert_string_equal(form_get(&f, E(1, "Id")), "41");
	assert_string_equal(form_get(&f, E(1, "Message")),
	    "{\"t\":\"" HARD_TEXT "\"}");
	assert_string_equal(form_get(&f,
	    E(1, "MessageAttributes.entry.1.Name")), "EventType");
	assert_string_equal(form_get(&f,
	    E(1, "MessageAttributes.entry.1.Value.DataType")), "String");
	assert_string_equal(form_get(&f,
	    E(1, "MessageAttributes.entry.1.Value.StringValue")),
	    "order.created");
	assert_string_equal(form_get(&f,
	    E(1, "MessageAttributes.entry.2.Name")), "traceparent");
	assert_string_equal(form_get(&f,
	    E(1, "MessageAttributes.entry.2.Value.StringValue")), h[0].value);
	assert_string_equal(form_get(&f,
	    E(1, "MessageAttributes.entry.3.Name")), "region");
	assert_string_equal(form_get(&f,
	    E(1, "MessageAttributes.entry.3.Value.StringValue")), HARD_TEXT);
	assert_null(form_get(&f, E(1, "MessageAttributes.entry.4.Name")));
	/* a standard topic takes no group or dedup id */
	assert_null(form_get(&f, E(1, "MessageGroupId")));
	assert_null(form_get(&f, E(1, "MessageDeduplicationId")));
	/* an empty event type sends no EventType */
	assert_string_equal(form_get(&f, E(2, "Id")), "9000000000000000001");
	assert_string_equal(form_get(&f, E(2, "Message")), "{}");
	assert_null(form_get(&f, E(2, "MessageAttributes.entry.1.Name")));
	assert_int_equal(f.n, 3 + 2 + 9 + 2);
	form_free(&f);
	free(body);
}

static void
test_body_fifo(void **state)
{
	struct outbox_msg	 m[3];
	struct form		 f;
	char			*body;
	size_t			 len;

	(void)state;
	assert_int_equal(sns_topic_is_fifo(FIFO_ARN), 1);
	assert_int_equal(sns_topic_is_fifo(STD_ARN), 0);
	assert_int_equal(sns_topic_is_fifo(NULL), 0);
	msg_init(&m[0], 7, "t", "customer/42 é", "{\"a\":1}");
	msg_init(&m[1], 8, "t", "", "{\"a\":2}");
	msg_init(&m[2], 9, "t", "x", "{\"a\":3}");
	m[2].outcome = SINK_REJECTED;	/* the relay's: too large */
	body = sns_publish_batch_body(FIFO_ARN, m, 3, &len);
	assert_non_null(body);
	form_parse(&f, body, len);
	assert_string_equal(form_get(&f, E(1, "MessageGroupId")),
	    "customer/42 é");
	assert_string_equal(form_get(&f, E(1, "MessageDeduplicationId")), "7");
	/* no key: one group for all, as sqs.c does */
	assert_string_equal(form_get(&f, E(2, "MessageGroupId")), "outbox");
	assert_string_equal(form_get(&f, E(2, "MessageDeduplicationId")), "8");
	/* a rejected message is not sent */
	assert_null(form_get(&f, E(3, "Id")));
	assert_null(strstr(body, "%7B%22a%22%3A3%7D"));
	form_free(&f);
	free(body);

	/* nothing left to send: no body */
	m[0].outcome = m[1].outcome = SINK_REJECTED;
	assert_null(sns_publish_batch_body(FIFO_ARN, m, 3, &len));
	assert_null(sns_publish_batch_body(NULL, m, 1, &len));
}

static void
test_msg_size(void **state)
{
	struct outbox_header	 h[1] = { { "trace", "abc" } };
	struct outbox_msg	 m;

	(void)state;
	msg_init(&m, 1, "order.created", "k", "{\"x\":1}");
	/* payload 7 + "EventType" 9 + "String" 6 + 13 */
	assert_int_equal(sns_msg_size(&m), 7 + 9 + 6 + 13);
	assert_int_equal(sns_msg_attributes(&m), 1);
	m.headers = h;
	m.nheaders = 1;
	assert_int_equal(sns_msg_size(&m), 7 + 9 + 6 + 13 + 5 + 6 + 3);
	assert_int_equal(sns_msg_attributes(&m), 2);
	m.event_type = "";
	assert_int_equal(sns_msg_attributes(&m), 1);
}

/* ---- replies ---------------------------------------------------------- */

static void
test_parse_all_sent(void **state)
{
	static const char xml[] = RESP_HEAD "<Successful>"
	    "<member><Id>1</Id><MessageId>m-1</MessageId></member>"
	    "<member><Id>2</Id><MessageId>m-2</MessageId>"
	    "<SequenceNumber>10000000000000000001</SequenceNumber></member>"
	    "</Successful><Failed/>" RESP_TAIL;
	struct outbox_msg	m[2];

	(void)state;
	msg_init(&m[0], 1, "t", "k", "{}");
	msg_init(&m[1], 2, "t", "k", "{}");
	m[0].outcome = m[1].outcome = SINK_RETRY;
	assert_int_equal(sns_publish_batch_parse(xml, strlen(xml), m, 2), 2);
	assert_int_equal(m[0].outcome, SINK_SENT);
	assert_int_equal(m[1].outcome, SINK_SENT);
	assert_null(m[0].error);
	assert_null(m[1].error);
}

static void
test_parse_partial(void **state)
{
	/* a prefix on the elements, text split by an entity and white
	 * space around a boolean: all still XML that AWS could send */
	static const char xml[] = "<s:PublishBatchResponse "
	    "xmlns:s=\"http://sns.amazonaws.com/doc/2010-03-31/\">"
	    "<s:PublishBatchResult><s:Successful>"
	    "<s:member><s:Id>1</s:Id><s:MessageId>a</s:MessageId></s:member>"
	    "<s:member><s:Id>5</s:Id><s:MessageId>b</s:MessageId></s:member>"
	    "<s:member><s:Id>999</s:Id></s:member>"
	    "</s:Successful><s:Failed>"
	    "<s:member><s:Id>2</s:Id><s:Code>InvalidParameter</s:Code>"
	    "<s:Message>bad &amp; &#233;vil</s:Message>"
	    "<s:SenderFault> true </s:SenderFault></s:member>"
	    "<s:member><s:Id>3</s:Id><s:Code>InternalError</s:Code>"
	    "<s:Message>later</s:Message><s:SenderFault>false</s:SenderFault>"
	    "</s:member>"
	    "<s:member><s:Id>4</s:Id><s:Code>Throttled</s:Code>"
	    "<s:SenderFault>false</s:SenderFault></s:member>"
	    "<s:member><s:Id>5</s:Id><s:Code>InternalError</s:Code>"
	    "<s:SenderFault>false</s:SenderFault></s:member>"
	    "</s:Failed></s:PublishBatchResult></s:PublishBatchResponse>";
	struct outbox_msg	m[7];
	int			i;

	(void)state;
	for (i = 0; i < 7; i++)
		msg_init(&m[i], i + 1, "t", "k", "{}");
	m[6].outcome = SINK_REJECTED;	/* decided before: left alone */
	m[6].reason = SINK_REASON_TOO_LARGE;
	assert_int_equal(sns_publish_batch_parse(xml, strlen(xml), m, 7), 1);
	assert_int_equal(m[0].outcome, SINK_SENT);
	assert_int_equal(m[1].outcome, SINK_REJECTED);
	assert_int_equal(m[1].reason, SINK_REASON_REJECTED);
	assert_string_equal(m[1].error, "SNS InvalidParameter: bad & \xc3\xa9vil");
	assert_int_equal(m[2].outcome, SINK_RETRY);
	assert_int_equal(m[2].reason, SINK_REASON_SERVER);
	assert_string_equal(m[2].error, "SNS InternalError: later");
	assert_int_equal(m[3].outcome, SINK_RETRY);
	assert_int_equal(m[3].reason, SINK_REASON_THROTTLED);
	assert_string_equal(m[3].error, "SNS Throttled");
	/* in both lists: not trusted as sent */
	assert_int_equal(m[4].outcome, SINK_RETRY);
	/* in neither list */
	assert_int_equal(m[5].outcome, SINK_RETRY);
	assert_int_equal(m[5].reason, SINK_REASON_SERVER);
	assert_string_equal(m[5].error, "SNS reply does not list this entry");
	assert_int_equal(m[6].outcome, SINK_REJECTED);
	assert_int_equal(m[6].reason, SINK_REASON_TOO_LARGE);
	assert_null(m[6].error);
	msgs_clear(m, 7);
}

static void
test_parse_long_text_cut(void **state)
{
	char			*xml, *big;
	struct outbox_msg	 m;
	size_t			 n = 100000;

	(void)state;
	big = malloc(n + 1);
	assert_non_null(big);
	memset(big, 'x', n);
	big[n] = '\0';
	assert_true(asprintf(&xml, RESP_HEAD "<Failed><member><Id>1</Id>"
	    "<Code>%s</Code><SenderFault>true</SenderFault></member></Failed>"
	    RESP_TAIL, big) > 0);
	msg_init(&m, 1, "t", "k", "{}");
	assert_int_equal(sns_publish_batch_parse(xml, strlen(xml), &m, 1), 0);
	assert_int_equal(m.outcome, SINK_REJECTED);
	assert_int_equal(strlen(m.error), 4 + SNS_TEXT_LEN - 1);
	msgs_clear(&m, 1);
	free(xml);
	free(big);
}

/* Every message retried, with why in its error. */
static void
assert_unreadable(const char *xml, size_t len, const char *why)
{
	struct outbox_msg	m[2];

	msg_init(&m[0], 1, "t", "k", "{}");
	msg_init(&m[1], 2, "t", "k", "{}");
	assert_int_equal(sns_publish_batch_parse(xml, len, m, 2), -1);
	assert_int_equal(m[0].outcome, SINK_RETRY);
	assert_int_equal(m[1].outcome, SINK_RETRY);
	assert_int_equal(m[0].reason, SINK_REASON_SERVER);
	assert_non_null(m[0].error);
	assert_non_null(strstr(m[0].error, "unreadable"));
	if (why != NULL && strstr(m[0].error, why) == NULL)
		fail_msg("error \"%s\" lacks \"%s\"", m[0].error, why);
	msgs_clear(m, 2);
}

static void
test_parse_malformed(void **state)
{
	static const char ok[] = RESP_HEAD "<Successful><member><Id>1</Id>"
	    "</member></Successful>" RESP_TAIL;
	static const char *bad[] = {
		"",
		"not xml at all",
		"<PublishBatchResponse><PublishBatchResult>",
		"<PublishBatchResponse></Other>",
		"<PublishBatchResponse>&undeclared;</PublishBatchResponse>",
		"<PublishBatchResponse/><second/>",
		"{\"Successful\":[{\"Id\":\"1\"}]}",
	};
	size_t	i;

	(void)state;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_unreadable(bad[i], strlen(bad[i]), NULL);
	/* cut anywhere: never half believed */
	for (i = 0; i < sizeof(ok) - 1; i++)
		assert_unreadable(ok, i, NULL);
	/* well-formed, but an error or something else */
	{
		static const char er[] = "<ErrorResponse><Error><Code>X"
		    "</Code></Error></ErrorResponse>";

		assert_unreadable(er, sizeof(er) - 1,
		    "unexpected root element");
		assert_unreadable("<PublishResponse/>", 18,
		    "unexpected root element");
	}
	/* a NUL inside */
	assert_unreadable("<PublishBatchResponse>\0</PublishBatchResponse>",
	    46, NULL);
}

static void
test_parse_doctype_refused(void **state)
{
	static const char laughs[] = "<?xml version=\"1.0\"?>\n"
	    "<!DOCTYPE lolz [<!ENTITY lol \"lol\">"
	    "<!ENTITY lol1 \"&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;\">"
	    "<!ENTITY lol2 \"&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;\">"
	    "<!ENTITY lol3 \"&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;\">"
	    "<!ENTITY lol4 \"&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;\">"
	    "<!ENTITY lol5 \"&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;\">"
	    "<!ENTITY lol6 \"&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;\">"
	    "<!ENTITY lol7 \"&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;\">"
	    "<!ENTITY lol8 \"&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;\">"
	    "<!ENTITY lol9 \"&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;\">"
	    "]>" RESP_ROOT "<Failed><member><Id>1</Id><Code>&lol9;</Code>"
	    "<SenderFault>true</SenderFault></member></Failed>" RESP_TAIL;
	static const char external[] = "<?xml version=\"1.0\"?>\n"
	    "<!DOCTYPE r [<!ENTITY x SYSTEM \"file:///etc/passwd\">]>"
	    RESP_ROOT "<Successful><member><Id>1</Id><MessageId>&x;"
	    "</MessageId></member></Successful>" RESP_TAIL;
	static const char external_dtd[] = "<?xml version=\"1.0\"?>\n"
	    "<!DOCTYPE PublishBatchResponse SYSTEM \"http://127.0.0.1:1/x.dtd\">"
	    RESP_ROOT "<Successful><member><Id>1</Id></member></Successful>"
	    RESP_TAIL;
	struct sns_error	e;

	(void)state;
	assert_unreadable(laughs, sizeof(laughs) - 1,
	    "document type declaration");
	assert_unreadable(external, sizeof(external) - 1,
	    "document type declaration");
	assert_unreadable(external_dtd, sizeof(external_dtd) - 1,
	    "document type declaration");
	/* and in an error reply: nothing read, nothing believed */
	assert_int_equal(sns_error_parse(laughs, sizeof(laughs) - 1, &e), -1);
	assert_string_equal(e.code, "");
}

static void
test_error_parse(void **state)
{
	static const char xml[] = "<ErrorResponse "
	    "xmlns=\"http://sns.amazonaws.com/doc/2010-03-31/\">\n"
	    "  <Error>\n    <Type>Sender</Type>\n    <Code>NotFound</Code>\n"
	    "    <Message>Topic does not exist &lt;arn&gt;</Message>\n"
	    "  </Error>\n  <RequestId>r</RequestId>\n</ErrorResponse>";
	struct sns_error	e;

	(void)state;
	assert_int_equal(sns_error_parse(xml, strlen(xml), &e), 0);
	assert_string_equal(e.type, "Sender");
	assert_string_equal(e.code, "NotFound");
	assert_string_equal(e.message, "Topic does not exist <arn>");
	assert_int_equal(sns_error_parse("<html>502</html>", 16, &e), -1);
	assert_int_equal(sns_error_parse("", 0, &e), -1);
	assert_int_equal(sns_error_parse(xml, 40, &e), -1);
	assert_string_equal(e.code, "");
}

static void
test_reason(void **state)
{
	(void)state;
	assert_int_equal(aws_failure_reason(0, NULL, "timeout"),
	    SINK_REASON_TRANSPORT);
	assert_int_equal(aws_failure_reason(400, "Throttled", "Rate"),
	    SINK_REASON_THROTTLED);
	assert_int_equal(aws_failure_reason(429, NULL, NULL),
	    SINK_REASON_THROTTLED);
	assert_int_equal(aws_failure_reason(408, NULL, NULL),
	    SINK_REASON_TRANSPORT);
	assert_int_equal(aws_failure_reason(404, "NotFound", "gone"),
	    SINK_REASON_CLIENT);
	assert_int_equal(aws_failure_reason(403, "AuthorizationError",
	    NULL), SINK_REASON_CLIENT);
	assert_int_equal(aws_failure_reason(500, "InternalError", NULL),
	    SINK_REASON_SERVER);
	assert_int_equal(aws_failure_reason(200, NULL, NULL),
	    SINK_REASON_SERVER);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_body_standard),
		cmocka_unit_test(test_body_fifo),
		cmocka_unit_test(test_msg_size),
		cmocka_unit_test(test_parse_all_sent),
		cmocka_unit_test(test_parse_partial),
		cmocka_unit_test(test_parse_long_text_cut),
		cmocka_unit_test(test_parse_malformed),
		cmocka_unit_test(test_parse_doctype_refused),
		cmocka_unit_test(test_error_parse),
		cmocka_unit_test(test_reason),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
