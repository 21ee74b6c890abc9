/*
 * metrics.h - what the metrics files share: the layout of the shared
 * region and the label names.  Private to metrics.c (the region and its
 * updates), metrics_text.c (the exposition), metrics_db.c (the outbox
 * figures read from PostgreSQL) and metrics_ready.c (/readyz); everyone
 * else uses the functions in metrics_api.h.
 */
#ifndef METRICS_H
#define METRICS_H

#include <stdint.h>

#include "outboxd.h"
#include "broker.h"
#include "metrics_api.h"

#define METRICS_MAX_BUCKETS	18
#define METRICS_ERROR_MAX	200
#define NELEM(a)		(sizeof(a) / sizeof((a)[0]))

#define METRICS_WAL_PIDS 64	/* streaming relays counted (one is normal) */
#define ADD(p, n)	__atomic_fetch_add((p), (n), __ATOMIC_RELAXED)
#define LOAD(p)		__atomic_load_n((p), __ATOMIC_RELAXED)
#define STORE(p, v)	__atomic_store_n((p), (v), __ATOMIC_RELAXED)

struct metrics_hist {
	uint64_t	bucket[METRICS_MAX_BUCKETS + 1];	/* last: +Inf */
	uint64_t	sum_us;
};

/*
 * One destination's figures.  Slots 0..n_dests-1 are the destinations
 * (name and sink) the master has seen in a configuration since it
 * started, in the order it first saw them; slot METRICS_MAX_DESTS is
 * METRICS_DEST_OTHER's.  The master writes a slot's name and sink before
 * it publishes n_dests (release) and never changes them, so a reader
 * that loaded n_dests (acquire) reads them without atomics.
 */
struct metrics_dest {
	char		name[METRICS_DEST_NAME_MAX];
	int64_t		sink;		/* enum conf_sink; -1: the other */
	int64_t		configured;	/* in the current configuration */
	uint64_t	published[METRICS_NOUTCOMES];
	uint64_t	replayed;	/* replayed messages sent */
	uint64_t	failures[SINK_NREASONS];
	struct metrics_hist publish_latency;
	struct metrics_hist sink_duration;
	/* Its sink, in monotonic ms (0 = never): the last chunk with a
	 * message sent, the first failed one since (0 = none), the reason
	 * of the last failure. */
	int64_t		sink_ok_ms;
	int64_t		sink_failing_ms;
	int64_t		sink_reason;
	/* From the last outbox query (metrics_db.c): its rows. */
	int64_t		db_pending;
	int64_t		db_failed;
	int64_t		db_oldest_ms;	/* age at the answer; -1 = none */
	int64_t		db_paused;	/* in outbox_paused_destinations */
} __attribute__((aligned(64)));

/* What the last outbox query said.  Each field is its own atomic; at_ms
 * is stored last (release) and read first (acquire). */
struct metrics_outbox {
	int64_t		at_ms;		/* monotonic ms of the answer; 0 never */
	int64_t		state;		/* enum metrics_db_state */
	int64_t		paused;
	int64_t		known;		/* an answer has filled the figures */
	char		error[METRICS_ERROR_MAX];
};

/* One worker's AWS credentials, for /readyz (metrics_creds_set). */
#define METRICS_CREDS_SLOTS	64
struct metrics_creds {
	int64_t		pid;		/* the worker that wrote it */
	int64_t		state;		/* 0 unused, 1 have them, 2 none */
	char		why[METRICS_ERROR_MAX];
};

/* The shared region.  Groups written by different roles sit on cache
 * lines of their own. */
struct metrics_shm {
	uint64_t	http_requests[METRICS_NROUTES][5]
			    __attribute__((aligned(64)));
	struct metrics_hist http_duration[METRICS_NROUTES]
			    __attribute__((aligned(64)));
	uint64_t	consumer[METRICS_NCONSUMER]
			    __attribute__((aligned(64)));
	uint64_t	restarts[4]
			    __attribute__((aligned(64)));
	uint64_t	reloads[2];
	uint64_t	retention_rows;		/* deleted by retention */
	uint64_t	retention_errors;	/* its deletes that failed */
	uint64_t	handoff_rows;		/* taken by relay 1 */
	uint64_t	handoff_failed;		/* not handed over */
	uint64_t	wal_bad_messages;	/* wal mode: skipped messages */
	int32_t		wal_streaming[METRICS_WAL_PIDS]; /* wal mode: pids
						   of the relays streaming */
	int64_t		wal_lag_bytes;		/* ... the slot's lag */
	int64_t		wal_oldest_ms;		/* ... oldest event not done */
	uint64_t	accept_paused[METRICS_NPAUSE];
	int64_t		workers_up;
	int64_t		workers_desired;
	int64_t		start_time;	/* s since the epoch */
	int64_t		n_dests __attribute__((aligned(64)));
	int64_t		default_dest;	/* slot of the default; -1 none */
	struct metrics_outbox outbox __attribute__((aligned(64)));
	struct metrics_dest dests[METRICS_MAX_DESTS + 1];
	struct metrics_creds creds[METRICS_CREDS_SLOTS]
			    __attribute__((aligned(64)));
};

extern struct metrics_shm	*metrics_shm;
extern long			 metrics_sink_unready_ms;	/* 0 = off */

/* metrics.c: the buckets' upper bounds (us) and their counts. */
extern const uint64_t	 metrics_http_bounds[], metrics_publish_bounds[],
			 metrics_sink_bounds[];
extern const size_t	 metrics_http_nbounds, metrics_publish_nbounds,
			 metrics_sink_nbounds;
extern const char *const metrics_role_names[4];	/* of restarts[] */
/* metrics_text.c: label values. */
extern const char *const metrics_sink_names[4];	/* by enum conf_sink */
extern const char *const metrics_reason_names[SINK_NREASONS];

void		 metrics_hist_observe(struct metrics_hist *,
		    const uint64_t *bounds, size_t nb, uint64_t us);

/* Slots in use (acquire: their names are written). */
int		 metrics_dest_count(void);
/* The configured slot of that name (NULL: the default), or
 * METRICS_DEST_OTHER. */
int		 metrics_dest_by_name(const char *name);
/* The label value of slot i, and its sink's ("none" for the other). */
const char	*metrics_dest_label(int i);
const char	*metrics_dest_sink(int i);
/* Relays streaming the slot now: those that said so and are still
 * alive (kill(pid, 0)). */
int64_t		 metrics_wal_streamers(const struct metrics_shm *);

#endif /* METRICS_H */
