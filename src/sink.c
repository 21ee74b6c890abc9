/*
 * sink.c - what every sink shares: the sink of a destination's sink =,
 * a row's headers column read into the headers a sink sends, and the
 * rules those headers keep (outbox(7), HEADERS).
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

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
	case CONF_SINK_PUBSUB:
		return &sink_pubsub;
	default:
		return &sink_sqs;
	}
}

void
sink_refuse(struct outbox_msg *m, enum sink_reason reason, const char *fmt,
    ...)
{
	va_list	ap;

	m->outcome = SINK_REJECTED;
	m->reason = reason;
	free(m->error);
	va_start(ap, fmt);
	if (vasprintf(&m->error, fmt, ap) == -1)
		m->error = NULL;
	va_end(ap);
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

/*
 * Header names outboxd or HTTP itself sets, compared without case: a row
 * that set one could forge a signature, or change how its request is
 * delivered.  The same list as sql/schema.sql's outbox_check_headers().
 */
static const struct {
	const char	*name;
	const char	*why;
} sink_reserved[] = {
	{ "EventType", "set by outboxd" },
	{ "Content-Type", "set by outboxd" },
	{ "User-Agent", "set by outboxd" },
	{ "webhook-id", "set by outboxd" },
	{ "webhook-timestamp", "set by outboxd" },
	{ "webhook-signature", "set by outboxd" },
	{ "X-Outbox-Event-Type", "set by outboxd" },
	{ SINK_REPLAY_HEADER, "set by outboxd" },
	{ "Authorization", "authentication" },
	{ "Proxy-Authorization", "authentication" },
	{ "Cookie", "authentication" },
	{ "Set-Cookie", "authentication" },
	{ "Connection", "hop-by-hop" },
	{ "Keep-Alive", "hop-by-hop" },
	{ "TE", "hop-by-hop" },
	{ "Trailer", "hop-by-hop" },
	{ "Transfer-Encoding", "hop-by-hop" },
	{ "Upgrade", "hop-by-hop" },
	{ "Host", "HTTP framing" },
	{ "Content-Length", "HTTP framing" },
	{ "Content-Encoding", "HTTP framing" },
	{ "Expect", "HTTP framing" },
};

/* A header name as the rules' messages quote it: at most 64 bytes, in
 * double quotes, with anything but printable ASCII (and '"', '\') as
 * \xNN, since it ends up in last_error and in log lines. */
static void
sink_header_quote(const char *name, char *buf, size_t size)
{
	size_t	i, o = 0;

	buf[o++] = '"';
	for (i = 0; name[i] != '\0' && i < 64 && o + 6 < size; i++) {
		unsigned char	c = (unsigned char)name[i];

		if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\')
			o += (size_t)snprintf(buf + o, size - o, "\\x%02x", c);
		else
			buf[o++] = (char)c;
	}
	if (name[i] != '\0' && o + 5 < size) {
		memcpy(buf + o, "\"...", 4);
		o += 4;
	} else
		buf[o++] = '"';
	buf[o] = '\0';
}

/* Format the rule broken into why; returns -1, for the checks below. */
static int	sink_rule(char *, size_t, const char *, ...)
		    OUTBOXD_PRINTF(3, 4);

static int
sink_rule(char *why, size_t len, const char *fmt, ...)
{
	va_list	ap;

	va_start(ap, fmt);
	vsnprintf(why, len, fmt, ap);
	va_end(ap);
	return (-1);
}

/* The rule the name of h[i] breaks (h[0..i-1] are the names before it):
 * -1 with it in why, else 0; q is the name quoted. */
