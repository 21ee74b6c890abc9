/*
 * conf.c - the configuration file: its options, the parse and the copy
 * into struct conf (libconfuse is known only here and in conf_value.c,
 * conf_dest*.c, conf_wal.c and conf_aws.c).
 *
 * The file is parsed into a libconfuse tree, validated (single options by
 * validate callbacks so errors carry the line, conf_value.c; cross-option
 * rules after the parse), and copied into a plain struct conf that the
 * rest of the program reads.  -t, start-up and reload all go through conf_load(), so
 * they report the same errors the same way.
 *
 * The file is read by conf_text.c, not by libconfuse: only a regular file
 * of at most CONF_MAX_SIZE bytes without a NUL byte is handed to the
 * parser, so a FIFO, a device or a huge file cannot block or exhaust the
 * process.
 */
#include "config.h"

#include <sys/stat.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <confuse.h>

#include "outboxd.h"
#include "broker.h"
#include "conf.h"

#define CONF_ERR_MAX	512

/* Error text of the parse in progress; libconfuse reports through a
 * callback, and sections have no filename of their own. */
static char		 conf_errbuf[CONF_ERR_MAX];
static const char	*conf_errpath;
static const char	*conf_text;		/* the file being parsed */
static struct conf_secrets conf_secrets;	/* of the file being parsed */

/* "FILE:LINE: msg" (line 0: "FILE: msg") as the error of the parse,
 * unless there is one: the first error is the cause. */
static void
conf_seterr(int line, const char *msg)
{
	if (conf_errbuf[0] != '\0')
		return;
	if (line > 0)
		snprintf(conf_errbuf, sizeof(conf_errbuf), "%s:%d: %s",
		    conf_errpath, line, msg);
	else
		snprintf(conf_errbuf, sizeof(conf_errbuf), "%s: %s",
		    conf_errpath, msg);
}

static void
conf_errfunc(cfg_t *cfg, const char *fmt, va_list ap)
{
	const struct conf_span	*sp;
	char			 msg[CONF_ERR_MAX - 64], name[120];
	int			 line = cfg != NULL ? cfg->line : 0;

	if (conf_errbuf[0] != '\0')
		return;		/* keep the first error, it is the cause */
	vsnprintf(msg, sizeof(msg), fmt, ap);
	/* Never a secret in an error: on a line that sets one, or with text
	 * that could be part of one, say what is wrong without the text.
	 * (A destination's name, which the reworded ones show, is none.) */
	if (conf_dest_reword(msg, sizeof(msg)))
		;
	else if ((sp = conf_span_at(&conf_secrets, line)) != NULL)
		snprintf(msg, sizeof(msg), "the value of %s is malformed "
		    "(quote it)", conf_span_name(sp, name, sizeof(name)));
	else if ((sp = conf_span_quoted(&conf_secrets, msg, '\'', 3)) != NULL ||
	    conf_secrets.full)
		snprintf(msg, sizeof(msg), "syntax error (its text is not "
		    "shown: it may come from the value of %s)", sp != NULL ?
		    conf_span_name(sp, name, sizeof(name)) : "a secret key");
	/* libconfuse's own text names the option but not what it takes
	 * (matched in English only: a translated libconfuse gets no hint). */
	else if (strncmp(msg, "invalid boolean value", 21) == 0)
		snprintf(msg + strlen(msg), sizeof(msg) - strlen(msg), "%s",
		    " (expected true or false; also yes/no, on/off)");
	conf_seterr(line, msg);
}

void
conf_errorf(cfg_t *cfg, int line, const char *fmt, ...)
{
	const struct conf_span	*sp;
	va_list			 ap;
	char			 msg[CONF_ERR_MAX - 64], name[120];

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* A value shown may be a secret's text that a slip (a quote left
	 * open) made the value of another key. */
	if ((sp = conf_span_quoted(&conf_secrets, msg, '"', 8)) != NULL ||
	    conf_secrets.full)
		snprintf(msg, sizeof(msg), "a value is malformed (its text is "
		    "not shown: it may come from the value of %s)", sp != NULL ?
		    conf_span_name(sp, name, sizeof(name)) : "a secret key");
	conf_seterr(line > 0 ? line : cfg != NULL ? cfg->line : 0, msg);
}

