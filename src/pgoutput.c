/*
 * pgoutput.c - decoding the streaming replication protocol's CopyData
 * messages and the pgoutput plugin's messages (protocol version 1),
 * bounds-checked; see pgoutput.h.
 *
 * PostgreSQL 15 documentation, 55.4 "Streaming Replication Protocol" and
 * 55.9 "Logical Replication Message Formats".  Integers are big-endian;
 * a String is NUL-terminated.
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "pgoutput.h"

/* Seconds from 1970-01-01 to 2000-01-01, PostgreSQL's epoch. */
#define PGO_EPOCH_DIFF_S	946684800LL

struct pgo_rd {
	const uint8_t	*p;
	size_t		 left;
	int		 bad;
};

static uint64_t
pgo_be(struct pgo_rd *r, size_t n)
{
	uint64_t	v = 0;
	size_t		i;

	if (r->bad || r->left < n) {
		r->bad = 1;
		return 0;
	}
	for (i = 0; i < n; i++)
		v = v << 8 | r->p[i];
	r->p += n;
	r->left -= n;
	return v;
}

#define pgo_u8(r)	((uint8_t)pgo_be((r), 1))
#define pgo_u16(r)	((uint16_t)pgo_be((r), 2))
#define pgo_u32(r)	((uint32_t)pgo_be((r), 4))
#define pgo_u64(r)	pgo_be((r), 8)

/* A NUL-terminated String: its bytes up to the NUL. */
static struct pgo_str
pgo_cstr(struct pgo_rd *r)
{
	struct pgo_str	 s = { NULL, 0 };
	const uint8_t	*nul;

	if (r->bad || (nul = memchr(r->p, '\0', r->left)) == NULL) {
		r->bad = 1;
		return s;
	}
	s.p = (const char *)r->p;
	s.len = (size_t)(nul - r->p);
	r->p = nul + 1;
	r->left -= s.len + 1;
	return s;
}

static struct pgo_str
pgo_bytes(struct pgo_rd *r, size_t n)
{
	struct pgo_str	s = { NULL, 0 };

	if (r->bad || r->left < n) {
		r->bad = 1;
		return s;
	}
	s.p = (const char *)r->p;
	s.len = n;
	r->p += n;
	r->left -= n;
	return s;
}

int64_t
pgo_pg_time(int64_t unix_us)
{
	return unix_us - PGO_EPOCH_DIFF_S * 1000000;
}

int
pgo_copy_parse(const uint8_t *buf, size_t len, struct pgo_copy *out,
    char *err, size_t errlen)
{
	struct pgo_rd	r = { buf, len, 0 };

	memset(out, 0, sizeof(*out));
	switch (pgo_u8(&r)) {
	case 'w':
		out->kind = PGO_COPY_XLOGDATA;
		out->wal_start = pgo_u64(&r);
		out->wal_end = pgo_u64(&r);
		out->send_time = (int64_t)pgo_u64(&r);
		out->data = r.p;
		out->len = r.left;
		break;
	case 'k':
		out->kind = PGO_COPY_KEEPALIVE;
		out->wal_end = pgo_u64(&r);
		out->send_time = (int64_t)pgo_u64(&r);
		out->reply = pgo_u8(&r) != 0;
		if (!r.bad && r.left != 0) {
			snprintf(err, errlen, "keepalive with %zu byte(s) "
			    "left over", r.left);
			return -1;
		}
		break;
	default:
		if (r.bad)
			snprintf(err, errlen, "empty CopyData message");
		else
			snprintf(err, errlen, "unknown CopyData message type "
			    "0x%02x (expected XLogData 'w' or keepalive 'k')",
			    buf[0]);
		return -1;
	}
	if (r.bad) {
		snprintf(err, errlen, "%s cut short (%zu bytes)",
		    out->kind == PGO_COPY_XLOGDATA ? "XLogData" : "keepalive",
		    len);
		return -1;
	}
	return 0;
}

static void
pgo_put64(uint8_t *p, uint64_t v)
{
	int	i;

	for (i = 7; i >= 0; i--, v >>= 8)
		p[i] = (uint8_t)v;
}

size_t
pgo_status_update(uint8_t out[34], uint64_t written, uint64_t flushed,
    uint64_t applied, int64_t now, int reply)
{
	out[0] = 'r';
	pgo_put64(out + 1, written);
	pgo_put64(out + 9, flushed);
	pgo_put64(out + 17, applied);
	pgo_put64(out + 25, (uint64_t)now);
	out[33] = reply ? 1 : 0;
	return 34;
}

