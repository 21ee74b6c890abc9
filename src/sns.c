/*
 * sns.c - request bodies and reply parsing for SNS PublishBatch over the
 * AWS query protocol (AWS SNS API reference: PublishBatch; AWS query
 * protocol: form-encoded request, XML response, ErrorResponse on error).
 * Pure functions: no I/O, no logging, so the unit tests and the fuzzer
 * can drive them; callers log what they report.
 *
 * The XML is read with expat.  AWS never sends a document type
 * declaration, so any DOCTYPE is refused before expat reads what it
 * declares: no entity of ours is ever expanded (billion laughs), and no
 * external entity is ever loaded (expat loads none without a handler,
 * which we never set).
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <expat.h>

#include "outboxd.h"
#include "broker.h"

/* FIFO message groups need some id; used when a row has no key (as
 * sqs.c does for FIFO queues). */
#define SNS_DEFAULT_GROUP	"outbox"
#define SNS_NS_SEP		'\x01'	/* expat: "URI" SEP "local name" */
#define SNS_DEPTH		6	/* element levels whose names count */
#define SNS_NAME_MAX		32	/* bytes of a name that can match */
#define SNS_TEXT_MAX		(SNS_TEXT_LEN - 1) /* bytes kept of one
					   element's text */

/* ---- the request body ------------------------------------------------- */

struct sns_buf {
	char	*p;
	size_t	 len;
	size_t	 cap;
	int	 failed;
};