static int
sink_header_name_check(const struct outbox_header *h, int i, const char *q,
    char *why, size_t len)
{
	const char	*s = h[i].name;
	size_t		 n = strlen(s), k;
	int		 j;

	if (n == 0)
		return (sink_rule(why, len, "header name \"\" is empty"));
	if (n > SINK_HEADER_NAME_MAX)
		return (sink_rule(why, len, "header name %s has %zu "
		    "characters, at most %d", q, n, SINK_HEADER_NAME_MAX));
	if (strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	    "0123456789_-.") != n)
		return (sink_rule(why, len, "header name %s may hold only "
		    "letters, digits, \"_\", \"-\" and \".\"", q));
	if (strncasecmp(s, "AWS.", 4) == 0 || strncasecmp(s, "Amazon.", 7) == 0)
		return (sink_rule(why, len, "header name %s starts with "
		    "\"AWS.\" or \"Amazon.\", which AWS reserves", q));
	if (strstr(s, "..") != NULL)
		return (sink_rule(why, len, "header name %s has two periods in "
		    "a row", q));
	if (s[0] == '.' || s[n - 1] == '.')
		return (sink_rule(why, len, "header name %s starts or ends "
		    "with \".\"", q));
	for (k = 0; k < sizeof(sink_reserved) / sizeof(sink_reserved[0]); k++)
		if (strcasecmp(s, sink_reserved[k].name) == 0)
			return (sink_rule(why, len, "header %s is reserved "
			    "(%s)", q, sink_reserved[k].why));
	if (strncasecmp(s, "Proxy-", 6) == 0)
		return (sink_rule(why, len, "header %s is reserved "
		    "(hop-by-hop)", q));
	for (j = 0; j < i; j++)
		if (strcasecmp(s, h[j].name) == 0) {
			char	qj[64 * 4 + 8];

			sink_header_quote(h[j].name, qj, sizeof(qj));
			return (sink_rule(why, len, "headers %s and %s differ "
			    "only in case (HTTP header names are "
			    "case-insensitive)", qj, q));
		}
	return (0);
}

/* The rule a header's value breaks: -1 with it in why, else 0. */
static int
sink_header_value_check(const char *v, const char *q, char *why, size_t len)
{
	const unsigned char	*p = (const unsigned char *)v;
	size_t			 n = strlen(v), k;

	if (n == 0)
		return (sink_rule(why, len, "header %s is empty (SQS and SNS "
		    "refuse an empty value)", q));
	if (n > SINK_HEADER_VALUE_MAX)
		return (sink_rule(why, len, "header %s has a value of %zu "
		    "bytes, at most %d", q, n, SINK_HEADER_VALUE_MAX));
	for (k = 0; k < n; k++) {
		/* C0 but tab, DEL, and C1 (U+0080..U+009F: 0xc2 0x80..0x9f
		 * in UTF-8). */
		if ((p[k] < 0x20 && p[k] != '\t') || p[k] == 0x7f ||
		    (p[k] == 0xc2 && k + 1 < n && p[k + 1] >= 0x80 &&
		    p[k + 1] <= 0x9f))
			return (sink_rule(why, len, "header %s has a control "
			    "character in its value (only tab is allowed)", q));
		/* U+FFFE and U+FFFF: 0xef 0xbf 0xbe and 0xef 0xbf 0xbf. */
		if (p[k] == 0xef && k + 2 < n && p[k + 1] == 0xbf &&
		    (p[k + 2] == 0xbe || p[k + 2] == 0xbf))
			return (sink_rule(why, len, "header %s has U+FFFE or "
			    "U+FFFF in its value", q));
	}
	if (p[0] == ' ' || p[0] == '\t' || p[n - 1] == ' ' || p[n - 1] == '\t')
		return (sink_rule(why, len, "header %s has a space or tab at "
		    "the start or end of its value (HTTP would drop it)", q));
	return (0);
}

int
sink_headers_check(const struct outbox_header *h, int n, char *why,
    size_t len)
{
	char	q[64 * 4 + 8];
	size_t	total = 0;
	int	i;

	if (n > SINK_HEADERS_MAX)
		return (sink_rule(why, len, "%d headers, at most %d (SQS and "
		    "SNS take 10 message attributes; EventType is one, "
		    "Outbox-Replay on a replay another)", n, SINK_HEADERS_MAX));
	for (i = 0; i < n; i++) {
		sink_header_quote(h[i].name, q, sizeof(q));
		if (sink_header_name_check(h, i, q, why, len) == -1 ||
		    sink_header_value_check(h[i].value, q, why, len) == -1)
			return (-1);
		total += strlen(h[i].name) + strlen(h[i].value);
	}
	if (total > SINK_HEADERS_BYTES_MAX)
		return (sink_rule(why, len, "%zu bytes of header names and "
		    "values, at most %d", total, SINK_HEADERS_BYTES_MAX));
	return (0);
}
