/*
 * metrics.c - counters and histograms shared by every outboxd process, and
 * their Prometheus text exposition (format 0.0.4).
 *
 * The master maps one anonymous shared region (mmap MAP_SHARED |
 * MAP_ANONYMOUS) before it forks any worker, so every worker updates the
 * same slots: a scrape answered by any HTTP worker shows the sum over all
 * workers, a respawned worker goes on adding to the same totals, and
 * nothing is counted twice.  Updates are relaxed __atomic adds on
 * fixed slots (no lock, no system call, no allocation): a handful of
 * nanoseconds on the hot path.  A reader may see one counter of a pair
 * already moved and the other not yet; each value on its own is exact.
 *
 * Histograms keep one non-cumulative count per bucket plus a sum in
 * microseconds; the exposition adds the buckets up, and _count is the
 * +Inf bucket of that same sum, so the two always agree.
 *
 * The outbox figures (rows pending and failed, age of the oldest pending
 * row, the pause switch) come from PostgreSQL: the HTTP worker answering
 * a scrape runs METRICS_OUTBOX_SQL when the cached figures are older than
 * METRICS_CACHE_MS and stores the answer here for every worker.
 *
 * In a process where metrics_init() was never called (outboxctl, unit
 * tests) every update is a no-op.
 */
#include "config.h"

#include <sys/mman.h>

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>
#include <libpq-fe.h>

#include "outboxd.h"
#include "broker.h"

#define METRICS_MAX_BUCKETS	18
#define METRICS_ERROR_MAX	200

/* Upper bounds of the buckets, in microseconds. */
static const uint64_t metrics_http_bounds[] = {
	500, 1000, 2500, 5000, 10000, 25000, 50000, 100000, 250000, 500000,
	1000000, 2500000, 5000000, 10000000
};
/* Commit to acknowledgement: milliseconds when all is well, minutes or
 * hours while the broker is away or the relays are paused. */
static const uint64_t metrics_publish_bounds[] = {
	5000, 10000, 25000, 50000, 100000, 250000, 500000, 1000000, 2500000,
	5000000, 10000000, 30000000, 60000000, 300000000, 900000000,
	1800000000, 3600000000
};
/* A batch at the sink: a fraction of a millisecond to a local broker,
 * tens of ms to a remote one, up to the request's timeout. */
static const uint64_t metrics_sink_bounds[] = {
	250, 500, 1000, 2500, 5000, 10000, 25000, 50000, 100000, 250000,
	500000, 1000000, 2500000, 5000000, 10000000, 30000000
};
#define NELEM(a)	(sizeof(a) / sizeof((a)[0]))

static const char *const metrics_route_names[METRICS_NROUTES] = {
	[METRICS_ROUTE_ORDERS] = "/orders",
	[METRICS_ROUTE_ORDER] = "/orders/{id}",
	[METRICS_ROUTE_HEALTHZ] = "/healthz",
	[METRICS_ROUTE_READYZ] = "/readyz",
	[METRICS_ROUTE_METRICS] = "/metrics",
	[METRICS_ROUTE_OUTBOX] = "/outbox",
	[METRICS_ROUTE_FAILED] = "/outbox/failed",
	[METRICS_ROUTE_REDRIVE] = "/outbox/redrive",
	[METRICS_ROUTE_PAUSE] = "/relay/pause",
	[METRICS_ROUTE_RESUME] = "/relay/resume",
	[METRICS_ROUTE_OTHER] = "other",
};
static const char *const metrics_class_names[] = {
	"1xx", "2xx", "3xx", "4xx", "5xx"
};
/* Indexed by enum conf_sink. */
static const char *const metrics_sink_names[] = { "sqs", "http" };
static const char *const metrics_outcome_names[METRICS_NOUTCOMES] = {
	[METRICS_PUBLISH_SENT] = "sent",
	[METRICS_PUBLISH_RETRY] = "retry",
	[METRICS_PUBLISH_FAILED] = "failed",
};
static const char *const metrics_reason_names[SINK_NREASONS] = {
	[SINK_REASON_TRANSPORT] = "transport",
	[SINK_REASON_THROTTLED] = "throttled",
	[SINK_REASON_SERVER] = "server",
	[SINK_REASON_CLIENT] = "client",
	[SINK_REASON_REJECTED] = "rejected",
	[SINK_REASON_TOO_LARGE] = "too_large",
	[SINK_REASON_OTHER] = "other",
};
static const char *const metrics_consumer_names[METRICS_NCONSUMER] = {
	[METRICS_CONSUMER_PROCESSED] = "processed",
	[METRICS_CONSUMER_DUPLICATE] = "duplicate",
	[METRICS_CONSUMER_ERROR] = "error",
	[METRICS_CONSUMER_SKIPPED] = "skipped",
};
static const char *const metrics_pause_names[METRICS_NPAUSE] = {
	[METRICS_PAUSE_DESCRIPTORS] = "descriptors",
	[METRICS_PAUSE_MAX_CONNECTIONS] = "max_connections",
};
static const char *const metrics_role_names[] = {
	"http", "relay", "consumer", "admin"
};
#define METRICS_NROLES	NELEM(metrics_role_names)

