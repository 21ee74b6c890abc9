/*
 * test_ops.c - the operator-facing pure parts: the Prometheus exposition
 * (counters, cumulative histograms, label escaping, series by
 * destination and the outbox figures folded by destination), the reason
 * class of a failed publish, readiness answers (by destination), JSON and rate-limited log lines,
 * the admin API's redrive body, the token comparison, and the admin and
 * log_format configuration keys.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <cjson/cJSON.h>
#include <libpq-fe.h>

#include "outboxd.h"
#include "broker.h"
#include "metrics_api.h"

/* The value of the sample line that starts with prefix, or -1. */
static double
sample(const char *text, const char *prefix)
{
	const char	*p = text;
	size_t		 n = strlen(prefix);

	while ((p = strstr(p, prefix)) != NULL) {
		if ((p == text || p[-1] == '\n') && p[n] == ' ')
			return strtod(p + n + 1, NULL);
		p += n;
	}
	return -1;
}

/* Two destinations, as conf_load() would make them; a reload's. */
static struct conf_destination test_dests[] = {
	{ .name = "default", .sink = CONF_SINK_SQS },
	{ .name = "hooks", .sink = CONF_SINK_HTTP },
};
static struct conf test_conf = {
	.destinations = test_dests, .n_destinations = 2,
	.default_destination = 0,
};
static struct conf_destination test_dests2[] = {
	{ .name = "default", .sink = CONF_SINK_SQS },
	{ .name = "topic", .sink = CONF_SINK_SNS },
};
static struct conf test_conf2 = {
	.destinations = test_dests2, .n_destinations = 2,
	.default_destination = 1,
};

/* A result of metrics_outbox_sql built by hand: rows of "kind|dest|
 * pending|failed|oldest", "-" for NULL. */
static PGresult *
outbox_result(const char *const *rows, int n)
{
	PGresAttDesc	 attrs[5];
	PGresult	*res;
	char		 buf[256], *f, *save;
	int		 i, k;

	memset(attrs, 0, sizeof(attrs));
	for (k = 0; k < 5; k++)
		attrs[k].name = (char *)"c";
	res = PQmakeEmptyPGresult(NULL, PGRES_TUPLES_OK);
	assert_non_null(res);
	assert_true(PQsetResultAttrs(res, 5, attrs));
	for (i = 0; i < n; i++) {
		snprintf(buf, sizeof(buf), "%s", rows[i]);
		for (k = 0, f = strtok_r(buf, "|", &save); f != NULL && k < 5;
		    k++, f = strtok_r(NULL, "|", &save))
			assert_true(PQsetvalue(res, i, k, strcmp(f, "-") == 0 ?
			    NULL : f, strcmp(f, "-") == 0 ? -1 :
			    (int)strlen(f)));
		assert_int_equal(k, 5);
	}
	return res;
}

static void
test_render_before_init(void **state)
{
	char	*s;
	size_t	 len;

	(void)state;
	/* No region yet: updates are no-ops, the exposition still parses. */
	metrics_http_request(METRICS_ROUTE_ORDERS, 201, 10);
	s = metrics_render(&len);
	assert_non_null(s);
	assert_int_equal(strlen(s), len);
	assert_non_null(strstr(s, "# TYPE outboxd_build_info gauge\n"));
	assert_null(strstr(s, "outboxd_http_requests_total"));
	free(s);
}

