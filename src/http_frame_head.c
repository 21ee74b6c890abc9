/*
 * http_frame_head.c - the header section of a request as http_frame.c's
 * framer sees it: the fields that frame a message (Content-Length,
 * Transfer-Encoding, Host), their values read byte by byte, and at the
 * section's end how long the body is (RFC 9112 §6.3), or why the request
 * is refused.  Every other field is only checked for shape, by
 * http_frame.c; what the two share is in http_frame_internal.h.
 *
 * These are the fields on which evhttp 2.1 and a strict front proxy can
 * disagree about where a request ends (http_frame.c says how): any
 * doubt about them refuses the stream.  Nothing is allocated: a value
 * is kept, if at all, in a fixed array of struct http_frame.
 */
#include <stdint.h>
#include <string.h>

#include "http_frame.h"
#include "http_frame_internal.h"

/* A byte of uri-host [":" port] (RFC 3986 §3.2.2): reg-name, IP-literal
 * or IPv4address, then a port. */
static int
is_host_char(unsigned char c)
{
	return is_alnum(c) || (c != '\0' && strchr("-._~!$&'()*+,;=%:[]", c));
}

/* The token t..u is name, ignoring ASCII case. */
static int
token_is(const unsigned char *t, const unsigned char *u, const char *name)
{
	for (; t < u && *name != '\0'; t++, name++)
		if (to_lower(*t) != (unsigned char)*name)
			return 0;
	return t == u && *name == '\0';
}

static const unsigned char *
skip_ows(const unsigned char *v, const unsigned char *e)
{
	while (v < e && (*v == ' ' || *v == '\t'))
		v++;
	return v;
}

static const unsigned char *
skip_token(const unsigned char *v, const unsigned char *e)
{
	while (v < e && is_tchar(*v))
		v++;
	return v;
}

/* Past a quoted-string starting at v (RFC 9110 §5.6.4); NULL if it is
 * not one. */
static const unsigned char *
skip_quoted(const unsigned char *v, const unsigned char *e)
{
	for (v++; v < e; v++) {
		if (*v == '"')
			return v + 1;
		if (*v == '\\' && ++v == e)
			return NULL;
		if (*v != '\t' && (*v < 0x20 || *v == 0x7f))
			return NULL;
	}
	return NULL;
}

/*
 * One Transfer-Encoding field value ended (OWS trimmed, in r.te): a list
 * of transfer-coding = token *( OWS ";" OWS token BWS "=" BWS ( token /
 * quoted-string ) ) (RFC 9112 §6.1, RFC 9110 §5.6.1, §10.1.4).  Only
 * counted here: http_frame_head_end() decides.
 */
static void
frame_te(struct http_frame_state *r)
{
	const unsigned char	*v = r->te, *e = r->te + r->te_len, *t, *u;
	int			 params;

	/* saturates: wrapping to 0 would hide the field */
	if (r->te_fields < 255)
		r->te_fields++;
	if (r->bad) {
		/* too long to keep: not "chunked", whatever it is */
		r->te_unknown = 1;
		r->te_last = 0;
		return;
	}
	for (;;) {
		t = v;
		if ((v = skip_token(v, e)) == t)
			goto bad;
		u = v;
		params = 0;
		for (v = skip_ows(v, e); v < e && *v == ';'; params = 1) {
			v = skip_ows(v + 1, e);
			if (v == skip_token(v, e))
				goto bad;
			v = skip_ows(skip_token(v, e), e);
			if (v == e || *v != '=')
				goto bad;
			v = skip_ows(v + 1, e);
			if (v < e && *v == '"') {
				if ((v = skip_quoted(v, e)) == NULL)
					goto bad;
			} else if (v == skip_token(v, e))
				goto bad;
			else
				v = skip_token(v, e);
			v = skip_ows(v, e);
		}
		if (token_is(t, u, "chunked")) {
			/* chunked has no parameters (RFC 9112 §7) */
			if (params)
				goto bad;
			if (r->te_chunked < 255)
				r->te_chunked++;
			r->te_last = 1;
		} else {
			r->te_unknown = 1;
			r->te_last = 0;
		}
		if (v == e)
			return;
		if (*v != ',')
			goto bad;
		v = skip_ows(v + 1, e);
	}
bad:
	r->te_bad = 1;
}