/* TupleData: Int16 columns, then per column 'n', 'u' or 't' Int32 Byte[n]
 * ('b', binary, only with the binary option, never asked for). */
static int
pgo_tuple(struct pgo_rd *r, struct pgo_value *vals, int *ncols, char *err,
    size_t errlen)
{
	int		n, i;
	uint32_t	l;

	n = pgo_u16(r);
	if (r->bad)
		return 0;		/* the caller says "cut short" */
	if (n > PGO_MAX_COLS) {
		snprintf(err, errlen, "tuple of %d columns (at most %d)", n,
		    PGO_MAX_COLS);
		return -1;
	}
	for (i = 0; i < n && !r->bad; i++) {
		vals[i].kind = (char)pgo_u8(r);
		vals[i].val.p = NULL;
		vals[i].val.len = 0;
		switch (vals[i].kind) {
		case 'n':
		case 'u':
			break;
		case 't':
			l = pgo_u32(r);
			vals[i].val = pgo_bytes(r, l);
			break;
		default:
			if (r->bad)
				break;
			snprintf(err, errlen, "column %d of a tuple: unknown "
			    "kind 0x%02x (expected 'n', 'u' or 't')", i + 1,
			    (unsigned char)vals[i].kind);
			return -1;
		}
	}
	*ncols = n;
	return 0;
}

/* Update or Delete: the relation, then optional 'K'/'O' old tuple and,
 * for Update, 'N' and the new tuple.  Decoded only to check it. */
static int
pgo_update_delete(struct pgo_rd *r, struct pgo_msg *m, int update,
    char *err, size_t errlen)
{
	struct pgo_value	*scratch = m->u.ins.vals;
	int			*n = &m->u.ins.ncols;
	uint8_t			 c;

	m->u.ins.oid = pgo_u32(r);
	*n = 0;
	c = pgo_u8(r);
	if (r->bad)
		return 0;
	if (c == 'K' || c == 'O') {
		if (pgo_tuple(r, scratch, n, err, errlen) == -1)
			return -1;
		if (!update)
			return 0;
		c = pgo_u8(r);
	} else if (!update) {
		snprintf(err, errlen, "Delete: expected 'K' or 'O', not "
		    "0x%02x", c);
		return -1;
	}
	if (r->bad)
		return 0;
	if (c != 'N') {
		snprintf(err, errlen, "Update: expected 'N', not 0x%02x", c);
		return -1;
	}
	return pgo_tuple(r, scratch, n, err, errlen);
}

static const char *
pgo_kind_name(int kind)
{
	switch (kind) {
	case PGO_BEGIN:		return "Begin";
	case PGO_COMMIT:	return "Commit";
	case PGO_ORIGIN:	return "Origin";
	case PGO_RELATION:	return "Relation";
	case PGO_TYPE:		return "Type";
	case PGO_INSERT:	return "Insert";
	case PGO_UPDATE:	return "Update";
	case PGO_DELETE:	return "Delete";
	case PGO_TRUNCATE:	return "Truncate";
	case PGO_MESSAGE:	return "Message";
	}
	return "?";
}

