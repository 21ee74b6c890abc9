/*
 * test_http_frame.c - strict request framing (src/http_frame.c,
 * http_frame_head.c): where pipelined requests end, each refusal's
 * status and code, the limits exactly at and over the boundary.  Every
 * case is also fed one byte at a time and cut in two at every offset,
 * and must give the same ends and the same refusal at the same offset.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "http_frame.h"

#define MAX_ENDS	16
#define S(lit)		lit, sizeof(lit) - 1

struct run {
	size_t		 ends[MAX_ENDS];	/* stream offsets */
	uint64_t	 body[MAX_ENDS];
	int		 chunked[MAX_ENDS];
	int		 minor[MAX_ENDS];
	const char	*method[MAX_ENDS];
	int		 nends;
	size_t		 exts[MAX_ENDS];	/* offset of the CR or LF */
	size_t		 ext_len[MAX_ENDS];
	int		 nexts;
	int		 refused;
	size_t		 err_at;		/* offset of the refused byte */
	int		 status;
	const char	*code;
	int		 busy;
};

/*
 * Frame s: cut at split (0 = no cut), each part fed in pieces of step
 * bytes (0 = all at once), each piece fed again after every END.
 */
static void
run_split(const char *s, size_t len, const struct http_frame_limits *lim,
    size_t split, size_t step, struct run *o)
{
	struct http_frame		 f;
	const struct http_frame_error	*e;
	const struct http_frame_request	*rq;
	enum http_frame_result		 r;
	size_t				 off = 0, piece, at, used;

	memset(o, 0, sizeof(*o));
	http_frame_init(&f, lim);
	while (off < len) {
		piece = len - off;
		if (step > 0 && piece > step)
			piece = step;
		if (split > off && piece > split - off)
			piece = split - off;
		for (at = 0;;) {
			r = http_frame_feed(&f, s + off + at, piece - at, &used);
			assert_true(used <= piece - at);
			if (r == HTTP_FRAME_ERROR) {
				assert_null(http_frame_request(&f));
				e = http_frame_error(&f);
				assert_non_null(e);
				assert_non_null(e->code);
				assert_non_null(e->reason);
				assert_true(e->message != NULL &&
				    e->message[0] != '\0');
				o->refused = 1;
				o->err_at = off + at + used;
				o->status = e->status;
				o->code = e->code;
				/* refused for good */
				assert_int_equal(http_frame_feed(&f, "x", 1,
				    &used), HTTP_FRAME_ERROR);
				assert_int_equal(used, 0);
				o->busy = http_frame_busy(&f);
				return;
			}
			assert_null(http_frame_error(&f));
			if (r == HTTP_FRAME_EXT) {
				assert_true(used >= 1 && o->nexts < MAX_ENDS);
				at += used;
				o->exts[o->nexts] = off + at - 1;
				o->ext_len[o->nexts++] = http_frame_ext(&f);
				assert_true(http_frame_ext(&f) >= 1 &&
				    http_frame_ext(&f) < off + at);
				if (at == piece)
					break;
				continue;
			}
			assert_int_equal(http_frame_ext(&f), 0);
			if (r == HTTP_FRAME_MORE) {
				assert_int_equal(used, piece - at);
				assert_null(http_frame_request(&f));
				break;
			}
			assert_int_equal(r, HTTP_FRAME_END);
			assert_true(used >= 1);
			assert_true(o->nends < MAX_ENDS);
			rq = http_frame_request(&f);
			assert_non_null(rq);
			at += used;
			o->ends[o->nends] = off + at;
			o->body[o->nends] = rq->body;
			o->chunked[o->nends] = rq->chunked;
			o->minor[o->nends] = rq->minor;
			o->method[o->nends] = rq->method;
			assert_int_equal(rq->size, o->ends[o->nends] -
			    (o->nends > 0 ? o->ends[o->nends - 1] : 0));
			o->nends++;
			if (at == piece)
				break;
		}
		off += piece;
	}
	o->busy = http_frame_busy(&f);
}

static void
same_run(const struct run *a, const struct run *b, const char *how,
    size_t split)
{
	int	 i;

	for (i = 0; i < a->nexts && a->nexts == b->nexts; i++)
		if (a->exts[i] != b->exts[i] || a->ext_len[i] != b->ext_len[i])
			break;
	if (i != a->nexts || a->nexts != b->nexts)
		fail_msg("%s %zu: chunk extensions differ", how, split);
	if (a->nends != b->nends || a->refused != b->refused ||
	    a->err_at != b->err_at || a->status != b->status ||
	    a->busy != b->busy || (a->code != NULL) != (b->code != NULL) ||
	    (a->code != NULL && strcmp(a->code, b->code) != 0))
		fail_msg("%s %zu: %d ends, refused %d at %zu (%s), busy %d; "
		    "whole: %d ends, refused %d at %zu (%s), busy %d", how,
		    split, b->nends, b->refused, b->err_at, b->code, b->busy,
		    a->nends, a->refused, a->err_at, a->code, a->busy);
	for (i = 0; i < a->nends; i++) {
		assert_int_equal(a->ends[i], b->ends[i]);
		assert_int_equal(a->body[i], b->body[i]);
		assert_int_equal(a->chunked[i], b->chunked[i]);
		assert_int_equal(a->minor[i], b->minor[i]);
		assert_string_equal(a->method[i], b->method[i]);
	}
}

