/*
 * conf_dest.c - the relays' destinations, built once the file is read:
 * the destination NAME {} sections (checked while libconfuse read them,
 * conf_dest_check.c), the one relay.sink with sqs {} / webhook {} makes,
 * the default, the rules across them, and finding a row's destination by
 * name.
 *
 * The rules are outbox.conf(5)'s DESTINATIONS; a change here is a change
 * there.
 */
#include "config.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <confuse.h>

#include "outboxd.h"
#include "broker.h"
#include "conf.h"

/* The name of the destination relay.sink with sqs {} / webhook {}
 * makes. */
#define CONF_LEGACY_DESTINATION	"default"
/* Google Cloud Pub/Sub's endpoint, and the variable Google's client
 * libraries read to use the emulator instead. */
#define CONF_PUBSUB_ENDPOINT	"https://pubsub.googleapis.com"
#define CONF_PUBSUB_EMULATOR	"PUBSUB_EMULATOR_HOST"

static char *
conf_dest_str(cfg_t *sec, const char *key)
{
	const char	*v = cfg_getstr(sec, key);

	return v != NULL && *v != '\0' ? strdup(v) : NULL;
}

/* A destination NAME {} section (checked by the parse) into d; 0, or -1
 * if memory ran out. */
static int
conf_dest_section(struct conf *c, cfg_t *sec, struct conf_destination *d)
{
	int	kind = conf_dest_sink_of(cfg_getstr(sec, "sink"));
	int	max_batch, slots;

	if (conf_dest_limits(kind, &max_batch, &slots) == -1 ||
	    (d->name = strdup(cfg_title(sec))) == NULL)
		return -1;
	d->sink = kind;
	d->queue_url = conf_dest_str(sec, "queue_url");
	d->topic_arn = conf_dest_str(sec, "topic_arn");
	d->url = conf_dest_str(sec, "url");
	d->secret = conf_dest_str(sec, "secret");
	d->project = conf_dest_str(sec, "project");
	d->topic = conf_dest_str(sec, "topic");
	d->ordering = cfg_getbool(sec, "ordering") == cfg_true;
	if ((conf_dest_set(sec, "project") && d->project == NULL) ||
	    (conf_dest_set(sec, "topic") && d->topic == NULL) ||
	    (conf_dest_set(sec, "queue_url") && d->queue_url == NULL) ||
	    (conf_dest_set(sec, "topic_arn") && d->topic_arn == NULL) ||
	    (conf_dest_set(sec, "url") && d->url == NULL) ||
	    (conf_dest_set(sec, "secret") && d->secret == NULL))
		return -1;
	/* Unset (0): the sink's most, and the timeout of the legacy sink of
	 * its kind. */
	d->batch_size = (int)cfg_getint(sec, "batch_size");
	if (d->batch_size == 0)
		d->batch_size = max_batch;
	d->concurrency = (int)cfg_getint(sec, "concurrency");
	if (d->concurrency == 0)
		d->concurrency = slots;
	d->timeout = cfg_getint(sec, "timeout");
	if (d->timeout == 0)
		d->timeout = kind == CONF_SINK_HTTP ? c->webhook.timeout :
		    c->relay.timeout;
	return 0;
}

/*
 * The destination that relay.sink, sqs.queue_url and webhook {} describe
 * (the only one before named destinations), named "default", into d.
 * Without destination sections (named = 0) it is required when relays
 * run, as it always was; with them it exists when its settings are
 * complete, and a webhook {} half set is an error.  Returns 1 if made, 0
 * if not, -1 with the reason in err.
 */
static int
conf_dest_legacy(struct conf *c, struct conf_destination *d, int named,
    char *err, size_t errlen)
{
	int	http = c->relay.sink == CONF_SINK_HTTP, max_batch, slots;

	if (!named && c->relay.workers > 0 && (http ? c->webhook.url ==
	    NULL || c->webhook.secret == NULL : c->sqs_queue_url == NULL)) {
		snprintf(err, errlen, http ? "%s: relay.sink is \"http\" but "
		    "webhook.url or webhook.secret is not set" :
		    "%s: sqs.queue_url is not set", c->path);
		return -1;
	}
	if (named && http && c->webhook.url != NULL &&
	    c->webhook.secret == NULL) {
		snprintf(err, errlen, "%s: webhook.url is set but "
		    "webhook.secret is not (with relay.sink = \"http\", "
		    "webhook {} is the destination \"%s\")", c->path,
		    CONF_LEGACY_DESTINATION);
		return -1;
	}
	if (http ? c->webhook.url == NULL || c->webhook.secret == NULL :
	    c->sqs_queue_url == NULL)
		return 0;
	/* Counted by the caller from here: conf_dest_free() frees it. */
	if ((d->name = strdup(CONF_LEGACY_DESTINATION)) == NULL)
		goto nomem;
	d->sink = c->relay.sink;
	if (conf_dest_limits(d->sink, &max_batch, &slots) == -1)
		goto nomem;	/* not reached: conf.c reads sqs or http */
	d->batch_size = max_batch;
	d->concurrency = slots;
	d->timeout = conf_sink_timeout(c);
	if (http ? (d->url = strdup(c->webhook.url)) == NULL ||
	    (d->secret = strdup(c->webhook.secret)) == NULL :
	    (d->queue_url = strdup(c->sqs_queue_url)) == NULL)
		goto nomem;
	return 1;
nomem:
	snprintf(err, errlen, "%s: out of memory", c->path);
	return -1;
}