int
conf_section_line(const char *section, const char *title)
{
	return conf_text != NULL ? conf_find_section(conf_text, section,
	    title) : 0;
}

int
conf_key_line(const char *section, const char *title, const char *key)
{
	return conf_text != NULL ? conf_find_key(conf_text, section, title,
	    key) : 0;
}

const char *
conf_key_at(const struct conf *c, const char *section, const char *key,
    char *buf, size_t len)
{
	int	line = key != NULL ? conf_key_line(section, NULL, key) : 0;

	if (line == 0)
		line = conf_section_line(section, NULL);
	if (line > 0)
		snprintf(buf, len, "%s:%d", c->path, line);
	else
		snprintf(buf, len, "%s", c->path);
	return buf;
}

static cfg_opt_t http_opts[] = {
	CFG_STR("listen", "127.0.0.1:8080", CFGF_NONE),
	CFG_INT("workers", 2, CFGF_NONE),
	CFG_INT("max_body_size", 65536, CFGF_NONE),
	CFG_INT("db_connections", 1, CFGF_NONE),
	CFG_INT("max_connections", 0, CFGF_NONE),
	CFG_INT("idempotency_ttl", 86400, CFGF_NONE),
	CFG_END()
};

static cfg_opt_t relay_opts[] = {
	CFG_INT("workers", 2, CFGF_NONE),
	CFG_INT("batch_size", 100, CFGF_NONE),
	CFG_INT("poll_interval", 1000, CFGF_NONE),
	CFG_INT("lease", 30000, CFGF_NONE),
	CFG_INT("timeout", 10000, CFGF_NONE),
	CFG_STR("sink", "sqs", CFGF_NONE),
	CFG_INT("max_attempts", 10, CFGF_NONE),
	CFG_INT("backoff_base", 1000, CFGF_NONE),
	CFG_INT("backoff_max", 300000, CFGF_NONE),
	CFG_INT("max_message_size", 262144, CFGF_NONE),
	CFG_INT("retention", 604800, CFGF_NONE),
	CFG_INT("replay_rate", 200, CFGF_NONE),
	CFG_BOOL("handoff", cfg_true, CFGF_NONE),
	CFG_INT("unready_after", 60000, CFGF_NONE),
	CFG_STR("default_destination", NULL, CFGF_NONE),
	CFG_STR("mode", "table", CFGF_NONE),		/* conf_wal.c */
	CFG_STR("wal_slot", "outboxd", CFGF_NONE),
	CFG_STR("wal_publication", "outboxd", CFGF_NONE),
	CFG_STR("wal_message_prefix", "outbox", CFGF_NONE),
	CFG_INT("wal_lag_warning", 1073741824, CFGF_NONE),
	CFG_END()
};

/* destination NAME { ... }: read by conf_dest.c.  0 = the sink's own
 * most (batch_size, concurrency) or relay.timeout (timeout). */
static cfg_opt_t destination_opts[] = {
	CFG_STR("sink", NULL, CFGF_NONE),
	CFG_STR("queue_url", NULL, CFGF_NONE),
	CFG_STR("topic_arn", NULL, CFGF_NONE),
	CFG_STR("url", NULL, CFGF_NONE),
	CFG_STR("secret", NULL, CFGF_NONE),
	CFG_STR("project", NULL, CFGF_NONE),
	CFG_STR("topic", NULL, CFGF_NONE),
	CFG_BOOL("ordering", cfg_false, CFGF_NONE),
	CFG_INT("batch_size", 0, CFGF_NONE),
	CFG_INT("timeout", 0, CFGF_NONE),
	CFG_INT("concurrency", 0, CFGF_NONE),
	CFG_END()
};

