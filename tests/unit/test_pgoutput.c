/*
 * test_pgoutput.c - pgoutput.c's decoding of the replication stream and
 * wal_event.c's table-less event JSON: each message type of pgoutput
 * protocol version 1 built byte by byte as PostgreSQL 15 documents it
 * (55.9 "Logical Replication Message Formats") decodes to its fields;
 * every prefix of a valid message is an error, never a read past its
 * end; bytes left over, unknown and streamed-transaction types, counts
 * out of range and unknown tuple kinds are errors; XLogData and
 * keepalives decode (55.4), the standby status update encodes; LSNs
 * print and parse as "X/Y"; the event JSON keeps the payload's text.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "outboxd.h"
#include "wal.h"

struct buf {
	uint8_t	b[4096];
	size_t	n;
};

static void
put(struct buf *b, uint64_t v, int bytes)
{
	int	i;

	for (i = bytes - 1; i >= 0; i--)
		b->b[b->n++] = (uint8_t)(v >> (8 * i));
}

static void
put_str(struct buf *b, const char *s)
{
	memcpy(b->b + b->n, s, strlen(s) + 1);
	b->n += strlen(s) + 1;
}

static void
put_text(struct buf *b, const char *s)
{
	b->b[b->n++] = 't';
	put(b, strlen(s), 4);
	memcpy(b->b + b->n, s, strlen(s));
	b->n += strlen(s);
}

static struct pgo_msg	msg;
static char		err[256];

/* Every shorter prefix of b is refused ("cut short"). */
static void
all_prefixes_fail(const struct buf *b)
{
	size_t	n;

	for (n = 0; n < b->n; n++) {
		err[0] = '\0';
		assert_int_equal(pgo_parse(b->b, n, &msg, err, sizeof(err)), -1);
		assert_true(err[0] != '\0');
	}
	/* and one more byte is left over */
	assert_int_equal(pgo_parse(b->b, b->n + 1, &msg, err, sizeof(err)), -1);
}

static int
str_is(struct pgo_str s, const char *want)
{
	return s.len == strlen(want) && memcmp(s.p, want, s.len) == 0;
}

static void
test_begin_commit(void **state)
{
	struct buf	b = { .n = 0 };

	(void)state;
	b.b[b.n++] = 'B';
	put(&b, 0x100000200ULL, 8);
	put(&b, 12345, 8);
	put(&b, 777, 4);
	assert_int_equal(pgo_parse(b.b, b.n, &msg, err, sizeof(err)), 0);
	assert_int_equal(msg.kind, PGO_BEGIN);
	assert_true(msg.u.begin.final_lsn == 0x100000200ULL);
	assert_int_equal(msg.u.begin.commit_time, 12345);
	assert_int_equal(msg.u.begin.xid, 777);
	all_prefixes_fail(&b);

	b.n = 0;
	b.b[b.n++] = 'C';
	b.b[b.n++] = 0;
	put(&b, 0x200, 8);
	put(&b, 0x238, 8);
	put(&b, 99, 8);
	assert_int_equal(pgo_parse(b.b, b.n, &msg, err, sizeof(err)), 0);
	assert_int_equal(msg.kind, PGO_COMMIT);
	assert_true(msg.u.commit.commit_lsn == 0x200);
	assert_true(msg.u.commit.end_lsn == 0x238);
	all_prefixes_fail(&b);
}