/* A field name ended at its colon. */
int
http_frame_head_name(struct http_frame *f)
{
	struct http_frame_state	*r = &f->r;

	r->kind = HF_OTHER;
	if (r->k == 14 && memcmp(r->name, "content-length", 14) == 0)
		r->kind = HF_CONTENT_LENGTH;
	else if (r->k == 17 && memcmp(r->name, "transfer-encoding", 17) == 0)
		r->kind = HF_TRANSFER_ENCODING;
	else if (r->k == 4 && memcmp(r->name, "host", 4) == 0)
		r->kind = HF_HOST;
	/* RFC 9110 §6.5.1; evhttp would add a trailer to the headers */
	if (r->trailer && r->kind != HF_OTHER)
		return http_frame_fail(f, 400, "header_invalid",
		    "Content-Length, Transfer-Encoding and Host are not "
		    "allowed in a trailer");
	r->state = FR_VALUE;
	r->vseen = r->vows = r->bad = 0;
	r->num = 0;
	r->te_len = 0;
	return 0;
}

/* A byte of a field value that is not OWS (leading OWS is skipped,
 * OWS after it is pending in r.vows). */
void
http_frame_head_value(struct http_frame_state *r, unsigned char c)
{
	switch (r->kind) {
	case HF_CONTENT_LENGTH:
		/* 1*DIGIT (RFC 9110 §8.6); too large saturates */
		if (!is_digit(c) || r->vows)
			r->bad = 1;
		else if (r->num > (UINT64_MAX - 9) / 10)
			r->num = UINT64_MAX;
		else
			r->num = r->num * 10 + (uint64_t)(c - '0');
		break;
	case HF_TRANSFER_ENCODING:
		if (r->te_len + (r->vows ? 2 : 1) > sizeof(r->te))
			r->bad = 1;
		else {
			if (r->vows)
				r->te[r->te_len++] = ' ';
			r->te[r->te_len++] = c;
		}
		break;
	case HF_HOST:
		if (!is_host_char(c) || r->vows)
			r->bad = 1;
		break;
	}
	r->vseen = 1;
	r->vows = 0;
}

/* A field line ended. */
int
http_frame_head_field_end(struct http_frame *f)
{
	struct http_frame_state	*r = &f->r;

	switch (r->kind) {
	case HF_CONTENT_LENGTH:
		if (!r->vseen || r->bad)
			return http_frame_fail(f, 400, "content_length_invalid",
			    "Content-Length is not a decimal number");
		/* RFC 9112 §6.3 item 5 */
		if (r->have_cl && r->num != r->cl)
			return http_frame_fail(f, 400,
			    "content_length_conflict",
			    "Content-Length fields disagree");
		r->have_cl = 1;
		r->cl = r->num;
		if (r->cl > f->lim.max_body)
			return http_frame_fail_limit(f, LIM_BODY);
		break;
	case HF_TRANSFER_ENCODING:
		frame_te(r);
		break;
	case HF_HOST:
		/* RFC 9112 §3.2 */
		if (r->host_n++ > 0)
			return http_frame_fail(f, 400, "host_invalid",
			    "more than one Host field");
		if (r->bad)
			return http_frame_fail(f, 400, "host_invalid",
			    "Host is not a valid host and port");
		break;
	}
	r->state = FR_FIELD;
	return 0;
}

/*
 * The header section ended: how long is the body (RFC 9112 §6.3)?
 * Returns 1 when the request ends here.
 */
int
http_frame_head_end(struct http_frame *f)
{
	struct http_frame_state	*r = &f->r;

	if (r->req.minor == 1 && r->host_n == 0)
		return http_frame_fail(f, 400, "host_invalid",
		    "an HTTP/1.1 request must have a Host field");
	if (r->te_fields > 0) {
		if (r->have_cl)
			return http_frame_fail(f, 400,
			    "content_length_conflict",
			    "both Content-Length and Transfer-Encoding");
		/* §6.1: framing faulty on HTTP/1.0 */
		if (r->req.minor == 0)
			return http_frame_fail(f, 400,
			    "transfer_encoding_invalid",
			    "Transfer-Encoding in an HTTP/1.0 request");
		if (r->te_bad)
			return http_frame_fail(f, 400,
			    "transfer_encoding_invalid",
			    "Transfer-Encoding is malformed");
		/* §6.3 item 4 */
		if (r->te_chunked > 1 || (r->te_chunked == 1 && !r->te_last))
			return http_frame_fail(f, 400,
			    "transfer_encoding_invalid",
			    "chunked must be the last transfer coding, once");
		/* §6.1: 501 for a coding not understood */
		if (r->te_unknown)
			return http_frame_fail(f, 501,
			    "transfer_encoding_unsupported",
			    "only Transfer-Encoding: chunked is supported");
	} else if (!r->have_cl || r->cl == 0)
		return 1;
	if (r->nobody)
		return http_frame_fail(f, 400, "body_not_allowed",
		    "a HEAD or TRACE request cannot have a body");
	if (r->te_fields > 0) {
		r->req.chunked = 1;
		r->state = FR_SIZE;
		r->n = r->k = 0;
		r->num = 0;
	} else {
		r->req.body = r->left = r->cl;
		r->state = FR_BODY;
	}
	return 0;
}
