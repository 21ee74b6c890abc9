/*
 * conf_dest.c - the relays' destinations: destination NAME {} sections,
 * the one that relay.sink with sqs {} / webhook {} makes, the default,
 * and finding a row's destination by name.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <confuse.h>

#include "outboxd.h"
#include "conf.h"

/* The name of the destination relay.sink with sqs {} / webhook {}
 * makes. */
#define CONF_LEGACY_DESTINATION	"default"

/*
 * The destination that relay.sink, sqs.queue_url and webhook {} describe
 * (the only one before named destinations), named "default" and made the
 * default, when the relays have what it needs.  Returns 0, or -1 if
 * memory ran out.
 */
static int
conf_dest_legacy(struct conf *c, struct conf_destination *d)
{
	int	http = c->relay.sink == CONF_SINK_HTTP;

	if (http ? c->webhook.url == NULL || c->webhook.secret == NULL :
	    c->sqs_queue_url == NULL)
		return 0;
	if ((d->name = strdup(CONF_LEGACY_DESTINATION)) == NULL)
		return -1;
	d->sink = c->relay.sink;
	if (http) {
		if ((d->url = strdup(c->webhook.url)) == NULL ||
		    (d->secret = strdup(c->webhook.secret)) == NULL)
			return -1;
		d->timeout = c->webhook.timeout;
	} else {
		if ((d->queue_url = strdup(c->sqs_queue_url)) == NULL)
			return -1;
		d->timeout = c->relay.timeout;
	}
	return 1;
}

static char *
conf_dest_str(cfg_t *sec, const char *key)
{
	const char	*v = cfg_getstr(sec, key);

	return v != NULL && *v != '\0' ? strdup(v) : NULL;
}

/* One destination NAME {} section into d; 0, or -1 with the reason in
 * err. */
static int
conf_dest_section(struct conf *c, cfg_t *sec, struct conf_destination *d,
    char *err, size_t errlen)
{
	const char	*sink = cfg_getstr(sec, "sink"), *need = NULL;

	if ((d->name = strdup(cfg_title(sec))) == NULL)
		goto nomem;
	if (sink == NULL) {
		snprintf(err, errlen, "%s:%d: destination %s: sink is not set "
		    "(\"sqs\", \"sns\" or \"http\")", c->path, sec->line,
		    d->name);
		return -1;
	}
	if (strcmp(sink, "sqs") == 0)
		d->sink = CONF_SINK_SQS;
	else if (strcmp(sink, "sns") == 0)
		d->sink = CONF_SINK_SNS;
	else if (strcmp(sink, "http") == 0)
		d->sink = CONF_SINK_HTTP;
	else {
		snprintf(err, errlen, "%s:%d: destination %s: sink = \"%s\": "
		    "expected \"sqs\", \"sns\" or \"http\"", c->path,
		    sec->line, d->name, sink);
		return -1;
	}
	d->queue_url = conf_dest_str(sec, "queue_url");
	d->topic_arn = conf_dest_str(sec, "topic_arn");
	d->url = conf_dest_str(sec, "url");
	d->secret = conf_dest_str(sec, "secret");
	d->batch_size = (int)cfg_getint(sec, "batch_size");
	d->timeout = cfg_getint(sec, "timeout");
	if (d->timeout == 0)
		d->timeout = c->relay.timeout;
	d->concurrency = (int)cfg_getint(sec, "concurrency");
	if (d->sink == CONF_SINK_SQS && d->queue_url == NULL)
		need = "queue_url";
	else if (d->sink == CONF_SINK_SNS && d->topic_arn == NULL)
		need = "topic_arn";
	else if (d->sink == CONF_SINK_HTTP && d->url == NULL)
		need = "url";
	else if (d->sink == CONF_SINK_HTTP && d->secret == NULL)
		need = "secret";
	if (need != NULL) {
		snprintf(err, errlen, "%s:%d: destination %s: sink = \"%s\" "
		    "needs %s", c->path, sec->line, d->name, sink, need);
		return -1;
	}
	return 0;
nomem:
	snprintf(err, errlen, "%s: out of memory", c->path);
	return -1;
}

int
conf_dest_fill(cfg_t *cfg, struct conf *c, char *err, size_t errlen)
{
	cfg_t		*sec;
	const char	*def;
	unsigned	 n = cfg_size(cfg, "destination"), i;
	int		 rv, legacy = 1;

	c->default_destination = -1;
	if ((c->destinations = calloc(n + 1, sizeof(*c->destinations))) ==
	    NULL) {
		snprintf(err, errlen, "%s: out of memory", c->path);
		return -1;
	}
	for (i = 0; i < n; i++) {
		sec = cfg_getnsec(cfg, "destination", i);
		c->n_destinations++;
		if (conf_dest_section(c, sec, &c->destinations[i], err,
		    errlen) == -1)
			return -1;
		if (strcmp(c->destinations[i].name,
		    CONF_LEGACY_DESTINATION) == 0)
			legacy = 0;
	}
	if (legacy) {
		c->n_destinations++;
		if ((rv = conf_dest_legacy(c, &c->destinations[n])) == -1) {
			snprintf(err, errlen, "%s: out of memory", c->path);
			return -1;
		}
		if (rv == 0)
			c->n_destinations--;
	}
	def = cfg_getstr(cfg_getsec(cfg, "relay"), "default_destination");
	if (def == NULL || *def == '\0') {
		const struct conf_destination *d;

		d = conf_destination_find(c, CONF_LEGACY_DESTINATION);
		c->default_destination = d != NULL ?
		    (int)(d - c->destinations) : -1;
		return 0;
	}
	for (i = 0; i < (unsigned)c->n_destinations; i++)
		if (strcmp(c->destinations[i].name, def) == 0)
			c->default_destination = (int)i;
	if (c->default_destination == -1) {
		snprintf(err, errlen, "%s: relay.default_destination = \"%s\": "
		    "no destination of that name", c->path, def);
		return -1;
	}
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
		if (d->secret != NULL) {
			explicit_bzero(d->secret, strlen(d->secret));
			free(d->secret);
		}
	}
	free(c->destinations);
	c->destinations = NULL;
	c->n_destinations = 0;
}
