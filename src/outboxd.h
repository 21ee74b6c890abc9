/*
 * outboxd.h - types and prototypes shared by more than one outboxd part,
 * grouped by the file that defines them (as tmux does).  The way out to
 * the brokers (HTTP client, AWS, codecs, sinks) is in broker.h, the
 * metrics' counters, exposition and readiness in metrics_api.h; what one
 * worker's files share is in its private header (http.h, relay.h,
 * consumer.h).
 *
 * Conventions: functions return 0 on success and -1 on failure unless a
 * comment says otherwise; durations are milliseconds unless the name ends
 * in _s; sizes are bytes.  Returned strings are malloc'd and owned by the
 * caller when the comment says "caller frees".
 */
#ifndef OUTBOXD_H
#define OUTBOXD_H

#include <stddef.h>
#include <stdint.h>
#include <stdarg.h>
#include <sys/types.h>
#include <sys/time.h>
#include <signal.h>

struct event_base;
struct event;
struct cJSON;
struct pg_conn;
struct pg_result;

#ifndef __dead
#define __dead __attribute__((__noreturn__))
#endif
#define OUTBOXD_PRINTF(f, a) __attribute__((__format__(__printf__, f, a)))

/* Exit status of a child whose configuration can never work: the master
 * does not respawn it (sysexits.h EX_CONFIG). */
#define OUTBOXD_EX_CONFIG	78

/* The LISTEN/NOTIFY channel the outbox trigger signals (sql/schema.sql). */
#define OUTBOX_CHANNEL		"outbox_new"

/*
 * Session options of the HTTP workers' connections.  outboxd.notify=off:
 * the schema's NOTIFY trigger skips their inserts, the workers notify
 * themselves, debounced (http_wake.c: a NOTIFY per transaction serialises
 * commits).
 * outboxd.stamp=off: no commit-order stamp, since an order.created
 * event's key is the new order's id, which no other row shares.
 */
#define HTTP_SESSION_OPTIONS	\
	"-c TimeZone=UTC -c outboxd.notify=off -c outboxd.stamp=off"
/*
 * Retention's connection runs only its delete (retention.c), which must
 * walk outbox_sent_idx in sent_at order and stop at its limit.  With
 * statistics older than a burst of due rows, the planner may choose a
 * bitmap scan and sort every due row for each small delete.  With sorts
 * and bitmap scans off, as for outbox_claim(), only the ordered index
 * scan is left.
 */
#define RETENTION_SESSION_OPTIONS	\
	"-c TimeZone=UTC -c enable_sort=off -c enable_bitmapscan=off"

/* ---- conf.c: the only file that knows libconfuse ---------------------- */

/* Descriptors an HTTP worker keeps for itself (listening socket, event
 * base, signals, log, handoff socket, a reconnect under way, stdio)
 * besides its http.db_connections and its client connections: what
 * http.max_connections is checked against RLIMIT_NOFILE with. */
#define HTTP_FD_RESERVE		32

enum conf_sink { CONF_SINK_SQS, CONF_SINK_HTTP, CONF_SINK_SNS,
	CONF_SINK_PUBSUB };
/* relay.mode: claim rows with SQL, or stream them from the WAL. */
enum conf_relay_mode { CONF_RELAY_TABLE, CONF_RELAY_WAL };

/*
 * One place the relays publish to: a destination NAME {} section of
 * outbox.conf, or the one that relay.sink with sqs {} / webhook {} makes
 * (named "default").  A row's destination column names it; NULL means
 * conf.default_destination.  Read-only once loaded.
 */
struct conf_destination {
	char		*name;
	int		 sink;			/* enum conf_sink */
	char		*queue_url;		/* sqs */
	char		*topic_arn;		/* sns */
	char		*url;			/* http */
	char		*secret;		/* http: Standard Webhooks key;
						   never logged */
	char		*project;		/* pubsub: Google Cloud project
						   id */
	char		*topic;			/* pubsub: topic id */
	int		 ordering;		/* pubsub: orderingKey = the
						   row's key */
	int		 batch_size;		/* messages per publish call,
						   1..the sink's most */
	long		 timeout;		/* ms per request */
	int		 concurrency;		/* publish calls in flight at
						   once, 1..the sink's most */
};

/* The most bytes a configuration file may hold (conf_load refuses more). */
#define CONF_MAX_SIZE	(1024 * 1024)

struct conf {
	char		*path;			/* file this was read from */
	char		*mode_warning;		/* every user may read the
						   file, which holds a
						   secret: the warning;
						   NULL = none */
	char		*database;		/* libpq conninfo or URI */
	long		 shutdown_timeout;	/* ms */
	char		*pidfile;		/* NULL = none */
	char		*user;			/* NULL = do not drop */
	char		*log_file;		/* NULL = stderr */
	int		 log_level;		/* enum log_level */
	int		 log_format;		/* enum log_format */