struct metrics_hist {
	uint64_t	bucket[METRICS_MAX_BUCKETS + 1];	/* last: +Inf */
	uint64_t	sum_us;
};

/* What the last outbox query said.  Each field is its own atomic; at_ms
 * is stored last (release) and read first (acquire). */
struct metrics_outbox {
	int64_t		at_ms;		/* monotonic ms of the answer; 0 never */
	int64_t		state;		/* enum metrics_db_state */
	int64_t		pending;
	int64_t		failed;
	int64_t		oldest_ms;	/* age at at_ms; -1 = nothing pending */
	int64_t		paused;
	int64_t		known;		/* an answer has filled the figures */
	char		error[METRICS_ERROR_MAX];
};

/* The shared region.  Groups written by different roles sit on cache
 * lines of their own. */
struct metrics_shm {
	uint64_t	http_requests[METRICS_NROUTES][5]
			    __attribute__((aligned(64)));
	struct metrics_hist http_duration[METRICS_NROUTES]
			    __attribute__((aligned(64)));
	uint64_t	published[2][METRICS_NOUTCOMES]
			    __attribute__((aligned(64)));
	uint64_t	failures[SINK_NREASONS];
	struct metrics_hist publish_latency;
	struct metrics_hist sink_duration[2];	/* by enum conf_sink */
	uint64_t	consumer[METRICS_NCONSUMER]
			    __attribute__((aligned(64)));
	uint64_t	restarts[METRICS_NROLES]
			    __attribute__((aligned(64)));
	uint64_t	reloads[2];
	uint64_t	retention_rows;		/* deleted by retention */
	uint64_t	retention_errors;	/* its deletes that failed */
	uint64_t	handoff_rows;		/* taken by relay 1 */
	uint64_t	handoff_failed;		/* not handed over */
	uint64_t	accept_paused[METRICS_NPAUSE];
	int64_t		workers_up;
	int64_t		workers_desired;
	int64_t		start_time;	/* s since the epoch */
	/* The relays' sink, in monotonic ms (0 = never): the last chunk
	 * with a message sent, the first failed one since (0 = none), the
	 * reason of the last failure. */
	int64_t		sink_ok_ms __attribute__((aligned(64)));
	int64_t		sink_failing_ms;
	int64_t		sink_reason;
	struct metrics_outbox outbox __attribute__((aligned(64)));
};

static struct metrics_shm	*metrics_shm;
static long			 metrics_sink_unready_ms;	/* 0 = off */

#define ADD(p, n)	__atomic_fetch_add((p), (n), __ATOMIC_RELAXED)
#define LOAD(p)		__atomic_load_n((p), __ATOMIC_RELAXED)
#define STORE(p, v)	__atomic_store_n((p), (v), __ATOMIC_RELAXED)

const char metrics_outbox_sql[] =
	"SELECT (SELECT count(*) FROM outbox WHERE status = 'pending'), "
	"(SELECT count(*) FROM outbox WHERE status = 'failed'), "
	"(SELECT (1000 * extract(epoch FROM clock_timestamp() - created_at))"
	"::bigint FROM outbox WHERE status = 'pending' ORDER BY id LIMIT 1), "
	"(SELECT paused FROM outbox_control WHERE id = 1)";

