/*
 * creds.c - this process's AWS credentials: fetched from the source the
 * chain chose (creds_plan.c) and renewed before they expire, and the
 * region when instance metadata gives it.
 *
 * The refresh rule: temporary credentials that are L seconds from their
 * Expiration when they arrive are renewed when min(5 min, L / 3) is left.
 * Five minutes is the SDKs' margin (the Java and Go SDKs' default; EC2
 * and ECS hand out new credentials well before that); a third of the
 * lifetime keeps short-lived credentials (tests hand out one-minute ones)
 * renewed with time to spare.  A failed renewal keeps the current
 * credentials while they are valid and tries again after 1, 2, 4 ... 60 s.
 * Credentials within CREDS_SKEW_S of their Expiration are not used.
 *
 * A fetch is a sequence: the source's credentials, then each STS
 * AssumeRole of the chain (a profile's roles, aws.role_arn), each signed
 * with what the step before handed out; the last answer is what the
 * process signs with.
 *
 * The region from instance metadata (no aws.region, AWS_REGION,
 * AWS_DEFAULT_REGION or profile region, and IMDS not off): read once at
 * start (IMDSv2, placement/region) before the first credentials, with
 * the same backoff; until then no request is sent, one rate-limited line
 * says why and /readyz answers 503.  The endpoints left to the region
 * (no endpoint_url, AWS_ENDPOINT_URL*) are then built from it.
 */
#include "config.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <cjson/cJSON.h>
#include <event2/event.h>

#include "outboxd.h"
#include "broker.h"
#include "creds.h"

#define CREDS_SKEW_S		5	/* not used this close to Expiration */
#define CREDS_MARGIN_S		300	/* renew this long before, at most */
#define CREDS_RETRY_MIN		1000	/* ms, first retry after a failure */
#define CREDS_RETRY_MAX		60000	/* ms */
#define CREDS_PROCESS_TIMEOUT	30000	/* ms, a credential_process run */

static struct {
	struct event_base	*base;
	struct httpc		*hc;
	struct event		*timer;
	struct creds_plan	 plan;
	const struct conf	*conf;
	int			 started;
	int			 slot;
	void			(*notify)(void);
	char			*akid;
	char			*secret;
	char			*token;
	int64_t			 expiration;	/* s since the epoch, 0 never */
	int			 have;
	int			 fetching;
	int			 step;		/* AssumeRoles done this fetch */
	char			*region;	/* NULL: from IMDS, not yet */
	int			 failures;
	char			 why[256];
	char			 endpoint[512];	/* creds_endpoint()'s */
	struct log_limit	 limit;
} cs;

static void	creds_fetch(void);
static int	creds_fetched(void);

int64_t
creds_time_parse(const char *s)
{
	struct tm	 tm;
	int		 n = 0, oh = 0, om = 0, sign = 0;
	int64_t		 t;

	if (s == NULL)
		return (-1);
	memset(&tm, 0, sizeof tm);
	if (sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon,
	    &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &n) != 6 ||
	    n != 19)
		return (-1);
	s += n;
	if (*s == '.')
		for (s++; isdigit((unsigned char)*s); s++)
			;
	if (*s == 'Z' && s[1] == '\0')
		;
	else if ((*s == '+' || *s == '-') && sscanf(s + 1, "%2d:%2d%n", &oh,
	    &om, &n) == 2 && n == 5 && s[6] == '\0')
		sign = *s == '+' ? 1 : -1;
	else
		return (-1);
	if (tm.tm_mon < 1 || tm.tm_mon > 12 || tm.tm_mday < 1 ||
	    tm.tm_mday > 31 || tm.tm_hour > 23 || tm.tm_min > 59 ||
	    tm.tm_sec > 60)
		return (-1);
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	t = (int64_t)timegm(&tm);
	return (t - sign * (oh * 3600 + om * 60));
}

static const char *
creds_json_str(const cJSON *o, const char *name)
{
	const cJSON	*v = cJSON_GetObjectItemCaseSensitive(o, name);

	return (cJSON_IsString(v) && *v->valuestring != '\0' ?
	    v->valuestring : NULL);
}