/* Frame s whole, byte by byte, and cut at every offset: all alike. */
static void
frame(const char *s, size_t len, const struct http_frame_limits *lim,
    struct run *whole)
{
	struct run	 o;
	size_t		 split;

	run_split(s, len, lim, 0, 0, whole);
	run_split(s, len, lim, 0, 1, &o);
	same_run(whole, &o, "byte by byte", 0);
	run_split(s, len, lim, 0, 7, &o);
	same_run(whole, &o, "7 at a time", 0);
	for (split = 1; split < len && len <= 4096; split++) {
		run_split(s, len, lim, split, 0, &o);
		same_run(whole, &o, "cut at", split);
	}
}

/* s holds exactly nreq whole requests, the last ending at its end. */
static void
expect_ok_lim(const char *s, size_t len, const struct http_frame_limits *lim,
    int nreq, struct run *o)
{
	frame(s, len, lim, o);
	if (o->refused)
		fail_msg("refused at %zu (%d %s): %.*s", o->err_at, o->status,
		    o->code, (int)len, s);
	if (o->nends != nreq)
		fail_msg("%d requests, want %d: %.*s", o->nends, nreq,
		    (int)len, s);
	assert_int_equal(o->ends[nreq - 1], len);
	assert_false(o->busy);
}

static void
expect_ok(const char *s, size_t len, int nreq)
{
	struct run	 o;

	expect_ok_lim(s, len, NULL, nreq, &o);
}

/* s is refused with status and code (after ends whole requests). */
static void
expect_refused_lim(const char *s, size_t len,
    const struct http_frame_limits *lim, int status, const char *code,
    struct run *o)
{
	frame(s, len, lim, o);
	if (!o->refused)
		fail_msg("accepted (%d requests): %.*s", o->nends, (int)len,
		    s);
	if (o->status != status || strcmp(o->code, code) != 0)
		fail_msg("%d %s, want %d %s: %.*s", o->status, o->code,
		    status, code, (int)len, s);
	assert_false(o->busy);
}

static void
expect_refused(const char *s, size_t len, int status, const char *code)
{
	struct run	 o;

	expect_refused_lim(s, len, NULL, status, code, &o);
}

/* A POST with the given Transfer-Encoding line(s) and a chunked body. */
static void
expect_te(const char *te, int status, const char *code)
{
	char	 buf[512];
	int	 n;

	n = snprintf(buf, sizeof(buf), "POST / HTTP/1.1\r\nHost: a\r\n%s\r\n"
	    "\r\n5\r\nhello\r\n0\r\n\r\n", te);
	assert_true(n > 0 && (size_t)n < sizeof(buf));
	if (status == 0)
		expect_ok(buf, (size_t)n, 1);
	else
		expect_refused(buf, (size_t)n, status, code);
}

/* A chunked POST with this body. */
static void
expect_chunks(const char *body, size_t blen, int status, const char *code)
{
	static const char	 head[] = "POST / HTTP/1.1\r\nHost: a\r\n"
				    "Transfer-Encoding: chunked\r\n\r\n";
	char			 buf[1024];

	assert_true(sizeof(head) - 1 + blen <= sizeof(buf));
	memcpy(buf, head, sizeof(head) - 1);
	memcpy(buf + sizeof(head) - 1, body, blen);
	if (status == 0)
		expect_ok(buf, sizeof(head) - 1 + blen, 1);
	else
		expect_refused(buf, sizeof(head) - 1 + blen, status, code);
}

/* A GET with this field line (or lines) after Host. */
static void
expect_field(const char *field, size_t flen, int status, const char *code)
{
	static const char	 head[] = "GET / HTTP/1.1\r\nHost: a\r\n";
	char			 buf[1024];
	size_t			 n = sizeof(head) - 1;

	assert_true(n + flen + 4 <= sizeof(buf));
	memcpy(buf, head, n);
	memcpy(buf + n, field, flen);
	memcpy(buf + n + flen, "\r\n\r\n", 4);
	if (status == 0)
		expect_ok(buf, n + flen + 4, 1);
	else
		expect_refused(buf, n + flen + 4, status, code);
}