	struct {
		char	*listen;		/* "host:port" as written */
		char	*host;			/* parsed from listen */
		char	*port;			/* parsed from listen */
		int	 workers;
		long	 max_body_size;		/* bytes */
		int	 db_connections;	/* per HTTP worker */
		int	 max_connections;	/* client connections per HTTP
						   worker; 0 = what
						   RLIMIT_NOFILE leaves */
		long	 idempotency_ttl;	/* s an Idempotency-Key is
						   honoured */
	} http;

	struct {
		int	 workers;
		int	 batch_size;		/* rows claimed per batch */
		long	 poll_interval;		/* ms, safety net behind NOTIFY */
		long	 lease;			/* ms a claim is held */
		long	 timeout;		/* ms per broker request */
		int	 sink;			/* enum conf_sink */
		int	 max_attempts;		/* then the row is failed */
		long	 backoff_base;		/* ms, first retry delay */
		long	 backoff_max;		/* ms, retry delay cap */
		long	 max_message_size;	/* bytes the broker accepts */
		long	 retention;		/* s sent rows are kept; 0 = ever */
		int	 replay_rate;		/* rows/s a replay puts back */
		int	 handoff;		/* HTTP workers hand rows to
						   relay 1 (handoff.c) */
		long	 unready_after;		/* ms the sink may fail every
						   publish before /readyz
						   says 503; 0 = never */
		int	 mode;			/* enum conf_relay_mode */
		char	 wal_slot[64];		/* replication slot (wal) */
		char	 wal_publication[64];	/* its publication (wal) */
		char	 wal_message_prefix[64]; /* pg_logical_emit_message
						   prefix of events (wal) */
		long	 wal_lag_warning;	/* bytes of slot lag before a
						   warning; 0 = never */
	} relay;

	struct {
		char	*url;			/* NULL = none */
		char	*secret;		/* Standard Webhooks key; never
						   logged */
		long	 timeout;		/* ms per delivery */
	} webhook;

	/* The admin API (admin_http.c): on when listen and token are both
	 * set. */
	struct {
		char	*listen;		/* "host:port"; NULL = off */
		char	*host;			/* parsed from listen */
		char	*port;			/* parsed from listen */
		char	*token;			/* bearer token; never logged */
	} admin;

	struct {
		int	 workers;
		int	 wait_time;		/* s, SQS long poll (0..20) */
		int	 max_messages;		/* per ReceiveMessage (1..10) */
		int	 concurrency;		/* batches in hand at once
						   (1..16) */
		char	**event_types;		/* EventType attributes written
						   to DynamoDB; a message of
						   any other type, or none, is
						   deleted unwritten */
		int	 n_event_types;		/* at least 1 if workers > 0 */
	} consumer;

	/* Resolved at load time: file value, else environment, else AWS
	 * default; the keys are the file's only, the first source of the
	 * credential chain (creds.c), which the workers run.  Secrets are
	 * never logged. */
	struct {
		char	*region;		/* ... else the profile's; NULL
						   when it comes from instance
						   metadata (region_imds) */
		char	*region_imds;		/* IMDS base URL the workers
						   read the region from at
						   start; NULL = none */
		char	 region_from[160];	/* where region comes from, as
						   outboxd -t says it */
		long	 duration_seconds;	/* aws.duration_seconds, of
						   aws.role_arn; 0 = STS's */
		char	*sqs_endpoint;		/* base URL, no trailing '/' */
		char	*dynamodb_endpoint;	/* base URL, no trailing '/' */
		char	*sns_endpoint;		/* base URL, no trailing '/' */
		char	*sts_endpoint;		/* base URL, no trailing '/' */
		char	*access_key_id;
		char	*secret_access_key;
		char	*session_token;		/* NULL = none */
		char	*profile;		/* aws.profile, AWS_PROFILE;
						   NULL = "default" */
		int	 profile_set;		/* aws.profile is in the file:
						   the environment's keys are
						   no source of their own */
		char	*role_arn;		/* aws.role_arn: assumed on top
						   of the chain; NULL = none */
		char	*external_id;		/* aws.external_id */
		char	*role_session_name;	/* aws.role_session_name */
		char	 source[512];		/* the chain's choice, as
						   outboxd -t says it; ""
						   when AWS is not used */
	} aws;

	/* Google Cloud Pub/Sub (sink = "pubsub"): where requests go and
	 * whether they carry credentials. */
	struct {
		char	*endpoint;		/* base URL, no trailing '/' */
		int	 emulator;		/* PUBSUB_EMULATOR_HOST: plain
						   HTTP, no credentials */
		char	*adc_file;		/* the ADC file; NULL: the
						   metadata server */
		char	 source[800];		/* what it is, as outboxd -t
						   says it; "" when unused */
	} pubsub;

