/*
 * conf_aws.c - the aws section of the configuration and what the AWS
 * settings take from elsewhere: the profile, the region, the file's keys
 * (the first source of the credential chain, creds.c), the service
 * endpoints, and the check, at load time, that some source of the chain
 * exists when a worker talks to AWS.
 *
 * conf.c owns the libconfuse tables (aws_opts among them) and calls
 * conf_aws_fill() with the parsed tree.
 */
#include "config.h"

#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <confuse.h>

#include "outboxd.h"
#include "conf.h"
#include "creds.h"

static char *
conf_aws_strdup(const char *s)
{
	return s != NULL && *s != '\0' ? strdup(s) : NULL;
}

/* s is min..max of letters, digits, '_' and the characters of extra:
 * what STS takes in a RoleSessionName or ExternalId. */
static int
conf_aws_name_ok(const char *s, size_t min, size_t max, const char *extra)
{
	size_t	n = strlen(s), i;

	if (n < min || n > max)
		return (0);
	for (i = 0; i < n; i++)
		if (!isalnum((unsigned char)s[i]) && s[i] != '_' &&
		    strchr(extra, s[i]) == NULL)
			return (0);
	return (1);
}

/*
 * Some source of the AWS credential chain must exist, but its
 * credentials need not be at hand: instance metadata or a container
 * endpoint may come up after outboxd, whose workers wait for them
 * (/readyz says so).  So only what can never work is refused here: a
 * source that is present but broken (half a key pair, a named profile
 * that does not exist, a container URL the SDKs refuse), or no
 * source at all, which needs AWS_EC2_METADATA_DISABLED=true.
 */
static int
conf_aws_check_creds(struct conf *c, char *err, size_t errlen)
{
	struct creds_plan	p;
	char			why[512];
	int			rv = 0;

	if (creds_plan_make(c, &p, why, sizeof why) == -1) {
		snprintf(err, errlen, "%s: AWS credentials: %s", c->path, why);
		rv = -1;
	} else if (p.kind == CREDS_NONE) {
		snprintf(err, errlen, "%s: no AWS credentials: no source of "
		    "the credential chain is present (aws.access_key_id and "
		    "aws.secret_access_key, AWS_ACCESS_KEY_ID and "
		    "AWS_SECRET_ACCESS_KEY, a profile of the shared files, "
		    "container credentials) and instance metadata is off "
		    "(AWS_EC2_METADATA_DISABLED)", c->path);
		rv = -1;
	} else
		creds_plan_describe(&p, c->aws.source, sizeof c->aws.source);
	creds_plan_clear(&p);
	return rv;
}

/*
 * The region, in the order of the AWS SDKs and Tools Reference Guide
 * ("AWS Region"): aws.region, AWS_REGION, AWS_DEFAULT_REGION, the
 * profile's region, then instance metadata, which only the workers read
 * (creds.c, at start): then c->aws.region stays NULL and region_imds
 * names the IMDS endpoint.  region_from says which, for outboxd -t.
 */
static void
conf_aws_region(cfg_t *a, struct conf *c)
{
	const char	*v, *from = "aws.region";
	char		 err[200];

	if ((v = conf_pick(cfg_getstr(a, "region"), NULL, NULL)) == NULL &&
	    (v = conf_pick(NULL, "AWS_REGION", NULL)) != NULL)
		from = "AWS_REGION";
	else if (v == NULL &&
	    (v = conf_pick(NULL, "AWS_DEFAULT_REGION", NULL)) != NULL)
		from = "AWS_DEFAULT_REGION";
	c->aws.region = conf_aws_strdup(v);
	if (c->aws.region == NULL &&
	    (c->aws.region = creds_profile_region(c->aws.profile, c->user)) !=
	    NULL)
		snprintf(c->aws.region_from, sizeof c->aws.region_from,
		    "from profile %s", c->aws.profile != NULL ?
		    c->aws.profile : "default");
	else if (c->aws.region != NULL)
		snprintf(c->aws.region_from, sizeof c->aws.region_from,
		    "from %s", from);
	else if ((c->aws.region_imds = creds_imds_base(err, sizeof err)) !=
	    NULL)
		snprintf(c->aws.region_from, sizeof c->aws.region_from,
		    "from instance metadata (IMDSv2, %s), read by each worker "
		    "at start", c->aws.region_imds);
}

void
conf_aws_fill(struct cfg_t *cfg, struct conf *c)
{
	cfg_t	*a = cfg_getsec(cfg, "aws");
	cfg_t	*q = cfg_getsec(cfg, "sqs");
	cfg_t	*d = cfg_getsec(cfg, "dynamodb");

	/* Only the file's keys: the environment's are the chain's next
	 * source (creds.c), and the profile's region comes last. */
	c->aws.profile = conf_aws_strdup(conf_pick(cfg_getstr(a,
	    "profile"), "AWS_PROFILE", NULL));
	c->aws.profile_set = conf_pick(cfg_getstr(a, "profile"), NULL,
	    NULL) != NULL;
	conf_aws_region(a, c);
	c->aws.access_key_id = conf_aws_strdup(conf_pick(
	    cfg_getstr(a, "access_key_id"), NULL, NULL));
	c->aws.secret_access_key = conf_aws_strdup(conf_pick(
	    cfg_getstr(a, "secret_access_key"), NULL, NULL));
	c->aws.session_token = conf_aws_strdup(conf_pick(
	    cfg_getstr(a, "session_token"), NULL, NULL));
	c->aws.role_arn = conf_aws_strdup(cfg_getstr(a, "role_arn"));
	c->aws.external_id = conf_aws_strdup(cfg_getstr(a, "external_id"));
	c->aws.role_session_name = conf_aws_strdup(cfg_getstr(a,
	    "role_session_name"));
	c->aws.duration_seconds = cfg_getint(a, "duration_seconds");
	c->aws.sqs_endpoint = conf_endpoint(cfg_getstr(q, "endpoint_url"),
	    cfg_getstr(a, "endpoint_url"), "AWS_ENDPOINT_URL_SQS", "sqs",
	    c->aws.region);
	c->aws.dynamodb_endpoint = conf_endpoint(cfg_getstr(d, "endpoint_url"),
	    cfg_getstr(a, "endpoint_url"), "AWS_ENDPOINT_URL_DYNAMODB",
	    "dynamodb", c->aws.region);
	c->aws.sns_endpoint = conf_endpoint(cfg_getstr(cfg_getsec(cfg, "sns"),
	    "endpoint_url"), cfg_getstr(a, "endpoint_url"),
	    "AWS_ENDPOINT_URL_SNS", "sns", c->aws.region);
	/* STS, for the chain's role sources (creds_sts.c): the regional
	 * endpoint, as the SDKs now default to. */
	c->aws.sts_endpoint = conf_endpoint(NULL, cfg_getstr(a,
	    "endpoint_url"), "AWS_ENDPOINT_URL_STS", "sts", c->aws.region);
}