static void
test_valid(void **state)
{
	struct run	 o;

	(void)state;
	expect_ok_lim(S("GET /healthz HTTP/1.1\r\nHost: localhost:8080\r\n"
	    "Accept: */*\r\n\r\n"), NULL, 1, &o);
	assert_string_equal(o.method[0], "GET");
	assert_int_equal(o.minor[0], 1);
	assert_int_equal(o.body[0], 0);
	assert_false(o.chunked[0]);

	expect_ok_lim(S("POST /orders HTTP/1.1\r\nHost: a\r\nContent-Type: "
	    "application/json\r\nContent-Length: 37\r\n\r\n"
	    "{\"customerId\":\"c1\",\"amountCents\":499}"), NULL, 1, &o);
	assert_string_equal(o.method[0], "POST");
	assert_int_equal(o.body[0], 37);

	/* chunked, extensions with token and quoted values, trailers */
	expect_ok_lim(S("POST /orders HTTP/1.1\r\nHost: a\r\n"
	    "Transfer-Encoding: chunked\r\n\r\n"
	    "5;a=b\r\nhello\r\n"
	    "6;a=\"q \\\" ;x\";flag;c = d\r\n world\r\n"
	    "1 ;e\r\n!\r\n"
	    "0;last\r\nX-Trailer: 1\r\nX-Other:  two \r\n\r\n"), NULL, 1, &o);
	assert_true(o.chunked[0]);
	assert_int_equal(o.body[0], 12);

	/* HTTP/1.0 needs no Host */
	expect_ok_lim(S("GET / HTTP/1.0\r\n\r\n"), NULL, 1, &o);
	assert_int_equal(o.minor[0], 0);
	expect_ok(S("POST / HTTP/1.0\r\nHost: a\r\nContent-Length: 2\r\n\r\n"
	    "ab"), 1);

	/* Content-Length: 0, zero-length chunked, upper-case hex, leading
	 * zeros, "Chunked", trailing OWS, the same length twice */
	expect_ok(S("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n"),
	    1);
	expect_ok(S("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked"
	    "\r\n\r\n0\r\n\r\n"), 1);
	expect_ok_lim(S("PUT / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: "
	    "Chunked  \r\n\r\n00A\r\n0123456789\r\n0\r\n\r\n"), NULL, 1, &o);
	assert_int_equal(o.body[0], 10);
	expect_ok(S("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n"
	    "content-length:3 \r\n\r\nabc"), 1);

	/* a GET body is read by evhttp too: framed, not refused; HEAD
	 * with Content-Length: 0 has no body */
	expect_ok(S("GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\n"
	    "ab"), 1);
	expect_ok(S("HEAD / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n"),
	    1);

	/* bare LF ends a line (RFC 9112 §2.2), also after chunk data */
	expect_ok(S("GET / HTTP/1.1\nHost: a\n\n"), 1);
	expect_ok(S("POST / HTTP/1.1\nHost: a\nTransfer-Encoding: chunked\n"
	    "\n2\nab\n0\n\n"), 1);

	/* field values: HTAB, obs-text, empty; Host forms */
	expect_field(S("X-A:\tb\tc\t"), 0, NULL);
	expect_field(S("X-A: caf\xc3\xa9"), 0, NULL);
	expect_field(S("X-Empty:"), 0, NULL);
	expect_ok(S("GET / HTTP/1.1\r\nHost:\r\n\r\n"), 1);
	expect_ok(S("GET / HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n"), 1);
	expect_ok(S("GET / HTTP/1.1\r\nHost: xn--caf-dma.example\r\n\r\n"),
	    1);

	/* every method evhttp knows; absolute-form and asterisk targets */
	expect_ok(S("DELETE /a HTTP/1.1\r\nHost: a\r\n\r\n"), 1);
	expect_ok(S("OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n"), 1);
	expect_ok(S("PATCH http://a/b?c=d%20e HTTP/1.1\r\nHost: a\r\n\r\n"),
	    1);
	expect_ok(S("CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\n\r\n"), 1);
	expect_ok(S("TRACE / HTTP/1.1\r\nHost: a\r\n\r\n"), 1);
}

static void
test_pipelined(void **state)
{
	static const char	 s[] =
	    "POST /orders HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\n"
	    "hello"
	    "GET /orders/1 HTTP/1.1\r\nHost: a\r\n\r\n"
	    "POST /orders HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked"
	    "\r\n\r\n3\r\nabc\r\n0\r\n\r\n"
	    "\r\n"			/* an empty line between is skipped */
	    "GET /healthz HTTP/1.0\r\n\r\n";
	struct run		 o;
	size_t			 e1, e2, e3;

	(void)state;
	e1 = strlen("POST /orders HTTP/1.1\r\nHost: a\r\nContent-Length: 5"
	    "\r\n\r\nhello");
	e2 = e1 + strlen("GET /orders/1 HTTP/1.1\r\nHost: a\r\n\r\n");
	e3 = e2 + strlen("POST /orders HTTP/1.1\r\nHost: a\r\nTransfer-"
	    "Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n");
	expect_ok_lim(S(s), NULL, 4, &o);
	assert_int_equal(o.ends[0], e1);
	assert_int_equal(o.ends[1], e2);
	assert_int_equal(o.ends[2], e3);
	assert_int_equal(o.body[0], 5);
	assert_int_equal(o.body[1], 0);
	assert_int_equal(o.body[2], 3);
	assert_int_equal(o.minor[3], 0);

	/* a request cut short: no end, the frame is busy */
	run_split(s, e1 - 2, NULL, 0, 0, &o);
	assert_int_equal(o.nends, 0);
	assert_false(o.refused);
	assert_true(o.busy);
	/* a good request, then a bad one: the first is still framed */
	expect_refused_lim(S("GET / HTTP/1.1\r\nHost: a\r\n\r\n"
	    "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"), NULL, 400,
	    "host_invalid", &o);
	assert_int_equal(o.nends, 1);
	assert_int_equal(o.ends[0], 27);
}

