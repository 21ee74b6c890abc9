/*
 * conf_dest_check.c - destination NAME {} sections as libconfuse reads
 * them: each key is checked the moment it is read (validate callbacks),
 * so that an error carries its line, and libconfuse's own messages about
 * the sections are reworded.  What each sink = takes, and the rule of a
 * destination's name.  conf_dest.c builds the destinations once the file
 * is read.
 *
 * The rules are outbox.conf(5)'s DESTINATIONS; a change here is a change
 * there.
 */
#include "config.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <confuse.h>

#include "outboxd.h"
#include "broker.h"
#include "conf.h"

/* A destination's timeout (ms): the limits of relay.timeout and
 * webhook.timeout (conf.c). */
#define CONF_DEST_TIMEOUT_MIN	100
#define CONF_DEST_TIMEOUT_MAX	(600L * 1000)

/*
 * What a destination of each sink = takes.  max_batch and slots are the
 * sinks' own (struct sink in src/sink_*.c; test_conf.c checks that they
 * agree), written here because the configuration is also read where the
 * sinks are not linked in (fuzz_conf).
 */
static const struct conf_dest_sink {
	const char	*name;
	int		 kind;		/* enum conf_sink */
	int		 max_batch;
	int		 slots;
	const char	*keys[2];	/* its own keys, both required */
	const char	*optional;	/* an own key it may go without */
} conf_dest_sinks[] = {
	{ "sqs", CONF_SINK_SQS, 10, 16, { "queue_url", NULL }, NULL },
	{ "sns", CONF_SINK_SNS, 10, 16, { "topic_arn", NULL }, NULL },
	{ "http", CONF_SINK_HTTP, 4, 4, { "url", "secret" }, NULL },
	{ "pubsub", CONF_SINK_PUBSUB, 10, 16, { "project", "topic" },
	    "ordering" },
};
#define CONF_DEST_SINK_NAMES	"\"sqs\", \"sns\", \"http\" or \"pubsub\""
#define CONF_DEST_NSINKS	\
	(sizeof(conf_dest_sinks) / sizeof(conf_dest_sinks[0]))

static const struct conf_dest_sink *
conf_dest_sink_named(const char *name)
{
	size_t	i;

	for (i = 0; name != NULL && i < CONF_DEST_NSINKS; i++)
		if (strcmp(conf_dest_sinks[i].name, name) == 0)
			return &conf_dest_sinks[i];
	return NULL;
}

static const struct conf_dest_sink *
conf_dest_sink_kind(int kind)
{
	size_t	i;

	for (i = 0; i < CONF_DEST_NSINKS; i++)
		if (conf_dest_sinks[i].kind == kind)
			return &conf_dest_sinks[i];
	return NULL;
}

int
conf_dest_sink_of(const char *name)
{
	const struct conf_dest_sink	*s = conf_dest_sink_named(name);

	return s != NULL ? s->kind : -1;
}

/* The sink whose own key key is (queue_url: sqs), or NULL (a key every
 * sink takes). */
static const struct conf_dest_sink *
conf_dest_owner(const char *key)
{
	size_t	i, k;

	for (i = 0; i < CONF_DEST_NSINKS; i++) {
		for (k = 0; k < 2; k++)
			if (conf_dest_sinks[i].keys[k] != NULL &&
			    strcmp(conf_dest_sinks[i].keys[k], key) == 0)
				return &conf_dest_sinks[i];
		if (conf_dest_sinks[i].optional != NULL &&
		    strcmp(conf_dest_sinks[i].optional, key) == 0)
			return &conf_dest_sinks[i];
	}
	return NULL;
}

int
conf_dest_limits(int kind, int *max_batch, int *slots)
{
	const struct conf_dest_sink	*s = conf_dest_sink_kind(kind);

	if (s == NULL)
		return -1;
	*max_batch = s->max_batch;
	*slots = s->slots;
	return 0;
}

int
conf_destination_name_ok(const char *n)
{
	size_t	len = strlen(n), i;

	if (len < 1 || len > CONF_TITLE_MAX)
		return 0;
	for (i = 0; i < len; i++)
		if (!isalnum((unsigned char)n[i]) && n[i] != '_' &&
		    n[i] != '.' && n[i] != '-')
			return 0;
	return 1;
}

const char *
conf_dest_shown(const char *v, char *buf, size_t len)
{
	size_t	i;

	for (i = 0; v[i] != '\0' && i < 64 && i + 4 < len; i++)
		buf[i] = v[i] >= ' ' && v[i] <= '~' && v[i] != '"' ? v[i] :
		    '?';
	snprintf(buf + i, len - i, "%s", v[i] != '\0' ? "..." : "");
	return buf;
}