static void
sns_buf_add(struct sns_buf *b, const char *s, size_t n)
{
	size_t	 want;
	char	*p;

	if (b->failed)
		return;
	if (b->len + n + 1 > b->cap) {
		want = b->cap != 0 ? b->cap : 4096;
		while (want < b->len + n + 1)
			want *= 2;
		if ((p = realloc(b->p, want)) == NULL) {
			b->failed = 1;
			return;
		}
		b->p = p;
		b->cap = want;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

/*
 * "&KEY=VALUE" with VALUE percent-encoded as RFC 3986 section 2.3 says
 * (everything but A-Z a-z 0-9 - . _ ~, UTF-8 bytes one by one), which is
 * what SigV4's canonical form and the query protocol expect.  libcurl's
 * curl_easy_escape() does exactly that (its handle is unused since
 * 7.82.0, and before only on EBCDIC builds).  The key is ours and
 * needs none.
 */
static void
sns_buf_param(struct sns_buf *b, const char *key, const char *val,
    size_t vlen)
{
	char	*e;

	if (b->failed)
		return;
	if (b->len != 0)
		sns_buf_add(b, "&", 1);
	sns_buf_add(b, key, strlen(key));
	sns_buf_add(b, "=", 1);
	if (vlen == 0)
		return;
	if (vlen > INT_MAX || (e = curl_easy_escape(NULL, val, (int)vlen)) ==
	    NULL) {
		b->failed = 1;
		return;
	}
	sns_buf_add(b, e, strlen(e));
	curl_free(e);
}

/* The key "PublishBatchRequestEntries.member.K.REST" (REST printf'd). */
static void	sns_buf_entry(struct sns_buf *, int k, const char *val,
		    size_t vlen, const char *fmt, ...) OUTBOXD_PRINTF(5, 6);

static void
sns_buf_entry(struct sns_buf *b, int k, const char *val, size_t vlen,
    const char *fmt, ...)
{
	char	key[160];
	int	n;
	va_list	ap;

	n = snprintf(key, sizeof key, "PublishBatchRequestEntries.member.%d.",
	    k);
	va_start(ap, fmt);
	if (n < 0 || vsnprintf(key + n, sizeof key - (size_t)n, fmt, ap) >=
	    (int)(sizeof key - (size_t)n))
		b->failed = 1;
	va_end(ap);
	sns_buf_param(b, key, val, vlen);
}

/* Message attribute J (1-based) of entry K: a String. */
static void
sns_buf_attr(struct sns_buf *b, int k, int j, const char *name,
    const char *value)
{
	sns_buf_entry(b, k, name, strlen(name),
	    "MessageAttributes.entry.%d.Name", j);
	sns_buf_entry(b, k, "String", 6,
	    "MessageAttributes.entry.%d.Value.DataType", j);
	sns_buf_entry(b, k, value, strlen(value),
	    "MessageAttributes.entry.%d.Value.StringValue", j);
}

int
sns_topic_is_fifo(const char *topic_arn)
{
	size_t	len;

	if (topic_arn == NULL)
		return (0);
	len = strlen(topic_arn);
	return (len >= 5 && strcmp(topic_arn + len - 5, ".fifo") == 0);
}

int
sns_msg_attributes(const struct outbox_msg *m)
{
	return ((m->event_type != NULL && *m->event_type != '\0') +
	    m->nheaders);
}

size_t
sns_msg_size(const struct outbox_msg *m)
{
	size_t	size;
	int	h;

	size = m->payload_len != 0 || m->payload == NULL ? m->payload_len :
	    strlen(m->payload);
	if (m->event_type != NULL && *m->event_type != '\0')
		size += sizeof("EventType") - 1 + sizeof("String") - 1 +
		    strlen(m->event_type);
	/* sink_header_size()'s count, here so that sns.c needs no other
	 * file (the fuzzer links it alone). */
	for (h = 0; h < m->nheaders; h++)
		size += strlen(m->headers[h].name) + sizeof("String") - 1 +
		    strlen(m->headers[h].value);
	return (size);
}

char *
sns_publish_batch_body(const char *topic_arn, const struct outbox_msg *msgs,
    int n, size_t *len)
{
	const struct outbox_msg	*m;
	struct sns_buf		 b;
	char			 id[24];
	size_t			 plen;
	int			 i, k = 0, j, h, fifo;

	if (topic_arn == NULL || n < 1)
		return (NULL);
	fifo = sns_topic_is_fifo(topic_arn);
	memset(&b, 0, sizeof b);
	sns_buf_param(&b, "Action", "PublishBatch", 12);
	sns_buf_param(&b, "Version", "2010-03-31", 10);
	sns_buf_param(&b, "TopicArn", topic_arn, strlen(topic_arn));
	for (i = 0; i < n; i++) {
		m = &msgs[i];
		/* Decided already (too large, say): not sent. */
		if (m->outcome == SINK_REJECTED)
			continue;
		if (m->payload == NULL)
			goto fail;
		/* payload_len is authoritative; the text may lack a NUL. */
		plen = m->payload_len != 0 ? m->payload_len :
		    strlen(m->payload);
		k++;
		snprintf(id, sizeof id, "%" PRId64, m->id);
		sns_buf_entry(&b, k, id, strlen(id), "Id");
		sns_buf_entry(&b, k, m->payload, plen, "Message");
		j = 0;
		if (m->event_type != NULL && *m->event_type != '\0')
			sns_buf_attr(&b, k, ++j, "EventType", m->event_type);
		for (h = 0; h < m->nheaders; h++)
			sns_buf_attr(&b, k, ++j, m->headers[h].name,
			    m->headers[h].value);
		if (fifo) {
			/* SNS keeps order per group and drops a repeated
			 * dedup id for 5 minutes: a retry is harmless. */
			if (m->key != NULL && *m->key != '\0')
				sns_buf_entry(&b, k, m->key, strlen(m->key),
				    "MessageGroupId");
			else
				sns_buf_entry(&b, k, SNS_DEFAULT_GROUP,
				    sizeof(SNS_DEFAULT_GROUP) - 1,
				    "MessageGroupId");
			sns_buf_entry(&b, k, id, strlen(id),
			    "MessageDeduplicationId");
		}
	}
	if (k == 0 || b.failed)
		goto fail;
	if (len != NULL)
		*len = b.len;
	return (b.p);

fail:
	free(b.p);
	return (NULL);
}

/* ---- the XML reply ---------------------------------------------------- */

enum sns_field {
	F_NONE, F_ID, F_CODE, F_MESSAGE, F_SENDER_FAULT, F_TYPE
};

enum sns_seen { SEEN_NONE, SEEN_OK, SEEN_FAILED };

/* What PublishBatch said of one message. */
struct sns_said {
	enum sns_seen	 seen;
	int		 sender_fault;
	char		 code[SNS_TEXT_MAX + 1];
	char		 message[SNS_TEXT_MAX + 1];
};

struct sns_xml {
	XML_Parser		 p;
	const char		*why;		/* we stopped the parser */
	int			 depth;		/* of the open element */
	char			 path[SNS_DEPTH + 1][SNS_NAME_MAX];
	enum sns_field		 field;		/* text being read */
	char			 text[SNS_TEXT_MAX + 1];
	size_t			 tlen;
	/* PublishBatchResult/{Successful,Failed}/member being read */
	int			 failed;
	char			 id[SNS_TEXT_MAX + 1];
	struct sns_said		 cur;
	/* the messages of the call */
	const struct outbox_msg	*msgs;
	struct sns_said		*said;
	int			 n;
	/* ErrorResponse/Error */
	struct sns_error	*err;
};

static int
sns_at(const struct sns_xml *x, int depth, const char *name)
{
	return (x->depth >= depth && strcmp(x->path[depth], name) == 0);
}

/* Any DOCTYPE: refused, before a single declaration in it is read. */
static void XMLCALL
sns_xml_doctype(void *arg, const XML_Char *name, const XML_Char *sysid,
    const XML_Char *pubid, int has_internal_subset)
{
	struct sns_xml	*x = arg;

	(void)name;
	(void)sysid;
	(void)pubid;
	(void)has_internal_subset;
	x->why = "a document type declaration (refused: AWS sends none)";
	XML_StopParser(x->p, XML_FALSE);
}

static enum sns_field
sns_field_of(const struct sns_xml *x)
{
	const char	*name = x->path[x->depth];

	if (x->depth == 5 && sns_at(x, 1, "PublishBatchResponse") &&
	    sns_at(x, 2, "PublishBatchResult") && sns_at(x, 4, "member") &&
	    (sns_at(x, 3, "Successful") || sns_at(x, 3, "Failed"))) {
		if (strcmp(name, "Id") == 0)
			return (F_ID);
		if (strcmp(name, "Code") == 0)
			return (F_CODE);
		if (strcmp(name, "Message") == 0)
			return (F_MESSAGE);
		if (strcmp(name, "SenderFault") == 0)
			return (F_SENDER_FAULT);
	}
	if (x->depth == 3 && sns_at(x, 1, "ErrorResponse") &&
	    sns_at(x, 2, "Error")) {
		if (strcmp(name, "Type") == 0)
			return (F_TYPE);
		if (strcmp(name, "Code") == 0)
			return (F_CODE);
		if (strcmp(name, "Message") == 0)
			return (F_MESSAGE);
	}
	return (F_NONE);
}

static void XMLCALL
sns_xml_start(void *arg, const XML_Char *name, const XML_Char **attrs)
{
	struct sns_xml	*x = arg;
	const char	*local;

	(void)attrs;
	x->depth++;
	x->field = F_NONE;
	if (x->depth > SNS_DEPTH)
		return;
	/* The namespace does not matter; the local name does. */
	local = strrchr(name, SNS_NS_SEP);
	local = local != NULL ? local + 1 : name;
	if (strlen(local) >= SNS_NAME_MAX)
		local = "";		/* too long to be one of ours */
	snprintf(x->path[x->depth], SNS_NAME_MAX, "%s", local);
	if (x->depth == 4 && sns_at(x, 1, "PublishBatchResponse") &&
	    sns_at(x, 2, "PublishBatchResult") && sns_at(x, 4, "member")) {
		x->failed = sns_at(x, 3, "Failed");
		x->id[0] = '\0';
		memset(&x->cur, 0, sizeof x->cur);
	}
	if ((x->field = sns_field_of(x)) != F_NONE)
		x->tlen = 0;
}

static void XMLCALL
sns_xml_text(void *arg, const XML_Char *s, int len)
{
	struct sns_xml	*x = arg;
	size_t		 n;

	if (x->field == F_NONE || len <= 0)
		return;
	/* Longer texts are cut: they are only reported. */
	n = (size_t)len;
	if (n > SNS_TEXT_MAX - x->tlen)
		n = SNS_TEXT_MAX - x->tlen;
	memcpy(x->text + x->tlen, s, n);
	x->tlen += n;
	x->text[x->tlen] = '\0';
}

/* Index of the sent message whose decimal id is s, or -1. */
static int
sns_find_msg(const struct sns_xml *x, const char *s)
{
	char		*end;
	long long	 v;
	int		 i;

	if (*s == '\0' || x->msgs == NULL)
		return (-1);
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno != 0 || *end != '\0')
		return (-1);
	for (i = 0; i < x->n; i++)
		if (x->msgs[i].id == (int64_t)v &&
		    x->msgs[i].outcome != SINK_REJECTED)
			return (i);
	return (-1);
}

/* One member of Successful or Failed read: what it says of its message.
 * Failed wins: an id listed in both is not trusted as sent; of two
 * Failed, the first counts (as sqs_send_batch_parse does). */
static void
sns_xml_member(struct sns_xml *x)
{
	struct sns_said	*s;
	int		 i;

	if ((i = sns_find_msg(x, x->id)) == -1)
		return;
	s = &x->said[i];
	if (s->seen == SEEN_FAILED || (s->seen == SEEN_OK && !x->failed))
		return;
	*s = x->cur;
	s->seen = x->failed ? SEEN_FAILED : SEEN_OK;
}

/* XML's white space (XML 1.0 section 2.3, S). */
#define SNS_XML_SPACE(c) ((c) == ' ' || (c) == '\t' || (c) == '\r' || \
			    (c) == '\n')