	char		*sqs_queue_url;
	char		*dynamodb_table;

	struct conf_destination *destinations;	/* the relays' */
	int		 n_destinations;
	int		 default_destination;	/* index of the one for rows
						   whose destination is NULL;
						   -1 = none */
};

/*
 * Parse and validate the configuration file at path (libconfuse), fill the
 * AWS settings left unset from the standard environment variables, and
 * return a new struct conf in *out (caller frees with conf_free).
 * On error returns -1 and writes "FILE:LINE: reason" (or "FILE: reason")
 * into err (errlen bytes).  Used by -t, start-up and reload alike.
 * Only a regular file of at most CONF_MAX_SIZE bytes without NUL bytes is
 * read, without blocking; an error never shows the value of a secret key
 * (aws.secret_access_key, aws.session_token, webhook.secret, admin.token,
 * database).
 */
int		 conf_load(const char *path, struct conf **out, char *err,
		    size_t errlen);
void		 conf_free(struct conf *);
/* The time allowed for one request to the relays' sink, in ms:
 * webhook.timeout for relay.sink = "http", else relay.timeout. */
long		 conf_sink_timeout(const struct conf *);
/* The destination a row's destination column names (NULL: the default),
 * or NULL if outbox.conf has none of that name. */
const struct conf_destination *conf_destination_find(const struct conf *,
		    const char *name);
/* 1 if n can be a destination's name (CONF_DESTINATION_NAME_RULE, as
 * sql/schema.sql's outbox_check_row() has it), else 0. */
#define CONF_DESTINATION_NAME_RULE "1 to 64 characters of A-Z, a-z, 0-9, " \
				    "'_', '.' and '-'"
int		 conf_destination_name_ok(const char *n);
/* 1 if a destination is AWS's (sqs, sns): a relay then needs AWS
 * credentials; webhooks and Pub/Sub topics need none. */
int		 conf_destinations_aws(const struct conf *);

/* ---- clock.c: microseconds, monotonic for durations, wall for instants  */
int64_t		 clock_mono_us(void);	/* CLOCK_MONOTONIC */
int64_t		 clock_wall_us(void);	/* CLOCK_REALTIME, since the epoch */
/* A duration of ms milliseconds (>= 0) as a struct timeval, for libevent's
 * timers. */
struct timeval	 clock_tv(long ms);

/* ---- log.c: one line per event, logfmt, with role and pid ------------- */

enum log_level { LOG_LEVEL_DEBUG, LOG_LEVEL_INFO, LOG_LEVEL_WARN,
	LOG_LEVEL_ERROR };

/* Name the writing process ("master", "http", "relay", "consumer";
 * index < 0 = none) for every later line; libevent's own messages become
 * lines of ours too (warnings rate-limited). */
void		 log_init(const char *role, int index);
/* Copy src into dst (size bytes, NUL included), cut if it must be at the
 * start of a UTF-8 sequence, never inside one.  Returns dst. */
char		*log_utf8_copy(char *dst, size_t size, const char *src);
/* Bytes of the control character s starts with in UTF-8 text: 1 for C0
 * and DEL, 2 for the C1 controls U+0080..U+009F (U+009B begins a
 * terminal's control sequence, as ESC [ does), 0 for anything else. */
int		 log_control_len(const char *s);
void		 log_set_level(int level);
enum log_format { LOG_FORMAT_LOGFMT, LOG_FORMAT_JSON };
/* key=value lines (the default) or one JSON object per line. */
void		 log_set_format(int format);
/* Parse "logfmt" or "json"; returns -1 if unknown. */
int		 log_format_parse(const char *);
/* Parse "debug", "info", "warn", "error"; returns -1 if unknown. */
int		 log_level_parse(const char *);
/* Send lines to path (append) instead of stderr; NULL = stderr.  Also used
 * to reopen after rotation.  Returns -1 (and keeps the old target) on
 * failure. */
int		 log_open(const char *path);
/* Reopen the file last given to log_open (SIGUSR1, after rotation). */
int		 log_reopen(void);
void		 log_debug(const char *, ...) OUTBOXD_PRINTF(1, 2);
void		 log_info(const char *, ...) OUTBOXD_PRINTF(1, 2);
void		 log_warn(const char *, ...) OUTBOXD_PRINTF(1, 2); /* + errno */
void		 log_warnx(const char *, ...) OUTBOXD_PRINTF(1, 2);
void		 log_error(const char *, ...) OUTBOXD_PRINTF(1, 2);
__dead void	 fatal(const char *, ...) OUTBOXD_PRINTF(1, 2);  /* + errno */
__dead void	 fatalx(const char *, ...) OUTBOXD_PRINTF(1, 2);
/*
 * A line at level with fields of its own after msg: kv is "key", "value",
 * ..., NULL (values are strings; NULL values are left out), e.g.
 *   log_kv(LOG_LEVEL_WARN, (const char *[]){ "outbox_id", id, NULL },
 *       "publish failed: %s", why);
 * logfmt: ... msg="publish failed: ..." outbox_id=42; json: "outbox_id":"42".
 */