void
creds_json_done(const char *body, size_t len, const char *what,
    creds_done_cb *done)
{
	struct creds_got	 got;
	cJSON			*j, *ver;
	const char		*code, *exp;
	char			 err[256];

	memset(&got, 0, sizeof got);
	if ((j = cJSON_ParseWithLength(body, len)) == NULL ||
	    !cJSON_IsObject(j)) {
		cJSON_Delete(j);
		snprintf(err, sizeof err, "%s: the answer is not a JSON "
		    "object", what);
		done(NULL, err);
		return;
	}
	/* credential_process: "Version": 1 (the only version). */
	ver = cJSON_GetObjectItemCaseSensitive(j, "Version");
	code = creds_json_str(j, "Code");
	if (ver != NULL && (!cJSON_IsNumber(ver) || ver->valuedouble != 1))
		snprintf(err, sizeof err, "%s: Version is not 1", what);
	else if (code != NULL && strcmp(code, "Success") != 0)
		snprintf(err, sizeof err, "%s: Code is \"%.64s\"", what, code);
	else if ((got.access_key_id = creds_json_str(j, "AccessKeyId")) ==
	    NULL || (got.secret_access_key = creds_json_str(j,
	    "SecretAccessKey")) == NULL)
		snprintf(err, sizeof err, "%s: no AccessKeyId or "
		    "SecretAccessKey in the answer", what);
	else if ((exp = creds_json_str(j, "Expiration")) != NULL &&
	    (got.expiration = creds_time_parse(exp)) == -1)
		snprintf(err, sizeof err, "%s: Expiration \"%.40s\" is not an "
		    "ISO 8601 time", what, exp);
	else {
		got.session_token = creds_json_str(j, ver != NULL ?
		    "SessionToken" : "Token");
		if (ver == NULL && got.expiration == 0)
			snprintf(err, sizeof err, "%s: no Expiration", what);
		else
			err[0] = '\0';
	}
	if (err[0] == '\0')
		done(&got, NULL);
	else
		done(NULL, err);
	cJSON_Delete(j);
}

/* ---- this process's credentials ---------------------------------------- */

/* The chain's source itself hands out temporary credentials. */
static int
creds_fetched(void)
{
	return (cs.plan.kind == CREDS_PROCESS ||
	    cs.plan.kind == CREDS_CONTAINER || cs.plan.kind == CREDS_IMDS ||
	    cs.plan.kind == CREDS_ASSUME_ROLE ||
	    cs.plan.kind == CREDS_WEB_IDENTITY);
}

static int
creds_temporary(void)
{
	return (creds_fetched() || cs.plan.top.role_arn != NULL);
}

/* The STS AssumeRoles after the source's answer: a profile chain's
 * roles[], its own role, then aws.role_arn. */
static int
creds_n_steps(void)
{
	return ((cs.plan.kind == CREDS_ASSUME_ROLE ? cs.plan.n_roles + 1 : 0) +
	    (cs.plan.top.role_arn != NULL ? 1 : 0));
}

/* Step i of creds_n_steps() as a role (a view into the plan). */
static struct creds_role
creds_step_role(int i)
{
	struct creds_role	r;

	memset(&r, 0, sizeof r);
	if (cs.plan.kind == CREDS_ASSUME_ROLE && i < cs.plan.n_roles)
		return (cs.plan.roles[i]);
	if (cs.plan.kind == CREDS_ASSUME_ROLE && i == cs.plan.n_roles) {
		r.role_arn = cs.plan.role_arn;
		r.session_name = cs.plan.session_name;
		r.external_id = cs.plan.external_id;
		r.duration = cs.plan.duration;
		return (r);
	}
	return (cs.plan.top);
}

static int
creds_valid(int64_t now)
{
	return (cs.have && cs.region != NULL && (cs.expiration == 0 ||
	    now < cs.expiration - CREDS_SKEW_S));
}

static void
creds_arm(long ms)
{
	struct timeval	tv = clock_tv(ms);

	evtimer_add(cs.timer, &tv);
}

static void
creds_report(void)
{
	char	buf[sizeof cs.why + 20];

	metrics_creds_set(cs.slot, creds_valid(time(NULL)) ? NULL :
	    creds_state(buf, sizeof buf) + strlen("unavailable: "));
	if (cs.notify != NULL)
		cs.notify();
}

/* A failed fetch (credentials or region): why, then again after the
 * backoff. */
