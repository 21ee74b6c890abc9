/*
 * conf.c - the configuration file: the only file that knows libconfuse.
 *
 * The file is parsed into a libconfuse tree, validated (single options by
 * validate callbacks so errors carry the line, cross-option rules after
 * the parse), and copied into a plain struct conf that the rest of the
 * program reads.  -t, start-up and reload all go through conf_load(), so
 * they report the same errors the same way.
 *
 * The file is read by conf_text.c, not by libconfuse: only a regular file
 * of at most CONF_MAX_SIZE bytes without a NUL byte is handed to the
 * parser, so a FIFO, a device or a huge file cannot block or exhaust the
 * process.
 */
#include "config.h"

#include <sys/stat.h>

#include <arpa/inet.h>

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <confuse.h>
#include <curl/curl.h>

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

/* Section name for messages; "" at the top level. */
static const char *
conf_section(cfg_t *cfg)
{
	const char	*n = cfg_name(cfg);

	return (n == NULL || strcmp(n, "root") == 0) ? "" : n;
}

/* Range check for an integer option; libconfuse calls it right after the
 * value is read, so the error carries the right line. */
static int
conf_check_range(cfg_t *cfg, cfg_opt_t *opt, long min, long max)
{
	long	v = cfg_opt_getnint(opt, cfg_opt_size(opt) - 1);

	if (v < min || v > max) {
		cfg_error(cfg, "%s%s%s = %ld is out of range (%ld..%ld)",
		    conf_section(cfg), *conf_section(cfg) ? "." : "",
		    cfg_opt_name(opt), v, min, max);
		return -1;
	}
	return 0;
}

#define CONF_RANGE(fn, min, max)					\
static int								\
fn(cfg_t *cfg, cfg_opt_t *opt)						\
{									\
	return conf_check_range(cfg, opt, (min), (max));		\
}

CONF_RANGE(conf_v_workers, 0, 64)
CONF_RANGE(conf_v_body, 64, 64L * 1024 * 1024)
CONF_RANGE(conf_v_dbconns, 1, 64)
CONF_RANGE(conf_v_batch, 1, 1000)
CONF_RANGE(conf_v_poll, 10, 3600L * 1000)
CONF_RANGE(conf_v_lease, 1000, 24L * 3600 * 1000)
CONF_RANGE(conf_v_timeout, 100, 600L * 1000)
CONF_RANGE(conf_v_wait, 0, 20)
CONF_RANGE(conf_v_maxmsg, 1, 10)
CONF_RANGE(conf_v_batches, 1, 16)
CONF_RANGE(conf_v_shutdown, 0, 3600L * 1000)
CONF_RANGE(conf_v_attempts, 1, 1000)
CONF_RANGE(conf_v_backoff, 10, 24L * 3600 * 1000)
CONF_RANGE(conf_v_msgsize, 1024, 1024L * 1024)
CONF_RANGE(conf_v_retention, 0, 3650L * 24 * 3600)
CONF_RANGE(conf_v_hooktimeout, 100, 600L * 1000)
CONF_RANGE(conf_v_maxconns, 0, 1048576)
CONF_RANGE(conf_v_unready, 0, 24L * 3600 * 1000)
CONF_RANGE(conf_v_idemttl, 1, 30L * 24 * 3600)
CONF_RANGE(conf_v_replayrate, 1, 100000)

static int
conf_v_sink(cfg_t *cfg, cfg_opt_t *opt)
{
	const char	*v = cfg_opt_getnstr(opt, 0);

	if (v == NULL || (strcmp(v, "sqs") != 0 && strcmp(v, "http") != 0)) {
		cfg_error(cfg, "relay.sink = \"%s\": expected \"sqs\" or "
		    "\"http\"", v ? v : "");
		return -1;
	}
	return 0;
}

/* Each of consumer.event_types is a non-empty string; libconfuse calls
 * this as each element is read (so the error has its line) and once for
 * the whole list.  An empty list is refused by conf_fill(). */
static int
conf_v_event_types(cfg_t *cfg, cfg_opt_t *opt)
{
	unsigned int	 n = cfg_opt_size(opt);
	const char	*v;

	if (n == 0)
		return 0;
	v = cfg_opt_getnstr(opt, n - 1);
	if (v == NULL || *v == '\0') {
		cfg_error(cfg, "consumer.event_types: element %u is an empty "
		    "string (expected event types such as \"order.created\")",
		    n);
		return -1;
	}
	return 0;
}