void		 log_kv(int level, const char *const *kv, const char *, ...)
		    OUTBOXD_PRINTF(3, 4);

/*
 * Repeats of one kind of line (a failing broker) rate-limited: the first
 * line is written, then at most one per LOG_LIMIT_MS; lines in between are
 * only counted, and the next line written ends "(N more like it were not
 * logged)", N being the lines not written since the last one.  One
 * struct per call site (or per worker state), zero-initialised, that lives
 * until log_limit_flush().
 */
#define LOG_LIMIT_MS		10000
struct log_limit {
	long long	 next;		/* ms, monotonic: write again from */
	unsigned	 suppressed;	/* lines not written since the last */
	int		 listed;	/* on log.c's list for the flush */
	struct log_limit *list_next;
};
void		 log_limited(struct log_limit *, int level, const char *, ...)
		    OUTBOXD_PRINTF(3, 4);
/* log_kv, rate-limited the same way. */
void		 log_limited_kv(struct log_limit *, int level,
		    const char *const *kv, const char *, ...)
		    OUTBOXD_PRINTF(4, 5);
/* The trouble is over: if lines were held back, say how many (info), and
 * start again with the next failure written at once.  kv: the line's own
 * fields as log_kv's (the destination of a sink's limit), or NULL. */
void		 log_limit_end(struct log_limit *, const char *const *kv,
		    const char *what);
/* A worker is exiting: count the lines every limit still holds back in
 * one info line (their counts would otherwise be lost), and forget every
 * limit.  proc_worker_done() calls it. */
void		 log_limit_flush(void);

/* ---- proc.c: what every child does after fork ------------------------- */

/* The master's word to a worker of a generation a reload replaced: drain,
 * with no deadline.  A real-time signal: nothing else sends it (SIGWINCH,
 * nginx's choice, also comes from a terminal that is resized). */
#define PROC_SIG_RETIRE	SIGRTMIN

/* on_stop's second argument: a reload's retire (0, no deadline), a stop
 * (the master kills at shutdown_timeout) from a SIGTERM that may have
 * been sent to this worker alone, or the master's own stop (SIGUSR2: the
 * whole of outboxd is stopping). */
#define PROC_STOP		1
#define PROC_STOP_MASTER	2

/*
 * Install the worker signal policy on base.  A stop with a deadline:
 * SIGTERM (a second one exits at once) calls on_stop(arg, PROC_STOP),
 * SIGUSR2 (the master's word) on_stop(arg, PROC_STOP_MASTER), each once;
 * the second of them to come calls on_stop again only for the master's.
 * A reload's PROC_SIG_RETIRE calls on_stop(arg, 0) first, and a stop that
 * follows calls on_stop again: on_stop must take every such call.
 * SIGQUIT exits at once, SIGHUP is ignored (the master reloads), SIGPIPE
 * ignored.  SIGINT is already ignored since the fork (master.c: a
 * terminal's Ctrl-C reaches the workers too, and the master turns it into
 * their SIGUSR2).  Returns -1 on failure.
 */
int		 proc_worker_signals(struct event_base *base,
		    void (*on_stop)(void *, int deadline), void *arg);
/* A worker stopping with a deadline (on_stop() with PROC_STOP or
 * PROC_STOP_MASTER) and calls to a broker still unanswered gives them up
 * this many ms after the stop signal, so that it exits before the master
 * kills it: half of shutdown_timeout. */
long		 proc_give_up_ms(const struct conf *);
/* The signals a worker handles or ignores once proc_worker_signals() has
 * run (SIGHUP too): a new worker blocks them from the fork on, so that one
 * sent meanwhile neither kills it nor is lost. */
void		 proc_worker_sigset(sigset_t *);
/* Arm the give-up timer ev for proc_give_up_ms() unless it is armed
 * already.  Returns 1 if it armed it, 0 if not. */
int		 proc_give_up_arm(struct event *ev, const struct conf *);
/* Call when the worker's event loop has ended: stop signals are held from
 * then on, so a late one cannot kill a worker that is exiting cleanly;
 * the signal events of proc_worker_signals() are freed. */
