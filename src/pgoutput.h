/*
 * pgoutput.h - decoding what a logical replication connection sends
 * (no I/O, no allocation): the CopyData messages of the streaming
 * replication protocol (XLogData, primary keepalive) and, inside
 * XLogData, the messages of PostgreSQL's built-in pgoutput plugin,
 * protocol version 1.
 *
 * Sources: PostgreSQL 15 documentation, 55.4 "Streaming Replication
 * Protocol" (XLogData, Primary keepalive message, Standby status update)
 * and 55.9 "Logical Replication Message Formats".
 *
 * Everything decoded points into the caller's buffer, which must outlive
 * it.  Every length is checked against the buffer: a garbled or hostile
 * message is an error with its reason, never a read past the end.
 */
#ifndef OUTBOXD_PGOUTPUT_H
#define OUTBOXD_PGOUTPUT_H

#include <stddef.h>
#include <stdint.h>

/* Columns a Relation or a tuple may have here (PostgreSQL allows 1600;
 * the outbox table has 17). */
#define PGO_MAX_COLS	128

/* ---- CopyData of START_REPLICATION ---------------------------------- */

enum pgo_copy_kind { PGO_COPY_XLOGDATA = 'w', PGO_COPY_KEEPALIVE = 'k' };

struct pgo_copy {
	enum pgo_copy_kind kind;
	uint64_t	 wal_start;	/* XLogData: LSN of the data */
	uint64_t	 wal_end;	/* the server's end of WAL */
	int64_t		 send_time;	/* us since 2000-01-01 (server) */
	int		 reply;		/* keepalive: answer at once */
	const uint8_t	*data;		/* XLogData: one pgoutput message */
	size_t		 len;
};

/* Decode one CopyData message (buf, len bytes) into *out.  0, or -1
 * with the reason in err (errlen bytes). */
int		 pgo_copy_parse(const uint8_t *buf, size_t len,
		    struct pgo_copy *out, char *err, size_t errlen);

/* The 34-byte Standby status update ('r') with the positions written,
 * flushed and applied (each the last byte + 1), now (us since
 * 2000-01-01) and whether the server should answer at once, into
 * out. Returns its length (34). */
size_t		 pgo_status_update(uint8_t out[34], uint64_t written,
		    uint64_t flushed, uint64_t applied, int64_t now,
		    int reply);

/* us since 2000-01-01 (PostgreSQL's epoch) of a Unix time in us. */
int64_t		 pgo_pg_time(int64_t unix_us);

/* ---- pgoutput messages (protocol version 1) ------------------------- */

enum pgo_kind {
	PGO_BEGIN = 'B',
	PGO_COMMIT = 'C',
	PGO_ORIGIN = 'O',
	PGO_RELATION = 'R',
	PGO_TYPE = 'Y',
	PGO_INSERT = 'I',
	PGO_UPDATE = 'U',
	PGO_DELETE = 'D',
	PGO_TRUNCATE = 'T',
	PGO_MESSAGE = 'M'
};

/* A string or a column's value: bytes, not NUL-terminated. */
struct pgo_str {
	const char	*p;
	size_t		 len;
};

struct pgo_column {
	int		 key;		/* part of the replica identity */
	struct pgo_str	 name;
	uint32_t	 type_oid;
	int32_t		 typmod;
};

/* A value of a tuple: 'n' null, 'u' unchanged TOASTed (not sent), 't'
 * text (val). */
struct pgo_value {
	char		 kind;
	struct pgo_str	 val;
};

struct pgo_msg {
	enum pgo_kind	 kind;
	union {
		struct {			/* Begin */
			uint64_t	 final_lsn;
			int64_t		 commit_time;	/* us since 2000 */
			uint32_t	 xid;
		} begin;
		struct {			/* Commit */
			uint64_t	 commit_lsn;
			uint64_t	 end_lsn;
			int64_t		 commit_time;
		} commit;
		struct {			/* Origin */
			uint64_t	 lsn;
			struct pgo_str	 name;
		} origin;
		struct {			/* Relation */
			uint32_t	 oid;
			struct pgo_str	 nspname;
			struct pgo_str	 relname;
			int		 replident;
			int		 ncols;
			struct pgo_column cols[PGO_MAX_COLS];
		} rel;
		struct {			/* Type */
			uint32_t	 oid;
			struct pgo_str	 nspname;
			struct pgo_str	 name;
		} type;
		struct {			/* Insert: the new tuple;
						   Update, Delete: the last
						   tuple (checked, ignored);
						   Truncate: oid 0 */
			uint32_t	 oid;
			int		 ncols;
			struct pgo_value vals[PGO_MAX_COLS];
		} ins;
		struct {			/* logical decoding message */
			int		 transactional;
			uint64_t	 lsn;
			struct pgo_str	 prefix;
			struct pgo_str	 content;
		} message;
	} u;
};

/*
 * Decode one pgoutput message (buf, len bytes: the data of one XLogData)
 * into *out (large: PGO_MAX_COLS columns; keep one per stream).  0, or -1
 * with the reason in err (errlen bytes): a message cut short or with
 * bytes left over, a count out of range, an unknown message type, or
 * one of the streamed-transaction messages (never asked for: protocol
 * version 1 without streaming).
 */
int		 pgo_parse(const uint8_t *buf, size_t len, struct pgo_msg *out,
		    char *err, size_t errlen);

/* "X/Y", PostgreSQL's way of writing an LSN, into buf (at least 18
 * bytes); returns buf. */
char		*pgo_lsn_text(uint64_t lsn, char *buf, size_t len);
/* Parse "X/Y" into *lsn: 0, or -1. */
int		 pgo_lsn_parse(const char *text, uint64_t *lsn);

#endif /* OUTBOXD_PGOUTPUT_H */