static void
test_counters_and_histograms(void **state)
{
	char	*s;
	size_t	 len;

	int	d0, d1;

	(void)state;
	assert_int_equal(metrics_init(), 0);
	metrics_destinations(&test_conf);
	d0 = metrics_dest(&test_dests[0]);
	d1 = metrics_dest(&test_dests[1]);
	assert_int_equal(d0, 0);
	assert_int_equal(d1, 1);
	assert_int_equal(metrics_dest(NULL), METRICS_DEST_OTHER);
	metrics_http_request(METRICS_ROUTE_ORDERS, 201, 300);	 /* 0.0005 */
	metrics_http_request(METRICS_ROUTE_ORDERS, 201, 2000);	 /* 0.0025 */
	metrics_http_request(METRICS_ROUTE_ORDERS, 400, 20000000); /* +Inf */
	metrics_published(d0, METRICS_PUBLISH_SENT, 7);
	metrics_published(d1, METRICS_PUBLISH_FAILED, 1);
	metrics_published(METRICS_DEST_OTHER, METRICS_PUBLISH_FAILED, 2);
	metrics_published(METRICS_DEST_OTHER + 1, METRICS_PUBLISH_SENT, 1);
	metrics_publish_failure(d1, SINK_REASON_THROTTLED);
	metrics_publish_latency(d0, 1500000);
	metrics_sink_duration(d1, 700);
	metrics_consumer(METRICS_CONSUMER_DUPLICATE);
	metrics_worker_restart("relay");
	metrics_worker_restart("nobody");
	metrics_reload(0);
	metrics_set_workers(4, 5);
	s = metrics_render(&len);
	assert_non_null(s);
	assert_true(sample(s, "outboxd_http_requests_total{route=\"/orders\","
	    "code_class=\"2xx\"}") == 2);
	assert_true(sample(s, "outboxd_http_requests_total{route=\"/orders\","
	    "code_class=\"4xx\"}") == 1);
	/* 1xx and 3xx only once seen */
	assert_null(strstr(s, "code_class=\"1xx\""));
	assert_true(sample(s, "outboxd_http_request_duration_seconds_bucket{"
	    "route=\"/orders\",le=\"0.0005\"}") == 1);
	assert_true(sample(s, "outboxd_http_request_duration_seconds_bucket{"
	    "route=\"/orders\",le=\"0.0025\"}") == 2);
	assert_true(sample(s, "outboxd_http_request_duration_seconds_bucket{"
	    "route=\"/orders\",le=\"10\"}") == 2);
	assert_true(sample(s, "outboxd_http_request_duration_seconds_bucket{"
	    "route=\"/orders\",le=\"+Inf\"}") == 3);
	assert_true(sample(s, "outboxd_http_request_duration_seconds_count{"
	    "route=\"/orders\"}") == 3);
	assert_non_null(strstr(s, "outboxd_http_request_duration_seconds_sum{"
	    "route=\"/orders\"} 20.002300\n"));
	/* by destination and its sink; rows naming none under "(other)" */
	assert_true(sample(s, "outboxd_published_messages_total{destination="
	    "\"default\",sink=\"sqs\",outcome=\"sent\"}") == 7);
	assert_true(sample(s, "outboxd_published_messages_total{destination="
	    "\"default\",sink=\"sqs\",outcome=\"failed\"}") == 0);
	assert_true(sample(s, "outboxd_published_messages_total{destination="
	    "\"hooks\",sink=\"http\",outcome=\"failed\"}") == 1);
	assert_true(sample(s, "outboxd_published_messages_total{destination="
	    "\"(other)\",sink=\"none\",outcome=\"failed\"}") == 2);
	assert_true(sample(s, "outboxd_published_messages_total{destination="
	    "\"(other)\",sink=\"none\",outcome=\"sent\"}") == 0);
	assert_true(sample(s, "outboxd_publish_failures_total{destination="
	    "\"hooks\",sink=\"http\",reason=\"throttled\"}") == 1);
	assert_true(sample(s, "outboxd_publish_failures_total{destination="
	    "\"default\",sink=\"sqs\",reason=\"throttled\"}") == 0);
	assert_true(sample(s, "outboxd_publish_latency_seconds_bucket{"
	    "destination=\"default\",sink=\"sqs\",le=\"1\"}") == 0);
	assert_true(sample(s, "outboxd_publish_latency_seconds_bucket{"
	    "destination=\"default\",sink=\"sqs\",le=\"2.5\"}") == 1);
	assert_true(sample(s, "outboxd_publish_latency_seconds_count{"
	    "destination=\"hooks\",sink=\"http\"}") == 0);
	assert_true(sample(s, "outboxd_sink_duration_seconds_bucket{"
	    "destination=\"hooks\",sink=\"http\",le=\"0.001\"}") == 1);
	assert_true(sample(s, "outboxd_sink_duration_seconds_count{"
	    "destination=\"default\",sink=\"sqs\"}") == 0);
	/* one family each, not one per destination */
	assert_null(strstr(strstr(s, "# TYPE outboxd_published_messages_total")
	    + 1, "# TYPE outboxd_published_messages_total"));
	assert_true(sample(s, "outboxd_consumer_messages_total{outcome="
	    "\"duplicate\"}") == 1);
	assert_true(sample(s, "outboxd_worker_restarts_total{role="
	    "\"relay\"}") == 1);
	assert_true(sample(s, "outboxd_reloads_total{outcome=\"failed\"}") ==
	    1);
	assert_true(sample(s, "outboxd_workers_up") == 4);
	/* no outbox figures before a query answered */
	assert_null(strstr(s, "outboxd_outbox_rows"));
	assert_true(sample(s, "outboxd_database_up") == 0);
	/* every family has HELP and TYPE, every line ends */
	assert_non_null(strstr(s, "# HELP outboxd_publish_latency_seconds "));
	assert_non_null(strstr(s, "# TYPE outboxd_publish_latency_seconds "
	    "histogram\n"));
	assert_int_equal(s[len - 1], '\n');
	free(s);
}