/*
 * A publish must end inside its claim's lease, so rows still waiting for
 * the sink at lease - timeout are not published (relay.c).  Half the
 * lease leaves the claim and that wait as much time as the request; with
 * less, a claim slowed by a busy server could leave no chunk publishable
 * at all.  legacy: the index of the destination relay.sink makes, or -1.
 */
static int
conf_dest_lease(cfg_t *cfg, const struct conf *c, int legacy, char *err,
    size_t errlen)
{
	const struct conf_destination	*d;
	char				 at[PATH_MAX + 16];
	int				 i, line;

	for (i = 0; c->relay.workers > 0 && i < c->n_destinations; i++) {
		d = &c->destinations[i];
		if (c->relay.lease >= 2 * d->timeout)
			continue;
		/* The line of whichever of the two was written: relay.lease,
		 * else the destination's timeout (for the legacy one,
		 * relay.timeout or webhook.timeout). */
		line = 0;
		if (conf_key_line("relay", NULL, "lease") == 0)
			line = i != legacy ? conf_key_line("destination",
			    d->name, "timeout") : conf_key_line(c->relay.sink ==
			    CONF_SINK_HTTP ? "webhook" : "relay", NULL,
			    "timeout");
		if (line > 0)
			snprintf(at, sizeof(at), "%s:%d", c->path, line);
		else
			conf_key_at(c, "relay", "lease", at, sizeof(at));
		if (i == legacy)
			snprintf(err, errlen, "%s: relay.lease (%ld ms) must be "
			    "at least twice the sink's timeout (%s = %ld ms): a "
			    "publish must end within the lease of its claim, "
			    "with time left for the claim and the wait for the "
			    "sink", at,
			    c->relay.lease, c->relay.sink ==
			    CONF_SINK_HTTP ? "webhook.timeout" :
			    "relay.timeout", d->timeout);
		else
			snprintf(err, errlen, "%s: relay.lease (%ld ms) must be "
			    "at least twice the timeout of destination %s (%ld "
			    "ms%s): a publish must end within the lease of its "
			    "claim, with time left for the claim and the wait "
			    "for the sink", at,
			    c->relay.lease, d->name,
			    d->timeout, cfg_getint(cfg_getnsec(cfg,
			    "destination", i), "timeout") != 0 ? "" :
			    d->sink == CONF_SINK_HTTP ? ", webhook.timeout's" :
			    ", relay.timeout's");
		return -1;
	}
	return 0;
}

/*
 * Where Pub/Sub requests go: PUBSUB_EMULATOR_HOST ("host:port") wins, as
 * in Google's client libraries, and means plain HTTP without
 * credentials; else pubsub.endpoint_url (credentials are sent there
 * too); else Google's endpoint.  0, or -1 with the reason in err.
 */
static int
conf_dest_pubsub(cfg_t *cfg, struct conf *c, char *err, size_t errlen)
{
	const char	*emu = getenv(CONF_PUBSUB_EMULATOR), *v;
	char		 shown[80];
	size_t		 n;

	v = cfg_getstr(cfg_getsec(cfg, "pubsub"), "endpoint_url");
	if (emu != NULL && *emu != '\0') {
		v = strrchr(emu, ':');
		if (strspn(emu, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRS"
		    "TUVWXYZ0123456789.-:[]") != strlen(emu) || v == NULL ||
		    v == emu || v[1] == '\0' || strspn(v + 1, "0123456789") !=
		    strlen(v + 1) || strlen(v + 1) > 5 || atoi(v + 1) < 1 ||
		    atoi(v + 1) > 65535) {
			snprintf(err, errlen, "%s=\"%s\": expected host:port "
			    "(the Pub/Sub emulator's)", CONF_PUBSUB_EMULATOR,
			    conf_dest_shown(emu, shown, sizeof(shown)));
			return -1;
		}
		c->pubsub.emulator = 1;
		if (asprintf(&c->pubsub.endpoint, "http://%s", emu) == -1)
			c->pubsub.endpoint = NULL;
	} else
		c->pubsub.endpoint = strdup(v != NULL && *v != '\0' ? v :
		    CONF_PUBSUB_ENDPOINT);
	if (c->pubsub.endpoint == NULL) {
		snprintf(err, errlen, "%s: out of memory", c->path);
		return -1;
	}
	n = strlen(c->pubsub.endpoint);
	while (n > 0 && c->pubsub.endpoint[n - 1] == '/')
		c->pubsub.endpoint[--n] = '\0';
	return 0;
}

/* A pubsub destination's credentials: the ADC file read and parsed now,
 * so that a bad one fails outboxd -t and the start, not the first
 * publish (nothing is fetched). */
