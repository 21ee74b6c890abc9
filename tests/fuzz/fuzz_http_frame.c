/*
 * fuzz_http_frame.c - libFuzzer target for src/http_frame.c and
 * http_frame_head.c: any stream, fed whole, byte by byte, or in pieces,
 * must frame the same way, never read outside what it is given, never
 * stall, and frame the same way once its chunk extensions are cut out.
 * Built and run by `make fuzz` (FUZZ_SECONDS, FUZZ_TARGETS=http_frame);
 * by hand:
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -Isrc tests/fuzz/fuzz_http_frame.c src/http_frame.c src/http_frame_head.c -o fuzz_http_frame && mkdir -p /tmp/fuzz-http-frame && ./fuzz_http_frame -dict=tests/fuzz/http_frame.dict -max_total_time=300 /tmp/fuzz-http-frame tests/fuzz/corpus/http_frame
 *
 * (the first corpus directory is where new inputs are written: keep the
 * seeds in tests/fuzz/corpus/http_frame read-only by naming it second).
 *
 * Input: bytes 0-3 give the sizes of the pieces the stream is cut into
 * (1-64 bytes each, in turn); bit 7 of byte 0 picks small limits, so that
 * 414, 431 and 413 are reached; the stream is the rest.
 */
#include <ctype.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http_frame.h"

#define CHECK(x)	do { if (!(x)) abort(); } while (0)
#define ENDS_MAX	4096

struct outcome {
	size_t		 ends[ENDS_MAX];	/* stream offsets */
	uint64_t	 body[ENDS_MAX];
	size_t		 nends;
	size_t		 exts[ENDS_MAX];	/* offset of the CR or LF */
	size_t		 ext_len[ENDS_MAX];
	size_t		 nexts;
	int		 refused;
	size_t		 err_at;
	int		 status;
	const char	*code;
	int		 busy;
};

static struct outcome	 whole, pieces, cut;

static void
frame(const uint8_t *s, size_t len, const struct http_frame_limits *lim,
    const uint8_t *sizes, struct outcome *o)
{
	struct http_frame		 f;
	const struct http_frame_error	*e;
	const struct http_frame_request	*rq;
	enum http_frame_result		 r;
	size_t				 off = 0, piece, at, used, turn = 0;
	size_t				 eol, n;
	const char			*m;

	memset(o, 0, sizeof(*o));
	http_frame_init(&f, lim);
	while (off < len) {
		piece = len - off;
		if (sizes != NULL && piece > sizes[turn % 4])
			piece = sizes[turn % 4];
		turn++;
		/* a copy of exactly this piece: ASan sees any read past it */
		uint8_t	*copy = malloc(piece);
		CHECK(copy != NULL);
		memcpy(copy, s + off, piece);
		for (at = 0;;) {
			r = http_frame_feed(&f, (const char *)copy + at,
			    piece - at, &used);
			CHECK(used <= piece - at);
			if (r == HTTP_FRAME_ERROR) {
				e = http_frame_error(&f);
				CHECK(e != NULL && e->code != NULL &&
				    e->reason != NULL && e->message != NULL);
				CHECK(e->status == 400 || e->status == 413 ||
				    e->status == 414 || e->status == 431 ||
				    e->status == 501 || e->status == 505);
				/* plain printable text, no client bytes */
				for (m = e->message; *m != '\0'; m++)
					CHECK(*m >= 0x20 && *m < 0x7f);
				o->refused = 1;
				o->err_at = off + at + used;
				o->status = e->status;
				o->code = e->code;
				CHECK(http_frame_feed(&f, "x", 1, &used) ==
				    HTTP_FRAME_ERROR && used == 0);
				free(copy);
				o->busy = http_frame_busy(&f);
				return;
			}
			CHECK(http_frame_error(&f) == NULL);
			if (r == HTTP_FRAME_EXT) {
				/* ends at a line end, after a size digit */
				CHECK(used >= 1 && o->nexts < ENDS_MAX);
				at += used;
				eol = off + at - 1;
				n = http_frame_ext(&f);
				CHECK(n >= 1 && n <= lim->max_line && n < eol);
				CHECK(s[eol] == '\r' || s[eol] == '\n');
				CHECK((s[eol - n] == ';' || s[eol - n] == ' ' ||
				    s[eol - n] == '\t') && isxdigit(s[eol - n - 1]));
				o->exts[o->nexts] = eol;
				o->ext_len[o->nexts++] = n;
				if (at == piece)
					break;
				continue;
			}
			CHECK(http_frame_ext(&f) == 0);
			if (r == HTTP_FRAME_MORE) {
				CHECK(used == piece - at);
				CHECK(http_frame_request(&f) == NULL);
				break;
			}
			CHECK(r == HTTP_FRAME_END && used >= 1);
			rq = http_frame_request(&f);
			CHECK(rq != NULL && rq->method != NULL);
			CHECK(rq->minor == 0 || rq->minor == 1);
			at += used;
			CHECK(o->nends < ENDS_MAX);
			o->ends[o->nends] = off + at;
			o->body[o->nends] = rq->body;
			CHECK(rq->size == o->ends[o->nends] -
			    (o->nends > 0 ? o->ends[o->nends - 1] : 0));
			CHECK(rq->body <= lim->max_body && rq->body <
			    rq->size);
			o->nends++;
			if (at == piece)
				break;
		}
		free(copy);
		off += piece;
	}
	o->busy = http_frame_busy(&f);
}