static void
test_empty_lines(void **state)
{
	struct run	 o;

	(void)state;
	expect_ok_lim(S("\r\n\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n"), NULL,
	    1, &o);
	expect_ok(S("\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\nGET / HTTP/1.0\r\n\r\n"),
	    1);
	expect_refused(S("\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\nGET / HTTP/1.0"
	    "\r\n\r\n"), 400, "bad_request");
	/* only empty lines so far: nothing ended, something began */
	run_split(S("\r\n"), NULL, 0, 0, &o);
	assert_int_equal(o.nends, 0);
	assert_true(o.busy);
}

static void
test_content_length(void **state)
{
	struct run	 o;

	(void)state;
	/* the smuggling case of issue 25 */
	expect_refused_lim(S("POST /orders HTTP/1.1\r\nHost: a\r\n"
	    "Content-Length: 0\r\nContent-Length: 124\r\n\r\n"
	    "GET /orders/1 HTTP/1.1\r\nHost: a\r\n\r\n"), NULL, 400,
	    "content_length_conflict", &o);
	assert_int_equal(o.nends, 0);
	expect_refused(S("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 124\r\n"
	    "Content-Length: 0\r\n\r\n"), 400, "content_length_conflict");
	expect_refused(S("POST / HTTP/1.1\r\nHost: a\r\nContent-Length : 124"
	    "\r\n\r\n"), 400, "header_invalid");
	expect_refused(S("POST / HTTP/1.1\r\nHost: a\r\nContent-Length\t: 1"
	    "\r\n\r\n"), 400, "header_invalid");

	expect_field(S("Content-Length: +37"), 400, "content_length_invalid");
	expect_field(S("Content-Length: -1"), 400, "content_length_invalid");
	expect_field(S("Content-Length: 0x10"), 400, "content_length_invalid");
	expect_field(S("Content-Length: 1 2"), 400, "content_length_invalid");
	expect_field(S("Content-Length: 12a"), 400, "content_length_invalid");
	expect_field(S("Content-Length: 5, 5"), 400, "content_length_invalid");
	expect_field(S("Content-Length: 1.0"), 400, "content_length_invalid");
	expect_field(S("Content-Length:"), 400, "content_length_invalid");
	expect_field(S("Content-Length:   "), 400, "content_length_invalid");
	expect_field(S("Content-Length: \xd9\xa3"), 400,
	    "content_length_invalid");
	/* too many digits: too large, not wrapped */
	expect_field(S("Content-Length: 99999999999999999999999999999"), 413,
	    "body_too_large");
	expect_field(S("Content-Length: 18446744073709551617"), 413,
	    "body_too_large");

	/* with Transfer-Encoding, in either order */
	expect_refused(S("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n"
	    "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n"), 400,
	    "content_length_conflict");
	expect_refused(S("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: "
	    "chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n"), 400,
	    "content_length_conflict");
	/* a body evhttp would not read, taken as the next request */
	expect_refused(S("HEAD / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n"
	    "\r\nhello"), 400, "body_not_allowed");
	expect_refused(S("TRACE / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: "
	    "chunked\r\n\r\n0\r\n\r\n"), 400, "body_not_allowed");
}

static void
test_transfer_encoding(void **state)
{
	char	 buf[4096 * 8];
	size_t	 n;
	int	 i;

	(void)state;
	expect_te("Transfer-Encoding: chunked", 0, NULL);
	expect_te("transfer-encoding:CHUNKED", 0, NULL);
	expect_te("Transfer-Encoding: gzip", 501,
	    "transfer_encoding_unsupported");
	expect_te("Transfer-Encoding: identity", 501,
	    "transfer_encoding_unsupported");
	expect_te("Transfer-Encoding: gzip, chunked", 501,
	    "transfer_encoding_unsupported");
	expect_te("Transfer-Encoding: gzip;q=\"a,b\" , chunked", 501,
	    "transfer_encoding_unsupported");
	expect_te("Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked", 501,
	    "transfer_encoding_unsupported");
	expect_te("Transfer-Encoding: x-a-very-long-coding-name-that-does-not-"
	    "fit-in-sixty-four-bytes, chunked", 501,
	    "transfer_encoding_unsupported");
	expect_te("Transfer-Encoding: chunked, gzip", 400,
	    "transfer_encoding_invalid");
	expect_te("Transfer-Encoding: chunked, chunked", 400,
	    "transfer_encoding_invalid");
	expect_te("Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked",
	    400, "transfer_encoding_invalid");
	expect_te("Transfer-Encoding: chunked\r\nTransfer-Encoding: gzip", 400,
	    "transfer_encoding_invalid");
	expect_te("Transfer-Encoding: chunked;q=1", 400,
	    "transfer_encoding_invalid");
	expect_te("Transfer-Encoding:", 400, "transfer_encoding_invalid");
	expect_te("Transfer-Encoding: ,chunked", 400,
	    "transfer_encoding_invalid");
	expect_te("Transfer-Encoding: chunked,", 400,
	    "transfer_encoding_invalid");
	expect_te("Transfer-Encoding: \"chunked\"", 400,
	    "transfer_encoding_invalid");
	expect_te("Transfer-Encoding: chun ked", 400,
	    "transfer_encoding_invalid");
	expect_te("Transfer-Encoding: gzip;q", 400,
	    "transfer_encoding_invalid");
	expect_te("Transfer-Encoding: gzip;q=\"x", 400,
	    "transfer_encoding_invalid");
	/* evhttp strips only SP before a value: it would not see chunked */
	expect_te("Transfer-Encoding:\tchunked", 400,
	    "transfer_encoding_invalid");
	expect_te("Transfer-Encoding: \tchunked", 400,
	    "transfer_encoding_invalid");
	expect_te("Transfer-Encoding: chunked\t", 0, NULL);
	expect_refused(S("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n"
	    "\r\n0\r\n\r\n"), 400, "transfer_encoding_invalid");

	/* 300 fields: the count must not wrap to "no Transfer-Encoding" */
	n = (size_t)sprintf(buf, "POST / HTTP/1.1\r\nHost: a\r\n");
	for (i = 0; i < 300; i++)
		n += (size_t)sprintf(buf + n, "Transfer-Encoding: chunked\r\n");
	n += (size_t)sprintf(buf + n, "\r\n0\r\n\r\n");
	{
		struct http_frame_limits lim = { 8192, sizeof(buf), 100 };
		struct run		 o;

		expect_refused_lim(buf, n, &lim, 400,
		    "transfer_encoding_invalid", &o);
	}
}