static cfg_opt_t webhook_opts[] = {
	CFG_STR("url", NULL, CFGF_NONE),
	CFG_STR("secret", NULL, CFGF_NONE),
	CFG_INT("timeout", 10000, CFGF_NONE),
	CFG_END()
};

/* listen = "" turns the admin API off; so does leaving token unset. */
static cfg_opt_t admin_opts[] = {
	CFG_STR("listen", "127.0.0.1:8081", CFGF_NONE),
	CFG_STR("token", NULL, CFGF_NONE),
	CFG_END()
};

static cfg_opt_t consumer_opts[] = {
	CFG_INT("workers", 1, CFGF_NONE),
	CFG_INT("wait_time", 20, CFGF_NONE),
	CFG_INT("max_messages", 10, CFGF_NONE),
	CFG_INT("concurrency", 4, CFGF_NONE),
	CFG_STR_LIST("event_types", "{order.created}", CFGF_NONE),
	CFG_END()
};

static cfg_opt_t aws_opts[] = {
	CFG_STR("region", NULL, CFGF_NONE),
	CFG_STR("endpoint_url", NULL, CFGF_NONE),
	CFG_STR("access_key_id", NULL, CFGF_NONE),
	CFG_STR("secret_access_key", NULL, CFGF_NONE),
	CFG_STR("session_token", NULL, CFGF_NONE),
	CFG_STR("profile", NULL, CFGF_NONE),
	CFG_STR("role_arn", NULL, CFGF_NONE),
	CFG_STR("external_id", NULL, CFGF_NONE),
	CFG_STR("role_session_name", NULL, CFGF_NONE),
	CFG_INT("duration_seconds", 0, CFGF_NONE),
	CFG_END()
};

static cfg_opt_t sqs_opts[] = {
	CFG_STR("queue_url", NULL, CFGF_NONE),
	CFG_STR("endpoint_url", NULL, CFGF_NONE),
	CFG_END()
};

static cfg_opt_t sns_opts[] = {
	CFG_STR("endpoint_url", NULL, CFGF_NONE),
	CFG_END()
};

/* pubsub {}: read by conf_dest.c. */
static cfg_opt_t pubsub_opts[] = {
	CFG_STR("endpoint_url", NULL, CFGF_NONE),
	CFG_END()
};

static cfg_opt_t dynamodb_opts[] = {
	CFG_STR("table", "fulfillments", CFGF_NONE),
	CFG_STR("endpoint_url", NULL, CFGF_NONE),
	CFG_END()
};

static cfg_opt_t top_opts[] = {
	CFG_STR("database", NULL, CFGF_NONE),
	CFG_INT("shutdown_timeout", 10000, CFGF_NONE),
	CFG_STR("pidfile", NULL, CFGF_NONE),
	CFG_STR("user", NULL, CFGF_NONE),
	CFG_STR("log_file", NULL, CFGF_NONE),
	CFG_STR("log_level", "info", CFGF_NONE),
	CFG_STR("log_format", "logfmt", CFGF_NONE),
	CFG_SEC("http", http_opts, CFGF_NONE),
	CFG_SEC("relay", relay_opts, CFGF_NONE),
	CFG_SEC("consumer", consumer_opts, CFGF_NONE),
	CFG_SEC("aws", aws_opts, CFGF_NONE),
	CFG_SEC("sqs", sqs_opts, CFGF_NONE),
	CFG_SEC("sns", sns_opts, CFGF_NONE),
	CFG_SEC("pubsub", pubsub_opts, CFGF_NONE),
	CFG_SEC("dynamodb", dynamodb_opts, CFGF_NONE),
	CFG_SEC("destination", destination_opts,
	    CFGF_MULTI | CFGF_TITLE | CFGF_NO_TITLE_DUPES),
	CFG_SEC("webhook", webhook_opts, CFGF_NONE),
	CFG_SEC("admin", admin_opts, CFGF_NONE),
	CFG_END()
};

static char *
conf_strdup_or_null(const char *s)
{
	if (s == NULL || *s == '\0')
		return NULL;
	return strdup(s);
}