static void
creds_failed(const char *err, const char *desc)
{
	int64_t	now = time(NULL);
	long	ms;

	cs.fetching = 0;
	cs.step = 0;
	snprintf(cs.why, sizeof cs.why, "%s", err != NULL ? err :
	    "unknown error");
	ms = CREDS_RETRY_MIN << (cs.failures < 6 ? cs.failures : 6);
	if (ms > CREDS_RETRY_MAX)
		ms = CREDS_RETRY_MAX;
	ms += random() % (ms / 4 + 1);
	cs.failures++;
	if (creds_valid(now))
		log_limited(&cs.limit, LOG_LEVEL_WARN, "renewing the AWS "
		    "credentials from %s failed (the current ones stay valid "
		    "for %lld s; retry in %ld ms): %s", desc,
		    (long long)(cs.expiration - now), ms, cs.why);
	else
		log_limited(&cs.limit, LOG_LEVEL_WARN, "no AWS credentials "
		    "from %s (retry in %ld ms): %s", desc, ms, cs.why);
	creds_arm(ms);
	creds_report();
}

static void
creds_done(const struct creds_got *got, const char *err)
{
	struct creds_role	role;
	int64_t			now = time(NULL), life;
	long			ms;
	char			desc[512];

	/* Each answer but the last signs the chain's next AssumeRole. */
	if (got != NULL && cs.step < creds_n_steps()) {
		role = creds_step_role(cs.step++);
		if (creds_sts_role_fetch(cs.hc, &cs.plan, &role, got,
		    creds_done) == 0)
			return;
		got = NULL;
		err = "the STS AssumeRole request could not be started";
	}
	if (got != NULL && got->expiration != 0 &&
	    got->expiration - now <= CREDS_SKEW_S) {
		got = NULL;
		err = "the credentials handed out are expired or about to";
	}
	creds_plan_describe(&cs.plan, desc, sizeof desc);
	if (got == NULL) {
		creds_failed(err, desc);
		return;
	}
	cs.fetching = 0;
	cs.step = 0;
	creds_wipe(&cs.akid);
	creds_wipe(&cs.secret);
	creds_wipe(&cs.token);
	cs.akid = strdup(got->access_key_id);
	cs.secret = strdup(got->secret_access_key);
	cs.token = creds_strdup(got->session_token);
	cs.have = cs.akid != NULL && cs.secret != NULL &&
	    (cs.token != NULL || got->session_token == NULL);
	cs.expiration = got->expiration;
	cs.failures = 0;
	cs.why[0] = '\0';
	log_limit_end(&cs.limit, NULL, "AWS credentials");
	if (cs.expiration != 0) {
		life = cs.expiration - now;
		ms = (long)(life - (life / 3 < CREDS_MARGIN_S ? life / 3 :
		    CREDS_MARGIN_S)) * 1000;
		if (ms < CREDS_RETRY_MIN)
			ms = CREDS_RETRY_MIN;
		creds_arm(ms);
		log_info("AWS credentials from %s, valid for %lld s; renewing "
		    "in %ld s", desc, (long long)life, ms / 1000);
	} else
		log_info("AWS credentials from %s, without an expiration",
		    desc);
	creds_report();
}

static void
creds_region_done(const char *region, const char *err)
{
	char	why[300], sqs[512], sns[512], ddb[512];
	int	sts;

	if (region == NULL || (cs.region = strdup(region)) == NULL) {
		snprintf(why, sizeof why, "no AWS region yet (aws.region, "
		    "AWS_REGION, AWS_DEFAULT_REGION and the profile set none): "
		    "%s", err != NULL ? err : "out of memory");
		creds_failed(why, "instance metadata");
		return;
	}
	/* STS's endpoint and region, when the plan calls STS and left
	 * them to the region. */
	sts = cs.plan.kind == CREDS_ASSUME_ROLE ||
	    cs.plan.kind == CREDS_WEB_IDENTITY || cs.plan.top.role_arn != NULL;
	if ((sts && cs.plan.region == NULL && (cs.plan.region =
	    strdup(region)) == NULL) || (sts && cs.plan.sts_endpoint == NULL &&
	    asprintf(&cs.plan.sts_endpoint, "https://sts.%s.amazonaws.com",
	    region) == -1)) {
		cs.plan.sts_endpoint = NULL;
		free(cs.region);
		cs.region = NULL;
		creds_failed("out of memory", "instance metadata");
		return;
	}
	snprintf(sqs, sizeof sqs, "%s", creds_endpoint(
	    cs.conf->aws.sqs_endpoint, "sqs"));
	snprintf(sns, sizeof sns, "%s", creds_endpoint(
	    cs.conf->aws.sns_endpoint, "sns"));
	snprintf(ddb, sizeof ddb, "%s", creds_endpoint(
	    cs.conf->aws.dynamodb_endpoint, "dynamodb"));
	log_info("AWS region %s from instance metadata (%s); endpoints: SQS "
	    "%s, SNS %s, DynamoDB %s, STS %s", cs.region, cs.plan.region_url,
	    sqs, sns, ddb, cs.plan.sts_endpoint != NULL ?
	    cs.plan.sts_endpoint : "(not used)");
	cs.fetching = 0;
	cs.failures = 0;
	cs.why[0] = '\0';
	creds_fetch();
}