static void
test_chunks(void **state)
{
	(void)state;
	expect_chunks(S("25\r\n0123456789012345678901234567890123456\r\n"
	    "0\r\n\r\n"), 0, NULL);
	expect_chunks(S("25;a=b\r\n0123456789012345678901234567890123456\r\n"
	    "0\r\n\r\n"), 0, NULL);
	expect_chunks(S("25;a=\"q\"\r\n0123456789012345678901234567890123456"
	    "\r\n0\r\n\r\n"), 0, NULL);
	expect_chunks(S("0x25\r\n0123456789012345678901234567890123456\r\n"
	    "0\r\n\r\n"), 400, "chunk_invalid");
	expect_chunks(S(" 25\r\n0123456789012345678901234567890123456\r\n"
	    "0\r\n\r\n"), 400, "chunk_invalid");
	expect_chunks(S("25 \r\n0123456789012345678901234567890123456\r\n"
	    "0\r\n\r\n"), 400, "chunk_invalid");
	expect_chunks(S("25\t\r\n"), 400, "chunk_invalid");
	expect_chunks(S("zz\r\n"), 400, "chunk_invalid");
	expect_chunks(S("-1\r\n"), 400, "chunk_invalid");
	expect_chunks(S("+5\r\nhello\r\n0\r\n\r\n"), 400, "chunk_invalid");
	expect_chunks(S("\r\n5\r\nhello\r\n0\r\n\r\n"), 400, "chunk_invalid");
	/* shorter than its size: the data eats the next line */
	expect_chunks(S("5\r\nabc\r\n0\r\n\r\n"), 400, "chunk_invalid");
	/* longer than its size */
	expect_chunks(S("3\r\nabcde\r\n0\r\n\r\n"), 400, "chunk_invalid");
	/* no CRLF after the data */
	expect_chunks(S("3\r\nabc0\r\n\r\n"), 400, "chunk_invalid");
	expect_chunks(S("3\r\nabc\rX0\r\n\r\n"), 400, "chunk_invalid");
	expect_chunks(S("3\rabc\r\n0\r\n\r\n"), 400, "chunk_invalid");
	/* malformed extensions */
	expect_chunks(S("3;\r\nabc\r\n0\r\n\r\n"), 400, "chunk_invalid");
	expect_chunks(S("3;a=\r\nabc\r\n0\r\n\r\n"), 400, "chunk_invalid");
	expect_chunks(S("3;a \r\nabc\r\n0\r\n\r\n"), 400, "chunk_invalid");
	expect_chunks(S("3;a=b c\r\nabc\r\n0\r\n\r\n"), 400, "chunk_invalid");
	expect_chunks(S("3;a=\"b\r\nabc\r\n0\r\n\r\n"), 400, "chunk_invalid");
	expect_chunks(S("3;a=\"b\"c\r\nabc\r\n0\r\n\r\n"), 400,
	    "chunk_invalid");
	expect_chunks(S("3;@\r\nabc\r\n0\r\n\r\n"), 400, "chunk_invalid");
	expect_chunks(S("3;a=\"\x01\"\r\nabc\r\n0\r\n\r\n"), 400,
	    "chunk_invalid");
	/* trailers: no framing fields, no obs-fold */
	expect_chunks(S("0\r\nContent-Length: 5\r\n\r\n"), 400,
	    "header_invalid");
	expect_chunks(S("0\r\nTransfer-Encoding: chunked\r\n\r\n"), 400,
	    "header_invalid");
	expect_chunks(S("0\r\nHost: b\r\n\r\n"), 400, "header_invalid");
	expect_chunks(S("0\r\nX-A: b\r\n c\r\n\r\n"), 400, "header_invalid");
	expect_chunks(S("0\r\nX-A : b\r\n\r\n"), 400, "header_invalid");
}