void		 proc_worker_done(void);
/* Set the process title shown by ps ("outboxd: relay 2"). */
void		 proc_set_title(const char *fmt, ...) OUTBOXD_PRINTF(1, 2);
/* Keep argv so proc_set_title can overwrite it; call first in main(). */
void		 proc_title_init(int argc, char **argv);

/* ---- db.c: libpq helpers: connecting, failed results, the schema ----- */

/* "{1,2,3}", a bigint[] parameter of n values; caller frees; NULL if out
 * of memory. */
char		*db_int8_array(const int64_t *v, int n);
/*
 * Connect (blocking) to conninfo with outboxd's session settings:
 * application_name "outboxd <role>", the session options of role
 * (HTTP_SESSION_OPTIONS for "http", RETENTION_SESSION_OPTIONS for
 * "retention", else TimeZone UTC), connect, keepalive and TCP user
 * timeouts, gssencmode "disable" unless conninfo, a service or
 * PGGSSENCMODE/PGSERVICE choose; conninfo overrides them all.  Returns
 * NULL and writes the libpq message into err on failure.  Caller
 * PQfinish()es the connection.
 */
struct pg_conn	*db_connect(const char *conninfo, const char *role, char *err,
		    size_t errlen);

/*
 * The same connection opened without blocking base's loop: started with
 * PQconnectStartParams (libpq resolves the host name before that
 * returns), driven by PQconnectPoll from the loop, given up timeout ms
 * after the start (PQconnectPoll does not enforce connect_timeout).  cb
 * runs once, from the loop, after the handle is freed: with conn (the
 * caller PQfinish()es it; notices are left to the caller, see
 * db_log_notices()), or conn NULL, timed_out 1 if the deadline passed, and
 * err, libpq's message, valid during the call only.  A connect that fails
 * at once returns NULL (cb never runs) with the reason in err (errlen
 * bytes).
 */
struct db_connecting;
typedef void	 db_connected_cb(struct pg_conn *conn, int timed_out,
		    const char *err, void *arg);
struct db_connecting *db_connecting_start(struct event_base *,
		    const char *conninfo, const char *role, long timeout,
		    db_connected_cb *cb, void *arg, char *err, size_t errlen);
/* Give a connect up: close it, free the handle; cb does not run.  NULL is
 * ignored. */
void		 db_connecting_cancel(struct db_connecting *);
/* Send conn's notices, and errors that arrive between queries, to the log
 * (db_connect() does it for its connections). */
void		 db_log_notices(struct pg_conn *);
/* libpq's message msg (NULL or empty: "unknown error") into err, cut at a
 * UTF-8 character if it must be, without the newline and spaces it ends
 * with. */
void		 db_errcpy(char *err, size_t errlen, const char *msg);
/* The same, on one line: every newline a space.  Returns buf. */
const char	*db_errline(char *buf, size_t len, const char *msg);
/*
 * Why the statement of res failed, on one line into buf (len bytes) as
 * db_errline() writes it: the server's primary message ("(an empty
 * message)" when it sent only blanks), else conn's message (conn may be
 * NULL), else the name of res's status.  res NULL: conn's message.
 * Returns buf.
 */
const char	*db_result_error(char *buf, size_t len,
		    const struct pg_result *res, const struct pg_conn *conn);
/*
 * After a failed connect: 1 if the server answered and refused us (no
 * such database or role, failed authentication: PQping() says PQPING_OK,
 * whatever the language of the message) or conninfo is unusable, so
 * waiting cannot help; 0 if it is not there yet or still starting, where
 * a retry with backoff will do.  Blocks for up to one connect.
 */
int		 db_refuses_us(const char *conninfo);
/* 0 if the orders and outbox tables exist, else -1 with a message saying
 * how to apply sql/schema.sql.  An index outboxd can do without (one
 * added since the first release) is only warned about. */
int		 db_check_schema(struct pg_conn *, char *err, size_t errlen);
/* A failed statement's field (PQresultErrorField) into buf as db_errline()
 * writes it; NULL if the server sent none, or only blanks (RAISE ...
 * USING DETAIL = '' says nothing).  Returns buf or NULL. */
const char	*db_result_field(const struct pg_result *, int field,
		    char *buf, size_t len);
/* A failed statement's DETAIL and HINT (db_result_field()); NULL where the
 * server sent none. */
struct db_why {
	const char	*detail;	/* NULL, or dbuf */
	const char	*hint;		/* NULL, or hbuf */
	char		 dbuf[512];
	char		 hbuf[256];
};
void		 db_result_why(struct db_why *, const struct pg_result *);
/* 1 if the statement failed on its own data (a constraint, a trigger's
 * RAISE, a bad value: see db.c for the SQLSTATE classes), which running
 * it again cannot change; else 0. */
