/*
 * fuzz_sns_xml.c - libFuzzer target for what outboxd reads from SNS and
 * what it writes to it (src/sns.c): a PublishBatch reply read into the
 * outcomes of a batch (sns_publish_batch_parse), the same bytes as an
 * ErrorResponse (sns_error_parse), and as the payload and a header value
 * of a PublishBatch form body (sns_publish_batch_body).  Checked: every
 * message sent gets an outcome, the count returned is the SINK_SENT
 * ones, only a message not sent has an error, a message decided before
 * is left alone; error fields are NUL-terminated; the body holds only
 * RFC 3986 unreserved characters, '%XX', '&' and '=' and its Message
 * decodes back to the input byte for byte.  Built and run by `make fuzz`
 * (FUZZ_SECONDS); by hand, from the top of a configured tree:
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -I. -Isrc tests/fuzz/fuzz_sns_xml.c src/sns.c -lexpat -lcurl -o fuzz_sns_xml && mkdir -p /tmp/fuzz-sns && ./fuzz_sns_xml -max_total_time=300 /tmp/fuzz-sns tests/fuzz/corpus/sns_xml
 *
 * Input: byte 0 gives n, the messages of the batch (1 + byte % 10), and
 * with its high bit the message with id 3 is decided before (rejected);
 * the rest is the XML (and the payload).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "outboxd.h"
#include "broker.h"

#define CHECK(x)	do { if (!(x)) abort(); } while (0)

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

static int
fz_hex(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	abort();		/* only upper-case hex is sent */
}

/* The decoded value of key in the form body b, malloc'd, or NULL. */
static char *
fz_form_get(const char *b, const char *key, size_t *outlen)
{
	size_t	 klen = strlen(key);
	const char *p = b, *v, *e;
	char	*out, *o;

	for (;;) {
		if (strncmp(p, key, klen) == 0 && p[klen] == '=')
			break;
		if ((p = strchr(p, '&')) == NULL)
			return NULL;
		p++;
	}
	v = p + klen + 1;
	e = strchr(v, '&');
	if (e == NULL)
		e = v + strlen(v);
	CHECK((out = malloc((size_t)(e - v) + 1)) != NULL);
	for (o = out; v < e; v++) {
		if (*v == '%') {
			CHECK(v + 2 < e);
			*o++ = (char)(fz_hex(v[1]) * 16 + fz_hex(v[2]));
			v += 2;
		} else
			*o++ = *v;
	}
	*o = '\0';
	*outlen = (size_t)(o - out);
	return out;
}

static void
fz_body(const uint8_t *data, size_t size, int fifo)
{
	struct outbox_header	 h = { "trace", NULL };
	struct outbox_msg	 m;
	char			*text, *body, *back;
	const char		*p;
	size_t			 len, blen;

	/* the schema keeps NUL out of text; a header is a C string */
	CHECK((text = malloc(size + 1)) != NULL);
	memcpy(text, data, size);
	text[size] = '\0';
	memset(&m, 0, sizeof m);
	m.id = 12;
	m.event_type = "order.created";
	m.key = text;
	m.payload = text;
	m.payload_len = size;
	h.value = text;
	m.headers = &h;
	m.nheaders = 1;
	body = sns_publish_batch_body(fifo ?
	    "arn:aws:sns:us-east-1:0:t.fifo" : "arn:aws:sns:us-east-1:0:t",
	    &m, 1, &blen);
	if (size == 0 || memchr(data, '\0', size) != NULL) {
		/* payload_len 0 or an inner NUL: the text is what counts */
		free(body);
		free(text);
		return;
	}
	CHECK(body != NULL);
	CHECK(strlen(body) == blen);
	for (p = body; *p != '\0'; p++)
		CHECK((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
		    (*p >= '0' && *p <= '9') || strchr("-._~%&=", *p) != NULL);
	back = fz_form_get(body, "PublishBatchRequestEntries.member.1.Message",
	    &len);
	CHECK(back != NULL && len == size && memcmp(back, data, size) == 0);
	free(back);
	back = fz_form_get(body, "PublishBatchRequestEntries.member.1."
	    "MessageAttributes.entry.2.Value.StringValue", &len);
	CHECK(back != NULL && strcmp(back, text) == 0);
	free(back);
	free(body);
	free(text);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct outbox_msg	 msgs[10];
	struct sns_error	 e;
	const char		*xml;
	size_t			 len;
	int			 n, i, sent, nsent = 0, pre;

	if (size < 1)
		return 0;
	n = 1 + data[0] % 10;
	pre = (data[0] & 0x80) != 0 && n >= 3;
	xml = (const char *)data + 1;
	len = size - 1;

	memset(msgs, 0, sizeof msgs);
	for (i = 0; i < n; i++) {
		msgs[i].id = i + 1;
		msgs[i].outcome = SINK_SENT;
	}
	if (pre) {
		msgs[2].outcome = SINK_REJECTED;
		msgs[2].reason = SINK_REASON_TOO_LARGE;
	}
	sent = sns_publish_batch_parse(xml, len, msgs, n);
	for (i = 0; i < n; i++) {
		if (pre && i == 2) {
			CHECK(msgs[i].outcome == SINK_REJECTED);
			CHECK(msgs[i].reason == SINK_REASON_TOO_LARGE);
			CHECK(msgs[i].error == NULL);
			continue;
		}
		CHECK(msgs[i].outcome == SINK_SENT ||
		    msgs[i].outcome == SINK_RETRY ||
		    msgs[i].outcome == SINK_REJECTED);
		if (msgs[i].outcome == SINK_SENT) {
			nsent++;
			CHECK(msgs[i].error == NULL);
		} else
			CHECK(msgs[i].reason < SINK_NREASONS);
		if (sent == -1)
			CHECK(msgs[i].outcome == SINK_RETRY);
		free(msgs[i].error);
	}
	CHECK(sent == -1 ? nsent == 0 : sent == nsent);

	if (sns_error_parse(xml, len, &e) == 0) {
		CHECK(memchr(e.type, '\0', sizeof e.type) != NULL);
		CHECK(memchr(e.code, '\0', sizeof e.code) != NULL);
		CHECK(memchr(e.message, '\0', sizeof e.message) != NULL);
	} else
		CHECK(e.code[0] == '\0');

	fz_body(data + 1, len, data[0] & 0x40);
	return 0;
}
