/*
 * conf_value.c - the checks of one value of outbox.conf that libconfuse
 * calls the moment it reads the value (validate callbacks), so that each
 * error carries the value's line: integer ranges, the enumerations,
 * listen addresses and URLs.  conf_dest_check.c and conf_wal.c have their
 * sections' own; conf.c checks what needs the whole file.
 */
#include "config.h"

#include <arpa/inet.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <confuse.h>
#include <curl/curl.h>

#include "outboxd.h"
#include "conf.h"

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

int
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
	char		*port, key[CONF_TITLE_MAX + 64];
	size_t		 n;

	if (v == NULL || *v == '\0')
		return 0;
	/* "sqs.queue_url", "destination hooks: url" */
	snprintf(key, sizeof(key), "%s%s%s%s%s", conf_section(cfg), t != NULL ?
	    " " : "", t != NULL ? t : "", t != NULL ? ": " : ".",
	    cfg_opt_name(opt));
	if (strncmp(v, "http://", 7) != 0 && strncmp(v, "https://", 8) != 0) {
		/* Only what comes before "://": the rest may hold
		 * credentials (user:password@host). */
		n = strcspn(v, ":/@");
		cfg_error(cfg, "%s: expected an http:// or https:// URL, not "
		    "one that starts \"%.*s%s\"", key, n > 16 ? 16 : (int)n,
		    v, v[n] == ':' ? ":" : "");
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
		cfg_error(cfg, "%s: not a URL libcurl can use: %s", key, why);
		return -1;
	}
	return 0;
}

void
conf_value_validators(cfg_t *cfg)
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