int
metrics_init(void)
{
	void	*p;

	if (metrics_shm != NULL)
		return 0;
	p = mmap(NULL, sizeof(struct metrics_shm), PROT_READ | PROT_WRITE,
	    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return -1;
	/* Fresh anonymous pages are zero: every counter starts at 0. */
	metrics_shm = p;
	metrics_shm->start_time = (int64_t)time(NULL);
	return 0;
}

static void
metrics_hist_observe(struct metrics_hist *h, const uint64_t *bounds,
    size_t nb, uint64_t us)
{
	size_t	i;

	for (i = 0; i < nb && us > bounds[i]; i++)
		;
	ADD(&h->bucket[i], 1);
	ADD(&h->sum_us, us);
}

void
metrics_http_request(int route, int status, uint64_t us)
{
	int	cls = status / 100 - 1;

	if (metrics_shm == NULL || route < 0 || route >= METRICS_NROUTES)
		return;
	if (cls < 0 || cls > 4)
		cls = 4;
	ADD(&metrics_shm->http_requests[route][cls], 1);
	metrics_hist_observe(&metrics_shm->http_duration[route],
	    metrics_http_bounds, NELEM(metrics_http_bounds), us);
}

void
metrics_published(int sink, int outcome, int n)
{
	if (metrics_shm == NULL || sink < 0 || sink > 1 || outcome < 0 ||
	    outcome >= METRICS_NOUTCOMES || n <= 0)
		return;
	ADD(&metrics_shm->published[sink][outcome], (uint64_t)n);
}

void
metrics_publish_failure(int reason)
{
	if (metrics_shm == NULL || reason < 0 || reason >= SINK_NREASONS)
		return;
	ADD(&metrics_shm->failures[reason], 1);
}

void
metrics_publish_latency(uint64_t us)
{
	if (metrics_shm == NULL)
		return;
	metrics_hist_observe(&metrics_shm->publish_latency,
	    metrics_publish_bounds, NELEM(metrics_publish_bounds), us);
}

void
metrics_sink_duration(int sink, uint64_t us)
{
	if (metrics_shm == NULL || sink < 0 || sink > 1)
		return;
	metrics_hist_observe(&metrics_shm->sink_duration[sink],
	    metrics_sink_bounds, NELEM(metrics_sink_bounds), us);
}

void
metrics_consumer(int outcome)
{
	if (metrics_shm == NULL || outcome < 0 || outcome >= METRICS_NCONSUMER)
		return;
	ADD(&metrics_shm->consumer[outcome], 1);
}

void
metrics_worker_restart(const char *role)
{
	size_t	i;

	if (metrics_shm == NULL || role == NULL)
		return;
	for (i = 0; i < METRICS_NROLES; i++)
		if (strcmp(role, metrics_role_names[i]) == 0)
			ADD(&metrics_shm->restarts[i], 1);
}

void
metrics_reload(int ok)
{
	if (metrics_shm != NULL)
		ADD(&metrics_shm->reloads[ok ? 0 : 1], 1);
}

void
metrics_retention(int failed, long n)
{
	if (metrics_shm == NULL)
		return;
	if (failed)
		ADD(&metrics_shm->retention_errors, 1);
	else if (n > 0)
		ADD(&metrics_shm->retention_rows, (uint64_t)n);
}

void
metrics_handoff(int taken, int failed)
{
	if (metrics_shm == NULL)
		return;
	if (taken > 0)
		ADD(&metrics_shm->handoff_rows, (uint64_t)taken);
	if (failed > 0)
		ADD(&metrics_shm->handoff_failed, (uint64_t)failed);
}

void
metrics_set_workers(int up, int desired)
{
	if (metrics_shm == NULL)
		return;
	STORE(&metrics_shm->workers_up, (int64_t)up);
	STORE(&metrics_shm->workers_desired, (int64_t)desired);
}

void
metrics_accept_paused(int why)
{
	if (metrics_shm == NULL || why < 0 || why >= METRICS_NPAUSE)
		return;
	ADD(&metrics_shm->accept_paused[why], 1);
}

void
metrics_sink_outcome(int ok, int reason)
{
	int64_t	now = clock_mono_us() / 1000, zero = 0;

	if (metrics_shm == NULL)
		return;
	if (ok) {
		STORE(&metrics_shm->sink_ok_ms, now);
		STORE(&metrics_shm->sink_failing_ms, 0);
		return;
	}
	STORE(&metrics_shm->sink_reason, (int64_t)reason);
	/* The first failure since the last success starts the clock; a
	 * relay that succeeds meanwhile stops it again. */
	(void)__atomic_compare_exchange_n(&metrics_shm->sink_failing_ms, &zero,
	    now, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
}

void
metrics_set_sink_unready(long ms)
{
	metrics_sink_unready_ms = ms > 0 ? ms : 0;
}

/* ---- the outbox figures ---------------------------------------------- */

static void
metrics_outbox_put(int state, int64_t pending, int64_t failed,
    int64_t oldest, int64_t paused, const char *error)
{
	struct metrics_outbox	*o;
	size_t			 i;

	if (metrics_shm == NULL)
		return;
	o = &metrics_shm->outbox;
	STORE(&o->state, (int64_t)state);
	if (state == METRICS_DB_OK) {
		STORE(&o->pending, pending);
		STORE(&o->failed, failed);
		STORE(&o->oldest_ms, oldest);
		STORE(&o->paused, paused);
		STORE(&o->known, 1);
	}
	/* Byte by byte: a reader never sees a string without its NUL. */
	for (i = 0; i + 1 < sizeof(o->error) && error != NULL &&
	    error[i] != '\0'; i++)
		STORE(&o->error[i], error[i]);
	STORE(&o->error[i], '\0');
	__atomic_store_n(&o->at_ms, (clock_mono_us() / 1000), __ATOMIC_RELEASE);
}

int
metrics_outbox_fresh(void)
{
	int64_t	at;

	if (metrics_shm == NULL)
		return 0;
	at = __atomic_load_n(&metrics_shm->outbox.at_ms, __ATOMIC_ACQUIRE);
	return at != 0 && (clock_mono_us() / 1000) - at < METRICS_CACHE_MS;
}

void
metrics_outbox_down(const char *why)
{
	metrics_outbox_put(METRICS_DB_ERROR, 0, 0, 0, 0, why);
}

void
metrics_outbox_store(const struct pg_result *res)
{
	const char	*state;
	char		 buf[METRICS_ERROR_MAX];

	if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1 &&
	    PQnfields(res) == 4) {
		metrics_outbox_put(METRICS_DB_OK,
		    strtoll(PQgetvalue(res, 0, 0), NULL, 10),
		    strtoll(PQgetvalue(res, 0, 1), NULL, 10),
		    PQgetisnull(res, 0, 2) ? -1 :
		    strtoll(PQgetvalue(res, 0, 2), NULL, 10),
		    strcmp(PQgetvalue(res, 0, 3), "t") == 0, "");
		return;
	}
	state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
	db_result_error(buf, sizeof(buf), res, NULL);
	/* undefined table, column or function: sql/schema.sql not applied */
	if (state != NULL && (strcmp(state, "42P01") == 0 ||
	    strcmp(state, "42703") == 0 || strcmp(state, "42883") == 0))
		metrics_outbox_put(METRICS_DB_NO_SCHEMA, 0, 0, 0, 0, buf);
	else
		metrics_outbox_put(METRICS_DB_ERROR, 0, 0, 0, 0, buf);
}

/* ---- text building --------------------------------------------------- */

struct metrics_buf {
	char	*s;
	size_t	 len;
	size_t	 cap;
	int	 failed;
};

static void	metrics_printf(struct metrics_buf *, const char *, ...)
		    OUTBOXD_PRINTF(2, 3);

static void
metrics_printf(struct metrics_buf *b, const char *fmt, ...)
{
	va_list	 ap;
	char	*p;
	int	 n;

	if (b->failed)
		return;
	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(b->s + b->len, b->cap - b->len, fmt, ap);
		va_end(ap);
		if (n < 0) {
			b->failed = 1;
			return;
		}
		if ((size_t)n < b->cap - b->len) {
			b->len += (size_t)n;
			return;
		}
		if ((p = realloc(b->s, b->cap * 2 + (size_t)n)) == NULL) {
			b->failed = 1;
			return;
		}
		b->s = p;
		b->cap = b->cap * 2 + (size_t)n;
	}
}