/* The line where the destination section sec opens (0 if not found: the
 * line being parsed).  Only for an error: it reads the file. */
static int
conf_dest_line(cfg_t *sec)
{
	return conf_section_line("destination", cfg_title(sec));
}

/* -1 after the error if the name of sec (a destination NAME {} being
 * parsed) breaks the rule; its checks all start with this one, so the
 * messages they give show a good name. */
static int
conf_dest_v_name(cfg_t *sec)
{
	const char	*t = cfg_title(sec);
	char		 shown[80];

	if (t != NULL && conf_destination_name_ok(t))
		return 0;
	conf_errorf(sec, conf_dest_line(sec), "destination \"%s\": a "
	    "destination's name is %s", conf_dest_shown(t != NULL ? t : "",
	    shown, sizeof(shown)), CONF_DESTINATION_NAME_RULE);
	return -1;
}

int
conf_dest_set(cfg_t *sec, const char *key)
{
	cfg_opt_t	*opt = cfg_getopt(sec, key);
	const char	*v;

	if (opt != NULL && opt->type == CFGT_BOOL)
		return (opt->flags & CFGF_MODIFIED) != 0;
	v = cfg_getstr(sec, key);
	return v != NULL && *v != '\0';
}

/*
 * A project ID as Google Cloud makes them: 6 to 30 lowercase letters,
 * digits and '-', starting with a letter, not ending with '-'; a
 * domain-scoped project ("example.com:my-project") has its domain before
 * a ':' (Resource Manager: Creating and managing projects).
 */
static int
conf_dest_project_ok(const char *v)
{
	const char	*p = strrchr(v, ':');
	size_t		 n;

	if (p != NULL) {
		if (p == v || strspn(v, "abcdefghijklmnopqrstuvwxyz0123456789"
		    ".-") != (size_t)(p - v))
			return 0;
		v = p + 1;
	}
	n = strlen(v);
	return n >= 6 && n <= 30 && islower((unsigned char)v[0]) &&
	    v[n - 1] != '-' && strspn(v, "abcdefghijklmnopqrstuvwxyz"
	    "0123456789-") == n;
}

/*
 * A topic ID as Pub/Sub takes it: 3 to 255 characters of letters,
 * digits and "-_.~+%", starting with a letter, not with "goog" (Pub/Sub:
 * Resource names).  '%' must start a %XX escape there; refusing it here
 * keeps the URL outboxd builds free of escapes.
 */
static int
conf_dest_topic_ok(const char *v)
{
	size_t	n = strlen(v);

	return n >= 3 && n <= 255 && isalpha((unsigned char)v[0]) &&
	    strncasecmp(v, "goog", 4) != 0 && strspn(v,
	    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	    "-_.~+") == n;
}

/*
 * 0 if key, as sec sets it, fits sink s: a key of another sink's is not
 * set, batch_size and concurrency are within s's most.  Else -1 after
 * the error, at the line being parsed.
 */
static int
conf_dest_fits(cfg_t *sec, const struct conf_dest_sink *s, const char *key)
{
	const struct conf_dest_sink	*o;
	long				 v, max;

	if (strcmp(key, "batch_size") == 0 || strcmp(key, "concurrency") ==
	    0) {
		max = key[0] == 'b' ? s->max_batch : s->slots;
		if ((v = cfg_getint(sec, key)) <= max)
			return 0;
		conf_errorf(sec, 0, "destination %s: %s = %ld is out of range "
		    "(1..%ld for sink = \"%s\")", cfg_title(sec), key, v, max,
		    s->name);
		return -1;
	}
	if ((o = conf_dest_owner(key)) == NULL || o == s ||
	    !conf_dest_set(sec, key))
		return 0;
	conf_errorf(sec, 0, "destination %s: %s is a key of sink = \"%s\", "
	    "not of sink = \"%s\"", cfg_title(sec), key, o->name, s->name);
	return -1;
}

/*
 * arn:PARTITION:sns:REGION:ACCOUNT:NAME, as AWS writes a topic's ARN:
 * ACCOUNT is 12 digits, NAME 1 to 256 letters, digits, '-' and '_', the
 * name of a FIFO topic ending in ".fifo" (AWS SNS API: CreateTopic).
 */
static int
conf_dest_arn_ok(const char *v)
{
	const char	*p = v;
	size_t		 n, len;

	if (strncmp(p, "arn:", 4) != 0)
		return 0;
	p += 4;
	if ((n = strspn(p, "abcdefghijklmnopqrstuvwxyz-")) == 0 ||
	    strncmp(p + n, ":sns:", 5) != 0)
		return 0;
	p += n + 5;
	if ((n = strspn(p, "abcdefghijklmnopqrstuvwxyz0123456789-")) == 0 ||
	    p[n] != ':')
		return 0;
	p += n + 1;
	if ((n = strspn(p, "0123456789")) != 12 || p[n] != ':')
		return 0;
	p += n + 1;
	for (len = 0; p[len] != '\0' && (isalnum((unsigned char)p[len]) ||
	    p[len] == '-' || p[len] == '_'); len++)
		;
	if (len == 0)
		return 0;
	if (strcmp(p + len, ".fifo") == 0)
		len += 5;
	else if (p[len] != '\0')
		return 0;
	return len <= 256;
}