/* An xsd:boolean that is true: "true" or "1", white space around. */
static int
sns_xml_true(const char *s, size_t len)
{
	while (len > 0 && SNS_XML_SPACE(s[len - 1]))
		len--;
	while (len > 0 && SNS_XML_SPACE(*s)) {
		s++;
		len--;
	}
	return ((len == 4 && memcmp(s, "true", 4) == 0) ||
	    (len == 1 && *s == '1'));
}

static void XMLCALL
sns_xml_end(void *arg, const XML_Char *name)
{
	struct sns_xml	*x = arg;
	char		*dst = NULL;

	(void)name;
	switch (x->field) {
	case F_ID:
		dst = x->id;
		break;
	case F_CODE:
		dst = x->err != NULL ? x->err->code : x->cur.code;
		break;
	case F_MESSAGE:
		dst = x->err != NULL ? x->err->message : x->cur.message;
		break;
	case F_TYPE:
		if (x->err != NULL)
			dst = x->err->type;
		break;
	case F_SENDER_FAULT:
		x->cur.sender_fault = sns_xml_true(x->text, x->tlen);
		break;
	case F_NONE:
		break;
	}
	if (dst != NULL) {
		/* Every field is as large as text, NUL included. */
		memcpy(dst, x->text, x->tlen);
		dst[x->tlen] = '\0';
	}
	x->field = F_NONE;
	if (x->depth == 4 && x->msgs != NULL &&
	    sns_at(x, 1, "PublishBatchResponse") &&
	    sns_at(x, 2, "PublishBatchResult") && sns_at(x, 4, "member"))
		sns_xml_member(x);
	x->depth--;
}