/* Where each chunk extension is, so that evhttp can be given the stream
 * without them (http_guard.c): the stream cut so frames alike. */
static void
test_chunk_ext(void **state)
{
	static const char	 s[] = "POST / HTTP/1.1\r\nHost: a\r\n"
	    "Transfer-Encoding: chunked\r\n\r\n5;a=b\r\nhello\r\n"
	    "1 ; q=\"x;y\"\nZ\r\n0;last\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n"
	    "\r\n";
	static const char	*ext[] = { ";a=b", " ; q=\"x;y\"", ";last" };
	char			 cut[sizeof(s)];
	struct run		 o, p;
	size_t			 n = 0, from = 0, at;
	int			 i;

	(void)state;
	expect_ok_lim(s, sizeof(s) - 1, NULL, 2, &o);
	assert_int_equal(o.nexts, 3);
	for (i = 0; i < o.nexts; i++) {
		assert_true(s[o.exts[i]] == '\r' || s[o.exts[i]] == '\n');
		at = o.exts[i] - o.ext_len[i];
		assert_int_equal(o.ext_len[i], strlen(ext[i]));
		assert_memory_equal(s + at, ext[i], o.ext_len[i]);
		memcpy(cut + n, s + from, at - from);
		n += at - from;
		from = o.exts[i];
	}
	memcpy(cut + n, s + from, sizeof(s) - 1 - from);
	n += sizeof(s) - 1 - from;
	expect_ok_lim(cut, n, NULL, 2, &p);
	assert_int_equal(p.nexts, 0);
	assert_int_equal(p.body[0], o.body[0]);
	/* a refused extension is not reported */
	expect_refused_lim(S("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding"
	    ": chunked\r\n\r\n3;a=\r\n"), NULL, 400, "chunk_invalid", &o);
	assert_int_equal(o.nexts, 0);
}

static void
test_fields(void **state)
{
	(void)state;
	/* obs-fold, and whitespace before the first field line */
	expect_field(S("X-A: b\r\n c"), 400, "header_invalid");
	expect_field(S("X-A: b\r\n\tc"), 400, "header_invalid");
	expect_refused(S("GET / HTTP/1.1\r\n Host: a\r\n\r\n"), 400,
	    "header_invalid");
	/* CTLs in a value */
	expect_field(S("X-A: b\0c"), 400, "header_invalid");
	expect_field(S("X-A: \x01"), 400, "header_invalid");
	expect_field(S("X-A: b\x7f"), 400, "header_invalid");
	expect_field(S("X-A: b\x1b[0m"), 400, "header_invalid");
	/* names */
	expect_field(S("X A: b"), 400, "header_invalid");
	expect_field(S("X-A : b"), 400, "header_invalid");
	expect_field(S(": b"), 400, "header_invalid");
	expect_field(S("X-A"), 400, "header_invalid");
	expect_field(S("X\0A: b"), 400, "header_invalid");
	expect_field(S("X\xc3\xa9: b"), 400, "header_invalid");
	expect_field(S("X(A): b"), 400, "header_invalid");
	/* bare CR */
	expect_field(S("X-A: b\rc"), 400, "header_invalid");
	expect_refused(S("GET / HTTP/1.1\r\nHost: a\r\r\n\r\n"), 400,
	    "header_invalid");
	expect_refused(S("GET / HTTP/1.1\r\nHost: a\r\n\r\r\n"), 400,
	    "header_invalid");
	expect_refused(S("GET / HTTP/1.1\rHost: a\r\n\r\n"), 400,
	    "bad_request");
	expect_refused(S("\rGET / HTTP/1.1\r\nHost: a\r\n\r\n"), 400,
	    "bad_request");
}

static void
test_host(void **state)
{
	(void)state;
	expect_refused(S("GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n"), 400,
	    "host_invalid");
	expect_refused(S("GET / HTTP/1.0\r\nHost: a\r\nhost: b\r\n\r\n"), 400,
	    "host_invalid");
	expect_refused(S("GET / HTTP/1.1\r\nX-Host: a\r\n\r\n"), 400,
	    "host_invalid");
	expect_refused(S("GET / HTTP/1.1\r\nHost: a b\r\n\r\n"), 400,
	    "host_invalid");
	expect_refused(S("GET / HTTP/1.1\r\nHost: a/b\r\n\r\n"), 400,
	    "host_invalid");
	expect_refused(S("GET / HTTP/1.1\r\nHost: a@b\r\n\r\n"), 400,
	    "host_invalid");
	expect_refused(S("GET / HTTP/1.1\r\nHost: caf\xc3\xa9\r\n\r\n"), 400,
	    "host_invalid");
}

