/*
 * http_frame_internal.h - what the framer's two files share, and nobody
 * else includes: http_frame.c (the request line, field lines' shape,
 * chunked coding, the bytes of a body) and http_frame_head.c (the fields
 * that frame a message, and the body length at the header section's
 * end).  The states of struct http_frame_state, the byte classes, the
 * refusals, and the header section's steps.
 *
 * Like the rest of the framer: pure, no I/O, no allocation.  Every
 * function returning int returns 0 to go on, -1 when it has refused the
 * stream (the refusal is in f, for http_frame_error()).
 */
#ifndef HTTP_FRAME_INTERNAL_H
#define HTTP_FRAME_INTERNAL_H

#include <string.h>

#include "http_frame.h"

/* Where the framer is (r.state). */
enum {
	FR_START,	/* before a request line: empty lines are skipped */
	FR_METHOD,
	FR_TARGET,
	FR_VERSION,
	FR_FIELD,	/* start of a field line, or the empty line */
	FR_NAME,
	FR_VALUE,
	FR_BODY,	/* Content-Length bytes */
	FR_SIZE,	/* chunk size digits */
	FR_EXT,		/* after them: chunk extensions (sub: EX_*) */
	FR_DATA,	/* chunk data */
	FR_DATA_END,	/* the line ending after chunk data */
	FR_END,		/* a request ended: the next feed starts one */
	FR_ERROR
};

/* Header fields that frame the message (r.kind). */
enum { HF_OTHER, HF_CONTENT_LENGTH, HF_TRANSFER_ENCODING, HF_HOST };

/* Which limit a refusal names (http_frame_fail_limit). */
enum { LIM_LINE, LIM_HEAD, LIM_BODY, LIM_CHUNK };

#define is_digit(c)	((c) >= '0' && (c) <= '9')
#define is_alnum(c)	(is_digit(c) || ((c) >= 'a' && (c) <= 'z') || \
			    ((c) >= 'A' && (c) <= 'Z'))
#define to_lower(c)	((c) >= 'A' && (c) <= 'Z' ? (c) - 'A' + 'a' : (c))

/* tchar, RFC 9110 §5.6.2. */
static inline int
is_tchar(unsigned char c)
{
	return is_alnum(c) || (c != '\0' && strchr("!#$%&'*+-.^_`|~", c));
}

/* ---- http_frame.c: refusals ------------------------------------------- */

/* Refuse the stream with status (its reason phrase is the framer's),
 * code and message, both static or in f->msg; f is in FR_ERROR from now
 * on.  Always returns -1. */
int	 http_frame_fail(struct http_frame *f, int status, const char *code,
	    const char *message);
/* Refuse for going over the limit which (LIM_*), the limit's value in
 * the message (written into f->msg).  Always returns -1. */
int	 http_frame_fail_limit(struct http_frame *f, int which);

/* ---- http_frame_head.c: the header section ---------------------------- */

/* A field name ended at its colon (r.name holds its first bytes,
 * lowercase, r.k its length): note which framing field it is, if any,
 * and read its value next.  -1: a framing field in a trailer. */
int	 http_frame_head_name(struct http_frame *f);
/* A byte c of a field value that is not OWS (leading OWS is skipped,
 * OWS after it is pending in r.vows): read into the value of a framing
 * field.  Cannot fail: a bad value is marked, and refused at the line's
 * end. */
void	 http_frame_head_value(struct http_frame_state *r, unsigned char c);
/* A field line ended: check a framing field's value (Content-Length a
 * number within max_body and like any before, one valid Host; a
 * Transfer-Encoding list is counted for http_frame_head_end()). */
int	 http_frame_head_field_end(struct http_frame *f);
/* The header section ended: how long is the body (RFC 9112 §6.3)?
 * Returns 1 when the request ends here (no body), 0 with the framer in
 * FR_BODY or FR_SIZE, -1 refused. */
int	 http_frame_head_end(struct http_frame *f);

#endif /* HTTP_FRAME_INTERNAL_H */
