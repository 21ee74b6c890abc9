/*
 * replay.h - replays of sent outbox rows: the requests (replay.c, shared
 * by the admin API and outboxctl) and the job that carries them out in
 * relay 1 (replay_job.c).  See outboxctl(8), REPLAY.
 */
#ifndef REPLAY_H
#define REPLAY_H

#include <stdint.h>

struct conf;
struct cJSON;
struct pg_conn;
struct event_base;

#define REPLAY_VALUE_MAX	1024	/* bytes of an event type or key */
#define REPLAY_LIST_LIMIT	20	/* replays listed by default */
#define REPLAY_LIST_MAX		100	/* ... at most */
#define REPLAY_RATE_DEFAULT	200	/* rows/s: relay.replay_rate */

/*
 * Which sent rows a replay publishes again: every part set (non-NULL)
 * must match, at least one is set.  Times are RFC 3339 text, half-open:
 * from <= t < to.  The strings are malloc'd.
 */
struct replay_filter {
	char	*event_type;
	char	*ordering_key;
	char	*destination;		/* NULL column: conf's default */
	char	*created_from, *created_to;	/* created_at */
	char	*sent_from, *sent_to;		/* sent_at */
};

/* Set the part named name ("event_type", "ordering_key", "destination",
 * "created_from", "created_to", "sent_from", "sent_to") to a copy of
 * value after checking it (destination: against conf).  Returns 0; -1
 * with the reason in err: no such part, a bad value, or memory; for the
 * destination, REPLAY_BAD_DESTINATION (not a name) or
 * REPLAY_UNKNOWN_DESTINATION (none of conf's). */
#define REPLAY_BAD_DESTINATION		(-2)
#define REPLAY_UNKNOWN_DESTINATION	(-3)
int		 replay_filter_set(struct replay_filter *, const struct conf *,
		    const char *name, const char *value, char *err,
		    size_t errlen);
/* Check the filter as a whole: at least one part, each range's from
 * before its to.  0, or -1 with the reason. */
int		 replay_filter_check(const struct replay_filter *, char *err,
		    size_t errlen);
void		 replay_filter_clear(struct replay_filter *);
/*
 * Parse a POST /outbox/replay body: a JSON object of the filter's parts
 * (strings) and "dry_run" (boolean, default false), nothing else, into
 * f (clear with replay_filter_clear) and *dry_run; checked as
 * replay_filter_set() and replay_filter_check() do.  0, or -1 (or
 * replay_filter_set()'s destination codes) with the reason in err.
 */
int		 replay_parse(const char *body, size_t len,
		    const struct conf *, struct replay_filter *f, int *dry_run,
		    char *err, size_t errlen);
/* 1 if s is an RFC 3339 date-time (section 5.6: "2026-01-02T03:04:05Z",
 * fraction and numeric offset allowed), with its instant in *secs
 * (seconds since the epoch, fraction included), else 0. */
int		 replay_time_parse(const char *s, double *secs);

/*
 * Count the sent rows f selects and, unless dry_run, record a replay of
 * them (outbox_replays) for relay 1's job, who asked in requested_by.
 * {"dry_run","selected","filter":{...},"replay": as replay_list's
 * objects, or null (a dry run, or nothing selected)}.  On a database
 * error -1 with the reason in err.  Blocking libpq connection; the count
 * reads every sent row the filter's indexes do not rule out (bounded by
 * the session's statement_timeout).
 */
int		 replay_request(struct pg_conn *, const struct conf *,
		    const struct replay_filter *f, int dry_run,
		    const char *requested_by, struct cJSON **out, char *err,
		    size_t errlen);
/*
 * The latest limit replays (1..REPLAY_LIST_MAX), newest first (id > 0:
 * that one alone): {"replays":[{"id","state" ("running", "sending",
 * "done", "cancelled"),"filter":{...},"requested_by","requested_at",
 * "total","done","pending","failed","finished_at","cancelled"}]}.
 * -1 with err on a database error.
 */
int		 replay_list(struct pg_conn *, int64_t id, int limit,
		    struct cJSON **out, char *err, size_t errlen);
/* End replay id now (rows already back to pending still go).  1 done,
 * with the replay as replay_list's object in *out; 0 no such replay; -2
 * it was over already (*out as for 1); -1 with err on a database
 * error. */
int		 replay_cancel(struct pg_conn *, int64_t id, struct cJSON **out,
		    char *err, size_t errlen);

/* ---- replay_job.c: relay 1 carries replays out ------------------------ */

struct replay_job;
/* Start the job of relay 1 (its own PostgreSQL connection): steps of
 * outbox_replay_step() at conf->relay.replay_rate.  NULL if out of
 * memory. */
struct replay_job *replay_job_new(struct event_base *, const struct conf *);
/* Stopping: no more steps (the one in flight is answered). */
void		 replay_job_stop(struct replay_job *);
void		 replay_job_free(struct replay_job *);

#endif /* REPLAY_H */