/* Offset x of the stream once o's chunk extensions are cut out of it. */
static size_t
cut_offset(const struct outcome *o, size_t x)
{
	size_t	 i, y = x;

	for (i = 0; i < o->nexts && o->exts[i] <= x; i++)
		y -= o->ext_len[i];
	return y;
}

/* Without its chunk extensions (what http_guard.c gives evhttp) the
 * stream frames the same way, and has none. */
static void
frame_cut(const uint8_t *s, size_t len, const struct http_frame_limits *lim)
{
	uint8_t	*c;
	size_t	 i, n = 0, from = 0;

	if (whole.nexts == 0 || (c = malloc(len)) == NULL)
		return;
	for (i = 0; i < whole.nexts; i++) {
		memcpy(c + n, s + from, whole.exts[i] - whole.ext_len[i] -
		    from);
		n += whole.exts[i] - whole.ext_len[i] - from;
		from = whole.exts[i];
	}
	memcpy(c + n, s + from, len - from);
	frame(c, n + len - from, lim, NULL, &cut);
	free(c);
	CHECK(cut.nexts == 0 && cut.nends == whole.nends &&
	    cut.refused == whole.refused && cut.status == whole.status);
	for (i = 0; i < whole.nends; i++)
		CHECK(cut.ends[i] == cut_offset(&whole, whole.ends[i]));
	CHECK(!whole.refused || cut.err_at == cut_offset(&whole,
	    whole.err_at));
}

/* Every call keeps the contract of http_frame_feed(). */
static void
same(const struct outcome *a, const struct outcome *b)
{
	CHECK(a->nends == b->nends && a->nexts == b->nexts);
	CHECK(memcmp(a->exts, b->exts, a->nexts * sizeof(a->exts[0])) == 0);
	CHECK(memcmp(a->ext_len, b->ext_len, a->nexts *
	    sizeof(a->ext_len[0])) == 0);
	CHECK(memcmp(a->ends, b->ends, a->nends * sizeof(a->ends[0])) == 0);
	CHECK(memcmp(a->body, b->body, a->nends * sizeof(a->body[0])) == 0);
	CHECK(a->refused == b->refused && a->err_at == b->err_at &&
	    a->status == b->status && a->busy == b->busy);
	CHECK(a->code == b->code || (a->code != NULL && b->code != NULL &&
	    strcmp(a->code, b->code) == 0));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct http_frame_limits	 small = { 64, 128, 64 };
	struct http_frame_limits	 dflt = { HTTP_FRAME_MAX_LINE,
					    HTTP_FRAME_MAX_HEAD,
					    HTTP_FRAME_MAX_BODY };
	const struct http_frame_limits	*lim;
	uint8_t				 sizes[4], one[4] = { 1, 1, 1, 1 };
	int				 i;

	if (size < 4)
		return 0;
	for (i = 0; i < 4; i++)
		sizes[i] = (uint8_t)(data[i] % 64 + 1);
	lim = (data[0] & 0x80) ? &small : &dflt;
	frame(data + 4, size - 4, lim, NULL, &whole);
	frame_cut(data + 4, size - 4, lim);
	frame(data + 4, size - 4, lim, sizes, &pieces);
	same(&whole, &pieces);
	frame(data + 4, size - 4, lim, one, &pieces);
	same(&whole, &pieces);
	return 0;
}