/*
 * The admin API runs when admin.token is set (and listen is not "").  A
 * listen written in the file without a token is a mistake, not a wish
 * for an unprotected API: refuse it.
 */
#define CONF_TOKEN_MIN	16	/* characters of admin.token at least */
static int
conf_fill_admin(cfg_t *a, struct conf *c, char *err, size_t errlen)
{
	cfg_opt_t	*lo = cfg_getopt(a, "listen");
	char		 at[PATH_MAX + 16];

	c->admin.listen = conf_strdup_or_null(cfg_getstr(a, "listen"));
	c->admin.token = conf_strdup_or_null(cfg_getstr(a, "token"));
	if (c->admin.listen == NULL)
		return 0;
	if (conf_split_listen(c->admin.listen, &c->admin.host,
	    &c->admin.port) == -1) {
		snprintf(err, errlen, "%s: admin.listen: expected "
		    "\"host:port\"", conf_key_at(c, "admin", "listen", at,
		    sizeof(at)));
		return -1;
	}
	if (c->admin.token == NULL && lo != NULL &&
	    (lo->flags & CFGF_MODIFIED)) {
		snprintf(err, errlen, "%s: admin.listen is set but admin.token "
		    "is not: the admin API needs a bearer token (or set "
		    "listen = \"\" to turn it off)", conf_key_at(c, "admin",
		    "listen", at, sizeof(at)));
		return -1;
	}
	if (c->admin.token != NULL && strlen(c->admin.token) <
	    CONF_TOKEN_MIN) {
		snprintf(err, errlen, "%s: admin.token is shorter than %d "
		    "characters", conf_key_at(c, "admin", "token", at,
		    sizeof(at)), CONF_TOKEN_MIN);
		return -1;
	}
	return 0;
}

/*
 * consumer.event_types into c: the EventType attributes the consumers
 * write a fulfillment for.  An empty list would have them delete every
 * message unwritten: refused unless consumer.workers = 0 (no consumer
 * runs).
 */
static int
conf_fill_event_types(cfg_t *k, struct conf *c, char *err, size_t errlen)
{
	unsigned int	i, n = cfg_size(k, "event_types");

	if (n == 0 && c->consumer.workers > 0) {
		snprintf(err, errlen, "%s: consumer.event_types is empty: the "
		    "consumers would delete every message unwritten (list the "
		    "event types to write, or set consumer.workers = 0)",
		    c->path);
		return -1;
	}
	if (n == 0)
		return 0;
	if ((c->consumer.event_types = calloc(n,
	    sizeof(*c->consumer.event_types))) == NULL)
		goto oom;
	for (i = 0; i < n; i++) {
		if ((c->consumer.event_types[i] = strdup(cfg_getnstr(k,
		    "event_types", i))) == NULL)
			goto oom;
		c->consumer.n_event_types++;
	}
	return 0;

oom:
	snprintf(err, errlen, "%s: out of memory", c->path);
	return -1;
}