static void
test_label_escape(void **state)
{
	char	buf[64];

	(void)state;
	assert_int_equal(metrics_label_escape(buf, sizeof(buf),
	    "a\"b\\c\nd"), 10);
	assert_string_equal(buf, "a\\\"b\\\\c\\nd");
	/* cut, never overrun */
	metrics_label_escape(buf, 6, "abcdefgh");
	assert_true(strlen(buf) < 6);
}

/* Each failure's reason is set where it is seen: an SQS call that failed
 * as a whole (aws_failure_reason), an entry SQS failed
 * (sqs_send_batch_parse), a webhook answer (webhook_reason). */
static void
test_publish_reason(void **state)
{
	struct outbox_msg	 m[2];
	cJSON			*reply;

	(void)state;
	assert_int_equal(aws_failure_reason(0, NULL,
	    "Connection refused"), SINK_REASON_TRANSPORT);
	assert_int_equal(webhook_reason(0, SINK_RETRY, ""),
	    SINK_REASON_TRANSPORT);
	assert_int_equal(aws_failure_reason(500, "InternalError", "boom"),
	    SINK_REASON_SERVER);
	assert_int_equal(aws_failure_reason(400, "ThrottlingException",
	    "slow down"), SINK_REASON_THROTTLED);
	assert_int_equal(webhook_reason(429, SINK_RETRY, "too many"),
	    SINK_REASON_THROTTLED);
	assert_int_equal(aws_failure_reason(400, "QueueDoesNotExist",
	    "gone"), SINK_REASON_CLIENT);
	assert_int_equal(webhook_reason(422, SINK_REJECTED, "nope"),
	    SINK_REASON_REJECTED);
	/* one entry the sender's fault, one SQS's own */
	memset(m, 0, sizeof(m));
	m[0].id = 1;
	m[1].id = 2;
	reply = cJSON_Parse("{\"Failed\":["
	    "{\"Id\":\"1\",\"Code\":\"InvalidMessageContents\","
	    "\"Message\":\"bad\",\"SenderFault\":true},"
	    "{\"Id\":\"2\",\"Code\":\"InternalError\","
	    "\"Message\":\"injected\",\"SenderFault\":false}]}");
	assert_non_null(reply);
	assert_int_equal(sqs_send_batch_parse(reply, m, 2), 0);
	assert_int_equal(m[0].reason, SINK_REASON_REJECTED);
	assert_int_equal(m[1].reason, SINK_REASON_SERVER);
	free(m[0].error);
	free(m[1].error);
	cJSON_Delete(reply);
}

static void
test_ready(void **state)
{
	char		 buf[1024];
	size_t		 len;
	PGresult	*res;
	cJSON		*j;

	(void)state;
	assert_int_equal(metrics_init(), 0);
	/* never checked */
	metrics_set_workers(5, 5);
	assert_int_equal(metrics_ready(buf, sizeof(buf), NULL, &len), 503);
	/* a failed query: not ready, the message says why */
	res = PQmakeEmptyPGresult(NULL, PGRES_FATAL_ERROR);
	metrics_outbox_store(res);
	PQclear(res);
	assert_int_equal(metrics_ready(buf, sizeof(buf), NULL, &len), 503);
	j = cJSON_Parse(buf);
	assert_non_null(j);
	assert_string_equal(cJSON_GetObjectItem(j, "status")->valuestring,
	    "not_ready");
	assert_string_equal(cJSON_GetObjectItem(j, "error")->valuestring,
	    "not_ready");
	assert_string_equal(cJSON_GetObjectItem(j, "database")->valuestring,
	    "error");
	cJSON_Delete(j);
	/* this worker has no connection */
	assert_int_equal(metrics_ready(buf, sizeof(buf), "no \"link\"", &len),
	    503);
	j = cJSON_Parse(buf);
	assert_non_null(j);
	assert_non_null(strstr(cJSON_GetObjectItem(j, "message")->valuestring,
	    "no \"link\""));
	cJSON_Delete(j);
	assert_int_equal(strlen(buf), len);
}

/* The outbox figures by destination: NULL is the default's, names the
 * configuration lacks are the other's (however many), paused ones of
 * ours are shown; then a reload that drops one and adds another. */