static void
test_relation_insert(void **state)
{
	struct buf	b = { .n = 0 };

	(void)state;
	b.b[b.n++] = 'R';
	put(&b, 16384, 4);
	put_str(&b, "public");
	put_str(&b, "outbox");
	b.b[b.n++] = 'd';
	put(&b, 3, 2);
	b.b[b.n++] = 1; put_str(&b, "id"); put(&b, 20, 4); put(&b, 0xffffffff, 4);
	b.b[b.n++] = 0; put_str(&b, "payload"); put(&b, 3802, 4); put(&b, 0xffffffff, 4);
	b.b[b.n++] = 0; put_str(&b, "destination"); put(&b, 25, 4); put(&b, 0xffffffff, 4);
	assert_int_equal(pgo_parse(b.b, b.n, &msg, err, sizeof(err)), 0);
	assert_int_equal(msg.kind, PGO_RELATION);
	assert_int_equal(msg.u.rel.oid, 16384);
	assert_true(str_is(msg.u.rel.nspname, "public"));
	assert_true(str_is(msg.u.rel.relname, "outbox"));
	assert_int_equal(msg.u.rel.ncols, 3);
	assert_int_equal(msg.u.rel.cols[0].key, 1);
	assert_true(str_is(msg.u.rel.cols[1].name, "payload"));
	assert_int_equal(msg.u.rel.cols[1].type_oid, 3802);
	assert_int_equal(msg.u.rel.cols[2].typmod, -1);
	all_prefixes_fail(&b);

	b.n = 0;
	b.b[b.n++] = 'I';
	put(&b, 16384, 4);
	b.b[b.n++] = 'N';
	put(&b, 3, 2);
	put_text(&b, "42");
	put_text(&b, "{\"a\": 1}");
	b.b[b.n++] = 'n';
	assert_int_equal(pgo_parse(b.b, b.n, &msg, err, sizeof(err)), 0);
	assert_int_equal(msg.kind, PGO_INSERT);
	assert_int_equal(msg.u.ins.ncols, 3);
	assert_int_equal(msg.u.ins.vals[0].kind, 't');
	assert_true(str_is(msg.u.ins.vals[1].val, "{\"a\": 1}"));
	assert_int_equal(msg.u.ins.vals[2].kind, 'n');
	all_prefixes_fail(&b);

	/* a tuple kind that does not exist, and no 'N' */
	b.b[b.n - 1] = 'x';
	assert_int_equal(pgo_parse(b.b, b.n, &msg, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "unknown kind"));
	b.b[5] = 'K';
	assert_int_equal(pgo_parse(b.b, b.n, &msg, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "expected 'N'"));
}

static void
test_counts(void **state)
{
	struct buf	b = { .n = 0 };

	(void)state;
	/* a Relation of more columns than PGO_MAX_COLS */
	b.b[b.n++] = 'R';
	put(&b, 1, 4);
	put_str(&b, "s");
	put_str(&b, "t");
	b.b[b.n++] = 'd';
	put(&b, PGO_MAX_COLS + 1, 2);
	assert_int_equal(pgo_parse(b.b, b.n, &msg, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "columns"));
	/* a tuple of 65535 columns */
	b.n = 0;
	b.b[b.n++] = 'I';
	put(&b, 1, 4);
	b.b[b.n++] = 'N';
	put(&b, 65535, 2);
	assert_int_equal(pgo_parse(b.b, b.n, &msg, err, sizeof(err)), -1);
	/* a text value longer than the message */
	b.n = 0;
	b.b[b.n++] = 'I';
	put(&b, 1, 4);
	b.b[b.n++] = 'N';
	put(&b, 1, 2);
	b.b[b.n++] = 't';
	put(&b, 0xffffffff, 4);
	assert_int_equal(pgo_parse(b.b, b.n, &msg, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "cut short"));
	/* a Truncate naming more relations than it holds */
	b.n = 0;
	b.b[b.n++] = 'T';
	put(&b, 0x7fffffff, 4);
	b.b[b.n++] = 0;
	put(&b, 1, 4);
	assert_int_equal(pgo_parse(b.b, b.n, &msg, err, sizeof(err)), -1);
}

