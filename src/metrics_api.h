/*
 * metrics_api.h - what the rest of outboxd calls of the metrics files
 * (metrics.c, metrics_db.c, metrics_text.c, metrics_ready.c): the
 * counters every process updates in the shared region, the outbox
 * figures read from PostgreSQL, the Prometheus exposition and /readyz.
 * Grouped by the file that defines them; outboxd.h's conventions apply.
 * What the metrics files share among themselves (the region's layout)
 * is in metrics.h.
 */
#ifndef METRICS_API_H
#define METRICS_API_H

#include <stddef.h>
#include <stdint.h>

struct conf;
struct conf_destination;
struct pg_result;

/* ---- metrics.c: shared counters and their destination slots ---------- */

/* Routes of outboxd_http_requests_total; names in metrics_text.c. */
enum metrics_route {
	METRICS_ROUTE_ORDERS,		/* POST /orders (any method) */
	METRICS_ROUTE_ORDER,		/* /orders/{id} */
	METRICS_ROUTE_HEALTHZ,
	METRICS_ROUTE_READYZ,
	METRICS_ROUTE_METRICS,
	METRICS_ROUTE_OUTBOX,		/* admin: GET /outbox */
	METRICS_ROUTE_FAILED,		/* admin: GET /outbox/failed */
	METRICS_ROUTE_REDRIVE,		/* admin: POST /outbox/redrive */
	METRICS_ROUTE_PAUSE,		/* admin: POST /relay/pause */
	METRICS_ROUTE_RESUME,		/* admin: POST /relay/resume */
	METRICS_ROUTE_DESTINATIONS,	/* admin: GET /destinations */
	METRICS_ROUTE_DESTINATION,	/* admin: GET /destinations/{name} */
	METRICS_ROUTE_DEST_PAUSE,	/* admin: POST .../{name}/pause */
	METRICS_ROUTE_DEST_RESUME,	/* admin: POST .../{name}/resume */
	METRICS_ROUTE_DEST_REDRIVE,	/* admin: POST .../{name}/redrive */
	METRICS_ROUTE_REPLAY,		/* admin: POST /outbox/replay */
	METRICS_ROUTE_REPLAYS,		/* admin: GET /outbox/replays[/{id}] */
	METRICS_ROUTE_REPLAY_CANCEL,	/* admin: POST .../{id}/cancel */
	METRICS_ROUTE_OTHER,		/* anything else (404) */
	METRICS_NROUTES
};
enum metrics_outcome { METRICS_PUBLISH_SENT, METRICS_PUBLISH_RETRY,
	METRICS_PUBLISH_FAILED, METRICS_NOUTCOMES };
/* skipped: not an event type of consumer.event_types, deleted unwritten. */
enum metrics_consumer_outcome { METRICS_CONSUMER_PROCESSED,
	METRICS_CONSUMER_DUPLICATE, METRICS_CONSUMER_ERROR,
	METRICS_CONSUMER_SKIPPED, METRICS_NCONSUMER };
enum metrics_db_state { METRICS_DB_OK, METRICS_DB_ERROR,
	METRICS_DB_NO_SCHEMA };

#define METRICS_CACHE_MS	1000	/* outbox figures are re-read after */
#define METRICS_CONTENT_TYPE	"text/plain; version=0.0.4; charset=utf-8"

/*
 * Destinations in the metrics: the first METRICS_MAX_DESTS (name, sink)
 * pairs the master finds in its configurations since it started have
 * series of their own (label destination="NAME"); everything else --
 * rows naming a destination outbox.conf does not have, destinations
 * beyond that many -- is counted under the one label value
 * METRICS_DEST_OTHER_LABEL, slot METRICS_DEST_OTHER, so that a typo in
 * rows cannot make the series count explode.
 */
#define METRICS_MAX_DESTS	64
#define METRICS_DEST_NAME_MAX	128	/* bytes of a name, NUL included */
#define METRICS_DEST_OTHER	METRICS_MAX_DESTS
#define METRICS_DEST_OTHER_LABEL "(other)"

/* Map the shared region; the master, before the first fork.  -1 (errno)
 * if it cannot: then nothing is counted. */
int		 metrics_init(void);
/* The master, before it forks a generation of workers: give each
 * destination of conf a slot (once per name and sink, never freed, so
 * that a counter never goes back), and mark the current ones and the
 * default for the outbox figures and /readyz. */
void		 metrics_destinations(const struct conf *);
/* The slot of destination d (NULL: rows naming no destination of ours)
 * for the updates below; METRICS_DEST_OTHER if it has none.  A linear
 * look-up: take it once per batch. */