static void
test_outbox_by_destination(void **state)
{
	static const char *const rows[] = {
		"0|-|3|1|5000", "0|default|2|0|9250", "0|hooks|4|2|100",
		"0|typo-1|1|0|50", "0|typo-2|0|3|-", "1|hooks|-|-|-",
		"1|nope|-|-|-", "2|-|1|-|-",
	};
	PGresult	*res;
	char		*s;
	size_t		 len;
	int		 d1;

	(void)state;
	assert_int_equal(metrics_init(), 0);
	metrics_destinations(&test_conf);
	d1 = metrics_dest(&test_dests[1]);
	metrics_published(d1, METRICS_PUBLISH_SENT, 5);
	res = outbox_result(rows, 8);
	metrics_outbox_store(res);
	PQclear(res);
	s = metrics_render(&len);
	assert_non_null(s);
	assert_true(sample(s, "outboxd_outbox_rows{destination=\"default\","
	    "status=\"pending\"}") == 5);
	assert_true(sample(s, "outboxd_outbox_rows{destination=\"default\","
	    "status=\"failed\"}") == 1);
	assert_true(sample(s, "outboxd_outbox_rows{destination=\"hooks\","
	    "status=\"pending\"}") == 4);
	assert_true(sample(s, "outboxd_outbox_rows{destination=\"(other)\","
	    "status=\"pending\"}") == 1);
	assert_true(sample(s, "outboxd_outbox_rows{destination=\"(other)\","
	    "status=\"failed\"}") == 3);
	assert_null(strstr(s, "typo"));
	assert_null(strstr(s, "nope"));
	/* the oldest of the two default groups, grown since the answer */
	assert_true(sample(s, "outboxd_outbox_oldest_pending_age_seconds{"
	    "destination=\"default\"}") >= 9.25);
	assert_true(sample(s, "outboxd_outbox_oldest_pending_age_seconds{"
	    "destination=\"default\"}") < 10);
	assert_true(sample(s, "outboxd_outbox_oldest_pending_age_seconds{"
	    "destination=\"(other)\"}") < 1);
	assert_true(sample(s, "outboxd_destination_paused{destination="
	    "\"hooks\"}") == 1);
	assert_true(sample(s, "outboxd_destination_paused{destination="
	    "\"default\"}") == 0);
	assert_true(sample(s, "outboxd_relay_paused") == 1);
	free(s);

	/* the reload: hooks gone (its counters stay), topic the default */
	metrics_destinations(&test_conf2);
	assert_int_equal(metrics_dest(&test_dests2[1]), 2);
	res = outbox_result(rows, 8);
	metrics_outbox_store(res);
	PQclear(res);
	s = metrics_render(&len);
	assert_non_null(s);
	assert_true(sample(s, "outboxd_published_messages_total{destination="
	    "\"hooks\",sink=\"http\",outcome=\"sent\"}") >= 5);
	assert_true(sample(s, "outboxd_published_messages_total{destination="
	    "\"topic\",sink=\"sns\",outcome=\"sent\"}") == 0);
	/* NULL rows are topic's now; hooks' rows are the other's */
	assert_true(sample(s, "outboxd_outbox_rows{destination=\"topic\","
	    "status=\"pending\"}") == 3);
	assert_true(sample(s, "outboxd_outbox_rows{destination=\"default\","
	    "status=\"pending\"}") == 2);
	assert_true(sample(s, "outboxd_outbox_rows{destination=\"(other)\","
	    "status=\"pending\"}") == 5);
	assert_true(sample(s, "outboxd_outbox_rows{destination=\"hooks\","
	    "status=\"pending\"}") == -1);
	assert_true(sample(s, "outboxd_destination_paused{destination="
	    "\"hooks\"}") == -1);
	free(s);
	metrics_destinations(&test_conf);
}

/* A state of /readyz's destinations, or NULL. */
static const char *
ready_state(const cJSON *j, const char *name)
{
	const cJSON	*d;

	cJSON_ArrayForEach(d, cJSON_GetObjectItem(j, "destinations"))
		if (strcmp(cJSON_GetObjectItem(d, "name")->valuestring,
		    name) == 0)
			return cJSON_GetObjectItem(d, "state")->valuestring;
	return NULL;
}

/* /readyz by destination: another one failing is a warning, the
 * default failing is 503, a paused one is neither. */