static int
conf_v_logformat(cfg_t *cfg, cfg_opt_t *opt)
{
	const char	*v = cfg_opt_getnstr(opt, 0);

	if (v == NULL || log_format_parse(v) == -1) {
		cfg_error(cfg, "log_format = \"%s\": expected \"logfmt\" or "
		    "\"json\"", v ? v : "");
		return -1;
	}
	return 0;
}

static int
conf_v_loglevel(cfg_t *cfg, cfg_opt_t *opt)
{
	const char	*v = cfg_opt_getnstr(opt, 0);

	if (v == NULL || log_level_parse(v) == -1) {
		cfg_error(cfg, "log_level = \"%s\": expected debug, info, "
		    "warn or error", v ? v : "");
		return -1;
	}
	return 0;
}

/*
 * Split "host:port", "[v6]:port", "*:port" or ":port" into host and port.
 * Returns -1 on a malformed value.  *host and *port are malloc'd.
 */
static int
conf_split_listen(const char *s, char **host, char **port)
{
	const char	*colon, *h, *hend;
	char		*end;
	long		 p;
	struct in6_addr	 a6;

	if (s[0] == '[') {
		hend = strchr(s, ']');
		if (hend == NULL || hend[1] != ':')
			return -1;
		h = s + 1;
		colon = hend + 1;
	} else {
		colon = strrchr(s, ':');
		if (colon == NULL)
			return -1;
		h = s;
		hend = colon;
	}
	errno = 0;
	p = strtol(colon + 1, &end, 10);
	if (colon[1] == '\0' || *end != '\0' || errno != 0 || p < 1 ||
	    p > 65535)
		return -1;
	if (hend == h || (hend - h == 1 && *h == '*'))
		*host = NULL;		/* all addresses */
	else if ((*host = strndup(h, hend - h)) == NULL)
		return -1;
	/* "[...]" holds an IPv6 address, not a name to look up. */
	if (s[0] == '[' && *host != NULL &&
	    inet_pton(AF_INET6, *host, &a6) != 1) {
		free(*host);
		return -1;
	}
	if ((*port = strdup(colon + 1)) == NULL) {
		free(*host);
		return -1;
	}
	return 0;
}

static int
conf_v_listen(cfg_t *cfg, cfg_opt_t *opt)
{
	const char	*v = cfg_opt_getnstr(opt, 0);
	char		*h = NULL, *p = NULL;

	if (v == NULL || conf_split_listen(v, &h, &p) == -1) {
		cfg_error(cfg, "listen = \"%s\": expected \"host:port\"",
		    v ? v : "");
		return -1;
	}
	free(h);
	free(p);
	return 0;
}

/* Like listen, but "" (off) is allowed. */
static int
conf_v_admin_listen(cfg_t *cfg, cfg_opt_t *opt)
{
	const char	*v = cfg_opt_getnstr(opt, 0);

	if (v != NULL && *v == '\0')
		return 0;
	return conf_v_listen(cfg, opt);
}