static void
test_request_line(void **state)
{
	(void)state;
	expect_refused(S("GET / HTTP/1.2\r\nHost: a\r\n\r\n"), 505,
	    "version_not_supported");
	expect_refused(S("GET / HTTP/2.0\r\nHost: a\r\n\r\n"), 505,
	    "version_not_supported");
	expect_refused(S("GET / HTTP/0.9\r\n\r\n"), 505,
	    "version_not_supported");
	expect_refused(S("GET / HTTP/1.10\r\nHost: a\r\n\r\n"), 400,
	    "bad_request");
	expect_refused(S("GET / http/1.1\r\nHost: a\r\n\r\n"), 400,
	    "bad_request");
	expect_refused(S("GET / HTTP/1\r\nHost: a\r\n\r\n"), 400,
	    "bad_request");
	expect_refused(S("GET / HTTP/1.1 \r\nHost: a\r\n\r\n"), 400,
	    "bad_request");
	expect_refused(S("GET /\r\n\r\n"), 400, "bad_request");
	expect_refused(S("GET\r\n\r\n"), 400, "bad_request");
	expect_refused(S("GET  / HTTP/1.1\r\nHost: a\r\n\r\n"), 400,
	    "bad_request");
	expect_refused(S("GET /  HTTP/1.1\r\nHost: a\r\n\r\n"), 400,
	    "bad_request");
	expect_refused(S("GET / a HTTP/1.1\r\nHost: a\r\n\r\n"), 400,
	    "bad_request");
	expect_refused(S(" GET / HTTP/1.1\r\nHost: a\r\n\r\n"), 400,
	    "bad_request");
	expect_refused(S("GET\t/ HTTP/1.1\r\nHost: a\r\n\r\n"), 400,
	    "bad_request");
	expect_refused(S("GET /\xc3\xa9 HTTP/1.1\r\nHost: a\r\n\r\n"), 400,
	    "bad_request");
	expect_refused(S("GET /\0 HTTP/1.1\r\nHost: a\r\n\r\n"), 400,
	    "bad_request");
	expect_refused(S("G@T / HTTP/1.1\r\nHost: a\r\n\r\n"), 400,
	    "bad_request");
	expect_refused(S("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"), 400,
	    "bad_request");	/* a TLS ClientHello */
	/* tokens, but not methods evhttp knows */
	expect_refused(S("FOO / HTTP/1.1\r\nHost: a\r\n\r\n"), 501,
	    "method_not_implemented");
	expect_refused(S("get / HTTP/1.1\r\nHost: a\r\n\r\n"), 501,
	    "method_not_implemented");
	expect_refused(S("PROPFIND / HTTP/1.1\r\nHost: a\r\n\r\n"), 501,
	    "method_not_implemented");
	expect_refused(S("GETS / HTTP/1.1\r\nHost: a\r\n\r\n"), 501,
	    "method_not_implemented");
	expect_refused(S("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), 501,
	    "method_not_implemented");
}

/* "GET " + target + " HTTP/1.1": a request line of exactly n bytes. */
static size_t
line_of(char *buf, size_t n, const char *rest)
{
	size_t	 t = n - strlen("GET  HTTP/1.1");

	memcpy(buf, "GET /", 5);
	memset(buf + 5, 'x', t - 1);
	return (size_t)sprintf(buf + 4 + t, " HTTP/1.1%s", rest) + 4 + t;
}

static void
test_limits(void **state)
{
	struct http_frame_limits lim = { 32, 64, 10 };
	struct run		 o;
	char			 buf[256];
	size_t			 n;

	(void)state;
	/* request line: 32 bytes without its CRLF */
	n = line_of(buf, 32, "\r\nHost: a\r\n\r\n");
	expect_ok_lim(buf, n, &lim, 1, &o);
	n = line_of(buf, 33, "\r\nHost: a\r\n\r\n");
	expect_refused_lim(buf, n, &lim, 414, "uri_too_long", &o);
	assert_int_equal(o.err_at, 32);		/* the 33rd byte */
	assert_int_equal(line_of(buf, 33, ""), 33);
	expect_refused_lim(buf, 33, &lim, 414, "uri_too_long", &o);

	/* header section: 64 bytes, every line ending included */
	n = (size_t)sprintf(buf, "GET / HTTP/1.1\r\nHost: a\r\nX: %.*s\r\n\r\n",
	    48, "................................................");
	assert_int_equal(n, 16 + 64);
	expect_ok_lim(buf, n, &lim, 1, &o);
	n = (size_t)sprintf(buf, "GET / HTTP/1.1\r\nHost: a\r\nX: %.*s\r\n\r\n",
	    49, ".................................................");
	expect_refused_lim(buf, n, &lim, 431, "headers_too_large", &o);
	assert_int_equal(o.err_at, 16 + 64);	/* the last LF */
	/* a trailer section has the same limit of its own */
	n = (size_t)sprintf(buf, "POST / HTTP/1.1\r\nHost: a\r\nTransfer-"
	    "Encoding: chunked\r\n\r\n0\r\nX: %.*s\r\n\r\n", 57,
	    "........................................................."
	    "........");
	expect_ok_lim(buf, n, &lim, 1, &o);
	n = (size_t)sprintf(buf, "POST / HTTP/1.1\r\nHost: a\r\nTransfer-"
	    "Encoding: chunked\r\n\r\n0\r\nX: %.*s\r\n\r\n", 58,
	    "........................................................."
	    "........");
	expect_refused_lim(buf, n, &lim, 431, "headers_too_large", &o);

	/* Content-Length: refused when read, before any body */
	expect_ok_lim(S("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n"
	    "\r\n0123456789"), &lim, 1, &o);
	expect_refused_lim(S("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 11"
	    "\r\n\r\n01234567890"), &lim, 413, "body_too_large", &o);
	assert_int_equal(o.err_at, strlen("POST / HTTP/1.1\r\nHost: a\r\n"
	    "Content-Length: 11\r"));
	/* chunked: when the running total passes the limit */
	expect_ok_lim(S("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: "
	    "chunked\r\n\r\n5\r\n01234\r\n5\r\n56789\r\n0\r\n\r\n"), &lim, 1,
	    &o);
	assert_int_equal(o.body[0], 10);
	expect_refused_lim(S("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: "
	    "chunked\r\n\r\n5\r\n01234\r\n6\r\n567890\r\n0\r\n\r\n"), &lim,
	    413, "body_too_large", &o);
	assert_int_equal(o.err_at, strlen("POST / HTTP/1.1\r\nHost: a\r\n"
	    "Transfer-Encoding: chunked\r\n\r\n5\r\n01234\r\n"));
	expect_refused_lim(S("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: "
	    "chunked\r\n\r\nffffffffffffffffffffff\r\n"), &lim, 413,
	    "body_too_large", &o);
	/* a chunk size line is bounded by max_line */
	n = (size_t)sprintf(buf, "POST / HTTP/1.1\r\nHost: a\r\nTransfer-"
	    "Encoding: chunked\r\n\r\n1;%.*s\r\nx\r\n0\r\n\r\n", 30,
	    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
	expect_ok_lim(buf, n, &lim, 1, &o);
	n = (size_t)sprintf(buf, "POST / HTTP/1.1\r\nHost: a\r\nTransfer-"
	    "Encoding: chunked\r\n\r\n1;%.*s\r\nx\r\n0\r\n\r\n", 31,
	    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
	expect_refused_lim(buf, n, &lim, 400, "chunk_invalid", &o);

	/* the defaults */
	n = line_of(buf, 200, "\r\nHost: a\r\n\r\n");
	expect_ok_lim(buf, n, NULL, 1, &o);
}

/* The error message names the limit, never the client's bytes; the
 * status line reason matches the status. */
static void
test_error_text(void **state)
{
	struct http_frame_limits	 lim = { 16, 64, 10 };
	struct http_frame		 f;
	const struct http_frame_error	*e;
	size_t				 used;

	(void)state;
	http_frame_init(&f, &lim);
	assert_int_equal(http_frame_feed(&f, S("GET /<script>alert(1)</script>"),
	    &used), HTTP_FRAME_ERROR);
	assert_int_equal(used, 16);
	e = http_frame_error(&f);
	assert_int_equal(e->status, 414);
	assert_string_equal(e->reason, "URI Too Long");
	assert_string_equal(e->message, "the request line is longer than 16 "
	    "bytes");
	http_frame_init(&f, &lim);
	assert_int_equal(http_frame_feed(&f, S("POST / HTTP/1.1\r\nHost: a\r\n"
	    "Content-Length: 11\r\n"), &used), HTTP_FRAME_ERROR);
	e = http_frame_error(&f);
	assert_string_equal(e->reason, "Content Too Large");
	assert_string_equal(e->message, "request body is larger than 10 bytes");
	http_frame_init(&f, NULL);
	assert_int_equal(http_frame_feed(&f, S("<evil> / HTTP/1.1\r\n"), &used),
	    HTTP_FRAME_ERROR);
	assert_null(strchr(http_frame_error(&f)->message, '<'));
	http_frame_init(&f, NULL);
	assert_int_equal(http_frame_feed(&f, S("GET / HTTP/3.0\r\n"), &used),
	    HTTP_FRAME_ERROR);
	assert_string_equal(http_frame_error(&f)->reason,
	    "HTTP Version Not Supported");

	/* no bytes: nothing happens */
	http_frame_init(&f, NULL);
	assert_int_equal(http_frame_feed(&f, NULL, 0, &used), HTTP_FRAME_MORE);
	assert_int_equal(used, 0);
	assert_false(http_frame_busy(&f));
	assert_null(http_frame_error(&f));
	assert_null(http_frame_request(&f));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_valid),
		cmocka_unit_test(test_pipelined),
		cmocka_unit_test(test_empty_lines),
		cmocka_unit_test(test_content_length),
		cmocka_unit_test(test_transfer_encoding),
		cmocka_unit_test(test_chunks),
		cmocka_unit_test(test_chunk_ext),
		cmocka_unit_test(test_fields),
		cmocka_unit_test(test_host),
		cmocka_unit_test(test_request_line),
		cmocka_unit_test(test_limits),
		cmocka_unit_test(test_error_text),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