static void
test_ready_destinations(void **state)
{
	static const char *const ok_rows[] = { "2|-|0|-|-" };
	static const char *const paused_rows[] = { "1|default|-|-|-",
		"2|-|0|-|-" };
	char		 buf[METRICS_READY_MAX];
	size_t		 len;
	PGresult	*res;
	cJSON		*j;
	int		 d0, d1;

	(void)state;
	assert_int_equal(metrics_init(), 0);
	metrics_destinations(&test_conf);
	d0 = metrics_dest(&test_dests[0]);
	d1 = metrics_dest(&test_dests[1]);
	metrics_set_workers(5, 5);
	metrics_set_sink_unready(1);
	res = outbox_result(ok_rows, 1);
	metrics_outbox_store(res);
	PQclear(res);
	metrics_sink_outcome(d0, 1, 0);
	metrics_sink_outcome(d1, 0, SINK_REASON_SERVER);
	usleep(5000);
	assert_int_equal(metrics_ready(buf, sizeof(buf), NULL, &len), 200);
	j = cJSON_Parse(buf);
	assert_non_null(j);
	assert_string_equal(cJSON_GetObjectItem(j, "sink")->valuestring, "ok");
	assert_string_equal(ready_state(j, "hooks"), "failing");
	assert_string_equal(ready_state(j, "default"), "ok");
	assert_non_null(strstr(cJSON_GetObjectItem(j, "warning")->valuestring,
	    "destination \"hooks\" (http) is failing"));
	assert_non_null(strstr(cJSON_GetObjectItem(j, "warning")->valuestring,
	    "a server error"));
	cJSON_Delete(j);

	/* the default fails too: 503, both named */
	metrics_sink_outcome(d0, 0, SINK_REASON_TRANSPORT);
	usleep(5000);
	assert_int_equal(metrics_ready(buf, sizeof(buf), NULL, &len), 503);
	j = cJSON_Parse(buf);
	assert_non_null(j);
	assert_string_equal(cJSON_GetObjectItem(j, "sink")->valuestring,
	    "failing");
	assert_non_null(strstr(cJSON_GetObjectItem(j, "message")->valuestring,
	    "the default destination \"default\" (sqs) is failing"));
	assert_non_null(strstr(cJSON_GetObjectItem(j, "message")->valuestring,
	    "\"hooks\""));
	cJSON_Delete(j);

	/* paused by the operator: not failing */
	res = outbox_result(paused_rows, 2);
	metrics_outbox_store(res);
	PQclear(res);
	assert_int_equal(metrics_ready(buf, sizeof(buf), NULL, &len), 200);
	j = cJSON_Parse(buf);
	assert_non_null(j);
	assert_string_equal(ready_state(j, "default"), "paused");
	assert_string_equal(cJSON_GetObjectItem(j, "sink")->valuestring,
	    "paused");
	cJSON_Delete(j);

	/* a publish sent: ok again, no warning left once hooks sends */
	res = outbox_result(ok_rows, 1);
	metrics_outbox_store(res);
	PQclear(res);
	metrics_sink_outcome(d0, 1, 0);
	metrics_sink_outcome(d1, 1, 0);
	assert_int_equal(metrics_ready(buf, sizeof(buf), NULL, &len), 200);
	j = cJSON_Parse(buf);
	assert_non_null(j);
	assert_null(cJSON_GetObjectItem(j, "warning"));
	assert_string_equal(ready_state(j, "hooks"), "ok");
	cJSON_Delete(j);
	metrics_set_sink_unready(0);
}

/* Read the log file written since the last truncate. */
static char *
slurp(const char *path)
{
	static char	buf[8192];
	FILE		*fp = fopen(path, "r");
	size_t		 n;

	assert_non_null(fp);
	n = fread(buf, 1, sizeof(buf) - 1, fp);
	buf[n] = '\0';
	fclose(fp);
	return buf;
}

/* A line longer than the 4 KB limit is cut between characters, in both
 * formats, however many bytes its escapes take (a control character is
 * six in JSON): a message of control characters and emoji in JSON, a
 * field of emoji in logfmt, each with 0-3 bytes of padding before. */
static void
test_log_cut_utf8(void **state)
{
	char	 path[] = "/tmp/outboxd-log-XXXXXX", msg[1200], field[3700];
	char	*text;
	int	 fd, pad, format, i, off;

	(void)state;
	fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	log_init("http", 1);
	for (i = 0; i < 900; i++)
		memcpy(field + 4 * i, "\xf0\x9f\x98\x80", 4);
	field[3600] = '\0';
	for (format = LOG_FORMAT_LOGFMT; format <= LOG_FORMAT_JSON;
	    format++) {
		log_set_format(format);
		for (pad = 0; pad < 4; pad++) {
			assert_int_equal(log_open(path), 0);
			off = 0;
			for (i = 0; i < pad; i++)
				msg[off++] = 'a';
			for (i = 0; i < 600; i++)
				msg[off++] = '\x01';
			for (i = 0; i < 100; i++) {
				memcpy(msg + off, "\xf0\x9f\x98\x80", 4);
				off += 4;
			}
			msg[off] = '\0';
			if (format == LOG_FORMAT_JSON)
				log_warnx("%s", msg);
			else
				log_kv(LOG_LEVEL_WARN, (const char *[]){
				    "detail", field, NULL }, "%s", msg + 600);
			text = slurp(path);
			assert_true(strlen(text) > 3000);
			assert_true(order_utf8_valid((unsigned char *)text,
			    strlen(text)));
			if (format == LOG_FORMAT_JSON) {
				cJSON	*j = cJSON_Parse(text);

				assert_non_null(j);
				cJSON_Delete(j);
			}
			assert_int_equal(truncate(path, 0), 0);
		}
	}
	log_set_format(LOG_FORMAT_LOGFMT);
	assert_int_equal(log_open(NULL), 0);
	unlink(path);
}

