/*
 * http_frame.c - strict HTTP/1.1 request framing (RFC 9112) of a connection's raw bytes
 *
 * Why this exists.  evhttp (libevent 2.1.12) parses requests leniently
 * and gives a server no hook into its parser: it uses the first of two
 * Content-Length fields, takes "Content-Length : 5" for no length at all,
 * reads "+37", " 25" and "0x25" as numbers, echoes any HTTP/1.x version,
 * folds continuation lines, and reads no body for HEAD.  A front proxy
 * that frames the same bytes per RFC 9112 then disagrees with evhttp on
 * where a request ends, and what one takes as a body the other answers as
 * a request (request smuggling).  This module frames the bytes first,
 * strictly, and refuses every stream on which the two could disagree:
 * what it lets through, evhttp frames the same way or refuses (evhttp
 * 2.1 refuses chunk extensions and empty lines before a request, which
 * RFC 9112 allows and this module accepts).
 *
 * A byte-at-a-time state machine: each byte is looked at once, in any
 * split of the stream, and body bytes are skipped in bulk.  Nothing is
 * allocated; the few values kept (method, version, a header name, a
 * Transfer-Encoding value) go into fixed arrays in struct http_frame.
 *
 * This file reads the request line, the shape of field lines, chunked
 * coding and the bytes of a body.  What the header section's fields mean
 * for framing (Content-Length, Transfer-Encoding, Host) and the body
 * length they give is http_frame_head.c's; the two share
 * http_frame_internal.h.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "http_frame.h"
#include "http_frame_internal.h"

#define FRAME_EMPTY_MAX		8	/* empty lines before a request */

/* Where FR_EXT is in chunk-ext = *( BWS ";" BWS chunk-ext-name
 * [ BWS "=" BWS chunk-ext-val ] ) (RFC 9112 §7.1.1). */
enum {
	EX_BWS,		/* whitespace: only ";" may follow */
	EX_NAME0,	/* after ";": BWS, then a name */
	EX_NAME,
	EX_NAME_BWS,	/* whitespace after a name: "=" or ";" */
	EX_VAL0,	/* after "=": BWS, then token or quoted-string */
	EX_TOKEN,
	EX_QUOTED,
	EX_ESCAPE,	/* after a backslash in the quoted-string */
	EX_QEND		/* after the closing quote */
};

/* The methods evhttp 2.1 knows (evhttp_parse_request_line). */
static const char *const frame_methods[] = {
	"GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "TRACE",
	"CONNECT", "PATCH"
};

