/*
 * metrics_text.c - the Prometheus text exposition (format 0.0.4) of the
 * shared region (metrics.h): every family with its HELP and TYPE, the
 * counters of each destination under destination="NAME" and sink="SINK"
 * labels, the outbox figures last read from PostgreSQL (metrics_db.c).
 */
#include "config.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics.h"

/* A label value escaped, and a label set of two of them. */
#define METRICS_ESC_MAX		(2 * METRICS_DEST_NAME_MAX + 8)
#define METRICS_LABELS_MAX	(METRICS_ESC_MAX + 64)

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
	[METRICS_ROUTE_DESTINATIONS] = "/destinations",
	[METRICS_ROUTE_DESTINATION] = "/destinations/{name}",
	[METRICS_ROUTE_DEST_PAUSE] = "/destinations/{name}/pause",
	[METRICS_ROUTE_DEST_RESUME] = "/destinations/{name}/resume",
	[METRICS_ROUTE_DEST_REDRIVE] = "/destinations/{name}/redrive",
	[METRICS_ROUTE_REPLAY] = "/outbox/replay",
	[METRICS_ROUTE_REPLAYS] = "/outbox/replays",
	[METRICS_ROUTE_REPLAY_CANCEL] = "/outbox/replays/{id}/cancel",
	[METRICS_ROUTE_OTHER] = "other",
};
static const char *const metrics_class_names[] = {
	"1xx", "2xx", "3xx", "4xx", "5xx"
};
const char *const metrics_sink_names[4] = {
	[CONF_SINK_SQS] = "sqs",
	[CONF_SINK_HTTP] = "http",
	[CONF_SINK_SNS] = "sns",
	[CONF_SINK_PUBSUB] = "pubsub",
};
static const char *const metrics_outcome_names[METRICS_NOUTCOMES] = {
	[METRICS_PUBLISH_SENT] = "sent",
	[METRICS_PUBLISH_RETRY] = "retry",
	[METRICS_PUBLISH_FAILED] = "failed",
};
const char *const metrics_reason_names[SINK_NREASONS] = {
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

/*
 * The slots a family of destination series shows, in slot order, the
 * other's last: every destination ever given a slot for the counters
 * (one a reload removed keeps its last values), only the current ones
 * for the outbox figures (db).  Returns the count written to slots.
 */
static int
metrics_shown(int *slots, int db)
{
	int	i, k = 0, n = metrics_dest_count();

	for (i = 0; i < n; i++)
		if (!db || LOAD(&metrics_shm->dests[i].configured))
			slots[k++] = i;
	slots[k++] = METRICS_DEST_OTHER;
	return k;
}

/* destination="NAME",sink="SINK" of slot i into buf. */
static void
metrics_dest_labels(char *buf, size_t len, int i)
{
	char	esc[METRICS_ESC_MAX];

	metrics_label_escape(esc, sizeof(esc), metrics_dest_label(i));
	snprintf(buf, len, "destination=\"%s\",sink=\"%s\"", esc,
	    metrics_dest_sink(i));
}

/* The families of each destination's counters and histograms. */
static void
metrics_render_dests(struct metrics_buf *b)
{
	struct metrics_dest	*d;
	char			 labels[METRICS_LABELS_MAX];
	int			 slots[METRICS_MAX_DESTS + 1], n, i;
	size_t			 j;

	n = metrics_shown(slots, 0);
	metrics_family(b, "outboxd_published_messages_total", "counter",
	    "Outbox messages handed to a sink, by destination, its sink and "
	    "outcome (sent; retry: to be tried again; failed: given up).");
	for (i = 0; i < n; i++) {
		d = &metrics_shm->dests[slots[i]];
		metrics_dest_labels(labels, sizeof(labels), slots[i]);
		for (j = 0; j < METRICS_NOUTCOMES; j++)
			metrics_printf(b, "outboxd_published_messages_total{%s,"
			    "outcome=\"%s\"} %" PRIu64 "\n", labels,
			    metrics_outcome_names[j], LOAD(&d->published[j]));
	}
	metrics_family(b, "outboxd_replayed_messages_total", "counter",
	    "Replayed outbox messages (outboxctl replay) sent, by destination "
	    "and its sink; not in outboxd_published_messages_total's sent.");
	for (i = 0; i < n; i++) {
		d = &metrics_shm->dests[slots[i]];
		metrics_dest_labels(labels, sizeof(labels), slots[i]);
		metrics_printf(b, "outboxd_replayed_messages_total{%s} %" PRIu64
		    "\n", labels, LOAD(&d->replayed));
	}
	metrics_family(b, "outboxd_publish_failures_total", "counter",
	    "Failed publish attempts, by destination, its sink and reason "
	    "class.");
	for (i = 0; i < n; i++) {
		d = &metrics_shm->dests[slots[i]];
		metrics_dest_labels(labels, sizeof(labels), slots[i]);
		for (j = 0; j < SINK_NREASONS; j++)
			metrics_printf(b, "outboxd_publish_failures_total{%s,"
			    "reason=\"%s\"} %" PRIu64 "\n", labels,
			    metrics_reason_names[j], LOAD(&d->failures[j]));
	}
	metrics_family(b, "outboxd_publish_latency_seconds", "histogram",
	    "From an outbox row's created_at to the broker's "
	    "acknowledgement, by destination and its sink.");
	for (i = 0; i < n; i++) {
		metrics_dest_labels(labels, sizeof(labels), slots[i]);
		metrics_hist(b, "outboxd_publish_latency_seconds", labels,
		    &metrics_shm->dests[slots[i]].publish_latency,
		    metrics_publish_bounds, metrics_publish_nbounds);
	}
	metrics_family(b, "outboxd_sink_duration_seconds", "histogram",
	    "From handing a batch of outbox messages to the sink to the "
	    "broker's last answer for it, by destination and its sink.");
	for (i = 0; i < n; i++) {
		metrics_dest_labels(labels, sizeof(labels), slots[i]);
		metrics_hist(b, "outboxd_sink_duration_seconds", labels,
		    &metrics_shm->dests[slots[i]].sink_duration,
		    metrics_sink_bounds, metrics_sink_nbounds);
	}
}

/* The outbox figures of the last answer, at (monotonic ms). */
static void
metrics_render_outbox(struct metrics_buf *b, int64_t at)
{
	struct metrics_dest	*d;
	char			 esc[METRICS_ESC_MAX];
	int			 slots[METRICS_MAX_DESTS + 1], n, i;
	int64_t			 age, now = clock_mono_us() / 1000;

	n = metrics_shown(slots, 1);
	metrics_family(b, "outboxd_outbox_rows", "gauge",
	    "Outbox rows by destination (NULL: the default's; one not in "
	    "outbox.conf: \"" METRICS_DEST_OTHER_LABEL "\") and status, read "
	    "from PostgreSQL (cached up to 1 s).");
	for (i = 0; i < n; i++) {
		d = &metrics_shm->dests[slots[i]];
		metrics_label_escape(esc, sizeof(esc),
		    metrics_dest_label(slots[i]));
		metrics_printf(b, "outboxd_outbox_rows{destination=\"%s\","
		    "status=\"pending\"} %" PRId64 "\n", esc,
		    LOAD(&d->db_pending));
		metrics_printf(b, "outboxd_outbox_rows{destination=\"%s\","
		    "status=\"failed\"} %" PRId64 "\n", esc,
		    LOAD(&d->db_failed));
	}
	metrics_family(b, "outboxd_outbox_oldest_pending_age_seconds",
	    "gauge", "Age of the oldest pending outbox row, by destination; "
	    "0 when none is pending.");
	for (i = 0; i < n; i++) {
		d = &metrics_shm->dests[slots[i]];
		metrics_label_escape(esc, sizeof(esc),
		    metrics_dest_label(slots[i]));
		/* After a failed query the last known ages go on growing. */
		age = LOAD(&d->db_oldest_ms);
		if (age >= 0)
			age += now - at;
		metrics_printf(b, "outboxd_outbox_oldest_pending_age_seconds{"
		    "destination=\"%s\"} %" PRId64 ".%03" PRId64 "\n", esc,
		    age > 0 ? age / 1000 : 0, age > 0 ? age % 1000 : 0);
	}
	metrics_family(b, "outboxd_relay_paused", "gauge",
	    "1 while all publishing is paused (outbox_control.paused).");
	metrics_printf(b, "outboxd_relay_paused %" PRId64 "\n",
	    LOAD(&metrics_shm->outbox.paused));
	metrics_family(b, "outboxd_destination_paused", "gauge",
	    "1 while a destination is paused (outbox_paused_destinations).");
	for (i = 0; i + 1 < n; i++) {
		metrics_label_escape(esc, sizeof(esc),
		    metrics_dest_label(slots[i]));
		metrics_printf(b, "outboxd_destination_paused{destination="
		    "\"%s\"} %" PRId64 "\n", esc,
		    LOAD(&metrics_shm->dests[slots[i]].db_paused));
	}
}

char *
metrics_render(size_t *len)
{
	struct metrics_shm	*m = metrics_shm;
	struct metrics_outbox	*o;
	struct metrics_buf	 b;
	char			 esc[128], labels[160];
	int64_t			 at;
	size_t			 i, j;

	memset(&b, 0, sizeof(b));
	b.cap = 65536;
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
	 * known ones stay. */
	if (at != 0 && LOAD(&o->known))
		metrics_render_outbox(&b, at);

	metrics_family(&b, "outboxd_workers_up", "gauge",
	    "Worker processes of the current generation that are running.");
	metrics_printf(&b, "outboxd_workers_up %" PRId64 "\n",
	    LOAD(&m->workers_up));
	metrics_family(&b, "outboxd_workers_desired", "gauge",
	    "Worker processes the configuration asks for.");
	metrics_printf(&b, "outboxd_workers_desired %" PRId64 "\n",
	    LOAD(&m->workers_desired));

	metrics_render_dests(&b);
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
		    metrics_http_nbounds);
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
	for (i = 0; i < NELEM(metrics_role_names); i++)
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
	metrics_counter(&b, "outboxd_wal_bad_messages_total",
	    "relay.mode = \"wal\": logical decoding messages with the "
	    "configured prefix skipped (bad JSON, not transactional).",
	    LOAD(&m->wal_bad_messages));
	metrics_family(&b, "outboxd_wal_streaming", "gauge",
	    "relay.mode = \"wal\": relays streaming the slot (1: one reads, "
	    "the others stand by).");
	metrics_printf(&b, "outboxd_wal_streaming %" PRId64 "\n",
	    metrics_wal_streamers(m));
	metrics_family(&b, "outboxd_wal_slot_lag_bytes", "gauge",
	    "relay.mode = \"wal\": bytes of WAL between the server's end and "
	    "the slot's confirmed position, as the streaming relay saw them.");
	metrics_printf(&b, "outboxd_wal_slot_lag_bytes %" PRId64 "\n",
	    LOAD(&m->wal_lag_bytes));
	metrics_family(&b, "outboxd_wal_oldest_unacked_seconds", "gauge",
	    "relay.mode = \"wal\": age of the oldest streamed event not yet "
	    "acknowledged and recorded (0: none).");
	metrics_printf(&b, "outboxd_wal_oldest_unacked_seconds %.3f\n",
	    (double)LOAD(&m->wal_oldest_ms) / 1000);
done:
	if (b.failed) {
		free(b.s);
		return NULL;
	}
	*len = b.len;
	return b.s;
}