int		 metrics_dest(const struct conf_destination *d);
/* Updates: relaxed atomic adds, no lock, no system call; no-ops before
 * metrics_init().  status is the HTTP status answered, us microseconds;
 * dest a slot from metrics_dest(). */
void		 metrics_http_request(int route, int status, uint64_t us);
void		 metrics_published(int dest, int outcome, int n);
/* n replayed messages (outbox.replay set) sent: counted here, not as
 * published sent, and without a publish latency. */
void		 metrics_replayed(int dest, int n);
/* A failed publish attempt, by its enum sink_reason. */
void		 metrics_publish_failure(int dest, int reason);
/* From a row's created_at to its acknowledgement. */
void		 metrics_publish_latency(int dest, uint64_t us);
/* A batch's time at its destination's sink, us microseconds: from the
 * publish call to the answer that settled its last message, failed
 * answers included, so that a slow or failing broker shows. */
void		 metrics_sink_duration(int dest, uint64_t us);
void		 metrics_consumer(int outcome);
/* role: "http", "relay", "consumer", "admin". */
void		 metrics_worker_restart(const char *role);
void		 metrics_reload(int ok);
/* Retention: rows one delete removed (failed: the delete failed, n 0). */
void		 metrics_retention(int failed, long n);
/* Rows relay 1 took from the handoff socket; rows an HTTP worker could
 * not hand over. */
void		 metrics_handoff(int taken, int failed);
/* The master: running workers of the current generation, and wanted. */
void		 metrics_set_workers(int up, int desired);
/* relay.mode = "wal": a logical decoding message with our prefix that
 * could not be published (bad JSON, not transactional); a relay started
 * (up 1) or stopped streaming the slot. */
void		 metrics_wal_bad_message(void);
void		 metrics_wal_streaming(int up);
/* The streaming relay's view of its slot: bytes of WAL between the
 * server's end and the confirmed position, the age in ms of the oldest
 * event not done (0: none). */
void		 metrics_wal_lag(int64_t bytes, int64_t oldest_ms);
/* An HTTP worker stopped accepting (enum metrics_accept_pause). */
enum metrics_accept_pause { METRICS_PAUSE_DESCRIPTORS,
	METRICS_PAUSE_MAX_CONNECTIONS, METRICS_NPAUSE };
void		 metrics_accept_paused(int why);
/* A relay's chunk for destination dest: some message was sent (ok 1), or
 * none was and the sink itself failed (ok 0, reason the enum sink_reason
 * of a failure that is the sink's, not the message's).  /readyz reads
 * the times. */
void		 metrics_sink_outcome(int dest, int ok, int reason);
/* This process's /readyz counts a destination as failing once its sink
 * has failed every publish for ms (relay.unready_after; 0 = never). */
void		 metrics_set_sink_unready(long ms);

/* metrics_db.c.  The statement whose answer metrics_outbox_store()
 * takes: pending and failed rows and the age of the oldest pending one
 * (ms) by destination, the paused destinations, the pause switch. */
extern const char metrics_outbox_sql[];
/* 1 if the stored outbox figures are younger than METRICS_CACHE_MS. */
int		 metrics_outbox_fresh(void);
/* Store the figures, or the error (schema missing or other), of one
 * execution of metrics_outbox_sql for every process: a row's NULL
 * destination counts as the default's, one outbox.conf does not have as
 * METRICS_DEST_OTHER_LABEL. */
void		 metrics_outbox_store(const struct pg_result *);
/* The query could not even be sent (no connection): store why. */
void		 metrics_outbox_down(const char *why);

/* metrics_text.c.  The exposition (caller frees) and its length; NULL if
 * no memory. */
char		*metrics_render(size_t *len);
/* Escape a label value (\, \", \n) into dst; returns its length. */
size_t		 metrics_label_escape(char *dst, size_t size, const char *v);

/* metrics_ready.c.  The /readyz body into buf (size bytes) and its
 * length: ready when the stored outbox query answered, the schema is
 * there, every worker runs and the default destination's sink has not
 * failed every publish for metrics_set_sink_unready()'s time; "sink"
 * says the default's state, "destinations" each current destination's
 * ("ok", "failing" or "paused": a failing one other than the default is
 * named in "warning" but does not make it 503).  db_down non-NULL: this
 * worker has no database connection (the reason).  Returns the HTTP
 * status (200 or 503), or -1 if buf is too small. */
#define METRICS_READY_MAX	32768	/* enough for METRICS_MAX_DESTS */
int		 metrics_ready(char *buf, size_t size, const char *db_down,
		    size_t *len);

#endif /* METRICS_API_H */