/*
 * Read the document xml (len bytes) into x, whose root must be named
 * root.  Returns 0, or -1 with the reason in why.
 */
static int
sns_xml_read(struct sns_xml *x, const char *xml, size_t len,
    const char *root, const char **why)
{
	enum XML_Status	 st;
	int		 rv = 0;

	*why = NULL;
	if (len > INT_MAX) {
		*why = "reply too large";
		return (-1);
	}
	if ((x->p = XML_ParserCreateNS(NULL, SNS_NS_SEP)) == NULL) {
		*why = "out of memory";
		return (-1);
	}
	XML_SetUserData(x->p, x);
	XML_SetElementHandler(x->p, sns_xml_start, sns_xml_end);
	XML_SetCharacterDataHandler(x->p, sns_xml_text);
	XML_SetStartDoctypeDeclHandler(x->p, sns_xml_doctype);
	/* Never read an external DTD or parameter entity (the default;
	 * said so that no future default changes it). */
	XML_SetParamEntityParsing(x->p, XML_PARAM_ENTITY_PARSING_NEVER);
	st = XML_Parse(x->p, xml != NULL ? xml : "", (int)len, XML_TRUE);
	if (x->why != NULL) {
		*why = x->why;
		rv = -1;
	} else if (st != XML_STATUS_OK) {
		*why = XML_ErrorString(XML_GetErrorCode(x->p));
		if (*why == NULL)
			*why = "not well-formed XML";
		rv = -1;
	} else if (strcmp(x->path[1], root) != 0) {
		*why = "unexpected root element";
		rv = -1;
	}
	XML_ParserFree(x->p);
	x->p = NULL;
	return (rv);
}