static void
test_log_json_and_limit(void **state)
{
	char			 path[] = "/tmp/outboxd-log-XXXXXX";
	struct log_limit	 rl;
	cJSON			*j;
	char			*text;
	int			 fd;

	(void)state;
	fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(log_open(path), 0);
	log_init("relay", 2);
	log_set_format(LOG_FORMAT_JSON);
	log_kv(LOG_LEVEL_WARN, (const char *[]){ "outbox_id", "42",
	    "ordering_key", "k \"1\"", "skipped", NULL, NULL },
	    "publish failed: %s", "HTTP 500");
	text = slurp(path);
	j = cJSON_Parse(text);
	assert_non_null(j);
	assert_string_equal(cJSON_GetObjectItem(j, "level")->valuestring,
	    "warn");
	assert_string_equal(cJSON_GetObjectItem(j, "role")->valuestring,
	    "relay.2");
	assert_true(cJSON_IsNumber(cJSON_GetObjectItem(j, "pid")));
	assert_string_equal(cJSON_GetObjectItem(j, "msg")->valuestring,
	    "publish failed: HTTP 500");
	assert_string_equal(cJSON_GetObjectItem(j, "outbox_id")->valuestring,
	    "42");
	assert_string_equal(cJSON_GetObjectItem(j, "ordering_key")->
	    valuestring, "k \"1\"");
	assert_null(cJSON_GetObjectItem(j, "skipped"));
	/* RFC 3339 UTC with milliseconds */
	assert_int_equal(strlen(cJSON_GetObjectItem(j, "time")->valuestring),
	    24);
	assert_int_equal(cJSON_GetObjectItem(j, "time")->valuestring[23], 'Z');
	cJSON_Delete(j);

	/* logfmt: fields after msg, quoted only when needed */
	assert_int_equal(truncate(path, 0), 0);
	log_set_format(LOG_FORMAT_LOGFMT);
	log_kv(LOG_LEVEL_INFO, (const char *[]){ "order_id", "ab-12",
	    "note", "two words", NULL }, "done");
	text = slurp(path);
	assert_non_null(strstr(text, " msg=\"done\" order_id=ab-12 "
	    "note=\"two words\"\n"));
	assert_non_null(strstr(text, "role=relay.2 pid="));

	/* DEL and the C1 controls (U+009B begins a terminal's control
	 * sequence) are never written raw; U+00A0 is no control */
	assert_int_equal(truncate(path, 0), 0);
	log_kv(LOG_LEVEL_INFO, (const char *[]){ "ordering_key",
	    "k\x7f\xc2\x9b[2J\xc2\x85\xc2\xa0", NULL }, "x");
	text = slurp(path);
	assert_non_null(strstr(text, " ordering_key=\"k  [2J \xc2\xa0\"\n"));
	assert_int_equal(truncate(path, 0), 0);
	log_set_format(LOG_FORMAT_JSON);
	log_kv(LOG_LEVEL_INFO, (const char *[]){ "ordering_key",
	    "k\x7f\xc2\x9b[2J\xc2\xa0", NULL }, "x");
	text = slurp(path);
	assert_non_null(strstr(text, "\"ordering_key\":\"k\\u007f\\u009b[2J"
	    "\xc2\xa0\""));
	log_set_format(LOG_FORMAT_LOGFMT);

	/* rate limit: one line, then a count on the next one written */
	assert_int_equal(truncate(path, 0), 0);
	memset(&rl, 0, sizeof(rl));
	log_limited(&rl, LOG_LEVEL_WARN, "broker down %d", 1);
	log_limited(&rl, LOG_LEVEL_WARN, "broker down %d", 2);
	log_limited(&rl, LOG_LEVEL_WARN, "broker down %d", 3);
	text = slurp(path);
	assert_non_null(strstr(text, "broker down 1"));
	assert_null(strstr(text, "broker down 2"));
	rl.next = 1;		/* the window is over */
	log_limited(&rl, LOG_LEVEL_WARN, "broker down %d", 4);
	text = slurp(path);
	assert_non_null(strstr(text, "broker down 4 (2 more like it were not logged)"));
	log_limited(&rl, LOG_LEVEL_WARN, "broker down %d", 5);
	log_limit_end(&rl, NULL, "SendMessageBatch");
	text = slurp(path);
	assert_non_null(strstr(text, "SendMessageBatch works again; 1 more"));
	/* the end is said even when no line was held back */
	assert_int_equal(truncate(path, 0), 0);
	log_limited(&rl, LOG_LEVEL_WARN, "broker down %d", 6);
	log_limit_end(&rl, NULL, "PutItem");
	text = slurp(path);
	assert_non_null(strstr(text, "PutItem works again\""));
	assert_null(strstr(text, "more failure line"));
	log_limit_end(&rl, NULL, "PutItem");	/* no failure since: silent */
	assert_int_equal(truncate(path, 0), 0);
	log_limit_end(&rl, NULL, "PutItem");
	text = slurp(path);
	assert_null(strstr(text, "works again"));
	assert_int_equal(log_format_parse("json"), LOG_FORMAT_JSON);
	assert_int_equal(log_format_parse("logfmt"), LOG_FORMAT_LOGFMT);
	assert_int_equal(log_format_parse("xml"), -1);
	log_open(NULL);
	unlink(path);
}