/* The checks of a key's value that need no sink. */
static int
conf_dest_v_value(cfg_t *sec, cfg_opt_t *opt)
{
	const char	*key = cfg_opt_name(opt), *v;
	char		 shown[80];
	long		 n;
	int		 most[2] = { 0, 0 };
	size_t		 i;

	if (strcmp(key, "queue_url") == 0 || strcmp(key, "url") == 0)
		return conf_check_url(sec, opt);
	if (strcmp(key, "topic_arn") == 0) {
		v = cfg_opt_getnstr(opt, 0);
		if (v == NULL || *v == '\0' || conf_dest_arn_ok(v))
			return 0;
		conf_errorf(sec, 0, "destination %s: topic_arn = \"%s\": "
		    "expected arn:PARTITION:sns:REGION:ACCOUNT:NAME (ACCOUNT "
		    "12 digits; NAME 1 to 256 letters, digits, '-' or '_', "
		    "ending in .fifo for a FIFO topic)", cfg_title(sec),
		    conf_dest_shown(v, shown, sizeof(shown)));
		return -1;
	}
	if (strcmp(key, "ordering") == 0)
		return 0;
	if (strcmp(key, "project") == 0 || strcmp(key, "topic") == 0) {
		v = cfg_opt_getnstr(opt, 0);
		if (v == NULL || *v == '\0' || (key[0] == 'p' ?
		    conf_dest_project_ok(v) : conf_dest_topic_ok(v)))
			return 0;
		conf_errorf(sec, 0, "destination %s: %s = \"%s\": expected %s",
		    cfg_title(sec), key, conf_dest_shown(v, shown,
		    sizeof(shown)), key[0] == 'p' ? "a Google Cloud project ID "
		    "(6 to 30 lowercase letters, digits and '-', starting with "
		    "a letter, not ending with '-')" : "a Pub/Sub topic ID (3 "
		    "to 255 letters, digits, '-', '_', '.', '~' or '+', "
		    "starting with a letter, not with \"goog\"); the project "
		    "goes in project");
		return -1;
	}
	if (strcmp(key, "secret") == 0) {
		/* Catch a bad "whsec_" key now, not at every delivery; the
		 * message never shows the value. */
		v = cfg_opt_getnstr(opt, 0);
		if (v == NULL || *v == '\0' || webhook_secret_ok(v))
			return 0;
		conf_errorf(sec, 0, "destination %s: secret: one that starts "
		    "whsec_ must be followed by base64 (at most 256 bytes once "
		    "decoded)", cfg_title(sec));
		return -1;
	}
	n = cfg_opt_getnint(opt, 0);
	if (strcmp(key, "timeout") == 0) {
		if (n >= CONF_DEST_TIMEOUT_MIN && n <= CONF_DEST_TIMEOUT_MAX)
			return 0;
		conf_errorf(sec, 0, "destination %s: timeout = %ld is out of "
		    "range (%d..%ld)", cfg_title(sec), n,
		    CONF_DEST_TIMEOUT_MIN, CONF_DEST_TIMEOUT_MAX);
		return -1;
	}
	/* batch_size, concurrency: 1 to the most of any sink here, to the
	 * most of this one's when its sink is known (conf_dest_fits). */
	for (i = 0; i < CONF_DEST_NSINKS; i++) {
		if (most[0] < conf_dest_sinks[i].max_batch)
			most[0] = conf_dest_sinks[i].max_batch;
		if (most[1] < conf_dest_sinks[i].slots)
			most[1] = conf_dest_sinks[i].slots;
	}
	if (n >= 1 && n <= most[key[0] == 'b' ? 0 : 1])
		return 0;
	conf_errorf(sec, 0, "destination %s: %s = %ld is out of range (1..%d, "
	    "or less as its sink allows)", cfg_title(sec), key, n,
	    most[key[0] == 'b' ? 0 : 1]);
	return -1;
}

/* Every key of a destination but sink, as libconfuse reads it. */
static int
conf_dest_v_key(cfg_t *sec, cfg_opt_t *opt)
{
	const struct conf_dest_sink	*s;

	if (conf_dest_v_name(sec) == -1 || conf_dest_v_value(sec, opt) == -1)
		return -1;
	if ((s = conf_dest_sink_named(cfg_getstr(sec, "sink"))) == NULL)
		return 0;	/* not yet known: sink = checks it */
	return conf_dest_fits(sec, s, cfg_opt_name(opt));
}