static int
conf_fill(cfg_t *cfg, struct conf *c, char *err, size_t errlen)
{
	cfg_t		*h = cfg_getsec(cfg, "http");
	cfg_t		*r = cfg_getsec(cfg, "relay");
	cfg_t		*k = cfg_getsec(cfg, "consumer");
	cfg_t		*q = cfg_getsec(cfg, "sqs");
	cfg_t		*d = cfg_getsec(cfg, "dynamodb");
	cfg_t		*w = cfg_getsec(cfg, "webhook");
	c->database = conf_strdup_or_null(cfg_getstr(cfg, "database"));
	if (c->database == NULL) {
		snprintf(err, errlen, "%s: database is not set (a libpq "
		    "conninfo string or postgresql:// URI)", c->path);
		return -1;
	}
	c->shutdown_timeout = cfg_getint(cfg, "shutdown_timeout");
	c->pidfile = conf_strdup_or_null(cfg_getstr(cfg, "pidfile"));
	c->user = conf_strdup_or_null(cfg_getstr(cfg, "user"));
	c->log_file = conf_strdup_or_null(cfg_getstr(cfg, "log_file"));
	c->log_level = log_level_parse(cfg_getstr(cfg, "log_level"));
	c->log_format = log_format_parse(cfg_getstr(cfg, "log_format"));
	if (conf_fill_admin(cfg_getsec(cfg, "admin"), c, err, errlen) == -1)
		return -1;

	c->http.listen = strdup(cfg_getstr(h, "listen"));
	if (c->http.listen == NULL || conf_split_listen(c->http.listen,
	    &c->http.host, &c->http.port) == -1) {
		snprintf(err, errlen, "%s: http.listen: expected \"host:port\"",
		    c->path);
		return -1;
	}
	c->http.workers = cfg_getint(h, "workers");
	c->http.max_body_size = cfg_getint(h, "max_body_size");
	c->http.db_connections = cfg_getint(h, "db_connections");
	c->http.max_connections = cfg_getint(h, "max_connections");
	c->http.idempotency_ttl = cfg_getint(h, "idempotency_ttl");
	if (c->http.workers > 0 && conf_check_nofile(c, err, errlen) == -1)
		return -1;

	c->relay.workers = cfg_getint(r, "workers");
	c->relay.batch_size = cfg_getint(r, "batch_size");
	c->relay.poll_interval = cfg_getint(r, "poll_interval");
	c->relay.lease = cfg_getint(r, "lease");
	c->relay.timeout = cfg_getint(r, "timeout");
	c->relay.sink = strcmp(cfg_getstr(r, "sink"), "http") == 0 ?
	    CONF_SINK_HTTP : CONF_SINK_SQS;
	c->relay.max_attempts = cfg_getint(r, "max_attempts");
	c->relay.backoff_base = cfg_getint(r, "backoff_base");
	c->relay.backoff_max = cfg_getint(r, "backoff_max");
	c->relay.max_message_size = cfg_getint(r, "max_message_size");
	c->relay.retention = cfg_getint(r, "retention");
	c->relay.replay_rate = cfg_getint(r, "replay_rate");
	c->relay.handoff = cfg_getbool(r, "handoff");
	c->relay.unready_after = cfg_getint(r, "unready_after");
	conf_wal_fill(r, c);
	c->webhook.url = conf_strdup_or_null(cfg_getstr(w, "url"));
	c->webhook.secret = conf_strdup_or_null(cfg_getstr(w, "secret"));
	c->webhook.timeout = cfg_getint(w, "timeout");
	if (c->relay.backoff_max < c->relay.backoff_base) {
		snprintf(err, errlen, "%s: relay.backoff_max (%ld ms) is "
		    "shorter than relay.backoff_base (%ld ms)", c->path,
		    c->relay.backoff_max, c->relay.backoff_base);
		return -1;
	}
	if (c->webhook.secret != NULL) {
		/* Catch a bad "whsec_" key now, not at every delivery. */
		if (!webhook_secret_ok(c->webhook.secret)) {
			snprintf(err, errlen, "%s: webhook.secret: a \"whsec_\""
			    " secret must be followed by base64 (at most 256 "
			    "bytes once decoded)", c->path);
			return -1;
		}
	}

	c->consumer.workers = cfg_getint(k, "workers");
	c->consumer.wait_time = cfg_getint(k, "wait_time");
	c->consumer.max_messages = cfg_getint(k, "max_messages");
	c->consumer.concurrency = cfg_getint(k, "concurrency");
	if (conf_fill_event_types(k, c, err, errlen) == -1)
		return -1;

	conf_aws_fill(cfg, c);
	c->sqs_queue_url = conf_strdup_or_null(cfg_getstr(q, "queue_url"));
	c->dynamodb_table = conf_strdup_or_null(cfg_getstr(d, "table"));
	if (conf_dest_fill(cfg, c, err, errlen) == -1)
		return -1;

	return conf_aws_check(c, err, errlen);
}