size_t
metrics_label_escape(char *dst, size_t size, const char *v)
{
	size_t	o = 0;

	for (; *v != '\0' && o + 3 < size; v++) {
		if (*v == '\\' || *v == '"') {
			dst[o++] = '\\';
			dst[o++] = *v;
		} else if (*v == '\n') {
			dst[o++] = '\\';
			dst[o++] = 'n';
		} else
			dst[o++] = *v;
	}
	if (size > 0)
		dst[o] = '\0';
	return o;
}

static void
metrics_family(struct metrics_buf *b, const char *name, const char *type,
    const char *help)
{
	metrics_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name,
	    type);
}

/* A counter without labels: its family and its one sample. */
static void
metrics_counter(struct metrics_buf *b, const char *name, const char *help,
    uint64_t v)
{
	metrics_family(b, name, "counter", help);
	metrics_printf(b, "%s %" PRIu64 "\n", name, v);
}

/* A value in seconds from microseconds, exactly. */
static void
metrics_seconds(char *buf, size_t len, uint64_t us)
{
	snprintf(buf, len, "%" PRIu64 ".%06" PRIu64, us / 1000000,
	    us % 1000000);
}

static void
metrics_hist(struct metrics_buf *b, const char *name, const char *labels,
    const struct metrics_hist *h, const uint64_t *bounds, size_t nb)
{
	uint64_t	cum = 0;
	char		le[32], sum[32];
	size_t		i;

	for (i = 0; i <= nb; i++) {
		cum += LOAD(&h->bucket[i]);
		if (i < nb) {
			metrics_seconds(le, sizeof(le), bounds[i]);
			/* "0.500000" -> "0.5": shorter, the same number */
			while (le[strlen(le) - 1] == '0')
				le[strlen(le) - 1] = '\0';
			if (le[strlen(le) - 1] == '.')
				le[strlen(le) - 1] = '\0';
		} else
			snprintf(le, sizeof(le), "+Inf");
		metrics_printf(b, "%s_bucket{%s%sle=\"%s\"} %" PRIu64 "\n",
		    name, labels, *labels ? "," : "", le, cum);
	}
	metrics_seconds(sum, sizeof(sum), LOAD(&h->sum_us));
	metrics_printf(b, "%s_sum%s%s%s %s\n", name, *labels ? "{" : "",
	    labels, *labels ? "}" : "", sum);
	metrics_printf(b, "%s_count%s%s%s %" PRIu64 "\n", name,
	    *labels ? "{" : "", labels, *labels ? "}" : "", cum);
}