int		 db_result_refused(const struct pg_result *);

/* ---- json.c: strict RFC 8259 checking of JSON text from clients ------- */

#define JSON_DEPTH_MAX		1000	/* nesting (cJSON's own limit) */
#define JSON_NAME_MAX		64	/* bytes of a json_member name */

/* What is wrong with a JSON text; json_message() says it to people. */
enum json_fault {
	JSON_OK,
	JSON_E_SYNTAX,		/* not the RFC 8259 grammar */
	JSON_E_SPACE,		/* a control byte outside a string (\f, \v) */
	JSON_E_CONTROL,		/* U+0000..U+001F unescaped in a string */
	JSON_E_ESCAPE,		/* a backslash escape JSON does not have */
	JSON_E_SURROGATE,	/* \u surrogate escapes not a high-low pair */
	JSON_E_UTF8,		/* bytes that are not UTF-8 (RFC 3629) */
	JSON_E_NUL,		/* \u0000 (valid JSON, refused) */
	JSON_E_NUMBER,		/* 01, 1., 1.e2, +1, .5, - */
	JSON_E_DEPTH,		/* nested deeper than JSON_DEPTH_MAX */
	JSON_E_TRAILING,	/* more than whitespace after the value */
	JSON_E_DUPLICATE,	/* an object names a member twice */
	JSON_E_NOMEM		/* cJSON could not build the tree */
};

/* A member of the top-level object whose raw value json_check() finds. */
struct json_member {
	const char	*name;	/* in: unescaped, under JSON_NAME_MAX bytes */
	const char	*value;	/* out: first byte of its value, or NULL */
	size_t		 len;	/* out: bytes of the value's text */
};

struct json_error {
	enum json_fault	 fault;
	size_t		 offset;	/* byte of the text where it was seen */
	int		 member;	/* index in want[] of the member whose
					 * value holds the fault, or -1 */
};

/* 0 if the len bytes at text are exactly one JSON text, filling want[]
 * (nwant entries) with the raw values of those top-level members; else -1
 * with *err set.  One pass, no allocation. */
int		 json_check(const char *text, size_t len,
		    struct json_member *want, size_t nwant,
		    struct json_error *err);
/* json_check(), then the cJSON tree, refused (NULL, *err set) when an
 * object repeats a member name after unescaping; the members of an object
 * of more than 8 come back sorted by name.  Caller cJSON_Delete()s. */
struct cJSON	*json_parse(const char *text, size_t len,
		    struct json_member *want, size_t nwant,
		    struct json_error *err);
/* A static sentence for people: "request body is not valid JSON: ...". */
const char	*json_message(enum json_fault f);

/* Length of the UTF-8 sequence at p, *p >= 0x80, that ends before end:
 * 2 to 4 bytes (RFC 3629: no overlong form, no surrogate, at most
 * U+10FFFF), or 0 if there is none. */
size_t		 json_utf8_len(const unsigned char *p,
		    const unsigned char *end);

/* ---- order.c: POST /orders validation and JSON mapping (no I/O) ------- */

#define ORDER_CUSTOMER_ID_MAX	256	/* bytes of UTF-8 */
#define ORDER_AMOUNT_MAX	INT64_C(9007199254740991)	/* 2^53 - 1 */
#define ORDER_UUID_LEN		36	/* canonical 8-4-4-4-12 */
#define ORDER_JSON_MAX		2048	/* order_json() of any API row */

/* A valid POST /orders body. */
struct order_input {
	char		 customer_id[ORDER_CUSTOMER_ID_MAX + 1]; /* NUL-ended */
	size_t		 customer_id_len;
	int64_t		 amount_cents;
};

/* Why a body was refused: a stable machine code ("amount_cents_negative")
 * and a message for people; both static. */
struct order_error {
	const char	*code;
	const char	*message;
};

/* Validate a body (len bytes, need not be NUL-terminated) into *out;
 * -1 with *err set when it is not acceptable. */
int		 order_parse(const char *body, size_t len,
		    struct order_input *out, struct order_error *err);
/* 1 if the len bytes at s are a canonical UUID, else 0. */
int		 order_uuid_valid(const char *s, size_t len);
/* 1 if the len bytes at s are strict UTF-8 (RFC 3629: no overlong form,
 * no surrogate, at most U+10FFFF), else 0. */
int		 order_utf8_valid(const unsigned char *s, size_t len);
/* {"error": code, "message": message}; caller frees; NULL if no memory. */
char		*order_error_json(const char *code, const char *message);
/* The same, with "detail" and "hint" members for those not NULL. */
char		*order_error_json_detail(const char *code, const char *message,
		    const char *detail, const char *hint);