static void
test_message_and_others(void **state)
{
	struct buf	b = { .n = 0 };

	(void)state;
	b.b[b.n++] = 'M';
	b.b[b.n++] = 1;
	put(&b, 0x1955738, 8);
	put_str(&b, "outbox");
	put(&b, 5, 4);
	memcpy(b.b + b.n, "{\"a\":", 5);
	b.n += 5;
	assert_int_equal(pgo_parse(b.b, b.n, &msg, err, sizeof(err)), 0);
	assert_int_equal(msg.kind, PGO_MESSAGE);
	assert_int_equal(msg.u.message.transactional, 1);
	assert_true(msg.u.message.lsn == 0x1955738);
	assert_true(str_is(msg.u.message.prefix, "outbox"));
	assert_int_equal(msg.u.message.content.len, 5);
	all_prefixes_fail(&b);

	b.n = 0;
	b.b[b.n++] = 'O';
	put(&b, 5, 8);
	put_str(&b, "node_a");
	assert_int_equal(pgo_parse(b.b, b.n, &msg, err, sizeof(err)), 0);
	assert_true(str_is(msg.u.origin.name, "node_a"));
	all_prefixes_fail(&b);

	b.n = 0;
	b.b[b.n++] = 'Y';
	put(&b, 99999, 4);
	put_str(&b, "public");
	put_str(&b, "mood");
	assert_int_equal(pgo_parse(b.b, b.n, &msg, err, sizeof(err)), 0);
	assert_true(str_is(msg.u.type.name, "mood"));
	all_prefixes_fail(&b);

	/* Update with an old key, Delete, Truncate: decoded, ignored */
	b.n = 0;
	b.b[b.n++] = 'U';
	put(&b, 1, 4);
	b.b[b.n++] = 'K';
	put(&b, 1, 2);
	put_text(&b, "1");
	b.b[b.n++] = 'N';
	put(&b, 1, 2);
	b.b[b.n++] = 'u';
	assert_int_equal(pgo_parse(b.b, b.n, &msg, err, sizeof(err)), 0);
	assert_int_equal(msg.kind, PGO_UPDATE);
	all_prefixes_fail(&b);
	b.n = 0;
	b.b[b.n++] = 'D';
	put(&b, 1, 4);
	b.b[b.n++] = 'O';
	put(&b, 1, 2);
	b.b[b.n++] = 'n';
	assert_int_equal(pgo_parse(b.b, b.n, &msg, err, sizeof(err)), 0);
	all_prefixes_fail(&b);
	b.n = 0;
	b.b[b.n++] = 'T';
	put(&b, 2, 4);
	b.b[b.n++] = 1;
	put(&b, 10, 4);
	put(&b, 11, 4);
	assert_int_equal(pgo_parse(b.b, b.n, &msg, err, sizeof(err)), 0);
	all_prefixes_fail(&b);

	/* unknown and streamed types */
	b.b[0] = 'Z';
	assert_int_equal(pgo_parse(b.b, b.n, &msg, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "unknown pgoutput message type 0x5a"));
	b.b[0] = 'S';
	assert_int_equal(pgo_parse(b.b, b.n, &msg, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "streaming was not asked for"));
}

static void
test_copy(void **state)
{
	struct buf	b = { .n = 0 };
	struct pgo_copy	cp;
	uint8_t		st[34];
	size_t		n;

	(void)state;
	b.b[b.n++] = 'w';
	put(&b, 0x10, 8);
	put(&b, 0x20, 8);
	put(&b, 0x30, 8);
	b.b[b.n++] = 'B';
	assert_int_equal(pgo_copy_parse(b.b, b.n, &cp, err, sizeof(err)), 0);
	assert_int_equal(cp.kind, PGO_COPY_XLOGDATA);
	assert_true(cp.wal_start == 0x10 && cp.wal_end == 0x20);
	assert_int_equal(cp.len, 1);
	assert_ptr_equal(cp.data, b.b + 25);
	for (n = 0; n < 25; n++)
		assert_int_equal(pgo_copy_parse(b.b, n, &cp, err,
		    sizeof(err)), -1);

	b.n = 0;
	b.b[b.n++] = 'k';
	put(&b, 0xabc, 8);
	put(&b, 1, 8);
	b.b[b.n++] = 1;
	assert_int_equal(pgo_copy_parse(b.b, b.n, &cp, err, sizeof(err)), 0);
	assert_int_equal(cp.kind, PGO_COPY_KEEPALIVE);
	assert_true(cp.wal_end == 0xabc);
	assert_int_equal(cp.reply, 1);
	assert_int_equal(pgo_copy_parse(b.b, b.n + 1, &cp, err, sizeof(err)),
	    -1);
	assert_int_equal(pgo_copy_parse(b.b, b.n - 1, &cp, err, sizeof(err)),
	    -1);
	b.b[0] = 'q';
	assert_int_equal(pgo_copy_parse(b.b, b.n, &cp, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "unknown CopyData message type 0x71"));

	n = pgo_status_update(st, 0x0102030405060708ULL, 2, 3, 4, 1);
	assert_int_equal(n, 34);
	assert_int_equal(st[0], 'r');
	assert_int_equal(st[1], 1);
	assert_int_equal(st[8], 8);
	assert_int_equal(st[16], 2);
	assert_int_equal(st[24], 3);
	assert_int_equal(st[32], 4);
	assert_int_equal(st[33], 1);
	assert_int_equal(pgo_pg_time(946684800LL * 1000000), 0);
}

