/*
 * fuzz_pgoutput.c - libFuzzer target for what a replication connection
 * sends relay.mode = "wal" (src/pgoutput.c) and the table-less event
 * JSON (src/wal_event.c): the input is decoded as a CopyData message,
 * its XLogData payload (or, failing that, the input itself) as a
 * pgoutput message, and a Message's content (or the input) as an event.
 * Every string and value decoded must lie inside the input, every count
 * within its bound; an error must say why.  Built and run by `make fuzz`
 * (FUZZ_SECONDS); by hand, from the top of a configured tree:
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -I. -Isrc tests/fuzz/fuzz_pgoutput.c src/pgoutput.c src/wal_event.c src/json.c -lcjson -o fuzz_pgoutput && mkdir -p /tmp/fuzz-pgo && ./fuzz_pgoutput -max_total_time=300 /tmp/fuzz-pgo tests/fuzz/corpus/pgoutput
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "outboxd.h"
#include "wal.h"

#define CHECK(x)	do { if (!(x)) abort(); } while (0)

static const uint8_t	*lo, *hi;

static void
inside(struct pgo_str s)
{
	if (s.p == NULL) {
		CHECK(s.len == 0);
		return;
	}
	CHECK((const uint8_t *)s.p >= lo && (const uint8_t *)s.p + s.len <= hi);
}

static struct pgo_msg	m;

static void
check_msg(const uint8_t *p, size_t n)
{
	char	err[256];
	int	i;

	err[0] = '\0';
	if (pgo_parse(p, n, &m, err, sizeof(err)) == -1) {
		CHECK(err[0] != '\0');
		return;
	}
	switch (m.kind) {
	case PGO_RELATION:
		CHECK(m.u.rel.ncols >= 0 && m.u.rel.ncols <= PGO_MAX_COLS);
		inside(m.u.rel.nspname);
		inside(m.u.rel.relname);
		for (i = 0; i < m.u.rel.ncols; i++)
			inside(m.u.rel.cols[i].name);
		break;
	case PGO_INSERT:
	case PGO_UPDATE:
	case PGO_DELETE:
		CHECK(m.u.ins.ncols >= 0 && m.u.ins.ncols <= PGO_MAX_COLS);
		for (i = 0; i < m.u.ins.ncols; i++) {
			CHECK(strchr("nut", m.u.ins.vals[i].kind) != NULL);
			inside(m.u.ins.vals[i].val);
		}
		break;
	case PGO_ORIGIN:
		inside(m.u.origin.name);
		break;
	case PGO_TYPE:
		inside(m.u.type.nspname);
		inside(m.u.type.name);
		break;
	case PGO_MESSAGE:
		inside(m.u.message.prefix);
		inside(m.u.message.content);
		break;
	default:
		break;
	}
}

static void
check_event(const char *p, size_t n)
{
	struct wal_event	e;
	char			err[256];

	err[0] = '\0';
	if (wal_event_parse(p, n, &e, err, sizeof(err)) == -1) {
		CHECK(err[0] != '\0');
		return;
	}
	CHECK(e.event_type != NULL && e.event_type[0] != '\0');
	CHECK(e.key != NULL && e.payload != NULL);
	CHECK(strlen(e.payload) == e.payload_len && e.payload_len <= n);
	CHECK(e.headers == NULL || strlen(e.headers) == e.headers_len);
	wal_event_clear(&e);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pgo_copy	cp;
	char		err[256];
	uint8_t		*copy;

	/* A copy of exactly size bytes: ASan sees any read past it. */
	if ((copy = malloc(size > 0 ? size : 1)) == NULL)
		return 0;
	memcpy(copy, data, size);
	lo = copy;
	hi = copy + size;
	if (pgo_copy_parse(copy, size, &cp, err, sizeof(err)) == 0) {
		CHECK(cp.kind == PGO_COPY_XLOGDATA ||
		    cp.kind == PGO_COPY_KEEPALIVE);
		if (cp.kind == PGO_COPY_XLOGDATA) {
			CHECK(cp.data + cp.len == hi);
			check_msg(cp.data, cp.len);
		}
	} else
		CHECK(err[0] != '\0');
	check_msg(copy, size);
	if (pgo_parse(copy, size, &m, err, sizeof(err)) == 0 &&
	    m.kind == PGO_MESSAGE)
		check_event(m.u.message.content.p, m.u.message.content.len);
	else
		check_event((const char *)copy, size);
	free(copy);
	return 0;
}