/* {"id","customer_id","amount_cents","created_at"} from an orders row's
 * text columns into buf; returns the length or -1. */
int		 order_json(char *buf, size_t size, const char *id,
		    const char *customer_id, const char *amount_cents,
		    const char *created_at);

/* ---- admin.c: outbox operations of the admin API and outboxctl -------- */

/*
 * Each runs its statements on a blocking libpq connection and returns the
 * JSON answer of the admin API in *out (caller cJSON_Delete()s); on a
 * database error -1 with the reason in err (errlen bytes).
 */
#define ADMIN_FAILED_LIMIT	50	/* rows per page by default */
#define ADMIN_FAILED_MAX	1000	/* rows per page at most */
#define ADMIN_REDRIVE_IDS_MAX	10000

/* {"counts":{"pending","sent","failed"},"total",
 *  "oldest_pending_age_seconds" (null if none),"oldest_pending_created_at",
 *  "paused","paused_at","backlog_by_key":[{"ordering_key","pending",
 *  "failed","oldest_created_at"}] (top 10 keys by unsent rows),
 *  "destinations": as admin_destinations()} */
int		 admin_status(struct pg_conn *, const struct conf *,
		    struct cJSON **out, char *err, size_t errlen);
/* Each destination of conf, in its order, then up to 20 names that rows
 * or pauses hold and conf lacks, busiest first:
 * {"destinations":[{"name" (null: rows with none, and no default),
 *  "sink" (null: not configured),"default","configured","pending",
 *  "failed","oldest_pending_age_seconds","oldest_pending_created_at",
 *  "paused","paused_at"}]}.  name non-NULL (one of conf's: check it with
 * admin_dest_check()): that destination's object alone. */
int		 admin_destinations(struct pg_conn *, const struct conf *,
		    const char *name, struct cJSON **out, char *err,
		    size_t errlen);
/* Is name a destination of conf?  0 yes; -1 it cannot be a name
 * (conf_destination_name_ok()); -2 conf has none of that name.  Either
 * with the reason in err. */
int		 admin_dest_check(const struct conf *, const char *name,
		    char *err, size_t errlen);
/* Pause (add to outbox_paused_destinations, keeping the first time) or
 * resume (remove, then wake the relays) one destination; rows whose
 * column is NULL follow the default's name.
 * {"destination","paused","paused_at" (null when resumed)} */
int		 admin_dest_pause(struct pg_conn *, const char *name,
		    int paused, struct cJSON **out, char *err, size_t errlen);
/* {"rows":[{"id","event_type","ordering_key","attempts","last_error",
 *  "created_at"}],"next_after_id": last id or null} of failed rows with
 * id > after_id, in id order, at most limit (1..ADMIN_FAILED_MAX). */
int		 admin_failed(struct pg_conn *, int64_t after_id, int limit,
		    struct cJSON **out, char *err, size_t errlen);

/* Which failed rows to redrive: all, by id, or by event type; of one
 * destination or any. */
struct admin_redrive {
	int		 all;
	int64_t		*ids;		/* malloc'd; NULL unless by id */
	int		 nids;
	char		*event_type;	/* malloc'd; NULL unless by type */
	char		*destination;	/* malloc'd; NULL: any */
};
/* Parse {"all":true} | {"ids":[1,2]} | {"event_type":"T"} (exactly one),
 * with "destination":"NAME" or not, into sel (clear with
 * admin_redrive_clear); -1 with a reason.  The name is not checked. */
int		 admin_redrive_parse(const char *body, size_t len,
		    struct admin_redrive *sel, char *err, size_t errlen);
void		 admin_redrive_clear(struct admin_redrive *);
/* failed -> pending, attempts 0, available now (last_error is kept until
 * the next attempt), then wake the relays; with sel->destination, only
 * rows of that destination (NULL column: conf's default).
 * {"redriven": N, "ids": [...]} */
int		 admin_redrive(struct pg_conn *, const struct conf *,
		    const struct admin_redrive *, struct cJSON **out,
		    char *err, size_t errlen);
/* Set outbox_control.paused; resuming wakes the relays.
 * {"paused": bool, "paused_at": time or null} */
int		 admin_pause(struct pg_conn *, int paused, struct cJSON **out,
		    char *err, size_t errlen);
/* 1 if the NUL-terminated strings are equal, compared in time that does
 * not depend on where they differ (SHA-256 of both, CRYPTO_memcmp). */
int		 admin_token_equal(const char *a, const char *b);

/* ---- claim.c: claim tokens, claimed rows, giving them back ----------- */

/* One claimed outbox row: from a relay's claim, or written already
 * claimed by an HTTP worker and handed to relay 1 (handoff.c).  The
 * strings are not NUL-terminated; they point into the claim's result or
 * the handoff datagram. */