static void
creds_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	creds_fetch();
}

static void
creds_fetch(void)
{
	struct creds_got	got;
	enum creds_kind		kind = cs.plan.kind;
	int			rv = -1;

	if (cs.fetching)
		return;
	cs.fetching = 1;
	cs.step = 0;
	evtimer_del(cs.timer);
	if (cs.region == NULL) {
		if (creds_imds_region_fetch(cs.hc, cs.plan.region_url,
		    creds_region_done) == -1)
			creds_region_done(NULL, "the instance metadata request "
			    "could not be started");
		return;
	}
	/* A profile's role chain starts at its source. */
	if (kind == CREDS_ASSUME_ROLE)
		kind = cs.plan.src;
	switch (kind) {
	case CREDS_CONF:
	case CREDS_ENV:
	case CREDS_PROFILE:
		memset(&got, 0, sizeof got);
		got.access_key_id = cs.plan.access_key_id;
		got.secret_access_key = cs.plan.secret_access_key;
		got.session_token = cs.plan.session_token;
		creds_done(&got, NULL);
		return;
	case CREDS_PROCESS:
		rv = creds_process_fetch(cs.base, cs.plan.command,
		    CREDS_PROCESS_TIMEOUT, creds_done);
		break;
	case CREDS_CONTAINER:
		rv = creds_container_fetch(cs.hc, &cs.plan, creds_done);
		break;
	case CREDS_IMDS:
		rv = creds_imds_fetch(cs.hc, &cs.plan, creds_done);
		break;
	case CREDS_WEB_IDENTITY:
		rv = creds_sts_fetch(cs.hc, &cs.plan, creds_done);
		break;
	default:
		break;
	}
	if (rv == -1)
		creds_done(NULL, "the request could not be started");
}

int
creds_start(struct event_base *base, const struct conf *conf, int slot,
    void (*notify)(void))
{
	char	err[512], desc[512];

	if (cs.started)
		creds_stop();
	memset(&cs, 0, sizeof cs);
	cs.base = base;
	cs.conf = conf;
	cs.slot = slot;
	cs.notify = notify;
	if (creds_plan_make(conf, &cs.plan, err, sizeof err) == -1) {
		log_warnx("AWS credentials: %s", err);
		creds_plan_clear(&cs.plan);
		return (-1);
	}
	if (cs.plan.kind == CREDS_NONE) {
		log_warnx("AWS credentials: no source in the chain");
		return (-1);
	}
	if ((conf->aws.region == NULL && cs.plan.region_url == NULL) ||
	    (conf->aws.region != NULL && (cs.region = strdup(
	    conf->aws.region)) == NULL)) {
		log_warnx("AWS credentials: no region, and none from instance "
		    "metadata");
		creds_plan_clear(&cs.plan);
		return (-1);
	}
	if ((cs.timer = evtimer_new(base, creds_timer_cb, NULL)) == NULL ||
	    ((creds_temporary() || cs.region == NULL) &&
	    (cs.hc = httpc_new(base)) == NULL)) {
		log_warnx("AWS credentials: cannot set up the event loop");
		if (cs.timer != NULL)
			event_free(cs.timer);
		free(cs.region);
		creds_plan_clear(&cs.plan);
		return (-1);
	}
	cs.started = 1;
	creds_plan_describe(&cs.plan, desc, sizeof desc);
	snprintf(cs.why, sizeof cs.why, cs.region == NULL ? "no AWS region "
	    "yet: not read from instance metadata yet (%s)" : "not fetched "
	    "yet from %s", cs.region == NULL ? cs.plan.region_url : desc);
	if (creds_temporary() || cs.region == NULL)
		metrics_creds_set(cs.slot, cs.why);
	creds_fetch();
	return (0);
}