static void
test_redrive_parse(void **state)
{
	struct admin_redrive	 sel;
	char			 err[256];
	static const char *const bad[] = {
		"", "[]", "{}", "{\"all\":false}", "{\"all\":true,\"ids\":[1]}",
		"{\"ids\":[]}", "{\"ids\":[0]}", "{\"ids\":[1.5]}",
		"{\"ids\":[\"1\"]}", "{\"event_type\":\"\"}",
		"{\"event_type\":3}", "{\"every\":true}",
		"{\"destination\":\"hooks\"}",
		"{\"all\":true,\"destination\":1}",
	};
	size_t			 i;

	(void)state;
	assert_int_equal(admin_redrive_parse("{\"all\":true}", 12, &sel, err,
	    sizeof(err)), 0);
	assert_true(sel.all);
	admin_redrive_clear(&sel);
	assert_int_equal(admin_redrive_parse("{\"ids\":[3,1,9007199254740991]}",
	    31, &sel, err, sizeof(err)), 0);
	assert_int_equal(sel.nids, 3);
	assert_true(sel.ids[2] == INT64_C(9007199254740991));
	admin_redrive_clear(&sel);
	assert_int_equal(admin_redrive_parse("{\"event_type\":\"order.created\"}",
	    31, &sel, err, sizeof(err)), 0);
	assert_string_equal(sel.event_type, "order.created");
	assert_null(sel.destination);
	admin_redrive_clear(&sel);
	assert_int_equal(admin_redrive_parse("{\"destination\":\"hooks\","
	    "\"all\":true}", 34, &sel, err, sizeof(err)), 0);
	assert_true(sel.all);
	assert_string_equal(sel.destination, "hooks");
	admin_redrive_clear(&sel);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		assert_int_equal(admin_redrive_parse(bad[i], strlen(bad[i]),
		    &sel, err, sizeof(err)), -1);
		assert_true(err[0] != '\0');
		assert_null(sel.ids);
		assert_null(sel.event_type);
		assert_null(sel.destination);
	}
}

/* Names in admin URLs and outboxctl operands: 400 if they cannot be one,
 * 404 if the configuration lacks them. */