int
conf_check_url(cfg_t *cfg, cfg_opt_t *opt)
{
	const char	*v = cfg_opt_getnstr(opt, 0), *t = cfg_title(cfg);
	const char	*why;
	CURLU		*u;
	CURLUcode	 rc;
	char		*port;
	size_t		 n;

	if (v == NULL || *v == '\0')
		return 0;
	if (strncmp(v, "http://", 7) != 0 && strncmp(v, "https://", 8) != 0) {
		/* Only what comes before "://": the rest may hold
		 * credentials (user:password@host). */
		n = strcspn(v, ":/@");
		cfg_error(cfg, "%s%s%s%s%s: expected an http:// or https:// "
		    "URL, not one that starts \"%.*s%s\"", conf_section(cfg),
		    t != NULL ? " " : "", t != NULL ? t : "", t != NULL ?
		    ": " : ".", cfg_opt_name(opt), n > 16 ? 16 : (int)n, v,
		    v[n] == ':' ? ":" : "");
		return -1;
	}
	/* libcurl's own parser, the one that will send to it: a URL it
	 * refuses (no host, a bad port or IPv6 address) would fail every
	 * request instead of start-up.  Its reason, never the URL. */
	if ((u = curl_url()) == NULL)
		fatal("curl_url");
	rc = curl_url_set(u, CURLUPART_URL, v, 0);
	why = rc != CURLUE_OK ? curl_url_strerror(rc) : NULL;
	/* libcurl reads "http:///x" as host "x", and takes port 0. */
	if (why == NULL && v[strcspn(v, ":") + 3] == '/')
		why = curl_url_strerror(CURLUE_NO_HOST);
	else if (why == NULL && curl_url_get(u, CURLUPART_PORT, &port, 0) ==
	    CURLUE_OK) {
		if (strcmp(port, "0") == 0)
			why = "port 0 is no port to send to";
		curl_free(port);
	}
	curl_url_cleanup(u);
	if (why != NULL) {
		cfg_error(cfg, "%s%s%s%s%s: not a URL libcurl can use: %s",
		    conf_section(cfg), t != NULL ? " " : "", t != NULL ? t :
		    "", t != NULL ? ": " : ".", cfg_opt_name(opt), why);
		return -1;
	}
	return 0;
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

static void
conf_set_validators(cfg_t *cfg)
{
	cfg_set_validate_func(cfg, "shutdown_timeout", conf_v_shutdown);
	cfg_set_validate_func(cfg, "log_level", conf_v_loglevel);
	cfg_set_validate_func(cfg, "log_format", conf_v_logformat);
	cfg_set_validate_func(cfg, "http|listen", conf_v_listen);
	cfg_set_validate_func(cfg, "admin|listen", conf_v_admin_listen);
	cfg_set_validate_func(cfg, "http|workers", conf_v_workers);
	cfg_set_validate_func(cfg, "http|max_body_size", conf_v_body);
	cfg_set_validate_func(cfg, "http|db_connections", conf_v_dbconns);
	cfg_set_validate_func(cfg, "http|max_connections", conf_v_maxconns);
	cfg_set_validate_func(cfg, "http|idempotency_ttl", conf_v_idemttl);
	cfg_set_validate_func(cfg, "relay|workers", conf_v_workers);
	cfg_set_validate_func(cfg, "relay|batch_size", conf_v_batch);
	cfg_set_validate_func(cfg, "relay|poll_interval", conf_v_poll);
	cfg_set_validate_func(cfg, "relay|lease", conf_v_lease);
	cfg_set_validate_func(cfg, "relay|timeout", conf_v_timeout);
	cfg_set_validate_func(cfg, "relay|sink", conf_v_sink);
	cfg_set_validate_func(cfg, "relay|max_attempts", conf_v_attempts);
	cfg_set_validate_func(cfg, "relay|backoff_base", conf_v_backoff);
	cfg_set_validate_func(cfg, "relay|backoff_max", conf_v_backoff);
	cfg_set_validate_func(cfg, "relay|max_message_size", conf_v_msgsize);
	cfg_set_validate_func(cfg, "relay|retention", conf_v_retention);
	cfg_set_validate_func(cfg, "relay|replay_rate", conf_v_replayrate);
	cfg_set_validate_func(cfg, "relay|unready_after", conf_v_unready);
	cfg_set_validate_func(cfg, "webhook|url", conf_check_url);
	cfg_set_validate_func(cfg, "webhook|timeout", conf_v_hooktimeout);
	cfg_set_validate_func(cfg, "consumer|workers", conf_v_workers);
	cfg_set_validate_func(cfg, "consumer|wait_time", conf_v_wait);
	cfg_set_validate_func(cfg, "consumer|max_messages", conf_v_maxmsg);
	cfg_set_validate_func(cfg, "consumer|concurrency", conf_v_batches);
	cfg_set_validate_func(cfg, "consumer|event_types", conf_v_event_types);
	cfg_set_validate_func(cfg, "aws|endpoint_url", conf_check_url);
	cfg_set_validate_func(cfg, "sqs|queue_url", conf_check_url);
	cfg_set_validate_func(cfg, "sqs|endpoint_url", conf_check_url);
	cfg_set_validate_func(cfg, "dynamodb|endpoint_url", conf_check_url);
	cfg_set_validate_func(cfg, "sns|endpoint_url", conf_check_url);
	cfg_set_validate_func(cfg, "pubsub|endpoint_url", conf_check_url);
	conf_dest_validators(cfg);
	conf_wal_validators(cfg);
}

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
		char	sig[WEBHOOK_SIG_LEN + 1];

		/* Catch a bad "whsec_" key now, not at every delivery. */
		if (webhook_sign(c->webhook.secret, "0", 0, "", 0, sig,
		    sizeof(sig)) == -1) {
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
	conf_set_validators(cfg);
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