void
creds_stop(void)
{
	if (!cs.started)
		return;
	creds_process_abort();
	httpc_free(cs.hc);		/* no callback runs */
	event_free(cs.timer);
	creds_wipe(&cs.akid);
	creds_wipe(&cs.secret);
	creds_wipe(&cs.token);
	free(cs.region);
	creds_plan_clear(&cs.plan);
	memset(&cs, 0, sizeof cs);
}

int
creds_current(const char **akid, const char **secret, const char **token)
{
	int64_t	now = time(NULL);
	char	desc[512];

	if (cs.started && creds_valid(now)) {
		*akid = cs.akid;
		*secret = cs.secret;
		*token = cs.token;
		return (0);
	}
	creds_plan_describe(&cs.plan, desc, sizeof desc);
	if (!cs.started)
		log_limited(&cs.limit, LOG_LEVEL_WARN, "no AWS credentials: "
		    "the credential chain is not running");
	else if (cs.failures == 0 && !cs.have)
		/* The first fetch is under way: a start, nothing wrong yet
		 * (creds_failed() warns if it fails). */
		log_debug("no AWS %s yet: the first fetch (%s) is under way; "
		    "calls wait", cs.region == NULL ? "region" : "credentials",
		    cs.region == NULL ? cs.plan.region_url : desc);
	else if (cs.region == NULL)
		log_limited(&cs.limit, LOG_LEVEL_WARN, "no AWS region from "
		    "instance metadata (%s) yet; calls wait: %s",
		    cs.plan.region_url, cs.why);
	else if (cs.have)
		log_limited(&cs.limit, LOG_LEVEL_WARN, "the AWS credentials "
		    "from %s expired %lld s ago and are not renewed yet; calls "
		    "wait: %s", desc, (long long)(now - cs.expiration),
		    cs.why[0] != '\0' ? cs.why : "renewal under way");
	else
		log_limited(&cs.limit, LOG_LEVEL_WARN, "no AWS credentials "
		    "from %s yet; calls wait: %s", desc, cs.why);
	if (cs.started)
		metrics_creds_set(cs.slot, cs.why[0] != '\0' ? cs.why :
		    "expired, renewal under way");
	return (-1);
}

const char *
creds_region(void)
{
	return (cs.region);
}

const char *
creds_endpoint(const char *configured, const char *service)
{
	if (configured != NULL)
		return (configured);
	if (cs.region == NULL || (size_t)snprintf(cs.endpoint,
	    sizeof cs.endpoint, "https://%s.%s.amazonaws.com", service,
	    cs.region) >= sizeof cs.endpoint)
		return (NULL);
	return (cs.endpoint);
}

void
creds_rejected(const char *type)
{
	if (type == NULL || (strcmp(type, "ExpiredToken") != 0 &&
	    strcmp(type, "ExpiredTokenException") != 0 &&
	    strcmp(type, "RequestExpired") != 0))
		return;
	if (!cs.started || !creds_temporary()) {
		log_limited(&cs.limit, LOG_LEVEL_WARN, "AWS answered %s to "
		    "static credentials: renew them in outbox.conf or the "
		    "environment", type);
		return;
	}
	/* An expired token is no use; RequestExpired is about the clock
	 * and the request, so the current ones stay. */
	if (strcmp(type, "RequestExpired") != 0 && cs.have) {
		cs.have = 0;
		snprintf(cs.why, sizeof cs.why, "AWS answered %s", type);
	}
	log_info("AWS answered %s: renewing the credentials now", type);
	creds_fetch();
}

const char *
creds_state(char *buf, size_t len)
{
	if (cs.started && creds_valid(time(NULL)))
		snprintf(buf, len, "ok");
	else
		snprintf(buf, len, "unavailable: %s", cs.why[0] != '\0' ?
		    cs.why : "not started");
	return (buf);
}