static void
test_lsn(void **state)
{
	char		buf[24];
	uint64_t	lsn;

	(void)state;
	assert_string_equal(pgo_lsn_text(0x1955738ULL, buf, sizeof(buf)),
	    "0/1955738");
	assert_string_equal(pgo_lsn_text(0xAB00000010ULL, buf, sizeof(buf)),
	    "AB/10");
	assert_int_equal(pgo_lsn_parse("AB/10", &lsn), 0);
	assert_true(lsn == 0xAB00000010ULL);
	assert_int_equal(pgo_lsn_parse("ffffffff/ffffffff", &lsn), 0);
	assert_true(lsn == UINT64_MAX);
	assert_int_equal(pgo_lsn_parse("", &lsn), -1);
	assert_int_equal(pgo_lsn_parse("1/", &lsn), -1);
	assert_int_equal(pgo_lsn_parse("/1", &lsn), -1);
	assert_int_equal(pgo_lsn_parse("1/2/3", &lsn), -1);
	assert_int_equal(pgo_lsn_parse("123456789/0", &lsn), -1);
	assert_int_equal(pgo_lsn_parse("g/0", &lsn), -1);
}

static void
test_event(void **state)
{
	struct wal_event	e;
	const char		*ok = "{\"destination\": \"events\", "
				    "\"event_type\": \"a.b\", \"ordering_key\": "
				    "\"k\", \"headers\": {\"T\": \"x\"}, "
				    "\"payload\": {\"price\": 1.50, \"s\": "
				    "\"\\u00e9\"}}";

	(void)state;
	assert_int_equal(wal_event_parse(ok, strlen(ok), &e, err,
	    sizeof(err)), 0);
	assert_string_equal(e.destination, "events");
	assert_string_equal(e.event_type, "a.b");
	assert_string_equal(e.key, "k");
	assert_string_equal(e.headers, "{\"T\": \"x\"}");
	/* the payload's text as written, not cJSON's */
	assert_string_equal(e.payload, "{\"price\": 1.50, \"s\": \"\\u00e9\"}");
	assert_int_equal(e.payload_len, strlen(e.payload));
	wal_event_clear(&e);

#define BAD(json, why) do {						\
	assert_int_equal(wal_event_parse(json, strlen(json), &e, err,	\
	    sizeof(err)), -1);						\
	assert_non_null(strstr(err, why));				\
} while (0)
	BAD("{\"event_type\": \"a\", \"ordering_key\": \"k\"}",
	    "\"payload\" is missing");
	BAD("{\"ordering_key\": \"k\", \"payload\": 1}",
	    "\"event_type\" is missing");
	BAD("{\"event_type\": \"\", \"ordering_key\": \"k\", \"payload\": 1}",
	    "must not be empty");
	BAD("{\"event_type\": \"a\", \"payload\": 1}",
	    "\"ordering_key\" is missing");
	BAD("{\"event_type\": 1, \"ordering_key\": \"k\", \"payload\": 1}",
	    "must be a string");
	BAD("{\"event_type\": \"a\", \"ordering_key\": \"k\", \"payload\": 1, "
	    "\"headers\": [1]}", "\"headers\" must be an object");
	BAD("{\"event_type\": \"a\", \"ordering_key\": \"k\", \"payload\": 1",
	    "not valid JSON");
	BAD("{\"event_type\": \"a\", \"event_type\": \"b\", \"ordering_key\": "
	    "\"k\", \"payload\": 1}", "not valid JSON");
	BAD("[1]", "not a JSON object");
	BAD("", "not valid JSON");
	/* null destination and headers: the default, none */
	assert_int_equal(wal_event_parse("{\"destination\": null, "
	    "\"headers\": null, \"event_type\": \"a\", \"ordering_key\": \"\", "
	    "\"payload\": null}", 94, &e, err, sizeof(err)), 0);
	assert_null(e.destination);
	assert_null(e.headers);
	assert_string_equal(e.payload, "null");
	wal_event_clear(&e);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_begin_commit),
		cmocka_unit_test(test_relation_insert),
		cmocka_unit_test(test_counts),
		cmocka_unit_test(test_message_and_others),
		cmocka_unit_test(test_copy),
		cmocka_unit_test(test_lsn),
		cmocka_unit_test(test_event),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
