/*
 * http.h - shared by the HTTP worker's files (http.c, http_orders.c,
 * http_pool.c, http_wake.c): the worker, its jobs, and the prototypes
 * each file offers the others.  Its connection guard, http_guard.c, is
 * shared with the admin worker through http_guard.h.
 */
#ifndef HTTP_H
#define HTTP_H

#include <sys/queue.h>

#include <stddef.h>
#include <stdint.h>

#include <libpq-fe.h>

#include "outboxd.h"
#include "http_guard.h"

struct event;
struct event_base;
struct evhttp;
struct evhttp_request;
struct http_pool;

#define HTTP_BATCH_MAX		32	/* orders written by one statement */
#define IDEMPOTENCY_KEY_MAX	255	/* characters of an Idempotency-Key */
#define IDEMPOTENCY_FP_LEN	66	/* \x and 64 hex digits */

/* A statement every connection prepares (name) or runs once (name NULL)
 * before it takes jobs. */
struct http_pool_stmt {
	const char	*name;
	const char	*sql;
	int		 nparams;
	const Oid	*types;
};

enum http_job_kind { HTTP_JOB_INSERT, HTTP_JOB_GET, HTTP_JOB_NOTIFY,
	HTTP_JOB_STATS, HTTP_JOB_GIVE_BACK };

/*
 * One statement for the pool (http_pool.c) to run, for a request or for
 * the worker itself (req NULL: our NOTIFY and GIVE_BACK statements).
 * Made by http_job_new(); the pool hands every job it took back exactly
 * once, through http_pool_ops.done.
 */
struct http_job {
	/* The pool's. */
	TAILQ_ENTRY(http_job)	 entry;
	struct http_job		*next;		/* INSERT: the batch's others */
	int			 nbatch;	/* orders in the batch it heads */
	int			 solo;		/* INSERT: never in a batch */
	PGresult		*res;		/* its result, kept until the
						   Sync says committed */
	/* The worker's. */
	enum http_job_kind	 kind;
	struct evhttp_request	*req;
	struct order_input	 in;
	char			 amount[24];
	char			 id[ORDER_UUID_LEN + 1];
	int			 route;		/* HTTP_JOB_STATS: which */
	int			 notify;	/* INSERT: its transaction also
						   sends the NOTIFY */
	int			 handoff;	/* INSERT: written claimed, for
						   relay 1 */
	int64_t			 handoff_claim;	/* ... its claim token */
	int64_t			 handoff_us;	/* ... sent at (monotonic) */
	int64_t			 row_id;	/* GIVE_BACK: the outbox row */
	int			 given;		/* GIVE_BACK: done */
	/* INSERT with an Idempotency-Key; set by http_orders.c, which alone
	 * makes INSERT jobs (http_job_new() leaves them).  Such a job is
	 * solo. */
	int			 keyed;
	int			 key_again;	/* its statement is running again */
	char			 key[IDEMPOTENCY_KEY_MAX + 1];
	char			 fingerprint[IDEMPOTENCY_FP_LEN + 1];
};
TAILQ_HEAD(http_jobq, http_job);

/* One HTTP worker; one per process. */
struct http_worker {
	struct conf		*conf;
	int			 index;
	struct event_base	*base;
	struct evhttp		*http;
	struct http_pool	*pool;
	struct http_jobq	 spare;		/* job records for reuse */
	int			 nspare;
	int			 inflight;	/* requests not yet answered */
	int			 unflushed;	/* answers not yet written */
	int			 stopping;
	struct event		*drain_ev;	/* end of HTTP_DRAIN_MS */
	int			 drained;	/* HTTP_DRAIN_MS are over */
	size_t			 max_body;
	/* http_wake.c's */
	int			 giving_back;	/* GIVE_BACK jobs not done yet */
	int			 notify_self;	/* no trigger notifies */
	int			 notify_dirty;	/* orders since the last */
	struct event		*notify_ev;	/* the NOTIFY window */
	struct http_guard	 guard;		/* http_guard.c's */
};

/* ---- http.c: the worker, its routes, answers and jobs ----------------- */

/* Send the answer to a request a handler took (inflight counted it):
 * code, and body (len bytes, copied; NULL = none) as application/json
 * unless a Content-Type is set already. */