struct claimed_row {
	int64_t		 claim;		/* its claim token */
	int64_t		 claimed_us;	/* monotonic us before the claiming
					   statement was sent: its lease
					   runs from no earlier */
	int64_t		 id;
	int64_t		 created_ms;	/* created_at, ms since the epoch */
	long		 lease_ms;	/* its lease (the claimer's
					   relay.lease) */
	const char	*type, *key, *payload;
	size_t		 type_len, key_len, payload_len;
	const char	*destination;	/* NULL: the default */
	const char	*headers;	/* JSON object text; NULL: none */
	size_t		 headers_len;
	int64_t		 replay;	/* outbox.replay; 0: a live row */
};

/* A new random claim token: unique enough per claim, only compared for
 * equality; never negative. */
int64_t		 claim_token(void);
/* Give claimed rows back unpublished, free for any relay's claim at once:
 * $1 the ids (bigint[]), $2 the claim token of each (bigint[]); a row is
 * given back only if it is still under that claim.  PQcmdTuples() says
 * how many were. */
extern const char claim_give_back_sql[];

/* ---- handoff.c: claimed rows from the HTTP workers to relay 1 --------- */

#define HANDOFF_MAX	65536	/* bytes of one handed-off row, at most */

enum handoff_end { HANDOFF_NONE, HANDOFF_SENDER, HANDOFF_RECEIVER };


/* Master, before the first fork: open the local socket pair (kept for
 * every generation of workers).  -1 with errno: no handoff, rows are
 * claimed as before. */
int		 handoff_open(void);
/* In a new worker: keep only the end its role uses, close the other(s). */
void		 handoff_keep(enum handoff_end);
/* 1 if this process holds the sending end. */
int		 handoff_can_send(void);
/* Send one row to relay 1 without blocking.  0, or -1 with errno (EAGAIN:
 * relay 1 is not reading; EPIPE: outboxd is stopping, handoff_shut(), and
 * nobody will read it; EMSGSIZE: larger than HANDOFF_MAX with its
 * header). */
int		 handoff_send(const struct claimed_row *);
/* Master, at a stop (not a reload): close the socket for reading.  Rows
 * already in it stay readable; every send after it fails with EPIPE, so
 * the sender knows at once that nobody will read the row.  Returns 0, or
 * -1 with errno. */
int		 handoff_shut(void);
/* 1 if handoff_shut() was called (by any holder of the reading end). */
int		 handoff_is_shut(void);
/* The receiving end (relay 1), or -1. */
int		 handoff_fd(void);
/* Take one row into buf (HANDOFF_MAX bytes).  1 got one (row points into
 * buf), 0 none waiting, -1 with errno: EMSGSIZE or EBADMSG a malformed
 * datagram was skipped, anything else the socket failed. */
int		 handoff_recv(struct claimed_row *, char *buf, size_t size);
/* Master, at exit: close both ends. */
void		 handoff_close(void);

/* ---- retention.c: deleting old sent rows (in relay 1) ------------------ */

struct retention;
/* Start deleting sent rows older than conf->relay.retention s (0: none)
 * and Idempotency-Keys older than conf->http.idempotency_ttl s on a
 * PostgreSQL connection of its own (started now, asynchronously), from
 * base's loop: the first pass 5 s from now, then one a minute.  conf must
 * outlive it.  NULL when out of memory; free with retention_free(). */
struct retention *retention_new(struct event_base *, const struct conf *);
/* No more passes, and no more deletes in this one.  NULL is ignored. */
void		 retention_stop(struct retention *);
/* Cancel a delete in flight (PQcancel: blocks until the server takes the
 * request, so call it after the relay's loop; the answer is not waited
 * for), close the connection, free.  NULL is ignored. */
void		 retention_free(struct retention *);

/* ---- worker entry points (one file each); return the exit status ------ */
/* relay_main() is relay.c's; the rest of the relay (relay_*.c) shares
 * src/relay.h only. */

/* http.c, with http_orders.c, http_pool.c, http_wake.c, http_guard.c,
 * http_guard_accept.c (their shared declarations are in http.h and
 * http_guard.h). */
int		 http_worker_main(struct conf *, int listen_fd, int index);
int		 relay_main(struct conf *, int index);
/* consumer.c, with consumer_batch.c (sharing consumer.h). */
int		 consumer_main(struct conf *, int index);
/* admin_http.c: the admin API on the master's admin socket. */
int		 admin_http_main(struct conf *, int admin_fd);

/* ---- master.c --------------------------------------------------------- */

/* Run the master until stopped; returns the process exit status. */
int		 master_run(struct conf *, int listen_fd, int admin_fd);

#endif /* OUTBOXD_H */