/* sink =, and the keys set before it. */
static int
conf_dest_v_sink(cfg_t *sec, cfg_opt_t *opt)
{
	static const char *const	 keys[] = { "queue_url", "topic_arn",
					    "url", "secret", "project", "topic",
					    "ordering", "batch_size",
					    "concurrency" };
	const struct conf_dest_sink	*s;
	const char			*v = cfg_opt_getnstr(opt, 0);
	char				 shown[80];
	size_t				 i;

	if (conf_dest_v_name(sec) == -1)
		return -1;
	if ((s = conf_dest_sink_named(v)) == NULL) {
		conf_errorf(sec, 0, "destination %s: sink = \"%s\": expected "
		    CONF_DEST_SINK_NAMES, cfg_title(sec),
		    conf_dest_shown(v != NULL ? v : "", shown, sizeof(shown)));
		return -1;
	}
	for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		if (conf_dest_fits(sec, s, keys[i]) == -1)
			return -1;
	return 0;
}

/* A whole destination NAME {} at its "}": a sink, and its keys. */
static int
conf_dest_v_section(cfg_t *cfg, cfg_opt_t *opt)
{
	const struct conf_dest_sink	*s;
	cfg_t				*sec;
	int				 k;

	(void)cfg;
	if (cfg_opt_size(opt) == 0 ||
	    (sec = cfg_opt_getnsec(opt, cfg_opt_size(opt) - 1)) == NULL)
		return 0;
	if (conf_dest_v_name(sec) == -1)
		return -1;
	if ((s = conf_dest_sink_named(cfg_getstr(sec, "sink"))) == NULL) {
		conf_errorf(sec, conf_dest_line(sec), "destination %s: sink is "
		    "not set (" CONF_DEST_SINK_NAMES ")", cfg_title(sec));
		return -1;
	}
	for (k = 0; k < 2 && s->keys[k] != NULL; k++)
		if (!conf_dest_set(sec, s->keys[k])) {
			conf_errorf(sec, conf_dest_line(sec), "destination %s: "
			    "sink = \"%s\" needs %s", cfg_title(sec), s->name,
			    s->keys[k]);
			return -1;
		}
	return 0;
}

static int
conf_dest_v_default(cfg_t *cfg, cfg_opt_t *opt)
{
	const char	*v = cfg_opt_getnstr(opt, 0);
	char		 shown[80];

	if (v == NULL || *v == '\0' || conf_destination_name_ok(v))
		return 0;
	conf_errorf(cfg, 0, "relay.default_destination = \"%s\": a "
	    "destination's name is %s", conf_dest_shown(v, shown,
	    sizeof(shown)), CONF_DESTINATION_NAME_RULE);
	return -1;
}

void
conf_dest_validators(cfg_t *cfg)
{
	static const char *const	 keys[] = { "destination|queue_url",
					    "destination|topic_arn",
					    "destination|url",
					    "destination|secret",
					    "destination|project",
					    "destination|topic",
					    "destination|ordering",
					    "destination|batch_size",
					    "destination|timeout",
					    "destination|concurrency" };
	size_t				 i;

	cfg_set_validate_func(cfg, "destination", conf_dest_v_section);
	cfg_set_validate_func(cfg, "destination|sink", conf_dest_v_sink);
	for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		cfg_set_validate_func(cfg, keys[i], conf_dest_v_key);
	cfg_set_validate_func(cfg, "relay|default_destination",
	    conf_dest_v_default);
}

int
conf_dest_reword(char *msg, size_t len)
{
	static const char	 dup[] = "found duplicate title '";
	char			 t[CONF_TITLE_MAX + 1], shown[80];
	size_t			 n;
	int			 first;

	if (strcmp(msg, "missing title for section 'destination'") == 0) {
		snprintf(msg, len, "a destination section needs a name: "
		    "destination NAME { ... }");
		return 1;
	}
	if (strncmp(msg, dup, sizeof(dup) - 1) != 0)
		return 0;
	n = strcspn(msg + sizeof(dup) - 1, "'");
	snprintf(t, sizeof(t), "%.*s", (int)(n < sizeof(t) ? n :
	    sizeof(t) - 1), msg + sizeof(dup) - 1);
	conf_dest_shown(t, shown, sizeof(shown));
	if ((first = conf_section_line("destination", t)) > 0)
		snprintf(msg, len, "destination %s is defined twice (first on "
		    "line %d): each destination needs a name of its own",
		    shown, first);
	else
		snprintf(msg, len, "destination %s is defined twice: each "
		    "destination needs a name of its own", shown);
	return 1;
}