char *
metrics_render(size_t *len)
{
	struct metrics_shm	*m = metrics_shm;
	struct metrics_outbox	*o;
	struct metrics_buf	 b;
	char			 esc[128], labels[160];
	int64_t			 at, age;
	size_t			 i, j;

	memset(&b, 0, sizeof(b));
	b.cap = 32768;
	if ((b.s = malloc(b.cap)) == NULL)
		return NULL;
	b.s[0] = '\0';

	metrics_family(&b, "outboxd_build_info", "gauge",
	    "Version of the running outboxd; the value is always 1.");
	metrics_label_escape(esc, sizeof(esc), PACKAGE_VERSION);
	metrics_printf(&b, "outboxd_build_info{version=\"%s\"} 1\n", esc);
	if (m == NULL)
		goto done;

	metrics_family(&b, "outboxd_start_time_seconds", "gauge",
	    "When the master started, in seconds since the epoch.");
	metrics_printf(&b, "outboxd_start_time_seconds %" PRId64 "\n",
	    m->start_time);

	o = &m->outbox;
	at = __atomic_load_n(&o->at_ms, __ATOMIC_ACQUIRE);
	metrics_family(&b, "outboxd_database_up", "gauge",
	    "1 if the last outbox query answered, 0 if it failed.");
	metrics_printf(&b, "outboxd_database_up %d\n",
	    at != 0 && LOAD(&o->state) == METRICS_DB_OK);
	/* Figures are shown once known; after a failed query the last
	 * known ones stay, and the age goes on growing. */
	if (at != 0 && LOAD(&o->known)) {
		metrics_family(&b, "outboxd_outbox_rows", "gauge",
		    "Outbox rows by status, read from PostgreSQL (cached up "
		    "to 1 s).");
		metrics_printf(&b, "outboxd_outbox_rows{status=\"pending\"} "
		    "%" PRId64 "\n", LOAD(&o->pending));
		metrics_printf(&b, "outboxd_outbox_rows{status=\"failed\"} "
		    "%" PRId64 "\n", LOAD(&o->failed));
		age = LOAD(&o->oldest_ms);
		if (age >= 0)
			age += (clock_mono_us() / 1000) - at;
		metrics_family(&b, "outboxd_outbox_oldest_pending_age_seconds",
		    "gauge", "Age of the oldest pending outbox row; 0 when none "
		    "is pending.");
		metrics_printf(&b, "outboxd_outbox_oldest_pending_age_seconds "
		    "%" PRId64 ".%03" PRId64 "\n", age > 0 ? age / 1000 : 0,
		    age > 0 ? age % 1000 : 0);
		metrics_family(&b, "outboxd_relay_paused", "gauge",
		    "1 while publishing is paused (outbox_control.paused).");
		metrics_printf(&b, "outboxd_relay_paused %" PRId64 "\n",
		    LOAD(&o->paused));
	}

	metrics_family(&b, "outboxd_workers_up", "gauge",
	    "Worker processes of the current generation that are running.");
	metrics_printf(&b, "outboxd_workers_up %" PRId64 "\n",
	    LOAD(&m->workers_up));
	metrics_family(&b, "outboxd_workers_desired", "gauge",
	    "Worker processes the configuration asks for.");
	metrics_printf(&b, "outboxd_workers_desired %" PRId64 "\n",
	    LOAD(&m->workers_desired));

	metrics_family(&b, "outboxd_published_messages_total", "counter",
	    "Outbox messages handed to a sink, by sink and outcome (sent; "
	    "retry: to be tried again; failed: given up).");
	for (i = 0; i < NELEM(metrics_sink_names); i++)
		for (j = 0; j < METRICS_NOUTCOMES; j++)
			metrics_printf(&b, "outboxd_published_messages_total{"
			    "sink=\"%s\",outcome=\"%s\"} %" PRIu64 "\n",
			    metrics_sink_names[i], metrics_outcome_names[j],
			    LOAD(&m->published[i][j]));

	metrics_family(&b, "outboxd_publish_failures_total", "counter",
	    "Failed publish attempts, by reason class.");
	for (i = 0; i < SINK_NREASONS; i++)
		metrics_printf(&b, "outboxd_publish_failures_total{reason="
		    "\"%s\"} %" PRIu64 "\n", metrics_reason_names[i],
		    LOAD(&m->failures[i]));

	metrics_family(&b, "outboxd_publish_latency_seconds", "histogram",
	    "From an outbox row's created_at to the broker's "
	    "acknowledgement.");
	metrics_hist(&b, "outboxd_publish_latency_seconds", "",
	    &m->publish_latency, metrics_publish_bounds,
	    NELEM(metrics_publish_bounds));

	metrics_family(&b, "outboxd_sink_duration_seconds", "histogram",
	    "From handing a batch of outbox messages to the sink to the "
	    "broker's last answer for it, by sink.");
	for (i = 0; i < NELEM(metrics_sink_names); i++) {
		snprintf(labels, sizeof(labels), "sink=\"%s\"",
		    metrics_sink_names[i]);
		metrics_hist(&b, "outboxd_sink_duration_seconds", labels,
		    &m->sink_duration[i], metrics_sink_bounds,
		    NELEM(metrics_sink_bounds));
	}

	metrics_family(&b, "outboxd_consumer_messages_total", "counter",
	    "Queue messages handled by the consumers (processed: written; "
	    "duplicate: found written already; error: left for a retry; "
	    "skipped: an event type not in consumer.event_types, deleted "
	    "unwritten).");
	for (i = 0; i < METRICS_NCONSUMER; i++)
		metrics_printf(&b, "outboxd_consumer_messages_total{outcome="
		    "\"%s\"} %" PRIu64 "\n", metrics_consumer_names[i],
		    LOAD(&m->consumer[i]));

	metrics_family(&b, "outboxd_http_requests_total", "counter",
	    "HTTP requests answered, by route and status class.");
	for (i = 0; i < METRICS_NROUTES; i++)
		for (j = 0; j < 5; j++) {
			uint64_t	v = LOAD(&m->http_requests[i][j]);

			/* 1xx and 3xx are never answered: shown if seen */
			if ((j == 0 || j == 2) && v == 0)
				continue;
			metrics_printf(&b, "outboxd_http_requests_total{"
			    "route=\"%s\",code_class=\"%s\"} %" PRIu64 "\n",
			    metrics_route_names[i], metrics_class_names[j], v);
		}

	metrics_family(&b, "outboxd_http_request_duration_seconds",
	    "histogram", "Time from a complete request to its answer, by "
	    "route.");
	for (i = 0; i < METRICS_NROUTES; i++) {
		metrics_label_escape(esc, sizeof(esc), metrics_route_names[i]);
		snprintf(labels, sizeof(labels), "route=\"%s\"", esc);
		metrics_hist(&b, "outboxd_http_request_duration_seconds",
		    labels, &m->http_duration[i], metrics_http_bounds,
		    NELEM(metrics_http_bounds));
	}

	metrics_family(&b, "outboxd_http_accept_paused_total", "counter",
	    "Times an HTTP worker stopped accepting connections, by reason "
	    "(descriptors: accept() ran out of file descriptors, retried "
	    "after 250 ms; max_connections: http.max_connections open, until "
	    "one closes).");
	for (i = 0; i < METRICS_NPAUSE; i++)
		metrics_printf(&b, "outboxd_http_accept_paused_total{reason="
		    "\"%s\"} %" PRIu64 "\n", metrics_pause_names[i],
		    LOAD(&m->accept_paused[i]));

	metrics_family(&b, "outboxd_worker_restarts_total", "counter",
	    "Workers respawned by the master after they died, by role.");
	for (i = 0; i < METRICS_NROLES; i++)
		metrics_printf(&b, "outboxd_worker_restarts_total{role=\"%s\"} "
		    "%" PRIu64 "\n", metrics_role_names[i],
		    LOAD(&m->restarts[i]));

	metrics_family(&b, "outboxd_reloads_total", "counter",
	    "Configuration reloads (SIGHUP), by outcome.");
	metrics_printf(&b, "outboxd_reloads_total{outcome=\"ok\"} %" PRIu64
	    "\n", LOAD(&m->reloads[0]));
	metrics_printf(&b, "outboxd_reloads_total{outcome=\"failed\"} %"
	    PRIu64 "\n", LOAD(&m->reloads[1]));

	metrics_counter(&b, "outboxd_retention_deleted_rows_total",
	    "Sent rows deleted by retention (relay.retention).",
	    LOAD(&m->retention_rows));
	metrics_counter(&b, "outboxd_retention_errors_total",
	    "Retention deletes that failed.", LOAD(&m->retention_errors));
	metrics_counter(&b, "outboxd_handoff_rows_total",
	    "Rows an HTTP worker wrote already claimed and relay 1 took "
	    "without a claim of its own.", LOAD(&m->handoff_rows));
	metrics_counter(&b, "outboxd_handoff_failures_total",
	    "Rows written already claimed that could not be handed to relay "
	    "1; they are published when their lease ends.",
	    LOAD(&m->handoff_failed));
done:
	if (b.failed) {
		free(b.s);
		return NULL;
	}
	*len = b.len;
	return b.s;
}