int
conf_load(const char *path, struct conf **out, char *err, size_t errlen)
{
	struct conf	*c;
	cfg_t		*cfg;
	char		*buf, *warning;
	size_t		 len;
	mode_t		 mode;
	int		 rv, line;

	*out = NULL;
	if ((buf = conf_read(path, &len, &mode, err, errlen)) == NULL)
		return -1;
	if ((line = conf_find_nul(buf, len)) > 0) {
		snprintf(err, errlen, "%s:%d: the file holds a NUL byte (a "
		    "configuration file is text)", path, line);
		free(buf);
		return -1;
	}
	/* A glued marker after a string left open is that string's fault. */
	if ((line = conf_strip_comments(buf)) > 0 &&
	    conf_find_open_quote(buf) == 0) {
		snprintf(err, errlen, "%s:%d: a comment marker ('#', '//' or "
		    "'/*') right after an unquoted value would cut it short: "
		    "quote the value", path, line);
		free(buf);
		return -1;
	}
	conf_scan_secrets(buf, &conf_secrets);
	if ((cfg = cfg_init(top_opts, CFGF_NONE)) == NULL) {
		snprintf(err, errlen, "%s: out of memory", path);
		free(buf);
		return -1;
	}
	cfg_set_error_function(cfg, conf_errfunc);
	conf_value_validators(cfg);
	conf_errbuf[0] = '\0';
	conf_errpath = path;
	conf_text = buf;

	rv = cfg_parse_buf(cfg, buf);
	conf_text = NULL;
	if (rv != CFG_SUCCESS) {
		if ((line = conf_find_open_quote(buf)) > 0)
			snprintf(err, errlen, "%s:%d: unterminated string "
			    "(a quote opened on this line is not closed on "
			    "it)", path, line);
		else if (conf_errbuf[0] != '\0')
			snprintf(err, errlen, "%s", conf_errbuf);
		else
			snprintf(err, errlen, "%s: parse error", path);
		free(buf);
		cfg_free(cfg);
		conf_secrets.n = 0;
		return -1;
	}
	warning = conf_mode_warning(path, mode, &conf_secrets);
	conf_secrets.n = 0;	/* the spans pointed into buf */

	if ((c = calloc(1, sizeof(*c))) == NULL ||
	    (c->path = strdup(path)) == NULL) {
		free(c);
		free(warning);
		cfg_free(cfg);
		free(buf);
		snprintf(err, errlen, "%s: out of memory", path);
		return -1;
	}
	c->mode_warning = warning;
	/* The text again, for the lines of checks across keys
	 * (conf_section_line()). */
	conf_text = buf;
	rv = conf_fill(cfg, c, err, errlen);
	conf_text = NULL;
	free(buf);
	cfg_free(cfg);
	if (rv == -1) {
		conf_free(c);
		return -1;
	}
	*out = c;
	return 0;
}

long
conf_sink_timeout(const struct conf *c)
{
	return c->relay.sink == CONF_SINK_HTTP ? c->webhook.timeout :
	    c->relay.timeout;
}

void
conf_free(struct conf *c)
{
	int	i;

	if (c == NULL)
		return;
	free(c->path);
	free(c->mode_warning);
	free(c->database);
	free(c->pidfile);
	free(c->user);
	free(c->log_file);
	free(c->http.listen);
	free(c->http.host);
	free(c->http.port);
	conf_aws_free(c);
	free(c->sqs_queue_url);
	free(c->dynamodb_table);
	for (i = 0; i < c->consumer.n_event_types; i++)
		free(c->consumer.event_types[i]);
	free(c->consumer.event_types);
	free(c->webhook.url);
	free(c->webhook.secret);
	conf_dest_free(c);
	free(c->admin.listen);
	free(c->admin.host);
	free(c->admin.port);
	if (c->admin.token != NULL) {
		explicit_bzero(c->admin.token, strlen(c->admin.token));
		free(c->admin.token);
	}
	free(c);
}