static void
test_dest_check(void **state)
{
	char	err[512], longname[66];

	(void)state;
	test_conf.path = "/etc/outbox.conf";
	assert_int_equal(admin_dest_check(&test_conf, "hooks", err,
	    sizeof(err)), 0);
	assert_int_equal(admin_dest_check(&test_conf, "hook", err,
	    sizeof(err)), -2);
	assert_non_null(strstr(err, "no destination \"hook\""));
	assert_int_equal(admin_dest_check(&test_conf, "", err, sizeof(err)),
	    -1);
	assert_int_equal(admin_dest_check(&test_conf, "a\nb", err,
	    sizeof(err)), -1);
	assert_int_equal(admin_dest_check(&test_conf, "\xff", err,
	    sizeof(err)), -1);
	/* outbox.conf's rule: a space, a name of 65 characters */
	assert_int_equal(admin_dest_check(&test_conf, "bad name", err,
	    sizeof(err)), -1);
	assert_string_equal(err, "a destination name is 1 to 64 characters "
	    "of A-Z, a-z, 0-9, '_', '.' and '-'");
	memset(longname, 'x', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	assert_int_equal(admin_dest_check(&test_conf, longname, err,
	    sizeof(err)), -1);
	longname[64] = '\0';
	assert_int_equal(admin_dest_check(&test_conf, longname, err,
	    sizeof(err)), -2);
	test_conf.path = NULL;
}

static void
test_token_equal(void **state)
{
	(void)state;
	assert_true(admin_token_equal("0123456789abcdef", "0123456789abcdef"));
	assert_false(admin_token_equal("0123456789abcdef", "0123456789abcdeF"));
	assert_false(admin_token_equal("0123456789abcdef", "0123456789abcde"));
	assert_false(admin_token_equal("", "x"));
	assert_false(admin_token_equal(NULL, "x"));
}

static const char *
write_conf(char *path, const char *text)
{
	FILE	*fp;
	int	 fd;

	fd = mkstemp(path);
	assert_true(fd >= 0);
	fp = fdopen(fd, "w");
	assert_non_null(fp);
	fputs(text, fp);
	fclose(fp);
	return path;
}

static void
test_admin_conf(void **state)
{
	static const char	 base[] = "database = \"dbname=x\"\n"
				    "relay { workers = 0 }\n"
				    "consumer { workers = 0 }\n";
	struct conf		*c;
	char			 path[64], text[512], err[512];

	(void)state;
	/* default: listen on loopback, but off without a token */
	snprintf(path, sizeof(path), "/tmp/outboxd-ops-XXXXXX");
	assert_int_equal(conf_load(write_conf(path, base), &c, err,
	    sizeof(err)), 0);
	assert_string_equal(c->admin.listen, "127.0.0.1:8081");
	assert_null(c->admin.token);
	assert_int_equal(c->log_format, LOG_FORMAT_LOGFMT);
	conf_free(c);
	unlink(path);

	/* listen written without a token: refused */
	snprintf(text, sizeof(text), "%sadmin { listen = \"127.0.0.1:9\" }\n",
	    base);
	snprintf(path, sizeof(path), "/tmp/outboxd-ops-XXXXXX");
	assert_int_equal(conf_load(write_conf(path, text), &c, err,
	    sizeof(err)), -1);
	assert_non_null(strstr(err, "admin.token"));
	unlink(path);

	/* a short token: refused */
	snprintf(text, sizeof(text), "%sadmin { token = \"short\" }\n", base);
	snprintf(path, sizeof(path), "/tmp/outboxd-ops-XXXXXX");
	assert_int_equal(conf_load(write_conf(path, text), &c, err,
	    sizeof(err)), -1);
	unlink(path);

	/* on, json logs; listen = "" turns it off */
	snprintf(text, sizeof(text), "%slog_format = \"json\"\n"
	    "admin { listen = \"[::1]:8099\" token = \"0123456789abcdef\" }\n",
	    base);
	snprintf(path, sizeof(path), "/tmp/outboxd-ops-XXXXXX");
	assert_int_equal(conf_load(write_conf(path, text), &c, err,
	    sizeof(err)), 0);
	assert_string_equal(c->admin.host, "::1");
	assert_string_equal(c->admin.port, "8099");
	assert_string_equal(c->admin.token, "0123456789abcdef");
	assert_int_equal(c->log_format, LOG_FORMAT_JSON);
	conf_free(c);
	unlink(path);
	snprintf(text, sizeof(text), "%sadmin { listen = \"\" "
	    "token = \"0123456789abcdef\" }\n", base);
	snprintf(path, sizeof(path), "/tmp/outboxd-ops-XXXXXX");
	assert_int_equal(conf_load(write_conf(path, text), &c, err,
	    sizeof(err)), 0);
	assert_null(c->admin.listen);
	conf_free(c);
	unlink(path);

	/* a bad log_format names the line */
	snprintf(text, sizeof(text), "%slog_format = \"xml\"\n", base);
	snprintf(path, sizeof(path), "/tmp/outboxd-ops-XXXXXX");
	assert_int_equal(conf_load(write_conf(path, text), &c, err,
	    sizeof(err)), -1);
	assert_non_null(strstr(err, ":4: log_format"));
	unlink(path);
}

/* log_utf8_copy() cuts at a character, never inside one, and keeps a last
 * character that fits whole. */
static void
test_utf8_copy(void **state)
{
	char	buf[8];

	(void)state;
	assert_string_equal(log_utf8_copy(buf, 3, "a\xc3\xa9"), "a");
	assert_string_equal(log_utf8_copy(buf, 4, "a\xc3\xa9"), "a\xc3\xa9");
	assert_string_equal(log_utf8_copy(buf, 4, "a\xe2\x82\xac"), "a");
	assert_string_equal(log_utf8_copy(buf, 5, "a\xe2\x82\xac!"),
	    "a\xe2\x82\xac");
	assert_string_equal(log_utf8_copy(buf, 5, "a\xf0\x9f\x98\x80"), "a");
	assert_string_equal(log_utf8_copy(buf, 6, "a\xf0\x9f\x98\x80"),
	    "a\xf0\x9f\x98\x80");
	assert_string_equal(log_utf8_copy(buf, 3, "abcd"), "ab");
	assert_string_equal(log_utf8_copy(buf, 8, "short"), "short");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_render_before_init),
		cmocka_unit_test(test_counters_and_histograms),
		cmocka_unit_test(test_label_escape),
		cmocka_unit_test(test_publish_reason),
		cmocka_unit_test(test_ready),
		cmocka_unit_test(test_outbox_by_destination),
		cmocka_unit_test(test_ready_destinations),
		cmocka_unit_test(test_log_json_and_limit),
		cmocka_unit_test(test_log_cut_utf8),
		cmocka_unit_test(test_utf8_copy),
		cmocka_unit_test(test_redrive_parse),
		cmocka_unit_test(test_dest_check),
		cmocka_unit_test(test_token_equal),
		cmocka_unit_test(test_admin_conf),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