/* ---- readiness ------------------------------------------------------- */

/*
 * Has the sink failed every publish for metrics_sink_unready_ms?  Then
 * say so after what why (size bytes) holds already and return 1, else 0.
 * Only the reason class is named: a broker's own text may carry a URL.
 */
static int
metrics_sink_failing(char *why, size_t size)
{
	int64_t	since, now, reason;
	size_t	n = strlen(why);

	if (metrics_sink_unready_ms == 0 ||
	    (since = LOAD(&metrics_shm->sink_failing_ms)) == 0 ||
	    (now = clock_mono_us() / 1000) - since < metrics_sink_unready_ms)
		return 0;
	reason = LOAD(&metrics_shm->sink_reason);
	snprintf(why + n, size - n, "%sthe sink is failing: every publish "
	    "for %" PRId64 " s has failed, the last with a %s error, and none "
	    "was sent (relay.unready_after %ld ms)", n ? "; " : "",
	    (now - since) / 1000, reason >= 0 && reason < SINK_NREASONS ?
	    metrics_reason_names[reason] : "other", metrics_sink_unready_ms);
	return 1;
}

int
metrics_ready(char *buf, size_t size, const char *db_down, size_t *len)
{
	struct metrics_outbox	*o;
	const char		*db = "ok", *schema = "ok", *sink = "ok";
	char			 err[METRICS_ERROR_MAX], why[512];
	cJSON			*j;
	int64_t			 at, state, up = 0, want = 0;
	size_t			 i;
	int			 ready = 1, ok, n;

	err[0] = '\0';
	why[0] = '\0';
	if (metrics_shm == NULL) {
		db = "unknown";
		ready = 0;
		snprintf(why, sizeof(why), "no shared metrics region");
	} else {
		o = &metrics_shm->outbox;
		at = __atomic_load_n(&o->at_ms, __ATOMIC_ACQUIRE);
		state = at != 0 ? LOAD(&o->state) : METRICS_DB_ERROR;
		for (i = 0; i + 1 < sizeof(err); i++)
			if ((err[i] = LOAD(&o->error[i])) == '\0')
				break;
		err[i] = '\0';
		up = LOAD(&metrics_shm->workers_up);
		want = LOAD(&metrics_shm->workers_desired);
		if (db_down != NULL) {
			db = "unreachable";
			schema = "unknown";
			snprintf(err, sizeof(err), "%s", db_down);
		} else if (at == 0) {
			db = "unknown";
			schema = "unknown";
			snprintf(err, sizeof(err), "not checked yet");
		} else if (state == METRICS_DB_NO_SCHEMA) {
			schema = "missing";
		} else if (state != METRICS_DB_OK) {
			db = "error";
			schema = "unknown";
		}
		if (strcmp(db, "ok") != 0) {
			ready = 0;
			snprintf(why, sizeof(why), "PostgreSQL: %s", err);
		} else if (strcmp(schema, "ok") != 0) {
			ready = 0;
			snprintf(why, sizeof(why), "the outboxd schema is "
			    "missing (apply sql/schema.sql): %s", err);
		}
		if (metrics_sink_failing(why, sizeof(why))) {
			sink = "failing";
			ready = 0;
		}
		if (up < want) {
			n = (int)strlen(why);
			snprintf(why + n, sizeof(why) - (size_t)n, "%s%" PRId64
			    " of %" PRId64 " workers are not running",
			    n ? "; " : "", want - up, want);
			ready = 0;
		}
	}
	if ((j = cJSON_CreateObject()) == NULL)
		return -1;
	ok = cJSON_AddStringToObject(j, "status", ready ? "ready" :
	    "not_ready") != NULL &&
	    (ready || (cJSON_AddStringToObject(j, "error", "not_ready") !=
	    NULL && cJSON_AddStringToObject(j, "message", why) != NULL)) &&
	    cJSON_AddStringToObject(j, "database", db) != NULL &&
	    cJSON_AddStringToObject(j, "schema", schema) != NULL &&
	    cJSON_AddStringToObject(j, "sink", sink) != NULL &&
	    cJSON_AddNumberToObject(j, "workers_up", (double)up) != NULL &&
	    cJSON_AddNumberToObject(j, "workers_desired", (double)want) !=
	    NULL && size <= INT_MAX &&
	    cJSON_PrintPreallocated(j, buf, (int)size, 0);
	cJSON_Delete(j);
	if (!ok)
		return -1;
	*len = strlen(buf);
	return ready ? 200 : 503;
}
