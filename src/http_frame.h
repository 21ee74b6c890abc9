/*
 * http_frame.h - strict HTTP/1.1 request framing (RFC 9112) of a
 * connection's raw bytes: where each pipelined request ends, or why the
 * stream is refused.  Pure: no libevent, no I/O, no allocation.
 *
 * Sizes are bytes.  Strings handed out are static or live inside the
 * struct http_frame they came from; the caller frees nothing.
 */
#ifndef HTTP_FRAME_H
#define HTTP_FRAME_H

#include <stddef.h>
#include <stdint.h>

/* Limits used when http_frame_init() is given none. */
#define HTTP_FRAME_MAX_LINE	8192		/* request line */
#define HTTP_FRAME_MAX_HEAD	16384		/* header section */
#define HTTP_FRAME_MAX_BODY	(1024 * 1024)	/* body */

/*
 * Limits, each inclusive: exactly the limit is accepted, one byte more is
 * refused as soon as that byte arrives.
 *   max_line	bytes of the request line without its line ending (414);
 *		also bounds a chunk size line with its extensions (400)
 *   max_head	bytes of the header section after the request line, every
 *		field line and the empty line with their line endings (431);
 *		a trailer section gets the same limit of its own
 *   max_body	bytes of body: the Content-Length value, or the sum of the
 *		chunk sizes of a chunked body (413)
 */
struct http_frame_limits {
	size_t		 max_line;
	size_t		 max_head;
	size_t		 max_body;
};

enum http_frame_result {
	HTTP_FRAME_MORE,	/* all bytes used, the request goes on */
	HTTP_FRAME_END,		/* a request ends at data + *used */
	HTTP_FRAME_ERROR,	/* refused: answer http_frame_error(), close */
	HTTP_FRAME_EXT		/* a chunk extension ended: http_frame_ext() */
};

/* Why a stream was refused. */
struct http_frame_error {
	int		 status;	/* 400, 413, 414, 431, 501 or 505 */
	const char	*reason;	/* "Bad Request", for the status line */
	const char	*code;		/* stable snake_case, e.g. "chunk_invalid" */
	const char	*message;	/* plain English; never client bytes */
};

/* The request that has just ended (HTTP_FRAME_END). */
struct http_frame_request {
	const char	*method;	/* "GET", "POST", ...: static */
	int		 minor;		/* HTTP/1.minor: 0 or 1 */
	int		 chunked;	/* Transfer-Encoding: chunked */
	uint64_t	 body;		/* body bytes, without chunk framing */
	uint64_t	 size;		/* bytes on the wire, empty lines
					   skipped before it included */
};

/*
 * Per-connection state: fixed size, allocated by the caller (embed it in
 * the connection's record), set up by http_frame_init().  Its members are
 * private to the framer (http_frame.c, http_frame_head.c): read it only
 * through the functions below.
 */
struct http_frame {
	struct http_frame_limits	 lim;
	struct http_frame_error		 err;
	char				 msg[96];	/* err.message */
	struct http_frame_state {
		struct http_frame_request req;
		uint64_t	 left;		/* body or chunk bytes to come */
		uint64_t	 num;		/* number being read */
		uint64_t	 cl;		/* Content-Length */
		size_t		 n;		/* bytes of line or section */
		size_t		 k;		/* bytes of token or value */
		size_t		 te_len;
		size_t		 ext_at;	/* chunk line bytes before
						   its extension */
		size_t		 ext_len;	/* HTTP_FRAME_EXT's */
		unsigned char	 state, sub, kind, cr, trailer, empty;
		unsigned char	 vseen, vows, nobody, have_cl, bad;
		unsigned char	 host_n, te_fields, te_chunked, te_last;
		unsigned char	 te_unknown, te_bad;
		unsigned char	 method[8], version[8], name[18], te[64];
	}				 r;
};

/*
 * Start framing a new connection.  lim: the limits, copied; NULL = the
 * HTTP_FRAME_MAX_* defaults.  Cannot fail.
 */
void	 http_frame_init(struct http_frame *f,
	    const struct http_frame_limits *lim);

/*
 * Feed the next len bytes of the connection's input (data may be NULL
 * when len is 0).  Bytes may come in pieces of any size, one at a time
 * included: every split of the same stream gives the same results at the
 * same stream offsets.  Each byte is examined once (O(len)), and no byte
 * outside data[0..len) is read.
 *   HTTP_FRAME_MORE	*used = len: every byte belongs to a request (or
 *			to empty lines before one) that has not ended yet.
 *   HTTP_FRAME_END	a request ends at data + *used (*used >= 1); the
 *			rest, data + *used .. data + len, is not looked at:
 *			feed it again for the next pipelined request.
 *			http_frame_request() describes the one that ended.
 *   HTTP_FRAME_ERROR	the stream is refused: *used = the offset of the
 *			byte that made it so.  http_frame_error() says why;
 *			answer it, then close the connection (RFC 9112
 *			§6.3 item 4, §9.6).  Later calls return
 *			HTTP_FRAME_ERROR again with *used = 0.
 *   HTTP_FRAME_EXT	a valid chunk extension ended: data[*used - 1] is
 *			the CR or LF ending its chunk size line, and the
 *			http_frame_ext() bytes right before that byte (some
 *			of them maybe fed in earlier calls) are the
 *			extension, from the first byte after the size's
 *			digits.  evhttp 2.1 cannot parse an extension: a
 *			caller removes those bytes before evhttp sees the
 *			line.  Feed the rest, data + *used, again.
 * Rules (all RFC 9112 unless said): request line, §3 (method a token,
 * one SP each side of the target, version exactly HTTP/1.0 or HTTP/1.1,
 * else 505); up to 8 empty lines before it are skipped (§2.2); a line
 * ends with CRLF or bare LF, a CR not followed by LF is refused (§2.2);
 * field lines, §5 (no whitespace before the colon, no obs-fold, no CTL
 * but HTAB in a value); exactly one Host on HTTP/1.1, at most one on
 * HTTP/1.0 (§3.2); message body length, §6.3 (Content-Length 1*DIGIT,
 * repeated only with the same value, never with Transfer-Encoding;
 * Transfer-Encoding only "chunked", on HTTP/1.1: 501 for any other
 * coding, 400 when malformed); chunked coding, §7.1 (1*HEXDIG size,
 * chunk-ext accepted, CRLF after the data, trailer fields without
 * Content-Length, Transfer-Encoding or Host).  Because evhttp 2.1 reads
 * no body for HEAD and TRACE, a body on those is refused too, and so is
 * a tab before a Transfer-Encoding value (evhttp would not see chunked).
 */
enum http_frame_result http_frame_feed(struct http_frame *f, const char *data,
	    size_t len, size_t *used);

/* After HTTP_FRAME_ERROR: why; NULL before.  Lives as long as f. */
const struct http_frame_error *http_frame_error(const struct http_frame *f);

/* After HTTP_FRAME_END: the request that ended, valid until the next
 * http_frame_feed(); NULL at any other time. */
const struct http_frame_request *http_frame_request(const struct http_frame *f);

/* After HTTP_FRAME_EXT: the extension's length in bytes (at least 1, at
 * most the max_line limit); 0 at any other time. */
size_t	 http_frame_ext(const struct http_frame *f);

/* 1 while a request has begun (some of its bytes, or empty lines before
 * it, were fed) and has not ended or been refused; else 0.  A
 * connection closed by the client while this is 1 was cut mid-request. */
int	 http_frame_busy(const struct http_frame *f);

#endif /* HTTP_FRAME_H */