static int
conf_dest_gcp(struct conf *c, char *err, size_t errlen)
{
	char	why[600];
	int	i;

	for (i = 0; i < c->n_destinations; i++)
		if (c->destinations[i].sink == CONF_SINK_PUBSUB)
			break;
	if (i == c->n_destinations)
		return 0;
	if (c->pubsub.emulator) {
		/* What outboxd -t says: none are looked for. */
		snprintf(c->pubsub.source, sizeof(c->pubsub.source), "none, "
		    "the Pub/Sub emulator at %s (%s)", c->pubsub.endpoint,
		    CONF_PUBSUB_EMULATOR);
		return 0;
	}
	if (gcp_adc_find(c->user, &c->pubsub.adc_file, c->pubsub.source,
	    sizeof(c->pubsub.source), why, sizeof(why)) == -1) {
		snprintf(err, errlen, "%s: %s", c->path, why);
		return -1;
	}
	return 0;
}

int
conf_dest_fill(cfg_t *cfg, struct conf *c, char *err, size_t errlen)
{
	const struct conf_destination	*d;
	const char			*def;
	char				 at[PATH_MAX + 16];
	unsigned			 n = cfg_size(cfg, "destination"), i;
	int				 rv, legacy = -1;

	c->default_destination = -1;
	if (conf_dest_pubsub(cfg, c, err, errlen) == -1)
		return -1;
	if ((c->destinations = calloc(n + 1, sizeof(*c->destinations))) ==
	    NULL)
		goto nomem;
	for (i = 0; i < n; i++) {
		c->n_destinations++;
		if (conf_dest_section(c, cfg_getnsec(cfg, "destination", i),
		    &c->destinations[i]) == -1)
			goto nomem;
	}
	/* A section of its name takes its place. */
	if (conf_destination_find(c, CONF_LEGACY_DESTINATION) == NULL) {
		legacy = c->n_destinations++;
		if ((rv = conf_dest_legacy(c, &c->destinations[n], n > 0, err,
		    errlen)) == -1)
			return -1;
		if (rv == 0) {
			legacy = -1;
			c->n_destinations--;
		}
	}

	def = cfg_getstr(cfg_getsec(cfg, "relay"), "default_destination");
	if (def != NULL && *def != '\0') {
		if ((d = conf_destination_find(c, def)) == NULL) {
			snprintf(err, errlen, "%s: relay.default_destination = "
			    "\"%s\": no destination of that name (a destination "
			    "%s {} section, or \"%s\" when relay.sink with sqs "
			    "{} or webhook {} makes it)",
			    conf_key_at(c, "relay", "default_destination", at,
			    sizeof(at)), def, def,
			    CONF_LEGACY_DESTINATION);
			return -1;
		}
	} else
		d = conf_destination_find(c, CONF_LEGACY_DESTINATION);
	c->default_destination = d != NULL ? (int)(d - c->destinations) : -1;
	/* POST /orders writes rows whose destination is NULL. */
	if (d == NULL && c->http.workers > 0 && c->relay.workers > 0) {
		snprintf(err, errlen, "%s: relay.default_destination is not set "
		    "and no destination is named \"%s\": the rows POST /orders "
		    "writes (destination NULL) would have none (set "
		    "relay.default_destination, or the relay.sink with sqs {} "
		    "or webhook {} that makes \"%s\")", c->path,
		    CONF_LEGACY_DESTINATION, CONF_LEGACY_DESTINATION);
		return -1;
	}
	if (conf_dest_gcp(c, err, errlen) == -1)
		return -1;
	return conf_dest_lease(cfg, c, legacy, err, errlen);

nomem:
	snprintf(err, errlen, "%s: out of memory", c->path);
	return -1;
}

int
conf_destinations_aws(const struct conf *c)
{
	int	i;

	for (i = 0; i < c->n_destinations; i++)
		if (c->destinations[i].sink == CONF_SINK_SQS ||
		    c->destinations[i].sink == CONF_SINK_SNS)
			return 1;
	return 0;
}

const struct conf_destination *
conf_destination_find(const struct conf *c, const char *name)
{
	int	i;

	if (name == NULL)
		return c->default_destination >= 0 && c->destinations != NULL ?
		    &c->destinations[c->default_destination] : NULL;
	for (i = 0; i < c->n_destinations; i++)
		if (strcmp(c->destinations[i].name, name) == 0)
			return &c->destinations[i];
	return NULL;
}

void
conf_dest_free(struct conf *c)
{
	int	i;

	for (i = 0; i < c->n_destinations; i++) {
		struct conf_destination	*d = &c->destinations[i];

		free(d->name);
		free(d->queue_url);
		free(d->topic_arn);
		free(d->url);
		free(d->project);
		free(d->topic);
		if (d->secret != NULL) {
			explicit_bzero(d->secret, strlen(d->secret));
			free(d->secret);
		}
	}
	free(c->destinations);
	free(c->pubsub.endpoint);
	c->pubsub.endpoint = NULL;
	free(c->pubsub.adc_file);
	c->pubsub.adc_file = NULL;
	c->destinations = NULL;
	c->n_destinations = 0;
}