int
sns_error_parse(const char *xml, size_t len, struct sns_error *e)
{
	struct sns_xml	*x;
	const char	*why;
	int		 rv;

	memset(e, 0, sizeof *e);
	if ((x = calloc(1, sizeof *x)) == NULL)
		return (-1);
	x->err = e;
	rv = sns_xml_read(x, xml, len, "ErrorResponse", &why);
	free(x);
	if (rv == -1)
		memset(e, 0, sizeof *e);	/* nothing half read */
	return (rv);
}

int
sns_publish_batch_parse(const char *xml, size_t len, struct outbox_msg *msgs,
    int n)
{
	struct sns_xml	*x;
	struct sns_said	*s;
	const char	*why;
	int		 i, sent = 0, rv;

	if ((x = calloc(1, sizeof *x)) == NULL ||
	    (x->said = calloc(n > 0 ? n : 1, sizeof *x->said)) == NULL) {
		free(x);
		/* Cannot tell: everything sent is retried. */
		for (i = 0; i < n; i++) {
			if (msgs[i].outcome == SINK_REJECTED)
				continue;
			msgs[i].outcome = SINK_RETRY;
			msgs[i].reason = SINK_REASON_OTHER;
			msgs[i].error = NULL;
		}
		return (-1);
	}
	x->msgs = msgs;
	x->n = n;
	rv = sns_xml_read(x, xml, len, "PublishBatchResponse", &why);
	for (i = 0; i < n; i++) {
		if (msgs[i].outcome == SINK_REJECTED)
			continue;	/* not sent */
		s = &x->said[i];
		msgs[i].outcome = SINK_RETRY;
		msgs[i].reason = SINK_REASON_SERVER;	/* SNS lost it */
		msgs[i].error = NULL;
		if (rv == -1) {
			if (asprintf(&msgs[i].error, "SNS PublishBatch reply "
			    "unreadable: %s", why) == -1)
				msgs[i].error = NULL;
		} else if (s->seen == SEEN_OK) {
			msgs[i].outcome = SINK_SENT;
			sent++;
		} else if (s->seen == SEEN_FAILED) {
			msgs[i].outcome = s->sender_fault ? SINK_REJECTED :
			    SINK_RETRY;
			/* An entry SNS failed on its side is a server
			 * error. */
			msgs[i].reason = aws_throttled(s->code, s->message) ?
			    SINK_REASON_THROTTLED : s->sender_fault ?
			    SINK_REASON_REJECTED : SINK_REASON_SERVER;
			if (asprintf(&msgs[i].error, "SNS %s%s%s",
			    s->code[0] != '\0' ? s->code : "error",
			    s->message[0] != '\0' ? ": " : "",
			    s->message) == -1)
				msgs[i].error = NULL;
		} else
			msgs[i].error = strdup("SNS reply does not list this "
			    "entry");
	}
	free(x->said);
	free(x);
	return (rv == -1 ? -1 : sent);
}