void		 http_reply(struct http_worker *, struct evhttp_request *,
		    int code, const char *body, size_t len);
/* {"error": ecode, "message": message} with status code. */
void		 http_reply_error(struct http_worker *, struct evhttp_request *,
		    int code, const char *ecode, const char *message);
/* 503 database_unavailable. */
void		 http_reply_unavailable(struct http_worker *,
		    struct evhttp_request *);
/* A job record (kind INSERT, no batch, nothing else set but the pool's
 * fields); NULL when out of memory.  Give it back with http_job_free(). */
struct http_job	*http_job_new(struct http_worker *);
/* Hand job (with its request) to the pool; if the pool cannot take it,
 * answer 503 and give the job back. */
void		 http_job_submit(struct http_worker *, struct http_job *);
/* Give back job and the rest of its batch (kept for reuse, or freed). */
void		 http_job_free(struct http_worker *, struct http_job *);
/* Answer 503 to every request of job's batch not answered yet. */
void		 http_job_fail(struct http_worker *, struct http_job *);
/* A stopping worker leaves its loop once nothing is left to do: call
 * whenever something it waits for ends. */
void		 http_exit_if_done(struct http_worker *);

/* ---- http_orders.c: POST /orders and GET /orders/{id} ----------------- */

/* Prepared statements of the orders, for the pool's session setup. */
extern const struct http_pool_stmt http_orders_stmts[];
extern const int http_orders_nstmts;
/* Columns of the claimed insert's row after the order's four, which
 * http_wake.c hands to relay 1. */
enum { HTTP_COL_ROW_ID = 4, HTTP_COL_CLAIM, HTTP_COL_TYPE, HTTP_COL_KEY,
	HTTP_COL_PAYLOAD, HTTP_COL_CREATED_MS, HTTP_COLS_CLAIMED };

/* The routes: validate req and submit its statement, or answer it. */
void		 http_orders_create(struct http_worker *,
		    struct evhttp_request *);
void		 http_orders_get(struct http_worker *, struct evhttp_request *,
		    const char *id);
/* Send job's statement (INSERT or GET, pipeline mode) on pg: the batch's,
 * the claimed one when job->handoff, else the single insert.  link
 * names the connection in log lines.  Returns libpq's 1 (sent) or 0. */
int		 http_orders_send(struct http_worker *, struct pg_conn *,
		    struct http_job *, int link);
/* Answer job's request(s) from res, its committed result; res NULL: no
 * result came (the caller answers 503 with http_job_fail()). */
void		 http_orders_answer(struct http_worker *, struct http_job *,
		    const PGresult *res, int link);

/* ---- idempotency.c: the Idempotency-Key's pure part (no I/O) --------- */

/* The key of an Idempotency-Key field value v (a quoted sf-string,
 * unescaped, or a bare token) into key (IDEMPOTENCY_KEY_MAX + 1 bytes);
 * 0, or -1 with *why a static message for the 400. */
int		 idempotency_key_parse(const char *v, char *key,
		    const char **why);
/* SHA-256 of in's customerId, a NUL and amountCents in decimal, as bytea
 * hex input \x... into out (IDEMPOTENCY_FP_LEN + 1 bytes); 0 or -1. */
int		 idempotency_fingerprint(const struct order_input *in,
		    char *out);

/* ---- http_pool.c: the asynchronous libpq pipeline --------------------- */

/*
 * What the pool asks of its user.  It never answers a request or wakes
 * a relay itself: it sends a job's statement with send() and hands every
 * job it took back once, through done().
 *   send	put job's statement(s) into pg's pipeline (the pool adds the
 *		Sync); returns libpq's 1 (sent) or 0 (the connection failed)
 *   done	the pool is done with job and its batch: res is the job's
 *		result after its transaction committed, or the first error
 *		(valid during the call only), or NULL when no result came (no
 *		connection, a broken one, no answer); done owns the jobs from
 *		then on (http_job_free()).  Called from the loop, while a
 *		connection's results are read: it must not submit (it may
 *		http_pool_push_front())
 *   setup_row	a setup statement returned one row: res, during the call
 *   link	in every callback: the connection's number, for log lines
 */