int
pgo_parse(const uint8_t *buf, size_t len, struct pgo_msg *m, char *err,
    size_t errlen)
{
	struct pgo_rd	r = { buf, len, 0 };
	int		kind, i, n;
	uint32_t	l;

	if (len == 0) {
		snprintf(err, errlen, "empty pgoutput message");
		return -1;
	}
	kind = pgo_u8(&r);
	m->kind = (enum pgo_kind)kind;
	switch (kind) {
	case PGO_BEGIN:
		m->u.begin.final_lsn = pgo_u64(&r);
		m->u.begin.commit_time = (int64_t)pgo_u64(&r);
		m->u.begin.xid = pgo_u32(&r);
		break;
	case PGO_COMMIT:
		(void)pgo_u8(&r);	/* flags, unused (0) */
		m->u.commit.commit_lsn = pgo_u64(&r);
		m->u.commit.end_lsn = pgo_u64(&r);
		m->u.commit.commit_time = (int64_t)pgo_u64(&r);
		break;
	case PGO_ORIGIN:
		m->u.origin.lsn = pgo_u64(&r);
		m->u.origin.name = pgo_cstr(&r);
		break;
	case PGO_RELATION:
		m->u.rel.oid = pgo_u32(&r);
		m->u.rel.nspname = pgo_cstr(&r);
		m->u.rel.relname = pgo_cstr(&r);
		m->u.rel.replident = pgo_u8(&r);
		n = pgo_u16(&r);
		if (!r.bad && n > PGO_MAX_COLS) {
			snprintf(err, errlen, "Relation of %d columns (at most "
			    "%d)", n, PGO_MAX_COLS);
			return -1;
		}
		for (i = 0; i < n && !r.bad; i++) {
			m->u.rel.cols[i].key = pgo_u8(&r) & 1;
			m->u.rel.cols[i].name = pgo_cstr(&r);
			m->u.rel.cols[i].type_oid = pgo_u32(&r);
			m->u.rel.cols[i].typmod = (int32_t)pgo_u32(&r);
		}
		m->u.rel.ncols = r.bad ? 0 : n;
		break;
	case PGO_TYPE:
		m->u.type.oid = pgo_u32(&r);
		m->u.type.nspname = pgo_cstr(&r);
		m->u.type.name = pgo_cstr(&r);
		break;
	case PGO_INSERT:
		m->u.ins.oid = pgo_u32(&r);
		if (!r.bad && (i = pgo_u8(&r)) != 'N' && !r.bad) {
			snprintf(err, errlen, "Insert: expected 'N', not "
			    "0x%02x", i);
			return -1;
		}
		m->u.ins.ncols = 0;
		if (!r.bad && pgo_tuple(&r, m->u.ins.vals, &m->u.ins.ncols,
		    err, errlen) == -1)
			return -1;
		break;
	case PGO_UPDATE:
	case PGO_DELETE:
		if (pgo_update_delete(&r, m, kind == PGO_UPDATE, err,
		    errlen) == -1)
			return -1;
		break;
	case PGO_TRUNCATE:
		n = (int)pgo_u32(&r);
		(void)pgo_u8(&r);	/* options */
		m->u.ins.oid = 0;
		m->u.ins.ncols = 0;
		if (!r.bad && (n < 0 || (size_t)n > r.left / 4)) {
			snprintf(err, errlen, "Truncate of %d relations in %zu "
			    "bytes", n, r.left);
			return -1;
		}
		for (i = 0; i < n && !r.bad; i++)
			(void)pgo_u32(&r);
		break;
	case PGO_MESSAGE:
		m->u.message.transactional = pgo_u8(&r) & 1;
		m->u.message.lsn = pgo_u64(&r);
		m->u.message.prefix = pgo_cstr(&r);
		l = pgo_u32(&r);
		m->u.message.content = pgo_bytes(&r, l);
		break;
	case 'S': case 'E': case 'c': case 'A':
		snprintf(err, errlen, "streamed-transaction message '%c' "
		    "(streaming was not asked for)", kind);
		return -1;
	default:
		snprintf(err, errlen, "unknown pgoutput message type 0x%02x",
		    kind);
		return -1;
	}
	if (r.bad) {
		snprintf(err, errlen, "%s message cut short (%zu bytes)",
		    pgo_kind_name(kind), len);
		return -1;
	}
	if (r.left != 0) {
		snprintf(err, errlen, "%s message with %zu byte(s) left over",
		    pgo_kind_name(kind), r.left);
		return -1;
	}
	return 0;
}

char *
pgo_lsn_text(uint64_t lsn, char *buf, size_t len)
{
	snprintf(buf, len, "%" PRIX32 "/%" PRIX32, (uint32_t)(lsn >> 32),
	    (uint32_t)lsn);
	return buf;
}

int
pgo_lsn_parse(const char *text, uint64_t *lsn)
{
	uint64_t	hi = 0, lo = 0;
	const char	*p = text;
	int		nd;

	for (nd = 0; *p != '/' && *p != '\0'; p++, nd++) {
		if (nd == 8 || !((*p >= '0' && *p <= '9') ||
		    (*p >= 'A' && *p <= 'F') || (*p >= 'a' && *p <= 'f')))
			return -1;
		hi = hi << 4 | (uint64_t)(*p <= '9' ? *p - '0' :
		    (*p | 0x20) - 'a' + 10);
	}
	if (nd == 0 || *p++ != '/')
		return -1;
	for (nd = 0; *p != '\0'; p++, nd++) {
		if (nd == 8 || !((*p >= '0' && *p <= '9') ||
		    (*p >= 'A' && *p <= 'F') || (*p >= 'a' && *p <= 'f')))
			return -1;
		lo = lo << 4 | (uint64_t)(*p <= '9' ? *p - '0' :
		    (*p | 0x20) - 'a' + 10);
	}
	if (nd == 0)
		return -1;
	*lsn = hi << 32 | lo;
	return 0;
}