static int
hex_value(unsigned char c)
{
	if (is_digit(c))
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static const char *
frame_reason(int status)
{
	switch (status) {
	case 413:
		return "Content Too Large";
	case 414:
		return "URI Too Long";
	case 431:
		return "Request Header Fields Too Large";
	case 501:
		return "Not Implemented";
	case 505:
		return "HTTP Version Not Supported";
	}
	return "Bad Request";
}

/* Refuse the stream; returns -1 for frame_byte() and its callees. */
int
http_frame_fail(struct http_frame *f, int status, const char *code,
    const char *message)
{
	f->r.state = FR_ERROR;
	f->err.status = status;
	f->err.reason = frame_reason(status);
	f->err.code = code;
	f->err.message = message;
	return -1;
}

/* Refuse for going over a limit, with the limit in the message. */
int
http_frame_fail_limit(struct http_frame *f, int which)
{
	switch (which) {
	case LIM_LINE:
		snprintf(f->msg, sizeof(f->msg), "the request line is longer "
		    "than %zu bytes", f->lim.max_line);
		return http_frame_fail(f, 414, "uri_too_long", f->msg);
	case LIM_HEAD:
		snprintf(f->msg, sizeof(f->msg), "the %s section is larger "
		    "than %zu bytes", f->r.trailer ? "trailer" : "header",
		    f->lim.max_head);
		return http_frame_fail(f, 431, "headers_too_large", f->msg);
	case LIM_BODY:
		snprintf(f->msg, sizeof(f->msg), "request body is larger than "
		    "%zu bytes", f->lim.max_body);
		return http_frame_fail(f, 413, "body_too_large", f->msg);
	}
	snprintf(f->msg, sizeof(f->msg), "a chunk size line is longer than "
	    "%zu bytes", f->lim.max_line);
	return http_frame_fail(f, 400, "chunk_invalid", f->msg);
}

/* A CR not followed by LF (RFC 9112 §2.2): named after where it is. */
static int
frame_fail_cr(struct http_frame *f)
{
	int	 st = f->r.state;

	return http_frame_fail(f, 400, st == FR_FIELD || st == FR_VALUE ?
	    "header_invalid" : st == FR_SIZE || st == FR_EXT ||
	    st == FR_DATA_END ? "chunk_invalid" : "bad_request",
	    "a CR is not followed by LF");
}

/* Forget the request before; the limits stay. */
static void
frame_reset(struct http_frame *f)
{
	memset(&f->r, 0, sizeof(f->r));
	f->r.state = FR_START;
}

void
http_frame_init(struct http_frame *f, const struct http_frame_limits *lim)
{
	memset(f, 0, sizeof(*f));
	if (lim != NULL)
		f->lim = *lim;
	else {
		f->lim.max_line = HTTP_FRAME_MAX_LINE;
		f->lim.max_head = HTTP_FRAME_MAX_HEAD;
		f->lim.max_body = HTTP_FRAME_MAX_BODY;
	}
	frame_reset(f);
}

const struct http_frame_error *
http_frame_error(const struct http_frame *f)
{
	return f->r.state == FR_ERROR ? &f->err : NULL;
}

const struct http_frame_request *
http_frame_request(const struct http_frame *f)
{
	return f->r.state == FR_END ? &f->r.req : NULL;
}

size_t
http_frame_ext(const struct http_frame *f)
{
	return f->r.state == FR_ERROR ? 0 : f->r.ext_len;
}

int
http_frame_busy(const struct http_frame *f)
{
	return f->r.state != FR_END && f->r.state != FR_ERROR &&
	    f->r.req.size > 0;
}

/* The method token ended (at its SP): one evhttp knows, or 501. */
static int
frame_method(struct http_frame *f)
{
	size_t	 i;

	if (f->r.k == 0)
		return http_frame_fail(f, 400, "bad_request",
		    "the request line is malformed");
	for (i = 0; i < sizeof(frame_methods) / sizeof(frame_methods[0]); i++)
		if (strlen(frame_methods[i]) == f->r.k &&
		    memcmp(frame_methods[i], f->r.method, f->r.k) == 0) {
			f->r.req.method = frame_methods[i];
			/* evhttp_method_may_have_body(): no body is read */
			f->r.nobody = strcmp(frame_methods[i], "HEAD") == 0 ||
			    strcmp(frame_methods[i], "TRACE") == 0;
			f->r.state = FR_TARGET;
			f->r.k = 0;
			return 0;
		}
	return http_frame_fail(f, 501, "method_not_implemented",
	    "this HTTP method is not implemented");
}

/* The request line ended: HTTP-version = "HTTP/" DIGIT "." DIGIT
 * (RFC 9112 §2.3), and only 1.0 and 1.1 are spoken. */
static int
frame_version(struct http_frame *f)
{
	const unsigned char	*v = f->r.version;

	if (f->r.k != 8 || memcmp(v, "HTTP/", 5) != 0 || !is_digit(v[5]) ||
	    v[6] != '.' || !is_digit(v[7]))
		return http_frame_fail(f, 400, "bad_request",
		    "the request line is malformed");
	if (v[5] != '1' || (v[7] != '0' && v[7] != '1'))
		return http_frame_fail(f, 505, "version_not_supported",
		    "only HTTP/1.0 and HTTP/1.1 are supported");
	f->r.req.minor = v[7] - '0';
	f->r.state = FR_FIELD;
	f->r.n = 0;
	return 0;
}


/* A line ended (CRLF or bare LF).  Returns 1 when the request ends. */
static int
frame_eol(struct http_frame *f)
{
	struct http_frame_state	*r = &f->r;

	switch (r->state) {
	case FR_START:
		if (++r->empty > FRAME_EMPTY_MAX)
			return http_frame_fail(f, 400, "bad_request",
			    "too many empty lines before the request line");
		return 0;
	case FR_VERSION:
		return frame_version(f);
	case FR_FIELD:
		/* the empty line */
		if (r->trailer)
			return 1;
		return http_frame_head_end(f);
	case FR_VALUE:
		return http_frame_head_field_end(f);
	case FR_SIZE:
	case FR_EXT:
		if (r->num == 0) {
			/* last-chunk: a trailer section follows */
			r->trailer = 1;
			r->state = FR_FIELD;
			r->n = 0;
			return 0;
		}
		r->req.body += r->num;
		r->left = r->num;
		r->state = FR_DATA;
		return 0;
	case FR_DATA_END:
		r->state = FR_SIZE;
		r->n = r->k = 0;
		r->num = 0;
		return 0;
	}
	return http_frame_fail(f, 400, "bad_request", "unexpected line ending");
}

/* c is CR or LF: a line ends, or will with the LF after a CR. */
static int
frame_crlf(struct http_frame *f, unsigned char c)
{
	if (c == '\r') {
		f->r.cr = 1;
		return 0;
	}
	return frame_eol(f);
}

/* A byte of a chunk extension (RFC 9112 §7.1.1). */
static int
frame_ext(struct http_frame *f, unsigned char c)
{
	struct http_frame_state	*r = &f->r;
	int			 ws = c == ' ' || c == '\t';
	int			 end = c == '\r' || c == '\n';

	switch (r->sub) {
	case EX_BWS:
	case EX_NAME0:
	case EX_VAL0:
		if (ws)
			return 0;
		if (r->sub == EX_BWS && c == ';')
			r->sub = EX_NAME0;
		else if (r->sub == EX_NAME0 && is_tchar(c))
			r->sub = EX_NAME;
		else if (r->sub == EX_VAL0 && c == '"')
			r->sub = EX_QUOTED;
		else if (r->sub == EX_VAL0 && is_tchar(c))
			r->sub = EX_TOKEN;
		else
			break;
		return 0;
	case EX_NAME:
	case EX_NAME_BWS:
	case EX_TOKEN:
	case EX_QEND:
		if (c == ';')
			r->sub = EX_NAME0;
		else if (c == '=' && r->sub != EX_TOKEN && r->sub != EX_QEND)
			r->sub = EX_VAL0;
		else if (ws)
			r->sub = r->sub == EX_NAME || r->sub == EX_NAME_BWS ?
			    EX_NAME_BWS : EX_BWS;
		else if (end && r->sub != EX_NAME_BWS) {
			/* the extension ends here: say so (2) */
			r->ext_len = r->n - r->ext_at;
			return frame_crlf(f, c) < 0 ? -1 : 2;
		}
		else if (!is_tchar(c) || r->sub == EX_NAME_BWS ||
		    r->sub == EX_QEND)
			break;
		return 0;
	case EX_QUOTED:
		if (c == '"')
			r->sub = EX_QEND;
		else if (c == '\\')
			r->sub = EX_ESCAPE;
		else if (c != '\t' && (c < 0x20 || c == 0x7f))
			break;
		return 0;
	case EX_ESCAPE:
		if (c != '\t' && (c < 0x20 || c == 0x7f))
			break;
		r->sub = EX_QUOTED;
		return 0;
	}
	return http_frame_fail(f, 400, "chunk_invalid",
	    "a chunk extension is malformed");
}

/*
 * One byte, in any state but FR_BODY and FR_DATA (taken in bulk by
 * http_frame_feed).  Returns 0 to go on, 1 when the request ends with
 * this byte, 2 when a chunk extension ended before it, -1 when the
 * stream is refused.
 */
static int
frame_byte(struct http_frame *f, unsigned char c)
{
	struct http_frame_state	*r = &f->r;
	int			 d;

	/* the limits, counted before the byte means anything */
	switch (r->state) {
	case FR_METHOD:
	case FR_TARGET:
	case FR_VERSION:
		if (!r->cr && c != '\r' && c != '\n' &&
		    ++r->n > f->lim.max_line)
			return http_frame_fail_limit(f, LIM_LINE);
		break;
	case FR_FIELD:
	case FR_NAME:
	case FR_VALUE:
		if (++r->n > f->lim.max_head)
			return http_frame_fail_limit(f, LIM_HEAD);
		break;
	case FR_SIZE:
	case FR_EXT:
		if (!r->cr && c != '\r' && c != '\n' &&
		    ++r->n > f->lim.max_line)
			return http_frame_fail_limit(f, LIM_CHUNK);
		break;
	}
	if (r->cr) {
		if (c != '\n')
			return frame_fail_cr(f);
		r->cr = 0;
		return frame_eol(f);
	}

	switch (r->state) {
	case FR_START:
		if (c == '\r' || c == '\n')
			return frame_crlf(f, c);
		r->state = FR_METHOD;
		r->n = r->k = 0;
		return frame_byte(f, c);	/* once: now FR_METHOD */
	case FR_METHOD:
		if (c == ' ')
			return frame_method(f);
		if (!is_tchar(c))
			break;
		if (r->k < sizeof(r->method))
			r->method[r->k] = c;
		r->k++;
		return 0;
	case FR_TARGET:
		/* 1*( visible ASCII ): no CTL, SP or 8-bit byte (§3.2) */
		if (c == ' ' && r->k > 0) {
			r->state = FR_VERSION;
			r->k = 0;
		} else if (c > 0x20 && c < 0x7f)
			r->k = 1;
		else
			break;
		return 0;
	case FR_VERSION:
		if (c == '\r' || c == '\n')
			return frame_crlf(f, c);
		if (r->k >= sizeof(r->version))
			break;
		r->version[r->k++] = c;
		return 0;

	case FR_FIELD:
		if (c == '\r' || c == '\n')
			return frame_crlf(f, c);
		if (c == ' ' || c == '\t')
			return http_frame_fail(f, 400, "header_invalid",
			    "a field line starts with whitespace (obs-fold)");
		if (!is_tchar(c))
			return http_frame_fail(f, 400, "header_invalid",
			    "a field line does not start with a name");
		r->state = FR_NAME;
		r->k = 0;
		/* FALLTHROUGH */
	case FR_NAME:
		if (c == ':')
			return http_frame_head_name(f);
		if (c == ' ' || c == '\t')
			return http_frame_fail(f, 400, "header_invalid",
			    "whitespace between a field name and its colon");
		if (!is_tchar(c))
			return http_frame_fail(f, 400, "header_invalid",
			    "a field name is malformed or has no colon");
		if (r->k < sizeof(r->name))
			r->name[r->k] = (unsigned char)to_lower(c);
		if (r->k < SIZE_MAX)
			r->k++;
		return 0;
	case FR_VALUE:
		if (c == '\r' || c == '\n')
			return frame_crlf(f, c);
		if (c == ' ' || c == '\t') {
			/* evhttp strips only SP before a value: a tab
			 * there would hide "chunked" from it */
			if (!r->vseen && c == '\t' &&
			    r->kind == HF_TRANSFER_ENCODING)
				r->te_bad = 1;
			r->vows = r->vseen;
			return 0;
		}
		/* field-vchar: visible ASCII or obs-text (RFC 9110 §5.5) */
		if (c <= 0x20 || c == 0x7f)
			return http_frame_fail(f, 400, "header_invalid",
			    "a control character in a field value");
		http_frame_head_value(r, c);
		return 0;

	case FR_SIZE:
		if ((d = hex_value(c)) >= 0) {
			/* the sum of the sizes stays within max_body */
			if (r->num > (UINT64_MAX - 15) / 16 ||
			    r->num * 16 + (uint64_t)d >
			    f->lim.max_body - r->req.body)
				return http_frame_fail_limit(f, LIM_BODY);
			r->num = r->num * 16 + (uint64_t)d;
			r->k = 1;
			return 0;
		}
		if (r->k == 0)
			return http_frame_fail(f, 400, "chunk_invalid",
			    "a chunk size is not hexadecimal digits");
		if (c == '\r' || c == '\n')
			return frame_crlf(f, c);
		if (c == ';')
			r->sub = EX_NAME0;
		else if (c == ' ' || c == '\t')
			r->sub = EX_BWS;
		else
			return http_frame_fail(f, 400, "chunk_invalid",
			    "a chunk size is not hexadecimal digits");
		r->state = FR_EXT;
		r->ext_at = r->n - 1;	/* n counts c already */
		return 0;
	case FR_EXT:
		return frame_ext(f, c);
	case FR_DATA_END:
		if (c == '\r' || c == '\n')
			return frame_crlf(f, c);
		return http_frame_fail(f, 400, "chunk_invalid",
		    "chunk data is not followed by CRLF");
	}
	return http_frame_fail(f, 400, "bad_request",
	    "the request line is malformed");
}

enum http_frame_result
http_frame_feed(struct http_frame *f, const char *data, size_t len,
    size_t *used)
{
	const unsigned char	*p = (const unsigned char *)data;
	struct http_frame_state	*r = &f->r;
	size_t			 i = 0, n;
	int			 rc = 0;

	*used = 0;
	if (r->state == FR_ERROR)
		return HTTP_FRAME_ERROR;
	if (r->state == FR_END)
		frame_reset(f);
	r->ext_len = 0;
	while (i < len) {
		if (r->state == FR_BODY || r->state == FR_DATA) {
			/* left > 0 here: at least one byte is taken */
			n = len - i;
			if ((uint64_t)n > r->left)
				n = (size_t)r->left;
			i += n;
			r->left -= n;
			if (r->left > 0)
				continue;
			if (r->state == FR_BODY) {
				rc = 1;
				break;
			}
			r->state = FR_DATA_END;
			continue;
		}
		if ((rc = frame_byte(f, p[i])) < 0)
			break;
		i++;
		if (rc > 0)
			break;
	}
	r->req.size += i;
	*used = i;
	if (rc < 0)
		return HTTP_FRAME_ERROR;
	if (rc == 2)
		return HTTP_FRAME_EXT;
	if (rc > 0) {
		r->state = FR_END;
		return HTTP_FRAME_END;
	}
	return HTTP_FRAME_MORE;
}