struct http_pool_ops {
	const struct http_pool_stmt *setup;	/* after the session's own */
	int		 nsetup;
	int		(*send)(struct pg_conn *, struct http_job *, int link,
			    void *arg);
	void		(*done)(struct http_job *, const PGresult *res,
			    int link, void *arg);
	void		(*setup_row)(const PGresult *res, void *arg);
	void		*arg;
};

/* http_pool_submit() refused the job (the caller still owns it). */
#define HTTP_POOL_DOWN		-1	/* no connection is up */
#define HTTP_POOL_FULL		-2	/* HTTP_QUEUE_MAX jobs wait already */

/*
 * Open nlinks (at least 1) connections to conninfo with db_connect()
 * (blocking: at the worker's start only) and begin each one's setup;
 * ops is copied.  One that cannot be opened because the server is away is
 * logged and reconnects with backoff, as after a lost link.  NULL (logged)
 * if the server refuses the connection or memory is short.
 * Free with http_pool_free().
 */
struct http_pool *http_pool_new(struct event_base *, const char *conninfo,
		    int nlinks, const struct http_pool_ops *);
/* Free the pool: close its connections, free the jobs it still holds
 * (with free(): no callback runs).  NULL is ignored. */
void		 http_pool_free(struct http_pool *);
/* Send job on the least loaded connection with room, or queue it (FIFO;
 * orders waiting in a row become one statement): 0 taken (done() will
 * run), else HTTP_POOL_DOWN or HTTP_POOL_FULL. */
int		 http_pool_submit(struct http_pool *, struct http_job *);
/* Queue job ahead of every other, sent once the current result
 * processing is over; never refused. */
void		 http_pool_push_front(struct http_pool *, struct http_job *);
/* Send job at once, bypassing the queue: 0 taken, -1 (the caller still
 * owns it) if no connection has room. */
int		 http_pool_send_now(struct http_pool *, struct http_job *);
/* Connections in session setup or ready (0: the database is away). */
int		 http_pool_up(const struct http_pool *);
/* Connections the pool has, up or not (nlinks of http_pool_new()). */
int		 http_pool_size(const struct http_pool *);
/* Log a failed statement of connection link ("database connection N:
 * ..."); refused orders (db_result_refused()) rate-limited. */
void		 http_pool_log_result(int link, const PGresult *);

/* ---- http_wake.c: after a commit: NOTIFY window, handoff, give-back --- */

/* The setup statement that tells whether a trigger notifies for us. */
extern const char http_wake_trigger_sql[];

/* Create the NOTIFY window's timer; -1 on failure.  http_wake_free()
 * frees it. */
int		 http_wake_init(struct http_worker *);
/* Free the timer; the NOTIFY still owed (if any) is not sent. */
void		 http_wake_free(struct http_worker *);
/* http_wake_trigger_sql's row: notify ourselves unless it says "t". */
void		 http_wake_trigger_row(struct http_worker *, const PGresult *);
/* May the order of job (being sent) be written claimed and handed to
 * relay 1?  1: yes, and job's handoff fields are set; else 0. */
int		 http_wake_take_handoff(struct http_worker *, struct http_job *);
/* May the order being sent carry the NOTIFY in its own transaction?  1
 * if so (the window is then open); else 0. */
int		 http_wake_take_notify(struct http_worker *);
/* Send a NOTIFY (pipeline mode); libpq's 1 or 0. */
int		 http_wake_send_notify(struct pg_conn *);
/* Send a GIVE_BACK job's statement (claim_give_back_sql); 1 or 0. */
int		 http_wake_send_give_back(struct pg_conn *,
		    const struct http_job *);
/* job's claimed row committed (res its result): hand it to relay 1, or
 * give it back when nobody will read it. */
void		 http_wake_handoff(struct http_worker *, const struct http_job *,
		    const PGresult *res);
/* An order committed without a NOTIFY of its own: wake the relays,
 * debounced, from the loop. */
void		 http_wake_after_commit(struct http_worker *);
/* A NOTIFY or GIVE_BACK job is over (res NULL: it never ran). */
void		 http_wake_done(struct http_worker *, struct http_job *,
		    const PGresult *res, int link);

#endif /* HTTP_H */