int
conf_aws_check(struct conf *c, char *err, size_t errlen)
{
	const char	*v, *key = NULL;	/* aws.KEY the error is about */
	char		 at[PATH_MAX + 16];
	int		 need_aws, i;

	/* AWS settings matter only when some worker talks to AWS: the
	 * consumers, or relays with an SQS or SNS destination. */
	need_aws = c->consumer.workers > 0;
	for (i = 0; i < c->n_destinations && c->relay.workers > 0; i++)
		if (c->destinations[i].sink == CONF_SINK_SQS ||
		    c->destinations[i].sink == CONF_SINK_SNS)
			need_aws = 1;
	v = NULL;
	if (c->consumer.workers > 0 && c->sqs_queue_url == NULL)
		v = "sqs.queue_url is not set (the consumers read it)";
	else if (c->consumer.workers > 0 && c->dynamodb_table == NULL)
		v = "dynamodb.table is not set";
	else if (need_aws && c->aws.region == NULL &&
	    c->aws.region_imds == NULL)
		v = "aws.region is not set, neither AWS_REGION nor "
		    "AWS_DEFAULT_REGION is in the environment, the profile sets "
		    "none and instance metadata is off (AWS_EC2_METADATA_"
		    "DISABLED)";
	else if (c->aws.duration_seconds != 0 && c->aws.role_arn == NULL) {
		v = "aws.duration_seconds needs aws.role_arn";
		key = "duration_seconds";
	} else if (c->aws.duration_seconds != 0 && (c->aws.duration_seconds <
	    CREDS_DURATION_MIN || c->aws.duration_seconds >
	    CREDS_DURATION_MAX)) {
		v = "aws.duration_seconds must be 900 to 43200 (STS "
		    "DurationSeconds)";
		key = "duration_seconds";
	} else if (c->aws.role_arn == NULL && (c->aws.external_id != NULL ||
	    c->aws.role_session_name != NULL)) {
		v = "aws.external_id and aws.role_session_name need "
		    "aws.role_arn";
		key = c->aws.external_id != NULL ? "external_id" :
		    "role_session_name";
	} else if (c->aws.role_arn != NULL && strncmp(c->aws.role_arn,
	    "arn:", 4) != 0) {
		v = "aws.role_arn is not an ARN (arn:aws:iam::ACCOUNT:role/NAME)";
		key = "role_arn";
	} else if (c->aws.role_session_name != NULL &&
	    !conf_aws_name_ok(c->aws.role_session_name, 2, 64, "+=,.@-")) {
		v = "aws.role_session_name must be 2 to 64 letters, digits or "
		    "+=,.@-_ (STS)";
		key = "role_session_name";
	} else if (c->aws.external_id != NULL &&
	    !conf_aws_name_ok(c->aws.external_id, 2, 1224, "+=,.@:/-")) {
		v = "aws.external_id must be 2 to 1224 letters, digits or "
		    "+=,.@:/-_ (STS)";
		key = "external_id";
	}
	/* The line of the key, when it is one of the file's (the role may
	 * come from the environment too: then the section's line). */
	if (v != NULL) {
		snprintf(err, errlen, "%s: %s", key != NULL ? conf_key_at(c,
		    "aws", key, at, sizeof(at)) : c->path, v);
		return -1;
	}
	/* The value is not shown: it may be anything, of any length. */
	if (need_aws && c->aws.region != NULL &&
	    !creds_region_ok(c->aws.region, strlen(c->aws.region))) {
		snprintf(err, errlen, "%s: the region %s is not a region name "
		    "(1 to 32 lower-case letters, digits and '-', such as "
		    "us-east-1)", strcmp(c->aws.region_from,
		    "from aws.region") == 0 ? conf_key_at(c, "aws", "region",
		    at, sizeof(at)) : c->path, c->aws.region_from);
		return -1;
	}
	return need_aws ? conf_aws_check_creds(c, err, errlen) : 0;
}

void
conf_aws_free(struct conf *c)
{
	free(c->aws.region);
	free(c->aws.region_imds);
	free(c->aws.sqs_endpoint);
	free(c->aws.dynamodb_endpoint);
	free(c->aws.sns_endpoint);
	free(c->aws.sts_endpoint);
	free(c->aws.access_key_id);
	free(c->aws.secret_access_key);
	free(c->aws.session_token);
	free(c->aws.profile);
	free(c->aws.role_arn);
	free(c->aws.external_id);
	free(c->aws.role_session_name);
}
